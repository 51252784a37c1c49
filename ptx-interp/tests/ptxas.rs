//! Every test program is valid PTX: ptxas assembles each for sm_80 and sm_90 with no error
//! and no spill. Skipped, saying so, where ptxas is not installed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn ptxas() -> Option<PathBuf> {
    let from_env = std::env::var_os("PTXAS").map(PathBuf::from);
    let default =
        PathBuf::from("/work/main/.venv/lib/python3.11/site-packages/nvidia/cuda_nvcc/bin/ptxas");
    from_env.into_iter().chain([default]).find(|p| p.is_file())
}

fn assemble(ptxas: &Path, file: &Path) {
    for arch in ["sm_80", "sm_90"] {
        let out = Command::new(ptxas)
            .args([
                &format!("-arch={arch}"),
                "--warn-on-spills",
                "-o",
                "/dev/null",
            ])
            .arg(file)
            .output()
            .expect("ptxas runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{} ({arch}):\n{stderr}",
            file.display()
        );
        assert!(
            !stderr.contains("spill"),
            "{} ({arch}) spills:\n{stderr}",
            file.display()
        );
    }
}

#[test]
fn test_programs_assemble() {
    let Some(ptxas) = ptxas() else {
        eprintln!("SKIPPED: ptxas not found (set PTXAS); the test PTX was not assembled");
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ptx");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 3,
        "expected the test programs in {}",
        dir.display()
    );
    let tmp = std::env::temp_dir().join(format!(
        "memc-ptx-interp-families-{}.ptx",
        std::process::id()
    ));
    std::fs::write(&tmp, common::module(&common::cases())).unwrap();
    files.push(tmp.clone());
    for f in &files {
        assemble(&ptxas, f);
    }
    let _ = std::fs::remove_file(tmp);
}
