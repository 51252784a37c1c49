//! Real exporters' output through memc, checked against onnxruntime.
//!
//! `tests/fixtures/exporters/<fixture>/` holds a model as `torch.onnx.export` wrote it (the
//! dynamo exporter, and the TorchScript exporter with dynamic axes; small CNNs, a transformer
//! block, and `transformers` BERT, GPT-2, ViT, T5, a Whisper encoder and MobileNetV2 built from
//! tiny configs with random weights), random inputs, onnxruntime's outputs on them and a
//! `meta.json` naming the symbolic dims and the values to bind. `bench/exporters/export.py`
//! writes them (it needs torch; this test does not).
//!
//! Every fixture is compiled with its dims bound (`memc compile --dim ...`), run on the CPU
//! backend (`memc run`), and each output must match onnxruntime's within
//! `|memc - ort| <= ATOL + RTOL * |ort|`, the tolerance of `tests/zoo.rs`. A fixture listed in
//! `KNOWN_FAILURES` must fail to compile with the error given there (a FIXME: when memc learns
//! to compile it, this test fails and the entry goes).

mod common;

use common::{root, run, to_f64};
use std::path::Path;
use std::process::Command;

const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-4;
/// The fewest fixtures the directory must hold (so a missing directory cannot pass).
const MIN_FIXTURES: usize = 16;

/// Fixtures memc does not compile yet, with the part of the error `memc compile` prints.
/// (None today: `mobilenet_ts` was one until `Slice` and `Transpose` folded known values of
/// any rank, which resolves the TorchScript exporter's `F.pad` chain.)
const KNOWN_FAILURES: &[(&str, &str)] = &[];

fn meta_str<'a>(v: &'a serde_json::Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("meta.json: `{key}` is a string"))
}

/// Compiles and runs one fixture; returns the plan error when `memc compile` fails, else the
/// worst error over its outputs as a share of the tolerance.
fn check_fixture(dir: &Path, tmp: &Path) -> Result<f64, String> {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("meta.json")).expect("meta.json exists"),
    )
    .expect("meta.json is JSON");
    let mut dim_args = Vec::new();
    for (dim, value) in meta["dims"].as_object().expect("meta.json: `dims`") {
        dim_args.push("--dim".to_string());
        dim_args.push(format!("{dim}={}", value.as_u64().expect("a dim value")));
    }
    let plan = tmp.join(format!("{name}.plan"));
    let compiled = Command::new(env!("CARGO_BIN_EXE_memc"))
        .arg("compile")
        .arg(dir.join("model.onnx"))
        .arg("-o")
        .arg(&plan)
        .args(&dim_args)
        .output()
        .expect("memc runs");
    if !compiled.status.success() {
        return Err(String::from_utf8_lossy(&compiled.stderr).into_owned());
    }
    let out_dir = tmp.join(format!("{name}_outputs"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memc"));
    cmd.arg("run").arg(&plan).arg("--output-dir").arg(&out_dir);
    for input in meta["inputs"].as_array().expect("meta.json lists inputs") {
        cmd.arg("--input").arg(format!(
            "{}={}",
            meta_str(input, "name"),
            dir.join(meta_str(input, "file")).display()
        ));
    }
    run(&mut cmd);
    let mut worst = 0.0f64;
    for output in meta["outputs"].as_array().expect("meta.json lists outputs") {
        let file = meta_str(output, "file");
        let want = memc_runtime::npy::read_npy(&dir.join(file)).expect("reference output reads");
        // memc names output files as export.py does: `<sanitized name>.npy`.
        let base = Path::new(file).file_name().expect("a file name");
        let got = memc_runtime::npy::read_npy(&out_dir.join(base))
            .unwrap_or_else(|e| panic!("{name}: memc wrote no `{file}`: {e}"));
        assert_eq!(got.elem(), want.elem(), "{name}: `{file}` element type");
        assert_eq!(got.shape(), want.shape(), "{name}: `{file}` shape");
        let (g, w) = (to_f64(&got), to_f64(&want));
        let mut worst_here = 0.0f64;
        let mut max_abs = 0.0f64;
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            let err = (a - b).abs();
            assert!(
                err <= ATOL + RTOL * b.abs(),
                "{name}: `{file}` element {i}: memc {a}, onnxruntime {b}"
            );
            worst_here = worst_here.max(err / (ATOL + RTOL * b.abs()));
            max_abs = max_abs.max(err);
        }
        println!(
            "{name}: `{file}` matches onnxruntime ({} elements, max |diff| {max_abs:.2e}, worst {worst_here:.3} of the tolerance)",
            g.len()
        );
        worst = worst.max(worst_here);
    }
    Ok(worst)
}

#[test]
fn exporter_fixtures_match_onnxruntime() {
    let fixtures = root().join("tests/fixtures/exporters");
    let mut dirs: Vec<_> = std::fs::read_dir(&fixtures)
        .expect("tests/fixtures/exporters exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("meta.json").exists())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= MIN_FIXTURES,
        "expected at least {MIN_FIXTURES} fixtures, found {}",
        dirs.len()
    );
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("exporters");
    std::fs::create_dir_all(&tmp).expect("target tmpdir is writable");
    let mut seen_known = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let known = KNOWN_FAILURES.iter().find(|(f, _)| *f == name);
        match (check_fixture(dir, &tmp), known) {
            (Ok(worst), None) => {
                println!("{name}: ok, worst error {worst:.3} of the tolerance")
            }
            (Ok(_), Some(_)) => {
                panic!("{name} now compiles and matches: remove it from KNOWN_FAILURES")
            }
            (Err(stderr), Some((_, reason))) => {
                assert!(
                    stderr.contains(reason),
                    "{name} fails otherwise than recorded:\n{stderr}\nexpected: {reason}"
                );
                println!("{name}: known failure (FIXME): {reason}");
                seen_known.push(name);
            }
            (Err(stderr), None) => panic!("{name}: memc compile failed:\n{stderr}"),
        }
    }
    for (name, _) in KNOWN_FAILURES {
        assert!(
            seen_known.iter().any(|s| s == name),
            "KNOWN_FAILURES names `{name}`, which is not a fixture"
        );
    }
}
