//! memc-codegen: from planned IR to kernels.
//!
//! - `kernel`: one small loop-level IR over strided buffer views (elementwise maps with
//!   broadcasting, reductions, contractions, gathers, copies). Every supported op lowers to it
//!   once, so both backends get every op by implementing the same few primitives; fused
//!   elementwise chains become one kernel.
//! - `cpu`: a Cranelift JIT backend (ISA from `cranelift_native`, `opt_level=speed`, 128-bit SIMD
//!   with unrolled register tiles; contractions may call a GEMM crate where a side-by-side
//!   benchmark says it is faster).
//! - `ptx`: PTX text (`.version 7.8`, `.target sm_80`/`sm_90`), checked with `ptxas` when present.
//!
//! Invariants it will keep: it reads IR that passed the verifier and the memory planner's
//! validator, and either emits a kernel for every op or returns an error naming the op; it never
//! panics on verified input. It depends on memc-ir and memc-passes only.

pub mod cpu;
pub mod kernel;
pub mod lower;
pub mod nbits;
pub mod program;
pub mod text;

pub use kernel::{Kernel, KernelBody, KernelError, Scalar};
pub use program::Program;

/// The code generation targets memc plans for, as named on the command line (`--target`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The Cranelift CPU backend.
    Cpu,
    /// PTX for NVIDIA GPUs.
    Ptx,
}

impl Target {
    pub const ALL: &'static [Target] = &[Target::Cpu, Target::Ptx];

    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Ptx => "ptx",
        }
    }

    /// Whether this target's backend exists yet. Both arrive with later issues; the CLI uses
    /// this to answer plainly instead of pretending.
    pub fn is_built(self) -> bool {
        matches!(self, Target::Cpu)
    }
}
