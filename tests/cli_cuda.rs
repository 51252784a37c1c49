//! `memc compile --target cuda`, `--emit ptx`, `memc inspect` and `memc run` of a cuda plan, as
//! a user meets them on a machine with or without a GPU.
//!
//! - The bundled example compiles for cuda: the plan is written, `inspect` says `cuda` and
//!   counts the PTX entries, and `--emit ptx -o DIR` writes the module (with `.entry`s) and its
//!   launch list. These need every kernel of the example to have a PTX form (the emitters in
//!   `codegen/src/ptx/`).
//! - A plan whose stored PTX was altered (the metadata edited and its checksums fixed, so only
//!   the PTX check can catch it) is refused by `inspect` and `run`; so is a cuda plan without
//!   PTX. These use a kernel-less program, whose PTX module is the header alone, and the
//!   classifier's cuda plan.
//! - `memc run` of a cuda plan where no CUDA driver is installed exits 1 with a message that
//!   names the driver (run only where `/proc/driver/nvidia` and `libcuda.so.1` are absent).

mod common;

use common::{memc_in, path_str, Out};
use memc::codegen::Program;
use memc::runtime::plan::PlanMeta;
use std::path::{Path, PathBuf};

fn memc(args: &[&str]) -> Out {
    memc_in(common::root(), args)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memc-cli-cuda-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    dir
}

/// Compiles the example for cuda into `dir` and returns the plan's path.
fn compile_example_for_cuda(dir: &Path) -> PathBuf {
    let plan = dir.join("classifier.plan");
    let out = memc(&[
        "compile",
        "examples/classifier.onnx",
        "--dim",
        "batch=1",
        "--target",
        "cuda",
        "-o",
        path_str(&plan),
    ]);
    assert_eq!(out.code, 0, "compile --target cuda: {}", out.stderr);
    plan
}

/// A program with no kernels and nothing to read or write: its PTX module is the header.
fn kernel_less_program() -> Program {
    Program {
        arena_size: 64,
        weights_size: 0,
        state_size: 0,
        inputs: vec![],
        outputs: vec![],
        weights: vec![],
        state: vec![],
        steps: vec![],
    }
}

/// Writes a plan of the kernel-less program for `target` at `path` (with its PTX for cuda).
fn write_kernel_less_plan(path: &Path, target: &str) {
    let program = kernel_less_program();
    let mut meta = PlanMeta::new("empty.onnx", target, program);
    if target == "cuda" {
        meta.ptx = Some(
            memc::codegen::ptx::emit_program(&meta.program).expect("a kernel-less program emits"),
        );
    }
    memc::runtime::write_plan(path, &meta, &memc::ir::WeightStore::new())
        .expect("the kernel-less plan writes");
}

fn write_kernel_less_cuda_plan(path: &Path) {
    write_kernel_less_plan(path, "cuda");
}

/// CRC-32 (IEEE, reflected, as `crc32fast` computes it), for re-sealing an edited plan.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Replaces the first `from` in the plan's metadata by `to` (of the same length), then fixes
/// the metadata and header checksums, so that only the checks after them see the change.
fn edit_metadata(plan: &[u8], from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len(), "an edit keeps the metadata's length");
    let mut bytes = plan.to_vec();
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let (offset, len) = (u64_at(&bytes, 16) as usize, u64_at(&bytes, 24) as usize);
    let metadata = &mut bytes[offset..offset + len];
    let at = metadata
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .unwrap_or_else(|| panic!("the metadata holds `{from}`"));
    metadata[at..at + to.len()].copy_from_slice(to.as_bytes());
    let metadata_crc = crc32(&bytes[offset..offset + len]);
    bytes[48..52].copy_from_slice(&metadata_crc.to_le_bytes());
    let header_crc = crc32(&bytes[0..60]);
    bytes[60..64].copy_from_slice(&header_crc.to_le_bytes());
    bytes
}

#[test]
fn the_example_compiles_for_cuda_and_inspect_shows_its_ptx() {
    let dir = scratch("example");
    let plan = compile_example_for_cuda(&dir);
    let inspect = memc(&["inspect", path_str(&plan)]);
    assert_eq!(inspect.code, 0, "{}", inspect.stderr);
    assert!(
        inspect.stdout.contains("from classifier.onnx for cuda"),
        "{}",
        inspect.stdout
    );
    let ptx_line = inspect
        .stdout
        .lines()
        .find(|l| l.starts_with("ptx "))
        .unwrap_or_else(|| panic!("inspect shows the PTX: {}", inspect.stdout));
    assert!(ptx_line.contains(" entries in a "), "{ptx_line}");
    assert!(ptx_line.contains("largest block"), "{ptx_line}");

    let json = memc(&["inspect", path_str(&plan), "--json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).expect("inspect --json");
    assert_eq!(value["meta"]["target"], "cuda");
    let launches = value["meta"]["ptx"]["launches"]
        .as_array()
        .expect("a cuda plan lists its launches");
    assert!(!launches.is_empty());
    let text = value["meta"]["ptx"]["text"].as_str().expect("PTX text");
    assert!(text.starts_with(memc::codegen::ptx::HEADER), "{text}");
    assert_eq!(text.matches(".entry ").count(), launches.len());

    // A cpu plan of the same model carries no PTX, and inspect says nothing about it.
    let cpu_plan = dir.join("cpu.plan");
    let out = memc(&[
        "compile",
        "examples/classifier.onnx",
        "--dim",
        "batch=1",
        "-o",
        path_str(&cpu_plan),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let inspect = memc(&["inspect", path_str(&cpu_plan)]);
    assert!(inspect.stdout.contains("for cpu"), "{}", inspect.stdout);
    assert!(!inspect.stdout.lines().any(|l| l.starts_with("ptx ")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn emit_ptx_writes_the_module_and_its_launches() {
    let dir = scratch("emit");
    let out_dir = dir.join("ptx");
    // `--emit ptx` implies `--target cuda`.
    let out = memc(&[
        "compile",
        "examples/classifier.onnx",
        "--dim",
        "batch=1",
        "--emit",
        "ptx",
        "-o",
        path_str(&out_dir),
    ]);
    assert_eq!(out.code, 0, "compile --emit ptx: {}", out.stderr);
    let module = std::fs::read_to_string(out_dir.join("classifier.ptx")).expect("the module");
    assert!(module.starts_with(memc::codegen::ptx::HEADER), "{module}");
    assert!(module.contains(".entry "), "{module}");
    let launches: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("classifier.launches.json")).expect("launches"),
    )
    .expect("the launch list is JSON");
    let launches = launches.as_array().expect("a list");
    assert_eq!(module.matches(".entry ").count(), launches.len());
    for launch in launches {
        let entry = launch["entry"].as_str().expect("an entry name");
        assert!(module.contains(&format!(".entry {entry}")), "{entry}");
        assert!(launch["op"].is_string() && launch["kernel"].is_string());
        assert_eq!(launch["grid"].as_array().map(Vec::len), Some(3));
        assert_eq!(launch["block"].as_array().map(Vec::len), Some(3));
        assert!(launch["shared_bytes"].is_u64());
    }
    // The same model written as a plan stores the same module.
    let plan = compile_example_for_cuda(&dir);
    let opened = memc::runtime::PlanFile::open(&plan).expect("the plan opens");
    assert_eq!(opened.meta().ptx.as_ref().map(|m| &m.text), Some(&module));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn emit_ptx_needs_a_directory_and_the_cuda_target() {
    let out = memc(&[
        "compile",
        "examples/classifier.onnx",
        "--dim",
        "batch=1",
        "--emit",
        "ptx",
    ]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("`-o DIR`"), "{}", out.stderr);
    let out = memc(&[
        "compile",
        "examples/classifier.onnx",
        "--dim",
        "batch=1",
        "--emit",
        "ptx",
        "--target",
        "cpu",
        "-o",
        "unused",
    ]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("cuda target"), "{}", out.stderr);
}

const MISMATCH: &str =
    "the plan's PTX does not match its kernels: it was altered, or written by another memc version";

#[test]
fn a_plan_with_altered_ptx_is_refused() {
    let dir = scratch("tampered");
    let plan = dir.join("empty.plan");
    write_kernel_less_cuda_plan(&plan);
    let inspect = memc(&["inspect", path_str(&plan)]);
    assert_eq!(inspect.code, 0, "{}", inspect.stderr);
    assert!(inspect.stdout.contains("0 entries"), "{}", inspect.stdout);

    let bytes = std::fs::read(&plan).expect("the plan reads");
    let altered = dir.join("altered.plan");
    std::fs::write(&altered, edit_metadata(&bytes, "sm_80", "sm_90")).expect("scratch");
    for command in ["inspect", "run"] {
        let out = memc(&[command, path_str(&altered)]);
        assert_eq!(out.code, 1, "{command}: {}", out.stderr);
        assert!(out.stderr.contains(MISMATCH), "{command}: {}", out.stderr);
    }
    match memc::runtime::Session::load(&altered) {
        Err(e) => assert!(e.to_string().contains(MISMATCH), "{e}"),
        Ok(_) => panic!("a session loads a plan with altered PTX"),
    }

    // A cuda plan without PTX, and a cpu plan with some, are refused too.
    let cpu_plan = dir.join("cpu.plan");
    write_kernel_less_plan(&cpu_plan, "cpu");
    let cpu_bytes = std::fs::read(&cpu_plan).expect("the plan reads");
    let no_ptx = dir.join("no_ptx.plan");
    std::fs::write(
        &no_ptx,
        edit_metadata(
            &cpu_bytes,
            "\"empty.onnx\",\"target\":\"cpu\"",
            "\"empty.onn\",\"target\":\"cuda\"",
        ),
    )
    .expect("scratch");
    let out = memc(&["inspect", path_str(&no_ptx)]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stderr.contains("the `cuda` plan carries no PTX"),
        "{}",
        out.stderr
    );
    let cpu_with_ptx = dir.join("cpu_with_ptx.plan");
    std::fs::write(
        &cpu_with_ptx,
        edit_metadata(&bytes, "\"target\":\"cuda\"", "\"target\":\"cpu\" "),
    )
    .expect("scratch");
    let out = memc(&["inspect", path_str(&cpu_with_ptx)]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("carries PTX, which only `cuda` plans do"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_example_with_altered_ptx_is_refused() {
    let dir = scratch("tampered_example");
    let plan = compile_example_for_cuda(&dir);
    let bytes = std::fs::read(&plan).expect("the plan reads");
    // One edit in the module's text, one in the launch list: each is refused on its own.
    let edits = [
        (".target sm_80", ".target sm_90"),
        ("\"entry\":\"memc_s0_k0\"", "\"entry\":\"memc_s0_k9\""),
    ];
    for (index, (from, to)) in edits.into_iter().enumerate() {
        let altered = dir.join(format!("altered{index}.plan"));
        std::fs::write(&altered, edit_metadata(&bytes, from, to)).expect("scratch");
        let out = memc(&[
            "run",
            path_str(&altered),
            "--input",
            "image=examples/classifier_input.npy",
        ]);
        assert_eq!(out.code, 1, "{from}: {}", out.stderr);
        assert!(out.stderr.contains(MISMATCH), "{from}: {}", out.stderr);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether this machine has no CUDA driver: no NVIDIA kernel module and no `libcuda.so.1` in
/// the usual library directories.
fn no_cuda_driver() -> bool {
    let libdirs = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/compat",
        "/usr/lib/wsl/lib",
    ];
    !Path::new("/proc/driver/nvidia").exists()
        && !libdirs
            .iter()
            .any(|d| Path::new(d).join("libcuda.so.1").exists())
}

#[test]
fn running_a_cuda_plan_without_a_driver_names_the_driver() {
    if !no_cuda_driver() {
        eprintln!("skipped: this machine has a CUDA driver");
        return;
    }
    let dir = scratch("no_driver");
    let plan = dir.join("empty.plan");
    write_kernel_less_cuda_plan(&plan);
    let out = memc(&["run", path_str(&plan)]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    assert!(
        out.stderr.to_lowercase().contains("driver"),
        "the message names the CUDA driver: {}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}
