//! QDQ models made by onnxruntime's own quantizers with settings the zoo does not use
//! (`bench/models/qdq_variants.py`: 4-bit blocks of 16, 64 and 128 and per channel, symmetric
//! int4 and asymmetric uint4; int8 and uint8 per-channel weights from `quantize_static` with
//! quantized activations; int8 per-channel weights alone), each compiled to a plan file, run
//! and compared with onnxruntime, output by output.
//!
//! The reference runs with onnxruntime's graph optimizations off, so it computes the model as
//! written (DequantizeLinear, then a float MatMul); memc must match it within
//! `|memc - ort| <= ATOL + RTOL * |ort|`. Where activations are quantized too, float math in
//! another order can round an activation that lies on a rounding boundary the other way, which
//! moves the output by whole quantization steps. The input used here has one at `y`'s own
//! quantizer, 2e-7 relative from the boundary: onnxruntime's optimized run (integer math) puts
//! that element one step away, and so does the unoptimized run when the per-channel weight
//! scale multiplies after the sum instead of before. For those variants a few elements (at most
//! `FLIP_FRACTION` of an output) may miss the float tolerance if they stay within `FLIP_STEPS`
//! steps of the output's quantizer. The test checks outputs only, never how memc computes them.
//!
//! The test also prints how far onnxruntime with its default optimizations (MatMulNBits,
//! QLinearMatMul and friends, with integer or quantized-activation arithmetic) lands from its
//! own unoptimized run, for the record; that is not asserted.
//!
//! Like `tests/zoo.rs`, it needs the venv that `scripts/test` creates; without it the test says
//! it is skipped, unless `MEMC_REQUIRE_ZOO` is set, which makes a missing venv a failure.

mod common;

use common::{root, run, to_f64, venv_python};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every variant `qdq_variants.py` writes, in its order.
const VARIANTS: &[&str] = &[
    "q4_b16_sym",
    "q4_b64_asym",
    "q4_b128_sym",
    "q4_b128_asym",
    "q4_channel_asym",
    "q4_channel_sym",
    "s8_u8act_channel",
    "s8_s8act_channel",
    "u8_u8act_channel",
    "s8_weight_only_channel",
];
/// The dims each variant runs with: 10 rows (the low-bit kernels' decode-once passes) and 150
/// rows (beyond `memc_codegen::cpu::target::SMALL_ROWS`: dequantized tiles in scratch and a GEMM).
const DIM_SETS: &[&[(&str, u64)]] = &[&[("batch", 2), ("seq", 5)], &[("batch", 3), ("seq", 50)]];
const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-4;
/// How many of an output's quantization steps an element may be off by when activations are
/// quantized and a rounding flip upstream explains the difference.
const FLIP_STEPS: f64 = 2.0;
/// The share of an output's elements that may be off by such flips.
const FLIP_FRACTION: f64 = 0.01;

/// How two runs of one output differ.
struct Difference {
    n_elements: usize,
    max_abs: f64,
    /// The largest `|a - b| / (ATOL + RTOL * |b|)`.
    worst_of_tolerance: f64,
    /// Elements beyond the float tolerance.
    n_beyond: usize,
    /// The largest difference among those, in quantization steps (0 without a step).
    max_steps_beyond: f64,
}

fn difference(got: &[f64], want: &[f64], step: Option<f64>) -> Difference {
    let mut d = Difference {
        n_elements: got.len(),
        max_abs: 0.0,
        worst_of_tolerance: 0.0,
        n_beyond: 0,
        max_steps_beyond: 0.0,
    };
    for (a, b) in got.iter().zip(want) {
        let err = if a.is_nan() && b.is_nan() {
            0.0
        } else {
            (a - b).abs()
        };
        let tolerance = ATOL + RTOL * b.abs();
        d.max_abs = d.max_abs.max(err);
        d.worst_of_tolerance = d.worst_of_tolerance.max(err / tolerance);
        // A NaN error (one side NaN) is beyond the tolerance too.
        let within = err <= tolerance;
        if !within {
            d.n_beyond += 1;
            let steps = step.map_or(f64::INFINITY, |s| err / s);
            d.max_steps_beyond = d.max_steps_beyond.max(steps);
        }
    }
    d
}

fn read(path: &Path) -> memc_runtime::Tensor {
    memc_runtime::npy::read_npy(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `reference.py` on `model` into `ref_dir`, with graph optimizations or without.
fn reference(python: &Path, model: &Path, ref_dir: &Path, dims: &[(&str, u64)], optimized: bool) {
    let mut cmd = Command::new(python);
    cmd.arg(root().join("bench/models/reference.py"))
        .arg(model)
        .arg("--out")
        .arg(ref_dir);
    if !optimized {
        cmd.arg("--no-graph-opt");
    }
    for (name, value) in dims {
        cmd.arg("--dim").arg(format!("{name}={value}"));
    }
    run(&mut cmd);
}

/// Compiles `model` to a plan and runs it on the reference inputs in `ref_dir`; returns the
/// folder memc wrote its outputs to.
fn compile_and_run(model: &Path, ref_dir: &Path, dims: &[(&str, u64)]) -> PathBuf {
    let plan = ref_dir.join("memc.plan");
    let mut compile = Command::new(env!("CARGO_BIN_EXE_memc"));
    compile.arg("compile").arg(model).arg("-o").arg(&plan);
    for (name, value) in dims {
        compile.arg("--dim").arg(format!("{name}={value}"));
    }
    run(&mut compile);
    let out_dir = ref_dir.join("memc_outputs");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memc"));
    cmd.arg("run").arg(&plan).arg("--output-dir").arg(&out_dir);
    for input in json(&ref_dir.join("meta.json"))["inputs"]
        .as_array()
        .expect("meta.json lists inputs")
    {
        let name = input["name"].as_str().expect("input name");
        let file = input["file"].as_str().expect("input file");
        cmd.arg("--input")
            .arg(format!("{name}={}", ref_dir.join(file).display()));
    }
    run(&mut cmd);
    out_dir
}

#[test]
fn qdq_variants_match_onnxruntime() {
    let Some(python) = venv_python() else {
        return;
    };
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("qdq_variants");
    // A stale variant from an earlier run must not be compared.
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("target tmpdir is writable");
    print!(
        "{}",
        run(Command::new(&python)
            .arg(root().join("bench/models/qdq_variants.py"))
            .arg("--out")
            .arg(&out))
    );
    let manifest = json(&out.join("variants.json"));
    let manifest = manifest.as_array().expect("variants.json is a list");
    let names: Vec<&str> = manifest
        .iter()
        .map(|v| v["name"].as_str().expect("variant name"))
        .collect();
    assert_eq!(names, VARIANTS, "the variants qdq_variants.py writes");

    for (variant, dims) in manifest
        .iter()
        .flat_map(|v| DIM_SETS.iter().map(move |&d| (v, d)))
    {
        let rows: u64 = dims.iter().map(|(_, v)| v).product();
        let variant_name = variant["name"].as_str().expect("variant name");
        let name = &format!("{variant_name} ({rows} rows)");
        let model = out.join(variant["file"].as_str().expect("variant file"));
        let activations_quantized = variant["activations_quantized"]
            .as_bool()
            .expect("activations_quantized is a bool");
        let exact_dir = out.join(format!("ref_{variant_name}_{rows}"));
        let optimized_dir = out.join(format!("opt_{variant_name}_{rows}"));
        reference(&python, &model, &exact_dir, dims, false);
        reference(&python, &model, &optimized_dir, dims, true);
        let memc_dir = compile_and_run(&model, &exact_dir, dims);

        let meta = json(&exact_dir.join("meta.json"));
        for input in meta["inputs"].as_array().expect("meta.json lists inputs") {
            let file = input["file"].as_str().expect("input file");
            assert_eq!(
                std::fs::read(exact_dir.join(file)).expect("input reads"),
                std::fs::read(optimized_dir.join(file)).expect("input reads"),
                "{name}: both reference runs draw the same `{file}` (same seed)"
            );
        }
        for output in meta["outputs"].as_array().expect("meta.json lists outputs") {
            let output_name = output["name"].as_str().expect("output name");
            let file = output["file"].as_str().expect("output file");
            let want = read(&exact_dir.join(file));
            // memc names output files as reference.py does: `outputs/<sanitized name>.npy`.
            let got = read(&memc_dir.join(Path::new(file).file_name().expect("a file name")));
            assert_eq!(got.elem(), want.elem(), "{name}: `{file}` element type");
            assert_eq!(got.shape(), want.shape(), "{name}: `{file}` shape");
            let step = variant["output_steps"][output_name].as_f64();
            let (want, got) = (to_f64(&want), to_f64(&got));
            let memc = difference(&got, &want, step);
            if activations_quantized {
                let allowed = ((memc.n_elements as f64 * FLIP_FRACTION) as usize).max(1);
                assert!(
                    memc.n_beyond <= allowed && memc.max_steps_beyond <= FLIP_STEPS,
                    "{name}: `{file}`: {} of {} elements beyond the float tolerance (at most \
                     {allowed} may be), the farthest {:.2} quantization steps off (at most \
                     {FLIP_STEPS}); max |memc - ort| {:.3e}",
                    memc.n_beyond,
                    memc.n_elements,
                    memc.max_steps_beyond,
                    memc.max_abs
                );
            } else {
                assert_eq!(
                    memc.n_beyond, 0,
                    "{name}: `{file}`: {} of {} elements differ from onnxruntime by more than \
                     {ATOL} + {RTOL} |ort|; max |memc - ort| {:.3e}",
                    memc.n_beyond, memc.n_elements, memc.max_abs
                );
            }
            let optimized = to_f64(&read(&optimized_dir.join(file)));
            let ort = difference(&optimized, &want, step);
            let steps = step.map_or(String::new(), |s| {
                format!(" = {:.2} steps of {s:.3e}", ort.max_abs / s)
            });
            println!(
                "{name}: `{output_name}` ({} elements): memc vs onnxruntime max {:.3e} ({:.3} of \
                 the tolerance, {} beyond it); onnxruntime optimized vs unoptimized max {:.3e}{steps} \
                 ({} elements beyond the tolerance)",
                memc.n_elements,
                memc.max_abs,
                memc.worst_of_tolerance,
                memc.n_beyond,
                ort.max_abs,
                ort.n_beyond
            );
        }
    }
}
