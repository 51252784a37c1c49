//! `memc report PLAN`: the memory table and SVG timeline of a plan file, from the file alone.
//!
//! The bundled example is compiled with `--report`; `memc report` on the plan must print the
//! same table `compile --report` printed and write the same SVG, and the report the plan
//! stores must be the JSON `--emit plan-json` prints. Then every mistake: a missing file, a
//! file that is not a plan, a truncated or corrupted plan, an unknown format version, a plan
//! written by an older memc (format 4, which `run` and `inspect` still read), a plan without a
//! report or with a damaged one, and an SVG path that cannot be written; each an error message
//! (insta snapshots, scratch paths replaced by `<tmp>`) and exit code 1, never a panic.

mod common;

use common::{mask_numbers, memc_in, path_str, Out};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Runs memc from the workspace root.
fn memc(args: &[&str]) -> Out {
    memc_in(common::root(), args)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memc-cli-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    dir
}

/// Compiles the bundled example into `dir/classifier.plan` with `--report`, its timeline at
/// `dir/compile.svg`; returns the plan's path and the table `compile --report` printed.
fn compile_example(dir: &Path) -> (PathBuf, String) {
    let plan = dir.join("classifier.plan");
    let svg = dir.join("compile.svg");
    let out = memc(&[
        "compile",
        "examples/classifier.onnx",
        "--dim",
        "batch=1",
        "--report",
        "--report-svg",
        path_str(&svg),
        "-o",
        path_str(&plan),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The table, then the line that says the plan was written.
    let (table, wrote) = out
        .stderr
        .trim_end()
        .rsplit_once('\n')
        .expect("a table and a last line");
    assert!(wrote.starts_with("memc: wrote "), "{}", out.stderr);
    (plan, format!("{table}\n"))
}

/// Checks that `text` is one well-formed SVG element: every tag closed, in order.
fn assert_well_formed_svg(text: &str) {
    assert!(
        text.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{text}"
    );
    let mut open: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').expect("every tag ends") + start;
        let tag = &rest[start + 1..end];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(open.pop(), Some(name), "mismatched </{name}> in\n{text}");
        } else if !tag.ends_with('/') {
            open.push(tag.split_whitespace().next().expect("a tag name"));
        }
        assert!(
            !rest[start + 1..end].contains('<'),
            "`<` inside a tag in\n{text}"
        );
        rest = &rest[end + 1..];
    }
    assert!(open.is_empty(), "unclosed {open:?} in\n{text}");
    assert_eq!(rest.trim(), "", "text after the root element");
    assert!(text.contains("<polyline points=\""), "no live-bytes line");
}

#[test]
fn report_prints_what_compile_report_printed() {
    let dir = scratch("same");
    let (plan, compile_table) = compile_example(&dir);
    // With the same SVG path, the table is the same to the byte (the timeline line included).
    let svg = dir.join("report.svg");
    let out = memc(&["report", path_str(&plan), "--svg", path_str(&svg)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "");
    let expected = compile_table.replace(
        &format!("timeline: {}", path_str(&dir.join("compile.svg"))),
        &format!("timeline: {}", path_str(&svg)),
    );
    assert_eq!(out.stdout, expected);
    assert!(out.stdout.contains("live at the peak"), "{}", out.stdout);
    let picture = std::fs::read_to_string(&svg).expect("memc report wrote the SVG");
    assert_well_formed_svg(&picture);
    let compiled_picture = std::fs::read_to_string(dir.join("compile.svg")).expect("SVG");
    assert_eq!(picture, compiled_picture, "the two timelines differ");

    // Without `--svg`, the timeline goes to `<plan stem>.memory.svg` in the current directory.
    let cwd = scratch("default_svg");
    let out = memc_in(&cwd, &["report", path_str(&plan)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("  timeline: classifier.memory.svg\n"),
        "{}",
        out.stdout
    );
    let default = std::fs::read_to_string(cwd.join("classifier.memory.svg")).expect("default SVG");
    assert_eq!(default, compiled_picture);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&cwd);
}

#[test]
fn the_stored_report_is_the_plan_json() {
    let dir = scratch("json");
    let (plan, _) = compile_example(&dir);
    let inspect = memc(&["inspect", "--json", path_str(&plan)]);
    assert_eq!(inspect.code, 0, "{}", inspect.stderr);
    let meta: Value = serde_json::from_str(&inspect.stdout).expect("inspect --json is JSON");
    let mut stored = meta["meta"]["memory_report"].clone();
    let printed = memc(&[
        "compile",
        "examples/classifier.onnx",
        "--dim",
        "batch=1",
        "--emit",
        "plan-json",
    ]);
    assert_eq!(printed.code, 0, "{}", printed.stderr);
    let mut printed: Value = serde_json::from_str(&printed.stdout).expect("plan-json is JSON");
    // Two compiles plan (and look for recomputations) in different times; everything else is
    // the same.
    for report in [&mut stored, &mut printed] {
        assert!(report["plan_time_ms"].as_f64().is_some(), "{report}");
        report["plan_time_ms"] = Value::Null;
        report["remat"]["time_ms"] = Value::Null;
    }
    assert_eq!(stored, printed);
    // What the table and the timeline read is there.
    let n_steps = printed["n_steps"].as_u64().expect("n_steps") as usize;
    let live_bytes = printed["live_bytes"].as_array().expect("live_bytes");
    assert!(live_bytes.len() >= n_steps, "{printed}");
    let peak = printed["peak_step"].as_u64().expect("peak_step") as usize;
    assert_eq!(printed["live_bytes"][peak], printed["load"]);
    for b in printed["buffers"].as_array().expect("buffers") {
        let kind = b["kind"].as_str().expect("kind");
        assert!(["input", "owned", "scratch"].contains(&kind), "{b}");
        assert_eq!(b["formula"].is_null(), kind == "scratch", "{b}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bytes` (a plan file) with format version `version` and its metadata changed by `edit`,
/// its sections laid out again and every checksum recomputed, as `memc compile` would have
/// written it.
fn rewritten(bytes: &[u8], version: u32, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let (metadata_len, weights_offset) = (u64_at(24) as usize, u64_at(32) as usize);
    let mut meta: Value =
        serde_json::from_slice(&bytes[64..64 + metadata_len]).expect("the metadata is JSON");
    edit(&mut meta);
    let metadata = serde_json::to_vec(&meta).expect("JSON prints");
    let weights = &bytes[weights_offset..];
    let new_weights_offset = (64 + metadata.len() as u64).next_multiple_of(4096);
    let mut file = Vec::new();
    file.extend_from_slice(b"MEMCPLAN");
    file.extend_from_slice(&version.to_le_bytes());
    file.extend_from_slice(&64u32.to_le_bytes());
    file.extend_from_slice(&64u64.to_le_bytes());
    file.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    file.extend_from_slice(&new_weights_offset.to_le_bytes());
    file.extend_from_slice(&(weights.len() as u64).to_le_bytes());
    file.extend_from_slice(&crc32fast::hash(&metadata).to_le_bytes());
    file.extend_from_slice(&bytes[52..56]);
    file.extend_from_slice(&0u32.to_le_bytes());
    let header_crc = crc32fast::hash(&file);
    file.extend_from_slice(&header_crc.to_le_bytes());
    file.extend_from_slice(&metadata);
    file.resize(new_weights_offset as usize, 0);
    file.extend_from_slice(weights);
    file
}

#[test]
fn report_mistakes() {
    let dir = scratch("mistakes");
    let (plan, _) = compile_example(&dir);
    let bytes = std::fs::read(&plan).expect("the plan reads");
    let write = |name: &str, content: Vec<u8>| -> String {
        let path = dir.join(name);
        std::fs::write(&path, content).expect("scratch is writable");
        path_str(&path).to_string()
    };
    let mut flipped = bytes.clone();
    flipped[100] ^= 0x20;
    let mut version = bytes.clone();
    version[8] = 9;
    // A format 4 plan cannot hold an implicit im2col operand (format 7 brought them), so the
    // older plan drops the convolutions' products: what is checked is the report's message and
    // that such a plan still loads and runs.
    let older = rewritten(&bytes, 4, |meta| {
        meta.as_object_mut()
            .expect("an object")
            .remove("memory_report");
        for step in meta["program"]["steps"].as_array_mut().expect("steps") {
            step["kernels"]
                .as_array_mut()
                .expect("kernels")
                .retain(|k| k["body"]["Contract"]["b"].get("channels").is_none());
        }
    });
    let older = write("older.plan", older);
    let implicit_in_older = write("implicit6.plan", rewritten(&bytes, 6, |_| {}));
    let svg = dir.join("out.svg");
    let unwritable = dir.join("no/such/dir/out.svg");
    // (snapshot, plan, SVG path, whether byte counts and checksums are masked: they change
    // with every change to the kernels).
    let cases = [
        (
            "report_missing_file",
            path_str(&dir.join("nothing.plan")).to_string(),
            &svg,
            false,
        ),
        (
            "report_not_a_plan",
            "examples/classifier.onnx".to_string(),
            &svg,
            false,
        ),
        ("report_empty", write("empty.plan", Vec::new()), &svg, false),
        (
            "report_truncated",
            write("truncated.plan", bytes[..bytes.len() - 10].to_vec()),
            &svg,
            true,
        ),
        (
            "report_corrupted",
            write("corrupted.plan", flipped),
            &svg,
            true,
        ),
        (
            "report_wrong_version",
            write("version.plan", version),
            &svg,
            false,
        ),
        ("report_older_memc", older.clone(), &svg, false),
        (
            "report_implicit_im2col_in_format_6",
            implicit_in_older,
            &svg,
            false,
        ),
        (
            "report_without_report",
            write(
                "without.plan",
                rewritten(&bytes, memc::runtime::PLAN_FORMAT_VERSION, |meta| {
                    meta["memory_report"] = Value::Null
                }),
            ),
            &svg,
            false,
        ),
        (
            "report_damaged_report",
            write(
                "damaged.plan",
                rewritten(&bytes, memc::runtime::PLAN_FORMAT_VERSION, |meta| {
                    meta["memory_report"]["live_bytes"] = Value::from("many")
                }),
            ),
            &svg,
            false,
        ),
        (
            "report_unwritable_svg",
            path_str(&plan).to_string(),
            &unwritable,
            false,
        ),
    ];
    for (name, plan, svg, mask) in cases {
        let out = memc(&["report", &plan, "--svg", path_str(svg)]);
        assert_eq!(out.code, 1, "{name}: {}{}", out.stdout, out.stderr);
        assert_eq!(out.stdout, "", "{name}");
        assert!(!out.stderr.contains("panicked"), "{name}: {}", out.stderr);
        assert!(!svg.exists(), "{name}: an SVG was written");
        let mut message = out.stderr.replace(path_str(&dir), "<tmp>");
        if mask {
            message = mask_numbers(&message);
        }
        insta::assert_snapshot!(name, message);
    }

    // The older plan still inspects and runs: format 4 lacks only the report.
    let inspect = memc(&["inspect", &older]);
    assert_eq!(inspect.code, 0, "{}", inspect.stderr);
    let run = memc(&[
        "run",
        &older,
        "--input",
        "image=examples/classifier_input.npy",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The honest figures: the table's headline is arena / the model's activation bound, LOAD is
/// labelled "with scratch" (a snapshot of the table's head: at batch 1 the classifier's convs
/// need no scratch, their im2col implicit and their products too small for planned panels)
/// and, at batch 8, the largest scratch is named by op and use; `memc inspect` shows the same
/// figures, its `--json` the planner summary's fields; a plan from a memc before these figures
/// (its summary and report without them) still reports and inspects, saying "not recorded".
#[test]
fn honest_figures_and_plans_without_them() {
    let dir = scratch("honest");
    let (plan, table) = compile_example(&dir);
    let head: String = table
        .lines()
        .take_while(|l| !l.starts_with("  timeline:"))
        .map(|l| match l.find("planned in ") {
            Some(i) => format!("{}planned in <time>\n", &l[..i]),
            None => format!("{l}\n"),
        })
        .collect();
    insta::assert_snapshot!("honest_figures_table_head", head);

    let printed = memc(&[
        "compile",
        "examples/classifier.onnx",
        "--dim",
        "batch=1",
        "--emit",
        "plan-json",
    ]);
    assert_eq!(printed.code, 0, "{}", printed.stderr);
    let report: Value = serde_json::from_str(&printed.stdout).expect("plan-json is JSON");
    let inspect = memc(&["inspect", "--json", path_str(&plan)]);
    assert_eq!(inspect.code, 0, "{}", inspect.stderr);
    let meta: Value = serde_json::from_str(&inspect.stdout).expect("inspect --json is JSON");
    for field in ["bound_model_order", "bound_chosen_order", "scratch_peak"] {
        assert!(report[field].as_u64().is_some(), "{field}: {report}");
        assert_eq!(meta["meta"]["planner"][field], report[field], "{field}");
    }
    let text = memc(&["inspect", path_str(&plan)]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let bound = report["bound_model_order"].as_u64().expect("a bound");
    let ratio = report["arena_size"].as_u64().expect("an arena") as f64 / bound as f64;
    assert!(
        text.stdout.contains(&format!(
            "activations {} in model order (arena/bound {ratio:.2})",
            memc::report::human_bytes(bound)
        )),
        "{}",
        text.stdout
    );

    // The no-heap model's attention plans memc-gemm's panels beside its scores, named by op
    // and use (its MatMuls read their weights packed whole and the classifier's convolutions
    // run as direct convolutions: neither needs any).
    let plan8 = dir.join("no_heap.plan");
    let out = memc(&[
        "compile",
        "tests/onnx/no_heap/model.onnx",
        "--report",
        "-o",
        path_str(&plan8),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .lines()
            .any(|l| l.contains("onnx.Attention \"attention\"") && l.contains("GEMM")),
        "{}",
        out.stderr
    );

    // That plan as an older memc wrote it: no bounds, no scratch peak, no scratch uses.
    let bytes = std::fs::read(&plan8).expect("the plan reads");
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let older = rewritten(&bytes, version, |meta| {
        let strip = |object: &mut Value| {
            let object = object.as_object_mut().expect("an object");
            for field in ["bound_model_order", "bound_chosen_order", "scratch_peak"] {
                object.remove(field);
            }
        };
        strip(&mut meta["planner"]);
        strip(&mut meta["memory_report"]);
        for b in meta["memory_report"]["buffers"]
            .as_array_mut()
            .expect("buffers")
        {
            b.as_object_mut().expect("an object").remove("scratch_use");
        }
    });
    let older_path = dir.join("older_figures.plan");
    std::fs::write(&older_path, older).expect("scratch is writable");
    let svg = dir.join("older.svg");
    let out = memc(&["report", path_str(&older_path), "--svg", path_str(&svg)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("(not recorded: the plan is from an older memc)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("onnx.Attention \"attention\"           scratch"),
        "{}",
        out.stdout
    );
    let out = memc(&["inspect", path_str(&older_path)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("bound       not recorded (an older memc wrote this plan)"),
        "{}",
        out.stdout
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A plan with a Winograd convolution rewritten as format version 7 (which had none): refused
/// with the kernel's name, not run with its transformed weight read as a plain packed one.
#[test]
fn a_winograd_plan_of_an_older_version_is_refused() {
    let dir = scratch("winograd_version");
    let plan = dir.join("winograd.plan");
    let model = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/onnx/fixtures/winograd_convs.onnx");
    let out = memc(&["compile", path_str(&model), "-o", path_str(&plan)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let bytes = std::fs::read(&plan).expect("the plan reads");
    let older = dir.join("winograd_v7.plan");
    std::fs::write(&older, rewritten(&bytes, 7, |_| {})).expect("scratch is writable");
    let out = memc(&["inspect", path_str(&older)]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("runs as Winograd, which format version 7 plans cannot have"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}
