//! The CPU backend on elementwise maps of floats: every unary and binary float op against Rust
//! references, the inline transcendentals within their ulp bounds, and float tests giving bools.
//!
//! Hand-built kernels run through `CpuProgram` and compared with plain Rust references
//! computed here (helpers in `common::kernels`).

mod common;

use common::kernels::*;
use memc_codegen::cpu::CpuProgram;
use memc_codegen::kernel::{BinaryOp, Kernel, Region, Scalar, UnaryOp};

#[test]
fn add_with_broadcasting() {
    // out[3,5] = a[3,5] + b[5] (b broadcast over rows, from the weights).
    let a: Vec<f32> = (0..15).map(|i| i as f32 * 1.5).collect();
    let bias: Vec<f32> = (0..5).map(|i| 100.0 * i as f32 - 0.25).collect();
    let mut ar = Buf::new(15 * 4 * 2);
    ar.put(0, &a);
    let mut w = Buf::new(5 * 4);
    w.put(0, &bias);
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let y = b.load(Scalar::F32, 1);
    let z = b.bin(BinaryOp::Add, x, y);
    let k = loop_kernel(
        "add",
        &[3, 5],
        &[],
        vec![
            arena(Scalar::F32, 0, &[5, 1]),
            view(Region::Weights, Scalar::F32, 0, &[0, 1]),
            arena(Scalar::F32, 60, &[5, 1]),
        ],
        vec![map(b, &[(2, z)])],
    );
    let program = run(&[k], &mut ar, &w);
    assert_eq!(
        program.vectorized_loops(0),
        Some(1),
        "a contiguous f32 row is vectorized"
    );
    let out: Vec<f32> = ar.get(60, 15);
    for r in 0..3 {
        for c in 0..5 {
            assert_eq!(out[r * 5 + c], a[r * 5 + c] + bias[c], "at ({r}, {c})");
        }
    }
}

const UNARY_FLOAT_OPS: &[UnaryOp] = &[
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Sign,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sqrt,
    UnaryOp::Reciprocal,
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Tan,
    UnaryOp::Asin,
    UnaryOp::Acos,
    UnaryOp::Atan,
    UnaryOp::Sinh,
    UnaryOp::Cosh,
    UnaryOp::Tanh,
    UnaryOp::Asinh,
    UnaryOp::Acosh,
    UnaryOp::Atanh,
];

const FLOAT_INPUTS: &[f64] = &[
    0.0,
    -0.0,
    0.5,
    -0.5,
    1.5,
    2.5,
    -2.5,
    3.5,
    0.25,
    -0.75,
    1.0,
    -1.0,
    2.0,
    7.3,
    -7.3,
    100.0,
    1e-3,
    -1e-3,
    0.999,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e30,
    -1e30,
    4.5,
    5.5,
];

fn ref_unary_f64(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round_ties_even(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sinh => x.sinh(),
        UnaryOp::Cosh => x.cosh(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Asinh => x.asinh(),
        UnaryOp::Acosh => x.acosh(),
        UnaryOp::Atanh => x.atanh(),
        _ => unreachable!("not a float-to-float op: {op:?}"),
    }
}

fn ref_unary_f32(op: UnaryOp, x: f32) -> f32 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round_ties_even(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sinh => x.sinh(),
        UnaryOp::Cosh => x.cosh(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Asinh => x.asinh(),
        UnaryOp::Acosh => x.acosh(),
        UnaryOp::Atanh => x.atanh(),
        _ => unreachable!("not a float-to-float op: {op:?}"),
    }
}

#[test]
fn every_unary_float_op_f64() {
    let n = FLOAT_INPUTS.len();
    let out_offset = (n * 8) as i64;
    let kernels: Vec<Kernel> = UNARY_FLOAT_OPS
        .iter()
        .map(|&op| unary_kernel(op, Scalar::F64, Scalar::F64, n as u64, out_offset))
        .collect();
    for (k, &op) in kernels.iter().zip(UNARY_FLOAT_OPS) {
        let mut ar = Buf::new(n * 16);
        ar.put(0, FLOAT_INPUTS);
        run(std::slice::from_ref(k), &mut ar, &Buf::new(0));
        let out: Vec<f64> = ar.get(out_offset as usize, n);
        for (i, &x) in FLOAT_INPUTS.iter().enumerate() {
            let want = ref_unary_f64(op, x);
            assert!(
                same_f64(out[i], want),
                "{op:?}({x}) = {} want {want}",
                out[i]
            );
        }
    }
}

#[test]
fn every_unary_float_op_f32() {
    let inputs: Vec<f32> = FLOAT_INPUTS.iter().map(|&x| x as f32).collect();
    let n = inputs.len();
    let out_offset = (n * 4) as i64;
    // All ops in one program: also covers programs of many kernels.
    let kernels: Vec<Kernel> = UNARY_FLOAT_OPS
        .iter()
        .map(|&op| unary_kernel(op, Scalar::F32, Scalar::F32, n as u64, out_offset))
        .collect();
    let refs: Vec<&Kernel> = kernels.iter().collect();
    let program = CpuProgram::compile(&refs).expect("the unary kernels compile");
    let pool = pool(1);
    for (i, &op) in UNARY_FLOAT_OPS.iter().enumerate() {
        let mut ar = Buf::new(n * 8);
        ar.put(0, &inputs);
        // SAFETY: each kernel touches 2n f32 from offset 0, inside the buffer.
        unsafe { program.run_kernel(i, ar.0.as_mut_ptr().cast(), std::ptr::null(), &pool) };
        let out: Vec<f32> = ar.get(out_offset as usize, n);
        for (j, &x) in inputs.iter().enumerate() {
            let want = ref_unary_f32(op, x);
            // The SIMD path computes these inline (see `inline_transcendentals_f32`).
            let close = matches!(op, UnaryOp::Exp | UnaryOp::Tanh)
                && ulps_f32(out[j], want) <= 2
                && out[j].is_sign_negative() == want.is_sign_negative();
            assert!(
                same_f32(out[j], want) || close,
                "{op:?}({x}) = {} want {want}",
                out[j]
            );
        }
        assert_eq!(program.kernel_name(i), Some(format!("{op:?}").as_str()));
    }
}

/// The distance in representable f32 values between two finite floats of the same sign, or
/// `u32::MAX` for anything else that is not bit-identical.
fn ulps_f32(a: f32, b: f32) -> u32 {
    if same_f32(a, b) {
        return 0;
    }
    if !a.is_finite() || !b.is_finite() || a.is_sign_negative() != b.is_sign_negative() {
        return if a == b { 0 } else { u32::MAX };
    }
    a.to_bits().abs_diff(b.to_bits())
}

/// The ulp error of `got` against the f64 reference `want`, in units of the f32 spacing at
/// `want` (at least the smallest subnormal).
fn ulp_error(got: f32, want: f64) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if (want as f32).is_infinite() || got.is_infinite() {
        return if got as f64 == want as f32 as f64 {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let w = want as f32;
    let spacing = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64;
    (got as f64 - want).abs() / spacing.max(f64::from(f32::from_bits(1)))
}

/// `exp`, `tanh` and `erf` on the SIMD path are inline polynomials: within 1, 2 and 2 ulp of
/// the f64 result over a dense grid, with the special values and signs of libm.
#[test]
fn inline_transcendentals_f32() {
    extern "C" {
        fn erf(x: f64) -> f64;
    }
    let mut inputs: Vec<f32> = (0..=200_000)
        .map(|i| -10.0 + 20.0 * i as f32 / 200_000.0)
        .chain((0..=20_000).map(|i| -110.0 + 200.0 * i as f32 / 20_000.0))
        .chain([
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            88.72,
            88.73,
            -87.5,
            -103.0,
            // Either side of where e^x rounds to 0 rather than the least subnormal, and the
            // lowest f32 (a causal mask's fill).
            -103.97,
            -103.98,
            -104.0,
            -104.5,
            f32::MIN,
            0.625,
            0.927_734_4,
            4.0,
            -4.0,
        ])
        .collect();
    // A multiple of 8, so every element goes through the vector loop.
    while inputs.len() % 8 != 0 {
        inputs.push(0.5);
    }
    let n = inputs.len();
    let ops: [(UnaryOp, f64, fn(f64) -> f64); 3] = [
        (UnaryOp::Exp, 1.0, f64::exp),
        (UnaryOp::Tanh, 2.0, f64::tanh),
        // SAFETY: `erf` is a pure libm function defined for every input.
        (UnaryOp::Erf, 2.0, |x| unsafe { erf(x) }),
    ];
    for (op, max_ulp, reference) in ops {
        let mut ar = Buf::new(n * 8);
        ar.put(0, &inputs);
        let program = run(
            &[unary_kernel(
                op,
                Scalar::F32,
                Scalar::F32,
                n as u64,
                (n * 4) as i64,
            )],
            &mut ar,
            &Buf::new(0),
        );
        assert!(
            program.vectorized_loops(0) >= Some(1),
            "{op:?} is vectorized"
        );
        let out: Vec<f32> = ar.get(n * 4, n);
        for (&x, &got) in inputs.iter().zip(&out) {
            let want = reference(f64::from(x));
            let err = ulp_error(got, want);
            assert!(
                err <= max_ulp,
                "{op:?}({x}) = {got}, want {want} ({err} ulp)"
            );
            if want == 0.0 && op != UnaryOp::Exp {
                assert_eq!(
                    got.is_sign_negative(),
                    x.is_sign_negative(),
                    "{op:?}({x}) sign"
                );
            }
        }
    }
}

/// A long row of `exp`, `tanh` or `erf` runs 16 lanes at a time through one call per
/// instruction (`vmath::native`, on hosts with AVX2 or AVX-512); rows of 8 run the inline
/// 4-lane polynomial. Both give the same bits, NaN, infinities and subnormals included.
#[test]
fn wide_transcendentals_match_the_inline_polynomials() {
    let mut inputs: Vec<f32> = (0..40_000)
        .map(|i| -120.0 + 220.0 * i as f32 / 40_000.0)
        .chain((0..4_000).map(|i| -4.0 + 8.0 * i as f32 / 4_000.0))
        .chain([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN,
            f32::MAX,
            1e-40,
            -103.97,
            -104.0,
        ])
        .collect();
    while !inputs.len().is_multiple_of(16) {
        inputs.push(0.25);
    }
    let n = inputs.len() as u64;
    for op in [UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Erf] {
        let mut outs = Vec::new();
        for width in [n, 8] {
            let mut b = Insts::default();
            let x = b.load(Scalar::F32, 0);
            let y = b.un(op, x);
            let kernel = loop_kernel(
                &format!("{op:?} rows of {width}"),
                &[n / width, width],
                &[],
                vec![
                    arena(Scalar::F32, 0, &[width as i64, 1]),
                    arena(Scalar::F32, (n * 4) as i64, &[width as i64, 1]),
                ],
                vec![map(b, &[(1, y)])],
            );
            let mut ar = Buf::new(n as usize * 8);
            ar.put(0, &inputs);
            let program = run(&[kernel], &mut ar, &Buf::new(0));
            assert!(
                program.vectorized_loops(0) >= Some(1),
                "{op:?} is vectorized"
            );
            outs.push(ar.get::<f32>(n as usize * 4, n as usize));
        }
        for ((&x, wide), inline) in inputs.iter().zip(&outs[0]).zip(&outs[1]) {
            assert_eq!(
                wide.to_bits(),
                inline.to_bits(),
                "{op:?}({x}): {wide} in 16 lanes, {inline} inline"
            );
        }
    }
}

#[test]
fn erf_matches_known_values() {
    let xs = [0.0f64, 0.5, 1.0, -2.0, 3.0, -0.1];
    let want = [
        0.0,
        0.5204998778130465,
        0.8427007929497149,
        -0.9953222650189527,
        0.9999779095030014,
        -0.1124629160182849,
    ];
    let mut ar = Buf::new(6 * 8 * 2);
    ar.put(0, &xs);
    run(
        &[unary_kernel(UnaryOp::Erf, Scalar::F64, Scalar::F64, 6, 48)],
        &mut ar,
        &Buf::new(0),
    );
    let out: Vec<f64> = ar.get(48, 6);
    for i in 0..6 {
        assert!(
            (out[i] - want[i]).abs() < 1e-15,
            "erf({}) = {} want {}",
            xs[i],
            out[i],
            want[i]
        );
    }
    let xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    let mut ar = Buf::new(6 * 4 * 2);
    ar.put(0, &xs32);
    run(
        &[unary_kernel(UnaryOp::Erf, Scalar::F32, Scalar::F32, 6, 24)],
        &mut ar,
        &Buf::new(0),
    );
    let out: Vec<f32> = ar.get(24, 6);
    for i in 0..6 {
        assert!(
            (out[i] as f64 - want[i]).abs() < 1e-6,
            "erff({}) = {} want {}",
            xs[i],
            out[i],
            want[i]
        );
    }
}

#[test]
fn float_tests_give_bools() {
    let n = FLOAT_INPUTS.len();
    for (op, f) in [
        (UnaryOp::IsNan, (|x: f64| x.is_nan()) as fn(f64) -> bool),
        (UnaryOp::IsPosInf, |x: f64| x == f64::INFINITY),
        (UnaryOp::IsNegInf, |x: f64| x == f64::NEG_INFINITY),
    ] {
        let mut ar = Buf::new(n * 9);
        ar.put(0, FLOAT_INPUTS);
        run(
            &[unary_kernel(
                op,
                Scalar::F64,
                Scalar::Bool,
                n as u64,
                (n * 8) as i64,
            )],
            &mut ar,
            &Buf::new(0),
        );
        let out: Vec<u8> = ar.get(n * 8, n);
        for (i, &x) in FLOAT_INPUTS.iter().enumerate() {
            assert_eq!(out[i], f(x) as u8, "{op:?}({x})");
        }
    }
}

fn float_pairs() -> Vec<(f64, f64)> {
    let vals = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.5,
        -7.25,
        3.0,
        0.5,
        f64::NAN,
        f64::INFINITY,
        -3.0,
        10.0,
    ];
    vals.iter()
        .flat_map(|&a| vals.iter().map(move |&b| (a, b)))
        .collect()
}

fn ref_floor_mod(a: f64, b: f64) -> f64 {
    let mut r = a % b;
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
        r += b;
    }
    r
}

const FLOAT_BINARY_OPS: &[BinaryOp] = &[
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Rem,
    BinaryOp::FloorMod,
    BinaryOp::Pow,
    BinaryOp::Min,
    BinaryOp::Max,
    BinaryOp::Eq,
    BinaryOp::Lt,
    BinaryOp::Le,
    BinaryOp::Gt,
    BinaryOp::Ge,
];

/// A float result, or 0/1 for comparisons.
fn ref_binary_f64(op: BinaryOp, a: f64, b: f64) -> f64 {
    let nan_min_max = |f: fn(f64, f64) -> f64| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            f(a, b)
        }
    };
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Rem => a % b,
        BinaryOp::FloorMod => ref_floor_mod(a, b),
        BinaryOp::Pow => a.powf(b),
        // -0 < +0 for min/max, as IEEE 754-2019 minimum/maximum.
        BinaryOp::Min => nan_min_max(|a, b| {
            if a == b {
                if a.is_sign_negative() {
                    a
                } else {
                    b
                }
            } else {
                a.min(b)
            }
        }),
        BinaryOp::Max => nan_min_max(|a, b| {
            if a == b {
                if a.is_sign_positive() {
                    a
                } else {
                    b
                }
            } else {
                a.max(b)
            }
        }),
        BinaryOp::Eq => (a == b) as u8 as f64,
        BinaryOp::Lt => (a < b) as u8 as f64,
        BinaryOp::Le => (a <= b) as u8 as f64,
        BinaryOp::Gt => (a > b) as u8 as f64,
        BinaryOp::Ge => (a >= b) as u8 as f64,
        _ => unreachable!(),
    }
}

fn ref_binary_f32(op: BinaryOp, a: f32, b: f32) -> f32 {
    let nan_min_max = |f: fn(f32, f32) -> f32| {
        if a.is_nan() || b.is_nan() {
            f32::NAN
        } else {
            f(a, b)
        }
    };
    let mut r = a % b;
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
        r += b;
    }
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Rem => a % b,
        BinaryOp::FloorMod => r,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Min => nan_min_max(|a, b| {
            if a == b {
                if a.is_sign_negative() {
                    a
                } else {
                    b
                }
            } else {
                a.min(b)
            }
        }),
        BinaryOp::Max => nan_min_max(|a, b| {
            if a == b {
                if a.is_sign_positive() {
                    a
                } else {
                    b
                }
            } else {
                a.max(b)
            }
        }),
        BinaryOp::Eq => (a == b) as u8 as f32,
        BinaryOp::Lt => (a < b) as u8 as f32,
        BinaryOp::Le => (a <= b) as u8 as f32,
        BinaryOp::Gt => (a > b) as u8 as f32,
        BinaryOp::Ge => (a >= b) as u8 as f32,
        _ => unreachable!(),
    }
}

#[test]
fn every_binary_float_op() {
    let pairs = float_pairs();
    let n = pairs.len();
    let (xs, ys): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    let ys32: Vec<f32> = ys.iter().map(|&x| x as f32).collect();
    for &op in FLOAT_BINARY_OPS {
        // f64.
        let mut ar = Buf::new(n * 24);
        ar.put(0, &xs);
        ar.put(n * 8, &ys);
        run(
            &[binary_kernel(
                op,
                Scalar::F64,
                n as u64,
                (n * 8) as i64,
                (n * 16) as i64,
            )],
            &mut ar,
            &Buf::new(0),
        );
        for i in 0..n {
            let want = ref_binary_f64(op, xs[i], ys[i]);
            let got = if op.is_comparison() {
                ar.get::<u8>(n * 16 + i, 1)[0] as f64
            } else {
                ar.get::<f64>(n * 16 + i * 8, 1)[0]
            };
            assert!(
                same_f64(got, want),
                "f64 {op:?}({}, {}) = {got} want {want}",
                xs[i],
                ys[i]
            );
        }
        // f32.
        let mut ar = Buf::new(n * 12);
        ar.put(0, &xs32);
        ar.put(n * 4, &ys32);
        run(
            &[binary_kernel(
                op,
                Scalar::F32,
                n as u64,
                (n * 4) as i64,
                (n * 8) as i64,
            )],
            &mut ar,
            &Buf::new(0),
        );
        for i in 0..n {
            let want = ref_binary_f32(op, xs32[i], ys32[i]);
            let got = if op.is_comparison() {
                ar.get::<u8>(n * 8 + i, 1)[0] as f32
            } else {
                ar.get::<f32>(n * 8 + i * 4, 1)[0]
            };
            assert!(
                same_f32(got, want),
                "f32 {op:?}({}, {}) = {got} want {want}",
                xs32[i],
                ys32[i]
            );
        }
    }
}
