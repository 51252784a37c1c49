//! The losses: `onnx.SoftmaxCrossEntropyLoss`, `onnx.NegativeLogLikelihoodLoss`, and
//! onnxruntime's `com.microsoft` forms of them and of their gradient (the contract, ignore
//! index and the mean's divisor included, is the losses section of `memc_ir`'s `ops::verify`).
//!
//! Scores are `[N, C, d...]` and labels `[N, d...]`: a *position* is a label's index, and the
//! class axis is the scores' axis 1. The class at a position is read with an indirect load
//! (`LoadIndirect` along the class axis, clamped, so a label out of range reads some class of
//! its own row and never out of bounds; a label equal to the ignore index is selected away).
//!
//! - Softmax cross-entropy: one kernel over positions (outer) and classes (inner): the row's
//!   max, the sum of exponentials, `log_prob` when it is a used result (a `Map`), and the
//!   position's loss (a `Once`), written to the result for `none`, else to scratch that a
//!   second kernel (one row over every position) sums and divides.
//! - Negative log-likelihood: one elementwise kernel over positions for `none`, else one row
//!   over every position summing the losses and the divisor.
//! - The gradients: one elementwise kernel over `log_prob`'s shape; for `mean` a first kernel
//!   writes the divisor into one scratch element that the second reads.
//!
//! Everything computes in f64 when an operand or the result is f64, else in f32. The scratch
//! each form needs is decided by [`softmax_cross_entropy_scratch`] and [`sce_grad_scratch`] before
//! memory planning; planned without it, those forms say so instead of lowering.

use super::build::{contiguous_strides, Insts, TensorRef};
use super::elementwise::simplify_axes;
use super::movement::common::loop_kernel;
use super::{unsupported, LowerCtx, LowerError, LowerResult};
use crate::kernel::{
    BinaryOp, IndirectIndex, InstId, Kernel, ReduceOp, Scalar, Stage, Store, UnaryOp, View,
    MAX_AXES,
};
use memc_ir::{ElemType, Function, OpId};

/// How a loss combines its positions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Reduction {
    None,
    Sum,
    Mean,
}

impl Reduction {
    fn of(ctx: &LowerCtx, op: OpId) -> Result<Reduction, LowerError> {
        match ctx.attr_str(op, "reduction") {
            Some("none") => Ok(Reduction::None),
            Some("sum") => Ok(Reduction::Sum),
            Some("mean") | None => Ok(Reduction::Mean),
            Some(other) => Err(unsupported(format!("reduction \"{other}\""))),
        }
    }
}

/// Which family's rules apply (see the module doc of `memc_ir`'s losses).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Family {
    /// onnxruntime's softmax cross-entropy kernels: a zero divisor leaves the sum undivided.
    SoftmaxCrossEntropy,
    /// The ONNX function body of NegativeLogLikelihoodLoss: a zero divisor divides anyway.
    NegativeLogLikelihood,
}

/// Where the ignore index comes from.
#[derive(Copy, Clone, Debug)]
enum Ignore {
    /// Nothing is ignored.
    Nothing,
    /// A compile-time index (the attribute, or the family's default).
    Const(i64),
    /// A runtime int64 scalar: the view of it.
    Operand(u32),
}

/// The float type the loss computes in: f64 when any of `elems` is f64, else f32.
fn compute_type(elems: &[Scalar]) -> Result<Scalar, LowerError> {
    for &e in elems {
        if !e.is_float() {
            return Err(unsupported(format!("a loss over {}", e.name())));
        }
    }
    Ok(if elems.contains(&Scalar::F64) {
        Scalar::F64
    } else {
        Scalar::F32
    })
}

/// The positions `[N, d...]` and the class count `C` of scores of shape `shape`.
fn positions(shape: &[u64]) -> Result<(Vec<u64>, u64), LowerError> {
    if shape.len() < 2 {
        return Err(unsupported("scores of rank below 2"));
    }
    if shape.len() > MAX_AXES {
        return Err(unsupported(format!(
            "rank {} (kernels loop over at most {MAX_AXES} axes)",
            shape.len()
        )));
    }
    let mut p = vec![shape[0]];
    p.extend_from_slice(&shape[2..]);
    Ok((p, shape[1]))
}

/// The element strides of scores `[N, C, d...]` over position axes `[N, d...]`, and the
/// stride of the class axis.
fn scores_position_strides(shape: &[u64]) -> (Vec<i64>, i64) {
    let strides = contiguous_strides(shape);
    let mut p = vec![strides[0]];
    p.extend_from_slice(&strides[2..]);
    (p, strides[1])
}

/// `strides` followed by `extra` zero strides.
fn padded(mut strides: Vec<i64>, extra: usize) -> Vec<i64> {
    strides.extend(std::iter::repeat_n(0, extra));
    strides
}

/// A view of `t` that does not move over `n_axes` loop axes (a scalar, or a table read
/// indirectly).
fn fixed(t: &TensorRef, n_axes: usize) -> View {
    t.view_with(vec![0; n_axes])
}

/// The views every loss reads at a position: the label, the weights and a runtime ignore
/// index, pushed onto `views`.
struct LabelViews {
    label: u32,
    weights: Option<u32>,
    ignore: Ignore,
    classes: u64,
}

impl LabelViews {
    /// Pushes the label view (`label_strides` over the loop axes), the weights and the ignore
    /// index operand (operands `weights` and `ignore` of `op`, when present) onto `views`.
    #[allow(clippy::too_many_arguments)]
    fn push(
        ctx: &LowerCtx,
        op: OpId,
        views: &mut Vec<View>,
        label: &TensorRef,
        label_strides: Vec<i64>,
        weights: usize,
        ignore: usize,
        default_ignore: Option<i64>,
        classes: u64,
    ) -> Result<LabelViews, LowerError> {
        let n_axes = label_strides.len();
        let label_view = views.len() as u32;
        views.push(label.view_with(label_strides));
        let weights = match ctx.operand(op, weights)? {
            Some(w) => {
                views.push(fixed(&w, n_axes));
                Some(views.len() as u32 - 1)
            }
            None => None,
        };
        let ignore = match ctx.operand(op, ignore)? {
            Some(i) => {
                views.push(fixed(&i, n_axes));
                Ignore::Operand(views.len() as u32 - 1)
            }
            None => match ctx.attr_int_opt(op, "ignore_index").or(default_ignore) {
                Some(i) => Ignore::Const(i),
                None => Ignore::Nothing,
            },
        };
        Ok(LabelViews {
            label: label_view,
            weights,
            ignore,
            classes,
        })
    }

    /// At the current position: the label as I64, its weight in `t` (1 without weights) and
    /// whether it is ignored (`None` when nothing is).
    fn emit(
        &self,
        b: &mut Insts,
        views: &mut Vec<View>,
        t: Scalar,
    ) -> (InstId, InstId, Option<InstId>) {
        let label = b.load(views, self.label);
        let label = b.cast(label, Scalar::I64);
        let weight = match self.weights {
            Some(w) => {
                let at = vec![IndirectIndex {
                    index: label,
                    stride: 1,
                    limit: self.classes as i64,
                }];
                let w = load_indirect(b, views, w, at);
                b.cast(w, t)
            }
            None => b.constant(t, 1.0),
        };
        let ignore = match self.ignore {
            Ignore::Nothing => None,
            Ignore::Const(i) => Some(b.constant_int(Scalar::I64, i)),
            Ignore::Operand(v) => {
                let i = b.load(views, v);
                Some(b.cast(i, Scalar::I64))
            }
        };
        let ignored = ignore.map(|i| b.binary(BinaryOp::Eq, label, i));
        (label, weight, ignored)
    }
}

/// An indirect load of view `base` through a fresh copy of it: the kernel validator bounds a
/// view by the sum of the spans of every indirect load of it, so each load gets its own view.
fn load_indirect(
    b: &mut Insts,
    views: &mut Vec<View>,
    base: u32,
    indices: Vec<IndirectIndex>,
) -> InstId {
    views.push(views[base as usize].clone());
    b.load_indirect(views, views.len() as u32 - 1, indices)
}

/// 0 where `ignored` holds, else `value`.
fn kept(b: &mut Insts, ignored: Option<InstId>, value: InstId) -> InstId {
    match ignored {
        Some(i) => {
            let zero = b.constant(b.ty(value), 0.0);
            b.select(i, zero, value)
        }
        None => value,
    }
}

/// `sum / divisor`; for the softmax cross-entropy family, `sum` itself when the divisor is 0.
fn divide(b: &mut Insts, family: Family, sum: InstId, divisor: InstId) -> InstId {
    let q = b.binary(BinaryOp::Div, sum, divisor);
    match family {
        Family::NegativeLogLikelihood => q,
        Family::SoftmaxCrossEntropy => {
            let zero = b.constant(b.ty(divisor), 0.0);
            let is_zero = b.binary(BinaryOp::Eq, divisor, zero);
            b.select(is_zero, sum, q)
        }
    }
}

/// A `Reduce` stage summing `value` from 0.
fn sum_stage(b: Insts, value: InstId) -> Stage {
    let ty = b.ty(value);
    Stage::Reduce {
        insts: b.finish(),
        value,
        op: ReduceOp::Sum,
        init: 0f64.to_bits(),
        ty,
    }
}

fn store(view: u32, value: InstId) -> Vec<Store> {
    vec![Store::new(view, value)]
}

/// The kernel that reduces per-position values: one row over every position (`inner`, the
/// loop axes of `views`), summing the losses (`loss_of`) and, for `mean`, the divisor, then
/// writing view 0 (the scalar result, fixed).
#[allow(clippy::too_many_arguments)]
fn reduce_kernel(
    name: String,
    family: Family,
    reduction: Reduction,
    inner: Vec<u64>,
    mut views: Vec<View>,
    labels: &LabelViews,
    t: Scalar,
    out_elem: Scalar,
    loss_of: &dyn Fn(&mut Insts, &mut Vec<View>) -> InstId,
) -> Kernel {
    // View 0 is the scalar result.
    let mut b = Insts::new();
    let loss = loss_of(&mut b, &mut views);
    let mut stages = vec![sum_stage(b, loss)];
    if reduction == Reduction::Mean {
        let mut b = Insts::new();
        let (_, weight, keep) = labels.emit(&mut b, &mut views, t);
        let w = kept(&mut b, keep, weight);
        stages.push(sum_stage(b, w));
    }
    let mut b = Insts::new();
    let sum = b.acc(0, t);
    let r = if reduction == Reduction::Mean {
        let divisor = b.acc(1, t);
        divide(&mut b, family, sum, divisor)
    } else {
        sum
    };
    let r = b.cast(r, out_elem);
    stages.push(Stage::Once {
        insts: b.finish(),
        stores: store(0, r),
    });
    simplify_axes(loop_kernel(name, Vec::new(), inner, views, stages))
}

// ---------------------------------------------------------------------------------------------
// Planning.

/// The element count of `value`'s static shape, and its element type.
fn static_count(func: &Function, value: memc_ir::ValueId) -> Option<(u64, ElemType)> {
    let t = func.value_type(value).tensor()?;
    Some((t.static_num_elements()?, t.elem))
}

/// The `reduction` of `op`, or the table's default.
fn reduction_of(func: &Function, op: OpId) -> Option<&str> {
    let data = func.op(op);
    data.opcode.def().str_attr(&data.attrs, "reduction")
}

/// The size of the type a loss computes in, from the element types it touches.
fn compute_size(elems: &[ElemType]) -> u64 {
    if elems.contains(&ElemType::F64) {
        8
    } else {
        4
    }
}

/// The scratch bytes of a softmax cross-entropy: a reduced loss needs one element per position
/// (0 when the shapes are not static; lowering then says so).
pub(super) fn softmax_cross_entropy_scratch(func: &Function, op: OpId) -> u64 {
    let data = func.op(op);
    if reduction_of(func, op) == Some("none") {
        return 0;
    }
    let bytes = (|| {
        let (n_positions, _) = static_count(func, *data.operands.get(1)?)?;
        let (_, x_elem) = static_count(func, *data.operands.first()?)?;
        let (_, y_elem) = static_count(func, *data.results.first()?)?;
        Some(n_positions * compute_size(&[x_elem, y_elem]))
    })();
    bytes.unwrap_or(0)
}

/// The scratch bytes of a gradient: a mean needs one element for its divisor.
pub(super) fn sce_grad_scratch(func: &Function, op: OpId) -> u64 {
    let data = func.op(op);
    if reduction_of(func, op) != Some("mean") {
        return 0;
    }
    let bytes = (|| {
        let (_, dy_elem) = static_count(func, *data.operands.first()?)?;
        let (_, out_elem) = static_count(func, *data.results.first()?)?;
        Some(compute_size(&[dy_elem, out_elem]))
    })();
    bytes.unwrap_or(0)
}

/// The op's scratch as `shape` elements of `t`, when the plan holds enough of it.
fn scratch_of(
    ctx: &LowerCtx,
    op: OpId,
    t: Scalar,
    shape: Vec<u64>,
) -> Result<TensorRef, LowerError> {
    let bytes = shape.iter().product::<u64>() * t.size();
    let s = ctx
        .scratch(op)
        .filter(|s| s.numel() >= bytes)
        .ok_or_else(|| unsupported("a reduced loss planned without its scratch memory"))?;
    Ok(TensorRef {
        region: s.region,
        byte_offset: s.byte_offset,
        elem: t,
        shape,
    })
}

// ---------------------------------------------------------------------------------------------
// Softmax cross-entropy.

/// `onnx.SoftmaxCrossEntropyLoss` and `ms.SoftmaxCrossEntropyLossInternal`.
pub(super) fn softmax_cross_entropy(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let labels = ctx.input(op, 1)?;
    let out = ctx.result(op, 0)?;
    let log_prob = if ctx.result_used(op, 1) {
        Some(ctx.result(op, 1)?)
    } else {
        None
    };
    let t = compute_type(&[x.elem, out.elem])?;
    let reduction = Reduction::of(ctx, op)?;
    let (pos, classes) = positions(&x.shape)?;
    let n_positions: u64 = pos.iter().product();
    let (x_pos, class_stride) = scores_position_strides(&x.shape);
    let label_strides = padded(contiguous_strides(&pos), 1);

    // Kernel 1: positions outer, classes inner.
    let mut views = vec![x.view_with({
        let mut s = x_pos.clone();
        s.push(class_stride);
        s
    })];
    let labels_v = LabelViews::push(
        ctx,
        op,
        &mut views,
        &labels,
        label_strides.clone(),
        2,
        3,
        Some(-1),
        classes,
    )?;
    let dest = match reduction {
        Reduction::None => out.clone(),
        _ => scratch_of(ctx, op, t, pos.clone())?,
    };
    let dest_view = views.len() as u32;
    views.push(dest.view_with(label_strides.clone()));
    let lp_view = log_prob.as_ref().map(|lp| {
        views.push(lp.view_with(views[0].strides.clone()));
        views.len() as u32 - 1
    });

    let mut b = Insts::new();
    let v = b.load(&views, 0);
    let v = b.cast(v, t);
    let mut stages = vec![Stage::Reduce {
        insts: b.finish(),
        value: v,
        op: ReduceOp::Max,
        init: f64::NEG_INFINITY.to_bits(),
        ty: t,
    }];
    let mut b = Insts::new();
    let v = b.load(&views, 0);
    let v = b.cast(v, t);
    let m = b.acc(0, t);
    let d = b.binary(BinaryOp::Sub, v, m);
    let e = b.unary(UnaryOp::Exp, d);
    stages.push(sum_stage(b, e));
    // log_prob = (x - max) - ln(sum).
    let log_prob_at = |b: &mut Insts, v: InstId| {
        let v = b.cast(v, t);
        let m = b.acc(0, t);
        let s = b.acc(1, t);
        let d = b.binary(BinaryOp::Sub, v, m);
        let l = b.unary(UnaryOp::Log, s);
        b.binary(BinaryOp::Sub, d, l)
    };
    if let Some(lp_view) = lp_view {
        let mut b = Insts::new();
        let v = b.load(&views, 0);
        let r = log_prob_at(&mut b, v);
        let r = b.cast(r, views[lp_view as usize].elem);
        stages.push(Stage::Map {
            insts: b.finish(),
            stores: store(lp_view, r),
        });
    }
    let mut b = Insts::new();
    let (label, weight, keep) = labels_v.emit(&mut b, &mut views, t);
    let at = vec![IndirectIndex {
        index: label,
        stride: class_stride,
        limit: classes as i64,
    }];
    let v = load_indirect(&mut b, &mut views, 0, at);
    let lp = log_prob_at(&mut b, v);
    let neg = b.unary(UnaryOp::Neg, lp);
    let loss = b.binary(BinaryOp::Mul, neg, weight);
    let loss = kept(&mut b, keep, loss);
    let loss = b.cast(loss, dest.elem);
    stages.push(Stage::Once {
        insts: b.finish(),
        stores: store(dest_view, loss),
    });
    let mut kernels = vec![simplify_axes(loop_kernel(
        ctx.kernel_name(op, 0),
        pos.clone(),
        vec![classes],
        views,
        stages,
    ))];
    if reduction == Reduction::None {
        return Ok(kernels);
    }

    // Kernel 2: one row over every position.
    let flat = vec![1i64];
    let mut views = vec![fixed(&out, 1)];
    let labels_v = LabelViews::push(
        ctx,
        op,
        &mut views,
        &labels,
        flat.clone(),
        2,
        3,
        Some(-1),
        classes,
    )?;
    let loss_view = views.len() as u32;
    views.push(dest.view_with(flat));
    kernels.push(reduce_kernel(
        ctx.kernel_name(op, 1),
        Family::SoftmaxCrossEntropy,
        reduction,
        vec![n_positions],
        views,
        &labels_v,
        t,
        out.elem,
        &|b, views| b.load(views, loss_view),
    ));
    Ok(kernels)
}

// ---------------------------------------------------------------------------------------------
// Negative log-likelihood.

/// `onnx.NegativeLogLikelihoodLoss`, `ms.NegativeLogLikelihoodLossInternal` and `...Internal2`.
pub(super) fn negative_log_likelihood(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let labels = ctx.input(op, 1)?;
    let out = ctx.result(op, 0)?;
    let t = compute_type(&[x.elem, out.elem])?;
    let reduction = Reduction::of(ctx, op)?;
    let (pos, classes) = positions(&x.shape)?;
    let (x_pos, class_stride) = scores_position_strides(&x.shape);
    // The loss at a position: -x[n, label, d...] * weight, or 0 where ignored.
    let loss_of = |b: &mut Insts, views: &mut Vec<View>, labels: &LabelViews| {
        let (label, weight, ignored) = labels.emit(b, views, t);
        let at = vec![IndirectIndex {
            index: label,
            stride: class_stride,
            limit: classes as i64,
        }];
        let v = load_indirect(b, views, 1, at);
        let v = b.cast(v, t);
        let neg = b.unary(UnaryOp::Neg, v);
        let loss = b.binary(BinaryOp::Mul, neg, weight);
        kept(b, ignored, loss)
    };
    if reduction == Reduction::None {
        let strides = contiguous_strides(&pos);
        let mut views = vec![out.view_with(strides.clone()), x.view_with(x_pos)];
        let labels_v =
            LabelViews::push(ctx, op, &mut views, &labels, strides, 2, 3, None, classes)?;
        let mut b = Insts::new();
        let loss = loss_of(&mut b, &mut views, &labels_v);
        let loss = b.cast(loss, out.elem);
        let stages = vec![Stage::Map {
            insts: b.finish(),
            stores: store(0, loss),
        }];
        return Ok(vec![simplify_axes(loop_kernel(
            ctx.kernel_name(op, 0),
            pos,
            Vec::new(),
            views,
            stages,
        ))]);
    }
    // One row over every position (the inner axes are the positions' own).
    let n = pos.len();
    let mut views = vec![fixed(&out, n), x.view_with(x_pos)];
    let labels_v = LabelViews::push(
        ctx,
        op,
        &mut views,
        &labels,
        contiguous_strides(&pos),
        2,
        3,
        None,
        classes,
    )?;
    Ok(vec![reduce_kernel(
        ctx.kernel_name(op, 0),
        Family::NegativeLogLikelihood,
        reduction,
        pos,
        views,
        &labels_v,
        t,
        out.elem,
        &|b, views| loss_of(b, views, &labels_v),
    )])
}

// ---------------------------------------------------------------------------------------------
// The gradients.

/// `ms.SoftmaxCrossEntropyLossGrad` and `ms.SoftmaxCrossEntropyLossInternalGrad`.
pub(super) fn sce_grad(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let dy = ctx.input(op, 0)?;
    let log_prob = ctx.input(op, 1)?;
    let labels = ctx.input(op, 2)?;
    let bias = ctx.operand(op, 5)?;
    let out = ctx.result(op, 0)?;
    let mut elems = vec![dy.elem, log_prob.elem, out.elem];
    elems.extend(bias.iter().map(|b| b.elem));
    let t = compute_type(&elems)?;
    let reduction = Reduction::of(ctx, op)?;
    let (pos, classes) = positions(&log_prob.shape)?;
    let n_positions: u64 = pos.iter().product();
    let mut kernels = Vec::new();

    // For a mean, kernel 1 writes the divisor into one scratch element.
    let divisor = if reduction == Reduction::Mean {
        let d = scratch_of(ctx, op, t, vec![1])?;
        let mut views = vec![fixed(&d, 1)];
        let labels_v = LabelViews::push(
            ctx,
            op,
            &mut views,
            &labels,
            vec![1],
            3,
            4,
            Some(-1),
            classes,
        )?;
        let mut b = Insts::new();
        let (_, weight, keep) = labels_v.emit(&mut b, &mut views, t);
        let w = kept(&mut b, keep, weight);
        let sum = sum_stage(b, w);
        let mut b = Insts::new();
        let s = b.acc(0, t);
        let once = Stage::Once {
            insts: b.finish(),
            stores: store(0, s),
        };
        kernels.push(simplify_axes(loop_kernel(
            ctx.kernel_name(op, 0),
            Vec::new(),
            vec![n_positions],
            views,
            vec![sum, once],
        )));
        Some(d)
    } else {
        None
    };

    // Kernel 2: elementwise over `log_prob`'s shape [N, C, d...].
    let rank = log_prob.rank();
    let full = contiguous_strides(&log_prob.shape);
    // Strides of a position-shaped tensor over the [N, C, d...] loop axes.
    let at_positions = |t: &TensorRef| {
        let s = contiguous_strides(&pos);
        let mut v = vec![s[0], 0];
        v.extend_from_slice(&s[1..]);
        t.view_with(v)
    };
    let mut views = vec![
        out.view_with(full.clone()),
        log_prob.view_with(full.clone()),
    ];
    let label_strides = at_positions(&labels).strides;
    let labels_v = LabelViews::push(
        ctx,
        op,
        &mut views,
        &labels,
        label_strides,
        3,
        4,
        Some(-1),
        classes,
    )?;
    let dy_view = views.len() as u32;
    views.push(match reduction {
        Reduction::None => at_positions(&dy),
        _ => fixed(&dy, rank),
    });
    let divisor_view = divisor.map(|d| {
        views.push(fixed(&d, rank));
        views.len() as u32 - 1
    });
    let bias_view = bias.map(|b| {
        views.push(b.view_with(full.clone()));
        views.len() as u32 - 1
    });

    let mut b = Insts::new();
    let (label, weight, keep) = labels_v.emit(&mut b, &mut views, t);
    let g = b.load(&views, dy_view);
    let g = b.cast(g, t);
    let g = match divisor_view {
        Some(d) => {
            let d = b.load(&views, d);
            divide(&mut b, Family::SoftmaxCrossEntropy, g, d)
        }
        None => g,
    };
    let scale = b.binary(BinaryOp::Mul, weight, g);
    let lp = b.load(&views, 1);
    let lp = b.cast(lp, t);
    let p = b.unary(UnaryOp::Exp, lp);
    let class = b.index(1);
    let hit = b.binary(BinaryOp::Eq, label, class);
    let one = b.constant(t, 1.0);
    let zero = b.constant(t, 0.0);
    let onehot = b.select(hit, one, zero);
    let d = b.binary(BinaryOp::Sub, p, onehot);
    let r = b.binary(BinaryOp::Mul, d, scale);
    let mut r = kept(&mut b, keep, r);
    if let Some(bv) = bias_view {
        let bias = b.load(&views, bv);
        let bias = b.cast(bias, t);
        r = b.binary(BinaryOp::Add, r, bias);
    }
    let r = b.cast(r, out.elem);
    let stages = vec![Stage::Map {
        insts: b.finish(),
        stores: store(0, r),
    }];
    kernels.push(simplify_axes(loop_kernel(
        ctx.kernel_name(op, kernels.len()),
        log_prob.shape.clone(),
        Vec::new(),
        views,
        stages,
    )));
    Ok(kernels)
}
