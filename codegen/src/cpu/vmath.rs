//! Inline f32 `exp`, `tanh` and `erf` as Cranelift instructions, for the SIMD path: a call per
//! vector (through a stack slot) costs more than the polynomial itself, and these three carry
//! softmax, GELU and the sigmoid family.
//!
//! Every function here emits the same instructions for `F32` and `F32X4` (constants are
//! splatted for vectors): multiplies, adds and fused multiply-adds (`fma`, one instruction
//! where the host has FMA, Cranelift's call to `fmaf` per lane where it does not), so the
//! result does not depend on the host's instruction set. The polynomials are evaluated by
//! fused steps: half the instructions, and no rounding between each product and its sum.
//!
//! Guarantees (checked against f64 references over dense grids, see the `cpu_elementwise` tests):
//! - `exp`: within 1 ulp of the correctly rounded result, subnormal results included;
//!   `exp(+inf) = +inf`, `exp(-inf) = 0`, NaN stays NaN, overflow gives +inf.
//! - `tanh`: within 2 ulp; odd (the sign of zero is kept); `tanh(+-inf) = +-1`; NaN stays NaN.
//! - `erf`: within 2 ulp; odd; `erf(+-inf) = +-1`; NaN stays NaN.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;

/// The float type `ty` (F32 or F32X4) and its same-width integer type.
#[derive(Copy, Clone)]
struct Ty {
    float: Type,
    int: Type,
}

impl Ty {
    fn of(float: Type) -> Ty {
        let int = if float.is_vector() {
            types::I32X4
        } else {
            types::I32
        };
        Ty { float, int }
    }

    fn f(self, b: &mut FunctionBuilder, value: f32) -> Value {
        let c = b.ins().f32const(value);
        if self.float.is_vector() {
            b.ins().splat(self.float, c)
        } else {
            c
        }
    }

    fn i(self, b: &mut FunctionBuilder, value: i32) -> Value {
        let c = b.ins().iconst(types::I32, i64::from(value));
        if self.int.is_vector() {
            b.ins().splat(self.int, c)
        } else {
            c
        }
    }

    fn to_int(self, b: &mut FunctionBuilder, x: Value) -> Value {
        b.ins().bitcast(self.int, MemFlagsData::new(), x)
    }

    fn to_float(self, b: &mut FunctionBuilder, x: Value) -> Value {
        b.ins().bitcast(self.float, MemFlagsData::new(), x)
    }

    /// `cond ? then : else_` lane-wise, for a float comparison result `cond`.
    fn select(self, b: &mut FunctionBuilder, cond: Value, then: Value, else_: Value) -> Value {
        if self.float.is_vector() {
            let mask = b.ins().bitcast(self.float, MemFlagsData::new(), cond);
            b.ins().bitselect(mask, then, else_)
        } else {
            b.ins().select(cond, then, else_)
        }
    }

    /// `x < lo ? lo : x`: one `maxps` for vectors (the pattern Cranelift matches); a NaN `x`
    /// stays NaN.
    fn at_least(self, b: &mut FunctionBuilder, x: Value, lo: Value) -> Value {
        let below = b.ins().fcmp(FloatCC::LessThan, x, lo);
        self.select(b, below, lo, x)
    }

    /// `hi < x ? hi : x`: one `minps` for vectors; a NaN `x` stays NaN.
    fn at_most(self, b: &mut FunctionBuilder, x: Value, hi: Value) -> Value {
        let above = b.ins().fcmp(FloatCC::LessThan, hi, x);
        self.select(b, above, hi, x)
    }

    /// `|magnitude|` with the sign of `sign`.
    fn copysign(self, b: &mut FunctionBuilder, magnitude: Value, sign: Value) -> Value {
        let m = self.to_int(b, magnitude);
        let s = self.to_int(b, sign);
        let sign_bit = self.i(b, i32::MIN);
        let abs_bits = self.i(b, i32::MAX);
        let m = b.ins().band(m, abs_bits);
        let s = b.ins().band(s, sign_bit);
        let r = b.ins().bor(m, s);
        self.to_float(b, r)
    }

    /// `coeffs[0] * x^(n-1) + ... + coeffs[n-1]` by Horner's rule, one fused multiply-add a
    /// step.
    fn horner(self, b: &mut FunctionBuilder, x: Value, coeffs: &[f32]) -> Value {
        let mut acc = self.f(b, coeffs[0]);
        for &c in &coeffs[1..] {
            let c = self.f(b, c);
            acc = b.ins().fma(acc, x, c);
        }
        acc
    }
}

/// `e^x` for `x` of type `ty` (F32 or F32X4).
///
/// `x = n ln2 + r` with `|r| <= ln2 / 2` (Cody-Waite, two-part ln2), `e^r` by a degree-7
/// polynomial (Cephes `expf` coefficients), and `2^n` applied in two halves so that subnormal
/// results and overflow come out right.
pub(crate) fn exp(b: &mut FunctionBuilder, ty: Type, x: Value) -> Value {
    let t = Ty::of(ty);
    // Clamp to where the result is still 0 or +inf after rounding (NaN stays NaN).
    let lo = t.f(b, -110.0);
    let hi = t.f(b, 89.0);
    let xc = t.at_least(b, x, lo);
    let xc = t.at_most(b, xc, hi);
    exp_core(b, t, xc, true)
}

/// `e^x` for `x` in [-87, 88] or NaN (a normal result): no clamp, and `2^n` in one step.
fn exp_normal(b: &mut FunctionBuilder, t: Ty, x: Value) -> Value {
    exp_core(b, t, x, false)
}

/// `e^x` for `x` in [-110, 89] (or NaN); with `split_scale` false, only for `x` in [-87, 88].
fn exp_core(b: &mut FunctionBuilder, t: Ty, xc: Value, split_scale: bool) -> Value {
    // n = round(x / ln2) by the 1.5 * 2^23 trick; its integer is in the low mantissa bits.
    let magic = t.f(b, 12_582_912.0);
    let log2e = t.f(b, std::f32::consts::LOG2_E);
    let scaled = b.ins().fmul(xc, log2e);
    let kf = b.ins().fadd(scaled, magic);
    let n = b.ins().fsub(kf, magic);
    let kbits = t.to_int(b, kf);
    let magic_bits = t.i(b, 0x4B40_0000);
    let ni = b.ins().isub(kbits, magic_bits);
    // r = x - n ln2, with ln2 split so that n * LN2_HI is exact.
    let ln2_hi = t.f(b, 0.693_359_4);
    let ln2_lo = t.f(b, -2.121_944_4e-4);
    let a = b.ins().fmul(n, ln2_hi);
    let r = b.ins().fsub(xc, a);
    let c = b.ins().fmul(n, ln2_lo);
    let r = b.ins().fsub(r, c);
    // e^r = 1 + r + r^2 p(r).
    let p = t.horner(
        b,
        r,
        &[
            1.987_569_1e-4,
            1.398_199_9e-3,
            8.333_452e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            5.000_000_1e-1,
        ],
    );
    let r2 = b.ins().fmul(r, r);
    let one = t.f(b, 1.0);
    let y = b.ins().fma(p, r2, r);
    let y = b.ins().fadd(y, one);
    let bias = t.i(b, 127);
    if !split_scale {
        let e = b.ins().iadd(ni, bias);
        let e = b.ins().ishl_imm_u(e, 23);
        let s = t.to_float(b, e);
        return b.ins().fmul(y, s);
    }
    // 2^n = 2^n1 * 2^n2 with n1 = n >> 1, each a normal float for n in [-159, 129].
    let n1 = b.ins().sshr_imm_u(ni, 1);
    let n2 = b.ins().isub(ni, n1);
    let e1 = b.ins().iadd(n1, bias);
    let e1 = b.ins().ishl_imm_u(e1, 23);
    let e2 = b.ins().iadd(n2, bias);
    let e2 = b.ins().ishl_imm_u(e2, 23);
    let s1 = t.to_float(b, e1);
    let s2 = t.to_float(b, e2);
    // Below -104, e^x rounds to 0 (it is under half the least subnormal, 2^-150 = e^-103.97):
    // the second half of the scale is 0 there, so that no product underflows. An underflowing
    // multiply takes a microcode assist of ~100 cycles per vector on x86 cores, and a masked
    // softmax (a causal mask, padding) sends half its scores there.
    let below = t.f(b, -104.0);
    let vanishes = b.ins().fcmp(FloatCC::LessThan, xc, below);
    let zero = t.f(b, 0.0);
    let s2 = t.select(b, vanishes, zero, s2);
    let y = b.ins().fmul(y, s1);
    b.ins().fmul(y, s2)
}

/// `tanh(x)` for `x` of type `ty`: an odd polynomial below |x| = 0.625 (Cephes `tanhf`), else
/// `1 - 2 / (e^{2|x|} + 1)`; the sign is copied from `x`.
pub(crate) fn tanh(b: &mut FunctionBuilder, ty: Type, x: Value) -> Value {
    let t = Ty::of(ty);
    let z = b.ins().fabs(x);
    let two = t.f(b, 2.0);
    let one = t.f(b, 1.0);
    // tanh(z) rounds to 1 from z = 9 on; capping 2z at 20 keeps e^{2z} normal (NaN stays NaN).
    let z2 = b.ins().fmul(z, two);
    let cap = t.f(b, 20.0);
    let z2 = t.at_most(b, z2, cap);
    let e = exp_normal(b, t, z2);
    let d = b.ins().fadd(e, one);
    let q = b.ins().fdiv(two, d);
    let large = b.ins().fsub(one, q);
    let s = b.ins().fmul(z, z);
    let p = t.horner(
        b,
        s,
        &[
            -5.704_988_7e-3,
            2.063_908_9e-2,
            -5.373_971_6e-2,
            1.333_144_2e-1,
            -3.333_328_2e-1,
        ],
    );
    let ps = b.ins().fmul(p, s);
    let small = b.ins().fma(ps, z, z);
    let bound = t.f(b, 0.625);
    let is_large = b.ins().fcmp(FloatCC::GreaterThan, z, bound);
    let r = t.select(b, is_large, large, small);
    t.copysign(b, r, x)
}

/// `erf(x)` for `x` of type `ty`: an odd polynomial below |x| = 0.927734375, else
/// `1 - e^{q(|x|)}` with `|x|` capped at 4 (where erf rounds to 1); the sign is copied from
/// `x`. The split, the form and the coefficients are those of N. Juffa's faithfully rounded
/// `erff` (evaluated with FMA, as he wrote it).
pub(crate) fn erf(b: &mut FunctionBuilder, ty: Type, x: Value) -> Value {
    let t = Ty::of(ty);
    let z = b.ins().fabs(x);
    // Large arguments.
    let four = t.f(b, 4.0);
    let zb = t.at_most(b, z, four);
    let sb = b.ins().fmul(zb, zb);
    let r = t.horner(b, zb, &[-1.728_534_7e-5, 3.831_971_3e-4]);
    let u = t.horner(b, zb, &[-3.883_964_4e-3, 2.425_462_2e-2]);
    let mut q = b.ins().fma(r, sb, u);
    for c in [-1.067_778_8e-1, -6.348_467e-1, -1.287_175_1e-1] {
        let c = t.f(b, c);
        q = b.ins().fma(q, zb, c);
    }
    let neg_zb = b.ins().fneg(zb);
    let q = b.ins().fma(q, zb, neg_zb);
    let one = t.f(b, 1.0);
    // q is in [-16.7, -0.8] for zb in [0, 4] (NaN stays NaN).
    let e = exp_normal(b, t, q);
    let large = b.ins().fsub(one, e);
    // Small arguments.
    let s = b.ins().fmul(z, z);
    let p = t.horner(
        b,
        s,
        &[
            -5.967_617e-4,
            4.991_194_2e-3,
            -2.676_813_5e-2,
            1.128_199_3e-1,
            -3.761_253_4e-1,
            1.283_791_7e-1,
        ],
    );
    let small = b.ins().fma(p, z, z);
    let bound = t.f(b, 0.927_734_375);
    let is_large = b.ins().fcmp(FloatCC::GreaterThan, z, bound);
    let r = t.select(b, is_large, large, small);
    t.copysign(b, r, x)
}
