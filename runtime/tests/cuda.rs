//! The CUDA backend: a clear error on machines without the NVIDIA driver, and on machines with
//! one, the same results as the CPU backend.
//!
//! The GPU tests check for the driver first: without it they print "skipped: no NVIDIA driver"
//! and pass, unless `MEMC_REQUIRE_CUDA=1` is set, when they fail (the GPU machine's CI sets it,
//! so a broken driver setup cannot pass as a skip). On the GPU they compare the CUDA backend
//! with the CPU backend on the same random inputs over several runs in a row (graph replay),
//! with the state written, run and read back.
//!
//! `hand_written_ptx_*` run a PTX module written here, so they test the driver plumbing (module
//! load, dynamic shared memory above 48 KiB, the graph, the copies) apart from the emitters;
//! `classifier_*` run a real model through the emitters (`Session::load` of a `cuda` plan).

#![cfg(feature = "cuda")]
// The copies take lists of byte ranges; a list of one range is what these tests mean.
#![allow(clippy::single_range_in_vec_init)]

mod common;

use common::*;
use memc_codegen::backend::{BackendError, BackendOptions};
use memc_codegen::cuda::driver_present;
use memc_runtime::plan::PlanMeta;
use memc_runtime::{write_plan, Session};

const NO_DRIVER: &str = "no NVIDIA driver found: libcuda.so could not be loaded (run the plan on a machine with an NVIDIA GPU and its driver, or compile it with --target cpu)";

/// Whether a GPU test should run: true with the driver; without it, prints that the test is
/// skipped and returns false, or fails when `MEMC_REQUIRE_CUDA=1`.
fn have_gpu(test: &str) -> bool {
    if driver_present() {
        return true;
    }
    assert!(
        std::env::var("MEMC_REQUIRE_CUDA").as_deref() != Ok("1"),
        "{test}: MEMC_REQUIRE_CUDA=1 but no NVIDIA driver (libcuda.so) could be loaded"
    );
    println!("skipped: no NVIDIA driver ({test})");
    false
}

#[test]
fn without_the_driver_loading_a_cuda_plan_is_an_error_not_a_panic() {
    if driver_present() {
        println!("skipped: an NVIDIA driver is present (this test is for machines without one)");
        return;
    }
    let (program, store) = add_matmul_program();
    let path = scratch_dir("cuda_no_driver").join("tiny.plan");
    let mut meta = PlanMeta::new("tiny.onnx", "cuda", program.clone());
    meta.ptx = Some(memc_codegen::ptx::emit_program(&program).unwrap());
    write_plan(&path, &meta, &store).unwrap();
    let error = Session::load(&path).err().map(|e| e.to_string());
    assert_eq!(error.as_deref(), Some(NO_DRIVER));

    // The library answers the same before touching the driver, whichever way it is entered.
    let backend = memc_codegen::backend::backend_for(memc_codegen::Target::Cuda).unwrap();
    let error = backend
        .compile(&program, &[0; 96], &BackendOptions::default())
        .err()
        .map(|e| e.to_string());
    assert_eq!(error.as_deref(), Some(NO_DRIVER));
    let module = memc_codegen::ptx::PtxModule {
        text: memc_codegen::ptx::HEADER.to_string(),
        launches: vec![],
    };
    let error = memc_codegen::cuda::CudaProgram::from_module(&program, &module, &[0; 96]).err();
    assert!(matches!(error, Some(BackendError::NoDriver)), "{error:?}");
}

/// A deterministic stream of floats in [-1, 1).
struct Random(u64);

impl Random {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn floats(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn assert_close(what: &str, gpu: &[f32], cpu: &[f32]) {
    assert_eq!(gpu.len(), cpu.len(), "{what}: lengths differ");
    for (i, (g, c)) in gpu.iter().zip(cpu).enumerate() {
        let tolerance = 1e-4 * c.abs().max(1.0);
        assert!(
            (g - c).abs() <= tolerance || (g.is_nan() && c.is_nan()),
            "{what}: element {i}: cuda {g}, cpu {c}"
        );
    }
}

#[cfg(feature = "cpu")]
mod gpu {
    use super::*;
    use memc_codegen::backend::{Backend, CompiledProgram};
    use memc_codegen::cpu::CpuBackend;
    use memc_codegen::cuda::CudaProgram;
    use memc_codegen::kernel::{BinaryOp, Region};
    use memc_codegen::program::{Step, WeightSlot};
    use memc_codegen::ptx::{KernelLaunch, Launch, PtxModule, HEADER, PARAMS};
    use memc_codegen::{Program, Scalar};
    use std::collections::HashMap;

    /// A program of one step with two kernels over `x: f32[4]` (arena 0), `bias: f32[4]`
    /// (weights 0) and `acc: f32[4]` (state 0):
    ///
    /// - `y = x + bias` into arena 64;
    /// - `acc = acc + y`, in place in the state.
    fn accumulate_program() -> Program {
        let f32_view = |region, offset| view(region, Scalar::F32, offset, vec![1]);
        let add = binary_kernel(
            "Add add #0",
            BinaryOp::Add,
            4,
            f32_view(Region::Arena, 0),
            f32_view(Region::Weights, 0),
            f32_view(Region::Arena, 64),
        );
        let accumulate = binary_kernel(
            "Add accumulate #0",
            BinaryOp::Add,
            4,
            f32_view(Region::State, 0),
            f32_view(Region::Arena, 64),
            f32_view(Region::State, 0),
        );
        let program = Program {
            arena_size: 128,
            weights_size: 16,
            state_size: 16,
            inputs: vec![],
            outputs: vec![],
            weights: vec![WeightSlot {
                name: "bias".into(),
                byte_offset: 0,
                byte_size: 16,
                pack: None,
                unpacked: None,
                operand: None,
            }],
            state: vec![],
            steps: vec![Step {
                op: "hand written".into(),
                kernels: vec![add, accumulate],
            }],
        };
        program
            .validate()
            .expect("the hand-written program is valid");
        program
    }

    /// The PTX of [`accumulate_program`], written by hand. The second entry passes its sum
    /// through 64 KiB of dynamic shared memory, so loading it needs the opt-in above 48 KiB.
    fn accumulate_ptx() -> PtxModule {
        let add = format!(
            ".visible .entry memc_s0_k0{PARAMS}
{{
\t.reg .pred %p<2>;
\t.reg .b32 %r<2>;
\t.reg .b64 %rd<6>;
\t.reg .f32 %f<4>;
\tld.param.u64 %rd1, [arena];
\tld.param.u64 %rd2, [weights];
\tmov.u32 %r1, %tid.x;
\tsetp.ge.u32 %p1, %r1, 4;
\t@%p1 bra $L_end;
\tmul.wide.u32 %rd3, %r1, 4;
\tadd.s64 %rd4, %rd1, %rd3;
\tadd.s64 %rd5, %rd2, %rd3;
\tld.global.f32 %f1, [%rd4];
\tld.global.f32 %f2, [%rd5];
\tadd.f32 %f3, %f1, %f2;
\tst.global.f32 [%rd4+64], %f3;
$L_end:
\tret;
}}
"
        );
        let accumulate = format!(
            ".extern .shared .align 16 .b8 memc_shared[];

.visible .entry memc_s0_k1{PARAMS}
{{
\t.reg .pred %p<2>;
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<6>;
\t.reg .f32 %f<5>;
\tld.param.u64 %rd1, [arena];
\tld.param.u64 %rd2, [state];
\tmov.u32 %r1, %tid.x;
\tsetp.ge.u32 %p1, %r1, 4;
\t@%p1 bra $L_end;
\tmul.wide.u32 %rd3, %r1, 4;
\tadd.s64 %rd4, %rd1, %rd3;
\tadd.s64 %rd5, %rd2, %rd3;
\tld.global.f32 %f1, [%rd4+64];
\tld.global.f32 %f2, [%rd5];
\tadd.f32 %f3, %f1, %f2;
\tmov.u32 %r2, memc_shared;
\tshl.b32 %r3, %r1, 2;
\tadd.u32 %r2, %r2, %r3;
\tst.shared.f32 [%r2+65000], %f3;
\tld.shared.f32 %f4, [%r2+65000];
\tst.global.f32 [%rd5], %f4;
$L_end:
\tret;
}}
"
        );
        let launch = |shared_bytes| Launch {
            grid: [1, 1, 1],
            block: [32, 1, 1],
            shared_bytes,
        };
        PtxModule {
            text: format!("{HEADER}\n{add}\n{accumulate}"),
            launches: vec![
                KernelLaunch {
                    step: 0,
                    kernel: 0,
                    entry: "memc_s0_k0".into(),
                    launch: launch(0),
                },
                KernelLaunch {
                    step: 0,
                    kernel: 1,
                    entry: "memc_s0_k1".into(),
                    launch: launch(65536),
                },
            ],
        }
    }

    #[test]
    fn hand_written_ptx_matches_the_cpu_over_runs_and_state_round_trips() {
        if !have_gpu("hand_written_ptx_matches_the_cpu_over_runs_and_state_round_trips") {
            return;
        }
        let program = accumulate_program();
        let mut random = Random(7);
        let weights = f32_bytes(&random.floats(4));
        let mut gpu = CudaProgram::from_module(&program, &accumulate_ptx(), &weights)
            .unwrap_or_else(|e| panic!("loading the hand-written module: {e}"));
        println!("{}", gpu.device_info());
        assert_eq!(gpu.n_kernels(), 2);
        assert_eq!(gpu.threads(), 1);
        assert_eq!(gpu.arena_size(), 128);
        assert_eq!(gpu.state_size(), 16);
        let mut cpu = CpuBackend
            .compile(&program, &weights, &BackendOptions::default())
            .unwrap();

        // A fresh state is zero; what is written is what is read back, before any run.
        assert_eq!(gpu.read_state(&[0..16]).unwrap(), &[0u8; 16]);
        let start = f32_bytes(&random.floats(4));
        gpu.write_state(0, &start).unwrap();
        cpu.write_state(0, &start).unwrap();
        assert_eq!(&gpu.read_state(&[0..16]).unwrap()[..16], &start[..]);
        assert_eq!(&gpu.read_state(&[4..12]).unwrap()[4..12], &start[4..12]);

        for run in 0..5 {
            let x = f32_bytes(&random.floats(4));
            gpu.write_arena(0, &x).unwrap();
            cpu.write_arena(0, &x).unwrap();
            // SAFETY: the program passed validation, and the hand-written PTX reaches exactly
            // the bytes its kernels reach.
            unsafe {
                gpu.run(&weights).unwrap();
                cpu.run(&weights).unwrap();
            }
            let y_gpu = floats(&gpu.read_arena(&[64..80]).unwrap()[64..80]);
            let y_cpu = floats(&cpu.read_arena(&[64..80]).unwrap()[64..80]);
            assert_close(&format!("y, run {run}"), &y_gpu, &y_cpu);
            let acc_gpu = floats(gpu.read_state(&[0..16]).unwrap());
            let acc_cpu = floats(cpu.read_state(&[0..16]).unwrap());
            assert_close(&format!("acc, run {run}"), &acc_gpu, &acc_cpu);
        }

        // Copies outside the regions are refused before the driver sees them.
        let error = gpu.write_arena(120, &[0; 16]).unwrap_err().to_string();
        assert_eq!(error, "bytes 120..136 lie outside the arena of 128 bytes");
        let error = gpu.read_state(&[8..24]).err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("bytes 8..24 lie outside the state of 16 bytes")
        );
        // SAFETY: as above; the short weights section is refused before anything runs.
        let error = unsafe { gpu.run(&weights[..8]) }.unwrap_err().to_string();
        assert_eq!(
            error,
            "the weights section has 8 bytes, the program reads 16"
        );
    }

    #[test]
    fn hand_written_ptx_that_does_not_assemble_reports_the_jit_log() {
        if !have_gpu("hand_written_ptx_that_does_not_assemble_reports_the_jit_log") {
            return;
        }
        let program = accumulate_program();
        let mut module = accumulate_ptx();
        module.text = module.text.replace("add.f32 %f3", "add.bogus.f32 %f3");
        let error = CudaProgram::from_module(&program, &module, &[0; 16])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.starts_with(
                "CUDA error while loading the PTX module (JIT-compiling it for the device): "
            ),
            "{error}"
        );
        assert!(error.contains("JIT log:"), "{error}");
    }

    /// Compiles `examples/classifier.onnx` for the cuda target, as `memc compile --target cuda`
    /// does, into a plan file for `target`.
    fn classifier_plan(test: &str, target: &str) -> std::path::PathBuf {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/classifier.onnx");
        let mut module = memc_ir::onnx::import_file(&path).unwrap().module;
        memc_ir::infer::infer_module(&mut module, &HashMap::from([("batch".to_string(), 2u64)]))
            .unwrap();
        let passes: [&dyn memc_passes::Pass; 3] = [
            &memc_passes::Canonicalize,
            &memc_passes::Cse,
            &memc_passes::Dce,
        ];
        for pass in passes {
            pass.run(&mut module).unwrap();
        }
        let (_, func) = module.functions().next().unwrap();
        let ops = memc_codegen::lower::plan_ops(
            func,
            &module.weights,
            memc_codegen::ptx::target::target(),
        );
        let scratch = |_: &memc_ir::Function, op: memc_ir::OpId| ops.scratch_bytes(op);
        let plan =
            memc_passes::memory::plan_module_with_scratch(&module, &Default::default(), &scratch)
                .unwrap();
        let program =
            memc_codegen::lower::lower_planned(func, &module.weights, &plan, &ops).unwrap();
        let plan_path = scratch_dir(test).join(format!("classifier-{target}.plan"));
        let mut meta = PlanMeta::new("classifier.onnx", target, program);
        if target == "cuda" {
            meta.ptx = Some(memc_codegen::ptx::emit_program(&meta.program).unwrap());
        }
        write_plan(&plan_path, &meta, &module.weights).unwrap();
        plan_path
    }

    #[test]
    fn classifier_matches_the_cpu_over_runs() {
        if !have_gpu("classifier_matches_the_cpu_over_runs") {
            return;
        }
        let test = "cuda_classifier";
        let mut gpu = Session::load(classifier_plan(test, "cuda"))
            .unwrap_or_else(|e| panic!("loading the cuda plan: {e}"));
        let mut cpu = Session::load(classifier_plan(test, "cpu")).unwrap();
        println!("{}", gpu.describe());
        let inputs = gpu.inputs().to_vec();
        let mut random = Random(11);
        for run in 0..4 {
            let data: Vec<(String, Vec<u64>, Vec<f32>)> = inputs
                .iter()
                .map(|io| {
                    assert_eq!(io.elem, Scalar::F32, "the classifier's inputs are f32");
                    let n = io.shape.iter().product::<u64>() as usize;
                    (io.name.clone(), io.shape.clone(), random.floats(n))
                })
                .collect();
            let refs: Vec<(&str, memc_runtime::TensorRef<'_>)> = data
                .iter()
                .map(|(name, shape, values)| {
                    (
                        name.as_str(),
                        memc_runtime::TensorRef::from_slice(shape, values).unwrap(),
                    )
                })
                .collect();
            let gpu_out = gpu.run(&refs).unwrap_or_else(|e| panic!("run {run}: {e}"));
            let cpu_out = cpu.run(&refs).unwrap();
            for (g, c) in gpu_out.iter().zip(&cpu_out) {
                assert_eq!(g.name(), c.name());
                let what = format!("output `{}`, run {run}", g.name());
                if g.elem() == Scalar::F32 {
                    assert_close(&what, &floats(g.data()), &floats(c.data()));
                } else {
                    assert_eq!(g.data(), c.data(), "{what}");
                }
            }
        }
    }
}
