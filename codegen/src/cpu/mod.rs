//! The CPU backend: kernels JIT-compiled by Cranelift for the host, run on memc's worker pool
//! (`pool.rs`).
//!
//! Everything here except the target description needs the `cpu` cargo feature (on by default),
//! which brings in cranelift; without it lowering, the kernel IR and the
//! program still build, and [`crate::backend::backend_for`] answers that the CPU backend is
//! not built.
//!
//! - `CpuProgram` (`program.rs`): compiles a list of validated kernels into one `JITModule`
//!   and runs them one at a time over raw region pointers. Loop kernels become one function
//!   each: `loops.rs` drives the rows and stages, `emitter.rs` emits a stage's scalar
//!   instructions at one point (with `scalar.rs` for the operations and `func.rs` for the
//!   function being built), `simd.rs` emits f32x4 loops for contiguous innermost axes (exp,
//!   tanh and erf inline as polynomials, `vmath.rs`), and transcendentals elsewhere call the
//!   Rust functions of `helpers.rs`. Contractions run memc's GEMM (`contract.rs` over `memc-gemm`,
//!   its packed panels in the planned scratch `Contract::pack` names);
//!   low-bit products run hand-written Rust with std::arch AVX-512/AVX2 chosen at run time
//!   (`nbits.rs`); a loop kernel that is a window maximum or minimum (a max pool's taps,
//!   guarded and strided along the row) runs as AVX-512 code where the CPU has it
//!   (`window.rs`), and so does the softmax loop kernel (`softmax.rs`).
//! - `CpuBackend` (`backend.rs`): the [`crate::backend::Backend`] the runtime uses: a
//!   `CpuProgram` with its arena (`arena.rs`, an anonymous zero-filled mapping) and its
//!   `WorkerPool` (`pool.rs`: threads started once, dispatches that allocate nothing).
//!
//! Files import one way: `backend -> program -> {loops, contract, nbits, window, softmax} ->
//! pool` (`softmax -> vmath` for its `exp`),
//! `loops -> {simd, emitter}`, `simd -> emitter -> scalar -> func -> helpers`; the errors
//! (`error.rs`) are imported by all and import nothing of the backend.
//!
//! Guarantees: compiling a validated kernel never panics; a kernel the backend cannot run (F16
//! anywhere, arithmetic on bools) is an `CpuError::Unsupported` naming it. Running a
//! validated kernel touches only the bytes its validation bounded, and gives the same result
//! whether its rows run on one thread or many.

#[cfg(feature = "cpu")]
mod arena;
#[cfg(feature = "cpu")]
mod backend;
#[cfg(feature = "cpu")]
mod contract;
#[cfg(feature = "cpu")]
mod emitter;
#[cfg(feature = "cpu")]
mod error;
#[cfg(feature = "cpu")]
mod func;
#[cfg(feature = "cpu")]
mod fuse;
#[cfg(feature = "cpu")]
mod helpers;
#[cfg(feature = "cpu")]
mod loops;
#[cfg(feature = "cpu")]
mod nbits;
#[cfg(feature = "cpu")]
mod pool;
#[cfg(feature = "cpu")]
mod program;
mod regions;
#[cfg(feature = "cpu")]
mod scalar;
#[cfg(feature = "cpu")]
mod simd;
#[cfg(feature = "cpu")]
mod softmax;
#[cfg(feature = "cpu")]
mod transpose;
#[cfg(feature = "cpu")]
mod vmath;
#[cfg(feature = "cpu")]
mod window;

/// The CPU's target description and tuning constants: always built, since lowering and
/// scratch sizing read them even without the JIT.
pub mod target;

#[cfg(feature = "cpu")]
pub use backend::{CpuBackend, CpuRunner};
#[cfg(feature = "cpu")]
pub use error::CpuError;
#[cfg(feature = "cpu")]
pub use pool::WorkerPool;
#[cfg(feature = "cpu")]
pub use program::{host_isa_flags, CpuProgram};
pub use regions::RegionPtrs;
