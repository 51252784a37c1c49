//! Property tests of memory planning on random graphs: every plan of a random DAG of
//! elementwise ops, views (Reshape, Identity) and Concats passes the independent validator
//! (`plan_function` runs it and fails on a violation), the arena is at least LOAD, and the
//! chosen schedule is never worse than the model's own order.

use memc_ir::{
    Attribute, ElemType, Function, Module, Opcode, TensorType, Type, ValueId, WeightBytes,
};
use memc_passes::memory::{plan_function, plan_function_with_scratch};
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
        let plan = plan_function(func, &module.weights, &options).map_err(|d| TestCaseError::fail(d.to_string()))?;
        prop_assert!(plan.arena_size >= plan.load, "arena {} < LOAD {}", plan.arena_size, plan.load);
        prop_assert!(plan.load <= plan.load_model_order, "chosen order worse than model order");
        prop_assert!(plan.load <= plan.load_without_sharing);
        // The activation bound counts exact sizes, no scratch, no view keeping its base alive:
        // never above the chosen order's LOAD without sharing (aligned buffers), and the model
        // order's bound is one of the function's own (no fusion here).
        prop_assert!(plan.bound_chosen_order <= plan.load_without_sharing);
        prop_assert_eq!(
            plan.bound_model_order,
            memc_passes::memory::model_order_bound(func, &module.weights)
                .map_err(|d| TestCaseError::fail(d.to_string()))?
        );
        prop_assert_eq!(plan.scratch_peak, 0);
    }

    /// With scratch for some ops (a size drawn per op), every scratch buffer is planned at its
    /// op's step, and no buffer live at that step (the op's operands and results included)
    /// shares a byte with it; `plan_function_with_scratch` has also run the validator.
    #[test]
    fn scratch_overlaps_nothing_live_at_its_step(
        n in 1u64..64,
        steps in prop::collection::vec((0u8..7, 0usize..64, 0usize..64), 1..40),
        n_outputs in 1usize..4,
        sizes in prop::collection::vec(0u64..512, 64),
    ) {
        let module = build(n, &steps, n_outputs);
        let (_, func) = module.functions().next().expect("one function");
        let options = PlanOptions { budget: Duration::from_millis(5) };
        let scratch = |_: &Function, op: memc_ir::OpId| { use cranelift_entity::EntityRef; sizes[op.index() % sizes.len()] };
        let plan = plan_function_with_scratch(func, &module.weights, &options, &scratch)
            .map_err(|d| TestCaseError::fail(d.to_string()))?;
        let wanted = plan.schedule.iter().filter(|&&op| scratch(func, op) > 0).count();
        prop_assert_eq!(plan.scratch.len(), wanted);
        prop_assert!(plan.arena_size >= plan.load);
        // Scratch is a cost, not part of the model's bound; the peak is the largest request.
        let plain = plan_function(func, &module.weights, &options)
            .map_err(|d| TestCaseError::fail(d.to_string()))?;
        prop_assert_eq!(plan.bound_model_order, plain.bound_model_order);
        prop_assert_eq!(
            plan.scratch_peak,
            plan.schedule.iter().map(|&op| scratch(func, op)).max().unwrap_or(0)
        );
        for s in &plan.scratch {
            prop_assert_eq!(plan.schedule[s.step as usize - 1], s.op);
            prop_assert_eq!(s.size, scratch(func, s.op));
            prop_assert!(s.offset + s.size <= plan.arena_size);
            for b in &plan.buffers {
                let live = b.start <= s.step && s.step < b.end;
                let apart = b.offset + b.size <= s.offset || s.offset + s.size <= b.offset;
                prop_assert!(!live || b.size == 0 || apart, "{} overlaps {}", b.name, s.name);
            }
            for other in plan.scratch.iter().filter(|o| o.op != s.op) {
                prop_assert!(other.step != s.step);
            }
        }
    }

    /// Scratch placed in the largest run of bytes free at a step (`free_extent`, then
    /// `add_scratch`, which runs the validator) overlaps nothing live there and changes
    /// neither the arena nor any buffer; the run is aligned, inside the arena, and ends where
    /// a live buffer or the arena begins (it cannot grow at its end).
    #[test]
    fn scratch_in_free_bytes_keeps_the_arena(
        n in 1u64..64,
        steps in prop::collection::vec((0u8..7, 0usize..64, 0usize..64), 1..40),
        n_outputs in 1usize..4,
    ) {
        let module = build(n, &steps, n_outputs);
        let (_, func) = module.functions().next().expect("one function");
        let options = PlanOptions { budget: Duration::from_millis(5) };
        let mut plan = plan_function(func, &module.weights, &options)
            .map_err(|d| TestCaseError::fail(d.to_string()))?;
        let placed = |p: &memc_passes::memory::MemoryPlan| -> Vec<(u64, u64, u64, u64)> {
            p.buffers.iter().map(|b| (b.offset, b.size, b.start, b.end)).collect()
        };
        let (arena, buffers) = (plan.arena_size, placed(&plan));
        for op in plan.schedule.clone() {
            let step = plan.step_of(op).expect("a scheduled op has a step");
            let (offset, bytes) = plan.free_extent(step);
            if bytes == 0 {
                continue;
            }
            prop_assert_eq!(offset % memc_passes::memory::ALIGN, 0);
            prop_assert!(offset + bytes <= arena);
            let live = |b: &&memc_passes::memory::PlannedBuffer| {
                b.start <= step && step < b.end && b.size > 0
            };
            for b in plan.buffers.iter().filter(live) {
                prop_assert!(b.offset + b.size <= offset || offset + bytes <= b.offset, "{}", b.name);
            }
            let end = offset + bytes;
            prop_assert!(end == arena || plan.buffers.iter().filter(live).any(|b| b.offset == end));
            plan.add_scratch(func, op, offset, bytes).map_err(|d| TestCaseError::fail(d.to_string()))?;
            prop_assert!(plan.load <= plan.arena_size);
            prop_assert!(plan.free_extent(step).1 <= bytes);
        }
        prop_assert_eq!(plan.arena_size, arena);
        prop_assert_eq!(placed(&plan), buffers);
        let by_step: Vec<u64> = plan.scratch.iter().map(|s| s.step).collect();
        prop_assert!(by_step.windows(2).all(|w| w[0] < w[1]), "scratch in schedule order");
    }
}

/// A Slice of whole rows is a view at the rows' byte offset; a Slice of columns is not.
#[test]
fn contiguous_slices_are_views() {
    use memc_passes::memory::PlannedKind;
    let i64s = |module: &mut Module, name: &str, values: &[i64]| {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        module
            .weights
            .insert(
                name,
                TensorType::with_shape(ElemType::I64, &[values.len() as u64]),
                WeightBytes::Owned(Arc::from(bytes)),
            )
            .expect("unique weight names")
    };
    let mut module = Module::new();
    let (rows_start, rows_end, rows_axis) = (
        i64s(&mut module, "rs", &[2]),
        i64s(&mut module, "re", &[6]),
        i64s(&mut module, "ra", &[0]),
    );
    let (cols_axis,) = (i64s(&mut module, "ca", &[1]),);
    let t = |shape: &[u64]| Type::Tensor(TensorType::with_shape(ElemType::F32, shape));
    let w = |func: &mut Function, id| {
        let block = func.entry_block();
        let op = func.build_op(
            block,
            Opcode::Weight,
            vec![],
            vec![Type::Tensor(TensorType::with_shape(ElemType::I64, &[1]))],
            [("value", Attribute::Weight(id))],
        );
        func.op(op).results[0]
    };
    let mut func = Function::new("slices", vec![t(&[8, 4])], Vec::new());
    let x = func.args()[0];
    let (rs, re, ra, ca) = (
        w(&mut func, rows_start),
        w(&mut func, rows_end),
        w(&mut func, rows_axis),
        w(&mut func, cols_axis),
    );
    let block = func.entry_block();
    let relu = func.build_op(block, Opcode::Relu, vec![x], vec![t(&[8, 4])], []);
    let y = func.op(relu).results[0];
    let rows = func.build_op(
        block,
        Opcode::Slice,
        vec![y, rs, re, ra],
        vec![t(&[4, 4])],
        [],
    );
    let cols = func.build_op(
        block,
        Opcode::Slice,
        vec![y, rs, re, ca],
        vec![t(&[8, 2])],
        [],
    );
    let (rows, cols) = (func.op(rows).results[0], func.op(cols).results[0]);
    func.build_op(block, Opcode::Return, vec![rows, cols], vec![], []);
    func.push_result_type(t(&[4, 4]));
    func.push_result_type(t(&[8, 2]));
    module.add_function(func);
    memc_ir::verify_module(&module).expect("valid IR");
    let (_, func) = module.functions().next().expect("one function");
    let plan = plan_function(
        func,
        &module.weights,
        &PlanOptions {
            budget: Duration::from_millis(5),
        },
    )
    .expect("plans");
    let buffer = |v: ValueId| {
        plan.buffers
            .iter()
            .find(|b| b.value == v)
            .expect("a buffer")
    };
    let base = plan
        .buffers
        .iter()
        .position(|b| b.value == y)
        .expect("relu's buffer");
    assert_eq!(
        buffer(rows).kind,
        PlannedKind::View {
            base,
            offset: 2 * 4 * 4
        }
    );
    assert_eq!(buffer(rows).offset, buffer(y).offset + 32);
    assert_eq!(buffer(cols).kind, PlannedKind::Owned);
}
