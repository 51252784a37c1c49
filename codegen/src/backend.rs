//! The backend seam: how a lowered, validated [`Program`] becomes something that runs.
//!
//! A [`Backend`] compiles a program's kernels for one [`Target`] into a [`CompiledProgram`],
//! which owns everything a run needs besides the plan's weights section: the machine code, the
//! arena of the planned size (where it lives is the backend's business) and the workers. The
//! runtime's session drives a run through this interface only:
//!
//! 1. [`CompiledProgram::write_arena`] copies each input to its arena offset;
//! 2. [`CompiledProgram::run`] runs every kernel of every step in schedule order;
//! 3. [`CompiledProgram::read_arena`] hands back the arena as host bytes, in which at least the
//!    byte ranges asked for (the outputs) hold what the run wrote.
//!
//! The CPU backend (`cpu::CpuBackend`, feature `cpu`) keeps its arena in host memory,
//! so writing is a copy and reading returns the arena itself. The CUDA backend
//! (`cuda::CudaBackend`, feature `cuda`) fits the same calls: its arena is one device
//! allocation made in [`Backend::compile`], where it also uploads the weights section it is
//! given; `write_arena` copies host to device, `run` launches the step (a CUDA graph), and
//! `read_arena` copies the asked ranges back into a host mirror it owns and returns that.
//!
//! [`backend_for`] picks the backend for a target, and answers [`BackendError::NotBuilt`]
//! ("memc was built without the cpu backend") when the cargo feature that builds it is off.
//! The CUDA backend, when built, answers [`BackendError::NoDriver`] from `compile` on a
//! machine without the NVIDIA driver.
//!
//! Guarantees: compiling never panics on a validated program; a program a backend cannot run
//! is an error naming the kernel; `write_arena` and `read_arena` check every range against the
//! arena, and `run` checks the weights section's length, so the only promise a caller makes
//! (stated on [`CompiledProgram::run`]) is that the program passed [`Program::validate`].

use crate::program::Program;
use crate::Target;
use std::num::NonZeroUsize;
use std::ops::Range;
use std::time::Duration;
use thiserror::Error;

/// Alignment of the arena's base address, which every backend gives (the kernels' widest
/// vector and the plan's buffer alignment).
pub const ARENA_ALIGN: usize = 64;

/// Why a backend cannot compile or run a program.
#[derive(Debug, Error)]
pub enum BackendError {
    /// The target's backend exists but this build left out its cargo feature.
    #[error("memc was built without the {} backend", .0.name())]
    NotBuilt(Target),
    /// No backend for the target exists yet.
    #[error("memc has no {} backend yet", .0.name())]
    NotImplemented(Target),
    /// The plan names a target memc does not know.
    #[error("the plan was compiled for target `{0}`, which memc does not know")]
    UnknownTarget(String),
    /// The CPU backend cannot compile a kernel.
    #[cfg(feature = "cpu")]
    #[error(transparent)]
    Cpu(#[from] crate::cpu::CpuError),
    /// The program has a kernel the PTX emitter cannot write (the CUDA backend).
    #[error(transparent)]
    Ptx(#[from] crate::ptx::PtxError),
    /// The CUDA backend is built but this machine has no NVIDIA driver to run it on.
    #[error("no NVIDIA driver found: libcuda.so could not be loaded (run the plan on a machine with an NVIDIA GPU and its driver, or compile it with --target cpu)")]
    NoDriver,
    /// A CUDA driver call failed: `what` is what the backend was doing, `message` the
    /// driver's error name and text (and the JIT's log when loading the module failed).
    #[error("CUDA error while {what}: {message}")]
    Cuda { what: String, message: String },
    /// The arena of the planned size cannot be allocated.
    #[error("cannot allocate the arena of {bytes} bytes")]
    Arena { bytes: u64 },
    /// The workers cannot be started.
    #[error("cannot start the thread pool: {0}")]
    ThreadPool(String),
    /// A copy into or out of the arena or the state names bytes outside it.
    #[error("bytes {start}..{end} lie outside the {region} of {size} bytes")]
    OutsideRegion {
        region: &'static str,
        start: u64,
        end: u64,
        size: u64,
    },
    /// The weights section given to a run is shorter than the program reads.
    #[error("the weights section has {actual} bytes, the program reads {expected}")]
    WeightsSize { actual: u64, expected: u64 },
}

/// How to compile a program.
#[derive(Clone, Debug)]
pub struct BackendOptions {
    /// Worker threads (the CPU backend's pool size; a device backend may ignore it).
    pub threads: NonZeroUsize,
}

impl Default for BackendOptions {
    /// The machine's available parallelism (1 when unknown).
    fn default() -> Self {
        BackendOptions {
            threads: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
        }
    }
}

/// A code generator and executor for one target.
pub trait Backend {
    /// The target this backend runs.
    fn target(&self) -> Target;

    /// Compiles every kernel of `program` (which must have passed [`Program::validate`]) and
    /// allocates its arena. `weights` is the plan's weights section, at least
    /// `program.weights_size` bytes: a host backend reads it in place at each run, a device
    /// backend copies it to device memory here.
    fn compile(
        &self,
        program: &Program,
        weights: &[u8],
        options: &BackendOptions,
    ) -> Result<Box<dyn CompiledProgram>, BackendError>;
}

/// A program compiled by a [`Backend`], with its arena: ready to run many times.
pub trait CompiledProgram: Send + Sync {
    /// The target it runs on.
    fn target(&self) -> Target;

    /// The number of kernels, over all steps.
    fn n_kernels(&self) -> usize;

    /// The wall time [`Backend::compile`] spent compiling the kernels (the JIT time).
    fn compile_time(&self) -> Duration;

    /// The worker threads a run uses.
    fn threads(&self) -> usize;

    /// One line on where the program runs, for the CLI to print: the target and its workers,
    /// or a device backend's device and the device memory the program holds.
    fn describe(&self) -> String {
        format!("{}, {} worker threads", self.target(), self.threads())
    }

    /// The arena's size in bytes: the program's `arena_size`.
    fn arena_size(&self) -> u64;

    /// Copies `bytes` into the arena at byte `offset`.
    fn write_arena(&mut self, offset: u64, bytes: &[u8]) -> Result<(), BackendError>;

    /// The persistent state's size in bytes: the program's `state_size`. The state is
    /// allocated with the arena, zero-filled, and kept from one run to the next.
    fn state_size(&self) -> u64;

    /// Copies `bytes` into the state at byte `offset`.
    fn write_state(&mut self, offset: u64, bytes: &[u8]) -> Result<(), BackendError>;

    /// The state as host bytes (`state_size` of them) as the last run left it; at least the
    /// bytes of `ranges` are current (a device backend copies those ranges back first).
    fn read_state(&mut self, ranges: &[Range<u64>]) -> Result<&[u8], BackendError>;

    /// Runs one step of the plan: every kernel of every step, in schedule order, over the
    /// arena and the state, reading `weights` (the plan's weights section, as given to
    /// [`Backend::compile`]).
    ///
    /// # Safety
    /// The program given to [`Backend::compile`] passed [`Program::validate`]: its kernels
    /// reach no byte outside the regions of its sizes, which is what makes running them sound.
    unsafe fn run(&mut self, weights: &[u8]) -> Result<(), BackendError>;

    /// Starts timing each kernel of every run (`on`), or stops it: from a call with `on` the
    /// runs add each kernel's wall time into [`CompiledProgram::kernel_times`], which start at
    /// zero. A backend that cannot time its kernels one by one ignores it (the default).
    fn set_profiling(&mut self, _on: bool) {}

    /// Per kernel, in schedule order, the wall time summed over the runs since profiling was
    /// turned on; empty when it is off or the backend does not time kernels.
    fn kernel_times(&self) -> &[Duration] {
        &[]
    }

    /// Per kernel, in schedule order, its shortest wall time in one run since profiling was
    /// turned on (`Duration::MAX` before the first run); empty where
    /// [`CompiledProgram::kernel_times`] is. On a machine whose speed drifts between phases,
    /// means mix the phases and minima do not.
    fn kernel_min_times(&self) -> &[Duration] {
        &[]
    }

    /// The arena as host bytes (`arena_size` of them) after the last run; at least the bytes of
    /// `ranges` hold what the run wrote (a host backend returns the arena itself; a device
    /// backend copies those ranges back first).
    fn read_arena(&mut self, ranges: &[Range<u64>]) -> Result<&[u8], BackendError>;
}

/// The backend for `target`, or why this build has none.
pub fn backend_for(target: Target) -> Result<Box<dyn Backend>, BackendError> {
    match target {
        #[cfg(feature = "cpu")]
        Target::Cpu => Ok(Box::new(crate::cpu::CpuBackend)),
        #[cfg(not(feature = "cpu"))]
        Target::Cpu => Err(BackendError::NotBuilt(Target::Cpu)),
        #[cfg(feature = "cuda")]
        Target::Cuda => Ok(Box::new(crate::cuda::CudaBackend)),
        #[cfg(not(feature = "cuda"))]
        Target::Cuda => Err(BackendError::NotBuilt(Target::Cuda)),
    }
}

/// Checks that `start..start + len` lies inside a `region` (the arena, the state) of `size`
/// bytes.
#[cfg_attr(not(any(feature = "cpu", feature = "cuda")), allow(dead_code))]
pub(crate) fn check_range(
    region: &'static str,
    start: u64,
    len: u64,
    size: u64,
) -> Result<Range<usize>, BackendError> {
    let end = start.checked_add(len).filter(|&end| end <= size);
    match end {
        // `size` is the length of an arena in memory, so both ends fit a usize.
        Some(end) => Ok(start as usize..end as usize),
        None => Err(BackendError::OutsideRegion {
            region,
            start,
            end: start.saturating_add(len),
            size,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_outside_the_arena_are_errors() {
        assert_eq!(check_range("arena", 0, 8, 8).unwrap(), 0..8);
        assert_eq!(check_range("arena", 8, 0, 8).unwrap(), 8..8);
        assert_eq!(
            check_range("arena", 4, 8, 8).unwrap_err().to_string(),
            "bytes 4..12 lie outside the arena of 8 bytes"
        );
        assert_eq!(
            check_range("state", 4, 8, 8).unwrap_err().to_string(),
            "bytes 4..12 lie outside the state of 8 bytes"
        );
        assert!(check_range("arena", u64::MAX, 2, 8).is_err());
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn without_the_cuda_feature_the_cuda_backend_is_not_built() {
        let err = backend_for(Target::Cuda).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("memc was built without the cuda backend")
        );
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn with_the_cuda_feature_the_cuda_backend_is_built() {
        let backend = backend_for(Target::Cuda).ok().map(|b| b.target());
        assert_eq!(backend, Some(Target::Cuda));
    }

    #[cfg(not(feature = "cpu"))]
    #[test]
    fn without_the_cpu_feature_the_cpu_backend_is_not_built() {
        let err = backend_for(Target::Cpu).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("memc was built without the cpu backend")
        );
    }
}
