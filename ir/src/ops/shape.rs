//! Shape functions: result types computed from operand types and attributes.
//!
//! Each returns `Ok(Some(types))` when it can tell, `Ok(None)` when the result depends on
//! something it cannot see (operand values), and `Err` when the operands cannot be combined.
//! Symbolic dims follow numpy broadcasting as far as names allow: a named dim against `1` keeps
//! the name, two different names give an unknown dim.

use super::OpCtx;
use crate::{Dim, ElemType, TensorType};

type ShapeResult = Result<Option<Vec<TensorType>>, String>;

fn operand<'a>(ctx: &OpCtx<'a>, index: usize) -> Result<&'a TensorType, String> {
    ctx.operand_type(index)
        .ok_or_else(|| format!("operand #{index} is missing"))
}

/// The result has the type of the first operand.
pub fn same_as_first(ctx: &OpCtx) -> ShapeResult {
    Ok(Some(vec![operand(ctx, 0)?.clone()]))
}

/// Broadcasts two dims; `Err` when they are static, different and neither is 1.
pub fn broadcast_dim(a: &Dim, b: &Dim) -> Result<Dim, String> {
    Ok(match (a, b) {
        (a, b) if a.provably_equal(b) => a.clone(),
        (Dim::Static(1), other) | (other, Dim::Static(1)) => other.clone(),
        (Dim::Static(x), Dim::Static(y)) => {
            return Err(format!("dims {x} and {y} do not broadcast"));
        }
        (Dim::Static(n), _) | (_, Dim::Static(n)) => Dim::Static(*n),
        _ => Dim::Unknown,
    })
}

/// Numpy multidirectional broadcasting of dim lists.
pub fn broadcast_dims(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, String> {
    let rank = a.len().max(b.len());
    let one = Dim::Static(1);
    (0..rank)
        .map(|i| {
            let da = (i + a.len()).checked_sub(rank).map_or(&one, |j| &a[j]);
            let db = (i + b.len()).checked_sub(rank).map_or(&one, |j| &b[j]);
            broadcast_dim(da, db)
        })
        .collect()
}

fn broadcast_operands(ctx: &OpCtx, from: usize) -> Result<Vec<Dim>, String> {
    let mut dims = operand(ctx, from)?.dims.clone();
    for i in from + 1..ctx.n_operands() {
        dims = broadcast_dims(&dims, &operand(ctx, i)?.dims)
            .map_err(|e| format!("operands do not broadcast: {e}"))?;
    }
    Ok(dims)
}

/// Elementwise ops over all operands; the element type is the first operand's.
pub fn broadcast(ctx: &OpCtx) -> ShapeResult {
    let elem = operand(ctx, 0)?.elem;
    Ok(Some(vec![TensorType::new(
        elem,
        broadcast_operands(ctx, 0)?,
    )]))
}

/// Comparisons: broadcast, bool result.
pub fn broadcast_to_bool(ctx: &OpCtx) -> ShapeResult {
    Ok(Some(vec![TensorType::new(
        ElemType::Bool,
        broadcast_operands(ctx, 0)?,
    )]))
}

/// `Where(cond, X, Y)`: broadcast of all three, element type of `X`.
pub fn broadcast_where(ctx: &OpCtx) -> ShapeResult {
    let elem = operand(ctx, 1)?.elem;
    Ok(Some(vec![TensorType::new(
        elem,
        broadcast_operands(ctx, 0)?,
    )]))
}

/// `Cast`: the input's shape with the element type `to`.
pub fn cast(ctx: &OpCtx) -> ShapeResult {
    let Some(to) = ctx.attr("to").and_then(|a| a.as_elem_type()) else {
        return Ok(None);
    };
    Ok(Some(vec![TensorType::new(
        to,
        operand(ctx, 0)?.dims.clone(),
    )]))
}

/// `Transpose`: dims permuted by `perm` (reversed when absent).
pub fn transpose(ctx: &OpCtx) -> ShapeResult {
    let input = operand(ctx, 0)?;
    let perm = super::verify::transpose_perm(ctx, input.rank())?;
    let dims = perm.iter().map(|&p| input.dims[p].clone()).collect();
    Ok(Some(vec![TensorType::new(input.elem, dims)]))
}

/// `MatMul` with numpy semantics: 1-d operands are promoted and the added dim removed, batch
/// dims broadcast.
pub fn matmul(ctx: &OpCtx) -> ShapeResult {
    let a = operand(ctx, 0)?;
    let b = operand(ctx, 1)?;
    if a.rank() == 0 || b.rank() == 0 {
        return Err("MatMul operands must have rank 1 or more".to_string());
    }
    let mut a_dims = a.dims.clone();
    let mut b_dims = b.dims.clone();
    let a_vector = a_dims.len() == 1;
    let b_vector = b_dims.len() == 1;
    if a_vector {
        a_dims.insert(0, Dim::Static(1));
    }
    if b_vector {
        b_dims.push(Dim::Static(1));
    }
    let k_a = &a_dims[a_dims.len() - 1];
    let k_b = &b_dims[b_dims.len() - 2];
    if let (Dim::Static(x), Dim::Static(y)) = (k_a, k_b) {
        if x != y {
            return Err(format!("MatMul inner dims differ: {x} and {y}"));
        }
    }
    let batch = broadcast_dims(&a_dims[..a_dims.len() - 2], &b_dims[..b_dims.len() - 2])
        .map_err(|e| format!("MatMul batch dims do not broadcast: {e}"))?;
    let mut dims = batch;
    if !a_vector {
        dims.push(a_dims[a_dims.len() - 2].clone());
    }
    if !b_vector {
        dims.push(b_dims[b_dims.len() - 1].clone());
    }
    Ok(Some(vec![TensorType::new(a.elem, dims)]))
}
