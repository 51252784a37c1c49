//! The instruction writer of the loop-kernel emitter: virtual registers by class, labels, and
//! the scalar semantics of every kernel-IR instruction (constants, casts, unary and binary
//! operations) on those registers, written from `reference/scalar.rs`.
//!
//! Value representation (every register holds the exact value the reference holds, already
//! rounded or wrapped to its kernel type):
//! - Bool, I8, I16, I32, U8, U16, U32: a `.b32` register (`%r`), signed types sign-extended,
//!   unsigned types zero-extended; after every operation the value is wrapped again.
//! - I64, U64: a `.b64` register (`%rd`).
//! - F32: an `.f32` register (`%f`).
//! - F64: an `.f64` register (`%fd`).
//!
//! Only compute types are values; the storage types (f16, bf16, float8, float4, the sub-byte
//! integers) are widened as they are loaded and narrowed as they are stored (`convert.rs`).
//!
//! Transcendental functions are computed in f64 by the routines of `math.rs` and rounded to the
//! value's type, as the reference does.

use crate::kernel::{BinaryOp, Scalar, UnaryOp};
use std::fmt::Write;

/// A register class.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Cls {
    P,
    R,
    Rd,
    F,
    Fd,
    Rs,
}

const CLASSES: [(Cls, &str, &str); 6] = [
    (Cls::P, "p", ".pred"),
    (Cls::R, "r", ".b32"),
    (Cls::Rd, "rd", ".b64"),
    (Cls::F, "f", ".f32"),
    (Cls::Fd, "fd", ".f64"),
    (Cls::Rs, "rs", ".b16"),
];

/// The register class of a value of `ty` (of its compute type, for a storage type).
pub(super) fn cls(ty: Scalar) -> Cls {
    match ty.compute() {
        Scalar::I64 | Scalar::U64 => Cls::Rd,
        Scalar::F32 => Cls::F,
        Scalar::F64 => Cls::Fd,
        _ => Cls::R,
    }
}

/// A typed value in a register.
#[derive(Clone, Debug)]
pub(super) struct Val {
    pub reg: String,
    pub ty: Scalar,
}

/// The emitter state of one entry: the body text, register counters and labels.
pub(super) struct Em {
    pub body: String,
    counts: [u32; 6],
    labels: u32,
}

pub(super) type R<T> = Result<T, String>;

pub(super) use crate::ptx::{f32_imm, f64_imm};

/// The integer bounds of an integer or bool type.
pub(super) fn int_bounds(ty: Scalar) -> (i128, i128) {
    match ty {
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

/// `i` wrapped to integer type `ty`, as the reference wraps.
pub(super) fn wrap(ty: Scalar, i: i128) -> i128 {
    match ty {
        Scalar::Bool => i128::from(i != 0),
        Scalar::I8 => i128::from(i as i8),
        Scalar::I16 => i128::from(i as i16),
        Scalar::I32 => i128::from(i as i32),
        Scalar::I64 => i128::from(i as i64),
        Scalar::U8 => i128::from(i as u8),
        Scalar::U16 => i128::from(i as u16),
        Scalar::U32 => i128::from(i as u32),
        _ => i128::from(i as u64),
    }
}

/// The integer PTX type suffix of a register of `ty`'s class (`s32`, `u64`, ...).
fn isfx(ty: Scalar) -> &'static str {
    match (cls(ty), ty.is_signed_int()) {
        (Cls::Rd, true) => "s64",
        (Cls::Rd, false) => "u64",
        (_, true) => "s32",
        (_, false) => "u32",
    }
}

fn fsfx(ty: Scalar) -> &'static str {
    if ty == Scalar::F64 {
        "f64"
    } else {
        "f32"
    }
}

/// The suffix of a typed arithmetic instruction on `ty`'s register.
pub(super) fn sfx(ty: Scalar) -> &'static str {
    if ty.is_float() {
        fsfx(ty)
    } else {
        isfx(ty)
    }
}

/// The bit-move suffix of a register class.
pub(super) fn bsfx(c: Cls) -> &'static str {
    match c {
        Cls::P => "pred",
        Cls::R | Cls::F => "b32",
        Cls::Rd | Cls::Fd => "b64",
        Cls::Rs => "b16",
    }
}

impl Em {
    pub fn new() -> Em {
        Em {
            body: String::new(),
            counts: [0; 6],
            labels: 0,
        }
    }

    pub fn reg(&mut self, c: Cls) -> String {
        let i = CLASSES.iter().position(|(k, _, _)| *k == c).unwrap_or(0);
        let n = self.counts[i];
        self.counts[i] += 1;
        format!("%{}{}", CLASSES[i].1, n)
    }

    /// The `.reg` declarations of every register used so far.
    pub fn decls(&self) -> String {
        let mut s = String::new();
        for (i, (_, prefix, ty)) in CLASSES.iter().enumerate() {
            if self.counts[i] > 0 {
                let _ = writeln!(s, "\t.reg {ty} %{prefix}<{}>;", self.counts[i]);
            }
        }
        s
    }

    pub fn ins(&mut self, text: impl AsRef<str>) {
        self.body.push('\t');
        self.body.push_str(text.as_ref());
        self.body.push_str(";\n");
    }

    pub fn label(&mut self, base: &str) -> String {
        self.labels += 1;
        format!("$L_{base}_{}", self.labels)
    }

    pub fn place(&mut self, label: &str) {
        self.body.push_str(label);
        self.body.push_str(":\n");
    }

    /// A new register of class `c` holding `imm`.
    pub fn imm(&mut self, c: Cls, imm: &str) -> String {
        let r = self.reg(c);
        self.ins(format!("mov.{} {r}, {imm}", bsfx(c)));
        r
    }

    pub fn fd_imm(&mut self, x: f64) -> String {
        self.imm(Cls::Fd, &f64_imm(x))
    }

    /// `op.sfx d, a, b` into a new register of class `c`.
    pub fn op2(&mut self, c: Cls, op: &str, a: &str, b: &str) -> String {
        let d = self.reg(c);
        self.ins(format!("{op} {d}, {a}, {b}"));
        d
    }

    pub fn op1(&mut self, c: Cls, op: &str, a: &str) -> String {
        let d = self.reg(c);
        self.ins(format!("{op} {d}, {a}"));
        d
    }

    pub fn op3(&mut self, c: Cls, op: &str, a: &str, b: &str, e: &str) -> String {
        let d = self.reg(c);
        self.ins(format!("{op} {d}, {a}, {b}, {e}"));
        d
    }

    /// A predicate `a CMP b` of PTX type `t`.
    pub fn setp(&mut self, cmp: &str, t: &str, a: &str, b: &str) -> String {
        let p = self.reg(Cls::P);
        self.ins(format!("setp.{cmp}.{t} {p}, {a}, {b}"));
        p
    }

    /// `p ? a : b` of class `c`.
    pub fn selp(&mut self, c: Cls, a: &str, b: &str, p: &str) -> String {
        let d = self.reg(c);
        self.ins(format!("selp.{} {d}, {a}, {b}, {p}", bsfx(c)));
        d
    }

    /// The negation of predicate `p`.
    pub fn not_p(&mut self, p: &str) -> String {
        let q = self.reg(Cls::P);
        self.ins(format!("not.pred {q}, {p}"));
        q
    }

    /// A bool register (0 or 1) from a predicate.
    pub fn bool_of(&mut self, p: &str) -> String {
        self.selp(Cls::R, "1", "0", p)
    }

    /// Re-wraps a freshly computed integer (or rounds a float) to its type `ty`, in place.
    pub fn norm(&mut self, ty: Scalar, r: &str) -> String {
        match ty {
            Scalar::I8 | Scalar::I16 => {
                let bits = if ty == Scalar::I8 { 24 } else { 16 };
                let t = self.op2(Cls::R, "shl.b32", r, &bits.to_string());
                self.op2(Cls::R, "shr.s32", &t, &bits.to_string())
            }
            Scalar::U8 => self.op2(Cls::R, "and.b32", r, "255"),
            Scalar::U16 => self.op2(Cls::R, "and.b32", r, "65535"),
            Scalar::Bool => {
                let p = self.setp("ne", "u32", r, "0");
                self.bool_of(&p)
            }
            _ => r.to_string(),
        }
    }

    /// An f64 register rounded to float type `ty` (F32 or F64, into its register class).
    pub fn round_from_f64(&mut self, ty: Scalar, x: &str) -> String {
        match ty {
            Scalar::F64 => x.to_string(),
            _ => self.op1(Cls::F, "cvt.rn.f32.f64", x),
        }
    }

    /// A float value widened to f64.
    pub fn widen_f64(&mut self, v: &Val) -> String {
        if v.ty == Scalar::F64 {
            v.reg.clone()
        } else {
            self.op1(Cls::Fd, "cvt.f64.f32", &v.reg)
        }
    }

    /// The constant `bits` (as `InstKind::Const` says) of type `ty` in a new register.
    pub fn constant(&mut self, ty: Scalar, bits: u64) -> String {
        let imm = const_imm(ty, bits);
        self.imm(cls(ty), &imm)
    }

    /// `Cast`: `v` converted to `to` as the reference converts.
    pub fn cast(&mut self, v: &Val, to: Scalar) -> String {
        let from = v.ty;
        if from == to {
            return v.reg.clone();
        }
        if to == Scalar::Bool {
            let p = if from.is_float() {
                self.setp("neu", fsfx(from), &v.reg, &zero_imm(from))
            } else {
                let t = if cls(from) == Cls::Rd { "u64" } else { "u32" };
                self.setp("ne", t, &v.reg, "0")
            };
            return self.bool_of(&p);
        }
        if to.is_float() {
            // The reference converts to f64 first, then rounds to the type.
            let x = if from.is_float() {
                self.widen_f64(v)
            } else {
                let t = match (cls(from), from.is_signed_int()) {
                    (Cls::Rd, true) => "s64",
                    (Cls::Rd, false) => "u64",
                    (_, true) => "s32",
                    _ => "u32",
                };
                self.op1(Cls::Fd, &format!("cvt.rn.f64.{t}"), &v.reg)
            };
            return self.round_from_f64(to, &x);
        }
        if from.is_float() {
            // Truncate toward zero, saturate, NaN gives 0 (PTX's float-to-integer cvt does all
            // three for 32- and 64-bit destinations); narrow types clamp explicitly.
            let f = fsfx(from);
            return match to {
                Scalar::I64 | Scalar::U64 => {
                    let t = if to == Scalar::I64 { "s64" } else { "u64" };
                    self.op1(Cls::Rd, &format!("cvt.rzi.{t}.{f}"), &v.reg)
                }
                Scalar::I32 | Scalar::U32 => {
                    let t = if to == Scalar::I32 { "s32" } else { "u32" };
                    self.op1(Cls::R, &format!("cvt.rzi.{t}.{f}"), &v.reg)
                }
                _ => {
                    let signed = to.is_signed_int();
                    let t = if signed { "s32" } else { "u32" };
                    let x = self.op1(Cls::R, &format!("cvt.rzi.{t}.{f}"), &v.reg);
                    let (lo, hi) = int_bounds(to);
                    let x = self.op2(Cls::R, &format!("min.{t}"), &x, &hi.to_string());
                    if signed {
                        self.op2(Cls::R, &format!("max.{t}"), &x, &lo.to_string())
                    } else {
                        x
                    }
                }
            };
        }
        // Integer to integer wraps.
        match (cls(from), cls(to)) {
            (Cls::Rd, Cls::Rd) => v.reg.clone(),
            (Cls::Rd, _) => {
                let t = self.op1(Cls::R, "cvt.u32.u64", &v.reg);
                self.norm(to, &t)
            }
            (_, Cls::Rd) => {
                let t = if from.is_signed_int() {
                    "cvt.s64.s32"
                } else {
                    "cvt.u64.u32"
                };
                self.op1(Cls::Rd, t, &v.reg)
            }
            _ => self.norm(to, &v.reg),
        }
    }

    /// A unary operation; `None` where the contract does not define it.
    pub fn unary(&mut self, op: UnaryOp, v: &Val) -> R<String> {
        let ty = v.ty;
        let a = v.reg.as_str();
        if !ty.is_float() {
            let c = cls(ty);
            let s = isfx(ty);
            return Ok(match op {
                UnaryOp::Neg => {
                    let t = self.op1(c, &format!("neg.{}", signed(s)), a);
                    self.norm(ty, &t)
                }
                UnaryOp::Abs => {
                    if ty.is_signed_int() {
                        let t = self.op1(c, &format!("abs.{s}"), a);
                        self.norm(ty, &t)
                    } else {
                        a.to_string()
                    }
                }
                UnaryOp::Sign => {
                    let pos = self.setp("gt", s, a, "0");
                    let neg = self.setp("lt", s, a, "0");
                    let t = self.selp(c, "1", "0", &pos);
                    self.selp(c, "-1", &t, &neg)
                }
                UnaryOp::Not => {
                    let p = self.setp("eq", s, a, "0");
                    self.bool_of(&p)
                }
                UnaryOp::BitNot => {
                    let t = self.op1(c, &format!("not.{}", bsfx(c)), a);
                    self.norm(ty, &t)
                }
                _ => return Err(format!("{op:?} of {}", ty.name())),
            });
        }
        let f = fsfx(ty);
        let c = cls(ty);
        let exact = |em: &mut Em, text: &str| -> String {
            let t = em.op1(c, text, a);
            em.norm(ty, &t)
        };
        Ok(match op {
            UnaryOp::Neg => self.op1(c, &format!("neg.{f}"), a),
            UnaryOp::Abs => self.op1(c, &format!("abs.{f}"), a),
            UnaryOp::Sign => {
                let one = if ty == Scalar::F64 {
                    f64_imm(1.0)
                } else {
                    f32_imm(1.0)
                };
                let mone = if ty == Scalar::F64 {
                    f64_imm(-1.0)
                } else {
                    f32_imm(-1.0)
                };
                let z = zero_imm(ty);
                let pos = self.setp("gt", f, a, &z);
                let neg = self.setp("lt", f, a, &z);
                let t = self.selp(c, &one, &z, &pos);
                let t = self.selp(c, &mone, &t, &neg);
                let nan = self.setp("nan", f, a, a);
                self.selp(c, a, &t, &nan)
            }
            UnaryOp::Sqrt => exact(self, &format!("sqrt.rn.{f}")),
            UnaryOp::Reciprocal => exact(self, &format!("rcp.rn.{f}")),
            UnaryOp::Floor => self.op1(c, &format!("cvt.rmi.{f}.{f}"), a),
            UnaryOp::Ceil => self.op1(c, &format!("cvt.rpi.{f}.{f}"), a),
            UnaryOp::Round => self.op1(c, &format!("cvt.rni.{f}.{f}"), a),
            UnaryOp::IsNan => {
                let p = self.setp("nan", f, a, a);
                self.bool_of(&p)
            }
            UnaryOp::IsPosInf | UnaryOp::IsNegInf => {
                let inf = if op == UnaryOp::IsPosInf {
                    f64::INFINITY
                } else {
                    f64::NEG_INFINITY
                };
                let imm = if ty == Scalar::F64 {
                    f64_imm(inf)
                } else {
                    f32_imm(inf as f32)
                };
                let p = self.setp("eq", f, a, &imm);
                self.bool_of(&p)
            }
            UnaryOp::Not | UnaryOp::BitNot => return Err(format!("{op:?} of {}", ty.name())),
            _ => {
                let x = self.widen_f64(v);
                let r = self.math1(op, &x)?;
                self.round_from_f64(ty, &r)
            }
        })
    }

    /// A binary operation on two values of type `ty` (the result is bool for comparisons).
    pub fn binary(&mut self, op: BinaryOp, ty: Scalar, a: &str, b: &str) -> R<String> {
        let c = cls(ty);
        if op.is_comparison() {
            let cmp = match op {
                BinaryOp::Eq => "eq",
                BinaryOp::Lt => "lt",
                BinaryOp::Le => "le",
                BinaryOp::Gt => "gt",
                _ => "ge",
            };
            let p = self.setp(cmp, sfx(ty), a, b);
            return Ok(self.bool_of(&p));
        }
        if ty.is_float() {
            let f = fsfx(ty);
            let exact = |em: &mut Em, o: &str| -> String {
                let t = em.op2(c, &format!("{o}.rn.{f}"), a, b);
                em.norm(ty, &t)
            };
            return Ok(match op {
                BinaryOp::Add => exact(self, "add"),
                BinaryOp::Sub => exact(self, "sub"),
                BinaryOp::Mul => exact(self, "mul"),
                BinaryOp::Div => exact(self, "div"),
                BinaryOp::Min | BinaryOp::Max => {
                    let o = if op == BinaryOp::Min { "min" } else { "max" };
                    let m = self.op2(c, &format!("{o}.{f}"), a, b);
                    let nan = self.setp("nan", f, a, b);
                    let s = self.op2(c, &format!("add.{f}"), a, b);
                    self.selp(c, &s, &m, &nan)
                }
                BinaryOp::Rem => self.fmod(ty, a, b),
                BinaryOp::FloorMod => {
                    let r = self.fmod(ty, a, b);
                    let z = zero_imm(ty);
                    let nz = self.setp("ne", f, &r, &z);
                    let rn = self.setp("lt", f, &r, &z);
                    let yn = self.setp("lt", f, b, &z);
                    let differ = self.reg(Cls::P);
                    self.ins(format!("xor.pred {differ}, {rn}, {yn}"));
                    let fix = self.reg(Cls::P);
                    self.ins(format!("and.pred {fix}, {differ}, {nz}"));
                    let s = self.op2(c, &format!("add.rn.{f}"), &r, b);
                    let s = self.norm(ty, &s);
                    self.selp(c, &s, &r, &fix)
                }
                BinaryOp::Pow => {
                    let x = self.widen_f64(&Val { reg: a.into(), ty });
                    let y = self.widen_f64(&Val { reg: b.into(), ty });
                    let r = self.pow64(&x, &y);
                    self.round_from_f64(ty, &r)
                }
                _ => return Err(format!("{op:?} of {}", ty.name())),
            });
        }
        let s = isfx(ty);
        let bits = ty.size() * 8;
        let zero = |em: &mut Em, p: &str, v: &str| -> String { em.selp(c, "0", v, p) };
        Ok(match op {
            BinaryOp::Add | BinaryOp::Sub => {
                let o = if op == BinaryOp::Add { "add" } else { "sub" };
                let t = self.op2(c, &format!("{o}.{s}"), a, b);
                self.norm(ty, &t)
            }
            BinaryOp::Mul => {
                let t = self.op2(c, &format!("mul.lo.{s}"), a, b);
                self.norm(ty, &t)
            }
            BinaryOp::Div | BinaryOp::Rem | BinaryOp::FloorMod => {
                // A zero divisor gives 0; a signed division by -1 is a wrapped negation (and
                // its remainder 0), which the hardware instruction leaves undefined at MIN.
                let bz = self.setp("eq", s, b, "0");
                let safe_b = self.selp(c, "1", b, &bz);
                let mut q = if op == BinaryOp::Div {
                    self.op2(c, &format!("div.{s}"), a, &safe_b)
                } else {
                    self.op2(c, &format!("rem.{s}"), a, &safe_b)
                };
                if ty.is_signed_int() {
                    let m1 = self.setp("eq", s, b, "-1");
                    let alt = if op == BinaryOp::Div {
                        let n = self.op1(c, &format!("neg.{s}"), a);
                        self.norm(ty, &n)
                    } else {
                        "0".to_string()
                    };
                    q = self.selp(c, &alt, &q, &m1);
                }
                if op == BinaryOp::FloorMod && ty.is_signed_int() {
                    let nz = self.setp("ne", s, &q, "0");
                    let x = self.op2(c, &format!("xor.{}", bsfx(c)), &q, b);
                    let differ = self.setp("lt", s, &x, "0");
                    let fix = self.reg(Cls::P);
                    self.ins(format!("and.pred {fix}, {differ}, {nz}"));
                    let t = self.op2(c, &format!("add.{s}"), &q, b);
                    let t = self.norm(ty, &t);
                    q = self.selp(c, &t, &q, &fix);
                }
                let q = self.norm(ty, &q);
                zero(self, &bz, &q)
            }
            BinaryOp::Min => self.op2(c, &format!("min.{s}"), a, b),
            BinaryOp::Max => self.op2(c, &format!("max.{s}"), a, b),
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
                let pa = self.setp("ne", s, a, "0");
                let pb = self.setp("ne", s, b, "0");
                let o = match op {
                    BinaryOp::And => "and",
                    BinaryOp::Or => "or",
                    _ => "xor",
                };
                let p = self.reg(Cls::P);
                self.ins(format!("{o}.pred {p}, {pa}, {pb}"));
                self.bool_of(&p)
            }
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => {
                let o = match op {
                    BinaryOp::BitAnd => "and",
                    BinaryOp::BitOr => "or",
                    _ => "xor",
                };
                self.op2(c, &format!("{o}.{}", bsfx(c)), a, b)
            }
            BinaryOp::Shl | BinaryOp::Shr => {
                let big = self.setp("ge", s, b, &bits.to_string());
                let n = if c == Cls::Rd {
                    self.op1(Cls::R, "cvt.u32.u64", b)
                } else {
                    b.to_string()
                };
                let o = if op == BinaryOp::Shl { "shl" } else { "shr" };
                let t = self.op2(c, &format!("{o}.{}", bsfx(c)), a, &n);
                let t = self.norm(ty, &t);
                zero(self, &big, &t)
            }
            BinaryOp::Pow => self.ipow(ty, a, b),
            _ => return Err(format!("{op:?} of {}", ty.name())),
        })
    }

    /// Integer power by squaring, wrapped after every product (negative exponents give 1).
    fn ipow(&mut self, ty: Scalar, a: &str, b: &str) -> String {
        let c = cls(ty);
        let s = isfx(ty);
        let r = self.imm(c, "1");
        let base = self.reg(c);
        self.ins(format!("mov.{} {base}, {a}", bsfx(c)));
        let e = self.reg(c);
        if ty.is_signed_int() {
            self.ins(format!("max.{s} {e}, {b}, 0"));
        } else {
            self.ins(format!("mov.{} {e}, {b}", bsfx(c)));
        }
        let top = self.label("ipow");
        let done = self.label("ipow_end");
        self.place(&top);
        let p = self.setp("eq", s, &e, "0");
        self.ins(format!("@{p} bra {done}"));
        let bit = self.op2(c, &format!("and.{}", bsfx(c)), &e, "1");
        let odd = self.setp("ne", s, &bit, "0");
        let m = self.op2(c, &format!("mul.lo.{s}"), &r, &base);
        let m = self.norm(ty, &m);
        self.ins(format!("@{odd} mov.{} {r}, {m}", bsfx(c)));
        let sq = self.op2(c, &format!("mul.lo.{s}"), &base, &base);
        let sq = self.norm(ty, &sq);
        self.ins(format!("mov.{} {base}, {sq}", bsfx(c)));
        // The exponent is non-negative here, so a logical shift halves it.
        self.ins(format!(
            "shr.{} {e}, {e}, 1",
            if c == Cls::Rd { "u64" } else { "u32" }
        ));
        self.ins(format!("bra.uni {top}"));
        self.place(&done);
        r
    }

    /// C `fmod` of two floats of type `ty`, exactly: binary long division by exact doublings
    /// and Sterbenz-exact subtractions.
    fn fmod(&mut self, ty: Scalar, a: &str, b: &str) -> String {
        let f = fsfx(ty);
        let c = cls(ty);
        let (two, half, nan) = if ty == Scalar::F64 {
            (f64_imm(2.0), f64_imm(0.5), f64_imm(f64::NAN))
        } else {
            (f32_imm(2.0), f32_imm(0.5), f32_imm(f32::NAN))
        };
        let x = self.op1(c, &format!("abs.{f}"), a);
        let y = self.op1(c, &format!("abs.{f}"), b);
        let r = self.reg(c);
        self.ins(format!("mov.{f} {r}, {x}"));
        let t = self.reg(c);
        self.ins(format!("mov.{f} {t}, {y}"));
        let done = self.label("fmod_end");
        let up = self.label("fmod_up");
        let down = self.label("fmod_down");
        // Skip when r < y, r is inf or NaN, or y is 0, inf or NaN (fixed below).
        let inf = if ty == Scalar::F64 {
            f64_imm(f64::INFINITY)
        } else {
            f32_imm(f32::INFINITY)
        };
        let p = self.setp("ltu", f, &x, &y);
        self.ins(format!("@{p} bra {done}"));
        let p = self.setp("eq", f, &x, &inf);
        self.ins(format!("@{p} bra {done}"));
        let p = self.setp("eq", f, &y, &zero_imm(ty));
        self.ins(format!("@{p} bra {done}"));
        let p = self.setp("eq", f, &y, &inf);
        self.ins(format!("@{p} bra {done}"));
        self.place(&up);
        let t2 = self.op2(c, &format!("mul.rn.{f}"), &t, &two);
        let p = self.setp("gt", f, &t2, &x);
        self.ins(format!("@{p} bra {down}"));
        self.ins(format!("mov.{f} {t}, {t2}"));
        self.ins(format!("bra.uni {up}"));
        self.place(&down);
        let ge = self.setp("ge", f, &r, &t);
        let d = self.op2(c, &format!("sub.rn.{f}"), &r, &t);
        self.ins(format!("@{ge} mov.{f} {r}, {d}"));
        self.ins(format!("mul.rn.{f} {t}, {t}, {half}"));
        let more = self.setp("ge", f, &t, &y);
        self.ins(format!("@{more} bra {down}"));
        self.place(&done);
        // Special cases: y == 0, x inf, or a NaN operand give NaN; y inf gives x.
        let res = self.op2(c, &format!("copysign.{f}"), a, &r);
        let bad = self.setp("eq", f, &y, &zero_imm(ty));
        let xinf = self.setp("eq", f, &x, &inf);
        let anynan = self.setp("nan", f, a, b);
        let res = self.selp(c, &nan, &res, &bad);
        let res = self.selp(c, &nan, &res, &xinf);
        let res = self.selp(c, &nan, &res, &anynan);
        let yinf = self.setp("eq", f, &y, &inf);
        let xfin = self.setp("lt", f, &x, &inf);
        let keep = self.reg(Cls::P);
        self.ins(format!("and.pred {keep}, {yinf}, {xfin}"));
        self.selp(c, a, &res, &keep)
    }
}

fn signed(s: &str) -> &'static str {
    if s.ends_with("64") {
        "s64"
    } else {
        "s32"
    }
}

/// The zero immediate of a float type.
pub(super) fn zero_imm(ty: Scalar) -> String {
    if ty == Scalar::F64 {
        f64_imm(0.0)
    } else {
        f32_imm(0.0)
    }
}

/// The immediate of constant `bits` of type `ty`, as `InstKind::Const` says.
pub(super) fn const_imm(ty: Scalar, bits: u64) -> String {
    match ty {
        Scalar::F64 => f64_imm(f64::from_bits(bits)),
        Scalar::F32 => f32_imm(f64::from_bits(bits) as f32),
        _ => {
            let v = if ty.is_unsigned_int() {
                wrap(ty, i128::from(bits))
            } else {
                wrap(ty, i128::from(bits as i64))
            };
            int_imm(ty, v)
        }
    }
}

/// The hexadecimal immediate of integer `v` (already wrapped to `ty`) in `ty`'s register width.
fn int_imm(ty: Scalar, v: i128) -> String {
    if cls(ty) == Cls::Rd {
        format!("0x{:016X}", v as u64)
    } else {
        format!("0x{:08X}", v as u32)
    }
}

/// The immediate of a view's pad value, of its compute type
/// ([`crate::kernel::View::pad_bits`]).
pub(super) fn pad_imm(view: &crate::kernel::View) -> String {
    const_imm(view.elem.compute(), view.pad_bits())
}

/// A zero immediate for a register of class `c`.
pub(super) fn zero_bits(c: Cls) -> String {
    match c {
        Cls::F => f32_imm(0.0),
        Cls::Fd => f64_imm(0.0),
        _ => "0".to_string(),
    }
}
