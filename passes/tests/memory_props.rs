//! Property tests of memory planning on random graphs: every plan of a random DAG of
//! elementwise ops, views (Reshape, Identity) and Concats passes the independent validator
//! (`plan_function` runs it and fails on a violation), the arena is at least LOAD, and the
//! chosen schedule is never worse than the model's own order.

use memc_ir::{
    Attribute, ElemType, Function, Module, Opcode, TensorType, Type, ValueId, WeightBytes,
};
use memc_passes::memory::plan_function;
use memc_passes::plan::PlanOptions;
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

/// One random op: a kind and two operand picks (taken modulo the values defined so far).
type Step = (u8, usize, usize);

fn build(n: u64, steps: &[Step], n_outputs: usize) -> Module {
    let mut module = Module::new();
    let vec_ty = |len: u64| Type::Tensor(TensorType::with_shape(ElemType::F32, &[len]));
    let shape_bytes: Vec<u8> = (n as i64).to_le_bytes().to_vec();
    let shape_weight = module
        .weights
        .insert(
            "shape",
            TensorType::with_shape(ElemType::I64, &[1]),
            WeightBytes::Owned(Arc::from(shape_bytes)),
        )
        .expect("a fresh store");
    let mut func = Function::new("random", vec![vec_ty(n), vec_ty(n)], Vec::new());
    let block = func.entry_block();
    let shape_op = func.build_op(
        block,
        Opcode::Weight,
        vec![],
        vec![Type::Tensor(TensorType::with_shape(ElemType::I64, &[1]))],
        [("value", Attribute::Weight(shape_weight))],
    );
    let shape = func.op(shape_op).results[0];
    // Values of shape [n] available as operands.
    let mut pool: Vec<ValueId> = func.args().to_vec();
    let mut wide: Vec<ValueId> = Vec::new();
    for &(kind, a, b) in steps {
        let x = pool[a % pool.len()];
        let y = pool[b % pool.len()];
        let (opcode, operands, ty) = match kind % 7 {
            0 => (Opcode::Relu, vec![x], vec_ty(n)),
            1 => (Opcode::Exp, vec![x], vec_ty(n)),
            2 => (Opcode::Add, vec![x, y], vec_ty(n)),
            3 => (Opcode::Mul, vec![x, y], vec_ty(n)),
            4 => (Opcode::Reshape, vec![x, shape], vec_ty(n)),
            5 => (Opcode::Identity, vec![x], vec_ty(n)),
            _ => (Opcode::Concat, vec![x, y], vec_ty(2 * n)),
        };
        let attrs: Vec<(&'static str, Attribute)> = if opcode == Opcode::Concat {
            vec![("axis", Attribute::Int(0))]
        } else {
            vec![]
        };
        let op = func.build_op(block, opcode, operands, vec![ty], attrs);
        let result = func.op(op).results[0];
        if opcode == Opcode::Concat {
            wide.push(result);
        } else {
            pool.push(result);
        }
    }
    let mut outputs: Vec<ValueId> = pool.iter().rev().take(n_outputs.max(1)).copied().collect();
    outputs.extend(wide.last());
    let types: Vec<Type> = outputs
        .iter()
        .map(|&v| func.value_type(v).clone())
        .collect();
    func.build_op(block, Opcode::Return, outputs, vec![], []);
    for ty in types {
        func.push_result_type(ty);
    }
    module.add_function(func);
    module
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_graphs_plan_and_validate(
        n in 1u64..64,
        steps in prop::collection::vec((0u8..7, 0usize..64, 0usize..64), 1..40),
        n_outputs in 1usize..4,
    ) {
        let module = build(n, &steps, n_outputs);
        memc_ir::verify_module(&module).map_err(|d| TestCaseError::fail(format!("{d:?}")))?;
        let (_, func) = module.functions().next().expect("one function");
        let options = PlanOptions { budget: Duration::from_millis(5) };
        let plan = plan_function(func, &options).map_err(|d| TestCaseError::fail(d.to_string()))?;
        prop_assert!(plan.arena_size >= plan.load, "arena {} < LOAD {}", plan.arena_size, plan.load);
        prop_assert!(plan.load <= plan.load_model_order, "chosen order worse than model order");
        prop_assert!(plan.load <= plan.load_without_sharing);
    }
}
