//! The command line as a user meets it: every message for a bad flag, a bad file or a bad
//! pipeline, plus the flags `memc opt` offers. Outputs are
//! insta snapshots (`cargo insta review` to accept a change).

mod common;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs memc from the workspace root; returns exit code, stdout and stderr as one text.
fn memc(args: &[&str], stdin: Option<&[u8]>) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memc"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the memc binary runs");
    {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        if let Some(bytes) = stdin {
            pipe.write_all(bytes).expect("stdin accepts the input");
        }
    }
    let output = child.wait_with_output().expect("memc finishes");
    format!(
        "exit code: {}\n----- stdout -----\n{}----- stderr -----\n{}",
        output
            .status
            .code()
            .map_or("signal".to_string(), |c| c.to_string()),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    )
}

fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("memc-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    dir
}

#[test]
fn help_lists_every_planned_command() {
    let help = memc(&["--help"], None);
    for command in ["opt", "compile", "run", "report", "inspect"] {
        assert!(
            help.contains(&format!("  {command} ")),
            "--help lacks `{command}`:\n{help}"
        );
    }
    insta::assert_snapshot!(help);
}

#[test]
fn missing_file() {
    insta::assert_snapshot!(memc(&["opt", "no/such/file.mlir"], None));
}

#[test]
fn binary_file() {
    let dir = scratch_dir("binary");
    let path = dir.join("model.onnx");
    std::fs::write(&path, [0x08, 0x07, 0x12, 0xff, 0xfe, 0x00]).expect("write");
    let out = memc(&["opt", path.to_str().expect("utf-8 path")], None);
    let _ = std::fs::remove_dir_all(&dir);
    insta::assert_snapshot!(out.replace(path.to_str().expect("utf-8 path"), "<tmp>/model.onnx"));
}

#[test]
fn empty_pipeline_entry() {
    insta::assert_snapshot!(memc(&["opt", "examples/mlp.mlir", "-p", "cse,,dce"], None));
}

#[test]
fn unknown_flag() {
    insta::assert_snapshot!(memc(&["opt", "examples/mlp.mlir", "--passes-please"], None));
}

#[test]
fn missing_input_argument() {
    insta::assert_snapshot!(memc(&["opt"], None));
}

#[test]
fn reads_standard_input() {
    let input = b"func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = \"onnx.Identity\"(%a) : (tensor<2xf32>) -> tensor<2xf32>\n  return %0 : tensor<2xf32>\n}\n";
    insta::assert_snapshot!(memc(&["opt", "-", "-p", "canonicalize,dce"], Some(input)));
}

#[test]
fn standard_input_errors_name_stdin() {
    let input = b"func.func @f(%a: tensor<2xf32>) {\n  %0 = \"onnx.Relu\"(%b) : (tensor<2xf32>) -> tensor<2xf32>\n  return\n}\n";
    insta::assert_snapshot!(memc(&["opt", "-"], Some(input)));
}

#[test]
fn writes_the_output_file() {
    let dir = scratch_dir("out");
    let out_path = dir.join("out.mlir");
    let out = memc(
        &[
            "opt",
            "examples/mlp.mlir",
            "-p",
            "canonicalize,cse,dce",
            "-o",
            out_path.to_str().expect("utf-8 path"),
        ],
        None,
    );
    assert!(
        out.starts_with("exit code: 0\n----- stdout -----\n----- stderr -----\n"),
        "{out}"
    );
    let written = std::fs::read_to_string(&out_path).expect("memc wrote the output file");
    let stdout_run = memc(
        &["opt", "examples/mlp.mlir", "-p", "canonicalize,cse,dce"],
        None,
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        stdout_run.contains(&written),
        "the file holds what stdout would show"
    );
}

#[test]
fn unwritable_output_file() {
    let out = memc(
        &["opt", "examples/mlp.mlir", "-o", "no/such/dir/out.mlir"],
        None,
    );
    insta::assert_snapshot!(out);
}

/// `--time-passes` prints one row per pass, then the verifier and the total. Times vary, so
/// this checks the rows, not the figures.
#[test]
fn time_passes_reports_every_pass() {
    let out = memc(
        &[
            "opt",
            "examples/mlp.mlir",
            "-p",
            "canonicalize,cse,dce",
            "--time-passes",
        ],
        None,
    );
    let (_, stderr) = out
        .split_once("----- stderr -----\n")
        .expect("stderr section");
    for row in ["canonicalize", "cse", "dce", "verifier", "total"] {
        assert!(
            stderr.lines().any(|l| l.trim_end().ends_with(row)),
            "no `{row}` row in:\n{stderr}"
        );
    }
    assert!(Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/mlp.mlir")
        .exists());
}

/// `memc plan-csv` names the file and line of a malformed row.
#[test]
fn plan_csv_reports_bad_rows() {
    let dir = scratch_dir("csv");
    let path = dir.join("bad.csv");
    std::fs::write(&path, "id,lower,upper,size\n0,0,4,100\n1,3,2,50\n").expect("write");
    let out = memc(&["plan-csv", path.to_str().expect("utf-8 path")], None);
    let _ = std::fs::remove_dir_all(&dir);
    insta::assert_snapshot!(out.replace(path.to_str().expect("utf-8 path"), "<tmp>/bad.csv"));
}

/// `memc plan-csv` plans a small instance; the optimum is known (two buffers live together,
/// a third reuses the first one's bytes).
#[test]
fn plan_csv_plans() {
    let dir = scratch_dir("csv-ok");
    let path = dir.join("tiny.csv");
    std::fs::write(
        &path,
        "id,lower,upper,size\n0,0,2,1024\n1,1,3,512\n2,2,4,1024\n",
    )
    .expect("write");
    let out = memc(
        &[
            "plan-csv",
            path.to_str().expect("utf-8 path"),
            "--budget-ms",
            "10",
        ],
        None,
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.contains("| tiny | 3 | 1536 | 1536 | 1.0000 |"), "{out}");
}

#[test]
fn bad_memory_budgets_and_recompute_configs() {
    let model = "examples/classifier.onnx";
    let mut out = String::new();
    for flags in [
        &["--memory-budget", "12XB"][..],
        &["--memory-budget", "150%"],
        &["--memory-budget", "0"],
        &["--recompute", "Gelu+:2:-1"],
        &["--recompute", "Gelu:1:-1"],
        &["--recompute", "Gelu+:1"],
    ] {
        let mut args = vec!["compile", model, "--dim", "batch=1", "--emit", "plan-json"];
        args.extend_from_slice(flags);
        out.push_str(&format!(
            "$ memc {}\n{}\n",
            flags.join(" "),
            memc(&args, None)
        ));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn an_unmet_budget_says_how_close_and_why() {
    let out = memc(
        &[
            "compile",
            "examples/classifier.onnx",
            "--dim",
            "batch=1",
            "--emit",
            "plan-json",
            "--memory-budget",
            "10KiB",
            "--recompute",
            "Gelu+:1:-1",
        ],
        None,
    );
    let stderr = out.split("----- stderr -----\n").nth(1).unwrap_or_default();
    insta::assert_snapshot!(stderr);
}

/// `--emit mlir-plan` on the bundled classifier: upstream MLIR with the feature, a plain error
/// (exit 2, nothing written) without it.
#[test]
fn emit_mlir_plan_follows_the_mlir_feature() {
    let model = common::root().join("examples/classifier.onnx");
    let out = common::memc_in(
        common::root(),
        &[
            "compile",
            common::path_str(&model),
            "--dim",
            "batch=1",
            "--emit",
            "mlir-plan",
        ],
    );
    if cfg!(feature = "mlir") {
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            out.stdout.contains("func.func @memc_plan("),
            "{}",
            out.stdout
        );
        assert!(out.stdout.contains("memref.view"), "{}", out.stdout);
        assert!(out.stdout.contains("func.func @main("), "{}", out.stdout);
    } else {
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(out.stdout.is_empty());
        assert!(
            out.stderr
                .contains("built without the `mlir` feature, which `--emit mlir-plan` needs"),
            "{}",
            out.stderr
        );
    }
}

/// `memc run --engine mlir` on the bundled classifier: with the feature, MLIR's
/// ExecutionEngine gives the CPU backend's probabilities (both within the example's expected
/// output's tolerance); without it, a plain error (exit 1, no output written). A training
/// step's state and `--rss` are refused either way before anything runs.
#[test]
fn run_engine_mlir_agrees_with_the_backend() {
    let dir = scratch_dir("engine-mlir");
    let plan = dir.join("classifier.plan");
    let model = common::root().join("examples/classifier.onnx");
    let out = common::memc_in(
        common::root(),
        &[
            "compile",
            common::path_str(&model),
            "--dim",
            "batch=1",
            "-o",
            common::path_str(&plan),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let input = common::root().join("examples/classifier_input.npy");
    let image = format!("image={}", common::path_str(&input));
    let run = |engine: &str, out_dir: &Path, extra: &[&str]| {
        let mut args = vec![
            "run",
            common::path_str(&plan),
            "--input",
            &image,
            "--engine",
            engine,
            "--output-dir",
            common::path_str(out_dir),
        ];
        args.extend_from_slice(extra);
        common::memc_in(common::root(), &args)
    };
    let (cpu_dir, mlir_dir) = (dir.join("cpu"), dir.join("mlir"));
    let cpu = run("backend", &cpu_dir, &[]);
    assert_eq!(cpu.code, 0, "{}", cpu.stderr);
    let mlir = run("mlir", &mlir_dir, &["--repeat", "2"]);
    if cfg!(feature = "mlir") {
        assert_eq!(mlir.code, 0, "{}", mlir.stderr);
        assert!(
            mlir.stdout.contains("MLIR ExecutionEngine") && mlir.stdout.contains("over 2 runs"),
            "{}",
            mlir.stdout
        );
        let read = |dir: &Path| {
            common::to_f64(&memc_runtime::npy::read_npy(&dir.join("probs.npy")).expect("probs"))
        };
        let want = common::to_f64(
            &memc_runtime::npy::read_npy(&common::root().join("examples/classifier_expected.npy"))
                .expect("the example's expected output"),
        );
        let (cpu, mlir) = (read(&cpu_dir), read(&mlir_dir));
        assert_eq!(mlir.len(), want.len());
        for ((m, c), w) in mlir.iter().zip(&cpu).zip(&want) {
            assert!((m - c).abs() <= 1e-5, "MLIR {m} vs CPU {c}");
            assert!(
                (m - w).abs() <= 1e-4 + 1e-3 * w.abs(),
                "MLIR {m} vs expected {w}"
            );
        }
    } else {
        assert_eq!(mlir.code, 1, "{}", mlir.stderr);
        assert!(
            mlir.stderr
                .contains("--engine mlir: this memc was built without the `mlir` feature"),
            "{}",
            mlir.stderr
        );
        assert!(!mlir_dir.join("probs.npy").exists());
    }
    let rss = run("mlir", &dir.join("rss"), &["--rss"]);
    assert_eq!(rss.code, 1, "{}", rss.stderr);
    assert!(
        rss.stderr
            .contains("`--rss` and `--time` measure the plan's backend"),
        "{}",
        rss.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--progress`: nothing drawn when standard error is not a terminal (the default `auto`),
/// lines for a log with `always`, ending at the weights section's size.
#[test]
fn compile_progress_draws_on_a_terminal_or_when_asked() {
    let model = common::root().join("examples/classifier.onnx");
    let dir = scratch_dir("progress");
    let plan = dir.join("classifier.plan");
    let args = |progress: &'static str| {
        vec![
            "compile".to_string(),
            common::path_str(&model).to_string(),
            "--dim".into(),
            "batch=1".into(),
            "-o".into(),
            common::path_str(&plan).to_string(),
            "--progress".into(),
            progress.into(),
        ]
    };
    let run = |progress| {
        let args = args(progress);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::memc_in(common::root(), &args)
    };
    for quiet in ["auto", "never"] {
        let out = run(quiet);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(!out.stderr.contains("writing weights"), "{}", out.stderr);
        assert!(out.stderr.starts_with("memc: wrote "), "{}", out.stderr);
    }
    let out = run("always");
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The last frame: every byte written (`] 6.16 KiB/6.16 KiB (`).
    let last = out
        .stderr
        .lines()
        .rfind(|l| l.starts_with("writing weights ["))
        .unwrap_or_else(|| panic!("no weights bar: {}", out.stderr));
    let (done, total) = last
        .split_once("] ")
        .and_then(|(_, rest)| rest.split_once(" ("))
        .and_then(|(sizes, _)| sizes.split_once('/'))
        .unwrap_or_else(|| panic!("{last}"));
    assert_eq!(done, total, "{last}");
    assert!(total.ends_with("KiB"), "{last}");
    assert!(
        out.stderr.contains("compiling classifier.onnx"),
        "{}",
        out.stderr
    );
    let out = common::memc_in(
        common::root(),
        &["compile", "x.onnx", "--progress", "sometimes"],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("invalid value 'sometimes' for '--progress <PROGRESS>'"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `memc compile` of the `shape_inputs` fixture with its shape and pads bound by `--const`,
/// writing `plan`: the CLI's output.
fn compile_shape_inputs(plan: &str) -> String {
    let fixture = "tests/onnx/fixtures/shape_inputs";
    let model = format!("{fixture}/model.onnx");
    let shape = format!("shape={fixture}/shape.npy");
    let pads = format!("pads={fixture}/pads.npy");
    memc(
        &[
            "compile", &model, "--const", &shape, "--const", &pads, "-o", plan,
        ],
        None,
    )
}

/// `memc compile --const NAME=FILE.npy`: the fixture's Reshape and Pad take their shape and
/// pads from graph inputs; without binding them memc cannot size the results, with them it
/// plans the model, and the plan (whose inputs are only `x` and `scale`) matches onnxruntime.
#[test]
fn const_binds_shape_inputs_and_matches_onnxruntime() {
    let dir = scratch_dir("const");
    let fixture = "tests/onnx/fixtures/shape_inputs";
    let model = format!("{fixture}/model.onnx");
    let plan = dir.join("model.plan");
    let plan = plan.to_str().expect("utf-8 path");
    let unbound = memc(&["compile", &model, "-o", plan], None);
    assert!(unbound.starts_with("exit code: 1\n"), "{unbound}");
    insta::assert_snapshot!("const_needed", unbound);
    let bound = compile_shape_inputs(plan);
    assert!(bound.starts_with("exit code: 0\n"), "{bound}");
    let out_dir = dir.join("out");
    let x = format!("x={fixture}/x.npy");
    let scale = format!("scale={fixture}/scale.npy");
    let out_arg = out_dir.to_str().expect("utf-8 path");
    let run = memc(
        &[
            "run",
            plan,
            "--input",
            &x,
            "--input",
            &scale,
            "--output-dir",
            out_arg,
        ],
        None,
    );
    assert!(run.starts_with("exit code: 0\n"), "{run}");
    // The bound inputs are no inputs of the plan any more.
    let extra = format!("shape={fixture}/shape.npy");
    let rejected = memc(
        &[
            "run", plan, "--input", &x, "--input", &scale, "--input", &extra,
        ],
        None,
    );
    assert!(
        rejected.starts_with("exit code: 1\n") || rejected.starts_with("exit code: 2\n"),
        "{rejected}"
    );
    assert!(rejected.contains("shape"), "{rejected}");
    let got = memc_runtime::npy::read_npy(&out_dir.join("y.npy")).expect("memc wrote y");
    let want = memc_runtime::npy::read_npy(Path::new(&format!("{fixture}/expected.npy")))
        .expect("the expected output is committed");
    assert_eq!(got.shape(), &[5, 4, 4]);
    assert_eq!(got.shape(), want.shape());
    let (got, want) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-6 + 1e-5 * w.abs(),
            "y[{i}]: memc {g}, onnxruntime {w}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `memc run --profile`: each kernel's time per run, by op type and slowest first, with the
/// kernel's size; the shares add up to the kernels' total.
#[test]
fn run_profile_shows_where_the_time_goes() {
    let dir = scratch_dir("profile");
    let fixture = "tests/onnx/fixtures/shape_inputs";
    let plan = dir.join("model.plan");
    let plan = plan.to_str().expect("utf-8 path");
    let bound = compile_shape_inputs(plan);
    assert!(bound.starts_with("exit code: 0\n"), "{bound}");
    let x = format!("x={fixture}/x.npy");
    let scale = format!("scale={fixture}/scale.npy");
    let run = memc(
        &[
            "run",
            plan,
            "--input",
            &x,
            "--input",
            &scale,
            "--repeat",
            "3",
            "--profile",
        ],
        None,
    );
    assert!(run.starts_with("exit code: 0\n"), "{run}");
    assert!(
        run.contains("profile  kernels ") && run.contains("(mean over 3 runs, "),
        "{run}"
    );
    let by_op: Vec<&str> = run
        .lines()
        .skip_while(|l| l.trim() != "by op")
        .skip(1)
        .take_while(|l| !l.trim().starts_with("slowest kernels"))
        .collect();
    assert!(!by_op.is_empty(), "{run}");
    let share: f64 = by_op
        .iter()
        .map(|l| {
            let percent = l
                .split('%')
                .next()
                .and_then(|p| p.split_whitespace().last());
            percent
                .and_then(|p| p.parse::<f64>().ok())
                .expect("a share")
        })
        .sum();
    assert!((share - 100.0).abs() < 0.5, "shares add to {share}: {run}");
    assert!(by_op.iter().any(|l| l.contains("onnx.")), "{run}");
    let kernels: Vec<&str> = run
        .lines()
        .skip_while(|l| !l.trim().starts_with("slowest kernels"))
        .skip(1)
        .collect();
    assert!(
        kernels
            .iter()
            .any(|l| l.contains(" #0 ") && l.contains(": loop over ")),
        "{run}"
    );
    // Each line also gives the kernel's fastest run, which is at most its mean.
    assert!(
        run.contains("ms summing each kernel's fastest run"),
        "{run}"
    );
    let listed = kernels.iter().filter(|l| l.contains(" #"));
    for line in by_op.iter().chain(listed) {
        let ms: Vec<f64> = line
            .split(" ms")
            .filter_map(|p| p.split_whitespace().last()?.parse().ok())
            .collect();
        assert!(
            ms.len() >= 2 && ms[1] <= ms[0] + 1e-3,
            "mean then min: {line}"
        );
    }
    // `--profile-top` lists that many kernels one by one.
    let top = memc(
        &[
            "run",
            plan,
            "--input",
            &x,
            "--input",
            &scale,
            "--profile",
            "--profile-top",
            "1",
        ],
        None,
    );
    assert!(top.starts_with("exit code: 0\n"), "{top}");
    let listed = top
        .lines()
        .skip_while(|l| !l.trim().starts_with("slowest kernels (1 of "))
        .skip(1)
        .filter(|l| l.contains(" #"))
        .count();
    assert_eq!(listed, 1, "{top}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every mistake with `--const`: an unknown input (the inputs are listed), a value of the wrong
/// element type or shape, a file that is not a `.npy`, a name bound twice, a binding without
/// `=`, an input that has an initializer (a constant already), and `--const` with textual IR.
#[test]
fn const_mistakes() {
    let dir = scratch_dir("const-mistakes");
    let fixture = "tests/onnx/fixtures/shape_inputs";
    let model = format!("{fixture}/model.onnx");
    let write = |name: &str, elem: memc_codegen::Scalar, shape: &[u64], data: &[u8]| {
        let path = dir.join(name);
        let tensor = memc_runtime::TensorRef::new(elem, shape, data).expect("valid tensor");
        memc_runtime::npy::write_npy(&path, tensor).expect("the scratch dir is writable");
        path.to_str().expect("utf-8 path").to_string()
    };
    let shape_i32 = write(
        "shape_i32.npy",
        memc_codegen::Scalar::I32,
        &[3],
        &[4, 0, 0, 0, 255, 255, 255, 255, 2, 0, 0, 0],
    );
    let shape_2 = write("shape_2.npy", memc_codegen::Scalar::I64, &[2], &[0; 16]);
    let not_npy = dir.join("not.npy");
    std::fs::write(&not_npy, "this is not an array").expect("the scratch dir is writable");
    let not_npy = not_npy.to_str().expect("utf-8 path").to_string();
    let good = format!("{fixture}/shape.npy");
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("unknown input", vec![format!("sahpe={good}")]),
        ("wrong element type", vec![format!("shape={shape_i32}")]),
        ("wrong shape", vec![format!("shape={shape_2}")]),
        ("not a .npy file", vec![format!("shape={not_npy}")]),
        ("missing file", vec!["shape=no/such/file.npy".to_string()]),
        (
            "bound twice",
            vec![format!("shape={good}"), format!("shape={good}")],
        ),
        ("no `=`", vec!["shape".to_string()]),
    ];
    let mut text = String::new();
    for (what, bindings) in &cases {
        let mut args = vec!["compile", model.as_str(), "--emit", "ir"];
        for b in bindings {
            args.push("--const");
            args.push(b);
        }
        let out = memc(&args, None);
        text.push_str(&format!("=== {what}\n{out}\n"));
    }
    let initializer = memc(
        &[
            "compile",
            &format!("{fixture}/default_input.onnx"),
            "--emit",
            "ir",
            "--const",
            &format!("shape={good}"),
        ],
        None,
    );
    text.push_str(&format!(
        "=== an input with an initializer\n{initializer}\n"
    ));
    let text_ir = memc(
        &[
            "compile",
            "examples/mlp.mlir",
            "--emit",
            "ir",
            "--const",
            &format!("x={good}"),
        ],
        None,
    );
    text.push_str(&format!("=== textual IR\n{text_ir}\n"));
    insta::assert_snapshot!(text.replace(dir.to_str().expect("utf-8 path"), "<tmp>"));
    let _ = std::fs::remove_dir_all(&dir);
}
