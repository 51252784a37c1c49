//! Pad: the output walked in order; output index `o` along a padded axis reads input
//! coordinate `o - pad_begin`. Constant mode reads a guarded view whose pad value is the
//! constant (or selects a loaded runtime constant where the guards fail); edge mode clamps
//! the coordinate, reflect folds it with period `2 (n - 1)`, wrap takes it modulo `n`, each
//! through a `LoadIndirect`. Negative pads crop, as the ONNX spec says.
//!
//! CenterCropPad is a constant Pad by zero whose begin pads center the result (negative where
//! it crops).

use super::super::build::TensorRef;
use super::super::build::{guard, Insts};
use super::super::{unsupported, LowerCtx, LowerResult};
use super::common::{
    const_bits_of_bytes, loop_kernel, map_stage, norm_axis, operand_absent_or_empty, operand_elem,
    IndexMath,
};
use super::{dense, fill, output};
use crate::kernel::{BinaryOp, IndirectIndex, InstId, InstKind, Kernel, Scalar, UnaryOp};
use memc_ir::OpId;

#[derive(Copy, Clone, PartialEq)]
enum Mode {
    Constant,
    Edge,
    Reflect,
    Wrap,
}

pub fn pad(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let rank = input.rank();
    let mode = match ctx.attr_str(op, "mode").unwrap_or_default() {
        "constant" => Mode::Constant,
        "edge" => Mode::Edge,
        "reflect" => Mode::Reflect,
        "wrap" => Mode::Wrap,
        other => return Err(unsupported(format!("Pad mode `{other}`"))),
    };
    let n_entries = ctx.input(op, 1)?.numel() as usize;
    // The padded axes when known at compile time.
    let const_axes: Option<Vec<usize>> = if operand_absent_or_empty(ctx, op, 3)? {
        Some((0..rank).collect())
    } else {
        match ctx.const_ints(op, 3) {
            Some(axes) => Some(
                axes.iter()
                    .map(|&a| norm_axis(a, rank))
                    .collect::<Result<_, _>>()?,
            ),
            None => None,
        }
    };
    let n_axes_padded = const_axes.as_ref().map_or(n_entries / 2, Vec::len);
    if n_entries != 2 * n_axes_padded {
        return Err(unsupported("Pad pads do not have two entries per axis"));
    }
    let own = input.strides();

    // The constant: compile-time bits (0 without the operand), or `None` for a runtime value.
    let constant_bits = if mode != Mode::Constant || operand_absent_or_empty(ctx, op, 2)? {
        Some(0)
    } else {
        ctx.weight_constant(op, 2)
            .and_then(|(elem, bytes)| const_bits_of_bytes(elem, bytes, out.elem))
    };
    if input.numel() == 0 {
        return match (mode, constant_bits) {
            (Mode::Constant, Some(bits)) => Ok(vec![fill(ctx.kernel_name(op, 0), &out, bits)]),
            _ => Err(unsupported(
                "Pad of an empty input needs a compile-time constant",
            )),
        };
    }
    let const_pads = ctx.const_ints(op, 1);
    if let (Mode::Constant, Some(bits), Some(pads), Some(axes)) =
        (mode, constant_bits, &const_pads, &const_axes)
    {
        let mut begin = vec![0i64; rank];
        for (i, &a) in axes.iter().enumerate() {
            begin[a] = pads[i];
        }
        return Ok(vec![constant_guarded(
            ctx.kernel_name(op, 0),
            &input,
            &out,
            &begin,
            bits,
        )]);
    }

    let mut views = vec![dense(&out)];
    let mut insts = Insts::new();
    // The begin pad of every axis that may be padded.
    let mut begin: Vec<Option<InstId>> = vec![None; rank];
    for j in 0..n_axes_padded {
        let pad = operand_elem(ctx, op, 1, j, Scalar::I64, &mut views, &mut insts, rank)?;
        match &const_axes {
            Some(axes) => begin[axes[j]] = Some(pad),
            None => {
                let a = operand_elem(ctx, op, 3, j, Scalar::I64, &mut views, &mut insts, rank)?;
                let zero = insts.i64c(0);
                let negative = insts.binary(BinaryOp::Lt, a, zero);
                let wrapped = insts.add_c(a, rank as i64);
                let a = insts.select(negative, wrapped, a);
                for (d, slot) in begin.iter_mut().enumerate() {
                    let dc = insts.i64c(d as i64);
                    let hit = insts.binary(BinaryOp::Eq, a, dc);
                    let prev = slot.unwrap_or(zero);
                    *slot = Some(insts.select(hit, pad, prev));
                }
            }
        }
    }
    let mut strides = own.clone();
    let mut terms = Vec::new();
    let mut inside: Option<InstId> = None;
    for a in 0..rank {
        let Some(b) = begin[a] else { continue };
        let n = input.shape[a] as i64;
        strides[a] = 0;
        let i = insts.index(a);
        let c = insts.binary(BinaryOp::Sub, i, b);
        let c = match mode {
            Mode::Constant => {
                let ok = insts.in_range_c(c, 0, n);
                inside = Some(insts.and(inside, ok));
                insts.clamp_c(c, 0, n - 1)
            }
            Mode::Edge => insts.clamp_c(c, 0, n - 1),
            Mode::Wrap => {
                let nc = insts.i64c(n);
                insts.binary(BinaryOp::FloorMod, c, nc)
            }
            Mode::Reflect if n == 1 => insts.i64c(0),
            Mode::Reflect => {
                let period = 2 * (n - 1);
                let pc = insts.i64c(period);
                let m = insts.binary(BinaryOp::FloorMod, c, pc);
                let nc = insts.i64c(n);
                let low = insts.binary(BinaryOp::Lt, m, nc);
                let neg = insts.unary(UnaryOp::Neg, m);
                let folded = insts.add_c(neg, period);
                insts.select(low, m, folded)
            }
        };
        terms.push(IndirectIndex {
            index: c,
            stride: own[a],
            limit: n,
        });
    }
    views.push(input.view_with(strides));
    let x = insts.load_indirect(&views, (views.len() - 1) as u32, terms);
    let value = match (mode, inside) {
        (Mode::Constant, Some(inside)) => {
            let constant = match constant_bits {
                Some(bits) => insts.push(out.elem, InstKind::Const { bits }),
                None => operand_elem(ctx, op, 2, 0, out.elem, &mut views, &mut insts, rank)?,
            };
            insts.select(inside, x, constant)
        }
        _ => x,
    };
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )])
}

/// Constant-mode Pad with compile-time pads and value: a guarded view whose pad is the value.
fn constant_guarded(
    name: String,
    input: &TensorRef,
    out: &TensorRef,
    begin: &[i64],
    bits: u64,
) -> Kernel {
    let rank = input.rank();
    let own = input.strides();
    let mut view = input.view_with(own.clone());
    view.byte_offset -=
        (0..rank).map(|a| begin[a] * own[a]).sum::<i64>() * input.elem.size() as i64;
    for a in 0..rank {
        let n = input.shape[a] as i64;
        let end = out.shape[a] as i64 - n - begin[a];
        if begin[a] > 0 || end > 0 {
            let mut coeffs = vec![0i64; rank];
            coeffs[a] = 1;
            view.guards.push(guard(coeffs, -begin[a], n));
        }
    }
    // The view's pad is `f64` bits converted to the element type.
    view.pad = if out.elem.is_float() {
        bits
    } else if out.elem.is_unsigned_int() {
        (bits as f64).to_bits()
    } else {
        (bits as i64 as f64).to_bits()
    };
    let views = vec![dense(out), view];
    let mut insts = Insts::new();
    let value = insts.load(&views, 1);
    loop_kernel(
        name,
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )
}

/// CenterCropPad: a constant-mode Pad by zero whose begin pad on each axis is half the growth
/// (rounded down), negative where the axis is cropped (the ONNX reference's centering).
pub fn center_crop_pad(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let input = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    if input.numel() == 0 {
        return Ok(vec![fill(ctx.kernel_name(op, 0), &out, 0)]);
    }
    let begin: Vec<i64> = input
        .shape
        .iter()
        .zip(&out.shape)
        .map(|(&n, &t)| {
            let (n, t) = (n as i64, t as i64);
            if t >= n {
                (t - n) / 2
            } else {
                -((n - t) / 2)
            }
        })
        .collect();
    Ok(vec![constant_guarded(
        ctx.kernel_name(op, 0),
        &input,
        &out,
        &begin,
        0,
    )])
}
