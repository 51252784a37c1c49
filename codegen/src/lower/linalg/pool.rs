//! MaxPool, AveragePool, LpPool, GlobalAveragePool and GlobalMaxPool.
//!
//! A pool is one loop kernel: outer axes `(n, c, out spatial...)`, inner axes the kernel
//! window. The input is a guarded view (as in Conv) whose pad is the reduction's identity:
//! the lowest value of the type for max, 0 for the sum. MaxPool's optional `Indices` output
//! comes from a second, `ArgMax` reduction: the window position of the first maximum, turned
//! into a flat input index (row-major, or column-major over the spatial axes with
//! `storage_order = 1`). AveragePool divides by the number of taps inside the input (inside the
//! padded input with `count_include_pad`), counted per axis in closed form. LpPool sums `|x|^p`
//! (pads read 0, adding nothing; `p` up to 8 as repeated products) and takes the `p`-th root.

use super::super::build::{guard, Insts, TensorRef};
use super::super::movement::common::{loop_kernel, IndexMath};
use super::super::{LowerCtx, LowerResult};
use super::conv::{window, Window};
use super::matmul::check_arith;
use crate::kernel::{BinaryOp, InstId, ReduceOp, Scalar, Stage, Store, UnaryOp, View};
use memc_ir::OpId;

pub(crate) mod grad;

/// The input over loop axes `(n, c, o..., k...)`, guarded where the window leaves it.
fn pool_view(x: &TensorRef, out_spatial: &[u64], win: &Window, pad: f64) -> View {
    let n_spatial = win.kernel.len();
    let n_axes = 2 + 2 * n_spatial;
    let xs = x.strides();
    let mut strides = vec![0i64; n_axes];
    strides[0] = xs[0];
    strides[1] = xs[1];
    let mut view = x.view_with(Vec::new());
    for i in 0..n_spatial {
        let (o_axis, k_axis) = (2 + i, 2 + n_spatial + i);
        strides[o_axis] = win.strides[i] * xs[2 + i];
        strides[k_axis] = win.dilations[i] * xs[2 + i];
        view.byte_offset -= win.begin[i] * xs[2 + i] * x.elem.size() as i64;
        let size = x.shape[2 + i] as i64;
        let last = (out_spatial[i] as i64 - 1) * win.strides[i] - win.begin[i]
            + (win.kernel[i] - 1) * win.dilations[i];
        if win.begin[i] > 0 || last >= size {
            let mut coeffs = vec![0i64; n_axes];
            coeffs[o_axis] = win.strides[i];
            coeffs[k_axis] = win.dilations[i];
            view.guards.push(guard(coeffs, -win.begin[i], size));
        }
    }
    view.strides = strides;
    view.pad = pad.to_bits();
    view
}

/// The output over loop axes `(n, c, o..., k...)`.
fn out_view(out: &TensorRef, n_spatial: usize) -> View {
    out.view_identity(n_spatial)
}

/// The lowest value of `elem`, as the pad of a max reduction.
fn lowest(elem: Scalar) -> f64 {
    match elem {
        Scalar::I8 => -128.0,
        Scalar::I16 => -32768.0,
        Scalar::I32 => i32::MIN as f64,
        Scalar::I64 => i64::MIN as f64,
        e if e.is_float() => f64::NEG_INFINITY,
        _ => 0.0,
    }
}

/// Windows of at most this many taps run as one load per tap ([`max_pool_by_taps`]).
const MAX_UNROLLED_TAPS: i64 = 27;

pub fn max_pool(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(out.elem)?;
    let n_spatial = x.rank() - 2;
    let win = window(ctx.func, op, &x.shape[2..])?;
    let with_indices = ctx.result_used(op, 1);
    let taps = win
        .kernel
        .iter()
        .try_fold(1i64, |acc, &k| acc.checked_mul(k));
    if !with_indices && taps.is_some_and(|t| (1..=MAX_UNROLLED_TAPS).contains(&t)) {
        return Ok(vec![max_pool_by_taps(
            ctx.kernel_name(op, 0),
            &x,
            &out,
            &win,
        )]);
    }
    let mut views = vec![
        out_view(&out, n_spatial),
        pool_view(&x, &out.shape[2..], &win, lowest(x.elem)),
    ];
    let load = |views: &[View]| {
        let mut insts = Insts::new();
        let v = insts.load(views, 1);
        (insts, v)
    };
    let (insts, v) = load(&views);
    let mut stages = vec![Stage::Reduce {
        insts: insts.finish(),
        value: v,
        op: ReduceOp::Max,
        init: lowest(x.elem).to_bits(),
        ty: x.elem.compute(),
    }];
    if x.elem.is_int() {
        // Integer inits are integer bits.
        if let Stage::Reduce { init, .. } = &mut stages[0] {
            *init = lowest(x.elem) as i64 as u64;
        }
    }
    let mut insts = Insts::new();
    let max = insts.acc(0, x.elem);
    let mut stores = vec![Store::new(0, max)];
    if with_indices {
        let indices = ctx.result(op, 1)?;
        views.push(out_view(&indices, n_spatial));
        let (arg_insts, v) = load(&views);
        stages.push(Stage::Reduce {
            insts: arg_insts.finish(),
            value: v,
            op: ReduceOp::ArgMax { last: false },
            init: 0,
            ty: Scalar::I64,
        });
        let j = insts.acc(1, Scalar::I64);
        let flat = flat_index(
            &mut insts,
            j,
            &x,
            &win,
            ctx.attr_int(op, "storage_order") != 0,
        );
        stores.push(Store::new(2, flat));
    }
    stages.push(Stage::Once {
        insts: insts.finish(),
        stores,
    });
    let outer = out.shape.clone();
    let inner = win.kernel.iter().map(|&k| k as u64).collect();
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        outer,
        inner,
        views,
        stages,
    )])
}

/// MaxPool without `Indices` over a small window, as one `Map` over the output whose
/// instructions load every tap (a view of the input per tap, guarded only along the axes where
/// that tap can read padding, whose pad is the lowest value) and take their maximum in the
/// window's row-major order, the reduction's order. A reduction over the window would loop
/// over a handful of taps per output; here the output's last axis is the loop, each step a
/// few loads.
fn max_pool_by_taps(
    name: String,
    x: &TensorRef,
    out: &TensorRef,
    win: &Window,
) -> crate::kernel::Kernel {
    let n_spatial = win.kernel.len();
    let xs = x.strides();
    let size = x.elem.size() as i64;
    let mut views = vec![out.view_identity(0)];
    let mut tap = vec![0i64; n_spatial];
    let mut insts = Insts::new();
    let mut max: Option<InstId> = None;
    loop {
        let mut view = x.view_with(Vec::new());
        let mut strides = vec![xs[0], xs[1]];
        for i in 0..n_spatial {
            strides.push(win.strides[i] * xs[2 + i]);
            let shift = tap[i] * win.dilations[i] - win.begin[i];
            view.byte_offset += shift * xs[2 + i] * size;
            let extent = x.shape[2 + i] as i64;
            let last = (out.shape[2 + i] as i64 - 1) * win.strides[i] + shift;
            if shift < 0 || last >= extent {
                let mut coeffs = vec![0i64; 2 + n_spatial];
                coeffs[2 + i] = win.strides[i];
                view.guards.push(guard(coeffs, shift, extent));
            }
        }
        view.strides = strides;
        view.pad = lowest(x.elem).to_bits();
        views.push(view);
        let v = insts.load(&views, (views.len() - 1) as u32);
        max = Some(match max {
            Some(m) => insts.binary(BinaryOp::Max, m, v),
            None => v,
        });
        // The next tap, row-major.
        let mut i = n_spatial;
        loop {
            if i == 0 {
                let value = max.expect("a window has at least one tap");
                let stage = Stage::Map {
                    insts: insts.finish(),
                    stores: vec![Store::new(0, value)],
                };
                return loop_kernel(name, out.shape.clone(), Vec::new(), views, vec![stage]);
            }
            i -= 1;
            tap[i] += 1;
            if tap[i] < win.kernel[i] {
                break;
            }
            tap[i] = 0;
        }
    }
}

/// The flat input index of window position `j` (row-major over the kernel) at the current
/// output point, as MaxPool's `Indices` reports it.
fn flat_index(
    insts: &mut Insts,
    j: InstId,
    x: &TensorRef,
    win: &Window,
    column_major: bool,
) -> InstId {
    let n_spatial = win.kernel.len();
    let mut rest = j;
    let mut positions = vec![0; n_spatial];
    for i in (0..n_spatial).rev() {
        let k = win.kernel[i];
        let kc = insts.i64c(k);
        let tap = insts.binary(BinaryOp::FloorMod, rest, kc);
        rest = insts.floor_div_c(rest, k);
        let o = insts.index(2 + i);
        let start = insts.mul_c(o, win.strides[i]);
        let start = insts.add_c(start, -win.begin[i]);
        let offset = insts.mul_c(tap, win.dilations[i]);
        positions[i] = insts.binary(BinaryOp::Add, start, offset);
    }
    // (n * C + c) * prod(spatial) + the spatial offset.
    let n = insts.index(0);
    let c = insts.index(1);
    let nc = insts.mul_c(n, x.shape[1] as i64);
    let channel = insts.binary(BinaryOp::Add, nc, c);
    let spatial: i64 = x.shape[2..].iter().product::<u64>() as i64;
    let mut flat = insts.mul_c(channel, spatial);
    let mut scale = 1i64;
    let order: Vec<usize> = if column_major {
        (0..n_spatial).collect()
    } else {
        (0..n_spatial).rev().collect()
    };
    for i in order {
        let term = insts.mul_c(positions[i], scale);
        flat = insts.binary(BinaryOp::Add, flat, term);
        scale *= x.shape[2 + i] as i64;
    }
    flat
}

pub fn average_pool(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(out.elem)?;
    let n_spatial = x.rank() - 2;
    let win = window(ctx.func, op, &x.shape[2..])?;
    let include_pad = ctx.attr_int(op, "count_include_pad") != 0;
    let views = vec![
        out_view(&out, n_spatial),
        pool_view(&x, &out.shape[2..], &win, 0.0),
    ];
    let mut insts = Insts::new();
    let v = insts.load(&views, 1);
    let reduce = Stage::Reduce {
        insts: insts.finish(),
        value: v,
        op: ReduceOp::Sum,
        init: 0,
        ty: x.elem.compute(),
    };
    let mut insts = Insts::new();
    let sum = insts.acc(0, x.elem);
    let mut count: Option<InstId> = None;
    for i in 0..n_spatial {
        let size = x.shape[2 + i] as i64;
        let (lo, hi) = if include_pad {
            (-win.begin[i], size + win.end[i])
        } else {
            (0, size)
        };
        let c = taps_inside(&mut insts, 2 + i, &win, i, lo, hi);
        count = Some(match count {
            Some(p) => insts.binary(BinaryOp::Mul, p, c),
            None => c,
        });
    }
    let value = match count {
        Some(c) => {
            let c = insts.cast(c, x.elem);
            insts.binary(BinaryOp::Div, sum, c)
        }
        None => sum,
    };
    let once = Stage::Once {
        insts: insts.finish(),
        stores: vec![Store::new(0, value)],
    };
    let inner = win.kernel.iter().map(|&k| k as u64).collect();
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        inner,
        views,
        vec![reduce, once],
    )])
}

/// The largest `p` LpPool raises to by repeated products (a `Pow` beyond).
const LP_POOL_MAX_PRODUCTS: i64 = 8;

pub fn lp_pool(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(out.elem)?;
    let n_spatial = x.rank() - 2;
    let win = window(ctx.func, op, &x.shape[2..])?;
    let p = ctx.attr_int(op, "p");
    let views = vec![
        out_view(&out, n_spatial),
        pool_view(&x, &out.shape[2..], &win, 0.0),
    ];
    let mut insts = Insts::new();
    let v = insts.load(&views, 1);
    let magnitude = insts.unary(UnaryOp::Abs, v);
    let power = if (1..=LP_POOL_MAX_PRODUCTS).contains(&p) {
        (1..p).fold(magnitude, |acc, _| {
            insts.binary(BinaryOp::Mul, acc, magnitude)
        })
    } else {
        let pc = insts.constant(x.elem, p as f64);
        insts.binary(BinaryOp::Pow, magnitude, pc)
    };
    let reduce = Stage::Reduce {
        insts: insts.finish(),
        value: power,
        op: ReduceOp::Sum,
        init: 0,
        ty: x.elem.compute(),
    };
    let mut insts = Insts::new();
    let sum = insts.acc(0, x.elem);
    let value = match p {
        1 => sum,
        2 => insts.unary(UnaryOp::Sqrt, sum),
        _ => {
            let inv = insts.constant(x.elem, 1.0 / p as f64);
            insts.binary(BinaryOp::Pow, sum, inv)
        }
    };
    let inner = win.kernel.iter().map(|&k| k as u64).collect();
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        out.shape.clone(),
        inner,
        views,
        vec![reduce, once_stage_of(insts, value)],
    )])
}

/// A `Once` stage storing `value` into the output (view 0).
fn once_stage_of(insts: Insts, value: InstId) -> Stage {
    Stage::Once {
        insts: insts.finish(),
        stores: vec![Store::new(0, value)],
    }
}

/// How many taps `k < kernel` of spatial axis `i` at the output index of loop axis `o_axis`
/// land in `[lo, hi)`: `base + k * d` with `base = o * stride - pad`.
fn taps_inside(
    insts: &mut Insts,
    o_axis: usize,
    win: &Window,
    i: usize,
    lo: i64,
    hi: i64,
) -> InstId {
    let o = insts.index(o_axis);
    taps_inside_at(insts, o, win, i, lo, hi)
}

/// [`taps_inside`] at the output index `o` (an I64 instruction).
fn taps_inside_at(
    insts: &mut Insts,
    o: InstId,
    win: &Window,
    i: usize,
    lo: i64,
    hi: i64,
) -> InstId {
    let d = win.dilations[i];
    let base = insts.mul_c(o, win.strides[i]);
    let base = insts.add_c(base, -win.begin[i]);
    let zero = insts.i64c(0);
    // k_min = ceil((lo - base) / d) = -floor((base - lo) / d), at least 0.
    let t = insts.add_c(base, -lo);
    let q = insts.floor_div_c(t, d);
    let k_min = insts.binary(BinaryOp::Sub, zero, q);
    let k_min = insts.binary(BinaryOp::Max, k_min, zero);
    // k_max = floor((hi - 1 - base) / d), at most kernel - 1.
    let neg = insts.binary(BinaryOp::Sub, zero, base);
    let t = insts.add_c(neg, hi - 1);
    let k_max = insts.floor_div_c(t, d);
    let top = insts.i64c(win.kernel[i] - 1);
    let k_max = insts.binary(BinaryOp::Min, k_max, top);
    let n = insts.binary(BinaryOp::Sub, k_max, k_min);
    let n = insts.add_c(n, 1);
    insts.binary(BinaryOp::Max, n, zero)
}

pub fn global_pool(ctx: &LowerCtx, op: OpId, max: bool) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(out.elem)?;
    let spatial: Vec<u64> = x.shape[2..].to_vec();
    let count: u64 = spatial.iter().product();
    let xs = x.strides();
    let os = out.strides();
    let mut out_strides = vec![os[0], os[1]];
    out_strides.extend(std::iter::repeat_n(0, spatial.len()));
    let views = vec![out.view_with(out_strides), x.view_with(xs)];
    let mut insts = Insts::new();
    let v = insts.load(&views, 1);
    let (op_kind, init) = if max {
        (ReduceOp::Max, f64::NEG_INFINITY.to_bits())
    } else {
        (ReduceOp::Sum, 0)
    };
    let reduce = Stage::Reduce {
        insts: insts.finish(),
        value: v,
        op: op_kind,
        init,
        ty: x.elem.compute(),
    };
    let mut insts = Insts::new();
    let acc = insts.acc(0, x.elem);
    let value = if max {
        acc
    } else {
        let c = insts.constant(x.elem, count as f64);
        insts.binary(BinaryOp::Div, acc, c)
    };
    let once = Stage::Once {
        insts: insts.finish(),
        stores: vec![Store::new(0, value)],
    };
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        x.shape[..2].to_vec(),
        spatial,
        views,
        vec![reduce, once],
    )])
}
