//! GridSample and AffineGrid, following `onnx/reference/ops/op_grid_sample.py` and
//! `op_affine_grid.py`.
//!
//! GridSample: one `Map` kernel over the output `(N, C, D1_out, ..., Dk_out)`. At each point
//! the grid's `k` coordinates (the last grid axis, `x` first, so spatial axis `a` reads
//! coordinate `k - 1 - a`) are loaded and denormalized to source coordinates in `f32`, as the
//! reference stores them (`((n + 1) * d - 1) / 2`, or `(n + 1) / 2 * (d - 1)` with
//! `align_corners`, computed in the grid's type); `nearest` rounds them half to even. A
//! coordinate outside `[x_min, x_max]` (`[-0.5, d - 0.5]`, or `[0, d - 1]` with
//! `align_corners`) is clamped into the axis (`border`) or reflected into the range
//! (`reflection`, in `f64`). The taps are `floor(x) + 0, 1` (linear, weights `1 - t, t`) or
//! `floor(x) - 1 ..= floor(x) + 2` (cubic, Keys' kernel with `A = -0.75`), with `t = x -
//! floor(x)` and the weights computed in `f32` as the reference does; every combination of
//! the axes' taps is read with a `LoadIndirect` and summed with the product of its weights
//! in X's compute type. Each tap index is resolved by the padding mode: `zeros` reads 0
//! outside the axis, `border` clamps, `reflection` reflects the integer index and truncates.
//!
//! Every index is clamped into its axis before it is read, whatever the grid holds: NaN
//! converts to 0 and infinities saturate (the kernel IR's float-to-integer cast), so no grid
//! value reads outside X. The reference divides by zero reflecting an axis of size 1 with
//! `align_corners`; here such a coordinate is 0.
//!
//! AffineGrid: one `Map` kernel over the grid `(N, D?, H, W, k)`: coordinate `c` at a point is
//! row `c` of theta times the homogeneous point `(x, y, (z,) 1)`, the point's entries the
//! evenly spaced normalized positions of the output's axes (`-1 + 2 i / (d - 1)` with
//! `align_corners`, else `-1 + (2 i + 1) / d`), computed in `f64` as the reference's
//! `np.arange` and `matmul` against its `f64` base grid. `size` must be a compile-time
//! constant that gives the output's shape (a run-time `size` is unsupported, even where the
//! model declares a static output shape).

use super::super::build::{Insts, TensorRef};
use super::super::{unsupported, LowerCtx, LowerError, LowerResult};
use super::common::{cubic_convolution, loop_kernel, map_stage, shifted, IndexMath};
use super::{dense, output};
use crate::kernel::{BinaryOp, IndirectIndex, InstId, Scalar, UnaryOp, View};
use memc_ir::OpId;

/// Most tap combinations one output element reads (cubic over three spatial axes).
const MAX_TAPS: usize = 64;

/// Keys' cubic coefficient of the reference (PyTorch's).
const CUBIC_A: f64 = -0.75;

#[derive(Copy, Clone, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Copy, Clone, PartialEq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// One spatial axis of X, as the sampler sees it.
#[derive(Copy, Clone)]
struct Axis {
    /// The axis's size.
    size: i64,
    /// X's element stride along it.
    stride: i64,
    /// The range a source coordinate is kept in: `[-0.5, size - 0.5]`, or `[0, size - 1]`
    /// with `align_corners`.
    min: f64,
    max: f64,
}

/// One tap of one axis: the index it reads (clamped into the axis) and, with `zeros`
/// padding, whether the unclamped index was inside.
#[derive(Copy, Clone)]
struct Tap {
    index: InstId,
    inside: Option<InstId>,
}

/// GridSample: one map kernel over the output (see the module doc).
pub fn grid_sample(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let grid = ctx.input(op, 1)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let rank = x.rank();
    if rank < 3 || grid.rank() != rank || out.rank() != rank {
        return Err(unsupported(format!(
            "GridSample of X of rank {rank} with a grid of rank {}",
            grid.rank()
        )));
    }
    let k = rank - 2;
    let mode = match ctx.attr_str(op, "mode").unwrap_or_default() {
        "nearest" => Mode::Nearest,
        "linear" => Mode::Linear,
        "cubic" => Mode::Cubic,
        other => return Err(unsupported(format!("GridSample mode `{other}`"))),
    };
    let padding = match ctx.attr_str(op, "padding_mode").unwrap_or_default() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        other => return Err(unsupported(format!("GridSample padding_mode `{other}`"))),
    };
    let align = ctx.attr_int(op, "align_corners") != 0;
    if mode != Mode::Nearest && !x.elem.is_float() {
        return Err(unsupported(format!(
            "GridSample interpolation of {} (only nearest reads non-float tensors)",
            x.elem.name()
        )));
    }
    if x.shape[2..].contains(&0) {
        return Err(unsupported("GridSample of an X with an empty spatial axis"));
    }
    let taps_per_axis: usize = match mode {
        Mode::Nearest => 1,
        Mode::Linear => 2,
        Mode::Cubic => 4,
    };
    let combos = taps_per_axis
        .checked_pow(k as u32)
        .filter(|&n| n <= MAX_TAPS)
        .ok_or_else(|| {
            unsupported(format!(
                "GridSample reads {taps_per_axis}^{k} taps per output element (at most {MAX_TAPS})"
            ))
        })?;

    let x_strides = x.strides();
    let axes: Vec<Axis> = (0..k)
        .map(|a| {
            let size = x.shape[2 + a] as i64;
            let (min, max) = if align {
                (0.0, size as f64 - 1.0)
            } else {
                (-0.5, size as f64 - 0.5)
            };
            Axis {
                size,
                stride: x_strides[2 + a],
                min,
                max,
            }
        })
        .collect();
    let mut views = vec![dense(&out)];
    let mut insts = Insts::new();
    let coords = source_coordinates(&grid, &axes, mode, padding, align, &mut views, &mut insts)?;

    // X with the spatial strides zeroed: they are indirect.
    let mut base_strides = vec![0i64; rank];
    base_strides[..2].copy_from_slice(&x_strides[..2]);
    let base = x.view_with(base_strides);

    if mode == Mode::Nearest {
        let mut taps = Vec::with_capacity(k);
        for (axis, &coord) in axes.iter().zip(&coords) {
            let index = insts.cast(coord, Scalar::I64);
            taps.push(resolve_tap(&mut insts, axis, padding, index));
        }
        let v = gather(&mut insts, &mut views, &base, &axes, &taps);
        let value = match all_inside(&mut insts, &taps) {
            Some(inside) => {
                let zero = insts.constant(x.elem, 0.0);
                insts.select(inside, v, zero)
            }
            None => v,
        };
        return Ok(vec![loop_kernel(
            ctx.kernel_name(op, 0),
            out.shape.clone(),
            Vec::new(),
            views,
            vec![map_stage(insts, 0, value)],
        )]);
    }

    let acc_ty = x.elem.compute();
    // Per axis: its taps and their weights (in the accumulation type).
    let mut axis_taps: Vec<Vec<(Tap, InstId)>> = Vec::with_capacity(k);
    for (axis, &coord) in axes.iter().zip(&coords) {
        let floor = insts.unary(UnaryOp::Floor, coord);
        let lo = insts.cast(floor, Scalar::I64);
        let t = insts.binary(BinaryOp::Sub, coord, floor);
        let (first, weights) = match mode {
            Mode::Linear => (0, linear_weights(&mut insts, t)),
            _ => (-1, cubic_weights(&mut insts, t)),
        };
        let mut taps = Vec::with_capacity(weights.len());
        for (j, w) in weights.into_iter().enumerate() {
            let index = insts.add_c(lo, first + j as i64);
            let tap = resolve_tap(&mut insts, axis, padding, index);
            taps.push((tap, insts.cast(w, acc_ty)));
        }
        axis_taps.push(taps);
    }
    let zero = insts.constant(acc_ty, 0.0);
    let mut sum: Option<InstId> = None;
    for combo in 0..combos {
        let mut rest = combo;
        let mut taps = vec![None; k];
        let mut weight: Option<InstId> = None;
        for a in (0..k).rev() {
            let (tap, w) = axis_taps[a][rest % taps_per_axis];
            rest /= taps_per_axis;
            taps[a] = Some(tap);
            weight = Some(match weight {
                Some(acc) => insts.binary(BinaryOp::Mul, w, acc),
                None => w,
            });
        }
        let taps: Vec<Tap> = taps.into_iter().flatten().collect();
        let v = gather(&mut insts, &mut views, &base, &axes, &taps);
        let v = insts.cast(v, acc_ty);
        let v = match all_inside(&mut insts, &taps) {
            Some(inside) => insts.select(inside, v, zero),
            None => v,
        };
        let term = match weight {
            Some(w) => insts.binary(BinaryOp::Mul, w, v),
            None => v,
        };
        sum = Some(match sum {
            Some(s) => insts.binary(BinaryOp::Add, s, term),
            None => term,
        });
    }
    let value = sum.ok_or_else(|| unsupported("GridSample with no spatial axis"))?;
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )])
}

/// The `f32` source coordinate of every spatial axis at the current output point: the grid's
/// coordinate denormalized, rounded (`nearest`), then clamped or reflected into the axis's
/// range as the padding mode says (`zeros` leaves it).
fn source_coordinates(
    grid: &TensorRef,
    axes: &[Axis],
    mode: Mode,
    padding: Padding,
    align: bool,
    views: &mut Vec<View>,
    insts: &mut Insts,
) -> Result<Vec<InstId>, LowerError> {
    let k = axes.len();
    let g = grid.strides();
    // Grid `(N, D1_out, ..., Dk_out, k)` over the loop axes `(N, C, D1_out, ..., Dk_out)`.
    let mut strides = vec![0i64; k + 2];
    strides[0] = g[0];
    strides[2..].copy_from_slice(&g[1..=k]);
    let grid_view = grid.view_with(strides);
    let mut coords = Vec::with_capacity(k);
    for (a, axis) in axes.iter().enumerate() {
        views.push(shifted(grid_view.clone(), (k - 1 - a) as i64));
        let n = insts.load(views, (views.len() - 1) as u32);
        let ty = insts.ty(n);
        let c = |insts: &mut Insts, v: f64| insts.constant(ty, v);
        let one = c(insts, 1.0);
        let two = c(insts, 2.0);
        let size = axis.size as f64;
        let shifted_n = insts.binary(BinaryOp::Add, n, one);
        let x = if align {
            // (n + 1) / 2 * (d - 1)
            let half = insts.binary(BinaryOp::Div, shifted_n, two);
            let last = c(insts, size - 1.0);
            insts.binary(BinaryOp::Mul, half, last)
        } else {
            // ((n + 1) * d - 1) / 2
            let d = c(insts, size);
            let scaled = insts.binary(BinaryOp::Mul, shifted_n, d);
            let less = insts.binary(BinaryOp::Sub, scaled, one);
            insts.binary(BinaryOp::Div, less, two)
        };
        let mut x = insts.cast(x, Scalar::F32);
        if mode == Mode::Nearest {
            x = insts.unary(UnaryOp::Round, x);
        }
        x = match padding {
            Padding::Zeros => x,
            Padding::Border => {
                let min = insts.constant(Scalar::F32, axis.min);
                let max = insts.constant(Scalar::F32, axis.max);
                let zero = insts.constant(Scalar::F32, 0.0);
                let last = insts.constant(Scalar::F32, size - 1.0);
                let below = insts.binary(BinaryOp::Lt, x, min);
                let above = insts.binary(BinaryOp::Gt, x, max);
                let upper = insts.select(above, last, x);
                insts.select(below, zero, upper)
            }
            Padding::Reflection => {
                let wide = insts.cast(x, Scalar::F64);
                let r = reflect(insts, wide, axis.min, axis.max);
                insts.cast(r, Scalar::F32)
            }
        };
        coords.push(x);
    }
    Ok(coords)
}

/// The reference's `_gs_reflect` of an `f64` value into `[min, max]`: reflected by the near
/// border until inside, `n = trunc(dx / range)` whole ranges first. A range of 0 (an axis of
/// size 1 with `align_corners`, where the reference divides by zero) gives `min`.
fn reflect(insts: &mut Insts, v: InstId, min: f64, max: f64) -> InstId {
    let c = |insts: &mut Insts, value: f64| insts.constant(Scalar::F64, value);
    let lo = c(insts, min);
    let hi = c(insts, max);
    let below = insts.binary(BinaryOp::Lt, v, lo);
    let above = insts.binary(BinaryOp::Gt, v, hi);
    let outside = insts.binary(BinaryOp::Or, below, above);
    let range = max - min;
    if range <= 0.0 {
        return insts.select(outside, lo, v);
    }
    let rng = c(insts, range);
    let d_below = insts.binary(BinaryOp::Sub, lo, v);
    let d_above = insts.binary(BinaryOp::Sub, v, hi);
    let dx = insts.select(below, d_below, d_above);
    // dx > 0 where it is used, so the truncation is a floor.
    let q = insts.binary(BinaryOp::Div, dx, rng);
    let n = insts.unary(UnaryOp::Floor, q);
    let n_range = insts.binary(BinaryOp::Mul, n, rng);
    let r = insts.binary(BinaryOp::Sub, dx, n_range);
    let half = c(insts, 0.5);
    let n_half = insts.binary(BinaryOp::Mul, n, half);
    let n_half = insts.unary(UnaryOp::Floor, n_half);
    let two = c(insts, 2.0);
    let twice = insts.binary(BinaryOp::Mul, n_half, two);
    let even = insts.binary(BinaryOp::Eq, twice, n);
    let from_lo = insts.binary(BinaryOp::Add, lo, r);
    let from_hi = insts.binary(BinaryOp::Sub, hi, r);
    let if_below = insts.select(even, from_lo, from_hi);
    let if_above = insts.select(even, from_hi, from_lo);
    let reflected = insts.select(below, if_below, if_above);
    insts.select(outside, reflected, v)
}

/// The index a tap at integer `index` (I64) reads, as the reference's `_pixel_at_array`:
/// `zeros` reads 0 outside the axis (the `inside` flag), `border` clamps, `reflection`
/// reflects and truncates. The index is clamped into the axis in every mode, so it is always
/// safe to read.
fn resolve_tap(insts: &mut Insts, axis: &Axis, padding: Padding, index: InstId) -> Tap {
    let (index, inside) = match padding {
        Padding::Zeros => (index, Some(insts.in_range_c(index, 0, axis.size))),
        Padding::Border => (index, None),
        Padding::Reflection => {
            let wide = insts.cast(index, Scalar::F64);
            let r = reflect(insts, wide, axis.min, axis.max);
            (insts.cast(r, Scalar::I64), None)
        }
    };
    Tap {
        index: insts.clamp_c(index, 0, axis.size - 1),
        inside,
    }
}

/// Whether every tap of a combination is inside X (`zeros` padding), else `None`.
fn all_inside(insts: &mut Insts, taps: &[Tap]) -> Option<InstId> {
    let mut all: Option<InstId> = None;
    for tap in taps {
        if let Some(inside) = tap.inside {
            all = Some(insts.and(all, inside));
        }
    }
    all
}

/// A load of X at the taps' indices, through its own view (the validator bounds a view by
/// the sum of its indirect ranges).
fn gather(
    insts: &mut Insts,
    views: &mut Vec<View>,
    base: &View,
    axes: &[Axis],
    taps: &[Tap],
) -> InstId {
    let terms = axes
        .iter()
        .zip(taps)
        .map(|(axis, tap)| IndirectIndex {
            index: tap.index,
            stride: axis.stride,
            limit: axis.size,
        })
        .collect();
    views.push(base.clone());
    insts.load_indirect(views, (views.len() - 1) as u32, terms)
}

/// The reference's `_gs_get_linear_coeffs(t)`: `1 - t, t` (in `f32`).
fn linear_weights(insts: &mut Insts, t: InstId) -> Vec<InstId> {
    let one = insts.constant(Scalar::F32, 1.0);
    vec![insts.binary(BinaryOp::Sub, one, t), t]
}

/// The reference's `_gs_get_cubic_coeffs(t)` with its operation order (in `f32`): the far
/// taps at distances `t + 1` and `2 - t`, the near ones at `t` and `1 - t`.
fn cubic_weights(insts: &mut Insts, t: InstId) -> Vec<InstId> {
    let c = |insts: &mut Insts, v: f64| insts.constant(Scalar::F32, v);
    let one = c(insts, 1.0);
    let two = c(insts, 2.0);
    let far = |insts: &mut Insts, s| cubic_convolution(insts, Scalar::F32, CUBIC_A, true, s, one);
    let near = |insts: &mut Insts, s| cubic_convolution(insts, Scalar::F32, CUBIC_A, false, s, one);
    let t1 = insts.binary(BinaryOp::Add, t, one);
    let one_t = insts.binary(BinaryOp::Sub, one, t);
    let two_t = insts.binary(BinaryOp::Sub, two, t);
    vec![
        far(insts, t1),
        near(insts, t),
        near(insts, one_t),
        far(insts, two_t),
    ]
}

/// AffineGrid: one map kernel over the grid (see the module doc).
pub fn affine_grid(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let theta = ctx.input(op, 0)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let rank = out.rank();
    let k = rank.saturating_sub(2);
    let expected = [out.shape[0], k as u64, k as u64 + 1];
    if !(k == 2 || k == 3) || out.shape[rank - 1] != k as u64 || theta.shape != expected {
        return Err(unsupported(format!(
            "AffineGrid of theta {:?} into a grid {:?}",
            theta.shape, out.shape
        )));
    }
    // The output's extents come from `size`, which is read at compile time: a declared output
    // shape alone does not make a run-time `size` agree with it.
    let Some(size) = ctx.const_ints(op, 1) else {
        return Err(unsupported(
            "AffineGrid needs `size` known at compile time (an initializer, a Constant, a value computed from static shapes, or a graph input bound with `memc compile --const`)",
        ));
    };
    let mut expected_out = vec![out.shape[0]];
    expected_out.extend(size.iter().skip(2).map(|&d| d as u64));
    expected_out.push(k as u64);
    if size.len() != k + 2 || size.iter().any(|&d| d < 0) || expected_out != out.shape {
        return Err(unsupported(format!(
            "AffineGrid `size` {size:?} does not give its grid {:?}",
            out.shape
        )));
    }
    let align = ctx.attr_int(op, "align_corners") != 0;
    let t = theta.strides();
    // theta `(N, k, k + 1)` over the loop axes `(N, D1, ..., Dk, c)`: row `c`, column `j`.
    let mut strides = vec![0i64; rank];
    strides[0] = t[0];
    strides[rank - 1] = t[1];
    let theta_view = theta.view_with(strides);
    let mut views = vec![dense(&out)];
    let mut insts = Insts::new();
    let mut row = Vec::with_capacity(k + 1);
    for j in 0..=k {
        views.push(shifted(theta_view.clone(), j as i64 * t[2]));
        let v = insts.load(&views, (views.len() - 1) as u32);
        row.push(insts.cast(v, Scalar::F64));
    }
    // The homogeneous point: x (the last spatial axis) first, then y (and z), then 1; summed
    // in that order, as the reference's matmul.
    let mut sum: Option<InstId> = None;
    for (j, &weight) in row[..k].iter().enumerate() {
        let axis = k - j;
        let p = normalized_position(&mut insts, axis, out.shape[axis], align);
        let term = insts.binary(BinaryOp::Mul, weight, p);
        sum = Some(match sum {
            Some(s) => insts.binary(BinaryOp::Add, s, term),
            None => term,
        });
    }
    let value = match sum {
        Some(s) => insts.binary(BinaryOp::Add, s, row[k]),
        None => row[k],
    };
    let value = insts.cast(value, out.elem);
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )])
}

/// The normalized position (`f64`) of the current index along loop axis `axis` of size
/// `size`: `start + i * step` as the reference's `np.arange` gives it.
fn normalized_position(insts: &mut Insts, axis: usize, size: u64, align: bool) -> InstId {
    let size = size as f64;
    let (start, step) = match (align, size > 1.0) {
        (true, true) => (-1.0, 2.0 / (size - 1.0)),
        (true, false) => (-1.0, 0.0),
        (false, _) => {
            let step = 2.0 / size;
            (-1.0 + step / 2.0, step)
        }
    };
    let i = insts.index(axis);
    let i = insts.cast(i, Scalar::F64);
    let step = insts.constant(Scalar::F64, step);
    let start = insts.constant(Scalar::F64, start);
    let offset = insts.binary(BinaryOp::Mul, i, step);
    insts.binary(BinaryOp::Add, start, offset)
}
