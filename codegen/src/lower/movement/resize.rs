//! Resize, following `onnx/reference/ops/op_resize.py` exactly: every resized axis maps
//! output index `y` to a source coordinate `x` (in `f64`, with the reference's operation
//! order so rounding matches), and reads the neighbours the reference reads, clamped into
//! the axis (its edge padding).
//!
//! With `lo = ceil(x) - 1` and `r = x - lo` (in `(0, 1]`; the reference's ratio, which is 1
//! at integer `x`), a mode with `n` taps reads `lo + 1 - n / 2 + j` for `j < n`:
//!
//! - nearest (2 taps, one weight 1): `lo` or `lo + 1` by `nearest_mode`; any element type;
//! - linear: weights `1 - r, r`; cubic: Keys' kernel with `cubic_coeff_a`;
//! - antialias widens the kernel to the downscaled footprint and normalizes the weights;
//!   `exclude_outside` zeroes taps outside the axis and normalizes.
//!
//! The weights of several axes multiply (the reference resizes axis by axis; the sums agree
//! up to `f64` rounding); the result is rounded (integers) and saturated to the element type.
//! Axes with scale 1 and an unchanged size are plain strides, as the reference skips them.

use super::super::build::Insts;
use super::super::build::TensorRef;
use super::super::{unsupported, LowerCtx, LowerError, LowerResult};
use super::common::{
    cubic_convolution, loop_kernel, map_stage, norm_axis, operand_absent_or_empty, operand_elem,
    IndexMath,
};
use super::{dense, output};
use crate::kernel::{
    BinaryOp, IndirectIndex, InstId, ReduceOp, Scalar, Stage, Store, UnaryOp, View,
};
use memc_ir::OpId;

/// Most tap combinations one output element may read.
const MAX_TAPS: usize = 1024;

#[derive(Copy, Clone, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Copy, Clone, PartialEq)]
enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// Where an axis's scale comes from.
#[derive(Copy, Clone)]
enum Scale {
    /// Known at compile time.
    Known(f64),
    /// Element `i` of the `scales` operand, at run time.
    Operand(usize),
    /// The min (`not_larger`) or max of `sizes[i] / input[i]` over the axes, at run time.
    SizesPolicy { larger: bool },
}

/// How one resized axis maps output to input.
struct AxisMap {
    axis: usize,
    input: i64,
    output: u64,
    scale: Scale,
    /// Position of the axis in the `axes` list (its entries in scales, sizes and roi).
    slot: Option<usize>,
}

pub fn resize(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let rank = x.rank();
    let mode = match ctx.attr_str(op, "mode").unwrap_or_default() {
        "nearest" => Mode::Nearest,
        "linear" => Mode::Linear,
        "cubic" => Mode::Cubic,
        other => return Err(unsupported(format!("Resize mode `{other}`"))),
    };
    let coord = match ctx
        .attr_str(op, "coordinate_transformation_mode")
        .unwrap_or_default()
    {
        "half_pixel" => Coord::HalfPixel,
        "half_pixel_symmetric" => Coord::HalfPixelSymmetric,
        "pytorch_half_pixel" => Coord::PytorchHalfPixel,
        "align_corners" => Coord::AlignCorners,
        "asymmetric" => Coord::Asymmetric,
        "tf_crop_and_resize" => Coord::TfCropAndResize,
        other => {
            return Err(unsupported(format!(
                "Resize coordinate_transformation_mode `{other}`"
            )))
        }
    };
    let antialias = ctx.attr_int(op, "antialias") != 0 && mode != Mode::Nearest;
    let exclude_outside = ctx.attr_int(op, "exclude_outside") != 0;
    let cubic_a = ctx.attr_float(op, "cubic_coeff_a");
    let extrapolation = ctx.attr_float(op, "extrapolation_value");
    let axes: Vec<usize> = match ctx.attr_ints(op, "axes") {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|&a| norm_axis(a, rank))
            .collect::<Result<_, _>>()?,
        _ => (0..rank).collect(),
    };
    let scales = resize_scales(ctx, op, &x.shape, &out.shape, &axes)?;
    let roi = if coord == Coord::TfCropAndResize {
        if operand_absent_or_empty(ctx, op, 1)? {
            return Err(unsupported("Resize tf_crop_and_resize needs roi"));
        }
        let roi = ctx.input(op, 1)?;
        if roi.numel() != 2 * axes.len() as u64 {
            return Err(unsupported("Resize roi does not have two entries per axis"));
        }
        Some((roi.elem, ctx.const_floats(op, 1)))
    } else {
        None
    };
    let mut maps = Vec::new();
    for (a, &scale) in scales.iter().enumerate() {
        let slot = axes.iter().position(|&b| b == a);
        let (input, output) = (x.shape[a] as i64, out.shape[a]);
        let trivial_roi = match (&roi, slot) {
            (None, _) | (_, None) => true,
            (Some((_, Some(values))), Some(i)) => {
                is_close(values[i], 0.0) && is_close(values[axes.len() + i], 1.0)
            }
            (Some((_, None)), Some(_)) => false,
        };
        if let Scale::Known(s) = scale {
            if is_close(s, 1.0) && output == input as u64 && trivial_roi {
                continue;
            }
        }
        maps.push(AxisMap {
            axis: a,
            input,
            output,
            scale,
            slot,
        });
    }

    let own = x.strides();
    let mut strides = own.clone();
    for m in &maps {
        strides[m.axis] = 0;
    }
    let r = Resizer {
        ctx,
        op,
        maps,
        axes,
        coord,
        kernel: Kernel {
            mode,
            antialias,
            exclude_outside,
            a: cubic_a,
        },
        roi_elem: roi.map(|(elem, _)| elem),
        base: x.view_with(strides),
        own,
        rank,
        input_shape: x.shape.clone(),
    };
    let name = ctx.kernel_name(op, 0);
    let mut views = vec![dense(&out)];
    let mut insts = Insts::new();
    let coords = r.coordinates(&mut insts, &mut views)?;
    if mode == Mode::Nearest {
        let mut terms = Vec::with_capacity(coords.len());
        for (m, c) in r.maps.iter().zip(&coords) {
            let nearest = nearest_index(ctx, op, &mut insts, c.lo, c.ratio)?;
            let index = insts.clamp_c(nearest, 0, m.input - 1);
            terms.push(IndirectIndex {
                index,
                stride: r.own[m.axis],
                limit: m.input,
            });
        }
        let v = r.gather(&mut insts, &mut views, terms);
        let value = match r.extrapolated(&mut insts, &coords) {
            Some(e) => {
                let ev = insts.f64c(out.elem, extrapolation);
                insts.select(e, ev, v)
            }
            None => v,
        };
        return Ok(vec![loop_kernel(
            name,
            out.shape.clone(),
            Vec::new(),
            views,
            vec![map_stage(insts, 0, value)],
        )]);
    }
    if out.elem == Scalar::Bool {
        return Err(unsupported(format!(
            "Resize linear/cubic of {}",
            out.elem.name()
        )));
    }
    let counts: Vec<usize> = r.maps.iter().map(|m| r.tap_count(m)).collect();
    let combos = counts
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .unwrap_or(usize::MAX);
    if combos > MAX_TAPS {
        return Err(unsupported(format!(
            "Resize reads {combos} taps per output element (at most {MAX_TAPS})"
        )));
    }
    if combos > MAX_UNROLLED_TAPS {
        return r.reduce_form(name, &out, &counts, extrapolation);
    }
    // Few taps: every combination unrolled into one Map stage.
    let mut taps: Vec<Vec<(InstId, InstId)>> = Vec::new();
    for (m, c) in r.maps.iter().zip(&coords) {
        taps.push(weighted_taps(&mut insts, m, r.kernel, c, r.lowest_scale(m)));
    }
    let mut sum: Option<InstId> = None;
    for combo in 0..combos {
        let mut rest = combo;
        let mut terms = Vec::with_capacity(r.maps.len());
        let mut weight: Option<InstId> = None;
        for (m, t) in r.maps.iter().zip(&taps).rev() {
            let (index, w) = t[rest % t.len()];
            rest /= t.len();
            terms.push(IndirectIndex {
                index,
                stride: r.own[m.axis],
                limit: m.input,
            });
            weight = Some(match weight {
                Some(acc) => insts.binary(BinaryOp::Mul, w, acc),
                None => w,
            });
        }
        terms.reverse();
        let v = r.gather(&mut insts, &mut views, terms);
        let v = insts.cast(v, Scalar::F64);
        let term = match weight {
            Some(w) => insts.binary(BinaryOp::Mul, w, v),
            None => v,
        };
        sum = Some(match sum {
            Some(s) => insts.binary(BinaryOp::Add, s, term),
            None => term,
        });
    }
    let mut v = match sum {
        Some(s) => s,
        None => {
            let v = r.gather(&mut insts, &mut views, Vec::new());
            insts.cast(v, Scalar::F64)
        }
    };
    if let Some(e) = r.extrapolated(&mut insts, &coords) {
        let ev = insts.f64c(Scalar::F64, extrapolation);
        v = insts.select(e, ev, v);
    }
    let value = saturate_to(&mut insts, v, out.elem);
    Ok(vec![loop_kernel(
        name,
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )])
}

/// Most tap combinations unrolled into one stage; more become inner loop axes.
const MAX_UNROLLED_TAPS: usize = 64;

/// The source position of one resized axis at the current output point.
struct AxisCoord {
    /// `ceil(x) - 1` (I64).
    lo: InstId,
    /// `x - lo`, in `(0, 1]` (F64).
    ratio: InstId,
    /// The axis's scale (F64).
    scale: InstId,
    /// Whether `x` lies outside the input (tf_crop_and_resize only).
    outside: Option<InstId>,
}

/// What the kernels of one Resize share.
struct Resizer<'c, 'a> {
    ctx: &'c LowerCtx<'a>,
    op: OpId,
    maps: Vec<AxisMap>,
    axes: Vec<usize>,
    coord: Coord,
    kernel: Kernel,
    roi_elem: Option<Scalar>,
    /// The input with the resized axes' strides zeroed (they are indirect).
    base: View,
    own: Vec<i64>,
    rank: usize,
    input_shape: Vec<u64>,
}

impl Resizer<'_, '_> {
    /// The source coordinates of every resized axis, computed into `insts` (runtime operands
    /// are loaded through views pushed onto `views`).
    fn coordinates(
        &self,
        insts: &mut Insts,
        views: &mut Vec<View>,
    ) -> Result<Vec<AxisCoord>, LowerError> {
        let (ctx, op, n_axes) = (self.ctx, self.op, self.rank);
        let mut policy_scale: Option<InstId> = None;
        let mut coords = Vec::with_capacity(self.maps.len());
        for m in &self.maps {
            let scale = match m.scale {
                Scale::Known(s) => insts.f64c(Scalar::F64, s),
                Scale::Operand(i) => {
                    operand_elem(ctx, op, 2, i, Scalar::F64, views, insts, n_axes)?
                }
                Scale::SizesPolicy { larger } => match policy_scale {
                    Some(s) => s,
                    None => {
                        let mut acc: Option<InstId> = None;
                        for (i, &a) in self.axes.iter().enumerate() {
                            let size =
                                operand_elem(ctx, op, 3, i, Scalar::F64, views, insts, n_axes)?;
                            let dim = insts.f64c(Scalar::F64, self.input_shape[a] as f64);
                            let ratio = insts.binary(BinaryOp::Div, size, dim);
                            let fold = if larger { BinaryOp::Max } else { BinaryOp::Min };
                            acc = Some(match acc {
                                Some(p) => insts.binary(fold, p, ratio),
                                None => ratio,
                            });
                        }
                        let s = acc.ok_or_else(|| unsupported("Resize sizes are empty"))?;
                        policy_scale = Some(s);
                        s
                    }
                },
            };
            let known = match m.scale {
                Scale::Known(s) => Some(s),
                _ => None,
            };
            let roi_pair = match (self.roi_elem, m.slot) {
                (Some(elem), Some(i)) => {
                    let ty = if elem.is_float() { elem } else { Scalar::F64 };
                    let r0 = operand_elem(ctx, op, 1, i, ty, views, insts, n_axes)?;
                    let r1 =
                        operand_elem(ctx, op, 1, self.axes.len() + i, ty, views, insts, n_axes)?;
                    Some((r0, r1))
                }
                (Some(_), None) => {
                    Some((insts.f64c(Scalar::F64, 0.0), insts.f64c(Scalar::F64, 1.0)))
                }
                (None, _) => None,
            };
            let src = source_coordinate(insts, m, self.coord, scale, known, roi_pair);
            let outside = if self.coord == Coord::TfCropAndResize {
                let zero = insts.f64c(Scalar::F64, 0.0);
                let last = insts.f64c(Scalar::F64, (m.input - 1) as f64);
                let below = insts.binary(BinaryOp::Lt, src, zero);
                let above = insts.binary(BinaryOp::Gt, src, last);
                Some(insts.binary(BinaryOp::Or, below, above))
            } else {
                None
            };
            let ceil = insts.unary(UnaryOp::Ceil, src);
            let ceil = insts.cast(ceil, Scalar::I64);
            let lo = insts.add_c(ceil, -1);
            let lo_f = insts.cast(lo, Scalar::F64);
            let ratio = insts.binary(BinaryOp::Sub, src, lo_f);
            coords.push(AxisCoord {
                lo,
                ratio,
                scale,
                outside,
            });
        }
        Ok(coords)
    }

    /// Whether any axis's source coordinate is outside the input (tf_crop_and_resize).
    fn extrapolated(&self, insts: &mut Insts, coords: &[AxisCoord]) -> Option<InstId> {
        let mut any: Option<InstId> = None;
        for c in coords {
            if let Some(o) = c.outside {
                any = Some(match any {
                    Some(e) => insts.binary(BinaryOp::Or, e, o),
                    None => o,
                });
            }
        }
        any
    }

    /// A load of the input at the given indirect indices, through its own view (the validator
    /// bounds a view by the sum of all its indirect ranges).
    fn gather(
        &self,
        insts: &mut Insts,
        views: &mut Vec<View>,
        terms: Vec<IndirectIndex>,
    ) -> InstId {
        views.push(self.base.clone());
        insts.load_indirect(views, (views.len() - 1) as u32, terms)
    }

    /// The smallest scale the axis can have: the known one, or the least the output size
    /// allows.
    fn lowest_scale(&self, m: &AxisMap) -> f64 {
        match m.scale {
            Scale::Known(s) => s,
            Scale::Operand(_) => m.output as f64 / m.input as f64,
            Scale::SizesPolicy { .. } => (m.output as f64 - 0.5).max(0.5) / m.input as f64,
        }
    }

    fn tap_count(&self, m: &AxisMap) -> usize {
        tap_range(self.kernel, self.lowest_scale(m)).0
    }

    /// Linear or cubic resize with many taps: the taps are inner loop axes; a `Reduce` sums
    /// `weight * value`, a second sums the weights when they are normalized, and a `Once`
    /// stage divides, saturates and stores.
    fn reduce_form(
        &self,
        name: String,
        out: &TensorRef,
        counts: &[usize],
        extrapolation: f64,
    ) -> LowerResult {
        let mut views = vec![dense(out)];
        let normalized = self.kernel.antialias || self.kernel.exclude_outside;
        let mut stages = Vec::new();
        for weights_only in [false, true] {
            if weights_only && !normalized {
                continue;
            }
            let mut insts = Insts::new();
            let coords = self.coordinates(&mut insts, &mut views)?;
            let mut terms = Vec::new();
            let mut weight: Option<InstId> = None;
            for (k, (m, c)) in self.maps.iter().zip(&coords).enumerate() {
                let (_, first) = tap_range(self.kernel, self.lowest_scale(m));
                let j = insts.index(self.rank + k);
                let (index, w) = tap(&mut insts, m, self.kernel, c, first, j);
                terms.push(IndirectIndex {
                    index,
                    stride: self.own[m.axis],
                    limit: m.input,
                });
                weight = Some(match weight {
                    Some(acc) => insts.binary(BinaryOp::Mul, acc, w),
                    None => w,
                });
            }
            let weight = weight.ok_or_else(|| unsupported("Resize with no resized axis"))?;
            let value = if weights_only {
                weight
            } else {
                let v = self.gather(&mut insts, &mut views, terms);
                let v = insts.cast(v, Scalar::F64);
                insts.binary(BinaryOp::Mul, weight, v)
            };
            stages.push(Stage::Reduce {
                insts: insts.finish(),
                value,
                op: ReduceOp::Sum,
                init: 0f64.to_bits(),
                ty: Scalar::F64,
            });
        }
        let mut insts = Insts::new();
        let coords = self.coordinates(&mut insts, &mut views)?;
        let mut v = insts.acc(0, Scalar::F64);
        if normalized {
            let total = insts.acc(1, Scalar::F64);
            let zero = insts.f64c(Scalar::F64, 0.0);
            let empty = insts.binary(BinaryOp::Eq, total, zero);
            let one = insts.f64c(Scalar::F64, 1.0);
            let total = insts.select(empty, one, total);
            v = insts.binary(BinaryOp::Div, v, total);
        }
        if let Some(e) = self.extrapolated(&mut insts, &coords) {
            let ev = insts.f64c(Scalar::F64, extrapolation);
            v = insts.select(e, ev, v);
        }
        let value = saturate_to(&mut insts, v, out.elem);
        stages.push(Stage::Once {
            insts: insts.finish(),
            stores: vec![Store::new(0, value)],
        });
        let inner = counts.iter().map(|&n| n as u64).collect();
        for view in &mut views {
            view.strides.extend(std::iter::repeat_n(0, counts.len()));
            for g in &mut view.guards {
                g.coeffs.extend(std::iter::repeat_n(0, counts.len()));
            }
        }
        Ok(vec![loop_kernel(
            name,
            out.shape.clone(),
            inner,
            views,
            stages,
        )])
    }
}

/// The tap count and the offset of tap 0 from `lo` for an axis of the given (lowest) scale:
/// 2 and 0 (linear), 4 and -1 (cubic), or with antialias the footprint of the kernel
/// stretched by `1 / min(scale, 1)`.
fn tap_range(k: Kernel, lowest_scale: f64) -> (usize, i64) {
    let support = if k.mode == Mode::Linear { 1.0 } else { 2.0 };
    if k.antialias {
        let first = (-support / lowest_scale.min(1.0)).floor() as i64 + 1;
        ((2 - 2 * first) as usize, first)
    } else if k.mode == Mode::Linear {
        (2, 0)
    } else {
        (4, -1)
    }
}

/// The offset of tap 0 from `lo` at run time: with antialias `floor(-support / min(scale,
/// 1)) + 1`, a constant when the scale is known.
fn tap_start(insts: &mut Insts, m: &AxisMap, k: Kernel, c: &AxisCoord, first: i64) -> InstId {
    if !k.antialias || matches!(m.scale, Scale::Known(_)) {
        return insts.i64c(first);
    }
    let support = if k.mode == Mode::Linear { 1.0 } else { 2.0 };
    let one = insts.f64c(Scalar::F64, 1.0);
    let clamped = insts.binary(BinaryOp::Min, c.scale, one);
    let neg = insts.f64c(Scalar::F64, -support);
    let q = insts.binary(BinaryOp::Div, neg, clamped);
    let f = insts.unary(UnaryOp::Floor, q);
    let f = insts.cast(f, Scalar::I64);
    insts.add_c(f, 1)
}

/// Tap `j` (an I64 instruction) of an axis in the generic form: its clamped index and raw
/// weight `kernel((start + j - ratio) * min(scale, 1))` (zero outside the input with
/// `exclude_outside`).
fn tap(
    insts: &mut Insts,
    m: &AxisMap,
    k: Kernel,
    c: &AxisCoord,
    first: i64,
    j: InstId,
) -> (InstId, InstId) {
    let start = tap_start(insts, m, k, c, first);
    let offset = insts.binary(BinaryOp::Add, start, j);
    let offset_f = insts.cast(offset, Scalar::F64);
    let d = insts.binary(BinaryOp::Sub, offset_f, c.ratio);
    let arg = if k.antialias {
        let one = insts.f64c(Scalar::F64, 1.0);
        let sc = insts.binary(BinaryOp::Min, c.scale, one);
        insts.binary(BinaryOp::Mul, d, sc)
    } else {
        d
    };
    let w = kernel_value(insts, k, arg);
    let index = insts.binary(BinaryOp::Add, c.lo, offset);
    let w = if k.exclude_outside {
        let inside = insts.in_range_c(index, 0, m.input);
        let zero = insts.f64c(Scalar::F64, 0.0);
        insts.select(inside, w, zero)
    } else {
        w
    };
    (insts.clamp_c(index, 0, m.input - 1), w)
}

/// The interpolation kernel at distance `arg`: the hat `clip(1 - |arg|, 0, 1)` or Keys'
/// cubic.
fn kernel_value(insts: &mut Insts, k: Kernel, arg: InstId) -> InstId {
    if k.mode == Mode::Linear {
        let one = insts.f64c(Scalar::F64, 1.0);
        let abs = insts.unary(UnaryOp::Abs, arg);
        let w = insts.binary(BinaryOp::Sub, one, abs);
        let zero = insts.f64c(Scalar::F64, 0.0);
        let w = insts.binary(BinaryOp::Max, w, zero);
        insts.binary(BinaryOp::Min, w, one)
    } else {
        cubic_kernel(insts, k.a, arg)
    }
}

/// `math.isclose` with its default tolerance.
fn is_close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// The scale of every axis (1 where not resized), as the reference derives it.
fn resize_scales(
    ctx: &LowerCtx,
    op: OpId,
    input: &[u64],
    output: &[u64],
    axes: &[usize],
) -> Result<Vec<Scale>, LowerError> {
    let rank = input.len();
    let mut scales = vec![Scale::Known(1.0); rank];
    if !operand_absent_or_empty(ctx, op, 3)? {
        let policy = ctx
            .attr_str(op, "keep_aspect_ratio_policy")
            .unwrap_or_default();
        if policy == "stretch" {
            for &a in axes {
                scales[a] = Scale::Known(output[a] as f64 / input[a] as f64);
            }
            return Ok(scales);
        }
        let larger = policy == "not_smaller";
        let scale = match ctx.const_ints(op, 3) {
            Some(sizes) => {
                let ratios = axes
                    .iter()
                    .zip(&sizes)
                    .map(|(&a, &s)| s as f64 / input[a] as f64);
                Scale::Known(if larger {
                    ratios.fold(0.0, f64::max)
                } else {
                    ratios.fold(f64::INFINITY, f64::min)
                })
            }
            None => Scale::SizesPolicy { larger },
        };
        for &a in axes {
            scales[a] = scale;
        }
        return Ok(scales);
    }
    if operand_absent_or_empty(ctx, op, 2)? {
        return Err(unsupported("Resize needs scales or sizes"));
    }
    let given = ctx.const_floats(op, 2);
    for (i, &a) in axes.iter().enumerate() {
        scales[a] = match &given {
            Some(g) => Scale::Known(
                *g.get(i)
                    .ok_or_else(|| unsupported("Resize scales do not have one entry per axis"))?,
            ),
            None => Scale::Operand(i),
        };
    }
    Ok(scales)
}

/// `special` where the output width `scale * input` is 1, else `general` (decided at compile
/// time when the scale is known).
fn if_unit_width(
    insts: &mut Insts,
    width: InstId,
    known_width: Option<f64>,
    special: impl FnOnce(&mut Insts) -> InstId,
    general: impl FnOnce(&mut Insts) -> InstId,
) -> InstId {
    match known_width {
        Some(1.0) => special(insts),
        Some(_) => general(insts),
        None => {
            let s = special(insts);
            let g = general(insts);
            let one = insts.f64c(Scalar::F64, 1.0);
            let unit = insts.binary(BinaryOp::Eq, width, one);
            insts.select(unit, s, g)
        }
    }
}

/// The source coordinate of the current output index along `m.axis`, as `f64`, with the
/// reference's operation order.
fn source_coordinate(
    insts: &mut Insts,
    m: &AxisMap,
    coord: Coord,
    scale: InstId,
    known_scale: Option<f64>,
    roi: Option<(InstId, InstId)>,
) -> InstId {
    let y = insts.index(m.axis);
    let y = insts.cast(y, Scalar::F64);
    let input = m.input as f64;
    let c = |insts: &mut Insts, v: f64| insts.f64c(Scalar::F64, v);
    let in_c = c(insts, input);
    let width = insts.binary(BinaryOp::Mul, scale, in_c);
    let known_width = known_scale.map(|s| s * input);
    let half_pixel = |insts: &mut Insts| {
        let half = c(insts, 0.5);
        let shifted = insts.binary(BinaryOp::Add, y, half);
        let scaled = insts.binary(BinaryOp::Div, shifted, scale);
        insts.binary(BinaryOp::Sub, scaled, half)
    };
    match coord {
        Coord::HalfPixel => half_pixel(insts),
        Coord::PytorchHalfPixel => {
            if_unit_width(insts, width, known_width, |i| c(i, -0.5), half_pixel)
        }
        Coord::HalfPixelSymmetric => {
            // offset = (input / 2) * (1 - output / width)
            let out_c = c(insts, m.output as f64);
            let adjustment = insts.binary(BinaryOp::Div, out_c, width);
            let one = c(insts, 1.0);
            let rest = insts.binary(BinaryOp::Sub, one, adjustment);
            let center = c(insts, input / 2.0);
            let offset = insts.binary(BinaryOp::Mul, center, rest);
            let hp = half_pixel(insts);
            insts.binary(BinaryOp::Add, offset, hp)
        }
        Coord::AlignCorners => if_unit_width(
            insts,
            width,
            known_width,
            |i| c(i, 0.0),
            |insts| {
                let num = c(insts, input - 1.0);
                let one = c(insts, 1.0);
                let den = insts.binary(BinaryOp::Sub, width, one);
                let t = insts.binary(BinaryOp::Mul, y, num);
                insts.binary(BinaryOp::Div, t, den)
            },
        ),
        Coord::Asymmetric => insts.binary(BinaryOp::Div, y, scale),
        Coord::TfCropAndResize => {
            let (r0, r1) = roi.expect("tf_crop_and_resize has a region of interest");
            // `roi[1] - roi[0]` and `roi[0] * (input - 1)` are computed in the roi's type.
            let roi_ty = insts.ty(r0);
            let span = insts.binary(BinaryOp::Sub, r1, r0);
            let last = insts.f64c(roi_ty, input - 1.0);
            let start = insts.binary(BinaryOp::Mul, r0, last);
            let start = insts.cast(start, Scalar::F64);
            let base = if_unit_width(
                insts,
                width,
                known_width,
                |insts| {
                    let t = insts.binary(BinaryOp::Mul, span, last);
                    let two = insts.f64c(roi_ty, 2.0);
                    let t = insts.binary(BinaryOp::Div, t, two);
                    insts.cast(t, Scalar::F64)
                },
                |insts| {
                    let span = insts.cast(span, Scalar::F64);
                    let num = c(insts, input - 1.0);
                    let one = c(insts, 1.0);
                    let den = insts.binary(BinaryOp::Sub, width, one);
                    let t = insts.binary(BinaryOp::Mul, y, span);
                    let t = insts.binary(BinaryOp::Mul, t, num);
                    insts.binary(BinaryOp::Div, t, den)
                },
            );
            insts.binary(BinaryOp::Add, base, start)
        }
    }
}

/// The nearest source index from `lo` and `ratio` (see the module doc), unclamped.
fn nearest_index(
    ctx: &LowerCtx,
    op: OpId,
    insts: &mut Insts,
    lo: InstId,
    ratio: InstId,
) -> Result<InstId, LowerError> {
    let hi = insts.add_c(lo, 1);
    let (cmp, bound) = match ctx.attr_str(op, "nearest_mode").unwrap_or_default() {
        "round_prefer_floor" => (BinaryOp::Le, 0.5),
        "round_prefer_ceil" => (BinaryOp::Lt, 0.5),
        "floor" => (BinaryOp::Lt, 1.0),
        "ceil" => return Ok(hi),
        other => return Err(unsupported(format!("Resize nearest_mode `{other}`"))),
    };
    let bound = insts.f64c(Scalar::F64, bound);
    let take_lo = insts.binary(cmp, ratio, bound);
    Ok(insts.select(take_lo, lo, hi))
}

/// The interpolation kernel of a linear or cubic resize.
#[derive(Copy, Clone)]
struct Kernel {
    mode: Mode,
    antialias: bool,
    exclude_outside: bool,
    /// Keys' `A` (cubic).
    a: f64,
}

/// The clamped indices and `f64` weights of every tap of a linear or cubic axis, unrolled;
/// without antialias the weights are the reference's `_cubic_coeffs`/`_linear_coeffs` with
/// their operation order, and antialiased or `exclude_outside` weights are normalized.
fn weighted_taps(
    insts: &mut Insts,
    m: &AxisMap,
    k: Kernel,
    c: &AxisCoord,
    lowest_scale: f64,
) -> Vec<(InstId, InstId)> {
    let (n, first) = tap_range(k, lowest_scale);
    let mut taps = Vec::with_capacity(n);
    for j in 0..n {
        if k.antialias {
            let jc = insts.i64c(j as i64);
            taps.push(tap(insts, m, k, c, first, jc));
            continue;
        }
        let w = match (k.mode, j) {
            (Mode::Linear, 0) => {
                let one = insts.f64c(Scalar::F64, 1.0);
                insts.binary(BinaryOp::Sub, one, c.ratio)
            }
            (Mode::Linear, _) => c.ratio,
            _ => cubic_weight(insts, k.a, j, c.ratio),
        };
        let index = insts.add_c(c.lo, first + j as i64);
        let w = if k.exclude_outside {
            let inside = insts.in_range_c(index, 0, m.input);
            let zero = insts.f64c(Scalar::F64, 0.0);
            insts.select(inside, w, zero)
        } else {
            w
        };
        taps.push((insts.clamp_c(index, 0, m.input - 1), w));
    }
    if k.antialias || k.exclude_outside {
        let mut sum = taps[0].1;
        for &(_, w) in &taps[1..] {
            sum = insts.binary(BinaryOp::Add, sum, w);
        }
        let zero = insts.f64c(Scalar::F64, 0.0);
        let empty = insts.binary(BinaryOp::Eq, sum, zero);
        let one = insts.f64c(Scalar::F64, 1.0);
        let sum = insts.select(empty, one, sum);
        for t in taps.iter_mut() {
            t.1 = insts.binary(BinaryOp::Div, t.1, sum);
        }
    }
    taps
}

/// Weight `j` of the reference's `_cubic_coeffs(ratio, A)`, with its operation order.
fn cubic_weight(insts: &mut Insts, a: f64, j: usize, ratio: InstId) -> InstId {
    let c = |insts: &mut Insts, v: f64| insts.f64c(Scalar::F64, v);
    let one = c(insts, 1.0);
    // The distance used: ratio + 1, ratio, 1 - ratio, (1 - ratio) + 1.
    let t = match j {
        0 => insts.binary(BinaryOp::Add, ratio, one),
        1 => ratio,
        2 => insts.binary(BinaryOp::Sub, one, ratio),
        _ => {
            let s = insts.binary(BinaryOp::Sub, one, ratio);
            insts.binary(BinaryOp::Add, s, one)
        }
    };
    cubic_convolution(insts, Scalar::F64, a, j == 0 || j == 3, t, one)
}

/// The reference's antialiased cubic kernel `compute_coeff(x)`.
fn cubic_kernel(insts: &mut Insts, a: f64, x: InstId) -> InstId {
    let c = |insts: &mut Insts, v: f64| insts.f64c(Scalar::F64, v);
    let x = insts.unary(UnaryOp::Abs, x);
    let x2 = insts.binary(BinaryOp::Mul, x, x);
    let x3 = insts.binary(BinaryOp::Mul, x, x2);
    // Near: (A + 2) x^3 - (A + 3) x^2 + 1.
    let a2 = c(insts, a + 2.0);
    let a3 = c(insts, a + 3.0);
    let one = c(insts, 1.0);
    let n1 = insts.binary(BinaryOp::Mul, a2, x3);
    let n2 = insts.binary(BinaryOp::Mul, a3, x2);
    let near = insts.binary(BinaryOp::Sub, n1, n2);
    let near = insts.binary(BinaryOp::Add, near, one);
    // Far: A x^3 - 5A x^2 + 8A x - 4A.
    let ac = c(insts, a);
    let a5 = c(insts, 5.0 * a);
    let a8 = c(insts, 8.0 * a);
    let a4 = c(insts, 4.0 * a);
    let f1 = insts.binary(BinaryOp::Mul, ac, x3);
    let f2 = insts.binary(BinaryOp::Mul, a5, x2);
    let f3 = insts.binary(BinaryOp::Mul, a8, x);
    let far = insts.binary(BinaryOp::Sub, f1, f2);
    let far = insts.binary(BinaryOp::Add, far, f3);
    let far = insts.binary(BinaryOp::Sub, far, a4);
    let two = c(insts, 2.0);
    let zero = c(insts, 0.0);
    let is_near = insts.binary(BinaryOp::Le, x, one);
    let is_far = insts.binary(BinaryOp::Lt, x, two);
    let outer = insts.select(is_far, far, zero);
    insts.select(is_near, near, outer)
}

/// `v` (`f64`) converted to `elem` as the reference's `saturate_cast`: integers are rounded
/// half to even and clamped to the type's range.
fn saturate_to(insts: &mut Insts, v: InstId, elem: Scalar) -> InstId {
    if elem.is_float() {
        return insts.cast(v, elem);
    }
    let (lo, hi) = int_range(elem);
    let r = insts.unary(UnaryOp::Round, v);
    let lo = insts.f64c(Scalar::F64, lo);
    let hi = insts.f64c(Scalar::F64, hi);
    let r = insts.binary(BinaryOp::Max, r, lo);
    let r = insts.binary(BinaryOp::Min, r, hi);
    insts.cast(r, elem)
}

/// The range of an integer kernel type, as `f64`.
pub fn int_range(elem: Scalar) -> (f64, f64) {
    match elem {
        Scalar::I8 => (-128.0, 127.0),
        Scalar::I16 => (-32768.0, 32767.0),
        Scalar::I32 => (i32::MIN as f64, i32::MAX as f64),
        Scalar::I64 => (i64::MIN as f64, i64::MAX as f64),
        Scalar::U8 => (0.0, 255.0),
        Scalar::U16 => (0.0, 65535.0),
        Scalar::U32 => (0.0, u32::MAX as f64),
        Scalar::U64 => (0.0, u64::MAX as f64),
        _ => (0.0, 1.0),
    }
}
