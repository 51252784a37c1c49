//! The program as upstream MLIR, through melior (cargo feature `mlir`).
//!
//! [`emit_module`] builds a lowered [`Program`] as a module of upstream dialects only (builtin,
//! func, memref, arith, math, scf, linalg), in-process with melior's C API, and verifies it
//! with MLIR's verifier. [`Jit`] lowers that module with MLIR's own pipeline to the LLVM
//! dialect and runs it through MLIR's ExecutionEngine: an oracle that shares no code with the
//! Cranelift backend or the reference interpreter beyond the kernel IR they all read.
//! [`round_trip`] parses memc's IR text with MLIR's real parser and prints it back in the
//! generic form.
//!
//! # The module
//!
//! ```text
//! func.func @memc_plan(%arena: memref<Nxi8>, %weights: memref<Wxi8>, %state: memref<Sxi8>)
//! func.func @main(%arena, %weights, %state, %input0: memref<...>, ..., %output0: memref<...>)
//! ```
//!
//! `@memc_plan` runs every kernel of the program in order over the three regions. With the
//! memory plan given, every planned buffer is first a `memref.view` of the arena at its planned
//! offset with its shape and element type (attribute `memc.buffer`: its value and producing
//! op); buffers the planner placed together (views, in-place results, reuse) are views at the
//! same offsets. Kernels address those views wherever a kernel's view lies inside one, else a
//! typed view of the whole region. Each kernel is a loop nest (`scf.for` per axis, `arith`,
//! `math`, `memref.load`/`memref.store`), or a `linalg.matmul` per batch for a contraction
//! with unit `alpha` and non-negative strides; its first op carries `memc.kernel`.
//! `@main` copies the graph inputs into the arena, calls `@memc_plan` and copies the outputs
//! out (an output may be a weight). Bool tensors are bytes (`i8`, 0 or 1) in memory and
//! `i1` in registers. Both functions have `llvm.emit_c_interface`.
//!
//! Semantics follow the kernel contract ([`crate::kernel`]): integer division by zero gives 0
//! (and `MIN / -1` wraps), indirect indices wrap once and clamp, float-to-integer casts
//! saturate with NaN to 0, shifts by the bit width or more give 0, min/max propagate NaN.
//! f16 arithmetic and functions are computed in f32 and rounded once to f16.
//!
//! # Guarantees
//!
//! Every error (an operation MLIR refuses, a module that fails verification, a failing
//! lowering pass) is an [`MlirError`] with MLIR's own diagnostics; nothing panics on a program
//! that passed [`Program::validate`]. The emitter reads the program and, optionally, the
//! memory plan; it writes nothing but the module.

mod emit;
mod jit;

use emit::emit_module;
pub use emit::EmitOptions;
pub use jit::Jit;

use melior::dialect::DialectRegistry;
use melior::ir::operation::OperationLike;
use melior::ir::Module;
use melior::Context;
use std::cell::RefCell;
use std::rc::Rc;
use thiserror::Error;

use crate::Program;

/// What went wrong on the way through MLIR.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum MlirError {
    /// MLIR refused to build an operation (a memc bug: the emitter built something invalid).
    #[error("MLIR refused to build `{op}`: {message}")]
    Build { op: String, message: String },
    /// The built module failed MLIR's verifier (a memc bug).
    #[error("the MLIR module does not verify: {0}")]
    Verify(String),
    /// A text did not parse.
    #[error("MLIR cannot parse the text: {0}")]
    Parse(String),
    /// The lowering to the LLVM dialect failed.
    #[error("MLIR's lowering to LLVM failed: {0}")]
    Lower(String),
    /// The ExecutionEngine could not be made or called.
    #[error("MLIR's ExecutionEngine: {0}")]
    Engine(String),
    /// A program the emitter cannot express (e.g. a region larger than the address space).
    #[error("{0}")]
    Unsupported(String),
    /// Inputs, outputs or regions of the wrong size for the program.
    #[error("{0}")]
    Io(String),
}

/// A context with every upstream dialect registered and loaded, and a diagnostic handler that
/// collects MLIR's messages (read them with [`Diagnostics::take`]).
pub(crate) struct Session {
    pub(crate) context: Context,
    pub(crate) diagnostics: Diagnostics,
}

#[derive(Clone, Default)]
pub(crate) struct Diagnostics(Rc<RefCell<Vec<String>>>);

impl Diagnostics {
    /// The messages collected since the last call, joined, or `fallback` when there are none.
    pub(crate) fn take(&self, fallback: &str) -> String {
        let messages = std::mem::take(&mut *self.0.borrow_mut());
        if messages.is_empty() {
            fallback.to_string()
        } else {
            messages.join("; ")
        }
    }
}

impl Session {
    pub(crate) fn new() -> Session {
        let registry = DialectRegistry::new();
        melior::utility::register_all_dialects(&registry);
        let context = Context::new();
        context.append_dialect_registry(&registry);
        context.load_all_available_dialects();
        let diagnostics = Diagnostics::default();
        let sink = diagnostics.clone();
        context.attach_diagnostic_handler(move |d| {
            let location = d.location().to_string();
            let message = match location.as_str() {
                "loc(unknown)" | "" => d.to_string(),
                _ => format!("{location}: {d}"),
            };
            sink.0.borrow_mut().push(message);
            true
        });
        Session {
            context,
            diagnostics,
        }
    }
}

/// The program as MLIR text (the pretty form), built in-process and verified; see the module
/// doc. `options.plan` names the planned buffers.
pub fn emit_text(program: &Program, options: &EmitOptions) -> Result<String, MlirError> {
    let session = Session::new();
    let module = emit_module(&session, program, options)?;
    Ok(module.as_operation().to_string())
}

/// memc's IR text through MLIR's own parser (unregistered dialects allowed, as memc's ops are
/// not an MLIR dialect), verified, and printed back by MLIR (func.func in its custom form, memc's
/// ops in the generic form), which memc's parser reads. Errors: the text does not parse or
/// verify in MLIR, with MLIR's diagnostic.
pub fn round_trip(text: &str) -> Result<String, MlirError> {
    let session = Session::new();
    session.context.set_allow_unregistered_dialects(true);
    let module = Module::parse(&session.context, text)
        .ok_or_else(|| MlirError::Parse(session.diagnostics.take("no diagnostic")))?;
    if !module.as_operation().verify() {
        return Err(MlirError::Verify(session.diagnostics.take("no diagnostic")));
    }
    Ok(module.as_operation().to_string())
}
