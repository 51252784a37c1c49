//! The node-test harness: one ONNX node-test directory (`model.onnx`, `test_data_set_*/input_*.pb`
//! and `output_*.pb`) compiled, planned, written as a plan file, run through the CPU backend and,
//! when its program is small, through the reference backend, and compared with the expected
//! outputs. `tests/node_tests.rs` runs the ONNX suite through it, `tests/training_ops.rs` the
//! training-op cases that `bench/training/op_tests.py` writes.

#![allow(dead_code)] // Each test crate uses part of it.

use crate::common::root;
use memc_codegen::Scalar;
use std::path::{Path, PathBuf};

/// How close a float output must be: `|got - want| <= atol + rtol * |want|`.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

/// The ONNX node tests' tolerance.
pub const NODE_TESTS: Tolerance = Tolerance {
    rtol: 1e-3,
    atol: 1e-7,
};
/// The largest program (in `memc_codegen::reference::cost` units, about scalar operations)
/// that also runs through the reference backend, which is slow, above all in a debug build.
/// Today every passing test is below it (the largest take a few seconds in a debug build).
pub const REFERENCE_COST_BOUND: u64 = 20_000_000;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Pass,
    Unsupported(String),
    Fail(String),
}

impl Status {
    pub fn word(&self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Unsupported(_) => "unsupported",
            Status::Fail(_) => "fail",
        }
    }
}

pub fn node_dir() -> Option<PathBuf> {
    let site = root().join(".venv/lib");
    let entries = std::fs::read_dir(&site).ok()?;
    for entry in entries.flatten() {
        let dir = entry
            .path()
            .join("site-packages/onnx/backend/test/data/node");
        if dir.is_dir() {
            return Some(dir);
        }
    }
    None
}

/// The target the node tests compile for: `MEMC_NODE_TARGET` (`cpu` or `cuda`), else the CPU.
pub fn node_target() -> memc_codegen::Target {
    std::env::var("MEMC_NODE_TARGET")
        .ok()
        .and_then(|name| memc_codegen::Target::from_name(&name))
        .unwrap_or(memc_codegen::Target::Cpu)
}

/// Whether a compile error says memc does not support something (as opposed to a bug).
pub fn is_unsupported(message: &str) -> bool {
    const MARKS: &[&str] = &[
        "unsupported",
        "not supported",
        "does not support",
        "imports no opset",
        // Output shapes that depend on run-time values: plans are static.
        "is not known",
        "cannot lower",
        "memc supports opsets",
        "no CPU kernels",
        "has no CPU kernel",
        "is not supported",
        "sequence",
        "optional",
        "string",
    ];
    let lower = message.to_lowercase();
    MARKS.iter().any(|m| lower.contains(&m.to_lowercase()))
}

pub fn one_line(text: &str) -> String {
    let joined: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    joined.chars().take(200).collect()
}

/// A test tensor, decoded by the importer's TensorProto reader, its elements as the arena and
/// the runtime hold them (sub-byte elements one per byte).
pub struct TestTensor {
    elem: Scalar,
    shape: Vec<u64>,
    data: Vec<u8>,
}

impl TestTensor {
    /// The tensor's bytes, little-endian, row-major.
    pub fn data(&self) -> &[u8] {
        &self.data
    }
}

pub fn decode_tensor(path: &Path) -> Result<TestTensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let tensor = memc_ir::onnx::tensor::decode_standalone(&bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let elem = Scalar::from_elem(tensor.ty.elem);
    let shape = tensor
        .ty
        .static_shape()
        .ok_or("a test tensor has a dynamic shape")?;
    Ok(TestTensor {
        elem,
        shape,
        data: tensor.arena_bytes(),
    })
}

/// Element `i` of float type `elem` in `bytes`, exactly (a narrow float widened).
fn read_f64(elem: Scalar, bytes: &[u8], i: usize) -> f64 {
    let s = elem.size() as usize;
    let mut raw = [0u8; 8];
    raw[..s].copy_from_slice(&bytes[i * s..(i + 1) * s]);
    let bits = u64::from_le_bytes(raw);
    match elem {
        Scalar::F32 => f64::from(f32::from_bits(bits as u32)),
        Scalar::F64 => f64::from_bits(bits),
        narrow => f64::from_bits(narrow.widen(bits)),
    }
}

/// Compares one output (`elem`, `shape`, `data`) with `want`; `None` when it matches.
pub fn compare(
    name: &str,
    want: &TestTensor,
    elem: Scalar,
    shape: &[u64],
    data: &[u8],
    tol: Tolerance,
) -> Option<String> {
    if elem != want.elem || shape != want.shape.as_slice() {
        return Some(format!(
            "output `{name}`: got {}{:?}, want {}{:?}",
            elem.name(),
            shape,
            want.elem.name(),
            want.shape
        ));
    }
    if elem.is_float() {
        // Float types compare by value within the tolerance (NaN matches NaN whatever its
        // bits); a narrow float (f16, bf16, float8, float4) compares its widened value, so an
        // f16 result computed in f32 and rounded once matches numpy's per-op rounding.
        let n = want.data.len() / elem.size() as usize;
        for i in 0..n {
            let (w, g) = (read_f64(elem, &want.data, i), read_f64(elem, data, i));
            let ok = (w.is_nan() && g.is_nan())
                || w == g
                || (w - g).abs() <= tol.atol + tol.rtol * w.abs();
            if !ok {
                return Some(format!("output `{name}` element {i}: got {g}, want {w}"));
            }
        }
        None
    } else if data != want.data.as_slice() {
        let s = elem.size() as usize;
        let i = data
            .chunks(s)
            .zip(want.data.chunks(s))
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        Some(format!("output `{name}` differs first at element {i}"))
    } else {
        None
    }
}

/// The data set's inputs for the plan's inputs `names`, in their order: `input_<i>.pb` in order
/// when the plan has every input of the test; else (some were bound as constants) the files
/// whose tensors carry those names.
pub fn read_inputs(set: &Path, names: &[String]) -> Result<Vec<TestTensor>, Status> {
    let mut files = Vec::new();
    while set.join(format!("input_{}.pb", files.len())).is_file() {
        files.push(set.join(format!("input_{}.pb", files.len())));
    }
    let decode = |path: &Path| decode_tensor(path).map_err(|e| Status::Unsupported(one_line(&e)));
    if files.len() <= names.len() {
        return (0..names.len())
            .map(|i| decode(&set.join(format!("input_{i}.pb"))))
            .collect();
    }
    let mut by_name = std::collections::HashMap::new();
    for path in &files {
        let bytes = std::fs::read(path).map_err(|e| Status::Fail(e.to_string()))?;
        let name = memc_ir::onnx::tensor::decode_standalone(&bytes)
            .map(|t| t.name)
            .map_err(|e| Status::Unsupported(one_line(&e)))?;
        by_name.insert(name, path.clone());
    }
    names
        .iter()
        .map(|name| match by_name.get(name) {
            Some(path) => decode(path),
            None => Err(Status::Fail(format!(
                "no data set file holds input `{name}`"
            ))),
        })
        .collect()
}

/// Runs `program` through the reference backend on one data set's `inputs` and compares its
/// outputs with `expected`; `None` when they match.
pub fn check_reference(
    program: &memc_codegen::Program,
    weights: &[u8],
    inputs: &[TestTensor],
    expected: &[TestTensor],
    tol: Tolerance,
) -> Option<String> {
    let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.as_slice()).collect();
    let outputs = match memc_codegen::reference::run_outputs(program, weights, &bytes) {
        Ok(outputs) => outputs,
        Err(e) => return Some(format!("reference backend: {e}")),
    };
    for ((io, (shape, got)), want) in program.outputs.iter().zip(&outputs).zip(expected) {
        if let Some(diff) = compare(&io.name, want, io.elem, shape, got, tol) {
            return Some(format!("reference backend: {diff}"));
        }
    }
    None
}

/// Runs one node test; the flag says whether the reference backend ran it too (only for a test
/// that passes through the CPU backend, and whose program is cheap enough).
pub fn run_test(dir: &Path, scratch: &Path, tol: Tolerance) -> (Status, bool) {
    match run_cpu_and_reference(dir, scratch, tol) {
        Ok(checked) => (Status::Pass, checked),
        Err(status) => (status, false),
    }
}

/// The body of [`run_test`]: `Err` with the status of a test that does not pass.
pub fn run_cpu_and_reference(dir: &Path, scratch: &Path, tol: Tolerance) -> Result<bool, Status> {
    // `MEMC_NODE_TARGET=cuda` compiles for the GPU and runs the plans there (on a machine with
    // an NVIDIA driver); the reference backend then runs only the CPU plans.
    let target = node_target();
    let options = memc::compile::CompileOptions {
        lower: true,
        plan_budget: std::time::Duration::from_millis(20),
        target,
        ..Default::default()
    };
    let compiled = match std::panic::catch_unwind(|| compile_binding_shape_inputs(dir, &options)) {
        Ok(Ok((c, bound))) => {
            if !bound.is_empty() {
                COMPILED_WITH_CONSTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            c
        }
        Ok(Err(diag)) => {
            let text = format!("{} {}", diag.message, diag.notes.join(" "));
            return Err(if is_unsupported(&text) {
                Status::Unsupported(one_line(&text))
            } else {
                Status::Fail(format!("compile: {}", one_line(&text)))
            });
        }
        Err(_) => return Err(Status::Fail("compile panicked".into())),
    };
    let Some(program) = compiled.program else {
        return Err(Status::Fail("no program".into()));
    };
    let plan_path = scratch.join(format!(
        "{}.plan",
        dir.file_name()
            .map_or("t".into(), |n| n.to_string_lossy().into_owned())
    ));
    let mut meta = memc_runtime::plan::PlanMeta::new("model.onnx", target.name(), program);
    meta.ptx = compiled.ptx;
    if let Err(e) = memc_runtime::plan::write_plan(&plan_path, &meta, &compiled.module.weights) {
        return Err(Status::Fail(format!(
            "write plan: {}",
            one_line(&e.to_string())
        )));
    }
    let options = memc_runtime::SessionOptions {
        threads: std::num::NonZeroUsize::new(1),
        ..Default::default()
    };
    let session =
        std::panic::catch_unwind(|| memc_runtime::Session::load_with(&plan_path, &options));
    let _ = std::fs::remove_file(&plan_path);
    let mut session = match session {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let text = e.to_string();
            return Err(if is_unsupported(&text) {
                Status::Unsupported(one_line(&text))
            } else {
                Status::Fail(format!("load: {}", one_line(&text)))
            });
        }
        Err(_) => return Err(Status::Fail("load panicked".into())),
    };
    let input_names: Vec<String> = session.inputs().iter().map(|io| io.name.clone()).collect();
    let output_names: Vec<String> = session.outputs().iter().map(|io| io.name.clone()).collect();
    let sets = data_sets(dir);
    let run_reference = target == memc_codegen::Target::Cpu
        && memc_codegen::reference::cost(session.program()) <= REFERENCE_COST_BOUND;
    // With the `mlir` feature, every CPU plan also runs as the MLIR module memc emits, lowered
    // and run by MLIR's ExecutionEngine: the independent oracle must agree too.
    #[cfg(feature = "mlir")]
    let mlir = match target {
        memc_codegen::Target::Cpu => compile_mlir(session.program(), compiled.plan.as_ref())?,
        _ => None,
    };
    for set in sets {
        let inputs = read_inputs(&set, &input_names)?;
        let refs: Vec<(&str, memc_runtime::TensorRef)> = input_names
            .iter()
            .zip(&inputs)
            .map(|(name, t)| {
                memc_runtime::TensorRef::new(t.elem, &t.shape, &t.data).map(|t| (name.as_str(), t))
            })
            .collect::<Result<_, _>>()
            .unwrap_or_default();
        let outputs = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            session.run(&refs)
        })) {
            Ok(Ok(outputs)) => outputs,
            Ok(Err(e)) => return Err(Status::Fail(format!("run: {}", one_line(&e.to_string())))),
            Err(_) => return Err(Status::Fail("run panicked".into())),
        };
        let mut expected = Vec::new();
        for (i, name) in output_names.iter().enumerate() {
            let want = match decode_tensor(&set.join(format!("output_{i}.pb"))) {
                Ok(t) => t,
                Err(e) => return Err(Status::Unsupported(one_line(&e))),
            };
            let got = &outputs[i];
            if let Some(diff) = compare(name, &want, got.elem(), got.shape(), got.data(), tol) {
                return Err(Status::Fail(one_line(&diff)));
            }
            expected.push(want);
        }
        #[cfg(feature = "mlir")]
        if let Some(jit) = &mlir {
            check_mlir(jit, session.plan().weights(), &inputs, &expected, tol)?;
        }
        if run_reference {
            let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check_reference(
                    session.program(),
                    session.plan().weights(),
                    &inputs,
                    &expected,
                    tol,
                )
            }));
            match checked {
                Ok(None) => {}
                Ok(Some(diff)) => return Err(Status::Fail(one_line(&diff))),
                Err(_) => return Err(Status::Fail("the reference backend panicked".into())),
            }
        }
    }
    Ok(run_reference)
}

/// How many tests compiled only with some of their inputs bound as constants
/// ([`compile_binding_shape_inputs`]).
pub static COMPILED_WITH_CONSTS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Compiles the test's `model.onnx`; when that fails, compiles it again with its small inputs
/// bound as constants, the way a user would with `memc compile --const NAME=FILE.npy`: node
/// tests pass the values shape inference needs (`axes`, `pads`, `sizes`, `k`, `shape`,
/// `repeats`, a window's `size`, ...) as graph inputs. An input is bound when it has rank 0 or
/// 1 and at most [`memc_ir::infer::MAX_KNOWN_ELEMENTS`] elements (inference tracks no larger
/// value) and every data set gives it the same value; the plan then has no input for it, and
/// the run skips it. Returns the names bound (empty when the model compiled as it is); when the
/// second compile fails too, the first error.
pub fn compile_binding_shape_inputs(
    dir: &Path,
    options: &memc::compile::CompileOptions,
) -> Result<(memc::compile::Compiled, Vec<String>), memc_ir::Diagnostic> {
    let model = dir.join("model.onnx");
    let first = match memc::compile::compile(&model, options) {
        Ok(compiled) => return Ok((compiled, Vec::new())),
        Err(diag) => diag,
    };
    let consts = shape_inputs(dir);
    if consts.is_empty() {
        return Err(first);
    }
    let names: Vec<String> = consts.iter().map(|c| c.name().to_string()).collect();
    let options = memc::compile::CompileOptions {
        consts,
        ..options.clone()
    };
    match memc::compile::compile(&model, &options) {
        Ok(compiled) => Ok((compiled, names)),
        Err(_) => Err(first),
    }
}

/// A node test's data sets (`test_data_set_0`, ...), in order.
pub fn data_sets(dir: &Path) -> Vec<PathBuf> {
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    sets.sort();
    sets
}

/// The inputs of a node test that [`compile_binding_shape_inputs`] binds, with data set 0's
/// values.
fn shape_inputs(dir: &Path) -> Vec<memc_ir::onnx::ConstInput> {
    let sets = data_sets(dir);
    let read = |set: &Path, i: usize| {
        let bytes = std::fs::read(set.join(format!("input_{i}.pb"))).ok()?;
        memc_ir::onnx::tensor::decode_standalone(&bytes).ok()
    };
    let Some(first_set) = sets.first() else {
        return Vec::new();
    };
    let mut consts = Vec::new();
    for i in 0.. {
        let Some(tensor) = read(first_set, i) else {
            break;
        };
        let small = tensor.ty.dims.len() <= 1
            && tensor
                .ty
                .static_num_elements()
                .is_some_and(|n| n <= memc_ir::infer::MAX_KNOWN_ELEMENTS);
        let same_everywhere = sets[1..]
            .iter()
            .all(|set| read(set, i).is_some_and(|t| t.ty == tensor.ty && t.bytes == tensor.bytes));
        if tensor.name.is_empty() || !small || !same_everywhere {
            continue;
        }
        let Some(shape) = tensor.ty.static_shape() else {
            continue;
        };
        if let Ok(value) = memc_ir::onnx::ConstInput::new(
            tensor.name.clone(),
            tensor.ty.elem,
            shape,
            std::sync::Arc::from(tensor.bytes),
        ) {
            consts.push(value);
        }
    }
    consts
}

/// The program as MLIR, JIT-compiled by MLIR's ExecutionEngine (feature `mlir`).
#[cfg(feature = "mlir")]
pub fn compile_mlir(
    program: &memc_codegen::Program,
    plan: Option<&memc_passes::memory::MemoryPlan>,
) -> Result<Option<memc_codegen::mlir::Jit>, Status> {
    let options = memc_codegen::mlir::EmitOptions { plan };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        memc_codegen::mlir::Jit::compile(program, &options)
    })) {
        Ok(Ok(jit)) => {
            MLIR_CHECKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Some(jit))
        }
        // What the emitter says plainly it cannot express (float8 and float4 codes) is not
        // checked through MLIR; counted apart.
        Ok(Err(memc_codegen::mlir::MlirError::Unsupported(_))) => {
            MLIR_SKIPPED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(None)
        }
        Ok(Err(e)) => Err(Status::Fail(format!("mlir: {}", one_line(&e.to_string())))),
        Err(_) => Err(Status::Fail("mlir: the emitter panicked".into())),
    }
}

/// How many programs the MLIR emitter declined (float8 and float4 codes).
#[cfg(feature = "mlir")]
pub static MLIR_SKIPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many programs went through MLIR's ExecutionEngine.
#[cfg(feature = "mlir")]
pub static MLIR_CHECKED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Runs one data set through the MLIR module and compares with `expected`.
#[cfg(feature = "mlir")]
pub fn check_mlir(
    jit: &memc_codegen::mlir::Jit,
    weights: &[u8],
    inputs: &[TestTensor],
    expected: &[TestTensor],
    tol: Tolerance,
) -> Result<(), Status> {
    let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.as_slice()).collect();
    let outputs = jit
        .run_outputs(weights, &bytes)
        .map_err(|e| Status::Fail(format!("mlir: {}", one_line(&e.to_string()))))?;
    for ((io, (shape, got)), want) in jit.program().outputs.iter().zip(&outputs).zip(expected) {
        if let Some(diff) = compare(&io.name, want, io.elem, shape, got, tol) {
            return Err(Status::Fail(format!("mlir: {}", one_line(&diff))));
        }
    }
    Ok(())
}
