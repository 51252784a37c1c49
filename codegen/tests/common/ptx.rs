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
    // The workspace root is the manifest's directory (root tests) or its parent (a member's).
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [dir.clone(), dir.join("..")].into_iter().find_map(|root| {
        let lib = root.join(".venv/lib");
        std::fs::read_dir(lib).ok()?.flatten().find_map(|python| {
            let p = python
                .path()
                .join("site-packages/nvidia/cuda_nvcc/bin/ptxas");
            p.exists().then_some(p)
        })
    })
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
    // A name of its own per call: tests assemble modules on several threads at once.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = dir.join(format!("module-{arch}-{call}.ptx"));
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

use memc_codegen::kernel::{Kernel, Region, RegionSizes, Scalar};
use memc_codegen::ptx::{emit_kernel, emit_program, PtxModule, HEADER};
use memc_codegen::{reference, Program};
use memc_ptx_interp as interp;

/// Runs every launch of `module` (the PTX of `program`) in the PTX interpreter over the three
/// regions, in schedule order, as the CUDA backend runs them; the regions are updated in place.
pub fn run_program_in_interpreter(
    program: &Program,
    module: &PtxModule,
    arena: &mut [u8],
    weights: &[u8],
    state: &mut [u8],
) -> Result<(), String> {
    let _ = program;
    let launches: Vec<(String, memc_codegen::ptx::Launch)> = module
        .launches
        .iter()
        .map(|l| (l.entry.clone(), l.launch))
        .collect();
    run_launches(&module.text, &launches, arena, weights, state)
}

/// Runs `launches` (entry, launch) of the PTX module `text` over the three regions.
pub fn run_launches(
    text: &str,
    launches: &[(String, memc_codegen::ptx::Launch)],
    arena: &mut [u8],
    weights: &[u8],
    state: &mut [u8],
) -> Result<(), String> {
    let parsed = interp::Module::parse(text).map_err(|e| e.to_string())?;
    let mut mem = interp::Memory::new();
    let a = mem.add(arena.to_vec());
    let w = mem.add(weights.to_vec());
    let s = mem.add(state.to_vec());
    for (entry, l) in launches {
        let launch = interp::Launch {
            grid: l.grid,
            block: l.block,
            shared_bytes: l.shared_bytes,
        };
        parsed
            .launch(entry, launch, &[a, w, s], &mut mem)
            .map_err(|e| e.to_string())?;
    }
    arena.copy_from_slice(mem.bytes(a));
    state.copy_from_slice(mem.bytes(s));
    Ok(())
}

/// Emits `program`'s PTX and runs it in the interpreter over copies of the regions, runs the
/// reference over other copies, and compares the program's outputs (and the whole state) with
/// [`compare`]. Returns the first difference.
pub fn check_program(
    program: &Program,
    arena: &[u8],
    weights: &[u8],
    state: &[u8],
    rtol: f64,
) -> Result<(), String> {
    let module = emit_program(program).map_err(|e| e.to_string())?;
    let (mut ga, mut gs) = (arena.to_vec(), state.to_vec());
    run_program_in_interpreter(program, &module, &mut ga, weights, &mut gs)?;
    let (mut ra, mut rs) = (arena.to_vec(), state.to_vec());
    reference::run_with_state(program, &mut ra, weights, &mut rs).map_err(|e| e.to_string())?;
    for io in &program.outputs {
        let (g, r): (&[u8], &[u8]) = match io.region {
            Region::Arena => (&ga, &ra),
            Region::State => (&gs, &rs),
            Region::Weights => continue,
        };
        let at = io.byte_offset as usize;
        let n = io.byte_size() as usize;
        compare(io.elem, &g[at..at + n], &r[at..at + n], rtol)
            .map_err(|e| format!("output `{}`: {e}", io.name))?;
    }
    Ok(())
}

/// A run's final arena and state.
pub type Regions = (Vec<u8>, Vec<u8>);

/// Runs kernels one by one through the interpreter and the reference over copies of the
/// regions; returns (interpreter, reference) regions: arena, state.
pub fn run_kernels_both(
    kernels: &[Kernel],
    arena: &[u8],
    weights: &[u8],
    state: &[u8],
) -> Result<[Regions; 2], String> {
    let sizes = RegionSizes {
        arena: arena.len() as u64,
        weights: weights.len() as u64,
        state: state.len() as u64,
    };
    let mut text = String::from(HEADER);
    let mut launches = Vec::new();
    for (i, k) in kernels.iter().enumerate() {
        k.validate(sizes).map_err(|e| e.to_string())?;
        let name = format!("k{i}");
        let entry = emit_kernel(k, &name, sizes).map_err(|e| e.to_string())?;
        text.push('\n');
        text.push_str(&entry.text);
        launches.push((name, entry.launch));
    }
    let (mut ga, mut gs) = (arena.to_vec(), state.to_vec());
    run_launches(&text, &launches, &mut ga, weights, &mut gs)?;
    let (mut ra, mut rs) = (arena.to_vec(), state.to_vec());
    for k in kernels {
        reference::run_kernel_with_state(k, &mut ra, weights, &mut rs)
            .map_err(|e| e.to_string())?;
    }
    Ok([(ga, gs), (ra, rs)])
}

/// Compares two little-endian arrays of `elem`: integers and bools bit-exactly, floats within
/// `rtol` relative (and `rtol` absolute near zero; a narrow float at least one ulp of its
/// format), NaN equal to NaN.
pub fn compare(elem: Scalar, got: &[u8], want: &[u8], rtol: f64) -> Result<(), String> {
    let size = elem.size() as usize;
    if got.len() != want.len() {
        return Err(format!("{} bytes against {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.chunks(size).zip(want.chunks(size)).enumerate() {
        let ok = match elem {
            e if e.is_float() => {
                let (a, b) = (float(elem, g), float(elem, w));
                let tol = match elem.float_format() {
                    Some(format) => rtol.max(2f64.powi(-(format.man_bits as i32))),
                    None => rtol,
                };
                (a.is_nan() && b.is_nan())
                    || a == b
                    || (a - b).abs() <= tol * b.abs().max(a.abs()).max(tol)
            }
            _ => g == w,
        };
        if !ok {
            return Err(format!(
                "element {i} ({}): got {:?}, want {:?}",
                elem.name(),
                show(elem, g),
                show(elem, w)
            ));
        }
    }
    Ok(())
}

fn float(elem: Scalar, b: &[u8]) -> f64 {
    match elem {
        Scalar::F32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Scalar::F64 => f64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
        // A narrow float, widened.
        narrow => {
            let mut raw = [0u8; 8];
            raw[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
            f64::from_bits(narrow.widen(u64::from_le_bytes(raw)))
        }
    }
}

fn show(elem: Scalar, b: &[u8]) -> String {
    if elem.is_float() {
        format!("{}", float(elem, b))
    } else {
        format!("{b:02x?}")
    }
}
