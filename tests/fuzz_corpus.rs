//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) and the crash reproducers fixed
//! since (`fuzz/regressions/<target>/`) through the fuzz targets' bodies, on stable Rust: the
//! same functions the cargo-fuzz binaries call (`fuzz/src/targets.rs`, included here by path),
//! so CI keeps every input the fuzzer found interesting without nightly or sanitizers.

#[path = "../fuzz/src/targets.rs"]
mod targets;

use std::path::{Path, PathBuf};

/// The files of `fuzz/<kind>/<target>/`, sorted by name.
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a corpus directory lists").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `body` on every corpus and regression file of `target`; the corpus must not be empty.
fn replay(target: &str, body: fn(&[u8])) {
    let corpus = inputs("corpus", target);
    assert!(
        !corpus.is_empty(),
        "fuzz/corpus/{target}/ is empty or missing: the committed corpus was lost"
    );
    for path in corpus.iter().chain(&inputs("regressions", target)) {
        let data = std::fs::read(path).expect("a corpus file reads");
        // Printed before the call, so a panic's output names the input that caused it.
        eprintln!("{target}: {}", path.display());
        body(&data);
    }
}

#[test]
fn import_onnx_corpus() {
    replay("import_onnx", targets::import_onnx);
}

#[test]
fn parse_ir_corpus() {
    replay("parse_ir", targets::parse_ir);
}

#[test]
fn plan_file_corpus() {
    replay("plan_file", targets::plan_file);
}

#[test]
fn read_npy_corpus() {
    replay("read_npy", targets::read_npy);
}

#[test]
fn compile_onnx_corpus() {
    replay("compile_onnx", targets::compile_onnx);
}
