//! Pad: the output walked in order; output index `o` along a padded axis reads input
//! coordinate `o - pad_begin`. Constant mode reads a guarded view whose pad value is the
//! constant (or selects a loaded runtime constant where the guards fail); edge mode clamps
//! the coordinate, reflect folds it with period `2 (n - 1)`, wrap takes it modulo `n`, each
//! through a `LoadIndirect`. Negative pads crop, as the ONNX spec says.

use super::super::build::{guard, Insts};
use super::super::{unsupported, LowerCtx, LowerResult};
use super::common::{
    const_ints, loop_kernel, map_stage, norm_axis, operand_absent_or_empty, weight_operand,
    IndexMath,
};
use super::{dense, fill, output, scalar_view};
use crate::kernel::{BinaryOp, IndirectIndex};
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
    let Some(out) = output(ctx, op, 0)? else { return Ok(Vec::new()) };
    let rank = input.rank();
    let mode = match ctx.attr_str(op, "mode").unwrap_or("constant") {
        "constant" => Mode::Constant,
        "edge" => Mode::Edge,
        "reflect" => Mode::Reflect,
        "wrap" => Mode::Wrap,
        other => return Err(unsupported(format!("Pad mode `{other}`"))),
    };
    let pads = const_ints(ctx, op, 1).ok_or_else(|| unsupported("Pad pads must be compile-time constants"))?;
    let axes: Vec<usize> = if operand_absent_or_empty(ctx, op, 3)? {
        (0..rank).collect()
    } else {
        const_ints(ctx, op, 3)
            .ok_or_else(|| unsupported("Pad axes must be compile-time constants"))?
            .iter()
            .map(|&a| norm_axis(a, rank))
            .collect::<Result<_, _>>()?
    };
    if pads.len() != 2 * axes.len() {
        return Err(unsupported("Pad pads do not have two entries per axis"));
    }
    let mut begin = vec![0i64; rank];
    for (i, &a) in axes.iter().enumerate() {
        begin[a] = pads[i];
    }
    let own = input.strides();
    let n_axes = rank;

    // The constant: compile-time bits, a runtime scalar, or 0.
    let constant_bits = if mode != Mode::Constant || operand_absent_or_empty(ctx, op, 2)? {
        Some(0)
    } else {
        weight_operand(ctx, op, 2)
            .and_then(|(elem, bytes)| super::common::const_bits_of_bytes(elem, bytes, out.elem))
    };
    let constant_as_pad = |bits: u64| -> u64 {
        if out.elem.is_float() {
            bits
        } else if out.elem.is_unsigned_int() {
            (bits as f64).to_bits()
        } else {
            (bits as i64 as f64).to_bits()
        }
    };

    if input.numel() == 0 {
        return match (mode, constant_bits) {
            (Mode::Constant, Some(bits)) => Ok(vec![fill(ctx.kernel_name(op, 0), &out, bits)]),
            _ => Err(unsupported("Pad of an empty input needs a compile-time constant")),
        };
    }

    let mut views = vec![dense(&out)];
    let mut insts = Insts::new();
    let value = match mode {
        Mode::Constant => {
            let mut view = input.view_with(own.clone());
            view.byte_offset -= (0..rank).map(|a| begin[a] * own[a]).sum::<i64>() * input.elem.size() as i64;
            let mut conds = None;
            for a in 0..rank {
                let n = input.shape[a] as i64;
                let (b, e) = (begin[a], out.shape[a] as i64 - n - begin[a]);
                if b > 0 || e > 0 {
                    let mut coeffs = vec![0i64; n_axes];
                    coeffs[a] = 1;
                    view.guards.push(guard(coeffs, -b, n));
                    if constant_bits.is_none() {
                        let i = insts.index(a);
                        let c = insts.add_c(i, -b);
                        let inside = insts.in_range_c(c, 0, n);
                        conds = Some(insts.and(conds, inside));
                    }
                }
            }
            match constant_bits {
                Some(bits) => {
                    view.pad = constant_as_pad(bits);
                    views.push(view);
                    insts.load(&views, 1)
                }
                None => {
                    views.push(view);
                    let x = insts.load(&views, 1);
                    let constant = ctx.input(op, 2)?;
                    views.push(scalar_view(&constant, n_axes));
                    let c = insts.load(&views, 2);
                    match conds {
                        Some(inside) => insts.select(inside, x, c),
                        None => x,
                    }
                }
            }
        }
        Mode::Edge | Mode::Reflect | Mode::Wrap => {
            let mut strides = own.clone();
            let mut terms = Vec::new();
            for a in 0..rank {
                let n = input.shape[a] as i64;
                if begin[a] == 0 && out.shape[a] as i64 <= n {
                    continue;
                }
                strides[a] = 0;
                let i = insts.index(a);
                let c = insts.add_c(i, -begin[a]);
                let c = match mode {
                    Mode::Edge => insts.clamp_c(c, 0, n - 1),
                    Mode::Wrap => {
                        let nc = insts.i64c(n);
                        insts.binary(BinaryOp::FloorMod, c, nc)
                    }
                    _ if n == 1 => insts.i64c(0),
                    _ => {
                        let period = 2 * (n - 1);
                        let pc = insts.i64c(period);
                        let m = insts.binary(BinaryOp::FloorMod, c, pc);
                        let nc = insts.i64c(n);
                        let low = insts.binary(BinaryOp::Lt, m, nc);
                        let neg = insts.unary(crate::kernel::UnaryOp::Neg, m);
                        let folded = insts.add_c(neg, period);
                        insts.select(low, m, folded)
                    }
                };
                terms.push(IndirectIndex { index: c, stride: own[a], limit: n });
            }
            views.push(input.view_with(strides));
            insts.load_indirect(&views, 1, terms)
        }
    };
    Ok(vec![loop_kernel(ctx.kernel_name(op, 0), out.shape.clone(), Vec::new(), views, vec![map_stage(insts, 0, value)])])
}
