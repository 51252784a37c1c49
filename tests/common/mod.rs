//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (tests run the binary from there).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` (relative to the root) whose extension is `ext`, sorted.
#[allow(dead_code)] // Not every test crate that includes this module walks files.
pub fn files_with_extension(dir: &str, ext: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            if path.is_dir() {
                walk(&path, ext, out);
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join(dir), ext, &mut out);
    out
}

/// Runs `cmd`, panicking with its output unless it succeeds; returns its standard output.
#[allow(dead_code)] // Not every test crate that includes this module runs commands.
pub fn run(cmd: &mut Command) -> String {
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

/// The venv's python (onnx, onnxruntime: `scripts/test` makes it), or `None` when it is missing
/// and the test should skip; with `MEMC_REQUIRE_ZOO` set (CI) a missing venv fails instead.
#[allow(dead_code)] // Only the tests that need onnxruntime use it.
pub fn venv_python() -> Option<PathBuf> {
    let python = root().join(".venv/bin/python");
    if python.exists() {
        return Some(python);
    }
    assert!(
        std::env::var_os("MEMC_REQUIRE_ZOO").is_none(),
        "MEMC_REQUIRE_ZOO is set but .venv is missing (run scripts/test)"
    );
    println!("skipped: no .venv with bench/models/requirements.txt (scripts/test makes it)");
    None
}

/// The training venv's python (onnxruntime-training: `scripts/test` makes `.venv-train`), or
/// `None` when it is missing and the test should skip; with `MEMC_REQUIRE_ZOO` set (CI) a
/// missing venv fails instead.
#[allow(dead_code)] // Only the training tests use it.
pub fn train_python() -> Option<PathBuf> {
    let python = root().join(".venv-train/bin/python");
    if python.exists() {
        return Some(python);
    }
    assert!(
        std::env::var_os("MEMC_REQUIRE_ZOO").is_none(),
        "MEMC_REQUIRE_ZOO is set but .venv-train is missing (run scripts/test)"
    );
    println!(
        "skipped: no .venv-train with bench/training/requirements.txt (scripts/test makes it)"
    );
    None
}

/// Small deterministic f32 values in every element of every input of `session`: (name,
/// values, shape) in the program's input order.
#[allow(dead_code)] // Only the tests that run sessions on made-up inputs use it.
pub fn deterministic_inputs(session: &memc_runtime::Session) -> Vec<(String, Vec<f32>, Vec<u64>)> {
    session
        .inputs()
        .iter()
        .map(|io| {
            let n = io.shape.iter().product::<u64>() as usize;
            let values = (0..n)
                .map(|i| ((i * 7919) % 97) as f32 / 97.0 - 0.5)
                .collect();
            (io.name.clone(), values, io.shape.clone())
        })
        .collect()
}

/// `inputs` (from [`deterministic_inputs`]) as the named tensor views a session runs on.
#[allow(dead_code)] // Only the tests that run sessions on made-up inputs use it.
pub fn input_refs(
    inputs: &[(String, Vec<f32>, Vec<u64>)],
) -> Vec<(&str, memc_runtime::TensorRef<'_>)> {
    inputs
        .iter()
        .map(|(name, values, shape)| {
            let tensor = memc_runtime::TensorRef::from_slice(shape, values).expect("f32 inputs");
            (name.as_str(), tensor)
        })
        .collect()
}

/// A tensor's elements as f64, for comparing outputs of any numeric type.
#[allow(dead_code)] // Only the tests that compare outputs use it.
pub fn to_f64(t: &memc_runtime::Tensor) -> Vec<f64> {
    use memc_codegen::Scalar;
    match t.elem() {
        Scalar::F32 => t
            .to_vec::<f32>()
            .expect("f32")
            .into_iter()
            .map(f64::from)
            .collect(),
        Scalar::F64 => t.to_vec::<f64>().expect("f64"),
        Scalar::I64 => t
            .to_vec::<i64>()
            .expect("i64")
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        Scalar::I32 => t
            .to_vec::<i32>()
            .expect("i32")
            .into_iter()
            .map(f64::from)
            .collect(),
        Scalar::Bool | Scalar::U8 => t.data().iter().map(|&b| f64::from(b)).collect(),
        other => panic!("unexpected output type {}", other.name()),
    }
}

/// What a run of the memc binary printed, and its exit code.
#[allow(dead_code)] // Only the CLI tests run the binary this way.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the memc binary with `args` in `cwd`.
#[allow(dead_code)]
pub fn memc_in(cwd: &Path, args: &[&str]) -> Out {
    let output = Command::new(env!("CARGO_BIN_EXE_memc"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("the memc binary runs");
    Out {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A scratch path as the `&str` a command line takes.
#[allow(dead_code)]
pub fn path_str(path: &Path) -> &str {
    path.to_str().expect("scratch paths are UTF-8")
}

/// `text` with every digit (and every hex digit after `0x`) as `#`: checksums, sizes and
/// offsets that change with the build, masked for snapshots.
#[allow(dead_code)]
pub fn mask_numbers(text: &str) -> String {
    let mut pieces = text.split("0x");
    let mut out = pieces.next().unwrap_or("").to_string();
    for piece in pieces {
        let hex = piece.len()
            - piece
                .trim_start_matches(|c: char| c.is_ascii_hexdigit())
                .len();
        out.push_str("0x");
        out.push_str(&"#".repeat(hex));
        out.push_str(&piece[hex..]);
    }
    out.chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect()
}
