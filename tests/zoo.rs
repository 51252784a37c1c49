//! The model zoo (`bench/models/`) through `memc compile --emit ir`, checked against
//! onnxruntime: for every model, the result shapes memc infers with `--dim batch=2 --dim seq=16`
//! must equal the shapes onnxruntime produces when it runs the model on such inputs.
//!
//! The zoo is generated in this run by the Python scripts (no model is committed). The test
//! needs the venv that `scripts/test` creates (`.venv` with `bench/models/requirements.txt`);
//! without it the test says it is skipped, unless `MEMC_REQUIRE_ZOO` is set (as `scripts/test`
//! does), which makes a missing venv a failure.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const MODELS: &[&str] = &["mlp", "bert", "gpt", "resnet", "unet", "llm_qdq"];
const DIMS: &[(&str, u64)] = &[("batch", 2), ("seq", 16)];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} does not start: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Output name -> shape, from the reference run's meta.json.
fn reference_shapes(meta: &Path) -> HashMap<String, Vec<u64>> {
    let text = std::fs::read_to_string(meta).expect("reference.py writes meta.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("meta.json is JSON");
    json["outputs"]
        .as_array()
        .expect("meta.json lists outputs")
        .iter()
        .map(|o| {
            let name = o["name"].as_str().expect("output name").to_string();
            let shape = o["shape"]
                .as_array()
                .expect("output shape")
                .iter()
                .map(|d| d.as_u64().expect("dim"))
                .collect();
            (name, shape)
        })
        .collect()
}

#[test]
fn zoo_shapes_match_onnxruntime() {
    let python: PathBuf = root().join(".venv/bin/python");
    if !python.exists() {
        assert!(
            std::env::var_os("MEMC_REQUIRE_ZOO").is_none(),
            "MEMC_REQUIRE_ZOO is set but .venv is missing (run scripts/test)"
        );
        println!("skipped: no .venv with bench/models/requirements.txt (scripts/test makes it)");
        return;
    }
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("zoo");
    std::fs::create_dir_all(&out).expect("target tmpdir is writable");
    run(Command::new(&python)
        .arg(root().join("bench/models/generate.py"))
        .arg("--out")
        .arg(&out)
        .arg("--only")
        .arg(MODELS.join(",")));

    for model in MODELS {
        let path = out.join(format!("{model}.onnx"));
        let ref_dir = out.join(format!("ref_{model}"));
        let mut reference = Command::new(&python);
        reference
            .arg(root().join("bench/models/reference.py"))
            .arg(&path)
            .arg("--out")
            .arg(&ref_dir);
        for (name, value) in DIMS {
            reference.arg("--dim").arg(format!("{name}={value}"));
        }
        run(&mut reference);
        let expected = reference_shapes(&ref_dir.join("meta.json"));

        // Bind only the dims the model has; memc rejects a binding for a dim it lacks.
        let unbound_ir = run(Command::new(env!("CARGO_BIN_EXE_memc"))
            .arg("compile")
            .arg(&path)
            .args(["--emit", "ir"]));
        let mut compile = Command::new(env!("CARGO_BIN_EXE_memc"));
        compile.arg("compile").arg(&path).args(["--emit", "ir"]);
        for (name, value) in DIMS {
            if unbound_ir.contains(&format!("\"{name}\"")) {
                compile.arg("--dim").arg(format!("{name}={value}"));
            }
        }
        let ir = run(&mut compile);
        let module = memc::ir::parse_module(&ir).expect("memc's output parses");
        let (_, func) = module.functions().next().expect("one function");
        assert_eq!(
            func.result_types().len(),
            expected.len(),
            "{model}: result count"
        );
        for (i, ty) in func.result_types().iter().enumerate() {
            let name = func
                .result_attrs(i)
                .get("memc.name")
                .and_then(|a| a.as_str())
                .expect("results carry memc.name");
            let shape = ty
                .tensor()
                .and_then(|t| t.static_shape())
                .unwrap_or_else(|| panic!("{model}: `{name}` is not static: {ty}"));
            assert_eq!(
                Some(&shape),
                expected.get(name),
                "{model}: output `{name}` ({ty}) vs onnxruntime"
            );
        }
        println!(
            "{model}: {} output shape(s) match onnxruntime",
            expected.len()
        );
    }

    // Compiling must not read the weights: they stay in the memory map, untouched. The peak RSS
    // of compiling llm_qdq, less that of compiling the tiny MLP with the same binary (which
    // removes the binary's own footprint, larger in debug builds), must stay under 0.1x the
    // weight bytes, the goal for import.
    let peak_mib = |model: &str| -> f64 {
        let stats = Command::new(env!("CARGO_BIN_EXE_memc"))
            .arg("compile")
            .arg(out.join(model))
            .args(["--emit", "ir", "-o", "/dev/null", "--stats"])
            .output()
            .expect("memc runs");
        let stderr = String::from_utf8_lossy(&stats.stderr).into_owned();
        stderr
            .split("peak RSS ")
            .nth(1)
            .and_then(|rest| rest.split(" MiB").next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("--stats prints the peak RSS: {stderr}"))
    };
    let weight_bytes = std::fs::metadata(out.join("llm_qdq.onnx"))
        .expect("llm_qdq exists")
        .len() as f64;
    let (llm, baseline) = (peak_mib("llm_qdq.onnx"), peak_mib("mlp.onnx"));
    let growth = (llm - baseline) * 1048576.0 / weight_bytes;
    println!("llm_qdq: compile peak RSS {llm:.1} MiB, mlp {baseline:.1} MiB: growth {growth:.3} x the weights");
    assert!(
        growth < 0.1,
        "compiling touched the weights: {llm:.1} MiB vs {baseline:.1} MiB for the MLP"
    );
}
