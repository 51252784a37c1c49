//! Scalar values and arithmetic of the reference backend, written from the kernel contract in
//! [`crate::kernel`] and nothing else.
//!
//! A value is held wide: floats as `f64`, rounded to their kernel type after every operation;
//! integers and bools as `i128`, wrapped to their kernel type after every operation. So a
//! result is what the contract says the typed operation gives, without relying on host
//! arithmetic of the narrow types. Values only ever have compute types: elements of storage
//! types are widened as they are decoded and narrowed as they are encoded
//! ([`Scalar::widen`], [`Scalar::narrow`]). No function here panics, whatever the operands: an
//! operation the contract does not define for the operands' kind is returned as `None`.

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

/// `x` rounded to float type `ty` (unchanged for F64 and non-float types).
pub(crate) fn round_float(ty: Scalar, x: f64) -> f64 {
    match ty.compute() {
        Scalar::F32 => f64::from(x as f32),
        _ => x,
    }
}

/// `i` wrapped to integer type `ty` (bools become 0 or 1; a storage type wraps to its compute
/// type).
pub(crate) fn wrap(ty: Scalar, i: i128) -> i128 {
    match ty.compute() {
        Scalar::Bool => i128::from(i != 0),
        Scalar::I8 => i128::from(i as i8),
        Scalar::I16 => i128::from(i as i16),
        Scalar::I32 => i128::from(i as i32),
        Scalar::I64 => i128::from(i as i64),
        Scalar::U8 => i128::from(i as u8),
        Scalar::U16 => i128::from(i as u16),
        Scalar::U32 => i128::from(i as u32),
        Scalar::U64 => i128::from(i as u64),
        _ => i,
    }
}

fn int_bounds(ty: Scalar) -> (i128, i128) {
    match ty.compute() {
        Scalar::Bool => (0, 1),
        Scalar::I8 => (i8::MIN.into(), i8::MAX.into()),
        Scalar::I16 => (i16::MIN.into(), i16::MAX.into()),
        Scalar::I32 => (i32::MIN.into(), i32::MAX.into()),
        Scalar::I64 => (i64::MIN.into(), i64::MAX.into()),
        Scalar::U8 => (0, u8::MAX.into()),
        Scalar::U16 => (0, u16::MAX.into()),
        Scalar::U32 => (0, u32::MAX.into()),
        _ => (0, u64::MAX.into()),
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

/// The element of type `ty` in the little-endian bytes `raw` (exactly `ty.size()` of them), as
/// a value of its compute type (a storage type's element widened).
pub(crate) fn decode(ty: Scalar, raw: &[u8]) -> V {
    let mut b = [0u8; 8];
    let w = raw.len().min(8);
    b[..w].copy_from_slice(&raw[..w]);
    let [b0, b1, b2, b3, ..] = b;
    let code = u64::from_le_bytes(b);
    if ty.is_storage_only() {
        let value = ty.widen(code);
        return match ty.compute() {
            Scalar::F32 => V::F(f64::from_bits(value)),
            c if c.is_signed_int() => V::I(i128::from(value as i64)),
            _ => V::I(i128::from(value)),
        };
    }
    match ty {
        Scalar::F32 => V::F(f64::from(f32::from_le_bytes([b0, b1, b2, b3]))),
        Scalar::F64 => V::F(f64::from_le_bytes(b)),
        Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64 => {
            V::I(wrap(ty, i128::from(code as i64)))
        }
        _ => V::I(i128::from(code)),
    }
}

/// The little-endian bytes of `v` (of `ty`'s compute type) in type `ty` (the first `ty.size()`
/// of the eight): a storage type's value narrowed.
pub(crate) fn encode(ty: Scalar, v: V) -> [u8; 8] {
    if ty.is_storage_only() {
        let value = if ty.is_float() {
            v.f().to_bits()
        } else {
            v.i() as i64 as u64
        };
        return ty.narrow(value).to_le_bytes();
    }
    match ty {
        Scalar::F32 => {
            let mut r = [0u8; 8];
            r[..4].copy_from_slice(&(v.f() as f32).to_le_bytes());
            r
        }
        Scalar::F64 => v.f().to_le_bytes(),
        _ => (v.i() as i64).to_le_bytes(),
    }
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
    fn storage_types_widen_on_decode_and_narrow_on_encode() {
        // f16 1.0 is 0x3c00; 1 + 2^-11 is halfway to the next f16 and rounds to even (1.0).
        assert_eq!(decode(Scalar::F16, &[0x00, 0x3c]), V::F(1.0));
        assert_eq!(
            encode(Scalar::F16, V::F(1.0 + 2f64.powi(-11)))[..2],
            [0x00, 0x3c]
        );
        // int4 keeps the low four bits and sign-extends them.
        assert_eq!(decode(Scalar::I4, &[0xf9]), V::I(-7));
        assert_eq!(encode(Scalar::I4, V::I(-7))[0], 0x09);
        assert_eq!(encode(Scalar::U2, V::I(7))[0], 0x03);
        // E4M3FN overflows to NaN, E5M2 to infinity.
        assert_eq!(encode(Scalar::F8E4M3FN, V::F(1e6))[0], 0x7f);
        assert_eq!(encode(Scalar::F8E5M2, V::F(-1e6))[0], 0xfc);
    }

    #[test]
    fn integer_pow_wraps() {
        let r = binary(BinaryOp::Pow, Scalar::I32, V::I(3), V::I(40));
        assert_eq!(r, Some(V::I(wrap(Scalar::I32, 3i128.pow(40)))));
    }
}
