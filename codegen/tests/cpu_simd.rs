//! The CPU backend across threads, SIMD shapes and errors: identical results on any thread
//! count, long rows split into blocks, vector tails and masks, strided and reversed views, the
//! scalar fallback, empty extents, unsupported types, and the host ISA flags.
//!
//! Hand-built kernels run through `CpuProgram` and compared with plain Rust references
//! computed here (helpers in `common::kernels`).

mod common;

use common::kernels::*;
use memc_codegen::cpu::{host_isa_flags, CpuError, CpuProgram};
use memc_codegen::kernel::{
    f64_bits, BinaryOp, Guard, Kernel, ReduceOp, Region, Scalar, Stage, UnaryOp,
};

/// out = tanh(x) * 2 + x over [rows, cols]: a kernel with enough work to be split.
fn big_map_kernel(rows: u64, cols: u64) -> Kernel {
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let t = b.un(UnaryOp::Tanh, x);
    let two = b.float(Scalar::F32, 2.0);
    let t2 = b.bin(BinaryOp::Mul, t, two);
    let y = b.bin(BinaryOp::Add, t2, x);
    loop_kernel(
        "big",
        &[rows, cols],
        &[],
        vec![
            arena(Scalar::F32, 0, &[cols as i64, 1]),
            arena(Scalar::F32, (rows * cols * 4) as i64, &[cols as i64, 1]),
        ],
        vec![map(b, &[(1, y)])],
    )
}

#[test]
fn threads_give_identical_results() {
    let (rows, cols) = (301u64, 257u64);
    let xs: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 31) % 97) as f32 * 0.05 - 2.0)
        .collect();
    let kernels = [
        big_map_kernel(rows, cols),
        softmax_kernel(rows, cols, (2 * rows * cols * 4) as i64),
    ];
    let bytes = (3 * rows * cols * 4) as usize;
    let mut one = Buf::new(bytes);
    one.put(0, &xs);
    let mut two = Buf::new(bytes);
    two.put(0, &xs);
    run_on(&kernels, &mut one, &Buf::new(0), 1);
    run_on(&kernels, &mut two, &Buf::new(0), 2);
    let n = (rows * cols) as usize;
    let want: Vec<f32> = xs.iter().map(|&x| x.tanh() * 2.0 + x).collect();
    for (i, (&g, &w)) in one.get::<f32>(n * 4, n).iter().zip(&want).enumerate() {
        // The vector loop's tanh is within 2 ulp of libm's (`inline_transcendentals_f32`).
        assert!(
            (g - w).abs() <= 1e-6 * w.abs().max(1.0),
            "at {i}: {g} want {w}"
        );
    }
    assert_eq!(one.0, two.0, "one and two threads differ");
    let soft = softmax_reference(&xs, cols as usize);
    let got = two.get::<f32>(2 * n * 4, n);
    for i in (0..n).step_by(97) {
        assert!(
            (got[i] - soft[i]).abs() <= 1e-6 * soft[i].max(1e-6),
            "softmax at {i}"
        );
    }
}

#[test]
fn long_rows_split_into_blocks() {
    // Last axes of 2 * 4096 elements or more are cut into blocks that run as separate rows:
    // indices, guards and addresses must count from each block's start. Shape [3, 9001].
    let (rows, cols) = (3u64, 9001u64);
    let n = (rows * cols) as usize;
    let xs: Vec<f32> = (0..n)
        .map(|i| ((i * 13) % 101) as f32 * 0.5 - 20.0)
        .collect();
    // Vectorized: out1 = x * 2 + 1.
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let two = b.float(Scalar::F32, 2.0);
    let one = b.float(Scalar::F32, 1.0);
    let x2 = b.bin(BinaryOp::Mul, x, two);
    let y = b.bin(BinaryOp::Add, x2, one);
    let simd = loop_kernel(
        "blocked_simd",
        &[rows, cols],
        &[],
        vec![
            arena(Scalar::F32, 0, &[cols as i64, 1]),
            arena(Scalar::F32, (n * 4) as i64, &[cols as i64, 1]),
        ],
        vec![map(b, &[(1, y)])],
    );
    // Scalar: out2[r, j] = x[r, j - 3] (pad -1 outside [3, cols - 3)) + j + 100 r, in i64.
    let mut shifted = arena(Scalar::F32, -12, &[cols as i64, 1]);
    shifted.guards = vec![Guard {
        coeffs: vec![0, 1],
        offset: -3,
        limit: cols as i64 - 6,
    }];
    shifted.pad = f64_bits(-1.0);
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let xi = b.cast(x, Scalar::I64);
    let r = b.index(0);
    let j = b.index(1);
    let hundred = b.int(Scalar::I64, 100);
    let r100 = b.bin(BinaryOp::Mul, r, hundred);
    let sum = b.bin(BinaryOp::Add, xi, j);
    let y = b.bin(BinaryOp::Add, sum, r100);
    let scalar = loop_kernel(
        "blocked_scalar",
        &[rows, cols],
        &[],
        vec![
            shifted,
            arena(Scalar::I64, (2 * n * 4) as i64, &[cols as i64, 1]),
        ],
        vec![map(b, &[(1, y)])],
    );
    let bytes = n * 4 * 2 + n * 8;
    let mut one_thread = Buf::new(bytes);
    one_thread.put(0, &xs);
    let mut two_threads = Buf::new(bytes);
    two_threads.put(0, &xs);
    let kernels = [simd, scalar];
    let program = run_on(&kernels, &mut one_thread, &Buf::new(0), 1);
    // Two SIMD loops: one for full blocks, one for the shorter last block.
    assert_eq!(program.vectorized_loops(0), Some(2));
    run_on(&kernels, &mut two_threads, &Buf::new(0), 2);
    assert_eq!(one_thread.0, two_threads.0, "one and two threads differ");
    let want: Vec<f32> = xs.iter().map(|&x| x * 2.0 + 1.0).collect();
    assert_eq!(one_thread.get::<f32>(n * 4, n), want);
    let got = one_thread.get::<i64>(2 * n * 4, n);
    for r in 0..rows as usize {
        for j in 0..cols as usize {
            let x = if (3..cols as usize - 3).contains(&j) {
                xs[r * cols as usize + j - 3] as i64
            } else {
                -1
            };
            let want = x + j as i64 + 100 * r as i64;
            assert_eq!(got[r * cols as usize + j], want, "at ({r}, {j})");
        }
    }
}

#[test]
fn contiguous_map_with_a_tail() {
    // 4k + 3 elements: the SIMD body and the scalar tail both run; a broadcast scalar operand
    // (stride 0) and a transcendental are mixed in.
    for len in [1027u64, 3, 4, 5, 8, 9, 13, 15] {
        let xs: Vec<f32> = (0..len).map(|i| (i as f32 * 0.731).sin() * 4.0).collect();
        let mut ar = Buf::new((len * 8) as usize);
        ar.put(0, &xs);
        let mut w = Buf::new(4);
        w.put(0, &[0.75f32]);
        let mut b = Insts::default();
        let x = b.load(Scalar::F32, 0);
        let s = b.load(Scalar::F32, 1);
        let xs_ = b.bin(BinaryOp::Mul, x, s);
        let e = b.un(UnaryOp::Exp, xs_);
        let zero = b.float(Scalar::F32, 0.0);
        let m = b.bin(BinaryOp::Max, x, zero);
        let neg = b.bin(BinaryOp::Lt, x, zero);
        let pick = b.select(neg, e, m);
        let r = b.un(UnaryOp::Sqrt, pick);
        let y = b.bin(BinaryOp::Sub, r, x);
        let k = loop_kernel(
            "simd",
            &[len],
            &[],
            vec![
                arena(Scalar::F32, 0, &[1]),
                view(Region::Weights, Scalar::F32, 0, &[0]),
                arena(Scalar::F32, (len * 4) as i64, &[1]),
            ],
            vec![map(b, &[(2, y)])],
        );
        let program = run(&[k], &mut ar, &w);
        let want_simd = if len >= 4 { 1 } else { 0 };
        assert_eq!(program.vectorized_loops(0), Some(want_simd), "length {len}");
        let want: Vec<f32> = xs
            .iter()
            .map(|&x| {
                let pick = if x < 0.0 {
                    (x * 0.75f32).exp()
                } else {
                    x.max(0.0)
                };
                pick.sqrt() - x
            })
            .collect();
        // The vector loop's exp is within an ulp of libm's (`inline_transcendentals_f32`).
        let got = ar.get::<f32>((len * 4) as usize, len as usize);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                "length {len}, at {i}: {g} want {w}"
            );
        }
    }
}

#[test]
fn vector_masks_and_bool_casts() {
    // out = f32(isnan(x) | x > 1) + f32(!(x < 0)) * 10 + f32(bool(x)) * 100 + round(x) * 1000
    // on 23 elements: masks combined, negated and turned back into floats in f32x4 lanes.
    let xs: Vec<f32> = (0..23)
        .map(|i| {
            if i % 7 == 3 {
                f32::NAN
            } else {
                i as f32 * 0.25 - 2.5
            }
        })
        .collect();
    let mut ar = Buf::new(23 * 8);
    ar.put(0, &xs);
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let one = b.float(Scalar::F32, 1.0);
    let zero = b.float(Scalar::F32, 0.0);
    let nan = b.un(UnaryOp::IsNan, x);
    let big = b.bin(BinaryOp::Gt, x, one);
    let either = b.bin(BinaryOp::Or, nan, big);
    let first = b.cast(either, Scalar::F32);
    let neg = b.bin(BinaryOp::Lt, x, zero);
    let not_neg = b.un(UnaryOp::Not, neg);
    let second = b.cast(not_neg, Scalar::F32);
    let ten = b.float(Scalar::F32, 10.0);
    let second = b.bin(BinaryOp::Mul, second, ten);
    let truthy = b.cast(x, Scalar::Bool);
    let third = b.cast(truthy, Scalar::F32);
    let hundred = b.float(Scalar::F32, 100.0);
    let third = b.bin(BinaryOp::Mul, third, hundred);
    let rounded = b.un(UnaryOp::Round, x);
    let thousand = b.float(Scalar::F32, 1000.0);
    let fourth = b.bin(BinaryOp::Mul, rounded, thousand);
    let sum = b.bin(BinaryOp::Add, first, second);
    let sum = b.bin(BinaryOp::Add, sum, third);
    let y = b.bin(BinaryOp::Add, sum, fourth);
    let k = loop_kernel(
        "masks",
        &[23],
        &[],
        vec![arena(Scalar::F32, 0, &[1]), arena(Scalar::F32, 92, &[1])],
        vec![map(b, &[(1, y)])],
    );
    let program = run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(program.vectorized_loops(0), Some(1));
    let want: Vec<f32> = xs
        .iter()
        .map(|&x| {
            let first = (x.is_nan() || x > 1.0) as u8 as f32;
            // Not(x < 0) is true for NaN too.
            let second = (x >= 0.0 || x.is_nan()) as u8 as f32 * 10.0;
            let third = (x != 0.0) as u8 as f32 * 100.0;
            first + second + third + x.round_ties_even() * 1000.0
        })
        .collect();
    let got = ar.get::<f32>(92, 23);
    for i in 0..23 {
        assert!(
            same_f32(got[i], want[i]),
            "at {i} (x = {}): {} want {}",
            xs[i],
            got[i],
            want[i]
        );
    }
}

#[test]
fn strided_last_axis_uses_the_scalar_path() {
    // out[i] = x[2 * i] + x[2 * i + 1] over 13 elements: the last axis has stride 2.
    let xs: Vec<f32> = (0..26).map(|i| i as f32 * 0.5).collect();
    let mut ar = Buf::new(26 * 4 + 13 * 4);
    ar.put(0, &xs);
    let mut b = Insts::default();
    let e = b.load(Scalar::F32, 0);
    let o = b.load(Scalar::F32, 1);
    let y = b.bin(BinaryOp::Add, e, o);
    let k = loop_kernel(
        "pairs",
        &[13],
        &[],
        vec![
            arena(Scalar::F32, 0, &[2]),
            arena(Scalar::F32, 4, &[2]),
            arena(Scalar::F32, 104, &[1]),
        ],
        vec![map(b, &[(2, y)])],
    );
    let program = run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(
        program.vectorized_loops(0),
        Some(0),
        "a stride-2 row stays scalar"
    );
    let want: Vec<f32> = (0..13).map(|i| xs[2 * i] + xs[2 * i + 1]).collect();
    assert_eq!(ar.get::<f32>(104, 13), want);
}

#[test]
fn reverse_and_transpose_views() {
    // out[j, i] = x[i, 3 - j] for x [2, 4]: negative strides and a transposed store.
    let xs: [f64; 8] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let mut ar = Buf::new(128);
    ar.put(0, &xs);
    let mut b = Insts::default();
    let x = b.load(Scalar::F64, 0);
    let k = loop_kernel(
        "rev",
        &[2, 4],
        &[],
        vec![
            arena(Scalar::F64, 24, &[4, -1]),
            arena(Scalar::F64, 64, &[1, 2]),
        ],
        vec![map(b, &[(1, x)])],
    );
    run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(
        ar.get::<f64>(64, 8),
        [4.0, 8.0, 3.0, 7.0, 2.0, 6.0, 1.0, 5.0]
    );
}

#[test]
fn contiguous_sum_and_max_reductions_with_tails() {
    // Rows of 4k + 3 and of fewer than 4 elements, reduced over the contiguous inner axis; rows
    // of 45 and 70 take a maximum's or minimum's 16-point loop (four partials), then the
    // 8-point loop, a 4-point step and a scalar tail; a sum of `exp` runs 16 points at a time
    // with one 16-lane call (partials 0, 1, 0, 1, as the 8-point loop adds).
    for cols in [35u64, 3, 1, 8, 45, 70] {
        let rows = 5u64;
        let mut xs: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 53) % 29) as f32 * 0.125 - 1.5)
            .collect();
        // Each row's one maximum and one minimum, at points of different partials.
        for o in 0..rows {
            let at = |p: u64| (o * cols + p % cols) as usize;
            xs[at(12 + 5 * o)] = 9.0 + o as f32;
            xs[at(3 + 9 * o)] = -9.0 - o as f32;
        }
        let mut ar = Buf::new(((rows * cols + 4 * rows) * 4) as usize);
        ar.put(0, &xs);
        let mut kernels = Vec::new();
        for (op, init, slot, exp) in [
            (ReduceOp::Sum, 0.0, 0, false),
            (ReduceOp::Max, f64::NEG_INFINITY, 1, false),
            (ReduceOp::Min, f64::INFINITY, 2, false),
            (ReduceOp::Sum, 0.0, 3, true),
        ] {
            let mut r = Insts::default();
            let x = r.load(Scalar::F32, 0);
            let two = r.float(Scalar::F32, 2.0);
            let y = r.bin(BinaryOp::Mul, x, two);
            if exp {
                r.un(UnaryOp::Exp, y);
            }
            let value = if exp { 3 } else { 2 };
            let mut s = Insts::default();
            let a = s.acc(Scalar::F32, 0);
            kernels.push(loop_kernel(
                "rowreduce",
                &[rows],
                &[cols],
                vec![
                    arena(Scalar::F32, 0, &[cols as i64, 1]),
                    arena(
                        Scalar::F32,
                        ((rows * cols + slot * rows) * 4) as i64,
                        &[1, 0],
                    ),
                ],
                vec![
                    Stage::Reduce {
                        insts: r.0,
                        value,
                        op,
                        init: f64_bits(init),
                        ty: Scalar::F32,
                    },
                    once(s, &[(1, a)]),
                ],
            ));
        }
        let program = run(&kernels, &mut ar, &Buf::new(0));
        let want_simd = if cols >= 4 { 1 } else { 0 };
        for (index, what) in ["sum", "max", "min", "sum of exp"].iter().enumerate() {
            assert_eq!(
                program.vectorized_loops(index),
                Some(want_simd),
                "{what} over {cols}"
            );
        }
        let got =
            |slot: u64| ar.get::<f32>(((rows * cols + slot * rows) * 4) as usize, rows as usize);
        let (sums, maxes, mins, exps) = (got(0), got(1), got(2), got(3));
        for (o, row) in xs.chunks(cols as usize).enumerate() {
            // A vectorized sum adds in a different order: compare with a tolerance.
            let close = |got: f32, want: f32, what: &str| {
                assert!(
                    (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "cols {cols} row {o} {what}: {got} want {want}"
                );
            };
            close(sums[o], row.iter().map(|&x| x * 2.0).sum(), "sum");
            close(
                exps[o],
                row.iter().map(|&x| (x * 2.0).exp()).sum(),
                "sum of exp",
            );
            let doubled = row.iter().map(|&x| x * 2.0);
            assert_eq!(
                maxes[o],
                doubled.clone().fold(f32::NEG_INFINITY, f32::max),
                "cols {cols} row {o}"
            );
            assert_eq!(
                mins[o],
                doubled.fold(f32::INFINITY, f32::min),
                "cols {cols} row {o}"
            );
        }
    }
}

#[test]
fn empty_extents_run_nothing_or_give_the_init() {
    // inner extent 0: the reduction yields its init; an outer extent of 0 runs nothing.
    let mut r = Insts::default();
    r.load(Scalar::F32, 0);
    let mut s = Insts::default();
    let a = s.acc(Scalar::F32, 0);
    let k = loop_kernel(
        "empty",
        &[3],
        &[0],
        vec![
            arena(Scalar::F32, 0, &[0, 1]),
            arena(Scalar::F32, 0, &[1, 0]),
        ],
        vec![
            Stage::Reduce {
                insts: r.0,
                value: 0,
                op: ReduceOp::Sum,
                init: f64_bits(4.5),
                ty: Scalar::F32,
            },
            once(s, &[(1, a)]),
        ],
    );
    let mut b = Insts::default();
    let c = b.float(Scalar::F32, 9.0);
    let none = loop_kernel(
        "none",
        &[2, 0],
        &[],
        vec![arena(Scalar::F32, 0, &[0, 1])],
        vec![map(b, &[(0, c)])],
    );
    let mut ar = Buf::new(16);
    run(&[k, none], &mut ar, &Buf::new(0));
    assert_eq!(ar.get::<f32>(0, 4), [4.5, 4.5, 4.5, 0.0]);
}

/// (Instructions typed with a storage type such as f16 are refused too: `storage_types.rs`.)
#[test]
fn bool_arithmetic_is_unsupported() {
    let k = binary_kernel(BinaryOp::Add, Scalar::Bool, 4, 4, 8);
    match CpuProgram::compile(&[&k]) {
        Err(CpuError::Unsupported { message, .. }) => {
            assert!(message.contains("Add of bool"), "{message}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("bool addition compiled"),
    }
}

#[test]
fn host_simd_features_are_enabled() {
    let flags = host_isa_flags().expect("the host ISA is supported");
    let enabled = |name: &str| flags.iter().any(|&(n, on)| n == name && on);
    #[cfg(target_arch = "x86_64")]
    {
        for (feature, flag) in [
            ("sse4.1", "has_sse41"),
            ("avx", "has_avx"),
            ("fma", "has_fma"),
        ] {
            let host_has = match feature {
                "sse4.1" => std::is_x86_feature_detected!("sse4.1"),
                "avx" => std::is_x86_feature_detected!("avx"),
                _ => std::is_x86_feature_detected!("fma"),
            };
            if host_has {
                assert!(
                    enabled(flag),
                    "the host has {feature} but Cranelift's {flag} is off: {flags:?}"
                );
            } else {
                println!("skipped: this host lacks {feature}");
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = enabled;
        println!("skipped: the feature check is for x86_64 hosts");
    }
}
