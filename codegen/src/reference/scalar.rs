//! Scalar values and arithmetic of the reference backend, written from the kernel contract in
//! [`crate::kernel`] and nothing else.
//!
//! A value is held wide: floats as `f64`, rounded to their kernel type after every operation;
//! integers and bools as `i128`, wrapped to their kernel type after every operation. So a
//! result is what the contract says the typed operation gives, without relying on host
//! arithmetic of the narrow types. No function here panics, whatever the operands: an operation
//! the contract does not define for the operands' kind is returned as `None`.

use crate::kernel::{BinaryOp, Scalar, UnaryOp};

/// A value: floats as `f64` (already rounded to their type), integers and bools as `i128`
/// (already wrapped to their type).
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) enum V {
    F(f64),
    I(i128),
}

impl V {
    pub(crate) fn f(self) -> f64 {
        match self {
            V::F(x) => x,
            V::I(i) => i as f64,
        }
    }

    pub(crate) fn i(self) -> i128 {
        match self {
            V::I(i) => i,
            V::F(x) => x as i128,
        }
    }
}

/// The value of IEEE half-precision bits.
pub fn f16_bits_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let frac = f64::from(bits & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}

/// `x` rounded to the nearest half-precision value (ties to even), as bits.
pub fn f64_to_f16_bits(x: f64) -> u16 {
    if x.is_nan() {
        return 0x7e00;
    }
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    // Round to the nearest multiple of the spacing at this magnitude, ties to even.
    let e = if a < 2f64.powi(-14) {
        -14
    } else {
        a.log2().floor() as i32
    };
    let spacing = 2f64.powi(e - 10);
    let q = a / spacing;
    let mut r = q.round();
    if (q - q.floor() - 0.5).abs() == 0.0 && r % 2.0 != 0.0 {
        r -= 1.0;
    }
    let v = r * spacing;
    if v == 0.0 {
        return sign;
    }
    if v < 2f64.powi(-14) {
        return sign | (v / 2f64.powi(-24)) as u16;
    }
    let e = v.log2().floor() as i32;
    let frac = ((v / 2f64.powi(e) - 1.0) * 1024.0).round() as u16;
    sign | (((e + 15) as u16) << 10) | frac
}

/// `x` rounded to float type `ty` (unchanged for F64 and non-float types).
pub(crate) fn round_float(ty: Scalar, x: f64) -> f64 {
    match ty {
        Scalar::F32 => f64::from(x as f32),
        Scalar::F16 => f16_bits_to_f64(f64_to_f16_bits(x)),
        _ => x,
    }
}

/// `i` wrapped to integer type `ty` (bools become 0 or 1).
pub(crate) fn wrap(ty: Scalar, i: i128) -> i128 {
    match ty {
        Scalar::Bool => i128::from(i != 0),
        Scalar::I8 => i128::from(i as i8),
        Scalar::I16 => i128::from(i as i16),
        Scalar::I32 => i128::from(i as i32),
        Scalar::I64 => i128::from(i as i64),
        Scalar::U8 => i128::from(i as u8),
        Scalar::U16 => i128::from(i as u16),
        Scalar::U32 => i128::from(i as u32),
        Scalar::U64 => i128::from(i as u64),
        Scalar::F16 | Scalar::F32 | Scalar::F64 => i,
    }
}

fn int_bounds(ty: Scalar) -> (i128, i128) {
    match ty {
        Scalar::Bool => (0, 1),
        Scalar::I8 => (i8::MIN.into(), i8::MAX.into()),
        Scalar::I16 => (i16::MIN.into(), i16::MAX.into()),
        Scalar::I32 => (i32::MIN.into(), i32::MAX.into()),
        Scalar::I64 => (i64::MIN.into(), i64::MAX.into()),
        Scalar::U8 => (0, u8::MAX.into()),
        Scalar::U16 => (0, u16::MAX.into()),
        Scalar::U32 => (0, u32::MAX.into()),
        Scalar::U64 | Scalar::F16 | Scalar::F32 | Scalar::F64 => (0, u64::MAX.into()),
    }
}

/// Converts `v` (of type `from`) to `to` as `InstKind::Cast` says: float to integer truncates
/// toward zero and saturates (NaN gives 0), to bool is `!= 0`, integer to integer wraps.
pub(crate) fn convert(v: V, from: Scalar, to: Scalar) -> V {
    if to == Scalar::Bool {
        return V::I(match v {
            V::F(x) => i128::from(x != 0.0),
            V::I(i) => i128::from(i != 0),
        });
    }
    if to.is_float() {
        return V::F(round_float(to, v.f()));
    }
    match v {
        V::F(x) if from.is_float() => {
            if x.is_nan() {
                return V::I(0);
            }
            let (lo, hi) = int_bounds(to);
            let t = x.trunc();
            V::I(if t <= lo as f64 {
                lo
            } else if t >= hi as f64 {
                hi
            } else {
                t as i128
            })
        }
        _ => V::I(wrap(to, v.i())),
    }
}

/// The value of `bits` (as in `InstKind::Const`: `f64` bits for floats, `i64`/`u64` bits for
/// integers and bools) in type `ty`.
pub(crate) fn const_value(ty: Scalar, bits: u64) -> V {
    if ty.is_float() {
        V::F(round_float(ty, f64::from_bits(bits)))
    } else if ty.is_unsigned_int() {
        V::I(wrap(ty, i128::from(bits)))
    } else {
        V::I(wrap(ty, i128::from(bits as i64)))
    }
}

/// The element of type `ty` in the little-endian bytes `raw` (exactly `ty.size()` of them).
pub(crate) fn decode(ty: Scalar, raw: &[u8]) -> V {
    let mut b = [0u8; 8];
    let w = raw.len().min(8);
    b[..w].copy_from_slice(&raw[..w]);
    let [b0, b1, b2, b3, ..] = b;
    match ty {
        Scalar::F32 => V::F(f64::from(f32::from_le_bytes([b0, b1, b2, b3]))),
        Scalar::F64 => V::F(f64::from_le_bytes(b)),
        Scalar::F16 => V::F(f16_bits_to_f64(u16::from_le_bytes([b0, b1]))),
        Scalar::Bool | Scalar::U8 | Scalar::U16 | Scalar::U32 | Scalar::U64 => {
            V::I(i128::from(u64::from_le_bytes(b)))
        }
        Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64 => {
            V::I(wrap(ty, i128::from(i64::from_le_bytes(b))))
        }
    }
}

/// The little-endian bytes of `v` in type `ty` (the first `ty.size()` of the eight).
pub(crate) fn encode(ty: Scalar, v: V) -> [u8; 8] {
    let mut r = [0u8; 8];
    match ty {
        Scalar::F32 => r[..4].copy_from_slice(&(v.f() as f32).to_le_bytes()),
        Scalar::F64 => r = v.f().to_le_bytes(),
        Scalar::F16 => r[..2].copy_from_slice(&f64_to_f16_bits(v.f()).to_le_bytes()),
        _ => r = (v.i() as i64).to_le_bytes(),
    }
    r
}

/// The error function, to about 1e-13 (a Taylor series near 0, a continued fraction of erfc
/// beyond).
pub(crate) fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 3.0 {
        let (mut term, mut sum) = (a, a);
        let x2 = a * a;
        for n in 1..200 {
            term *= -x2 / n as f64;
            let add = term / (2 * n + 1) as f64;
            sum += add;
            if add.abs() < 1e-17 * sum.abs() {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else if a < 30.0 {
        // erfc(a) = exp(-a^2) / sqrt(pi) * 1 / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))).
        let mut tail = a;
        for n in (1..80).rev() {
            tail = a + (n as f64 / 2.0) / tail;
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / tail
    } else {
        1.0
    };
    r.copysign(x)
}

/// A unary operation on a value of type `ty`; `None` where the contract does not define it
/// (a float function of an integer, `Not` of a float).
pub(crate) fn unary(op: UnaryOp, ty: Scalar, a: V) -> Option<V> {
    if let V::I(i) = a {
        return Some(V::I(match op {
            UnaryOp::Neg => wrap(ty, -i),
            UnaryOp::Abs => wrap(ty, i.abs()),
            UnaryOp::Sign => i.signum(),
            UnaryOp::Not => i128::from(i == 0),
            UnaryOp::BitNot => wrap(ty, !i),
            _ => return None,
        }));
    }
    let x = a.f();
    let r = match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x.is_nan() {
                x
            } else if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
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
        UnaryOp::Erf => erf(x),
        UnaryOp::IsNan => return Some(V::I(i128::from(x.is_nan()))),
        UnaryOp::IsPosInf => return Some(V::I(i128::from(x == f64::INFINITY))),
        UnaryOp::IsNegInf => return Some(V::I(i128::from(x == f64::NEG_INFINITY))),
        UnaryOp::Not | UnaryOp::BitNot => return None,
    };
    Some(V::F(round_float(ty, r)))
}

/// A binary operation on two values of type `operand_ty`; `None` where the contract does not
/// define it (a logical or bitwise op of floats).
pub(crate) fn binary(op: BinaryOp, operand_ty: Scalar, a: V, b: V) -> Option<V> {
    if op.is_comparison() {
        let r = match (a, b) {
            (V::I(x), V::I(y)) => match op {
                BinaryOp::Eq => x == y,
                BinaryOp::Lt => x < y,
                BinaryOp::Le => x <= y,
                BinaryOp::Gt => x > y,
                _ => x >= y,
            },
            _ => {
                let (x, y) = (a.f(), b.f());
                match op {
                    BinaryOp::Eq => x == y,
                    BinaryOp::Lt => x < y,
                    BinaryOp::Le => x <= y,
                    BinaryOp::Gt => x > y,
                    _ => x >= y,
                }
            }
        };
        return Some(V::I(i128::from(r)));
    }
    if operand_ty.is_float() {
        let (x, y) = (a.f(), b.f());
        let r = match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Rem => x % y,
            BinaryOp::FloorMod => {
                let r = x % y;
                if r != 0.0 && (r < 0.0) != (y < 0.0) {
                    r + y
                } else {
                    r
                }
            }
            BinaryOp::Pow => x.powf(y),
            BinaryOp::Min => {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.min(y)
                }
            }
            BinaryOp::Max => {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.max(y)
                }
            }
            _ => return None,
        };
        return Some(V::F(round_float(operand_ty, r)));
    }
    let (x, y) = (a.i(), b.i());
    let bits = operand_ty.size() as i128 * 8;
    let r = match op {
        BinaryOp::Add => x.wrapping_add(y),
        BinaryOp::Sub => x.wrapping_sub(y),
        BinaryOp::Mul => x.wrapping_mul(y),
        BinaryOp::Div => {
            if y == 0 {
                0
            } else {
                x.wrapping_div(y)
            }
        }
        BinaryOp::Rem => {
            if y == 0 {
                0
            } else {
                x.wrapping_rem(y)
            }
        }
        BinaryOp::FloorMod => {
            if y == 0 {
                0
            } else {
                let r = x.rem_euclid(y);
                r + if y < 0 && r != 0 { y } else { 0 }
            }
        }
        BinaryOp::Min => x.min(y),
        BinaryOp::Max => x.max(y),
        BinaryOp::And => i128::from(x != 0 && y != 0),
        BinaryOp::Or => i128::from(x != 0 || y != 0),
        BinaryOp::Xor => i128::from((x != 0) != (y != 0)),
        BinaryOp::BitAnd => x & y,
        BinaryOp::BitOr => x | y,
        BinaryOp::BitXor => x ^ y,
        BinaryOp::Shl => {
            if !(0..bits).contains(&y) {
                0
            } else {
                x << y
            }
        }
        BinaryOp::Shr => {
            if !(0..bits).contains(&y) {
                0
            } else {
                x >> y
            }
        }
        BinaryOp::Pow => {
            // Exponentiation by squaring, wrapped to the type after every product.
            let (mut r, mut base, mut e): (i128, i128, i128) = (1, x, y.max(0));
            while e > 0 {
                if e & 1 == 1 {
                    r = wrap(operand_ty, r.wrapping_mul(base));
                }
                base = wrap(operand_ty, base.wrapping_mul(base));
                e >>= 1;
            }
            r
        }
        _ => return None,
    };
    Some(V::I(wrap(operand_ty, r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.5, 0.999_999_256_901_627_7),
            (-1.0, -0.842_700_792_949_714_9),
        ] {
            assert!((erf(x) - want).abs() < 1e-12, "erf({x}) = {}", erf(x));
        }
    }

    #[test]
    fn f16_round_trips_every_finite_value() {
        for bits in 0u16..0x7c00 {
            assert_eq!(f64_to_f16_bits(f16_bits_to_f64(bits)), bits);
        }
    }

    #[test]
    fn integer_pow_wraps() {
        let r = binary(BinaryOp::Pow, Scalar::I32, V::I(3), V::I(40));
        assert_eq!(r, Some(V::I(wrap(Scalar::I32, 3i128.pow(40)))));
    }
}
