//! memc and MLIR, in-process (cargo feature `mlir`; `scripts/test` builds and runs it):
//! - the oracle: every zoo model (`bench/models/`) compiled for the CPU, its plan emitted as
//!   upstream MLIR, lowered by MLIR's own pipeline and run by MLIR's ExecutionEngine on
//!   onnxruntime's reference inputs; every output must match onnxruntime, and memc's CPU
//!   backend on the same plan, within the zoo's tolerance (`tests/zoo.rs`);
//! - `--emit mlir-plan` of the zoo models parses and verifies in `mlir-opt-22` with no
//!   `--allow-unregistered-dialect` (when mlir-opt-22 is installed; `MEMC_REQUIRE_MLIR_OPT`
//!   makes a missing one a failure);
//! - memc's IR text round-trips through MLIR's real parser in-process: memc text -> MLIR parse
//!   -> MLIR print -> memc parse -> memc print gives the text memc printed (but for op
//!   locations, which MLIR prints only as aliases), for the lit tests' inputs and the zoo's IR.
//!
//! The node tests (`tests/node_tests.rs`) run every passing test through the same oracle when
//! the feature is on.
#![cfg(feature = "mlir")]

mod common;

use common::{files_with_extension, root, run, venv_python};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

const MODELS: &[&str] = &["mlp", "bert", "gpt", "resnet", "unet", "llm_qdq"];
const DIMS: &[(&str, u64)] = &[("batch", 2), ("seq", 16)];
const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-4;
/// As in `tests/zoo.rs`: onnxruntime's DequantizeLinear+MatMul fusion is less exact than the
/// model's float32 semantics, so this model's reference runs unoptimized.
const EXACT_REFERENCE: &[&str] = &["llm_qdq"];

/// The zoo, generated once for this test binary. Three tests read it and the harness runs them
/// in parallel: each generating it again rewrote a model while another test read it (a CI run
/// failed on "llm_qdq.onnx: the model has no graph", a half-written file).
fn zoo(python: &Path) -> std::path::PathBuf {
    static DONE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mlir_zoo");
        std::fs::create_dir_all(&out).expect("target tmpdir is writable");
        run(Command::new(python)
            .arg(root().join("bench/models/generate.py"))
            .arg("--out")
            .arg(&out)
            .arg("--only")
            .arg(MODELS.join(",")));
        out
    })
    .clone()
}

/// The dims of `DIMS` that `path`'s model has.
fn dims_of(path: &Path) -> HashMap<String, u64> {
    let symbolic = memc::compile::compile(path, &Default::default())
        .unwrap_or_else(|d| panic!("{}: {}", path.display(), d.message));
    let text = memc::ir::print_module(&symbolic.symbolic);
    DIMS.iter()
        .filter(|(name, _)| text.contains(&format!("\"{name}\"")))
        .map(|&(name, value)| (name.to_string(), value))
        .collect()
}

fn as_f32(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")) as f64)
        .collect()
}

/// The worst error of `got` against `want` as a fraction of the tolerance (over 1: a miss).
fn worst(got: &[f64], want: &[f64]) -> (f64, usize) {
    got.iter()
        .zip(want)
        .enumerate()
        .map(|(i, (g, w))| ((g - w).abs() / (ATOL + RTOL * w.abs()), i))
        .fold((0.0, 0), |a, b| if b.0 > a.0 { b } else { a })
}

fn check_model(model: &str, out: &Path, python: &Path) {
    let path = out.join(format!("{model}.onnx"));
    let ref_dir = out.join(format!("ref_{model}"));
    let mut reference = Command::new(python);
    reference
        .arg(root().join("bench/models/reference.py"))
        .arg(&path)
        .arg("--out")
        .arg(&ref_dir);
    if EXACT_REFERENCE.contains(&model) {
        reference.arg("--no-graph-opt");
    }
    for (name, value) in DIMS {
        reference.arg("--dim").arg(format!("{name}={value}"));
    }
    run(&mut reference);
    let options = memc::compile::CompileOptions {
        dims: dims_of(&path),
        lower: true,
        ..Default::default()
    };
    let compiled = memc::compile::compile(&path, &options)
        .unwrap_or_else(|d| panic!("{model}: {} {}", d.message, d.notes.join(" ")));
    let program = compiled.program.clone().expect("a program");
    let plan_path = ref_dir.join(format!("{model}-mlir.plan"));
    let meta = memc_runtime::plan::PlanMeta::new(format!("{model}.onnx"), "cpu", program.clone());
    memc_runtime::plan::write_plan(&plan_path, &meta, &compiled.module.weights)
        .expect("the plan is written");
    let mut session = memc_runtime::Session::load(&plan_path).expect("the plan loads");
    let weights = session.plan().weights().to_vec();

    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ref_dir.join("meta.json")).expect("meta.json exists"),
    )
    .expect("meta.json is JSON");
    let file_of = |list: &str, name: &str| -> std::path::PathBuf {
        let file = meta[list]
            .as_array()
            .expect("meta.json lists tensors")
            .iter()
            .find(|t| t["name"] == name)
            .and_then(|t| t["file"].as_str())
            .unwrap_or_else(|| panic!("{model}: no reference tensor `{name}`"));
        ref_dir.join(file)
    };
    let inputs: Vec<memc_runtime::Tensor> = program
        .inputs
        .iter()
        .map(|io| memc_runtime::npy::read_npy(&file_of("inputs", &io.name)).expect("reads"))
        .collect();

    let started = std::time::Instant::now();
    let options = memc_codegen::mlir::EmitOptions {
        plan: compiled.plan.as_ref(),
    };
    let jit = memc_codegen::mlir::Jit::compile(&program, &options)
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    let jit_time = started.elapsed();
    let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data()).collect();
    let started = std::time::Instant::now();
    let from_mlir = jit
        .run(&weights, &bytes)
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    let run_time = started.elapsed();
    let named: Vec<(&str, memc_runtime::TensorRef)> = program
        .inputs
        .iter()
        .zip(&inputs)
        .map(|(io, t)| (io.name.as_str(), t.as_ref()))
        .collect();
    let from_cpu = session.run(&named).expect("the CPU backend runs");

    for (i, io) in program.outputs.iter().enumerate() {
        let want = memc_runtime::npy::read_npy(&file_of("outputs", &io.name)).expect("reads");
        assert_eq!(
            io.elem,
            memc_codegen::Scalar::F32,
            "{model}: the zoo's outputs are f32"
        );
        let (mlir, ort, cpu) = (
            as_f32(&from_mlir[i]),
            as_f32(want.data()),
            as_f32(from_cpu[i].data()),
        );
        assert_eq!(mlir.len(), ort.len(), "{model}: `{}` size", io.name);
        let (vs_ort, at) = worst(&mlir, &ort);
        assert!(
            vs_ort <= 1.0,
            "{model}: `{}` element {at}: MLIR {}, onnxruntime {}",
            io.name,
            mlir[at],
            ort[at]
        );
        let (vs_cpu, at) = worst(&mlir, &cpu);
        assert!(
            vs_cpu <= 1.0,
            "{model}: `{}` element {at}: MLIR {}, memc's CPU backend {}",
            io.name,
            mlir[at],
            cpu[at]
        );
        println!(
            "{model}: `{}` from MLIR's ExecutionEngine matches onnxruntime (worst {vs_ort:.3} of the tolerance) and the CPU backend (worst {vs_cpu:.3}); {} kernels, JIT {:.2} s, run {:.3} s",
            io.name,
            program.n_kernels(),
            jit_time.as_secs_f64(),
            run_time.as_secs_f64()
        );
    }
}

#[test]
fn zoo_runs_through_mlirs_execution_engine() {
    let Some(python) = venv_python() else {
        return;
    };
    let out = zoo(&python);
    for model in MODELS {
        check_model(model, &out, &python);
    }
}

/// `mlir-opt-22`, if installed (required under `MEMC_REQUIRE_MLIR_OPT`).
fn mlir_opt() -> Option<&'static str> {
    let found = Command::new("mlir-opt-22")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found && std::env::var_os("MEMC_REQUIRE_MLIR_OPT").is_some() {
        panic!("MEMC_REQUIRE_MLIR_OPT is set but mlir-opt-22 is not installed");
    }
    found.then_some("mlir-opt-22")
}

#[test]
fn emitted_plans_verify_in_mlir_opt_without_unregistered_dialects() {
    let Some(python) = venv_python() else {
        return;
    };
    let Some(opt) = mlir_opt() else {
        println!("skipped: mlir-opt-22 is not installed");
        return;
    };
    let out = zoo(&python);
    for model in MODELS {
        let path = out.join(format!("{model}.onnx"));
        let file = out.join(format!("{model}.plan.mlir"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_memc"));
        cmd.arg("compile")
            .arg(&path)
            .args(["--emit", "mlir-plan", "-o"])
            .arg(&file);
        for (name, value) in dims_of(&path) {
            cmd.arg("--dim").arg(format!("{name}={value}"));
        }
        run(&mut cmd);
        let text = std::fs::read_to_string(&file).expect("the module is written");
        assert_eq!(
            generic_op(&text),
            None,
            "{model}: an op of memc's IR in the MLIR plan"
        );
        assert!(
            text.contains("memref.view"),
            "{model}: no planned buffer views"
        );
        let verified = Command::new(opt)
            .arg(&file)
            .args(["--verify-diagnostics", "-o", "/dev/null"])
            .output()
            .expect("mlir-opt-22 runs");
        assert!(
            verified.status.success(),
            "{model}: mlir-opt-22 rejects the plan: {}",
            String::from_utf8_lossy(&verified.stderr)
        );
        println!(
            "{model}: `--emit mlir-plan` ({} KiB) verifies in mlir-opt-22",
            text.len() / 1024
        );
    }
}

/// The first op in generic syntax (`"dialect.name"(`), which upstream dialects' ops never
/// print as: an op of memc's own IR (`onnx.*`, `ms.*`, `memc.*`) left in the module.
fn generic_op(text: &str) -> Option<&str> {
    text.match_indices('"').find_map(|(at, _)| {
        let rest = &text[at + 1..];
        let name = &rest[..rest.find('"')?];
        let is_op_name = name.contains('.')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
        (is_op_name && rest[name.len() + 1..].starts_with('(')).then_some(name)
    })
}

/// `text` without its op locations (` loc("name")`): MLIR prints locations only with debug
/// info on, and then as aliases (`loc(#loc3)`, `#loc3 = loc("name")` after the module), which
/// memc's parser does not read; everything else must survive the round trip.
fn without_locations(text: &str) -> String {
    text.lines()
        .map(|line| match line.rfind(" loc(\"") {
            Some(at) if line.ends_with("\")") => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if text.ends_with('\n') { "\n" } else { "" }
}

/// memc text -> MLIR's parser -> MLIR's printer -> memc's parser -> memc's printer (the same
/// text, but for op locations: [`without_locations`]).
fn round_trips(text: &str, what: &str) {
    let module = memc::ir::parse_module(text).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let printed = memc::ir::print_module(&module);
    let through_mlir =
        memc_codegen::mlir::round_trip(&printed).unwrap_or_else(|e| panic!("{what}: MLIR: {e}"));
    let back = memc::ir::parse_module(&through_mlir).unwrap_or_else(|e| {
        panic!("{what}: memc cannot parse MLIR's print: {e:?}\n{through_mlir}")
    });
    let again = memc::ir::print_module(&back);
    let printed = without_locations(&printed);
    if let Some((a, b)) = printed.lines().zip(again.lines()).find(|(a, b)| a != b) {
        panic!("{what}: the IR changed on its way through MLIR:\n  memc: {a}\n  back: {b}\n  MLIR printed:\n{through_mlir}");
    }
    assert_eq!(
        again, printed,
        "{what}: the IR changed on its way through MLIR"
    );
}

#[test]
fn ir_text_round_trips_through_mlirs_parser_in_process() {
    let mut n = 0;
    for file in files_with_extension("lit-tests", "mlir") {
        let source = std::fs::read_to_string(&file).expect("lit test reads");
        for piece in memc::opt::split_input(&source) {
            // Lit tests of parse and verifier errors hold text that is not valid IR on purpose.
            let valid = memc::ir::parse_module(&piece)
                .is_ok_and(|m| memc::ir::verifier::verify_module(&m).is_ok());
            if !valid {
                continue;
            }
            round_trips(&piece, &file.display().to_string());
            n += 1;
        }
    }
    assert!(n > 10, "only {n} lit-test modules parsed");
    if let Some(python) = venv_python() {
        let out = zoo(&python);
        for model in MODELS {
            let path = out.join(format!("{model}.onnx"));
            let compiled = memc::compile::compile(&path, &Default::default())
                .unwrap_or_else(|d| panic!("{model}: {}", d.message));
            round_trips(&memc::ir::print_module(&compiled.module), model);
            n += 1;
        }
    }
    println!("{n} modules round-trip through MLIR's parser");
}

#[test]
fn mlir_parse_errors_are_errors() {
    let err = memc_codegen::mlir::round_trip("func.func @f( {").unwrap_err();
    assert!(
        matches!(err, memc_codegen::mlir::MlirError::Parse(ref m) if m.contains("loc(")),
        "{err}"
    );
}
