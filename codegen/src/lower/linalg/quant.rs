//! DequantizeLinear and QuantizeLinear on the integers (2 to 32 bits; 4-bit weights are
//! `quant4`'s), the float8 formats and float4 E2M1, per tensor, per axis (`axis`) or blocked
//! (`block_size` along `axis`), as in `onnx/reference/ops/op_(de)quantize_linear.py`:
//!
//! - dequantize: `(f32(x) - zero_point) * scale` (in f64 when numpy would promote: an int32
//!   input with a zero point), cast to the scale's type; a float8 or float4 input has no zero
//!   point (the reference ignores it);
//! - quantize: `round_half_even(x / scale) + zero_point`, clamped to the output type's range;
//!   to float8, `x / scale` clamped to the largest finite value when `saturate` (the zero
//!   point ignored, as the reference does); to float4, `x / scale + zero_point` (float4
//!   saturates when stored).
//!
//! Scale and zero point are read through views that follow the quantization layout; a blocked
//! one reads index `i / block_size` along the axis with a `LoadIndirect`.

use super::super::build::{Insts, TensorRef};
use super::super::movement::common::{loop_kernel, map_stage, norm_axis, IndexMath};
use super::super::{unsupported, LowerCtx, LowerError, LowerResult};
use super::matmul::check_arith;
use crate::kernel::{BinaryOp, IndirectIndex, InstId, Scalar, UnaryOp, View};
use memc_ir::OpId;

/// How a scale-shaped parameter is read at each element of the input.
enum Layout {
    /// One value.
    PerTensor,
    /// Along `axis`.
    PerAxis(usize),
    /// Along `axis` in blocks of `block` elements; the parameter has the input's rank.
    Blocked(usize, i64),
}

fn layout(
    ctx: &LowerCtx,
    op: OpId,
    x: &TensorRef,
    scale: &TensorRef,
) -> Result<Layout, LowerError> {
    if scale.numel() == 1 {
        return Ok(Layout::PerTensor);
    }
    let axis = norm_axis(ctx.attr_int(op, "axis"), x.rank())?;
    let block = ctx.attr_int(op, "block_size");
    if block > 0 {
        if scale.rank() != x.rank() {
            return Err(unsupported("a blocked scale must have the input's rank"));
        }
        return Ok(Layout::Blocked(axis, block));
    }
    if scale.rank() != 1 || scale.shape[0] != x.shape[axis] {
        return Err(unsupported(
            "a per-axis scale must be 1-d with the axis's size",
        ));
    }
    Ok(Layout::PerAxis(axis))
}

/// Loads `param` (scale or zero point) at the current element: pushes its view and returns the
/// loaded value.
fn load_param(
    insts: &mut Insts,
    views: &mut Vec<View>,
    param: &TensorRef,
    layout: &Layout,
    rank: usize,
) -> InstId {
    match *layout {
        Layout::PerTensor => {
            views.push(param.view_with(vec![0; rank]));
            insts.load(views, (views.len() - 1) as u32)
        }
        Layout::PerAxis(axis) => {
            let mut strides = vec![0; rank];
            strides[axis] = 1;
            views.push(param.view_with(strides));
            insts.load(views, (views.len() - 1) as u32)
        }
        Layout::Blocked(axis, block) => {
            let mut strides = param.strides();
            let axis_stride = strides[axis];
            strides[axis] = 0;
            views.push(param.view_with(strides));
            let i = insts.index(axis);
            let index = insts.floor_div_c(i, block);
            let limit = param.shape[axis] as i64;
            insts.load_indirect(
                views,
                (views.len() - 1) as u32,
                vec![IndirectIndex {
                    index,
                    stride: axis_stride,
                    limit,
                }],
            )
        }
    }
}

pub fn dequantize(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let scale = ctx.input(op, 1)?;
    let zero_point = ctx.operand(op, 2)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(out.elem)?;
    let minifloat = x.elem.is_float() && x.elem.size() == 1;
    if !x.elem.is_int() && !minifloat {
        return Err(unsupported(format!(
            "DequantizeLinear of {}",
            x.elem.name()
        )));
    }
    // The float8 and float4 inputs' zero points are ignored (the reference's behaviour).
    let zero_point = zero_point.filter(|_| !minifloat);
    let layout = layout(ctx, op, &x, &scale)?;
    let rank = x.rank();
    let wide = zero_point.is_some() && matches!(x.elem, Scalar::I32 | Scalar::U32);
    let ty = if wide || scale.elem == Scalar::F64 {
        Scalar::F64
    } else {
        Scalar::F32
    };
    let mut views = vec![out.view_identity(0), x.view_identity(0)];
    let mut insts = Insts::new();
    let v = insts.load(&views, 1);
    let mut v = insts.cast(v, ty);
    if let Some(zp) = &zero_point {
        let z = load_param(&mut insts, &mut views, zp, &layout, rank);
        let z = insts.cast(z, ty);
        v = insts.binary(BinaryOp::Sub, v, z);
    }
    let s = load_param(&mut insts, &mut views, &scale, &layout, rank);
    let s = insts.cast(s, ty);
    let y = insts.binary(BinaryOp::Mul, v, s);
    let y = insts.cast(y, out.elem);
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, y)],
    )])
}

pub fn quantize(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let scale = ctx.input(op, 1)?;
    let zero_point = ctx.operand(op, 2)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(x.elem)?;
    let minifloat = out.elem.float_format().filter(|_| out.elem.size() == 1);
    if !out.elem.is_int() && minifloat.is_none() {
        return Err(unsupported(format!(
            "QuantizeLinear to {}",
            out.elem.name()
        )));
    }
    let layout = layout(ctx, op, &x, &scale)?;
    let rank = x.rank();
    let mut views = vec![out.view_identity(0), x.view_identity(0)];
    let mut insts = Insts::new();
    let v = insts.load(&views, 1);
    let s = load_param(&mut insts, &mut views, &scale, &layout, rank);
    let s = insts.cast(s, x.elem);
    let q = insts.binary(BinaryOp::Div, v, s);
    if let Some(format) = minifloat {
        let q = if out.elem == Scalar::F4E2M1 {
            // x / scale + zero_point, saturated when stored.
            match &zero_point {
                Some(zp) => {
                    let z = load_param(&mut insts, &mut views, zp, &layout, rank);
                    let z = insts.cast(z, x.elem);
                    insts.binary(BinaryOp::Add, q, z)
                }
                None => q,
            }
        } else if ctx.attr_int(op, "saturate") != 0 {
            let max = f64::from(format.max_finite());
            let t = insts.ty(q);
            let hi = insts.constant(t, max);
            let lo = insts.constant(t, -max);
            let q = insts.binary(BinaryOp::Min, q, hi);
            insts.binary(BinaryOp::Max, q, lo)
        } else {
            q
        };
        let q = insts.cast(q, out.elem);
        return Ok(vec![loop_kernel(
            ctx.kernel_name(op, 0),
            out.shape.clone(),
            Vec::new(),
            views,
            vec![map_stage(insts, 0, q)],
        )]);
    }
    let q = insts.unary(UnaryOp::Round, q);
    let mut q = insts.cast(q, Scalar::I64);
    if let Some(zp) = &zero_point {
        let z = load_param(&mut insts, &mut views, zp, &layout, rank);
        let z = insts.cast(z, Scalar::I64);
        q = insts.binary(BinaryOp::Add, q, z);
    }
    let (lo, hi) = super::super::movement::common::int_range(out.elem);
    let q = insts.clamp_c(q, lo, hi);
    let q = insts.cast(q, out.elem);
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, q)],
    )])
}
