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

/// A scatter's `reduction`: `none`, `add`, `mul`, `max` or `min` (ScatterElements, ScatterND).
pub fn scatter_reduction(ctx: &OpCtx) -> Check {
    match ctx.str_attr("reduction") {
        Some("none" | "add" | "mul" | "max" | "min") | None => Ok(()),
        Some(other) => Err(format!(
            "`reduction` is \"{other}\" (expected \"none\", \"add\", \"mul\", \"max\" or \"min\")"
        )),
    }
}

/// `onnx.ScatterElements`: `axis` within the data's rank and a known `reduction`.
pub fn scatter_elements(ctx: &OpCtx) -> Check {
    axis_in_range(ctx)?;
    scatter_reduction(ctx)
}

/// `onnx.TensorScatter`: `axis` within the cache's rank and not the batch axis 0, `mode`
/// `linear` or `circular`.
pub fn tensor_scatter(ctx: &OpCtx) -> Check {
    let rank = operand(ctx, 0)?.rank();
    if let Some(axis) = ctx.int_attr("axis") {
        if normalize_axis(axis, rank)? == 0 {
            return Err(format!(
                "axis {axis} is the batch axis 0; TensorScatter writes along a later axis"
            ));
        }
    }
    match ctx.str_attr("mode") {
        Some("linear" | "circular") | None => Ok(()),
        Some(other) => Err(format!(
            "`mode` is \"{other}\" (expected \"linear\" or \"circular\")"
        )),
    }
}

/// `ms.InPlaceAccumulatorV2`: the value has the buffer's shape, the overwrite flag one element,
/// and the buffer is a graph input (the persistent gradient buffer; see `crate::state`).
pub fn in_place_accumulator(ctx: &OpCtx) -> Check {
    let buffer = operand(ctx, 0)?;
    let value = operand(ctx, 1)?;
    let differ = buffer.rank() != value.rank()
        || buffer
            .dims
            .iter()
            .zip(&value.dims)
            .any(|(a, b)| matches!((a, b), (Dim::Static(x), Dim::Static(y)) if x != y));
    if differ {
        return Err(format!(
            "the value ({value}) must have the accumulation buffer's shape ({buffer})"
        ));
    }
    if let Some(flag) = ctx.operand_type(2) {
        if flag.static_num_elements().is_some_and(|n| n != 1) {
            return Err(format!(
                "the overwrite flag must have one element, not {flag}"
            ));
        }
    }
    if !ctx.func.args().contains(&ctx.operands()[0]) {
        return Err("the accumulation buffer (operand 0) must be a graph input: the gradient buffer that persists from one training step to the next".to_string());
    }
    Ok(())
}

/// `memc.accumulate_gemm`: 2-d A and B whose product (after `transA`/`transB`) has the
/// buffer's shape.
pub fn accumulate_gemm(ctx: &OpCtx) -> Check {
    let buffer = operand(ctx, 0)?;
    let (a, b) = (operand(ctx, 1)?, operand(ctx, 2)?);
    if a.rank() != 2 || b.rank() != 2 || buffer.rank() != 2 {
        return Err(format!(
            "A ({a}), B ({b}) and the buffer ({buffer}) must be 2-d"
        ));
    }
    let pick =
        |t: &TensorType, trans: bool, i: usize| t.dims[if trans { 1 - i } else { i }].clone();
    let trans_a = ctx.int_attr("transA").unwrap_or(0) != 0;
    let trans_b = ctx.int_attr("transB").unwrap_or(0) != 0;
    let differ = |x: Dim, y: &Dim| matches!((&x, y), (Dim::Static(p), Dim::Static(q)) if p != q);
    if differ(pick(a, trans_a, 1), &pick(b, trans_b, 0))
        || differ(pick(a, trans_a, 0), &buffer.dims[0])
        || differ(pick(b, trans_b, 1), &buffer.dims[1])
    {
        return Err(format!(
            "op(A) ({a}) x op(B) ({b}) does not have the buffer's shape ({buffer})"
        ));
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
    let axis = ctx.int_or_default("axis");
    if axis < -rank || axis > rank {
        return Err(format!(
            "axis {axis} is out of range for rank {rank} (expected -{rank}..={rank})"
        ));
    }
    Ok(())
}

/// Gelu: `approximate` is `none` or `tanh`.
pub fn gelu(ctx: &OpCtx) -> Check {
    match ctx.str_attr("approximate") {
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
    let block_size = ctx.int_or_default("block_size");
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
        normalize_axis(ctx.int_or_default("axis"), x.rank())?;
    }
    if let Some(zero_point) = ctx.operand_type(2) {
        let one_element = |t: &crate::TensorType| t.static_num_elements() == Some(1);
        if zero_point.dims != scale.dims && !(one_element(zero_point) && one_element(scale)) {
            return Err("the zero point must have the scale's shape".to_string());
        }
    }
    Ok(())
}

/// The run of `K` over which a `memc.matmul_nbits` weight's scale stays the same, or `None`
/// when it changes with every value of `K` (per-axis along `K`, or blocked along `N`): the
/// packed kernels need a run. `axis` is the quantized axis of the stored `B` (0 or 1),
/// `block_size` DequantizeLinear's (0: per axis), `per_tensor` whether there is one scale.
/// Blocked along `K` it is `min(block_size, K)`; per output column or per tensor it is `K`.
pub fn nbits_k_block(
    k: u64,
    trans_b: bool,
    axis: usize,
    block_size: u64,
    per_tensor: bool,
) -> Option<u64> {
    let k_axis = usize::from(trans_b);
    if per_tensor {
        return Some(k);
    }
    match (block_size, axis == k_axis) {
        (0, false) => Some(k),
        (bs, true) if bs > 0 => Some(bs.min(k)),
        _ => None,
    }
}

/// `memc.matmul_nbits`: `Y = A x op(dequantize(B)) + bias`, the fused form of
/// `MatMul(A, DequantizeLinear(B, scales, zero_points))` that the `egraph` pass creates.
///
/// The contract this hook checks:
/// - `B` is the constant quantized weight, 2-d with static dims, in the ONNX layout for now:
///   `[K, N]`, or `[N, K]` with `trans_b = 1` (a Transpose or Gemm's `transB` folded in). Its
///   element type is i4, ui4, i8 or ui8 and `bits` says how many bits that is.
/// - `K` and `N` are positive and are `B`'s dims; `A` is `[..., M, K]` (rank 1 or more) and
///   `Y` is `[..., M, N]` (the shape function's rule).
/// - `scales` and `zero_points` follow DequantizeLinear on `B` as stored, with `axis` (0 or 1,
///   or -2 or -1, a dim of the stored `B`) and `block_size`: per tensor, `scales` has one
///   element; per axis (`block_size = 0`), it is 1-d with `B`'s `axis` dim; blocked
///   (`block_size > 0`), it has `B`'s rank and dims, except the `axis` dim, which is
///   `ceil(dim / block_size)`. `zero_points`, when given, has the shape of `scales` and the
///   element type of `B` (absent: zero, as in ONNX).
/// - `bias`, when given, is 1-d `[N]`.
pub fn matmul_nbits(ctx: &OpCtx) -> Check {
    let a = operand(ctx, 0)?;
    let b = operand(ctx, 1)?;
    let scales = operand(ctx, 2)?;
    let Some(b_shape) = b.static_shape().filter(|s| s.len() == 2) else {
        return Err(format!("B must be 2-d with static dims, got {b}"));
    };
    let positive = |name: &str| match ctx.int_attr(name) {
        Some(v) if v > 0 => Ok(v as u64),
        other => Err(format!(
            "`{name}` must be a positive integer, got {other:?}"
        )),
    };
    let (k, n) = (positive("K")?, positive("N")?);
    let trans_b = ctx.int_or_default("trans_b");
    let expected = match trans_b {
        0 => [k, n],
        1 => [n, k],
        _ => return Err(format!("`trans_b` must be 0 or 1, got {trans_b}")),
    };
    if b_shape != expected {
        return Err(format!(
            "B is {b} but K = {k}, N = {n} and trans_b = {trans_b} need {:?}",
            expected
        ));
    }
    let bits = ctx.int_attr("bits").unwrap_or(0);
    if u32::try_from(bits).ok() != Some(b.elem.bits()) {
        return Err(format!(
            "`bits` is {bits} but B's element type {} has {} bits",
            b.elem.mlir_name(),
            b.elem.bits()
        ));
    }
    match a.dims.last() {
        None => return Err("A must have rank 1 or more".to_string()),
        Some(Dim::Static(a_k)) if *a_k != k => {
            return Err(format!("A's last dim is {a_k} but K is {k}"));
        }
        Some(_) => {}
    }
    let block_size = ctx.int_or_default("block_size");
    if block_size < 0 {
        return Err(format!(
            "`block_size` must not be negative, got {block_size}"
        ));
    }
    let axis = normalize_axis(ctx.int_or_default("axis"), 2)?;
    let scale_dims = scales.static_shape();
    let per_tensor = scales.static_num_elements() == Some(1) && scales.rank() <= 1;
    let fits = match (block_size, scale_dims) {
        (0, Some(dims)) => per_tensor || dims == [b_shape[axis]],
        (bs, Some(dims)) => {
            let mut want = b_shape.to_vec();
            want[axis] = want[axis].div_ceil(bs as u64);
            dims == want
        }
        (_, None) => false,
    };
    if !fits {
        return Err(format!(
            "scales of type {scales} fit neither per-tensor, per-axis (axis {axis}) nor \
             blocked (block_size {block_size}) quantization of B {b}"
        ));
    }
    if let Some(zero_points) = ctx.operand_type(3) {
        if zero_points.dims != scales.dims {
            return Err(format!(
                "zero points of type {zero_points} must have the shape of the scales {scales}"
            ));
        }
    }
    if let Some(bias) = ctx.operand_type(4) {
        if bias.static_shape().as_deref() != Some(&[n][..]) {
            return Err(format!("bias of type {bias} must be [{n}]"));
        }
    }
    Ok(())
}

// Training: activations, their gradients and softmax gradients.

/// BiasGelu, FastGelu and BiasGeluGrad_dX: the bias (the last operand, when present after the
/// first) is 1-d and as long as the first operand's last dim, as onnxruntime's kernels require.
pub fn bias_of_last_dim(ctx: &OpCtx) -> Check {
    let n = ctx.n_operands();
    if n < 2 {
        return Ok(());
    }
    let Some(bias) = ctx.operand_type(n - 1) else {
        return Ok(());
    };
    let x = operand(ctx, 0)?;
    let last = x.dims.last();
    let fits = bias.rank() == 1
        && match (last.and_then(Dim::as_static), bias.dims[0].as_static()) {
            (Some(a), Some(b)) => a == b,
            _ => last.is_some(),
        };
    if !fits {
        return Err(format!(
            "the bias of type {bias} must be 1-d and as long as the last dim of {x}"
        ));
    }
    Ok(())
}

/// Scale: the scale has exactly one element.
pub fn scale(ctx: &OpCtx) -> Check {
    let scale = operand(ctx, 1)?;
    match scale.static_num_elements() {
        Some(1) | None => Ok(()),
        Some(n) => Err(format!(
            "the scale of type {scale} must have one element, not {n}"
        )),
    }
}

/// SoftmaxGrad and LogSoftmaxGrad (both forms): `axis` is within the rank of `dY`, and `dY`
/// and `Y` have the same shape.
pub fn softmax_grad(ctx: &OpCtx) -> Check {
    axis_in_range(ctx)?;
    let dy = operand(ctx, 0)?;
    let y = operand(ctx, 1)?;
    let same =
        dy.rank() == y.rank()
            && dy.dims.iter().zip(&y.dims).all(
                |(a, b)| !matches!((a.as_static(), b.as_static()), (Some(p), Some(q)) if p != q),
            );
    if !same {
        return Err(format!(
            "dY of type {dy} and Y of type {y} must have the same shape"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Training: losses.
//
// The contract of the losses (`onnx.SoftmaxCrossEntropyLoss`, `onnx.NegativeLogLikelihoodLoss`
// and onnxruntime's `com.microsoft` forms). Scores (or log-probabilities) are `[N, C]` or
// `[N, C, d1, ..., dk]`; labels are `[N]` or `[N, d1, ..., dk]`, int32 or int64; weights, when
// given, are `[C]`. At each label position `p` with class `c = label[p]`, the loss is
// `-log_prob[n, c, d...] * weight[c]` (weight 1 without weights), or 0 when `c` is the ignore
// index. `none` returns the losses (the labels' shape), `sum` their sum, `mean` their sum divided
// by the sum of the weights of the positions not ignored.
//
// - NegativeLogLikelihoodLoss and its internal forms (`ms.NegativeLogLikelihoodLossInternal`,
//   `...Internal2`, whose ignore index is an optional int64 scalar operand) follow the ONNX
//   function body: without an ignore index nothing is ignored, a negative label counts from
//   the end, and a mean whose divisor is 0 is 0 / 0.
// - The softmax cross-entropy forms follow onnxruntime's kernels: the ignore index defaults
//   to -1, and a mean whose divisor is 0 is the sum, undivided. `ms.SoftmaxCrossEntropyLossGrad`
//   and `...InternalGrad` give `d_logits = (exp(log_prob) - onehot(label)) * weight[label] * g`
//   (0 at ignored positions), `g` being `dY[p]` for `none`, the scalar `dY` for `sum`, and
//   `dY / divisor` for `mean` (undivided when the divisor is 0); `InternalGrad` adds its
//   optional `bias` (of `log_prob`'s element count). The internal forms write `output_type`'s
//   element type when it is given.

/// The loss's `reduction`: `none`, `sum` or `mean`.
fn loss_reduction(ctx: &OpCtx) -> Check {
    match ctx.str_attr("reduction") {
        Some("none" | "sum" | "mean") | None => Ok(()),
        Some(other) => Err(format!(
            "`reduction` is \"{other}\" (expected \"none\", \"sum\" or \"mean\")"
        )),
    }
}

/// Whether two dims can be equal (both static and different is the only mismatch).
fn dims_agree(a: &Dim, b: &Dim) -> bool {
    !matches!((a, b), (Dim::Static(x), Dim::Static(y)) if x != y)
}

/// Scores (or log-probabilities) `[N, C, d...]` at operand `scores`, labels `[N, d...]` at
/// `labels`, optional weights `[C]` at `weights`.
fn loss_operands(ctx: &OpCtx, scores: usize, labels: usize, weights: usize) -> Check {
    let x = operand(ctx, scores)?;
    let l = operand(ctx, labels)?;
    if x.rank() < 2 {
        return Err(format!(
            "the scores have rank {} (expected [N, C] or [N, C, d1, ..., dk])",
            x.rank()
        ));
    }
    let mut expected = vec![x.dims[0].clone()];
    expected.extend(x.dims[2..].iter().cloned());
    let agree =
        l.rank() == expected.len() && l.dims.iter().zip(&expected).all(|(a, b)| dims_agree(a, b));
    if !agree {
        let shown: Vec<String> = expected.iter().map(ToString::to_string).collect();
        return Err(format!(
            "the labels have type {l} but scores {x} need labels of shape [{}]",
            shown.join(", ")
        ));
    }
    if let Some(w) = ctx.operand_type(weights) {
        if w.rank() != 1 || !dims_agree(&w.dims[0], &x.dims[1]) {
            return Err(format!(
                "the weights have type {w} but scores {x} need one weight per class ([{}])",
                x.dims[1]
            ));
        }
    }
    Ok(())
}

/// A runtime ignore index at operand `index`, when given, is a scalar.
fn ignore_index_operand(ctx: &OpCtx, index: usize) -> Check {
    match ctx.operand_type(index) {
        Some(t) if t.rank() != 0 => Err(format!(
            "the ignore_index operand has type {t} (expected a scalar)"
        )),
        _ => Ok(()),
    }
}

/// `output_type`, when given, names a float element type.
fn loss_output_type(ctx: &OpCtx) -> Check {
    match ctx.int_attr("output_type") {
        Some(code) if !crate::ElemType::from_onnx(code).is_some_and(|e| e.is_float()) => {
            Err(format!("`output_type` {code} is not a float element type"))
        }
        _ => Ok(()),
    }
}

/// The forward losses: see the section doc above.
pub fn loss(ctx: &OpCtx) -> Check {
    loss_reduction(ctx)?;
    loss_output_type(ctx)?;
    loss_operands(ctx, 0, 1, 2)?;
    ignore_index_operand(ctx, 3)
}

/// The softmax cross-entropy gradients: `dY` has the labels' shape for `none` and one element
/// for `sum` and `mean`.
pub fn loss_grad(ctx: &OpCtx) -> Check {
    loss_reduction(ctx)?;
    loss_output_type(ctx)?;
    loss_operands(ctx, 1, 2, 3)?;
    ignore_index_operand(ctx, 4)?;
    let dy = operand(ctx, 0)?;
    let label = operand(ctx, 2)?;
    if ctx.str_attr("reduction") == Some("none") {
        let agree = dy.rank() == label.rank()
            && dy
                .dims
                .iter()
                .zip(&label.dims)
                .all(|(a, b)| dims_agree(a, b));
        if !agree {
            return Err(format!(
                "dY has type {dy} but reduction \"none\" needs the labels' shape ({label})"
            ));
        }
    } else if dy.dims.iter().any(|d| !dims_agree(d, &Dim::Static(1))) {
        return Err(format!(
            "dY has type {dy} but a reduced loss's gradient is one element"
        ));
    }
    if let (Some(bias), Some(log_prob)) = (ctx.operand_type(5), ctx.operand_type(1)) {
        if let (Some(b), Some(l)) = (bias.static_num_elements(), log_prob.static_num_elements()) {
            if b != l {
                return Err(format!(
                    "the bias has type {bias} but log_prob {log_prob} has {l} elements"
                ));
            }
        }
    }
    Ok(())
}

/// `onnx.GridSample`: `mode` is linear, nearest or cubic (opset 16's bilinear and bicubic are
/// renamed by the importer) and `padding_mode` zeros, border or reflection.
pub fn grid_sample(ctx: &OpCtx) -> Check {
    let mode = ctx.str_attr("mode").unwrap_or_default();
    if !matches!(mode, "linear" | "nearest" | "cubic") {
        return Err(format!(
            "`mode` must be linear, nearest or cubic, got {mode:?}"
        ));
    }
    let padding = ctx.str_attr("padding_mode").unwrap_or_default();
    if !matches!(padding, "zeros" | "border" | "reflection") {
        return Err(format!(
            "`padding_mode` must be zeros, border or reflection, got {padding:?}"
        ));
    }
    Ok(())
}

/// Einsum: the equation parses for the operands' ranks (see `einsum.rs`) and each label's
/// sizes agree.
/// `RNN`, `GRU`, `LSTM`: every operand and attribute agrees with `X` ([`super::RecurrentDims`]).
pub fn recurrent(ctx: &OpCtx) -> Check {
    super::RecurrentDims::resolve(ctx).map(|_| ())
}

pub fn einsum(ctx: &OpCtx) -> Check {
    let eq = super::einsum::Einsum::of(ctx)?;
    let dims: Vec<&[Dim]> = (0..ctx.n_operands())
        .map(|i| operand(ctx, i).map(|t| t.dims.as_slice()))
        .collect::<Result<_, _>>()?;
    eq.label_dims(&dims).map(|_| ())
}

/// OneHot: `axis` in `[-rank - 1, rank]`, `depth` one element, `values` two (off, on).
pub fn one_hot(ctx: &OpCtx) -> Check {
    let rank = operand(ctx, 0)?.rank();
    normalize_axis(ctx.int_or_default("axis"), rank + 1)?;
    let elements = |index: usize| operand(ctx, index).map(TensorType::static_num_elements);
    if !matches!(operand(ctx, 1)?.rank(), 0 | 1) || elements(1)?.is_some_and(|n| n != 1) {
        return Err("`depth` must be a scalar or a tensor of one element".to_string());
    }
    if operand(ctx, 2)?.rank() != 1 || elements(2)?.is_some_and(|n| n != 2) {
        return Err(
            "`values` must be a 1-d tensor of two elements: [off_value, on_value]".to_string(),
        );
    }
    Ok(())
}

/// LpPool: `p` is at least 1.
pub fn lp_pool(ctx: &OpCtx) -> Check {
    let p = ctx.int_or_default("p");
    if p < 1 {
        return Err(format!("`p` must be 1 or more, got {p}"));
    }
    Ok(())
}

/// BitCast: `to` has the input's bit width, a whole number of bytes (memc keeps sub-byte
/// elements one per byte, so their bytes are not ONNX's).
pub fn bit_cast(ctx: &OpCtx) -> Check {
    let input = operand(ctx, 0)?.elem;
    let Some(to) = ctx.attr("to").and_then(|a| a.as_elem_type()) else {
        return Ok(());
    };
    if let Some(sub) = [input, to].into_iter().find(|e| e.is_sub_byte()) {
        return Err(format!(
            "BitCast of the sub-byte type {} is not supported",
            sub.mlir_name()
        ));
    }
    if input.bits() != to.bits() {
        return Err(format!(
            "`to` ({}) must have the input's bit width ({} has {} bits, {} has {})",
            to.mlir_name(),
            input.mlir_name(),
            input.bits(),
            to.mlir_name(),
            to.bits()
        ));
    }
    Ok(())
}

/// A 0/1 flag attribute (ONNX's ints used as booleans).
fn flag(ctx: &OpCtx, name: &str) -> Check {
    match ctx.int_attr(name) {
        Some(0 | 1) | None => Ok(()),
        Some(v) => Err(format!("`{name}` must be 0 or 1, got {v}")),
    }
}

/// The window functions (`HannWindow`, `HammingWindow`, `BlackmanWindow`): `periodic` is 0 or
/// 1 and `size` a scalar.
pub fn window_function(ctx: &OpCtx) -> Check {
    flag(ctx, "periodic")?;
    match ctx.operand_type(0) {
        Some(size) if size.rank() != 0 => {
            Err(format!("`size` must be a scalar, got rank {}", size.rank()))
        }
        _ => Ok(()),
    }
}

/// `onnx.DFT`: `inverse` and `onesided` are 0 or 1; `dft_length` and `axis` are scalars; the
/// input is at least 2-d with a last dim of 1 (real) or 2 (complex).
pub fn dft(ctx: &OpCtx) -> Check {
    flag(ctx, "inverse")?;
    flag(ctx, "onesided")?;
    for (index, name) in [(1, "dft_length"), (2, "axis")] {
        if let Some(ty) = ctx.operand_type(index) {
            if ty.rank() != 0 {
                return Err(format!("`{name}` must be a scalar, got rank {}", ty.rank()));
            }
        }
    }
    if let Some(input) = ctx.operand_type(0) {
        complex_last_dim(input, "input")?;
    }
    Ok(())
}

/// `onnx.STFT`: `onesided` is 0 or 1; the signal is `(batch, length, 1 or 2)`, `frame_step`
/// and `frame_length` scalars and `window` 1-d.
pub fn stft(ctx: &OpCtx) -> Check {
    flag(ctx, "onesided")?;
    if let Some(signal) = ctx.operand_type(0) {
        if signal.rank() != 3 {
            return Err(format!(
                "`signal` must be (batch, length, 1 or 2), got rank {}",
                signal.rank()
            ));
        }
        complex_last_dim(signal, "signal")?;
    }
    for (index, name) in [(1, "frame_step"), (3, "frame_length")] {
        if let Some(ty) = ctx.operand_type(index) {
            if ty.rank() != 0 {
                return Err(format!("`{name}` must be a scalar, got rank {}", ty.rank()));
            }
        }
    }
    match ctx.operand_type(2) {
        Some(window) if window.rank() != 1 => {
            Err(format!("`window` must be 1-d, got rank {}", window.rank()))
        }
        _ => Ok(()),
    }
}

/// A signal of real (last dim 1) or complex (last dim 2, real then imaginary) values.
fn complex_last_dim(ty: &TensorType, what: &str) -> Check {
    if ty.rank() < 2 {
        return Err(format!(
            "`{what}` must have a signal axis and a last dim of 1 (real) or 2 (complex), got rank {}",
            ty.rank()
        ));
    }
    match ty.dims[ty.rank() - 1].as_static() {
        Some(n) if n != 1 && n != 2 => Err(format!(
            "the last dim of `{what}` must be 1 (real) or 2 (complex), got {n}"
        )),
        _ => Ok(()),
    }
}

/// `onnx.MelWeightMatrix`: every operand is a scalar.
pub fn mel_weight_matrix(ctx: &OpCtx) -> Check {
    let names = [
        "num_mel_bins",
        "dft_length",
        "sample_rate",
        "lower_edge_hertz",
        "upper_edge_hertz",
    ];
    for (index, name) in names.iter().enumerate() {
        if let Some(ty) = ctx.operand_type(index) {
            if ty.rank() != 0 {
                return Err(format!("`{name}` must be a scalar, got rank {}", ty.rank()));
            }
        }
    }
    Ok(())
}

/// CenterCropPad: `axes` (when given) are distinct and in range, and `shape` is 1-d with one
/// entry per cropped or padded axis when its length is static.
pub fn center_crop_pad(ctx: &OpCtx) -> Check {
    let rank = operand(ctx, 0)?.rank();
    let n_axes = match ctx.ints_attr("axes")? {
        Some(axes) => {
            let mut seen = Vec::with_capacity(axes.len());
            for &a in &axes {
                let a = normalize_axis(a, rank)?;
                if seen.contains(&a) {
                    return Err(format!("axis {a} is listed twice in `axes`"));
                }
                seen.push(a);
            }
            axes.len()
        }
        None => rank,
    };
    let shape = operand(ctx, 1)?;
    match shape.dims.as_slice() {
        [Dim::Static(n)] if *n != n_axes as u64 => Err(format!(
            "`shape` has {n} entries but {n_axes} axes are cropped or padded"
        )),
        [_] => Ok(()),
        _ => Err(format!("`shape` must be 1-d, got rank {}", shape.rank())),
    }
}

/// Col2Im: a 3-d input `[N, C * prod(block_shape), L]`; 1-d `image_shape` and `block_shape`
/// of one length (the spatial rank); `dilations` and `strides` one positive entry per spatial
/// axis, `pads` two non-negative ones.
pub fn col2im(ctx: &OpCtx) -> Check {
    let input = operand(ctx, 0)?;
    if input.rank() != 3 {
        return Err(format!(
            "Col2Im needs a 3-d input [N, C * block elements, blocks], got rank {}",
            input.rank()
        ));
    }
    let mut n_spatial = None;
    for (index, name) in [(1, "image_shape"), (2, "block_shape")] {
        let ty = operand(ctx, index)?;
        match ty.dims.as_slice() {
            [Dim::Static(n)] => {
                if n_spatial.is_some_and(|s| s != *n) {
                    return Err(format!(
                        "`image_shape` and `block_shape` have different lengths ({} and {n})",
                        n_spatial.unwrap_or(0)
                    ));
                }
                n_spatial = Some(*n);
            }
            [_] => {}
            _ => return Err(format!("`{name}` must be 1-d, got rank {}", ty.rank())),
        }
    }
    let Some(n) = n_spatial else { return Ok(()) };
    for (name, per_axis, min) in [("dilations", 1, 1), ("strides", 1, 1), ("pads", 2, 0)] {
        if let Some(values) = ctx.ints_attr(name)? {
            if values.len() as u64 != per_axis * n {
                return Err(format!(
                    "`{name}` has {} entries for {n} spatial axes (expected {})",
                    values.len(),
                    per_axis * n
                ));
            }
            if let Some(v) = values.iter().find(|&&v| v < min) {
                return Err(format!("`{name}` has entry {v}, below {min}"));
            }
        }
    }
    Ok(())
}
