//! MaxPoolGrad and AveragePoolGrad, in the default domain as onnxruntime's training artifacts
//! write them: the gradient of a pool, `dX` shaped like the pool's input (its dims come from
//! the model's declared types).
//!
//! Kernels never scatter (rows of a loop kernel never write the same element), so both gather:
//! one loop kernel with outer axes `dX`'s `(n, c, i...)` and inner axes the kernel window
//! `(k...)`. Along each spatial axis, input position `i` lies in the window of output `o`
//! through tap `k` when `i + pad - k * dilation = o * stride` with `0 <= o < output size`,
//! tested with index arithmetic; `dY` (and MaxPool's `Indices`) are read at `o` with indirect
//! loads, and a `Reduce` sums what every window sends, so overlapping windows accumulate.
//!
//! - MaxPoolGrad: window `o` sends `dY[o]` where `Indices[o]` is the flat row-major index of
//!   `(n, c, i...)` in `dX` (onnxruntime adds `dY[o]` at `dX.flat[Indices[o]]`). Indices are
//!   MaxPool's, so they point inside their own window; an index pointing elsewhere sends
//!   nothing (onnxruntime would write wherever it points).
//! - AveragePoolGrad: window `o` sends `dY[o] / count(o)`, `count` the divisor AveragePool
//!   used: the taps inside the input, or inside the padded input with `count_include_pad`.

use super::super::super::build::{Insts, TensorRef};
use super::super::super::movement::common::{loop_kernel, once_stage, IndexMath};
use super::super::super::{unsupported, LowerCtx, LowerResult};
use super::super::conv::{window, Window};
use super::super::matmul::check_arith;
use super::taps_inside_at;
use crate::kernel::{BinaryOp, IndirectIndex, InstId, Kernel, ReduceOp, Stage, View};
use memc_ir::OpId;

/// Where input position `(n, c, i...)` (outer loop axes) meets the window of output `o` through
/// tap `k` (inner loop axes), per spatial axis.
struct Sources {
    /// Whether every axis meets a window (`None` with no spatial axis).
    valid: Option<InstId>,
    /// The output index per spatial axis, clamped into range (meaningful where `valid`).
    outputs: Vec<InstId>,
    /// `outputs` as indirect terms over `dY`'s spatial strides.
    terms: Vec<IndirectIndex>,
}

fn sources(insts: &mut Insts, dy: &TensorRef, win: &Window) -> Sources {
    let n_spatial = win.kernel.len();
    let rank = n_spatial + 2;
    let ys = dy.strides();
    let mut valid = None;
    let mut outputs = Vec::with_capacity(n_spatial);
    let mut terms = Vec::with_capacity(n_spatial);
    for i in 0..n_spatial {
        let size = dy.shape[2 + i] as i64;
        let position = insts.index(2 + i);
        let k = insts.index(rank + i);
        let kd = insts.mul_c(k, win.dilations[i]);
        let t = insts.add_c(position, win.begin[i]);
        let t = insts.binary(BinaryOp::Sub, t, kd);
        let stride = insts.i64c(win.strides[i]);
        let rem = insts.binary(BinaryOp::FloorMod, t, stride);
        let zero = insts.i64c(0);
        let divisible = insts.binary(BinaryOp::Eq, rem, zero);
        let o = insts.floor_div_c(t, win.strides[i]);
        let inside = insts.in_range_c(o, 0, size);
        let ok = insts.binary(BinaryOp::And, divisible, inside);
        valid = Some(insts.and(valid, ok));
        let o = insts.clamp_c(o, 0, size - 1);
        outputs.push(o);
        terms.push(IndirectIndex {
            index: o,
            stride: ys[2 + i],
            limit: size,
        });
    }
    Sources {
        valid,
        outputs,
        terms,
    }
}

/// `t` (`[N, C, O...]`) over the loop axes, indexed by `n` and `c`; its spatial position comes
/// from indirect terms.
fn channel_view(t: &TensorRef, n_axes: usize) -> View {
    let ts = t.strides();
    let mut strides = vec![0i64; n_axes];
    strides[0] = ts[0];
    strides[1] = ts[1];
    t.view_with(strides)
}

/// The window of the pool over `dX`'s spatial dims, checked against `dY`.
fn checked_window(
    ctx: &LowerCtx,
    op: OpId,
    dy: &TensorRef,
    dx: &TensorRef,
) -> Result<Window, super::super::super::LowerError> {
    if dx.rank() < 3 || dy.rank() != dx.rank() || dy.shape[..2] != dx.shape[..2] {
        return Err(unsupported(
            "dY and dX must be [N, C, spatial...] with the same N and C",
        ));
    }
    let resolved = memc_ir::ops::Window::of(ctx.func, op, &dx.shape[2..]).map_err(unsupported)?;
    if resolved.output != dy.shape[2..] {
        return Err(unsupported(format!(
            "the pool over dX's spatial dims {:?} gives {:?}, not dY's {:?}",
            &dx.shape[2..],
            resolved.output,
            &dy.shape[2..]
        )));
    }
    window(ctx.func, op, &dx.shape[2..])
}

/// The kernel summing `value` (built by `value` from the sources) over the window taps into
/// `dX`; view 0 is `dX`, the later views those `extra` adds.
fn gather_kernel(
    name: String,
    dx: &TensorRef,
    win: &Window,
    views: Vec<View>,
    insts: Insts,
    value: InstId,
) -> Kernel {
    let reduce = Stage::Reduce {
        insts: insts.finish(),
        value,
        op: ReduceOp::Sum,
        init: 0,
        ty: dx.elem.compute(),
    };
    let mut insts = Insts::new();
    let acc = insts.acc(0, dx.elem);
    let store = once_stage(insts, 0, acc);
    loop_kernel(
        name,
        dx.shape.clone(),
        win.kernel.iter().map(|&k| k as u64).collect(),
        views,
        vec![reduce, store],
    )
}

pub fn max_pool_grad(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let dy = ctx.input(op, 0)?;
    let indices = ctx.input(op, 1)?;
    let dx = ctx.result(op, 0)?;
    if dx.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(dx.elem)?;
    if indices.shape != dy.shape {
        return Err(unsupported("Indices must have dY's shape"));
    }
    let win = checked_window(ctx, op, &dy, &dx)?;
    let n_spatial = win.kernel.len();
    let n_axes = 2 + 2 * n_spatial;
    let views = vec![
        dx.view_identity(n_spatial),
        channel_view(&dy, n_axes),
        channel_view(&indices, n_axes),
    ];
    let mut insts = Insts::new();
    let src = sources(&mut insts, &dy, &win);
    let dyv = insts.load_indirect(&views, 1, src.terms.clone());
    let index = insts.load_indirect(&views, 2, src.terms);
    // The flat row-major index of the outer point in dX.
    let mut flat = insts.i64c(0);
    for (axis, stride) in dx.strides().into_iter().enumerate() {
        let i = insts.index(axis);
        let term = insts.mul_c(i, stride);
        flat = insts.binary(BinaryOp::Add, flat, term);
    }
    let hit = insts.binary(BinaryOp::Eq, index, flat);
    let take = insts.and(src.valid, hit);
    let zero = insts.constant(dx.elem, 0.0);
    let value = insts.select(take, dyv, zero);
    Ok(vec![gather_kernel(
        ctx.kernel_name(op, 0),
        &dx,
        &win,
        views,
        insts,
        value,
    )])
}

pub fn average_pool_grad(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let dy = ctx.input(op, 0)?;
    let dx = ctx.result(op, 0)?;
    if dx.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(dx.elem)?;
    let win = checked_window(ctx, op, &dy, &dx)?;
    let include_pad = ctx.attr_int(op, "count_include_pad") != 0;
    let n_spatial = win.kernel.len();
    let n_axes = 2 + 2 * n_spatial;
    let views = vec![dx.view_identity(n_spatial), channel_view(&dy, n_axes)];
    let mut insts = Insts::new();
    let src = sources(&mut insts, &dy, &win);
    let dyv = insts.load_indirect(&views, 1, src.terms.clone());
    let mut count: Option<InstId> = None;
    for (i, &o) in src.outputs.iter().enumerate() {
        let size = dx.shape[2 + i] as i64;
        let (lo, hi) = if include_pad {
            (-win.begin[i], size + win.end[i])
        } else {
            (0, size)
        };
        let c = taps_inside_at(&mut insts, o, &win, i, lo, hi);
        count = Some(match count {
            Some(p) => insts.binary(BinaryOp::Mul, p, c),
            None => c,
        });
    }
    let mut value = dyv;
    if let Some(c) = count {
        // A count of 0 only occurs where no window is met, which the select drops.
        let one = insts.i64c(1);
        let c = insts.binary(BinaryOp::Max, c, one);
        let c = insts.cast(c, dx.elem);
        value = insts.binary(BinaryOp::Div, dyv, c);
    }
    let value = match src.valid {
        Some(valid) => {
            let zero = insts.constant(dx.elem, 0.0);
            insts.select(valid, value, zero)
        }
        None => value,
    };
    Ok(vec![gather_kernel(
        ctx.kernel_name(op, 0),
        &dx,
        &win,
        views,
        insts,
        value,
    )])
}
