//! The errors of the CPU backend: a kernel it cannot compile, or Cranelift failing.
//!
//! Guarantees: every failure of [`super::CpuProgram::compile`] is one of these values, never a
//! panic; an [`CpuError::Unsupported`] names the kernel it is about.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum CpuError {
    /// A kernel uses something this backend does not compute (F16, arithmetic on bools).
    #[error("kernel `{kernel}`: {message}")]
    Unsupported { kernel: String, message: String },
    /// Cranelift rejected the ISA settings or a function (a memc bug for a validated kernel).
    #[error("cranelift: {0}")]
    Cranelift(String),
}
