//! Number semantics that Rust's operators do not give directly: f16 encoding, directed
//! rounding, subnormal flushing, the PTX `min`/`max` rules and `cvt` between every pair of types.
//!
//! Everything here is exact: a conversion rounds once, from the exact source value, in the
//! requested mode.

use crate::parse::{Rnd, Ty};

/// Flushes an f32 subnormal to a zero of the same sign (`.ftz`).
#[inline(always)]
pub(crate) fn ftz32(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// Decodes an IEEE binary16 value exactly.
pub(crate) fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((h >> 10) & 0x1f);
    let m = f64::from(h & 0x3ff);
    let mag = match e {
        0 => m * 2f64.powi(-24),
        31 if m == 0.0 => f64::INFINITY,
        31 => return f64::NAN,
        _ => (1024.0 + m) * 2f64.powi(e - 25),
    };
    sign * mag
}

/// Rounds a non-negative finite `n` (an exact multiple count) to an integer in `mode`;
/// `neg` says whether the value it stands for is negative (directed modes depend on it).
fn round_count(n: f64, mode: Rnd, neg: bool) -> f64 {
    match mode {
        Rnd::Rz | Rnd::Rzi => n.trunc(),
        Rnd::Rm | Rnd::Rmi => {
            if neg {
                n.ceil()
            } else {
                n.floor()
            }
        }
        Rnd::Rp | Rnd::Rpi => {
            if neg {
                n.floor()
            } else {
                n.ceil()
            }
        }
        _ => n.round_ties_even(),
    }
}

/// The exponent of the highest set bit of a positive normal-or-subnormal f64.
fn ilog2(a: f64) -> i32 {
    let e = ((a.to_bits() >> 52) & 0x7ff) as i32;
    if e == 0 {
        -1075
    } else {
        e - 1023
    }
}

/// Rounds `x` to binary16 in `mode` (one rounding from the exact f64 value).
pub(crate) fn f64_to_f16(x: f64, mode: Rnd) -> u16 {
    if x.is_nan() {
        return 0x7fff;
    }
    let neg = x.is_sign_negative();
    let sign: u16 = if neg { 0x8000 } else { 0 };
    let a = x.abs();
    if a.is_infinite() {
        return sign | 0x7c00;
    }
    if a == 0.0 {
        return sign;
    }
    let e = ilog2(a).max(-14);
    let q = 2f64.powi(e - 10);
    let n = round_count(a / q, mode, neg);
    let v = n * q;
    if v >= 65536.0 {
        // Overflow: infinity, unless the mode rounds toward zero from this side.
        let to_inf = match mode {
            Rnd::Rz => false,
            Rnd::Rm => neg,
            Rnd::Rp => !neg,
            _ => true,
        };
        return sign | if to_inf { 0x7c00 } else { 0x7bff };
    }
    if v == 0.0 {
        return sign;
    }
    let ve = ilog2(v);
    if ve < -14 {
        sign | (v / 2f64.powi(-24)) as u16
    } else {
        let mant = (v / 2f64.powi(ve - 10)) as u16 - 1024;
        sign | (((ve + 15) as u16) << 10) | mant
    }
}

/// IEEE 754-2019 minimumNumber/maximumNumber, which is what PTX `min`/`max` compute: a NaN
/// operand is ignored unless both are NaN, and -0 orders below +0.
#[inline(always)]
pub(crate) fn fmin<T: Float>(a: T, b: T) -> T {
    if a.nan() {
        return if b.nan() { T::CANON_NAN } else { b };
    }
    if b.nan() {
        return a;
    }
    if a.lt(b) || (a.eq(b) && a.neg_sign()) {
        a
    } else {
        b
    }
}

#[inline(always)]
pub(crate) fn fmax<T: Float>(a: T, b: T) -> T {
    if a.nan() {
        return if b.nan() { T::CANON_NAN } else { b };
    }
    if b.nan() {
        return a;
    }
    if b.lt(a) || (a.eq(b) && !a.neg_sign()) {
        a
    } else {
        b
    }
}

/// The two float widths the arithmetic runs on.
pub(crate) trait Float: Copy {
    const CANON_NAN: Self;
    fn nan(self) -> bool;
    fn lt(self, o: Self) -> bool;
    fn eq(self, o: Self) -> bool;
    fn neg_sign(self) -> bool;
}

impl Float for f32 {
    const CANON_NAN: f32 = f32::from_bits(0x7fff_ffff);
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn lt(self, o: f32) -> bool {
        self < o
    }
    fn eq(self, o: f32) -> bool {
        self == o
    }
    fn neg_sign(self) -> bool {
        self.is_sign_negative()
    }
}

impl Float for f64 {
    const CANON_NAN: f64 = f64::from_bits(0x7fff_ffff_ffff_ffff);
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn lt(self, o: f64) -> bool {
        self < o
    }
    fn eq(self, o: f64) -> bool {
        self == o
    }
    fn neg_sign(self) -> bool {
        self.is_sign_negative()
    }
}

/// The exact value of a `cvt` source.
#[derive(Clone, Copy)]
enum Exact {
    Int(i128),
    Float(f64),
}

fn read_exact(v: u64, ty: Ty, ftz: bool) -> Exact {
    match ty {
        Ty::F16 => Exact::Float(f16_to_f64(v as u16)),
        Ty::F32 => {
            let x = f32::from_bits(v as u32);
            Exact::Float(f64::from(if ftz { ftz32(x) } else { x }))
        }
        Ty::F64 => Exact::Float(f64::from_bits(v)),
        t if t.signed() => Exact::Int(i128::from(t.ext(v) as i64)),
        t => Exact::Int(i128::from(t.ext(v))),
    }
}

fn int_range(ty: Ty) -> (i128, i128) {
    let bits = ty.bits();
    if ty.signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// Rounds an exact value to f32 in a directed or nearest mode.
fn to_f32(x: Exact, mode: Rnd) -> f32 {
    let r = match x {
        Exact::Int(i) => i as f32,
        Exact::Float(f) => f as f32,
    };
    if r.is_nan() {
        return r;
    }
    // How r compares with the exact value.
    let ord = match x {
        Exact::Int(i) => {
            if r.is_infinite() {
                if r > 0.0 {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Less
                }
            } else {
                (r as i128).cmp(&i)
            }
        }
        Exact::Float(f) => f64::from(r)
            .partial_cmp(&f)
            .unwrap_or(std::cmp::Ordering::Equal),
    };
    use std::cmp::Ordering::*;
    let neg = match x {
        Exact::Int(i) => i < 0,
        Exact::Float(f) => f < 0.0,
    };
    match (mode, ord) {
        (_, Equal) => r,
        (Rnd::Rz, Greater) if !neg => r.next_down(),
        (Rnd::Rz, Less) if neg => r.next_up(),
        (Rnd::Rm, Greater) => r.next_down(),
        (Rnd::Rp, Less) => r.next_up(),
        _ => r,
    }
}

fn to_f64(x: Exact, mode: Rnd) -> f64 {
    match x {
        Exact::Float(f) => f,
        Exact::Int(i) => {
            let r = i as f64;
            use std::cmp::Ordering::*;
            match (mode, (r as i128).cmp(&i)) {
                (_, Equal) => r,
                (Rnd::Rz, Greater) if i > 0 => r.next_down(),
                (Rnd::Rz, Less) if i < 0 => r.next_up(),
                (Rnd::Rm, Greater) => r.next_down(),
                (Rnd::Rp, Less) => r.next_up(),
                _ => r,
            }
        }
    }
}

/// `cvt.{rnd}{.ftz}{.sat}.dty.sty`: the register representation of the converted value.
pub(crate) fn cvt(v: u64, dty: Ty, sty: Ty, rnd: Rnd, sat: bool, ftz: bool) -> u64 {
    let x = read_exact(v, sty, ftz && sty == Ty::F32);
    if !dty.float() {
        let (lo, hi) = int_range(dty);
        let i = match x {
            Exact::Int(i) => {
                if sat {
                    i.clamp(lo, hi)
                } else {
                    i
                }
            }
            Exact::Float(f) => {
                if f.is_nan() {
                    0
                } else {
                    let r = round_count(f.abs(), rnd, f < 0.0);
                    let r = if f < 0.0 { -r } else { r };
                    // Float-to-integer conversions always saturate.
                    if r <= lo as f64 {
                        lo
                    } else if r >= hi as f64 {
                        hi
                    } else {
                        r as i128
                    }
                }
            }
        };
        return dty.ext(i as u64);
    }
    // Float destination.
    let x = match (x, rnd) {
        (Exact::Float(f), Rnd::Rni | Rnd::Rzi | Rnd::Rmi | Rnd::Rpi) if f.is_finite() => {
            let r = round_count(f.abs(), rnd, f < 0.0);
            Exact::Float(if f.is_sign_negative() { -r } else { r })
        }
        _ => x,
    };
    let clamp = |f: f64| if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
    match dty {
        Ty::F16 => {
            let f = match x {
                Exact::Int(i) => to_f64(Exact::Int(i), Rnd::Rz),
                Exact::Float(f) => f,
            };
            // Integers beyond 2^53 overflow binary16 whatever the rounding of this first step.
            let h = f64_to_f16(f, rnd);
            if sat {
                u64::from(f64_to_f16(clamp(f16_to_f64(h)), Rnd::Rn))
            } else {
                u64::from(h)
            }
        }
        Ty::F32 => {
            let mut r = to_f32(x, rnd);
            if ftz {
                r = ftz32(r);
            }
            if sat {
                r = clamp(f64::from(r)) as f32;
            }
            u64::from(r.to_bits())
        }
        _ => {
            let mut r = to_f64(x, rnd);
            if sat {
                r = clamp(r);
            }
            r.to_bits()
        }
    }
}
