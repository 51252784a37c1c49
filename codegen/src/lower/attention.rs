//! The LLM ops: `Attention` (opsets 23 and 24) and `RotaryEmbedding` (opset 23), lowered to
//! the kernels every other op uses: [`Contract`]s for the two products, one row kernel for the
//! bias, softcap and softmax, strided copies for the key-value cache.
//!
//! `Attention` runs, with its dims from `memc_ir::ops::AttentionDims` (whose module doc gives
//! the logical layout every operand is read in):
//!
//! 1. `present_key` and `present_value`, when used: the past and the new keys (values) copied
//!    one after the other along the sequence.
//! 2. The scores `scale * Q K^T`, `[batch, q_heads, q_seq, total_seq]`, into the op's planned
//!    scratch: one contraction per key segment (the past keys, then the new ones), each
//!    writing its columns. The batch runs over `[batch, kv_heads, group]` with
//!    `group = q_heads / kv_heads`: the key operand does not move along `group`, so each key
//!    head serves its group of query heads without a copy (grouped-query attention). 3-d
//!    operands are read through strides as `[batch, heads, seq, size]`; nothing is transposed.
//! 3. One row kernel over `[batch, q_heads, q_seq]` rows of `total_seq` scores: the softcap
//!    (`c * tanh(x / c)`), the bias (the mask, bool or numeric, its missing columns masked
//!    out; `is_causal`'s `-inf` above the diagonal shifted by the past length; `-inf` past each
//!    batch's `nonpad_kv_seqlen`), then softmax (max, sum of exponentials, divide) in the
//!    `softmax_precision`, written back over the scores. `qk_matmul_output` is stored at the
//!    stage its mode names.
//! 4. `Y = P V`: one contraction per value segment, the later ones accumulating.
//!
//! The numbers follow the ONNX function body (and reference): a row whose every score is
//! masked gives NaN, as softmax of `-inf`s does there. `RotaryEmbedding` is one map kernel
//! over `[batch, seq, heads, 2, rotary_dim / 2]` (which half, or even and odd, and the pair
//! index), reading the caches at the position ids with indirect loads, and a copy of each
//! head's elements past the rotary dim.
//!
//! Guarantees: kernels read and write only the op's operands, results and planned scratch;
//! an element type other than f32 and f64, or a plan without the scratch, is reported as
//! unsupported, never computed wrongly.

use super::build::{guard, Insts, TensorRef};
use super::movement::common::{loop_kernel, strided_copy};
use super::{elem_type, unsupported, LowerCtx, LowerError, LowerResult};
use crate::kernel::{
    BinaryOp, Contract, IndirectIndex, Kernel, KernelBody, MatView, ReduceOp, Scalar, Stage, Store,
    UnaryOp, View,
};
use memc_ir::ops::{AttentionDims, OpCtx, QkOutputMode, RotaryDims};
use memc_ir::{Dim, ElemType, Function, OpId};

/// The sizes of one `Attention` op, all static.
struct Sizes {
    batch: u64,
    q_heads: u64,
    kv_heads: u64,
    q_seq: u64,
    kv_seq: u64,
    past_seq: u64,
    total_seq: u64,
    v_head_size: u64,
    head_size: u64,
}

impl Sizes {
    /// Query heads per key-value head.
    fn group(&self) -> u64 {
        self.q_heads / self.kv_heads.max(1)
    }

    /// Elements of the scores.
    fn scores(&self) -> u64 {
        self.batch * self.q_heads * self.q_seq * self.total_seq
    }
}

fn static_dim(dim: &Dim) -> Result<u64, String> {
    dim.as_static()
        .ok_or_else(|| "a shape is not static".to_string())
}

fn sizes(dims: &AttentionDims) -> Result<Sizes, String> {
    Ok(Sizes {
        batch: static_dim(&dims.batch)?,
        q_heads: static_dim(&dims.q_heads)?,
        kv_heads: static_dim(&dims.kv_heads)?,
        q_seq: static_dim(&dims.q_seq)?,
        kv_seq: static_dim(&dims.kv_seq)?,
        past_seq: static_dim(&dims.past_seq)?,
        total_seq: static_dim(&dims.total_seq)?,
        v_head_size: static_dim(&dims.v_head_size)?,
        head_size: static_dim(&dims.head_size)?,
    })
}

/// The dims and static sizes of `op`.
fn resolve(func: &Function, op: OpId) -> Result<(AttentionDims, Sizes), String> {
    let dims = AttentionDims::resolve(&OpCtx { func, op })?;
    let sizes = sizes(&dims)?;
    Ok((dims, sizes))
}

/// The scratch bytes of an `Attention` op: the scores in Q's element type (0 when the shapes
/// are not static or the type has no kernels; lowering then says why).
pub(super) fn scratch_bytes(func: &Function, op: OpId) -> u64 {
    let bytes = (|| {
        let (_, s) = resolve(func, op).ok()?;
        let q = *func.op(op).operands.first()?;
        let elem = Scalar::from_elem(func.value_type(q).tensor()?.elem);
        s.scores().checked_mul(elem.size())
    })();
    bytes.unwrap_or(0)
}

/// A bound on the contractions of an `Attention` op, `(batches, m, n, k)`: `Q K^T` is
/// `q_seq x total_seq` over `head_size`, `P V` is `q_seq x v_head_size` over `total_seq`, for
/// every batch and query head (`None` when the shapes are not static).
pub(super) fn contraction_bound(func: &Function, op: OpId) -> Option<(u64, u64, u64, u64)> {
    let (_, s) = resolve(func, op).ok()?;
    let n = s.total_seq.max(s.v_head_size);
    let k = s.head_size.max(s.total_seq);
    Some((s.batch * s.q_heads, s.q_seq, n, k))
}

/// The element strides of `t` read as `[batch, heads, seq, size]`: a 4-d tensor is that
/// layout; a 3-d one is `[batch, seq, heads * size]`.
fn logical_strides(t: &TensorRef, heads: u64) -> [i64; 4] {
    let s = t.strides();
    if t.rank() == 4 {
        [s[0], s[1], s[2], s[3]]
    } else {
        let size = t.shape[2] / heads.max(1);
        [s[0], size as i64, s[1], 1]
    }
}

/// Strides over the batch `[batch, kv_heads, group]` of a tensor with `[batch, heads, ...]`
/// strides `s`: a query-side tensor (`per_query_head`) moves along the group, a key-value one
/// does not.
fn group_batch(s: &[i64; 4], group: u64, per_query_head: bool) -> Vec<i64> {
    if per_query_head {
        vec![s[0], s[1] * group as i64, s[1]]
    } else {
        vec![s[0], s[1], 0]
    }
}

/// A matrix operand of a contraction.
fn mat(t: &TensorRef, elem_offset: i64, batch: Vec<i64>, row: i64, col: i64) -> MatView {
    MatView {
        region: t.region,
        byte_offset: t.byte_offset + elem_offset * t.elem.size() as i64,
        batch_strides: batch,
        row_stride: row,
        col_stride: col,
    }
}

/// `c = alpha * a b (+ c)` over `batch`, with batch axes of extent 1 dropped.
#[allow(clippy::too_many_arguments)]
fn contract(
    name: String,
    elem: Scalar,
    batch: &[u64],
    [m, n, k]: [u64; 3],
    [mut a, mut b, mut c]: [MatView; 3],
    alpha: f64,
    accumulate: bool,
) -> Kernel {
    let keep: Vec<usize> = (0..batch.len()).filter(|&i| batch[i] != 1).collect();
    for v in [&mut a, &mut b, &mut c] {
        v.batch_strides = keep.iter().map(|&i| v.batch_strides[i]).collect();
    }
    Kernel {
        name,
        body: KernelBody::Contract(Contract {
            elem,
            batch: keep.iter().map(|&i| batch[i]).collect(),
            m,
            n,
            k,
            a,
            b: b.into(),
            c,
            alpha: alpha.to_bits(),
            accumulate,
            pack: None,
            a_packed: None,
            b_packed: None,
            transposed: false,
            winograd: None,
        }),
    }
}

/// One run of keys and values along the total sequence: the past cache or the new ones.
struct Segment {
    key: TensorRef,
    value: TensorRef,
    /// Where the segment starts in the total sequence.
    start: u64,
    len: u64,
}

/// `onnx.Attention`: see the module doc.
pub(super) fn attention(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let (dims, s) = resolve(ctx.func, op).map_err(unsupported)?;
    let q = ctx.input(op, AttentionDims::Q)?;
    let k = ctx.input(op, AttentionDims::K)?;
    let v = ctx.input(op, AttentionDims::V)?;
    let y = ctx.result(op, AttentionDims::Y)?;
    let elem = q.elem;
    if !matches!(elem, Scalar::F32 | Scalar::F64) || !ctx.target.contracts(elem_type(elem)) {
        return Err(unsupported(format!(
            "attention in {} (its products are contractions in f32 or f64)",
            elem.name()
        )));
    }
    if v.elem != elem {
        return Err(unsupported(format!(
            "V in {} and Q in {} (one contraction type for both products)",
            v.elem.name(),
            elem.name()
        )));
    }
    // Softmax computes in its precision (f32 at least); the scores are stored in Q's type, as
    // the function body casts them back before the second product.
    let compute = match dims.softmax_precision {
        None | Some(ElemType::F32) => elem,
        Some(ElemType::F64) => Scalar::F64,
        Some(other) => {
            return Err(unsupported(format!(
                "softmax_precision {} (kernels compute in f32 and f64)",
                other.mlir_name()
            )))
        }
    };
    let scores_bytes = s.scores() * elem.size();
    let scratch = ctx
        .scratch(op)
        .filter(|t| t.numel() >= scores_bytes)
        .ok_or_else(|| unsupported("attention planned without its scratch memory (the scores)"))?;
    let scores = TensorRef {
        region: scratch.region,
        byte_offset: scratch.byte_offset,
        elem,
        shape: vec![s.batch, s.q_heads, s.q_seq, s.total_seq],
    };
    let name = |i: usize| ctx.kernel_name(op, i);
    let mut kernels = Vec::new();

    // The key and value segments, in total-sequence order.
    let mut segments = Vec::new();
    if let (Some(past_key), Some(past_value)) = (
        ctx.operand(op, AttentionDims::PAST_KEY)?,
        ctx.operand(op, AttentionDims::PAST_VALUE)?,
    ) {
        segments.push(Segment {
            key: past_key,
            value: past_value,
            start: 0,
            len: s.past_seq,
        });
    }
    segments.push(Segment {
        key: k,
        value: v,
        start: s.past_seq,
        len: s.kv_seq,
    });

    // 1. The present key and value: the segments one after the other.
    for (result, is_key, size) in [
        (AttentionDims::PRESENT_KEY, true, s.head_size),
        (AttentionDims::PRESENT_VALUE, false, s.v_head_size),
    ] {
        if !ctx.result_used(op, result) {
            continue;
        }
        let present = ctx.result(op, result)?;
        let own = present.strides();
        for seg in &segments {
            let src = if is_key { &seg.key } else { &seg.value };
            let ls = logical_strides(src, s.kv_heads);
            let dst = present.view_with(own.clone());
            let dst = View {
                byte_offset: dst.byte_offset + (seg.start as i64 * own[2]) * elem.size() as i64,
                ..dst
            };
            kernels.push(strided_copy(
                name(kernels.len()),
                &[s.batch, s.kv_heads, seg.len, size],
                dst,
                src.view_with(ls.to_vec()),
            ));
        }
    }

    // 2. The scores, segment by segment.
    let group = s.group();
    let batch = [s.batch, s.kv_heads, group];
    let scale = ctx
        .attr(op, "scale")
        .and_then(memc_ir::Attribute::as_float)
        .unwrap_or_else(|| 1.0 / (s.head_size as f64).sqrt());
    let sc = scores.strides();
    let qs = logical_strides(&q, s.q_heads);
    for seg in &segments {
        let ks = logical_strides(&seg.key, s.kv_heads);
        kernels.push(contract(
            name(kernels.len()),
            elem,
            &batch,
            [s.q_seq, seg.len, s.head_size],
            [
                mat(&q, 0, group_batch(&qs, group, true), qs[2], qs[3]),
                // K^T: rows over the head size, columns over the sequence.
                mat(&seg.key, 0, group_batch(&ks, group, false), ks[3], ks[2]),
                mat(
                    &scores,
                    seg.start as i64,
                    group_batch(&[sc[0], sc[1], sc[2], sc[3]], group, true),
                    sc[2],
                    1,
                ),
            ],
            scale,
            false,
        ));
    }

    // 3. Softcap, bias and softmax over each row of scores.
    kernels.push(softmax_rows(
        ctx,
        op,
        &dims,
        &s,
        &scores,
        compute,
        name(kernels.len()),
    )?);

    // 4. Y = P V, the later segments accumulating.
    let ys = logical_strides(&y, s.q_heads);
    for (i, seg) in segments.iter().enumerate() {
        let vs = logical_strides(&seg.value, s.kv_heads);
        kernels.push(contract(
            name(kernels.len()),
            elem,
            &batch,
            [s.q_seq, s.v_head_size, seg.len],
            [
                mat(
                    &scores,
                    seg.start as i64,
                    group_batch(&[sc[0], sc[1], sc[2], sc[3]], group, true),
                    sc[2],
                    1,
                ),
                mat(&seg.value, 0, group_batch(&vs, group, false), vs[2], vs[3]),
                mat(&y, 0, group_batch(&ys, group, true), ys[2], ys[3]),
            ],
            1.0,
            i > 0,
        ));
    }
    Ok(kernels)
}

/// The row kernel of step 3 (see the module doc): loop axes `[batch, q_heads, q_seq]` outer,
/// `[total_seq]` inner; view 0 the scores.
fn softmax_rows(
    ctx: &LowerCtx,
    op: OpId,
    dims: &AttentionDims,
    s: &Sizes,
    scores: &TensorRef,
    t: Scalar,
    name: String,
) -> Result<Kernel, LowerError> {
    const ROW: usize = 2;
    const COL: usize = 3;
    let row_shape = [s.batch, s.q_heads, s.q_seq, s.total_seq];
    let mut views = vec![scores.view_identity(0)];
    let qk_view = if ctx.result_used(op, AttentionDims::QK_OUTPUT) {
        let qk = ctx.result(op, AttentionDims::QK_OUTPUT)?;
        views.push(qk.view_identity(0));
        Some(views.len() as u32 - 1)
    } else {
        None
    };
    let mask = match ctx.operand(op, AttentionDims::MASK)? {
        Some(mask) => {
            let len = mask.shape.last().copied().unwrap_or(1);
            let mut shape = row_shape;
            shape[COL] = len;
            let mut view = mask.view_broadcast(&shape, 0);
            if len < s.total_seq {
                // The columns past the mask's are masked out; the guard keeps their loads in
                // bounds.
                view.guards.push(guard(vec![0, 0, 0, 1], 0, len as i64));
            }
            views.push(view);
            Some((views.len() as u32 - 1, len))
        }
        None => None,
    };
    let nonpad = match ctx.operand(op, AttentionDims::NONPAD_KV_SEQLEN)? {
        Some(lens) => {
            views.push(lens.view_with(vec![1, 0, 0, 0]));
            Some(views.len() as u32 - 1)
        }
        None => None,
    };
    let causal = ctx.attr_int(op, "is_causal") != 0;
    let softcap = ctx.attr_float(op, "softcap");
    let elem = scores.elem;

    // Stage 0: softcap and bias, written back over the scores.
    let mut b = Insts::new();
    let mut stores = Vec::new();
    let x = b.load(&views, 0);
    let mut x = b.cast(x, t);
    let store_qk = |b: &mut Insts, stores: &mut Vec<Store>, x, mode| {
        if let Some(view) = qk_view.filter(|_| dims.qk_mode == mode) {
            let value = b.cast(x, views[view as usize].elem);
            stores.push(Store::new(view, value));
        }
    };
    store_qk(&mut b, &mut stores, x, QkOutputMode::Product);
    if softcap > 0.0 {
        let c = b.constant(t, softcap);
        let scaled = b.binary(BinaryOp::Div, x, c);
        let tanh = b.unary(UnaryOp::Tanh, scaled);
        x = b.binary(BinaryOp::Mul, tanh, c);
    }
    store_qk(&mut b, &mut stores, x, QkOutputMode::Softcapped);
    let zero = b.constant(t, 0.0);
    let neg_inf = b.constant(t, f64::NEG_INFINITY);
    let col = b.index(COL);
    let mut bias = None;
    let mut add_bias = |b: &mut Insts, term| {
        bias = Some(match bias {
            Some(sum) => b.binary(BinaryOp::Add, sum, term),
            None => term,
        });
    };
    if let Some((view, len)) = mask {
        let m = b.load(&views, view);
        let mut term = if views[view as usize].elem == Scalar::Bool {
            b.select(m, zero, neg_inf)
        } else {
            b.cast(m, t)
        };
        if len < s.total_seq {
            let limit = b.constant_int(Scalar::I64, len as i64);
            let inside = b.binary(BinaryOp::Lt, col, limit);
            term = b.select(inside, term, neg_inf);
        }
        add_bias(&mut b, term);
    }
    if causal {
        // Query row `i` sees keys up to `past_seq + i`.
        let row = b.index(ROW);
        let past = b.constant_int(Scalar::I64, s.past_seq as i64);
        let last = b.binary(BinaryOp::Add, row, past);
        let after = b.binary(BinaryOp::Gt, col, last);
        let term = b.select(after, neg_inf, zero);
        add_bias(&mut b, term);
    }
    if let Some(view) = nonpad {
        let len = b.load(&views, view);
        let inside = b.binary(BinaryOp::Lt, col, len);
        let term = b.select(inside, zero, neg_inf);
        add_bias(&mut b, term);
    }
    if let Some(bias) = bias {
        x = b.binary(BinaryOp::Add, x, bias);
    }
    store_qk(&mut b, &mut stores, x, QkOutputMode::Masked);
    let stored = b.cast(x, elem);
    stores.push(Store::new(0, stored));
    let biased = Stage::Map {
        insts: b.finish(),
        stores,
    };

    // Stages 1 and 2: the row's max and the sum of exponentials.
    let mut b = Insts::new();
    let x = b.load(&views, 0);
    let x = b.cast(x, t);
    let max = Stage::Reduce {
        insts: b.finish(),
        value: x,
        op: ReduceOp::Max,
        init: f64::NEG_INFINITY.to_bits(),
        ty: t,
    };
    let mut b = Insts::new();
    let x = b.load(&views, 0);
    let x = b.cast(x, t);
    let m = b.acc(1, t);
    let d = b.binary(BinaryOp::Sub, x, m);
    let e = b.unary(UnaryOp::Exp, d);
    let sum = Stage::Reduce {
        insts: b.finish(),
        value: e,
        op: ReduceOp::Sum,
        init: 0f64.to_bits(),
        ty: t,
    };

    // Stage 3: the probabilities, over the scores.
    let mut b = Insts::new();
    let mut stores = Vec::new();
    let x = b.load(&views, 0);
    let x = b.cast(x, t);
    let m = b.acc(1, t);
    let total = b.acc(2, t);
    let d = b.binary(BinaryOp::Sub, x, m);
    let e = b.unary(UnaryOp::Exp, d);
    let p = b.binary(BinaryOp::Div, e, total);
    store_qk(&mut b, &mut stores, p, QkOutputMode::Softmax);
    let stored = b.cast(p, elem);
    stores.push(Store::new(0, stored));
    let probs = Stage::Map {
        insts: b.finish(),
        stores,
    };
    Ok(loop_kernel(
        name,
        vec![s.batch, s.q_heads, s.q_seq],
        vec![s.total_seq],
        views,
        vec![biased, max, sum, probs],
    ))
}

/// `onnx.RotaryEmbedding`: see the module doc.
pub(super) fn rotary_embedding(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let dims = RotaryDims::resolve(&OpCtx { func: ctx.func, op }).map_err(unsupported)?;
    let [batch, seq, heads, head_size, rotary] = [
        &dims.batch,
        &dims.seq,
        &dims.heads,
        &dims.head_size,
        &dims.rotary_dim,
    ]
    .map(|d| d.as_static());
    let (Some(batch), Some(seq), Some(heads), Some(head_size), Some(rotary)) =
        (batch, seq, heads, head_size, rotary)
    else {
        return Err(unsupported("a shape is not static"));
    };
    let x = ctx.input(op, RotaryDims::X)?;
    let cos = ctx.input(op, RotaryDims::COS)?;
    let sin = ctx.input(op, RotaryDims::SIN)?;
    let y = ctx.result(op, 0)?;
    let t = x.elem;
    if !matches!(t, Scalar::F32 | Scalar::F64) {
        return Err(unsupported(format!(
            "RotaryEmbedding in {} (kernels compute in f32 and f64)",
            t.name()
        )));
    }
    let half = rotary / 2;
    // `[batch, seq, heads, size]` strides of X and Y (the same layout).
    let own = x.strides();
    let xs: [i64; 4] = if x.rank() == 4 {
        [own[0], own[2], own[1], own[3]]
    } else {
        [own[0], own[1], head_size as i64, 1]
    };
    let mut kernels = Vec::new();
    if half > 0 && batch * seq * heads > 0 {
        // Loop axes (b, s, h, p, i): element `p * half + i`, or `2 * i + p` interleaved.
        let (p_stride, i_stride, second) = if dims.interleaved {
            (xs[3], 2 * xs[3], xs[3])
        } else {
            (half as i64 * xs[3], xs[3], half as i64 * xs[3])
        };
        let at = |t: &TensorRef, p: i64, i: i64, offset: i64| View {
            byte_offset: t.byte_offset + offset * t.elem.size() as i64,
            ..t.view_with(vec![xs[0], xs[1], xs[2], p, i])
        };
        let mut views = vec![
            at(&y, p_stride, i_stride, 0),
            at(&x, 0, i_stride, 0),
            at(&x, 0, i_stride, second),
        ];
        let mut b = Insts::new();
        let x1 = b.load(&views, 1);
        let x2 = b.load(&views, 2);
        let (c, sn) = match ctx.operand(op, RotaryDims::POSITION_IDS)? {
            Some(ids) => {
                let ids_own = ids.strides();
                views.push(ids.view_with(vec![ids_own[0], ids_own[1], 0, 0, 0]));
                let position = b.load(&views, 3);
                let cache = |b: &mut Insts, views: &mut Vec<View>, t: &TensorRef| {
                    views.push(t.view_with(vec![0, 0, 0, 0, 1]));
                    let index = IndirectIndex {
                        index: position,
                        stride: t.shape[1] as i64,
                        limit: t.shape[0] as i64,
                    };
                    b.load_indirect(views, views.len() as u32 - 1, vec![index])
                };
                let c = cache(&mut b, &mut views, &cos);
                let sn = cache(&mut b, &mut views, &sin);
                (c, sn)
            }
            None => {
                let cache = |b: &mut Insts, views: &mut Vec<View>, t: &TensorRef| {
                    let own = t.strides();
                    views.push(t.view_with(vec![own[0], own[1], 0, 0, own[2]]));
                    b.load(views, views.len() as u32 - 1)
                };
                let c = cache(&mut b, &mut views, &cos);
                let sn = cache(&mut b, &mut views, &sin);
                (c, sn)
            }
        };
        let (c, sn) = (b.cast(c, t), b.cast(sn, t));
        // real = cos * x1 - sin * x2; imag = sin * x1 + cos * x2.
        let cx1 = b.binary(BinaryOp::Mul, c, x1);
        let sx2 = b.binary(BinaryOp::Mul, sn, x2);
        let real = b.binary(BinaryOp::Sub, cx1, sx2);
        let sx1 = b.binary(BinaryOp::Mul, sn, x1);
        let cx2 = b.binary(BinaryOp::Mul, c, x2);
        let imag = b.binary(BinaryOp::Add, sx1, cx2);
        let p = b.index(3);
        let zero = b.constant_int(Scalar::I64, 0);
        let first = b.binary(BinaryOp::Eq, p, zero);
        let value = b.select(first, real, imag);
        kernels.push(loop_kernel(
            ctx.kernel_name(op, 0),
            vec![batch, seq, heads, 2, half],
            Vec::new(),
            views,
            vec![Stage::Map {
                insts: b.finish(),
                stores: vec![Store::new(0, value)],
            }],
        ));
    }
    if rotary < head_size {
        // The elements past the rotary dim pass through.
        let offset = rotary as i64 * xs[3];
        let shifted = |t: &TensorRef| View {
            byte_offset: t.byte_offset + offset * t.elem.size() as i64,
            ..t.view_with(xs.to_vec())
        };
        kernels.push(strided_copy(
            ctx.kernel_name(op, kernels.len()),
            &[batch, seq, heads, head_size - rotary],
            shifted(&y),
            shifted(&x),
        ));
    }
    Ok(kernels)
}
