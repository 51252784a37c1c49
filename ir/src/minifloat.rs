//! The narrow float formats (f16, bf16, the four float8 formats and float4 E2M1) as codes,
//! and their exact conversions to and from `f32`: the one definition of those conversions,
//! which kernels implement when they load (widen) and store (narrow) such elements.
//!
//! Widening is exact: every code's value is an `f32` (NaN stays NaN, infinities stay
//! infinities). Narrowing ([`Format::encode`]) rounds to the nearest representable value, ties
//! to even, and then treats what is out of range as `numpy`'s `astype` with `ml_dtypes` does
//! (ONNX's reference for Cast with `saturate = 0`):
//!
//! | format       | overflow (after rounding), ±inf | NaN            | -0    |
//! |--------------|---------------------------------|----------------|-------|
//! | f16, bf16, E5M2 (IEEE) | ±inf                  | ±quiet NaN     | -0    |
//! | E4M3FN       | ±NaN (`S.1111.111`)             | ±NaN           | -0    |
//! | E4M3FNUZ, E5M2FNUZ | NaN (`0x80`)              | NaN (`0x80`)   | +0    |
//! | E2M1 (float4) | ±6 (saturates)                 | +NaN to -0, -NaN to +0 (as ml_dtypes) | -0 |
//!
//! Cast's `saturate = 1` (its default, for the float8 formats) first clamps the value to
//! `±max_finite` ([`Format::encode_saturating`]); infinities become `±max_finite`, NaN stays
//! NaN.
//!
//! float8 E8M0 (an exponent only, [`e8m0`]) has no sign and no mantissa; it narrows as Cast's
//! defaults say (`round_mode = "up"`, `saturate = 1`), on the f32 bits as onnx's reference
//! does. `ir/tests/conversions.rs` checks every conversion against a table that onnx's
//! reference computed (`ir/tests/data/conversions.py`).

use crate::ElemType;

/// How a format spends its largest exponent and its sign on special values.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Specials {
    /// IEEE 754: the largest exponent holds infinities (mantissa 0) and NaNs.
    Ieee,
    /// No infinities; the one NaN per sign is every exponent and mantissa bit set ("FN").
    FiniteNan,
    /// No infinities and no negative zero: the code of -0 (`0x80`) is the one NaN ("FNUZ").
    FiniteNanUnsignedZero,
    /// No infinities and no NaN: overflow saturates (float4 E2M1).
    Finite,
}

/// A narrow float format: sign bit, `exp_bits` exponent bits with `bias`, `man_bits` mantissa
/// bits, and how it encodes specials. Codes are the low `1 + exp_bits + man_bits` bits of a
/// `u32`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Format {
    pub exp_bits: u32,
    pub man_bits: u32,
    pub bias: i32,
    pub specials: Specials,
}

pub const F16: Format = Format {
    exp_bits: 5,
    man_bits: 10,
    bias: 15,
    specials: Specials::Ieee,
};
pub const BF16: Format = Format {
    exp_bits: 8,
    man_bits: 7,
    bias: 127,
    specials: Specials::Ieee,
};
pub const F8E4M3FN: Format = Format {
    exp_bits: 4,
    man_bits: 3,
    bias: 7,
    specials: Specials::FiniteNan,
};
pub const F8E4M3FNUZ: Format = Format {
    exp_bits: 4,
    man_bits: 3,
    bias: 8,
    specials: Specials::FiniteNanUnsignedZero,
};
pub const F8E5M2: Format = Format {
    exp_bits: 5,
    man_bits: 2,
    bias: 15,
    specials: Specials::Ieee,
};
pub const F8E5M2FNUZ: Format = Format {
    exp_bits: 5,
    man_bits: 2,
    bias: 16,
    specials: Specials::FiniteNanUnsignedZero,
};
pub const F4E2M1: Format = Format {
    exp_bits: 2,
    man_bits: 1,
    bias: 1,
    specials: Specials::Finite,
};

impl ElemType {
    /// The narrow float format of `self`: f16, bf16, the float8 and float4 types.
    pub fn minifloat_format(self) -> Option<Format> {
        Some(match self {
            ElemType::F16 => F16,
            ElemType::BF16 => BF16,
            ElemType::F8E4M3FN => F8E4M3FN,
            ElemType::F8E4M3FNUZ => F8E4M3FNUZ,
            ElemType::F8E5M2 => F8E5M2,
            ElemType::F8E5M2FNUZ => F8E5M2FNUZ,
            ElemType::F4E2M1 => F4E2M1,
            _ => return None,
        })
    }
}

impl Format {
    /// Bits of a code: sign, exponent and mantissa.
    pub fn bits(self) -> u32 {
        1 + self.exp_bits + self.man_bits
    }

    fn sign_bit(self) -> u32 {
        1 << (self.exp_bits + self.man_bits)
    }

    fn man_mask(self) -> u32 {
        (1 << self.man_bits) - 1
    }

    fn max_exp_field(self) -> u32 {
        (1 << self.exp_bits) - 1
    }

    /// The magnitude bits (exponent and mantissa) of the largest finite value.
    pub fn max_finite_code(self) -> u32 {
        let top = self.max_exp_field() << self.man_bits;
        match self.specials {
            Specials::Ieee => top - 1,
            Specials::FiniteNan => top | (self.man_mask() - 1),
            Specials::FiniteNanUnsignedZero | Specials::Finite => top | self.man_mask(),
        }
    }

    /// The largest finite value (448 for E4M3FN, 57344 for E5M2, 6 for E2M1).
    pub fn max_finite(self) -> f32 {
        self.decode(self.max_finite_code())
    }

    /// The value of `code` (its low [`Format::bits`] bits), exactly.
    pub fn decode(self, code: u32) -> f32 {
        let code = code & ((1 << self.bits()) - 1);
        let negative = code & self.sign_bit() != 0;
        let mag = code & (self.sign_bit() - 1);
        let exp = mag >> self.man_bits;
        let man = mag & self.man_mask();
        let special = match self.specials {
            Specials::Ieee if exp == self.max_exp_field() => {
                Some(if man == 0 { f32::INFINITY } else { f32::NAN })
            }
            Specials::FiniteNan if mag == self.sign_bit() - 1 => Some(f32::NAN),
            Specials::FiniteNanUnsignedZero if code == self.sign_bit() => {
                return f32::NAN;
            }
            _ => None,
        };
        let value = special.unwrap_or_else(|| {
            // Subnormals have exponent field 0 and no implicit bit.
            let (significand, e) = if exp == 0 {
                (f64::from(man), 1 - self.bias)
            } else {
                (
                    f64::from(man | (1 << self.man_bits)),
                    exp as i32 - self.bias,
                )
            };
            // Exact: at most 11 significant bits, scaled by a power of two in f32's range.
            (significand * 2f64.powi(e - self.man_bits as i32)) as f32
        });
        if negative {
            -value
        } else {
            value
        }
    }

    /// `x` rounded to the nearest code, ties to even; out-of-range values as the module doc
    /// says (`saturate = 0`).
    pub fn encode(self, x: f32) -> u32 {
        let sign = if x.is_sign_negative() {
            self.sign_bit()
        } else {
            0
        };
        if x.is_nan() {
            return self.nan_code(sign);
        }
        let mag = self.round_magnitude(f64::from(x.abs()));
        let mag = match mag {
            Some(m) if m <= self.max_finite_code() => m,
            // Out of range after rounding, or infinite.
            _ => match self.specials {
                Specials::Ieee => self.max_exp_field() << self.man_bits,
                Specials::FiniteNan => self.sign_bit() - 1,
                Specials::FiniteNanUnsignedZero => return self.sign_bit(),
                Specials::Finite => self.max_finite_code(),
            },
        };
        if mag == 0 && self.specials == Specials::FiniteNanUnsignedZero {
            // No negative zero.
            return 0;
        }
        sign | mag
    }

    /// Cast with `saturate = 1`: `x` clamped to `±max_finite` (infinities included), then
    /// [`Format::encode`]d; NaN stays NaN.
    pub fn encode_saturating(self, x: f32) -> u32 {
        let max = self.max_finite();
        self.encode(if x.is_nan() { x } else { x.clamp(-max, max) })
    }

    fn nan_code(self, sign: u32) -> u32 {
        match self.specials {
            // A quiet NaN: the top mantissa bit set.
            Specials::Ieee => {
                sign | (self.max_exp_field() << self.man_bits) | (1 << (self.man_bits - 1))
            }
            Specials::FiniteNan => sign | (self.sign_bit() - 1),
            Specials::FiniteNanUnsignedZero => self.sign_bit(),
            // No NaN: ml_dtypes gives the zero of the other sign.
            Specials::Finite => sign ^ self.sign_bit(),
        }
    }

    /// The magnitude code of `a` (finite or infinite, non-negative) rounded to nearest even,
    /// before any range check: may exceed every finite code; `None` for infinity.
    fn round_magnitude(self, a: f64) -> Option<u32> {
        if a.is_infinite() {
            return None;
        }
        if a == 0.0 {
            return Some(0);
        }
        let min_exp = 1 - self.bias;
        // floor(log2(a)), exact from the bits (a is a normal f64: it came from an f32).
        let e = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        let e = e.max(min_exp);
        // Scale so that one unit is one step of the mantissa at exponent e (exact).
        let q = a * 2f64.powi(self.man_bits as i32 - e);
        if q >= f64::from(u32::MAX) {
            return Some(u32::MAX);
        }
        let r = q.round_ties_even() as u32;
        if e == min_exp {
            // Subnormal, or the smallest normals (r may reach 1 << man_bits: exponent field 1).
            return Some(r);
        }
        // Normal: r in [2^m, 2^(m+1)]; 2^(m+1) carries into the next exponent.
        let (r, e) = if r == 2 << self.man_bits {
            (r >> 1, e + 1)
        } else {
            (r, e)
        };
        let exp_field = e + self.bias;
        if exp_field > self.max_exp_field() as i32 {
            return Some(u32::MAX);
        }
        Some(((exp_field as u32) << self.man_bits) | (r & self.man_mask()))
    }
}

/// float8 E8M0 (the OCP MX scale format): code `c` is `2^(c - 127)` (code 0 is `2^-127`, an
/// f32 subnormal), `0xFF` is NaN; no sign, zero or infinity.
pub mod e8m0 {
    /// The NaN code.
    pub const NAN: u32 = 0xff;

    /// The value of `code` (its low 8 bits), exactly.
    pub fn decode(code: u32) -> f32 {
        match code & 0xff {
            NAN => f32::NAN,
            // 2^-127 is the f32 subnormal with the top mantissa bit set.
            0 => f32::from_bits(0x0040_0000),
            c => f32::from_bits(c << 23),
        }
    }

    /// `x` as Cast with its defaults (`round_mode = "up"`, `saturate = 1`) narrows it, on the
    /// f32 bits as onnx's reference (`numpy_helper.to_float8e8m0`) does: the exponent field
    /// of `|x|`, plus one when any mantissa bit is set, at most `0xFE`; NaN and infinities give
    /// NaN. One deliberate difference: an f32 subnormal of at most 2^-127 rounds up to 2^-127
    /// (code 0), where the reference's bit rule gives 2^-126; so every code survives a load
    /// and a store (`encode(decode(c)) == c`).
    pub fn encode(x: f32) -> u32 {
        let bits = x.to_bits();
        let exponent = (bits >> 23) & 0xff;
        if exponent == 0xff {
            return NAN;
        }
        let mantissa = bits & 0x7f_ffff;
        if exponent == 0 {
            // Subnormal: up to 2^-127 (mantissa 2^22) is code 0, the rest rounds up to 2^-126.
            return u32::from(mantissa > 0x40_0000);
        }
        exponent + u32::from(mantissa != 0 && exponent != 0xfe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_finite_values() {
        assert_eq!(F8E4M3FN.max_finite(), 448.0);
        assert_eq!(F8E4M3FNUZ.max_finite(), 240.0);
        assert_eq!(F8E5M2.max_finite(), 57344.0);
        assert_eq!(F8E5M2FNUZ.max_finite(), 57344.0);
        assert_eq!(F4E2M1.max_finite(), 6.0);
        assert_eq!(F16.max_finite(), 65504.0);
        assert_eq!(BF16.max_finite(), f32::from_bits(0x7f7f_0000));
    }

    #[test]
    fn f16_and_bf16_agree_with_the_half_crate() {
        for code in 0..=u16::MAX {
            let want = half::f16::from_bits(code).to_f32();
            let got = F16.decode(u32::from(code));
            assert!(got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan());
            let want = half::bf16::from_bits(code).to_f32();
            let got = BF16.decode(u32::from(code));
            assert!(got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan());
        }
        // Every f32 with a 16-bit step through the space, plus its neighbours.
        for hi in 0..=u16::MAX as u32 {
            for low in [
                0u32, 1, 0x0fff, 0x1000, 0x1001, 0x7fff, 0x8000, 0x8001, 0xffff,
            ] {
                let x = f32::from_bits((hi << 16) | low);
                if x.is_nan() {
                    continue;
                }
                assert_eq!(
                    F16.encode(x),
                    u32::from(half::f16::from_f32(x).to_bits()),
                    "{x:e}"
                );
                assert_eq!(
                    BF16.encode(x),
                    u32::from(half::bf16::from_f32(x).to_bits()),
                    "{x:e}"
                );
            }
        }
    }

    #[test]
    fn e8m0_powers_of_two_round_trip_and_others_round_up() {
        for code in 0..0xffu32 {
            assert_eq!(e8m0::encode(e8m0::decode(code)), code);
        }
        assert!(e8m0::decode(0xff).is_nan());
        assert_eq!(e8m0::decode(127), 1.0);
        assert_eq!(e8m0::encode(1.1), 128);
        assert_eq!(e8m0::encode(-4.0), 129);
        assert_eq!(e8m0::encode(f32::MAX), 0xfe);
        assert_eq!(e8m0::encode(f32::INFINITY), 0xff);
    }

    #[test]
    fn every_code_round_trips() {
        for format in [F16, BF16, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, F4E2M1] {
            for code in 0..(1u32 << format.bits()) {
                let x = format.decode(code);
                if x.is_nan() {
                    assert!(format.decode(format.encode(x)).is_nan());
                    continue;
                }
                let back = format.encode(x);
                let fnuz_zero = format.specials == Specials::FiniteNanUnsignedZero && x == 0.0;
                assert!(
                    back == code || fnuz_zero,
                    "{format:?} {code:#x} {x} {back:#x}"
                );
            }
        }
    }
}
