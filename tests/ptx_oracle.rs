//! The GPU backend without a GPU: every ONNX node test that passes on the CPU, compiled for
//! `--target cuda`, has its PTX assembled by `ptxas` for sm_80 and sm_90 (no errors, no
//! register spills) and run in the PTX interpreter (`memc-ptx-interp`, the oracle for the
//! emitter), against the test's expected outputs.
//!
//! The zoo's GPU plans are checked the same way in `tests/ptx_zoo.rs`. Needs the test venv
//! (`scripts/test`: onnx's node tests, and ptxas from `nvidia-cuda-nvcc-cu12`); without it the
//! test says it is skipped, unless `MEMC_REQUIRE_ZOO` is set, which makes that a failure.

mod common;
#[path = "common/node_harness.rs"]
mod node_harness;
#[path = "../codegen/tests/common/ptx.rs"]
#[allow(dead_code)]
mod ptx;

use node_harness::{
    compare, compile_binding_shape_inputs, data_sets, decode_tensor, node_dir, one_line,
    read_inputs, TestTensor, NODE_TESTS,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The tests `tests/node-tests.txt` lists as passing.
fn passing_tests() -> Vec<String> {
    let text = std::fs::read_to_string(common::root().join("tests/node-tests.txt"))
        .expect("tests/node-tests.txt exists");
    text.lines()
        .filter_map(|l| l.strip_prefix("pass "))
        .map(|name| name.trim().to_string())
        .collect()
}

/// Compiles one node test for the cuda target and runs it in the interpreter on each of its
/// data sets; returns the PTX module's text.
fn run_one(dir: &Path, scratch: &Path) -> Result<String, String> {
    let options = memc::compile::CompileOptions {
        lower: true,
        plan_budget: std::time::Duration::from_millis(20),
        target: memc_codegen::Target::Cuda,
        ..Default::default()
    };
    // The inputs the CPU run bound as constants are bound here too.
    let (compiled, _) = compile_binding_shape_inputs(dir, &options)
        .map_err(|d| format!("compile: {} {}", d.message, d.notes.join(" ")))?;
    let program = compiled.program.ok_or("no program")?;
    let module = compiled.ptx.ok_or("no PTX module")?;
    // The weights section exactly as the plan file holds it (packed slots included).
    let name = dir
        .file_name()
        .map_or("t".into(), |n| n.to_string_lossy().into_owned());
    let plan_path = scratch.join(format!("{name}.plan"));
    let mut meta = memc_runtime::plan::PlanMeta::new("model.onnx", "cuda", program.clone());
    meta.ptx = Some(module.clone());
    memc_runtime::plan::write_plan(&plan_path, &meta, &compiled.module.weights)
        .map_err(|e| format!("write plan: {e}"))?;
    let plan = memc_runtime::plan::PlanFile::open(&plan_path).map_err(|e| e.to_string())?;
    let weights = plan.weights().to_vec();
    drop(plan);
    let _ = std::fs::remove_file(&plan_path);

    for set in data_sets(dir) {
        let names: Vec<String> = program.inputs.iter().map(|io| io.name.clone()).collect();
        let inputs: Vec<TestTensor> = read_inputs(&set, &names).map_err(|s| format!("{s:?}"))?;
        let mut arena = vec![0u8; program.arena_size as usize];
        for (io, t) in program.inputs.iter().zip(&inputs) {
            let at = io.byte_offset as usize;
            arena[at..at + t.data().len()].copy_from_slice(t.data());
        }
        let mut state = vec![0u8; program.state_size as usize];
        ptx::run_program_in_interpreter(&program, &module, &mut arena, &weights, &mut state)
            .map_err(|e| format!("interpreter: {}", one_line(&e)))?;
        for (i, io) in program.outputs.iter().enumerate() {
            let want = decode_tensor(&set.join(format!("output_{i}.pb")))?;
            let region = match io.region {
                memc_codegen::kernel::Region::Weights => &weights,
                _ => &arena,
            };
            // An output with a run-time extent is trimmed to what its slot holds.
            let (shape, bytes) = io.read_output(region, &arena)?;
            if let Some(diff) = compare(&io.name, &want, io.elem, &shape, &bytes, NODE_TESTS) {
                return Err(diff);
            }
        }
    }
    Ok(module.text)
}

#[test]
fn passing_node_tests_assemble_and_run_as_ptx() {
    let Some(dir) = node_dir() else {
        assert!(
            std::env::var_os("MEMC_REQUIRE_ZOO").is_none(),
            "MEMC_REQUIRE_ZOO is set but .venv has no onnx backend test data (run scripts/test)"
        );
        println!("skipped: no .venv with onnx (scripts/test makes it)");
        return;
    };
    let filter = std::env::var("MEMC_NODE_FILTER").ok();
    let tests: Vec<String> = passing_tests()
        .into_iter()
        .filter(|t| filter.as_deref().is_none_or(|f| t.contains(f)))
        .filter(|t| dir.join(t).join("model.onnx").is_file())
        .collect();
    let scratch = std::env::temp_dir().join(format!("memc-ptx-oracle-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("the temp dir is writable");
    let next = AtomicUsize::new(0);
    let failures: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
    let modules: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(test) = tests.get(i) else { break };
                match run_one(&dir.join(test), &scratch) {
                    Ok(text) => modules.lock().unwrap().push((test.clone(), text)),
                    Err(e) => {
                        failures.lock().unwrap().insert(test.clone(), one_line(&e));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    let mut modules = modules.into_inner().unwrap();
    modules.sort();
    println!(
        "node tests through PTX in the interpreter: {} of {} match their expected outputs",
        modules.len(),
        tests.len()
    );
    for (name, why) in &failures {
        println!("  fail {name}: {why}");
    }

    // ptxas: every module for both architectures, a few modules per call (entry names are
    // unique within a test's module only, so each module is assembled on its own).
    let assembled = AtomicUsize::new(0);
    let asm_failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let next = AtomicUsize::new(0);
    let skipped = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((name, text)) = modules.get(i) else {
                    break;
                };
                for arch in ["sm_80", "sm_90"] {
                    match ptx::assemble(text, arch) {
                        None => {
                            skipped.fetch_add(1, Ordering::Relaxed);
                        }
                        Some(Ok(_)) => {
                            assembled.fetch_add(1, Ordering::Relaxed);
                        }
                        Some(Err(e)) => asm_failures
                            .lock()
                            .unwrap()
                            .push(format!("{name} ({arch}): {}", one_line(&e))),
                    }
                }
            });
        }
    });
    let asm_failures = asm_failures.into_inner().unwrap();
    println!(
        "ptxas: {} modules assembled (sm_80 and sm_90), {} failed",
        assembled.load(Ordering::Relaxed),
        asm_failures.len()
    );
    for f in &asm_failures {
        println!("  {f}");
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        failures.is_empty() && asm_failures.is_empty(),
        "{} node tests fail through PTX, {} modules do not assemble cleanly",
        failures.len(),
        asm_failures.len()
    );
}
