//! `memc compile -o`, `memc inspect` and `memc run` as a new user meets them: the bundled
//! example compiled, inspected and run (its output compared with onnxruntime's, stored beside
//! it by `examples/make_examples.py`), and every mistake such a user makes — a missing `-o`, an
//! unbound dim, a wrong input name, dtype or shape, a missing input, a corrupted, truncated or
//! foreign plan file — answered with a clear message and a non-zero exit. Messages are insta
//! snapshots, with scratch paths replaced by `<tmp>`.

mod common;

use common::mask_numbers;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Out {
    code: i32,
    text: String,
}

fn memc(args: &[&str], scratch: &Path) -> Out {
    let output = Command::new(env!("CARGO_BIN_EXE_memc"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the memc binary runs");
    let code = output.status.code().unwrap_or(-1);
    let text = format!(
        "exit code: {code}\n----- stdout -----\n{}----- stderr -----\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
    .replace(scratch.to_str().expect("utf-8 path"), "<tmp>");
    Out { code, text }
}

/// Lines that hold timings vary from run to run; keep their keys only.
fn without_timings(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with("load") || l.starts_with("run ") {
                format!("{} <timings>", &l[..4])
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memc-cli-run-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    dir
}

fn compile_example(dir: &Path) -> PathBuf {
    let plan = dir.join("classifier.plan");
    let out = memc(
        &[
            "compile",
            "examples/classifier.onnx",
            "--dim",
            "batch=1",
            "-o",
            plan.to_str().unwrap(),
        ],
        dir,
    );
    assert_eq!(out.code, 0, "{}", out.text);
    plan
}

#[test]
fn the_example_compiles_runs_and_matches_onnxruntime() {
    let dir = scratch("example");
    let plan = compile_example(&dir);
    let out_dir = dir.join("out");
    let out = memc(
        &[
            "run",
            plan.to_str().unwrap(),
            "--input",
            "image=examples/classifier_input.npy",
            "--output-dir",
            out_dir.to_str().unwrap(),
            "--repeat",
            "3",
        ],
        &dir,
    );
    assert_eq!(out.code, 0, "{}", out.text);
    insta::assert_snapshot!("run_example", without_timings(&out.text));
    let got = memc_runtime::npy::read_npy(&out_dir.join("probs.npy")).expect("memc wrote probs");
    let want = memc_runtime::npy::read_npy(Path::new("examples/classifier_expected.npy"))
        .expect("the expected output is committed");
    assert_eq!(got.shape(), want.shape());
    let (got, want) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-4 * w.abs(),
            "probs[{i}]: memc {g}, onnxruntime {w}"
        );
    }
    let inspect = memc(&["inspect", plan.to_str().unwrap()], &dir);
    assert_eq!(inspect.code, 0, "{}", inspect.text);
    let json = memc(
        &["inspect", "--json", "--verify", plan.to_str().unwrap()],
        &dir,
    );
    assert_eq!(json.code, 0, "{}", json.text);
    let stdout = json.text.split("----- stdout -----\n").nth(1).unwrap();
    let stdout = stdout.split("----- stderr -----").next().unwrap();
    let value: serde_json::Value = serde_json::from_str(stdout).expect("inspect --json is JSON");
    assert_eq!(value["meta"]["model"], "classifier.onnx");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compile_mistakes() {
    let dir = scratch("compile");
    let no_output = memc(
        &["compile", "examples/classifier.onnx", "--dim", "batch=1"],
        &dir,
    );
    assert_eq!(no_output.code, 2);
    insta::assert_snapshot!("compile_without_output", no_output.text);
    let plan = dir.join("x.plan");
    let unbound = memc(
        &[
            "compile",
            "examples/classifier.onnx",
            "-o",
            plan.to_str().unwrap(),
        ],
        &dir,
    );
    assert_eq!(unbound.code, 1);
    assert!(!plan.exists(), "a failed compile leaves no plan");
    insta::assert_snapshot!("compile_unbound_dim", unbound.text);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_input_mistakes() {
    let dir = scratch("inputs");
    let plan = compile_example(&dir);
    let plan = plan.to_str().unwrap();
    let write = |name: &str, tensor: memc_runtime::Tensor| -> String {
        let path = dir.join(name);
        memc_runtime::npy::write_npy(&path, tensor.as_ref()).expect("npy writes");
        path.to_str().unwrap().to_string()
    };
    let f64_image = write(
        "f64.npy",
        memc_runtime::Tensor::from_slice("x", vec![1, 3, 16, 16], &vec![0.0f64; 768]).unwrap(),
    );
    let small_image = write(
        "small.npy",
        memc_runtime::Tensor::from_slice("x", vec![1, 3, 8, 8], &vec![0.0f32; 192]).unwrap(),
    );
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "run_wrong_name",
            vec!["--input".into(), "img=examples/classifier_input.npy".into()],
        ),
        (
            "run_wrong_dtype",
            vec!["--input".into(), format!("image={f64_image}")],
        ),
        (
            "run_wrong_shape",
            vec!["--input".into(), format!("image={small_image}")],
        ),
        ("run_missing_input", vec![]),
        (
            "run_missing_file",
            vec!["--input".into(), "image=no/such.npy".into()],
        ),
        ("run_bad_binding", vec!["--input".into(), "image".into()]),
    ];
    for (name, args) in cases {
        let mut all = vec!["run", plan];
        all.extend(args.iter().map(String::as_str));
        let out = memc(&all, &dir);
        assert_ne!(out.code, 0, "{name}: {}", out.text);
        insta::assert_snapshot!(name, out.text);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damaged_plan_files() {
    let dir = scratch("damaged");
    let plan = compile_example(&dir);
    let bytes = std::fs::read(&plan).expect("the plan reads");
    let damaged = |name: &str, content: Vec<u8>| -> String {
        let path = dir.join(name);
        std::fs::write(&path, content).expect("scratch is writable");
        path.to_str().unwrap().to_string()
    };
    let mut flipped = bytes.clone();
    flipped[100] ^= 0x20;
    let mut version = bytes.clone();
    version[8] = 9;
    let cases = vec![
        ("plan_corrupted", damaged("corrupted.plan", flipped)),
        (
            "plan_truncated",
            damaged("truncated.plan", bytes[..bytes.len() - 10].to_vec()),
        ),
        ("plan_wrong_version", damaged("version.plan", version)),
        ("plan_not_a_plan", "examples/classifier.onnx".to_string()),
        ("plan_empty", damaged("empty.plan", Vec::new())),
    ];
    for (name, path) in cases {
        let run = memc(
            &[
                "run",
                &path,
                "--input",
                "image=examples/classifier_input.npy",
            ],
            &dir,
        );
        assert_eq!(run.code, 1, "{name}: {}", run.text);
        // Byte counts and checksums change with every change to the kernels; keep the words.
        let stable = mask_numbers(&run.text);
        insta::assert_snapshot!(name, stable);
        let inspect = memc(&["inspect", &path], &dir);
        assert_eq!(inspect.code, 1, "{name} inspect: {}", inspect.text);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
