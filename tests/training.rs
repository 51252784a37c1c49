//! Training steps: onnxruntime-training's artifacts compiled and run by memc, step by step,
//! checked against onnxruntime-training running the same graph on the same inputs.
//!
//! `bench/training/zoo.py` (with the training venv, `.venv-train`) writes each training zoo
//! model's `training_model.onnx`, its parameters, and two reference steps: step 1 resets the
//! gradient buffers (`lazy_reset_grad` true), step 2 accumulates into them on other data. For
//! each model the test compiles the step (`memc compile --dim batch=2 [--dim seq=16]`), runs step
//! 1 from the parameters (`memc run --state state0 --save-state s1`) and step 2 from what step 1
//! left (`--state s1 --save-state s2`), and compares the loss and every parameter and gradient
//! buffer with onnxruntime's after each step. A second test does the same two steps in one
//! `Session`, through the library, so the state stays in memory between them.
//!
//! Without `.venv-train` the tests say they were skipped, unless `MEMC_REQUIRE_ZOO` is set.
//! `MEMC_TRAINING_MODELS=gpt,bert` runs the step comparison on those models only.

mod common;

use common::{root, run, to_f64, train_python};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

const MODELS: &[&str] = &["linear_mse", "mlp", "mixed", "cnn", "gpt", "bert"];
/// Gradients sum products over the batch (and sequence) in another order than onnxruntime's,
/// and the transformers chain a dozen backward ops: float32 differences of ~1e-6 relative per
/// op, against the gradients' magnitudes.
const RTOL: f64 = 2e-3;
const ATOL: f64 = 2e-5;

/// Generates the training zoo once per test binary, in the target's tmpdir.
fn zoo() -> Option<PathBuf> {
    let python = train_python()?;
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("training_zoo");
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let _ = std::fs::remove_dir_all(&out);
        print!(
            "{}",
            run(Command::new(&python)
                .arg(root().join("bench/training/zoo.py"))
                .arg("--out")
                .arg(&out)
                .arg("--only")
                .arg(MODELS.join(",")))
        );
    });
    Some(out)
}

/// `--dim NAME=VALUE` for each symbolic dim of the step.
fn dim_args(meta: &serde_json::Value) -> Vec<String> {
    meta["dims"]
        .as_object()
        .expect("meta.json has dims")
        .iter()
        .flat_map(|(k, v)| ["--dim".to_string(), format!("{k}={v}")])
        .collect()
}

fn meta(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("meta.json")).expect("zoo.py writes meta.json");
    serde_json::from_str(&text).expect("meta.json is JSON")
}

/// `(name, file)` pairs of a `meta.json` map.
fn files(map: &serde_json::Value) -> Vec<(String, String)> {
    map.as_object()
        .expect("a map of name -> file")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("a file name").to_string()))
        .collect()
}

/// Compares `got` with `want` elementwise; returns the worst error as a fraction of the
/// tolerance, panicking with the first element outside it.
fn compare(what: &str, got: &memc_runtime::Tensor, want: &memc_runtime::Tensor) -> f64 {
    assert_eq!(got.elem(), want.elem(), "{what}: element type");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (to_f64(got), to_f64(want));
    let mut worst = 0.0f64;
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let err = (a - b).abs();
        assert!(
            err <= ATOL + RTOL * b.abs(),
            "{what} element {i}: memc {a}, onnxruntime {b}"
        );
        worst = worst.max(err / (ATOL + RTOL * b.abs()));
    }
    worst
}

fn npy(path: &Path) -> memc_runtime::Tensor {
    memc_runtime::npy::read_npy(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn training_steps_match_onnxruntime_training() {
    let Some(zoo) = zoo() else {
        return;
    };
    let memc = env!("CARGO_BIN_EXE_memc");
    // `MEMC_TRAINING_MODELS=gpt,bert` checks only those.
    let only = std::env::var("MEMC_TRAINING_MODELS").ok();
    for model in MODELS.iter().filter(|m| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|x| x == **m))
    }) {
        let dir = zoo.join(model);
        let meta = meta(&dir);
        let work = dir.join("memc");
        std::fs::create_dir_all(&work).expect("the zoo directory is writable");
        let plan = work.join("step.plan");
        run(Command::new(memc)
            .arg("compile")
            .arg(dir.join("training_model.onnx"))
            .args(dim_args(&meta))
            .arg("-o")
            .arg(&plan));
        let mut state = dir.join("state0");
        let mut worst = 0.0f64;
        for (k, step) in meta["steps"]
            .as_array()
            .expect("meta.json lists steps")
            .iter()
            .enumerate()
        {
            let step_dir = dir.join(format!("step{}", k + 1));
            let saved = work.join(format!("state{}", k + 1));
            let outputs = work.join(format!("outputs{}", k + 1));
            let mut cmd = Command::new(memc);
            cmd.arg("run")
                .arg(&plan)
                .arg("--state")
                .arg(&state)
                .arg("--save-state")
                .arg(&saved)
                .arg("--output-dir")
                .arg(&outputs);
            for (name, file) in files(&step["inputs"]) {
                cmd.arg("--input").arg(format!(
                    "{name}={}",
                    step_dir.join("inputs").join(file).display()
                ));
            }
            run(&mut cmd);
            for (name, file) in files(&step["outputs"]) {
                let what = format!("{model} step {}: output `{name}`", k + 1);
                worst = worst.max(compare(
                    &what,
                    &npy(&outputs.join(&file)),
                    &npy(&step_dir.join("outputs").join(&file)),
                ));
            }
            let expected = files(&step["state"]);
            assert_eq!(
                expected.len(),
                std::fs::read_dir(&saved)
                    .expect("memc saved the state")
                    .count(),
                "{model}: memc saves every parameter and gradient buffer"
            );
            for (name, file) in expected {
                let what = format!("{model} step {}: state `{name}`", k + 1);
                worst = worst.max(compare(
                    &what,
                    &npy(&saved.join(&file)),
                    &npy(&step_dir.join("state").join(&file)),
                ));
            }
            state = saved;
        }
        println!("{model}: two steps match onnxruntime-training (worst error {worst:.3} of the tolerance)");
    }
}

#[test]
fn a_session_keeps_the_state_between_steps() {
    let Some(zoo) = zoo() else {
        return;
    };
    let dir = zoo.join("linear_mse");
    let meta = meta(&dir);
    let plan = Path::new(env!("CARGO_TARGET_TMPDIR")).join("training_session.plan");
    run(Command::new(env!("CARGO_BIN_EXE_memc"))
        .arg("compile")
        .arg(dir.join("training_model.onnx"))
        .args(["--dim", "batch=2", "-o"])
        .arg(&plan));
    let mut session = memc_runtime::Session::load(&plan).expect("the plan loads");
    let kinds: Vec<(String, &str)> = session
        .state()
        .iter()
        .map(|s| (s.name.clone(), s.kind.name()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("linear.weight".to_string(), "parameter"),
            ("linear.bias".to_string(), "parameter"),
            (
                "linear.weight_grad.accumulation.buffer".to_string(),
                "gradient"
            ),
            (
                "linear.bias_grad.accumulation.buffer".to_string(),
                "gradient"
            ),
        ]
    );
    // A run before the parameters are set is refused, and says how to set them.
    let step1 = &meta["steps"][0];
    let inputs_of = |step: &serde_json::Value, k: usize| -> Vec<(String, memc_runtime::Tensor)> {
        files(&step["inputs"])
            .into_iter()
            .map(|(name, file)| {
                let t = npy(&dir.join(format!("step{k}/inputs")).join(file));
                (name, t)
            })
            .collect()
    };
    let inputs = inputs_of(step1, 1);
    let refs: Vec<(&str, memc_runtime::TensorRef)> = inputs
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_ref()))
        .collect();
    let err = session.run(&refs).unwrap_err().to_string();
    assert!(
        err.contains("parameter `linear.weight` (f32[8, 4]) has no value"),
        "{err}"
    );
    for (name, file) in files(&meta["state0"]) {
        session
            .set_state(&name, npy(&dir.join("state0").join(file)).as_ref())
            .expect("the parameter has the plan's type");
    }
    let zeros = [0f32; 32];
    let wrong = memc_runtime::TensorRef::from_slice(&[4, 8], &zeros).expect("32 elements");
    let err = session
        .set_state("linear.weight", wrong)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "state tensor `linear.weight`: expected f32[8, 4], got f32[4, 8]"
    );
    for (k, step) in meta["steps"].as_array().expect("steps").iter().enumerate() {
        let inputs = inputs_of(step, k + 1);
        let refs: Vec<(&str, memc_runtime::TensorRef)> = inputs
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_ref()))
            .collect();
        session.run(&refs).expect("the step runs");
        for (name, file) in files(&step["state"]) {
            let got = session
                .state_tensor(&name)
                .expect("a state tensor")
                .to_tensor(&name);
            let want = npy(&dir.join(format!("step{}/state", k + 1)).join(file));
            compare(&format!("session step {}: `{name}`", k + 1), &got, &want);
        }
    }
}

#[test]
fn the_report_shows_where_training_memory_goes() {
    let Some(zoo) = zoo() else {
        return;
    };
    let model = zoo.join("linear_mse/training_model.onnx");
    let memc = env!("CARGO_BIN_EXE_memc");
    let json: serde_json::Value = serde_json::from_str(&run(Command::new(memc)
        .arg("compile")
        .arg(&model)
        .args(["--dim", "batch=2", "--emit", "plan-json"])))
    .expect("plan-json is JSON");
    let training = &json["training"];
    // Linear(8, 4): a weight and a bias, and their gradient buffers, all f32.
    assert_eq!(training["parameters"], 2);
    assert_eq!(training["parameter_bytes"], 4 * (8 * 4 + 4));
    assert_eq!(training["gradient_buffers"], 2);
    assert_eq!(training["gradient_bytes"], 4 * (8 * 4 + 4));
    // The backward pass reads `x` (for the weight's gradient): kept, with its size in `batch`.
    let kept = training["kept_for_backward"].as_array().expect("a list");
    let x = kept
        .iter()
        .find(|k| k["name"] == "x")
        .unwrap_or_else(|| panic!("x is kept for backward: {kept:?}"));
    assert_eq!(x["formula"], "32*batch");
    assert_eq!(x["producer"], "input");
    assert!(
        x["last_reader"]
            .as_str()
            .is_some_and(|r| r.contains("Grad")),
        "{x}"
    );
    let sum: u64 = kept
        .iter()
        .map(|k| k["bytes"].as_u64().expect("bytes"))
        .sum();
    assert_eq!(training["kept_for_backward_bytes"].as_u64(), Some(sum));
    let peak = &training["peak"];
    let live_at_peak = ["kept_for_backward", "transient", "scratch"]
        .iter()
        .map(|k| peak[*k].as_u64().expect("bytes"))
        .sum::<u64>();
    assert!(live_at_peak <= json["arena_size"].as_u64().expect("arena"));
    assert!(json["training"]["boundary_step"].as_u64().expect("a step") > 0);

    let svg = Path::new(env!("CARGO_TARGET_TMPDIR")).join("training_report.svg");
    let plan = Path::new(env!("CARGO_TARGET_TMPDIR")).join("training_report.plan");
    let out = Command::new(memc)
        .arg("compile")
        .arg(&model)
        .args(["--dim", "batch=2", "--report", "--report-svg"])
        .arg(&svg)
        .arg("-o")
        .arg(&plan)
        .output()
        .expect("memc runs");
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stderr);
    // `memc report` prints the same table from the plan file alone, training section included
    // (the compile's last line says the plan was written).
    let compiled_svg = std::fs::read_to_string(&svg).expect("the timeline is written");
    std::fs::remove_file(&svg).expect("the timeline is removed");
    let from_plan = run(Command::new(memc)
        .arg("report")
        .arg(&plan)
        .arg("--svg")
        .arg(&svg));
    let (compile_table, wrote) = table.trim_end().rsplit_once('\n').expect("lines");
    assert!(wrote.starts_with("memc: wrote "), "{table}");
    assert_eq!(from_plan, format!("{compile_table}\n"));
    assert_eq!(
        std::fs::read_to_string(&svg).expect("memc report wrote the timeline"),
        compiled_svg
    );
    for line in [
        "training step (forward/backward boundary at step",
        "parameters                       144 B  2 tensors",
        "gradient buffers                 144 B  2 tensors",
        "kept for backward, largest first:",
        "step peak memory",
    ] {
        assert!(table.contains(line), "the report lacks `{line}`:\n{table}");
    }
    let svg = std::fs::read_to_string(&svg).expect("the timeline is written");
    assert!(svg.contains("forward | backward (step"), "{svg}");
}

/// Runs `memc` with `args`, expecting exit code 1 and a message; returns standard error.
fn fails(args: &[OsString]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_memc"))
        .args(args)
        .output()
        .expect("memc runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// `args` as command-line arguments.
fn os(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    args.iter().map(|a| a.as_ref().to_os_string()).collect()
}

#[test]
fn state_mistakes_get_clear_errors() {
    let Some(zoo) = zoo() else {
        return;
    };
    let dir = zoo.join("linear_mse");
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let plan = tmp.join("training_errors.plan");
    run(Command::new(env!("CARGO_BIN_EXE_memc"))
        .arg("compile")
        .arg(dir.join("training_model.onnx"))
        .args(["--dim", "batch=2", "-o"])
        .arg(&plan));
    let mut args = os(&[&"run", &plan]);
    for (name, file) in files(&meta(&dir)["steps"][0]["inputs"]) {
        let binding = format!("{name}={}", dir.join("step1/inputs").join(file).display());
        args.extend(os(&[&"--input", &binding]));
    }
    // No parameters at all.
    let err = fails(&args);
    assert!(
        err.contains("parameter `linear.weight` (f32[8, 4]) has no value"),
        "{err}"
    );
    // A state directory without a parameter's file.
    let empty = tmp.join("training_empty_state");
    std::fs::create_dir_all(&empty).expect("tmp is writable");
    let err = fails(&[args.clone(), os(&[&"--state", &empty])].concat());
    assert!(err.contains("linear.weight.npy"), "{err}");
    // A parameter of the wrong shape, given as an input.
    let wrong = tmp.join("training_wrong_weight.npy");
    let zeros = [0f32; 32];
    memc_runtime::npy::write_npy(
        &wrong,
        memc_runtime::TensorRef::from_slice(&[4, 8], &zeros).expect("32 elements"),
    )
    .expect("tmp is writable");
    let binding = format!("linear.weight={}", wrong.display());
    let err = fails(&[args.clone(), os(&[&"--input", &binding])].concat());
    assert!(
        err.contains("state tensor `linear.weight`: expected f32[8, 4], got f32[4, 8]"),
        "{err}"
    );
    // State flags on a plan that keeps no state.
    let classifier = tmp.join("training_errors_classifier.plan");
    run(Command::new(env!("CARGO_BIN_EXE_memc"))
        .arg("compile")
        .arg(root().join("examples/classifier.onnx"))
        .args(["--dim", "batch=1", "-o"])
        .arg(&classifier));
    let image = format!(
        "image={}",
        root().join("examples/classifier_input.npy").display()
    );
    let err = fails(&os(&[
        &"run",
        &classifier,
        &"--input",
        &image,
        &"--save-state",
        &empty,
    ]));
    assert!(err.contains("the plan has no persistent state"), "{err}");
}
