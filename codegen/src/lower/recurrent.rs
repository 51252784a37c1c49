//! The ops that carry state from one step of a sequence model to the next (opset 27):
//! `LinearAttention` and `CausalConvWithState`, lowered to loop kernels.
//!
//! `LinearAttention` is a recurrence over the tokens. Each column `m` of each head's state
//! `S[key, m]` evolves on its own: per token, decay it (`S *= exp(g)`), read it back along the
//! key (`r = S . k`, the delta rule), write `S += k * u` (`u = beta * (v[m] - r)` with the delta
//! rule, else `v[m]`), and read the output `o[m] = scale * q . S`. So one loop kernel has a row
//! per (batch, key-value head, query head of its group, value column) and the key as its
//! inner loop, and runs those stages once per token, in order (the recurrence unrolled: at
//! most [`MAX_UNROLLED_TOKENS`] tokens). Each row keeps its state column in the op's planned
//! scratch (`[batch, q_heads, key_size, value_size]`, f32 as the reference computes), so the
//! query heads of a group each carry an identical copy and no two rows write one element;
//! the present state is then copied from the first head of each group. Everything computes
//! in f32, as the ONNX reference does.
//!
//! `CausalConvWithState` reads the concatenation of the past state (or zeros) and the input
//! through two guarded views, so nothing is concatenated: the output is one reduction over
//! the kernel taps per (batch, channel, position), plus the bias and the SiLU; the present
//! state is one map over the last `kernel - 1` positions of that concatenation.
//!
//! Guarantees: kernels read and write only the op's operands, results and planned scratch;
//! an element type other than f32, or a plan without the scratch, is reported as unsupported.

use super::build::{guard, Insts, TensorRef};
use super::movement::common::{loop_kernel, strided_copy};
use super::{unsupported, LowerCtx, LowerError, LowerResult};
use crate::kernel::{BinaryOp, InstId, ReduceOp, Scalar, Stage, Store, UnaryOp, View};
use memc_ir::ops::{CausalConvDims, LinearAttentionDims, OpCtx};
use memc_ir::{Function, OpId};

/// The most tokens one `LinearAttention` unrolls (its kernel runs a few stages per token).
pub const MAX_UNROLLED_TOKENS: u64 = 1024;

/// The static sizes of one `LinearAttention` op.
struct Sizes {
    batch: u64,
    seq: u64,
    key_size: u64,
    value_size: u64,
}

fn linear_sizes(dims: &LinearAttentionDims) -> Option<Sizes> {
    Some(Sizes {
        batch: dims.batch.as_static()?,
        seq: dims.seq.as_static()?,
        key_size: dims.key_size.as_static()?,
        value_size: dims.value_size.as_static()?,
    })
}

/// The scratch bytes of a `LinearAttention` op: one f32 state per query head (0 when the
/// shapes are not static; lowering then says why).
pub(super) fn linear_attention_scratch(func: &Function, op: OpId) -> u64 {
    LinearAttentionDims::resolve(&OpCtx { func, op })
        .ok()
        .and_then(|d| {
            let s = linear_sizes(&d)?;
            [s.batch, d.q_heads, s.key_size, s.value_size, 4]
                .iter()
                .try_fold(1u64, |acc, &x| acc.checked_mul(x))
        })
        .unwrap_or(0)
}

/// Rejects element types other than f32.
fn check_f32(op_name: &str, tensors: &[&TensorRef]) -> Result<(), LowerError> {
    match tensors.iter().find(|t| t.elem != Scalar::F32) {
        Some(t) => Err(unsupported(format!(
            "{op_name} in {} (its kernels compute in f32)",
            t.elem.name()
        ))),
        None => Ok(()),
    }
}

/// `onnx.LinearAttention`: see the module doc. Loop axes: outer `[batch, kv_heads, group,
/// value_size]`, inner `[key_size]`.
pub(super) fn linear_attention(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let dims = LinearAttentionDims::resolve(&OpCtx { func: ctx.func, op }).map_err(unsupported)?;
    let s = linear_sizes(&dims).ok_or_else(|| unsupported("a shape is not static"))?;
    if s.seq > MAX_UNROLLED_TOKENS {
        return Err(unsupported(format!(
            "LinearAttention over {} tokens (its recurrence is unrolled, at most {MAX_UNROLLED_TOKENS} tokens)",
            s.seq
        )));
    }
    let q = ctx.input(op, LinearAttentionDims::QUERY)?;
    let k = ctx.input(op, LinearAttentionDims::KEY)?;
    let v = ctx.input(op, LinearAttentionDims::VALUE)?;
    let past = ctx.operand(op, LinearAttentionDims::PAST_STATE)?;
    let decay = ctx.operand(op, LinearAttentionDims::DECAY)?;
    let beta = ctx.operand(op, LinearAttentionDims::BETA)?;
    let out = ctx.result(op, 0)?;
    let present = ctx.result(op, 1)?;
    let mut all = vec![&q, &k, &v, &out, &present];
    all.extend(past.iter().chain(&decay).chain(&beta));
    check_f32("LinearAttention", &all)?;
    let (kv_heads, q_heads) = (dims.kv_heads, dims.q_heads);
    let group = q_heads / kv_heads.max(1);
    let (dk, dv) = (s.key_size as i64, s.value_size as i64);
    let state_bytes = s.batch * q_heads * s.key_size * s.value_size * 4;
    let scratch = ctx
        .scratch(op)
        .filter(|t| t.numel() >= state_bytes)
        .ok_or_else(|| unsupported("LinearAttention planned without its scratch (the state)"))?;
    let t_len = s.seq as i64;
    let g = group as i64;
    let (hq, hkv) = (q_heads as i64, kv_heads as i64);
    // Views over (b, h, g, m, d): the state column of the row, then per-token operands.
    let at = |t: &TensorRef, strides: [i64; 5], offset: i64| View {
        byte_offset: t.byte_offset + offset * t.elem.size() as i64,
        ..t.view_with(strides.to_vec())
    };
    let state_t = TensorRef {
        region: scratch.region,
        byte_offset: scratch.byte_offset,
        elem: Scalar::F32,
        shape: vec![s.batch, q_heads, s.key_size, s.value_size],
    };
    let mut views = vec![at(&state_t, [hq * dk * dv, g * dk * dv, dk * dv, 1, dv], 0)];
    let mut view = |v: View| {
        views.push(v);
        views.len() as u32 - 1
    };
    let past_view = past
        .as_ref()
        .map(|p| view(at(p, [hkv * dk * dv, dk * dv, 0, 1, dv], 0)));
    // Token `t`'s views: query (per query head), key, value, decay, beta, output.
    struct Token {
        q: u32,
        k: u32,
        v: u32,
        decay: Option<u32>,
        beta: Option<u32>,
        out: u32,
    }
    let tokens: Vec<Token> = (0..t_len)
        .map(|t| Token {
            q: view(at(&q, [t_len * hq * dk, g * dk, dk, 0, 1], t * hq * dk)),
            k: view(at(&k, [t_len * hkv * dk, dk, 0, 0, 1], t * hkv * dk)),
            v: view(at(&v, [t_len * hkv * dv, dv, 0, 1, 0], t * hkv * dv)),
            decay: decay.as_ref().map(|d| {
                if dims.decay_per_element {
                    view(at(d, [t_len * hkv * dk, dk, 0, 0, 1], t * hkv * dk))
                } else {
                    view(at(d, [t_len * hkv, 1, 0, 0, 0], t * hkv))
                }
            }),
            beta: beta.as_ref().map(|b| {
                let n = if dims.beta_per_head { hkv } else { 1 };
                let head = if dims.beta_per_head { 1 } else { 0 };
                view(at(b, [t_len * n, head, 0, 0, 0], t * n))
            }),
            out: view(at(&out, [t_len * hq * dv, g * dv, dv, 1, 0], t * hq * dv)),
        })
        .collect();
    let scale = match ctx.attr_float(op, "scale") {
        0.0 => 1.0 / (s.key_size as f64).sqrt(),
        given => given,
    };

    // The state column starts as the past state's (or zeros).
    let mut stages = Vec::new();
    let mut b = Insts::new();
    let init = match past_view {
        Some(p) => b.load(&views, p),
        None => b.constant(Scalar::F32, 0.0),
    };
    stages.push(map_store(b, 0, init));
    for token in &tokens {
        if let Some(decay) = token.decay {
            // S *= exp(g).
            let mut b = Insts::new();
            let state = b.load(&views, 0);
            let g = b.load(&views, decay);
            let factor = b.unary(UnaryOp::Exp, g);
            let decayed = b.binary(BinaryOp::Mul, state, factor);
            stages.push(map_store(b, 0, decayed));
        }
        let retrieved = if dims.rule.delta {
            // r = S . k, over the key.
            let mut b = Insts::new();
            let state = b.load(&views, 0);
            let key = b.load(&views, token.k);
            let product = b.binary(BinaryOp::Mul, state, key);
            stages.push(sum_stage(b, product));
            Some(stages.len() - 1)
        } else {
            None
        };
        // S += k * u, u = beta * (v - r) or v.
        let mut b = Insts::new();
        let state = b.load(&views, 0);
        let key = b.load(&views, token.k);
        let mut u = b.load(&views, token.v);
        if let (Some(r), Some(beta)) = (retrieved, token.beta) {
            let r = b.acc(r, Scalar::F32);
            let beta = b.load(&views, beta);
            let diff = b.binary(BinaryOp::Sub, u, r);
            u = b.binary(BinaryOp::Mul, beta, diff);
        }
        let write = b.binary(BinaryOp::Mul, key, u);
        let updated = b.binary(BinaryOp::Add, state, write);
        stages.push(map_store(b, 0, updated));
        // o = scale * q . S.
        let mut b = Insts::new();
        let query = b.load(&views, token.q);
        let state = b.load(&views, 0);
        let product = b.binary(BinaryOp::Mul, query, state);
        stages.push(sum_stage(b, product));
        let read = stages.len() - 1;
        let mut b = Insts::new();
        let acc = b.acc(read, Scalar::F32);
        let factor = b.constant(Scalar::F32, scale);
        let o = b.binary(BinaryOp::Mul, acc, factor);
        stages.push(Stage::Once {
            insts: b.finish(),
            stores: vec![Store::new(token.out, o)],
        });
    }
    let recurrence = loop_kernel(
        ctx.kernel_name(op, 0),
        vec![s.batch, kv_heads, group, s.value_size],
        vec![s.key_size],
        views,
        stages,
    );
    // The present state: the first query head's copy in each group.
    let present_state = strided_copy(
        ctx.kernel_name(op, 1),
        &[s.batch, kv_heads, s.key_size, s.value_size],
        present.view_identity(0),
        state_t.view_with(vec![hq * dk * dv, g * dk * dv, dv, 1]),
    );
    Ok(vec![recurrence, present_state])
}

/// A `Map` stage storing `value` into `view`.
fn map_store(b: Insts, view: u32, value: InstId) -> Stage {
    Stage::Map {
        insts: b.finish(),
        stores: vec![Store::new(view, value)],
    }
}

/// A `Reduce` stage summing `value` (f32) over the inner loop.
fn sum_stage(b: Insts, value: InstId) -> Stage {
    Stage::Reduce {
        insts: b.finish(),
        value,
        op: ReduceOp::Sum,
        init: 0f64.to_bits(),
        ty: Scalar::F32,
    }
}

/// `onnx.CausalConvWithState`: see the module doc.
pub(super) fn causal_conv_with_state(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let dims = CausalConvDims::resolve(&OpCtx { func: ctx.func, op }).map_err(unsupported)?;
    let (Some(batch), Some(channels), Some(length), Some(kernel)) = (
        dims.batch.as_static(),
        dims.channels.as_static(),
        dims.length.as_static(),
        dims.kernel.as_static(),
    ) else {
        return Err(unsupported("a shape is not static"));
    };
    let x = ctx.input(op, CausalConvDims::INPUT)?;
    let w = ctx.input(op, CausalConvDims::WEIGHT)?;
    let bias = ctx.operand(op, CausalConvDims::BIAS)?;
    let past = ctx.operand(op, CausalConvDims::PAST_STATE)?;
    let y = ctx.result(op, 0)?;
    let present = ctx.result(op, 1)?;
    let mut all = vec![&x, &w, &y, &present];
    all.extend(bias.iter().chain(&past));
    check_f32("CausalConvWithState", &all)?;
    let (c, l, k) = (channels as i64, length as i64, kernel as i64);
    let carried = k - 1;
    let mut kernels = Vec::new();

    // The padded sequence p = [past (carried positions), input (length positions)], read at
    // position `offset + sum coeffs * index` through two guarded views (pad 0).
    let padded = |coeffs: Vec<i64>, position: i64, strides: &dyn Fn(i64) -> Vec<i64>| {
        let mut views = Vec::new();
        if let Some(p) = &past {
            let mut view = p.view_with(strides(carried));
            view.byte_offset += position * p.elem.size() as i64;
            view.guards.push(guard(coeffs.clone(), position, carried));
            views.push(view);
        }
        let mut view = x.view_with(strides(l));
        view.byte_offset += (position - carried) * x.elem.size() as i64;
        view.guards.push(guard(coeffs, position - carried, l));
        views.push(view);
        views
    };

    // The output: outer (b, c, l), inner (j): sum_j w[c, j] * p[l + j].
    let mut views = vec![y.view_identity(1), w.view_with(vec![0, k, 0, 1])];
    if let Some(bias) = &bias {
        views.push(bias.view_with(vec![0, 1, 0, 0]));
    }
    let first_padded = views.len() as u32;
    views.extend(padded(vec![0, 0, 1, 1], 0, &|len| vec![c * len, len, 1, 1]));
    let mut b = Insts::new();
    let mut tap = None;
    for view in first_padded..views.len() as u32 {
        let value = b.load(&views, view);
        tap = Some(match tap {
            Some(sum) => b.binary(BinaryOp::Add, sum, value),
            None => value,
        });
    }
    let tap = tap.ok_or_else(|| unsupported("no input view (a memc bug)"))?;
    let weight = b.load(&views, 1);
    let product = b.binary(BinaryOp::Mul, weight, tap);
    let reduce = sum_stage(b, product);
    let mut b = Insts::new();
    let mut value = b.acc(0, Scalar::F32);
    if bias.is_some() {
        let bias = b.load(&views, 2);
        value = b.binary(BinaryOp::Add, value, bias);
    }
    if dims.silu {
        // x * sigmoid(x) = x / (1 + e ^ -x).
        let neg = b.unary(UnaryOp::Neg, value);
        let e = b.unary(UnaryOp::Exp, neg);
        let one = b.constant(Scalar::F32, 1.0);
        let denominator = b.binary(BinaryOp::Add, one, e);
        value = b.binary(BinaryOp::Div, value, denominator);
    }
    kernels.push(loop_kernel(
        ctx.kernel_name(op, 0),
        vec![batch, channels, length],
        vec![kernel],
        views,
        vec![
            reduce,
            Stage::Once {
                insts: b.finish(),
                stores: vec![Store::new(0, value)],
            },
        ],
    ));

    // The present state: p[length + q] for q < carried.
    if carried > 0 && batch * channels > 0 {
        let mut views = vec![present.view_identity(0)];
        views.extend(padded(vec![0, 0, 1], l, &|len| vec![c * len, len, 1]));
        let mut b = Insts::new();
        let mut value = None;
        for view in 1..views.len() as u32 {
            let loaded = b.load(&views, view);
            value = Some(match value {
                Some(sum) => b.binary(BinaryOp::Add, sum, loaded),
                None => loaded,
            });
        }
        let value = value.ok_or_else(|| unsupported("no input view (a memc bug)"))?;
        kernels.push(loop_kernel(
            ctx.kernel_name(op, 1),
            vec![batch, channels, carried as u64],
            Vec::new(),
            views,
            vec![map_store(b, 0, value)],
        ));
    }
    Ok(kernels)
}
