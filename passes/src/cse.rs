//! Common subexpression elimination: an op that computes what an earlier op already computed
//! is erased and its results replaced by the earlier op's.
//!
//! Two ops are equivalent when both are pure and hold no regions, and they have the same
//! opcode, the same operands (after earlier replacements), the same attributes and the same
//! result types. Source locations are ignored. The first two operands of a commutative op
//! (`Traits::COMMUTATIVE`) are compared as an unordered pair, so `Add(a, b)` and `Add(b, a)`
//! are equivalent. `memc.weight` ops naming the same weight are equivalent like any other.
//!
//! What the pass guarantees:
//! - An op is only replaced by an op that comes before it in its own block or in a block that
//!   encloses it (one that holds, transitively, the op owning its region). So the earlier op's
//!   results are defined wherever the later op's were used, and an op inside a region is never
//!   reused outside that region, nor by another block of it.
//! - Ops with side effects, terminators and ops holding regions are never erased; their
//!   regions are processed.
//! - Replacement values have exactly the types of the values they replace.

use crate::manager::{Pass, PassError};
use crate::rewrite::resolve_operands;
use memc_ir::{AttrDict, BlockId, Function, Module, OpId, Opcode, RegionId, Type, ValueId};
use std::collections::{HashMap, HashSet};

/// The common subexpression elimination pass; see the module doc.
pub struct Cse;

impl Pass for Cse {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn description(&self) -> &'static str {
        "merges pure ops that compute the same value from the same operands"
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        for (_, func) in module.functions_mut() {
            eliminate_common_subexpressions(func);
        }
        Ok(())
    }
}

/// What makes two ops equivalent.
#[derive(PartialEq, Eq, Hash)]
struct OpKey {
    opcode: Opcode,
    operands: Vec<ValueId>,
    attrs: AttrDict,
    result_types: Vec<Type>,
}

impl OpKey {
    fn of(func: &Function, op: OpId) -> OpKey {
        let data = func.op(op);
        let mut operands = data.operands.clone();
        if data.opcode.def().is_commutative() && operands.len() >= 2 {
            let (a, b) = (operands[0], operands[1]);
            operands[0] = a.min(b);
            operands[1] = a.max(b);
        }
        OpKey {
            opcode: data.opcode,
            operands,
            attrs: data.attrs.clone(),
            result_types: data
                .results
                .iter()
                .map(|&r| func.value_type(r).clone())
                .collect(),
        }
    }
}

/// The walk's state: a stack of scopes, one per block being visited, innermost last.
struct Walk {
    scopes: Vec<HashMap<OpKey, OpId>>,
    replacements: HashMap<ValueId, ValueId>,
    erased: HashSet<OpId>,
}

/// Merges equivalent ops of one function; returns the number of ops erased.
pub fn eliminate_common_subexpressions(func: &mut Function) -> usize {
    let mut walk = Walk {
        scopes: Vec::new(),
        replacements: HashMap::new(),
        erased: HashSet::new(),
    };
    walk.region(func, func.body());
    func.erase_ops_where(|op| walk.erased.contains(&op));
    // On verified IR every use was resolved during the walk, since uses follow definitions;
    // this catches any use that does not.
    func.replace_uses(&walk.replacements);
    walk.erased.len()
}

impl Walk {
    fn region(&mut self, func: &mut Function, region: RegionId) {
        for block in func.layout().region_blocks(region).to_vec() {
            self.block(func, block);
        }
    }

    fn block(&mut self, func: &mut Function, block: BlockId) {
        self.scopes.push(HashMap::new());
        for op in func.layout().block_ops(block).to_vec() {
            resolve_operands(func, op, &self.replacements);
            let data = func.op(op);
            if !data.regions.is_empty() || !data.opcode.def().is_pure() {
                for region in data.regions.clone() {
                    self.region(func, region);
                }
                continue;
            }
            let key = OpKey::of(func, op);
            match self.scopes.iter().rev().find_map(|scope| scope.get(&key)) {
                Some(&earlier) => {
                    for (&later, &kept) in func.op(op).results.iter().zip(&func.op(earlier).results)
                    {
                        self.replacements.insert(later, kept);
                    }
                    self.erased.insert(op);
                }
                None => {
                    self.scopes
                        .last_mut()
                        .expect("a scope was pushed for this block")
                        .insert(key, op);
                }
            }
        }
        self.scopes.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{
        assert_module_valid, entry_opcodes, f32_tensor, result, ret, returned, run_verified, tensor,
    };
    use memc_ir::{Attribute, ElemType, TensorType, WeightBytes};

    /// Runs CSE on `func`, which must verify before and after.
    fn cse(func: &mut Function) -> usize {
        run_verified(func, eliminate_common_subexpressions)
    }

    /// A function of two `tensor<4xf32>` arguments returning two of them.
    fn function() -> Function {
        Function::new("f", vec![f32_tensor(&[4]); 2], vec![f32_tensor(&[4]); 2])
    }

    fn build(
        func: &mut Function,
        block: BlockId,
        opcode: Opcode,
        operands: Vec<ValueId>,
        attrs: Vec<(&'static str, Attribute)>,
    ) -> ValueId {
        let op = func.build_op(block, opcode, operands, vec![f32_tensor(&[4])], attrs);
        result(func, op)
    }

    /// Builds `return op(operands_a), op(operands_b)` with the given attributes and returns
    /// whether CSE merged the two ops.
    fn merges(
        opcode: Opcode,
        operands_a: &dyn Fn(&Function) -> Vec<ValueId>,
        attrs_a: Vec<(&'static str, Attribute)>,
        operands_b: &dyn Fn(&Function) -> Vec<ValueId>,
        attrs_b: Vec<(&'static str, Attribute)>,
    ) -> bool {
        let mut func = function();
        let entry = func.entry_block();
        let (operands_a, operands_b) = (operands_a(&func), operands_b(&func));
        let a = build(&mut func, entry, opcode, operands_a, attrs_a);
        let b = build(&mut func, entry, opcode, operands_b, attrs_b);
        ret(&mut func, vec![a, b]);
        let n_erased = cse(&mut func);
        let merged = returned(&func) == [a, a];
        assert_eq!(n_erased, usize::from(merged));
        merged
    }

    fn x(func: &Function) -> Vec<ValueId> {
        vec![func.args()[0]]
    }

    fn y(func: &Function) -> Vec<ValueId> {
        vec![func.args()[1]]
    }

    fn xy(func: &Function) -> Vec<ValueId> {
        func.args().to_vec()
    }

    fn yx(func: &Function) -> Vec<ValueId> {
        func.args().iter().rev().copied().collect()
    }

    fn alpha(value: f64) -> Vec<(&'static str, Attribute)> {
        vec![("alpha", Attribute::Float(value))]
    }

    #[test]
    fn equal_ops_merge_and_the_later_is_erased() {
        assert!(merges(Opcode::Relu, &x, vec![], &x, vec![]));
        let mut func = function();
        let entry = func.entry_block();
        let x = func.args()[0];
        let a = build(&mut func, entry, Opcode::Relu, vec![x], vec![]);
        let b = build(&mut func, entry, Opcode::Relu, vec![x], vec![]);
        ret(&mut func, vec![a, b]);
        cse(&mut func);
        assert_eq!(entry_opcodes(&func), [Opcode::Relu, Opcode::Return]);
        assert_eq!(
            func.layout()
                .op_block(func.defining_op(b).expect("an op result")),
            None
        );
    }

    #[test]
    fn different_operands_do_not_merge() {
        assert!(!merges(Opcode::Relu, &x, vec![], &y, vec![]));
    }

    #[test]
    fn different_attrs_do_not_merge() {
        assert!(merges(Opcode::LeakyRelu, &x, alpha(0.1), &x, alpha(0.1)));
        assert!(!merges(Opcode::LeakyRelu, &x, alpha(0.1), &x, alpha(0.2)));
        assert!(!merges(Opcode::LeakyRelu, &x, alpha(0.1), &x, vec![]));
    }

    #[test]
    fn different_result_types_do_not_merge() {
        let mut func = Function::new("f", vec![f32_tensor(&[4])], vec![]);
        let entry = func.entry_block();
        let x = func.args()[0];
        let f16 = tensor(ElemType::F16, vec![memc_ir::Dim::Static(4)]);
        let a = func.build_op(entry, Opcode::Relu, vec![x], vec![f32_tensor(&[4])], []);
        let b = func.build_op(entry, Opcode::Relu, vec![x], vec![f16], []);
        let values = vec![result(&func, a), result(&func, b)];
        ret(&mut func, values);
        assert_eq!(eliminate_common_subexpressions(&mut func), 0);
    }

    #[test]
    fn locations_are_ignored() {
        let mut func = function();
        let entry = func.entry_block();
        let x = func.args()[0];
        let a = build(&mut func, entry, Opcode::Relu, vec![x], vec![]);
        let b = build(&mut func, entry, Opcode::Relu, vec![x], vec![]);
        for (value, name) in [(a, "first"), (b, "second")] {
            let op = func.defining_op(value).expect("an op result");
            func.op_mut(op).loc = Some(name.to_string());
        }
        ret(&mut func, vec![a, b]);
        assert_eq!(cse(&mut func), 1);
    }

    #[test]
    fn commutative_operands_match_in_either_order() {
        assert!(merges(Opcode::Add, &xy, vec![], &yx, vec![]));
        assert!(!merges(Opcode::Sub, &xy, vec![], &yx, vec![]));
    }

    #[test]
    fn users_of_merged_ops_merge_in_the_same_run() {
        let mut func = function();
        let entry = func.entry_block();
        let x = func.args()[0];
        let a = build(&mut func, entry, Opcode::Relu, vec![x], vec![]);
        let b = build(&mut func, entry, Opcode::Relu, vec![x], vec![]);
        let neg_a = build(&mut func, entry, Opcode::Neg, vec![a], vec![]);
        let neg_b = build(&mut func, entry, Opcode::Neg, vec![b], vec![]);
        ret(&mut func, vec![neg_a, neg_b]);
        assert_eq!(cse(&mut func), 2);
        assert_eq!(returned(&func), [neg_a, neg_a]);
    }

    #[test]
    fn weights_naming_the_same_weight_merge() {
        let mut module = memc_ir::Module::new();
        let ty = TensorType::with_shape(ElemType::F32, &[4]);
        let w0 = module
            .weights
            .insert("w0", ty.clone(), WeightBytes::Absent)
            .expect("new name");
        let w1 = module
            .weights
            .insert("w1", ty, WeightBytes::Absent)
            .expect("new name");
        let mut func = Function::new("f", vec![], vec![f32_tensor(&[4]); 3]);
        let entry = func.entry_block();
        let values: Vec<ValueId> = [w0, w1, w0]
            .into_iter()
            .map(|w| {
                build(
                    &mut func,
                    entry,
                    Opcode::Weight,
                    vec![],
                    vec![("value", Attribute::Weight(w))],
                )
            })
            .collect();
        ret(&mut func, values.clone());
        let id = module.add_function(func);
        assert_module_valid(&module, "before cse");
        Cse.run(&mut module).expect("cse does not fail");
        assert_module_valid(&module, "after cse");
        assert_eq!(
            returned(module.function(id)),
            [values[0], values[1], values[0]]
        );
    }

    /// `%c = arg; [outer before] If(%c) { then: [inner]; yield } { else: yield } [outer after]`:
    /// a function with an If whose regions each hold one block ending in Yield.
    struct IfFixture {
        func: Function,
        if_op: OpId,
        then_block: BlockId,
        else_block: BlockId,
    }

    fn if_fixture() -> IfFixture {
        let bool_scalar = tensor(ElemType::Bool, vec![]);
        let mut func = Function::new(
            "f",
            vec![f32_tensor(&[4]), bool_scalar],
            vec![f32_tensor(&[4]); 3],
        );
        let entry = func.entry_block();
        let cond = func.args()[1];
        let if_op = func.build_op(entry, Opcode::If, vec![cond], vec![f32_tensor(&[4])], []);
        let then_region = func.add_region(if_op);
        let then_block = func.append_block(then_region, vec![]);
        let else_region = func.add_region(if_op);
        let else_block = func.append_block(else_region, vec![]);
        IfFixture {
            func,
            if_op,
            then_block,
            else_block,
        }
    }

    /// Ends both regions, yielding the given values.
    fn yield_values(fx: &mut IfFixture, then_value: ValueId, else_value: ValueId) {
        fx.func
            .build_op(fx.then_block, Opcode::Yield, vec![then_value], vec![], []);
        fx.func
            .build_op(fx.else_block, Opcode::Yield, vec![else_value], vec![], []);
    }

    fn yielded(func: &Function, block: BlockId) -> Vec<ValueId> {
        let last = *func
            .layout()
            .block_ops(block)
            .last()
            .expect("the block ends with Yield");
        func.op(last).operands.clone()
    }

    #[test]
    fn an_op_in_a_region_reuses_an_earlier_op_of_an_enclosing_block() {
        let mut fx = if_fixture();
        let x = fx.func.args()[0];
        let entry = fx.func.entry_block();
        // Build the outer Relu, then move the If after it.
        let outer = build(&mut fx.func, entry, Opcode::Relu, vec![x], vec![]);
        let outer_op = fx.func.defining_op(outer).expect("an op result");
        let order = vec![outer_op, fx.if_op];
        assert!(fx.func.layout_mut().reorder_block(entry, order));
        let inner = build(&mut fx.func, fx.then_block, Opcode::Relu, vec![x], vec![]);
        yield_values(&mut fx, inner, x);
        let if_result = result(&fx.func, fx.if_op);
        ret(&mut fx.func, vec![outer, if_result, x]);
        assert_eq!(cse(&mut fx.func), 1);
        assert_eq!(yielded(&fx.func, fx.then_block), [outer]);
    }

    #[test]
    fn an_op_in_a_region_is_not_reused_outside_it() {
        let mut fx = if_fixture();
        let x = fx.func.args()[0];
        let entry = fx.func.entry_block();
        let inner = build(
            &mut fx.func,
            fx.then_block,
            Opcode::Sigmoid,
            vec![x],
            vec![],
        );
        yield_values(&mut fx, inner, x);
        let outer = build(&mut fx.func, entry, Opcode::Sigmoid, vec![x], vec![]);
        let if_result = result(&fx.func, fx.if_op);
        ret(&mut fx.func, vec![outer, if_result, x]);
        assert_eq!(cse(&mut fx.func), 0);
        assert_eq!(returned(&fx.func), [outer, if_result, x]);
    }

    #[test]
    fn sibling_regions_do_not_share() {
        let mut fx = if_fixture();
        let x = fx.func.args()[0];
        let then_value = build(&mut fx.func, fx.then_block, Opcode::Exp, vec![x], vec![]);
        let else_value = build(&mut fx.func, fx.else_block, Opcode::Exp, vec![x], vec![]);
        yield_values(&mut fx, then_value, else_value);
        let if_result = result(&fx.func, fx.if_op);
        ret(&mut fx.func, vec![if_result, x, x]);
        assert_eq!(cse(&mut fx.func), 0);
        assert_eq!(yielded(&fx.func, fx.else_block), [else_value]);
    }

    #[test]
    fn ops_with_regions_do_not_merge() {
        let mut func = Function::new("f", vec![tensor(ElemType::Bool, vec![])], vec![]);
        let entry = func.entry_block();
        let cond = func.args()[0];
        for _ in 0..2 {
            let if_op = func.build_op(entry, Opcode::If, vec![cond], vec![], []);
            for _ in 0..2 {
                let region = func.add_region(if_op);
                let block = func.append_block(region, vec![]);
                func.build_op(block, Opcode::Yield, vec![], vec![], []);
            }
        }
        ret(&mut func, vec![]);
        assert_eq!(cse(&mut func), 0);
        assert_eq!(
            entry_opcodes(&func),
            [Opcode::If, Opcode::If, Opcode::Return]
        );
    }
}
