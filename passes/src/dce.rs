//! Dead code elimination: removes pure ops none of whose results is used.
//!
//! Ops are visited in reverse program order (nested regions included, each before its owner)
//! with use counts that drop as users are removed, so an op whose only users were dead is seen
//! dead when it is reached: one walk reaches the fixpoint on verified IR, where every use
//! follows its definition.
//!
//! What the pass guarantees:
//! - Only pure ops are removed, never a terminator (`func.return`, `onnx.Yield`) or an op with
//!   side effects.
//! - An op holding regions (`onnx.If`) is removed, with everything in its regions, only when
//!   its results are unused and every op in its regions is pure or a terminator.
//! - A removed op's handles stay valid but are no longer placed in any block; nothing that is
//!   still used is removed.

use crate::manager::{Pass, PassError};
use cranelift_entity::SecondaryMap;
use memc_ir::{Function, Module, OpId};

/// The dead code elimination pass; see the module doc.
pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "dce"
    }

    fn description(&self) -> &'static str {
        "removes pure ops whose results are unused"
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        for (_, func) in module.functions_mut() {
            eliminate_dead_ops(func);
        }
        Ok(())
    }
}

/// Removes the dead ops of one function; returns how many ops were removed, ops inside removed
/// regions included.
pub fn eliminate_dead_ops(func: &mut Function) -> usize {
    let mut use_counts = func.use_counts();
    let mut dead: SecondaryMap<OpId, bool> = SecondaryMap::new();
    let mut n_dead = 0;
    for op in func.walk_ops().into_iter().rev() {
        let data = func.op(op);
        if dead[op] || !is_removable(func, op) || data.results.iter().any(|&r| use_counts[r] > 0) {
            continue;
        }
        // Remove the op and everything nested in it, releasing the values they used.
        let mut pending = vec![op];
        while let Some(current) = pending.pop() {
            if dead[current] {
                continue;
            }
            dead[current] = true;
            n_dead += 1;
            let data = func.op(current);
            for &operand in &data.operands {
                use_counts[operand] = use_counts[operand].saturating_sub(1);
            }
            for &region in &data.regions {
                for &block in func.layout().region_blocks(region) {
                    pending.extend_from_slice(func.layout().block_ops(block));
                }
            }
        }
    }
    if n_dead > 0 {
        func.erase_ops_where(|op| dead[op]);
    }
    n_dead
}

/// Whether `op` may be removed once its results are unused: it is pure, not a terminator, and
/// everything in its regions is pure or a terminator.
fn is_removable(func: &Function, op: OpId) -> bool {
    let def = func.op(op).opcode.def();
    def.is_pure() && !def.is_terminator() && regions_have_no_effects(func, op)
}

fn regions_have_no_effects(func: &Function, op: OpId) -> bool {
    func.op(op).regions.iter().all(|&region| {
        func.layout().region_blocks(region).iter().all(|&block| {
            func.layout().block_ops(block).iter().all(|&nested| {
                let def = func.op(nested).opcode.def();
                (def.is_pure() || def.is_terminator()) && regions_have_no_effects(func, nested)
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{
        assert_module_valid, entry_opcodes, f32_tensor, result, ret, run_verified, tensor,
    };
    use memc_ir::{BlockId, ElemType, Opcode, ValueId};

    fn build(
        func: &mut Function,
        block: BlockId,
        opcode: Opcode,
        operands: Vec<ValueId>,
    ) -> ValueId {
        let op = func.build_op(block, opcode, operands, vec![f32_tensor(&[4])], []);
        result(func, op)
    }

    /// Runs DCE on `func`, which must verify before and after.
    fn dce(func: &mut Function) -> usize {
        run_verified(func, eliminate_dead_ops)
    }

    fn function() -> Function {
        let bool_scalar = tensor(ElemType::Bool, vec![]);
        Function::new(
            "f",
            vec![f32_tensor(&[4]), bool_scalar],
            vec![f32_tensor(&[4])],
        )
    }

    #[test]
    fn a_dead_chain_is_removed_in_one_run() {
        let mut func = function();
        let entry = func.entry_block();
        let x = func.args()[0];
        let a = build(&mut func, entry, Opcode::Relu, vec![x]);
        let b = build(&mut func, entry, Opcode::Neg, vec![a]);
        build(&mut func, entry, Opcode::Abs, vec![b]);
        ret(&mut func, vec![x]);
        assert_eq!(dce(&mut func), 3);
        assert_eq!(entry_opcodes(&func), [Opcode::Return]);
        assert_eq!(dce(&mut func), 0);
    }

    #[test]
    fn used_ops_and_the_terminator_stay() {
        let mut func = function();
        let entry = func.entry_block();
        let x = func.args()[0];
        let a = build(&mut func, entry, Opcode::Relu, vec![x]);
        let b = build(&mut func, entry, Opcode::Neg, vec![a]);
        build(&mut func, entry, Opcode::Exp, vec![a]);
        ret(&mut func, vec![b]);
        assert_eq!(dce(&mut func), 1);
        assert_eq!(
            entry_opcodes(&func),
            [Opcode::Relu, Opcode::Neg, Opcode::Return]
        );
    }

    #[test]
    fn a_multi_result_op_with_one_used_result_stays() {
        let mut func = Function::new("f", vec![f32_tensor(&[4])], vec![f32_tensor(&[2])]);
        let entry = func.entry_block();
        let x = func.args()[0];
        let split = func.build_op(entry, Opcode::Split, vec![x], vec![f32_tensor(&[2]); 2], []);
        let second = func.op(split).results[1];
        ret(&mut func, vec![second]);
        assert_eq!(dce(&mut func), 0);
    }

    /// Appends `If(cond)` whose then-region yields `Neg(then_operand)` and whose else-region
    /// yields `else_operand`; returns the If.
    fn build_if(func: &mut Function, then_operand: ValueId, else_operand: ValueId) -> OpId {
        let entry = func.entry_block();
        let cond = func.args()[1];
        let if_op = func.build_op(entry, Opcode::If, vec![cond], vec![f32_tensor(&[4])], []);
        let then_block = {
            let region = func.add_region(if_op);
            func.append_block(region, vec![])
        };
        let neg = build(func, then_block, Opcode::Neg, vec![then_operand]);
        func.build_op(then_block, Opcode::Yield, vec![neg], vec![], []);
        let else_block = {
            let region = func.add_region(if_op);
            func.append_block(region, vec![])
        };
        func.build_op(else_block, Opcode::Yield, vec![else_operand], vec![], []);
        if_op
    }

    #[test]
    fn an_unused_if_is_removed_with_its_regions_and_what_only_they_used() {
        let mut func = function();
        let entry = func.entry_block();
        let x = func.args()[0];
        let only_used_inside = build(&mut func, entry, Opcode::Relu, vec![x]);
        let if_op = build_if(&mut func, only_used_inside, x);
        ret(&mut func, vec![x]);
        // Relu, If, and in the regions Neg and two Yields.
        assert_eq!(dce(&mut func), 5);
        assert_eq!(entry_opcodes(&func), [Opcode::Return]);
        assert_eq!(func.layout().op_block(if_op), None);
        for &region in &func.op(if_op).regions {
            let block = func.layout().region_blocks(region)[0];
            assert!(func.layout().block_ops(block).is_empty());
        }
    }

    #[test]
    fn a_used_if_keeps_its_yields_and_loses_dead_ops_inside() {
        let mut func = function();
        let x = func.args()[0];
        let if_op = build_if(&mut func, x, x);
        let then_block = func.layout().region_blocks(func.op(if_op).regions[0])[0];
        build(&mut func, then_block, Opcode::Exp, vec![x]);
        // Move the dead Exp before the Yield, where a real op would be.
        let mut order = func.layout().block_ops(then_block).to_vec();
        order.rotate_right(1);
        assert!(func.layout_mut().reorder_block(then_block, order));
        let if_result = result(&func, if_op);
        ret(&mut func, vec![if_result]);
        assert_eq!(dce(&mut func), 1);
        let then_opcodes: Vec<Opcode> = func
            .layout()
            .block_ops(then_block)
            .iter()
            .map(|&op| func.op(op).opcode)
            .collect();
        assert_eq!(then_opcodes, [Opcode::Neg, Opcode::Yield]);
        assert_eq!(entry_opcodes(&func), [Opcode::If, Opcode::Return]);
    }

    #[test]
    fn the_pass_cleans_every_function() {
        let mut module = Module::new();
        let ids: Vec<_> = (0..2)
            .map(|index| {
                let mut func = function();
                func.set_name(&format!("f{index}"));
                let entry = func.entry_block();
                let x = func.args()[0];
                build(&mut func, entry, Opcode::Relu, vec![x]);
                ret(&mut func, vec![x]);
                module.add_function(func)
            })
            .collect();
        assert_module_valid(&module, "before dce");
        Dce.run(&mut module).expect("dce does not fail");
        assert_module_valid(&module, "after dce");
        for id in ids {
            assert_eq!(entry_opcodes(module.function(id)), [Opcode::Return]);
        }
    }
}
