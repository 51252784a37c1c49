//! memc-runtime: the plan file and the executor that runs it.
//!
//! - [`plan`]: the plan file format, byte by byte: a versioned header with checksums, the
//!   metadata (the lowered [`memc_codegen::Program`] as JSON: kernels, I/O signature, weight
//!   slots, arena size, plus where the plan came from), and a page-aligned weights section
//!   that is memory-mapped and used in place. [`plan::write_plan`] streams weights from the
//!   model's map; [`plan::PlanFile::open`] treats the file as untrusted and reports a
//!   corrupted, truncated or wrong-version file as an error.
//! - [`session`]: the executor: it picks the backend for the plan's target
//!   ([`memc_codegen::backend`]; the CPU, behind the `cpu` cargo feature, on by default), which
//!   compiles the kernels at load and owns the arena of the planned size; a run copies the
//!   inputs in, runs every step in schedule order and reads the outputs out through it.
//! - [`tensor`]: the tensors a session takes and returns; [`npy`]: reading and writing them as
//!   NumPy `.npy` files.
//! - [`error`]: [`RuntimeError`], every expected failure, with the file it is about.
//!
//! A GPU backend (through cudarc, loaded dynamically) is a later issue; it plugs in behind the
//! same [`memc_codegen::backend::CompiledProgram`] calls. Built without the `cpu` feature,
//! plan files are still read and written, and loading one to run it is an error ("memc was
//! built without the cpu backend").
//!
//! Invariants: a session never allocates per-op memory beyond the planned arena, never copies
//! weights out of their map, and every plan file is untrusted input: nothing in it is used
//! before it is checked, and no kernel runs before [`memc_codegen::Program::validate`] passed.
//!
//! # Example
//!
//! ```no_run
//! use memc_runtime::{Session, TensorRef};
//!
//! let image = vec![0.5f32; 3 * 224 * 224];
//! let shape = [1, 3, 224, 224];
//! let inputs = [("input", TensorRef::from_slice(&shape, &image)?)];
//! let outputs = Session::load("resnet50.plan")?.run(&inputs)?;
//! for output in &outputs {
//!     println!("{}: {:?}", output.name(), output.shape());
//! }
//! let logits: Vec<f32> = outputs[0].to_vec()?;
//! # Ok::<(), memc_runtime::RuntimeError>(())
//! ```

#[cfg(target_endian = "big")]
compile_error!(
    "memc's plan files, tensors and kernels are little-endian; big-endian hosts are not supported"
);

pub mod error;
pub mod npy;
pub mod plan;
pub mod session;
pub mod tensor;

pub use error::{Result, RuntimeError};
pub use plan::{write_plan, write_plan_with_progress, PlanFile, PlanMeta, WriteProgress};
pub use session::{check_inputs, Outputs, Session, SessionOptions};
pub use tensor::{Element, Tensor, TensorRef};

/// The plan file format version this build writes and reads. Version 2: every packed weight
/// slot records the id of its packed layout (`PackSpec::layout`, `nbits v2`). Version 3: the
/// program has a persistent state region (`Program::state`, `state_size`; views into
/// `Region::State`) for training steps. Version 4: the metadata's `ptx` field (the PTX module
/// and launch list of a `cuda` plan, `null` for other targets). Version 5: the metadata's
/// `memory_report` field (the memory plan's report as JSON, what `memc report` prints).
/// Version 6: an output may have a run-time extent (`IoTensor::extent`: the bounded axis and
/// the arena offset of the i64 the run writes its extent to; NonZero, Compress, Unique).
/// Version 7: a contraction's `b` may be an implicit im2col operand (`Im2colView`: a
/// convolution's column matrix read straight from its input); a strided `b` is spelled as
/// before. Version 8: a contraction may run as Winograd F(2x2, 3x3) (`Contract::winograd`)
/// over a weight slot in the `winograd` layout (`OperandLayout::Winograd`), which an older
/// build would have read as a plain packed weight.
/// Versions 4 to 7 plans are still read (version 4 lacks only `memory_report`; versions 4 and
/// 5 have no output with an extent, which is what a missing `extent` field reads as; 4 to 6
/// have no implicit im2col operand, and none a Winograd contraction, which a missing
/// `winograd` field reads as); older ones are refused with a request to recompile.
pub const PLAN_FORMAT_VERSION: u32 = 8;

/// The oldest plan format version this build reads.
pub const OLDEST_PLAN_FORMAT_VERSION: u32 = 4;
