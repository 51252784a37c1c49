//! The lit-test harness: one data-driven entry point for every file under `lit-tests/`.
//!
//! A lit-test file starts with `// RUN: memc <args>`; `%s` stands for the file. The harness runs
//! the real `memc` binary with those arguments from the workspace root and compares exit code,
//! standard output and standard error with an insta snapshot (`cargo insta review` accepts a
//! change). A file with several cases separated by `// -----` lines must pass
//! `--split-input-file`, so that each case is judged on its own.
//!
//! Two more checks run over the outputs that are modules (those of `memc opt` and of
//! `--emit ir`/`mlir`; `--emit kernels` prints kernel text, which is not IR): every module memc
//! printed parses back to the same text, and upstream `mlir-opt-22
//! --allow-unregistered-dialect` accepts it (skipped, and said so, when mlir-opt-22 is not
//! installed; `scripts/test` installs it and sets `MEMC_REQUIRE_MLIR_OPT=1` so that CI cannot
//! skip it).

mod common;

use common::{files_with_extension, root};
use std::path::{Path, PathBuf};
use std::process::Command;

const SPLIT_MARKER: &str = "// -----";

/// The words of a lit-test file's RUN line, with the text of the file.
fn run_line(path: &Path) -> (Vec<String>, String) {
    let text = std::fs::read_to_string(path).expect("lit-test files are UTF-8 text");
    let words: Vec<String> = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("// RUN:"))
        .unwrap_or_else(|| {
            panic!(
                "{}: a lit-test needs a `// RUN: memc ...` line",
                path.display()
            )
        })
        .split_whitespace()
        .map(str::to_string)
        .collect();
    (words, text)
}

/// Whether a lit-test's standard output is printed modules (IR), as opposed to kernel text or
/// JSON.
fn prints_modules(path: &Path) -> bool {
    let (words, _) = run_line(path);
    let emit = words
        .iter()
        .position(|w| w == "--emit")
        .and_then(|i| words.get(i + 1));
    match words.get(1).map(String::as_str) {
        Some("opt") => true,
        Some("compile") => matches!(emit.map(String::as_str), Some("ir" | "mlir")),
        _ => false,
    }
}

/// Runs a lit-test file's RUN line; returns (exit code, stdout, stderr).
fn run_lit_file(path: &Path) -> (i32, String, String) {
    let (words, text) = run_line(path);
    let relative = path
        .strip_prefix(root())
        .expect("lit-tests live under the workspace root");
    assert_eq!(
        words.first().map(String::as_str),
        Some("memc"),
        "{}: RUN must call memc",
        path.display()
    );
    let args: Vec<String> = words[1..]
        .iter()
        .map(|w| w.replace("%s", &relative.display().to_string()))
        .collect();
    let has_cases = text.lines().any(|l| l.trim_end().starts_with(SPLIT_MARKER));
    assert!(
        !has_cases || args.iter().any(|a| a == "--split-input-file"),
        "{}: cases are split by `{SPLIT_MARKER}`, so RUN needs --split-input-file",
        path.display()
    );
    let output = Command::new(env!("CARGO_BIN_EXE_memc"))
        .args(&args)
        .current_dir(root())
        .output()
        .expect("the memc binary runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn lit_files() -> Vec<PathBuf> {
    files_with_extension("lit-tests", "mlir")
}

/// The lit-test files whose output is printed modules.
fn lit_files_printing_modules() -> Vec<PathBuf> {
    lit_files()
        .into_iter()
        .filter(|p| prints_modules(p))
        .collect()
}

/// The printed modules in a `memc opt` output (empty pieces are failed cases).
fn printed_modules(stdout: &str) -> Vec<String> {
    stdout
        .split(&format!("{SPLIT_MARKER}\n"))
        .filter(|piece| !piece.trim().is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn lit() {
    insta::glob!("../lit-tests", "**/*.mlir", |path| {
        let (code, stdout, stderr) = run_lit_file(path);
        let snapshot =
            format!("exit code: {code}\n----- stdout -----\n{stdout}----- stderr -----\n{stderr}");
        insta::assert_snapshot!(snapshot);
    });
}

#[test]
fn printed_output_round_trips() {
    for path in lit_files_printing_modules() {
        let (_, stdout, _) = run_lit_file(&path);
        for module_text in printed_modules(&stdout) {
            let module = memc::ir::parse_module(&module_text).unwrap_or_else(|d| {
                panic!(
                    "{}: memc's output does not parse:\n{}",
                    path.display(),
                    d.render("out", &module_text, false)
                )
            });
            assert_eq!(
                memc::ir::print_module(&module),
                module_text,
                "{}: round trip",
                path.display()
            );
        }
    }
}

fn find_mlir_opt() -> Option<PathBuf> {
    let candidates = ["/usr/bin/mlir-opt-22", "/usr/lib/llvm-22/bin/mlir-opt"];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|d| d.join("mlir-opt-22"))
                .find(|p| p.exists())
        })
}

#[test]
fn upstream_mlir_opt_parses_every_output() {
    let Some(mlir_opt) = find_mlir_opt() else {
        assert!(
            std::env::var_os("MEMC_REQUIRE_MLIR_OPT").is_none(),
            "MEMC_REQUIRE_MLIR_OPT is set but mlir-opt-22 is not installed"
        );
        println!("skipped: mlir-opt-22 is not installed (apt-get install mlir-22-tools)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("memc-mlir-opt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    let mut checked = 0;
    for path in lit_files_printing_modules() {
        let (_, stdout, _) = run_lit_file(&path);
        for (i, module_text) in printed_modules(&stdout).into_iter().enumerate() {
            let file = dir.join(format!("case{checked}.mlir"));
            std::fs::write(&file, &module_text).expect("temp file is writable");
            let output = Command::new(&mlir_opt)
                .arg("--allow-unregistered-dialect")
                .arg(&file)
                .output()
                .expect("mlir-opt runs");
            assert!(
                output.status.success(),
                "{} (case {i}): mlir-opt rejects memc's output:\n{}\n{module_text}",
                path.display(),
                String::from_utf8_lossy(&output.stderr)
            );
            checked += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        checked >= 10,
        "expected at least 10 printed modules, checked {checked}"
    );
    println!("mlir-opt-22 accepted {checked} modules printed by memc");
}
