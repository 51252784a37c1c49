//! The zoo's GPU plans without a GPU: each model of the zoo (`bench/models/`) that the PTX
//! interpreter can run in reasonable time is compiled for `--target cuda` with
//! `batch=2, seq=16`, its PTX assembled by `ptxas` (sm_80, sm_90, no spills) and run in the
//! interpreter (`memc-ptx-interp`) on onnxruntime's reference inputs; every output must match
//! onnxruntime within the zoo's tolerance (`tests/zoo.rs`). `llm_qdq` (about 10^10 products at
//! these shapes) is too slow to interpret: its low-bit kernels are checked on smaller shapes
//! in `codegen/tests/ptx_gemm.rs` and the whole model on a real GPU (`MEMC_ZOO_TARGET=cuda`).
//!
//! Needs the test venv (`scripts/test`); without it the test says it is skipped, unless
//! `MEMC_REQUIRE_ZOO` is set.

mod common;
#[path = "../codegen/tests/common/ptx.rs"]
#[allow(dead_code)]
mod ptx;

use common::{root, run, venv_python};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

const MODELS: &[&str] = &["mlp", "bert", "gpt", "resnet", "unet"];
const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-4;
/// Programs above this many scalar operations (`memc_codegen::reference::cost`) are too slow
/// for the interpreter in a test run; none of `MODELS` is above it today.
const COST_BOUND: u64 = 2_000_000_000;

fn check_model(model: &str, out: &Path, python: &Path) {
    let path = out.join(format!("{model}.onnx"));
    let ref_dir = out.join(format!("ref_{model}"));
    run(Command::new(python)
        .arg(root().join("bench/models/reference.py"))
        .arg(&path)
        .arg("--out")
        .arg(&ref_dir)
        .args(["--dim", "batch=2", "--dim", "seq=16"]));
    let symbolic = memc::compile::compile(&path, &Default::default())
        .unwrap_or_else(|d| panic!("{model}: {}", d.message));
    let names = Some(memc::ir::print_module(&symbolic.symbolic));
    let mut dims = HashMap::new();
    for (name, value) in [("batch", 2u64), ("seq", 16)] {
        if names
            .as_deref()
            .is_some_and(|t| t.contains(&format!("\"{name}\"")))
        {
            dims.insert(name.to_string(), value);
        }
    }
    let options = memc::compile::CompileOptions {
        dims,
        lower: true,
        target: memc_codegen::Target::Cuda,
        ..Default::default()
    };
    let compiled = memc::compile::compile(&path, &options)
        .unwrap_or_else(|d| panic!("{model}: {} {}", d.message, d.notes.join(" ")));
    let program = compiled.program.expect("a program");
    let module = compiled.ptx.expect("a PTX module");
    let cost = memc_codegen::reference::cost(&program);
    if cost > COST_BOUND {
        println!("{model}: skipped, {cost} scalar operations are too many for the interpreter");
        return;
    }
    for arch in ["sm_80", "sm_90"] {
        if let Some(result) = ptx::assemble(&module.text, arch) {
            result.unwrap_or_else(|e| panic!("{model} ({arch}): {e}"));
        }
    }
    let plan_path = ref_dir.join(format!("{model}-cuda.plan"));
    let mut meta =
        memc_runtime::plan::PlanMeta::new(format!("{model}.onnx"), "cuda", program.clone());
    meta.ptx = Some(module.clone());
    memc_runtime::plan::write_plan(&plan_path, &meta, &compiled.module.weights)
        .expect("the plan is written");
    let weights = memc_runtime::plan::PlanFile::open(&plan_path)
        .expect("the plan opens")
        .weights()
        .to_vec();

    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ref_dir.join("meta.json")).expect("meta.json exists"),
    )
    .expect("meta.json is JSON");
    let file_of = |list: &str, name: &str| -> String {
        meta[list]
            .as_array()
            .expect("meta.json lists tensors")
            .iter()
            .find(|t| t["name"] == name)
            .and_then(|t| t["file"].as_str())
            .unwrap_or_else(|| panic!("{model}: no reference tensor `{name}`"))
            .to_string()
    };
    let mut arena = vec![0u8; program.arena_size as usize];
    for io in &program.inputs {
        let t = memc_runtime::npy::read_npy(&ref_dir.join(file_of("inputs", &io.name)))
            .expect("a reference input reads");
        let at = io.byte_offset as usize;
        arena[at..at + t.data().len()].copy_from_slice(t.data());
    }
    let mut state = vec![0u8; program.state_size as usize];
    let started = std::time::Instant::now();
    ptx::run_program_in_interpreter(&program, &module, &mut arena, &weights, &mut state)
        .unwrap_or_else(|e| panic!("{model}: interpreter: {e}"));
    for io in &program.outputs {
        let want = memc_runtime::npy::read_npy(&ref_dir.join(file_of("outputs", &io.name)))
            .expect("a reference output reads");
        let at = io.byte_offset as usize;
        let got: &[u8] = match io.region {
            memc_codegen::kernel::Region::Weights => &weights[at..at + io.byte_size() as usize],
            _ => &arena[at..at + io.byte_size() as usize],
        };
        assert_eq!(want.data().len(), got.len(), "{model}: `{}` size", io.name);
        let mut worst = 0.0f64;
        for (i, (g, w)) in got.chunks(4).zip(want.data().chunks(4)).enumerate() {
            let g = f32::from_le_bytes(g.try_into().expect("4 bytes")) as f64;
            let w = f32::from_le_bytes(w.try_into().expect("4 bytes")) as f64;
            let err = (g - w).abs();
            assert!(
                err <= ATOL + RTOL * w.abs(),
                "{model}: `{}` element {i}: PTX {g}, onnxruntime {w}",
                io.name
            );
            worst = worst.max(err / (ATOL + RTOL * w.abs()));
        }
        println!(
            "{model}: `{}` from the PTX interpreter matches onnxruntime (worst error {worst:.3} of the tolerance; {} kernels, {:.1} s)",
            io.name,
            module.launches.len(),
            started.elapsed().as_secs_f64()
        );
    }
}

#[test]
fn zoo_gpu_plans_run_in_the_ptx_interpreter() {
    let Some(python) = venv_python() else {
        return;
    };
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ptx_zoo");
    std::fs::create_dir_all(&out).expect("target tmpdir is writable");
    run(Command::new(&python)
        .arg(root().join("bench/models/generate.py"))
        .arg("--out")
        .arg(&out)
        .arg("--only")
        .arg(MODELS.join(",")));
    for model in MODELS {
        check_model(model, &out, &python);
    }
}
