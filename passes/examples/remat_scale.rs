//! How long rematerialization takes on a large training-like graph.
//!
//! `cargo run --release -p memc-passes --example remat_scale [N_LAYERS]` builds a synthetic
//! training step of N_LAYERS (default 100) layers of 8 forward ops whose activations the
//! backward pass reads in reverse (about 20 ops per layer in all: 2,000 ops for 100 layers),
//! and times the plan without recomputation and `rematerialize` at 90/70/50% budgets.

use memc_ir::{ElemType, Function, Module, Opcode, TensorType, Type, ValueId};
use memc_passes::plan::PlanOptions;
use memc_passes::remat::config::Budget;
use memc_passes::remat::{rematerialize, RematOptions};
use std::time::{Duration, Instant};

fn main() {
    let layers: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let ty = |n: u64| Type::Tensor(TensorType::with_shape(ElemType::F32, &[64, n]));
    let mut func = Function::new("step", vec![ty(64)], Vec::new());
    let block = func.entry_block();
    let op = |func: &mut Function, opcode: Opcode, operands: Vec<ValueId>, n: u64| {
        let o = func.build_op(block, opcode, operands, vec![ty(n)], []);
        func.op(o).results[0]
    };
    let mut x = func.args()[0];
    let mut saved: Vec<[ValueId; 4]> = Vec::new();
    for _ in 0..layers {
        let a = op(&mut func, Opcode::Exp, vec![x], 64);
        let b = op(&mut func, Opcode::Sigmoid, vec![a], 64);
        let c = op(&mut func, Opcode::Mul, vec![a, b], 64);
        let d = op(&mut func, Opcode::Tanh, vec![c], 64);
        let e = op(&mut func, Opcode::Add, vec![d, x], 64);
        let f = op(&mut func, Opcode::Relu, vec![e], 64);
        let g = op(&mut func, Opcode::Mul, vec![f, c], 64);
        let h = op(&mut func, Opcode::Add, vec![g, e], 64);
        saved.push([a, c, e, g]);
        x = h;
    }
    let mut grad = op(&mut func, Opcode::Neg, vec![x], 64);
    for [a, c, e, g] in saved.into_iter().rev() {
        let t1 = op(&mut func, Opcode::Mul, vec![grad, g], 64);
        let t2 = op(&mut func, Opcode::Mul, vec![t1, e], 64);
        let t3 = op(&mut func, Opcode::Add, vec![t2, c], 64);
        let t4 = op(&mut func, Opcode::Mul, vec![t3, a], 64);
        let t5 = op(&mut func, Opcode::Sub, vec![t4, t1], 64);
        let t6 = op(&mut func, Opcode::Exp, vec![t5], 64);
        let t7 = op(&mut func, Opcode::Mul, vec![t6, grad], 64);
        let t8 = op(&mut func, Opcode::Add, vec![t7, t5], 64);
        let t9 = op(&mut func, Opcode::Sigmoid, vec![t8], 64);
        let t10 = op(&mut func, Opcode::Mul, vec![t9, t8], 64);
        let t11 = op(&mut func, Opcode::Add, vec![t10, t3], 64);
        grad = op(&mut func, Opcode::Tanh, vec![t11], 64);
    }
    func.push_result_type(ty(64));
    func.build_op(block, Opcode::Return, vec![grad], vec![], []);
    let n_ops = func.layout().block_ops(block).len() - 1;
    let mut module = Module::new();
    module.add_function(func);
    let (_, func) = module.functions().next().expect("one function");
    let none = |_: &Function, _: memc_ir::OpId| 0u64;
    let started = Instant::now();
    let base = memc_passes::memory::plan_function(func, &module.weights, &PlanOptions::default())
        .expect("plans");
    println!(
        "{n_ops} ops: plan without remat {:.0} ms, arena {} bytes",
        started.elapsed().as_secs_f64() * 1e3,
        base.arena_size
    );
    for percent in [90.0, 70.0, 50.0] {
        let mut f = func.clone();
        let options = RematOptions {
            budget: Some(Budget::Percent(percent)),
            recompute: Vec::new(),
            plan: PlanOptions {
                budget: Duration::from_millis(200),
            },
        };
        let started = Instant::now();
        let (plan, report) =
            rematerialize(&mut f, &module.weights, &none, &options).expect("remat");
        println!(
            "  {percent}%: {:.0} ms (of which remat alone {:.0} ms), arena {} -> {} ({}), {} candidates, {} ops recomputed, +{:.2}% FLOPs",
            started.elapsed().as_secs_f64() * 1e3,
            report.time.as_secs_f64() * 1e3,
            report.base_arena,
            plan.arena_size,
            if report.met { "met" } else { "not met" },
            report.candidates,
            report.cloned_ops,
            100.0 * report.extra_flops as f64 / report.base_flops.max(1) as f64
        );
    }
}
