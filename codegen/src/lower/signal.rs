//! Signal processing: the window functions (HannWindow, HammingWindow, BlackmanWindow),
//! MelWeightMatrix, DFT and STFT, following `onnx/reference/ops/op_hann_window.py` (and its
//! siblings), `op_mel_weight_matrix.py`, `op_dft.py` and `op_stft.py`.
//!
//! A window function is one `Map` kernel over its `size` points, computed in `f64` and
//! converted once to `output_datatype`. `size` must be a compile-time constant.
//!
//! DFT and STFT are direct `O(n^2)` transforms, one loop kernel each: the outer space is the
//! result's complex points, the inner space the input points summed. Two `Reduce` stages sum
//! the real and imaginary parts of `x[n] * exp(-+2 pi i k n / L)` in `f64`, the twiddle's angle
//! taken from `(k * n) mod L` (an exact integer, so long transforms lose no accuracy to large
//! angles); a `Once` stage scales an inverse transform by `1 / L` and stores both parts. Points
//! past the input's end are zeros (not summed); input points past `L` are dropped, as numpy's
//! `fft` with `n` does. An inverse one-sided transform (numpy's `irfft`) sums the one-sided
//! half of a Hermitian spectrum: each bin other than 0 and `L / 2` counts twice (the real part
//! of the bin and its conjugate), and the result is real (last dim 1). STFT's frames are
//! strided views of the signal (frame `f` starts at `f * frame_step`), multiplied by the window
//! in the signal's type before the sum, as the reference does. `dft_length`, `axis`,
//! `frame_step` and `frame_length` must be compile-time constants.
//!
//! MelWeightMatrix: its operands must be compile-time constants; the band edges (spectrum bin
//! indices) are computed here as the reference computes them (the mel bounds in the edges'
//! `f32`, the bands in `f64`, numpy's floor division), and one `Map` kernel over `(bins,
//! mel bands)` looks the column's three edges up (select chains on the column index) and
//! writes the reference's triangle: `(h - j) / (h - c)` on `[c, h)`, else `(j - l) / (c - l)`
//! on `[l, c]` (1 at `c` when `l == c`), else 0.

use super::build::{Insts, TensorRef};
use super::movement::common::{loop_kernel, map_stage, shifted};
use super::{unsupported, LowerCtx, LowerError, LowerResult};
use crate::kernel::{BinaryOp, InstId, ReduceOp, Scalar, Stage, Store, UnaryOp, View};
use memc_ir::{OpId, Opcode};
use std::f64::consts::PI;

/// HannWindow, HammingWindow and BlackmanWindow: `size` points of the window.
pub fn window_function(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    let opcode = ctx.func.op(op).opcode;
    let Some(size) = ctx.const_ints(op, 0) else {
        return Err(unsupported(format!(
            "{} needs `size` known at compile time (an initializer, a Constant, a value computed from static shapes, or a graph input bound with `memc compile --const`)",
            opcode.name()
        )));
    };
    if size.len() != 1 || size[0] < 0 || out.shape != [size[0] as u64] {
        return Err(unsupported(format!(
            "{} `size` {size:?} does not give its result {:?}",
            opcode.name(),
            out.shape
        )));
    }
    let periodic = ctx.attr_int(op, "periodic") != 0;
    let n_points = size[0] as f64;
    let denominator = if periodic { n_points } else { n_points - 1.0 };
    let mut insts = Insts::new();
    let n = insts.index(0);
    let n = insts.cast(n, Scalar::F64);
    let denominator = insts.constant(Scalar::F64, denominator);
    // `cos(multiple * pi * n / denominator)`, in the reference's order of operations.
    let cos_of = |insts: &mut Insts, multiple: f64, unary: UnaryOp| {
        let scale = insts.constant(Scalar::F64, multiple * PI);
        let angle = insts.binary(BinaryOp::Mul, n, scale);
        let angle = insts.binary(BinaryOp::Div, angle, denominator);
        insts.unary(unary, angle)
    };
    let value = match opcode {
        Opcode::HannWindow => {
            let s = cos_of(&mut insts, 1.0, UnaryOp::Sin);
            insts.binary(BinaryOp::Mul, s, s)
        }
        Opcode::HammingWindow => {
            let alpha = 25.0 / 46.0;
            let c = cos_of(&mut insts, 2.0, UnaryOp::Cos);
            let beta = insts.constant(Scalar::F64, 1.0 - alpha);
            let alpha = insts.constant(Scalar::F64, alpha);
            let term = insts.binary(BinaryOp::Mul, c, beta);
            insts.binary(BinaryOp::Sub, alpha, term)
        }
        Opcode::BlackmanWindow => {
            let c2 = cos_of(&mut insts, 2.0, UnaryOp::Cos);
            let c4 = cos_of(&mut insts, 4.0, UnaryOp::Cos);
            let half = insts.constant(Scalar::F64, -0.5);
            let beta = insts.constant(Scalar::F64, 0.08);
            let alpha = insts.constant(Scalar::F64, 0.42);
            let y = insts.binary(BinaryOp::Mul, c2, half);
            let term = insts.binary(BinaryOp::Mul, c4, beta);
            let y = insts.binary(BinaryOp::Add, y, term);
            insts.binary(BinaryOp::Add, y, alpha)
        }
        other => {
            return Err(LowerError::Internal(format!(
                "window_function lowers {}",
                other.name()
            )))
        }
    };
    let value = insts.cast(value, out.elem);
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        vec![out.view_identity(0)],
        vec![map_stage(insts, 0, value)],
    )])
}

/// What one transform kernel computes.
struct Transform {
    /// The transform length `L`.
    len: u64,
    inverse: bool,
    /// An inverse one-sided transform: the input is half a Hermitian spectrum and the result
    /// real.
    hermitian: bool,
    /// The outer loop axis that indexes the result's points along the transform.
    point_axis: usize,
}

/// The input of a transform kernel: views over the loop axes (outer, then the one inner
/// axis of summed points).
struct Input {
    real: View,
    /// The imaginary parts, for a complex input.
    imag: Option<View>,
    /// Weights multiplied into every point (STFT's window).
    window: Option<View>,
}

/// The kernel: outer space `outer` (the result's shape without its last dim), `terms` points
/// summed; `out` is the result tensor.
fn transform_kernel(
    name: String,
    outer: Vec<u64>,
    terms: u64,
    input: Input,
    out: &TensorRef,
    t: &Transform,
) -> LowerResult {
    if terms == 0 || t.len == 0 {
        return Err(unsupported(format!(
            "a transform of length {} over {terms} input points",
            t.len
        )));
    }
    let inner_axis = outer.len();
    let mut views = vec![input.real];
    let imag = input.imag.map(|v| {
        views.push(v);
        (views.len() - 1) as u32
    });
    let window = input.window.map(|v| {
        views.push(v);
        (views.len() - 1) as u32
    });
    // The result's parts over the outer axes (the inner stride is unused by `Once`).
    let mut out_strides = out.strides();
    let complex_out = out.shape.last() == Some(&2);
    out_strides.pop();
    out_strides.push(0);
    let out_real = views.len() as u32;
    views.push(out.view_with(out_strides.clone()));
    let out_imag = complex_out.then(|| {
        views.push(shifted(out.view_with(out_strides), 1));
        (views.len() - 1) as u32
    });
    let mut stages = Vec::new();
    for part in [Part::Real, Part::Imag] {
        if part == Part::Imag && !complex_out {
            continue;
        }
        let mut insts = Insts::new();
        let value = term(&mut insts, &views, imag, window, t, inner_axis, part);
        stages.push(Stage::Reduce {
            insts: insts.finish(),
            value,
            op: ReduceOp::Sum,
            init: 0f64.to_bits(),
            ty: Scalar::F64,
        });
    }
    let mut insts = Insts::new();
    let mut stores = Vec::new();
    for (stage, view) in [(0usize, Some(out_real)), (1, out_imag)] {
        let Some(view) = view else { continue };
        let mut sum = insts.acc(stage, Scalar::F64);
        if t.inverse {
            let scale = insts.constant(Scalar::F64, 1.0 / t.len as f64);
            sum = insts.binary(BinaryOp::Mul, sum, scale);
        }
        let value = insts.cast(sum, out.elem);
        stores.push(Store::new(view, value));
    }
    stages.push(Stage::Once {
        insts: insts.finish(),
        stores,
    });
    Ok(vec![loop_kernel(name, outer, vec![terms], views, stages)])
}

#[derive(Copy, Clone, PartialEq)]
enum Part {
    Real,
    Imag,
}

/// The `f64` summand of one part at the current point: `x[n] * exp(-+i angle)`, the angle
/// `2 pi ((k * n) mod L) / L`.
fn term(
    insts: &mut Insts,
    views: &[View],
    imag: Option<u32>,
    window: Option<u32>,
    t: &Transform,
    inner_axis: usize,
    part: Part,
) -> InstId {
    let k = insts.index(t.point_axis);
    let n = insts.index(inner_axis);
    let kn = insts.binary(BinaryOp::Mul, k, n);
    let len = insts.constant_int(Scalar::I64, t.len as i64);
    let phase = insts.binary(BinaryOp::Rem, kn, len);
    let phase = insts.cast(phase, Scalar::F64);
    let step = insts.constant(Scalar::F64, 2.0 * PI / t.len as f64);
    let angle = insts.binary(BinaryOp::Mul, phase, step);
    let cos = insts.unary(UnaryOp::Cos, angle);
    let sin = insts.unary(UnaryOp::Sin, angle);
    let window = window.map(|w| insts.load(views, w));
    let load = |insts: &mut Insts, view: u32| {
        let x = insts.load(views, view);
        let x = match window {
            Some(w) => insts.binary(BinaryOp::Mul, x, w),
            None => x,
        };
        insts.cast(x, Scalar::F64)
    };
    let xr = load(insts, 0);
    let xi = imag.map(|v| load(insts, v));
    // Forward: (xr + i xi)(cos - i sin); inverse: (xr + i xi)(cos + i sin).
    let sign = if t.inverse { -1.0 } else { 1.0 };
    let value = match part {
        Part::Real => {
            // xr cos + sign * xi sin
            let a = insts.binary(BinaryOp::Mul, xr, cos);
            match xi {
                Some(xi) => {
                    let b = insts.binary(BinaryOp::Mul, xi, sin);
                    let op = if sign > 0.0 {
                        BinaryOp::Add
                    } else {
                        BinaryOp::Sub
                    };
                    insts.binary(op, a, b)
                }
                None => a,
            }
        }
        Part::Imag => {
            // xi cos - sign * xr sin
            let b = insts.binary(BinaryOp::Mul, xr, sin);
            match xi {
                Some(xi) => {
                    let a = insts.binary(BinaryOp::Mul, xi, cos);
                    let op = if sign > 0.0 {
                        BinaryOp::Sub
                    } else {
                        BinaryOp::Add
                    };
                    insts.binary(op, a, b)
                }
                None if sign > 0.0 => insts.unary(UnaryOp::Neg, b),
                None => b,
            }
        }
    };
    if !t.hermitian {
        return value;
    }
    // Bins 0 and L / 2 count once, every other bin twice (itself and its conjugate).
    let zero = insts.constant_int(Scalar::I64, 0);
    let two = insts.constant_int(Scalar::I64, 2);
    let is_dc = insts.binary(BinaryOp::Eq, n, zero);
    let doubled = insts.binary(BinaryOp::Mul, n, two);
    let is_nyquist = insts.binary(BinaryOp::Eq, doubled, len);
    let once = insts.binary(BinaryOp::Or, is_dc, is_nyquist);
    let one = insts.constant(Scalar::F64, 1.0);
    let twice = insts.constant(Scalar::F64, 2.0);
    let weight = insts.select(once, one, twice);
    insts.binary(BinaryOp::Mul, value, weight)
}

/// The message for an operand that must be a compile-time constant.
fn needs_constant(op_name: &str, operand: &str) -> LowerError {
    unsupported(format!(
        "{op_name} needs `{operand}` known at compile time (an initializer, a Constant, a value computed from static shapes, or a graph input bound with `memc compile --const`)"
    ))
}

/// A scalar operand that must be a compile-time constant when given.
fn const_scalar(
    ctx: &LowerCtx,
    op: OpId,
    index: usize,
    op_name: &str,
    operand: &str,
) -> Result<Option<i64>, LowerError> {
    if ctx.operand(op, index)?.is_none() {
        return Ok(None);
    }
    match ctx.const_ints(op, index).as_deref() {
        Some(&[v]) => Ok(Some(v)),
        _ => Err(needs_constant(op_name, operand)),
    }
}

/// DFT along one axis of a real (last dim 1) or complex (last dim 2) input.
pub fn dft(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    let rank = x.rank();
    let inverse = ctx.attr_int(op, "inverse") != 0;
    let onesided = ctx.attr_int(op, "onesided") != 0;
    let axis = const_scalar(ctx, op, 2, "DFT", "axis")?.unwrap_or(-2);
    let axis = super::movement::common::norm_axis(axis, rank)?;
    let components = x.shape.last().copied().unwrap_or(0);
    if rank < 2 || axis == rank - 1 || !(components == 1 || components == 2) {
        return Err(unsupported(format!(
            "DFT of an input {:?} along axis {axis}",
            x.shape
        )));
    }
    let n = x.shape[axis];
    let hermitian = inverse && onesided;
    let len = match const_scalar(ctx, op, 1, "DFT", "dft_length")? {
        Some(l) if l < 1 => {
            return Err(unsupported(format!(
                "DFT `dft_length` must be positive, got {l}"
            )))
        }
        Some(l) => l as u64,
        None if hermitian => n.saturating_sub(1).saturating_mul(2),
        None => n,
    };
    let points = if onesided && !inverse {
        len / 2 + 1
    } else {
        len
    };
    let mut expected = x.shape.clone();
    expected[axis] = points;
    expected[rank - 1] = if hermitian { 1 } else { 2 };
    if out.shape != expected {
        return Err(unsupported(format!(
            "DFT of an input {:?} gives {expected:?}, but its result is {:?}",
            x.shape, out.shape
        )));
    }
    // Points summed: the input's, at most L (numpy drops the rest), at most L / 2 + 1 of a
    // one-sided spectrum.
    let terms = n.min(if hermitian { len / 2 + 1 } else { len });
    let mut strides = x.strides();
    let axis_stride = strides[axis];
    strides[axis] = 0;
    strides.pop();
    strides.push(axis_stride);
    let real = x.view_with(strides);
    let imag = (components == 2).then(|| shifted(real.clone(), 1));
    let outer = out.shape[..rank - 1].to_vec();
    transform_kernel(
        ctx.kernel_name(op, 0),
        outer,
        terms,
        Input {
            real,
            imag,
            window: None,
        },
        &out,
        &Transform {
            len,
            inverse,
            hermitian,
            point_axis: axis,
        },
    )
}

/// STFT of a `(batch, length, 1 or 2)` signal into `(batch, frames, bins, 2)`.
pub fn stft(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let signal = ctx.input(op, 0)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    let components = signal.shape.get(2).copied().unwrap_or(0);
    if signal.rank() != 3 || !(components == 1 || components == 2) {
        return Err(unsupported(format!("STFT of a signal {:?}", signal.shape)));
    }
    let Some(step) = const_scalar(ctx, op, 1, "STFT", "frame_step")? else {
        return Err(LowerError::Internal(
            "STFT without its required `frame_step`".into(),
        ));
    };
    let window = ctx.operand(op, 2)?;
    let length = match (const_scalar(ctx, op, 3, "STFT", "frame_length")?, &window) {
        (Some(l), _) => l,
        (None, Some(w)) => w.shape.first().copied().unwrap_or(0) as i64,
        (None, None) => signal.shape[1] as i64,
    };
    let n = signal.shape[1] as i64;
    if step < 1 || length < 1 || length > n {
        return Err(unsupported(format!(
            "STFT with `frame_step` {step} and `frame_length` {length} over {n} points"
        )));
    }
    if let Some(w) = &window {
        if w.shape != [length as u64] {
            return Err(unsupported(format!(
                "STFT `window` {:?} does not have `frame_length` {length} points",
                w.shape
            )));
        }
    }
    let (len, frames) = (length as u64, (1 + (n - length) / step) as u64);
    let onesided = ctx.attr_int(op, "onesided") != 0;
    let bins = if onesided { len / 2 + 1 } else { len };
    let expected = [signal.shape[0], frames, bins, 2];
    if out.shape != expected {
        return Err(unsupported(format!(
            "STFT of a signal {:?} gives {expected:?}, but its result is {:?}",
            signal.shape, out.shape
        )));
    }
    // Loop axes (batch, frame, bin, point).
    let s = signal.strides();
    let real = signal.view_with(vec![s[0], step.saturating_mul(s[1]), 0, s[1]]);
    let imag = (components == 2).then(|| shifted(real.clone(), 1));
    let window = window.map(|w| w.view_with(vec![0, 0, 0, 1]));
    transform_kernel(
        ctx.kernel_name(op, 0),
        out.shape[..3].to_vec(),
        len,
        Input { real, imag, window },
        &out,
        &Transform {
            len,
            inverse: false,
            hermitian: false,
            point_axis: 2,
        },
    )
}

/// Most mel bands a MelWeightMatrix kernel looks its edges up among (three select chains of
/// two instructions per band stay within [`crate::kernel::MAX_INSTS`]).
const MAX_MEL_BANDS: usize = 640;

/// numpy's `floor_divide` of two `f64`.
fn floor_divide(a: f64, b: f64) -> f64 {
    let rem = a % b;
    let mut div = (a - rem) / b;
    if rem != 0.0 && ((b < 0.0) != (rem < 0.0)) {
        div -= 1.0;
    }
    let floor = div.floor();
    if div - floor > 0.5 {
        floor + 1.0
    } else {
        floor
    }
}

/// The `num_mel_bins + 2` band edges of MelWeightMatrix, as spectrum bin indices, following
/// the reference's arithmetic and element types.
fn mel_edges(mel_bands: i64, dft_length: i64, sample_rate: i64, low: f32, high: f32) -> Vec<i64> {
    let to_mel = |hz: f32| 2595f32 * (1f32 + hz / 700f32).log10();
    let (low_mel, high_mel) = (to_mel(low), to_mel(high));
    let count = mel_bands + 2;
    let step = (high_mel - low_mel) / count as f32;
    (0..count)
        .map(|i| {
            let mel = i as f64 * f64::from(step) + f64::from(low_mel);
            let hz = 700.0 * (10f64.powf(mel / 2595.0) - 1.0);
            floor_divide((dft_length + 1) as f64 * hz, sample_rate as f64) as i64
        })
        .collect()
}

/// `table[i]` for the current index `i` along loop axis `axis`, as an `f64`.
fn lookup(insts: &mut Insts, axis: usize, table: &[i64]) -> InstId {
    let i = insts.index(axis);
    let mut value = insts.constant(Scalar::F64, *table.last().unwrap_or(&0) as f64);
    for (k, &entry) in table.iter().enumerate().rev().skip(1) {
        let k = insts.constant_int(Scalar::I64, k as i64);
        let here = insts.binary(BinaryOp::Eq, i, k);
        let entry = insts.constant(Scalar::F64, entry as f64);
        value = insts.select(here, entry, value);
    }
    value
}

/// MelWeightMatrix: `(dft_length / 2 + 1, num_mel_bins)` triangle weights.
pub fn mel_weight_matrix(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    let names = ["num_mel_bins", "dft_length", "sample_rate"];
    let mut ints = [0i64; 3];
    for (index, name) in names.iter().enumerate() {
        ints[index] = const_scalar(ctx, op, index, "MelWeightMatrix", name)?
            .ok_or_else(|| LowerError::Internal(format!("MelWeightMatrix without `{name}`")))?;
    }
    let mut edges_hz = [0f32; 2];
    for (slot, (index, name)) in [(3, "lower_edge_hertz"), (4, "upper_edge_hertz")]
        .into_iter()
        .enumerate()
    {
        edges_hz[slot] = match ctx.const_floats(op, index).as_deref() {
            Some(&[v]) => v as f32,
            _ => return Err(needs_constant("MelWeightMatrix", name)),
        };
    }
    let [mel_bands, dft_length, sample_rate] = ints;
    let bins = (dft_length / 2 + 1) as u64;
    if mel_bands < 1 || dft_length < 1 || sample_rate < 1 || out.shape != [bins, mel_bands as u64] {
        return Err(unsupported(format!(
            "MelWeightMatrix of {mel_bands} bands, dft_length {dft_length} and sample_rate {sample_rate} into {:?}",
            out.shape
        )));
    }
    if mel_bands as usize > MAX_MEL_BANDS {
        return Err(unsupported(format!(
            "MelWeightMatrix of {mel_bands} bands (at most {MAX_MEL_BANDS})"
        )));
    }
    let edges = mel_edges(mel_bands, dft_length, sample_rate, edges_hz[0], edges_hz[1]);
    // The reference writes rows up to each band's center and before its upper edge; an edge
    // outside the spectrum is an index error (or a wrap) there.
    let bins_i = bins as i64;
    if edges.iter().any(|&e| e < 0) || edges.windows(3).any(|w| w[1] >= bins_i || w[2] > bins_i) {
        return Err(unsupported(format!(
            "MelWeightMatrix band edges {edges:?} fall outside the {bins} spectrum bins"
        )));
    }
    let n = mel_bands as usize;
    let mut insts = Insts::new();
    let lower = lookup(&mut insts, 1, &edges[..n]);
    let center = lookup(&mut insts, 1, &edges[1..n + 1]);
    let upper = lookup(&mut insts, 1, &edges[2..]);
    let j = insts.index(0);
    let j = insts.cast(j, Scalar::F64);
    let zero = insts.constant(Scalar::F64, 0.0);
    let one = insts.constant(Scalar::F64, 1.0);
    // Falling edge [c, h), written last by the reference.
    let has_fall = insts.binary(BinaryOp::Gt, upper, center);
    let from_center = insts.binary(BinaryOp::Ge, j, center);
    let below_upper = insts.binary(BinaryOp::Lt, j, upper);
    let on_fall = insts.binary(BinaryOp::And, has_fall, from_center);
    let on_fall = insts.binary(BinaryOp::And, on_fall, below_upper);
    let fall_num = insts.binary(BinaryOp::Sub, upper, j);
    let fall_den = insts.binary(BinaryOp::Sub, upper, center);
    let fall = insts.binary(BinaryOp::Div, fall_num, fall_den);
    // Rising edge [l, c], or 1 at c when l == c.
    let flat = insts.binary(BinaryOp::Eq, lower, center);
    let at_center = insts.binary(BinaryOp::Eq, j, center);
    let flat_value = insts.select(at_center, one, zero);
    let from_lower = insts.binary(BinaryOp::Ge, j, lower);
    let to_center = insts.binary(BinaryOp::Le, j, center);
    let on_rise = insts.binary(BinaryOp::And, from_lower, to_center);
    let rise_num = insts.binary(BinaryOp::Sub, j, lower);
    let rise_den = insts.binary(BinaryOp::Sub, center, lower);
    let rise = insts.binary(BinaryOp::Div, rise_num, rise_den);
    let value = insts.select(on_rise, rise, zero);
    let value = insts.select(flat, flat_value, value);
    let value = insts.select(on_fall, fall, value);
    let value = insts.cast(value, out.elem);
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        Vec::new(),
        vec![out.view_identity(0)],
        vec![map_stage(insts, 0, value)],
    )])
}
