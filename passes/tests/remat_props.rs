//! Property tests of rematerialization on random DAGs whose values are read again much later
//! (as a backward pass reads the forward pass's activations):
//! - the rewritten function verifies, and every plan passes the independent validator (the
//!   planner runs it);
//! - the model's LOAD of the rewritten schedule is exactly the planner's LOAD of that order
//!   (`MemoryPlan::load_model_order`): the model sees memory as the planner does;
//! - whenever the pass says the budget is met, the arena is within it; the arena never grows;
//! - asked for a budget it cannot meet, it says why;
//! - without a budget, nothing changes.

use memc_ir::{verify_module, ElemType, Function, Module, Opcode, TensorType, Type, ValueId};
use memc_passes::memory::plan_function;
use memc_passes::plan::PlanOptions;
use memc_passes::remat::config::Budget;
use memc_passes::remat::{rematerialize, RematOptions};
use proptest::prelude::*;
use std::time::Duration;

/// One random op: a kind, two operand picks (modulo the values so far, biased to old ones by
/// `late`), and a size class.
type Step = (u8, usize, usize, bool);

fn build(steps: &[Step], n_outputs: usize) -> Module {
    let mut module = Module::new();
    let ty = |len: u64| Type::Tensor(TensorType::with_shape(ElemType::F32, &[len]));
    let mut func = Function::new("random", vec![ty(256), ty(256)], Vec::new());
    let block = func.entry_block();
    let mut pool: Vec<ValueId> = func.args().to_vec();
    for &(kind, a, b, late) in steps {
        // `late` reads from the first half of the pool: long gaps between reads.
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

fn options(budget: Option<Budget>) -> RematOptions {
    RematOptions {
        budget,
        recompute: Vec::new(),
        plan: PlanOptions {
            budget: Duration::from_millis(5),
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn remat_keeps_the_planners_view_of_memory(
        steps in prop::collection::vec((0u8..6, 0usize..64, 0usize..64, prop::bool::ANY), 4..40),
        n_outputs in 1usize..3,
        percent in 40u32..100,
    ) {
        let module = build(&steps, n_outputs);
        let (_, original) = module.functions().next().unwrap();
        let mut func = original.clone();
        let scratch = |_: &Function, _: memc_ir::OpId| 0u64;
        let (plan, report) = rematerialize(
            &mut func,
            &module.weights,
            &scratch,
            &options(Some(Budget::Percent(f64::from(percent)))),
        )
        .expect("random DAGs plan");
        let mut rewritten = Module::new();
        rewritten.add_function(func.clone());
        prop_assert!(verify_module(&rewritten).is_ok(), "the rewritten function verifies");
        prop_assert!(plan.arena_size <= report.base_arena, "remat never grows the arena");
        if report.met {
            prop_assert!(plan.arena_size <= report.budget.unwrap());
            prop_assert!(report.reason.is_none());
        } else {
            prop_assert!(report.reason.as_ref().is_some_and(|r| r.contains("the peak is at step")));
        }
        if report.cloned_ops > 0 {
            prop_assert_eq!(report.model_load, plan.load_model_order);
            // The plan is the planner's own for the rewritten function.
            let again = plan_function(&func, &module.weights, &PlanOptions::default()).unwrap();
            prop_assert_eq!(again.load_model_order, plan.load_model_order);
        }
    }

    #[test]
    fn without_a_budget_nothing_changes(
        steps in prop::collection::vec((0u8..6, 0usize..64, 0usize..64, prop::bool::ANY), 4..30),
    ) {
        let module = build(&steps, 1);
        let (_, original) = module.functions().next().unwrap();
        let mut func = original.clone();
        let scratch = |_: &Function, _: memc_ir::OpId| 0u64;
        let (plan, report) =
            rematerialize(&mut func, &module.weights, &scratch, &options(None)).unwrap();
        prop_assert_eq!(report.cloned_ops, 0);
        prop_assert_eq!(plan.arena_size, report.base_arena);
        prop_assert_eq!(
            memc_ir::printer::print_function(&module, &func),
            memc_ir::printer::print_function(&module, original)
        );
    }
}

/// A DAG whose values the e-graph merges (several `Relu(%arg0)`, `Mul(%18, %7)`): the
/// rewritten function reads the newest copy everywhere, as the model does (a clone's operand
/// that was itself a clone's result once kept its old copy).
#[test]
fn equal_values_read_the_newest_copy() {
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
    let module = build(&steps, 1);
    let (_, original) = module.functions().next().unwrap();
    let mut func = original.clone();
    let scratch = |_: &Function, _: memc_ir::OpId| 0u64;
    let (plan, report) = rematerialize(
        &mut func,
        &module.weights,
        &scratch,
        &options(Some(Budget::Percent(75.0))),
    )
    .unwrap();
    assert!(report.cloned_ops > 0);
    assert_eq!(report.model_load, plan.load_model_order);
}

/// A value made long before its first read: the candidate over that gap moves its producer
/// to the read (the original no longer runs, no FLOPs are added) rather than repeating it.
#[test]
fn a_move_stops_the_original_and_costs_nothing() {
    use memc_passes::remat::candidates::{candidates, Base};
    use memc_passes::remat::model::{Model, Op, Value};
    let value = |size: u64, producer: Option<usize>| Value {
        size,
        elem_bytes: 4,
        view_of: None,
        ty: 0,
        input: producer.is_none(),
        output: producer == Some(3),
        producer,
    };
    let op = |operands: Vec<usize>, result: usize| Op {
        results: vec![result],
        operands,
        flops: 1000,
        scratch: 0,
        in_place: false,
        recompute: true,
        kind: "MatMul".into(),
    };
    // a (input, 1 KiB); x = f(a) (1 KiB); y = g(a), z = h(y) (4 KiB each); out = k(x, z, a).
    let model = Model {
        values: vec![
            value(1024, None),
            value(1024, Some(0)),
            value(4096, Some(1)),
            value(4096, Some(2)),
            value(1024, Some(3)),
        ],
        ops: vec![
            op(vec![0], 1),
            op(vec![0], 2),
            op(vec![2], 3),
            op(vec![1, 3, 0], 4),
        ],
    };
    let base = Base::new(&model);
    let cands = candidates(&model, &base);
    let moves: Vec<_> = cands.iter().filter(|c| c.moves).collect();
    assert_eq!(moves.len(), 1, "one move: x to its read");
    let m = moves[0];
    assert_eq!((m.target, m.gap_from, m.at, m.flops), (1, 0, 3, 0));
    assert!(m.extends.is_empty(), "a is live at the read anyway");
    let before = model.evaluate(&[]);
    let after = model.evaluate(&[m]);
    assert_eq!(after.removed, vec![0]);
    assert_eq!(after.extra_flops, 0);
    // While z is made: a, x, y, z before; a, y, z after.
    assert_eq!(before.load, 10 * 1024);
    assert_eq!(after.load, 9 * 1024);
}
