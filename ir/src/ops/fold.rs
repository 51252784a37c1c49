//! Folds: the known values of results from the known values of operands, for the ops that
//! compute shapes (`Shape`, `Gather`, `Concat`, arithmetic, ...) and for `memc.weight` with
//! loaded bytes.
//!
//! A fold runs only after the op's shape function gave its result types, and only for a
//! result with a static shape of at most [`MAX_KNOWN_ELEMENTS`] elements; it builds a value
//! of exactly that shape or returns `None`. Like shape functions, folds never panic: every
//! index is derived from checked shapes and every arithmetic step is checked
//! (see [`SymInt`]).

use super::shape::{range_len, shape_range};
use super::value::{KnownValue, SymInt, MAX_KNOWN_ELEMENTS};
use super::ShapeCtx;
use crate::{Attribute, Dim, ElemType, TensorType, Weight};
use std::borrow::Cow;
use std::cmp::Ordering;

type Fold = Option<KnownValue>;

/// The static shape of result `index`.
fn result_shape(results: &[TensorType], index: usize) -> Option<Vec<u64>> {
    results.get(index)?.static_shape()
}

fn known<'a>(ctx: &ShapeCtx<'a>, index: usize) -> Option<Cow<'a, KnownValue>> {
    ctx.known_operand(index)
}

fn count(shape: &[u64]) -> Option<usize> {
    let n = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))?;
    if n > MAX_KNOWN_ELEMENTS {
        return None;
    }
    usize::try_from(n).ok()
}

/// Normalizes an axis against a rank; `None` when out of range.
fn axis_index(axis: i64, rank: usize) -> Option<usize> {
    let r = i64::try_from(rank).ok()?;
    let a = if axis < 0 { axis.checked_add(r)? } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

/// Maps `f` over the operands' elements with numpy broadcasting to `out`.
fn broadcast_map(inputs: &[&KnownValue], out: &[u64], f: &dyn Fn(&[&SymInt]) -> SymInt) -> Fold {
    let n = count(out)?;
    let rank = out.len();
    // For each input, the stride of each output axis in the input (0 where broadcast).
    let mut strides: Vec<Vec<usize>> = Vec::with_capacity(inputs.len());
    for input in inputs {
        let shape = input.shape();
        let offset = rank.checked_sub(shape.len())?;
        let mut stride = vec![0usize; rank];
        let mut step = 1usize;
        for (j, &d) in shape.iter().enumerate().rev() {
            let o = out[offset + j];
            if d == o {
                stride[offset + j] = step;
            } else if d != 1 {
                return None;
            }
            step = step.checked_mul(usize::try_from(d).ok()?)?;
        }
        if step != input.elems().len() {
            return None;
        }
        strides.push(stride);
    }
    let mut elems = Vec::with_capacity(n);
    let mut index = vec![0u64; rank];
    for _ in 0..n {
        let args: Vec<&SymInt> = inputs
            .iter()
            .zip(&strides)
            .map(|(input, stride)| {
                let at: usize = index
                    .iter()
                    .zip(stride)
                    .map(|(&i, &s)| i as usize * s)
                    .sum();
                input.elems().get(at)
            })
            .collect::<Option<_>>()?;
        elems.push(f(&args));
        // Advance the row-major output index.
        for j in (0..rank).rev() {
            index[j] += 1;
            if index[j] < out[j] {
                break;
            }
            index[j] = 0;
        }
    }
    KnownValue::new(out.to_vec(), elems)
}

/// Every operand known; `f` applied elementwise with broadcasting.
fn elementwise(
    ctx: &ShapeCtx,
    results: &[TensorType],
    index: usize,
    f: &dyn Fn(&[&SymInt]) -> SymInt,
) -> Fold {
    let values: Vec<Cow<KnownValue>> = (0..ctx.n_operands())
        .map(|i| known(ctx, i))
        .collect::<Option<_>>()?;
    let refs: Vec<&KnownValue> = values.iter().map(|v| v.as_ref()).collect();
    broadcast_map(&refs, &result_shape(results, index)?, f)
}

fn binary(
    ctx: &ShapeCtx,
    results: &[TensorType],
    index: usize,
    f: fn(&SymInt, &SymInt) -> SymInt,
) -> Fold {
    if ctx.n_operands() != 2 {
        return None;
    }
    elementwise(ctx, results, index, &|args| f(args[0], args[1]))
}

pub fn add(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    binary(ctx, results, index, SymInt::add)
}

pub fn sub(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    binary(ctx, results, index, SymInt::sub)
}

pub fn mul(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    binary(ctx, results, index, SymInt::mul)
}

pub fn div(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    binary(ctx, results, index, SymInt::div)
}

pub fn modulo(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    if ctx.int_or_default("fmod") != 0 {
        binary(ctx, results, index, |a, b| a.rem(b, true))
    } else {
        binary(ctx, results, index, |a, b| a.rem(b, false))
    }
}

pub fn equal(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    binary(ctx, results, index, |a, b| {
        a.compare_with(b, |o| o == Ordering::Equal)
    })
}

pub fn less(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    binary(ctx, results, index, |a, b| {
        a.compare_with(b, |o| o == Ordering::Less)
    })
}

pub fn less_or_equal(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    binary(ctx, results, index, |a, b| {
        a.compare_with(b, |o| o != Ordering::Greater)
    })
}

pub fn greater(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    binary(ctx, results, index, |a, b| {
        a.compare_with(b, |o| o == Ordering::Greater)
    })
}

pub fn greater_or_equal(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    binary(ctx, results, index, |a, b| {
        a.compare_with(b, |o| o != Ordering::Less)
    })
}

/// A bool element: `Some(true)` for a non-zero constant.
fn truth(e: &SymInt) -> Option<bool> {
    e.as_const().map(|c| c != 0)
}

fn bool_elem(b: Option<bool>) -> SymInt {
    b.map_or(SymInt::unknown(), |b| SymInt::Const(i64::from(b)))
}

pub fn and(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    binary(ctx, results, index, |a, b| match (truth(a), truth(b)) {
        (Some(false), _) | (_, Some(false)) => SymInt::Const(0),
        (Some(true), Some(true)) => SymInt::Const(1),
        _ => SymInt::unknown(),
    })
}

pub fn or(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    binary(ctx, results, index, |a, b| match (truth(a), truth(b)) {
        (Some(true), _) | (_, Some(true)) => SymInt::Const(1),
        (Some(false), Some(false)) => SymInt::Const(0),
        _ => SymInt::unknown(),
    })
}

pub fn not(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    elementwise(ctx, results, index, &|args| {
        bool_elem(truth(args[0]).map(|b| !b))
    })
}

pub fn neg(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    elementwise(ctx, results, index, &|args| args[0].neg())
}

/// `Max` and `Min` over any number of operands.
pub fn max(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    elementwise(ctx, results, index, &|args| {
        args.iter().skip(1).fold(
            args.first().map_or(SymInt::unknown(), |a| (*a).clone()),
            |acc, x| acc.max(x),
        )
    })
}

pub fn min(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    elementwise(ctx, results, index, &|args| {
        args.iter().skip(1).fold(
            args.first().map_or(SymInt::unknown(), |a| (*a).clone()),
            |acc, x| acc.min(x),
        )
    })
}

/// `Where(cond, X, Y)`; an unknown condition still gives a value where both sides agree.
pub fn where_(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    if ctx.n_operands() != 3 {
        return None;
    }
    elementwise(ctx, results, index, &|args| match truth(args[0]) {
        Some(true) => args[1].clone(),
        Some(false) => args[2].clone(),
        None if args[1] == args[2] && !args[1].is_unknown() => args[1].clone(),
        None => SymInt::unknown(),
    })
}

/// Ops that move no data (Identity, Reshape, Flatten, Squeeze, Unsqueeze): the first
/// operand's elements in the result's shape.
pub fn forward(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    if index != 0 {
        return None;
    }
    let input = known(ctx, 0)?;
    KnownValue::new(result_shape(results, 0)?, input.elems().to_vec())
}

/// `Expand`: the input broadcast to the result's shape.
pub fn expand(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let input = known(ctx, 0)?;
    broadcast_map(&[input.as_ref()], &result_shape(results, index)?, &|args| {
        args[0].clone()
    })
}

/// Converts one element to the element type `to`.
fn cast_elem(e: &SymInt, to: ElemType) -> SymInt {
    if to.is_float() {
        return match e {
            SymInt::Float(f) if to == ElemType::F64 => SymInt::Float(*f),
            SymInt::Float(f) => SymInt::Float(f64::from(*f as f32)),
            _ => e
                .as_const()
                .map_or(SymInt::unknown(), |c| SymInt::Float(c as f64)),
        };
    }
    if to == ElemType::Bool {
        return match e {
            SymInt::Float(f) => SymInt::Const(i64::from(*f != 0.0)),
            _ => bool_elem(truth(e)),
        };
    }
    let value = match e {
        SymInt::Float(f) if f.is_finite() && f.abs() < 9.2e18 => f.trunc() as i64,
        SymInt::Float(_) => return SymInt::unknown(),
        // Dims are far below 2^31, so they survive casts to i32 and i64.
        SymInt::Dim(_) if matches!(to, ElemType::I64 | ElemType::I32) => return e.clone(),
        SymInt::Dim(_) => return SymInt::unknown(),
        SymInt::Const(c) => *c,
    };
    let wrapped = match to {
        ElemType::I64 => value,
        ElemType::I32 => i64::from(value as i32),
        ElemType::I16 => i64::from(value as i16),
        ElemType::I8 => i64::from(value as i8),
        ElemType::U32 => i64::from(value as u32),
        ElemType::U16 => i64::from(value as u16),
        ElemType::U8 => i64::from(value as u8),
        ElemType::U64 if value >= 0 => value,
        _ => return SymInt::unknown(),
    };
    SymInt::Const(wrapped)
}

pub fn cast(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let to = ctx.attr("to").and_then(Attribute::as_elem_type)?;
    elementwise(ctx, results, index, &|args| cast_elem(args[0], to))
}

/// `Shape`: the input's dims from `start` to `end`.
pub fn shape(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let input = ctx.operand_type(0)?;
    let (start, end) = shape_range(ctx, input.rank());
    let elems = input
        .dims
        .get(start..end)?
        .iter()
        .cloned()
        .map(SymInt::from_dim)
        .collect();
    KnownValue::new(result_shape(results, index)?, elems)
}

/// `Size`: the product of the input's dims.
pub fn size(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let input = ctx.operand_type(0)?;
    let total = input.dims.iter().fold(Dim::Static(1), |acc, d| acc.mul(d));
    KnownValue::new(result_shape(results, index)?, vec![SymInt::from_dim(total)])
}

/// `Gather` along `axis`; indices may be negative.
pub fn gather(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let data = known(ctx, 0)?;
    let indices = known(ctx, 1)?.ints()?;
    let shape = data.shape();
    let axis = axis_index(ctx.int_or_default("axis"), shape.len())?;
    let axis_len = usize::try_from(shape[axis]).ok()?;
    let inner = count(&shape[axis + 1..])?;
    let outer = count(&shape[..axis])?;
    let mut elems = Vec::new();
    for o in 0..outer {
        for &i in &indices {
            let i = if i < 0 {
                i.checked_add(i64::try_from(axis_len).ok()?)?
            } else {
                i
            };
            let i = usize::try_from(i).ok().filter(|&i| i < axis_len)?;
            let base = (o * axis_len + i) * inner;
            elems.extend_from_slice(data.elems().get(base..base + inner)?);
            if elems.len() as u64 > MAX_KNOWN_ELEMENTS {
                return None;
            }
        }
    }
    KnownValue::new(result_shape(results, index)?, elems)
}

/// The elements of `data` at the row-major enumeration of `out_shape`, where
/// `source(index)` names the element of `data` (in its own row-major order) that the output
/// index `index` takes.
fn pick(data: &KnownValue, out_shape: &[u64], source: &dyn Fn(&[usize]) -> Option<usize>) -> Fold {
    let n = count(out_shape)?;
    let rank = out_shape.len();
    let mut elems = Vec::with_capacity(n);
    let mut index = vec![0usize; rank];
    for _ in 0..n {
        elems.push(data.elems().get(source(&index)?)?.clone());
        for axis in (0..rank).rev() {
            index[axis] += 1;
            if (index[axis] as u64) < out_shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    KnownValue::new(out_shape.to_vec(), elems)
}

/// Row-major strides of `shape`, in elements.
fn strides(shape: &[u64]) -> Option<Vec<usize>> {
    let mut strides = vec![1usize; shape.len()];
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1].checked_mul(usize::try_from(shape[axis + 1]).ok()?)?;
    }
    Some(strides)
}

/// The indices one axis of length `len` keeps under `Slice`'s `start`, `end` and `step`,
/// clamped as ONNX says (to `[0, len]` going forward, to `[-1, len - 1]` going backward).
fn slice_indices(len: u64, start: i64, end: i64, step: i64) -> Option<Vec<usize>> {
    if step == 0 {
        return None;
    }
    if len == 0 {
        return Some(Vec::new());
    }
    let d = i128::from(len);
    let resolve = |i: i64| {
        let i = i128::from(i);
        if i < 0 {
            i + d
        } else {
            i
        }
    };
    let step = i128::from(step);
    let mut kept = Vec::new();
    let mut i = resolve(start);
    let end = resolve(end);
    if step > 0 {
        i = i.clamp(0, d);
        let end = end.clamp(0, d);
        while i < end {
            kept.push(usize::try_from(i).ok()?);
            i += step;
        }
    } else {
        i = i.clamp(0, d - 1);
        let end = end.clamp(-1, d - 1);
        while i > end {
            kept.push(usize::try_from(i).ok()?);
            i += step;
        }
    }
    Some(kept)
}

/// `Slice`: along each of `axes` (all axes in order when absent), the indices `Slice` keeps.
pub fn slice(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let data = known(ctx, 0)?;
    let shape = data.shape();
    let rank = shape.len();
    let ints = |i: usize| known(ctx, i)?.ints();
    let (starts, ends) = (ints(1)?, ints(2)?);
    let axes: Vec<usize> = match ctx.operand_type(3) {
        Some(_) => ints(3)?
            .iter()
            .map(|&a| axis_index(a, rank))
            .collect::<Option<_>>()?,
        None => (0..starts.len()).collect(),
    };
    let steps = match ctx.operand_type(4) {
        Some(_) => ints(4)?,
        None => vec![1; starts.len()],
    };
    let n = starts.len();
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return None;
    }
    // Per axis, the source indices kept: every index unless the axis is sliced.
    let mut kept: Vec<Option<Vec<usize>>> = vec![None; rank];
    for (k, &axis) in axes.iter().enumerate() {
        if kept[axis].is_some() {
            return None;
        }
        kept[axis] = Some(slice_indices(shape[axis], starts[k], ends[k], steps[k])?);
    }
    let out_shape: Vec<u64> = kept
        .iter()
        .zip(shape)
        .map(|(k, &d)| k.as_ref().map_or(d, |k| k.len() as u64))
        .collect();
    if Some(&out_shape) != result_shape(results, index).as_ref() {
        return None;
    }
    let strides = strides(shape)?;
    pick(&data, &out_shape, &|out: &[usize]| {
        out.iter().enumerate().try_fold(0usize, |flat, (axis, &i)| {
            let source = match &kept[axis] {
                Some(k) => *k.get(i)?,
                None => i,
            };
            flat.checked_add(source.checked_mul(strides[axis])?)
        })
    })
}

/// `Transpose`: the elements permuted by `perm` (reversed axes when absent).
pub fn transpose(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let data = known(ctx, 0)?;
    let shape = data.shape();
    let rank = shape.len();
    let perm: Vec<usize> = match ctx.ints_attr("perm").ok()? {
        Some(perm) => perm
            .iter()
            .map(|&a| usize::try_from(a).ok().filter(|&a| a < rank))
            .collect::<Option<_>>()?,
        None => (0..rank).rev().collect(),
    };
    if perm.len() != rank {
        return None;
    }
    let out_shape: Vec<u64> = perm.iter().map(|&p| shape[p]).collect();
    if Some(&out_shape) != result_shape(results, index).as_ref() {
        return None;
    }
    let strides = strides(shape)?;
    pick(&data, &out_shape, &|out: &[usize]| {
        out.iter().zip(&perm).try_fold(0usize, |flat, (&i, &p)| {
            flat.checked_add(i.checked_mul(strides[p])?)
        })
    })
}

/// `Concat` along `axis`.
pub fn concat(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let values: Vec<Cow<KnownValue>> = (0..ctx.n_operands())
        .map(|i| known(ctx, i))
        .collect::<Option<_>>()?;
    let first = values.first()?;
    let rank = first.rank();
    let axis = axis_index(ctx.int_attr("axis")?, rank)?;
    let outer = count(&first.shape()[..axis])?;
    let mut chunks = Vec::with_capacity(values.len());
    for v in &values {
        if v.rank() != rank
            || v.shape()[..axis] != first.shape()[..axis]
            || v.shape()[axis + 1..] != first.shape()[axis + 1..]
        {
            return None;
        }
        chunks.push(count(&v.shape()[axis..])?);
    }
    let mut elems = Vec::new();
    for o in 0..outer {
        for (v, &chunk) in values.iter().zip(&chunks) {
            elems.extend_from_slice(v.elems().get(o * chunk..(o + 1) * chunk)?);
        }
        if elems.len() as u64 > MAX_KNOWN_ELEMENTS {
            return None;
        }
    }
    KnownValue::new(result_shape(results, index)?, elems)
}

/// `ConcatTraining`: result 0 as `Concat`; result 1, `per_input_length`, the inputs' sizes
/// along `axis` (known from their types, symbolic or not, whatever their values).
pub fn concat_training(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    if index == 0 {
        return concat(ctx, results, index);
    }
    let first = ctx.operand_type(0)?;
    let axis = axis_index(ctx.int_attr("axis")?, first.rank())?;
    let lengths = (0..ctx.n_operands())
        .map(|i| {
            let dim = ctx.operand_type(i)?.dims.get(axis)?.clone();
            Some(SymInt::from_dim(dim))
        })
        .collect::<Option<Vec<_>>>()?;
    KnownValue::new(result_shape(results, index)?, lengths)
}

/// `Split` of a 1-d value: result `index` starts after the earlier results.
pub fn split(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let data = known(ctx, 0)?;
    if data.rank() != 1 {
        return None;
    }
    let mut start = 0usize;
    for ty in results.get(..index)? {
        let [len] = ty.static_shape()?[..] else {
            return None;
        };
        start = start.checked_add(usize::try_from(len).ok()?)?;
    }
    let shape = result_shape(results, index)?;
    let len = count(&shape)?;
    let elems = data.elems().get(start..start.checked_add(len)?)?.to_vec();
    KnownValue::new(shape, elems)
}

/// The axes a `Reduce*` reduces, or `None` when it does not reduce every axis (only full
/// reductions are folded) or the axes are unknown.
fn reduces_everything(ctx: &ShapeCtx, rank: usize) -> Option<bool> {
    let axes = if ctx.operand_type(1).is_some() {
        known(ctx, 1)?.ints()?
    } else {
        match ctx.attr("axes") {
            Some(a) => a.as_ints()?,
            None => Vec::new(),
        }
    };
    if axes.is_empty() {
        // No axes: everything, or nothing with noop_with_empty_axes.
        return Some(ctx.int_or_default("noop_with_empty_axes") == 0);
    }
    let mut covered = vec![false; rank];
    for a in axes {
        covered[axis_index(a, rank)?] = true;
    }
    covered.iter().all(|&c| c).then_some(true)
}

fn reduce(
    ctx: &ShapeCtx,
    results: &[TensorType],
    index: usize,
    f: fn(&SymInt, &SymInt) -> SymInt,
) -> Fold {
    let data = known(ctx, 0)?;
    let shape = result_shape(results, index)?;
    if !reduces_everything(ctx, data.rank())? {
        return KnownValue::new(shape, data.elems().to_vec());
    }
    let (first, rest) = data.elems().split_first()?;
    let total = rest.iter().fold(first.clone(), |acc, x| f(&acc, x));
    KnownValue::new(shape, vec![total])
}

pub fn reduce_prod(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    reduce(ctx, results, index, SymInt::mul)
}

pub fn reduce_sum(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    reduce(ctx, results, index, SymInt::add)
}

pub fn reduce_max(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    reduce(ctx, results, index, SymInt::max)
}

pub fn reduce_min(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    reduce(ctx, results, index, SymInt::min)
}

/// The first element of a weight with loaded bytes and at most [`MAX_KNOWN_ELEMENTS`]
/// elements (`ConstantOfShape`'s fill value, Dropout's `training_mode` and `ratio`).
pub(super) fn weight_scalar(weight: &Weight) -> Option<SymInt> {
    decode(weight)?.first().cloned()
}

/// `ConstantOfShape`: the fill value (`value`, else `0.0`) in the result's shape.
pub fn constant_of_shape(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let fill = match ctx.attr("value") {
        None => SymInt::Float(0.0),
        Some(value) => weight_scalar(ctx.weights()?.get(value.as_weight()?)?)?,
    };
    let shape = result_shape(results, index)?;
    let n = count(&shape)?;
    KnownValue::new(shape, vec![fill; n])
}

/// `Range`: `start + i * delta`.
pub fn range(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let scalar = |i: usize| -> Option<SymInt> {
        match known(ctx, i)?.elems() {
            [one] => Some(one.clone()),
            _ => None,
        }
    };
    let (start, limit, delta) = (scalar(0)?, scalar(1)?, scalar(2)?);
    let shape = result_shape(results, index)?;
    let n = count(&shape)?;
    if range_len(&start, &limit, &delta).ok()?.as_static() != u64::try_from(n).ok() {
        return None;
    }
    let mut elems = Vec::with_capacity(n);
    let mut current = start;
    for _ in 0..n {
        elems.push(current.clone());
        current = current.add(&delta);
    }
    KnownValue::new(shape, elems)
}

/// `memc.weight`: the weight's bytes, little-endian, when loaded and small.
pub fn weight(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    let id = ctx.attr("value")?.as_weight()?;
    let weight = ctx.weights()?.get(id)?;
    let shape = result_shape(results, index)?;
    if weight.ty().static_shape()? != shape {
        return None;
    }
    KnownValue::new(shape, decode(weight)?)
}

/// The elements of a weight with loaded bytes and at most [`MAX_KNOWN_ELEMENTS`] elements.
fn decode(weight: &Weight) -> Option<Vec<SymInt>> {
    let n = count(&weight.ty().static_shape()?)?;
    let elem = weight.ty().elem;
    if elem.is_sub_byte() || elem.is_minifloat() {
        return None;
    }
    let width = (elem.bits() / 8) as usize;
    let bytes = weight.bytes()?;
    if bytes.len() != n.checked_mul(width)? {
        return None;
    }
    let elems = bytes
        .chunks_exact(width)
        .map(|b| {
            let mut raw = [0u8; 8];
            raw[..width].copy_from_slice(b);
            let bits = u64::from_le_bytes(raw);
            match elem {
                ElemType::I64 => SymInt::Const(bits as i64),
                ElemType::I32 => SymInt::Const(i64::from(bits as u32 as i32)),
                ElemType::I16 => SymInt::Const(i64::from(bits as u16 as i16)),
                ElemType::I8 => SymInt::Const(i64::from(bits as u8 as i8)),
                ElemType::U64 => i64::try_from(bits).map_or(SymInt::unknown(), SymInt::Const),
                ElemType::U32 | ElemType::U16 | ElemType::U8 => SymInt::Const(bits as i64),
                ElemType::Bool => SymInt::Const(i64::from(bits != 0)),
                ElemType::F64 => SymInt::Float(f64::from_bits(bits)),
                ElemType::F32 => SymInt::Float(f64::from(f32::from_bits(bits as u32))),
                ElemType::F16 => SymInt::Float(half::f16::from_bits(bits as u16).to_f64()),
                ElemType::BF16 => SymInt::Float(f64::from(f32::from_bits((bits as u32) << 16))),
                ElemType::I4
                | ElemType::U4
                | ElemType::I2
                | ElemType::U2
                | ElemType::F8E4M3FN
                | ElemType::F8E4M3FNUZ
                | ElemType::F8E5M2
                | ElemType::F8E5M2FNUZ
                | ElemType::F4E2M1
                | ElemType::F8E8M0 => SymInt::unknown(),
            }
        })
        .collect();
    Some(elems)
}

/// `Floor` of known floats (a `Range` expansion's trip count is `Ceil` of a float quotient).
pub fn floor(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    elementwise(ctx, results, index, &|args| match args[0] {
        SymInt::Float(x) => SymInt::Float(x.floor()),
        _ => SymInt::unknown(),
    })
}

/// `Ceil` of known floats.
pub fn ceil(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    elementwise(ctx, results, index, &|args| match args[0] {
        SymInt::Float(x) => SymInt::Float(x.ceil()),
        _ => SymInt::unknown(),
    })
}

/// `Relu` of known numbers: `max(x, 0)` (NaN stays NaN).
pub fn relu(ctx: &ShapeCtx, results: &[TensorType], index: usize) -> Fold {
    elementwise(ctx, results, index, &|args| match args[0] {
        SymInt::Float(x) if x.is_nan() => SymInt::Float(*x),
        SymInt::Float(x) => SymInt::Float(x.max(0.0)),
        SymInt::Const(c) => SymInt::Const((*c).max(0)),
        _ => SymInt::unknown(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_floats_decode() {
        // A constant f16 weight's elements, as shape computations see them.
        let bits: [u16; 5] = [0x3c00, 0xc000, 0x3800, 0x0001, 0x7e00];
        let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        let mut store = crate::WeightStore::new();
        let id = store
            .insert(
                "h",
                TensorType::with_shape(ElemType::F16, &[5]),
                crate::WeightBytes::Owned(std::sync::Arc::from(bytes)),
            )
            .expect("5 f16 values are 10 bytes");
        let elems = decode(store.get(id).expect("just inserted")).expect("decodes");
        let floats: Vec<f64> = elems
            .iter()
            .map(|e| match e {
                SymInt::Float(x) => *x,
                other => panic!("f16 decodes to floats, got {other:?}"),
            })
            .collect();
        assert_eq!(floats[..4], [1.0, -2.0, 0.5, 2f64.powi(-24)]);
        assert!(floats[4].is_nan());
    }

    #[test]
    fn broadcasting_maps_elements() {
        let a = KnownValue::new(vec![2, 1], vec![SymInt::Const(1), SymInt::Const(2)])
            .expect("2 elements");
        let b = KnownValue::vector(vec![
            SymInt::Const(10),
            SymInt::Const(20),
            SymInt::Const(30),
        ])
        .expect("3 elements");
        let out = broadcast_map(&[&a, &b], &[2, 3], &|x| x[0].add(x[1])).expect("broadcasts");
        let ints = out.ints().expect("constants");
        assert_eq!(ints, vec![11, 21, 31, 12, 22, 32]);
        assert!(broadcast_map(&[&b], &[2], &|x| x[0].clone()).is_none());
    }
}
