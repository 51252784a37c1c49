//! The backend a session runs on: picked from the plan's target, and a clear error where this
//! build has none. `cargo test -p memc-runtime --no-default-features --test backend` checks the
//! build without the `cpu` and `cuda` features.

mod common;

use common::*;
use memc_runtime::plan::PlanMeta;
use memc_runtime::{write_plan, Session};
use std::path::PathBuf;

fn plan_for(test: &str, target: &str) -> PathBuf {
    let (mut program, store) = add_matmul_program();
    let path = scratch_dir(test).join("tiny.plan");
    if target == "cuda" {
        // A cuda plan carries the PTX of its kernels; with none, the module is its header
        // alone, whatever the PTX emitters can do.
        program.steps.clear();
    }
    let mut meta = PlanMeta::new("tiny.onnx", target, program);
    if target == "cuda" {
        meta.ptx = Some(memc_codegen::ptx::emit_program(&meta.program).unwrap());
    }
    write_plan(&path, &meta, &store).unwrap();
    path
}

fn load_error(path: &PathBuf) -> Option<String> {
    Session::load(path).err().map(|e| e.to_string())
}

#[cfg(feature = "cpu")]
#[test]
fn a_cpu_plan_runs_on_the_cpu_backend() {
    let path = plan_for("backend_cpu", "cpu");
    let session = Session::load(&path).unwrap();
    assert_eq!(session.target(), memc_codegen::Target::Cpu);
}

#[cfg(not(feature = "cpu"))]
#[test]
fn without_the_cpu_feature_loading_a_cpu_plan_is_an_error() {
    let path = plan_for("backend_not_built", "cpu");
    assert_eq!(
        load_error(&path).as_deref(),
        Some("memc was built without the cpu backend")
    );
}

#[cfg(not(feature = "cuda"))]
#[test]
fn without_the_cuda_feature_loading_a_cuda_plan_is_an_error() {
    let path = plan_for("backend_cuda_not_built", "cuda");
    assert_eq!(
        load_error(&path).as_deref(),
        Some("memc was built without the cuda backend")
    );
}

#[cfg(feature = "cuda")]
#[test]
fn with_the_cuda_feature_a_cuda_plan_needs_the_driver() {
    if memc_codegen::cuda::driver_present() {
        println!("skipped: an NVIDIA driver is present (tests/cuda.rs runs cuda plans on it)");
        return;
    }
    let path = plan_for("backend_cuda", "cuda");
    assert_eq!(
        load_error(&path).as_deref(),
        Some("no NVIDIA driver found: libcuda.so could not be loaded (run the plan on a machine with an NVIDIA GPU and its driver, or compile it with --target cpu)")
    );
}

#[test]
fn a_target_memc_does_not_know_is_an_error() {
    let path = plan_for("backend_unknown", "tpu");
    assert_eq!(
        load_error(&path).as_deref(),
        Some("the plan was compiled for target `tpu`, which memc does not know")
    );
}
