//! A decoder step built on ONNX's `Attention` and `RotaryEmbedding` (opset 23), through memc
//! and checked against onnxruntime: `tests/onnx/make_attention.py --reference` writes the model
//! (symbolic `batch`, `seq`, `past` and `total` dims; grouped-query heads, a key-value cache, a
//! bool mask, `is_causal`, a softcap, partial rotary embeddings at position ids) with inputs
//! and onnxruntime's outputs; the test compiles it with those dims bound, runs the plan and
//! compares every output within `|memc - ort| <= ATOL + RTOL * |ort|`.
//!
//! Needs the venv that `scripts/test` makes; without it the test says it is skipped (a failure
//! when `MEMC_REQUIRE_ZOO` is set).

mod common;

use common::{run, to_f64, venv_python};
use std::process::Command;

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

#[test]
fn decoder_step_matches_onnxruntime() {
    let Some(python) = venv_python() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("memc-attention-{}", std::process::id()));
    run(Command::new(&python)
        .arg(common::root().join("tests/onnx/make_attention.py"))
        .arg("--reference")
        .arg(&dir));
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("meta.json")).expect("the script writes meta.json"),
    )
    .expect("meta.json is JSON");
    let plan = dir.join("decoder.plan");
    let mut compile = Command::new(env!("CARGO_BIN_EXE_memc"));
    compile
        .arg("compile")
        .arg(dir.join("decoder.onnx"))
        .arg("-o")
        .arg(&plan);
    for (name, value) in meta["dims"].as_object().expect("meta.json has dims") {
        compile.arg("--dim").arg(format!("{name}={value}"));
    }
    run(&mut compile);
    let out_dir = dir.join("memc");
    let mut memc_run = Command::new(env!("CARGO_BIN_EXE_memc"));
    memc_run
        .arg("run")
        .arg(&plan)
        .arg("--output-dir")
        .arg(&out_dir);
    for input in meta["inputs"].as_array().expect("meta.json lists inputs") {
        let (name, file) = (input["name"].as_str(), input["file"].as_str());
        let (Some(name), Some(file)) = (name, file) else {
            panic!("meta.json: an input without name or file: {input}");
        };
        memc_run
            .arg("--input")
            .arg(format!("{name}={}", dir.join(file).display()));
    }
    run(&mut memc_run);
    let outputs = meta["outputs"].as_array().expect("meta.json lists outputs");
    assert_eq!(outputs.len(), 3, "out, present_key and present_value");
    for output in outputs {
        let name = output["name"].as_str().expect("output name");
        let file = output["file"].as_str().expect("output file");
        let want = memc_runtime::npy::read_npy(&dir.join(file)).expect("the reference reads");
        let got = memc_runtime::npy::read_npy(&out_dir.join(format!("{name}.npy")))
            .unwrap_or_else(|e| panic!("memc wrote no `{name}`: {e}"));
        assert_eq!(got.shape(), want.shape(), "`{name}` shape");
        let (g, w) = (to_f64(&got), to_f64(&want));
        let mut worst = 0.0f64;
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            let err = (a - b).abs();
            assert!(
                err <= ATOL + RTOL * b.abs(),
                "`{name}` element {i}: memc {a}, onnxruntime {b}"
            );
            worst = worst.max(err / (ATOL + RTOL * b.abs()));
        }
        println!(
            "`{name}` matches onnxruntime ({} elements, worst error {worst:.3} of the tolerance)",
            g.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
