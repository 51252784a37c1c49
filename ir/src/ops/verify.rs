//! Verifier hooks: rules of single ops beyond counts, element types and attribute kinds.
//!
//! Each hook returns a sentence saying what is wrong. Hooks run only on ops whose operand and
//! result counts already match the op table, so they may index declared operands.

use super::OpCtx;
use crate::{Dim, TensorType};

type Check = Result<(), String>;

fn operand<'a>(ctx: &OpCtx<'a>, index: usize) -> Result<&'a TensorType, String> {
    ctx.operand_type(index)
        .ok_or_else(|| format!("operand #{index} is missing"))
}

/// Normalizes `axis` (negative counts from the end) against `rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = i64::try_from(rank).map_err(|_| "the rank is too large".to_string())?;
    if r == 0 {
        return Err(format!("axis {axis} needs an input of rank 1 or more"));
    }
    let normalized = if axis < 0 {
        axis.checked_add(r)
    } else {
        Some(axis)
    };
    match normalized {
        Some(a) if (0..r).contains(&a) => Ok(a as usize),
        _ => Err(format!(
            "axis {axis} is out of range for rank {rank} (expected -{rank}..{rank})"
        )),
    }
}

/// `axis` (or its default) is within the first operand's rank.
pub fn axis_in_range(ctx: &OpCtx) -> Check {
    let rank = operand(ctx, 0)?.rank();
    if let Some(axis) = ctx.int_attr("axis") {
        normalize_axis(axis, rank)?;
    }
    Ok(())
}

/// The permutation of a Transpose: `perm`, or the reversed dims when absent.
pub fn transpose_perm(ctx: &OpCtx, rank: usize) -> Result<Vec<usize>, String> {
    let Some(attr) = ctx.attr("perm") else {
        return Ok((0..rank).rev().collect());
    };
    let perm = attr
        .as_ints()
        .ok_or("`perm` must be an array of integers")?;
    if perm.len() != rank {
        return Err(format!(
            "`perm` has {} entries but the input has rank {rank}",
            perm.len()
        ));
    }
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(rank);
    for &p in &perm {
        let in_range = usize::try_from(p).ok().filter(|&p| p < rank);
        match in_range {
            Some(p) if !seen[p] => {
                seen[p] = true;
                out.push(p);
            }
            _ => return Err(format!("`perm` {perm:?} is not a permutation of 0..{rank}")),
        }
    }
    Ok(out)
}

pub fn transpose(ctx: &OpCtx) -> Check {
    transpose_perm(ctx, operand(ctx, 0)?.rank()).map(|_| ())
}

/// Gemm: 2-d `A` and `B` whose inner dims (after transA/transB) match.
pub fn gemm(ctx: &OpCtx) -> Check {
    let a = operand(ctx, 0)?;
    let b = operand(ctx, 1)?;
    if a.rank() != 2 || b.rank() != 2 {
        return Err(format!(
            "Gemm needs 2-d A and B, got ranks {} and {}",
            a.rank(),
            b.rank()
        ));
    }
    let k_a = &a.dims[if ctx.int_attr("transA") == Some(1) {
        0
    } else {
        1
    }];
    let k_b = &b.dims[if ctx.int_attr("transB") == Some(1) {
        1
    } else {
        0
    }];
    if let (Dim::Static(x), Dim::Static(y)) = (k_a, k_b) {
        if x != y {
            return Err(format!("Gemm inner dims differ: {x} and {y}"));
        }
    }
    Ok(())
}

/// Reshape: the shape operand is 1-d; with all-static types, element counts agree.
pub fn reshape(ctx: &OpCtx) -> Check {
    let shape = operand(ctx, 1)?;
    if shape.rank() != 1 {
        return Err(format!(
            "the shape operand must be 1-d, got rank {}",
            shape.rank()
        ));
    }
    let input = operand(ctx, 0)?;
    if let (Some(n_in), Some(n_out)) = (
        input.static_num_elements(),
        ctx.result_type(0).and_then(|t| t.static_num_elements()),
    ) {
        if n_in != n_out {
            return Err(format!(
                "reshape changes the element count from {n_in} to {n_out}"
            ));
        }
    }
    Ok(())
}

/// Flatten: `axis` in `-rank..=rank`.
pub fn flatten(ctx: &OpCtx) -> Check {
    let rank = operand(ctx, 0)?.rank() as i64;
    let axis = ctx.int_attr("axis").unwrap_or(1);
    if axis < -rank || axis > rank {
        return Err(format!(
            "axis {axis} is out of range for rank {rank} (expected -{rank}..={rank})"
        ));
    }
    Ok(())
}

/// Gelu: `approximate` is `none` or `tanh`.
pub fn gelu(ctx: &OpCtx) -> Check {
    match ctx.attr("approximate").and_then(|a| a.as_str()) {
        None | Some("none") | Some("tanh") => Ok(()),
        Some(other) => Err(format!(
            "`approximate` must be \"none\" or \"tanh\", got {other:?}"
        )),
    }
}

/// DequantizeLinear and QuantizeLinear: scale is a scalar (per tensor), 1-d along `axis` (per
/// axis), or of the input's rank (blocked, with `block_size` > 0); zero point matches scale.
pub fn quantize_linear(ctx: &OpCtx) -> Check {
    let x = operand(ctx, 0)?;
    let scale = operand(ctx, 1)?;
    let block_size = ctx.int_attr("block_size").unwrap_or(0);
    if block_size < 0 {
        return Err(format!(
            "`block_size` must not be negative, got {block_size}"
        ));
    }
    if block_size > 0 {
        if scale.rank() != x.rank() {
            return Err(format!(
                "blocked quantization needs a scale of rank {} (the input's), got rank {}",
                x.rank(),
                scale.rank()
            ));
        }
    } else if scale.rank() > 1 {
        return Err(format!(
            "the scale must be a scalar or 1-d without `block_size`, got rank {}",
            scale.rank()
        ));
    }
    if scale.rank() >= 1 {
        normalize_axis(ctx.int_attr("axis").unwrap_or(1), x.rank())?;
    }
    if let Some(zero_point) = ctx.operand_type(2) {
        let one_element = |t: &crate::TensorType| t.static_num_elements() == Some(1);
        if zero_point.dims != scale.dims && !(one_element(zero_point) && one_element(scale)) {
            return Err("the zero point must have the scale's shape".to_string());
        }
    }
    Ok(())
}
