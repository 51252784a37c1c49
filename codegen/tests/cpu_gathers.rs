//! The CPU backend on guarded views (padding, max pooling) and indirect loads (gathers with
//! negative and out-of-range indices).
//!
//! Hand-built kernels run through `CpuProgram` and compared with plain Rust references
//! computed here (helpers in `common::kernels`).

mod common;

use common::kernels::*;
use memc_codegen::kernel::{
    f64_bits, Guard, IndirectIndex, InstKind, ReduceOp, Region, Scalar, Stage,
};

#[test]
fn guarded_view_pads() {
    // 1-D: out[9] = pad(x[5], 2 each side, -1.5).
    let xs: [f32; 5] = [1.0, 2.0, 3.0, 4.0, 5.0];
    let mut ar = Buf::new(20 + 36);
    ar.put(0, &xs);
    let mut input = arena(Scalar::F32, -8, &[1]);
    input.guards = vec![Guard {
        coeffs: vec![1],
        offset: -2,
        limit: 5,
    }];
    input.pad = f64_bits(-1.5);
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let k = loop_kernel(
        "pad",
        &[9],
        &[],
        vec![input, arena(Scalar::F32, 20, &[1])],
        vec![map(b, &[(1, x)])],
    );
    run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(
        ar.get::<f32>(20, 9),
        [-1.5, -1.5, 1.0, 2.0, 3.0, 4.0, 5.0, -1.5, -1.5]
    );

    // 2-D, guard on the row axis too: out[4, 4] = pad(x[2, 3], top 1, left 1, i32 pad 7).
    let xs: [i32; 6] = [1, 2, 3, 4, 5, 6];
    let mut ar = Buf::new(24 + 64);
    ar.put(0, &xs);
    let mut input = arena(Scalar::I32, -16, &[3, 1]);
    input.guards = vec![
        Guard {
            coeffs: vec![1, 0],
            offset: -1,
            limit: 2,
        },
        Guard {
            coeffs: vec![0, 1],
            offset: -1,
            limit: 3,
        },
    ];
    input.pad = f64_bits(7.0);
    let mut b = Insts::default();
    let x = b.load(Scalar::I32, 0);
    let k = loop_kernel(
        "pad2",
        &[4, 4],
        &[],
        vec![input, arena(Scalar::I32, 24, &[4, 1])],
        vec![map(b, &[(1, x)])],
    );
    run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(
        ar.get::<i32>(24, 16),
        [7, 7, 7, 7, 7, 1, 2, 3, 7, 4, 5, 6, 7, 7, 7, 7]
    );
}

#[test]
fn max_pool_with_guards_on_inner_axes() {
    // 1-D max pool, window 3, padding 1: out[o] = max(x[o - 1 + w]) for w in 0..3, pad -inf.
    let xs: [f32; 6] = [3.0, -1.0, 4.0, 1.0, -5.0, 9.0];
    let mut ar = Buf::new(24 + 24);
    ar.put(0, &xs);
    let mut input = arena(Scalar::F32, -4, &[1, 1]);
    input.guards = vec![Guard {
        coeffs: vec![1, 1],
        offset: -1,
        limit: 6,
    }];
    input.pad = f64_bits(f64::NEG_INFINITY);
    let mut r = Insts::default();
    r.load(Scalar::F32, 0);
    let mut s = Insts::default();
    let a = s.acc(Scalar::F32, 0);
    let k = loop_kernel(
        "maxpool",
        &[6],
        &[3],
        vec![input, arena(Scalar::F32, 24, &[1, 0])],
        vec![
            Stage::Reduce {
                insts: r.0,
                value: 0,
                op: ReduceOp::Max,
                init: f64_bits(f64::NEG_INFINITY),
                ty: Scalar::F32,
            },
            once(s, &[(1, a)]),
        ],
    );
    run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(ar.get::<f32>(24, 6), [3.0, 4.0, 4.0, 4.0, 9.0, 9.0]);
}

#[test]
fn gather_wraps_negative_indices_and_clamps() {
    // data [5, 3] in the weights; out[i, j] = data[idx[i], j].
    let data: Vec<f32> = (0..15).map(|i| i as f32 * 10.0).collect();
    let idx: [i64; 6] = [0, -1, 2, -5, 7, -9];
    let mut w = Buf::new(60);
    w.put(0, &data);
    let mut ar = Buf::new(48 + 72);
    ar.put(0, &idx);
    let mut b = Insts::default();
    let i = b.load(Scalar::I64, 0);
    let x = b.push(
        Scalar::F32,
        InstKind::LoadIndirect {
            view: 1,
            indices: vec![IndirectIndex {
                index: i,
                stride: 3,
                limit: 5,
            }],
        },
    );
    let k = loop_kernel(
        "gather",
        &[6, 3],
        &[],
        vec![
            arena(Scalar::I64, 0, &[1, 0]),
            view(Region::Weights, Scalar::F32, 0, &[0, 1]),
            arena(Scalar::F32, 48, &[3, 1]),
        ],
        vec![map(b, &[(2, x)])],
    );
    run(&[k], &mut ar, &w);
    let rows = [0usize, 4, 2, 0, 4, 0]; // 7 clamps to 4; -9 wraps to -4, clamps to 0.
    let data = &data;
    let want: Vec<f32> = rows
        .iter()
        .flat_map(|&r| (0..3).map(move |j| data[r * 3 + j]))
        .collect();
    assert_eq!(ar.get::<f32>(48, 18), want);
}
