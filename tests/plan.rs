//! Memory plans through the command line, re-checked from the JSON alone by a naive pairwise
//! checker written here (independent of memc's planner and of its validator): every two
//! buffers whose step ranges intersect must not overlap in memory, every buffer lies inside
//! the arena and is 64-byte aligned, aliases lie inside their buffer, and the arena is at least
//! LOAD. The report's text is a snapshot (planning times masked).

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn memc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_memc"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("memc runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Checks a plan JSON; returns (arena, load).
pub fn check_plan_json(text: &str) -> (u64, u64) {
    let plan: Value = serde_json::from_str(text).expect("plan-json is JSON");
    let arena = plan["arena_size"].as_u64().expect("arena_size");
    let load = plan["load"].as_u64().expect("load");
    assert!(arena >= load, "arena {arena} below LOAD {load}");
    let buffers = plan["buffers"].as_array().expect("buffers");
    let field = |b: &Value, k: &str| {
        b[k].as_u64()
            .unwrap_or_else(|| panic!("buffer field {k}: {b}"))
    };
    for b in buffers {
        let (offset, size) = (field(b, "offset"), field(b, "size"));
        assert!(offset + size <= arena, "{b} leaves the arena {arena}");
        assert_eq!(offset % 64, 0, "{b} is not 64-byte aligned");
        assert!(
            field(b, "start") < field(b, "end") || size == 0,
            "{b} has an empty range"
        );
    }
    for (i, a) in buffers.iter().enumerate() {
        for b in &buffers[i + 1..] {
            let live_together =
                field(a, "start") < field(b, "end") && field(b, "start") < field(a, "end");
            let overlap = field(a, "offset") < field(b, "offset") + field(b, "size")
                && field(b, "offset") < field(a, "offset") + field(a, "size");
            assert!(
                !(live_together && overlap && field(a, "size") > 0 && field(b, "size") > 0),
                "live buffers overlap:\n{a}\n{b}"
            );
        }
    }
    let by_name: std::collections::HashMap<&str, &Value> = buffers
        .iter()
        .map(|b| (b["name"].as_str().expect("name"), b))
        .collect();
    for alias in plan["aliases"].as_array().expect("aliases") {
        let owner = by_name[alias["buffer"].as_str().expect("alias buffer")];
        let (o, s) = (field(alias, "offset"), field(alias, "size"));
        assert!(
            o >= field(owner, "offset") && o + s <= field(owner, "offset") + field(owner, "size"),
            "{alias} outside {owner}"
        );
        assert!(
            field(alias, "start") >= field(owner, "start")
                && field(alias, "end") <= field(owner, "end"),
            "{alias} outlives {owner}"
        );
    }
    (arena, load)
}

#[test]
fn fixture_plans_check_out() {
    for (model, dims) in [
        ("tests/onnx/fixtures/mlp_raw.onnx", vec![]),
        (
            "tests/onnx/fixtures/symbolic.onnx",
            vec!["--dim", "batch=2", "--dim", "seq=16"],
        ),
        (
            "tests/onnx/fixtures/shape_subgraph.onnx",
            vec!["--dim", "batch=2", "--dim", "seq=16"],
        ),
        ("tests/onnx/fixtures/optional_inputs.onnx", vec![]),
        (
            "tests/onnx/fixtures/qdq_uint4.onnx",
            vec!["--dim", "batch=3"],
        ),
    ] {
        let mut args = vec!["compile", model, "--emit", "plan-json"];
        args.extend(dims);
        let (code, stdout, stderr) = memc(&args);
        assert_eq!(code, 0, "{model}: {stderr}");
        check_plan_json(&stdout);
    }
}

#[test]
fn unbound_dims_are_named() {
    let (code, _, stderr) = memc(&[
        "compile",
        "tests/onnx/fixtures/symbolic.onnx",
        "--emit",
        "plan-json",
    ]);
    assert_eq!(code, 1);
    insta::assert_snapshot!(stderr);
}

#[test]
fn report_shows_where_memory_goes() {
    let svg = std::env::temp_dir().join(format!("memc-report-{}.svg", std::process::id()));
    let (code, _, stderr) = memc(&[
        "compile",
        "tests/onnx/fixtures/symbolic.onnx",
        "--emit",
        "ir",
        "--dim",
        "batch=2",
        "--dim",
        "seq=16",
        "--report",
        "--report-svg",
        svg.to_str().expect("utf-8 temp path"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let picture = std::fs::read_to_string(&svg).expect("the SVG is written");
    let _ = std::fs::remove_file(&svg);
    assert!(
        picture.starts_with("<svg") && picture.contains("peak"),
        "{picture}"
    );
    // Mask what varies between runs: timings and the temp path.
    let masked: String = stderr
        .lines()
        .map(|l| match (l.find("planned in "), l.find("timeline: ")) {
            (Some(i), _) => format!("{}planned in <time>", &l[..i]),
            (_, Some(i)) => format!("{}timeline: <svg>", &l[..i]),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(masked);
}
