//! The CPU backend behind the [`Backend`] seam: a [`CpuProgram`] with its host arena and its
//! worker pool ([`CpuRunner`]).
//!
//! Guarantees: a run copies nothing but the inputs it is given; the arena is allocated once, at
//! compile time, and never grows; every range the session copies in or out is checked against
//! it, and the weights section against the program's size, before any kernel runs.

use super::arena::HostArena;
use super::pool::WorkerPool;
use super::program::CpuProgram;
use super::regions::RegionPtrs;
use crate::backend::{check_range, Backend, BackendError, BackendOptions, CompiledProgram};
use crate::kernel::Kernel;
use crate::program::Program;
use crate::Target;
use std::ops::Range;
use std::time::{Duration, Instant};

/// The Cranelift CPU backend (see the module doc of [`crate::cpu`]).
#[derive(Copy, Clone, Debug, Default)]
pub struct CpuBackend;

impl Backend for CpuBackend {
    fn target(&self) -> Target {
        Target::Cpu
    }

    fn compile(
        &self,
        program: &Program,
        _weights: &[u8],
        options: &BackendOptions,
    ) -> Result<Box<dyn CompiledProgram>, BackendError> {
        Ok(Box::new(CpuRunner::new(program, options)?))
    }
}

/// A program compiled for this machine, with its arena and its workers.
pub struct CpuRunner {
    program: CpuProgram,
    arena: HostArena,
    /// The persistent state: a second anonymous mapping, apart from the arena.
    state: HostArena,
    pool: WorkerPool,
    weights_size: u64,
    compile_time: Duration,
    /// Per kernel, its wall time summed over the runs since profiling was turned on; empty
    /// while profiling is off (allocated when it is turned on, so a run allocates nothing).
    kernel_times: Vec<Duration>,
    /// Per kernel, its shortest run since profiling was turned on.
    kernel_min_times: Vec<Duration>,
}

impl std::fmt::Debug for CpuRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuRunner")
            .field("kernels", &self.program.n_kernels())
            .field("arena_size", &self.arena.len())
            .field("threads", &self.pool.current_num_threads())
            .finish_non_exhaustive()
    }
}

impl CpuRunner {
    /// Compiles `program`'s kernels (the program must have passed [`Program::validate`]),
    /// allocates its zeroed arena and starts `options.threads` workers.
    pub fn new(program: &Program, options: &BackendOptions) -> Result<CpuRunner, BackendError> {
        let started = Instant::now();
        let kernels: Vec<&Kernel> = program.kernels().collect();
        let compiled = CpuProgram::compile(&kernels)?;
        let compile_time = started.elapsed();
        let arena = HostArena::new(program.arena_size)?;
        let state = HostArena::new(program.state_size)?;
        let pool = WorkerPool::new(options.threads.get())
            .map_err(|e| BackendError::ThreadPool(e.to_string()))?;
        Ok(CpuRunner {
            program: compiled,
            arena,
            state,
            pool,
            weights_size: program.weights_size,
            compile_time,
            kernel_times: Vec::new(),
            kernel_min_times: Vec::new(),
        })
    }

    /// The compiled kernels.
    pub fn program(&self) -> &CpuProgram {
        &self.program
    }
}

impl CompiledProgram for CpuRunner {
    fn target(&self) -> Target {
        Target::Cpu
    }

    fn n_kernels(&self) -> usize {
        self.program.n_kernels()
    }

    fn compile_time(&self) -> Duration {
        self.compile_time
    }

    fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    fn arena_size(&self) -> u64 {
        self.arena.len() as u64
    }

    fn write_arena(&mut self, offset: u64, bytes: &[u8]) -> Result<(), BackendError> {
        let range = check_range("arena", offset, bytes.len() as u64, self.arena_size())?;
        self.arena.bytes_mut()[range].copy_from_slice(bytes);
        Ok(())
    }

    fn state_size(&self) -> u64 {
        self.state.len() as u64
    }

    fn write_state(&mut self, offset: u64, bytes: &[u8]) -> Result<(), BackendError> {
        let range = check_range("state", offset, bytes.len() as u64, self.state_size())?;
        self.state.bytes_mut()[range].copy_from_slice(bytes);
        Ok(())
    }

    fn read_state(&mut self, ranges: &[Range<u64>]) -> Result<&[u8], BackendError> {
        let size = self.state_size();
        for range in ranges {
            check_range(
                "state",
                range.start,
                range.end.saturating_sub(range.start),
                size,
            )?;
        }
        Ok(self.state.bytes())
    }

    unsafe fn run(&mut self, weights: &[u8]) -> Result<(), BackendError> {
        if (weights.len() as u64) < self.weights_size {
            return Err(BackendError::WeightsSize {
                actual: weights.len() as u64,
                expected: self.weights_size,
            });
        }
        let regions = RegionPtrs {
            arena: self.arena.ptr(),
            weights: weights.as_ptr(),
            state: self.state.ptr(),
        };
        let profiling = !self.kernel_times.is_empty();
        for index in 0..self.program.n_kernels() {
            let started = profiling.then(Instant::now);
            // SAFETY: the arena is `arena_size` bytes, the state `state_size` and the weights
            // at least `weights_size` (checked above), the sizes every kernel was validated
            // against (the caller's promise); `&mut self` keeps anything else from touching
            // the arena and the state meanwhile.
            unsafe { self.program.run_kernel_in(index, regions, &self.pool) };
            if let Some(started) = started {
                let time = started.elapsed();
                self.kernel_times[index] += time;
                self.kernel_min_times[index] = self.kernel_min_times[index].min(time);
            }
        }
        Ok(())
    }

    fn set_profiling(&mut self, on: bool) {
        let n = if on { self.program.n_kernels() } else { 0 };
        self.kernel_times = vec![Duration::ZERO; n];
        self.kernel_min_times = vec![Duration::MAX; n];
    }

    fn kernel_times(&self) -> &[Duration] {
        &self.kernel_times
    }

    fn kernel_min_times(&self) -> &[Duration] {
        &self.kernel_min_times
    }

    fn read_arena(&mut self, ranges: &[Range<u64>]) -> Result<&[u8], BackendError> {
        let size = self.arena_size();
        for range in ranges {
            check_range(
                "arena",
                range.start,
                range.end.saturating_sub(range.start),
                size,
            )?;
        }
        Ok(self.arena.bytes())
    }
}
