//! Shape functions: result types computed from operand types, attributes and the known values
//! of operands (see [`ShapeCtx`]).
//!
//! Each returns `Ok(Some(types))` when it can tell, `Ok(None)` when it cannot, and `Err` with a
//! sentence when the operands cannot be combined. A dim it cannot tell is [`Dim::Unknown`]: a
//! shape function may say less than the truth, never something else. They never panic and
//! never index out of bounds, whatever the input (shape functions also run on ops the ONNX
//! importer has not verified yet): counts, ranks and attribute values are checked, and size
//! arithmetic is checked or done in `i128`.
//!
//! Symbolic dims follow numpy broadcasting as far as names allow: a named dim against `1` keeps
//! the name, two different names give an unknown dim. Symbols are sizes, so never negative;
//! where ONNX gives `0` a special meaning (a `Reshape` entry copies the input dim) a symbolic
//! entry is taken to be non-zero, as ONNX's own shape inference does. A `Slice` end of
//! `i32::MAX` or more reads to the end of the axis.

use super::attention::{AttentionDims, CausalConvDims, LinearAttentionDims, RotaryDims};
use super::value::{KnownValue, SymInt, MAX_KNOWN_ELEMENTS};
use super::verify::transpose_perm;
use super::window::{AutoPad, WindowAttrs};
use super::ShapeCtx;
use crate::dim::{add_const, ceil_div, static_dim};
use crate::{Attribute, Dim, ElemType, TensorType};
use std::borrow::Cow;

type ShapeResult = Result<Option<Vec<TensorType>>, String>;

fn operand<'a>(ctx: &ShapeCtx<'a>, index: usize) -> Result<&'a TensorType, String> {
    ctx.operand_type(index)
        .ok_or_else(|| format!("operand #{index} is missing"))
}

fn one(ty: TensorType) -> ShapeResult {
    Ok(Some(vec![ty]))
}

/// The known value of operand `index`.
fn known<'a>(ctx: &ShapeCtx<'a>, index: usize) -> Option<Cow<'a, KnownValue>> {
    ctx.known_operand(index)
}

/// The elements of operand `index`, when its value is known.
fn known_syms(ctx: &ShapeCtx, index: usize) -> Option<Vec<SymInt>> {
    known(ctx, index).map(|v| v.elems().to_vec())
}

/// The integers of operand `index`, when all are known constants.
fn known_ints(ctx: &ShapeCtx, index: usize) -> Option<Vec<i64>> {
    known(ctx, index)?.ints()
}

/// The floats of operand `index`, when all are known.
fn known_floats(ctx: &ShapeCtx, index: usize) -> Option<Vec<f64>> {
    known(ctx, index)?.floats()
}

/// Whether operand `index` is present with a known value that has no elements (ONNX uses empty
/// tensors as placeholders for absent inputs).
fn known_empty(ctx: &ShapeCtx, index: usize) -> bool {
    known(ctx, index).is_some_and(|v| v.elems().is_empty())
}

/// The length of a 1-d tensor with a static length of at most [`MAX_KNOWN_ELEMENTS`].
fn static_len(ty: &TensorType) -> Option<usize> {
    match ty.dims.as_slice() {
        [Dim::Static(n)] if *n <= MAX_KNOWN_ELEMENTS => usize::try_from(*n).ok(),
        _ => None,
    }
}

/// `axis` (negative counts from the end) as an index into `rank` dims.
fn axis_index(axis: i64, rank: usize) -> Result<usize, String> {
    super::verify::normalize_axis(axis, rank)
}

/// Normalizes a list of axes; `Err` on an axis out of range or listed twice.
fn axis_set(axes: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    let mut out: Vec<usize> = Vec::with_capacity(axes.len());
    for &axis in axes {
        let a = axis_index(axis, rank)?;
        if out.contains(&a) {
            return Err(format!("axis {axis} is listed twice in {axes:?}"));
        }
        out.push(a);
    }
    Ok(out)
}

/// The product of dims (`1` for none).
fn product(dims: &[Dim]) -> Dim {
    dims.iter().fold(Dim::Static(1), |acc, d| acc.mul(d))
}

/// Whether a dim is provably non-negative: a static size, a symbol, or a polynomial whose
/// coefficients are all positive.
fn is_non_negative(dim: &Dim) -> bool {
    match dim {
        Dim::Static(_) | Dim::Symbol(_) | Dim::AtMost(_) => true,
        Dim::Expr(e) => e.terms().all(|(_, c)| c > 0),
        Dim::Unknown => false,
    }
}

/// Two dims that must be equal (Concat off the axis): the static one, else a named one.
fn unify(a: &Dim, b: &Dim) -> Result<Dim, String> {
    Ok(match (a, b) {
        (Dim::Static(x), Dim::Static(y)) if x != y => {
            return Err(format!("dims {x} and {y} differ"));
        }
        (Dim::Static(_), _) => a.clone(),
        (_, Dim::Static(_)) => b.clone(),
        (Dim::Unknown, _) => b.clone(),
        _ => a.clone(),
    })
}

/// The element type for an ONNX `TensorProto.DataType` code, when memc has it.
pub fn elem_from_onnx_dtype(code: i64) -> Option<ElemType> {
    ElemType::from_onnx(code)
}

/// Known shape-operand entries as dims: `Err` on a negative entry (`what` names the operand).
fn entries_as_dims(values: &[SymInt], what: &str) -> Result<Vec<Dim>, String> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| match v.as_const() {
            Some(c) if c < 0 => Err(format!("{what} entry #{i} is {c}, a negative size")),
            _ => Ok(v.as_dim().unwrap_or(Dim::Unknown)),
        })
        .collect()
}

fn format_entries(values: &[SymInt]) -> String {
    let items: Vec<String> = values.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(", "))
}

// ---------------------------------------------------------------------------------------------
// Elementwise.

/// The result has the type of the first operand.
pub fn same_as_first(ctx: &ShapeCtx) -> ShapeResult {
    one(operand(ctx, 0)?.clone())
}

/// The first operand's shape with a bool element type (`IsNaN`).
pub fn same_shape_bool(ctx: &ShapeCtx) -> ShapeResult {
    one(TensorType::new(
        ElemType::Bool,
        operand(ctx, 0)?.dims.clone(),
    ))
}

pub use crate::dim::broadcast_dim;

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

fn broadcast_operands(ctx: &ShapeCtx, from: usize) -> Result<Vec<Dim>, String> {
    let mut dims = operand(ctx, from)?.dims.clone();
    for i in from + 1..ctx.n_operands() {
        dims = broadcast_dims(&dims, &operand(ctx, i)?.dims)
            .map_err(|e| format!("operands do not broadcast: {e}"))?;
    }
    Ok(dims)
}

/// Elementwise ops over all operands; the element type is the first operand's.
pub fn broadcast(ctx: &ShapeCtx) -> ShapeResult {
    let elem = operand(ctx, 0)?.elem;
    one(TensorType::new(elem, broadcast_operands(ctx, 0)?))
}

/// Comparisons: broadcast, bool result.
pub fn broadcast_to_bool(ctx: &ShapeCtx) -> ShapeResult {
    one(TensorType::new(ElemType::Bool, broadcast_operands(ctx, 0)?))
}

/// `Where(cond, X, Y)`: broadcast of all three, element type of `X`.
pub fn broadcast_where(ctx: &ShapeCtx) -> ShapeResult {
    let elem = operand(ctx, 1)?.elem;
    one(TensorType::new(elem, broadcast_operands(ctx, 0)?))
}

/// `Cast`: the input's shape with the element type `to`.
pub fn cast(ctx: &ShapeCtx) -> ShapeResult {
    let Some(to) = ctx.attr("to").and_then(|a| a.as_elem_type()) else {
        return Ok(None);
    };
    one(TensorType::new(to, operand(ctx, 0)?.dims.clone()))
}

/// `Dropout`: the data's type, and a bool mask of its shape.
pub fn dropout(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    Ok(Some(vec![
        x.clone(),
        TensorType::new(ElemType::Bool, x.dims.clone()),
    ]))
}

/// `DequantizeLinear`: the input's shape with the scale's element type.
pub fn dequantize_linear(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let scale = operand(ctx, 1)?;
    one(TensorType::new(scale.elem, x.dims.clone()))
}

/// `QuantizeLinear`: the input's shape with the zero point's element type, else
/// `output_dtype`'s, else `ui8`.
pub fn quantize_linear(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let elem = match (ctx.operand_type(2), ctx.int_attr("output_dtype")) {
        (Some(zero_point), _) => zero_point.elem,
        (None, Some(code)) if code != 0 => elem_from_onnx_dtype(code)
            .ok_or_else(|| format!("`output_dtype` {code} is not an element type memc has"))?,
        (None, _) => ElemType::U8,
    };
    one(TensorType::new(elem, x.dims.clone()))
}

// ---------------------------------------------------------------------------------------------
// Normalization.

/// `LayerNormalization`: `Y` like `X`; `Mean` and `InvStdDev` keep the dims before `axis` and
/// have 1 from `axis` on, with the element type `stash_type` names.
pub fn layer_normalization(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let axis = axis_index(ctx.int_or_default("axis"), x.rank())?;
    let stash_type = ctx.int_or_default("stash_type");
    let stat_elem = elem_from_onnx_dtype(stash_type)
        .filter(|e| e.is_float())
        .ok_or_else(|| format!("`stash_type` {stash_type} is not a float type"))?;
    let mut stat_dims = x.dims[..axis].to_vec();
    stat_dims.resize(x.rank(), Dim::Static(1));
    let stat = TensorType::new(stat_elem, stat_dims);
    Ok(Some(vec![x.clone(), stat.clone(), stat]))
}

/// `ms.InPlaceAccumulatorV2`: a one-element bool flag, and the updated buffer like the buffer.
pub fn in_place_accumulator(ctx: &ShapeCtx) -> ShapeResult {
    let buffer = operand(ctx, 0)?;
    Ok(Some(vec![
        TensorType::new(ElemType::Bool, vec![Dim::Static(1)]),
        buffer.clone(),
    ]))
}

/// The fused accumulators (`memc.accumulate_gemm`, `memc.accumulate_gather_grad`): the flag.
pub fn accumulator_flag(_ctx: &ShapeCtx) -> ShapeResult {
    one(TensorType::new(ElemType::Bool, vec![Dim::Static(1)]))
}

/// `BatchNormalization`: `Y` like `X`; the running statistics like the input statistics.
pub fn batch_normalization(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let mean = operand(ctx, 3)?;
    let var = operand(ctx, 4)?;
    Ok(Some(vec![x.clone(), mean.clone(), var.clone()]))
}

// ---------------------------------------------------------------------------------------------
// Contractions.

/// `Transpose`: dims permuted by `perm` (reversed when absent).
pub fn transpose(ctx: &ShapeCtx) -> ShapeResult {
    let input = operand(ctx, 0)?;
    let perm = transpose_perm(ctx, input.rank())?;
    let dims = perm.iter().map(|&p| input.dims[p].clone()).collect();
    one(TensorType::new(input.elem, dims))
}

/// `MatMul` with numpy semantics: 1-d operands are promoted and the added dim removed, batch
/// dims broadcast.
pub fn matmul(ctx: &ShapeCtx) -> ShapeResult {
    let a = operand(ctx, 0)?;
    let b = operand(ctx, 1)?;
    if a.rank() == 0 || b.rank() == 0 {
        return Err("MatMul operands must have rank 1 or more".to_string());
    }
    let dims = matmul_dims("MatMul", a.dims.clone(), b.dims.clone())?;
    one(TensorType::new(a.elem, dims))
}

/// The result dims of a numpy matrix product of operands with dims `a_dims` and `b_dims` (each
/// of rank 1 or more); `op` names the op in errors.
fn matmul_dims(op: &str, mut a_dims: Vec<Dim>, mut b_dims: Vec<Dim>) -> Result<Vec<Dim>, String> {
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
            return Err(format!("{op} inner dims differ: {x} and {y}"));
        }
    }
    let batch = broadcast_dims(&a_dims[..a_dims.len() - 2], &b_dims[..b_dims.len() - 2])
        .map_err(|e| format!("{op} batch dims do not broadcast: {e}"))?;
    let mut dims = batch;
    if !a_vector {
        dims.push(a_dims[a_dims.len() - 2].clone());
    }
    if !b_vector {
        dims.push(b_dims[b_dims.len() - 1].clone());
    }
    Ok(dims)
}

/// `Gemm`: `[M, K] x [K, N] -> [M, N]` after `transA`/`transB`; `C` must broadcast to it.
pub fn gemm(ctx: &ShapeCtx) -> ShapeResult {
    let a = operand(ctx, 0)?;
    let b = operand(ctx, 1)?;
    let ([a0, a1], [b0, b1]) = (a.dims.as_slice(), b.dims.as_slice()) else {
        return Err(format!(
            "Gemm needs 2-d A and B, got ranks {} and {}",
            a.rank(),
            b.rank()
        ));
    };
    let (m, k_a) = if ctx.int_or_default("transA") != 0 {
        (a1, a0)
    } else {
        (a0, a1)
    };
    let (k_b, n) = if ctx.int_or_default("transB") != 0 {
        (b1, b0)
    } else {
        (b0, b1)
    };
    if let (Dim::Static(x), Dim::Static(y)) = (k_a, k_b) {
        if x != y {
            return Err(format!("Gemm inner dims differ: {x} and {y}"));
        }
    }
    let out = vec![m.clone(), n.clone()];
    if let Some(c) = ctx.operand_type(2) {
        let fits = c.rank() <= 2
            && broadcast_dims(&out, &c.dims).is_ok_and(|dims| {
                dims.iter()
                    .zip(&out)
                    .all(|(d, o)| !matches!((d, o), (Dim::Static(x), Dim::Static(y)) if x != y))
            });
        if !fits {
            return Err(format!(
                "C of type {c} does not broadcast to the product's [{m}, {n}]"
            ));
        }
    }
    one(TensorType::new(a.elem, out))
}

// ---------------------------------------------------------------------------------------------
// Convolution and pooling.

// The window attributes (strides, dilations, pads, auto_pad, ceil_mode) are read and resolved
// by `super::window`, shared with lowering.

/// Checks that `x` and `w` have the same rank, 3 or more; returns the number of spatial dims.
fn conv_ranks(x: &TensorType, w: &TensorType) -> Result<usize, String> {
    if x.rank() < 3 {
        return Err(format!(
            "the input must have rank 3 or more (N x C x spatial dims), got rank {}",
            x.rank()
        ));
    }
    if w.rank() != x.rank() {
        return Err(format!(
            "the weight has rank {} but the input has rank {}",
            w.rank(),
            x.rank()
        ));
    }
    Ok(x.rank() - 2)
}

fn group_attr(ctx: &ShapeCtx) -> Result<u64, String> {
    let group = ctx.int_or_default("group");
    u64::try_from(group)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| format!("`group` must be positive, got {group}"))
}

/// `Conv`: `[N, C, D...] x [M, C/group, k...] -> [N, M, out...]`.
pub fn conv(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let w = operand(ctx, 1)?;
    let n_spatial = conv_ranks(x, w)?;
    let group = group_attr(ctx)?;
    if let (Some(c), Some(wc)) = (x.dims[1].as_static(), w.dims[1].as_static()) {
        if wc.checked_mul(group) != Some(c) {
            return Err(format!(
                "the input has {c} channels but the weight expects {wc} per group x {group} group(s)"
            ));
        }
    }
    let kernel = WindowAttrs::kernel_sizes(ctx, n_spatial, &w.dims[2..])?;
    let window = WindowAttrs::of(ctx, n_spatial)?;
    let mut dims = vec![x.dims[0].clone(), w.dims[0].clone()];
    for (i, &k) in kernel.iter().enumerate() {
        dims.push(window.output_dim(i, &x.dims[2 + i], k)?);
    }
    one(TensorType::new(x.elem, dims))
}

/// `ConvTranspose`: `[N, C, D...] x [C, M/group, k...] -> [N, M, out...]` with
/// `out = stride * (in - 1) + output_padding + extent - pads`, or `output_shape`.
pub fn conv_transpose(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let w = operand(ctx, 1)?;
    let n_spatial = conv_ranks(x, w)?;
    let group = group_attr(ctx)?;
    if let (Dim::Static(c), Dim::Static(wc)) = (&x.dims[1], &w.dims[0]) {
        if c != wc {
            return Err(format!(
                "the input has {c} channels but the weight has {wc}"
            ));
        }
    }
    let kernel = WindowAttrs::kernel_sizes(ctx, n_spatial, &w.dims[2..])?;
    let window = WindowAttrs::of(ctx, n_spatial)?;
    let mut dims = vec![x.dims[0].clone(), w.dims[1].mul(&Dim::Static(group))];
    if let Some(shape) = ctx.ints_attr("output_shape")? {
        // Either the spatial dims or the whole shape; the spatial dims are the last ones.
        let start = match shape.len() {
            n if n == n_spatial => 0,
            n if n == n_spatial + 2 => 2,
            n => {
                return Err(format!(
                    "`output_shape` has {n} entries but the input has {n_spatial} spatial dims"
                ));
            }
        };
        for &v in &shape[start..] {
            let size = u64::try_from(v).map_err(|_| {
                format!("`output_shape` entries must not be negative, got {shape:?}")
            })?;
            dims.push(Dim::Static(size));
        }
        return one(TensorType::new(x.elem, dims));
    }
    let output_padding = match ctx.ints_attr("output_padding")? {
        None => vec![0; n_spatial],
        Some(p) if p.len() == n_spatial && p.iter().all(|&v| v >= 0) => p,
        Some(p) => {
            return Err(format!(
                "`output_padding` must have {n_spatial} non-negative entries, got {p:?}"
            ));
        }
    };
    for i in 0..n_spatial {
        let input = &x.dims[2 + i];
        let stride = window.strides[i];
        let dim = match (window.auto_pad, kernel[i]) {
            (auto_pad, _) if auto_pad.is_same() => input.mul(&Dim::Static(stride)),
            (_, None) => Dim::Unknown,
            (auto_pad, Some(k)) => {
                let (pad_begin, pad_end) = if auto_pad == AutoPad::Valid {
                    (0, 0)
                } else {
                    let (begin, end) = window.explicit_pads(i);
                    (i128::from(begin), i128::from(end))
                };
                let s = i128::from(stride);
                let extent = i128::from(window.dilations[i]) * (i128::from(k) - 1) + 1;
                // out = s * in + c.
                let c = i128::from(output_padding[i]) + extent - pad_begin - pad_end - s;
                match input.as_static() {
                    Some(n) => {
                        let out = s * i128::from(n) + c;
                        if out < 0 {
                            return Err(format!(
                                "the output size along spatial dim {i} would be negative ({out})"
                            ));
                        }
                        static_dim(out)
                    }
                    None => add_const(&input.mul(&Dim::Static(stride)), c),
                }
            }
        };
        dims.push(dim);
    }
    one(TensorType::new(x.elem, dims))
}

/// `MaxPool` and `AveragePool`: `[N, C, D...] -> [N, C, out...]`; MaxPool's `Indices` has the
/// same shape, `i64`.
pub fn pool(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    if x.rank() < 3 {
        return Err(format!(
            "the input must have rank 3 or more (N x C x spatial dims), got rank {}",
            x.rank()
        ));
    }
    let n_spatial = x.rank() - 2;
    if ctx.attr("kernel_shape").is_none() {
        return Err("requires attribute `kernel_shape`".to_string());
    }
    let kernel = WindowAttrs::kernel_sizes(ctx, n_spatial, &[])?;
    let window = WindowAttrs::of(ctx, n_spatial)?;
    let mut dims = x.dims[..2].to_vec();
    for (i, &k) in kernel.iter().enumerate() {
        dims.push(window.output_dim(i, &x.dims[2 + i], k)?);
    }
    Ok(Some(vec![
        TensorType::new(x.elem, dims.clone()),
        TensorType::new(ElemType::I64, dims),
    ]))
}

/// `GlobalAveragePool`, `GlobalMaxPool`: `[N, C, D...] -> [N, C, 1...]`.
pub fn global_pool(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    if x.rank() < 2 {
        return Err(format!(
            "the input must have rank 2 or more (N x C x spatial dims), got rank {}",
            x.rank()
        ));
    }
    let mut dims = x.dims[..2].to_vec();
    dims.resize(x.rank(), Dim::Static(1));
    one(TensorType::new(x.elem, dims))
}

// ---------------------------------------------------------------------------------------------
// Reductions.

/// The axes a reduction reduces: `Ok(None)` when the axes operand is not known; an empty list
/// means no axes were given.
fn reduce_axes(ctx: &ShapeCtx) -> Result<Option<Vec<i64>>, String> {
    if ctx.operand_type(1).is_some() {
        return Ok(known_ints(ctx, 1));
    }
    Ok(Some(ctx.ints_attr("axes")?.unwrap_or_default()))
}

/// `Reduce*`: axes from the operand (opset 18) or the attribute (older), `keepdims`,
/// `noop_with_empty_axes`.
pub fn reduce(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let keepdims = ctx.int_or_default("keepdims") != 0;
    let Some(axes) = reduce_axes(ctx)? else {
        // The axes are not known: a kept dim is either itself or 1.
        if keepdims {
            let dims = x
                .dims
                .iter()
                .map(|d| match d {
                    Dim::Static(1) => Dim::Static(1),
                    _ => Dim::Unknown,
                })
                .collect();
            return one(TensorType::new(x.elem, dims));
        }
        return Ok(ctx
            .operand_type(1)
            .and_then(static_len)
            .filter(|&n| n <= x.rank())
            .map(|n| vec![TensorType::new(x.elem, vec![Dim::Unknown; x.rank() - n])]));
    };
    let reduced: Vec<usize> = if axes.is_empty() {
        if ctx.int_or_default("noop_with_empty_axes") != 0 {
            return one(x.clone());
        }
        (0..x.rank()).collect()
    } else {
        axis_set(&axes, x.rank())?
    };
    let dims = x
        .dims
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match (reduced.contains(&i), keepdims) {
            (false, _) => Some(d.clone()),
            (true, true) => Some(Dim::Static(1)),
            (true, false) => None,
        })
        .collect();
    one(TensorType::new(x.elem, dims))
}

/// `ArgMax`, `ArgMin`: the input's shape with `axis` reduced, `i64`.
pub fn arg_reduce(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let axis = axis_index(ctx.int_or_default("axis"), x.rank())?;
    let mut dims = x.dims.clone();
    if ctx.int_or_default("keepdims") != 0 {
        dims[axis] = Dim::Static(1);
    } else {
        dims.remove(axis);
    }
    one(TensorType::new(ElemType::I64, dims))
}

/// `TopK`: `Values` and `Indices` with `axis` of size `K`.
pub fn top_k(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let axis = axis_index(ctx.int_or_default("axis"), x.rank())?;
    let k = match known_ints(ctx, 1).as_deref() {
        Some(&[k]) => {
            let k = u64::try_from(k).map_err(|_| format!("K must not be negative, got {k}"))?;
            if let Dim::Static(n) = x.dims[axis] {
                if k > n {
                    return Err(format!("K is {k} but axis {axis} has size {n}"));
                }
            }
            Dim::Static(k)
        }
        Some(other) => return Err(format!("K must have one entry, got {}", other.len())),
        // `K` from data: at most the axis length, the extent known at run time.
        None => x.dims[axis].as_static().map_or(Dim::Unknown, Dim::AtMost),
    };
    let mut dims = x.dims.clone();
    dims[axis] = k;
    Ok(Some(vec![
        TensorType::new(x.elem, dims.clone()),
        TensorType::new(ElemType::I64, dims),
    ]))
}

// ---------------------------------------------------------------------------------------------
// Data-dependent extents: results with a bounded dim (`docs/dynamic-extents.md`).

/// A bounded dim of at most `bound` elements, or `Unknown` when the bound is not static.
fn at_most(bound: Option<u64>) -> Dim {
    bound.map_or(Dim::Unknown, Dim::AtMost)
}

/// `NonZero`: `[rank, <=numel(X)]` (one row of indices per axis).
pub fn non_zero(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let rank = Dim::Static(x.rank() as u64);
    one(TensorType::new(
        ElemType::I64,
        vec![rank, at_most(x.static_num_elements())],
    ))
}

/// `Compress`: the slices along `axis` (the elements, flattened, without one) where the 1-d
/// condition is true, at most as many as the condition has entries and the axis has slices.
pub fn compress(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let condition = operand(ctx, 1)?;
    if condition.rank() != 1 {
        return Err(format!(
            "the condition must be 1-d, got rank {}",
            condition.rank()
        ));
    }
    let limit = condition.dims[0].as_static();
    let bounded = |n: Option<u64>| at_most(n.zip(limit).map(|(n, c)| n.min(c)));
    match ctx.int_attr("axis") {
        None => one(TensorType::new(
            x.elem,
            vec![bounded(x.static_num_elements())],
        )),
        Some(axis) => {
            let axis = axis_index(axis, x.rank())?;
            let mut dims = x.dims.clone();
            dims[axis] = bounded(x.dims[axis].as_static());
            one(TensorType::new(x.elem, dims))
        }
    }
}

/// `Unique`: `Y`, `indices` and `counts` have at most as many entries as `X` has elements
/// (slices along `axis`, with one); `inverse_indices` has one per element (slice).
pub fn unique(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let (y_dims, n) = match ctx.int_attr("axis") {
        None => {
            let n = x.static_num_elements();
            (vec![at_most(n)], n)
        }
        Some(axis) => {
            let axis = axis_index(axis, x.rank())?;
            let n = x.dims[axis].as_static();
            let mut dims = x.dims.clone();
            dims[axis] = at_most(n);
            (dims, n)
        }
    };
    let index = |dim: Dim| TensorType::new(ElemType::I64, vec![dim]);
    Ok(Some(vec![
        TensorType::new(x.elem, y_dims),
        index(at_most(n)),
        index(n.map_or(Dim::Unknown, Dim::Static)),
        index(at_most(n)),
    ]))
}

// ---------------------------------------------------------------------------------------------
// Shape and data movement.

/// Operand `index`, which holds a shape: it must be 1-d.
fn shape_operand<'a>(ctx: &ShapeCtx<'a>, index: usize) -> Result<&'a TensorType, String> {
    let shape = operand(ctx, index)?;
    if shape.rank() != 1 {
        return Err(format!(
            "the shape operand must be 1-d, got rank {}",
            shape.rank()
        ));
    }
    Ok(shape)
}

/// `Reshape`: entries `0` copy the input dim (unless `allowzero`), one `-1` takes what is left.
pub fn reshape(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let shape = shape_operand(ctx, 1)?;
    let allow_zero = ctx.int_or_default("allowzero") != 0;
    let Some(values) = known_syms(ctx, 1) else {
        return Ok(static_len(shape).map(|n| vec![TensorType::new(x.elem, vec![Dim::Unknown; n])]));
    };
    let mut dims = Vec::with_capacity(values.len());
    let mut infer_at = None;
    let mut has_zero = false;
    for (i, v) in values.iter().enumerate() {
        let dim = match v.as_const() {
            Some(0) if allow_zero => {
                has_zero = true;
                Dim::Static(0)
            }
            Some(0) => x.dims.get(i).cloned().ok_or_else(|| {
                format!(
                    "shape entry #{i} is 0, which copies input dim #{i}, but the input has rank {}",
                    x.rank()
                )
            })?,
            Some(-1) => {
                if infer_at.replace(i).is_some() {
                    return Err(format!(
                        "the shape {} has more than one -1",
                        format_entries(&values)
                    ));
                }
                Dim::Unknown
            }
            Some(c) if c < 0 => {
                return Err(format!(
                    "shape entry #{i} is {c}; entries must be -1 or more"
                ));
            }
            _ => v.as_dim().unwrap_or(Dim::Unknown),
        };
        dims.push(dim);
    }
    if allow_zero && has_zero && infer_at.is_some() {
        return Err(format!(
            "with allowzero, the shape {} cannot hold both 0 and -1",
            format_entries(&values)
        ));
    }
    let total = product(&x.dims);
    match infer_at {
        Some(at) => {
            let mut others = dims.clone();
            others.remove(at);
            let others = product(&others);
            dims[at] = match (total.as_static(), others.as_static()) {
                (Some(t), Some(0)) => {
                    return Err(format!(
                        "cannot reshape {t} elements into {}: the -1 entry cannot be inferred when the other entries multiply to 0",
                        format_entries(&values)
                    ));
                }
                (Some(t), Some(o)) if t % o != 0 => {
                    return Err(format!(
                        "cannot reshape {t} elements into {}",
                        format_entries(&values)
                    ));
                }
                (Some(t), Some(o)) => Dim::Static(t / o),
                _ => total.div_exact(&others).unwrap_or(Dim::Unknown),
            };
        }
        None => {
            if let (Some(t), Some(o)) = (total.as_static(), product(&dims).as_static()) {
                if t != o {
                    return Err(format!(
                        "cannot reshape {t} elements into {}",
                        format_entries(&values)
                    ));
                }
            }
        }
    }
    one(TensorType::new(x.elem, dims))
}

/// `Flatten`: `[prod(dims[..axis]), prod(dims[axis..])]`.
pub fn flatten(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let rank = x.rank() as i128;
    let axis = i128::from(ctx.int_or_default("axis"));
    if axis < -rank || axis > rank {
        return Err(format!(
            "axis {axis} is out of range for rank {rank} (expected -{rank}..={rank})"
        ));
    }
    let split = if axis < 0 { axis + rank } else { axis } as usize;
    one(TensorType::new(
        x.elem,
        vec![product(&x.dims[..split]), product(&x.dims[split..])],
    ))
}

/// `Squeeze`: removes the `axes` (each of size 1), or every dim of size 1 when absent.
pub fn squeeze(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let has_axes = ctx.operand_type(1).is_some() && !known_empty(ctx, 1);
    if !has_axes {
        if x.dims.iter().any(|d| d.as_static().is_none()) {
            // A symbolic dim may be 1 at run time.
            return Ok(None);
        }
        let dims = x
            .dims
            .iter()
            .filter(|d| **d != Dim::Static(1))
            .cloned()
            .collect();
        return one(TensorType::new(x.elem, dims));
    }
    let Some(axes) = known_ints(ctx, 1) else {
        return Ok(ctx
            .operand_type(1)
            .and_then(static_len)
            .filter(|&n| n <= x.rank())
            .map(|n| vec![TensorType::new(x.elem, vec![Dim::Unknown; x.rank() - n])]));
    };
    let axes = axis_set(&axes, x.rank())?;
    for &a in &axes {
        if let Dim::Static(n) = x.dims[a] {
            if n != 1 {
                return Err(format!("cannot squeeze axis {a}: its size is {n}, not 1"));
            }
        }
    }
    let dims = x
        .dims
        .iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(i))
        .map(|(_, d)| d.clone())
        .collect();
    one(TensorType::new(x.elem, dims))
}

/// `Unsqueeze`: inserts dims of size 1 at `axes` (positions in the result).
pub fn unsqueeze(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let axes_ty = operand(ctx, 1)?;
    let Some(axes) = known_ints(ctx, 1) else {
        return Ok(static_len(axes_ty)
            .map(|n| vec![TensorType::new(x.elem, vec![Dim::Unknown; x.rank() + n])]));
    };
    let out_rank = x.rank() + axes.len();
    let axes = axis_set(&axes, out_rank)?;
    let mut input = x.dims.iter();
    let dims = (0..out_rank)
        .map(|i| {
            if axes.contains(&i) {
                Dim::Static(1)
            } else {
                // out_rank - |axes| = rank, so the input has a dim for every other position.
                input.next().cloned().unwrap_or(Dim::Unknown)
            }
        })
        .collect();
    one(TensorType::new(x.elem, dims))
}

/// `Concat`: the axis dims add up (symbolically); the others must agree.
pub fn concat(ctx: &ShapeCtx) -> ShapeResult {
    let first = operand(ctx, 0).map_err(|_| "Concat needs at least one input".to_string())?;
    if first.rank() == 0 {
        return Err("Concat inputs must have rank 1 or more".to_string());
    }
    let Some(axis) = ctx.int_attr("axis") else {
        return Err("requires attribute `axis`".to_string());
    };
    let axis = axis_index(axis, first.rank())?;
    let mut dims = first.dims.clone();
    for i in 1..ctx.n_operands() {
        let other = operand(ctx, i)?;
        if other.rank() != first.rank() {
            return Err(format!(
                "input #{i} has rank {} but input #0 has rank {}",
                other.rank(),
                first.rank()
            ));
        }
        for (d, (acc, next)) in dims.iter_mut().zip(&other.dims).enumerate() {
            *acc = if d == axis {
                acc.add(next)
            } else {
                unify(acc, next)
                    .map_err(|e| format!("input #{i} does not match at dim {d}: {e}"))?
            };
        }
    }
    one(TensorType::new(first.elem, dims))
}

/// `ConcatTraining`: `Concat`'s result, and `per_input_length`, an i64 `[n_inputs]`.
pub fn concat_training(ctx: &ShapeCtx) -> ShapeResult {
    let Some(mut types) = concat(ctx)? else {
        return Ok(None);
    };
    let n = ctx.n_operands() as u64;
    types.push(TensorType::new(ElemType::I64, vec![Dim::Static(n)]));
    Ok(Some(types))
}

/// `Split`: sizes from the `split` operand, else `num_outputs` (or the result count) parts
/// of `ceil(dim / n)`, the last one smaller.
pub fn split(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let axis = axis_index(ctx.int_or_default("axis"), x.rank())?;
    let n = ctx.n_results();
    let dim = &x.dims[axis];
    let has_split = ctx.operand_type(1).is_some() && !known_empty(ctx, 1);
    let sizes: Vec<Dim> = if has_split {
        match known_ints(ctx, 1) {
            Some(split) => {
                if split.len() != n {
                    return Err(format!(
                        "`split` has {} entries but the op has {n} results",
                        split.len()
                    ));
                }
                let sizes: Vec<u64> = split
                    .iter()
                    .map(|&s| u64::try_from(s))
                    .collect::<Result<_, _>>()
                    .map_err(|_| format!("`split` entries must not be negative, got {split:?}"))?;
                if let Some(d) = dim.as_static() {
                    let sum = sizes.iter().try_fold(0u64, |acc, &s| acc.checked_add(s));
                    if sum != Some(d) {
                        return Err(format!(
                            "`split` {split:?} does not add up to the size {d} of axis {axis}"
                        ));
                    }
                }
                sizes.into_iter().map(Dim::Static).collect()
            }
            None => vec![Dim::Unknown; n],
        }
    } else {
        if let Some(parts) = ctx.attr("num_outputs").and_then(Attribute::as_int) {
            if usize::try_from(parts).ok() != Some(n) {
                return Err(format!(
                    "`num_outputs` is {parts} but the op has {n} results"
                ));
            }
        }
        if n == 0 {
            return Ok(Some(Vec::new()));
        }
        let parts = n as u64;
        match dim.as_static() {
            Some(d) => {
                let chunk = d.div_ceil(parts);
                let last = i128::from(d) - i128::from(chunk) * (i128::from(parts) - 1);
                if last < 0 {
                    return Err(format!("cannot split size {d} into {n} parts"));
                }
                let mut sizes = vec![Dim::Static(chunk); n - 1];
                sizes.push(static_dim(last));
                sizes
            }
            None => vec![dim.div_exact(&Dim::Static(parts)).unwrap_or(Dim::Unknown); n],
        }
    };
    Ok(Some(
        sizes
            .into_iter()
            .map(|size| {
                let mut dims = x.dims.clone();
                dims[axis] = size;
                TensorType::new(x.elem, dims)
            })
            .collect(),
    ))
}

/// The length of `Slice(start, end, step)` along a dim of size `dim`.
fn slice_len(dim: &Dim, start: &SymInt, end: &SymInt, step: i64) -> Dim {
    let Some(d) = dim.as_static() else {
        // A symbolic dim: only the whole axis can be told.
        let to_end = |e: &SymInt| {
            e.as_const().is_some_and(|e| e >= i64::from(i32::MAX))
                || e.as_dim().is_some_and(|e| e.provably_equal(dim))
        };
        let whole_forward = step == 1 && start.as_const() == Some(0) && to_end(end);
        let whole_backward = step == -1
            && start
                .as_const()
                .is_some_and(|s| s == -1 || s >= i64::from(i32::MAX))
            && end.as_const().is_some_and(|e| e <= i64::from(i32::MIN));
        return if whole_forward || whole_backward {
            dim.clone()
        } else {
            Dim::Unknown
        };
    };
    let (Some(start), Some(end)) = (start.as_const(), end.as_const()) else {
        return Dim::Unknown;
    };
    let (d, step) = (i128::from(d), i128::from(step));
    if d == 0 {
        return Dim::Static(0);
    }
    let resolve = |i: i64| {
        let i = i128::from(i);
        if i < 0 {
            i + d
        } else {
            i
        }
    };
    let (start, end) = (resolve(start), resolve(end));
    let len = if step > 0 {
        ceil_div(end.clamp(0, d) - start.clamp(0, d), step)
    } else {
        ceil_div(start.clamp(0, d - 1) - end.clamp(-1, d - 1), -step)
    };
    static_dim(len.max(0))
}

/// `Slice`: starts, ends, axes and steps as ONNX clamps them.
pub fn slice(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let starts = known_syms(ctx, 1);
    let ends = known_syms(ctx, 2);
    let axes: Option<Vec<i64>> = match ctx.operand_type(3) {
        Some(_) => known_ints(ctx, 3),
        None => {
            let n = starts
                .as_ref()
                .map(Vec::len)
                .or_else(|| ctx.operand_type(1).and_then(static_len));
            n.map(|n| (0..n as i64).collect())
        }
    };
    let steps: Option<Vec<i64>> = match ctx.operand_type(4) {
        Some(_) => known_ints(ctx, 4),
        None => axes.as_ref().map(|a| vec![1; a.len()]),
    };
    let Some(axes) = axes else {
        return one(TensorType::new(x.elem, vec![Dim::Unknown; x.rank()]));
    };
    let axes = axis_set(&axes, x.rank())?;
    let mut dims = x.dims.clone();
    let (Some(starts), Some(ends), Some(steps)) = (starts, ends, steps) else {
        for &a in &axes {
            dims[a] = Dim::Unknown;
        }
        return one(TensorType::new(x.elem, dims));
    };
    if starts.len() != axes.len() || ends.len() != axes.len() || steps.len() != axes.len() {
        return Err(format!(
            "starts, ends, axes and steps must have the same length, got {}, {}, {} and {}",
            starts.len(),
            ends.len(),
            axes.len(),
            steps.len()
        ));
    }
    for (i, &a) in axes.iter().enumerate() {
        if steps[i] == 0 {
            return Err(format!("the step for axis {a} is 0"));
        }
        dims[a] = slice_len(&x.dims[a], &starts[i], &ends[i], steps[i]);
    }
    one(TensorType::new(x.elem, dims))
}

/// `Gather`: `data[..axis] ++ indices ++ data[axis + 1..]`.
pub fn gather(ctx: &ShapeCtx) -> ShapeResult {
    let data = operand(ctx, 0)?;
    let indices = operand(ctx, 1)?;
    let axis = axis_index(ctx.int_or_default("axis"), data.rank())?;
    if let (Some(values), Dim::Static(n)) = (known_ints(ctx, 1), &data.dims[axis]) {
        let n = i128::from(*n);
        if let Some(bad) = values.iter().find(|&&i| !(-n..n).contains(&i128::from(i))) {
            return Err(format!(
                "index {bad} is out of range for axis {axis} of size {n}"
            ));
        }
    }
    let mut dims = data.dims[..axis].to_vec();
    dims.extend(indices.dims.iter().cloned());
    dims.extend(data.dims[axis + 1..].iter().cloned());
    one(TensorType::new(data.elem, dims))
}

/// `GatherElements`: the output has the indices' shape; data and indices have the same rank.
pub fn gather_elements(ctx: &ShapeCtx) -> ShapeResult {
    let data = operand(ctx, 0)?;
    let indices = operand(ctx, 1)?;
    if data.rank() != indices.rank() {
        return Err(format!(
            "data has rank {} but indices have rank {}; GatherElements needs equal ranks",
            data.rank(),
            indices.rank()
        ));
    }
    axis_index(ctx.int_or_default("axis"), data.rank())?;
    one(TensorType::new(data.elem, indices.dims.clone()))
}

/// `GatherND`: `indices.shape[..-1] ++ data.shape[batch_dims + k..]`, where `k` is the last
/// dim of the indices (it must be static to know the output rank).
pub fn gather_nd(ctx: &ShapeCtx) -> ShapeResult {
    let data = operand(ctx, 0)?;
    let indices = operand(ctx, 1)?;
    let batch_dims = usize::try_from(ctx.int_or_default("batch_dims"))
        .map_err(|_| "`batch_dims` must not be negative".to_string())?;
    let Some(last) = indices.dims.last() else {
        return Err("indices must have rank 1 or more".to_string());
    };
    let Some(k) = last.as_static() else {
        return Ok(None);
    };
    let k = usize::try_from(k).map_err(|_| "the index depth is too large".to_string())?;
    let consumed = batch_dims
        .checked_add(k)
        .filter(|&c| c <= data.rank())
        .ok_or_else(|| {
            format!(
                "batch_dims {batch_dims} plus index depth {k} exceeds the data's rank {}",
                data.rank()
            )
        })?;
    if batch_dims >= indices.rank() {
        return Err(format!(
            "batch_dims {batch_dims} must be less than the indices' rank {}",
            indices.rank()
        ));
    }
    let mut dims = indices.dims[..indices.rank() - 1].to_vec();
    dims.extend(data.dims[consumed..].iter().cloned());
    one(TensorType::new(data.elem, dims))
}

/// The first pair of dims of `a` and `b` that are both static and differ, with its position.
fn first_static_mismatch(a: &[Dim], b: &[Dim]) -> Option<(usize, u64, u64)> {
    a.iter()
        .zip(b)
        .enumerate()
        .find_map(|(i, (x, y))| match (x, y) {
            (Dim::Static(x), Dim::Static(y)) if x != y => Some((i, *x, *y)),
            _ => None,
        })
}

/// `ScatterElements`: the data's type. Data, indices and updates have one rank, the updates
/// the indices' shape, and off `axis` the indices are no larger than the data.
pub fn scatter_elements(ctx: &ShapeCtx) -> ShapeResult {
    let data = operand(ctx, 0)?;
    let indices = operand(ctx, 1)?;
    let updates = operand(ctx, 2)?;
    if data.rank() != indices.rank() || updates.rank() != indices.rank() {
        return Err(format!(
            "data, indices and updates have ranks {}, {} and {}; ScatterElements needs equal ranks",
            data.rank(),
            indices.rank(),
            updates.rank()
        ));
    }
    let axis = axis_index(ctx.int_or_default("axis"), data.rank())?;
    if let Some((i, u, n)) = first_static_mismatch(&updates.dims, &indices.dims) {
        return Err(format!(
            "updates dim {i} is {u} but indices dim {i} is {n}; updates need the indices' shape"
        ));
    }
    let larger = indices
        .dims
        .iter()
        .zip(&data.dims)
        .enumerate()
        .find(|&(d, (n, m))| {
            d != axis && matches!((n, m), (Dim::Static(n), Dim::Static(m)) if n > m)
        });
    if let Some((d, (n, m))) = larger {
        return Err(format!(
            "indices dim {d} ({n}) is larger than data dim {d} ({m}) off the axis"
        ));
    }
    one(data.clone())
}

/// `ScatterND`: the data's type. The indices' last dim `k` (at most the data's rank) is the
/// index depth; the updates have shape `indices.shape[..-1] ++ data.shape[k..]`.
pub fn scatter_nd(ctx: &ShapeCtx) -> ShapeResult {
    let data = operand(ctx, 0)?;
    let indices = operand(ctx, 1)?;
    let updates = operand(ctx, 2)?;
    let Some(last) = indices.dims.last() else {
        return Err("indices must have rank 1 or more".to_string());
    };
    let Some(k) = last.as_static() else {
        return Ok(Some(vec![data.clone()]));
    };
    let k = usize::try_from(k)
        .ok()
        .filter(|&k| k <= data.rank())
        .ok_or_else(|| {
            format!(
                "the index depth {k} (the indices' last dim) exceeds the data's rank {}",
                data.rank()
            )
        })?;
    let mut expected = indices.dims[..indices.rank() - 1].to_vec();
    expected.extend(data.dims[k..].iter().cloned());
    if updates.rank() != expected.len() {
        return Err(format!(
            "updates have rank {} but indices and data give rank {} (indices.shape[:-1] ++ data.shape[{k}:])",
            updates.rank(),
            expected.len()
        ));
    }
    if let Some((i, u, e)) = first_static_mismatch(&updates.dims, &expected) {
        return Err(format!(
            "updates dim {i} is {u} but indices and data give {e} (indices.shape[:-1] ++ data.shape[{k}:])"
        ));
    }
    one(data.clone())
}

/// `TensorScatter`: the past cache's type. The update has the cache's shape except along
/// `axis`, where it is no longer; the write indices have one entry per batch entry (dim 0).
pub fn tensor_scatter(ctx: &ShapeCtx) -> ShapeResult {
    let past = operand(ctx, 0)?;
    let update = operand(ctx, 1)?;
    if update.rank() != past.rank() {
        return Err(format!(
            "the update has rank {} but the past cache has rank {}",
            update.rank(),
            past.rank()
        ));
    }
    let axis = axis_index(ctx.int_or_default("axis"), past.rank())?;
    for (d, (u, p)) in update.dims.iter().zip(&past.dims).enumerate() {
        if let (Dim::Static(u), Dim::Static(p)) = (u, p) {
            if (d == axis && u > p) || (d != axis && u != p) {
                return Err(format!(
                    "update dim {d} is {u} but the past cache's is {p}; the update needs the cache's shape, no longer along axis {axis}"
                ));
            }
        }
    }
    if let Some(indices) = ctx.operand_type(2) {
        if indices.rank() != 1 {
            return Err(format!(
                "write_indices have rank {} (expected 1, one per batch entry)",
                indices.rank()
            ));
        }
        if let Some((_, n, b)) = first_static_mismatch(&indices.dims, &past.dims[..1]) {
            return Err(format!(
                "write_indices have {n} entries but the batch (dim 0) is {b}"
            ));
        }
    }
    one(past.clone())
}

/// `Expand`: the input broadcast with the shape operand's values.
pub fn expand(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let shape = shape_operand(ctx, 1)?;
    let target = match known_syms(ctx, 1) {
        Some(values) => entries_as_dims(&values, "shape")?,
        None => match static_len(shape) {
            Some(n) => vec![Dim::Unknown; n],
            None => return Ok(None),
        },
    };
    let dims = broadcast_dims(&x.dims, &target)
        .map_err(|e| format!("the input does not broadcast to the shape: {e}"))?;
    one(TensorType::new(x.elem, dims))
}

/// `Tile`: each dim times its repeat count.
pub fn tile(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let dims = match known_ints(ctx, 1) {
        Some(repeats) => {
            if repeats.len() != x.rank() {
                return Err(format!(
                    "`repeats` has {} entries but the input has rank {}",
                    repeats.len(),
                    x.rank()
                ));
            }
            x.dims
                .iter()
                .zip(&repeats)
                .map(|(d, &r)| {
                    u64::try_from(r)
                        .map(|r| d.mul(&Dim::Static(r)))
                        .map_err(|_| {
                            format!("`repeats` entries must not be negative, got {repeats:?}")
                        })
                })
                .collect::<Result<_, _>>()?
        }
        None => vec![Dim::Unknown; x.rank()],
    };
    one(TensorType::new(x.elem, dims))
}

/// `Pad`: each padded axis grows by its begin and end pads (negative pads crop).
pub fn pad(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let axes: Vec<usize> = match ctx.operand_type(3) {
        Some(_) => match known_ints(ctx, 3) {
            Some(axes) => axis_set(&axes, x.rank())?,
            None => return one(TensorType::new(x.elem, vec![Dim::Unknown; x.rank()])),
        },
        None => (0..x.rank()).collect(),
    };
    let mut dims = x.dims.clone();
    let Some(pads) = known_ints(ctx, 1) else {
        for &a in &axes {
            dims[a] = Dim::Unknown;
        }
        return one(TensorType::new(x.elem, dims));
    };
    if pads.len() != 2 * axes.len() {
        return Err(format!(
            "`pads` has {} entries but {} axes are padded (expected {})",
            pads.len(),
            axes.len(),
            2 * axes.len()
        ));
    }
    for (i, &a) in axes.iter().enumerate() {
        let grow = i128::from(pads[i]) + i128::from(pads[axes.len() + i]);
        dims[a] = match x.dims[a].as_static() {
            Some(n) => {
                let out = i128::from(n) + grow;
                if out < 0 {
                    return Err(format!(
                        "pads {} and {} make axis {a} of size {n} negative",
                        pads[i],
                        pads[axes.len() + i]
                    ));
                }
                static_dim(out)
            }
            None => add_const(&x.dims[a], grow),
        };
    }
    one(TensorType::new(x.elem, dims))
}

/// What is known about an optional operand of Resize.
enum Given<T> {
    Absent,
    Unknown,
    Known(Vec<T>),
}

fn resize_input<T>(ctx: &ShapeCtx, index: usize, values: Option<Vec<T>>) -> Given<T> {
    if ctx.operand_type(index).is_none() || known_empty(ctx, index) {
        return Given::Absent;
    }
    match values {
        Some(v) => Given::Known(v),
        None => Given::Unknown,
    }
}

/// `Resize`: sizes from `sizes`, or `floor(dim * scale)` from `scales`, on `axes`.
pub fn resize(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let axes = match ctx.ints_attr("axes")? {
        Some(axes) if !axes.is_empty() => axis_set(&axes, x.rank())?,
        _ => (0..x.rank()).collect(),
    };
    let scales = resize_input(ctx, 2, known_floats(ctx, 2));
    let sizes = resize_input(ctx, 3, known_ints(ctx, 3));
    let mut dims = x.dims.clone();
    let check_len = |n: usize, what: &str| {
        if n == axes.len() {
            Ok(())
        } else {
            Err(format!(
                "`{what}` has {n} entries but {} axes are resized",
                axes.len()
            ))
        }
    };
    match (sizes, scales) {
        (Given::Known(sizes), _) => {
            check_len(sizes.len(), "sizes")?;
            let sizes: Vec<u64> = sizes
                .iter()
                .map(|&s| u64::try_from(s))
                .collect::<Result<_, _>>()
                .map_err(|_| format!("`sizes` entries must not be negative, got {sizes:?}"))?;
            // The table declares the default (`stretch`).
            let policy = ctx.str_attr("keep_aspect_ratio_policy").unwrap_or_default();
            if policy == "stretch" {
                for (&a, &s) in axes.iter().zip(&sizes) {
                    dims[a] = Dim::Static(s);
                }
            } else if policy == "not_larger" || policy == "not_smaller" {
                let inputs: Option<Vec<u64>> =
                    axes.iter().map(|&a| x.dims[a].as_static()).collect();
                match inputs {
                    Some(inputs) if inputs.iter().all(|&n| n > 0) => {
                        let ratios = inputs
                            .iter()
                            .zip(&sizes)
                            .map(|(&n, &s)| s as f64 / n as f64);
                        let scale = if policy == "not_larger" {
                            ratios.fold(f64::INFINITY, f64::min)
                        } else {
                            ratios.fold(0.0, f64::max)
                        };
                        for (&a, &n) in axes.iter().zip(&inputs) {
                            dims[a] = float_dim((scale * n as f64).round());
                        }
                    }
                    _ => {
                        for &a in &axes {
                            dims[a] = Dim::Unknown;
                        }
                    }
                }
            } else {
                return Err(format!(
                    "`keep_aspect_ratio_policy` must be stretch, not_larger or not_smaller, got {policy:?}"
                ));
            }
        }
        (_, Given::Known(scales)) => {
            check_len(scales.len(), "scales")?;
            if let Some(bad) = scales.iter().find(|s| !(**s > 0.0 && s.is_finite())) {
                return Err(format!("`scales` entries must be positive, got {bad}"));
            }
            let crop = ctx.str_attr("coordinate_transformation_mode") == Some("tf_crop_and_resize");
            for (&a, &scale) in axes.iter().zip(&scales) {
                dims[a] = match (&x.dims[a], crop) {
                    // The size then depends on the region of interest too.
                    (_, true) => Dim::Unknown,
                    (Dim::Static(n), false) => float_dim((*n as f64 * scale).floor()),
                    (d, false) if scale.fract() == 0.0 && scale < 1e18 => {
                        d.mul(&Dim::Static(scale as u64))
                    }
                    _ => Dim::Unknown,
                };
            }
        }
        (Given::Absent, Given::Absent) => return Ok(None),
        _ => {
            for &a in &axes {
                dims[a] = Dim::Unknown;
            }
        }
    }
    one(TensorType::new(x.elem, dims))
}

/// A dim from a float size (already rounded); `Unknown` when it is not a representable size.
fn float_dim(value: f64) -> Dim {
    if value.is_finite() && (0.0..1.8e19).contains(&value) {
        Dim::Static(value as u64)
    } else {
        Dim::Unknown
    }
}

// ---------------------------------------------------------------------------------------------
// Shape computations.

/// The `[start, end)` range of dims `Shape` returns, clamped as ONNX does.
pub(super) fn shape_range(ctx: &ShapeCtx, rank: usize) -> (usize, usize) {
    let r = rank as i128;
    let clamp = |v: i128| {
        let v = if v < 0 { v + r } else { v };
        v.clamp(0, r) as usize
    };
    let start = clamp(ctx.int_attr("start").map_or(0, i128::from));
    let end = clamp(ctx.int_attr("end").map_or(r, i128::from));
    (start, end.max(start))
}

/// `Shape`: a 1-d `i64` tensor of `end - start` entries.
pub fn shape(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let (start, end) = shape_range(ctx, x.rank());
    one(TensorType::with_shape(
        ElemType::I64,
        &[(end - start) as u64],
    ))
}

/// `Size`: an `i64` scalar.
pub fn size(ctx: &ShapeCtx) -> ShapeResult {
    operand(ctx, 0)?;
    one(TensorType::new(ElemType::I64, Vec::new()))
}

/// `ConstantOfShape`: the shape operand's values as dims; the element type of `value` (a
/// weight), `f32` without it.
pub fn constant_of_shape(ctx: &ShapeCtx) -> ShapeResult {
    let shape = shape_operand(ctx, 0)?;
    let elem = match ctx.attr("value") {
        None => ElemType::F32,
        Some(value) => {
            let weight = value.as_weight().and_then(|id| ctx.weights()?.get(id));
            match weight {
                Some(w) => w.ty().elem,
                None => return Ok(None),
            }
        }
    };
    let dims = match known_syms(ctx, 0) {
        Some(values) => entries_as_dims(&values, "shape")?,
        None => match static_len(shape) {
            Some(n) => vec![Dim::Unknown; n],
            None => return Ok(None),
        },
    };
    one(TensorType::new(elem, dims))
}

/// The single element of a known one-element operand.
fn known_scalar(ctx: &ShapeCtx, index: usize) -> Option<SymInt> {
    match known_syms(ctx, index)?.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// The number of elements of `Range(start, limit, delta)`.
pub(super) fn range_len(start: &SymInt, limit: &SymInt, delta: &SymInt) -> Result<Dim, String> {
    if let (Some(s), Some(l), Some(d)) = (start.as_const(), limit.as_const(), delta.as_const()) {
        if d == 0 {
            return Err("delta is 0".to_string());
        }
        let n = ceil_div(
            (i128::from(l) - i128::from(s)) * i128::from(d.signum()),
            i128::from(d).abs(),
        );
        return Ok(static_dim(n.max(0)));
    }
    if let (Some(s), Some(l), Some(d)) = (start.as_float(), limit.as_float(), delta.as_float()) {
        if d == 0.0 {
            return Err("delta is 0".to_string());
        }
        return Ok(float_dim(((l - s) / d).ceil().max(0.0)));
    }
    // Symbolic bounds with a positive integer step: the difference must be provably
    // non-negative and divide exactly.
    let (Some(step), Some(diff)) = (delta.as_const(), limit.sub(start).as_dim()) else {
        return Ok(Dim::Unknown);
    };
    if step <= 0 || !is_non_negative(&diff) {
        return Ok(Dim::Unknown);
    }
    Ok(diff
        .div_exact(&Dim::Static(step as u64))
        .unwrap_or(Dim::Unknown))
}

/// `Range`: a 1-d tensor of `ceil((limit - start) / delta)` elements when known.
pub fn range(ctx: &ShapeCtx) -> ShapeResult {
    let start = operand(ctx, 0)?;
    for i in 0..3 {
        let ty = operand(ctx, i)?;
        if ty.static_num_elements() != Some(1) {
            return Err(format!(
                "Range operands must be scalars, operand #{i} has type {ty}"
            ));
        }
    }
    let len = match (
        known_scalar(ctx, 0),
        known_scalar(ctx, 1),
        known_scalar(ctx, 2),
    ) {
        (Some(s), Some(l), Some(d)) => range_len(&s, &l, &d)?,
        _ => Dim::Unknown,
    };
    one(TensorType::new(start.elem, vec![len]))
}

// ---------------------------------------------------------------------------------------------
// Control flow.

/// The operand types of the `onnx.Yield` that ends `region`.
fn yield_types(ctx: &ShapeCtx, region: crate::RegionId) -> Option<Vec<TensorType>> {
    let func = ctx.func;
    let layout = func.layout();
    let [block] = layout.region_blocks(region) else {
        return None;
    };
    let last = *layout.block_ops(*block).last()?;
    if !func.is_valid_op(last) || func.op(last).opcode != super::Opcode::Yield {
        return None;
    }
    func.op(last)
        .operands
        .iter()
        .map(|&v| {
            func.is_valid_value(v)
                .then(|| func.value_type(v).tensor().cloned())
                .flatten()
        })
        .collect()
}

/// `If`: the types both branches yield, when they agree.
pub fn if_op(ctx: &ShapeCtx) -> ShapeResult {
    let regions = &ctx.func.op(ctx.op).regions;
    let [then_region, else_region] = regions.as_slice() else {
        return Ok(None);
    };
    let then_types = yield_types(ctx, *then_region);
    let else_types = yield_types(ctx, *else_region);
    Ok(match (then_types, else_types) {
        (Some(a), Some(b)) if a == b => Some(a),
        _ => None,
    })
}

/// `CastLike`: the input's shape with the target's element type.
pub fn cast_like(ctx: &ShapeCtx) -> ShapeResult {
    let target = operand(ctx, 1)?;
    one(TensorType::new(target.elem, operand(ctx, 0)?.dims.clone()))
}

/// `EyeLike`: the input's 2-d shape, with `dtype` or the input's element type.
pub fn eye_like(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    if x.rank() != 2 {
        return Err(format!("EyeLike needs a 2-d input, got rank {}", x.rank()));
    }
    let elem = ctx
        .attr("dtype")
        .and_then(|a| a.as_elem_type())
        .unwrap_or(x.elem);
    one(TensorType::new(elem, x.dims.clone()))
}

/// `GridSample`: X `(N, C, D1, ..., Dk)` sampled at grid `(N, D1_out, ..., Dk_out, k)` gives
/// `(N, C, D1_out, ..., Dk_out)`.
pub fn grid_sample(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let grid = operand(ctx, 1)?;
    if x.rank() < 3 {
        return Err(format!(
            "X must be (N, C, D1, ..., Dk) with at least one spatial dim, got rank {}",
            x.rank()
        ));
    }
    if grid.rank() != x.rank() {
        return Err(format!(
            "grid must have X's rank {} (N, the output's {} spatial dims and the coordinates), got rank {}",
            x.rank(),
            x.rank() - 2,
            grid.rank()
        ));
    }
    let k = x.rank() - 2;
    if let Some(n) = grid.dims[k + 1].as_static() {
        if n != k as u64 {
            return Err(format!(
                "the last dim of grid must be {k} (one coordinate per spatial dim of X), got {n}"
            ));
        }
    }
    let batch = unify(&x.dims[0], &grid.dims[0])
        .map_err(|m| format!("X and grid must have the same batch dim N: {m}"))?;
    let mut dims = vec![batch, x.dims[1].clone()];
    dims.extend(grid.dims[1..=k].iter().cloned());
    one(TensorType::new(x.elem, dims))
}

/// `AffineGrid`: theta `(N, 2, 3)` with size `[N, C, H, W]` gives `(N, H, W, 2)`; theta
/// `(N, 3, 4)` with size `[N, C, D, H, W]` gives `(N, D, H, W, 3)`. The spatial dims are
/// unknown while `size` is.
pub fn affine_grid(ctx: &ShapeCtx) -> ShapeResult {
    let theta = operand(ctx, 0)?;
    let size = operand(ctx, 1)?;
    if theta.rank() != 3 {
        return Err(format!(
            "theta must be (N, 2, 3) or (N, 3, 4), got rank {}",
            theta.rank()
        ));
    }
    if size.rank() != 1 {
        return Err(format!(
            "size must be 1-d ([N, C, H, W] or [N, C, D, H, W]), got rank {}",
            size.rank()
        ));
    }
    let spatial = match (
        known_ints(ctx, 1),
        static_len(size),
        theta.dims[1].as_static(),
    ) {
        (Some(values), _, _) => values.len().checked_sub(2),
        (None, Some(len), _) => len.checked_sub(2),
        (None, None, Some(rows)) => usize::try_from(rows).ok(),
        (None, None, None) => return Ok(None),
    };
    let k = match spatial {
        Some(k @ (2 | 3)) => k,
        _ => {
            return Err(
                "size must have 4 entries [N, C, H, W] or 5 entries [N, C, D, H, W]".to_string(),
            )
        }
    };
    for (axis, want) in [(1, k), (2, k + 1)] {
        if let Some(got) = theta.dims[axis].as_static() {
            if got != want as u64 {
                return Err(format!(
                    "theta must be (N, {k}, {}) for {k} spatial dims, got dim {axis} of {got}",
                    k + 1
                ));
            }
        }
    }
    let mut dims = vec![theta.dims[0].clone()];
    match known_ints(ctx, 1) {
        Some(values) => {
            if let Some(bad) = values.iter().find(|&&v| v < 0) {
                return Err(format!("size entries must not be negative, got {bad}"));
            }
            dims[0] = unify(&theta.dims[0], &Dim::Static(values[0] as u64))
                .map_err(|m| format!("size[0] must be theta's batch dim N: {m}"))?;
            dims.extend(values[2..].iter().map(|&v| Dim::Static(v as u64)));
        }
        None => dims.extend(std::iter::repeat_n(Dim::Unknown, k)),
    }
    dims.push(Dim::Static(k as u64));
    one(TensorType::new(theta.elem, dims))
}

fn block_size(ctx: &ShapeCtx) -> Result<u64, String> {
    match ctx.attr("blocksize").and_then(|a| a.as_int()) {
        Some(b) if b > 0 => Ok(b as u64),
        _ => Err("`blocksize` must be positive".to_string()),
    }
}

/// `DepthToSpace`: `[N, C, H, W]` to `[N, C / b^2, H * b, W * b]`.
pub fn depth_to_space(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let b = block_size(ctx)?;
    if x.rank() != 4 {
        return Err(format!(
            "DepthToSpace needs a 4-d input, got rank {}",
            x.rank()
        ));
    }
    let c = x.dims[1].div_exact(&Dim::Static(b * b)).ok_or_else(|| {
        format!(
            "channels {} are not divisible by blocksize^2 = {}",
            x.dims[1],
            b * b
        )
    })?;
    let scale = Dim::Static(b);
    one(TensorType::new(
        x.elem,
        vec![
            x.dims[0].clone(),
            c,
            x.dims[2].mul(&scale),
            x.dims[3].mul(&scale),
        ],
    ))
}

/// `SpaceToDepth`: `[N, C, H, W]` to `[N, C * b^2, H / b, W / b]`.
pub fn space_to_depth(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let b = block_size(ctx)?;
    if x.rank() != 4 {
        return Err(format!(
            "SpaceToDepth needs a 4-d input, got rank {}",
            x.rank()
        ));
    }
    let block = Dim::Static(b);
    let h = x.dims[2]
        .div_exact(&block)
        .ok_or_else(|| format!("height {} is not divisible by {b}", x.dims[2]))?;
    let w = x.dims[3]
        .div_exact(&block)
        .ok_or_else(|| format!("width {} is not divisible by {b}", x.dims[3]))?;
    one(TensorType::new(
        x.elem,
        vec![x.dims[0].clone(), x.dims[1].mul(&Dim::Static(b * b)), h, w],
    ))
}

/// `memc.matmul_nbits`: `A`'s dims with the last (`K`) replaced by the attribute `N`, in `A`'s
/// element type (`[..., M, K] -> [..., M, N]`; see `verify::matmul_nbits` for the layout).
pub fn matmul_nbits(ctx: &ShapeCtx) -> ShapeResult {
    let a = operand(ctx, 0)?;
    let Some((last, batch)) = a.dims.split_last() else {
        return Err("memc.matmul_nbits needs A of rank 1 or more".to_string());
    };
    let Some(n) = ctx.int_attr("N") else {
        return Ok(None);
    };
    let n = u64::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("`N` must be positive, got {n}"))?;
    if let (Dim::Static(a_k), Some(k)) = (last, ctx.int_attr("K")) {
        if i128::from(*a_k) != i128::from(k) {
            return Err(format!("A's last dim is {a_k} but K is {k}"));
        }
    }
    let mut dims = batch.to_vec();
    dims.push(Dim::Static(n));
    one(TensorType::new(a.elem, dims))
}

// ---------------------------------------------------------------------------------------------
// Training: the transformer's contractions and normalization gradients (onnxruntime's
// `com.microsoft` ops).

/// The order in which `ms.FusedMatMul` reads the dims of an operand of rank `rank`: with
/// `trans_batch` the first dim moves behind the other batch dims (`[1, .., rank - 2, 0,
/// rank - 1]`), then with `trans` the last two dims swap. A 1-d operand is read as it is
/// (numpy's transpose of a vector is the vector). Lowering reads operands through the same
/// permutation, so shapes and kernels agree.
pub fn fused_matmul_perm(rank: usize, trans: bool, trans_batch: bool) -> Vec<usize> {
    if rank < 2 {
        return (0..rank).collect();
    }
    let mut perm: Vec<usize> = if trans_batch {
        (1..rank - 1).chain([0, rank - 1]).collect()
    } else {
        (0..rank).collect()
    };
    if trans {
        perm.swap(rank - 2, rank - 1);
    }
    perm
}

/// `ms.FusedMatMul`: the MatMul of the operands read in the order of [`fused_matmul_perm`].
pub fn fused_matmul(ctx: &ShapeCtx) -> ShapeResult {
    let a = operand(ctx, 0)?;
    let b = operand(ctx, 1)?;
    if a.rank() == 0 || b.rank() == 0 {
        return Err("FusedMatMul operands must have rank 1 or more".to_string());
    }
    let read = |t: &TensorType, trans: &str, trans_batch: &str| -> Vec<Dim> {
        let perm = fused_matmul_perm(
            t.rank(),
            ctx.int_or_default(trans) != 0,
            ctx.int_or_default(trans_batch) != 0,
        );
        perm.iter().map(|&p| t.dims[p].clone()).collect()
    };
    let a_dims = read(a, "transA", "transBatchA");
    let b_dims = read(b, "transB", "transBatchB");
    let dims = matmul_dims("FusedMatMul", a_dims, b_dims)?;
    one(TensorType::new(a.elem, dims))
}

/// `ms.LayerNormalizationGrad`: `X_grad` like `X`; `scale_grad` and `bias_grad` like `scale`.
pub fn layer_normalization_grad(ctx: &ShapeCtx) -> ShapeResult {
    let dy = operand(ctx, 0)?;
    let x = operand(ctx, 1)?;
    let scale = operand(ctx, 2)?;
    if dy.rank() != x.rank() {
        return Err(format!(
            "Y_grad has rank {} but X has rank {}",
            dy.rank(),
            x.rank()
        ));
    }
    axis_index(ctx.int_or_default("axis"), x.rank())?;
    Ok(Some(vec![x.clone(), scale.clone(), scale.clone()]))
}

/// `ms.GatherGrad`: a tensor of the shape the `shape` operand holds (the Gather's data shape),
/// with `dY`'s element type. `dY` has the Gather's output shape, `shape[..axis] ++ indices ++
/// shape[axis + 1..]`, so every dim but `axis` can also be read from it.
pub fn gather_grad(ctx: &ShapeCtx) -> ShapeResult {
    let shape = shape_operand(ctx, 0)?;
    let indices = operand(ctx, 1)?;
    let dy = operand(ctx, 2)?;
    let Some(rank) = static_len(shape) else {
        return Ok(None);
    };
    let axis = axis_index(ctx.int_or_default("axis"), rank)?;
    let q = indices.rank();
    if dy.rank() + 1 != rank + q {
        return Err(format!(
            "dY has rank {} but a Gather of a rank-{rank} tensor by rank-{q} indices has rank {}",
            dy.rank(),
            rank + q - 1
        ));
    }
    let mut dims = match known_syms(ctx, 0) {
        Some(values) => entries_as_dims(&values, "shape")?,
        None => vec![Dim::Unknown; rank],
    };
    for (i, dim) in dims.iter_mut().enumerate() {
        if i == axis {
            continue;
        }
        let from_dy = &dy.dims[if i < axis { i } else { i + q - 1 }];
        match (&*dim, from_dy) {
            (Dim::Unknown, _) => *dim = from_dy.clone(),
            (Dim::Static(x), Dim::Static(y)) if x != y => {
                return Err(format!(
                    "shape dim #{i} is {x} but the matching dim of dY is {y}"
                ));
            }
            _ => {}
        }
    }
    one(TensorType::new(dy.elem, dims))
}

// ---------------------------------------------------------------------------------------------
// Training: losses.

/// The element type a loss writes: `output_type`'s when given (the internal forms), else that
/// of operand `index`.
fn loss_elem(ctx: &ShapeCtx, index: usize) -> Result<ElemType, String> {
    match ctx.int_attr("output_type") {
        Some(code) => elem_from_onnx_dtype(code)
            .filter(|e| e.is_float())
            .ok_or_else(|| format!("`output_type` {code} is not a float element type")),
        None => Ok(operand(ctx, index)?.elem),
    }
}

/// The forward losses: the labels' shape for reduction `none`, else a scalar; the optional
/// `log_prob` like the scores.
pub fn loss(ctx: &ShapeCtx) -> ShapeResult {
    let scores = operand(ctx, 0)?;
    let labels = operand(ctx, 1)?;
    let elem = loss_elem(ctx, 0)?;
    let dims = match ctx.str_attr("reduction") {
        Some("none") => labels.dims.clone(),
        _ => Vec::new(),
    };
    Ok(Some(vec![
        TensorType::new(elem, dims),
        TensorType::new(elem, scores.dims.clone()),
    ]))
}

/// The softmax cross-entropy gradients: `log_prob`'s shape.
pub fn loss_grad(ctx: &ShapeCtx) -> ShapeResult {
    let elem = loss_elem(ctx, 0)?;
    one(TensorType::new(elem, operand(ctx, 1)?.dims.clone()))
}

// ---------------------------------------------------------------------------------------------
// Training: CNN (onnxruntime's training forms of convolutional nets).

/// `ms.BatchNormInternal`: `Y` like `X`; the running and saved statistics `[C]`, typed like
/// the input statistics.
pub fn batch_norm_internal(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let mean = operand(ctx, 3)?;
    let var = operand(ctx, 4)?;
    if x.rank() < 2 {
        return Err(format!(
            "the input must have rank 2 or more (N x C x ...), got rank {}",
            x.rank()
        ));
    }
    let channels = vec![x.dims[1].clone()];
    let mean = TensorType::new(mean.elem, channels.clone());
    let var = TensorType::new(var.elem, channels);
    Ok(Some(vec![x.clone(), mean.clone(), var.clone(), mean, var]))
}

/// `ms.BatchNormalizationGrad`: `dX` like `X`; `dscale` and `dbias` like `scale`.
pub fn batch_norm_grad(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 1)?;
    let scale = operand(ctx, 2)?;
    if x.rank() < 2 {
        return Err(format!(
            "the input must have rank 2 or more (N x C x ...), got rank {}",
            x.rank()
        ));
    }
    Ok(Some(vec![x.clone(), scale.clone(), scale.clone()]))
}

/// `ms.ConvGrad`: `dX` like `X`, `dW` like `W`, `dB` `[M]` (`W`'s first dim).
pub fn conv_grad(ctx: &ShapeCtx) -> ShapeResult {
    let dy = operand(ctx, 0)?;
    let x = operand(ctx, 1)?;
    let w = operand(ctx, 2)?;
    conv_ranks(x, w)?;
    if dy.rank() != x.rank() {
        return Err(format!(
            "dY has rank {} but X has rank {}",
            dy.rank(),
            x.rank()
        ));
    }
    let group = group_attr(ctx)?;
    if let (Some(c), Some(wc)) = (x.dims[1].as_static(), w.dims[1].as_static()) {
        if wc.checked_mul(group) != Some(c) {
            return Err(format!(
                "X has {c} channels but W expects {wc} per group x {group} group(s)"
            ));
        }
    }
    if let (Some(m), Some(wm)) = (dy.dims[1].as_static(), w.dims[0].as_static()) {
        if m != wm {
            return Err(format!(
                "dY has {m} channels but W has {wm} output channels"
            ));
        }
    }
    let bias = TensorType::new(w.elem, vec![w.dims[0].clone()]);
    Ok(Some(vec![x.clone(), w.clone(), bias]))
}

/// `MaxPoolGrad` and `AveragePoolGrad`: `dX` is `[N, C, ...]` from `dY`; its spatial dims are
/// unknown here (several input sizes pool to one output size), so they come from the model's
/// declared types.
pub fn pool_grad(ctx: &ShapeCtx) -> ShapeResult {
    let dy = operand(ctx, 0)?;
    if dy.rank() < 3 {
        return Err(format!(
            "dY must have rank 3 or more (N x C x spatial dims), got rank {}",
            dy.rank()
        ));
    }
    if let Some(indices) = ctx.operand_type(1) {
        if indices.rank() != dy.rank() {
            return Err(format!(
                "Indices has rank {} but dY has rank {}",
                indices.rank(),
                dy.rank()
            ));
        }
    }
    let mut dims = dy.dims[..2].to_vec();
    dims.resize(dy.rank(), Dim::Unknown);
    one(TensorType::new(dy.elem, dims))
}

// ---------------------------------------------------------------------------------------------
// Training: more gradients (LeakyRelu, Div, Slice, GatherElements).

/// `ms.DivGrad(dY, A, B) -> (dA, dB)`: A's and B's types, in dY's element type. A and B must
/// broadcast to dY's shape.
pub fn div_grad(ctx: &ShapeCtx) -> ShapeResult {
    let dy = operand(ctx, 0)?;
    let a = operand(ctx, 1)?;
    let b = operand(ctx, 2)?;
    let ab =
        broadcast_dims(&a.dims, &b.dims).map_err(|e| format!("A and B do not broadcast: {e}"))?;
    broadcast_dims(&ab, &dy.dims).map_err(|e| format!("A and B do not broadcast to dY: {e}"))?;
    if ab.len() > dy.rank() {
        return Err(format!(
            "A and B broadcast to rank {} but dY has rank {}",
            ab.len(),
            dy.rank()
        ));
    }
    Ok(Some(vec![
        TensorType::new(dy.elem, a.dims.clone()),
        TensorType::new(dy.elem, b.dims.clone()),
    ]))
}

/// The dims a gradient of a tensor of the given `shape` operand has: its known entries, else
/// unknown dims of its static length (`None` when even the rank is unknown).
fn grad_dims_of_shape(ctx: &ShapeCtx, index: usize) -> Result<Option<Vec<Dim>>, String> {
    let shape = shape_operand(ctx, index)?;
    let Some(rank) = static_len(shape) else {
        return Ok(None);
    };
    Ok(Some(match known_syms(ctx, index) {
        Some(values) => entries_as_dims(&values, "shape")?,
        None => vec![Dim::Unknown; rank],
    }))
}

/// `ms.SliceGrad(dY, shape, starts, ends, axes?, steps?)`: a tensor of `shape` (the sliced
/// tensor's), dY's element type.
pub fn slice_grad(ctx: &ShapeCtx) -> ShapeResult {
    let dy = operand(ctx, 0)?;
    let Some(dims) = grad_dims_of_shape(ctx, 1)? else {
        return Ok(None);
    };
    if dims.len() != dy.rank() {
        return Err(format!(
            "shape has {} entries but dY has rank {}",
            dims.len(),
            dy.rank()
        ));
    }
    one(TensorType::new(dy.elem, dims))
}

/// `ms.GatherElementsGrad(dY, shape, indices)`: a tensor of `shape` (GatherElements' data
/// shape), dY's element type. dY and the indices have one shape, of `shape`'s rank.
pub fn gather_elements_grad(ctx: &ShapeCtx) -> ShapeResult {
    let dy = operand(ctx, 0)?;
    let indices = operand(ctx, 2)?;
    if indices.rank() != dy.rank() {
        return Err(format!(
            "indices have rank {} but dY has rank {}",
            indices.rank(),
            dy.rank()
        ));
    }
    let Some(dims) = grad_dims_of_shape(ctx, 1)? else {
        return Ok(None);
    };
    if dims.len() != dy.rank() {
        return Err(format!(
            "shape has {} entries but dY has rank {}",
            dims.len(),
            dy.rank()
        ));
    }
    axis_index(ctx.int_or_default("axis"), dims.len())?;
    one(TensorType::new(dy.elem, dims))
}

// ---------------------------------------------------------------------------------------------
// Attention.

/// `Attention`: Y, present_key, present_value and qk_matmul_output from the dims
/// [`AttentionDims`] resolves (which checks every rule between operands and attributes).
pub fn attention(ctx: &ShapeCtx) -> ShapeResult {
    let dims = AttentionDims::resolve(ctx)?;
    let q = operand(ctx, AttentionDims::Q)?;
    let v = operand(ctx, AttentionDims::V)?;
    Ok(Some(vec![
        TensorType::new(q.elem, dims.y_dims()),
        TensorType::new(q.elem, dims.present_key_dims()),
        TensorType::new(v.elem, dims.present_value_dims()),
        TensorType::new(q.elem, dims.scores_dims()),
    ]))
}

/// `RotaryEmbedding`: the result has X's type ([`RotaryDims`] checks the caches and position
/// ids against it).
pub fn rotary_embedding(ctx: &ShapeCtx) -> ShapeResult {
    RotaryDims::resolve(ctx)?;
    one(operand(ctx, 0)?.clone())
}

/// `LinearAttention`: the output and the present state ([`LinearAttentionDims`]); the state
/// keeps the past state's element type, else the query's.
pub fn linear_attention(ctx: &ShapeCtx) -> ShapeResult {
    let dims = LinearAttentionDims::resolve(ctx)?;
    let q = operand(ctx, LinearAttentionDims::QUERY)?;
    let state_elem = ctx
        .operand_type(LinearAttentionDims::PAST_STATE)
        .map_or(q.elem, |p| p.elem);
    Ok(Some(vec![
        TensorType::new(q.elem, dims.output_dims()),
        TensorType::new(state_elem, dims.state_dims()),
    ]))
}

/// `RNN`, `GRU`, `LSTM`: `Y`, `Y_h` (and LSTM's `Y_c`) in `X`'s element type and layout
/// ([`super::RecurrentDims`]).
pub fn recurrent(ctx: &ShapeCtx) -> ShapeResult {
    let dims = super::RecurrentDims::resolve(ctx)?;
    let elem = operand(ctx, super::RecurrentDims::X)?.elem;
    let mut results = vec![
        TensorType::new(elem, dims.y_dims()),
        TensorType::new(elem, dims.state_dims()),
    ];
    if dims.cell == super::Cell::Lstm {
        results.push(TensorType::new(elem, dims.state_dims()));
    }
    results.truncate(ctx.n_results());
    Ok(Some(results))
}

/// `CausalConvWithState`: the output like the input, the present state `[batch, channels,
/// kernel - 1]` ([`CausalConvDims`]).
pub fn causal_conv_with_state(ctx: &ShapeCtx) -> ShapeResult {
    let dims = CausalConvDims::resolve(ctx)?;
    let x = operand(ctx, CausalConvDims::INPUT)?;
    Ok(Some(vec![
        x.clone(),
        TensorType::new(x.elem, dims.state_dims()),
    ]))
}

#[cfg(test)]
mod fused_matmul_tests {
    use super::fused_matmul_perm;

    #[test]
    fn fused_matmul_reads_batch_then_transposes() {
        // Plain, transposed, batch-moved, and both, for a rank-4 operand.
        assert_eq!(fused_matmul_perm(4, false, false), [0, 1, 2, 3]);
        assert_eq!(fused_matmul_perm(4, true, false), [0, 1, 3, 2]);
        assert_eq!(fused_matmul_perm(4, false, true), [1, 2, 0, 3]);
        assert_eq!(fused_matmul_perm(4, true, true), [1, 2, 3, 0]);
        // A matrix has no batch dim to move; a vector is never transposed.
        assert_eq!(fused_matmul_perm(2, true, true), [1, 0]);
        assert_eq!(fused_matmul_perm(1, true, true), [0]);
    }
}

/// `Einsum`: the output's labels' sizes (see `einsum.rs`); the first operand's element type.
pub fn einsum(ctx: &ShapeCtx) -> ShapeResult {
    let eq = super::einsum::Einsum::of(ctx)?;
    let dims: Vec<&[Dim]> = (0..ctx.n_operands())
        .map(|i| operand(ctx, i).map(|t| t.dims.as_slice()))
        .collect::<Result<_, _>>()?;
    let sizes = eq.label_dims(&dims)?;
    let elem = operand(ctx, 0)?.elem;
    one(TensorType::new(
        elem,
        eq.output.iter().map(|&l| sizes[l].clone()).collect(),
    ))
}

/// `OneHot`: the indices' dims with `depth` inserted at `axis`, in the element type of
/// `values`. The depth is a dim only when its value is known (a float depth is truncated).
pub fn one_hot(ctx: &ShapeCtx) -> ShapeResult {
    let indices = operand(ctx, 0)?;
    let values = operand(ctx, 2)?;
    let axis = axis_index(ctx.int_or_default("axis"), indices.rank() + 1)?;
    let depth = match known(ctx, 1).as_deref().map(KnownValue::elems) {
        Some([d]) => match d.as_const().or_else(|| d.as_float().map(|f| f as i64)) {
            Some(d) if d < 1 => return Err(format!("`depth` must be 1 or more, got {d}")),
            Some(d) => Dim::Static(d as u64),
            None => Dim::Unknown,
        },
        _ => Dim::Unknown,
    };
    let mut dims = indices.dims.clone();
    dims.insert(axis, depth);
    one(TensorType::new(values.elem, dims))
}

// ---------------------------------------------------------------------------------------------
// Signal processing.

/// The window functions: `size` points of `output_datatype` (f32 when not given, ONNX's
/// default); the length is unknown while `size` is.
pub fn window_function(ctx: &ShapeCtx) -> ShapeResult {
    let elem = match ctx.attr("output_datatype") {
        None => ElemType::F32,
        Some(a) => a
            .as_elem_type()
            .ok_or("`output_datatype` must be an element type")?,
    };
    let len = match known_ints(ctx, 0).as_deref() {
        Some(&[n]) if n < 0 => return Err(format!("`size` must not be negative, got {n}")),
        Some(&[n]) => Dim::Static(n as u64),
        _ => Dim::Unknown,
    };
    one(TensorType::new(elem, vec![len]))
}

/// `MelWeightMatrix`: `(dft_length / 2 + 1, num_mel_bins)` of `output_datatype` (f32 when not
/// given, ONNX's default); a dim is unknown while its operand is.
pub fn mel_weight_matrix(ctx: &ShapeCtx) -> ShapeResult {
    let elem = match ctx.attr("output_datatype") {
        None => ElemType::F32,
        Some(a) => a
            .as_elem_type()
            .ok_or("`output_datatype` must be an element type")?,
    };
    let dim = |index: usize, what: &str| match known_ints(ctx, index).as_deref() {
        Some(&[v]) if v < 1 => Err(format!("`{what}` must be positive, got {v}")),
        Some(&[v]) => Ok(Some(v as u64)),
        _ => Ok(None),
    };
    let bins = dim(1, "dft_length")?.map_or(Dim::Unknown, |l| Dim::Static(l / 2 + 1));
    let mel = dim(0, "num_mel_bins")?.map_or(Dim::Unknown, Dim::Static);
    one(TensorType::new(elem, vec![bins, mel]))
}

/// A known scalar operand, when given: `Ok(None)` when absent, `Err(())` when given but not
/// known.
fn given_known_int(ctx: &ShapeCtx, index: usize) -> Result<Option<i64>, ()> {
    if ctx.operand_type(index).is_none() {
        return Ok(None);
    }
    match known_ints(ctx, index).as_deref() {
        Some(&[v]) => Ok(Some(v)),
        _ => Err(()),
    }
}

/// `DFT`: the input `(..., n, ..., 1 or 2)` transformed along `axis` (the operand, default
/// -2; never the last dim) to `dft_length` points (default `n`, or `2 * (n - 1)` for an
/// inverse one-sided transform); a forward one-sided result keeps `length / 2 + 1` of them;
/// the result is complex (last dim 2) except for an inverse one-sided transform (real, 1).
pub fn dft(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let rank = x.rank();
    if rank < 2 {
        return Err(format!(
            "the input must have a signal axis and a last dim of 1 or 2, got rank {rank}"
        ));
    }
    let inverse = ctx.int_or_default("inverse") != 0;
    let onesided = ctx.int_or_default("onesided") != 0;
    let Ok(axis) = given_known_int(ctx, 2) else {
        return Ok(None);
    };
    let axis = axis_index(axis.unwrap_or(-2), rank)?;
    if axis == rank - 1 {
        return Err(format!(
            "`axis` must not be the last dim (real and imaginary parts), got {axis} for rank {rank}"
        ));
    }
    let length = match given_known_int(ctx, 1) {
        Ok(Some(l)) if l < 1 => return Err(format!("`dft_length` must be positive, got {l}")),
        Ok(Some(l)) => Some(l as u64),
        Ok(None) => match x.dims[axis].as_static() {
            Some(n) if inverse && onesided => Some(n.saturating_sub(1).saturating_mul(2)),
            Some(n) => Some(n),
            None => None,
        },
        Err(()) => None,
    };
    let mut dims = x.dims.clone();
    dims[axis] = match length {
        Some(l) if onesided && !inverse => Dim::Static(l / 2 + 1),
        Some(l) => Dim::Static(l),
        None => Dim::Unknown,
    };
    dims[rank - 1] = Dim::Static(if inverse && onesided { 1 } else { 2 });
    one(TensorType::new(x.elem, dims))
}

/// `STFT`: the signal `(batch, length, 1 or 2)` cut into frames of `frame_length` (default
/// the window's length, else the signal's) every `frame_step` points gives `(batch, frames,
/// bins, 2)`: `1 + (length - frame_length) / frame_step` frames, `frame_length` bins
/// (`frame_length / 2 + 1` one-sided).
pub fn stft(ctx: &ShapeCtx) -> ShapeResult {
    let signal = operand(ctx, 0)?;
    if signal.rank() != 3 {
        return Err(format!(
            "`signal` must be (batch, length, 1 or 2), got rank {}",
            signal.rank()
        ));
    }
    let onesided = ctx.int_or_default("onesided") != 0;
    let step = match given_known_int(ctx, 1) {
        Ok(Some(s)) if s < 1 => return Err(format!("`frame_step` must be positive, got {s}")),
        Ok(Some(s)) => Some(s as u64),
        _ => None,
    };
    let window_len = match ctx.operand_type(2) {
        Some(w) if w.rank() != 1 => {
            return Err(format!("`window` must be 1-d, got rank {}", w.rank()))
        }
        Some(w) => Some(w.dims[0].as_static()),
        None => None,
    };
    let frame_length = match given_known_int(ctx, 3) {
        Ok(Some(l)) if l < 1 => return Err(format!("`frame_length` must be positive, got {l}")),
        Ok(Some(l)) => Some(l as u64),
        Ok(None) => match window_len {
            Some(w) => w,
            None => signal.dims[1].as_static(),
        },
        Err(()) => None,
    };
    if let (Some(Some(w)), Some(l)) = (window_len, frame_length) {
        if w != l {
            return Err(format!("`window` has {w} points but `frame_length` is {l}"));
        }
    }
    let frames = match (signal.dims[1].as_static(), frame_length, step) {
        (Some(n), Some(l), _) if l > n => {
            return Err(format!(
                "`frame_length` {l} is longer than the signal's {n} points"
            ))
        }
        (Some(n), Some(l), Some(s)) => Dim::Static(1 + (n - l) / s),
        _ => Dim::Unknown,
    };
    let bins = match frame_length {
        Some(l) if onesided => Dim::Static(l / 2 + 1),
        Some(l) => Dim::Static(l),
        None => Dim::Unknown,
    };
    one(TensorType::new(
        signal.elem,
        vec![signal.dims[0].clone(), frames, bins, Dim::Static(2)],
    ))
}

/// CenterCropPad: each axis of `axes` (default all) takes its entry of the known `shape`;
/// unknown when `shape` is not known.
pub fn center_crop_pad(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let axes = match ctx.ints_attr("axes")? {
        Some(axes) => axis_set(&axes, x.rank())?,
        None => (0..x.rank()).collect(),
    };
    let mut dims = x.dims.clone();
    let Some(shape) = known_ints(ctx, 1) else {
        for &a in &axes {
            dims[a] = Dim::Unknown;
        }
        return one(TensorType::new(x.elem, dims));
    };
    if shape.len() != axes.len() {
        return Err(format!(
            "`shape` has {} entries but {} axes are cropped or padded",
            shape.len(),
            axes.len()
        ));
    }
    for (&a, &n) in axes.iter().zip(&shape) {
        let n = u64::try_from(n).map_err(|_| format!("`shape` has a negative entry {n}"))?;
        dims[a] = Dim::Static(n);
    }
    one(TensorType::new(x.elem, dims))
}

/// Col2Im: `[N, C * prod(block_shape), L]` to `[N, C, image_shape...]`; the block count `L`
/// must be the number of sliding blocks the image, pads, dilations and strides give.
pub fn col2im(ctx: &ShapeCtx) -> ShapeResult {
    let x = operand(ctx, 0)?;
    let (Some(image), Some(block)) = (known_ints(ctx, 1), known_ints(ctx, 2)) else {
        let n_spatial = static_len(operand(ctx, 1)?);
        return Ok(n_spatial.map(|n| {
            let mut dims = vec![
                x.dims.first().cloned().unwrap_or(Dim::Unknown),
                Dim::Unknown,
            ];
            dims.extend(std::iter::repeat_n(Dim::Unknown, n));
            vec![TensorType::new(x.elem, dims)]
        }));
    };
    let n = image.len();
    if block.len() != n || x.rank() != 3 {
        return Err(format!(
            "Col2Im needs a 3-d input and `image_shape` and `block_shape` of one length, got rank {}, {} and {}",
            x.rank(),
            n,
            block.len()
        ));
    }
    let attr = |name: &str, len: usize, default: i64| -> Result<Vec<i64>, String> {
        let values = ctx.ints_attr(name)?.unwrap_or_else(|| vec![default; len]);
        if values.len() != len {
            return Err(format!(
                "`{name}` has {} entries, expected {len}",
                values.len()
            ));
        }
        Ok(values)
    };
    let dilations = attr("dilations", n, 1)?;
    let strides = attr("strides", n, 1)?;
    let pads = attr("pads", 2 * n, 0)?;
    let mut n_blocks: i128 = 1;
    let mut block_elems: i128 = 1;
    for i in 0..n {
        let (img, blk) = (i128::from(image[i]), i128::from(block[i]));
        let (d, s) = (i128::from(dilations[i]), i128::from(strides[i]));
        if img < 1 || blk < 1 || d < 1 || s < 1 {
            return Err(format!(
                "spatial axis {i} has image size {img}, block size {blk}, dilation {d} and stride {s}; each must be positive"
            ));
        }
        let span = img + i128::from(pads[i]) + i128::from(pads[n + i]) - d * (blk - 1) - 1;
        if span < 0 {
            return Err(format!(
                "on spatial axis {i} the block ({blk} with dilation {d}) does not fit the padded image ({img})"
            ));
        }
        n_blocks *= span / s + 1;
        block_elems *= blk;
    }
    if let Dim::Static(l) = x.dims[2] {
        if i128::from(l) != n_blocks {
            return Err(format!(
                "the input has {l} blocks but the image, block shape, pads, dilations and strides give {n_blocks}"
            ));
        }
    }
    let channels = x.dims[1]
        .div_exact(&static_dim(block_elems))
        .ok_or_else(|| {
            format!(
                "the input's {} rows are not a multiple of the block's {block_elems} elements",
                x.dims[1]
            )
        })?;
    let mut dims = vec![x.dims[0].clone(), channels];
    dims.extend(image.iter().map(|&v| Dim::Static(v as u64)));
    one(TensorType::new(x.elem, dims))
}
