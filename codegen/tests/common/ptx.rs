//! PTX test support: assembling a module with `ptxas` (no GPU needed).
//!
//! `ptxas` is `$MEMC_PTXAS`, else the one the test venv installs
//! (`.venv/lib/python3.11/site-packages/nvidia/cuda_nvcc/bin/ptxas` under the workspace root).
//! Where there is none, [`assemble`] says so on stderr and returns `None`, unless
//! `MEMC_REQUIRE_PTXAS=1`, when it panics.

use std::path::PathBuf;
use std::process::Command;

/// The ptxas to use, if any.
pub fn ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MEMC_PTXAS") {
        return Some(PathBuf::from(p));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let p = root.join(".venv/lib/python3.11/site-packages/nvidia/cuda_nvcc/bin/ptxas");
    p.exists().then_some(p)
}

/// Assembles `text` for `arch` (`sm_80`, `sm_90`) with `--warn-on-spills -v`: `None` where no
/// ptxas is found, else `Ok(ptxas's report)` or `Err` when it fails or reports a spill.
pub fn assemble(text: &str, arch: &str) -> Option<Result<String, String>> {
    let Some(ptxas) = ptxas() else {
        if std::env::var("MEMC_REQUIRE_PTXAS").as_deref() == Ok("1") {
            panic!("MEMC_REQUIRE_PTXAS=1 but no ptxas was found");
        }
        eprintln!("skipped: no ptxas (set MEMC_PTXAS)");
        return None;
    };
    let dir = std::env::temp_dir().join(format!("memc-ptx-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join(format!("module-{arch}-{}.ptx", text.len()));
    if let Err(e) = std::fs::write(&file, text) {
        return Some(Err(format!("writing {}: {e}", file.display())));
    }
    let out = Command::new(&ptxas)
        .arg(format!("-arch={arch}"))
        .args(["--warn-on-spills", "-v", "-o", "/dev/null"])
        .arg(&file)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => return Some(Err(format!("running {}: {e}", ptxas.display()))),
    };
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Some(Err(format!(
            "ptxas failed on {}:\n{report}",
            file.display()
        )));
    }
    let spills: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("warning") || (l.contains("spill") && !l.contains(" 0 bytes spill")))
        .collect();
    if !spills.is_empty() {
        return Some(Err(format!("{}:\n{}", file.display(), spills.join("\n"))));
    }
    let _ = std::fs::remove_file(&file);
    Some(Ok(report))
}
