//! The CPU backend's native softmax (`cpu/softmax.rs`): the loop kernel ONNX Softmax lowers to
//! (a maximum, `exp(x - max)` stored, its sum, the scale by `1 / sum`), built here by hand,
//! runs natively on AVX-512 or AVX2 and gives what the kernel means within rounding: rows of
//! 1 to 130 elements (masked ends, the 64-element loop), two outer axes with padded rows, in place and
//! into another buffer, one and two threads, rows with a NaN, an infinity and only -inf (NaN
//! rows, as the loop gives). A kernel whose output overlaps its input shifted is left to the
//! loop code.

mod common;

use common::kernels::*;
use memc_codegen::kernel::{f64_bits, BinaryOp, Kernel, ReduceOp, Scalar, Stage, UnaryOp, View};

/// The softmax kernel as `lower` emits it: view 0 the input, view 1 the output.
fn softmax(outer: &[u64], len: u64, x: View, y: View) -> Kernel {
    let mut max = Insts::default();
    max.load(Scalar::F32, 0);
    let mut exp = Insts::default();
    let v = exp.load(Scalar::F32, 0);
    let m = exp.acc(Scalar::F32, 0);
    let d = exp.bin(BinaryOp::Sub, v, m);
    let e = exp.un(UnaryOp::Exp, d);
    let mut sum = Insts::default();
    sum.load(Scalar::F32, 1);
    let mut scale = Insts::default();
    let v = scale.load(Scalar::F32, 1);
    let s = scale.acc(Scalar::F32, 2);
    let one = scale.float(Scalar::F32, 1.0);
    let inv = scale.bin(BinaryOp::Div, one, s);
    let r = scale.bin(BinaryOp::Mul, v, inv);
    loop_kernel(
        "softmax",
        outer,
        &[len],
        vec![x, y],
        vec![
            Stage::Reduce {
                insts: max.0,
                value: 0,
                op: ReduceOp::Max,
                init: f64_bits(f64::NEG_INFINITY),
                ty: Scalar::F32,
            },
            map(exp, &[(1, e)]),
            Stage::Reduce {
                insts: sum.0,
                value: 0,
                op: ReduceOp::Sum,
                init: f64_bits(0.0),
                ty: Scalar::F32,
            },
            map(scale, &[(1, r)]),
        ],
    )
}

/// The softmax of `row` in f64 (NaN everywhere when a NaN, `+inf` or only `-inf` is in it,
/// as `exp(x - max)` then gives a NaN to the sum).
fn reference(row: &[f32]) -> Vec<f64> {
    let max = row
        .iter()
        .fold(f64::NEG_INFINITY, |m, &x| m.max(f64::from(x)));
    let bad = row.iter().any(|x| x.is_nan()) || max.is_infinite();
    let e: Vec<f64> = row.iter().map(|&x| (f64::from(x) - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.iter()
        .map(|&v| if bad { f64::NAN } else { v / sum })
        .collect()
}

fn value(i: usize) -> f32 {
    ((i * 37 + 11) % 101) as f32 * 0.17 - 8.0
}

/// Runs `outer` rows of `len` (rows `pitch` apart, the outer axes row-major) in place or into
/// a second buffer, on `threads`, and checks every row; `special` puts a NaN in row 1, `+inf`
/// in row 2 and only `-inf` in row 3.
fn check(outer: &[u64], len: u64, pitch: u64, in_place: bool, threads: usize, special: bool) {
    let rows: u64 = outer.iter().product();
    let elems = (rows * pitch) as usize;
    let mut xs: Vec<f32> = (0..elems).map(value).collect();
    if special && rows > 3 {
        xs[pitch as usize] = f32::NAN;
        xs[2 * pitch as usize + len as usize / 2] = f32::INFINITY;
        for v in &mut xs[3 * pitch as usize..(3 * pitch + len) as usize] {
            *v = f32::NEG_INFINITY;
        }
    }
    let mut strides: Vec<i64> = vec![0; outer.len() + 1];
    strides[outer.len()] = 1;
    let mut step = pitch as i64;
    for (s, &e) in strides[..outer.len()].iter_mut().zip(outer).rev() {
        *s = step;
        step *= e as i64;
    }
    let out_at = if in_place { 0 } else { elems * 4 };
    let mut arena_buf = Buf::new(elems * 4 * 2);
    arena_buf.put(0, &xs);
    let kernel = softmax(
        outer,
        len,
        arena(Scalar::F32, 0, &strides),
        arena(Scalar::F32, out_at as i64, &strides),
    );
    let program = run_on(&[kernel], &mut arena_buf, &Buf::new(0), threads);
    assert!(
        program.is_softmax(0) || !native(),
        "the softmax kernel was not taken natively"
    );
    let got: Vec<f32> = arena_buf.get(out_at, elems);
    for r in 0..rows as usize {
        let at = r * pitch as usize;
        let want = reference(&xs[at..at + len as usize]);
        for (j, &w) in want.iter().enumerate() {
            let g = f64::from(got[at + j]);
            let ok = if w.is_nan() {
                g.is_nan()
            } else {
                (g - w).abs() <= 2e-6 * w.abs() + 1e-12
            };
            assert!(
                ok,
                "outer {outer:?} len {len} in place {in_place} threads {threads}: row {r} [{j}] {g} want {w}"
            );
        }
    }
}

/// Whether this host runs the native softmax (AVX-512F, or AVX2 with FMA).
fn native() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        (std::arch::is_x86_feature_detected!("avx512f")
            || (std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")))
            && std::env::var_os("MEMC_NO_SOFTMAX").is_none()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[test]
fn softmax_rows_match_the_meaning() {
    for len in [1u64, 15, 16, 17, 64, 100, 130] {
        check(&[5], len, len, true, 1, true);
        check(&[5], len, len, false, 2, true);
    }
    // Two outer axes, rows with spare elements after them, many rows over two threads.
    check(&[3, 40], 33, 40, false, 2, true);
    check(&[2, 300], 128, 128, true, 2, false);
}

#[test]
fn a_shifted_overlapping_output_stays_loop_code() {
    // The output one element after the input: the loop's order matters, so no native code.
    let (rows, len) = (4u64, 20u64);
    let mut arena_buf = Buf::new(((rows * len + 1) * 4) as usize);
    let xs: Vec<f32> = (0..(rows * len) as usize).map(value).collect();
    arena_buf.put(0, &xs);
    let kernel = softmax(
        &[rows],
        len,
        arena(Scalar::F32, 0, &[len as i64, 1]),
        arena(Scalar::F32, 4, &[len as i64, 1]),
    );
    let program = run_on(&[kernel], &mut arena_buf, &Buf::new(0), 1);
    assert!(!program.is_softmax(0));
}

/// An ONNX Softmax as `lower` emits it today is the kernel the native softmax recognizes: if
/// lowering changes Softmax's loop form, this fails rather than the native path silently
/// going unused. The result agrees with the reference backend.
#[test]
fn lowered_onnx_softmax_runs_natively() {
    use common::models::lowered_natives;
    for axis in [-1i64, 2] {
        let text = format!(
            "func.func @f(%x: tensor<2x5x37xf32>) -> tensor<2x5x37xf32> {{\n  %0 = \"onnx.Softmax\"(%x) {{axis = {axis}}} : (tensor<2x5x37xf32>) -> tensor<2x5x37xf32>\n  return %0 : tensor<2x5x37xf32>\n}}\n"
        );
        let xs: Vec<f32> = (0..2 * 5 * 37)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let inputs = vec![xs.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()];
        let (natives, kernels) = lowered_natives(&text, &inputs, |cpu, i| cpu.is_softmax(i));
        assert!(
            natives == 1 || !native(),
            "axis {axis}: {natives} of {kernels} kernels run as the native softmax"
        );
    }
}
