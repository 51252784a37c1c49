//! PTX for NVIDIA GPUs: the kernel IR of a program as one PTX module, every kernel one `.entry`
//! with its launch shape.
//!
//! The module is plain text (`.version 8.0`, `.target sm_80`, `.address_size 64`; the driver
//! JITs sm_80 PTX for newer GPUs), produced without any GPU or CUDA installation, so plans for
//! the `cuda` target are written (and their PTX assembled by `ptxas` in the tests) anywhere.
//!
//! # Calling convention
//!
//! Every entry takes the same three parameters, in this order: `.param .u64 arena`,
//! `.param .u64 weights`, `.param .u64 state`, the device addresses of the three regions of
//! [`crate::kernel::Region`]. A kernel addresses memory only through them, at the byte offsets
//! the kernel IR gives, so one launch list serves every run: the CUDA backend captures it once
//! as a graph. Each entry is launched once per run with its [`Launch`] (grid, block and dynamic
//! shared memory are fixed at emit time; shapes are static).
//!
//! # Forms
//!
//! - Loop kernels (`loops.rs`): rows of the kernel IR (its parallelism contract) spread over
//!   threads; Map/Once stages elementwise, Reduce stages as warp or block reductions.
//! - Contractions (`gemm.rs`): a tiled shared-memory SGEMM (DGEMM for f64), batched and strided
//!   as the kernel IR says.
//! - Low-bit products (`nbits.rs`): a warp-per-column GEMV for few rows, dequantized tiles in
//!   shared memory feeding a tiled product for many rows; reads the `nbits v2` layout.
//!
//! Guarantees: emitting is deterministic (the same program gives the same text, byte for
//! byte) and never panics on a validated program; a kernel it cannot emit is an error naming
//! the kernel. The emitted code reaches only the addresses the validated kernel IR reaches
//! (guards, clamped indirect indices and tails are emitted as the kernel contract states), so a
//! validated program is as safe on the GPU as on the CPU.

mod gemm;
mod loops;
mod nbits;
pub mod target;

use crate::kernel::{Kernel, KernelBody, RegionSizes};
use crate::program::Program;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The first lines of every module memc writes.
pub const HEADER: &str = ".version 8.0\n.target sm_80\n.address_size 64\n";

/// The parameter list every entry declares (see the module doc).
pub const PARAMS: &str = "(\n\t.param .u64 arena,\n\t.param .u64 weights,\n\t.param .u64 state\n)";

/// How an entry is launched: grid and block extents (x, y, z) and dynamic shared memory bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

/// One kernel as PTX: the `.entry` text (no module header) and its launch.
#[derive(Clone, Debug, PartialEq)]
pub struct PtxEntry {
    /// The entry's symbol.
    pub name: String,
    /// `.visible .entry NAME(PARAMS) { ... }`, with any `.shared` declarations it needs inside.
    pub text: String,
    pub launch: Launch,
}

/// Which kernel of a program an entry runs, and how it is launched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelLaunch {
    /// Position of the step in [`Program::steps`] and of the kernel in its step.
    pub step: usize,
    pub kernel: usize,
    /// The entry's symbol in the module.
    pub entry: String,
    pub launch: Launch,
}

/// A program's PTX: one module, and the launches of one run in schedule order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtxModule {
    pub text: String,
    pub launches: Vec<KernelLaunch>,
}

/// Why a kernel has no PTX form.
#[derive(Debug, Error, PartialEq)]
pub enum PtxError {
    #[error("kernel `{kernel}`: the PTX backend cannot emit it: {message}")]
    Unsupported { kernel: String, message: String },
}

/// The PTX immediate of an f32 (`0f` and its bits), as every emitter writes float constants.
pub(crate) fn f32_imm(x: f32) -> String {
    format!("0f{:08X}", x.to_bits())
}

/// The PTX immediate of an f64.
pub(crate) fn f64_imm(x: f64) -> String {
    format!("0d{:016X}", x.to_bits())
}

/// An entry that does nothing, launched as one thread: the form of a kernel with no element to
/// write (an empty product), which keeps the launch list one entry per kernel.
fn empty_entry(name: &str, text: String) -> PtxEntry {
    PtxEntry {
        name: name.to_string(),
        text,
        launch: Launch {
            grid: [1, 1, 1],
            block: [1, 1, 1],
            shared_bytes: 0,
        },
    }
}

/// The symbol of kernel `kernel` of step `step`.
pub fn entry_name(step: usize, kernel: usize) -> String {
    format!("memc_s{step}_k{kernel}")
}

/// The PTX entry of one validated kernel, called `name`. `sizes` are the program's region
/// sizes (the kernel was validated against them).
pub fn emit_kernel(kernel: &Kernel, name: &str, sizes: RegionSizes) -> Result<PtxEntry, PtxError> {
    match &kernel.body {
        KernelBody::Loop(k) => loops::emit(k, &kernel.name, name, sizes),
        KernelBody::Contract(c) => gemm::emit(c, &kernel.name, name),
        KernelBody::NBits(q) => nbits::emit(q, &kernel.name, name),
    }
}

/// The PTX module of a validated program: every kernel of every step, in schedule order.
pub fn emit_program(program: &Program) -> Result<PtxModule, PtxError> {
    let sizes = program.region_sizes();
    let mut text = String::from(HEADER);
    let mut launches = Vec::new();
    for (s, step) in program.steps.iter().enumerate() {
        for (k, kernel) in step.kernels.iter().enumerate() {
            let name = entry_name(s, k);
            let entry = emit_kernel(kernel, &name, sizes)?;
            text.push('\n');
            text.push_str(&entry.text);
            launches.push(KernelLaunch {
                step: s,
                kernel: k,
                entry: entry.name,
                launch: entry.launch,
            });
        }
    }
    Ok(PtxModule { text, launches })
}
