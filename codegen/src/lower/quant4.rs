//! DequantizeLinear of 4-bit weights (int4/uint4) read where they are, packed as ONNX packs
//! them (two elements per byte, the first in the low four bits): the bytes are read as u8 and
//! each element's nibble is picked out with integer arithmetic, so the plan file holds the
//! weight at half a byte per element. (Kernels address sub-byte elements one per byte, which a
//! value in the arena is; those take the general DequantizeLinear.)
//!
//! This is the general, unfused form: it materializes the float tensor. Issue 6's fused low-bit
//! matmul replaces it where DQ feeds a MatMul; it stays for any other use.
//!
//! Guarantees: per-tensor, per-axis and blocked (`block_size`) scales and zero points; every
//! nibble index is clamped into the packed tensor by the indirect load, so a kernel never
//! reads outside it.

use super::build::{contiguous_strides, Insts, TensorRef};
use super::{unsupported, LowerCtx, LowerError, LowerResult};
use crate::kernel::{
    BinaryOp, IndirectIndex, InstId, Kernel, KernelBody, LoopKernel, Scalar, Stage, Store, View,
};
use memc_ir::OpId;

/// How a scale-shaped operand is indexed from an element of the input.
struct ParamIndex {
    /// Per input axis: (divisor, stride in the parameter) for axes the parameter varies along.
    axes: Vec<(usize, u64, i64)>,
    len: u64,
}

fn param_index(
    ctx: &LowerCtx,
    op: OpId,
    x_shape: &[u64],
    scale_shape: &[u64],
) -> Result<ParamIndex, LowerError> {
    let len: u64 = scale_shape.iter().product();
    let rank = x_shape.len();
    let block = ctx.attr_int(op, "block_size");
    if scale_shape.is_empty() || len == 1 && block == 0 {
        return Ok(ParamIndex {
            axes: Vec::new(),
            len: 1,
        });
    }
    let axis = ctx.attr_int(op, "axis");
    let axis = if axis < 0 { axis + rank as i64 } else { axis };
    if axis < 0 || axis as usize >= rank {
        return Err(unsupported(format!("axis {axis} is out of range")));
    }
    let axis = axis as usize;
    if block > 0 {
        // Blocked: the scale has the input's rank; along `axis` one entry per block.
        let strides = contiguous_strides(scale_shape);
        let axes = (0..rank)
            .filter(|&a| scale_shape[a] > 1 || a == axis)
            .map(|a| (a, if a == axis { block as u64 } else { 1 }, strides[a]))
            .collect();
        return Ok(ParamIndex { axes, len });
    }
    Ok(ParamIndex {
        axes: vec![(axis, 1, 1)],
        len,
    })
}

/// `sum over axes of (index(a) / divisor) * stride` as an I64 instruction.
fn param_offset(insts: &mut Insts, p: &ParamIndex) -> InstId {
    let mut acc = insts.constant_int(Scalar::I64, 0);
    for &(axis, divisor, stride) in &p.axes {
        let mut i = insts.index(axis);
        if divisor > 1 {
            let d = insts.constant_int(Scalar::I64, divisor as i64);
            i = insts.binary(BinaryOp::Div, i, d);
        }
        let s = insts.constant_int(Scalar::I64, stride);
        let term = insts.binary(BinaryOp::Mul, i, s);
        acc = insts.binary(BinaryOp::Add, acc, term);
    }
    acc
}

/// The 4-bit element at element index `index` (I64) of the packed view `view`, as I32.
fn load_nibble(
    insts: &mut Insts,
    views: &[View],
    view: u32,
    index: InstId,
    n_bytes: u64,
    signed: bool,
) -> InstId {
    let two = insts.constant_int(Scalar::I64, 2);
    let byte_index = insts.binary(BinaryOp::Div, index, two);
    let odd = insts.binary(BinaryOp::Rem, index, two);
    let byte = insts.load_indirect(
        views,
        view,
        vec![IndirectIndex {
            index: byte_index,
            stride: 1,
            limit: n_bytes.max(1) as i64,
        }],
    );
    let four = insts.constant_int(Scalar::I64, 4);
    let shift = insts.binary(BinaryOp::Mul, odd, four);
    let shift = insts.cast(shift, Scalar::U8);
    let shifted = insts.binary(BinaryOp::Shr, byte, shift);
    let mask = insts.constant_int(Scalar::U8, 15);
    let nibble = insts.binary(BinaryOp::BitAnd, shifted, mask);
    let value = insts.cast(nibble, Scalar::I32);
    if !signed {
        return value;
    }
    // Sign-extend four bits: (v ^ 8) - 8.
    let eight = insts.constant_int(Scalar::I32, 8);
    let flipped = insts.binary(BinaryOp::BitXor, value, eight);
    insts.binary(BinaryOp::Sub, flipped, eight)
}

/// DequantizeLinear of an int4 (`signed`) or uint4 input.
pub(super) fn dequantize(ctx: &LowerCtx, op: OpId, signed: bool) -> LowerResult {
    let data = ctx.op(op);
    let x = ctx.packed_tensor(data.operands[0])?;
    let x_shape = ctx
        .func
        .value_type(data.operands[0])
        .tensor()
        .and_then(|t| t.static_shape())
        .ok_or_else(|| unsupported("the input shape is not static"))?;
    let scale = ctx.input(op, 1)?;
    let y = ctx.result(op, 0)?;
    if !y.elem.is_float() || scale.elem != y.elem {
        return Err(unsupported(format!(
            "4-bit dequantization to {}",
            y.elem.name()
        )));
    }
    let zero_point = match data.operands.get(2) {
        Some(&v) if !ctx.func.value_type(v).is_none() => Some(ctx.packed_tensor(v)?),
        _ => None,
    };
    let rank = x_shape.len();
    let params = param_index(ctx, op, &x_shape, &scale.shape)?;
    let packed = |t: &TensorRef| t.view_with(vec![0; rank]);
    let mut views = vec![
        y.view_with(contiguous_strides(&x_shape)),
        packed(&x),
        scale.view_with(vec![0; rank]),
    ];
    if let Some(zp) = &zero_point {
        views.push(packed(zp));
    }
    let mut insts = Insts::new();
    // The element's linear index in the input.
    let strides = contiguous_strides(&x_shape);
    let mut linear = insts.constant_int(Scalar::I64, 0);
    for (a, &s) in strides.iter().enumerate() {
        let i = insts.index(a);
        let s = insts.constant_int(Scalar::I64, s);
        let term = insts.binary(BinaryOp::Mul, i, s);
        linear = insts.binary(BinaryOp::Add, linear, term);
    }
    let value = load_nibble(&mut insts, &views, 1, linear, x.numel(), signed);
    let p = param_offset(&mut insts, &params);
    let s = insts.load_indirect(
        &views,
        2,
        vec![IndirectIndex {
            index: p,
            stride: 1,
            limit: params.len as i64,
        }],
    );
    let mut q = insts.cast(value, y.elem);
    if zero_point.is_some() {
        let zp = load_nibble(
            &mut insts,
            &views,
            3,
            p,
            zero_point.as_ref().map_or(1, TensorRef::numel),
            signed,
        );
        let zp = insts.cast(zp, y.elem);
        q = insts.binary(BinaryOp::Sub, q, zp);
    }
    let out = insts.binary(BinaryOp::Mul, q, s);
    Ok(vec![Kernel {
        name: ctx.kernel_name(op, 0),
        body: KernelBody::Loop(LoopKernel {
            outer: x_shape,
            inner: Vec::new(),
            views,
            stages: vec![Stage::Map {
                insts: insts.finish(),
                stores: vec![Store::new(0, out)],
            }],
        }),
    }])
}
