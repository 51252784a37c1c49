//! Per-kernel timing of a model through the CPU backend, for tuning the movement and linalg
//! lowerings: `MEMC_PROFILE_MODEL=path/to/model.onnx MEMC_PROFILE_DIMS=batch=2 cargo test
//! --release -p memc-codegen --test profile -- --nocapture`. Without the variable the
//! test only checks that a tiny generated model runs, and says so.

mod common;

use common::models::{compile_module, weights_section};
use memc_codegen::cpu::CpuProgram;
use std::collections::HashMap;
use std::time::Instant;

#[test]
fn profile_kernels() {
    let Ok(path) = std::env::var("MEMC_PROFILE_MODEL") else {
        println!("skipped: set MEMC_PROFILE_MODEL to a model to time its kernels");
        return;
    };
    let dims: HashMap<String, u64> = std::env::var("MEMC_PROFILE_DIMS")
        .unwrap_or_default()
        .split(',')
        .filter_map(|d| {
            d.split_once('=')
                .map(|(k, v)| (k.to_string(), v.parse().expect("a dim value")))
        })
        .collect();
    let imported =
        memc_ir::onnx::import_file(std::path::Path::new(&path)).expect("the model imports");
    let mut module = imported.module;
    memc_ir::infer::infer_module(&mut module, &HashMap::new()).expect("shapes infer");
    use memc_passes::Pass;
    let passes: [&dyn Pass; 3] = [
        &memc_passes::Canonicalize,
        &memc_passes::Cse,
        &memc_passes::Dce,
    ];
    for pass in passes {
        pass.run(&mut module).expect("cleanup runs");
    }
    if !dims.is_empty() {
        memc_ir::infer::infer_module(&mut module, &dims).expect("shapes infer with dims");
        for pass in passes {
            pass.run(&mut module).expect("cleanup runs");
        }
    }
    let compiled = compile_module(module).expect("the model compiles");
    let program = &compiled.program;
    let kernels: Vec<_> = program.kernels().collect();
    let cpu = CpuProgram::compile(&kernels).expect("the kernels compile");
    let mut arena = vec![0u8; program.arena_size as usize];
    let weights = weights_section(program, &compiled.module.weights);
    let threads: usize = std::env::var("MEMC_PROFILE_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    let pool = memc_codegen::cpu::WorkerPool::new(threads).expect("a pool");
    let repeats = 5;
    let mut times = vec![f64::INFINITY; kernels.len()];
    for _ in 0..repeats {
        for (i, t) in times.iter_mut().enumerate() {
            let start = Instant::now();
            // SAFETY: the regions have the sizes the program was validated against.
            unsafe { cpu.run_kernel(i, arena.as_mut_ptr(), weights.as_ptr(), &pool) };
            *t = t.min(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    let total: f64 = times.iter().sum();
    let mut order: Vec<usize> = (0..kernels.len()).collect();
    order.sort_by(|&a, &b| times[b].total_cmp(&times[a]));
    println!(
        "total {total:.3} ms over {} kernels (best of {repeats})",
        kernels.len()
    );
    for &i in order.iter().take(25) {
        let shape = match &kernels[i].body {
            memc_codegen::KernelBody::Loop(l) => {
                format!("loop outer {:?} inner {:?}", l.outer, l.inner)
            }
            memc_codegen::KernelBody::Contract(c) => {
                format!("contract batch {:?} m {} n {} k {}", c.batch, c.m, c.n, c.k)
            }
            memc_codegen::KernelBody::NBits(q) => {
                format!(
                    "nbits rows {} n {} k {} bits {}",
                    q.rows(),
                    q.n,
                    q.k,
                    q.bits
                )
            }
        };
        println!("{:9.3} ms  {:50}  {shape}", times[i], kernels[i].name);
    }
}
