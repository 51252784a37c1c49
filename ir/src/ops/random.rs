//! Randomness: whether re-running an op may give a different result.
//!
//! [`is_random`] is the one answer; a rematerialization never recomputes an op it calls random
//! (the recomputed value would not be the one the rest of the step used). The table declares
//! it: an op kind that draws random numbers has the [`RANDOM`](super::Traits::RANDOM) trait,
//! and one that draws them only in some uses names those uses with a `random_when` hook.
//!
//! - **Dropout** (`.random_when(dropout)`) is random exactly when its `training_mode` operand is
//!   given and not known to be false, and its `ratio` is not known to be 0 (left out, it is
//!   0.5). Known means a known value of shape inference or a constant `memc.weight` with loaded
//!   bytes, read the way lowering reads them; anything else (a graph input, a weight parsed
//!   from text, without bytes) counts as possibly true and possibly non-zero. Without a
//!   `training_mode` operand Dropout is the identity (its mask all true), whatever its ratio.
//! - The **`seed` attribute does not make Dropout deterministic** across a forward run and a
//!   recompute. In onnxruntime a kernel seeds its generator once, when the session creates
//!   it, and every execution draws the next numbers from it: two runs of one session with
//!   `seed = 7` give different masks, and only a new session repeats the first mask (checked
//!   with onnxruntime 1.31's CPU provider). A recompute is a second execution, so Dropout with
//!   a seed is as random as without one.
//! - An op holding regions (`onnx.If`) is random when an op in its regions is.
//! - The table has no other random-number op: ONNX's RandomNormal, RandomUniform,
//!   RandomNormalLike, RandomUniformLike, Bernoulli and Multinomial, and onnxruntime's
//!   BitmaskDropout, BiasDropout and the like are not declared, so the importer rejects them
//!   as unsupported ops. Declaring one means giving it the `RANDOM` trait.

use super::fold::weight_scalar;
use super::{ShapeCtx, SymInt};
use crate::{Function, OpId, Opcode, WeightStore};

/// Whether re-running `op` may give a different result (see the module doc): an op of a kind
/// with the [`RANDOM`](super::Traits::RANDOM) trait in a use its table hook calls random, or
/// an op whose regions hold one. `weights` gives the values of constant operands.
pub fn is_random(func: &Function, weights: &WeightStore, op: OpId) -> bool {
    // An explicit stack, so nesting depth never grows the call stack.
    let mut pending = vec![op];
    while let Some(op) = pending.pop() {
        let data = func.op(op);
        let def = data.opcode.def();
        if def.may_be_random() {
            let random = match def.random {
                Some(hook) => hook(&ShapeCtx::new(func, op).with_weights(weights)),
                None => true,
            };
            if random {
                return true;
            }
        }
        for &region in &data.regions {
            for &block in func.layout().region_blocks(region) {
                pending.extend_from_slice(func.layout().block_ops(block));
            }
        }
    }
    false
}

/// The first element of operand `index` when it is known: a known value, or a constant
/// `memc.weight` with loaded bytes. `None` for an absent operand or one nobody can tell.
fn known_scalar(ctx: &ShapeCtx, index: usize) -> Option<SymInt> {
    ctx.operand_type(index)?;
    if let Some(known) = ctx.known_operand(index) {
        if let Some(first) = known.elems().first() {
            return Some(first.clone());
        }
    }
    let producer = ctx.func.defining_op(*ctx.operands().get(index)?)?;
    let producer = ctx.func.op(producer);
    if producer.opcode != Opcode::Weight {
        return None;
    }
    let id = producer.attrs.get("value")?.as_weight()?;
    weight_scalar(ctx.weights()?.get(id)?)
}

/// Whether a known element is zero (false, for a bool).
fn is_zero(value: &SymInt) -> bool {
    match value {
        SymInt::Float(f) => *f == 0.0,
        other => other.as_const() == Some(0),
    }
}

/// Dropout: random in training mode with a ratio other than 0 (see the module doc).
pub(super) fn dropout(ctx: &ShapeCtx) -> bool {
    const RATIO: usize = 1;
    const TRAINING_MODE: usize = 2;
    if ctx.operand_type(TRAINING_MODE).is_none() {
        return false;
    }
    if known_scalar(ctx, TRAINING_MODE).is_some_and(|t| is_zero(&t)) {
        return false;
    }
    // A left-out ratio is 0.5.
    !known_scalar(ctx, RATIO).is_some_and(|r| is_zero(&r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{f32_of, weight};
    use crate::{Attribute, ElemType, TensorType, Type, ValueId, WeightBytes};
    use std::sync::Arc;

    fn bool_of(shape: &[u64]) -> Type {
        Type::from(TensorType::with_shape(ElemType::Bool, shape))
    }

    /// A function with an f32 [4] argument and a bool scalar argument (a training_mode known
    /// only at run time).
    fn func() -> (Function, ValueId, ValueId) {
        let func = Function::new("f", vec![f32_of(&[4]), bool_of(&[])], Vec::new());
        let (x, flag) = (func.args()[0], func.args()[1]);
        (func, x, flag)
    }

    /// A scalar constant weight of `elem` with the little-endian `bytes` (`None`: not loaded).
    fn scalar(
        func: &mut Function,
        weights: &mut WeightStore,
        elem: ElemType,
        bytes: Option<Vec<u8>>,
    ) -> ValueId {
        let ty = TensorType::with_shape(elem, &[]);
        let data = bytes.map_or(WeightBytes::Absent, |b| WeightBytes::Owned(Arc::from(b)));
        weight(func, weights, ty, data)
    }

    fn flag(func: &mut Function, weights: &mut WeightStore, value: bool) -> ValueId {
        scalar(func, weights, ElemType::Bool, Some(vec![u8::from(value)]))
    }

    fn ratio(func: &mut Function, weights: &mut WeightStore, value: f32) -> ValueId {
        let bytes = value.to_le_bytes().to_vec();
        scalar(func, weights, ElemType::F32, Some(bytes))
    }

    fn dropout(
        func: &mut Function,
        operands: Vec<ValueId>,
        attrs: Vec<(&'static str, Attribute)>,
    ) -> OpId {
        let entry = func.entry_block();
        func.build_op(
            entry,
            Opcode::Dropout,
            operands,
            vec![f32_of(&[4]), bool_of(&[4])],
            attrs,
        )
    }

    #[test]
    fn only_dropout_may_be_random() {
        let random: Vec<Opcode> = Opcode::ALL
            .iter()
            .copied()
            .filter(|o| o.def().may_be_random())
            .collect();
        assert_eq!(random, [Opcode::Dropout]);
        for &opcode in Opcode::ALL {
            let def = opcode.def();
            if def.random.is_some() {
                assert!(
                    def.may_be_random(),
                    "{}: a random hook needs RANDOM",
                    def.name
                );
            }
        }
    }

    #[test]
    fn dropout_without_training_mode_is_not_random() {
        let mut weights = WeightStore::new();
        let (mut func, x, _) = func();
        let plain = dropout(&mut func, vec![x], vec![]);
        assert!(!is_random(&func, &weights, plain));
        // A ratio and a mask result do not make it training.
        let half = ratio(&mut func, &mut weights, 0.5);
        let with_ratio = dropout(&mut func, vec![x, half], vec![]);
        assert!(!is_random(&func, &weights, with_ratio));
    }

    #[test]
    fn dropout_in_training_mode_is_random_unless_its_ratio_is_zero() {
        let mut weights = WeightStore::new();
        let (mut func, x, _) = func();
        let none = {
            let entry = func.entry_block();
            let op = func.build_op(entry, Opcode::None, vec![], vec![Type::None], []);
            func.op(op).results[0]
        };
        let on = flag(&mut func, &mut weights, true);
        let default_ratio = dropout(&mut func, vec![x, none, on], vec![]);
        assert!(
            is_random(&func, &weights, default_ratio),
            "ratio left out: 0.5"
        );
        let tenth = ratio(&mut func, &mut weights, 0.1);
        let some = dropout(&mut func, vec![x, tenth, on], vec![]);
        assert!(is_random(&func, &weights, some));
        let zero = ratio(&mut func, &mut weights, 0.0);
        let zero_ratio = dropout(&mut func, vec![x, zero, on], vec![]);
        assert!(!is_random(&func, &weights, zero_ratio), "ratio 0 keeps all");
    }

    #[test]
    fn dropout_with_training_mode_known_false_is_not_random() {
        let mut weights = WeightStore::new();
        let (mut func, x, _) = func();
        let off = flag(&mut func, &mut weights, false);
        let half = ratio(&mut func, &mut weights, 0.5);
        let op = dropout(&mut func, vec![x, half, off], vec![]);
        assert!(!is_random(&func, &weights, op));
    }

    #[test]
    fn dropout_whose_training_mode_nobody_can_tell_is_random() {
        let mut weights = WeightStore::new();
        let (mut func, x, runtime_flag) = func();
        let half = ratio(&mut func, &mut weights, 0.5);
        let from_input = dropout(&mut func, vec![x, half, runtime_flag], vec![]);
        assert!(is_random(&func, &weights, from_input), "a graph input");
        let unloaded = scalar(&mut func, &mut weights, ElemType::Bool, None);
        let from_text = dropout(&mut func, vec![x, half, unloaded], vec![]);
        assert!(
            is_random(&func, &weights, from_text),
            "a weight without bytes"
        );
        // Without the weight store, a constant cannot be read either.
        let off = flag(&mut func, &mut weights, false);
        let constant = dropout(&mut func, vec![x, half, off], vec![]);
        assert!(!is_random(&func, &weights, constant));
        assert!(is_random(&func, &WeightStore::new(), constant));
    }

    #[test]
    fn a_seed_does_not_make_dropout_deterministic() {
        let mut weights = WeightStore::new();
        let (mut func, x, _) = func();
        let on = flag(&mut func, &mut weights, true);
        let half = ratio(&mut func, &mut weights, 0.5);
        let seeded = dropout(
            &mut func,
            vec![x, half, on],
            vec![("seed", Attribute::Int(7))],
        );
        assert!(is_random(&func, &weights, seeded));
    }

    #[test]
    fn an_op_is_random_when_its_regions_hold_a_random_op() {
        let mut weights = WeightStore::new();
        let (mut func, x, cond) = func();
        let on = flag(&mut func, &mut weights, true);
        let zero = ratio(&mut func, &mut weights, 0.0);
        let entry = func.entry_block();
        let if_op = func.build_op(entry, Opcode::If, vec![cond], vec![f32_of(&[4])], []);
        assert!(!is_random(&func, &weights, if_op), "empty regions");
        let then_region = func.add_region(if_op);
        let then_block = func.append_block(then_region, vec![]);
        let inner = func.build_op(
            then_block,
            Opcode::Dropout,
            vec![x, zero, on],
            vec![f32_of(&[4])],
            [],
        );
        assert!(!is_random(&func, &weights, if_op), "a Dropout of ratio 0");
        let half = ratio(&mut func, &mut weights, 0.5);
        func.op_mut(inner).operands[1] = half;
        assert!(is_random(&func, &weights, if_op));
        // Ops without the trait never are.
        let add = func.build_op(entry, Opcode::Add, vec![x, x], vec![f32_of(&[4])], []);
        assert!(!is_random(&func, &weights, add));
    }
}
