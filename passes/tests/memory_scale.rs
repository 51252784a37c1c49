//! Memory planning of large functions shaped like training steps: a forward chain whose
//! activations the backward chain reads in reverse (so they live long), side branches that are
//! all ready at once (a wide ready set for the greedy scheduler), tensors of three sizes. Every
//! plan passes the validator (`plan_function` runs it) and is at least LOAD. The stages must
//! scale (2,000 and 20,000 ops): the time each plan took is printed for `bench/dsa.md`, never
//! asserted:
//!
//! ```sh
//! cargo test --release -p memc-passes --test memory_scale -- --nocapture
//! ```

use memc_ir::{Attribute, ElemType, Function, Module, Opcode, TensorType, Type, ValueId};
use memc_passes::memory::plan_function;
use memc_passes::plan::PlanOptions;
use std::time::{Duration, Instant};

/// `layers` forward layers of three elementwise ops on one of three tensor sizes, each with
/// `branches` side branches of two ops hanging off a graph input, then the backward chain:
/// one op per saved activation, in reverse.
fn training_like(layers: usize, branches: usize) -> Module {
    let lens = [1024u64, 4096, 16384];
    let ty = |len: u64| Type::Tensor(TensorType::with_shape(ElemType::F32, &[len]));
    let mut func = Function::new("step", lens.iter().map(|&l| ty(l)).collect(), Vec::new());
    let block = func.entry_block();
    let inputs = func.args().to_vec();
    let op = |func: &mut Function, opcode: Opcode, operands: Vec<ValueId>, len: u64| {
        let attrs: Vec<(&'static str, Attribute)> = Vec::new();
        let id = func.build_op(block, opcode, operands, vec![ty(len)], attrs);
        func.op(id).results[0]
    };
    let mut last = inputs.clone();
    let mut saved: Vec<(ValueId, usize)> = Vec::new();
    for layer in 0..layers {
        let k = layer % lens.len();
        let a = op(&mut func, Opcode::Relu, vec![last[k]], lens[k]);
        let b = op(&mut func, Opcode::Exp, vec![a], lens[k]);
        let c = op(&mut func, Opcode::Add, vec![b, last[k]], lens[k]);
        saved.extend([(a, k), (b, k)]);
        for _ in 0..branches {
            let s = op(&mut func, Opcode::Exp, vec![inputs[k]], lens[k]);
            let t = op(&mut func, Opcode::Mul, vec![s, c], lens[k]);
            saved.push((t, k));
        }
        last[k] = c;
    }
    let mut grads = last.clone();
    for &(v, k) in saved.iter().rev() {
        grads[k] = op(&mut func, Opcode::Mul, vec![grads[k], v], lens[k]);
    }
    let types: Vec<Type> = grads.iter().map(|&g| func.value_type(g).clone()).collect();
    func.build_op(block, Opcode::Return, grads, vec![], []);
    for t in types {
        func.push_result_type(t);
    }
    let mut module = Module::new();
    module.add_function(func);
    module
}

#[test]
fn large_training_like_functions_plan() {
    for (layers, branches) in [(400, 0), (182, 2), (4000, 0), (1818, 2)] {
        let module = training_like(layers, branches);
        memc_ir::verify_module(&module).expect("a valid module");
        let (_, func) = module.functions().next().expect("one function");
        let n_ops = func.layout().block_ops(func.entry_block()).len();
        for budget_ms in [0, 200] {
            let options = PlanOptions {
                budget: Duration::from_millis(budget_ms),
            };
            let started = Instant::now();
            let plan = plan_function(func, &module.weights, &options).expect("plans");
            assert!(plan.arena_size >= plan.load);
            assert!(plan.load <= plan.load_model_order);
            eprintln!(
                "{n_ops} ops ({} buffers), budget {budget_ms} ms: {:.1} ms, arena/LOAD {:.4} \
                 ({}, {})",
                plan.buffers.len(),
                started.elapsed().as_secs_f64() * 1000.0,
                plan.arena_size as f64 / plan.load as f64,
                plan.schedule_name,
                plan.strategy
            );
        }
    }
}
