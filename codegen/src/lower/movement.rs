//! Data movement: copies for view ops the planner could not alias (BitCast's reading the bytes
//! as its result's element type), Transpose, Concat, Split, Slice, the gathers and scatters, the
//! gradients of Slice and the gathers, Expand, Tile, Pad, CenterCropPad, Resize, GridSample, AffineGrid, Trilu,
//! EyeLike, OneHot, DepthToSpace and
//! SpaceToDepth, TopK, Range, ConstantOfShape, and Shape/Size when canonicalization left them.
//!
//! Each op becomes loop kernels whose `Map` stage loads and stores, so every element type the
//! kernel IR has works, whatever its width (F16 included where no arithmetic is needed). The
//! output of a copy is always walked in row-major order, its innermost loop axis the
//! output's contiguous one, with size-1 axes dropped and contiguous runs merged
//! ([`common::merge_axes`]). Index-dependent values (Trilu, EyeLike, Range, the clamped and
//! reflected reads of Pad, Resize's source coordinates) are computed from `Index`
//! instructions; data-dependent reads go through `LoadIndirect`.
//!
//! Guarantees: kernels follow the ONNX reference implementation (`onnx/reference/ops`) and
//! produce exactly the shapes `memc_ir::ops::shape` computed; an output with no elements gets
//! no kernel; constant operands (pads, slice bounds, split sizes, resize scales) must be
//! compile-time constants, and an op that needs one that is not is reported as unsupported.

pub(super) mod common;
mod gather;
mod grid;
mod pad;
mod resize;
mod scatter;
mod topk;

pub(super) use gather::{
    accumulate_gather_grad, gather, gather_elements, gather_elements_grad, gather_grad, gather_nd,
};
pub(super) use grid::{affine_grid, grid_sample};
pub(super) use pad::{center_crop_pad, pad};
pub(super) use resize::resize;
pub(super) use scatter::{scatter_elements, scatter_nd, tensor_scatter};
pub(super) use topk::top_k;

use super::build::{Insts, TensorRef};
use super::{unsupported, LowerCtx, LowerError, LowerResult};
use crate::kernel::{BinaryOp, IndirectIndex, InstId, InstKind, Kernel, Scalar, View};
use common::{
    const_bits_of_bytes, loop_kernel, map_stage, norm_axis, operand_absent_or_empty, shifted,
    strided_copy, IndexMath,
};
use memc_ir::{Attribute, OpId};

/// The output of `op`, or `None` when it has no elements (nothing to write).
fn output(ctx: &LowerCtx, op: OpId, index: usize) -> Result<Option<TensorRef>, LowerError> {
    let out = ctx.result(op, index)?;
    Ok((out.numel() > 0).then_some(out))
}

/// A contiguous view of `t` over its own shape's loop axes.
fn dense(t: &TensorRef) -> View {
    t.view_identity(0)
}

/// Reshape, Flatten, Squeeze and Unsqueeze when the planner could not make the
/// result a view (its operand is a weight, or both are graph inputs and outputs): the bytes
/// are copied unchanged.
pub(super) fn linear_copy(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    copy_bytes(ctx, op, input)
}

/// BitCast when the planner could not make the result a view: the bytes copied unchanged,
/// read as the result's element type (of the same width, as the verifier checked).
pub(super) fn bit_cast(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let out = ctx.result(op, 0)?;
    if input.elem.size() != out.elem.size() {
        return Err(unsupported(
            "BitCast between element types of different widths (a memc bug)",
        ));
    }
    copy_bytes(
        ctx,
        op,
        TensorRef {
            elem: out.elem,
            ..input
        },
    )
}

/// The bytes of `input` (operand 0 of `op`) copied into result 0, element by element in
/// row-major order.
fn copy_bytes(ctx: &LowerCtx, op: OpId, input: TensorRef) -> LowerResult {
    if !ctx.result_used(op, 0) && ctx.weight_of(ctx.op(op).operands[0]).is_some() {
        // A view of a weight: it lives in the weights section, nothing runs.
        return Ok(Vec::new());
    }
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let n = out.numel();
    if input.numel() != n {
        return Err(unsupported("the input and output element counts differ"));
    }
    let flat = vec![n];
    Ok(vec![strided_copy(
        ctx.kernel_name(op, 0),
        &flat,
        dense(&out.reshaped(flat.clone())),
        dense(&input.reshaped(flat.clone())),
    )])
}

/// The permutation of Transpose (reversed dims when `perm` is absent).
fn transpose_perm(ctx: &LowerCtx, op: OpId, rank: usize) -> Result<Vec<usize>, LowerError> {
    match ctx.attr_ints(op, "perm") {
        None => Ok((0..rank).rev().collect()),
        Some(p) => p.iter().map(|&a| norm_axis(a, rank)).collect(),
    }
}

/// Transpose: the output walked in order, the input read with permuted strides.
pub(super) fn transpose(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let perm = transpose_perm(ctx, op, input.rank())?;
    let own = input.strides();
    let strides: Vec<i64> = perm.iter().map(|&p| own[p]).collect();
    Ok(vec![strided_copy(
        ctx.kernel_name(op, 0),
        &out.shape,
        dense(&out),
        input.view_with(strides),
    )])
}

/// Concat: one copy per non-empty input into its slice of the output.
pub(super) fn concat(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let axis = norm_axis(ctx.attr_int(op, "axis"), out.rank())?;
    let out_strides = out.strides();
    let mut kernels = Vec::new();
    let mut at = 0i64;
    for i in 0..ctx.op(op).operands.len() {
        let x = ctx.input(op, i)?;
        if x.numel() > 0 {
            let dst = shifted(out.view_with(out_strides.clone()), at * out_strides[axis]);
            kernels.push(strided_copy(
                ctx.kernel_name(op, kernels.len()),
                &x.shape,
                dst,
                dense(&x),
            ));
        }
        at += x.shape[axis] as i64;
    }
    Ok(kernels)
}

/// ConcatTraining: Concat, then `per_input_length` (when used) as constants: each input's size
/// along `axis`.
pub(super) fn concat_training(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let mut kernels = if ctx.result_used(op, 0) {
        concat(ctx, op)?
    } else {
        Vec::new()
    };
    if !ctx.result_used(op, 1) {
        return Ok(kernels);
    }
    let lengths_out = ctx.result(op, 1)?;
    let first = ctx.input(op, 0)?;
    let axis = norm_axis(ctx.attr_int(op, "axis"), first.rank())?;
    let mut lengths = Vec::with_capacity(ctx.op(op).operands.len());
    for i in 0..ctx.op(op).operands.len() {
        let x = ctx.input(op, i)?;
        let len =
            x.shape.get(axis).copied().ok_or_else(|| {
                unsupported(format!("input #{i} has no axis {axis} (a memc bug)"))
            })?;
        lengths.push(len as i64);
    }
    kernels.push(write_i64s(
        ctx.kernel_name(op, kernels.len()),
        &lengths_out,
        &lengths,
    ));
    Ok(kernels)
}

/// Split: one copy per used, non-empty output from its slice of the input. The output types
/// already hold the sizes (from `split`, or `num_outputs` parts with a smaller last one).
pub(super) fn split(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let axis = norm_axis(ctx.attr_int(op, "axis"), input.rank())?;
    let own = input.strides();
    let mut kernels = Vec::new();
    let mut at = 0i64;
    for j in 0..ctx.op(op).results.len() {
        let Some(&value) = ctx.op(op).results.get(j) else {
            break;
        };
        let ty = ctx.func.value_type(value);
        let Some(size) = ty.tensor().and_then(|t| t.static_shape()).map(|s| s[axis]) else {
            return Err(unsupported("a split size is not static"));
        };
        if ctx.result_used(op, j) {
            let out = ctx.result(op, j)?;
            if out.numel() > 0 {
                let src = shifted(input.view_with(own.clone()), at * own[axis]);
                kernels.push(strided_copy(
                    ctx.kernel_name(op, kernels.len()),
                    &out.shape,
                    dense(&out),
                    src,
                ));
            }
        }
        at += size as i64;
    }
    if at as u64 != input.shape[axis] {
        return Err(unsupported(
            "the split sizes do not add up to the input's axis",
        ));
    }
    Ok(kernels)
}

/// The view of the slice of `t` that `starts` and `steps` (one each per axis of `axes`) select,
/// starts clamped as ONNX's Slice clamps them: Slice reads through it, SliceGrad writes.
fn sliced_view(
    t: &TensorRef,
    axes: &[usize],
    starts: &[i64],
    steps: &[i64],
    what: &str,
) -> Result<View, LowerError> {
    let own = t.strides();
    let mut strides = own.clone();
    let mut offset = 0i64;
    for (i, &a) in axes.iter().enumerate() {
        let d = t.shape[a] as i64;
        let step = steps[i];
        if step == 0 {
            return Err(unsupported(format!("a {what} step is 0")));
        }
        // A step at least as long as the axis selects the start alone; clamped to the axis's
        // length it selects the same element and its stride cannot overflow.
        let step = step.clamp(-d.max(1), d.max(1));
        let start = if starts[i] < 0 {
            starts[i].saturating_add(d)
        } else {
            starts[i]
        };
        let start = if step > 0 {
            start.clamp(0, d)
        } else {
            start.clamp(0, (d - 1).max(0))
        };
        offset += start * own[a];
        strides[a] = own[a] * step;
    }
    Ok(shifted(t.view_with(strides), offset))
}

/// Kernel 0 of `op`: `out` filled with zeros (before a scatter or a strided copy writes part of
/// it: the gradients of gathers and slices).
fn zero_fill(ctx: &LowerCtx, op: OpId, out: &TensorRef) -> Kernel {
    let mut insts = Insts::new();
    let zero = insts.constant(out.elem, 0.0);
    loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        vec![dense(out)],
        vec![map_stage(insts, 0, zero)],
    )
}

/// Slice: a strided view of the input when starts, ends, axes and steps are compile-time
/// constants; otherwise each sliced axis reads `start + i * step` through a `LoadIndirect`,
/// with start and step loaded and clamped as the ONNX spec says (the output shape already
/// fixes the count, so ends are not needed).
pub(super) fn slice(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let rank = input.rank();
    let n = ctx.input(op, 1)?.numel() as usize;
    let axes: Option<Vec<usize>> = if operand_absent_or_empty(ctx, op, 3)? {
        Some((0..n).collect())
    } else {
        match ctx.const_ints(op, 3) {
            Some(a) => Some(
                a.iter()
                    .map(|&a| norm_axis(a, rank))
                    .collect::<Result<_, _>>()?,
            ),
            None => None,
        }
    };
    let steps_absent = operand_absent_or_empty(ctx, op, 4)?;
    let steps = if steps_absent {
        Some(vec![1; n])
    } else {
        ctx.const_ints(op, 4)
    };
    let own = input.strides();
    if let (Some(axes), Some(steps), Some(starts)) = (&axes, &steps, ctx.const_ints(op, 1)) {
        if starts.len() != axes.len() || steps.len() != axes.len() {
            return Err(unsupported("Slice starts, axes and steps differ in length"));
        }
        let src = sliced_view(&input, axes, &starts, steps, "Slice")?;
        return Ok(vec![strided_copy(
            ctx.kernel_name(op, 0),
            &out.shape,
            dense(&out),
            src,
        )]);
    }
    let mut views = vec![dense(&out)];
    let mut insts = Insts::new();
    let mut start_step: Vec<Option<(InstId, InstId)>> = vec![None; rank];
    for j in 0..n {
        let start = common::operand_elem(ctx, op, 1, j, Scalar::I64, &mut views, &mut insts, rank)?;
        let step = if steps_absent {
            insts.i64c(1)
        } else {
            common::operand_elem(ctx, op, 4, j, Scalar::I64, &mut views, &mut insts, rank)?
        };
        let clamped = |insts: &mut Insts, d: usize| {
            let dim = input.shape[d] as i64;
            let zero = insts.i64c(0);
            let negative = insts.binary(BinaryOp::Lt, start, zero);
            let wrapped = insts.add_c(start, dim);
            let s = insts.select(negative, wrapped, start);
            let forward = insts.binary(BinaryOp::Gt, step, zero);
            let (hi_fwd, hi_back) = (insts.i64c(dim), insts.i64c((dim - 1).max(0)));
            let hi = insts.select(forward, hi_fwd, hi_back);
            let s = insts.binary(BinaryOp::Max, s, zero);
            insts.binary(BinaryOp::Min, s, hi)
        };
        match &axes {
            Some(axes) => {
                let d = *axes
                    .get(j)
                    .ok_or_else(|| unsupported("Slice axes and starts differ in length"))?;
                start_step[d] = Some((clamped(&mut insts, d), step));
            }
            None => {
                let a =
                    common::operand_elem(ctx, op, 3, j, Scalar::I64, &mut views, &mut insts, rank)?;
                let zero = insts.i64c(0);
                let negative = insts.binary(BinaryOp::Lt, a, zero);
                let wrapped = insts.add_c(a, rank as i64);
                let a = insts.select(negative, wrapped, a);
                for (d, slot) in start_step.iter_mut().enumerate() {
                    let s = clamped(&mut insts, d);
                    let dc = insts.i64c(d as i64);
                    let hit = insts.binary(BinaryOp::Eq, a, dc);
                    let (prev_start, prev_step) = match *slot {
                        Some(p) => p,
                        None => (insts.i64c(0), insts.i64c(1)),
                    };
                    let s = insts.select(hit, s, prev_start);
                    let st = insts.select(hit, step, prev_step);
                    *slot = Some((s, st));
                }
            }
        }
    }
    let mut strides = own.clone();
    let mut terms = Vec::new();
    for (d, ss) in start_step.iter().enumerate() {
        let Some((start, step)) = *ss else { continue };
        strides[d] = 0;
        let i = insts.index(d);
        let walked = insts.binary(BinaryOp::Mul, i, step);
        let index = insts.binary(BinaryOp::Add, start, walked);
        terms.push(IndirectIndex {
            index,
            stride: own[d],
            limit: input.shape[d] as i64,
        });
    }
    views.push(input.view_with(strides));
    let value = insts.load_indirect(&views, (views.len() - 1) as u32, terms);
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )])
}

/// `ms.SliceGrad(dY, shape, starts, ends, axes?, steps?)`: a zero fill of `dX` (of `shape`),
/// then a copy of `dY` into the strided view of `dX` that Slice read, bounds clamped as Slice
/// clamps them. Starts, axes and steps must be compile-time constants (ends are not needed:
/// dY's shape fixes the count).
pub(super) fn slice_grad(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let dy = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let rank = out.rank();
    if dy.rank() != rank || dy.elem != out.elem {
        return Err(unsupported(
            "SliceGrad's dY does not match its shape (a memc bug)",
        ));
    }
    let starts = ctx
        .const_ints(op, 2)
        .ok_or_else(|| unsupported("SliceGrad with starts not known at compile time"))?;
    let n = starts.len();
    let axes: Vec<usize> = if operand_absent_or_empty(ctx, op, 4)? {
        (0..n).collect()
    } else {
        ctx.const_ints(op, 4)
            .ok_or_else(|| unsupported("SliceGrad with axes not known at compile time"))?
            .iter()
            .map(|&a| norm_axis(a, rank))
            .collect::<Result<_, _>>()?
    };
    let steps = if operand_absent_or_empty(ctx, op, 5)? {
        vec![1; n]
    } else {
        ctx.const_ints(op, 5)
            .ok_or_else(|| unsupported("SliceGrad with steps not known at compile time"))?
    };
    if axes.len() != n || steps.len() != n {
        return Err(unsupported(
            "SliceGrad starts, axes and steps differ in length",
        ));
    }
    let zero_fill = zero_fill(ctx, op, &out);
    if dy.numel() == 0 {
        return Ok(vec![zero_fill]);
    }
    let dst = sliced_view(&out, &axes, &starts, &steps, "SliceGrad")?;
    Ok(vec![
        zero_fill,
        strided_copy(ctx.kernel_name(op, 1), &dy.shape, dst, dense(&dy)),
    ])
}

/// Expand: the input broadcast (numpy rules) to the output's shape.
pub(super) fn expand(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let src = input.view_broadcast(&out.shape, 0);
    Ok(vec![strided_copy(
        ctx.kernel_name(op, 0),
        &out.shape,
        dense(&out),
        src,
    )])
}

/// Tile: each output axis `d * r` split into loop axes `(r, d)`; the input does not move
/// along the repeat axes.
pub(super) fn tile(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let own = input.strides();
    let out_strides = out.strides();
    let mut shape = Vec::new();
    let (mut dst, mut src) = (Vec::new(), Vec::new());
    for a in 0..input.rank() {
        let d = input.shape[a];
        let repeats = out.shape[a] / d.max(1);
        shape.extend([repeats, d]);
        dst.extend([out_strides[a] * d as i64, out_strides[a]]);
        src.extend([0, own[a]]);
    }
    Ok(vec![strided_copy(
        ctx.kernel_name(op, 0),
        &shape,
        out.view_with(dst),
        input.view_with(src),
    )])
}

/// DepthToSpace: `[N, C, H, W]` read as `[N, b, b, C', H, W]` (DCR) or `[N, C', b, b, H, W]`
/// (CRD) and written as `[N, C', H, b, W, b]`.
pub(super) fn depth_to_space(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let b = ctx.attr_int(op, "blocksize");
    let [n, c, h, w] = input.shape[..] else {
        return Err(unsupported("DepthToSpace needs a 4-d input"));
    };
    let (c, h, w, bu) = (c as i64, h as i64, w as i64, b as u64);
    let c_out = c / (b * b);
    let hw = h * w;
    let crd = ctx.attr_str(op, "mode") == Some("CRD");
    // Loop axes: n, c', h, bh, w, bw.
    let shape = vec![n, c_out as u64, h as u64, bu, w as u64, bu];
    let src = if crd {
        vec![c * hw, b * b * hw, w, b * hw, 1, hw]
    } else {
        vec![c * hw, hw, w, b * c_out * hw, 1, c_out * hw]
    };
    Ok(vec![strided_copy(
        ctx.kernel_name(op, 0),
        &shape,
        out.view_with(common::strides_of(&shape)),
        input.view_with(src),
    )])
}

/// SpaceToDepth: `[N, C, H, W]` read as `[N, C, H', b, W', b]` and written as
/// `[N, b, b, C, H', W']`.
pub(super) fn space_to_depth(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let b = ctx.attr_int(op, "blocksize");
    let [n, c, h, w] = input.shape[..] else {
        return Err(unsupported("SpaceToDepth needs a 4-d input"));
    };
    let (ci, hi, wi) = (c as i64, h as i64, w as i64);
    let (ho, wo) = (h / b as u64, w / b as u64);
    // Loop axes: n, bh, bw, c, h', w'.
    let shape = vec![n, b as u64, b as u64, c, ho, wo];
    let src = vec![ci * hi * wi, wi, 1, hi * wi, b * wi, b];
    Ok(vec![strided_copy(
        ctx.kernel_name(op, 0),
        &shape,
        out.view_with(common::strides_of(&shape)),
        input.view_with(src),
    )])
}

/// A one-element view of `t` at every loop point (a runtime scalar operand).
fn scalar_view(t: &TensorRef, n_axes: usize) -> View {
    t.view_with(vec![0; n_axes])
}

/// Trilu: keeps `j - i >= k` (upper) or `j - i <= k` (lower) over the last two axes.
pub(super) fn trilu(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let rank = out.rank();
    if rank < 2 {
        return Err(unsupported("Trilu needs rank 2 or more"));
    }
    let upper = ctx.attr_int(op, "upper") != 0;
    let mut views = vec![dense(&out), dense(&input)];
    let mut insts = Insts::new();
    let k = match ctx.operand(op, 1)? {
        None => insts.i64c(0),
        Some(t) => match ctx.const_ints(op, 1) {
            Some(v) => insts.i64c(v.first().copied().unwrap_or(0)),
            None => {
                views.push(scalar_view(&t, rank));
                let k = insts.load(&views, 2);
                insts.cast(k, Scalar::I64)
            }
        },
    };
    let i = insts.index(rank - 2);
    let j = insts.index(rank - 1);
    let diff = insts.binary(BinaryOp::Sub, j, i);
    let keep = insts.binary(if upper { BinaryOp::Ge } else { BinaryOp::Le }, diff, k);
    let x = insts.load(&views, 1);
    let zero = insts.push(out.elem, InstKind::Const { bits: 0 });
    let value = insts.select(keep, x, zero);
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )])
}

/// The `Const` bits of 1 in `ty`.
fn one_bits(ty: Scalar) -> u64 {
    if ty.is_float() {
        1f64.to_bits()
    } else {
        1
    }
}

/// EyeLike: ones where `j - i == k`, zeros elsewhere.
pub(super) fn eye_like(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    if out.rank() != 2 {
        return Err(unsupported("EyeLike needs a 2-d output"));
    }
    let k = ctx.attr_int(op, "k");
    let views = vec![dense(&out)];
    let mut insts = Insts::new();
    let i = insts.index(0);
    let j = insts.index(1);
    let diff = insts.binary(BinaryOp::Sub, j, i);
    let kc = insts.i64c(k);
    let on = insts.binary(BinaryOp::Eq, diff, kc);
    let one = insts.push(
        out.elem,
        InstKind::Const {
            bits: one_bits(out.elem),
        },
    );
    let zero = insts.push(out.elem, InstKind::Const { bits: 0 });
    let value = insts.select(on, one, zero);
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )])
}

/// OneHot: at each output point, `values[1]` where the index (plus the depth when negative)
/// equals the position along `axis`, else `values[0]`. No index is used as an address, so an
/// index out of range (or a float index that is not an integer) matches no position and
/// nothing is read out of bounds. Signed indices compare as i64, unsigned ones as u64 (none is
/// negative), float ones in their type.
/// The depth must be a compile-time constant (a weight, a folded value or `--const`).
pub(super) fn one_hot(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let indices = ctx.input(op, 0)?;
    let values = ctx.input(op, 2)?;
    if values.numel() != 2 || indices.rank() + 1 != out.rank() {
        return Err(unsupported(
            "OneHot's operands do not fit its result (a memc bug)",
        ));
    }
    let axis = norm_axis(ctx.attr_int(op, "axis"), out.rank())?;
    let depth = out.shape[axis] as i64;
    // The result's extent along `axis` is planned from the depth, so the depth must be the
    // constant it was planned from (a declared output type alone does not bind the run-time
    // value).
    match ctx.const_floats(op, 1).as_deref() {
        Some(&[d]) if d.trunc() == depth as f64 => {}
        Some(_) => {
            return Err(unsupported(
                "OneHot whose depth differs from its result's extent along `axis`",
            ))
        }
        None => {
            return Err(unsupported(
                "OneHot with a depth known only at run time (bind it with `--const`)",
            ))
        }
    }
    let mut strides = indices.strides();
    strides.insert(axis, 0);
    let scalar = |elem_offset: i64| shifted(values.view_with(vec![0; out.rank()]), elem_offset);
    let views = vec![
        dense(&out),
        indices.view_with(strides),
        scalar(0),
        scalar(1),
    ];
    let mut insts = Insts::new();
    let index = insts.load(&views, 1);
    let ty = if indices.elem.is_float() {
        insts.ty(index)
    } else if indices.elem.is_unsigned_int() {
        Scalar::U64
    } else {
        Scalar::I64
    };
    let mut index = insts.cast(index, ty);
    if !indices.elem.is_unsigned_int() {
        let zero = insts.constant(ty, 0.0);
        let negative = insts.binary(BinaryOp::Lt, index, zero);
        let depth_c = insts.constant(ty, depth as f64);
        let wrapped = insts.binary(BinaryOp::Add, index, depth_c);
        index = insts.select(negative, wrapped, index);
    }
    let position = insts.index(axis);
    let position = insts.cast(position, ty);
    let on = insts.binary(BinaryOp::Eq, index, position);
    let off_value = insts.load(&views, 2);
    let on_value = insts.load(&views, 3);
    let value = insts.select(on, on_value, off_value);
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )])
}

/// Range: `start + i * delta` (numpy's `arange`), with start and delta constants or loaded.
pub(super) fn range(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let ty = out.elem;
    let mut views = vec![dense(&out)];
    let mut insts = Insts::new();
    let mut operand = |index: usize, insts: &mut Insts| -> Result<u32, LowerError> {
        let t = ctx.input(op, index)?;
        let weight = ctx.weight_constant(op, index);
        if let Some(bits) = weight.and_then(|(elem, bytes)| const_bits_of_bytes(elem, bytes, ty)) {
            return Ok(insts.push(ty, InstKind::Const { bits }));
        }
        views.push(scalar_view(&t, 1));
        Ok(insts.load(&views, (views.len() - 1) as u32))
    };
    let start = operand(0, &mut insts)?;
    let delta = operand(2, &mut insts)?;
    let i = insts.index(0);
    let i = insts.cast(i, ty);
    let step = insts.binary(BinaryOp::Mul, i, delta);
    let value = insts.binary(BinaryOp::Add, start, step);
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )])
}

/// A kernel filling `out` with the constant `bits`.
fn fill(name: String, out: &TensorRef, bits: u64) -> Kernel {
    let n = out.numel();
    let flat = out.reshaped(vec![n]);
    let (shape, strides) = common::merge_axes(&[n], &[vec![1]]);
    let views = vec![flat.view_with(strides[0].clone())];
    let mut insts = Insts::new();
    let value = insts.push(out.elem, InstKind::Const { bits });
    loop_kernel(
        name,
        shape,
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )
}

/// ConstantOfShape: a fill with the one element of the `value` weight (0.0 without it).
pub(super) fn constant_of_shape(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let bits = match ctx.attr(op, "value").and_then(Attribute::as_weight) {
        None => 0,
        Some(id) => {
            let w = ctx.weights.get(id).ok_or_else(|| {
                unsupported("the `value` weight is missing from the weight store")
            })?;
            let bytes = w
                .bytes()
                .ok_or_else(|| unsupported("the `value` weight has no bytes"))?;
            const_bits_of_bytes(w.ty().elem, bytes, out.elem)
                .ok_or_else(|| unsupported("the `value` weight has no element"))?
        }
    };
    Ok(vec![fill(ctx.kernel_name(op, 0), &out, bits)])
}

/// A kernel writing the I64 `values` into the 1-d (or scalar) `out`.
fn write_i64s(name: String, out: &TensorRef, values: &[i64]) -> Kernel {
    let n = values.len() as u64;
    let views = vec![out.reshaped(vec![n]).view_with(vec![1])];
    let mut insts = Insts::new();
    let i = insts.index(0);
    let mut value = insts.i64c(values.last().copied().unwrap_or(0));
    for (k, &v) in values.iter().enumerate().rev().skip(1) {
        let kc = insts.i64c(k as i64);
        let here = insts.binary(BinaryOp::Eq, i, kc);
        let vc = insts.i64c(v);
        value = insts.select(here, vc, value);
    }
    loop_kernel(
        name,
        vec![n],
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )
}

/// Shape: the input's dims `[start, end)` (clamped as ONNX does) as constants.
pub(super) fn shape(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let r = input.rank() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    // ONNX's defaults: from the first dim to the last (the end depends on the rank).
    let start = clamp(ctx.attr_int_opt(op, "start").unwrap_or(0));
    let end = clamp(ctx.attr_int_opt(op, "end").unwrap_or(r)).max(start);
    let dims: Vec<i64> = input.shape[start..end].iter().map(|&d| d as i64).collect();
    Ok(vec![write_i64s(ctx.kernel_name(op, 0), &out, &dims)])
}

/// Size: the input's element count as a constant.
pub(super) fn size(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let out = ctx.result(op, 0)?;
    Ok(vec![write_i64s(
        ctx.kernel_name(op, 0),
        &out,
        &[input.numel() as i64],
    )])
}
