//! The runtime's one error type: every expected failure of writing or reading a plan file,
//! loading it, running it, and reading or writing `.npy` tensors.
//!
//! Every message names the file it is about where there is one, and says what was expected and
//! what was found, so the CLI prints it as is.

use std::path::{Path, PathBuf};
use thiserror::Error;

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum RuntimeError {
    /// Opening, reading or mapping a file failed.
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Creating, writing or renaming a file failed.
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The progress callback of [`crate::plan::write_plan_with_progress`] cancelled the write.
    #[error("writing `{}` was cancelled; the file is as it was before", path.display())]
    WriteCancelled { path: PathBuf },
    #[error("`{}` is not a memc plan file (it does not start with `MEMCPLAN`)", path.display())]
    NotAPlan { path: PathBuf },
    #[error(
        "`{}`: the plan file is truncated: it has {len} bytes but its {what} ends at byte {needed}",
        path.display()
    )]
    Truncated {
        path: PathBuf,
        len: u64,
        needed: u64,
        what: &'static str,
    },
    #[error(
        "`{}`: plan format version {found}, this memc reads versions {oldest} to {supported}; recompile the model",
        path.display()
    )]
    Version {
        path: PathBuf,
        found: u32,
        oldest: u32,
        supported: u32,
    },
    /// A checksum over part of the file does not match the one the header records.
    #[error(
        "`{}`: the plan file is corrupted: {section} checksum mismatch (recorded {recorded:#010x}, computed {computed:#010x})",
        path.display()
    )]
    Checksum {
        path: PathBuf,
        section: &'static str,
        recorded: u32,
        computed: u32,
    },
    /// The header's fields contradict each other or the file (sections out of bounds,
    /// misaligned, overlapping, or trailing bytes).
    #[error("`{}`: the plan file is corrupted: {message}", path.display())]
    Layout { path: PathBuf, message: String },
    #[error("`{}`: the plan's metadata is not valid: {source}", path.display())]
    Metadata {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// The program in a plan file fails [`memc_codegen::Program::validate`].
    #[error("`{}`: the plan's program is invalid: {source}", path.display())]
    InvalidProgram {
        path: PathBuf,
        source: memc_codegen::KernelError,
    },
    /// A plan's stored PTX is missing, out of place, or differs from the PTX of its program.
    #[error("`{}`: {message}", path.display())]
    Ptx { path: PathBuf, message: String },
    /// [`crate::plan::write_plan`] was handed a program that fails validation: a memc bug.
    #[error("memc bug: the program to write is invalid: {0}")]
    ProgramToWrite(memc_codegen::KernelError),
    #[error("weight `{name}` has a slot in the plan but is not in the model's weight store")]
    WeightMissing { name: String },
    #[error("weight `{name}` has no bytes (IR parsed from text names weights without their data)")]
    WeightAbsent { name: String },
    #[error("weight `{name}` has {actual} bytes but its slot in the plan holds {slot}")]
    WeightSize {
        name: String,
        slot: u64,
        actual: u64,
    },
    #[error("cannot pack weight slot `{name}`: {message}")]
    PackInvalid { name: String, message: String },
    #[error("weight slots `{first}` and `{second}` overlap in the weights section")]
    WeightOverlap { first: String, second: String },
    #[error("cannot compile the plan's kernels: {0}")]
    Jit(memc_codegen::backend::BackendError),
    /// The plan's target has no backend in this build (or at all), or the backend refused a
    /// copy or a run.
    #[error(transparent)]
    Backend(memc_codegen::backend::BackendError),
    /// `memc run --engine mlir` could not run the plan through MLIR's ExecutionEngine (the
    /// build has no `mlir` feature, the plan has persistent state, or MLIR refused it).
    #[error("--engine mlir: {0}")]
    Mlir(String),
    #[error("cannot allocate the arena of {bytes} bytes")]
    Arena { bytes: u64 },
    #[error("cannot start the thread pool: {0}")]
    ThreadPool(String),
    #[error("unknown input `{name}`; the plan's inputs are {expected}")]
    UnknownInput { name: String, expected: String },
    #[error("missing input `{name}` ({expected}); the plan's inputs are {all}")]
    MissingInput {
        name: String,
        expected: String,
        all: String,
    },
    #[error("input `{name}` is given twice")]
    DuplicateInput { name: String },
    #[error("input `{name}`: expected element type {expected}, got {got}")]
    InputType {
        name: String,
        expected: &'static str,
        got: &'static str,
    },
    #[error("input `{name}`: expected shape {expected}, got {got}")]
    InputShape {
        name: String,
        expected: String,
        got: String,
    },
    /// `memc run --state/--save-state` on a plan that keeps no state.
    #[error("`{flag} {}`: the plan has no persistent state (it is not a training step)", dir.display())]
    NoState { flag: &'static str, dir: PathBuf },
    #[error("unknown state tensor `{name}`; the plan's state is {expected}")]
    UnknownState { name: String, expected: String },
    #[error("state tensor `{name}`: expected {expected}, got {got}")]
    StateType {
        name: String,
        expected: String,
        got: String,
    },
    #[error("parameter `{name}` ({expected}) has no value: set it before the first run (Session::set_state, or `memc run --state DIR` with its .npy file in DIR)")]
    MissingParameter { name: String, expected: String },
    /// A tensor's byte length disagrees with its element type and shape.
    #[error("tensor of {elem}{shape} needs {expected} bytes, got {got}")]
    TensorSize {
        elem: &'static str,
        shape: String,
        expected: String,
        got: u64,
    },
    /// A typed read of a tensor of another element type.
    #[error("tensor `{name}` holds {actual}, not {requested}")]
    ElementType {
        name: String,
        actual: &'static str,
        requested: &'static str,
    },
    /// A run left an output's extent slot outside `[0, bound]` (a corrupted plan or a kernel
    /// bug); the output is not read.
    #[error("{0}; the output is not read (a corrupted plan or a bug in memc)")]
    Extent(String),
    /// A `.npy` file memc cannot read, or a tensor it cannot write as one.
    #[error("`{}`: {message}", path.display())]
    Npy { path: PathBuf, message: String },
}

impl From<memc_codegen::backend::BackendError> for RuntimeError {
    /// Sorts a backend's error into the runtime's: a kernel that does not compile is
    /// [`RuntimeError::Jit`], the arena and the workers keep their own variants, and the rest
    /// (no backend, a refused copy) is [`RuntimeError::Backend`].
    fn from(error: memc_codegen::backend::BackendError) -> RuntimeError {
        use memc_codegen::backend::BackendError;
        match error {
            BackendError::Arena { bytes } => RuntimeError::Arena { bytes },
            BackendError::ThreadPool(message) => RuntimeError::ThreadPool(message),
            #[cfg(feature = "cpu")]
            error @ BackendError::Cpu(_) => RuntimeError::Jit(error),
            error @ BackendError::Ptx(_) => RuntimeError::Jit(error),
            error => RuntimeError::Backend(error),
        }
    }
}

impl RuntimeError {
    pub(crate) fn read(path: &Path, source: std::io::Error) -> RuntimeError {
        RuntimeError::Read {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn write(path: &Path, source: std::io::Error) -> RuntimeError {
        RuntimeError::Write {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn npy(path: &Path, message: impl Into<String>) -> RuntimeError {
        RuntimeError::Npy {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}
