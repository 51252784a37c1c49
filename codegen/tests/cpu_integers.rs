//! The CPU backend on integer arithmetic: every binary op without traps (zero divisors,
//! overflow), division and floor-mod at every width, shifts past the width, unary integer ops,
//! bool logic.
//!
//! Hand-built kernels run through `CpuProgram` and compared with plain Rust references
//! computed here (helpers in `common::kernels`).

mod common;

use common::kernels::*;
use memc_codegen::kernel::{BinaryOp, Scalar, UnaryOp};

fn i32_pairs() -> Vec<(i32, i32)> {
    let vals = [0, 1, -1, 7, -7, 3, -3, 2, i32::MIN, i32::MAX, 100, -100];
    vals.iter()
        .flat_map(|&a| vals.iter().map(move |&b| (a, b)))
        .collect()
}

fn ref_i32(op: BinaryOp, a: i32, b: i32) -> i32 {
    match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Div => {
            if b == 0 {
                0
            } else {
                a.wrapping_div(b)
            }
        }
        BinaryOp::Rem => {
            if b == 0 {
                0
            } else {
                a.wrapping_rem(b)
            }
        }
        BinaryOp::FloorMod => {
            if b == 0 {
                0
            } else {
                let r = a.wrapping_rem(b);
                if r != 0 && ((r < 0) != (b < 0)) {
                    r.wrapping_add(b)
                } else {
                    r
                }
            }
        }
        BinaryOp::Min => a.min(b),
        BinaryOp::Max => a.max(b),
        BinaryOp::BitAnd => a & b,
        BinaryOp::BitOr => a | b,
        BinaryOp::BitXor => a ^ b,
        BinaryOp::Pow => {
            if b < 0 {
                match a {
                    1 => 1,
                    -1 => {
                        if b % 2 == 0 {
                            1
                        } else {
                            -1
                        }
                    }
                    _ => 0,
                }
            } else {
                a.wrapping_pow(b as u32)
            }
        }
        BinaryOp::Eq => (a == b) as i32,
        BinaryOp::Lt => (a < b) as i32,
        BinaryOp::Le => (a <= b) as i32,
        BinaryOp::Gt => (a > b) as i32,
        BinaryOp::Ge => (a >= b) as i32,
        _ => unreachable!(),
    }
}

#[test]
fn i32_binary_ops_never_trap() {
    let pairs: Vec<(i32, i32)> = i32_pairs();
    let n = pairs.len();
    let (xs, ys): (Vec<i32>, Vec<i32>) = pairs.iter().copied().unzip();
    let ops = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::FloorMod,
        BinaryOp::Min,
        BinaryOp::Max,
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
        BinaryOp::Pow,
        BinaryOp::Eq,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
    ];
    for op in ops {
        let mut ar = Buf::new(n * 12);
        ar.put(0, &xs);
        ar.put(n * 4, &ys);
        run(
            &[binary_kernel(
                op,
                Scalar::I32,
                n as u64,
                (n * 4) as i64,
                (n * 8) as i64,
            )],
            &mut ar,
            &Buf::new(0),
        );
        for i in 0..n {
            let got = if op.is_comparison() {
                ar.get::<u8>(n * 8 + i, 1)[0] as i32
            } else {
                ar.get::<i32>(n * 8 + i * 4, 1)[0]
            };
            assert_eq!(
                got,
                ref_i32(op, xs[i], ys[i]),
                "{op:?}({}, {})",
                xs[i],
                ys[i]
            );
        }
    }
}

#[test]
fn narrow_and_wide_integer_division_and_floor_mod() {
    // i8: -128 / -1 wraps, x / 0 = 0, floor mod takes the divisor's sign.
    let xs: [i8; 6] = [-128, 7, -7, 7, -7, 5];
    let ys: [i8; 6] = [-1, 0, 2, -2, -2, 3];
    for (op, want) in [
        (BinaryOp::Div, [-128i8, 0, -3, -3, 3, 1]),
        (BinaryOp::Rem, [0, 0, -1, 1, -1, 2]),
        (BinaryOp::FloorMod, [0, 0, 1, -1, -1, 2]),
    ] {
        let mut ar = Buf::new(18);
        ar.put(0, &xs);
        ar.put(6, &ys);
        run(
            &[binary_kernel(op, Scalar::I8, 6, 6, 12)],
            &mut ar,
            &Buf::new(0),
        );
        assert_eq!(ar.get::<i8>(12, 6), want, "i8 {op:?}");
    }
    // i64 and u64.
    let xs: [i64; 4] = [i64::MIN, -9, 9, 5];
    let ys: [i64; 4] = [-1, 4, -4, 0];
    let mut ar = Buf::new(96);
    ar.put(0, &xs);
    ar.put(32, &ys);
    run(
        &[binary_kernel(BinaryOp::FloorMod, Scalar::I64, 4, 32, 64)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i64>(64, 4), [0, 3, -3, 0]);
    let xs: [u64; 3] = [u64::MAX, 10, 10];
    let ys: [u64; 3] = [2, 0, 3];
    for (op, want) in [
        (BinaryOp::Div, [u64::MAX / 2, 0, 3]),
        (BinaryOp::FloorMod, [1, 0, 1]),
    ] {
        let mut ar = Buf::new(72);
        ar.put(0, &xs);
        ar.put(24, &ys);
        run(
            &[binary_kernel(op, Scalar::U64, 3, 24, 48)],
            &mut ar,
            &Buf::new(0),
        );
        assert_eq!(ar.get::<u64>(48, 3), want, "u64 {op:?}");
    }
}

#[test]
fn shifts_past_the_width_give_zero() {
    let xs: [u32; 6] = [1, 0x8000_0001, 5, 5, 5, u32::MAX];
    let ys: [u32; 6] = [31, 1, 32, 33, 1000, 0];
    for (op, f) in [
        (
            BinaryOp::Shl,
            (|a: u32, b: u32| if b >= 32 { 0 } else { a << b }) as fn(u32, u32) -> u32,
        ),
        (
            BinaryOp::Shr,
            |a: u32, b: u32| if b >= 32 { 0 } else { a >> b },
        ),
    ] {
        let mut ar = Buf::new(72);
        ar.put(0, &xs);
        ar.put(24, &ys);
        run(
            &[binary_kernel(op, Scalar::U32, 6, 24, 48)],
            &mut ar,
            &Buf::new(0),
        );
        let want: Vec<u32> = xs.iter().zip(&ys).map(|(&a, &b)| f(a, b)).collect();
        assert_eq!(ar.get::<u32>(48, 6), want, "{op:?}");
    }
    let xs: [u8; 4] = [0x81, 0x81, 3, 3];
    let ys: [u8; 4] = [1, 7, 8, 255];
    let mut ar = Buf::new(12);
    ar.put(0, &xs);
    ar.put(4, &ys);
    run(
        &[binary_kernel(BinaryOp::Shl, Scalar::U8, 4, 4, 8)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(8, 4), [0x02, 0x80, 0, 0]);
}

#[test]
fn integer_unary_ops() {
    let xs: [i16; 5] = [0, 5, -5, i16::MIN, i16::MAX];
    for (op, want) in [
        (UnaryOp::Neg, [0i16, -5, 5, i16::MIN, -i16::MAX]),
        (UnaryOp::Abs, [0, 5, 5, i16::MIN, i16::MAX]),
        (UnaryOp::Sign, [0, 1, -1, -1, 1]),
        (UnaryOp::BitNot, [-1, !5, !-5, i16::MAX, i16::MIN]),
    ] {
        let mut ar = Buf::new(20);
        ar.put(0, &xs);
        run(
            &[unary_kernel(op, Scalar::I16, Scalar::I16, 5, 10)],
            &mut ar,
            &Buf::new(0),
        );
        assert_eq!(ar.get::<i16>(10, 5), want, "{op:?}");
    }
    let xs: [u8; 3] = [0, 9, 255];
    let mut ar = Buf::new(6);
    ar.put(0, &xs);
    run(
        &[unary_kernel(UnaryOp::Sign, Scalar::U8, Scalar::U8, 3, 3)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(3, 3), [0, 1, 1]);
    let bools: [u8; 2] = [0, 1];
    let mut ar = Buf::new(4);
    ar.put(0, &bools);
    run(
        &[unary_kernel(UnaryOp::Not, Scalar::Bool, Scalar::Bool, 2, 2)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(2, 2), [1, 0]);
}

#[test]
fn bool_logic_and_unsigned_pow() {
    let xs: [u8; 4] = [0, 0, 1, 1];
    let ys: [u8; 4] = [0, 1, 0, 1];
    for (op, want) in [
        (BinaryOp::And, [0u8, 0, 0, 1]),
        (BinaryOp::Or, [0, 1, 1, 1]),
        (BinaryOp::Xor, [0, 1, 1, 0]),
    ] {
        let mut ar = Buf::new(12);
        ar.put(0, &xs);
        ar.put(4, &ys);
        run(
            &[binary_kernel(op, Scalar::Bool, 4, 4, 8)],
            &mut ar,
            &Buf::new(0),
        );
        assert_eq!(ar.get::<u8>(8, 4), want, "{op:?}");
    }
    let xs: [u16; 3] = [3, 2, 10];
    let ys: [u16; 3] = [4, 17, 0];
    let mut ar = Buf::new(18);
    ar.put(0, &xs);
    ar.put(6, &ys);
    run(
        &[binary_kernel(BinaryOp::Pow, Scalar::U16, 3, 6, 12)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u16>(12, 3), [81, 0, 1]);
}
