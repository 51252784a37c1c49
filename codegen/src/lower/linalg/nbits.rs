//! `memc.matmul_nbits`: one [`NBitsMatMul`] kernel reading the weight in the packed layout of
//! [`crate::nbits`], whose slots the plan writer fills from the model's weights ([`PackSpec`]).
//!
//! `A` is the planned (contiguous) `[..., M, K]` buffer read as `rows = numel / K` rows; `Y`
//! the same rows of `N`. Only the target's nbits activation types are supported (f32 on the
//! CPU; the `egraph` rules fuse nothing else). [`plan`] decides, before memory planning,
//! whether the product streams the weight or needs scratch for dequantized panels (the
//! target's `stream_rows`, [`crate::nbits::scratch_bytes_on`]).

use super::super::plan::{Form, OpPlan};
use super::super::{elem_type, unsupported, LowerCtx, LowerError, LowerResult};
use crate::kernel::{Kernel, KernelBody, MatView, NBitsMatMul, Region, Scalar};
use crate::nbits::{PackSpec, PackedPart};
use memc_ir::target::TargetInfo;
use memc_ir::{ElemType, Function, OpId};

/// The rows, `N` and `K` of the product `op` computes.
fn extents(func: &Function, op: OpId) -> Option<(u64, u64, u64)> {
    let data = func.op(op);
    let a = func.value_type(*data.operands.first()?).tensor()?;
    let k = a.static_shape()?.last().copied()?;
    let n = func
        .value_type(*data.results.first()?)
        .tensor()?
        .static_shape()?
        .last()
        .copied()?;
    Some((a.static_num_elements()? / k.max(1), n, k))
}

/// Plans `op` on `target`: its scratch bytes are the GEMM form's panels of the dequantized
/// weight, for products of more rows than the target streams.
pub fn plan(func: &Function, target: &TargetInfo, op: OpId) -> OpPlan {
    let scratch = extents(func, op).map_or(0, |(rows, n, k)| {
        crate::nbits::scratch_bytes_on(target, rows, n, k)
    });
    OpPlan::with_scratch(Form::NBits, scratch, "dequantized weight panels")
}

/// The model weight operand `index` of `op` names, `None` when the operand is absent.
fn weight_name(ctx: &LowerCtx, op: OpId, index: usize) -> Result<Option<String>, LowerError> {
    let Some(&value) = ctx.op(op).operands.get(index) else {
        return Ok(None);
    };
    if ctx.func.value_type(value).is_none() {
        return Ok(None);
    }
    let weight = ctx
        .weight_of(value)
        .and_then(|id| ctx.weights.get(id))
        .ok_or_else(|| unsupported(format!("operand {index} is not a constant weight")))?;
    Ok(Some(weight.name().to_string()))
}

/// Lowers `op`, planned with `scratch_bytes` of scratch (0: the product streams the weight).
pub fn matmul_nbits(ctx: &LowerCtx, op: OpId, scratch_bytes: u64) -> LowerResult {
    let a = ctx.input(op, 0)?;
    let out = ctx.result(op, 0)?;
    let computes = |elem: Scalar| ctx.target.nbits.activation_types.contains(&elem_type(elem));
    if !computes(a.elem) || !computes(out.elem) {
        return Err(unsupported(format!(
            "memc.matmul_nbits in {}: the packed kernels compute in f32",
            out.elem.name()
        )));
    }
    let attr = |name: &str| u64::try_from(ctx.attr_int(op, name)).ok();
    let (k, n) = match (attr("K"), attr("N")) {
        (Some(k), Some(n)) if k > 0 && n > 0 => (k, n),
        _ => return Err(unsupported("K and N must be positive")),
    };
    let trans_b = ctx.attr_int(op, "trans_b") == 1;
    let axis =
        memc_ir::ops::normalize_axis(ctx.attr_int(op, "axis"), 2).map_err(unsupported)? as u64;
    let block_size = attr("block_size").unwrap_or(0);
    let b_value = ctx.op(op).operands[1];
    let elem = ctx
        .func
        .value_type(b_value)
        .tensor()
        .map(|t| t.elem)
        .ok_or_else(|| unsupported("B is not a tensor"))?;
    let (bits, signed) = match elem {
        ElemType::I4 => (4, true),
        ElemType::U4 => (4, false),
        ElemType::I8 => (8, true),
        ElemType::U8 => (8, false),
        other => {
            return Err(unsupported(format!(
                "a {} weight (4- and 8-bit integers only)",
                other.mlir_name()
            )))
        }
    };
    let scales_value = ctx.op(op).operands[2];
    let per_tensor = ctx
        .func
        .value_type(scales_value)
        .tensor()
        .is_some_and(|t| t.static_num_elements() == Some(1) && t.rank() <= 1);
    let block = memc_ir::ops::nbits_k_block(k, trans_b, axis as usize, block_size, per_tensor)
        .ok_or_else(|| {
            unsupported(
                "the scale changes along every value of K (per-axis along K or blocked along N)",
            )
        })?;
    let (Some(b), Some(scales)) = (weight_name(ctx, op, 1)?, weight_name(ctx, op, 2)?) else {
        return Err(unsupported("B and its scales must be constant weights"));
    };
    let zero_points = weight_name(ctx, op, 3)?;
    if ctx.target.nbits.layout != crate::nbits::LAYOUT {
        return Err(unsupported(format!(
            "the target's low-bit kernels read the packed layout `{}`; memc packs only `{}`",
            ctx.target.nbits.layout,
            crate::nbits::LAYOUT
        )));
    }
    let spec = |part| PackSpec {
        layout: ctx.target.nbits.layout.to_string(),
        part,
        b: b.clone(),
        scales: scales.clone(),
        zero_points: zero_points.clone(),
        k,
        n,
        bits,
        signed,
        trans_b,
        axis,
        block_size,
        per_tensor,
        block,
    };
    let bias = ctx
        .operand(op, 4)?
        .map(|t| (t.region, t.byte_offset as u64));
    let rows = a.numel() / k;
    let scratch = match scratch_bytes {
        0 => None,
        _ => Some(
            ctx.scratch(op)
                .ok_or_else(|| {
                    unsupported("no scratch memory was planned for the many-rows product")
                })?
                .byte_offset as u64,
        ),
    };
    let rows_view = |region: Region, byte_offset: i64, cols: u64| MatView {
        region,
        byte_offset,
        batch_strides: Vec::new(),
        row_stride: cols as i64,
        col_stride: 1,
    };
    let kernel = NBitsMatMul {
        batch: Vec::new(),
        m: rows,
        n,
        k,
        bits,
        signed,
        block,
        a: rows_view(a.region, a.byte_offset, k),
        c: rows_view(out.region, out.byte_offset, n),
        b: ctx.packed_slot(spec(PackedPart::Values)),
        scales: ctx.packed_slot(spec(PackedPart::Scales)),
        zero_points: zero_points
            .is_some()
            .then(|| ctx.packed_slot(spec(PackedPart::ZeroPoints))),
        bias,
        scratch,
    };
    Ok(vec![Kernel {
        name: ctx.kernel_name(op, 0),
        body: KernelBody::NBits(kernel),
    }])
}
