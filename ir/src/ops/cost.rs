//! FLOP counts: the arithmetic one execution of an op performs.
//!
//! [`flops`] is the one answer; the rematerialization pass minimizes the FLOPs it adds, and
//! the report gives them. The table declares each op's count: an op with a formula of its own
//! attaches one of the functions below (`.flops(c::matmul)`); any other op derives its count
//! from its traits. Counts come from the static shapes of operands and results (and the
//! attributes); an op whose shapes the count needs are not static counts 0, as does a count
//! that cannot be told. Arithmetic saturates at `u64::MAX`, never wraps.
//!
//! # Conventions
//!
//! One FLOP is one arithmetic operation on one element: an add, a multiply, a divide, a
//! comparison, a min or max, or one call of a math function (exp, log, sqrt, erf, tanh, sin,
//! pow, ...), integer and bool operations included. Moving, selecting or converting bytes is
//! not a FLOP. Scalings by a constant attribute (`alpha`, `beta` of Gemm and FusedMatMul) and
//! per-row or per-channel work (a normalization's square root, a mean's final divide) are not
//! counted: they are small beside the per-element terms.
//!
//! - **Contractions**: 2 per multiply-accumulate. MatMul `2 * elements(Y) * K` (batch dims
//!   broadcast, 1-d operands included); Gemm `2*M*N*K`, `+ M*N` with C; ms.FusedMatMul as
//!   MatMul, K read through `fused_matmul_perm`; memc.matmul_nbits `2*M*N*K` (`+ M*N` with a
//!   bias; dequantizing the weight is not counted); memc.accumulate_gemm `2*M*N*K + M*N`.
//! - **Convolutions**: Conv `2 * elements(Y) * C_in/group * kernel elements` (`+ elements(Y)`
//!   with a bias); ConvTranspose `2 * elements(X) * C_out/group * kernel elements` (each input
//!   element meets each tap of its group's filters; `+ elements(Y)` with a bias); ms.ConvGrad
//!   counts each result it has: dX and dW `2 * elements(dY) * C_in/group * kernel elements`
//!   each, dB `elements(dY)`.
//! - **Elementwise** (the `ELEMENTWISE` trait): `elements(result) * max(1, operands given - 1)`
//!   (Add 1, Sum of three 2, Clip with min and max 2, Exp 1, Relu 1). Ops whose formula is more
//!   than one operation count the operations of the formula in their table summary, per result
//!   element, a math function 1: Sigmoid 4 (`1 / (1 + e ^ -X)`), HardSigmoid 4, HardSwish 5,
//!   Softplus 3, Softsign 3, Mish 5, Elu 4, Selu 5, Celu 7, Swish and QuickGelu 6, LeakyRelu and
//!   PRelu 2, Shrink 3, Mean `operands` (the adds and a divide); Gelu 5 (erf form
//!   `X * (1 + erf(X / sqrt 2)) / 2`) or 9 (tanh form), ms.Gelu 5, ms.BiasGelu 6, ms.FastGelu 9
//!   (+1 with its bias); the gradients SigmoidGrad 3, TanhGrad 3, LeakyReluGrad 2, ReluGrad 1,
//!   GeluGrad 11 (`dY * (Phi(X) + X * phi(X))`), FastGeluGrad 18, QuickGeluGrad 10,
//!   BiasGeluGrad_dX 12, BiasFastGeluGrad_dX 19. Where, Cast and CastLike select or convert:
//!   0.
//! - **Reductions** (the `REDUCTION` trait): 1 per input element (ReduceSum, ReduceMean,
//!   ReduceMax, ArgMax, ...); 2 when each element is first transformed (ReduceL1, ReduceL2,
//!   ReduceSumSquare, ReduceLogSumExp). GlobalAveragePool and GlobalMaxPool: 1 per input
//!   element. CumSum and CumProd 1 per element. TopK: `elements(X) * bits(K)` (one comparison
//!   per level of a K-element heap, at least 1).
//! - **Softmax family**, per element: Softmax and LogSoftmax 5 (max, subtract, exp, sum,
//!   divide or log), Hardmax 1, SoftmaxGrad(_13) and LogSoftmaxGrad(_13) 4.
//! - **Normalizations**, per element of X: LayerNormalization 6 (mean, subtract, square, sum,
//!   scale by the inverse deviation, multiply by Scale) `+ 1` with B; RMSNormalization 4;
//!   InstanceNormalization 7; MeanVarianceNormalization 5; LpNormalization 3;
//!   BatchNormalization 4 (subtract, scale, multiply, add) in inference and 7 in training mode
//!   (the batch mean and variance), ms.BatchNormInternal likewise; their gradients
//!   ms.LayerNormalizationGrad 14 and ms.BatchNormalizationGrad 10.
//! - **Losses**: SoftmaxCrossEntropyLoss (and its internal form) 5 per score element (the
//!   log-softmax) `+ 2` per label (weight and sum); NegativeLogLikelihoodLoss (and its internal
//!   forms) 2 per label; SoftmaxCrossEntropyLossGrad (and the internal one) 4 per element of
//!   the gradient (exp, subtract the one-hot, scale by dY and the weight) `+ 1` with a bias.
//! - **Pooling**: MaxPool and AveragePool `elements(Y) * kernel elements`; LpPool 3 per tap
//!   (`|x|`, the power, the add: `3 * elements(Y) * kernel elements`); AveragePoolGrad
//!   `elements(dY) * kernel elements`; MaxPoolGrad 1 per dY element (an add at its index).
//! - **Scatters and accumulators**: 1 add per element of the added tensor: ms.GatherGrad,
//!   ms.GatherElementsGrad, memc.accumulate_gather_grad (dY), ms.InPlaceAccumulatorV2
//!   (`value`). onnx.ScatterElements and onnx.ScatterND: 1 per element of `updates` with a
//!   `reduction` (add, mul, max, min), 0 without. onnx.Col2Im: 1 per input element (each
//!   column entry added into its image position). ms.DivGrad per dY element: dA 2 (divide, sum back), dB 5, each when present.
//! - **Quantization**: DequantizeLinear 1 per element (`+ 1` with a zero point);
//!   QuantizeLinear 3 (divide, round, saturate) `+ 1` with a zero point.
//! - **Signal processing**: the window functions and MelWeightMatrix 4 per element (a scale,
//!   a cosine or sine, a multiply-add; a mel weight's compares and divide). DFT and STFT: 8 per complex result point per input point summed (a
//!   complex multiply-accumulate; the twiddles' cosines and sines are not counted); DFT sums
//!   the input's dim along the transformed axis (the first axis where the input's and
//!   result's shapes differ, else -2, since the `axis` operand's value is not known here),
//!   STFT the frame length (the window's, else the bins, else `2 * (bins - 1)` one-sided).
//! - **Resize**: 0 in `nearest` mode; otherwise `2 * elements(Y) * taps`, the taps 2 (linear)
//!   or 4 (cubic) for each axis whose size changes. Range: 1 per element. GridSample: 0 in
//!   `nearest` mode; otherwise `2 * elements(Y) * taps`, the taps 2 (linear) or 4 (cubic) per
//!   spatial dim (the coordinate arithmetic is not counted). AffineGrid: `2 * elements(grid) *
//!   (spatial dims + 1)` (each coordinate a row of theta times the homogeneous point).
//! - **Views and data movement**: 0. Reshape, Flatten, Squeeze, Unsqueeze, Identity,
//!   Transpose, Slice and Dropout (the `VIEW` trait; a training Dropout's mask draw is not
//!   counted: [`crate::ops::is_random`] keeps it from being recomputed), and Concat, Split,
//!   Gather, GatherElements, GatherND, Expand, Tile, Pad, CenterCropPad, Trilu, EyeLike, DepthToSpace,
//!   SpaceToDepth, Shape, Size, ConstantOfShape, BitCast, ms.ConcatTraining, ms.SliceGrad
//!   (`zero`). OneHot: 1 per output element (the comparison of the index with the position).
//! - **Structure**: 0. func.return, onnx.Yield, memc.none, memc.weight; onnx.If itself (the
//!   ops of its regions are ops of the function, counted each where it is).
//!
//! - **Attention**: the two products, `2 * scores * (head_size + v_head_size)` with `scores =
//!   batch * q_heads * q_seq * total_seq`, plus per score 5 (the softmax), 3 more with a
//!   softcap (divide, tanh, multiply) and 1 for each bias term given (the mask, `is_causal`,
//!   `nonpad_kv_seqlen`). RotaryEmbedding: 3 per rotated element (two multiplies and an add);
//!   the elements past `rotary_embedding_dim` are copied (0). LinearAttention, per token and
//!   state element (`batch * kv_heads * key_size * value_size`): 2 for the write, 1 with the
//!   decay, 2 with the delta correction, and 2 per query head reading it (`q_heads / kv_heads`).
//!   CausalConvWithState: `2 * elements(output) * kernel`, `+ elements(output)` with a bias,
//!   `+ 5 * elements(output)` with the SiLU (`Swish`'s count).
//! - **Recurrent cells** (RNN, GRU, LSTM): per step, direction and batch row, the two products
//!   `2 * gates * hidden * (input + hidden)` plus per hidden unit the gates' arithmetic: RNN 3
//!   (two bias adds, tanh counted 1), GRU `3 * 3 + 2 * 4 + 1 + 4` (the biased sums, two
//!   sigmoids, tanh, the blend), LSTM `4 * 3 + 3 * 4 + 2 + 4` (the biased sums, three sigmoids,
//!   two tanh, the cell update and the output), `+ 6` for LSTM's peepholes.
//!
//! - **Einsum**: one multiply per operand beyond the first and one add, at every point of the
//!   index space of all labels: `product(label sizes) * operands` (2 per multiply-accumulate for
//!   two operands, as MatMul; 1 per input element for a sum or a diagonal of one operand).
//!
//! The table has no other contraction beyond those above.

use super::attention::{AttentionDims, CausalConvDims, LinearAttentionDims, RotaryDims};
use super::{fused_matmul_perm, normalize_axis, OpCtx};
use crate::{Function, OpId, TensorType};

/// The FLOPs one execution of `op` performs (see the module doc for the conventions): the
/// table's count for its kind, else the one its traits imply; 0 when a shape it needs is not
/// static.
pub fn flops(func: &Function, op: OpId) -> u64 {
    let def = func.op(op).opcode.def();
    let ctx = OpCtx { func, op };
    let count = match def.flops {
        Some(count) => count(&ctx),
        None if def.is_elementwise() => elementwise(&ctx),
        None if def.is_reduction() => reduce::<1>(&ctx),
        // Views: the table's test makes every other op declare its count.
        None => Some(0),
    };
    count.unwrap_or(0)
}

/// The number of elements of a type whose dims are all static, saturating.
fn elements(ty: &TensorType) -> Option<u64> {
    ty.dims
        .iter()
        .try_fold(1u64, |acc, d| Some(acc.saturating_mul(d.as_static()?)))
}

fn operand_elements(ctx: &OpCtx, index: usize) -> Option<u64> {
    elements(ctx.operand_type(index)?)
}

fn result_elements(ctx: &OpCtx, index: usize) -> Option<u64> {
    elements(ctx.result_type(index)?)
}

/// Static dim `index` of a type (negative counts from the end).
fn dim(ty: &TensorType, index: isize) -> Option<u64> {
    let position = if index < 0 {
        ty.rank().checked_sub(index.unsigned_abs())?
    } else {
        index.unsigned_abs()
    };
    ty.dims.get(position)?.as_static()
}

/// The product of `factors`, saturating.
fn product(factors: &[u64]) -> u64 {
    factors.iter().fold(1u64, |acc, &f| acc.saturating_mul(f))
}

/// Whether operand `index` is given (present and not `memc.none`).
fn given(ctx: &OpCtx, index: usize) -> bool {
    ctx.operand_type(index).is_some()
}

/// `extra` when the operand is given, else 0.
fn if_given(ctx: &OpCtx, index: usize, extra: u64) -> u64 {
    if given(ctx, index) {
        extra
    } else {
        0
    }
}

/// The elements of a kernel window: the product of W's dims from 1 on (`C/group` and the
/// kernel's spatial dims).
fn filter_elements(w: &TensorType) -> Option<u64> {
    if w.rank() < 3 {
        return None;
    }
    let mut filter = w.clone();
    filter.dims.remove(0);
    elements(&filter)
}

/// Pure data movement or structure: no arithmetic.
pub(super) fn zero(_: &OpCtx) -> Option<u64> {
    Some(0)
}

/// `N` per element of result 0.
pub(super) fn per_elem<const N: u64>(ctx: &OpCtx) -> Option<u64> {
    Some(result_elements(ctx, 0)?.saturating_mul(N))
}

/// One add per element of operand `I` (scatters and accumulators).
pub(super) fn adds<const I: usize>(ctx: &OpCtx) -> Option<u64> {
    operand_elements(ctx, I)
}

/// Unique: each element compared with every other one (its rank among the distinct values and
/// its first occurrence).
pub(super) fn unique(ctx: &OpCtx) -> Option<u64> {
    let n = operand_elements(ctx, 0)?;
    Some(n.saturating_mul(n))
}

/// ScatterElements and ScatterND: one operation per update element with a `reduction`, none
/// without (the updates are only moved).
pub(super) fn scatter(ctx: &OpCtx) -> Option<u64> {
    match ctx.str_attr("reduction") {
        None | Some("none") => Some(0),
        Some(_) => operand_elements(ctx, 2),
    }
}

/// `N` per element of the reduced input (operand 0).
pub(super) fn reduce<const N: u64>(ctx: &OpCtx) -> Option<u64> {
    Some(operand_elements(ctx, 0)?.saturating_mul(N))
}

/// The `ELEMENTWISE` default: one operation per result element for each operand beyond the
/// first, at least one.
fn elementwise(ctx: &OpCtx) -> Option<u64> {
    let n_given = (0..ctx.n_operands()).filter(|&i| given(ctx, i)).count() as u64;
    Some(result_elements(ctx, 0)?.saturating_mul(n_given.saturating_sub(1).max(1)))
}

/// Sigmoid, `1 / (1 + e ^ -X)`: negate, exp, add, divide.
pub(super) const SIGMOID: u64 = 4;
/// Gelu's erf form, `X * (1 + erf(X / sqrt 2)) / 2`.
pub(super) const GELU_ERF: u64 = 5;
/// Gelu's tanh form, `X * (1 + tanh(sqrt(2 / pi) * (X + 0.044715 * X ^ 3))) / 2`.
pub(super) const GELU_TANH: u64 = 9;
/// The erf form's derivative times dY: `dY * (Phi(X) + X * phi(X))`, Phi 4, phi 4, 3 more.
pub(super) const GELU_ERF_GRAD: u64 = 11;
/// The tanh form's derivative times dY: the tanh argument 5, tanh 1, its derivative 3,
/// combining 8, times dY 1.
pub(super) const GELU_TANH_GRAD: u64 = 18;

/// `onnx.Mean`: the adds and one divide per element.
pub(super) fn mean(ctx: &OpCtx) -> Option<u64> {
    let n_given = (0..ctx.n_operands()).filter(|&i| given(ctx, i)).count() as u64;
    Some(result_elements(ctx, 0)?.saturating_mul(n_given.max(1)))
}

/// `onnx.Gelu`: the erf or the tanh form, by `approximate`.
pub(super) fn gelu(ctx: &OpCtx) -> Option<u64> {
    let per = if ctx.str_attr("approximate") == Some("tanh") {
        GELU_TANH
    } else {
        GELU_ERF
    };
    Some(result_elements(ctx, 0)?.saturating_mul(per))
}

/// `ms.FastGelu`: the tanh form, after adding the bias when given.
pub(super) fn fast_gelu(ctx: &OpCtx) -> Option<u64> {
    Some(result_elements(ctx, 0)?.saturating_mul(GELU_TANH + if_given(ctx, 1, 1)))
}

/// `onnx.MatMul`: `2 * elements(Y) * K`, K the last dim of A.
pub(super) fn matmul(ctx: &OpCtx) -> Option<u64> {
    let k = dim(ctx.operand_type(0)?, -1)?;
    Some(product(&[2, result_elements(ctx, 0)?, k]))
}

/// `ms.FusedMatMul`: MatMul of the operands read through [`fused_matmul_perm`].
pub(super) fn fused_matmul(ctx: &OpCtx) -> Option<u64> {
    let a = ctx.operand_type(0)?;
    let trans = ctx.int_attr("transA").unwrap_or(0) != 0;
    let trans_batch = ctx.int_attr("transBatchA").unwrap_or(0) != 0;
    let perm = fused_matmul_perm(a.rank(), trans, trans_batch);
    let k = a.dims.get(*perm.last()?)?.as_static()?;
    Some(product(&[2, result_elements(ctx, 0)?, k]))
}

/// `onnx.Attention`: the products and the per-score work (see the module doc).
pub(super) fn attention(ctx: &OpCtx) -> Option<u64> {
    let d = AttentionDims::resolve(ctx).ok()?;
    let scores = product(&[
        d.batch.as_static()?,
        d.q_heads.as_static()?,
        d.q_seq.as_static()?,
        d.total_seq.as_static()?,
    ]);
    let head = d
        .head_size
        .as_static()?
        .saturating_add(d.v_head_size.as_static()?);
    let softcap = ctx.float_attr("softcap").is_some_and(|c| c > 0.0);
    let per_score = 5
        + if softcap { 3 } else { 0 }
        + u64::from(given(ctx, AttentionDims::MASK))
        + u64::from(ctx.int_attr("is_causal").is_some_and(|c| c != 0))
        + u64::from(given(ctx, AttentionDims::NONPAD_KV_SEQLEN));
    Some(product(&[2, scores, head]).saturating_add(product(&[scores, per_score])))
}

/// `onnx.RotaryEmbedding`: 3 per rotated element.
pub(super) fn rotary_embedding(ctx: &OpCtx) -> Option<u64> {
    let d = RotaryDims::resolve(ctx).ok()?;
    Some(product(&[
        3,
        d.batch.as_static()?,
        d.seq.as_static()?,
        d.heads.as_static()?,
        d.rotary_dim.as_static()?,
    ]))
}

/// `onnx.LinearAttention`: the state updates and reads per token (see the module doc).
pub(super) fn linear_attention(ctx: &OpCtx) -> Option<u64> {
    let d = LinearAttentionDims::resolve(ctx).ok()?;
    let state = product(&[
        d.batch.as_static()?,
        d.kv_heads,
        d.key_size.as_static()?,
        d.value_size.as_static()?,
    ]);
    let per_state = 2
        + u64::from(d.rule.gated)
        + 2 * u64::from(d.rule.delta)
        + 2 * (d.q_heads / d.kv_heads.max(1));
    Some(product(&[d.seq.as_static()?, state, per_state]))
}

/// `onnx.CausalConvWithState`: the depthwise taps, the bias and the SiLU (module doc).
pub(super) fn causal_conv_with_state(ctx: &OpCtx) -> Option<u64> {
    let d = CausalConvDims::resolve(ctx).ok()?;
    let y = result_elements(ctx, 0)?;
    let per_output = 2 * d.kernel.as_static()?
        + u64::from(given(ctx, CausalConvDims::BIAS))
        + if d.silu { SIGMOID + 1 } else { 0 };
    Some(product(&[y, per_output]))
}

/// `onnx.RNN`, `onnx.GRU`, `onnx.LSTM`: the products and the gates per step (module doc).
pub(super) fn recurrent(ctx: &OpCtx) -> Option<u64> {
    let d = super::RecurrentDims::resolve(ctx).ok()?;
    let hidden = d.hidden.as_static()?;
    let gates = d.cell.gates();
    let products = 2 * gates * hidden * (d.input.as_static()? + hidden);
    let per_unit = match d.cell {
        super::Cell::Rnn => 3,
        super::Cell::Gru => 9 + 2 * SIGMOID + 1 + 4,
        super::Cell::Lstm => {
            12 + 3 * SIGMOID
                + 2
                + 4
                + if given(ctx, super::RecurrentDims::P) {
                    6
                } else {
                    0
                }
        }
    };
    Some(product(&[
        d.seq.as_static()?,
        d.direction.count(),
        d.batch.as_static()?,
        products.saturating_add(per_unit * hidden),
    ]))
}

/// `onnx.Gemm`: `2*M*N*K`, `+ M*N` with C.
pub(super) fn gemm(ctx: &OpCtx) -> Option<u64> {
    let a = ctx.operand_type(0)?;
    let k = dim(
        a,
        if ctx.int_attr("transA").unwrap_or(0) != 0 {
            0
        } else {
            1
        },
    )?;
    let mn = result_elements(ctx, 0)?;
    Some(product(&[2, mn, k]).saturating_add(if_given(ctx, 2, mn)))
}

/// `memc.matmul_nbits`: `2*M*N*K`, `+ M*N` with a bias; dequantizing is not counted.
pub(super) fn matmul_nbits(ctx: &OpCtx) -> Option<u64> {
    let k = dim(ctx.operand_type(0)?, -1)?;
    let mn = result_elements(ctx, 0)?;
    Some(product(&[2, mn, k]).saturating_add(if_given(ctx, 4, mn)))
}

/// `memc.accumulate_gemm`: the product into the buffer, `2*M*N*K + M*N`.
pub(super) fn accumulate_gemm(ctx: &OpCtx) -> Option<u64> {
    let mn = operand_elements(ctx, 0)?;
    let a = ctx.operand_type(1)?;
    let k = dim(
        a,
        if ctx.int_attr("transA").unwrap_or(0) != 0 {
            0
        } else {
            1
        },
    )?;
    Some(product(&[2, mn, k]).saturating_add(mn))
}

/// `onnx.Conv`: `2 * elements(Y) * C_in/group * kernel elements`, `+ elements(Y)` with B.
pub(super) fn conv(ctx: &OpCtx) -> Option<u64> {
    let filter = filter_elements(ctx.operand_type(1)?)?;
    let y = result_elements(ctx, 0)?;
    Some(product(&[2, y, filter]).saturating_add(if_given(ctx, 2, y)))
}

/// `onnx.ConvTranspose`: `2 * elements(X) * C_out/group * kernel elements` (W is
/// `[C_in, C_out/group, k...]`), `+ elements(Y)` with B.
pub(super) fn conv_transpose(ctx: &OpCtx) -> Option<u64> {
    let filter = filter_elements(ctx.operand_type(1)?)?;
    let x = operand_elements(ctx, 0)?;
    let bias = if given(ctx, 2) {
        result_elements(ctx, 0)?
    } else {
        0
    };
    Some(product(&[2, x, filter]).saturating_add(bias))
}

/// `ms.ConvGrad`: each of dX, dW (a convolution's worth each) and dB (a sum over dY) that
/// the op has.
pub(super) fn conv_grad(ctx: &OpCtx) -> Option<u64> {
    let dy = operand_elements(ctx, 0)?;
    let filter = filter_elements(ctx.operand_type(2)?)?;
    let product_count = product(&[2, dy, filter]);
    let has = |index: usize| ctx.result_type(index).is_some();
    let mut total = 0u64;
    for (index, count) in [(0, product_count), (1, product_count), (2, dy)] {
        if has(index) {
            total = total.saturating_add(count);
        }
    }
    Some(total)
}

/// The elements of a pool's window (`kernel_shape`).
fn window_elements(ctx: &OpCtx) -> Option<u64> {
    let kernel = ctx.ints_attr("kernel_shape").ok()??;
    kernel.iter().try_fold(1u64, |acc, &k| {
        Some(acc.saturating_mul(u64::try_from(k).ok()?))
    })
}

/// `onnx.MaxPool`, `onnx.AveragePool`: each output element combines its window.
pub(super) fn pool(ctx: &OpCtx) -> Option<u64> {
    Some(result_elements(ctx, 0)?.saturating_mul(window_elements(ctx)?))
}

/// `onnx.LpPool`: `|x|`, the power and the add at each tap of each output's window.
pub(super) fn lp_pool(ctx: &OpCtx) -> Option<u64> {
    Some(pool(ctx)?.saturating_mul(3))
}

/// `onnx.Einsum`: a multiply per operand beyond the first and an add at every point of the
/// index space of all labels.
pub(super) fn einsum(ctx: &OpCtx) -> Option<u64> {
    let eq = super::einsum::Einsum::of(ctx).ok()?;
    let dims: Vec<&[crate::Dim]> = (0..ctx.n_operands())
        .map(|i| ctx.operand_type(i).map(|t| t.dims.as_slice()))
        .collect::<Option<_>>()?;
    let sizes = eq.label_dims(&dims).ok()?;
    let points = sizes
        .iter()
        .try_fold(1u64, |acc, d| Some(acc.saturating_mul(d.as_static()?)))?;
    Some(points.saturating_mul(ctx.n_operands() as u64))
}

/// `onnx.AveragePoolGrad`: each dY element spread over its window's taps.
pub(super) fn pool_grad(ctx: &OpCtx) -> Option<u64> {
    Some(operand_elements(ctx, 0)?.saturating_mul(window_elements(ctx)?))
}

/// `onnx.TopK`: one comparison per input element per level of a K-element heap.
pub(super) fn top_k(ctx: &OpCtx) -> Option<u64> {
    let x = ctx.operand_type(0)?;
    let axis = normalize_axis(ctx.int_attr("axis").unwrap_or(-1), x.rank()).ok()?;
    let k = ctx.result_type(0)?.dims.get(axis)?.as_static()?;
    let levels = u64::from(u64::BITS - k.leading_zeros()).max(1);
    Some(elements(x)?.saturating_mul(levels))
}

/// `onnx.Resize`: nothing in `nearest` mode, else a multiply-add per tap, the taps 2 (linear)
/// or 4 (cubic) for each axis whose size changes.
pub(super) fn resize(ctx: &OpCtx) -> Option<u64> {
    let taps_per_axis: u64 = match ctx.str_attr("mode")? {
        "linear" => 2,
        "cubic" => 4,
        _ => return Some(0),
    };
    let x = ctx.operand_type(0)?;
    let y = ctx.result_type(0)?;
    if x.rank() != y.rank() {
        return None;
    }
    let mut taps = 1u64;
    for (xd, yd) in x.dims.iter().zip(&y.dims) {
        if xd.as_static()? != yd.as_static()? {
            taps = taps.saturating_mul(taps_per_axis);
        }
    }
    if taps == 1 {
        return Some(0);
    }
    Some(product(&[2, elements(y)?, taps]))
}

/// `onnx.GridSample`: `2 * elements(Y) * taps`, 2 (linear) or 4 (cubic) taps per spatial dim;
/// 0 in `nearest` mode.
pub(super) fn grid_sample(ctx: &OpCtx) -> Option<u64> {
    let taps_per_dim: u64 = match ctx.str_attr("mode")? {
        "linear" => 2,
        "cubic" => 4,
        _ => return Some(0),
    };
    let spatial = u32::try_from(ctx.result_type(0)?.rank().checked_sub(2)?).ok()?;
    let taps = taps_per_dim.checked_pow(spatial).unwrap_or(u64::MAX);
    Some(product(&[2, result_elements(ctx, 0)?, taps]))
}

/// `onnx.DFT`: `8 * points(Y) * n`, `n` the input's dim along the transformed axis.
pub(super) fn dft(ctx: &OpCtx) -> Option<u64> {
    let x = ctx.operand_type(0)?;
    let y = ctx.result_type(0)?;
    let rank = x.rank();
    if rank < 2 || y.rank() != rank {
        return None;
    }
    let axis = (0..rank - 1)
        .find(|&a| x.dims[a] != y.dims[a])
        .unwrap_or(rank - 2);
    let n = x.dims[axis].as_static()?;
    let points = elements(y)? / dim(y, -1)?.max(1);
    Some(product(&[8, points, n]))
}

/// `onnx.STFT`: `8 * points(Y) * frame_length`.
pub(super) fn stft(ctx: &OpCtx) -> Option<u64> {
    let y = ctx.result_type(0)?;
    let bins = dim(y, 2)?;
    let frame = match ctx.operand_type(2).and_then(|w| dim(w, 0)) {
        Some(w) => w,
        None if ctx.int_or_default("onesided") != 0 => bins.saturating_sub(1).saturating_mul(2),
        None => bins,
    };
    let points = elements(y)? / 2;
    Some(product(&[8, points, frame]))
}

/// `onnx.AffineGrid`: `2 * elements(grid) * (spatial dims + 1)`.
pub(super) fn affine_grid(ctx: &OpCtx) -> Option<u64> {
    let spatial = ctx.result_type(0)?.rank().checked_sub(2)? as u64;
    Some(product(&[2, result_elements(ctx, 0)?, spatial + 1]))
}

/// `onnx.LayerNormalization`: 6 per element, `+ 1` with B.
pub(super) fn layer_norm(ctx: &OpCtx) -> Option<u64> {
    Some(result_elements(ctx, 0)?.saturating_mul(6 + if_given(ctx, 2, 1)))
}

/// `onnx.BatchNormalization`, `ms.BatchNormInternal`: 4 per element, 7 in training mode.
pub(super) fn batch_norm(ctx: &OpCtx) -> Option<u64> {
    let per = if ctx.int_attr("training_mode").unwrap_or(0) != 0 {
        7
    } else {
        4
    };
    Some(result_elements(ctx, 0)?.saturating_mul(per))
}

/// `onnx.DequantizeLinear`: `(x - zero_point) * scale`.
pub(super) fn dequantize(ctx: &OpCtx) -> Option<u64> {
    Some(result_elements(ctx, 0)?.saturating_mul(1 + if_given(ctx, 2, 1)))
}

/// `onnx.QuantizeLinear`: `saturate(round(x / scale) + zero_point)`.
pub(super) fn quantize(ctx: &OpCtx) -> Option<u64> {
    Some(result_elements(ctx, 0)?.saturating_mul(3 + if_given(ctx, 2, 1)))
}

/// The softmax cross-entropy losses: a log-softmax over the scores, then a weighted sum at the
/// labels.
pub(super) fn softmax_cross_entropy(ctx: &OpCtx) -> Option<u64> {
    let scores = operand_elements(ctx, 0)?.saturating_mul(5);
    let labels = operand_elements(ctx, 1)?.saturating_mul(2);
    Some(scores.saturating_add(labels))
}

/// The negative log-likelihood losses: a weighted sum at the labels.
pub(super) fn nll(ctx: &OpCtx) -> Option<u64> {
    Some(operand_elements(ctx, 1)?.saturating_mul(2))
}

/// The softmax cross-entropy gradients: `(e ^ log_prob - one_hot) * dY * weight`, `+ bias`.
pub(super) fn softmax_cross_entropy_grad(ctx: &OpCtx) -> Option<u64> {
    Some(result_elements(ctx, 0)?.saturating_mul(4 + if_given(ctx, 5, 1)))
}

/// `ms.DivGrad`: dA `dY / B` summed back (2), dB `-dY * A / B ^ 2` summed back (5), each when
/// the op has it.
pub(super) fn div_grad(ctx: &OpCtx) -> Option<u64> {
    let dy = operand_elements(ctx, 0)?;
    let mut per = 0;
    if ctx.result_type(0).is_some() {
        per += 2;
    }
    if ctx.result_type(1).is_some() {
        per += 5;
    }
    Some(dy.saturating_mul(per))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{build, f32_of};
    use crate::{Attribute, Dim, ElemType, Opcode, Type, ValueId};

    /// A function whose arguments have the given shapes (f32).
    fn func_with(shapes: &[&[u64]]) -> (Function, Vec<ValueId>) {
        let func = Function::new("f", shapes.iter().map(|s| f32_of(s)).collect(), Vec::new());
        let args = func.args().to_vec();
        (func, args)
    }

    /// The FLOPs of one `opcode` op over arguments of `shapes`, with results of `results`.
    fn count(
        opcode: Opcode,
        shapes: &[&[u64]],
        results: &[&[u64]],
        attrs: Vec<(&'static str, Attribute)>,
    ) -> u64 {
        let (mut func, args) = func_with(shapes);
        let results = results.iter().map(|s| f32_of(s)).collect();
        let op = build(&mut func, opcode, args, results, attrs);
        flops(&func, op)
    }

    fn ints(values: &[i64]) -> Attribute {
        Attribute::ints(values.iter().copied())
    }

    #[test]
    fn every_op_declares_its_count_or_derives_it_from_its_traits() {
        for &opcode in Opcode::ALL {
            let def = opcode.def();
            assert!(
                def.flops.is_some() || def.is_elementwise() || def.is_reduction() || def.is_view(),
                "{} has no FLOP count: attach one with `.flops(...)` (see ops/cost.rs)",
                def.name
            );
        }
    }

    #[test]
    fn every_op_counts_zero_when_its_shapes_are_not_static() {
        // Every op over operands and results of type [batch, 4] (the verifier would reject
        // most of them; the count must still not panic, and must be 0).
        let dynamic = Type::from(TensorType::new(
            ElemType::F32,
            vec![Dim::symbol("batch"), Dim::Static(4)],
        ));
        for &opcode in Opcode::ALL {
            let def = opcode.def();
            let mut func = Function::new("f", vec![dynamic.clone()], Vec::new());
            let x = func.args()[0];
            let n_operands = def.operand_range().0.max(3);
            let n_results = def.result_range().0.max(1);
            let op = build(
                &mut func,
                opcode,
                vec![x; n_operands],
                vec![dynamic.clone(); n_results],
                vec![("kernel_shape", ints(&[2]))],
            );
            assert_eq!(flops(&func, op), 0, "{}", def.name);
        }
    }

    #[test]
    fn trait_defaults_count_as_the_module_doc_says() {
        // Every op over [2, 3] operands and results: an elementwise op without a count of its
        // own counts 6 per operand beyond the first (at least one), a reduction 6 per input
        // element, a view without a count 0. No op's count panics on such an instance.
        for &opcode in Opcode::ALL {
            let def = opcode.def();
            for n_operands in [1, 2, 3] {
                let (mut func, args) = func_with(&[&[2, 3]]);
                let n_results = def.result_range().0.max(1);
                let op = build(
                    &mut func,
                    opcode,
                    vec![args[0]; n_operands],
                    vec![f32_of(&[2, 3]); n_results],
                    vec![],
                );
                let count = flops(&func, op);
                if def.flops.is_some() {
                    continue;
                }
                let expected = if def.is_elementwise() {
                    6 * (n_operands as u64 - 1).max(1)
                } else if def.is_reduction() {
                    6
                } else {
                    0
                };
                assert_eq!(count, expected, "{} with {n_operands} operands", def.name);
            }
        }
    }

    #[test]
    fn matmul_counts_two_per_multiply_accumulate_with_broadcast_batch_dims() {
        // [2, 3, 4, 5] x [2, 3, 5, 6]: 2*3 batches of 4x6 outputs, K = 5.
        let batched = count(
            Opcode::MatMul,
            &[&[2, 3, 4, 5], &[2, 3, 5, 6]],
            &[&[2, 3, 4, 6]],
            vec![],
        );
        assert_eq!(batched, 2 * 2 * 3 * 4 * 6 * 5);
        // [4, 5] broadcast against [3, 5, 6].
        let broadcast = count(
            Opcode::MatMul,
            &[&[4, 5], &[3, 5, 6]],
            &[&[3, 4, 6]],
            vec![],
        );
        assert_eq!(broadcast, 2 * 3 * 4 * 6 * 5);
        // A vector times a matrix, and a matrix times a vector.
        assert_eq!(
            count(Opcode::MatMul, &[&[5], &[5, 6]], &[&[6]], vec![]),
            2 * 6 * 5
        );
        assert_eq!(
            count(Opcode::MatMul, &[&[4, 5], &[5]], &[&[4]], vec![]),
            2 * 4 * 5
        );
    }

    #[test]
    fn gemm_adds_c_and_reads_k_through_trans_a() {
        let plain = count(Opcode::Gemm, &[&[4, 5], &[5, 6]], &[&[4, 6]], vec![]);
        assert_eq!(plain, 2 * 4 * 6 * 5);
        let with_c = count(
            Opcode::Gemm,
            &[&[5, 4], &[6, 5], &[6]],
            &[&[4, 6]],
            vec![("transA", Attribute::Int(1)), ("transB", Attribute::Int(1))],
        );
        assert_eq!(with_c, 2 * 4 * 6 * 5 + 4 * 6);
    }

    #[test]
    fn fused_matmul_reads_k_through_its_permutation() {
        // transA: A [2, 5, 4] is read as [2, 4, 5].
        let trans = count(
            Opcode::FusedMatMul,
            &[&[2, 5, 4], &[2, 5, 6]],
            &[&[2, 4, 6]],
            vec![("transA", Attribute::Int(1))],
        );
        assert_eq!(trans, 2 * 2 * 4 * 6 * 5);
        // transBatchA and transA: A [5, 2, 4, 3] is read as [2, 4, 3, 5], K = 5.
        let both = count(
            Opcode::FusedMatMul,
            &[&[5, 2, 4, 3], &[2, 4, 5, 7]],
            &[&[2, 4, 3, 7]],
            vec![
                ("transA", Attribute::Int(1)),
                ("transBatchA", Attribute::Int(1)),
            ],
        );
        assert_eq!(both, 2 * 2 * 4 * 3 * 7 * 5);
    }

    #[test]
    fn low_bit_and_accumulating_products() {
        // A [1, 3, 16] times a 16 x 8 weight (B's type does not enter the count), with bias.
        let nbits = count(
            Opcode::MatMulNBits,
            &[&[1, 3, 16], &[8, 16], &[8], &[8], &[8]],
            &[&[1, 3, 8]],
            vec![],
        );
        assert_eq!(nbits, 2 * 3 * 8 * 16 + 3 * 8);
        // buffer [4, 6] += A^T [5, 4]^T x B [5, 6].
        let accumulate = count(
            Opcode::AccumulateGemm,
            &[&[4, 6], &[5, 4], &[5, 6]],
            &[&[]],
            vec![("transA", Attribute::Int(1))],
        );
        assert_eq!(accumulate, 2 * 4 * 6 * 5 + 4 * 6);
    }

    #[test]
    fn conv_counts_per_output_element_its_group_and_window() {
        // X [1, 4, 8, 8], W [6, 2, 3, 3], 2 groups, stride 2: Y [1, 6, 3, 3]; each output
        // element reads 2 channels x 3 x 3 taps.
        let attrs = || vec![("group", Attribute::Int(2)), ("strides", ints(&[2, 2]))];
        let y = 6 * 3 * 3;
        let grouped = count(
            Opcode::Conv,
            &[&[1, 4, 8, 8], &[6, 2, 3, 3]],
            &[&[1, 6, 3, 3]],
            attrs(),
        );
        assert_eq!(grouped, 2 * y * 2 * 9);
        let with_bias = count(
            Opcode::Conv,
            &[&[1, 4, 8, 8], &[6, 2, 3, 3], &[6]],
            &[&[1, 6, 3, 3]],
            attrs(),
        );
        assert_eq!(with_bias, 2 * y * 2 * 9 + y);
        // ConvTranspose: X [1, 2, 3, 3], W [2, 3, 2, 2]: every input element meets 3 x 2 x 2
        // taps.
        let transposed = count(
            Opcode::ConvTranspose,
            &[&[1, 2, 3, 3], &[2, 3, 2, 2]],
            &[&[1, 3, 4, 4]],
            vec![],
        );
        assert_eq!(transposed, 2 * 18 * 12);
        // ConvGrad: dX and dW a convolution's worth each, dB a sum over dY.
        let grad = count(
            Opcode::ConvGrad,
            &[&[1, 6, 3, 3], &[1, 4, 8, 8], &[6, 2, 3, 3]],
            &[&[1, 4, 8, 8], &[6, 2, 3, 3], &[6]],
            attrs(),
        );
        assert_eq!(grad, 2 * (2 * y * 2 * 9) + y);
        let dx_only = count(
            Opcode::ConvGrad,
            &[&[1, 6, 3, 3], &[1, 4, 8, 8], &[6, 2, 3, 3]],
            &[&[1, 4, 8, 8]],
            attrs(),
        );
        assert_eq!(dx_only, 2 * y * 2 * 9);
    }

    #[test]
    fn elementwise_counts_result_elements_with_broadcasting() {
        // [3, 1] + [1, 4] broadcasts to 12 elements.
        assert_eq!(
            count(Opcode::Add, &[&[3, 1], &[1, 4]], &[&[3, 4]], vec![]),
            12
        );
        // Sum of three: two adds per element.
        let sum = count(Opcode::Sum, &[&[2, 3], &[2, 3], &[3]], &[&[2, 3]], vec![]);
        assert_eq!(sum, 12);
        assert_eq!(count(Opcode::Exp, &[&[2, 3]], &[&[2, 3]], vec![]), 6);
        assert_eq!(
            count(Opcode::Sigmoid, &[&[2, 3]], &[&[2, 3]], vec![]),
            6 * SIGMOID
        );
        let tanh_gelu = count(
            Opcode::Gelu,
            &[&[2, 3]],
            &[&[2, 3]],
            vec![("approximate", Attribute::String("tanh".into()))],
        );
        assert_eq!(tanh_gelu, 6 * GELU_TANH);
        assert_eq!(
            count(Opcode::Gelu, &[&[2, 3]], &[&[2, 3]], vec![]),
            6 * GELU_ERF
        );
        // Where selects and Cast converts: no arithmetic.
        let (mut func, args) = func_with(&[&[2, 3], &[2, 3]]);
        let cond = Type::from(TensorType::with_shape(ElemType::Bool, &[2, 3]));
        let mask = build(&mut func, Opcode::Less, args.clone(), vec![cond], vec![]);
        let mask_value = func.op(mask).results[0];
        let select = build(
            &mut func,
            Opcode::Where,
            vec![mask_value, args[0], args[1]],
            vec![f32_of(&[2, 3])],
            vec![],
        );
        assert_eq!(flops(&func, mask), 6);
        assert_eq!(flops(&func, select), 0);
    }

    #[test]
    fn per_element_counts_match_the_module_doc() {
        // The counts the module doc gives, per result element, for ops over [2, 3] operands.
        let doc: &[(Opcode, u64)] = &[
            (Opcode::Sigmoid, 4),
            (Opcode::HardSigmoid, 4),
            (Opcode::HardSwish, 5),
            (Opcode::Softplus, 3),
            (Opcode::Softsign, 3),
            (Opcode::Mish, 5),
            (Opcode::Elu, 4),
            (Opcode::Selu, 5),
            (Opcode::Celu, 7),
            (Opcode::Swish, 6),
            (Opcode::QuickGelu, 6),
            (Opcode::LeakyRelu, 2),
            (Opcode::PRelu, 2),
            (Opcode::Shrink, 3),
            (Opcode::MsGelu, 5),
            (Opcode::BiasGelu, 6),
            (Opcode::FastGelu, 9),
            (Opcode::SigmoidGrad, 3),
            (Opcode::TanhGrad, 3),
            (Opcode::LeakyReluGrad, 2),
            (Opcode::ReluGrad, 1),
            (Opcode::GeluGrad, 11),
            (Opcode::FastGeluGrad, 18),
            (Opcode::QuickGeluGrad, 10),
            (Opcode::BiasGeluGradDx, 12),
            (Opcode::BiasFastGeluGradDx, 19),
            (Opcode::Where, 0),
            (Opcode::Cast, 0),
            (Opcode::CastLike, 0),
            (Opcode::Softmax, 5),
            (Opcode::LogSoftmax, 5),
            (Opcode::Hardmax, 1),
            (Opcode::SoftmaxGrad, 4),
            (Opcode::SoftmaxGrad13, 4),
            (Opcode::LogSoftmaxGrad, 4),
            (Opcode::LogSoftmaxGrad13, 4),
            (Opcode::RMSNormalization, 4),
            (Opcode::InstanceNormalization, 7),
            (Opcode::MeanVarianceNormalization, 5),
            (Opcode::LpNormalization, 3),
            (Opcode::LayerNormalizationGrad, 14),
            (Opcode::BatchNormalizationGrad, 10),
            (Opcode::CumSum, 1),
            (Opcode::CumProd, 1),
            (Opcode::Range, 1),
        ];
        for &(opcode, per) in doc {
            let n_operands = opcode.def().operand_range().0;
            let shapes = vec![&[2u64, 3][..]; n_operands];
            let n_results = opcode.def().result_range().0;
            let results = vec![&[2u64, 3][..]; n_results];
            assert_eq!(
                count(opcode, &shapes, &results, vec![]),
                6 * per,
                "{opcode:?}"
            );
        }
        // FastGelu adds its bias first.
        let biased = count(Opcode::FastGelu, &[&[2, 3], &[3]], &[&[2, 3]], vec![]);
        assert_eq!(biased, 6 * 10);
        // Mean: the adds and a divide.
        let mean = count(
            Opcode::Mean,
            &[&[2, 3], &[2, 3], &[2, 3]],
            &[&[2, 3]],
            vec![],
        );
        assert_eq!(mean, 6 * 3);
    }

    #[test]
    fn clip_counts_the_bounds_it_is_given() {
        let (mut func, args) = func_with(&[&[2, 3], &[], &[]]);
        let none = build(&mut func, Opcode::None, vec![], vec![Type::None], vec![]);
        let none = func.op(none).results[0];
        let both = build(
            &mut func,
            Opcode::Clip,
            args.clone(),
            vec![f32_of(&[2, 3])],
            vec![],
        );
        let max_only = build(
            &mut func,
            Opcode::Clip,
            vec![args[0], none, args[2]],
            vec![f32_of(&[2, 3])],
            vec![],
        );
        assert_eq!(flops(&func, both), 12);
        assert_eq!(flops(&func, max_only), 6);
    }

    #[test]
    fn reductions_count_their_input_elements() {
        let sum = count(Opcode::ReduceSum, &[&[4, 5]], &[&[1, 5]], vec![]);
        assert_eq!(sum, 20);
        let sum_square = count(Opcode::ReduceSumSquare, &[&[4, 5]], &[&[1, 5]], vec![]);
        assert_eq!(sum_square, 40);
        let arg_max = count(Opcode::ArgMax, &[&[4, 5]], &[&[1, 5]], vec![]);
        assert_eq!(arg_max, 20);
        let global = count(
            Opcode::GlobalAveragePool,
            &[&[2, 3, 4, 4]],
            &[&[2, 3, 1, 1]],
            vec![],
        );
        assert_eq!(global, 96);
    }

    #[test]
    fn softmax_and_layer_normalization_count_per_element() {
        assert_eq!(count(Opcode::Softmax, &[&[2, 8]], &[&[2, 8]], vec![]), 80);
        let with_bias = count(
            Opcode::LayerNormalization,
            &[&[2, 8], &[8], &[8]],
            &[&[2, 8]],
            vec![],
        );
        assert_eq!(with_bias, 16 * 7);
        let no_bias = count(
            Opcode::LayerNormalization,
            &[&[2, 8], &[8]],
            &[&[2, 8]],
            vec![],
        );
        assert_eq!(no_bias, 16 * 6);
        let inference = count(
            Opcode::BatchNormalization,
            &[&[2, 3, 4], &[3], &[3], &[3], &[3]],
            &[&[2, 3, 4]],
            vec![],
        );
        assert_eq!(inference, 24 * 4);
        let training = count(
            Opcode::BatchNormInternal,
            &[&[2, 3, 4], &[3], &[3], &[3], &[3]],
            &[&[2, 3, 4]],
            vec![],
        );
        assert_eq!(training, 24 * 7);
    }

    #[test]
    fn pools_count_their_windows() {
        let max_pool = count(
            Opcode::MaxPool,
            &[&[1, 2, 4, 4]],
            &[&[1, 2, 2, 2]],
            vec![("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
        );
        assert_eq!(max_pool, 8 * 4);
        let grad = count(
            Opcode::AveragePoolGrad,
            &[&[1, 2, 2, 2]],
            &[&[1, 2, 4, 4]],
            vec![("kernel_shape", ints(&[3, 3]))],
        );
        assert_eq!(grad, 8 * 9);
        let lp_pool = count(
            Opcode::LpPool,
            &[&[1, 2, 4, 4]],
            &[&[1, 2, 2, 2]],
            vec![("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
        );
        assert_eq!(lp_pool, 3 * 8 * 4);
    }

    #[test]
    fn einsum_counts_its_index_space_per_operand() {
        let equation = |eq: &str| vec![("equation", Attribute::String(eq.into()))];
        // A batched product: 5 * 2 * 3 * 4 points, a multiply and an add each (as MatMul).
        let product = count(
            Opcode::Einsum,
            &[&[5, 2, 3], &[5, 3, 4]],
            &[&[5, 2, 4]],
            equation("bij,bjk->bik"),
        );
        assert_eq!(product, 2 * 5 * 2 * 3 * 4);
        // A diagonal of one operand: one per point of its labels (7 * 5).
        let diagonal = count(
            Opcode::Einsum,
            &[&[7, 5, 5]],
            &[&[7, 5]],
            equation("...ii->...i"),
        );
        assert_eq!(diagonal, 7 * 5);
        // A bad equation counts 0.
        assert_eq!(count(Opcode::Einsum, &[&[2]], &[&[2]], equation("ij")), 0);
    }

    #[test]
    fn top_k_and_resize() {
        // K = 4: three heap levels per input element.
        let top_k = count(Opcode::TopK, &[&[2, 10], &[1]], &[&[2, 4], &[2, 4]], vec![]);
        assert_eq!(top_k, 20 * 3);
        let linear = |mode: &str| {
            count(
                Opcode::Resize,
                &[&[1, 1, 4, 4]],
                &[&[1, 1, 8, 8]],
                vec![("mode", Attribute::String(mode.into()))],
            )
        };
        assert_eq!(linear("nearest"), 0);
        assert_eq!(linear("linear"), 2 * 64 * 4);
        assert_eq!(linear("cubic"), 2 * 64 * 16);
    }

    #[test]
    fn grid_sample_counts_its_taps_and_affine_grid_its_products() {
        let sample = |mode: &str, x: &'static [u64], grid: &'static [u64], y: &'static [u64]| {
            count(
                Opcode::GridSample,
                &[x, grid],
                &[y],
                vec![("mode", Attribute::String(mode.into()))],
            )
        };
        let (x, grid, y): (&[u64], &[u64], &[u64]) = (&[1, 2, 4, 4], &[1, 3, 5, 2], &[1, 2, 3, 5]);
        assert_eq!(sample("nearest", x, grid, y), 0);
        assert_eq!(sample("linear", x, grid, y), 2 * 30 * 4);
        assert_eq!(sample("cubic", x, grid, y), 2 * 30 * 16);
        let volume = sample(
            "linear",
            &[1, 1, 2, 2, 2],
            &[1, 2, 2, 2, 3],
            &[1, 1, 2, 2, 2],
        );
        assert_eq!(volume, 2 * 8 * 8);
        let affine = count(
            Opcode::AffineGrid,
            &[&[2, 2, 3], &[4]],
            &[&[2, 3, 4, 2]],
            vec![],
        );
        assert_eq!(affine, 2 * 48 * 3);
    }

    #[test]
    fn transforms_count_a_complex_multiply_accumulate_per_point_pair() {
        // DFT along -2: 8 per result point (2 x 5 one-sided bins) per input point (8).
        let rfft = count(Opcode::DFT, &[&[2, 8, 1]], &[&[2, 5, 2]], vec![]);
        assert_eq!(rfft, 8 * 10 * 8);
        // Along axis 1 of a rank-4 input, found where the shapes differ.
        let axis1 = count(Opcode::DFT, &[&[1, 6, 3, 2]], &[&[1, 4, 3, 2]], vec![]);
        assert_eq!(axis1, 8 * 12 * 6);
        // STFT: 8 per result point per window point.
        let stft = count(
            Opcode::STFT,
            &[&[1, 16, 1], &[], &[4]],
            &[&[1, 7, 3, 2]],
            vec![],
        );
        assert_eq!(stft, 8 * 21 * 4);
        assert_eq!(count(Opcode::HannWindow, &[&[]], &[&[10]], vec![]), 40);
    }

    #[test]
    fn views_and_data_movement_count_zero() {
        /// An op, its operand shapes and its result shapes.
        type Case = (Opcode, &'static [&'static [u64]], &'static [&'static [u64]]);
        let cases: &[Case] = &[
            (Opcode::Reshape, &[&[2, 3], &[2]], &[&[3, 2]]),
            (Opcode::Transpose, &[&[2, 3]], &[&[3, 2]]),
            (Opcode::Slice, &[&[4, 3], &[1], &[1]], &[&[2, 3]]),
            (Opcode::Concat, &[&[2, 3], &[2, 3]], &[&[4, 3]]),
            (Opcode::Gather, &[&[4, 3], &[2]], &[&[2, 3]]),
            (Opcode::Expand, &[&[1, 3], &[2]], &[&[4, 3]]),
            (Opcode::Pad, &[&[2, 3], &[4]], &[&[4, 5]]),
            (Opcode::CenterCropPad, &[&[2, 3], &[2]], &[&[4, 1]]),
            (Opcode::Cast, &[&[2, 3]], &[&[2, 3]]),
            (Opcode::Identity, &[&[2, 3]], &[&[2, 3]]),
            (Opcode::BitCast, &[&[2, 3]], &[&[2, 3]]),
            (Opcode::Dropout, &[&[2, 3]], &[&[2, 3]]),
        ];
        for &(opcode, operands, results) in cases {
            assert_eq!(count(opcode, operands, results, vec![]), 0, "{opcode:?}");
        }
    }

    #[test]
    fn counts_saturate_instead_of_wrapping() {
        let huge = 1u64 << 40;
        let product = count(
            Opcode::MatMul,
            &[&[huge, huge], &[huge, huge]],
            &[&[huge, huge]],
            vec![],
        );
        assert_eq!(product, u64::MAX);
    }

    #[test]
    fn attention_counts_both_products_and_the_work_per_score() {
        // 4 query heads over 2 key-value heads, 2 queries, 3 keys: 24 scores. Causal adds one
        // operation per score to the softmax's 5; a softcap 3 more.
        let shapes: &[&[u64]] = &[&[1, 4, 2, 8], &[1, 2, 3, 8], &[1, 2, 3, 16]];
        let products = 2 * 24 * (8 + 16);
        let causal = vec![("is_causal", Attribute::Int(1))];
        assert_eq!(
            count(Opcode::Attention, shapes, &[&[1, 4, 2, 16]], causal),
            products + 24 * 6
        );
        let capped = vec![("softcap", Attribute::Float(2.0))];
        assert_eq!(
            count(Opcode::Attention, shapes, &[&[1, 4, 2, 16]], capped),
            products + 24 * 8
        );
    }

    #[test]
    fn rotary_embedding_counts_the_rotated_elements() {
        // [batch 2, heads 3, seq 4, head 8], half of each head rotated: 2*4*3*4 elements.
        let n = count(
            Opcode::RotaryEmbedding,
            &[&[2, 3, 4, 8], &[2, 4, 2], &[2, 4, 2]],
            &[&[2, 3, 4, 8]],
            vec![("rotary_embedding_dim", Attribute::Int(4))],
        );
        assert_eq!(n, 3 * 2 * 4 * 3 * 4);
    }

    #[test]
    fn causal_conv_counts_taps_bias_and_silu() {
        // [1, 2, 5] input, kernel 3: 10 outputs of 2 * 3 taps; the SiLU adds 5 each.
        let n = count(
            Opcode::CausalConvWithState,
            &[&[1, 2, 5], &[2, 1, 3]],
            &[&[1, 2, 5], &[1, 2, 2]],
            vec![("activation", Attribute::String("silu".into()))],
        );
        assert_eq!(n, 10 * (6 + 5));
    }

    #[test]
    fn recurrent_cells_count_products_and_gates() {
        // seq 2, batch 3, input 4, hidden 5: per step and row 2 * gates * 5 * (4 + 5) for
        // the products, plus the gates' arithmetic per hidden unit.
        let cell = |opcode, gates: u64| {
            let rows = gates * 5;
            count(
                opcode,
                &[&[2, 3, 4], &[1, rows, 4], &[1, rows, 5]],
                &[&[2, 1, 3, 5], &[1, 3, 5]],
                Vec::new(),
            )
        };
        let products = |gates: u64| 2 * gates * 5 * 9;
        assert_eq!(cell(Opcode::RNN, 1), 2 * 3 * (products(1) + 3 * 5));
        assert_eq!(cell(Opcode::GRU, 3), 2 * 3 * (products(3) + 22 * 5));
        assert_eq!(cell(Opcode::LSTM, 4), 2 * 3 * (products(4) + 30 * 5));
    }

    #[test]
    fn scatters_count_one_per_update_with_a_reduction() {
        // data [3, 4], indices and updates [2, 4]: 8 updates; indices are f32 here, which the
        // count does not read.
        let scatter = |opcode, reduction: &str| {
            count(
                opcode,
                &[&[3, 4], &[2, 4], &[2, 4]],
                &[&[3, 4]],
                vec![("reduction", Attribute::String(reduction.into()))],
            )
        };
        assert_eq!(scatter(Opcode::ScatterElements, "none"), 0);
        assert_eq!(scatter(Opcode::ScatterElements, "max"), 8);
        assert_eq!(scatter(Opcode::ScatterND, "mul"), 8);
        // Col2Im: one add per column entry, [1, 2 * 4, 9].
        let col2im = count(
            Opcode::Col2Im,
            &[&[1, 8, 9], &[2], &[2]],
            &[&[1, 2, 4, 4]],
            Vec::new(),
        );
        assert_eq!(col2im, 72);
    }
}
