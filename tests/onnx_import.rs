//! ONNX import as a user meets it, data-driven over the committed fixtures
//! (`tests/onnx/make_fixtures.py` regenerates them):
//!
//! - every model under `tests/onnx/fixtures/` imports; `memc compile --emit ir` output is an
//!   insta snapshot, parses back to the same text, and upstream mlir-opt-22 accepts it;
//! - every model under `tests/onnx/bad/` fails with exit code 1 and a message naming what and
//!   where (snapshotted), never a panic;
//! - weights are not copied: raw and external data stay slices of memory maps.

mod common;

use common::{files_with_extension, root};
use std::path::{Path, PathBuf};
use std::process::Command;

fn onnx_files(dir: &str) -> Vec<PathBuf> {
    files_with_extension(dir, "onnx")
}

/// Runs `memc compile <model> --emit ir` from the workspace root.
/// `memc compile MODEL --emit ir --no-fuse` (the imported IR after cleanup, before the
/// `egraph` fusions, which lit-tests/egraph and tests/qdq_variants.rs cover).
fn compile_ir(model: &Path, extra: &[&str]) -> (i32, String, String) {
    let relative = model.strip_prefix(root()).unwrap_or(model);
    let output = Command::new(env!("CARGO_BIN_EXE_memc"))
        .arg("compile")
        .arg(relative)
        .args(["--emit", "ir", "--no-fuse"])
        .args(extra)
        .current_dir(root())
        .output()
        .expect("the memc binary runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn fixtures_import() {
    let files = onnx_files("tests/onnx/fixtures");
    assert!(
        files.len() >= 5,
        "expected the committed fixtures, found {}",
        files.len()
    );
    for path in files {
        let name = path
            .strip_prefix(root().join("tests/onnx/fixtures"))
            .expect("under fixtures")
            .display()
            .to_string();
        let (code, stdout, stderr) = compile_ir(&path, &[]);
        if name.starts_with("unsupported") {
            assert_eq!(code, 1, "{name} must be rejected");
            insta::assert_snapshot!(format!("fixture_{name}"), stderr);
            continue;
        }
        assert_eq!(code, 0, "{name} failed to import:\n{stderr}");
        let module = memc::ir::parse_module(&stdout).unwrap_or_else(|d| {
            panic!(
                "{name}: output does not parse: {}",
                d.render("out", &stdout, false)
            )
        });
        assert_eq!(
            memc::ir::print_module(&module),
            stdout,
            "{name}: round trip"
        );
        insta::assert_snapshot!(format!("fixture_{name}"), stdout);
    }
}

#[test]
fn bad_models_fail_with_a_message() {
    let files = onnx_files("tests/onnx/bad");
    assert!(
        files.len() >= 10,
        "expected the committed bad models, found {}",
        files.len()
    );
    for path in files {
        let name = path
            .strip_prefix(root().join("tests/onnx/bad"))
            .expect("under bad")
            .display()
            .to_string();
        let (code, stdout, stderr) = compile_ir(&path, &[]);
        assert_eq!(
            code, 1,
            "{name}: expected exit code 1, got {code}\n{stderr}"
        );
        assert!(stdout.is_empty(), "{name}: no IR for a bad model");
        assert!(
            !stderr.contains("panicked"),
            "{name}: memc panicked:\n{stderr}"
        );
        // Absolute paths differ between machines; the messages name them relative to the root.
        let stderr = stderr.replace(&root().display().to_string(), "<root>");
        insta::assert_snapshot!(format!("bad_{name}"), stderr);
    }
}

#[test]
fn weights_stay_in_the_memory_map() {
    use memc::ir::WeightBytes;
    let fixtures = root().join("tests/onnx/fixtures");
    let raw = memc::ir::onnx::import_file(&fixtures.join("mlp_raw.onnx")).expect("mlp_raw imports");
    assert!(raw.module.weights.len() >= 2);
    for (_, w) in raw.module.weights.iter() {
        assert!(
            matches!(w.data(), WeightBytes::Mapped(_)),
            "`{}` was copied",
            w.name()
        );
    }
    let external = memc::ir::onnx::import_file(&fixtures.join("external/model.onnx"))
        .expect("external imports");
    let mapped = external
        .module
        .weights
        .iter()
        .filter(|(_, w)| matches!(w.data(), WeightBytes::Mapped(_)))
        .count();
    assert!(mapped >= 1, "external data must be mapped, not read");
}

#[test]
fn dim_bindings_specialize_the_ir() {
    let model = root().join("tests/onnx/fixtures/symbolic.onnx");
    let (code, stdout, stderr) = compile_ir(&model, &["--dim", "batch=2", "--dim", "seq=16"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !stdout.contains("memc.dims"),
        "every dim is bound, so no symbol remains:\n{stdout}"
    );
    let (code, _, stderr) = compile_ir(&model, &["--dim", "batchh=2"]);
    assert_eq!(code, 1);
    insta::assert_snapshot!(stderr);
    let (code, _, stderr) = compile_ir(&model, &["--dim", "batch"]);
    assert_eq!(code, 2);
    insta::assert_snapshot!(stderr);
}

/// The script that runs a fixture in onnxruntime: writes `in_<name>.npy` for every input
/// (a ramp) and `want_<name>.npy` for every output into the directory `argv[2]`.
const ORT_RUN: &str = r#"
import sys, numpy as np, onnxruntime as ort
model, out = sys.argv[1], sys.argv[2]
s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
feeds = {}
for i in s.get_inputs():
    n = int(np.prod(i.shape))
    feeds[i.name] = np.linspace(-1, 2, n, dtype=np.float32).reshape(i.shape)
    np.save(f"{out}/in_{i.name}.npy", feeds[i.name])
for o, v in zip(s.get_outputs(), s.run(None, feeds)):
    np.save(f"{out}/want_{o.name}.npy", v)
"#;

/// The unrolled Loop and Scan fixtures (a loop-carried value, scan outputs, the iteration
/// number; a reverse scan input and a scan output axis of 1) compute what onnxruntime
/// computes.
#[test]
fn unrolled_loops_match_onnxruntime() {
    let Some(python) = common::venv_python() else {
        return;
    };
    for name in ["loop_unrolled", "scan_unrolled"] {
        let model = root().join(format!("tests/onnx/fixtures/{name}.onnx"));
        let dir = std::env::temp_dir().join(format!("memc-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("the temp dir is writable");
        common::run(
            Command::new(&python)
                .args(["-c", ORT_RUN])
                .arg(&model)
                .arg(&dir),
        );
        let plan = dir.join("model.plan");
        common::run(
            Command::new(env!("CARGO_BIN_EXE_memc"))
                .arg("compile")
                .arg(&model)
                .arg("-o")
                .arg(&plan),
        );
        let mut run = Command::new(env!("CARGO_BIN_EXE_memc"));
        run.arg("run")
            .arg(&plan)
            .arg("--output-dir")
            .arg(dir.join("got"));
        let mut wants = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("the temp dir lists") {
            let file = entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if let Some(input) = file
                .strip_prefix("in_")
                .and_then(|f| f.strip_suffix(".npy"))
            {
                run.arg("--input")
                    .arg(format!("{input}={}", dir.join(&file).display()));
            }
            if let Some(output) = file.strip_prefix("want_") {
                wants.push(output.to_string());
            }
        }
        common::run(&mut run);
        assert!(!wants.is_empty(), "{name}: onnxruntime wrote no outputs");
        for output in wants {
            let read = |path: PathBuf| {
                memc_runtime::npy::read_npy(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            };
            let want = read(dir.join(format!("want_{output}")));
            let got = read(dir.join("got").join(&output));
            assert_eq!(got.shape(), want.shape(), "{name}: {output}: shape");
            for (g, w) in common::to_f64(&got).iter().zip(common::to_f64(&want)) {
                assert!(
                    (g - w).abs() <= 1e-5 + 1e-5 * w.abs(),
                    "{name}: {output}: memc {g}, onnxruntime {w}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
