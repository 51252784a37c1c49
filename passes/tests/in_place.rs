//! Which operand an in-place op writes over: of several that die at it, the one written last
//! (bufferization's rule, `in_place_candidate`). The CPU backend then runs the op as the
//! epilogue of the contraction just before it: ResNet's residual `Add` after a block's
//! shortcut convolution, which runs after the main path's.

use memc_ir::{Attribute, ElemType, Function, Opcode, TensorType, Type, ValueId, WeightStore};
use memc_passes::memory::{plan_function, PlannedKind};
use memc_passes::plan::PlanOptions;

/// `x -> a = Exp(x); b = Exp(Relu(x)); Add(a, b)` (or `Add(b, a)` with `b_first`): both
/// operands die at the add, and whichever order the planner picks, one of them is written
/// after the other; with the operands both ways round, one of the two functions has the
/// later one second.
fn two_paths(b_first: bool) -> Function {
    let ty = Type::Tensor(TensorType::with_shape(ElemType::F32, &[256]));
    let mut func = Function::new("f", vec![ty.clone()], Vec::new());
    let block = func.entry_block();
    let x = func.args()[0];
    let op = |func: &mut Function, opcode: Opcode, operands: Vec<ValueId>| {
        let attrs: Vec<(&'static str, Attribute)> = Vec::new();
        let id = func.build_op(block, opcode, operands, vec![ty.clone()], attrs);
        func.op(id).results[0]
    };
    let a = op(&mut func, Opcode::Exp, vec![x]);
    let r = op(&mut func, Opcode::Relu, vec![x]);
    let b = op(&mut func, Opcode::Exp, vec![r]);
    let operands = if b_first { vec![b, a] } else { vec![a, b] };
    let sum = op(&mut func, Opcode::Add, operands);
    func.build_op(block, Opcode::Return, vec![sum], vec![], []);
    func
}

#[test]
fn in_place_over_the_operand_written_last() {
    for b_first in [false, true] {
        let func = two_paths(b_first);
        let plan =
            plan_function(&func, &WeightStore::new(), &PlanOptions::default()).expect("plans");
        let add = plan
            .buffers
            .iter()
            .find(|b| b.is_output)
            .expect("the sum is an output");
        // The add's operands: the buffers that die at it (not the input, read before).
        let PlannedKind::InPlace { input } = add.kind else {
            panic!("the add is not in place: {:?}", add.kind);
        };
        let starts: Vec<u64> = plan
            .buffers
            .iter()
            .filter(|b| b.end == add.start + 1 && !b.is_output && b.start > 0)
            .map(|b| b.start)
            .collect();
        let latest = *starts.iter().max().expect("operands die at the add");
        assert_eq!(
            plan.buffers[input].start,
            latest,
            "b_first {b_first}: in place over the buffer written at step {}, not the last \
             written ({latest}); buffers {:?}",
            plan.buffers[input].start,
            plan.buffers
                .iter()
                .map(|b| (b.start, b.end, &b.kind))
                .collect::<Vec<_>>()
        );
    }
}
