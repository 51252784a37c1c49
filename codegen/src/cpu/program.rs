//! One program's kernels compiled for this machine ([`CpuProgram`]) and run kernel by kernel.
//!
//! [`CpuProgram::compile`] builds one `JITModule` (ISA from `cranelift_native`, so the host's
//! SSE4.1/AVX/FMA are used; `opt_level=speed`) holding one function per loop kernel
//! (`loops.rs`); contractions run memc's GEMM (`contract.rs`, `gemm.rs`) and low-bit products the
//! hand-written code of `nbits.rs`. [`CpuProgram::run_kernel`] runs one kernel, splitting its
//! rows over the worker pool (`pool.rs`). A bias written into a contraction's result just
//! before it, and a residual add and clamp of the result just after it, run inside the
//! contraction (`fuse.rs`).
//!
//! Guarantees: compiling a validated kernel never panics; running a validated kernel touches
//! only the bytes its validation bounded, and gives the same result whether its rows run on
//! one thread or many.

use super::error::CpuError;
use super::fuse::{self, Fusion, Role};
use super::pool::WorkerPool;
use super::regions::RegionPtrs;
use super::softmax::{self, Softmax};
use super::transpose::{self, Transpose};
use super::window::{self, Window};
use super::{contract, func, helpers, loops, nbits};
use crate::kernel::{Contract, Kernel, KernelBody, LoopKernel, NBitsMatMul, Scalar};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Module};
use std::time::{Duration, Instant};

/// Below this much work (`rows * work_per_row` elements) a kernel runs on the calling thread.
const PARALLEL_WORK: u64 = 32 * 1024;

/// The signature of a compiled loop kernel.
type LoopFn = unsafe extern "C" fn(
    arena: *mut u8,
    weights: *const u8,
    state: *mut u8,
    row_begin: u64,
    row_end: u64,
);

enum Compiled {
    Loop {
        func: LoopFn,
        rows: u64,
        work_per_row: u64,
    },
    /// With the bias before it and the epilogue after it, whose kernels then run as
    /// [`Compiled::Fused`] (`fuse.rs`).
    Contract(Box<Contract>, Box<Fusion>),
    NBits(Box<NBitsMatMul>),
    /// A kernel the one before it runs (`fuse.rs`): nothing to do.
    Fused,
    /// A window maximum or minimum (a max pool) in native code (`window.rs`).
    Window(Box<Window>),
    /// A softmax over rows in native code (`softmax.rs`).
    Softmax(Box<Softmax>),
    /// A transpose in native code (`transpose.rs`).
    Transpose(Box<Transpose>),
}

/// A loop kernel as native code where the CPU allows and the kernel has a form one of the
/// native kernels takes: a window maximum (a max pool), a softmax, a transpose.
fn native(lk: &LoopKernel) -> Option<Compiled> {
    if let Some(w) = window::available().then(|| window::recognize(lk)).flatten() {
        return Some(Compiled::Window(Box::new(w)));
    }
    if let Some(s) = softmax::available()
        .then(|| softmax::recognize(lk))
        .flatten()
    {
        return Some(Compiled::Softmax(Box::new(s)));
    }
    transpose::available()
        .then(|| transpose::recognize(lk))
        .flatten()
        .map(|t| Compiled::Transpose(Box::new(t)))
}

/// The JIT module that owns the machine code; kept only to free it on drop.
struct CodeOwner(Option<JITModule>);

// SAFETY: after `finalize_definitions` the module is never used again except to free its
// memory in `Drop`, which takes `&mut self`; the machine code itself is immutable.
unsafe impl Send for CodeOwner {}
unsafe impl Sync for CodeOwner {}

impl Drop for CodeOwner {
    fn drop(&mut self) {
        if let Some(module) = self.0.take() {
            // SAFETY: the program owning this module is being dropped, so none of its functions
            // runs now or later.
            unsafe { module.free_memory() };
        }
    }
}

/// Every kernel of a program, compiled for this machine.
pub struct CpuProgram {
    kernels: Vec<Compiled>,
    names: Vec<String>,
    compile_times: Vec<Duration>,
    vectorized: Vec<usize>,
    compile_time: Duration,
    _code: CodeOwner,
}

/// The host ISA as `cranelift_native` detects it, with `opt_level=speed`.
fn host_isa() -> Result<OwnedTargetIsa, CpuError> {
    let err = |e: settings::SetError| CpuError::Cranelift(e.to_string());
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(err)?;
    flags.set("use_colocated_libcalls", "false").map_err(err)?;
    flags.set("is_pic", "false").map_err(err)?;
    flags
        .set(
            "enable_verifier",
            if cfg!(debug_assertions) {
                "true"
            } else {
                "false"
            },
        )
        .map_err(err)?;
    let isa_builder =
        cranelift_native::builder().map_err(|e| CpuError::Cranelift(e.to_string()))?;
    isa_builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| CpuError::Cranelift(e.to_string()))
}

/// The boolean ISA flags of the host as Cranelift sees them (`("has_fma", true)`, ...), to check
/// that SIMD features the host has are used.
pub fn host_isa_flags() -> Result<Vec<(&'static str, bool)>, CpuError> {
    let isa = host_isa()?;
    Ok(isa
        .isa_flags()
        .iter()
        .filter_map(|v| v.as_bool().map(|b| (v.name, b)))
        .collect())
}

impl CpuProgram {
    /// JIT-compiles `kernels` (which must have passed [`Kernel::validate`]).
    pub fn compile(kernels: &[&Kernel]) -> Result<CpuProgram, CpuError> {
        let start = Instant::now();
        let isa = host_isa()?;
        let mut jit_builder = JITBuilder::with_isa(isa, default_libcall_names());
        for (name, address) in helpers::symbols() {
            jit_builder.symbol(name, address);
        }
        let mut module = JITModule::new(jit_builder);
        let mut ctx = module.make_context();
        let mut fctx = FunctionBuilderContext::new();
        let mut helper_ids = func::HelperIds::new();
        let mut pending = Vec::with_capacity(kernels.len());
        let mut compile_times = Vec::with_capacity(kernels.len());
        let mut vectorized = Vec::with_capacity(kernels.len());
        let roles = fuse::plan(kernels);
        let weights_stream = fuse::weights_stream(kernels);
        for ((index, kernel), role) in kernels.iter().enumerate().zip(roles) {
            let kernel_start = Instant::now();
            let fusion = match role {
                Role::Fused => {
                    pending.push(Err(Compiled::Fused));
                    vectorized.push(0);
                    compile_times.push(kernel_start.elapsed());
                    continue;
                }
                Role::Contract(fusion) => fusion,
                Role::Own => Fusion::default(),
            };
            let fusion = Fusion {
                weights_stream,
                ..fusion
            };
            match &kernel.body {
                KernelBody::Loop(lk) => {
                    if let Some(compiled) = native(lk) {
                        pending.push(Err(compiled));
                        vectorized.push(0);
                    } else {
                        let name = format!("memc_kernel_{index}");
                        let (id, n_vectorized) = loops::compile_loop(
                            &mut module,
                            &mut helper_ids,
                            &mut ctx,
                            &mut fctx,
                            kernel,
                            lk,
                            &name,
                        )?;
                        let schedule = loops::row_schedule(lk);
                        // An empty outer space runs nothing, however large its other extents
                        // (a plan could otherwise spin through 2^40 empty rows).
                        let rows = if lk.outer.contains(&0) {
                            0
                        } else {
                            schedule.rows
                        };
                        pending.push(Ok((id, rows, schedule.work_per_row)));
                        vectorized.push(n_vectorized);
                    }
                }
                KernelBody::Contract(c) => {
                    if !matches!(c.elem, Scalar::F32 | Scalar::F64) {
                        return Err(CpuError::Unsupported {
                            kernel: kernel.name.clone(),
                            message: format!("contraction in {}", c.elem.name()),
                        });
                    }
                    let mut c = c.clone();
                    if fusion.bias.is_some() {
                        // The bias comes in the epilogue instead of the result.
                        c.accumulate = false;
                    }
                    pending.push(Err(Compiled::Contract(Box::new(c), Box::new(fusion))));
                    vectorized.push(0);
                }
                KernelBody::NBits(q) => {
                    pending.push(Err(Compiled::NBits(Box::new(q.clone()))));
                    vectorized.push(0);
                }
            }
            compile_times.push(kernel_start.elapsed());
        }
        module
            .finalize_definitions()
            .map_err(|e| CpuError::Cranelift(e.to_string()))?;
        let compiled = pending
            .into_iter()
            .map(|p| match p {
                Ok((id, rows, work_per_row)) => {
                    let address = module.get_finalized_function(id);
                    // SAFETY: `id` was defined by `compile_loop` with exactly the `LoopFn`
                    // signature, and the module is finalized.
                    let func = unsafe { std::mem::transmute::<*const u8, LoopFn>(address) };
                    Compiled::Loop {
                        func,
                        rows,
                        work_per_row,
                    }
                }
                Err(native) => native,
            })
            .collect();
        Ok(CpuProgram {
            kernels: compiled,
            names: kernels.iter().map(|k| k.name.clone()).collect(),
            compile_times,
            vectorized,
            compile_time: start.elapsed(),
            _code: CodeOwner(Some(module)),
        })
    }

    pub fn n_kernels(&self) -> usize {
        self.kernels.len()
    }

    /// The name of kernel `index`, as given to [`CpuProgram::compile`].
    pub fn kernel_name(&self, index: usize) -> Option<&str> {
        self.names.get(index).map(String::as_str)
    }

    /// The time spent emitting and compiling kernel `index` (0 for contractions, which compile
    /// nothing).
    pub fn kernel_compile_time(&self, index: usize) -> Option<Duration> {
        self.compile_times.get(index).copied()
    }

    /// How many SIMD (f32x4) loops kernel `index` has: one per vectorized stage, and one per
    /// elementwise row body (a kernel whose long last axis is cut into blocks has two bodies,
    /// for full blocks and the shorter last one).
    pub fn vectorized_loops(&self, index: usize) -> Option<usize> {
        self.vectorized.get(index).copied()
    }

    /// The wall time of the whole [`CpuProgram::compile`] call, linking included.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Whether kernel `index` runs inside the kernel before it (an epilogue of a
    /// contraction's result, `fuse.rs`) and so does nothing itself.
    pub fn is_fused(&self, index: usize) -> bool {
        matches!(self.kernels.get(index), Some(Compiled::Fused))
    }

    /// Whether kernel `index` runs as a native window maximum or minimum (a max pool's
    /// loop, `window.rs`) rather than as compiled loop code.
    pub fn is_window(&self, index: usize) -> bool {
        matches!(self.kernels.get(index), Some(Compiled::Window(_)))
    }

    /// Whether kernel `index` is a window kernel whose taps are a grid of kernel rows and
    /// columns (run separably on AVX2: `cpu/window.rs`'s `Grid`).
    pub fn is_grid_window(&self, index: usize) -> bool {
        matches!(self.kernels.get(index), Some(Compiled::Window(w)) if w.is_grid())
    }

    /// Whether kernel `index` runs as a native softmax (`softmax.rs`) rather than as
    /// compiled loop code.
    pub fn is_softmax(&self, index: usize) -> bool {
        matches!(self.kernels.get(index), Some(Compiled::Softmax(_)))
    }

    /// Whether kernel `index` runs as a native transpose (`transpose.rs`) rather than as
    /// compiled loop code.
    pub fn is_transpose(&self, index: usize) -> bool {
        matches!(self.kernels.get(index), Some(Compiled::Transpose(_)))
    }

    /// Runs kernel `index` of a program without persistent state over its whole index space,
    /// splitting rows over `pool`. Kernels run in order: one that [`CpuProgram::is_fused`]
    /// into the one before it does nothing.
    ///
    /// # Safety
    /// `arena` and `weights` must point to regions at least as large as the sizes the kernel
    /// was validated against, `arena` writable and not accessed by anything else meanwhile.
    pub unsafe fn run_kernel(
        &self,
        index: usize,
        arena: *mut u8,
        weights: *const u8,
        pool: &WorkerPool,
    ) {
        let regions = RegionPtrs {
            arena,
            weights,
            state: std::ptr::null_mut(),
        };
        // SAFETY: the caller's contract, and a kernel validated with no state reaches none.
        unsafe { self.run_kernel_in(index, regions, pool) }
    }

    /// Runs kernel `index` over its whole index space, splitting rows over `pool`.
    ///
    /// # Safety
    /// Every pointer of `regions` must point to a region at least as large as the size the
    /// kernel was validated against, the arena and the state writable and not accessed by
    /// anything else meanwhile.
    pub unsafe fn run_kernel_in(&self, index: usize, regions: RegionPtrs, pool: &WorkerPool) {
        let Some(kernel) = self.kernels.get(index) else {
            return;
        };
        match kernel {
            Compiled::Contract(c, fusion) => contract::run_contract(c, fusion, regions, pool),
            Compiled::NBits(q) => nbits::run_nbits(q, regions, pool),
            Compiled::Fused => {}
            // SAFETY: the caller's contract; `window::available` held when it compiled.
            Compiled::Window(w) => unsafe { window::run_window(w, regions, pool) },
            // SAFETY: the caller's contract; `softmax::available` held when it compiled.
            Compiled::Softmax(s) => unsafe { softmax::run_softmax(s, regions, pool) },
            // SAFETY: the caller's contract; `transpose::available` held when it compiled.
            Compiled::Transpose(t) => unsafe { transpose::run_transpose(t, regions, pool) },
            Compiled::Loop {
                func,
                rows,
                work_per_row,
            } => {
                let (func, rows) = (*func, *rows);
                let threads = pool.current_num_threads() as u64;
                let RegionPtrs {
                    arena,
                    weights,
                    state,
                } = regions;
                if rows <= 1 || threads <= 1 || rows.saturating_mul(*work_per_row) < PARALLEL_WORK {
                    func(arena, weights, state, 0, rows);
                    return;
                }
                // A few chunks per thread balance uneven rows without much scheduling.
                let n_chunks = rows.min(threads * 4);
                let chunk = rows.div_ceil(n_chunks);
                pool.for_each(threads as usize, n_chunks as usize, &|c| {
                    let begin = c as u64 * chunk;
                    let end = (begin + chunk).min(rows);
                    if begin < end {
                        let RegionPtrs {
                            arena,
                            weights,
                            state,
                        } = regions.get();
                        // SAFETY: the caller's contract on the regions holds for every chunk,
                        // and rows never write the same element.
                        unsafe { func(arena, weights, state, begin, end) };
                    }
                });
            }
        }
    }
}
