//! Transcendental functions in f64, written as PTX from exact arithmetic (`fma.rn.f64`,
//! `div.rn.f64`, `sqrt.rn.f64`) and bit manipulation: no `.approx` instruction is used, so the
//! results are accurate to a few units in the last place of f64 (about 1e-15 relative; `pow`
//! about `|y log x|` ulps; sin/cos/tan reduce by pi/2 in two parts, exact for |x| < 2^20 * pi/2
//! and degrading beyond). f32 and f16 values are widened, computed here and rounded, as the
//! reference computes in f64 and rounds.
//!
//! Methods: exp by n = rint(x log2 e), a two-part remainder and a degree-13 Taylor polynomial,
//! scaled by two exponent-built powers of two; log by the exponent and the atanh series of
//! (m-1)/(m+1); log1p and expm1 by the classic correction and a Taylor series near 0; sin/cos
//! by Taylor polynomials on [-pi/4, pi/4]; atan by reduction to [0, tan(pi/8)] and its series;
//! the inverse and hyperbolic functions from those; erf by its Taylor series below 3 and the
//! continued fraction of erfc above, as the reference does.

use super::emit::{f64_imm, Cls, Em, R};
use crate::kernel::UnaryOp;

const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
const PIO2_1: f64 = f64::from_bits(0x3FF9_21FB_5440_0000);
const PIO2_1T: f64 = f64::from_bits(0x3DD0_B461_1A62_6331);

impl Em {
    /// `c[0] + x * (c[1] + x * (...))`.
    fn poly(&mut self, x: &str, c: &[f64]) -> String {
        let n = c.len();
        let mut acc = self.fd_imm(c[n - 1]);
        for &k in c[..n - 1].iter().rev() {
            acc = self.op3(Cls::Fd, "fma.rn.f64", &acc, x, &f64_imm(k));
        }
        acc
    }

    fn fbin(&mut self, op: &str, a: &str, b: &str) -> String {
        self.op2(Cls::Fd, &format!("{op}.f64"), a, b)
    }

    /// `p ? a : b` on f64 registers.
    fn fsel(&mut self, a: &str, b: &str, p: &str) -> String {
        self.selp(Cls::Fd, a, b, p)
    }

    fn fcmp(&mut self, cmp: &str, a: &str, b: &str) -> String {
        self.setp(cmp, "f64", a, b)
    }

    /// `x` with NaN passed through (`res` otherwise).
    fn nan_through(&mut self, x: &str, res: &str) -> String {
        let p = self.fcmp("nan", x, x);
        self.fsel(x, res, &p)
    }

    /// The f64 function `op` of `x`.
    pub(super) fn math1(&mut self, op: UnaryOp, x: &str) -> R<String> {
        let r = match op {
            UnaryOp::Exp => self.exp64(x),
            UnaryOp::Log => self.log64(x),
            UnaryOp::Sin => self.sincos(x, 0),
            UnaryOp::Cos => self.sincos(x, 1),
            UnaryOp::Tan => {
                let s = self.sincos(x, 0);
                let c = self.sincos(x, 1);
                self.fbin("div.rn", &s, &c)
            }
            UnaryOp::Atan => self.atan64(x),
            UnaryOp::Asin => {
                let one = f64_imm(1.0);
                let a = self.fbin("sub.rn", &one, x);
                let b = self.fbin("add.rn", &one, x);
                let d = self.fbin("mul.rn", &a, &b);
                let d = self.op1(Cls::Fd, "sqrt.rn.f64", &d);
                let q = self.fbin("div.rn", x, &d);
                self.atan64(&q)
            }
            UnaryOp::Acos => {
                let one = f64_imm(1.0);
                let a = self.fbin("sub.rn", &one, x);
                let b = self.fbin("add.rn", &one, x);
                let q = self.fbin("div.rn", &a, &b);
                let q = self.op1(Cls::Fd, "sqrt.rn.f64", &q);
                let t = self.atan64(&q);
                self.fbin("add.rn", &t, &t)
            }
            UnaryOp::Sinh => {
                let a = self.op1(Cls::Fd, "abs.f64", x);
                let u = self.expm1_64(&a);
                let u1 = self.fbin("add.rn", &u, &f64_imm(1.0));
                let q = self.fbin("div.rn", &u, &u1);
                let s = self.fbin("add.rn", &u, &q);
                let small = self.fbin("mul.rn", &s, &f64_imm(0.5));
                let big = self.exp_half(&a);
                let p = self.fcmp("lt", &a, &f64_imm(22.0));
                let r = self.fsel(&small, &big, &p);
                self.op2(Cls::Fd, "copysign.f64", x, &r)
            }
            UnaryOp::Cosh => {
                let a = self.op1(Cls::Fd, "abs.f64", x);
                let e = self.exp64(&a);
                let inv = self.op1(Cls::Fd, "rcp.rn.f64", &e);
                let s = self.fbin("add.rn", &e, &inv);
                let small = self.fbin("mul.rn", &s, &f64_imm(0.5));
                let big = self.exp_half(&a);
                let p = self.fcmp("lt", &a, &f64_imm(22.0));
                self.fsel(&small, &big, &p)
            }
            UnaryOp::Tanh => {
                let a = self.op1(Cls::Fd, "abs.f64", x);
                let a2 = self.fbin("add.rn", &a, &a);
                let u = self.expm1_64(&a2);
                let d = self.fbin("add.rn", &u, &f64_imm(2.0));
                let q = self.fbin("div.rn", &u, &d);
                let p = self.fcmp("lt", &a, &f64_imm(22.0));
                let r = self.fsel(&q, &f64_imm(1.0), &p);
                self.op2(Cls::Fd, "copysign.f64", x, &r)
            }
            UnaryOp::Asinh => {
                let a = self.op1(Cls::Fd, "abs.f64", x);
                let a2 = self.fbin("mul.rn", &a, &a);
                let s = self.fbin("add.rn", &a2, &f64_imm(1.0));
                let s = self.op1(Cls::Fd, "sqrt.rn.f64", &s);
                let s = self.fbin("add.rn", &s, &f64_imm(1.0));
                let q = self.fbin("div.rn", &a2, &s);
                let t = self.fbin("add.rn", &a, &q);
                let small = self.log1p64(&t);
                let l = self.log64(&a);
                let big = self.fbin("add.rn", &l, &f64_imm(std::f64::consts::LN_2));
                let p = self.fcmp("gt", &a, &f64_imm(1e150));
                let r = self.fsel(&big, &small, &p);
                self.op2(Cls::Fd, "copysign.f64", x, &r)
            }
            UnaryOp::Acosh => {
                let t = self.fbin("sub.rn", x, &f64_imm(1.0));
                let t2 = self.fbin("mul.rn", &t, &t);
                let tt = self.fbin("add.rn", &t, &t);
                let s = self.fbin("add.rn", &tt, &t2);
                let s = self.op1(Cls::Fd, "sqrt.rn.f64", &s);
                let u = self.fbin("add.rn", &t, &s);
                let small = self.log1p64(&u);
                let l = self.log64(x);
                let big = self.fbin("add.rn", &l, &f64_imm(std::f64::consts::LN_2));
                let p = self.fcmp("gt", x, &f64_imm(1e150));
                self.fsel(&big, &small, &p)
            }
            UnaryOp::Atanh => {
                let a = self.op1(Cls::Fd, "abs.f64", x);
                let d = self.fbin("sub.rn", &f64_imm(1.0), &a);
                let aa = self.fbin("add.rn", &a, &a);
                let q = self.fbin("div.rn", &aa, &d);
                let l = self.log1p64(&q);
                let r = self.fbin("mul.rn", &l, &f64_imm(0.5));
                self.op2(Cls::Fd, "copysign.f64", x, &r)
            }
            UnaryOp::Erf => self.erf64(x),
            _ => return Err(format!("{op:?} has no f64 routine")),
        };
        Ok(self.nan_through(x, &r))
    }

    /// `exp(a - ln 2)`, half of `exp(a)` without its overflow below the f64 limit.
    fn exp_half(&mut self, a: &str) -> String {
        let t = self.fbin("sub.rn", a, &f64_imm(std::f64::consts::LN_2));
        self.exp64(&t)
    }

    /// `2^k` for an s32 `k` in [-1022, 1023], built from its exponent bits.
    fn pow2(&mut self, k: &str) -> String {
        let e = self.op2(Cls::R, "add.s32", k, "1023");
        let e = self.op1(Cls::Rd, "cvt.u64.u32", &e);
        let bits = self.op2(Cls::Rd, "shl.b64", &e, "52");
        self.op1(Cls::Fd, "mov.b64", &bits)
    }

    pub(super) fn exp64(&mut self, x: &str) -> String {
        let xc = self.fbin("max", x, &f64_imm(-746.0));
        let xc = self.fbin("min", &xc, &f64_imm(710.0));
        let t = self.fbin("mul.rn", &xc, &f64_imm(std::f64::consts::LOG2_E));
        let n = self.op1(Cls::Fd, "cvt.rni.f64.f64", &t);
        let nn = self.op1(Cls::Fd, "neg.f64", &n);
        let r = self.op3(Cls::Fd, "fma.rn.f64", &nn, &f64_imm(LN2_HI), &xc);
        let r = self.op3(Cls::Fd, "fma.rn.f64", &nn, &f64_imm(LN2_LO), &r);
        let mut c = [0f64; 14];
        let mut f = 1.0f64;
        for (k, slot) in c.iter_mut().enumerate() {
            if k > 0 {
                f *= k as f64;
            }
            *slot = 1.0 / f;
        }
        let p = self.poly(&r, &c);
        let ni = self.op1(Cls::R, "cvt.rni.s32.f64", &n);
        let n1 = self.op2(Cls::R, "shr.s32", &ni, "1");
        let n2 = self.op2(Cls::R, "sub.s32", &ni, &n1);
        let s1 = self.pow2(&n1);
        let s2 = self.pow2(&n2);
        let y = self.fbin("mul.rn", &p, &s1);
        let y = self.fbin("mul.rn", &y, &s2);
        self.nan_through(x, &y)
    }

    pub(super) fn log64(&mut self, x: &str) -> String {
        let small = self.fcmp("lt", x, &f64_imm(f64::MIN_POSITIVE));
        let scaled = self.fbin("mul.rn", x, &f64_imm(2f64.powi(54)));
        let xs = self.fsel(&scaled, x, &small);
        let adj = self.selp(Cls::R, "-54", "0", &small);
        let bits = self.op1(Cls::Rd, "mov.b64", &xs);
        let hi = self.op2(Cls::Rd, "shr.u64", &bits, "52");
        let hi = self.op1(Cls::R, "cvt.u32.u64", &hi);
        let hi = self.op2(Cls::R, "and.b32", &hi, "2047");
        let e = self.op2(Cls::R, "sub.s32", &hi, "1023");
        let e = self.op2(Cls::R, "add.s32", &e, &adj);
        let mb = self.op2(Cls::Rd, "and.b64", &bits, "0x000FFFFFFFFFFFFF");
        let mb = self.op2(Cls::Rd, "or.b64", &mb, "0x3FF0000000000000");
        let m = self.op1(Cls::Fd, "mov.b64", &mb);
        let big = self.fcmp("gt", &m, &f64_imm(std::f64::consts::SQRT_2));
        let mh = self.fbin("mul.rn", &m, &f64_imm(0.5));
        let m = self.fsel(&mh, &m, &big);
        let e1 = self.op2(Cls::R, "add.s32", &e, "1");
        let e = self.selp(Cls::R, &e1, &e, &big);
        let num = self.fbin("sub.rn", &m, &f64_imm(1.0));
        let den = self.fbin("add.rn", &m, &f64_imm(1.0));
        let f = self.fbin("div.rn", &num, &den);
        let s = self.fbin("mul.rn", &f, &f);
        let c: Vec<f64> = (0..12).map(|k| 1.0 / (2 * k + 1) as f64).collect();
        let q = self.poly(&s, &c);
        let f2 = self.fbin("add.rn", &f, &f);
        let lm = self.fbin("mul.rn", &f2, &q);
        let ef = self.op1(Cls::Fd, "cvt.rn.f64.s32", &e);
        let lo = self.op3(Cls::Fd, "fma.rn.f64", &ef, &f64_imm(LN2_LO), &lm);
        let r = self.op3(Cls::Fd, "fma.rn.f64", &ef, &f64_imm(LN2_HI), &lo);
        // Special cases: +inf, 0 (-inf), negative or NaN (NaN).
        let inf = f64_imm(f64::INFINITY);
        let pinf = self.fcmp("eq", x, &inf);
        let r = self.fsel(&inf, &r, &pinf);
        let zero = self.fcmp("eq", x, &f64_imm(0.0));
        let r = self.fsel(&f64_imm(f64::NEG_INFINITY), &r, &zero);
        let neg = self.fcmp("ltu", x, &f64_imm(0.0));
        self.fsel(&f64_imm(f64::NAN), &r, &neg)
    }

    fn log1p64(&mut self, x: &str) -> String {
        let u = self.fbin("add.rn", x, &f64_imm(1.0));
        let l = self.log64(&u);
        let um1 = self.fbin("sub.rn", &u, &f64_imm(1.0));
        let q = self.fbin("div.rn", x, &um1);
        let r = self.fbin("mul.rn", &l, &q);
        let one = self.fcmp("eq", &u, &f64_imm(1.0));
        let r = self.fsel(x, &r, &one);
        let inf = f64_imm(f64::INFINITY);
        let pinf = self.fcmp("eq", x, &inf);
        let r = self.fsel(&inf, &r, &pinf);
        let m1 = self.fcmp("eq", x, &f64_imm(-1.0));
        self.fsel(&f64_imm(f64::NEG_INFINITY), &r, &m1)
    }

    fn expm1_64(&mut self, x: &str) -> String {
        // x * sum_k x^k / (k+1)! near 0; exp(x) - 1 elsewhere.
        let mut c = [0f64; 17];
        let mut f = 1.0f64;
        for (k, slot) in c.iter_mut().enumerate() {
            f *= (k + 1) as f64;
            *slot = 1.0 / f;
        }
        let p = self.poly(x, &c);
        let small = self.fbin("mul.rn", x, &p);
        let e = self.exp64(x);
        let big = self.fbin("sub.rn", &e, &f64_imm(1.0));
        let a = self.op1(Cls::Fd, "abs.f64", x);
        let p = self.fcmp("lt", &a, &f64_imm(0.5));
        self.fsel(&small, &big, &p)
    }

    /// `sin(x)` (`which` 0) or `cos(x)` (1).
    fn sincos(&mut self, x: &str, which: u32) -> String {
        let t = self.fbin("mul.rn", x, &f64_imm(std::f64::consts::FRAC_2_PI));
        let n = self.op1(Cls::Fd, "cvt.rni.f64.f64", &t);
        let nn = self.op1(Cls::Fd, "neg.f64", &n);
        let r = self.op3(Cls::Fd, "fma.rn.f64", &nn, &f64_imm(PIO2_1), x);
        let y = self.op3(Cls::Fd, "fma.rn.f64", &nn, &f64_imm(PIO2_1T), &r);
        let y2 = self.fbin("mul.rn", &y, &y);
        let mut sc = Vec::new();
        let mut cc = Vec::new();
        let mut f = 1.0f64;
        for k in 1..=19u32 {
            f *= k as f64;
            let sign = if (k / 2) % 2 == 0 { 1.0 } else { -1.0 };
            if k % 2 == 1 {
                sc.push(sign / f);
            } else {
                cc.push(sign / f);
            }
        }
        // sin(y) = y * S(y^2), cos(y) = 1 + y^2 * C(y^2).
        let sp = self.poly(&y2, &sc);
        let s = self.fbin("mul.rn", &y, &sp);
        let cp = self.poly(&y2, &cc);
        let c = self.op3(Cls::Fd, "fma.rn.f64", &y2, &cp, &f64_imm(1.0));
        let q = self.op1(Cls::R, "cvt.rzi.s32.f64", &n);
        let q = self.op2(Cls::R, "add.s32", &q, &which.to_string());
        let q = self.op2(Cls::R, "and.b32", &q, "3");
        let odd = self.op2(Cls::R, "and.b32", &q, "1");
        let podd = self.setp("ne", "u32", &odd, "0");
        let v = self.fsel(&c, &s, &podd);
        let hi = self.op2(Cls::R, "and.b32", &q, "2");
        let pneg = self.setp("ne", "u32", &hi, "0");
        let nv = self.op1(Cls::Fd, "neg.f64", &v);
        self.fsel(&nv, &v, &pneg)
    }

    fn atan64(&mut self, x: &str) -> String {
        let a = self.op1(Cls::Fd, "abs.f64", x);
        let inv = self.fcmp("gt", &a, &f64_imm(1.0));
        let ra = self.op1(Cls::Fd, "rcp.rn.f64", &a);
        let a = self.fsel(&ra, &a, &inv);
        let mid = self.fcmp("gt", &a, &f64_imm(0.414_213_562_373_095_03));
        let num = self.fbin("sub.rn", &a, &f64_imm(1.0));
        let den = self.fbin("add.rn", &a, &f64_imm(1.0));
        let q = self.fbin("div.rn", &num, &den);
        let t = self.fsel(&q, &a, &mid);
        let base = self.fsel(&f64_imm(std::f64::consts::FRAC_PI_4), &f64_imm(0.0), &mid);
        let s = self.fbin("mul.rn", &t, &t);
        let c: Vec<f64> = (0..24)
            .map(|k| {
                let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                sign / (2 * k + 1) as f64
            })
            .collect();
        let p = self.poly(&s, &c);
        let at = self.op3(Cls::Fd, "fma.rn.f64", &t, &p, &base);
        let hp = self.fbin("sub.rn", &f64_imm(std::f64::consts::FRAC_PI_2), &at);
        let r = self.fsel(&hp, &at, &inv);
        self.op2(Cls::Fd, "copysign.f64", x, &r)
    }

    fn erf64(&mut self, x: &str) -> String {
        let a = self.op1(Cls::Fd, "abs.f64", x);
        // Below 3: 2/sqrt(pi) * a * sum_n (-1)^n a^(2n) / (n! (2n+1)).
        let s = self.fbin("mul.rn", &a, &a);
        let mut c = Vec::new();
        let mut f = 1.0f64;
        for n in 0..64u32 {
            if n > 0 {
                f *= n as f64;
            }
            let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
            c.push(sign / (f * (2 * n + 1) as f64));
        }
        let p = self.poly(&s, &c);
        let t = self.fbin("mul.rn", &a, &p);
        let small = self.fbin("mul.rn", &t, &f64_imm(2.0 / std::f64::consts::PI.sqrt()));
        // From 3: 1 - exp(-a^2) / sqrt(pi) / K, K the continued fraction
        // a + (1/2) / (a + 1 / (a + (3/2) / ...)), 79 levels as the reference.
        let tail = self.reg(Cls::Fd);
        self.ins(format!("mov.f64 {tail}, {a}"));
        let skip = self.label("erf_cf_end");
        let top = self.label("erf_cf");
        let lt3 = self.fcmp("ltu", &a, &f64_imm(3.0));
        self.ins(format!("@{lt3} bra {skip}"));
        let n = self.imm(Cls::R, "79");
        self.place(&top);
        let nf = self.op1(Cls::Fd, "cvt.rn.f64.s32", &n);
        let h = self.fbin("mul.rn", &nf, &f64_imm(0.5));
        let q = self.fbin("div.rn", &h, &tail);
        self.ins(format!("add.rn.f64 {tail}, {a}, {q}"));
        self.ins(format!("sub.s32 {n}, {n}, 1"));
        let more = self.setp("gt", "s32", &n, "0");
        self.ins(format!("@{more} bra {top}"));
        self.place(&skip);
        let na = self.op1(Cls::Fd, "neg.f64", &s);
        let e = self.exp64(&na);
        let e = self.fbin("div.rn", &e, &f64_imm(std::f64::consts::PI.sqrt()));
        let e = self.fbin("div.rn", &e, &tail);
        let big = self.fbin("sub.rn", &f64_imm(1.0), &e);
        let p30 = self.fcmp("ge", &a, &f64_imm(30.0));
        let big = self.fsel(&f64_imm(1.0), &big, &p30);
        let r = self.fsel(&small, &big, &lt3);
        self.op2(Cls::Fd, "copysign.f64", x, &r)
    }

    /// `x^y` as C `pow` (Rust `powf`): `exp(y log|x|)`, negative for a negative `x` and an odd
    /// integer `y`, with the special cases of `pow`.
    pub(super) fn pow64(&mut self, x: &str, y: &str) -> String {
        let ax = self.op1(Cls::Fd, "abs.f64", x);
        let l = self.log64(&ax);
        let t = self.fbin("mul.rn", y, &l);
        let r = self.exp64(&t);
        // y's integrality and parity.
        let ty = self.op1(Cls::Fd, "cvt.rzi.f64.f64", y);
        let is_int = self.fcmp("eq", &ty, y);
        let h = self.fbin("mul.rn", y, &f64_imm(0.5));
        let th = self.op1(Cls::Fd, "cvt.rzi.f64.f64", &h);
        let half_int = self.fcmp("eq", &th, &h);
        let odd = self.reg(Cls::P);
        let not_half = self.not_p(&half_int);
        self.ins(format!("and.pred {odd}, {is_int}, {not_half}"));
        let xneg = self.fcmp("lt", x, &f64_imm(0.0));
        let negz = {
            // -0 with an odd integer y keeps its sign too.
            let b = self.op1(Cls::Rd, "mov.b64", x);
            self.setp("lt", "s64", &b, "0")
        };
        let flip = self.reg(Cls::P);
        self.ins(format!("and.pred {flip}, {odd}, {negz}"));
        let nr = self.op1(Cls::Fd, "neg.f64", &r);
        let r = self.fsel(&nr, &r, &flip);
        // A negative finite x with a non-integer finite y: NaN.
        let ay = self.op1_abs(y);
        let yfin = self.fcmp("lt", &ay, &f64_imm(f64::INFINITY));
        let xfin = self.fcmp("lt", &ax, &f64_imm(f64::INFINITY));
        let bad = self.reg(Cls::P);
        let not_int = self.not_p(&is_int);
        self.ins(format!("and.pred {bad}, {xneg}, {not_int}"));
        self.ins(format!("and.pred {bad}, {bad}, {yfin}"));
        self.ins(format!("and.pred {bad}, {bad}, {xfin}"));
        let r = self.fsel(&f64_imm(f64::NAN), &r, &bad);
        // |x| == 1 with y = +-inf gives 1; x == 1 gives 1 (even for NaN y); y == 0 gives 1.
        let one = f64_imm(1.0);
        let ax1 = self.fcmp("eq", &ax, &one);
        let yinf = self.reg(Cls::P);
        self.ins(format!("not.pred {yinf}, {yfin}"));
        let ynan = self.fcmp("nan", y, y);
        let not_nan = self.not_p(&ynan);
        self.ins(format!("and.pred {yinf}, {yinf}, {not_nan}"));
        let unit = self.reg(Cls::P);
        self.ins(format!("and.pred {unit}, {ax1}, {yinf}"));
        let x1 = self.fcmp("eq", x, &one);
        self.ins(format!("or.pred {unit}, {unit}, {x1}"));
        let y0 = self.fcmp("eq", y, &f64_imm(0.0));
        self.ins(format!("or.pred {unit}, {unit}, {y0}"));
        let xnan = self.fcmp("nan", x, x);
        let anynan = self.reg(Cls::P);
        self.ins(format!("or.pred {anynan}, {xnan}, {ynan}"));
        let r = self.fsel(&f64_imm(f64::NAN), &r, &anynan);
        self.fsel(&one, &r, &unit)
    }

    fn op1_abs(&mut self, x: &str) -> String {
        self.op1(Cls::Fd, "abs.f64", x)
    }
}
