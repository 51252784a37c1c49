//! Reductions, arg-reductions, softmax, the softmax gradients and the normalizations (with
//! `ms.LayerNormalizationGrad`), `ms.DivGrad` (a quotient summed over broadcast axes),
//! cumulative ops.
//!
//! Most ops here work on *rows*: the input's axes split into kept axes (the outer loop, in
//! order) and reduced axes (the inner loop, in order), see [`Rows`]. A reduction is a `Reduce`
//! stage then a `Once` stage storing the finished accumulator; softmax, its gradients and the
//! normalizations are `Reduce` stages (max, sums) then a `Map` stage writing the row, reading
//! the earlier accumulators with `Acc`. Cumulative ops reduce over the scanned axis with the
//! elements past the current one selected away (O(n^2), the kernel IR has no scan).
//!
//! Numerics follow the ONNX reference implementation: sums accumulate in the element type (so
//! integer sums wrap as numpy's `dtype=x.dtype` does; f32 sums are sequential f32 sums), and an
//! empty reduction gives the reduction's identity (0, 1, -inf or the integer minimum for max,
//! +inf or the integer maximum for min). The storage types (f16, bf16, ...) compute in f32.

use super::build::{contiguous_strides, Insts, TensorRef};
use super::elementwise::simplify_axes;
use super::{unsupported, LowerCtx, LowerError, LowerResult};
use crate::kernel::{
    BinaryOp, IndirectIndex, InstId, Kernel, KernelBody, LoopKernel, ReduceOp, Scalar, Stage,
    Store, UnaryOp, View, MAX_AXES,
};
use memc_ir::OpId;

/// The loop space of a row op over a tensor of shape `shape`: outer loop axes are the kept axes
/// of the tensor, inner loop axes the reduced ones, each in tensor order. With no reduced axis,
/// one inner axis of extent 1 stands in, so every row has exactly one element.
struct Rows {
    kept: Vec<usize>,
    reduced: Vec<usize>,
    outer: Vec<u64>,
    inner: Vec<u64>,
}

impl Rows {
    /// `reduced` must be sorted, without repeats, and in range.
    fn new(shape: &[u64], reduced: &[usize]) -> Result<Rows, LowerError> {
        if shape.len() + usize::from(reduced.is_empty()) > MAX_AXES {
            return Err(unsupported(format!(
                "rank {} (kernels loop over at most {MAX_AXES} axes)",
                shape.len()
            )));
        }
        let kept: Vec<usize> = (0..shape.len()).filter(|a| !reduced.contains(a)).collect();
        let outer = kept.iter().map(|&a| shape[a]).collect();
        let mut inner: Vec<u64> = reduced.iter().map(|&a| shape[a]).collect();
        if inner.is_empty() {
            inner.push(1);
        }
        Ok(Rows {
            kept,
            reduced: reduced.to_vec(),
            outer,
            inner,
        })
    }

    /// The number of elements in one row.
    fn row_len(&self) -> u64 {
        self.inner.iter().product()
    }

    /// Loop-axis strides from strides over the tensor's axes.
    fn permute(&self, strides: &[i64]) -> Vec<i64> {
        let mut out: Vec<i64> = self
            .kept
            .iter()
            .chain(&self.reduced)
            .map(|&a| strides[a])
            .collect();
        out.resize(self.outer.len() + self.inner.len(), 0);
        out
    }

    /// `t`, which broadcasts to `shape` (the rows' tensor shape), over the loop axes.
    fn view(&self, t: &TensorRef, shape: &[u64]) -> View {
        let strides = t.view_broadcast(shape, 0).strides;
        t.view_with(self.permute(&strides))
    }

    /// `t`, holding one element per row (a reduction's result, with or without keepdims), over
    /// the loop axes: contiguous over the outer axes, constant over the inner ones.
    fn row_view(&self, t: &TensorRef) -> View {
        let mut strides = contiguous_strides(&self.outer);
        strides.resize(self.outer.len() + self.inner.len(), 0);
        t.view_with(strides)
    }

    /// `t`, of shape `[C]`, indexed by axis `axis` of the rows' tensor.
    fn axis_view(&self, t: &TensorRef, rank: usize, axis: usize) -> View {
        let mut strides = vec![0i64; rank];
        strides[axis] = 1;
        t.view_with(self.permute(&strides))
    }

    /// The kernel over these rows, its axes simplified.
    fn kernel(&self, name: String, views: Vec<View>, stages: Vec<Stage>) -> Kernel {
        simplify_axes(Kernel {
            name,
            body: KernelBody::Loop(LoopKernel {
                outer: self.outer.clone(),
                inner: self.inner.clone(),
                views,
                stages,
            }),
        })
    }
}

/// A `Reduce` stage folding `value` of `insts` with `op` from `init` (a value of the value's
/// type, or an index for arg-reductions).
fn reduce_stage(insts: Insts, value: InstId, op: ReduceOp, init: f64) -> Stage {
    let ty = match op {
        ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. } => Scalar::I64,
        _ => insts.ty(value),
    };
    Stage::Reduce {
        insts: insts.finish(),
        value,
        op,
        init: const_bits(ty, init),
        ty,
    }
}

/// `value` as the bits of a `Const` of type `ty`.
fn const_bits(ty: Scalar, value: f64) -> u64 {
    if ty.is_float() {
        value.to_bits()
    } else if ty.is_unsigned_int() {
        value as u64
    } else {
        value as i64 as u64
    }
}

/// The identity of max (`lowest`) or min (`!lowest`) in `ty`, as `Const` bits.
fn extreme_bits(ty: Scalar, lowest: bool) -> u64 {
    let bits = ty.size() * 8;
    match (ty.is_float(), ty.is_signed_int(), lowest) {
        (true, _, true) => f64::NEG_INFINITY.to_bits(),
        (true, _, false) => f64::INFINITY.to_bits(),
        (_, true, true) => (i64::MIN >> (64 - bits)) as u64,
        (_, true, false) => (i64::MAX >> (64 - bits)) as u64,
        (_, false, true) => 0,
        (_, false, false) => u64::MAX >> (64 - bits),
    }
}

/// A store of `value` into `view`.
fn store(view: u32, value: InstId) -> Vec<Store> {
    vec![Store::new(view, value)]
}

/// `op` applied in `ty` when it is a float, else in f64 and converted back (truncating), as
/// numpy computes float functions of integers before `astype`.
fn float_fn(b: &mut Insts, op: UnaryOp, x: InstId) -> InstId {
    let t = b.ty(x);
    if t.is_float() {
        return b.unary(op, x);
    }
    let wide = b.cast(x, Scalar::F64);
    let r = b.unary(op, wide);
    b.cast(r, t)
}

/// The float type a normalization computes in: f64 when any of `elems` is f64, else f32.
fn compute_float(elems: &[Scalar]) -> Result<Scalar, LowerError> {
    for &e in elems {
        if !e.is_float() {
            return Err(unsupported(format!("a normalization of {}", e.name())));
        }
    }
    Ok(if elems.contains(&Scalar::F64) {
        Scalar::F64
    } else {
        Scalar::F32
    })
}

/// Normalizes `axis` against `rank`.
fn axis_of(axis: i64, rank: usize) -> Result<usize, LowerError> {
    memc_ir::ops::normalize_axis(axis, rank).map_err(unsupported)
}

// ---------------------------------------------------------------------------------------------
// Reductions.

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Reduction {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    SumSquare,
    LogSum,
    LogSumExp,
}

/// Which axes a Reduce op reduces.
enum ReducedAxes {
    /// Sorted, without repeats; empty for the no-op case of `noop_with_empty_axes` (every
    /// element its own row).
    Known(Vec<usize>),
    /// The `axes` operand is known only at run time and the shapes allow several sets: the
    /// candidates (each sorted), told apart at run time by the operand's values.
    OneOf(Vec<Vec<usize>>),
}

/// The reduced axes of a Reduce op from its `axes` operand or attribute; when the operand is
/// known only at run time, from the operand and result shapes (reducing an axis of size 1 or
/// not gives the same numbers, so only the axes of other sizes matter).
fn reduce_axes(
    ctx: &LowerCtx,
    op: OpId,
    x_shape: &[u64],
    y_shape: &[u64],
) -> Result<ReducedAxes, LowerError> {
    let rank = x_shape.len();
    let axes = match ctx.operand(op, 1)? {
        Some(_) => match ctx.const_ints(op, 1) {
            Some(axes) => Some(axes),
            None => return axes_from_shapes(ctx, op, x_shape, y_shape),
        },
        None => ctx.attr_ints(op, "axes"),
    };
    let axes = axes.unwrap_or_default();
    if axes.is_empty() {
        return Ok(ReducedAxes::Known(
            if ctx.attr_int(op, "noop_with_empty_axes") != 0 {
                Vec::new()
            } else {
                (0..rank).collect()
            },
        ));
    }
    let mut normalized = axes
        .iter()
        .map(|&a| axis_of(a, rank))
        .collect::<Result<Vec<_>, _>>()?;
    normalized.sort_unstable();
    normalized.dedup();
    Ok(ReducedAxes::Known(normalized))
}

/// The reduced axes implied by the shapes, for an `axes` operand known only at run time.
fn axes_from_shapes(
    ctx: &LowerCtx,
    op: OpId,
    x_shape: &[u64],
    y_shape: &[u64],
) -> Result<ReducedAxes, LowerError> {
    let rank = x_shape.len();
    let mismatch = || unsupported("the result shape does not match the input (a memc bug)");
    if ctx.attr_int(op, "keepdims") != 0 {
        if y_shape.len() != rank {
            return Err(mismatch());
        }
        let reduced: Vec<usize> = (0..rank)
            .filter(|&a| y_shape[a] == 1 && x_shape[a] != 1)
            .collect();
        if (0..rank).any(|a| !reduced.contains(&a) && y_shape[a] != x_shape[a]) {
            return Err(mismatch());
        }
        return Ok(ReducedAxes::Known(reduced));
    }
    let removed = rank.checked_sub(y_shape.len()).ok_or_else(mismatch)?;
    // Every way of removing `removed` axes from the input shape that leaves the result shape.
    let mut candidates: Vec<Vec<usize>> = Vec::new();
    let mut stack: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new())];
    while let Some((next, chosen)) = stack.pop() {
        if chosen.len() == removed {
            let kept: Vec<u64> = (0..rank)
                .filter(|a| !chosen.contains(a))
                .map(|a| x_shape[a])
                .collect();
            if kept == y_shape {
                candidates.push(chosen);
            }
            continue;
        }
        for a in next..rank {
            let mut more = chosen.clone();
            more.push(a);
            stack.push((a + 1, more));
        }
        if candidates.len() > 64 || stack.len() > 4096 {
            return Err(unsupported(
                "reduction axes known only at run time, with too many possibilities",
            ));
        }
    }
    let significant =
        |c: &Vec<usize>| -> Vec<usize> { c.iter().copied().filter(|&a| x_shape[a] != 1).collect() };
    match candidates.first() {
        None => Err(mismatch()),
        Some(first)
            if candidates
                .iter()
                .all(|c| significant(c) == significant(first)) =>
        {
            Ok(ReducedAxes::Known(significant(first)))
        }
        Some(_) => Ok(ReducedAxes::OneOf(candidates)),
    }
}

/// How a reduction reads its input inside a `Reduce` stage: the element at the current loop
/// point, and whether it belongs to the current row (`None`: always).
type ElementFn<'a> = dyn Fn(&mut Insts) -> (InstId, Option<InstId>) + 'a;
/// The number of elements in a row, as a value of the given type.
type CountFn<'a> = dyn Fn(&mut Insts, Scalar) -> InstId + 'a;

pub(super) fn reduce(ctx: &LowerCtx, op: OpId, kind: Reduction) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let y = ctx.result(op, 0)?;
    if x.elem != y.elem {
        return Err(unsupported(
            "a reduction that changes the element type (a memc bug)",
        ));
    }
    match reduce_axes(ctx, op, &x.shape, &y.shape)? {
        ReducedAxes::Known(axes) => {
            let rows = Rows::new(&x.shape, &axes)?;
            if rows.outer.iter().product::<u64>() != y.numel() {
                return Err(unsupported(
                    "the result shape does not match the reduced axes (a memc bug)",
                ));
            }
            let views = vec![rows.row_view(&y), rows.view(&x, &x.shape)];
            let n = rows.row_len() as f64;
            let element = |b: &mut Insts| (b.load(&views, 1), None);
            let count = |b: &mut Insts, t: Scalar| b.constant(t, n);
            let stages = reduce_stages(kind, x.elem, &element, &count);
            Ok(vec![rows.kernel(ctx.kernel_name(op, 0), views, stages)])
        }
        ReducedAxes::OneOf(candidates) => {
            lower_reduce_runtime_axes(ctx, op, kind, &x, &y, &candidates)
        }
    }
}

/// A reduction whose axes are one of `candidates`, chosen at run time by the `axes` operand:
/// each output point (outer) scans the whole input (inner) and keeps the elements of its row
/// under the chosen candidate. O(input x output) work: only small tensors come here.
fn lower_reduce_runtime_axes(
    ctx: &LowerCtx,
    op: OpId,
    kind: Reduction,
    x: &TensorRef,
    y: &TensorRef,
    candidates: &[Vec<usize>],
) -> LowerResult {
    let axes = ctx.input(op, 1)?;
    let rank = x.rank();
    if y.rank() + rank > MAX_AXES {
        return Err(unsupported(
            "reduction axes known only at run time, on too many dims",
        ));
    }
    let outer_n = y.rank();
    let mut y_strides = y.strides();
    y_strides.resize(outer_n + rank, 0);
    let mut x_strides = vec![0i64; outer_n];
    x_strides.extend(x.strides());
    let mut views = vec![y.view_with(y_strides), x.view_with(x_strides)];
    let n_axes = axes.numel() as usize;
    for i in 0..n_axes {
        let mut v = axes.view_with(vec![0; outer_n + rank]);
        v.byte_offset += (i as u64 * axes.elem.size()) as i64;
        views.push(v);
    }
    // Whether candidate `c` holds every value of the axes operand.
    let chosen = |b: &mut Insts, c: &[usize]| -> InstId {
        let mut all = b.constant_int(Scalar::Bool, 1);
        for i in 0..n_axes {
            let a = b.load(&views, (2 + i) as u32);
            let a = b.cast(a, Scalar::I64);
            let zero = b.constant_int(Scalar::I64, 0);
            let r = b.constant_int(Scalar::I64, rank as i64);
            let negative = b.binary(BinaryOp::Lt, a, zero);
            let wrapped = b.binary(BinaryOp::Add, a, r);
            let a = b.select(negative, wrapped, a);
            let mut any = b.constant_int(Scalar::Bool, 0);
            for &axis in c {
                let k = b.constant_int(Scalar::I64, axis as i64);
                let eq = b.binary(BinaryOp::Eq, a, k);
                any = b.binary(BinaryOp::Or, any, eq);
            }
            all = b.binary(BinaryOp::And, all, any);
        }
        all
    };
    let element = |b: &mut Insts| {
        let v = b.load(&views, 1);
        let mut mask = b.constant_int(Scalar::Bool, 0);
        for c in candidates {
            let mut belongs = chosen(b, c);
            let kept = (0..rank).filter(|a| !c.contains(a));
            for (p, a) in kept.enumerate() {
                let out_index = b.index(p);
                let in_index = b.index(outer_n + a);
                let eq = b.binary(BinaryOp::Eq, out_index, in_index);
                belongs = b.binary(BinaryOp::And, belongs, eq);
            }
            mask = b.binary(BinaryOp::Or, mask, belongs);
        }
        (v, Some(mask))
    };
    let count = |b: &mut Insts, t: Scalar| {
        let mut n = b.constant(t, 0.0);
        for c in candidates.iter().rev() {
            let size: u64 = c.iter().map(|&a| x.shape[a]).product();
            let here = b.constant(t, size as f64);
            let is = chosen(b, c);
            n = b.select(is, here, n);
        }
        n
    };
    let stages = reduce_stages(kind, x.elem, &element, &count);
    Ok(vec![Kernel {
        name: ctx.kernel_name(op, 0),
        body: KernelBody::Loop(LoopKernel {
            outer: y.shape.clone(),
            inner: x.shape.clone(),
            views,
            stages,
        }),
    }])
}

/// The stages of reduction `kind` of elements of type `t` (view 0 is the result): `Reduce`
/// stages, then a `Once` stage storing the result.
fn reduce_stages(kind: Reduction, t: Scalar, element: &ElementFn, count: &CountFn) -> Vec<Stage> {
    // A storage type (f16, ...) reduces in its compute type.
    let t = t.compute();
    // The element, or `identity` outside the row.
    let masked = |b: &mut Insts, value: InstId, mask: Option<InstId>, identity: u64| match mask {
        Some(mask) => {
            let id = b.push(
                b.ty(value),
                crate::kernel::InstKind::Const { bits: identity },
            );
            b.select(mask, value, id)
        }
        None => value,
    };
    let mut stages = Vec::new();
    if kind == Reduction::LogSumExp {
        // The reference: m = max of the non-infinite elements (-inf if none); then
        // log(sum(e^(x - m))) + m.
        let f = float_type(t);
        let minus_inf = f64::NEG_INFINITY.to_bits();
        let mut b = Insts::new();
        let (v, mask) = element(&mut b);
        let v = b.cast(v, f);
        let pos = b.unary(UnaryOp::IsPosInf, v);
        let neg = b.unary(UnaryOp::IsNegInf, v);
        let inf = b.binary(BinaryOp::Or, pos, neg);
        let minus_inf_value = b.constant(f, f64::NEG_INFINITY);
        let finite = b.select(inf, minus_inf_value, v);
        let finite = masked(&mut b, finite, mask, minus_inf);
        stages.push(reduce_stage(b, finite, ReduceOp::Max, f64::NEG_INFINITY));
        let mut b = Insts::new();
        let (v, mask) = element(&mut b);
        let v = b.cast(v, f);
        let m = b.acc(0, f);
        let d = b.binary(BinaryOp::Sub, v, m);
        let e = b.unary(UnaryOp::Exp, d);
        let e = masked(&mut b, e, mask, 0f64.to_bits());
        stages.push(reduce_stage(b, e, ReduceOp::Sum, 0.0));
        let mut b = Insts::new();
        let m = b.acc(0, f);
        let s = b.acc(1, f);
        let l = b.unary(UnaryOp::Log, s);
        let r = b.binary(BinaryOp::Add, l, m);
        let r = b.cast(r, t);
        stages.push(Stage::Once {
            insts: b.finish(),
            stores: store(0, r),
        });
        return stages;
    }
    let (reduce_op, init_bits) = match kind {
        Reduction::Max => (ReduceOp::Max, extreme_bits(t, true)),
        Reduction::Min => (ReduceOp::Min, extreme_bits(t, false)),
        Reduction::Prod => (ReduceOp::Prod, const_bits(t, 1.0)),
        _ => (ReduceOp::Sum, const_bits(t, 0.0)),
    };
    let mut b = Insts::new();
    let (v, mask) = element(&mut b);
    let value = match kind {
        Reduction::L1 if !t.is_unsigned_int() => b.unary(UnaryOp::Abs, v),
        Reduction::L2 | Reduction::SumSquare => b.binary(BinaryOp::Mul, v, v),
        _ => v,
    };
    let value = masked(&mut b, value, mask, init_bits);
    stages.push(Stage::Reduce {
        insts: b.finish(),
        value,
        op: reduce_op,
        init: init_bits,
        ty: t,
    });
    let mut b = Insts::new();
    let acc = b.acc(0, t);
    let r = match kind {
        Reduction::Mean => {
            let n = count(&mut b, t);
            b.binary(BinaryOp::Div, acc, n)
        }
        Reduction::L2 => float_fn(&mut b, UnaryOp::Sqrt, acc),
        Reduction::LogSum => float_fn(&mut b, UnaryOp::Log, acc),
        _ => acc,
    };
    stages.push(Stage::Once {
        insts: b.finish(),
        stores: store(0, r),
    });
    stages
}

/// The float type integer inputs compute in.
fn float_type(t: Scalar) -> Scalar {
    if t.is_float() {
        t
    } else {
        Scalar::F64
    }
}

pub(super) fn arg_reduce(ctx: &LowerCtx, op: OpId, max: bool) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let y = ctx.result(op, 0)?;
    let axis = axis_of(ctx.attr_int(op, "axis"), x.rank())?;
    let rows = Rows::new(&x.shape, &[axis])?;
    let views = vec![rows.row_view(&y), rows.view(&x, &x.shape)];
    let last = ctx.attr_int(op, "select_last_index") != 0;
    let reduce_op = if max {
        ReduceOp::ArgMax { last }
    } else {
        ReduceOp::ArgMin { last }
    };
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let reduce = reduce_stage(b, v, reduce_op, 0.0);
    let mut b = Insts::new();
    let acc = b.acc(0, Scalar::I64);
    let r = b.cast(acc, y.elem);
    let once = Stage::Once {
        insts: b.finish(),
        stores: store(0, r),
    };
    Ok(vec![rows.kernel(
        ctx.kernel_name(op, 0),
        views,
        vec![reduce, once],
    )])
}

// ---------------------------------------------------------------------------------------------
// Softmax and Hardmax.

pub(super) fn softmax(ctx: &LowerCtx, op: OpId, log: bool) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let y = ctx.result(op, 0)?;
    let t = compute_float(&[x.elem, y.elem])?;
    let axis = axis_of(ctx.attr_int(op, "axis"), x.rank())?;
    let rows = Rows::new(&x.shape, &[axis])?;
    let views = vec![rows.view(&y, &x.shape), rows.view(&x, &x.shape)];
    // Stage 0: the row's max.
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let v = b.cast(v, t);
    let max = reduce_stage(b, v, ReduceOp::Max, f64::NEG_INFINITY);
    if !log && y.elem == t && same_or_disjoint(&x, &y) {
        // The exponentials go into the result once and are summed and scaled there, so each
        // element's exp is computed once, not twice. Rows are independent, and the result
        // either is the input (each row reads its own elements before overwriting them) or
        // does not touch it.
        let mut b = Insts::new();
        let v = b.load(&views, 1);
        let m = b.acc(0, t);
        let d = b.binary(BinaryOp::Sub, v, m);
        let e = b.unary(UnaryOp::Exp, d);
        let exps = Stage::Map {
            insts: b.finish(),
            stores: store(0, e),
        };
        let mut b = Insts::new();
        let e = b.load(&views, 0);
        let sum = reduce_stage(b, e, ReduceOp::Sum, 0.0);
        let mut b = Insts::new();
        let e = b.load(&views, 0);
        let s = b.acc(2, t);
        let one = b.constant(t, 1.0);
        let inv = b.binary(BinaryOp::Div, one, s);
        let r = b.binary(BinaryOp::Mul, e, inv);
        let scale = Stage::Map {
            insts: b.finish(),
            stores: store(0, r),
        };
        return Ok(vec![rows.kernel(
            ctx.kernel_name(op, 0),
            views,
            vec![max, exps, sum, scale],
        )]);
    }
    // Stage 1: sum of e^(x - max).
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let v = b.cast(v, t);
    let m = b.acc(0, t);
    let d = b.binary(BinaryOp::Sub, v, m);
    let e = b.unary(UnaryOp::Exp, d);
    let sum = reduce_stage(b, e, ReduceOp::Sum, 0.0);
    // Stage 2: e^(x - max) / sum, or (x - max) - ln(sum).
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let v = b.cast(v, t);
    let m = b.acc(0, t);
    let s = b.acc(1, t);
    let d = b.binary(BinaryOp::Sub, v, m);
    let r = if log {
        let l = b.unary(UnaryOp::Log, s);
        b.binary(BinaryOp::Sub, d, l)
    } else {
        let e = b.unary(UnaryOp::Exp, d);
        b.binary(BinaryOp::Div, e, s)
    };
    let r = b.cast(r, y.elem);
    let map = Stage::Map {
        insts: b.finish(),
        stores: store(0, r),
    };
    Ok(vec![rows.kernel(
        ctx.kernel_name(op, 0),
        views,
        vec![max, sum, map],
    )])
}

/// The gradients of Softmax and LogSoftmax, given dY (operand 0) and the forward output Y
/// (operand 1), over rows along `axis` (opset 13 semantics) or, with `coerced_2d`, along
/// every dim from `axis` on (opset 1-12's coercion to 2-d): a `Reduce` stage summing
/// `dY * Y` (softmax) or `dY` (log-softmax) over the row, then a `Map` stage writing
/// `Y * (dY - sum)` or `dY - e ^ Y * sum`.
pub(super) fn softmax_grad(ctx: &LowerCtx, op: OpId, log: bool, coerced_2d: bool) -> LowerResult {
    let dy = ctx.input(op, 0)?;
    let y = ctx.input(op, 1)?;
    let dx = ctx.result(op, 0)?;
    let t = compute_float(&[dy.elem, y.elem, dx.elem])?;
    if dy.shape != y.shape || dy.shape != dx.shape {
        return Err(unsupported(format!(
            "dY {:?}, Y {:?} and dX {:?} must have the same shape",
            dy.shape, y.shape, dx.shape
        )));
    }
    let axis = axis_of(ctx.attr_int(op, "axis"), dy.rank())?;
    let reduced: Vec<usize> = if coerced_2d {
        (axis..dy.rank()).collect()
    } else {
        vec![axis]
    };
    let rows = Rows::new(&dy.shape, &reduced)?;
    let views = vec![
        rows.view(&dx, &dy.shape),
        rows.view(&dy, &dy.shape),
        rows.view(&y, &dy.shape),
    ];
    let mut b = Insts::new();
    let g = b.load(&views, 1);
    let g = b.cast(g, t);
    let summed = if log {
        g
    } else {
        let v = b.load(&views, 2);
        let v = b.cast(v, t);
        b.binary(BinaryOp::Mul, g, v)
    };
    let sum = reduce_stage(b, summed, ReduceOp::Sum, 0.0);
    let mut b = Insts::new();
    let g = b.load(&views, 1);
    let g = b.cast(g, t);
    let v = b.load(&views, 2);
    let v = b.cast(v, t);
    let s = b.acc(0, t);
    let r = if log {
        let e = b.unary(UnaryOp::Exp, v);
        let es = b.binary(BinaryOp::Mul, e, s);
        b.binary(BinaryOp::Sub, g, es)
    } else {
        let d = b.binary(BinaryOp::Sub, g, s);
        b.binary(BinaryOp::Mul, v, d)
    };
    let r = b.cast(r, dx.elem);
    let map = Stage::Map {
        insts: b.finish(),
        stores: store(0, r),
    };
    Ok(vec![rows.kernel(
        ctx.kernel_name(op, 0),
        views,
        vec![sum, map],
    )])
}

/// Whether `a` and `b` are the same elements or share no byte.
fn same_or_disjoint(a: &TensorRef, b: &TensorRef) -> bool {
    if a.region != b.region {
        return true;
    }
    let range = |t: &TensorRef| {
        let lo = t.byte_offset as i128;
        (lo, lo + t.numel() as i128 * t.elem.size() as i128)
    };
    let ((a_lo, a_hi), (b_lo, b_hi)) = (range(a), range(b));
    let disjoint = a_hi <= b_lo || b_hi <= a_lo;
    let same = a.byte_offset == b.byte_offset && a.shape == b.shape && a.elem == b.elem;
    disjoint || same
}

/// 1 at the first maximum of each row along `axis`, 0 elsewhere.
pub(super) fn hardmax(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let y = ctx.result(op, 0)?;
    compute_float(&[x.elem, y.elem])?;
    let axis = axis_of(ctx.attr_int(op, "axis"), x.rank())?;
    let rows = Rows::new(&x.shape, &[axis])?;
    let views = vec![rows.view(&y, &x.shape), rows.view(&x, &x.shape)];
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let argmax = reduce_stage(b, v, ReduceOp::ArgMax { last: false }, 0.0);
    let mut b = Insts::new();
    let at = b.acc(0, Scalar::I64);
    let index = b.index(rows.outer.len());
    let hit = b.binary(BinaryOp::Eq, index, at);
    let one = b.constant(y.elem, 1.0);
    let zero = b.constant(y.elem, 0.0);
    let r = b.select(hit, one, zero);
    let map = Stage::Map {
        insts: b.finish(),
        stores: store(0, r),
    };
    Ok(vec![rows.kernel(
        ctx.kernel_name(op, 0),
        views,
        vec![argmax, map],
    )])
}

// ---------------------------------------------------------------------------------------------
// Normalizations.

/// Stages 0 and 1 of a mean-and-variance normalization over the rows of view 1 (the input):
/// the sum of `x`, then the sum of `(x - mean)^2`, both in `t`.
fn mean_and_variance_stages(views: &[View], t: Scalar, n: f64) -> [Stage; 2] {
    let mut b = Insts::new();
    let v = b.load(views, 1);
    let v = b.cast(v, t);
    let sum = reduce_stage(b, v, ReduceOp::Sum, 0.0);
    let mut b = Insts::new();
    let v = b.load(views, 1);
    let v = b.cast(v, t);
    let mean = row_mean(&mut b, 0, t, n);
    let d = b.binary(BinaryOp::Sub, v, mean);
    let d2 = b.binary(BinaryOp::Mul, d, d);
    let squares = reduce_stage(b, d2, ReduceOp::Sum, 0.0);
    [sum, squares]
}

/// `Acc(stage) / n`.
fn row_mean(b: &mut Insts, stage: usize, t: Scalar, n: f64) -> InstId {
    let acc = b.acc(stage, t);
    let count = b.constant(t, n);
    b.binary(BinaryOp::Div, acc, count)
}

/// LayerNormalization over the axes from `axis` on:
/// `(x - mean) * (1 / sqrt(var + epsilon)) * scale + B`, computed in the input's float type as
/// the reference does; the optional Mean and InvStdDev results are stored once per row.
pub(super) fn layer_norm(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let scale = ctx.input(op, 1)?;
    let bias = ctx.operand(op, 2)?;
    let y = ctx.result(op, 0)?;
    let mut elems = vec![x.elem, scale.elem, y.elem];
    elems.extend(bias.as_ref().map(|b| b.elem));
    compute_float(&elems)?;
    let t = x.elem;
    let axis = axis_of(ctx.attr_int(op, "axis"), x.rank())?;
    let epsilon = ctx.attr_float(op, "epsilon");
    let reduced: Vec<usize> = (axis..x.rank()).collect();
    let rows = Rows::new(&x.shape, &reduced)?;
    let n = rows.row_len() as f64;
    let mut views = vec![
        rows.view(&y, &x.shape),
        rows.view(&x, &x.shape),
        rows.view(&scale, &x.shape),
    ];
    if let Some(bias) = &bias {
        views.push(rows.view(bias, &x.shape));
    }
    let [sum, squares] = mean_and_variance_stages(&views, t, n);
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let mean = row_mean(&mut b, 0, t, n);
    let inv_std = inv_std_dev(&mut b, 1, t, n, epsilon);
    let d = b.binary(BinaryOp::Sub, v, mean);
    let normed = b.binary(BinaryOp::Mul, d, inv_std);
    let s = b.load(&views, 2);
    let s = b.cast(s, t);
    let mut r = b.binary(BinaryOp::Mul, normed, s);
    if bias.is_some() {
        let bv = b.load(&views, 3);
        let bv = b.cast(bv, t);
        r = b.binary(BinaryOp::Add, r, bv);
    }
    let r = b.cast(r, y.elem);
    let mut stages = vec![
        sum,
        squares,
        Stage::Map {
            insts: b.finish(),
            stores: store(0, r),
        },
    ];
    // The optional statistics, once per row.
    let mut b = Insts::new();
    let mut stores = Vec::new();
    let stats = RowStats {
        rows: &rows,
        t,
        n,
        epsilon,
    };
    stats.store(ctx, op, [1, 2], &mut b, &mut views, &mut stores)?;
    if !stores.is_empty() {
        stages.push(Stage::Once {
            insts: b.finish(),
            stores,
        });
    }
    Ok(vec![rows.kernel(ctx.kernel_name(op, 0), views, stages)])
}

/// The per-row statistics a normalization may output (LayerNormalization's Mean and
/// InvStdDev, BatchNormInternal's saved mean and inverse std), from the kernel's first two
/// `Reduce` stages (the sum and the sum of squared deviations).
struct RowStats<'r> {
    rows: &'r Rows,
    t: Scalar,
    n: f64,
    epsilon: f64,
}

impl RowStats<'_> {
    /// Stores the mean into result `results[0]` and the inverse std into `results[1]`, each
    /// only when it is used.
    fn store(
        &self,
        ctx: &LowerCtx,
        op: OpId,
        results: [usize; 2],
        b: &mut Insts,
        views: &mut Vec<View>,
        stores: &mut Vec<Store>,
    ) -> Result<(), LowerError> {
        for (k, index) in results.into_iter().enumerate() {
            if !ctx.result_used(op, index) {
                continue;
            }
            let out = ctx.result(op, index)?;
            let value = if k == 0 {
                row_mean(b, 0, self.t, self.n)
            } else {
                inv_std_dev(b, 1, self.t, self.n, self.epsilon)
            };
            let value = b.cast(value, out.elem);
            views.push(self.rows.row_view(&out));
            stores.push(Store::new((views.len() - 1) as u32, value));
        }
        Ok(())
    }
}

/// `1 / sqrt(Acc(stage) / n + epsilon)`.
fn inv_std_dev(b: &mut Insts, stage: usize, t: Scalar, n: f64, epsilon: f64) -> InstId {
    let var = row_mean(b, stage, t, n);
    let eps = b.constant(t, epsilon);
    let ve = b.binary(BinaryOp::Add, var, eps);
    let std = b.unary(UnaryOp::Sqrt, ve);
    b.unary(UnaryOp::Reciprocal, std)
}

/// `ms.LayerNormalizationGrad` over the axes from `axis` on, from the forward pass's saved
/// statistics (`xhat = (x - mean) * inv_std`, `g = dy * scale`):
/// `dx = inv_std * (g - mean(g) - xhat * mean(g * xhat))` per row (one kernel: two sums, then
/// the row), and `scale_grad = sum(dy * xhat)`, `bias_grad = sum(dy)` over the leading axes
/// (a second kernel whose rows are the normalized positions), each only where it is used.
/// Computed in f32, or f64 when any operand is f64.
pub(super) fn layer_norm_grad(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let dy = ctx.input(op, 0)?;
    let x = ctx.input(op, 1)?;
    let scale = ctx.input(op, 2)?;
    let mean = ctx.input(op, 3)?;
    let inv_std = ctx.input(op, 4)?;
    let dx = ctx.result(op, 0)?;
    let t = compute_float(&[
        dy.elem,
        x.elem,
        scale.elem,
        mean.elem,
        inv_std.elem,
        dx.elem,
    ])?;
    if x.numel() == 0 {
        return Ok(Vec::new());
    }
    if dy.shape != x.shape || dx.shape != x.shape {
        return Err(unsupported(
            "LayerNormalizationGrad with Y_grad or X_grad not of X's shape",
        ));
    }
    let axis = axis_of(ctx.attr_int(op, "axis"), x.rank())?;
    let n_rows: u64 = x.shape[..axis].iter().product();
    if mean.numel() != n_rows || inv_std.numel() != n_rows {
        return Err(unsupported(
            "LayerNormalizationGrad statistics without one element per normalized row",
        ));
    }
    let reduced: Vec<usize> = (axis..x.rank()).collect();
    let rows = Rows::new(&x.shape, &reduced)?;
    let n = rows.row_len() as f64;
    let views = vec![
        rows.view(&dx, &x.shape),
        rows.view(&dy, &x.shape),
        rows.view(&x, &x.shape),
        rows.view(&scale, &x.shape),
        rows.row_view(&mean),
        rows.row_view(&inv_std),
    ];
    // `xhat` (with the row's `inv_std`) and `g` at the current point, in `t`.
    let xhat_at = |b: &mut Insts| {
        let v = b.load(&views, 2);
        let v = b.cast(v, t);
        let m = b.load(&views, 4);
        let m = b.cast(m, t);
        let inv = b.load(&views, 5);
        let inv = b.cast(inv, t);
        let d = b.binary(BinaryOp::Sub, v, m);
        (b.binary(BinaryOp::Mul, d, inv), inv)
    };
    let g_at = |b: &mut Insts| {
        let g = b.load(&views, 1);
        let g = b.cast(g, t);
        let s = b.load(&views, 3);
        let s = b.cast(s, t);
        b.binary(BinaryOp::Mul, g, s)
    };
    let mut b = Insts::new();
    let g = g_at(&mut b);
    let sum_g = reduce_stage(b, g, ReduceOp::Sum, 0.0);
    let mut b = Insts::new();
    let (xhat, _) = xhat_at(&mut b);
    let g = g_at(&mut b);
    let gx = b.binary(BinaryOp::Mul, g, xhat);
    let sum_gx = reduce_stage(b, gx, ReduceOp::Sum, 0.0);
    let mut b = Insts::new();
    let (xhat, inv) = xhat_at(&mut b);
    let g = g_at(&mut b);
    let mean_g = row_mean(&mut b, 0, t, n);
    let mean_gx = row_mean(&mut b, 1, t, n);
    let centered = b.binary(BinaryOp::Sub, g, mean_g);
    let projected = b.binary(BinaryOp::Mul, xhat, mean_gx);
    let r = b.binary(BinaryOp::Sub, centered, projected);
    let r = b.binary(BinaryOp::Mul, r, inv);
    let r = b.cast(r, dx.elem);
    let map = Stage::Map {
        insts: b.finish(),
        stores: store(0, r),
    };
    let mut kernels = vec![rows.kernel(ctx.kernel_name(op, 0), views, vec![sum_g, sum_gx, map])];
    if let Some(kernel) = layer_norm_param_grads(ctx, op, &x, &dy, &mean, &inv_std, axis, t)? {
        kernels.push(kernel);
    }
    Ok(kernels)
}

/// The kernel of LayerNormalizationGrad's `scale_grad` (`sum(dy * xhat)`) and `bias_grad`
/// (`sum(dy)`): one row per normalized position, summed over the leading axes. `None` when
/// neither result is used.
#[allow(clippy::too_many_arguments)]
fn layer_norm_param_grads(
    ctx: &LowerCtx,
    op: OpId,
    x: &TensorRef,
    dy: &TensorRef,
    mean: &TensorRef,
    inv_std: &TensorRef,
    axis: usize,
    t: Scalar,
) -> Result<Option<Kernel>, LowerError> {
    let used: Vec<usize> = [1, 2]
        .into_iter()
        .filter(|&index| ctx.result_used(op, index))
        .collect();
    if used.is_empty() {
        return Ok(None);
    }
    let leading: Vec<usize> = (0..axis).collect();
    let rows = Rows::new(&x.shape, &leading)?;
    let row_positions: u64 = x.shape[axis..].iter().product();
    // The statistics vary along the leading axes only.
    let mut stat_strides = contiguous_strides(&x.shape[..axis]);
    stat_strides.resize(x.rank(), 0);
    let mut views = vec![
        rows.view(dy, &x.shape),
        rows.view(x, &x.shape),
        mean.view_with(rows.permute(&stat_strides)),
        inv_std.view_with(rows.permute(&stat_strides)),
    ];
    let mut stages = Vec::new();
    let mut once = Insts::new();
    let mut stores = Vec::new();
    for index in used {
        let grad = ctx.result(op, index)?;
        if grad.numel() != row_positions {
            return Err(unsupported(
                "LayerNormalizationGrad parameter gradients not of the normalized shape",
            ));
        }
        let mut b = Insts::new();
        let g = b.load(&views, 0);
        let g = b.cast(g, t);
        let value = if index == 1 {
            let v = b.load(&views, 1);
            let v = b.cast(v, t);
            let m = b.load(&views, 2);
            let m = b.cast(m, t);
            let inv = b.load(&views, 3);
            let inv = b.cast(inv, t);
            let d = b.binary(BinaryOp::Sub, v, m);
            let xhat = b.binary(BinaryOp::Mul, d, inv);
            b.binary(BinaryOp::Mul, g, xhat)
        } else {
            g
        };
        stages.push(reduce_stage(b, value, ReduceOp::Sum, 0.0));
        let acc = once.acc(stages.len() - 1, t);
        let acc = once.cast(acc, grad.elem);
        views.push(rows.row_view(&grad));
        stores.push(Store::new((views.len() - 1) as u32, acc));
    }
    stages.push(Stage::Once {
        insts: once.finish(),
        stores,
    });
    Ok(Some(rows.kernel(ctx.kernel_name(op, 1), views, stages)))
}

/// RMSNormalization: `x * (1 / sqrt(mean(x^2) + epsilon)) * scale` over the axes from `axis` on.
pub(super) fn rms_norm(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let scale = ctx.input(op, 1)?;
    let y = ctx.result(op, 0)?;
    compute_float(&[x.elem, scale.elem, y.elem])?;
    let t = x.elem;
    let axis = axis_of(ctx.attr_int(op, "axis"), x.rank())?;
    let epsilon = ctx.attr_float(op, "epsilon");
    let reduced: Vec<usize> = (axis..x.rank()).collect();
    let rows = Rows::new(&x.shape, &reduced)?;
    let n = rows.row_len() as f64;
    let views = vec![
        rows.view(&y, &x.shape),
        rows.view(&x, &x.shape),
        rows.view(&scale, &x.shape),
    ];
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let v2 = b.binary(BinaryOp::Mul, v, v);
    let squares = reduce_stage(b, v2, ReduceOp::Sum, 0.0);
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let inv = inv_std_dev(&mut b, 0, t, n, epsilon);
    let normed = b.binary(BinaryOp::Mul, v, inv);
    let s = b.load(&views, 2);
    let s = b.cast(s, t);
    let r = b.binary(BinaryOp::Mul, normed, s);
    let r = b.cast(r, y.elem);
    let map = Stage::Map {
        insts: b.finish(),
        stores: store(0, r),
    };
    Ok(vec![rows.kernel(
        ctx.kernel_name(op, 0),
        views,
        vec![squares, map],
    )])
}

/// `scale * (x - mean) / sqrt(var + epsilon) + bias` in `t`, with the per-channel operands at
/// views `scale_view` and `bias_view`, and `mean`, `var` already computed.
#[allow(clippy::too_many_arguments)]
fn normalize_channel(
    b: &mut Insts,
    views: &[View],
    t: Scalar,
    x: InstId,
    mean: InstId,
    var: InstId,
    epsilon: f64,
    scale_view: u32,
    bias_view: u32,
) -> InstId {
    let s = b.load(views, scale_view);
    let s = b.cast(s, t);
    let bias = b.load(views, bias_view);
    let bias = b.cast(bias, t);
    let d = b.binary(BinaryOp::Sub, x, mean);
    let sd = b.binary(BinaryOp::Mul, s, d);
    let eps = b.constant(t, epsilon);
    let ve = b.binary(BinaryOp::Add, var, eps);
    let std = b.unary(UnaryOp::Sqrt, ve);
    let q = b.binary(BinaryOp::Div, sd, std);
    b.binary(BinaryOp::Add, q, bias)
}

/// BatchNormalization and onnxruntime's `ms.BatchNormInternal`. Inference: one elementwise
/// kernel with the running statistics. Training: per channel (outer), the batch mean and
/// (biased) variance over every other axis (inner), the normalized rows, and the updated
/// running statistics (from the biased variance, as onnxruntime's CPU kernel computes them);
/// BatchNormInternal also stores the batch mean and `1 / sqrt(var + epsilon)` (`saved_mean`,
/// `saved_inv_std`). Statistics no op reads are not stored.
pub(super) fn batch_norm(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let y = ctx.result(op, 0)?;
    let params: Vec<TensorRef> = (1..5).map(|i| ctx.input(op, i)).collect::<Result<_, _>>()?;
    let mut elems = vec![x.elem, y.elem];
    elems.extend(params.iter().map(|p| p.elem));
    let t = compute_float(&elems)?;
    if x.rank() < 2 {
        return Err(unsupported(
            "BatchNormalization of an input of rank below 2",
        ));
    }
    let epsilon = ctx.attr_float(op, "epsilon");
    let training = ctx.attr_int(op, "training_mode") != 0;
    let rank = x.rank();
    if !training {
        if (1..5).any(|index| ctx.result_used(op, index)) {
            return Err(unsupported(
                "BatchNormalization running or saved statistics outside training mode",
            ));
        }
        // Every element its own row.
        let rows = Rows::new(&x.shape, &[])?;
        let mut views = vec![rows.view(&y, &x.shape), rows.view(&x, &x.shape)];
        views.extend(params.iter().map(|p| rows.axis_view(p, rank, 1)));
        let mut b = Insts::new();
        let v = b.load(&views, 1);
        let v = b.cast(v, t);
        let mean = b.load(&views, 4);
        let mean = b.cast(mean, t);
        let var = b.load(&views, 5);
        let var = b.cast(var, t);
        let r = normalize_channel(&mut b, &views, t, v, mean, var, epsilon, 2, 3);
        let r = b.cast(r, y.elem);
        let map = Stage::Map {
            insts: b.finish(),
            stores: store(0, r),
        };
        return Ok(vec![rows.kernel(ctx.kernel_name(op, 0), views, vec![map])]);
    }
    let momentum = ctx.attr_float(op, "momentum");
    let reduced: Vec<usize> = (0..rank).filter(|&a| a != 1).collect();
    let rows = Rows::new(&x.shape, &reduced)?;
    let n = rows.row_len() as f64;
    let mut views = vec![rows.view(&y, &x.shape), rows.view(&x, &x.shape)];
    views.extend(params.iter().map(|p| rows.axis_view(p, rank, 1)));
    let [sum, squares] = mean_and_variance_stages(&views, t, n);
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let v = b.cast(v, t);
    let mean = row_mean(&mut b, 0, t, n);
    let var = row_mean(&mut b, 1, t, n);
    let r = normalize_channel(&mut b, &views, t, v, mean, var, epsilon, 2, 3);
    let r = b.cast(r, y.elem);
    let mut stages = vec![
        sum,
        squares,
        Stage::Map {
            insts: b.finish(),
            stores: store(0, r),
        },
    ];
    // running = input * momentum + batch * (1 - momentum), once per channel.
    let mut b = Insts::new();
    let mut stores = Vec::new();
    for (index, input_view, stage) in [(1, 4u32, 0usize), (2, 5, 1)] {
        if !ctx.result_used(op, index) {
            continue;
        }
        let out = ctx.result(op, index)?;
        let batch = row_mean(&mut b, stage, t, n);
        let running = b.load(&views, input_view);
        let running = b.cast(running, t);
        let m = b.constant(t, momentum);
        let one_minus = b.constant(t, 1.0 - momentum);
        let kept = b.binary(BinaryOp::Mul, running, m);
        let fresh = b.binary(BinaryOp::Mul, batch, one_minus);
        let value = b.binary(BinaryOp::Add, kept, fresh);
        let value = b.cast(value, out.elem);
        views.push(rows.row_view(&out));
        stores.push(Store::new((views.len() - 1) as u32, value));
    }
    // BatchNormInternal's saved batch statistics.
    let stats = RowStats {
        rows: &rows,
        t,
        n,
        epsilon,
    };
    stats.store(ctx, op, [3, 4], &mut b, &mut views, &mut stores)?;
    if !stores.is_empty() {
        stages.push(Stage::Once {
            insts: b.finish(),
            stores,
        });
    }
    Ok(vec![rows.kernel(ctx.kernel_name(op, 0), views, stages)])
}

/// onnxruntime's `ms.BatchNormalizationGrad`, from the statistics the forward saved: per
/// channel `c` (outer), over every other axis (inner, `m` elements),
/// `dbias = sum(dY)`, `dscale = sum((X - mean) * inv_std * dY)` and
/// `dX = scale * inv_std / m * (dY * m - dbias - (X - mean) * inv_std * dscale)`.
pub(super) fn batch_norm_grad(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let dy = ctx.input(op, 0)?;
    let x = ctx.input(op, 1)?;
    let params: Vec<TensorRef> = (2..5).map(|i| ctx.input(op, i)).collect::<Result<_, _>>()?;
    let mut elems = vec![dy.elem, x.elem];
    elems.extend(params.iter().map(|p| p.elem));
    let t = compute_float(&elems)?;
    if x.rank() < 2 || dy.shape != x.shape {
        return Err(unsupported(
            "BatchNormalizationGrad needs dY and X of one shape, of rank 2 or more",
        ));
    }
    let rank = x.rank();
    let reduced: Vec<usize> = (0..rank).filter(|&a| a != 1).collect();
    let rows = Rows::new(&x.shape, &reduced)?;
    let n = rows.row_len() as f64;
    // Views: 0 dY, 1 X, 2 scale, 3 saved_mean, 4 saved_inv_std, then the results stored.
    let mut views = vec![rows.view(&dy, &x.shape), rows.view(&x, &x.shape)];
    views.extend(params.iter().map(|p| rows.axis_view(p, rank, 1)));
    let load = |b: &mut Insts, view: u32| {
        let v = b.load(&views, view);
        b.cast(v, t)
    };
    // `(X - mean) * inv_std`, the normalized input.
    let normalized = |b: &mut Insts| {
        let xv = load(b, 1);
        let mean = load(b, 3);
        let inv_std = load(b, 4);
        let d = b.binary(BinaryOp::Sub, xv, mean);
        b.binary(BinaryOp::Mul, d, inv_std)
    };
    let mut b = Insts::new();
    let dyv = load(&mut b, 0);
    let dbias = reduce_stage(b, dyv, ReduceOp::Sum, 0.0);
    let mut b = Insts::new();
    let xhat = normalized(&mut b);
    let dyv = load(&mut b, 0);
    let term = b.binary(BinaryOp::Mul, xhat, dyv);
    let dscale = reduce_stage(b, term, ReduceOp::Sum, 0.0);
    let mut stages = vec![dbias, dscale];
    if ctx.result_used(op, 0) {
        let dx = ctx.result(op, 0)?;
        let mut b = Insts::new();
        let xhat = normalized(&mut b);
        let dyv = load(&mut b, 0);
        let scale = load(&mut b, 2);
        let inv_std = load(&mut b, 4);
        let count = b.constant(t, n);
        let sum_dy = b.acc(0, t);
        let sum_dscale = b.acc(1, t);
        let scaled = b.binary(BinaryOp::Mul, dyv, count);
        let r = b.binary(BinaryOp::Sub, scaled, sum_dy);
        let along = b.binary(BinaryOp::Mul, xhat, sum_dscale);
        let r = b.binary(BinaryOp::Sub, r, along);
        let factor = b.binary(BinaryOp::Mul, scale, inv_std);
        let factor = b.binary(BinaryOp::Div, factor, count);
        let r = b.binary(BinaryOp::Mul, factor, r);
        let r = b.cast(r, dx.elem);
        views.push(rows.view(&dx, &x.shape));
        stages.push(Stage::Map {
            insts: b.finish(),
            stores: store((views.len() - 1) as u32, r),
        });
    }
    let mut b = Insts::new();
    let mut stores = Vec::new();
    for (index, stage) in [(1, 1usize), (2, 0)] {
        if !ctx.result_used(op, index) {
            continue;
        }
        let out = ctx.result(op, index)?;
        let acc = b.acc(stage, t);
        let value = b.cast(acc, out.elem);
        views.push(rows.row_view(&out));
        stores.push(Store::new((views.len() - 1) as u32, value));
    }
    if !stores.is_empty() {
        stages.push(Stage::Once {
            insts: b.finish(),
            stores,
        });
    }
    Ok(vec![rows.kernel(ctx.kernel_name(op, 0), views, stages)])
}

/// InstanceNormalization: per instance and channel (outer), mean and variance over the spatial
/// axes (inner).
pub(super) fn instance_norm(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let scale = ctx.input(op, 1)?;
    let bias = ctx.input(op, 2)?;
    let y = ctx.result(op, 0)?;
    let t = compute_float(&[x.elem, scale.elem, bias.elem, y.elem])?;
    if x.rank() < 2 {
        return Err(unsupported(
            "InstanceNormalization of an input of rank below 2",
        ));
    }
    let epsilon = ctx.attr_float(op, "epsilon");
    let rank = x.rank();
    let reduced: Vec<usize> = (2..rank).collect();
    let rows = Rows::new(&x.shape, &reduced)?;
    let n = rows.row_len() as f64;
    let views = vec![
        rows.view(&y, &x.shape),
        rows.view(&x, &x.shape),
        rows.axis_view(&scale, rank, 1),
        rows.axis_view(&bias, rank, 1),
    ];
    let [sum, squares] = mean_and_variance_stages(&views, t, n);
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let v = b.cast(v, t);
    let mean = row_mean(&mut b, 0, t, n);
    let var = row_mean(&mut b, 1, t, n);
    let r = normalize_channel(&mut b, &views, t, v, mean, var, epsilon, 2, 3);
    let r = b.cast(r, y.elem);
    let map = Stage::Map {
        insts: b.finish(),
        stores: store(0, r),
    };
    Ok(vec![rows.kernel(
        ctx.kernel_name(op, 0),
        views,
        vec![sum, squares, map],
    )])
}

/// LpNormalization: `x / norm` along `axis` (0 where the norm is 0), the L1 or L2 norm.
pub(super) fn lp_norm(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let y = ctx.result(op, 0)?;
    let t = compute_float(&[x.elem, y.elem])?;
    let axis = axis_of(ctx.attr_int(op, "axis"), x.rank())?;
    let p = ctx.attr_int(op, "p");
    if p != 1 && p != 2 {
        return Err(unsupported(format!("LpNormalization with p = {p}")));
    }
    let rows = Rows::new(&x.shape, &[axis])?;
    let views = vec![rows.view(&y, &x.shape), rows.view(&x, &x.shape)];
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let v = b.cast(v, t);
    let term = if p == 1 {
        b.unary(UnaryOp::Abs, v)
    } else {
        b.binary(BinaryOp::Mul, v, v)
    };
    let sum = reduce_stage(b, term, ReduceOp::Sum, 0.0);
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let v = b.cast(v, t);
    let acc = b.acc(0, t);
    let norm = if p == 1 {
        acc
    } else {
        b.unary(UnaryOp::Sqrt, acc)
    };
    let zero = b.constant(t, 0.0);
    let is_zero = b.binary(BinaryOp::Eq, norm, zero);
    let q = b.binary(BinaryOp::Div, v, norm);
    let r = b.select(is_zero, zero, q);
    let r = b.cast(r, y.elem);
    let map = Stage::Map {
        insts: b.finish(),
        stores: store(0, r),
    };
    Ok(vec![rows.kernel(
        ctx.kernel_name(op, 0),
        views,
        vec![sum, map],
    )])
}

/// MeanVarianceNormalization as its ONNX function body: `(x - E[x]) / (sqrt(E[x^2] - E[x]^2) +
/// 1e-9)` over `axes` (default 0, 2, 3).
pub(super) fn mean_variance_norm(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let y = ctx.result(op, 0)?;
    let t = compute_float(&[x.elem, y.elem])?;
    let axes = ctx.attr_ints(op, "axes").unwrap_or_else(|| vec![0, 2, 3]);
    let mut reduced = axes
        .iter()
        .map(|&a| axis_of(a, x.rank()))
        .collect::<Result<Vec<_>, _>>()?;
    reduced.sort_unstable();
    reduced.dedup();
    let rows = Rows::new(&x.shape, &reduced)?;
    let n = rows.row_len() as f64;
    let views = vec![rows.view(&y, &x.shape), rows.view(&x, &x.shape)];
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let v = b.cast(v, t);
    let sum = reduce_stage(b, v, ReduceOp::Sum, 0.0);
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let v = b.cast(v, t);
    let v2 = b.binary(BinaryOp::Mul, v, v);
    let squares = reduce_stage(b, v2, ReduceOp::Sum, 0.0);
    let mut b = Insts::new();
    let v = b.load(&views, 1);
    let v = b.cast(v, t);
    let mean = row_mean(&mut b, 0, t, n);
    let mean_sq = row_mean(&mut b, 1, t, n);
    let m2 = b.binary(BinaryOp::Mul, mean, mean);
    let var = b.binary(BinaryOp::Sub, mean_sq, m2);
    let std = b.unary(UnaryOp::Sqrt, var);
    let eps = b.constant(t, 1e-9);
    let denom = b.binary(BinaryOp::Add, std, eps);
    let d = b.binary(BinaryOp::Sub, v, mean);
    let r = b.binary(BinaryOp::Div, d, denom);
    let r = b.cast(r, y.elem);
    let map = Stage::Map {
        insts: b.finish(),
        stores: store(0, r),
    };
    Ok(vec![rows.kernel(
        ctx.kernel_name(op, 0),
        views,
        vec![sum, squares, map],
    )])
}

// ---------------------------------------------------------------------------------------------
// Cumulative ops.

/// CumSum and CumProd along the constant `axis` operand: at each output point (outer, every
/// axis), fold the input along the scanned axis (inner) with the elements outside the prefix
/// (or suffix, with `reverse`; excluding the current one with `exclusive`) replaced by the
/// identity.
pub(super) fn cumulative(ctx: &LowerCtx, op: OpId, fold: ReduceOp) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let y = ctx.result(op, 0)?;
    let rank = x.rank();
    if rank + 1 > MAX_AXES {
        return Err(unsupported(format!(
            "rank {rank} (kernels loop over at most {MAX_AXES} axes)"
        )));
    }
    let exclusive = ctx.attr_int(op, "exclusive") != 0;
    let reverse = ctx.attr_int(op, "reverse") != 0;
    let cond = match (reverse, exclusive) {
        (false, false) => BinaryOp::Le,
        (false, true) => BinaryOp::Lt,
        (true, false) => BinaryOp::Ge,
        (true, true) => BinaryOp::Gt,
    };
    let identity = if fold == ReduceOp::Prod { 1.0 } else { 0.0 };
    // A rank-1 input has one axis, whatever the operand says.
    let axis = match ctx.const_ints(op, 1).and_then(|a| a.first().copied()) {
        Some(axis) => Some(axis_of(axis, rank)?),
        None if rank == 1 => Some(0),
        None => None,
    };
    let mut y_strides = y.strides();
    y_strides.push(0);
    let mut b = Insts::new();
    let (views, value, n) = match axis {
        Some(axis) => {
            let mut x_strides = x.strides();
            let scan_stride = x_strides[axis];
            x_strides[axis] = 0;
            x_strides.push(scan_stride);
            let views = vec![y.view_with(y_strides), x.view_with(x_strides)];
            let v = b.load(&views, 1);
            let here = b.index(axis);
            let scanned = b.index(rank);
            let inside = b.binary(cond, scanned, here);
            let id = b.constant(x.elem, identity);
            let value = b.select(inside, v, id);
            (views, value, x.shape[axis])
        }
        None => {
            // The axis is known only at run time: scan the longest dim, read the input
            // through indirect indices that put the scanned index on the chosen axis, and
            // drop the points past that axis's size.
            if x.numel() == 0 {
                return Ok(Vec::new());
            }
            let axis_operand = ctx.input(op, 1)?;
            let views = vec![
                y.view_with(y_strides),
                x.view_with(vec![0; rank + 1]),
                axis_operand.view_with(vec![0; rank + 1]),
            ];
            let a = b.load(&views, 2);
            let a = b.cast(a, Scalar::I64);
            let zero = b.constant_int(Scalar::I64, 0);
            let r = b.constant_int(Scalar::I64, rank as i64);
            let negative = b.binary(BinaryOp::Lt, a, zero);
            let wrapped = b.binary(BinaryOp::Add, a, r);
            let a = b.select(negative, wrapped, a);
            let scanned = b.index(rank);
            let mut here = zero;
            let mut size = zero;
            let mut indices = Vec::with_capacity(rank);
            let strides = x.strides();
            for (d, &dim) in x.shape.iter().enumerate() {
                let k = b.constant_int(Scalar::I64, d as i64);
                let is_axis = b.binary(BinaryOp::Eq, a, k);
                let i = b.index(d);
                let index = b.select(is_axis, scanned, i);
                here = b.select(is_axis, i, here);
                let dim_value = b.constant_int(Scalar::I64, dim as i64);
                size = b.select(is_axis, dim_value, size);
                indices.push(IndirectIndex {
                    index,
                    stride: strides[d],
                    limit: dim as i64,
                });
            }
            let v = b.load_indirect(&views, 1, indices);
            let in_range = b.binary(BinaryOp::Lt, scanned, size);
            let inside = b.binary(cond, scanned, here);
            let valid = b.binary(BinaryOp::And, in_range, inside);
            let id = b.constant(x.elem, identity);
            let value = b.select(valid, v, id);
            (views, value, x.shape.iter().copied().max().unwrap_or(0))
        }
    };
    let reduce = reduce_stage(b, value, fold, identity);
    let mut b = Insts::new();
    let acc = b.acc(0, x.elem);
    let once = Stage::Once {
        insts: b.finish(),
        stores: store(0, acc),
    };
    Ok(vec![Kernel {
        name: ctx.kernel_name(op, 0),
        body: KernelBody::Loop(LoopKernel {
            outer: y.shape.clone(),
            inner: vec![n],
            views,
            stages: vec![reduce, once],
        }),
    }])
}

/// `ms.DivGrad`: `dA = dY / B` and `dB = -(dY / B) * (A / B)`, each summed over the axes its
/// operand was broadcast along (a missing leading axis, or a size-1 one where dY's is larger),
/// so that each has its operand's shape. One kernel per present output: its rows are dY's axes
/// the operand keeps, each row's inner loop the axes it was broadcast along (sums in the
/// element type, in order), or a plain map where it was not broadcast.
pub(super) fn div_grad(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let dy = ctx.input(op, 0)?;
    let a = ctx.input(op, 1)?;
    let b = ctx.input(op, 2)?;
    let rank = dy.rank();
    let mut kernels = Vec::new();
    for index in 0..2 {
        if !ctx.result_used(op, index) {
            continue;
        }
        let grad = ctx.result(op, index)?;
        if grad.numel() == 0 {
            continue;
        }
        let operand = if index == 0 { &a } else { &b };
        if operand.rank() > rank || grad.shape != operand.shape || grad.elem != dy.elem {
            return Err(unsupported(
                "DivGrad's operands do not broadcast to dY (a memc bug)",
            ));
        }
        let lead = rank - operand.rank();
        let mut reduced = Vec::new();
        for (d, &extent) in dy.shape.iter().enumerate() {
            let own = if d < lead { 1 } else { operand.shape[d - lead] };
            if own != extent {
                if own != 1 {
                    return Err(unsupported(
                        "DivGrad's operands do not broadcast to dY (a memc bug)",
                    ));
                }
                reduced.push(d);
            }
        }
        let rows = Rows::new(&dy.shape, &reduced)?;
        let views = vec![
            rows.view(&dy, &dy.shape),
            rows.view(&a, &dy.shape),
            rows.view(&b, &dy.shape),
            rows.row_view(&grad),
        ];
        let mut insts = Insts::new();
        let g = insts.load(&views, 0);
        let divisor = insts.load(&views, 2);
        let quotient = insts.binary(BinaryOp::Div, g, divisor);
        let value = if index == 0 {
            quotient
        } else {
            let dividend = insts.load(&views, 1);
            let ratio = insts.binary(BinaryOp::Div, dividend, divisor);
            let product = insts.binary(BinaryOp::Mul, quotient, ratio);
            insts.unary(UnaryOp::Neg, product)
        };
        let stages = if reduced.is_empty() {
            // Not broadcast: each row is one element, stored as it is computed.
            vec![Stage::Map {
                insts: insts.finish(),
                stores: store(3, value),
            }]
        } else {
            let mut once = Insts::new();
            let acc = once.acc(0, grad.elem);
            vec![
                reduce_stage(insts, value, ReduceOp::Sum, 0.0),
                Stage::Once {
                    insts: once.finish(),
                    stores: store(3, acc),
                },
            ]
        };
        kernels.push(rows.kernel(ctx.kernel_name(op, index), views, stages));
    }
    Ok(kernels)
}
