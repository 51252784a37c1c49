//! Scalar lowering of kernel instructions to Cranelift IR: constants, unary and binary ops,
//! selects and casts, one kernel element at a time.
//!
//! Each function here implements the semantics that `kernel.rs` documents exactly, with no
//! trapping instruction on any input: integer division and remainder replace a zero divisor
//! (and, for signed types, -1) before dividing; shifts by the bit width or more give 0; casts
//! from float saturate and send NaN to 0. Ops the kernel IR allows but that have no meaning for
//! a type memc emits (arithmetic on bools) are reported as unsupported, never miscompiled.

use super::error::CpuError;
use super::func::{clif_type, memory_type, FnCx};
use super::helpers;
use crate::kernel::{BinaryOp, Scalar, UnaryOp};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Type, Value};

/// The bit width of an integer or bool type.
fn bits(ty: Scalar) -> u32 {
    (ty.size() * 8) as u32
}

/// `value` truncated to the low `width` bits, as Cranelift wants a narrow `iconst` immediate.
fn mask_imm(value: u64, width: u32) -> i64 {
    if width >= 64 {
        value as i64
    } else {
        (value & ((1u64 << width) - 1)) as i64
    }
}

impl FnCx<'_, '_> {
    /// The clif type of `ty`, or an unsupported-type error naming it.
    pub(crate) fn ty(&self, ty: Scalar) -> Result<Type, CpuError> {
        clif_type(ty).ok_or_else(|| self.unsupported(format!("{} is not supported", ty.name())))
    }

    /// A constant of type `ty` from [`crate::kernel::InstKind::Const`] bits: an `f64` for float
    /// types, an `i64`/`u64` for integers and bools (a bool is `bits != 0`).
    pub(crate) fn const_bits(&mut self, ty: Scalar, bits_value: u64) -> Result<Value, CpuError> {
        let clif = self.ty(ty)?;
        Ok(match ty {
            Scalar::F32 => self.b.ins().f32const(f64::from_bits(bits_value) as f32),
            Scalar::F64 => self.b.ins().f64const(f64::from_bits(bits_value)),
            Scalar::Bool => self.b.ins().iconst(clif, (bits_value != 0) as i64),
            _ => self.b.ins().iconst(clif, mask_imm(bits_value, bits(ty))),
        })
    }

    /// A view's pad value, of its compute type ([`crate::kernel::View::pad_bits`]).
    pub(crate) fn pad_value(&mut self, view: &crate::kernel::View) -> Result<Value, CpuError> {
        self.const_bits(view.elem.compute(), view.pad_bits())
    }

    /// `raw`, an element of `ty` as loaded from memory ([`memory_type`]), widened to its
    /// compute type (unchanged for compute types).
    pub(crate) fn widen(&mut self, raw: Value, ty: Scalar) -> Result<Value, CpuError> {
        if !ty.is_storage_only() {
            return Ok(raw);
        }
        if let Some(bits) = ty.sub_byte_bits() {
            let shift = i64::from(8 - bits);
            return Ok(if ty.is_signed_int() {
                let up = self.b.ins().ishl_imm_u(raw, shift);
                self.b.ins().sshr_imm_u(up, shift)
            } else {
                self.b.ins().band_imm_u(raw, (1 << bits) - 1)
            });
        }
        let code = self.b.ins().uextend(types::I32, raw);
        if ty == Scalar::BF16 {
            let bits = self.b.ins().ishl_imm_u(code, 16);
            return Ok(self.b.ins().bitcast(types::F32, MemFlagsData::new(), bits));
        }
        if ty == Scalar::F16 {
            return Ok(self.widen_f16(code));
        }
        let (widen, _) = helpers::conversions(ty)
            .ok_or_else(|| self.unsupported(format!("loads of {}", ty.name())))?;
        self.call_helper(widen, &[code])
    }

    /// `value`, of `ty`'s compute type, narrowed to the bytes a store of `ty` writes
    /// ([`memory_type`]; unchanged for compute types): floats rounded to nearest even as
    /// `memc_ir::minifloat` says, sub-byte integers cut to their low bits.
    pub(crate) fn narrow(&mut self, value: Value, ty: Scalar) -> Result<Value, CpuError> {
        if !ty.is_storage_only() {
            return Ok(value);
        }
        if let Some(bits) = ty.sub_byte_bits() {
            return Ok(self.b.ins().band_imm_u(value, (1 << bits) - 1));
        }
        if ty == Scalar::BF16 {
            // Round the low 16 bits away, ties to even; a NaN becomes the quiet NaN of its sign.
            let bits = self.b.ins().bitcast(types::I32, MemFlagsData::new(), value);
            let high = self.b.ins().ushr_imm_u(bits, 16);
            let lsb = self.b.ins().band_imm_u(high, 1);
            let rounded = self.b.ins().iadd_imm_s(bits, 0x7fff);
            let rounded = self.b.ins().iadd(rounded, lsb);
            let rounded = self.b.ins().ushr_imm_u(rounded, 16);
            let sign = self.b.ins().band_imm_u(high, 0x8000);
            let quiet_nan = self.b.ins().bor_imm_u(sign, 0x7fc0);
            let is_nan = self.b.ins().fcmp(FloatCC::Unordered, value, value);
            let code = self.b.ins().select(is_nan, quiet_nan, rounded);
            return Ok(self.b.ins().ireduce(types::I16, code));
        }
        if ty == Scalar::F16 {
            let code = self.narrow_f16(value);
            return Ok(self.b.ins().ireduce(types::I16, code));
        }
        let (_, narrow) = helpers::conversions(ty)
            .ok_or_else(|| self.unsupported(format!("stores of {}", ty.name())))?;
        let code = self.call_helper(narrow, &[value])?;
        let mem =
            memory_type(ty).ok_or_else(|| self.unsupported(format!("stores of {}", ty.name())))?;
        Ok(self.b.ins().ireduce(mem, code))
    }

    /// The f32 value of the f16 bits in `code` (an I32), exactly, without branches: exponent
    /// and mantissa moved into an f32 and scaled by 2^112 (which rebiases normal values and
    /// normalizes subnormal ones exactly), infinities and NaNs given the f32's top exponent.
    fn widen_f16(&mut self, code: Value) -> Value {
        let b = &mut self.b;
        let magnitude = b.ins().band_imm_u(code, 0x7fff);
        let shifted = b.ins().ishl_imm_u(magnitude, 13);
        let as_float = b.ins().bitcast(types::F32, MemFlagsData::new(), shifted);
        let scale = b.ins().f32const(f32::from_bits(0x7780_0000));
        let finite = b.ins().fmul(as_float, scale);
        let finite = b.ins().bitcast(types::I32, MemFlagsData::new(), finite);
        let mantissa = b.ins().band_imm_u(code, 0x3ff);
        let mantissa = b.ins().ishl_imm_u(mantissa, 13);
        let special = b.ins().bor_imm_u(mantissa, 0x7f80_0000);
        let is_special = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, magnitude, 0x7c00);
        let bits = b.ins().select(is_special, special, finite);
        let sign = b.ins().band_imm_u(code, 0x8000);
        let sign = b.ins().ishl_imm_u(sign, 16);
        let bits = b.ins().bor(bits, sign);
        b.ins().bitcast(types::F32, MemFlagsData::new(), bits)
    }

    /// The f16 bits (an I32) of f32 `value` rounded to nearest even, without branches (as
    /// `memc_ir::minifloat::F16.encode`: overflow to infinity, NaN to the quiet NaN of its
    /// sign). Subnormal results come from adding 0.5, whose rounding does the work; normal
    /// ones from rounding the f32 bits; the three candidates are computed and one selected.
    fn narrow_f16(&mut self, value: Value) -> Value {
        let b = &mut self.b;
        let bits = b.ins().bitcast(types::I32, MemFlagsData::new(), value);
        let abs = b.ins().band_imm_u(bits, 0x7fff_ffff);
        // Subnormal (and zero): |x| + 0.5 rounds away the bits below the f16 subnormal step.
        let abs_float = b.ins().bitcast(types::F32, MemFlagsData::new(), abs);
        let half = b.ins().f32const(0.5);
        let sum = b.ins().fadd(abs_float, half);
        let sum = b.ins().bitcast(types::I32, MemFlagsData::new(), sum);
        let subnormal = b.ins().iadd_imm_s(sum, -0x3f00_0000);
        // Normal: rebias, round the 13 low bits to nearest even, shift them away.
        let odd = b.ins().ushr_imm_u(abs, 13);
        let odd = b.ins().band_imm_u(odd, 1);
        let normal = b.ins().iadd_imm_s(abs, (-112i64 << 23) + 0xfff);
        let normal = b.ins().iadd(normal, odd);
        let normal = b.ins().ushr_imm_u(normal, 13);
        // At or past 65536: infinity, or a NaN.
        let is_nan = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThan, abs, 0x7f80_0000);
        let inf = b.ins().iconst(types::I32, 0x7c00);
        let nan = b.ins().iconst(types::I32, 0x7e00);
        let huge = b.ins().select(is_nan, nan, inf);
        let is_subnormal = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedLessThan, abs, 0x3880_0000);
        let small = b.ins().select(is_subnormal, subnormal, normal);
        let is_huge = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, abs, 0x4780_0000);
        let magnitude = b.ins().select(is_huge, huge, small);
        let sign = b.ins().ushr_imm_u(bits, 16);
        let sign = b.ins().band_imm_u(sign, 0x8000);
        b.ins().bor(magnitude, sign)
    }

    fn float_const(&mut self, ty: Scalar, value: f64) -> Value {
        if ty == Scalar::F32 {
            self.b.ins().f32const(value as f32)
        } else {
            self.b.ins().f64const(value)
        }
    }

    /// `x` zero- or sign-extended (or truncated) from `from` to the clif type `to`.
    fn int_resize(&mut self, x: Value, from: Scalar, to: Type) -> Value {
        let from_bits = bits(from);
        let to_bits = to.bits();
        if from_bits == to_bits {
            x
        } else if from_bits > to_bits {
            self.b.ins().ireduce(to, x)
        } else if from.is_signed_int() {
            self.b.ins().sextend(to, x)
        } else {
            self.b.ins().uextend(to, x)
        }
    }

    /// A unary op on `x` of type `ty` (the argument's type).
    pub(crate) fn unary(&mut self, op: UnaryOp, x: Value, ty: Scalar) -> Result<Value, CpuError> {
        let float = ty.is_float();
        Ok(match op {
            UnaryOp::Neg if float => self.b.ins().fneg(x),
            UnaryOp::Neg if ty.is_int() => self.b.ins().ineg(x),
            UnaryOp::Abs if float => self.b.ins().fabs(x),
            UnaryOp::Abs if ty.is_signed_int() => self.b.ins().iabs(x),
            UnaryOp::Abs if ty.is_unsigned_int() || ty == Scalar::Bool => x,
            UnaryOp::Sign if float => {
                let zero = self.float_const(ty, 0.0);
                let one = self.float_const(ty, 1.0);
                let minus_one = self.float_const(ty, -1.0);
                let pos = self.b.ins().fcmp(FloatCC::GreaterThan, x, zero);
                let neg = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
                let low = self.b.ins().select(neg, minus_one, x);
                self.b.ins().select(pos, one, low)
            }
            UnaryOp::Sign if ty.is_signed_int() => {
                let clif = self.ty(ty)?;
                let pos = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, x, 0);
                let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
                let pos = self.int_resize(pos, Scalar::U8, clif);
                let neg = self.int_resize(neg, Scalar::U8, clif);
                self.b.ins().isub(pos, neg)
            }
            UnaryOp::Sign if ty.is_unsigned_int() => {
                let clif = self.ty(ty)?;
                let nonzero = self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0);
                self.int_resize(nonzero, Scalar::U8, clif)
            }
            UnaryOp::Sign if ty == Scalar::Bool => x,
            UnaryOp::Sqrt if float => self.b.ins().sqrt(x),
            UnaryOp::Reciprocal if float => {
                let one = self.float_const(ty, 1.0);
                self.b.ins().fdiv(one, x)
            }
            UnaryOp::Floor if float => self.b.ins().floor(x),
            UnaryOp::Ceil if float => self.b.ins().ceil(x),
            UnaryOp::Round if float => self.b.ins().nearest(x),
            UnaryOp::Not if ty == Scalar::Bool => self.b.ins().bxor_imm_s(x, 1),
            UnaryOp::BitNot if ty.is_int() => self.b.ins().bnot(x),
            UnaryOp::IsNan if float => self.b.ins().fcmp(FloatCC::Unordered, x, x),
            UnaryOp::IsPosInf if float => {
                let inf = self.float_const(ty, f64::INFINITY);
                self.b.ins().fcmp(FloatCC::Equal, x, inf)
            }
            UnaryOp::IsNegInf if float => {
                let inf = self.float_const(ty, f64::NEG_INFINITY);
                self.b.ins().fcmp(FloatCC::Equal, x, inf)
            }
            _ if float => match transcendental_name(op) {
                Some(name) => {
                    let helper = helpers::float_unary(name, ty)
                        .ok_or_else(|| self.unsupported(format!("{op:?} of {}", ty.name())))?;
                    self.call_helper(helper, &[x])?
                }
                None => return Err(self.unsupported(format!("{op:?} of {}", ty.name()))),
            },
            _ => return Err(self.unsupported(format!("{op:?} of {}", ty.name()))),
        })
    }

    /// A binary op on `lhs` and `rhs`, both of type `ty`.
    pub(crate) fn binary(
        &mut self,
        op: BinaryOp,
        lhs: Value,
        rhs: Value,
        ty: Scalar,
    ) -> Result<Value, CpuError> {
        if ty.is_float() {
            return self.float_binary(op, lhs, rhs, ty);
        }
        let signed = ty.is_signed_int();
        let is_bool = ty == Scalar::Bool;
        let unsupported = |cx: &Self| cx.unsupported(format!("{op:?} of {}", ty.name()));
        Ok(match op {
            BinaryOp::Add if !is_bool => self.b.ins().iadd(lhs, rhs),
            BinaryOp::Sub if !is_bool => self.b.ins().isub(lhs, rhs),
            BinaryOp::Mul if is_bool => self.b.ins().band(lhs, rhs),
            BinaryOp::Mul => self.b.ins().imul(lhs, rhs),
            BinaryOp::Div if !is_bool => self.int_div(lhs, rhs, signed),
            BinaryOp::Rem if !is_bool => self.int_rem(lhs, rhs, signed),
            BinaryOp::FloorMod if !is_bool => {
                let r = self.int_rem(lhs, rhs, signed);
                if signed {
                    // r += b where r != 0 and sign(r) != sign(b).
                    let r_nonzero = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
                    let r_neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0);
                    let b_neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, rhs, 0);
                    let differ = self.b.ins().bxor(r_neg, b_neg);
                    let fix = self.b.ins().band(r_nonzero, differ);
                    let adjusted = self.b.ins().iadd(r, rhs);
                    self.b.ins().select(fix, adjusted, r)
                } else {
                    r
                }
            }
            BinaryOp::Pow if !is_bool => {
                let clif = self.ty(ty)?;
                let wide = if signed { Scalar::I64 } else { Scalar::U64 };
                let a = self.int_resize(lhs, ty, types::I64);
                let b = self.int_resize(rhs, ty, types::I64);
                let helper = helpers::binary("pow", wide).ok_or_else(|| unsupported(self))?;
                let r = self.call_helper(helper, &[a, b])?;
                self.int_resize(r, wide, clif)
            }
            BinaryOp::Min if signed => self.b.ins().smin(lhs, rhs),
            BinaryOp::Max if signed => self.b.ins().smax(lhs, rhs),
            BinaryOp::Min => self.b.ins().umin(lhs, rhs),
            BinaryOp::Max => self.b.ins().umax(lhs, rhs),
            BinaryOp::And | BinaryOp::BitAnd => self.b.ins().band(lhs, rhs),
            BinaryOp::Or | BinaryOp::BitOr => self.b.ins().bor(lhs, rhs),
            BinaryOp::Xor | BinaryOp::BitXor => self.b.ins().bxor(lhs, rhs),
            BinaryOp::Shl | BinaryOp::Shr if !is_bool => {
                let clif = self.ty(ty)?;
                let shifted = if op == BinaryOp::Shl {
                    self.b.ins().ishl(lhs, rhs)
                } else {
                    self.b.ins().ushr(lhs, rhs)
                };
                let too_far = self.b.ins().icmp_imm_s(
                    IntCC::UnsignedGreaterThanOrEqual,
                    rhs,
                    bits(ty) as i64,
                );
                let zero = self.b.ins().iconst(clif, 0);
                self.b.ins().select(too_far, zero, shifted)
            }
            BinaryOp::Eq => self.b.ins().icmp(IntCC::Equal, lhs, rhs),
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                let cc = int_cc(op, signed);
                self.b.ins().icmp(cc, lhs, rhs)
            }
            _ => return Err(unsupported(self)),
        })
    }

    fn float_binary(
        &mut self,
        op: BinaryOp,
        lhs: Value,
        rhs: Value,
        ty: Scalar,
    ) -> Result<Value, CpuError> {
        Ok(match op {
            BinaryOp::Add => self.b.ins().fadd(lhs, rhs),
            BinaryOp::Sub => self.b.ins().fsub(lhs, rhs),
            BinaryOp::Mul => self.b.ins().fmul(lhs, rhs),
            BinaryOp::Div => self.b.ins().fdiv(lhs, rhs),
            BinaryOp::Min => self.b.ins().fmin(lhs, rhs),
            BinaryOp::Max => self.b.ins().fmax(lhs, rhs),
            BinaryOp::Pow | BinaryOp::Rem => {
                let name = if op == BinaryOp::Pow { "pow" } else { "fmod" };
                let helper = helpers::binary(name, ty)
                    .ok_or_else(|| self.unsupported(format!("{op:?} of {}", ty.name())))?;
                self.call_helper(helper, &[lhs, rhs])?
            }
            BinaryOp::FloorMod => {
                let helper = helpers::binary("fmod", ty)
                    .ok_or_else(|| self.unsupported(format!("{op:?} of {}", ty.name())))?;
                let r = self.call_helper(helper, &[lhs, rhs])?;
                self.floor_mod_fixup(r, rhs, ty)
            }
            BinaryOp::Eq | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                self.b.ins().fcmp(float_cc(op), lhs, rhs)
            }
            _ => return Err(self.unsupported(format!("{op:?} of {}", ty.name()))),
        })
    }

    /// Turns `r = fmod(a, b)` into the floor modulus: `r + b` where `r != 0` and the signs of
    /// `r` and `b` differ.
    pub(crate) fn floor_mod_fixup(&mut self, r: Value, rhs: Value, ty: Scalar) -> Value {
        let zero = self.float_const(ty, 0.0);
        let r_nonzero = self.b.ins().fcmp(FloatCC::NotEqual, r, zero);
        let r_neg = self.b.ins().fcmp(FloatCC::LessThan, r, zero);
        let b_neg = self.b.ins().fcmp(FloatCC::LessThan, rhs, zero);
        let differ = self.b.ins().bxor(r_neg, b_neg);
        let fix = self.b.ins().band(r_nonzero, differ);
        let adjusted = self.b.ins().fadd(r, rhs);
        self.b.ins().select(fix, adjusted, r)
    }

    /// Integer division that never traps: a zero divisor gives 0, and signed `MIN / -1` wraps.
    fn int_div(&mut self, lhs: Value, rhs: Value, signed: bool) -> Value {
        let ty = self.b.func.dfg.value_type(rhs);
        let zero = self.b.ins().iconst(ty, 0);
        let one = self.b.ins().iconst(ty, 1);
        let rhs_zero = self.b.ins().icmp_imm_s(IntCC::Equal, rhs, 0);
        if signed {
            let rhs_minus_one = self.b.ins().icmp_imm_s(IntCC::Equal, rhs, -1);
            let replace = self.b.ins().bor(rhs_zero, rhs_minus_one);
            let safe = self.b.ins().select(replace, one, rhs);
            let q = self.b.ins().sdiv(lhs, safe);
            let negated = self.b.ins().ineg(lhs);
            let q = self.b.ins().select(rhs_minus_one, negated, q);
            self.b.ins().select(rhs_zero, zero, q)
        } else {
            let safe = self.b.ins().select(rhs_zero, one, rhs);
            let q = self.b.ins().udiv(lhs, safe);
            self.b.ins().select(rhs_zero, zero, q)
        }
    }

    /// Integer remainder (sign of the dividend) that never traps: a zero divisor gives 0, and a
    /// divisor of -1 gives 0 for signed types.
    fn int_rem(&mut self, lhs: Value, rhs: Value, signed: bool) -> Value {
        let ty = self.b.func.dfg.value_type(rhs);
        let zero = self.b.ins().iconst(ty, 0);
        let one = self.b.ins().iconst(ty, 1);
        let rhs_zero = self.b.ins().icmp_imm_s(IntCC::Equal, rhs, 0);
        if signed {
            let rhs_minus_one = self.b.ins().icmp_imm_s(IntCC::Equal, rhs, -1);
            let replace = self.b.ins().bor(rhs_zero, rhs_minus_one);
            let safe = self.b.ins().select(replace, one, rhs);
            let r = self.b.ins().srem(lhs, safe);
            self.b.ins().select(replace, zero, r)
        } else {
            let safe = self.b.ins().select(rhs_zero, one, rhs);
            let r = self.b.ins().urem(lhs, safe);
            self.b.ins().select(rhs_zero, zero, r)
        }
    }

    /// Converts `x` from `from` to `to` with the kernel IR's cast semantics.
    pub(crate) fn cast(&mut self, x: Value, from: Scalar, to: Scalar) -> Result<Value, CpuError> {
        let to_clif = self.ty(to)?;
        self.ty(from)?;
        if from == to {
            return Ok(x);
        }
        // A bool source behaves as the unsigned byte it is.
        let from = if from == Scalar::Bool {
            Scalar::U8
        } else {
            from
        };
        Ok(match (from.is_float(), to) {
            (true, Scalar::Bool) => {
                let zero = self.float_const(from, 0.0);
                self.b.ins().fcmp(FloatCC::NotEqual, x, zero)
            }
            (false, Scalar::Bool) => self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0),
            (true, Scalar::F32) => self.b.ins().fdemote(types::F32, x),
            (true, Scalar::F64) => self.b.ins().fpromote(types::F64, x),
            (true, Scalar::I64) => self.b.ins().fcvt_to_sint_sat(types::I64, x),
            (true, Scalar::U64) => self.b.ins().fcvt_to_uint_sat(types::I64, x),
            (true, Scalar::I32) => self.b.ins().fcvt_to_sint_sat(types::I32, x),
            (true, Scalar::U32) => self.b.ins().fcvt_to_uint_sat(types::I32, x),
            (true, _) => {
                // Narrow integers: saturate through i32, then clamp to the target's range.
                let (lo, hi) = match to {
                    Scalar::I8 => (i8::MIN as i64, i8::MAX as i64),
                    Scalar::I16 => (i16::MIN as i64, i16::MAX as i64),
                    Scalar::U8 => (0, u8::MAX as i64),
                    Scalar::U16 => (0, u16::MAX as i64),
                    _ => return Err(self.unsupported(format!("cast to {}", to.name()))),
                };
                let wide = self.b.ins().fcvt_to_sint_sat(types::I32, x);
                let lo = self.b.ins().iconst(types::I32, lo);
                let hi = self.b.ins().iconst(types::I32, hi);
                let clamped = self.b.ins().smax(wide, lo);
                let clamped = self.b.ins().smin(clamped, hi);
                self.b.ins().ireduce(to_clif, clamped)
            }
            (false, Scalar::F32 | Scalar::F64) => {
                if from.is_signed_int() {
                    let wide = if bits(from) < 32 {
                        self.int_resize(x, from, types::I32)
                    } else {
                        x
                    };
                    self.b.ins().fcvt_from_sint(to_clif, wide)
                } else if bits(from) < 64 {
                    // Unsigned values below 2^32 fit a signed i64 exactly.
                    let wide = self.int_resize(x, from, types::I64);
                    self.b.ins().fcvt_from_sint(to_clif, wide)
                } else {
                    self.b.ins().fcvt_from_uint(to_clif, x)
                }
            }
            (false, _) => self.int_resize(x, from, to_clif),
        })
    }
}

/// The helper name of a transcendental unary op, or `None` for ops with an instruction.
pub(crate) fn transcendental_name(op: UnaryOp) -> Option<&'static str> {
    Some(match op {
        UnaryOp::Exp => "exp",
        UnaryOp::Log => "log",
        UnaryOp::Sin => "sin",
        UnaryOp::Cos => "cos",
        UnaryOp::Tan => "tan",
        UnaryOp::Asin => "asin",
        UnaryOp::Acos => "acos",
        UnaryOp::Atan => "atan",
        UnaryOp::Sinh => "sinh",
        UnaryOp::Cosh => "cosh",
        UnaryOp::Tanh => "tanh",
        UnaryOp::Asinh => "asinh",
        UnaryOp::Acosh => "acosh",
        UnaryOp::Atanh => "atanh",
        UnaryOp::Erf => "erf",
        _ => return None,
    })
}

/// The ordered float condition of a comparison (false where either operand is NaN).
pub(crate) fn float_cc(op: BinaryOp) -> FloatCC {
    match op {
        BinaryOp::Lt => FloatCC::LessThan,
        BinaryOp::Le => FloatCC::LessThanOrEqual,
        BinaryOp::Gt => FloatCC::GreaterThan,
        BinaryOp::Ge => FloatCC::GreaterThanOrEqual,
        _ => FloatCC::Equal,
    }
}

/// The integer condition of a comparison.
pub(crate) fn int_cc(op: BinaryOp, signed: bool) -> IntCC {
    match (op, signed) {
        (BinaryOp::Lt, true) => IntCC::SignedLessThan,
        (BinaryOp::Le, true) => IntCC::SignedLessThanOrEqual,
        (BinaryOp::Gt, true) => IntCC::SignedGreaterThan,
        (BinaryOp::Ge, true) => IntCC::SignedGreaterThanOrEqual,
        (BinaryOp::Lt, false) => IntCC::UnsignedLessThan,
        (BinaryOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
        (BinaryOp::Gt, false) => IntCC::UnsignedGreaterThan,
        (BinaryOp::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
        _ => IntCC::Equal,
    }
}
