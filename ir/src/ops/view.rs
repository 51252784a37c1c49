//! Views: whether an op's result is its first operand's bytes, and at which byte offset.
//!
//! [`view_of`] is the one answer the planner, lowering and the e-graph share. It returns a
//! [`View`] only for ops whose definition has the [`VIEW`](super::Traits::VIEW) trait, and
//! among those only when no data would move:
//!
//! - ops with the [`SAME_BYTES`](super::Traits::SAME_BYTES) trait (Reshape, Squeeze,
//!   Unsqueeze, Flatten, Identity, BitCast): always, at offset 0;
//! - Dropout with one operand and one result (inference): at offset 0;
//! - Transpose that only moves size-1 dims (the element order stays): at offset 0;
//! - Slice that cuts one contiguous run of its input's bytes (one axis cut with step 1, every
//!   axis before it of size 1, the starts, axes and steps constant weights): at the run's
//!   first byte.
//!
//! It never looks beyond the op's operands, attributes, types and constant weights, and it
//! never panics on verified IR.

use super::{transpose_perm, OpCtx};
use crate::{ElemType, Function, OpId, Opcode, ValueId, WeightStore};

/// The bytes an op's result 0 aliases: `source`'s, starting `byte_offset` bytes in.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct View {
    pub source: ValueId,
    pub byte_offset: u64,
}

/// Whether `op`'s result 0 aliases the bytes of its first operand, and at which byte offset
/// (see the module doc for the cases). `weights` gives the values of constant Slice operands.
pub fn view_of(func: &Function, weights: &WeightStore, op: OpId) -> Option<View> {
    let data = func.op(op);
    let def = data.opcode.def();
    if !def.is_view() {
        return None;
    }
    let source = *data.operands.first()?;
    let at = |byte_offset| View {
        source,
        byte_offset,
    };
    if def.is_same_bytes() {
        return Some(at(0));
    }
    match data.opcode {
        Opcode::Dropout if data.results.len() == 1 && data.operands.len() == 1 => Some(at(0)),
        Opcode::Transpose => {
            let input = func.value_type(source).tensor()?;
            let perm = transpose_perm(&OpCtx { func, op }, input.rank()).ok()?;
            // Moving only size-1 dims keeps the element order.
            let non_unit: Vec<usize> = perm
                .iter()
                .copied()
                .filter(|&p| input.dims[p].as_static() != Some(1))
                .collect();
            non_unit.windows(2).all(|w| w[0] < w[1]).then_some(at(0))
        }
        Opcode::Slice => contiguous_slice(func, weights, op).map(at),
        _ => None,
    }
}

/// The i64 values of a constant operand (a `memc.weight` with loaded bytes), if small.
fn constant_ints(func: &Function, weights: &WeightStore, value: ValueId) -> Option<Vec<i64>> {
    let op = func.defining_op(value)?;
    if func.op(op).opcode != Opcode::Weight {
        return None;
    }
    let weight = weights.get(func.op(op).attrs.get("value")?.as_weight()?)?;
    let ty = weight.ty();
    if ty.rank() != 1 || ty.static_num_elements()? > 64 {
        return None;
    }
    let bytes = weight.bytes()?;
    match ty.elem {
        ElemType::I64 => Some(
            bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
        ),
        ElemType::I32 => Some(
            bytes
                .chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))
                .collect(),
        ),
        _ => None,
    }
}

/// The byte offset of a Slice result inside its input when the result is one contiguous run
/// of the input's bytes: only one axis is cut, with step 1, and every axis before it has
/// size 1.
fn contiguous_slice(func: &Function, weights: &WeightStore, op: OpId) -> Option<u64> {
    let data = func.op(op);
    let input = func
        .value_type(*data.operands.first()?)
        .tensor()?
        .static_shape()?;
    let output = func.value_type(*data.results.first()?).tensor()?;
    let elem_bits = u64::from(output.elem.bits());
    let output = output.static_shape()?;
    if input.len() != output.len() || elem_bits % 8 != 0 {
        return None;
    }
    let cut: Vec<usize> = (0..input.len())
        .filter(|&k| input[k] != output[k])
        .collect();
    let k = match cut.as_slice() {
        [] => return Some(0),
        [k] => *k,
        _ => return None,
    };
    if input[..k].iter().any(|&d| d != 1) {
        return None;
    }
    let operand = |i: usize| {
        data.operands
            .get(i)
            .copied()
            .filter(|&v| !func.value_type(v).is_none())
    };
    let starts = constant_ints(func, weights, operand(1)?)?;
    let axes = match operand(3) {
        Some(v) => constant_ints(func, weights, v)?,
        None => (0..starts.len() as i64).collect(),
    };
    if let Some(v) = operand(4) {
        if constant_ints(func, weights, v)?.iter().any(|&s| s != 1) {
            return None;
        }
    }
    let rank = input.len() as i64;
    let position = axes
        .iter()
        .position(|&a| a == k as i64 || a + rank == k as i64)?;
    let dim = i64::try_from(input[k]).ok()?;
    let start = starts[position];
    let start = if start < 0 {
        start.checked_add(dim)?
    } else {
        start
    }
    .clamp(0, dim) as u64;
    let row: u64 = input[k + 1..]
        .iter()
        .try_fold(elem_bits / 8, |acc, &d| acc.checked_mul(d))?;
    start.checked_mul(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{build, f32_of, weight};
    use crate::{Attribute, TensorType, Type, WeightBytes};
    use std::sync::Arc;

    /// A function with one f32 argument of `shape`.
    fn func_with(shape: &[u64]) -> (Function, ValueId) {
        let func = Function::new("f", vec![f32_of(shape)], Vec::new());
        let x = func.args()[0];
        (func, x)
    }

    /// A constant i64 weight holding `values`.
    fn ints(func: &mut Function, weights: &mut WeightStore, values: &[i64]) -> ValueId {
        let ty = TensorType::with_shape(ElemType::I64, &[values.len() as u64]);
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        weight(func, weights, ty, WeightBytes::Owned(Arc::from(bytes)))
    }

    #[test]
    fn only_ops_with_the_view_trait_are_views() {
        // Every op over one [1, 4] operand (repeated as often as it takes operands) with
        // results of the same type: a view exactly when its def has the VIEW trait.
        for &opcode in Opcode::ALL {
            let (mut func, x) = func_with(&[1, 4]);
            let def = opcode.def();
            let n_operands = def.operand_range().0.max(1);
            let n_results = def.result_range().0.max(1);
            let op = build(
                &mut func,
                opcode,
                vec![x; n_operands],
                vec![f32_of(&[1, 4]); n_results],
                vec![],
            );
            let view = view_of(&func, &WeightStore::new(), op);
            assert_eq!(
                view.is_some(),
                def.is_view(),
                "{}: view_of gave {view:?}",
                def.name
            );
            if def.is_same_bytes() {
                assert!(def.is_view(), "{}: SAME_BYTES implies VIEW", def.name);
            }
        }
    }

    #[test]
    fn reshapes_and_identities_alias_at_offset_zero() {
        for opcode in [
            Opcode::Reshape,
            Opcode::Squeeze,
            Opcode::Unsqueeze,
            Opcode::Flatten,
            Opcode::Identity,
        ] {
            let (mut func, x) = func_with(&[2, 3]);
            let op = build(&mut func, opcode, vec![x], vec![f32_of(&[6])], vec![]);
            assert_eq!(
                view_of(&func, &WeightStore::new(), op),
                Some(View {
                    source: x,
                    byte_offset: 0
                }),
                "{opcode:?}"
            );
        }
    }

    #[test]
    fn bit_cast_aliases_at_offset_zero_with_its_own_element_type() {
        let (mut func, x) = func_with(&[2, 3]);
        let i32_ty = Type::from(TensorType::with_shape(ElemType::I32, &[2, 3]));
        let op = build(
            &mut func,
            Opcode::BitCast,
            vec![x],
            vec![i32_ty],
            vec![("to", Attribute::ElemType(ElemType::I32))],
        );
        assert_eq!(
            view_of(&func, &WeightStore::new(), op),
            Some(View {
                source: x,
                byte_offset: 0
            })
        );
    }

    #[test]
    fn dropout_is_a_view_only_without_mask_and_ratio() {
        let weights = WeightStore::new();
        let (mut func, x) = func_with(&[4]);
        let plain = build(
            &mut func,
            Opcode::Dropout,
            vec![x],
            vec![f32_of(&[4])],
            vec![],
        );
        assert!(view_of(&func, &weights, plain).is_some());
        let mask = Type::from(TensorType::with_shape(ElemType::Bool, &[4]));
        let with_mask = build(
            &mut func,
            Opcode::Dropout,
            vec![x],
            vec![f32_of(&[4]), mask],
            vec![],
        );
        assert_eq!(view_of(&func, &weights, with_mask), None);
        let with_ratio = build(
            &mut func,
            Opcode::Dropout,
            vec![x, x],
            vec![f32_of(&[4])],
            vec![],
        );
        assert_eq!(view_of(&func, &weights, with_ratio), None);
    }

    #[test]
    fn transpose_is_a_view_when_it_moves_only_unit_dims() {
        let weights = WeightStore::new();
        let perm = |p: &[i64]| vec![("perm", Attribute::ints(p.iter().copied()))];
        let (mut func, x) = func_with(&[1, 3, 1, 4]);
        let unit_moves = build(
            &mut func,
            Opcode::Transpose,
            vec![x],
            vec![f32_of(&[3, 1, 4, 1])],
            perm(&[1, 0, 3, 2]),
        );
        assert_eq!(
            view_of(&func, &weights, unit_moves),
            Some(View {
                source: x,
                byte_offset: 0
            })
        );
        let real = build(
            &mut func,
            Opcode::Transpose,
            vec![x],
            vec![f32_of(&[1, 4, 1, 3])],
            perm(&[0, 3, 2, 1]),
        );
        assert_eq!(view_of(&func, &weights, real), None);
    }

    #[test]
    fn slice_of_one_contiguous_run_is_a_view_at_its_first_byte() {
        let mut weights = WeightStore::new();
        let (mut func, x) = func_with(&[1, 6, 4]);
        let starts = ints(&mut func, &mut weights, &[2]);
        let ends = ints(&mut func, &mut weights, &[5]);
        let axes = ints(&mut func, &mut weights, &[-2]);
        let steps = ints(&mut func, &mut weights, &[1]);
        let contiguous = build(
            &mut func,
            Opcode::Slice,
            vec![x, starts, ends, axes, steps],
            vec![f32_of(&[1, 3, 4])],
            vec![],
        );
        // Two rows of 4 f32 before the start.
        assert_eq!(
            view_of(&func, &weights, contiguous),
            Some(View {
                source: x,
                byte_offset: 2 * 4 * 4
            })
        );
        // A cut along the last axis is not one run.
        let last_axis = ints(&mut func, &mut weights, &[2]);
        let strided = build(
            &mut func,
            Opcode::Slice,
            vec![x, starts, ends, last_axis],
            vec![f32_of(&[1, 6, 3])],
            vec![],
        );
        assert_eq!(view_of(&func, &weights, strided), None);
        // A step other than 1 is not a run either.
        let two = ints(&mut func, &mut weights, &[2]);
        let stepped = build(
            &mut func,
            Opcode::Slice,
            vec![x, starts, ends, axes, two],
            vec![f32_of(&[1, 2, 4])],
            vec![],
        );
        assert_eq!(view_of(&func, &weights, stepped), None);
        // Starts that are not constants: not known to be a view.
        let (mut func, x) = func_with(&[1, 6, 4]);
        let dynamic = build(
            &mut func,
            Opcode::Slice,
            vec![x, x, x],
            vec![f32_of(&[1, 3, 4])],
            vec![],
        );
        assert_eq!(view_of(&func, &weights, dynamic), None);
    }
}
