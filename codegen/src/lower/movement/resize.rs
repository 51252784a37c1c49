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
use super::super::{unsupported, LowerCtx, LowerError, LowerResult};
use super::common::{const_floats, const_ints, loop_kernel, map_stage, norm_axis, operand_absent_or_empty, IndexMath};
use super::{dense, output};
use crate::kernel::{BinaryOp, IndirectIndex, InstId, Scalar, UnaryOp};
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

/// How one resized axis maps output to input.
struct AxisMap {
    axis: usize,
    input: i64,
    output: u64,
    scale: f64,
    roi: (f64, f64),
}

pub fn resize(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else { return Ok(Vec::new()) };
    let rank = x.rank();
    let mode = match ctx.attr_str(op, "mode").unwrap_or("nearest") {
        "nearest" => Mode::Nearest,
        "linear" => Mode::Linear,
        "cubic" => Mode::Cubic,
        other => return Err(unsupported(format!("Resize mode `{other}`"))),
    };
    let coord = match ctx.attr_str(op, "coordinate_transformation_mode").unwrap_or("half_pixel") {
        "half_pixel" => Coord::HalfPixel,
        "half_pixel_symmetric" => Coord::HalfPixelSymmetric,
        "pytorch_half_pixel" => Coord::PytorchHalfPixel,
        "align_corners" => Coord::AlignCorners,
        "asymmetric" => Coord::Asymmetric,
        "tf_crop_and_resize" => Coord::TfCropAndResize,
        other => return Err(unsupported(format!("Resize coordinate_transformation_mode `{other}`"))),
    };
    let antialias = ctx.attr_int(op, "antialias", 0) != 0 && mode != Mode::Nearest;
    let exclude_outside = ctx.attr_int(op, "exclude_outside", 0) != 0;
    let cubic_a = ctx.attr_float(op, "cubic_coeff_a", -0.75);
    let extrapolation = ctx.attr_float(op, "extrapolation_value", 0.0);
    let axes: Vec<usize> = match ctx.attr_ints(op, "axes") {
        Some(a) if !a.is_empty() => a.iter().map(|&a| norm_axis(a, rank)).collect::<Result<_, _>>()?,
        _ => (0..rank).collect(),
    };
    let scales = resize_scales(ctx, op, &x.shape, &out.shape, &axes)?;
    let roi = if coord == Coord::TfCropAndResize {
        let values = const_floats(ctx, op, 1)
            .ok_or_else(|| unsupported("Resize roi must be a compile-time constant"))?;
        if values.len() != 2 * axes.len() {
            return Err(unsupported("Resize roi does not have two entries per axis"));
        }
        let f32_roi = ctx.input(op, 1)?.elem == Scalar::F32;
        let mut roi = vec![(0.0, 1.0); rank];
        for (i, &a) in axes.iter().enumerate() {
            roi[a] = (values[i], values[axes.len() + i]);
        }
        Some((roi, f32_roi))
    } else {
        None
    };
    let mut maps = Vec::new();
    for a in 0..rank {
        let (input, output, scale) = (x.shape[a] as i64, out.shape[a], scales[a]);
        let trivial_roi = roi.as_ref().is_none_or(|(r, _)| is_close(r[a].0, 0.0) && is_close(r[a].1, 1.0));
        if is_close(scale, 1.0) && output == input as u64 && trivial_roi {
            continue;
        }
        maps.push(AxisMap { axis: a, input, output, scale, roi: roi.as_ref().map_or((0.0, 1.0), |(r, _)| r[a]) });
    }
    let f32_roi = roi.as_ref().is_some_and(|(_, f)| *f);

    let own = x.strides();
    let mut strides = own.clone();
    for m in &maps {
        strides[m.axis] = 0;
    }
    let views = vec![dense(&out), x.view_with(strides)];
    let mut insts = Insts::new();
    let mut extrapolated: Option<InstId> = None;
    // Per axis: the taps' clamped indices and (except nearest) weights.
    let mut taps: Vec<Vec<(InstId, Option<InstId>)>> = Vec::new();
    for m in &maps {
        let src = source_coordinate(&mut insts, m, coord, f32_roi);
        if coord == Coord::TfCropAndResize {
            let zero = insts.f64c(Scalar::F64, 0.0);
            let last = insts.f64c(Scalar::F64, (m.input - 1) as f64);
            let below = insts.binary(BinaryOp::Lt, src, zero);
            let above = insts.binary(BinaryOp::Gt, src, last);
            let out_of_range = insts.binary(BinaryOp::Or, below, above);
            extrapolated = Some(match extrapolated {
                Some(e) => insts.binary(BinaryOp::Or, e, out_of_range),
                None => out_of_range,
            });
        }
        let ceil = insts.unary(UnaryOp::Ceil, src);
        let ceil = insts.cast(ceil, Scalar::I64);
        let lo = insts.add_c(ceil, -1);
        let lo_f = insts.cast(lo, Scalar::F64);
        let ratio = insts.binary(BinaryOp::Sub, src, lo_f);
        taps.push(match mode {
            Mode::Nearest => {
                let nearest = nearest_index(ctx, op, &mut insts, lo, ratio)?;
                vec![(insts.clamp_c(nearest, 0, m.input - 1), None)]
            }
            Mode::Linear | Mode::Cubic => {
                weighted_taps(&mut insts, m, mode, antialias, exclude_outside, cubic_a, lo, ratio)
            }
        });
    }
    let combos: usize = taps.iter().map(Vec::len).product();
    if combos > MAX_TAPS {
        return Err(unsupported(format!("Resize reads {combos} taps per output element (at most {MAX_TAPS})")));
    }
    let value = if mode == Mode::Nearest {
        let terms = maps
            .iter()
            .zip(&taps)
            .map(|(m, t)| IndirectIndex { index: t[0].0, stride: own[m.axis], limit: m.input })
            .collect();
        let v = insts.load_indirect(&views, 1, terms);
        match extrapolated {
            Some(e) => {
                let ev = insts.f64c(out.elem, extrapolation);
                insts.select(e, ev, v)
            }
            None => v,
        }
    } else {
        if !out.elem.is_float() && !out.elem.is_int() {
            return Err(unsupported("Resize linear/cubic of a bool tensor"));
        }
        let mut sum: Option<InstId> = None;
        for combo in 0..combos {
            let mut rest = combo;
            let mut terms = Vec::with_capacity(maps.len());
            let mut weight: Option<InstId> = None;
            for (m, t) in maps.iter().zip(&taps).rev() {
                let (index, w) = t[rest % t.len()];
                rest /= t.len();
                terms.push(IndirectIndex { index, stride: own[m.axis], limit: m.input });
                let w = w.expect("linear and cubic taps carry weights");
                weight = Some(match weight {
                    Some(acc) => insts.binary(BinaryOp::Mul, w, acc),
                    None => w,
                });
            }
            terms.reverse();
            let v = insts.load_indirect(&views, 1, terms);
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
                let v = insts.load(&views, 1);
                insts.cast(v, Scalar::F64)
            }
        };
        if let Some(e) = extrapolated {
            let ev = insts.f64c(Scalar::F64, extrapolation);
            v = insts.select(e, ev, v);
        }
        saturate_to(&mut insts, v, out.elem)
    };
    Ok(vec![loop_kernel(ctx.kernel_name(op, 0), out.shape.clone(), Vec::new(), views, vec![map_stage(insts, 0, value)])])
}

/// `math.isclose` with its default tolerance.
fn is_close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// The scale of every axis (1 where not resized), as the reference derives it.
fn resize_scales(ctx: &LowerCtx, op: OpId, input: &[u64], output: &[u64], axes: &[usize]) -> Result<Vec<f64>, LowerError> {
    let rank = input.len();
    let mut scales = vec![1.0; rank];
    if !operand_absent_or_empty(ctx, op, 3)? {
        let policy = ctx.attr_str(op, "keep_aspect_ratio_policy").unwrap_or("stretch");
        if policy == "stretch" {
            for &a in axes {
                scales[a] = output[a] as f64 / input[a] as f64;
            }
            return Ok(scales);
        }
        let sizes = const_ints(ctx, op, 3)
            .ok_or_else(|| unsupported("Resize sizes must be compile-time constants"))?;
        let ratios = axes.iter().zip(&sizes).map(|(&a, &s)| s as f64 / input[a] as f64);
        let scale = if policy == "not_larger" {
            ratios.fold(f64::INFINITY, f64::min)
        } else {
            ratios.fold(0.0, f64::max)
        };
        for &a in axes {
            scales[a] = scale;
        }
        return Ok(scales);
    }
    let given = const_floats(ctx, op, 2)
        .ok_or_else(|| unsupported("Resize scales must be compile-time constants"))?;
    if given.len() != axes.len() {
        return Err(unsupported("Resize scales do not have one entry per axis"));
    }
    for (&a, &s) in axes.iter().zip(&given) {
        scales[a] = s;
    }
    Ok(scales)
}

/// The source coordinate of the current output index along `m.axis`, as `f64`.
fn source_coordinate(insts: &mut Insts, m: &AxisMap, coord: Coord, f32_roi: bool) -> InstId {
    let y = insts.index(m.axis);
    let y = insts.cast(y, Scalar::F64);
    let input = m.input as f64;
    let output_width = m.scale * input;
    let c = |insts: &mut Insts, v: f64| insts.f64c(Scalar::F64, v);
    let half_pixel = |insts: &mut Insts| {
        let half = c(insts, 0.5);
        let scale = c(insts, m.scale);
        let shifted = insts.binary(BinaryOp::Add, y, half);
        let scaled = insts.binary(BinaryOp::Div, shifted, scale);
        insts.binary(BinaryOp::Sub, scaled, half)
    };
    match coord {
        Coord::HalfPixel => half_pixel(insts),
        Coord::PytorchHalfPixel if output_width == 1.0 => c(insts, -0.5),
        Coord::PytorchHalfPixel => half_pixel(insts),
        Coord::HalfPixelSymmetric => {
            let adjustment = m.output as f64 / output_width;
            let center = input / 2.0;
            let offset = center * (1.0 - adjustment);
            let hp = half_pixel(insts);
            let offset = c(insts, offset);
            insts.binary(BinaryOp::Add, offset, hp)
        }
        Coord::AlignCorners if output_width == 1.0 => c(insts, 0.0),
        Coord::AlignCorners => {
            let num = c(insts, input - 1.0);
            let den = c(insts, output_width - 1.0);
            let t = insts.binary(BinaryOp::Mul, y, num);
            insts.binary(BinaryOp::Div, t, den)
        }
        Coord::Asymmetric => {
            let scale = c(insts, m.scale);
            insts.binary(BinaryOp::Div, y, scale)
        }
        Coord::TfCropAndResize => {
            let (r0, r1) = m.roi;
            let (width, start) = if f32_roi {
                (f64::from(r1 as f32 - r0 as f32), f64::from(r0 as f32 * (input - 1.0) as f32))
            } else {
                (r1 - r0, r0 * (input - 1.0))
            };
            let base = if output_width == 1.0 {
                c(insts, width * (input - 1.0) / 2.0)
            } else {
                let wc = c(insts, width);
                let num = c(insts, input - 1.0);
                let den = c(insts, output_width - 1.0);
                let t = insts.binary(BinaryOp::Mul, y, wc);
                let t = insts.binary(BinaryOp::Mul, t, num);
                insts.binary(BinaryOp::Div, t, den)
            };
            let start = c(insts, start);
            insts.binary(BinaryOp::Add, base, start)
        }
    }
}

/// The nearest source index from `lo` and `ratio` (see the module doc), unclamped.
fn nearest_index(ctx: &LowerCtx, op: OpId, insts: &mut Insts, lo: InstId, ratio: InstId) -> Result<InstId, LowerError> {
    let hi = insts.add_c(lo, 1);
    let (cmp, bound) = match ctx.attr_str(op, "nearest_mode").unwrap_or("round_prefer_floor") {
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

/// The clamped indices and normalized `f64` weights of a linear or cubic axis.
#[allow(clippy::too_many_arguments)]
fn weighted_taps(
    insts: &mut Insts,
    m: &AxisMap,
    mode: Mode,
    antialias: bool,
    exclude_outside: bool,
    a: f64,
    lo: InstId,
    ratio: InstId,
) -> Vec<(InstId, Option<InstId>)> {
    let scale = m.scale.min(1.0);
    // `first` is the offset of tap 0 from `lo + 1 - n / 2` relative to the ratio: weight j
    // is kernel((first + j - ratio) * scale) for the antialiased forms.
    let (n, first) = match (mode, antialias) {
        (Mode::Linear, false) => (2, 0),
        (Mode::Cubic, false) => (4, -1),
        (Mode::Linear, true) => {
            let start = (-1.0 / scale).floor() as i64 + 1;
            ((2 - 2 * start) as usize, start)
        }
        (_, true) => {
            let start = (-2.0 / scale).floor() as i64 + 1;
            ((2 - 2 * start) as usize, start)
        }
        (Mode::Nearest, false) => unreachable!("nearest has no weighted taps"),
    };
    let one = insts.f64c(Scalar::F64, 1.0);
    let mut weights: Vec<InstId> = Vec::with_capacity(n);
    for j in 0..n {
        let w = match (mode, antialias) {
            (Mode::Linear, false) => {
                if j == 0 {
                    insts.binary(BinaryOp::Sub, one, ratio)
                } else {
                    ratio
                }
            }
            (Mode::Cubic, false) => cubic_weight(insts, a, j, ratio),
            _ => {
                let offset = insts.f64c(Scalar::F64, (first + j as i64) as f64);
                let d = insts.binary(BinaryOp::Sub, offset, ratio);
                let sc = insts.f64c(Scalar::F64, scale);
                let arg = insts.binary(BinaryOp::Mul, sc, d);
                if mode == Mode::Linear {
                    let abs = insts.unary(UnaryOp::Abs, arg);
                    let w = insts.binary(BinaryOp::Sub, one, abs);
                    let zero = insts.f64c(Scalar::F64, 0.0);
                    let w = insts.binary(BinaryOp::Max, w, zero);
                    insts.binary(BinaryOp::Min, w, one)
                } else {
                    cubic_kernel(insts, a, arg)
                }
            }
        };
        weights.push(w);
    }
    let base = 1 - (n as i64) / 2;
    let mut indices = Vec::with_capacity(n);
    for (j, w) in weights.iter_mut().enumerate() {
        let index = insts.add_c(lo, base + j as i64);
        if exclude_outside {
            let inside = insts.in_range_c(index, 0, m.input);
            let zero = insts.f64c(Scalar::F64, 0.0);
            *w = insts.select(inside, *w, zero);
        }
        indices.push(insts.clamp_c(index, 0, m.input - 1));
    }
    if antialias || exclude_outside {
        let mut sum = weights[0];
        for &w in &weights[1..] {
            sum = insts.binary(BinaryOp::Add, sum, w);
        }
        if exclude_outside {
            let zero = insts.f64c(Scalar::F64, 0.0);
            let is_zero = insts.binary(BinaryOp::Eq, sum, zero);
            sum = insts.select(is_zero, one, sum);
        }
        for w in weights.iter_mut() {
            *w = insts.binary(BinaryOp::Div, *w, sum);
        }
    }
    indices.into_iter().zip(weights).map(|(i, w)| (i, Some(w))).collect()
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
    if j == 0 || j == 3 {
        // ((A * t - 5A) * t + 8A) * t - 4A
        let ac = c(insts, a);
        let u = insts.binary(BinaryOp::Mul, ac, t);
        let k5 = c(insts, 5.0 * a);
        let u = insts.binary(BinaryOp::Sub, u, k5);
        let u = insts.binary(BinaryOp::Mul, u, t);
        let k8 = c(insts, 8.0 * a);
        let u = insts.binary(BinaryOp::Add, u, k8);
        let u = insts.binary(BinaryOp::Mul, u, t);
        let k4 = c(insts, 4.0 * a);
        insts.binary(BinaryOp::Sub, u, k4)
    } else {
        // ((A + 2) * t - (A + 3)) * t * t + 1
        let a2 = c(insts, a + 2.0);
        let a3 = c(insts, a + 3.0);
        let u = insts.binary(BinaryOp::Mul, a2, t);
        let u = insts.binary(BinaryOp::Sub, u, a3);
        let u = insts.binary(BinaryOp::Mul, u, t);
        let u = insts.binary(BinaryOp::Mul, u, t);
        insts.binary(BinaryOp::Add, u, one)
    }
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
