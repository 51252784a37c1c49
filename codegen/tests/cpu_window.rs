//! The CPU backend's native window maxima and minima (`cpu/window.rs`): loop kernels whose one
//! `Map` stage folds loads of guarded, strided views with `max` or `min` (a max pool's taps).
//! Hand-built kernels (2-d pools at strides 1, 2 and 3, a broadcast tap, guards along the row
//! with either sign, guards that hold on whole rows, a diagonal guard, more taps than one
//! group, `min`) run through `CpuProgram` on one and two threads and are compared, bit for bit
//! (NaN with NaN), with the kernel's meaning worked out here point by point: IEEE 754 maximum
//! (NaN if any tap is NaN, `+0` above `-0`). Kernels the native code must leave alone (a
//! stored view overlapping a loaded one, plain unguarded rows) are checked too.

mod common;

use common::kernels::*;
use memc_codegen::kernel::{f64_bits, BinaryOp, Guard, Kernel, Scalar, View};

/// IEEE 754-2019 maximum (`max`) or minimum: NaN if either is NaN, `-0 < +0`.
fn fold(max: bool, a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        return f32::NAN;
    }
    if a == b {
        // Equal values differ only in the sign of a zero: max takes +0, min -0.
        let bits = if max {
            a.to_bits() & b.to_bits()
        } else {
            a.to_bits() | b.to_bits()
        };
        return f32::from_bits(bits);
    }
    if (a > b) == max {
        a
    } else {
        b
    }
}

/// Deterministic inputs with NaN, infinities and both zeros sprinkled in.
fn inputs(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| match i % 41 {
            3 => f32::NAN,
            9 => f32::INFINITY,
            17 => f32::NEG_INFINITY,
            23 => -0.0,
            24 => 0.0,
            _ => ((i * 37 + 11) % 101) as f32 * 0.1 - 5.0,
        })
        .collect()
}

/// A window kernel over `outer`: the output dense from byte `out_at`, the fold of `taps`
/// (element offset from the input at byte 0, strides, guards, pad) with `max` or `min`.
fn window_kernel(
    outer: &[u64],
    taps: &[(i64, Vec<i64>, Vec<Guard>, f64)],
    out_at: i64,
    max: bool,
) -> Kernel {
    let mut views: Vec<View> = taps
        .iter()
        .map(|(offset, strides, guards, pad)| {
            let mut v = arena(Scalar::F32, offset * 4, strides);
            v.guards = guards.clone();
            v.pad = f64_bits(*pad);
            v
        })
        .collect();
    let mut dense = vec![0i64; outer.len()];
    let mut stride = 1;
    for (d, &extent) in dense.iter_mut().zip(outer).rev() {
        *d = stride;
        stride *= extent as i64;
    }
    views.push(arena(Scalar::F32, out_at, &dense));
    let mut b = Insts::default();
    let op = if max { BinaryOp::Max } else { BinaryOp::Min };
    let mut acc = b.load(Scalar::F32, 0);
    for tap in 1..taps.len() {
        let v = b.load(Scalar::F32, tap as u32);
        acc = b.bin(op, acc, v);
    }
    loop_kernel(
        "window",
        outer,
        &[],
        views,
        vec![map(b, &[(taps.len() as u32, acc)])],
    )
}

/// The kernel's meaning at every point, in row-major order.
fn reference(
    outer: &[u64],
    taps: &[(i64, Vec<i64>, Vec<Guard>, f64)],
    x: &[f32],
    max: bool,
) -> Vec<f32> {
    let total: u64 = outer.iter().product();
    (0..total)
        .map(|flat| {
            let mut point = vec![0i64; outer.len()];
            let mut rest = flat;
            for (p, &extent) in point.iter_mut().zip(outer).rev() {
                *p = (rest % extent) as i64;
                rest /= extent;
            }
            let dot = |c: &[i64]| -> i64 { c.iter().zip(&point).map(|(a, b)| a * b).sum() };
            let mut acc = if max {
                f32::NEG_INFINITY
            } else {
                f32::INFINITY
            };
            for (offset, strides, guards, pad) in taps {
                let inside = guards
                    .iter()
                    .all(|g| (0..g.limit).contains(&(dot(&g.coeffs) + g.offset)));
                let v = if inside {
                    x[(offset + dot(strides)) as usize]
                } else {
                    *pad as f32
                };
                acc = fold(max, acc, v);
            }
            acc
        })
        .collect()
}

/// Runs the window kernel on 1 and 2 threads, checks both against [`reference`] bit for bit
/// (any NaN for a NaN), and returns whether the CPU ran it natively.
fn check(
    outer: &[u64],
    taps: &[(i64, Vec<i64>, Vec<Guard>, f64)],
    inputs_len: usize,
    max: bool,
) -> bool {
    check_forms(outer, taps, inputs_len, max).0
}

/// [`check`], and whether the kernel's taps were taken as a grid (run separably on AVX2).
fn check_forms(
    outer: &[u64],
    taps: &[(i64, Vec<i64>, Vec<Guard>, f64)],
    inputs_len: usize,
    max: bool,
) -> (bool, bool) {
    let x = inputs(inputs_len);
    let total: u64 = outer.iter().product();
    let out_at = (inputs_len * 4) as i64;
    let kernel = window_kernel(outer, taps, out_at, max);
    let want = reference(outer, taps, &x, max);
    let (mut native, mut grid) = (false, false);
    for threads in [1, 2] {
        let mut ar = Buf::new(inputs_len * 4 + total as usize * 4);
        ar.put(0, &x);
        let program = run_on(
            std::slice::from_ref(&kernel),
            &mut ar,
            &Buf::new(0),
            threads,
        );
        native = program.is_window(0);
        grid = program.is_grid_window(0);
        let got = ar.get::<f32>(out_at as usize, total as usize);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "outer {outer:?} threads {threads} max {max}: point {i}: {g} want {w}"
            );
        }
    }
    (native, grid)
}

/// Whether the CPU runs window kernels natively: AVX-512 (F, DQ) with BMI2, or AVX2 with
/// FMA.
fn runs_natively() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        (std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("bmi2"))
            || (std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `0 <= coeffs . point + offset < limit`.
fn guard(coeffs: &[i64], offset: i64, limit: i64) -> Guard {
    Guard {
        coeffs: coeffs.to_vec(),
        offset,
        limit,
    }
}

/// A 2-d max pool's taps over `[channels, h, w]`, as the lowering writes them: the output
/// `[channels, oh, ow]`, each tap the input shifted by the tap at stride `s`, guarded along
/// both spatial axes where padding can reach.
fn pool2d(
    channels: u64,
    (h, w): (i64, i64),
    k: i64,
    s: i64,
    pad: i64,
) -> (Vec<u64>, Vec<(i64, Vec<i64>, Vec<Guard>, f64)>, usize) {
    let (oh, ow) = ((h + 2 * pad - k) / s + 1, (w + 2 * pad - k) / s + 1);
    let mut taps = vec![];
    for ty in 0..k {
        for tx in 0..k {
            let (dy, dx) = (ty - pad, tx - pad);
            taps.push((
                dy * w + dx,
                vec![h * w, s * w, s],
                vec![guard(&[0, s, 0], dy, h), guard(&[0, 0, s], dx, w)],
                f64::NEG_INFINITY,
            ));
        }
    }
    (
        vec![channels, oh as u64, ow as u64],
        taps,
        (channels as i64 * h * w) as usize,
    )
}

#[test]
fn max_pools_at_strides_one_two_and_three() {
    for (size, k, s, pad) in [
        ((32, 32), 3, 2, 1),
        ((11, 37), 3, 2, 1),
        ((9, 40), 3, 1, 1),
        ((17, 53), 3, 3, 1),
        ((8, 8), 2, 2, 0),
        ((7, 70), 5, 2, 2),
    ] {
        let (outer, taps, len) = pool2d(3, size, k, s, pad);
        let native = check(&outer, &taps, len, true);
        assert_eq!(
            native,
            runs_natively(),
            "size {size:?}: native on AVX-512 (F, DQ) with BMI2, or AVX2 with FMA"
        );
    }
}

/// A 2-d window's taps as `max_pool_by_taps` lowers a MaxPool: the output `[channels, oh,
/// ow]` of `(kh, kw)` taps at strides `(sy, sx)`, dilations `(dy, dx)` and begin pads `(py,
/// px)` (end pads `(ey, ex)`), each tap guarded only along the axes where it can read
/// padding.
#[allow(clippy::type_complexity)]
fn pool2d_lowered(
    channels: u64,
    (h, w): (i64, i64),
    (kh, kw): (i64, i64),
    (sy, sx): (i64, i64),
    (dy, dx): (i64, i64),
    (py, px, ey, ex): (i64, i64, i64, i64),
    pad: f64,
) -> (Vec<u64>, Vec<(i64, Vec<i64>, Vec<Guard>, f64)>, usize) {
    let oh = (h + py + ey - (kh - 1) * dy - 1) / sy + 1;
    let ow = (w + px + ex - (kw - 1) * dx - 1) / sx + 1;
    let mut taps = vec![];
    for ty in 0..kh {
        for tx in 0..kw {
            let (shift_y, shift_x) = (ty * dy - py, tx * dx - px);
            let mut guards = vec![];
            if shift_y < 0 || (oh - 1) * sy + shift_y >= h {
                guards.push(guard(&[0, sy, 0], shift_y, h));
            }
            if shift_x < 0 || (ow - 1) * sx + shift_x >= w {
                guards.push(guard(&[0, 0, sx], shift_x, w));
            }
            taps.push((shift_y * w + shift_x, vec![h * w, sy * w, sx], guards, pad));
        }
    }
    (
        vec![channels, oh as u64, ow as u64],
        taps,
        (channels as i64 * h * w) as usize,
    )
}

#[test]
fn pools_as_lowered_run_separably() {
    // Kernel rows folded into a row buffer, then the columns (`cpu/window.rs`'s `Grid`): the
    // zoo resnet's and ResNet-18's 3x3/2 pools, rows not a multiple of 8 wide, no padding at
    // all (one kernel row of every tap), dilations, asymmetric and one-sided pads, a 1-row
    // window, a finite pad value, and rows too wide for the buffer (the general form).
    let cases = [
        ((32, 32), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
        ((112, 112), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
        ((13, 29), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
        ((8, 8), (2, 2), (2, 2), (1, 1), (0, 0, 0, 0)),
        ((15, 21), (3, 2), (2, 1), (2, 3), (2, 0, 1, 3)),
        ((9, 17), (1, 5), (1, 2), (1, 1), (0, 2, 0, 2)),
        ((6, 40), (4, 4), (1, 2), (1, 1), (0, 3, 3, 0)),
        ((3, 9000), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ];
    for (size, k, s, d, pads) in cases {
        for (max, pad) in [(true, f64::NEG_INFINITY), (false, 2.5)] {
            let (outer, taps, len) = pool2d_lowered(2, size, k, s, d, pads, pad);
            let (native, grid) = check_forms(&outer, &taps, len, max);
            assert_eq!(native, runs_natively(), "size {size:?} window {k:?}");
            // Every case a grid but the row too wide for its buffer.
            assert_eq!(grid, native && size.1 < 9000, "size {size:?} window {k:?}");
        }
    }
}

#[test]
fn grids_whose_ranges_are_not_one_rows_are_not_folded_together() {
    // Two taps one element apart along a 1-d row, the first guarded to points 0..5, the
    // second not: folded through one buffer, the first tap's points 5.. would read the
    // second's elements instead of the pad. The kernel must run another way, and right.
    let taps = vec![
        (0, vec![1], vec![guard(&[1], 0, 5)], f64::NEG_INFINITY),
        (1, vec![1], vec![], f64::NEG_INFINITY),
    ];
    let (native, grid) = check_forms(&[10], &taps, 12, true);
    assert_eq!(native, runs_natively());
    assert!(
        !grid,
        "a column's points outside its range fall inside the others'"
    );
    // Ranges that end where the input does (a pool's): one buffer for both.
    let taps = vec![
        (-1, vec![1], vec![guard(&[1], -1, 12)], f64::NEG_INFINITY),
        (0, vec![1], vec![], f64::NEG_INFINITY),
        (1, vec![1], vec![guard(&[1], 1, 12)], f64::NEG_INFINITY),
    ];
    let (native, grid) = check_forms(&[12], &taps, 12, true);
    assert_eq!(grid, native);
}

#[test]
fn min_and_more_taps_than_one_group() {
    // 1-d windows of 70 taps (two groups of the row's tap table), stride 2, padding 35 with
    // a finite pad value.
    let (n_in, k, s, pad) = (150i64, 70, 2, 35);
    let out = (n_in + 2 * pad - k) / s + 1;
    let taps: Vec<_> = (0..k)
        .map(|t| {
            (
                t - pad,
                vec![s],
                vec![guard(&[s], t - pad, n_in)],
                if t % 2 == 0 { 7.5 } else { -7.5 },
            )
        })
        .collect();
    for max in [true, false] {
        check(&[out as u64], &taps, n_in as usize, max);
    }
}

#[test]
fn broadcast_reversed_and_whole_row_guards() {
    // Row axis last, 3 rows of 20 points over a 4 x 30 input:
    // - a tap at stride 0 along the row (one element per row), guarded on the row's index;
    // - a tap whose guard falls as the point rises (coefficient -1);
    // - a tap guarded by a diagonal (coefficients on both axes), at stride 1.
    let outer = [3u64, 20];
    let taps = vec![
        (
            5,
            vec![30, 0],
            vec![guard(&[1, 0], -1, 2)],
            f64::NEG_INFINITY,
        ),
        (
            40,
            vec![30, 1],
            vec![guard(&[0, -1], 12, 10)],
            f64::NEG_INFINITY,
        ),
        (
            0,
            vec![30, 1],
            vec![guard(&[2, 1], -4, 15)],
            f64::NEG_INFINITY,
        ),
        (1, vec![29, 3], vec![], f64::NEG_INFINITY),
    ];
    check(&outer, &taps, 120, true);
    check(&outer, &taps, 120, false);
}

#[test]
fn overlapping_and_plain_kernels_are_left_to_the_loop_code() {
    // The stored view overlaps a loaded one: the loop code runs it (point by point).
    let mut overlapping = window_kernel(
        &[40],
        &[
            (0, vec![2], vec![guard(&[2], -1, 80)], f64::NEG_INFINITY),
            (1, vec![2], vec![], f64::NEG_INFINITY),
        ],
        40,
        true,
    );
    let x = inputs(120);
    let mut ar = Buf::new(800);
    ar.put(0, &x);
    let program = run_on(std::slice::from_ref(&overlapping), &mut ar, &Buf::new(0), 1);
    assert!(!program.is_window(0));
    // Unguarded, unit-stride loads: Cranelift's vector loop runs it.
    overlapping = window_kernel(
        &[40],
        &[
            (0, vec![1], vec![], f64::NEG_INFINITY),
            (50, vec![1], vec![], f64::NEG_INFINITY),
        ],
        400,
        true,
    );
    ar.put(0, &x);
    let program = run_on(std::slice::from_ref(&overlapping), &mut ar, &Buf::new(0), 1);
    assert!(!program.is_window(0));
    let got = ar.get::<f32>(400, 40);
    for (i, &g) in got.iter().enumerate() {
        let w = fold(true, x[i], x[50 + i]);
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "at {i}"
        );
    }
}
