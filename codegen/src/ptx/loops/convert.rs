//! Loads and stores of the storage types (`kernel.rs`, "Element types") in PTX: the widening of
//! an element's bytes to its compute type's register and the narrowing of a value back, with
//! the semantics of `memc_ir::minifloat` (the reference's `Scalar::widen` and
//! `Scalar::narrow`), using only sm_80 instructions.
//!
//! f16 uses the hardware's `cvt` (round to nearest even, overflow to infinity); bf16 is the
//! high half of an f32 (narrowed by integer round-to-nearest-even); the float8 formats and
//! float4 are decoded and encoded with integer arithmetic on f32 bits (sm_80 has no float8
//! `cvt`); the sub-byte integers are masked and sign-extended.

use super::emit::{f32_imm, Cls, Em};
use crate::kernel::Scalar;
use memc_ir::minifloat::{Format, Specials};

/// The `ld`/`st` type of an element of `ty` in memory and the register class it is loaded into.
pub(super) fn memory_form(ty: Scalar) -> (&'static str, Cls) {
    match ty {
        Scalar::Bool | Scalar::U8 => ("u8", Cls::R),
        Scalar::I8 => ("s8", Cls::R),
        Scalar::I16 => ("s16", Cls::R),
        Scalar::U16 => ("u16", Cls::R),
        Scalar::I32 | Scalar::U32 => ("u32", Cls::R),
        Scalar::I64 | Scalar::U64 => ("u64", Cls::Rd),
        Scalar::F32 => ("f32", Cls::F),
        Scalar::F64 => ("f64", Cls::Fd),
        Scalar::F16 | Scalar::BF16 => ("b16", Cls::Rs),
        Scalar::F8E4M3FN
        | Scalar::F8E4M3FNUZ
        | Scalar::F8E5M2
        | Scalar::F8E5M2FNUZ
        | Scalar::F4E2M1
        | Scalar::F8E8M0
        | Scalar::I4
        | Scalar::U4
        | Scalar::I2
        | Scalar::U2 => ("u8", Cls::R),
    }
}

/// The `st` type of an element of `ty` (integers stored from their 32-bit register).
pub(super) fn store_form(ty: Scalar) -> &'static str {
    match ty {
        Scalar::Bool | Scalar::U8 | Scalar::I8 => "u8",
        Scalar::I16 | Scalar::U16 => "u16",
        other => memory_form(other).0,
    }
}

impl Em {
    /// `raw` (an element of `ty` as [`memory_form`] loads it) as a register of `ty`'s compute
    /// type.
    pub fn widen(&mut self, ty: Scalar, raw: &str) -> String {
        if let Some(bits) = ty.sub_byte_bits() {
            if ty.is_signed_int() {
                let shift = (32 - bits).to_string();
                let up = self.op2(Cls::R, "shl.b32", raw, &shift);
                return self.op2(Cls::R, "shr.s32", &up, &shift);
            }
            return self.op2(Cls::R, "and.b32", raw, &((1u32 << bits) - 1).to_string());
        }
        match ty {
            Scalar::F16 => self.op1(Cls::F, "cvt.f32.f16", raw),
            Scalar::BF16 => {
                let wide = self.op1(Cls::R, "cvt.u32.u16", raw);
                let high = self.op2(Cls::R, "shl.b32", &wide, "16");
                self.op1(Cls::F, "mov.b32", &high)
            }
            Scalar::F8E8M0 => self.decode_e8m0(raw),
            _ => match ty.float_format() {
                Some(format) => self.decode(format, raw),
                None => raw.to_string(),
            },
        }
    }

    /// `value` (a register of `ty`'s compute type) as the register [`store_form`] stores.
    pub fn narrow(&mut self, ty: Scalar, value: &str) -> String {
        if let Some(bits) = ty.sub_byte_bits() {
            return self.op2(Cls::R, "and.b32", value, &((1u32 << bits) - 1).to_string());
        }
        match ty {
            Scalar::F16 => self.op1(Cls::Rs, "cvt.rn.f16.f32", value),
            Scalar::BF16 => {
                // Round the low half away, ties to even; NaN becomes the quiet NaN of its sign.
                let bits = self.op1(Cls::R, "mov.b32", value);
                let high = self.op2(Cls::R, "shr.u32", &bits, "16");
                let lsb = self.op2(Cls::R, "and.b32", &high, "1");
                let r = self.op2(Cls::R, "add.u32", &bits, "32767");
                let r = self.op2(Cls::R, "add.u32", &r, &lsb);
                let r = self.op2(Cls::R, "shr.u32", &r, "16");
                let sign = self.op2(Cls::R, "and.b32", &high, "32768");
                let nan = self.op2(Cls::R, "or.b32", &sign, "32704");
                let is_nan = self.setp("nan", "f32", value, value);
                let code = self.selp(Cls::R, &nan, &r, &is_nan);
                self.op1(Cls::Rs, "cvt.u16.u32", &code)
            }
            Scalar::F8E8M0 => self.encode_e8m0(value),
            _ => match ty.float_format() {
                Some(format) => self.encode(format, value),
                None => value.to_string(),
            },
        }
    }

    /// The f32 value of float8 E8M0 `code`: the code as f32's exponent field; code 0 is
    /// 2^-127 (the f32 subnormal 0x00400000), 0xFF NaN.
    fn decode_e8m0(&mut self, code: &str) -> String {
        let code = self.op2(Cls::R, "and.b32", code, "255");
        let bits = self.op2(Cls::R, "shl.b32", &code, "23");
        let zero = self.setp("eq", "u32", &code, "0");
        let bits = self.selp(Cls::R, "4194304", &bits, &zero);
        let nan = self.setp("eq", "u32", &code, "255");
        let bits = self.selp(Cls::R, "2143289344", &bits, &nan);
        self.op1(Cls::F, "mov.b32", &bits)
    }

    /// The float8 E8M0 code of f32 `value` (`memc_ir::minifloat::e8m0::encode`): its exponent
    /// field, plus one when a mantissa bit is set, at most 0xFE; NaN and infinities 0xFF; an
    /// f32 subnormal is 0 up to 2^-127 (mantissa 2^22), else 1.
    fn encode_e8m0(&mut self, value: &str) -> String {
        let bits = self.op1(Cls::R, "mov.b32", value);
        let exp = self.op2(Cls::R, "shr.u32", &bits, "23");
        let exp = self.op2(Cls::R, "and.b32", &exp, "255");
        let mantissa = self.op2(Cls::R, "and.b32", &bits, "8388607");
        let inexact = self.setp("ne", "u32", &mantissa, "0");
        let below_top = self.setp("lt", "u32", &exp, "254");
        let up = self.reg(Cls::P);
        self.ins(format!("and.pred {up}, {inexact}, {below_top}"));
        let next = self.op2(Cls::R, "add.u32", &exp, "1");
        let normal = self.selp(Cls::R, &next, &exp, &up);
        let above = self.setp("gt", "u32", &mantissa, "4194304");
        let subnormal = self.selp(Cls::R, "1", "0", &above);
        let is_subnormal = self.setp("eq", "u32", &exp, "0");
        self.selp(Cls::R, &subnormal, &normal, &is_subnormal)
    }

    /// The f32 value of the code in the low bits of `code` (a `.b32` register).
    fn decode(&mut self, f: Format, code: &str) -> String {
        let m = f.man_bits;
        let sign_bit = 1u32 << (f.exp_bits + m);
        let max_exp = (1u32 << f.exp_bits) - 1;
        let mag = self.op2(Cls::R, "and.b32", code, &(sign_bit - 1).to_string());
        let exp = self.op2(Cls::R, "shr.u32", &mag, &m.to_string());
        let man = self.op2(Cls::R, "and.b32", &mag, &((1u32 << m) - 1).to_string());
        // Normal: rebias the exponent into f32's and move the mantissa to the top.
        let e32 = self.op2(Cls::R, "add.u32", &exp, &(127 - f.bias).to_string());
        let e32 = self.op2(Cls::R, "shl.b32", &e32, "23");
        let m32 = self.op2(Cls::R, "shl.b32", &man, &(23 - m).to_string());
        let normal = self.op2(Cls::R, "or.b32", &e32, &m32);
        // Subnormal: man * 2^(1 - bias - m), exact.
        let sub = self.op1(Cls::F, "cvt.rn.f32.u32", &man);
        let scale = f32_imm(2f32.powi(1 - f.bias - m as i32));
        let sub = self.op2(Cls::F, "mul.rn.f32", &sub, &scale);
        let sub = self.op1(Cls::R, "mov.b32", &sub);
        let is_sub = self.setp("eq", "u32", &exp, "0");
        let mut bits = self.selp(Cls::R, &sub, &normal, &is_sub);
        match f.specials {
            Specials::Ieee => {
                // The largest exponent: infinity for mantissa 0, else NaN (payload kept).
                let top = self.op2(Cls::R, "or.b32", &m32, "2139095040");
                let is_top = self.setp("eq", "u32", &exp, &max_exp.to_string());
                bits = self.selp(Cls::R, &top, &bits, &is_top);
            }
            Specials::FiniteNan => {
                let is_nan = self.setp("eq", "u32", &mag, &(sign_bit - 1).to_string());
                bits = self.selp(Cls::R, "2143289344", &bits, &is_nan);
            }
            Specials::FiniteNanUnsignedZero | Specials::Finite => {}
        }
        // The sign, from the code's top bit to f32's.
        let sign = self.op2(Cls::R, "and.b32", code, &sign_bit.to_string());
        let sign = self.op2(Cls::R, "shl.b32", &sign, &(31 - f.exp_bits - m).to_string());
        bits = self.op2(Cls::R, "or.b32", &bits, &sign);
        if f.specials == Specials::FiniteNanUnsignedZero {
            let low = self.op2(Cls::R, "and.b32", code, &((sign_bit << 1) - 1).to_string());
            let is_nan = self.setp("eq", "u32", &low, &sign_bit.to_string());
            bits = self.selp(Cls::R, "2143289344", &bits, &is_nan);
        }
        self.op1(Cls::F, "mov.b32", &bits)
    }

    /// The code (in a `.b32` register) of f32 `value` rounded to nearest even, out-of-range
    /// values as `Format::encode` says.
    fn encode(&mut self, f: Format, value: &str) -> String {
        let m = f.man_bits;
        let sign_bit = 1u32 << (f.exp_bits + m);
        let bits = self.op1(Cls::R, "mov.b32", value);
        let abs = self.op2(Cls::R, "and.b32", &bits, "2147483647");
        let sign = self.op2(Cls::R, "shr.u32", &bits, &(31 - f.exp_bits - m).to_string());
        let sign = self.op2(Cls::R, "and.b32", &sign, &sign_bit.to_string());
        // Below the smallest normal: round |x| * 2^(bias - 1 + m) to an integer (exact scale).
        let absf = self.op1(Cls::F, "mov.b32", &abs);
        let scale = f32_imm(2f32.powi(f.bias - 1 + m as i32));
        let scaled = self.op2(Cls::F, "mul.rn.f32", &absf, &scale);
        let sub = self.op1(Cls::R, "cvt.rni.u32.f32", &scaled);
        // Normal: round f32's mantissa to m bits on the bits, then rebias.
        let shift = 23 - m;
        let lsb = self.op2(Cls::R, "shr.u32", &abs, &shift.to_string());
        let lsb = self.op2(Cls::R, "and.b32", &lsb, "1");
        let r = self.op2(
            Cls::R,
            "add.u32",
            &abs,
            &((1u32 << (shift - 1)) - 1).to_string(),
        );
        let r = self.op2(Cls::R, "add.u32", &r, &lsb);
        let r = self.op2(Cls::R, "shr.u32", &r, &shift.to_string());
        let normal = self.op2(
            Cls::R,
            "sub.u32",
            &r,
            &(((127 - f.bias) as u32) << m).to_string(),
        );
        let min_normal = ((127 + 1 - f.bias) as u32) << 23;
        let is_sub = self.setp("lt", "u32", &abs, &min_normal.to_string());
        let mag = self.selp(Cls::R, &sub, &normal, &is_sub);
        let max = f.max_finite_code();
        let over = self.setp("gt", "u32", &mag, &max.to_string());
        let is_nan = self.setp("gt", "u32", &abs, "2139095040");
        let code = match f.specials {
            Specials::Ieee => {
                let inf = ((1u32 << f.exp_bits) - 1) << m;
                let mag = self.selp(Cls::R, &inf.to_string(), &mag, &over);
                let nan = (inf | (1 << (m - 1))).to_string();
                let mag = self.selp(Cls::R, &nan, &mag, &is_nan);
                self.op2(Cls::R, "or.b32", &sign, &mag)
            }
            Specials::FiniteNan => {
                let bad = self.reg(Cls::P);
                self.ins(format!("or.pred {bad}, {over}, {is_nan}"));
                let mag = self.selp(Cls::R, &(sign_bit - 1).to_string(), &mag, &bad);
                self.op2(Cls::R, "or.b32", &sign, &mag)
            }
            Specials::FiniteNanUnsignedZero => {
                let signed = self.op2(Cls::R, "or.b32", &sign, &mag);
                // No negative zero.
                let zero = self.setp("eq", "u32", &mag, "0");
                let code = self.selp(Cls::R, "0", &signed, &zero);
                let bad = self.reg(Cls::P);
                self.ins(format!("or.pred {bad}, {over}, {is_nan}"));
                self.selp(Cls::R, &sign_bit.to_string(), &code, &bad)
            }
            Specials::Finite => {
                let mag = self.selp(Cls::R, &max.to_string(), &mag, &over);
                let signed = self.op2(Cls::R, "or.b32", &sign, &mag);
                // No NaN: the zero of the other sign, as ml_dtypes gives.
                let flipped = self.op2(Cls::R, "xor.b32", &sign, &sign_bit.to_string());
                self.selp(Cls::R, &flipped, &signed, &is_nan)
            }
        };
        code
    }
}
