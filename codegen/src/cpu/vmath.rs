//! Inline f32 `exp`, `tanh` and `erf`, for the SIMD path: a call per 4-lane vector (through a
//! stack slot) costs more than the polynomial itself, and these three carry softmax, GELU and
//! the sigmoid family.
//!
//! Each function is written once, over [`Lanes`]: the arithmetic of some number of f32 lanes.
//! [`Clif`] emits it as Cranelift instructions (for `F32` and `F32X4`, constants splatted for
//! vectors); [`native`] computes it in Rust over 16 lanes (AVX-512F, two halves of AVX2+FMA,
//! or plain f32), for the SIMD path's wide calls (`simd.rs`). Every form performs the same
//! IEEE operations in the same order: multiplies, adds, one division in `tanh` and fused
//! multiply-adds (`fma`: one instruction where the host has FMA, Cranelift's call to `fmaf`
//! per lane where it does not), so a result depends neither on the host's instruction set nor
//! on which form computed it (the AVX2 forms skip work for vectors where it changes no bit:
//! `exp` the clamps and the split scale when every lane is in [-87, 88], everything when every
//! lane is below -104; `tanh` and `erf` the form no lane of the vector takes). The polynomials
//! are evaluated by fused steps.
//!
//! Guarantees (checked against f64 references over dense grids, see the `cpu_elementwise` tests):
//! - `exp`: within 1 ulp of the correctly rounded result, subnormal results included;
//!   `exp(+inf) = +inf`, `exp(-inf) = 0`, NaN stays NaN, overflow gives +inf.
//! - `tanh`: within 2 ulp; odd (the sign of zero is kept); `tanh(+-inf) = +-1`; NaN stays NaN.
//! - `erf`: within 2 ulp; odd; `erf(+-inf) = +-1`; NaN stays NaN.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;

/// The arithmetic of a group of f32 lanes (`F`), their same-width integers (`I`) and
/// comparison masks (`M`). Every operation is the IEEE one, lane by lane.
pub(crate) trait Lanes {
    type F: Copy;
    type I: Copy;
    type M: Copy;
    fn f(&mut self, value: f32) -> Self::F;
    fn i(&mut self, value: i32) -> Self::I;
    fn add(&mut self, a: Self::F, b: Self::F) -> Self::F;
    fn sub(&mut self, a: Self::F, b: Self::F) -> Self::F;
    fn mul(&mut self, a: Self::F, b: Self::F) -> Self::F;
    fn div(&mut self, a: Self::F, b: Self::F) -> Self::F;
    /// `a * b + c`, rounded once.
    fn fma(&mut self, a: Self::F, b: Self::F, c: Self::F) -> Self::F;
    fn neg(&mut self, a: Self::F) -> Self::F;
    fn abs(&mut self, a: Self::F) -> Self::F;
    /// `a < b` (false when either is NaN).
    fn lt(&mut self, a: Self::F, b: Self::F) -> Self::M;
    fn select(&mut self, cond: Self::M, then: Self::F, else_: Self::F) -> Self::F;
    fn to_int(&mut self, a: Self::F) -> Self::I;
    fn to_float(&mut self, a: Self::I) -> Self::F;
    fn iadd(&mut self, a: Self::I, b: Self::I) -> Self::I;
    fn isub(&mut self, a: Self::I, b: Self::I) -> Self::I;
    fn band(&mut self, a: Self::I, b: Self::I) -> Self::I;
    fn bor(&mut self, a: Self::I, b: Self::I) -> Self::I;
    /// `a << 23`, the exponent field.
    fn shl23(&mut self, a: Self::I) -> Self::I;
    /// `a >> 1`, arithmetic.
    fn sshr1(&mut self, a: Self::I) -> Self::I;
}

/// `x < lo ? lo : x` (a NaN `x` stays NaN; one `maxps` in Cranelift).
#[inline(always)]
fn at_least<L: Lanes>(l: &mut L, x: L::F, lo: L::F) -> L::F {
    let below = l.lt(x, lo);
    l.select(below, lo, x)
}

/// `hi < x ? hi : x` (a NaN `x` stays NaN; one `minps` in Cranelift).
#[inline(always)]
fn at_most<L: Lanes>(l: &mut L, x: L::F, hi: L::F) -> L::F {
    let above = l.lt(hi, x);
    l.select(above, hi, x)
}

/// `|magnitude|` with the sign of `sign`.
#[inline(always)]
fn copysign<L: Lanes>(l: &mut L, magnitude: L::F, sign: L::F) -> L::F {
    let m = l.to_int(magnitude);
    let s = l.to_int(sign);
    let sign_bit = l.i(i32::MIN);
    let abs_bits = l.i(i32::MAX);
    let m = l.band(m, abs_bits);
    let s = l.band(s, sign_bit);
    let r = l.bor(m, s);
    l.to_float(r)
}

/// `coeffs[0] * x^(n-1) + ... + coeffs[n-1]` by Horner's rule, one fused multiply-add a step.
#[inline(always)]
fn horner<L: Lanes>(l: &mut L, x: L::F, coeffs: &[f32]) -> L::F {
    let mut acc = l.f(coeffs[0]);
    for &c in &coeffs[1..] {
        let c = l.f(c);
        acc = l.fma(acc, x, c);
    }
    acc
}

/// `e^x`.
///
/// `x = n ln2 + r` with `|r| <= ln2 / 2` (Cody-Waite, two-part ln2), `e^r` by a degree-7
/// polynomial (Cephes `expf` coefficients), and `2^n` applied in two halves so that subnormal
/// results and overflow come out right.
#[inline(always)]
pub(crate) fn exp_lanes<L: Lanes>(l: &mut L, x: L::F) -> L::F {
    // Clamp to where the result is still 0 or +inf after rounding (NaN stays NaN).
    let lo = l.f(-110.0);
    let hi = l.f(89.0);
    let xc = at_least(l, x, lo);
    let xc = at_most(l, xc, hi);
    exp_core(l, xc, true)
}

/// `e^x` for `x` in [-110, 89] (or NaN); with `split_scale` false, only for `x` in [-87, 88]
/// (a normal result: `2^n` in one step).
#[inline(always)]
fn exp_core<L: Lanes>(l: &mut L, xc: L::F, split_scale: bool) -> L::F {
    // n = round(x / ln2) by the 1.5 * 2^23 trick; its integer is in the low mantissa bits.
    let magic = l.f(12_582_912.0);
    let log2e = l.f(std::f32::consts::LOG2_E);
    let scaled = l.mul(xc, log2e);
    let kf = l.add(scaled, magic);
    let n = l.sub(kf, magic);
    let kbits = l.to_int(kf);
    let magic_bits = l.i(0x4B40_0000);
    let ni = l.isub(kbits, magic_bits);
    // r = x - n ln2, with ln2 split so that n * LN2_HI is exact.
    let ln2_hi = l.f(0.693_359_4);
    let ln2_lo = l.f(-2.121_944_4e-4);
    let a = l.mul(n, ln2_hi);
    let r = l.sub(xc, a);
    let c = l.mul(n, ln2_lo);
    let r = l.sub(r, c);
    // e^r = 1 + r + r^2 p(r).
    let p = horner(
        l,
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
    let r2 = l.mul(r, r);
    let one = l.f(1.0);
    let y = l.fma(p, r2, r);
    let y = l.add(y, one);
    let bias = l.i(127);
    if !split_scale {
        let e = l.iadd(ni, bias);
        let e = l.shl23(e);
        let s = l.to_float(e);
        return l.mul(y, s);
    }
    // 2^n = 2^n1 * 2^n2 with n1 = n >> 1, each a normal float for n in [-159, 129].
    let n1 = l.sshr1(ni);
    let n2 = l.isub(ni, n1);
    let e1 = l.iadd(n1, bias);
    let e1 = l.shl23(e1);
    let e2 = l.iadd(n2, bias);
    let e2 = l.shl23(e2);
    let s1 = l.to_float(e1);
    let s2 = l.to_float(e2);
    // Below -104, e^x rounds to 0 (it is under half the least subnormal, 2^-150 = e^-103.97):
    // the second half of the scale is 0 there, so that no product underflows. An underflowing
    // multiply takes a microcode assist of ~100 cycles per vector on x86 cores, and a masked
    // softmax (a causal mask, padding) sends half its scores there.
    let below = l.f(-104.0);
    let vanishes = l.lt(xc, below);
    let zero = l.f(0.0);
    let s2 = l.select(vanishes, zero, s2);
    let y = l.mul(y, s1);
    l.mul(y, s2)
}

/// `tanh(x)`: an odd polynomial below |x| = 0.625 (Cephes `tanhf`), else
/// `1 - 2 / (e^{2|x|} + 1)`; the sign is copied from `x`.
#[inline(always)]
pub(crate) fn tanh_lanes<L: Lanes>(l: &mut L, x: L::F) -> L::F {
    odd_split(l, x, TANH_SPLIT, tanh_small, tanh_large)
}

/// An odd function from two forms of `z = |x|`, `large` above `split` and `small` up to it
/// (NaN takes `small`), chosen lane by lane, with `x`'s sign.
#[inline(always)]
fn odd_split<L: Lanes>(
    l: &mut L,
    x: L::F,
    split: f32,
    small: impl FnOnce(&mut L, L::F) -> L::F,
    large: impl FnOnce(&mut L, L::F) -> L::F,
) -> L::F {
    let z = l.abs(x);
    let large = large(l, z);
    let small = small(l, z);
    let bound = l.f(split);
    let is_large = l.lt(bound, z);
    let r = l.select(is_large, large, small);
    copysign(l, r, x)
}

/// Where [`tanh_lanes`] turns from its small form to its large one (`|x|` above it is large).
const TANH_SPLIT: f32 = 0.625;

/// [`tanh_lanes`]'s value for `z = |x|` above [`TANH_SPLIT`], before the sign.
#[inline(always)]
fn tanh_large<L: Lanes>(l: &mut L, z: L::F) -> L::F {
    let two = l.f(2.0);
    let one = l.f(1.0);
    // tanh(z) rounds to 1 from z = 9 on; capping 2z at 20 keeps e^{2z} normal (NaN stays NaN).
    let z2 = l.mul(z, two);
    let cap = l.f(20.0);
    let z2 = at_most(l, z2, cap);
    let e = exp_core(l, z2, false);
    let d = l.add(e, one);
    let q = l.div(two, d);
    l.sub(one, q)
}

/// [`tanh_lanes`]'s value for `z = |x|` up to [`TANH_SPLIT`], before the sign.
#[inline(always)]
fn tanh_small<L: Lanes>(l: &mut L, z: L::F) -> L::F {
    let s = l.mul(z, z);
    let p = horner(
        l,
        s,
        &[
            -5.704_988_7e-3,
            2.063_908_9e-2,
            -5.373_971_6e-2,
            1.333_144_2e-1,
            -3.333_328_2e-1,
        ],
    );
    let ps = l.mul(p, s);
    l.fma(ps, z, z)
}

/// `erf(x)`: an odd polynomial below |x| = 0.927734375, else `1 - e^{q(|x|)}` with `|x|`
/// capped at 4 (where erf rounds to 1); the sign is copied from `x`. The split, the form and
/// the coefficients are those of N. Juffa's faithfully rounded `erff` (evaluated with FMA, as
/// he wrote it).
#[inline(always)]
pub(crate) fn erf_lanes<L: Lanes>(l: &mut L, x: L::F) -> L::F {
    odd_split(l, x, ERF_SPLIT, erf_small, erf_large)
}

/// Where [`erf_lanes`] turns from its small form to its large one (`|x|` above it is large).
const ERF_SPLIT: f32 = 0.927_734_375;

/// [`erf_lanes`]'s value for `z = |x|` above [`ERF_SPLIT`], before the sign.
#[inline(always)]
fn erf_large<L: Lanes>(l: &mut L, z: L::F) -> L::F {
    let four = l.f(4.0);
    let zb = at_most(l, z, four);
    let sb = l.mul(zb, zb);
    let r = horner(l, zb, &[-1.728_534_7e-5, 3.831_971_3e-4]);
    let u = horner(l, zb, &[-3.883_964_4e-3, 2.425_462_2e-2]);
    let mut q = l.fma(r, sb, u);
    for c in [-1.067_778_8e-1, -6.348_467e-1, -1.287_175_1e-1] {
        let c = l.f(c);
        q = l.fma(q, zb, c);
    }
    let neg_zb = l.neg(zb);
    let q = l.fma(q, zb, neg_zb);
    let one = l.f(1.0);
    // q is in [-16.7, -0.8] for zb in [0, 4] (NaN stays NaN).
    let e = exp_core(l, q, false);
    l.sub(one, e)
}

/// [`erf_lanes`]'s value for `z = |x|` up to [`ERF_SPLIT`], before the sign.
#[inline(always)]
fn erf_small<L: Lanes>(l: &mut L, z: L::F) -> L::F {
    let s = l.mul(z, z);
    let p = horner(
        l,
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
    l.fma(p, z, z)
}

/// [`Lanes`] as Cranelift instructions of `F32` or `F32X4` (and `I32` or `I32X4`).
struct Clif<'a, 'f> {
    b: &'a mut FunctionBuilder<'f>,
    float: Type,
    int: Type,
}

impl<'a, 'f> Clif<'a, 'f> {
    fn new(b: &'a mut FunctionBuilder<'f>, float: Type) -> Self {
        let int = if float.is_vector() {
            types::I32X4
        } else {
            types::I32
        };
        Clif { b, float, int }
    }
}

impl Lanes for Clif<'_, '_> {
    type F = Value;
    type I = Value;
    type M = Value;
    fn f(&mut self, value: f32) -> Value {
        let c = self.b.ins().f32const(value);
        if self.float.is_vector() {
            self.b.ins().splat(self.float, c)
        } else {
            c
        }
    }
    fn i(&mut self, value: i32) -> Value {
        let c = self.b.ins().iconst(types::I32, i64::from(value));
        if self.int.is_vector() {
            self.b.ins().splat(self.int, c)
        } else {
            c
        }
    }
    fn add(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fadd(a, b)
    }
    fn sub(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fsub(a, b)
    }
    fn mul(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fmul(a, b)
    }
    fn div(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fdiv(a, b)
    }
    fn fma(&mut self, a: Value, b: Value, c: Value) -> Value {
        self.b.ins().fma(a, b, c)
    }
    fn neg(&mut self, a: Value) -> Value {
        self.b.ins().fneg(a)
    }
    fn abs(&mut self, a: Value) -> Value {
        self.b.ins().fabs(a)
    }
    fn lt(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(FloatCC::LessThan, a, b)
    }
    fn select(&mut self, cond: Value, then: Value, else_: Value) -> Value {
        if self.float.is_vector() {
            let mask = self.b.ins().bitcast(self.float, MemFlagsData::new(), cond);
            self.b.ins().bitselect(mask, then, else_)
        } else {
            self.b.ins().select(cond, then, else_)
        }
    }
    fn to_int(&mut self, a: Value) -> Value {
        self.b.ins().bitcast(self.int, MemFlagsData::new(), a)
    }
    fn to_float(&mut self, a: Value) -> Value {
        self.b.ins().bitcast(self.float, MemFlagsData::new(), a)
    }
    fn iadd(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().iadd(a, b)
    }
    fn isub(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().isub(a, b)
    }
    fn band(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().band(a, b)
    }
    fn bor(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().bor(a, b)
    }
    fn shl23(&mut self, a: Value) -> Value {
        self.b.ins().ishl_imm_u(a, 23)
    }
    fn sshr1(&mut self, a: Value) -> Value {
        self.b.ins().sshr_imm_u(a, 1)
    }
}

/// `e^x` for `x` of type `ty` (F32 or F32X4).
pub(crate) fn exp(b: &mut FunctionBuilder, ty: Type, x: Value) -> Value {
    exp_lanes(&mut Clif::new(b, ty), x)
}

/// `tanh(x)` for `x` of type `ty` (F32 or F32X4).
pub(crate) fn tanh(b: &mut FunctionBuilder, ty: Type, x: Value) -> Value {
    tanh_lanes(&mut Clif::new(b, ty), x)
}

/// `erf(x)` for `x` of type `ty` (F32 or F32X4).
pub(crate) fn erf(b: &mut FunctionBuilder, ty: Type, x: Value) -> Value {
    erf_lanes(&mut Clif::new(b, ty), x)
}

/// The three functions over 16 lanes in memory, computed in Rust: what the SIMD path calls
/// when it runs four vectors in lockstep (`simd.rs`), a quarter of the instructions of four
/// inline 4-lane polynomials on a host with AVX-512F. Each helper reads 16 f32 at `lanes`
/// (16-byte aligned: the caller's stack slot) and writes the results back; the symbols name
/// the best form the host runs, all of which give the same bits (the module doc).
pub(crate) mod native {
    use super::{erf_lanes, exp_lanes, tanh_lanes, Lanes};

    /// Lanes one call computes.
    pub(crate) const WIDTH: usize = 16;

    /// A helper's signature: 16 floats at the pointer, replaced by the results.
    type Helper = unsafe extern "C" fn(*mut f32);

    /// [`Lanes`] of one plain f32.
    struct Plain;

    impl Lanes for Plain {
        type F = f32;
        type I = i32;
        type M = bool;
        #[inline(always)]
        fn f(&mut self, value: f32) -> f32 {
            value
        }
        #[inline(always)]
        fn i(&mut self, value: i32) -> i32 {
            value
        }
        #[inline(always)]
        fn add(&mut self, a: f32, b: f32) -> f32 {
            a + b
        }
        #[inline(always)]
        fn sub(&mut self, a: f32, b: f32) -> f32 {
            a - b
        }
        #[inline(always)]
        fn mul(&mut self, a: f32, b: f32) -> f32 {
            a * b
        }
        #[inline(always)]
        fn div(&mut self, a: f32, b: f32) -> f32 {
            a / b
        }
        #[inline(always)]
        fn fma(&mut self, a: f32, b: f32, c: f32) -> f32 {
            a.mul_add(b, c)
        }
        #[inline(always)]
        fn neg(&mut self, a: f32) -> f32 {
            -a
        }
        #[inline(always)]
        fn abs(&mut self, a: f32) -> f32 {
            a.abs()
        }
        #[inline(always)]
        fn lt(&mut self, a: f32, b: f32) -> bool {
            a < b
        }
        #[inline(always)]
        fn select(&mut self, cond: bool, then: f32, else_: f32) -> f32 {
            if cond {
                then
            } else {
                else_
            }
        }
        #[inline(always)]
        fn to_int(&mut self, a: f32) -> i32 {
            a.to_bits() as i32
        }
        #[inline(always)]
        fn to_float(&mut self, a: i32) -> f32 {
            f32::from_bits(a as u32)
        }
        #[inline(always)]
        fn iadd(&mut self, a: i32, b: i32) -> i32 {
            a.wrapping_add(b)
        }
        #[inline(always)]
        fn isub(&mut self, a: i32, b: i32) -> i32 {
            a.wrapping_sub(b)
        }
        #[inline(always)]
        fn band(&mut self, a: i32, b: i32) -> i32 {
            a & b
        }
        #[inline(always)]
        fn bor(&mut self, a: i32, b: i32) -> i32 {
            a | b
        }
        #[inline(always)]
        fn shl23(&mut self, a: i32) -> i32 {
            ((a as u32) << 23) as i32
        }
        #[inline(always)]
        fn sshr1(&mut self, a: i32) -> i32 {
            a >> 1
        }
    }

    /// Defines a helper computing `$lanes` over 16 floats one at a time, for hosts without
    /// AVX2 (and other architectures).
    macro_rules! plain_helper {
        ($name:ident, $lanes:ident) => {
            /// # Safety
            /// `lanes` points to 16 writable, initialized f32 values.
            unsafe extern "C" fn $name(lanes: *mut f32) {
                for i in 0..WIDTH {
                    // SAFETY: the caller passes 16 floats.
                    unsafe { *lanes.add(i) = $lanes(&mut Plain, *lanes.add(i)) };
                }
            }
        };
    }
    plain_helper!(exp_plain, exp_lanes);
    plain_helper!(tanh_plain, tanh_lanes);
    plain_helper!(erf_plain, erf_lanes);

    #[cfg(target_arch = "x86_64")]
    mod x86 {
        use super::super::{
            copysign, erf_lanes, erf_large, erf_small, exp_core, exp_lanes, odd_split, tanh_lanes,
            tanh_large, tanh_small, Lanes, ERF_SPLIT, TANH_SPLIT,
        };
        use std::arch::x86_64::*;

        /// [`Lanes`] of one AVX-512F vector (16 lanes). Its methods are only called from
        /// functions with the feature enabled, into which they inline.
        pub(super) struct Avx512;

        impl Lanes for Avx512 {
            type F = __m512;
            type I = __m512i;
            type M = __mmask16;
            #[inline(always)]
            fn f(&mut self, value: f32) -> __m512 {
                unsafe { _mm512_set1_ps(value) }
            }
            #[inline(always)]
            fn i(&mut self, value: i32) -> __m512i {
                unsafe { _mm512_set1_epi32(value) }
            }
            #[inline(always)]
            fn add(&mut self, a: __m512, b: __m512) -> __m512 {
                unsafe { _mm512_add_ps(a, b) }
            }
            #[inline(always)]
            fn sub(&mut self, a: __m512, b: __m512) -> __m512 {
                unsafe { _mm512_sub_ps(a, b) }
            }
            #[inline(always)]
            fn mul(&mut self, a: __m512, b: __m512) -> __m512 {
                unsafe { _mm512_mul_ps(a, b) }
            }
            #[inline(always)]
            fn div(&mut self, a: __m512, b: __m512) -> __m512 {
                unsafe { _mm512_div_ps(a, b) }
            }
            #[inline(always)]
            fn fma(&mut self, a: __m512, b: __m512, c: __m512) -> __m512 {
                unsafe { _mm512_fmadd_ps(a, b, c) }
            }
            #[inline(always)]
            fn neg(&mut self, a: __m512) -> __m512 {
                unsafe {
                    _mm512_castsi512_ps(_mm512_xor_si512(
                        _mm512_castps_si512(a),
                        _mm512_set1_epi32(i32::MIN),
                    ))
                }
            }
            #[inline(always)]
            fn abs(&mut self, a: __m512) -> __m512 {
                unsafe { _mm512_abs_ps(a) }
            }
            #[inline(always)]
            fn lt(&mut self, a: __m512, b: __m512) -> __mmask16 {
                unsafe { _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b) }
            }
            #[inline(always)]
            fn select(&mut self, cond: __mmask16, then: __m512, else_: __m512) -> __m512 {
                unsafe { _mm512_mask_blend_ps(cond, else_, then) }
            }
            #[inline(always)]
            fn to_int(&mut self, a: __m512) -> __m512i {
                unsafe { _mm512_castps_si512(a) }
            }
            #[inline(always)]
            fn to_float(&mut self, a: __m512i) -> __m512 {
                unsafe { _mm512_castsi512_ps(a) }
            }
            #[inline(always)]
            fn iadd(&mut self, a: __m512i, b: __m512i) -> __m512i {
                unsafe { _mm512_add_epi32(a, b) }
            }
            #[inline(always)]
            fn isub(&mut self, a: __m512i, b: __m512i) -> __m512i {
                unsafe { _mm512_sub_epi32(a, b) }
            }
            #[inline(always)]
            fn band(&mut self, a: __m512i, b: __m512i) -> __m512i {
                unsafe { _mm512_and_si512(a, b) }
            }
            #[inline(always)]
            fn bor(&mut self, a: __m512i, b: __m512i) -> __m512i {
                unsafe { _mm512_or_si512(a, b) }
            }
            #[inline(always)]
            fn shl23(&mut self, a: __m512i) -> __m512i {
                unsafe { _mm512_slli_epi32::<23>(a) }
            }
            #[inline(always)]
            fn sshr1(&mut self, a: __m512i) -> __m512i {
                unsafe { _mm512_srai_epi32::<1>(a) }
            }
        }

        /// [`Lanes`] of one AVX2 vector (8 lanes), with FMA; called like [`Avx512`]'s.
        pub(super) struct Avx2;

        impl Lanes for Avx2 {
            type F = __m256;
            type I = __m256i;
            type M = __m256;
            #[inline(always)]
            fn f(&mut self, value: f32) -> __m256 {
                unsafe { _mm256_set1_ps(value) }
            }
            #[inline(always)]
            fn i(&mut self, value: i32) -> __m256i {
                unsafe { _mm256_set1_epi32(value) }
            }
            #[inline(always)]
            fn add(&mut self, a: __m256, b: __m256) -> __m256 {
                unsafe { _mm256_add_ps(a, b) }
            }
            #[inline(always)]
            fn sub(&mut self, a: __m256, b: __m256) -> __m256 {
                unsafe { _mm256_sub_ps(a, b) }
            }
            #[inline(always)]
            fn mul(&mut self, a: __m256, b: __m256) -> __m256 {
                unsafe { _mm256_mul_ps(a, b) }
            }
            #[inline(always)]
            fn div(&mut self, a: __m256, b: __m256) -> __m256 {
                unsafe { _mm256_div_ps(a, b) }
            }
            #[inline(always)]
            fn fma(&mut self, a: __m256, b: __m256, c: __m256) -> __m256 {
                unsafe { _mm256_fmadd_ps(a, b, c) }
            }
            #[inline(always)]
            fn neg(&mut self, a: __m256) -> __m256 {
                unsafe { _mm256_xor_ps(a, _mm256_set1_ps(-0.0)) }
            }
            #[inline(always)]
            fn abs(&mut self, a: __m256) -> __m256 {
                unsafe { _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(i32::MAX))) }
            }
            #[inline(always)]
            fn lt(&mut self, a: __m256, b: __m256) -> __m256 {
                unsafe { _mm256_cmp_ps::<_CMP_LT_OQ>(a, b) }
            }
            #[inline(always)]
            fn select(&mut self, cond: __m256, then: __m256, else_: __m256) -> __m256 {
                unsafe { _mm256_blendv_ps(else_, then, cond) }
            }
            #[inline(always)]
            fn to_int(&mut self, a: __m256) -> __m256i {
                unsafe { _mm256_castps_si256(a) }
            }
            #[inline(always)]
            fn to_float(&mut self, a: __m256i) -> __m256 {
                unsafe { _mm256_castsi256_ps(a) }
            }
            #[inline(always)]
            fn iadd(&mut self, a: __m256i, b: __m256i) -> __m256i {
                unsafe { _mm256_add_epi32(a, b) }
            }
            #[inline(always)]
            fn isub(&mut self, a: __m256i, b: __m256i) -> __m256i {
                unsafe { _mm256_sub_epi32(a, b) }
            }
            #[inline(always)]
            fn band(&mut self, a: __m256i, b: __m256i) -> __m256i {
                unsafe { _mm256_and_si256(a, b) }
            }
            #[inline(always)]
            fn bor(&mut self, a: __m256i, b: __m256i) -> __m256i {
                unsafe { _mm256_or_si256(a, b) }
            }
            #[inline(always)]
            fn shl23(&mut self, a: __m256i) -> __m256i {
                unsafe { _mm256_slli_epi32::<23>(a) }
            }
            #[inline(always)]
            fn sshr1(&mut self, a: __m256i) -> __m256i {
                unsafe { _mm256_srai_epi32::<1>(a) }
            }
        }

        // The caller stores its four 4-lane vectors one by one and loads them back one by
        // one: each wide value is moved in the same 16-byte pieces, so that every load takes
        // its bytes from one earlier store (a load spanning several stores, or a part of a
        // wider one, waits for them to reach the cache: ~100 cycles a call, measured).

        /// Sixteen floats at `at` (16-byte aligned), read as four 16-byte loads.
        #[target_feature(enable = "avx512f")]
        unsafe fn load_x4_512(at: *const f32) -> __m512 {
            // Volatile, or the compiler merges them into one 64-byte load.
            let q = |i: usize| unsafe { at.add(4 * i).cast::<__m128>().read_volatile() };
            let x = _mm512_castps128_ps512(q(0));
            let x = _mm512_insertf32x4::<1>(x, q(1));
            let x = _mm512_insertf32x4::<2>(x, q(2));
            _mm512_insertf32x4::<3>(x, q(3))
        }

        /// `y` written to sixteen floats at `at` (16-byte aligned) as four 16-byte stores.
        #[target_feature(enable = "avx512f")]
        unsafe fn store_x4_512(at: *mut f32, y: __m512) {
            let pieces = [
                _mm512_castps512_ps128(y),
                _mm512_extractf32x4_ps::<1>(y),
                _mm512_extractf32x4_ps::<2>(y),
                _mm512_extractf32x4_ps::<3>(y),
            ];
            for (i, piece) in pieces.into_iter().enumerate() {
                // Volatile, as the loads.
                unsafe { at.add(4 * i).cast::<__m128>().write_volatile(piece) };
            }
        }

        /// Eight floats at `at` (16-byte aligned), read as two 16-byte loads.
        #[target_feature(enable = "avx2")]
        unsafe fn load_x4_256(at: *const f32) -> __m256 {
            let q = |i: usize| unsafe { at.add(4 * i).cast::<__m128>().read_volatile() };
            _mm256_set_m128(q(1), q(0))
        }

        /// `y` written to eight floats at `at` (16-byte aligned) as two 16-byte stores.
        #[target_feature(enable = "avx2")]
        unsafe fn store_x4_256(at: *mut f32, y: __m256) {
            let pieces = [_mm256_castps256_ps128(y), _mm256_extractf128_ps::<1>(y)];
            for (i, piece) in pieces.into_iter().enumerate() {
                unsafe { at.add(4 * i).cast::<__m128>().write_volatile(piece) };
            }
        }

        /// Defines the AVX-512F and the AVX2+FMA helper computing `$lanes` over 16 floats.
        macro_rules! x86_helpers {
            ($avx512:ident, $avx2:ident, $lanes:ident) => {
                x86_helpers!($avx512, $avx2, $lanes, $lanes);
            };
            ($avx512:ident, $avx2:ident, $lanes:ident, $lanes_avx2:ident) => {
                /// # Safety
                /// `lanes` points to 16 writable, initialized f32 values, 16-byte aligned;
                /// the host has AVX-512F.
                #[target_feature(enable = "avx512f")]
                pub(super) unsafe extern "C" fn $avx512(lanes: *mut f32) {
                    // SAFETY: the caller passes 16 floats.
                    let x = unsafe { load_x4_512(lanes) };
                    let y = $lanes(&mut Avx512, x);
                    unsafe { store_x4_512(lanes, y) };
                }

                /// # Safety
                /// `lanes` points to 16 writable, initialized f32 values, 16-byte aligned;
                /// the host has AVX2 and FMA.
                #[target_feature(enable = "avx2,fma")]
                pub(super) unsafe extern "C" fn $avx2(lanes: *mut f32) {
                    for half in [0, 8] {
                        // SAFETY: the caller passes 16 floats.
                        let at = unsafe { lanes.add(half) };
                        let x = unsafe { load_x4_256(at) };
                        let y = $lanes_avx2(&mut Avx2, x);
                        unsafe { store_x4_256(at, y) };
                    }
                }
            };
        }
        /// [`exp_lanes`] on 8 lanes, in one step of scaling (`exp_core`'s `split_scale`
        /// false) when every lane is in [-87, 88], where that gives the same bits: the clamps
        /// change nothing there, and `y 2^n1 2^n2` (the first product exact, both factors
        /// normal) rounds as `y 2^n` does; and +0 when every lane is below -104, as there.
        /// The split scale and the clamps were a quarter of the polynomial's instructions,
        /// and softmax arguments (`x - max`) and GELU's rarely leave that range.
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        fn exp_avx2_lanes(_: &mut Avx2, x: __m256) -> __m256 {
            let inside = _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_set1_ps(-87.0)),
                _mm256_cmp_ps::<_CMP_LE_OQ>(x, _mm256_set1_ps(88.0)),
            );
            if _mm256_movemask_ps(inside) == 0xff {
                exp_core(&mut Avx2, x, false)
            } else if _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(-104.0)))
                == 0xff
            {
                // Every lane rounds to +0 (`exp_core`'s vanishing scale): a causal mask's
                // scores.
                _mm256_setzero_ps()
            } else {
                exp_lanes(&mut Avx2, x)
            }
        }
        x86_helpers!(exp_avx512, exp_avx2, exp_lanes, exp_avx2_lanes);

        /// `e^x` of 16 lanes, the same bits as the 16-lane helper (for native kernels:
        /// `softmax.rs`).
        #[target_feature(enable = "avx512f")]
        #[inline]
        pub(crate) fn exp16(x: __m512) -> __m512 {
            exp_lanes(&mut Avx512, x)
        }
        /// `e^x` of 8 lanes, the same bits as the 8-lane helper's halves (for native kernels:
        /// `softmax.rs` on AVX2).
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        pub(crate) fn exp8(x: __m256) -> __m256 {
            exp_avx2_lanes(&mut Avx2, x)
        }
        /// [`odd_split`] on 8 lanes: only the form every lane takes, with `x`'s sign, when
        /// they all take the same one (the same bits as choosing lane by lane).
        #[inline(always)]
        unsafe fn one_form(
            l: &mut Avx2,
            x: __m256,
            split: f32,
            small: impl Fn(&mut Avx2, __m256) -> __m256,
            large: impl Fn(&mut Avx2, __m256) -> __m256,
        ) -> __m256 {
            let z = l.abs(x);
            let bound = _mm256_set1_ps(split);
            let is_large = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(bound, z));
            let is_small = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(bound, z));
            let r = if is_small == 0xff {
                small(l, z)
            } else if is_large == 0xff {
                large(l, z)
            } else {
                return odd_split(l, x, split, small, large);
            };
            copysign(l, r, x)
        }
        /// [`tanh_lanes`] on 8 lanes through [`one_form`].
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        fn tanh_avx2_lanes(l: &mut Avx2, x: __m256) -> __m256 {
            // SAFETY: AVX2 (this function's features).
            unsafe { one_form(l, x, TANH_SPLIT, tanh_small, tanh_large) }
        }
        x86_helpers!(tanh_avx512, tanh_avx2, tanh_lanes, tanh_avx2_lanes);
        /// [`erf_lanes`] on 8 lanes through [`one_form`]: GELU's arguments mostly mix both
        /// forms; a vector of small ones skips the exponential.
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        fn erf_avx2_lanes(l: &mut Avx2, x: __m256) -> __m256 {
            // SAFETY: AVX2 (this function's features).
            unsafe { one_form(l, x, ERF_SPLIT, erf_small, erf_large) }
        }
        x86_helpers!(erf_avx512, erf_avx2, erf_lanes, erf_avx2_lanes);
    }

    #[cfg(target_arch = "x86_64")]
    pub(crate) use x86::exp16 as exp_avx512;
    #[cfg(target_arch = "x86_64")]
    pub(crate) use x86::exp8 as exp_avx2;

    /// The widest form this host runs: AVX-512F, AVX2 with FMA, or none (plain f32).
    #[derive(Copy, Clone, PartialEq, Eq)]
    enum Form {
        Avx512,
        Avx2,
        Plain,
    }

    fn form() -> Form {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") {
                return Form::Avx512;
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Form::Avx2;
            }
        }
        Form::Plain
    }

    /// Whether the wide helpers beat four inline 4-lane polynomials on this host (they run
    /// vectors of 8 or 16 lanes); the plain form is correct everywhere, and slower.
    pub(crate) fn fast() -> bool {
        form() != Form::Plain
    }

    /// Each function's forms this host runs, the plain one first (for tests).
    #[cfg(test)]
    pub(super) fn forms_by_function() -> Vec<(&'static str, Vec<Helper>)> {
        let mut by_function: Vec<(&'static str, Vec<Helper>)> = vec![
            ("exp", vec![exp_plain]),
            ("tanh", vec![tanh_plain]),
            ("erf", vec![erf_plain]),
        ];
        #[cfg(target_arch = "x86_64")]
        {
            let f = form();
            for (i, (avx512, avx2)) in [
                (x86::exp_avx512 as Helper, x86::exp_avx2 as Helper),
                (x86::tanh_avx512, x86::tanh_avx2),
                (x86::erf_avx512, x86::erf_avx2),
            ]
            .into_iter()
            .enumerate()
            {
                if f != Form::Plain {
                    by_function[i].1.push(avx2);
                }
                if f == Form::Avx512 {
                    by_function[i].1.push(avx512);
                }
            }
        }
        by_function
    }

    /// The helpers' symbols for the JIT: `memc_{exp,tanh,erf}_f32x16`, each the best form.
    pub(crate) fn symbols() -> [(&'static str, *const u8); 3] {
        let (exp, tanh, erf): (Helper, Helper, Helper) = match form() {
            #[cfg(target_arch = "x86_64")]
            Form::Avx512 => (x86::exp_avx512, x86::tanh_avx512, x86::erf_avx512),
            #[cfg(target_arch = "x86_64")]
            Form::Avx2 => (x86::exp_avx2, x86::tanh_avx2, x86::erf_avx2),
            _ => (exp_plain, tanh_plain, erf_plain),
        };
        [
            ("memc_exp_f32x16", exp as *const u8),
            ("memc_tanh_f32x16", tanh as *const u8),
            ("memc_erf_f32x16", erf as *const u8),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::native::*;

    /// The helpers' operand, aligned as the JIT's stack slot is (and more).
    #[repr(align(64))]
    struct Aligned([f32; WIDTH]);

    /// Every form of the wide helpers this host runs gives the plain form's bits (the JIT
    /// uses the best one; `cpu_elementwise` checks it against the inline polynomials).
    #[test]
    fn every_wide_form_gives_the_same_bits() {
        let mut inputs: Vec<f32> = (0..20_000)
            .map(|i| -120.0 + 220.0 * i as f32 / 20_000.0)
            .chain([
                0.0,
                -0.0,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
                f32::MIN,
                1e-40,
            ])
            .collect();
        while !inputs.len().is_multiple_of(WIDTH) {
            inputs.push(0.75);
        }
        for (name, forms) in forms_by_function() {
            let mut outs: Vec<Vec<f32>> = Vec::new();
            for form in forms {
                let mut out = Vec::with_capacity(inputs.len());
                for chunk in inputs.chunks(WIDTH) {
                    let mut lanes = Aligned([0.0; WIDTH]);
                    lanes.0.copy_from_slice(chunk);
                    // SAFETY: 16 floats, 64-byte aligned; `forms_by_function` lists only
                    // forms this host runs.
                    unsafe { form(lanes.0.as_mut_ptr()) };
                    out.extend(lanes.0);
                }
                outs.push(out);
            }
            for out in &outs[1..] {
                for ((&x, a), b) in inputs.iter().zip(&outs[0]).zip(out) {
                    assert_eq!(a.to_bits(), b.to_bits(), "{name}({x}): {a} and {b}");
                }
            }
        }
    }
}
