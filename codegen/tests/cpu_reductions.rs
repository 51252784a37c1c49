//! The CPU backend on loop indices and reductions: `Index`, sums, products, extrema and
//! arg-extrema over inner axes, a middle-axis reduction, and softmax as Reduce, Reduce, Map.
//!
//! Hand-built kernels run through `CpuProgram` and compared with plain Rust references
//! computed here (helpers in `common::kernels`).

mod common;

use common::kernels::*;
use memc_codegen::kernel::{f64_bits, BinaryOp, Kernel, ReduceOp, Scalar, Stage};

#[test]
fn index_gives_loop_positions() {
    // Range: out[i] = 2.5 + 0.5 * i.
    let mut b = Insts::default();
    let i = b.index(0);
    let f = b.cast(i, Scalar::F32);
    let delta = b.float(Scalar::F32, 0.5);
    let start = b.float(Scalar::F32, 2.5);
    let scaled = b.bin(BinaryOp::Mul, f, delta);
    let y = b.bin(BinaryOp::Add, scaled, start);
    let range = loop_kernel(
        "range",
        &[7],
        &[],
        vec![arena(Scalar::F32, 0, &[1])],
        vec![map(b, &[(0, y)])],
    );
    // Two axes: out[i, j] = 10 * i + j as i64, on a 3 x 4 grid (rows are i).
    let mut b = Insts::default();
    let i = b.index(0);
    let j = b.index(1);
    let ten = b.int(Scalar::I64, 10);
    let ti = b.bin(BinaryOp::Mul, i, ten);
    let y = b.bin(BinaryOp::Add, ti, j);
    let grid = loop_kernel(
        "grid",
        &[3, 4],
        &[],
        vec![arena(Scalar::I64, 32, &[4, 1])],
        vec![map(b, &[(0, y)])],
    );
    let mut ar = Buf::new(32 + 96);
    run(&[range, grid], &mut ar, &Buf::new(0));
    let want: Vec<f32> = (0..7).map(|i| 2.5 + 0.5 * i as f32).collect();
    assert_eq!(ar.get::<f32>(0, 7), want);
    let want: Vec<i64> = (0..3)
        .flat_map(|i| (0..4).map(move |j| 10 * i + j))
        .collect();
    assert_eq!(ar.get::<i64>(32, 12), want);
}

/// `out[o] = reduce(x[o, :, :])` for x of shape [4, 3, 5] (inner axes 1 and 2).
fn reduce_kernel(op: ReduceOp, ty: Scalar, init: u64, acc_ty: Scalar, out_offset: i64) -> Kernel {
    let mut r = Insts::default();
    let x = r.load(ty, 0);
    let _ = x;
    let mut s = Insts::default();
    let a = s.acc(acc_ty, 0);
    loop_kernel(
        &format!("{op:?}"),
        &[4],
        &[3, 5],
        vec![
            arena(ty, 0, &[15, 5, 1]),
            arena(acc_ty, out_offset, &[1, 0, 0]),
        ],
        vec![
            Stage::Reduce {
                insts: r.0,
                value: 0,
                op,
                init,
                ty: acc_ty,
            },
            once(s, &[(1, a)]),
        ],
    )
}

#[test]
fn reductions_over_inner_axes() {
    let mut xs: Vec<f32> = (0..60).map(|i| ((i * 37) % 23) as f32 - 11.0).collect();
    xs[20] = f32::NAN; // Row 1 has a NaN.
    xs[47] = 12.0; // Row 3: a tie at the maximum, at inner positions 2 and 14.
    xs[59] = 12.0;
    xs[45] = -20.0; // Row 3's minimum.
    let kernels = vec![
        reduce_kernel(ReduceOp::Sum, Scalar::F32, f64_bits(0.0), Scalar::F32, 240),
        reduce_kernel(
            ReduceOp::Max,
            Scalar::F32,
            f64_bits(f64::NEG_INFINITY),
            Scalar::F32,
            256,
        ),
        reduce_kernel(
            ReduceOp::ArgMax { last: false },
            Scalar::F32,
            0,
            Scalar::I64,
            272,
        ),
        reduce_kernel(
            ReduceOp::ArgMax { last: true },
            Scalar::F32,
            0,
            Scalar::I64,
            304,
        ),
        reduce_kernel(
            ReduceOp::ArgMin { last: false },
            Scalar::F32,
            0,
            Scalar::I64,
            336,
        ),
        reduce_kernel(
            ReduceOp::Min,
            Scalar::F32,
            f64_bits(f64::INFINITY),
            Scalar::F32,
            368,
        ),
        reduce_kernel(ReduceOp::Prod, Scalar::F32, f64_bits(1.0), Scalar::F32, 384),
    ];
    let mut ar = Buf::new(400);
    ar.put(0, &xs);
    run(&kernels, &mut ar, &Buf::new(0));
    let rows: Vec<&[f32]> = xs.chunks(15).collect();
    let sums: Vec<f32> = rows
        .iter()
        .map(|r| r.iter().fold(0.0f32, |a, &b| a + b))
        .collect();
    let got = ar.get::<f32>(240, 4);
    for o in 0..4 {
        assert!(
            same_f32(got[o], sums[o]),
            "sum row {o}: {} want {}",
            got[o],
            sums[o]
        );
    }
    let maxes = ar.get::<f32>(256, 4);
    assert!(maxes[1].is_nan(), "Max propagates NaN");
    for o in [0, 2, 3] {
        assert_eq!(
            maxes[o],
            rows[o].iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b))
        );
    }
    let argmax_first = ar.get::<i64>(272, 4);
    let argmax_last = ar.get::<i64>(304, 4);
    assert_eq!(argmax_first[1], 5, "the NaN wins ArgMax");
    assert_eq!(argmax_first[3], 2);
    assert_eq!(argmax_last[3], 14);
    for o in [0, 2] {
        let best = rows[o].iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let first = rows[o].iter().position(|&v| v == best).unwrap() as i64;
        let last = rows[o].iter().rposition(|&v| v == best).unwrap() as i64;
        assert_eq!((argmax_first[o], argmax_last[o]), (first, last), "row {o}");
    }
    assert_eq!(ar.get::<i64>(336, 4)[3], 0);
    let mins = ar.get::<f32>(368, 4);
    assert_eq!(mins[3], -20.0);
    let prods = ar.get::<f32>(384, 4);
    assert_eq!(prods[0], rows[0].iter().fold(1.0f32, |a, &b| a * b));
}

#[test]
fn reduce_over_a_middle_axis() {
    // x [4, 3, 5] -> out [4, 5] summing axis 1: outer [4, 5], inner [3].
    let xs: Vec<i32> = (0..60).map(|i| i * 3 - 70).collect();
    let mut ar = Buf::new(240 + 80);
    ar.put(0, &xs);
    let mut r = Insts::default();
    r.load(Scalar::I32, 0);
    let mut s = Insts::default();
    let a = s.acc(Scalar::I32, 0);
    let k = loop_kernel(
        "sum1",
        &[4, 5],
        &[3],
        vec![
            arena(Scalar::I32, 0, &[15, 1, 5]),
            arena(Scalar::I32, 240, &[5, 1, 0]),
        ],
        vec![
            Stage::Reduce {
                insts: r.0,
                value: 0,
                op: ReduceOp::Sum,
                init: 0,
                ty: Scalar::I32,
            },
            once(s, &[(1, a)]),
        ],
    );
    run(&[k], &mut ar, &Buf::new(0));
    let got = ar.get::<i32>(240, 20);
    for o in 0..4 {
        for c in 0..5 {
            let want: i32 = (0..3).map(|m| xs[o * 15 + m * 5 + c]).sum();
            assert_eq!(got[o * 5 + c], want);
        }
    }
}

#[test]
fn softmax_reduce_reduce_map() {
    let (rows, cols) = (6usize, 10usize);
    let xs: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919) % 31) as f32 * 0.3 - 4.0)
        .collect();
    let mut ar = Buf::new(rows * cols * 8);
    ar.put(0, &xs);
    let kernel = softmax_kernel(rows as u64, cols as u64, (rows * cols * 4) as i64);
    let program = run(&[kernel], &mut ar, &Buf::new(0));
    assert_eq!(
        program.vectorized_loops(0),
        Some(3),
        "max, sum of exp and the map"
    );
    let got = ar.get::<f32>(rows * cols * 4, rows * cols);
    let want = softmax_reference(&xs, cols);
    for i in 0..rows * cols {
        assert!(
            (got[i] - want[i]).abs() <= 1e-6 * want[i].abs().max(1e-6),
            "at {i}: {} want {}",
            got[i],
            want[i]
        );
    }
}
