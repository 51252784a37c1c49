//! The bodies of memc's fuzz targets, one function per target, each taking the fuzzer's bytes.
//!
//! The cargo-fuzz binaries in `fuzz/fuzz_targets/` call these functions, and so does the root
//! crate's `tests/fuzz_corpus.rs` (which includes this file by path), replaying every committed
//! corpus file on stable Rust so CI keeps the corpus without nightly. The file uses only the
//! public API of the `memc` library, which both crates depend on.
//!
//! Every target holds memc to the same promise: any bytes give a result or an error, never a
//! panic, a hang, an out-of-memory or (under AddressSanitizer) an access outside memory memc
//! owns. Sizes are capped before anything is run, so a large but valid model or plan is not
//! mistaken for an out-of-memory bug.

use memc::codegen::kernel::Region;
use memc::codegen::Target;
use memc::ir::onnx::import_bytes;
use memc::runtime::{npy, PlanFile, Session, SessionOptions, TensorRef};
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The most bytes of arena, weights or persistent state a plan may have to be run.
pub const MAX_RUN_BYTES: u64 = 4 << 20;
/// The most arena bytes a fuzzed model's memory plan may have to be lowered to kernels.
pub const MAX_LOWER_ARENA_BYTES: u64 = 16 << 20;
/// The most kernels a program may have to be compiled by the CPU backend and run.
pub const MAX_RUN_KERNELS: usize = 64;
/// The value every symbolic dim of a fuzzed model is bound to.
pub const FUZZ_DIM: u64 = 2;

/// ONNX import: any bytes give a module or a diagnostic.
pub fn import_onnx(data: &[u8]) {
    let _ = import_bytes(bytes::Bytes::copy_from_slice(data), None);
}

/// The text parser: any UTF-8 text parses or gives a diagnostic; what parses verifies without
/// panicking and prints back to text that parses to the same text.
pub fn parse_ir(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match memc::ir::parse_module(text) {
        Ok(module) => {
            let _ = memc::ir::verify_module(&module);
            let printed = memc::ir::print_module(&module);
            let reparsed = memc::ir::parse_module(&printed).expect("printed IR parses");
            assert_eq!(memc::ir::print_module(&reparsed), printed);
        }
        Err(diag) => {
            let _ = diag.render("fuzz.mlir", text, false);
        }
    }
}

/// Plan files: the bytes (with their checksums recomputed, so that mutations reach the checks
/// behind them) are written as a file and opened with [`PlanFile::open`]; a plan that opens and
/// is small enough is loaded into a [`Session`] and run on zero-filled inputs. What `memc run`
/// does with an untrusted plan: the validator must refuse everything that would crash or reach
/// outside the arena, the weights or the state.
pub fn plan_file(data: &[u8]) {
    let file = TempFile::new("plan", &with_plan_checksums(data));
    run_plan_with_zeros(file.path());
}

/// `.npy` reading: any bytes give a tensor or an error; a tensor read writes back to a file
/// that reads to the same tensor.
pub fn read_npy(data: &[u8]) {
    let file = TempFile::new("npy", data);
    let Ok(tensor) = npy::read_npy(file.path()) else {
        return;
    };
    let copy = TempFile::new("npy", &[]);
    npy::write_npy(copy.path(), tensor.as_ref()).expect("a tensor read from .npy writes back");
    let again = npy::read_npy(copy.path()).expect("a written .npy file reads back");
    assert_eq!(again.elem(), tensor.elem());
    assert_eq!(again.shape(), tensor.shape());
    assert_eq!(again.data(), tensor.data());
}

/// The whole pipeline: ONNX bytes imported, every symbolic dim bound to [`FUZZ_DIM`], memory
/// planned, and (when the arena is at most [`MAX_LOWER_ARENA_BYTES`]) lowered to kernels with
/// `memc::compile`; a small program is written as a plan file and run on the CPU.
pub fn compile_onnx(data: &[u8]) {
    let Ok(imported) = import_bytes(bytes::Bytes::copy_from_slice(data), None) else {
        return;
    };
    let module = imported.module;
    let mut dims: Vec<(String, u64)> = memc::ir::unbound_symbols(&module)
        .into_iter()
        .map(|name| (name, FUZZ_DIM))
        .collect();
    dims.sort();
    let mut options = memc::compile::CompileOptions {
        dims: dims.iter().cloned().collect::<HashMap<_, _>>(),
        plan_memory: true,
        ..Default::default()
    };
    // Planning sizes buffers without allocating them; lowering packs weights and sizes
    // scratch, so it runs only on a plan of bounded size.
    let Ok(planned) = memc::compile::compile_module(module.clone(), &options) else {
        return;
    };
    let arena = planned.plan.as_ref().map_or(0, |plan| plan.arena_size);
    if arena > MAX_LOWER_ARENA_BYTES {
        return;
    }
    options.lower = true;
    let Ok(compiled) = memc::compile::compile_module(module, &options) else {
        return;
    };
    let program = compiled
        .program
        .as_ref()
        .expect("compile_module lowers when `lower` is set");
    program
        .validate()
        .expect("every program memc lowers passes the plan validator");
    if !runnable(program) {
        return;
    }
    let meta = memc::compile::plan_meta(Path::new("fuzz.onnx"), dims, Target::Cpu, &compiled)
        .expect("the program was lowered");
    let file = TempFile::new("plan", &[]);
    memc::runtime::write_plan(file.path(), &meta, &compiled.module.weights)
        .expect("a plan file writes to a temporary file");
    run_plan_with_zeros(file.path());
}

/// Whether a validated program is small enough to compile and run in a fuzzing iteration.
fn runnable(program: &memc::codegen::Program) -> bool {
    program.arena_size <= MAX_RUN_BYTES
        && program.weights_size <= MAX_RUN_BYTES
        && program.state_size <= MAX_RUN_BYTES
        && program.n_kernels() <= MAX_RUN_KERNELS
}

/// Opens the plan at `path` and, when it is valid and small, runs it once on one thread with
/// every input and persistent state tensor zero-filled. Errors are fine; panics are not.
fn run_plan_with_zeros(path: &Path) {
    let Ok(plan) = PlanFile::open(path) else {
        return;
    };
    if Target::from_name(&plan.meta().target) != Some(Target::Cpu) || !runnable(plan.program()) {
        return;
    }
    drop(plan);
    let options = SessionOptions {
        threads: Some(NonZeroUsize::MIN),
        verify_weights: true,
    };
    let Ok(mut session) = Session::load_with(path, &options) else {
        return;
    };
    let state: Vec<_> = session
        .state()
        .iter()
        .map(|s| (s.name.clone(), s.elem, s.shape.clone(), s.byte_size()))
        .collect();
    for (name, elem, shape, size) in state {
        let zeros = vec![0u8; size as usize];
        let tensor = TensorRef::new(elem, &shape, &zeros).expect("the state's size is its shape's");
        // Gradients may refuse to be set; a run then reports what is missing.
        let _ = session.set_state(&name, tensor);
    }
    let inputs: Vec<_> = session
        .inputs()
        .iter()
        .map(|io| {
            assert_eq!(
                io.region,
                Region::Arena,
                "validated inputs live in the arena"
            );
            (
                io.name.clone(),
                io.elem,
                io.shape.clone(),
                vec![0u8; io.byte_size() as usize],
            )
        })
        .collect();
    let bound: Vec<(&str, TensorRef<'_>)> = inputs
        .iter()
        .map(|(name, elem, shape, zeros)| {
            let tensor =
                TensorRef::new(*elem, shape, zeros).expect("the input's size is its shape's");
            (name.as_str(), tensor)
        })
        .collect();
    let _ = session.run(&bound);
}

/// The bytes of a would-be plan file with the header's checksums recomputed where the header
/// names sections inside the bytes (offsets and lengths as `memc_runtime::plan` lays them out).
fn with_plan_checksums(data: &[u8]) -> Vec<u8> {
    let mut bytes = data.to_vec();
    if bytes.len() < 64 {
        return bytes;
    }
    let u64_at =
        |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let section = |b: &[u8], offset_at: usize| -> Option<std::ops::Range<usize>> {
        let start = usize::try_from(u64_at(b, offset_at)).ok()?;
        let len = usize::try_from(u64_at(b, offset_at + 8)).ok()?;
        let end = start.checked_add(len)?;
        (end <= b.len()).then_some(start..end)
    };
    if let Some(metadata) = section(&bytes, 16) {
        let crc = crc32fast::hash(&bytes[metadata]);
        bytes[48..52].copy_from_slice(&crc.to_le_bytes());
    }
    if let Some(weights) = section(&bytes, 32) {
        let crc = crc32fast::hash(&bytes[weights]);
        bytes[52..56].copy_from_slice(&crc.to_le_bytes());
    }
    let crc = crc32fast::hash(&bytes[0..60]);
    bytes[60..64].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// A file in the temporary directory, unique to this process and call, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(extension: &str, bytes: &[u8]) -> TempFile {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("memc-fuzz-{}-{n}.{extension}", std::process::id()));
        std::fs::write(&path, bytes).expect("the temporary directory is writable");
        TempFile(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
