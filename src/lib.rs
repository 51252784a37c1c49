//! memc: a memory-planning compiler for neural-network models.
//!
//! This crate is the library facade other compilers use, and the home of the `memc` command.
//! It re-exports the stage crates ([`ir`], [`passes`], [`codegen`], [`runtime`]) and holds the
//! drivers the command line calls, so that everything the CLI does is callable as a library.
//!
//! Built: the IR with its MLIR-syntax printer and parser, the verifier, the pass manager, the
//! `memc opt` driver ([`opt`]), the compile pipeline ([`compile`]: ONNX import, shape inference,
//! memory planning, lowering to kernels), the plan file, the drivers of `memc run` ([`run`])
//! and `memc inspect` ([`inspect`]), and the memory report ([`report`]: `memc compile --report`,
//! `--emit plan-json` and `memc report PLAN`).

pub mod compile;
pub mod inspect;
pub mod opt;
pub mod plan_csv;
pub mod remat;
pub mod report;
pub mod run;

pub use memc_codegen as codegen;
pub use memc_ir as ir;
pub use memc_passes as passes;
pub use memc_runtime as runtime;

/// The peak resident set size of this process in bytes (`VmHWM` in `/proc/self/status`), or
/// `None` where the kernel does not report it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}
