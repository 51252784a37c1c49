//! memc-codegen: from planned IR to kernels, and the backends that run them.
//!
//! - `kernel`: one small loop-level IR over strided buffer views (elementwise maps with
//!   broadcasting, reductions, contractions, gathers, copies, low-bit products). Every
//!   supported op lowers to it once, so every backend gets every op by implementing the same
//!   few primitives; fused elementwise chains become one kernel.
//! - `nbits`: the packed layout of low-bit weights, its decoders and the packer the plan writer
//!   streams weights through.
//! - `prepack`: constant `A` operands of products packed for the CPU's GEMM as the plan writer
//!   streams weights.
//! - `program`: a lowered program (kernels per scheduled step, I/O tensors, weight slots).
//! - `lower`: planned IR to a program.
//! - `backend`: the seam between a program and a machine: the [`backend::Backend`] and
//!   [`backend::CompiledProgram`] traits the runtime runs a plan through, and
//!   [`backend::backend_for`], which picks one by [`Target`].
//! - `cpu`: the Cranelift JIT backend (ISA from `cranelift_native`, `opt_level=speed`, 128-bit
//!   SIMD; contractions run memc's GEMM, `memc-gemm`, with panels in planned scratch). Its
//!   compiler and runner need the `cpu` cargo feature (on by default, like naga's backends
//!   behind theirs), which brings in cranelift; `cargo build -p memc-codegen --no-default-features` builds everything
//!   else.
//!
//! - `ptx`: the kernel IR as PTX for NVIDIA GPUs (text, built without any feature), and the
//!   `cuda` target's facts; the CUDA backend that loads and runs it needs the `cuda` feature.
//! - `cuda`: the CUDA backend (feature `cuda`, cudarc's driver API opened at run time): the PTX
//!   module JIT-loaded on device 0, one device arena, one CUDA graph per run.
//!
//! Files import one way: `lower -> program -> {kernel, prepack} -> nbits`; `backend -> program`;
//! `cpu -> {backend, kernel, nbits}`; `cuda -> {backend, ptx, program}`.
//!
//! Invariants: it reads IR that passed the verifier and the memory planner's validator, and
//! either emits a kernel for every op or returns an error naming the op; it never panics on
//! verified input. It depends on memc-ir and memc-passes only.

pub mod backend;
pub mod cpu;
pub mod cuda;
pub mod kernel;
pub mod lower;
#[cfg(feature = "mlir")]
pub mod mlir;
pub mod nbits;
pub mod prepack;
pub mod program;
pub mod ptx;
pub mod reference;
pub mod text;

pub use kernel::{Kernel, KernelBody, KernelError, Scalar};
pub use program::Program;

/// The code generation targets memc knows, by the name a plan file records (`"cpu"`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// The Cranelift CPU backend (cargo feature `cpu`).
    Cpu,
    /// NVIDIA GPUs: PTX kernels (`ptx`), run through the CUDA driver (cargo feature `cuda`).
    Cuda,
}

impl Target {
    pub const ALL: &'static [Target] = &[Target::Cpu, Target::Cuda];

    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Cuda => "cuda",
        }
    }

    /// What the egraph, op planning and lowering may assume about this target: its
    /// [`TargetInfo`](memc_ir::target::TargetInfo) (data only, built without any backend
    /// feature).
    pub fn info(self) -> &'static memc_ir::target::TargetInfo {
        match self {
            Target::Cpu => cpu::target::target(),
            Target::Cuda => ptx::target::target(),
        }
    }

    /// The target named `name` (as [`Target::name`] spells it), if memc knows it.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.iter().copied().find(|t| t.name() == name)
    }
}

impl Default for Target {
    /// The CPU, which `memc compile` targets unless told otherwise.
    fn default() -> Self {
        Target::Cpu
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
