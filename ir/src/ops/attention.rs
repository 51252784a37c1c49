//! The shapes of the attention ops and their recurrent relatives, resolved once from operand
//! types and attributes: [`AttentionDims`] for `Attention` (opsets 23 and 24), [`RotaryDims`]
//! for `RotaryEmbedding` (opset 23), [`LinearAttentionDims`] for `LinearAttention` and
//! [`CausalConvDims`] for `CausalConvWithState` (opset 27). Shape inference, the FLOP counts and
//! lowering all read them, so they cannot disagree about a head count or a sequence length.
//!
//! `Attention` reads its operands in one logical layout, whatever their rank: Q as
//! `[batch, q_heads, q_seq, head_size]`, K as `[batch, kv_heads, kv_seq, head_size]`, V as
//! `[batch, kv_heads, kv_seq, v_head_size]`. A 4-d operand is that layout; a 3-d one is
//! `[batch, seq, heads * size]` with the head count from `q_num_heads` / `kv_num_heads`. The
//! past key and value (always 4-d) come before K and V along the sequence, so the scores have
//! `total_seq = past_seq + kv_seq` columns. Query head `h` attends with key head
//! `h / (q_heads / kv_heads)` (grouped-query attention; the ONNX reference repeats each key
//! head `q_heads / kv_heads` times).
//!
//! Guarantees: `resolve` never panics; it returns a sentence naming the operand or attribute
//! that is wrong, and a dim it cannot tell is [`Dim::Unknown`], never a wrong one.

use super::OpCtx;
use crate::{Dim, ElemType, TensorType};

/// What `qk_matmul_output` holds (`qk_matmul_output_mode`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum QkOutputMode {
    /// 0: the scaled product `Q K^T`.
    Product,
    /// 1: after the softcap.
    Softcapped,
    /// 2: after the mask (the attention bias) is added.
    Masked,
    /// 3: the softmax.
    Softmax,
}

/// The dims of one `Attention` op, in the logical layout of the module doc.
#[derive(Clone, Debug)]
pub struct AttentionDims {
    /// 3 or 4: the rank of Q, K, V and Y.
    pub rank: usize,
    pub batch: Dim,
    pub q_heads: Dim,
    pub kv_heads: Dim,
    pub q_seq: Dim,
    pub kv_seq: Dim,
    /// The past key's and value's sequence length; 0 without them.
    pub past_seq: Dim,
    /// `past_seq + kv_seq`: the columns of the scores.
    pub total_seq: Dim,
    pub head_size: Dim,
    pub v_head_size: Dim,
    /// The attention mask's last dim, when there is a mask (it may be shorter than
    /// `total_seq`; the missing columns are masked out).
    pub mask_len: Option<Dim>,
    pub qk_mode: QkOutputMode,
    /// The float type softmax computes in (`softmax_precision`), when given.
    pub softmax_precision: Option<ElemType>,
}

fn operand<'a>(ctx: &OpCtx<'a>, index: usize, name: &str) -> Result<&'a TensorType, String> {
    ctx.operand_type(index)
        .ok_or_else(|| format!("the `{name}` operand is missing"))
}

/// Two dims that must be equal: `Err` naming `what` when both are static and differ; else the
/// more precise one.
fn same(a: &Dim, b: &Dim, what: &str) -> Result<Dim, String> {
    Ok(match (a, b) {
        (Dim::Static(x), Dim::Static(y)) if x != y => {
            return Err(format!("{what} differ: {x} and {y}"));
        }
        (Dim::Static(_), _) => a.clone(),
        (_, Dim::Static(_)) => b.clone(),
        (Dim::Unknown, _) => b.clone(),
        _ => a.clone(),
    })
}

/// A head-count attribute: positive when present.
fn heads_attr(ctx: &OpCtx, name: &str) -> Result<Option<u64>, String> {
    match ctx.int_attr(name) {
        None => Ok(None),
        Some(n) if n > 0 => Ok(Some(n as u64)),
        Some(n) => Err(format!("`{name}` is {n}; a head count must be positive")),
    }
}

/// `hidden / heads` for a 3-d operand's last dim: `Err` when it is static and not a multiple.
fn split_hidden(hidden: &Dim, heads: u64, what: &str, attr: &str) -> Result<Dim, String> {
    match hidden {
        Dim::Static(h) if h % heads != 0 => Err(format!(
            "{what}'s hidden size {h} is not a multiple of `{attr}` {heads}"
        )),
        Dim::Static(h) => Ok(Dim::Static(h / heads)),
        other => Ok(other.div_exact(&Dim::Static(heads)).unwrap_or(Dim::Unknown)),
    }
}

impl AttentionDims {
    /// Operand positions.
    pub const Q: usize = 0;
    pub const K: usize = 1;
    pub const V: usize = 2;
    pub const MASK: usize = 3;
    pub const PAST_KEY: usize = 4;
    pub const PAST_VALUE: usize = 5;
    pub const NONPAD_KV_SEQLEN: usize = 6;
    /// Result positions.
    pub const Y: usize = 0;
    pub const PRESENT_KEY: usize = 1;
    pub const PRESENT_VALUE: usize = 2;
    pub const QK_OUTPUT: usize = 3;

    /// The dims of `Attention` op `ctx`, checking every rule between its operands and
    /// attributes (see the module doc).
    pub fn resolve(ctx: &OpCtx) -> Result<AttentionDims, String> {
        let q = operand(ctx, Self::Q, "Q")?;
        let k = operand(ctx, Self::K, "K")?;
        let v = operand(ctx, Self::V, "V")?;
        let rank = q.rank();
        if rank != 3 && rank != 4 {
            return Err(format!(
                "Q has type {q}; it must be 3-d (batch, sequence, hidden) or 4-d (batch, heads, sequence, head size)"
            ));
        }
        if k.rank() != rank || v.rank() != rank {
            return Err(format!(
                "Q, K and V must have the same rank, got {q}, {k} and {v}"
            ));
        }
        let q_attr = heads_attr(ctx, "q_num_heads")?;
        let kv_attr = heads_attr(ctx, "kv_num_heads")?;
        let (q_heads, kv_heads, head_size, k_head_size, v_head_size);
        let (batch, q_seq, kv_seq);
        if rank == 3 {
            let (Some(qh), Some(kvh)) = (q_attr, kv_attr) else {
                return Err(
                    "3-d Q, K and V need the `q_num_heads` and `kv_num_heads` attributes"
                        .to_string(),
                );
            };
            q_heads = Dim::Static(qh);
            kv_heads = Dim::Static(kvh);
            head_size = split_hidden(&q.dims[2], qh, "Q", "q_num_heads")?;
            k_head_size = split_hidden(&k.dims[2], kvh, "K", "kv_num_heads")?;
            v_head_size = split_hidden(&v.dims[2], kvh, "V", "kv_num_heads")?;
            batch = q.dims[0].clone();
            q_seq = q.dims[1].clone();
            kv_seq = same(&k.dims[1], &v.dims[1], "the sequence lengths of K and V")?;
        } else {
            let check = |given: Option<u64>, dim: &Dim, attr: &str, what: &str| match (given, dim) {
                (Some(n), Dim::Static(d)) if n != *d => {
                    Err(format!("`{attr}` is {n} but {what} has {d} heads (dim 1)"))
                }
                _ => Ok(()),
            };
            check(q_attr, &q.dims[1], "q_num_heads", "Q")?;
            check(kv_attr, &k.dims[1], "kv_num_heads", "K")?;
            q_heads = q.dims[1].clone();
            kv_heads = same(&k.dims[1], &v.dims[1], "the head counts of K and V")?;
            head_size = q.dims[3].clone();
            k_head_size = k.dims[3].clone();
            v_head_size = v.dims[3].clone();
            batch = q.dims[0].clone();
            q_seq = q.dims[2].clone();
            kv_seq = same(&k.dims[2], &v.dims[2], "the sequence lengths of K and V")?;
        }
        let batch = same(&batch, &k.dims[0], "the batch sizes of Q and K")?;
        let batch = same(&batch, &v.dims[0], "the batch sizes of Q and V")?;
        let head_size = same(&head_size, &k_head_size, "the head sizes of Q and K")?;
        if let (Dim::Static(qh), Dim::Static(kvh)) = (&q_heads, &kv_heads) {
            if *kvh == 0 || qh % kvh != 0 {
                return Err(format!(
                    "Q has {qh} heads and K and V {kvh}; the query heads must be a multiple of the key-value heads"
                ));
            }
        }

        // The past key and value: both or neither, 4-d, matching K and V.
        let past_key = ctx.operand_type(Self::PAST_KEY);
        let past_value = ctx.operand_type(Self::PAST_VALUE);
        let (mut batch, mut kv_heads, mut head_size, mut v_head_size) =
            (batch, kv_heads, head_size, v_head_size);
        let past_seq = match (past_key, past_value) {
            (None, None) => Dim::Static(0),
            (Some(_), None) | (None, Some(_)) => {
                return Err(
                    "`past_key` and `past_value` must be given together (or neither)".to_string(),
                );
            }
            (Some(pk), Some(pv)) => {
                if pk.rank() != 4 || pv.rank() != 4 {
                    return Err(format!(
                        "`past_key` ({pk}) and `past_value` ({pv}) must be 4-d (batch, kv heads, past sequence, head size)"
                    ));
                }
                batch = same(&batch, &pk.dims[0], "the batch sizes of Q and past_key")?;
                batch = same(&batch, &pv.dims[0], "the batch sizes of Q and past_value")?;
                kv_heads = same(&kv_heads, &pk.dims[1], "the head counts of K and past_key")?;
                kv_heads = same(
                    &kv_heads,
                    &pv.dims[1],
                    "the head counts of V and past_value",
                )?;
                head_size = same(&head_size, &pk.dims[3], "the head sizes of K and past_key")?;
                v_head_size = same(
                    &v_head_size,
                    &pv.dims[3],
                    "the head sizes of V and past_value",
                )?;
                same(
                    &pk.dims[2],
                    &pv.dims[2],
                    "the sequence lengths of past_key and past_value",
                )?
            }
        };
        let total_seq = past_seq.add(&kv_seq);

        if let Some(lens) = ctx.operand_type(Self::NONPAD_KV_SEQLEN) {
            if past_key.is_some() {
                return Err(
                    "`nonpad_kv_seqlen` cannot be used with `past_key` and `past_value` (the cache is updated outside the op)"
                        .to_string(),
                );
            }
            if lens.rank() != 1 {
                return Err(format!(
                    "`nonpad_kv_seqlen` has type {lens}; it must be 1-d (batch)"
                ));
            }
            batch = same(
                &batch,
                &lens.dims[0],
                "the batch sizes of Q and nonpad_kv_seqlen",
            )?;
        }

        // The mask broadcasts to [batch, q_heads, q_seq, total_seq], except that its last dim
        // may be shorter (the rest is masked out).
        let mask_len = match ctx.operand_type(Self::MASK) {
            None => None,
            Some(mask) => {
                if mask.rank() > 4 || mask.rank() == 0 {
                    return Err(format!(
                        "`attn_mask` has type {mask}; it must have rank 1 to 4, broadcasting to (batch, q_heads, q_sequence, total_sequence)"
                    ));
                }
                let target = [&batch, &q_heads, &q_seq];
                let lead = &mask.dims[..mask.rank() - 1];
                for (i, dim) in lead.iter().enumerate() {
                    let want = target[3 - lead.len() + i];
                    if let (Dim::Static(m), Dim::Static(t)) = (dim, want) {
                        if *m != 1 && m != t {
                            return Err(format!(
                                "`attn_mask` has type {mask}, which does not broadcast to (batch, q_heads, q_sequence, total_sequence) = ({batch}, {q_heads}, {q_seq}, {total_seq}): its dim {i} ({m}) is neither 1 nor {t}"
                            ));
                        }
                    }
                }
                let last = mask.dims[mask.rank() - 1].clone();
                if let (Dim::Static(m), Dim::Static(t)) = (&last, &total_seq) {
                    if m > t {
                        return Err(format!(
                            "`attn_mask` has {m} columns but there are only {t} keys (past and new)"
                        ));
                    }
                }
                Some(last)
            }
        };

        let qk_mode = match ctx.int_or_default("qk_matmul_output_mode") {
            0 => QkOutputMode::Product,
            1 => QkOutputMode::Softcapped,
            2 => QkOutputMode::Masked,
            3 => QkOutputMode::Softmax,
            other => {
                return Err(format!(
                    "`qk_matmul_output_mode` is {other}; it must be 0, 1, 2 or 3"
                ))
            }
        };
        let softmax_precision = match ctx.int_attr("softmax_precision") {
            None => None,
            Some(code) => Some(
                ElemType::from_onnx(code)
                    .filter(|e| e.is_float())
                    .ok_or_else(|| {
                        format!("`softmax_precision` {code} is not a float type (1, 10, 11 or 16)")
                    })?,
            ),
        };
        match ctx.int_or_default("is_causal") {
            0 | 1 => {}
            other => return Err(format!("`is_causal` is {other}; it must be 0 or 1")),
        }
        if let Some(scale) = ctx.float_attr("scale") {
            if !scale.is_finite() {
                return Err(format!("`scale` is {scale}; it must be finite"));
            }
        }
        Ok(AttentionDims {
            rank,
            batch,
            q_heads,
            kv_heads,
            q_seq,
            kv_seq,
            past_seq,
            total_seq,
            head_size,
            v_head_size,
            mask_len,
            qk_mode,
            softmax_precision,
        })
    }

    /// Y: `[batch, q_heads, q_seq, v_head_size]`, or `[batch, q_seq, q_heads * v_head_size]`
    /// for 3-d inputs.
    pub fn y_dims(&self) -> Vec<Dim> {
        if self.rank == 3 {
            vec![
                self.batch.clone(),
                self.q_seq.clone(),
                self.q_heads.mul(&self.v_head_size),
            ]
        } else {
            vec![
                self.batch.clone(),
                self.q_heads.clone(),
                self.q_seq.clone(),
                self.v_head_size.clone(),
            ]
        }
    }

    /// present_key: `[batch, kv_heads, total_seq, head_size]`.
    pub fn present_key_dims(&self) -> Vec<Dim> {
        vec![
            self.batch.clone(),
            self.kv_heads.clone(),
            self.total_seq.clone(),
            self.head_size.clone(),
        ]
    }

    /// present_value: `[batch, kv_heads, total_seq, v_head_size]`.
    pub fn present_value_dims(&self) -> Vec<Dim> {
        vec![
            self.batch.clone(),
            self.kv_heads.clone(),
            self.total_seq.clone(),
            self.v_head_size.clone(),
        ]
    }

    /// The scores (and qk_matmul_output): `[batch, q_heads, q_seq, total_seq]`.
    pub fn scores_dims(&self) -> Vec<Dim> {
        vec![
            self.batch.clone(),
            self.q_heads.clone(),
            self.q_seq.clone(),
            self.total_seq.clone(),
        ]
    }
}

/// The dims of one `RotaryEmbedding` op. X is read as `[batch, seq, heads, head_size]`: a 4-d
/// X is `[batch, heads, seq, head_size]`, a 3-d one `[batch, seq, heads * head_size]` with
/// `num_heads` heads. The first `rotary_dim` elements of each head rotate (by halves, or by
/// even and odd elements with `interleaved`); the rest pass through.
#[derive(Clone, Debug)]
pub struct RotaryDims {
    /// 3 or 4: the rank of X.
    pub rank: usize,
    pub batch: Dim,
    pub seq: Dim,
    pub heads: Dim,
    pub head_size: Dim,
    /// The rotated part of each head (`rotary_embedding_dim`, or the head size when 0).
    pub rotary_dim: Dim,
    pub interleaved: bool,
}

impl RotaryDims {
    /// Operand positions.
    pub const X: usize = 0;
    pub const COS: usize = 1;
    pub const SIN: usize = 2;
    pub const POSITION_IDS: usize = 3;

    /// The dims of `RotaryEmbedding` op `ctx`, checking the caches and position ids against X.
    pub fn resolve(ctx: &OpCtx) -> Result<RotaryDims, String> {
        let x = operand(ctx, Self::X, "X")?;
        let cos = operand(ctx, Self::COS, "cos_cache")?;
        let sin = operand(ctx, Self::SIN, "sin_cache")?;
        let (batch, seq, heads, head_size) = match x.rank() {
            4 => (
                x.dims[0].clone(),
                x.dims[2].clone(),
                x.dims[1].clone(),
                x.dims[3].clone(),
            ),
            3 => {
                let heads = heads_attr(ctx, "num_heads")?.ok_or_else(|| {
                    "a 3-d X needs the `num_heads` attribute".to_string()
                })?;
                let head_size = split_hidden(&x.dims[2], heads, "X", "num_heads")?;
                (
                    x.dims[0].clone(),
                    x.dims[1].clone(),
                    Dim::Static(heads),
                    head_size,
                )
            }
            _ => {
                return Err(format!(
                    "X has type {x}; it must be 3-d (batch, sequence, hidden) or 4-d (batch, heads, sequence, head size)"
                ))
            }
        };
        let rotary_dim = match ctx.int_or_default("rotary_embedding_dim") {
            0 => head_size.clone(),
            n if n > 0 => Dim::Static(n as u64),
            n => {
                return Err(format!(
                    "`rotary_embedding_dim` is {n}; it must be positive (or 0 for the head size)"
                ))
            }
        };
        if let Dim::Static(r) = rotary_dim {
            if r % 2 != 0 {
                return Err(format!("the rotary dim {r} must be even"));
            }
            if let Dim::Static(h) = head_size {
                if r > h {
                    return Err(format!(
                        "`rotary_embedding_dim` {r} is larger than the head size {h}"
                    ));
                }
            }
        }
        let half = match &rotary_dim {
            Dim::Static(r) => Dim::Static(r / 2),
            other => other.div_exact(&Dim::Static(2)).unwrap_or(Dim::Unknown),
        };
        if cos.rank() != sin.rank()
            || cos
                .dims
                .iter()
                .zip(&sin.dims)
                .any(|(a, b)| same(a, b, "").is_err())
        {
            return Err(format!(
                "cos_cache ({cos}) and sin_cache ({sin}) must have the same shape"
            ));
        }
        let mut batch = batch;
        let mut seq = seq;
        match ctx.operand_type(Self::POSITION_IDS) {
            Some(ids) => {
                if ids.rank() != 2 {
                    return Err(format!(
                        "`position_ids` has type {ids}; it must be 2-d (batch, sequence)"
                    ));
                }
                batch = same(
                    &batch,
                    &ids.dims[0],
                    "the batch sizes of X and position_ids",
                )?;
                seq = same(
                    &seq,
                    &ids.dims[1],
                    "the sequence lengths of X and position_ids",
                )?;
                if cos.rank() != 2 {
                    return Err(format!(
                        "with `position_ids`, cos_cache ({cos}) must be 2-d (max position + 1, rotary dim / 2)"
                    ));
                }
            }
            None => {
                if cos.rank() != 3 {
                    return Err(format!(
                        "without `position_ids`, cos_cache ({cos}) must be 3-d (batch, sequence, rotary dim / 2)"
                    ));
                }
                batch = same(&batch, &cos.dims[0], "the batch sizes of X and cos_cache")?;
                seq = same(
                    &seq,
                    &cos.dims[1],
                    "the sequence lengths of X and cos_cache",
                )?;
            }
        }
        let last = &cos.dims[cos.rank() - 1];
        if let (Dim::Static(c), Dim::Static(h)) = (last, &half) {
            if c != h {
                return Err(format!(
                    "cos_cache and sin_cache have {c} columns but the rotary dim needs {h} (half of {})",
                    2 * h
                ));
            }
        }
        Ok(RotaryDims {
            rank: x.rank(),
            batch,
            seq,
            heads,
            head_size,
            rotary_dim,
            interleaved: ctx.int_or_default("interleaved") != 0,
        })
    }
}

/// The recurrence `LinearAttention` runs (`update_rule`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct UpdateRule {
    /// The state decays by `exp(decay)` before each token (`gated`, `gated_delta`).
    pub gated: bool,
    /// The value written is corrected by what the state already holds (`delta`,
    /// `gated_delta`).
    pub delta: bool,
}

/// The dims of one `LinearAttention` op. Query, key, value, decay and beta are 3-d, heads packed
/// in the last dim: query `[batch, seq, q_heads * key_size]`, key `[batch, seq, kv_heads *
/// key_size]`, value `[batch, seq, kv_heads * value_size]`, decay `[batch, seq, kv_heads *
/// key_size]` (per key element) or `[batch, seq, kv_heads]` (per head), beta `[batch, seq,
/// kv_heads]` or `[batch, seq, 1]`. The state is `[batch, kv_heads, key_size, value_size]`;
/// query head `h` reads the state of key-value head `h / (q_heads / kv_heads)`.
#[derive(Clone, Debug)]
pub struct LinearAttentionDims {
    pub batch: Dim,
    pub seq: Dim,
    pub q_heads: u64,
    pub kv_heads: u64,
    pub key_size: Dim,
    pub value_size: Dim,
    pub rule: UpdateRule,
    /// Whether the decay has one value per key element (else one per head).
    pub decay_per_element: bool,
    /// Whether beta has one value per head (else one for all heads).
    pub beta_per_head: bool,
}

impl LinearAttentionDims {
    /// Operand positions.
    pub const QUERY: usize = 0;
    pub const KEY: usize = 1;
    pub const VALUE: usize = 2;
    pub const PAST_STATE: usize = 3;
    pub const DECAY: usize = 4;
    pub const BETA: usize = 5;

    /// The dims of `LinearAttention` op `ctx`, checking every rule between its operands and
    /// attributes.
    pub fn resolve(ctx: &OpCtx) -> Result<LinearAttentionDims, String> {
        let q = operand(ctx, Self::QUERY, "query")?;
        let k = operand(ctx, Self::KEY, "key")?;
        let v = operand(ctx, Self::VALUE, "value")?;
        for (t, name) in [(q, "query"), (k, "key"), (v, "value")] {
            if t.rank() != 3 {
                return Err(format!(
                    "`{name}` has type {t}; it must be 3-d (batch, sequence, heads * size)"
                ));
            }
        }
        let (Some(q_heads), Some(kv_heads)) = (
            heads_attr(ctx, "q_num_heads")?,
            heads_attr(ctx, "kv_num_heads")?,
        ) else {
            return Err(
                "LinearAttention needs the `q_num_heads` and `kv_num_heads` attributes".to_string(),
            );
        };
        if q_heads % kv_heads != 0 {
            return Err(format!(
                "`q_num_heads` {q_heads} is not a multiple of `kv_num_heads` {kv_heads}"
            ));
        }
        let rule_name = ctx.str_attr("update_rule").unwrap_or_default();
        let rule = match rule_name {
            "linear" => UpdateRule { gated: false, delta: false },
            "gated" => UpdateRule { gated: true, delta: false },
            "delta" => UpdateRule { gated: false, delta: true },
            "gated_delta" => UpdateRule { gated: true, delta: true },
            other => {
                return Err(format!(
                    "`update_rule` \"{other}\" is not one of \"linear\", \"gated\", \"delta\", \"gated_delta\""
                ))
            }
        };
        let key_size = split_hidden(&q.dims[2], q_heads, "query", "q_num_heads")?;
        let k_size = split_hidden(&k.dims[2], kv_heads, "key", "kv_num_heads")?;
        let key_size = same(&key_size, &k_size, "the key sizes of query and key")?;
        let value_size = split_hidden(&v.dims[2], kv_heads, "value", "kv_num_heads")?;
        let mut batch = same(&q.dims[0], &k.dims[0], "the batch sizes of query and key")?;
        batch = same(&batch, &v.dims[0], "the batch sizes of query and value")?;
        let mut seq = same(
            &q.dims[1],
            &k.dims[1],
            "the sequence lengths of query and key",
        )?;
        seq = same(&seq, &v.dims[1], "the sequence lengths of query and value")?;

        let decay = ctx.operand_type(Self::DECAY);
        let beta = ctx.operand_type(Self::BETA);
        match (rule.gated, decay.is_some()) {
            (true, false) => {
                return Err(format!(
                    "`update_rule` \"{rule_name}\" needs the `decay` input"
                ))
            }
            (false, true) => {
                return Err(format!(
                    "`update_rule` \"{rule_name}\" takes no `decay` input"
                ))
            }
            _ => {}
        }
        match (rule.delta, beta.is_some()) {
            (true, false) => {
                return Err(format!(
                    "`update_rule` \"{rule_name}\" needs the `beta` input"
                ))
            }
            (false, true) => {
                return Err(format!(
                    "`update_rule` \"{rule_name}\" takes no `beta` input"
                ))
            }
            _ => {}
        }
        let mut decay_per_element = false;
        if let Some(g) = decay {
            if g.rank() != 3 {
                return Err(format!("`decay` has type {g}; it must be 3-d"));
            }
            batch = same(&batch, &g.dims[0], "the batch sizes of query and decay")?;
            seq = same(&seq, &g.dims[1], "the sequence lengths of query and decay")?;
            let per_element = Dim::Static(kv_heads).mul(&key_size);
            decay_per_element = match &g.dims[2] {
                Dim::Static(n) if *n == kv_heads => false,
                d if d.provably_equal(&per_element) => true,
                d => {
                    return Err(format!(
                        "`decay`'s last dim {d} is neither `kv_num_heads` ({kv_heads}) nor `kv_num_heads` times the key size ({per_element})"
                    ))
                }
            };
        }
        let mut beta_per_head = false;
        if let Some(b) = beta {
            if b.rank() != 3 {
                return Err(format!("`beta` has type {b}; it must be 3-d"));
            }
            batch = same(&batch, &b.dims[0], "the batch sizes of query and beta")?;
            seq = same(&seq, &b.dims[1], "the sequence lengths of query and beta")?;
            beta_per_head = match &b.dims[2] {
                Dim::Static(n) if *n == kv_heads => true,
                Dim::Static(1) => false,
                d => {
                    return Err(format!(
                        "`beta`'s last dim {d} is neither `kv_num_heads` ({kv_heads}) nor 1"
                    ))
                }
            };
        }
        let dims = LinearAttentionDims {
            batch,
            seq,
            q_heads,
            kv_heads,
            key_size,
            value_size,
            rule,
            decay_per_element,
            beta_per_head,
        };
        if let Some(past) = ctx.operand_type(Self::PAST_STATE) {
            let want = dims.state_dims();
            let agree = past.rank() == 4
                && past
                    .dims
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| same(a, b, "").is_ok());
            if !agree {
                return Err(format!(
                    "`past_state` has type {past}; it must be (batch, kv_num_heads, key size, value size) = ({})",
                    want.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Ok(dims)
    }

    /// The output: `[batch, seq, q_heads * value_size]`.
    pub fn output_dims(&self) -> Vec<Dim> {
        vec![
            self.batch.clone(),
            self.seq.clone(),
            Dim::Static(self.q_heads).mul(&self.value_size),
        ]
    }

    /// The state: `[batch, kv_heads, key_size, value_size]`.
    pub fn state_dims(&self) -> Vec<Dim> {
        vec![
            self.batch.clone(),
            Dim::Static(self.kv_heads),
            self.key_size.clone(),
            self.value_size.clone(),
        ]
    }
}

/// The dims of one `CausalConvWithState` op: input `[batch, channels, length]`, a depthwise
/// weight `[channels, 1, kernel]`, optional bias `[channels]` and past state `[batch,
/// channels, kernel - 1]`; the output is like the input, the present state like the past.
#[derive(Clone, Debug)]
pub struct CausalConvDims {
    pub batch: Dim,
    pub channels: Dim,
    pub length: Dim,
    pub kernel: Dim,
    /// The fused SiLU (`activation` "silu" or "swish").
    pub silu: bool,
}

impl CausalConvDims {
    /// Operand positions.
    pub const INPUT: usize = 0;
    pub const WEIGHT: usize = 1;
    pub const BIAS: usize = 2;
    pub const PAST_STATE: usize = 3;

    /// The dims of `CausalConvWithState` op `ctx`, checking the weight, bias and state against
    /// the input.
    pub fn resolve(ctx: &OpCtx) -> Result<CausalConvDims, String> {
        let x = operand(ctx, Self::INPUT, "input")?;
        let w = operand(ctx, Self::WEIGHT, "weight")?;
        if x.rank() != 3 {
            return Err(format!(
                "`input` has type {x}; it must be 3-d (batch, channels, length)"
            ));
        }
        if w.rank() != 3 || !matches!(w.dims[1], Dim::Static(1) | Dim::Unknown) {
            return Err(format!(
                "`weight` has type {w}; it must be (channels, 1, kernel size)"
            ));
        }
        let channels = same(&x.dims[1], &w.dims[0], "the channels of input and weight")?;
        let kernel = w.dims[2].clone();
        if kernel == Dim::Static(0) {
            return Err("the kernel size (weight dim 2) is 0".to_string());
        }
        if let Some(b) = ctx.operand_type(Self::BIAS) {
            if b.rank() != 1 || same(&b.dims[0], &channels, "").is_err() {
                return Err(format!(
                    "`bias` has type {b}; it must be 1-d with one value per channel ({channels})"
                ));
            }
        }
        let mut batch = x.dims[0].clone();
        let state = match &kernel {
            Dim::Static(k) => Dim::Static(k - 1),
            other => other.sub(&Dim::Static(1)),
        };
        if let Some(p) = ctx.operand_type(Self::PAST_STATE) {
            let agree = p.rank() == 3
                && same(&p.dims[1], &channels, "").is_ok()
                && same(&p.dims[2], &state, "").is_ok();
            if !agree {
                return Err(format!(
                    "`past_state` has type {p}; it must be (batch, channels, kernel size - 1) = ({}, {channels}, {state})",
                    x.dims[0]
                ));
            }
            batch = same(
                &batch,
                &p.dims[0],
                "the batch sizes of input and past_state",
            )?;
        }
        let silu = match ctx.str_attr("activation") {
            Some("silu" | "swish") => true,
            Some("none") | None => false,
            Some(other) => {
                return Err(format!(
                    "`activation` \"{other}\" is not one of \"none\", \"silu\", \"swish\""
                ))
            }
        };
        Ok(CausalConvDims {
            batch,
            channels,
            length: x.dims[2].clone(),
            kernel,
            silu,
        })
    }

    /// The state: `[batch, channels, kernel - 1]`.
    pub fn state_dims(&self) -> Vec<Dim> {
        let state = match &self.kernel {
            Dim::Static(k) => Dim::Static(k - 1),
            other => other.sub(&Dim::Static(1)),
        };
        vec![self.batch.clone(), self.channels.clone(), state]
    }
}
