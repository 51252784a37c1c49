//! The Cranelift CPU backend. (Being written: the API below is fixed; the bodies are not.)

use crate::kernel::Kernel;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CpuError {
    #[error("kernel `{kernel}`: {message}")]
    Unsupported { kernel: String, message: String },
    #[error("cranelift: {0}")]
    Cranelift(String),
}

/// Every kernel of a program, compiled for this machine.
pub struct CpuProgram {
    _private: (),
}

impl CpuProgram {
    /// JIT-compiles `kernels` (which must have passed [`Kernel::validate`]).
    pub fn compile(kernels: &[&Kernel]) -> Result<CpuProgram, CpuError> {
        let _ = kernels;
        unimplemented!("being written")
    }

    pub fn n_kernels(&self) -> usize {
        unimplemented!("being written")
    }

    /// Runs kernel `index` over its whole index space, splitting rows over `pool`.
    ///
    /// # Safety
    /// `arena` and `weights` must point to regions at least as large as the sizes the kernel
    /// was validated against, `arena` writable and not accessed by anything else meanwhile.
    pub unsafe fn run_kernel(
        &self,
        index: usize,
        arena: *mut u8,
        weights: *const u8,
        pool: &rayon::ThreadPool,
    ) {
        let _ = (index, arena, weights, pool);
        unimplemented!("being written")
    }
}
