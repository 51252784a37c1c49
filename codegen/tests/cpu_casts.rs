//! The CPU backend on casts (saturating float to integer, NaN to zero, integer and bool casts)
//! and selects.
//!
//! Hand-built kernels run through `CpuProgram` and compared with plain Rust references
//! computed here (helpers in `common::kernels`).

mod common;

use common::kernels::*;
use memc_codegen::kernel::{BinaryOp, Scalar};

#[test]
fn float_casts_saturate_and_send_nan_to_zero() {
    let xs: [f32; 8] = [
        300.0,
        -300.0,
        f32::NAN,
        2.7,
        -2.7,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
    ];
    let mut ar = Buf::new(64);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::F32, Scalar::I8, 8, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i8>(32, 8), [127, -128, 0, 2, -2, 127, -128, 0]);
    run(
        &[cast_kernel(Scalar::F32, Scalar::U8, 8, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(32, 8), [255, 0, 0, 2, 0, 255, 0, 0]);
    run(
        &[cast_kernel(Scalar::F32, Scalar::I32, 8, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(
        ar.get::<i32>(32, 8),
        [300, -300, 0, 2, -2, i32::MAX, i32::MIN, 0]
    );
    run(
        &[cast_kernel(Scalar::F32, Scalar::U16, 8, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u16>(32, 8), [300, 0, 0, 2, 0, u16::MAX, 0, 0]);
    run(
        &[cast_kernel(Scalar::F32, Scalar::Bool, 8, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(32, 8), [1, 1, 1, 1, 1, 1, 1, 0]);

    let xs: [f64; 5] = [1e30, -1.0, f64::NAN, 4e9, 18446744073709549568.0];
    let mut ar = Buf::new(80);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::F64, Scalar::U64, 5, 40)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(
        ar.get::<u64>(40, 5),
        [u64::MAX, 0, 0, 4_000_000_000, 18446744073709549568]
    );
    run(
        &[cast_kernel(Scalar::F64, Scalar::U32, 5, 40)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(
        ar.get::<u32>(40, 5),
        [u32::MAX, 0, 0, 4_000_000_000, u32::MAX]
    );
    run(
        &[cast_kernel(Scalar::F64, Scalar::I64, 5, 40)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(
        ar.get::<i64>(40, 5),
        [i64::MAX, -1, 0, 4_000_000_000, i64::MAX]
    );
    run(
        &[cast_kernel(Scalar::F64, Scalar::F32, 5, 40)],
        &mut ar,
        &Buf::new(0),
    );
    let got = ar.get::<f32>(40, 5);
    for i in 0..5 {
        assert!(same_f32(got[i], xs[i] as f32));
    }
}

#[test]
fn integer_and_bool_casts() {
    let xs: [i64; 4] = [300, -1, -129, 1 << 40];
    let mut ar = Buf::new(64);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::I64, Scalar::I8, 4, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i8>(32, 4), [44, -1, 127, 0]);
    run(
        &[cast_kernel(Scalar::I64, Scalar::Bool, 4, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(32, 4), [1, 1, 1, 1]);
    run(
        &[cast_kernel(Scalar::I64, Scalar::F32, 4, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(
        ar.get::<f32>(32, 4),
        [300.0, -1.0, -129.0, (1u64 << 40) as f32]
    );

    let xs: [i8; 3] = [-1, 5, -128];
    let mut ar = Buf::new(32);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::I8, Scalar::I64, 3, 8)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i64>(8, 3), [-1, 5, -128]);
    run(
        &[cast_kernel(Scalar::I8, Scalar::U32, 3, 8)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u32>(8, 3), [u32::MAX, 5, 0xFFFF_FF80]);
    run(
        &[cast_kernel(Scalar::I8, Scalar::F64, 3, 8)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<f64>(8, 3), [-1.0, 5.0, -128.0]);

    let xs: [u8; 3] = [255, 0, 128];
    let mut ar = Buf::new(32);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::U8, Scalar::I32, 3, 4)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i32>(4, 3), [255, 0, 128]);
    run(
        &[cast_kernel(Scalar::U8, Scalar::F32, 3, 4)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<f32>(4, 3), [255.0, 0.0, 128.0]);

    let xs: [u64; 2] = [u64::MAX, 1 << 63];
    let mut ar = Buf::new(32);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::U64, Scalar::F64, 2, 16)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<f64>(16, 2), [u64::MAX as f64, (1u64 << 63) as f64]);

    let xs: [u8; 2] = [1, 0];
    let mut ar = Buf::new(32);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::Bool, Scalar::F32, 2, 4)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<f32>(4, 2), [1.0, 0.0]);
    run(
        &[cast_kernel(Scalar::Bool, Scalar::I64, 2, 8)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i64>(8, 2), [1, 0]);
}

#[test]
fn select_picks_per_element() {
    // out = x > 0 ? x : 0.1 * x (leaky relu).
    let xs: Vec<f32> = (0..11).map(|i| i as f32 - 5.0).collect();
    let mut ar = Buf::new(88);
    ar.put(0, &xs);
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let zero = b.float(Scalar::F32, 0.0);
    let slope = b.float(Scalar::F32, 0.1);
    let pos = b.bin(BinaryOp::Gt, x, zero);
    let scaled = b.bin(BinaryOp::Mul, x, slope);
    let y = b.select(pos, x, scaled);
    let k = loop_kernel(
        "leaky",
        &[11],
        &[],
        vec![arena(Scalar::F32, 0, &[1]), arena(Scalar::F32, 44, &[1])],
        vec![map(b, &[(1, y)])],
    );
    run(&[k], &mut ar, &Buf::new(0));
    let want: Vec<f32> = xs
        .iter()
        .map(|&x| if x > 0.0 { x } else { x * 0.1f32 })
        .collect();
    assert_eq!(ar.get::<f32>(44, 11), want);
}
