//! Unit tests of the remat pass's internals.
use super::*;
use memc_ir::{ElemType, Module, TensorType};

type Step = (u8, usize, usize, bool);

/// The property test's random DAG builder (passes/tests/remat_props.rs).
pub(crate) fn random_dag(steps: &[Step], n_outputs: usize) -> Module {
    let mut module = Module::new();
    let ty = |len: u64| Type::Tensor(TensorType::with_shape(ElemType::F32, &[len]));
    let mut func = Function::new("random", vec![ty(256), ty(256)], Vec::new());
    let block = func.entry_block();
    let mut pool: Vec<ValueId> = func.args().to_vec();
    for &(kind, a, b, late) in steps {
        let pick = |i: usize, pool: &[ValueId]| {
            let span = if late {
                pool.len().div_ceil(2)
            } else {
                pool.len()
            };
            pool[if late {
                i % span
            } else {
                pool.len() - 1 - i % span.min(3)
            }]
        };
        let x = pick(a, &pool);
        let y = pick(b, &pool);
        let (opcode, operands) = match kind % 6 {
            0 => (Opcode::Relu, vec![x]),
            1 => (Opcode::Exp, vec![x]),
            2 => (Opcode::Add, vec![x, y]),
            3 => (Opcode::Mul, vec![x, y]),
            4 => (Opcode::Sigmoid, vec![x]),
            _ => (Opcode::Identity, vec![x]),
        };
        let op = func.build_op(block, opcode, operands, vec![ty(256)], []);
        pool.push(func.op(op).results[0]);
    }
    let n = pool.len();
    let outputs: Vec<ValueId> = pool[n - n_outputs.min(n - 2)..].to_vec();
    for _ in &outputs {
        func.push_result_type(ty(256));
    }
    func.build_op(block, Opcode::Return, outputs, vec![], []);
    module.add_function(func);
    module
}

/// The model's LOAD of a function's own order equals the planner's, for a function as it
/// comes out of the pass.
fn model_matches_planner(module: &Module, func: &Function) {
    let none = |_: &Function, _: OpId| 0u64;
    let built = build(func, &module.weights, &none);
    let plan =
        plan_function_with_scratch(func, &module.weights, &PlanOptions::default(), &none).unwrap();
    let profile = built.model.evaluate(&[]);
    assert_eq!(
        profile.load,
        plan.load_model_order,
        "{}",
        memc_ir::printer::print_function(module, func)
    );
}

#[test]
fn the_model_sees_memory_as_the_planner_does() {
    let steps: Vec<Step> = vec![
        (0, 0, 0, false),
        (0, 2, 0, false),
        (5, 20, 0, true),
        (0, 0, 0, false),
        (0, 20, 0, false),
        (2, 3, 7, false),
        (5, 3, 0, false),
        (0, 2, 0, false),
        (0, 0, 0, false),
        (0, 0, 0, false),
        (0, 3, 44, false),
        (4, 60, 4, true),
        (1, 9, 15, false),
        (5, 20, 45, false),
        (1, 43, 61, true),
        (0, 20, 25, false),
        (1, 31, 20, true),
        (4, 34, 9, true),
        (4, 40, 12, false),
        (3, 14, 41, true),
        (3, 16, 28, false),
        (4, 22, 37, false),
        (5, 6, 46, true),
        (5, 10, 7, false),
        (4, 39, 20, false),
        (3, 11, 15, true),
        (3, 14, 21, false),
        (0, 22, 50, true),
        (3, 41, 34, false),
        (4, 53, 56, true),
        (1, 22, 36, false),
        (4, 59, 16, true),
    ];
    let module = random_dag(&steps, 1);
    let (_, func) = module.functions().next().unwrap();
    model_matches_planner(&module, func);
    let mut func = func.clone();
    let none = |_: &Function, _: OpId| 0u64;
    let options = RematOptions {
        budget: Some(Budget::Percent(75.0)),
        ..RematOptions::default()
    };
    let (_, report) = rematerialize(&mut func, &module.weights, &none, &options).unwrap();
    assert!(report.cloned_ops > 0);
    model_matches_planner(&module, &func);
}
