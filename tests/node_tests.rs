//! The ONNX backend node tests, run through memc end to end.
//!
//! `pip install onnx==1.22.0` ships 1765 of them under `onnx/backend/test/data/node/`: a one-op
//! (or few-op) `model.onnx` with `test_data_set_*/input_*.pb` and the expected `output_*.pb`.
//! Each test is compiled (import, shape inference, planning, lowering), written as a plan file,
//! loaded by the runtime, run through the CPU backend on every data set and compared with the
//! expected outputs (`|got - want| <= atol + rtol * |want|`, rtol 1e-3, atol 1e-7; NaN matches
//! NaN; integers and bools exactly). A test that passes there, and whose program is small
//! (`memc_codegen::reference::cost` at most [`REFERENCE_COST_BOUND`], which bounds the run time
//! of the slow interpreter), then runs through the reference backend too
//! (`memc_codegen::reference`, every address bounds-checked), with the same data sets and the
//! same comparison. This is the one node-test harness: the CPU backend and the reference (and
//! later backends) answer to the same expected outputs and the same list. Tensors are read with
//! the importer's TensorProto reader (`memc_ir::onnx::tensor::decode_standalone`).
//!
//! Every test gets one status:
//! - `pass`: every output of every data set matched, in the CPU backend and (for small programs)
//!   in the reference backend;
//! - `unsupported`: memc says plainly it cannot do the model (an op, element type or opset it
//!   does not support, an op the CPU backend cannot lower);
//! - `fail`: anything else (a wrong number in either backend, a runtime error, an access the
//!   reference backend finds out of bounds, a compile error that is not "unsupported"). A
//!   failure of a supported op is a bug.
//!
//! The statuses are written to `tests/node-tests.txt` when `MEMC_UPDATE_NODE_TESTS=1`, and the
//! test fails when a test listed there as `pass` no longer passes. `MEMC_NODE_FILTER=substring`
//! runs only the tests whose name contains it (and then neither writes nor checks the file).
//! Run with `cargo test --release --test node_tests -- --nocapture` to see the summary.
//!
//! Needs the venv that `scripts/test` creates (`.venv` with onnx 1.22.0); without it the test
//! says it was skipped, unless `MEMC_REQUIRE_ZOO` is set.

mod common;

use common::root;
use memc_codegen::Scalar;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-7;
const LIST: &str = "tests/node-tests.txt";
/// The largest program (in `memc_codegen::reference::cost` units, about scalar operations)
/// that also runs through the reference backend, which is slow, above all in a debug build.
/// Today every passing test is below it (the largest take a few seconds in a debug build).
const REFERENCE_COST_BOUND: u64 = 20_000_000;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Pass,
    Unsupported(String),
    Fail(String),
}

impl Status {
    fn word(&self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Unsupported(_) => "unsupported",
            Status::Fail(_) => "fail",
        }
    }
}

fn node_dir() -> Option<PathBuf> {
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

/// Whether a compile error says memc does not support something (as opposed to a bug).
fn is_unsupported(message: &str) -> bool {
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

fn one_line(text: &str) -> String {
    let joined: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    joined.chars().take(200).collect()
}

/// A test tensor, decoded by the importer's TensorProto reader.
struct TestTensor {
    elem: Scalar,
    shape: Vec<u64>,
    data: Vec<u8>,
}

fn decode_tensor(path: &Path) -> Result<TestTensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let tensor = memc_ir::onnx::tensor::decode_standalone(&bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let elem = Scalar::from_elem(tensor.ty.elem)
        .ok_or_else(|| format!("unsupported element type {}", tensor.ty.elem.mlir_name()))?;
    let shape = tensor
        .ty
        .static_shape()
        .ok_or("a test tensor has a dynamic shape")?;
    Ok(TestTensor {
        elem,
        shape,
        data: tensor.bytes,
    })
}

fn read_f64(elem: Scalar, bytes: &[u8], i: usize) -> f64 {
    let s = elem.size() as usize;
    let b = &bytes[i * s..(i + 1) * s];
    match elem {
        Scalar::F32 => f32::from_le_bytes(b.try_into().unwrap()) as f64,
        Scalar::F64 => f64::from_le_bytes(b.try_into().unwrap()),
        _ => unreachable!("read_f64 is called on float types only"),
    }
}

/// Compares one output (`elem`, `shape`, `data`) with `want`; `None` when it matches.
fn compare(
    name: &str,
    want: &TestTensor,
    elem: Scalar,
    shape: &[u64],
    data: &[u8],
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
    if elem.is_float() && elem != Scalar::F16 {
        let n = want.data.len() / elem.size() as usize;
        for i in 0..n {
            let (w, g) = (read_f64(elem, &want.data, i), read_f64(elem, data, i));
            let ok = (w.is_nan() && g.is_nan()) || w == g || (w - g).abs() <= ATOL + RTOL * w.abs();
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

/// Runs `program` through the reference backend on one data set's `inputs` and compares its
/// outputs with `expected`; `None` when they match.
fn check_reference(
    program: &memc_codegen::Program,
    weights: &[u8],
    inputs: &[TestTensor],
    expected: &[TestTensor],
) -> Option<String> {
    let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.as_slice()).collect();
    let outputs = match memc_codegen::reference::run_on_inputs(program, weights, &bytes) {
        Ok(outputs) => outputs,
        Err(e) => return Some(format!("reference backend: {e}")),
    };
    for ((io, got), want) in program.outputs.iter().zip(&outputs).zip(expected) {
        if let Some(diff) = compare(&io.name, want, io.elem, &io.shape, got) {
            return Some(format!("reference backend: {diff}"));
        }
    }
    None
}

/// Runs one node test; the flag says whether the reference backend ran it too (only for a test
/// that passes through the CPU backend, and whose program is cheap enough).
fn run_test(dir: &Path, scratch: &Path) -> (Status, bool) {
    match run_cpu_and_reference(dir, scratch) {
        Ok(checked) => (Status::Pass, checked),
        Err(status) => (status, false),
    }
}

/// The body of [`run_test`]: `Err` with the status of a test that does not pass.
fn run_cpu_and_reference(dir: &Path, scratch: &Path) -> Result<bool, Status> {
    let model = dir.join("model.onnx");
    let options = memc::compile::CompileOptions {
        lower: true,
        plan_budget: std::time::Duration::from_millis(20),
        ..Default::default()
    };
    let compiled = match std::panic::catch_unwind(|| memc::compile::compile(&model, &options)) {
        Ok(Ok(c)) => c,
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
    let meta = memc_runtime::plan::PlanMeta::new("model.onnx", "cpu", program);
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
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    sets.sort();
    let run_reference = memc_codegen::reference::cost(session.program()) <= REFERENCE_COST_BOUND;
    for set in sets {
        let mut inputs = Vec::new();
        for i in 0..input_names.len() {
            match decode_tensor(&set.join(format!("input_{i}.pb"))) {
                Ok(t) => inputs.push(t),
                Err(e) => return Err(Status::Unsupported(one_line(&e))),
            }
        }
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
            if let Some(diff) = compare(name, &want, got.elem(), got.shape(), got.data()) {
                return Err(Status::Fail(one_line(&diff)));
            }
            expected.push(want);
        }
        if run_reference {
            let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check_reference(
                    session.program(),
                    session.plan().weights(),
                    &inputs,
                    &expected,
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

fn read_list(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let status = parts.next()?;
            let name = parts.next()?;
            Some((name.to_string(), status.to_string()))
        })
        .collect()
}

#[test]
fn onnx_backend_node_tests() {
    let Some(dir) = node_dir() else {
        if std::env::var_os("MEMC_REQUIRE_ZOO").is_some() {
            panic!("MEMC_REQUIRE_ZOO is set but .venv has no onnx backend test data (run scripts/test)");
        }
        println!("skipped: no .venv with onnx (scripts/test makes it)");
        return;
    };
    let filter = std::env::var("MEMC_NODE_FILTER").ok();
    let mut tests: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the node test directory exists (node_dir found it)")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("model.onnx").is_file())
        .filter(|p| {
            filter.as_deref().is_none_or(|f| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().contains(f))
            })
        })
        .collect();
    tests.sort();
    let scratch = std::env::temp_dir().join(format!("memc-node-tests-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("the temp dir is writable");
    let next = AtomicUsize::new(0);
    let results: Mutex<BTreeMap<String, Status>> = Mutex::new(BTreeMap::new());
    let by_reference = AtomicUsize::new(0);
    // Panics inside memc are caught per test and counted as failures; keep their messages quiet.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(test) = tests.get(i) else { break };
                let (status, checked_by_reference) = run_test(test, &scratch);
                if checked_by_reference {
                    by_reference.fetch_add(1, Ordering::Relaxed);
                }
                let name = test
                    .file_name()
                    .map_or(String::new(), |n| n.to_string_lossy().into_owned());
                results
                    .lock()
                    .expect("no thread panics while holding the lock")
                    .insert(name, status);
            });
        }
    });
    std::panic::set_hook(hook);
    let _ = std::fs::remove_dir_all(&scratch);
    let results = results.into_inner().expect("the workers finished");

    let count = |word: &str| results.values().filter(|s| s.word() == word).count();
    let (pass, unsupported, fail) = (count("pass"), count("unsupported"), count("fail"));
    println!(
        "node tests: {pass} pass, {unsupported} unsupported, {fail} fail, of {} ({:.1}% pass)",
        results.len(),
        100.0 * pass as f64 / results.len().max(1) as f64
    );
    println!(
        "  {} of the passing tests also ran through the reference backend (the others' programs cost more than {REFERENCE_COST_BOUND})",
        by_reference.load(Ordering::Relaxed)
    );
    for (name, status) in &results {
        if let Status::Fail(reason) = status {
            println!("  fail {name}: {reason}");
        }
    }
    if filter.is_some() {
        return;
    }
    let list_path = root().join(LIST);
    if std::env::var_os("MEMC_UPDATE_NODE_TESTS").is_some() {
        let mut text = format!(
            "# ONNX backend node tests (onnx 1.22.0) through memc: {pass} pass, {unsupported} unsupported, {fail} fail, of {}.\n# Regenerate: MEMC_UPDATE_NODE_TESTS=1 cargo test --release --test node_tests\n",
            results.len()
        );
        for (name, status) in &results {
            let reason = match status {
                Status::Pass => String::new(),
                Status::Unsupported(r) | Status::Fail(r) => format!("  {r}"),
            };
            text.push_str(&format!("{} {name}{reason}\n", status.word()));
        }
        std::fs::write(&list_path, text).expect("tests/node-tests.txt is writable");
        return;
    }
    let committed = read_list(&list_path);
    let regressions: Vec<String> = committed
        .iter()
        .filter(|(name, status)| {
            status.as_str() == "pass" && results.get(*name).is_some_and(|s| *s != Status::Pass)
        })
        .map(|(name, _)| format!("{name}: {:?}", results[name]))
        .collect();
    assert!(
        regressions.is_empty(),
        "node tests that passed before fail now:\n{}",
        regressions.join("\n")
    );
}
