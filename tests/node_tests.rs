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
//! A test that does not compile as it is compiles again with its small inputs (rank 0 or 1,
//! the same in every data set) bound as constants, as a user would with `memc compile --const`:
//! node tests pass `axes`, `pads`, `sizes`, `k`, `shape`, `repeats` as graph inputs, and shape
//! inference needs their values (`node_harness::compile_binding_shape_inputs`).
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
#[path = "common/node_harness.rs"]
mod node_harness;

use common::root;
use node_harness::{node_dir, run_test, Status, NODE_TESTS, REFERENCE_COST_BOUND};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const LIST: &str = "tests/node-tests.txt";

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
                let (status, checked_by_reference) = run_test(test, &scratch, NODE_TESTS);
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
    println!(
        "  {} tests compiled only with small inputs bound as constants (as `memc compile --const` binds them)",
        node_harness::COMPILED_WITH_CONSTS.load(Ordering::Relaxed)
    );
    #[cfg(feature = "mlir")]
    println!(
        "  {} programs also ran as MLIR through MLIR's ExecutionEngine ({} with float8/float4 codes not)",
        node_harness::MLIR_CHECKED.load(Ordering::Relaxed),
        node_harness::MLIR_SKIPPED.load(Ordering::Relaxed)
    );
    for (name, status) in &results {
        match status {
            Status::Fail(reason) => println!("  fail {name}: {reason}"),
            // A filtered run is for looking at a few tests: say why each is unsupported too.
            Status::Unsupported(reason) if filter.is_some() => {
                println!("  unsupported {name}: {reason}")
            }
            _ => {}
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
