//! The instruction-family cases, shared by the `families` test (run them) and the `ptxas`
//! test (assemble them). Each case is one instruction over operands `%a %b %c` of the input
//! type, `%B` (b as .u32, for shift amounts), `%C` (c as the output type, for mad.wide) and
//! `%P` (c != 0 as a predicate), writing `%d` of the output type.

#![allow(dead_code)]

/// The expected result: exact bits, or any NaN of the output width.
#[derive(Clone, Copy, Debug)]
pub enum Exp {
    Bits(u64),
    Nan,
}

pub struct Case {
    pub instr: &'static str,
    pub tin: &'static str,
    pub tout: &'static str,
    pub args: [u64; 3],
    pub exp: Exp,
}

fn reg_decl(ty: &str) -> &'static str {
    match ty {
        "f16" | "b16" => ".b16",
        "pred" => ".pred",
        "u16" => ".u16",
        "s16" => ".s16",
        "u32" => ".u32",
        "s32" => ".s32",
        "b32" => ".b32",
        "u64" => ".u64",
        "s64" => ".s64",
        "b64" => ".b64",
        "f32" => ".f32",
        "f64" => ".f64",
        _ => panic!("no register type for {ty}"),
    }
}

fn mem_ty(ty: &str) -> &str {
    match ty {
        "f16" => "b16",
        "pred" => "u32",
        t => t,
    }
}

/// One `.entry case_K` per case, in one module.
pub fn module(cases: &[Case]) -> String {
    let mut s = String::from(".version 8.0\n.target sm_80\n.address_size 64\n");
    for (k, c) in cases.iter().enumerate() {
        s += &format!("\n.visible .entry case_{k}(.param .u64 arena, .param .u64 weights, .param .u64 state)\n{{\n");
        s += "\t.reg .b64 %x<2>;\n\t.reg .u32 %B, %Cp, %ia, %ib, %ic, %id;\n\t.reg .pred %P;\n";
        s += &format!("\t.reg {} %a, %b, %c;\n", reg_decl(c.tin));
        s += &format!("\t.reg {} %d, %C;\n", reg_decl(c.tout));
        s += "\tld.param.u64 %x0, [arena];\n";
        for (r, off) in [("a", 0), ("b", 8), ("c", 16)] {
            if c.tin == "pred" {
                s += &format!(
                    "\tld.global.u32 %i{r}, [%x0+{off}];\n\tsetp.ne.u32 %{r}, %i{r}, 0;\n"
                );
            } else {
                s += &format!("\tld.global.{} %{r}, [%x0+{off}];\n", mem_ty(c.tin));
            }
        }
        s += "\tld.global.u32 %B, [%x0+8];\n\tld.global.u32 %Cp, [%x0+16];\n\tsetp.ne.u32 %P, %Cp, 0;\n";
        if c.tout == "pred" {
            s += "\tsetp.ne.u32 %d, %Cp, 12345;\n";
        } else {
            s += &format!("\tld.global.{} %C, [%x0+16];\n", mem_ty(c.tout));
        }
        s += &format!("\t{};\n", c.instr);
        if c.tout == "pred" {
            s += "\tselp.u32 %id, 1, 0, %d;\n\tst.global.u32 [%x0+24], %id;\n";
        } else {
            s += &format!("\tst.global.{} [%x0+24], %d;\n", mem_ty(c.tout));
        }
        s += "\tret;\n}\n";
    }
    s
}

pub fn out_bytes(tout: &str) -> usize {
    match tout {
        "f16" | "b16" | "u16" | "s16" => 2,
        "u64" | "s64" | "b64" | "f64" => 8,
        _ => 4,
    }
}

fn f(x: f32) -> u64 {
    u64::from(x.to_bits())
}
fn d(x: f64) -> u64 {
    x.to_bits()
}
fn i(x: i64) -> u64 {
    x as u64
}

macro_rules! c {
    ($instr:expr, $tin:expr, $tout:expr, [$a:expr, $b:expr, $c:expr], nan) => {
        Case {
            instr: $instr,
            tin: $tin,
            tout: $tout,
            args: [$a, $b, $c],
            exp: Exp::Nan,
        }
    };
    ($instr:expr, $tin:expr, $tout:expr, [$a:expr, $b:expr, $c:expr], $e:expr) => {
        Case {
            instr: $instr,
            tin: $tin,
            tout: $tout,
            args: [$a, $b, $c],
            exp: Exp::Bits($e),
        }
    };
}

pub fn cases() -> Vec<Case> {
    let sub = f32::from_bits(1); // the smallest f32 subnormal
    let big_sub = f32::from_bits(0x007f_ffff);
    let nan = f(f32::NAN);
    let (inf, ninf) = (f(f32::INFINITY), f(f32::NEG_INFINITY));
    let third = 1.0f32 + f32::EPSILON;
    vec![
        // Integer arithmetic.
        c!(
            "add.s32 %d, %a, %b",
            "s32",
            "s32",
            [i(7), i(-9), 0],
            i(-2) & 0xffff_ffff
        ),
        c!("sub.u32 %d, %a, %b", "u32", "u32", [0, 1, 0], 0xffff_ffff),
        c!(
            "add.s64 %d, %a, %b",
            "s64",
            "s64",
            [i(i64::MAX), 1, 0],
            i(i64::MIN)
        ),
        c!("add.u16 %d, %a, %b", "u16", "u16", [0xffff, 2, 0], 1),
        c!(
            "add.sat.s32 %d, %a, %b",
            "s32",
            "s32",
            [i(i32::MAX as i64), 5, 0],
            i32::MAX as u64
        ),
        c!(
            "sub.sat.s32 %d, %a, %b",
            "s32",
            "s32",
            [i(i32::MIN as i64), 5, 0],
            i32::MIN as u32 as u64
        ),
        c!(
            "mul.lo.s32 %d, %a, %b",
            "s32",
            "s32",
            [0x10000, 0x10001, 0],
            0x10000
        ),
        c!(
            "mul.hi.u32 %d, %a, %b",
            "u32",
            "u32",
            [0xffff_ffff, 0xffff_ffff, 0],
            0xffff_fffe
        ),
        c!(
            "mul.hi.s32 %d, %a, %b",
            "s32",
            "s32",
            [i(-3), 5, 0],
            0xffff_ffff
        ),
        c!(
            "mul.hi.u64 %d, %a, %b",
            "u64",
            "u64",
            [u64::MAX, u64::MAX, 0],
            u64::MAX - 1
        ),
        c!(
            "mul.hi.s64 %d, %a, %b",
            "s64",
            "s64",
            [i(-1), i(i64::MIN), 0],
            0
        ),
        c!(
            "mul.wide.s32 %d, %a, %b",
            "s32",
            "s64",
            [i(-3), 1_000_000_000, 0],
            i(-3_000_000_000)
        ),
        c!(
            "mul.wide.u32 %d, %a, %b",
            "u32",
            "u64",
            [0xffff_ffff, 0xffff_ffff, 0],
            0xffff_fffe_0000_0001
        ),
        c!(
            "mul.wide.u16 %d, %a, %b",
            "u16",
            "u32",
            [0xffff, 0xffff, 0],
            0xfffe_0001
        ),
        c!(
            "mul.wide.s16 %d, %a, %b",
            "s16",
            "s32",
            [0x8000, 2, 0],
            0xffff_0000
        ),
        c!("mad.lo.s32 %d, %a, %b, %c", "s32", "s32", [3, 4, 5], 17),
        c!(
            "mad.lo.u64 %d, %a, %b, %c",
            "u64",
            "u64",
            [u64::MAX, 2, 5],
            3
        ),
        c!(
            "mad.hi.u32 %d, %a, %b, %c",
            "u32",
            "u32",
            [0x8000_0000, 4, 1],
            3
        ),
        c!(
            "mad.wide.s32 %d, %a, %b, %C",
            "s32",
            "s64",
            [i(-2), 0x4000_0000, 1],
            i(-0x7fff_ffff)
        ),
        c!(
            "mad.wide.u32 %d, %a, %b, %C",
            "u32",
            "u64",
            [0xffff_ffff, 2, 3],
            0x2_0000_0001
        ),
        c!(
            "div.s32 %d, %a, %b",
            "s32",
            "s32",
            [i(-7), 2, 0],
            i(-3) & 0xffff_ffff
        ),
        c!(
            "rem.s32 %d, %a, %b",
            "s32",
            "s32",
            [i(-7), 2, 0],
            i(-1) & 0xffff_ffff
        ),
        c!("div.u32 %d, %a, %b", "u32", "u32", [7, 0, 0], 0xffff_ffff),
        c!(
            "div.s32 %d, %a, %b",
            "s32",
            "s32",
            [i(i32::MIN as i64), i(-1), 0],
            0x8000_0000
        ),
        c!(
            "div.u64 %d, %a, %b",
            "u64",
            "u64",
            [u64::MAX, 3, 0],
            u64::MAX / 3
        ),
        c!(
            "rem.u64 %d, %a, %b",
            "u64",
            "u64",
            [u64::MAX, 10, 0],
            u64::MAX % 10
        ),
        c!("div.s64 %d, %a, %b", "s64", "s64", [i(-100), 7, 0], i(-14)),
        c!(
            "neg.s32 %d, %a",
            "s32",
            "s32",
            [i(i32::MIN as i64), 0, 0],
            0x8000_0000
        ),
        c!("abs.s32 %d, %a", "s32", "s32", [i(-5), 0, 0], 5),
        c!("abs.s16 %d, %a", "s16", "s16", [0xfffb, 0, 0], 5),
        c!("neg.s64 %d, %a", "s64", "s64", [5, 0, 0], i(-5)),
        c!(
            "min.s32 %d, %a, %b",
            "s32",
            "s32",
            [i(-1), 1, 0],
            0xffff_ffff
        ),
        c!("min.u32 %d, %a, %b", "u32", "u32", [0xffff_ffff, 1, 0], 1),
        c!("max.s64 %d, %a, %b", "s64", "s64", [i(-1), i(-2), 0], i(-1)),
        c!("max.u16 %d, %a, %b", "u16", "u16", [0x8000, 1, 0], 0x8000),
        c!("max.s16 %d, %a, %b", "s16", "s16", [0x8000, 1, 0], 1),
        // Logic and shifts.
        c!(
            "and.b32 %d, %a, %b",
            "b32",
            "b32",
            [0xf0f0, 0xff00, 0],
            0xf000
        ),
        c!(
            "or.b64 %d, %a, %b",
            "b64",
            "b64",
            [1 << 63, 1, 0],
            (1 << 63) | 1
        ),
        c!(
            "xor.b16 %d, %a, %b",
            "b16",
            "b16",
            [0xffff, 0x0f0f, 0],
            0xf0f0
        ),
        c!("not.b32 %d, %a", "b32", "b32", [0, 0, 0], 0xffff_ffff),
        c!("cnot.b32 %d, %a", "b32", "b32", [0, 0, 0], 1),
        c!("cnot.b32 %d, %a", "b32", "b32", [5, 0, 0], 0),
        c!("and.pred %d, %a, %b", "pred", "pred", [1, 0, 0], 0),
        c!("or.pred %d, %a, %b", "pred", "pred", [1, 0, 0], 1),
        c!("xor.pred %d, %a, %b", "pred", "pred", [1, 1, 0], 0),
        c!("not.pred %d, %a", "pred", "pred", [0, 0, 0], 1),
        c!("shl.b32 %d, %a, %B", "b32", "b32", [1, 31, 0], 0x8000_0000),
        c!("shl.b32 %d, %a, %B", "b32", "b32", [1, 32, 0], 0),
        c!("shl.b32 %d, %a, %B", "b32", "b32", [1, 100, 0], 0),
        c!("shl.b16 %d, %a, %B", "b16", "b16", [1, 16, 0], 0),
        c!("shl.b64 %d, %a, %B", "b64", "b64", [1, 63, 0], 1 << 63),
        c!("shr.u32 %d, %a, %B", "u32", "u32", [0x8000_0000, 40, 0], 0),
        c!("shr.u32 %d, %a, %B", "u32", "u32", [0x8000_0000, 31, 0], 1),
        c!(
            "shr.s32 %d, %a, %B",
            "s32",
            "s32",
            [i(-8), 1, 0],
            i(-4) & 0xffff_ffff
        ),
        c!(
            "shr.s32 %d, %a, %B",
            "s32",
            "s32",
            [i(-8), 100, 0],
            0xffff_ffff
        ),
        c!(
            "shr.b32 %d, %a, %B",
            "b32",
            "b32",
            [0x8000_0000, 4, 0],
            0x0800_0000
        ),
        c!(
            "shr.s64 %d, %a, %B",
            "s64",
            "s64",
            [i(i64::MIN), 64, 0],
            u64::MAX
        ),
        c!("shr.u64 %d, %a, %B", "u64", "u64", [u64::MAX, 64, 0], 0),
        c!("shr.s16 %d, %a, %B", "s16", "s16", [0x8000, 3, 0], 0xf000),
        c!("popc.b32 %d, %a", "b32", "u32", [0xf0f0_0001, 0, 0], 9),
        c!("clz.b32 %d, %a", "b32", "u32", [0x0000_8000, 0, 0], 16),
        c!("clz.b64 %d, %a", "b64", "u32", [0, 0, 0], 64),
        c!("popc.b64 %d, %a", "b64", "u32", [u64::MAX, 0, 0], 64),
        c!("brev.b32 %d, %a", "b32", "b32", [1, 0, 0], 0x8000_0000),
        // Comparisons and selection.
        c!("setp.lt.s32 %d, %a, %b", "s32", "pred", [i(-1), 0, 0], 1),
        c!(
            "setp.lt.u32 %d, %a, %b",
            "u32",
            "pred",
            [0xffff_ffff, 0, 0],
            0
        ),
        c!("setp.lo.u32 %d, %a, %b", "u32", "pred", [1, 2, 0], 1),
        c!("setp.hs.u64 %d, %a, %b", "u64", "pred", [2, 2, 0], 1),
        c!(
            "setp.ge.s64 %d, %a, %b",
            "s64",
            "pred",
            [i(-2), i(-1), 0],
            0
        ),
        c!("setp.ne.b16 %d, %a, %b", "b16", "pred", [1, 1, 0], 0),
        c!("setp.eq.f32 %d, %a, %b", "f32", "pred", [nan, nan, 0], 0),
        c!("setp.ne.f32 %d, %a, %b", "f32", "pred", [nan, f(1.0), 0], 0),
        c!(
            "setp.neu.f32 %d, %a, %b",
            "f32",
            "pred",
            [nan, f(1.0), 0],
            1
        ),
        c!(
            "setp.equ.f32 %d, %a, %b",
            "f32",
            "pred",
            [nan, f(1.0), 0],
            1
        ),
        c!(
            "setp.ltu.f32 %d, %a, %b",
            "f32",
            "pred",
            [f(2.0), f(1.0), 0],
            0
        ),
        c!(
            "setp.geu.f64 %d, %a, %b",
            "f64",
            "pred",
            [d(f64::NAN), d(1.0), 0],
            1
        ),
        c!(
            "setp.num.f32 %d, %a, %b",
            "f32",
            "pred",
            [f(1.0), nan, 0],
            0
        ),
        c!(
            "setp.nan.f32 %d, %a, %b",
            "f32",
            "pred",
            [f(1.0), nan, 0],
            1
        ),
        c!(
            "setp.eq.f32 %d, %a, %b",
            "f32",
            "pred",
            [f(-0.0), f(0.0), 0],
            1
        ),
        c!(
            "setp.lt.f32 %d, %a, %b",
            "f32",
            "pred",
            [f(-sub), f(0.0), 0],
            1
        ),
        c!(
            "setp.lt.ftz.f32 %d, %a, %b",
            "f32",
            "pred",
            [f(-sub), f(0.0), 0],
            0
        ),
        c!(
            "setp.lt.and.s32 %d, %a, %b, %P",
            "s32",
            "pred",
            [1, 2, 0],
            0
        ),
        c!("setp.lt.or.s32 %d, %a, %b, %P", "s32", "pred", [3, 2, 1], 1),
        c!(
            "setp.lt.xor.s32 %d, %a, %b, !%P",
            "s32",
            "pred",
            [1, 2, 0],
            0
        ),
        c!("setp.lt.s32 %P|%d, %a, %b", "s32", "pred", [1, 2, 0], 0),
        c!("selp.s32 %d, %a, %b, %P", "s32", "s32", [7, 9, 1], 7),
        c!(
            "selp.f32 %d, %a, %b, %P",
            "f32",
            "f32",
            [f(1.0), f(2.0), 0],
            f(2.0)
        ),
        c!("selp.b64 %d, %a, %b, %P", "b64", "b64", [u64::MAX, 3, 0], 3),
        // f32 arithmetic.
        c!(
            "add.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(1.0), f(f32::EPSILON / 2.0), 0],
            f(1.0)
        ),
        c!(
            "add.rn.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(1.0), f(f32::EPSILON), 0],
            f(third)
        ),
        c!("add.f32 %d, %a, %b", "f32", "f32", [inf, ninf, 0], nan),
        c!(
            "sub.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(-0.0), f(0.0), 0],
            f(-0.0)
        ),
        c!(
            "mul.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(-0.0), f(5.0), 0],
            f(-0.0)
        ),
        c!("mul.f32 %d, %a, %b", "f32", "f32", [f(0.0), inf, 0], nan),
        c!(
            "add.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(sub), f(0.0), 0],
            f(sub)
        ),
        c!(
            "add.ftz.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(sub), f(0.0), 0],
            f(0.0)
        ),
        c!(
            "mul.ftz.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(-big_sub), f(1.0), 0],
            f(-0.0)
        ),
        c!(
            "mul.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(1e-30), f(1e-10), 0],
            f(1e-30 * 1e-10)
        ),
        c!(
            "mul.ftz.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(1e-30), f(1e-10), 0],
            f(0.0)
        ),
        c!(
            "mul.sat.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(3.0), f(2.0), 0],
            f(1.0)
        ),
        c!(
            "add.sat.f32 %d, %a, %b",
            "f32",
            "f32",
            [nan, f(2.0), 0],
            f(0.0)
        ),
        c!(
            "div.rn.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(1.0), f(3.0), 0],
            f(1.0 / 3.0)
        ),
        c!(
            "div.approx.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(6.0), f(3.0), 0],
            f(2.0)
        ),
        c!(
            "div.full.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(1.0), f(0.0), 0],
            inf
        ),
        c!(
            "div.rn.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(0.0), f(0.0), 0],
            nan
        ),
        c!(
            "fma.rn.f32 %d, %a, %b, %c",
            "f32",
            "f32",
            [f(third), f(third), f(-1.0)],
            f(third.mul_add(third, -1.0))
        ),
        c!(
            "mad.rn.f32 %d, %a, %b, %c",
            "f32",
            "f32",
            [f(2.0), f(3.0), f(1.0)],
            f(7.0)
        ),
        c!(
            "fma.rn.ftz.f32 %d, %a, %b, %c",
            "f32",
            "f32",
            [f(sub), f(1.0), f(0.0)],
            f(0.0)
        ),
        c!("min.f32 %d, %a, %b", "f32", "f32", [nan, f(1.0), 0], f(1.0)),
        c!("max.f32 %d, %a, %b", "f32", "f32", [f(1.0), nan, 0], f(1.0)),
        c!("min.f32 %d, %a, %b", "f32", "f32", [nan, nan, 0], nan),
        c!(
            "min.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(0.0), f(-0.0), 0],
            f(-0.0)
        ),
        c!(
            "max.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(-0.0), f(0.0), 0],
            f(0.0)
        ),
        c!(
            "min.NaN.f32 %d, %a, %b",
            "f32",
            "f32",
            [nan, f(1.0), 0],
            nan
        ),
        c!(
            "max.f64 %d, %a, %b",
            "f64",
            "f64",
            [d(f64::NAN), d(-1.0), 0],
            d(-1.0)
        ),
        c!("neg.f32 %d, %a", "f32", "f32", [f(0.0), 0, 0], f(-0.0)),
        c!("abs.f32 %d, %a", "f32", "f32", [f(-0.0), 0, 0], f(0.0)),
        c!("abs.ftz.f32 %d, %a", "f32", "f32", [f(-sub), 0, 0], f(0.0)),
        c!(
            "sqrt.rn.f32 %d, %a",
            "f32",
            "f32",
            [f(2.0), 0, 0],
            f(2f32.sqrt())
        ),
        c!("sqrt.rn.f32 %d, %a", "f32", "f32", [f(-1.0), 0, 0], nan),
        c!("sqrt.rn.f32 %d, %a", "f32", "f32", [f(-0.0), 0, 0], f(-0.0)),
        c!(
            "sqrt.approx.f32 %d, %a",
            "f32",
            "f32",
            [f(16.0), 0, 0],
            f(4.0)
        ),
        c!(
            "rcp.rn.f32 %d, %a",
            "f32",
            "f32",
            [f(3.0), 0, 0],
            f(1.0 / 3.0)
        ),
        c!("rcp.rn.f32 %d, %a", "f32", "f32", [f(-0.0), 0, 0], ninf),
        c!(
            "rcp.approx.f32 %d, %a",
            "f32",
            "f32",
            [f(4.0), 0, 0],
            f(0.25)
        ),
        c!(
            "rsqrt.approx.f32 %d, %a",
            "f32",
            "f32",
            [f(4.0), 0, 0],
            f(0.5)
        ),
        c!(
            "ex2.approx.f32 %d, %a",
            "f32",
            "f32",
            [f(3.0), 0, 0],
            f(8.0)
        ),
        c!(
            "ex2.approx.ftz.f32 %d, %a",
            "f32",
            "f32",
            [ninf, 0, 0],
            f(0.0)
        ),
        c!(
            "lg2.approx.f32 %d, %a",
            "f32",
            "f32",
            [f(8.0), 0, 0],
            f(3.0)
        ),
        c!("lg2.approx.f32 %d, %a", "f32", "f32", [f(0.0), 0, 0], ninf),
        c!(
            "sin.approx.f32 %d, %a",
            "f32",
            "f32",
            [f(0.0), 0, 0],
            f(0.0)
        ),
        c!(
            "cos.approx.f32 %d, %a",
            "f32",
            "f32",
            [f(0.0), 0, 0],
            f(1.0)
        ),
        c!("sin.approx.f32 %d, %a", "f32", "f32", [inf, 0, 0], nan),
        c!("tanh.approx.f32 %d, %a", "f32", "f32", [inf, 0, 0], f(1.0)),
        c!(
            "tanh.approx.f32 %d, %a",
            "f32",
            "f32",
            [f(-0.0), 0, 0],
            f(-0.0)
        ),
        c!(
            "copysign.f32 %d, %a, %b",
            "f32",
            "f32",
            [f(-1.0), f(2.0), 0],
            f(-2.0)
        ),
        c!(
            "copysign.f64 %d, %a, %b",
            "f64",
            "f64",
            [d(1.0), d(-2.0), 0],
            d(2.0)
        ),
        c!("testp.notanumber.f32 %d, %a", "f32", "pred", [nan, 0, 0], 1),
        c!("testp.finite.f32 %d, %a", "f32", "pred", [inf, 0, 0], 0),
        c!(
            "testp.infinite.f64 %d, %a",
            "f64",
            "pred",
            [d(f64::NEG_INFINITY), 0, 0],
            1
        ),
        c!(
            "testp.subnormal.f32 %d, %a",
            "f32",
            "pred",
            [f(sub), 0, 0],
            1
        ),
        c!("testp.normal.f32 %d, %a", "f32", "pred", [f(0.0), 0, 0], 0),
        c!("testp.number.f32 %d, %a", "f32", "pred", [inf, 0, 0], 1),
        // f64 arithmetic.
        c!(
            "add.f64 %d, %a, %b",
            "f64",
            "f64",
            [d(0.1), d(0.2), 0],
            d(0.1 + 0.2)
        ),
        c!(
            "mul.rn.f64 %d, %a, %b",
            "f64",
            "f64",
            [d(1e300), d(1e10), 0],
            d(f64::INFINITY)
        ),
        c!(
            "div.rn.f64 %d, %a, %b",
            "f64",
            "f64",
            [d(1.0), d(3.0), 0],
            d(1.0 / 3.0)
        ),
        c!(
            "fma.rn.f64 %d, %a, %b, %c",
            "f64",
            "f64",
            [d(0.1), d(10.0), d(-1.0)],
            d(0.1f64.mul_add(10.0, -1.0))
        ),
        c!(
            "sqrt.rn.f64 %d, %a",
            "f64",
            "f64",
            [d(2.0), 0, 0],
            d(2f64.sqrt())
        ),
        c!(
            "rcp.rn.f64 %d, %a",
            "f64",
            "f64",
            [d(3.0), 0, 0],
            d(1.0 / 3.0)
        ),
        c!("neg.f64 %d, %a", "f64", "f64", [d(1.5), 0, 0], d(-1.5)),
        c!(
            "min.f64 %d, %a, %b",
            "f64",
            "f64",
            [d(-0.0), d(0.0), 0],
            d(-0.0)
        ),
        // Conversions: float to integer saturate, NaN gives 0.
        c!("cvt.rzi.s32.f32 %d, %a", "f32", "s32", [nan, 0, 0], 0),
        c!(
            "cvt.rzi.s32.f32 %d, %a",
            "f32",
            "s32",
            [f(3e9), 0, 0],
            i32::MAX as u64
        ),
        c!(
            "cvt.rzi.s32.f32 %d, %a",
            "f32",
            "s32",
            [f(-3e9), 0, 0],
            0x8000_0000
        ),
        c!(
            "cvt.rzi.s32.f32 %d, %a",
            "f32",
            "s32",
            [f(-2.7), 0, 0],
            i(-2) & 0xffff_ffff
        ),
        c!("cvt.rni.s32.f32 %d, %a", "f32", "s32", [f(2.5), 0, 0], 2),
        c!("cvt.rni.s32.f32 %d, %a", "f32", "s32", [f(3.5), 0, 0], 4),
        c!(
            "cvt.rni.s32.f32 %d, %a",
            "f32",
            "s32",
            [f(-2.5), 0, 0],
            i(-2) & 0xffff_ffff
        ),
        c!(
            "cvt.rmi.s32.f32 %d, %a",
            "f32",
            "s32",
            [f(-2.5), 0, 0],
            i(-3) & 0xffff_ffff
        ),
        c!("cvt.rpi.s32.f32 %d, %a", "f32", "s32", [f(2.1), 0, 0], 3),
        c!("cvt.rzi.u32.f32 %d, %a", "f32", "u32", [f(-5.0), 0, 0], 0),
        c!(
            "cvt.rzi.u32.f32 %d, %a",
            "f32",
            "u32",
            [inf, 0, 0],
            0xffff_ffff
        ),
        c!(
            "cvt.rzi.u64.f32 %d, %a",
            "f32",
            "u64",
            [inf, 0, 0],
            u64::MAX
        ),
        c!(
            "cvt.rzi.s64.f64 %d, %a",
            "f64",
            "s64",
            [d(-1e30), 0, 0],
            i(i64::MIN)
        ),
        c!(
            "cvt.rzi.s16.f32 %d, %a",
            "f32",
            "s16",
            [f(40000.0), 0, 0],
            0x7fff
        ),
        c!("cvt.rni.u16.f64 %d, %a", "f64", "u16", [d(-1.0), 0, 0], 0),
        c!(
            "cvt.rzi.ftz.s32.f32 %d, %a",
            "f32",
            "s32",
            [f(-big_sub), 0, 0],
            0
        ),
        // Integer to float, with every rounding mode.
        c!(
            "cvt.rn.f32.s32 %d, %a",
            "s32",
            "f32",
            [16_777_217, 0, 0],
            f(16_777_216.0)
        ),
        c!(
            "cvt.rp.f32.s32 %d, %a",
            "s32",
            "f32",
            [16_777_217, 0, 0],
            f(16_777_218.0)
        ),
        c!(
            "cvt.rz.f32.u32 %d, %a",
            "u32",
            "f32",
            [0xffff_ffff, 0, 0],
            f(4_294_967_040.0)
        ),
        c!(
            "cvt.rn.f32.u32 %d, %a",
            "u32",
            "f32",
            [0xffff_ffff, 0, 0],
            f(4_294_967_296.0)
        ),
        c!(
            "cvt.rm.f32.s64 %d, %a",
            "s64",
            "f32",
            [i(-16_777_217), 0, 0],
            f(-16_777_218.0)
        ),
        c!(
            "cvt.rz.f32.s64 %d, %a",
            "s64",
            "f32",
            [i(-16_777_217), 0, 0],
            f(-16_777_216.0)
        ),
        c!(
            "cvt.rn.f64.u64 %d, %a",
            "u64",
            "f64",
            [u64::MAX, 0, 0],
            d(18_446_744_073_709_551_616.0)
        ),
        c!(
            "cvt.rz.f64.u64 %d, %a",
            "u64",
            "f64",
            [u64::MAX, 0, 0],
            d(18_446_744_073_709_549_568.0)
        ),
        c!(
            "cvt.rn.f64.s32 %d, %a",
            "s32",
            "f64",
            [i(-7), 0, 0],
            d(-7.0)
        ),
        // Float to float.
        c!(
            "cvt.rn.f32.f64 %d, %a",
            "f64",
            "f32",
            [d(1.0 + 2f64.powi(-30)), 0, 0],
            f(1.0)
        ),
        c!(
            "cvt.rp.f32.f64 %d, %a",
            "f64",
            "f32",
            [d(1.0 + 2f64.powi(-30)), 0, 0],
            f(third)
        ),
        c!(
            "cvt.rz.f32.f64 %d, %a",
            "f64",
            "f32",
            [d(1e40), 0, 0],
            f(f32::MAX)
        ),
        c!("cvt.rn.f32.f64 %d, %a", "f64", "f32", [d(1e40), 0, 0], inf),
        c!(
            "cvt.rm.f32.f64 %d, %a",
            "f64",
            "f32",
            [d(-1e-50), 0, 0],
            f(-sub)
        ),
        c!(
            "cvt.rn.f32.f64 %d, %a",
            "f64",
            "f32",
            [d(f64::NAN), 0, 0],
            nan
        ),
        c!(
            "cvt.rn.ftz.f32.f64 %d, %a",
            "f64",
            "f32",
            [d(1e-40), 0, 0],
            f(0.0)
        ),
        c!(
            "cvt.f64.f32 %d, %a",
            "f32",
            "f64",
            [f(0.1), 0, 0],
            d(f64::from(0.1f32))
        ),
        c!(
            "cvt.sat.f32.f32 %d, %a",
            "f32",
            "f32",
            [f(1.5), 0, 0],
            f(1.0)
        ),
        c!("cvt.sat.f32.f32 %d, %a", "f32", "f32", [nan, 0, 0], f(0.0)),
        c!(
            "cvt.rni.f32.f32 %d, %a",
            "f32",
            "f32",
            [f(2.5), 0, 0],
            f(2.0)
        ),
        c!(
            "cvt.rmi.f32.f32 %d, %a",
            "f32",
            "f32",
            [f(-0.5), 0, 0],
            f(-1.0)
        ),
        c!(
            "cvt.rzi.f32.f32 %d, %a",
            "f32",
            "f32",
            [f(-0.5), 0, 0],
            f(-0.0)
        ),
        c!(
            "cvt.ftz.f32.f32 %d, %a",
            "f32",
            "f32",
            [f(big_sub), 0, 0],
            f(0.0)
        ),
        c!(
            "cvt.rpi.f64.f64 %d, %a",
            "f64",
            "f64",
            [d(1.25), 0, 0],
            d(2.0)
        ),
        // Integer to integer.
        c!(
            "cvt.s32.s16 %d, %a",
            "s16",
            "s32",
            [0xffff, 0, 0],
            0xffff_ffff
        ),
        c!("cvt.u32.u16 %d, %a", "u16", "u32", [0xffff, 0, 0], 0xffff),
        c!("cvt.s16.s32 %d, %a", "s32", "s16", [0x12345, 0, 0], 0x2345),
        c!(
            "cvt.sat.s16.s32 %d, %a",
            "s32",
            "s16",
            [100_000, 0, 0],
            0x7fff
        ),
        c!("cvt.sat.u16.s32 %d, %a", "s32", "u16", [i(-5), 0, 0], 0),
        c!("cvt.s64.s32 %d, %a", "s32", "s64", [i(-1), 0, 0], u64::MAX),
        c!(
            "cvt.u64.u32 %d, %a",
            "u32",
            "u64",
            [0xffff_ffff, 0, 0],
            0xffff_ffff
        ),
        c!("cvt.u32.u64 %d, %a", "u64", "u32", [0x1_0000_0005, 0, 0], 5),
        c!(
            "cvt.sat.s32.u64 %d, %a",
            "u64",
            "s32",
            [u64::MAX, 0, 0],
            i32::MAX as u64
        ),
        c!("cvt.s8.s32 %d, %a", "s32", "s16", [0x1ff, 0, 0], 0xffff),
        c!("cvt.u8.u32 %d, %a", "u32", "u16", [0x1ff, 0, 0], 0xff),
        // f16.
        c!("cvt.f32.f16 %d, %a", "f16", "f32", [0x3c00, 0, 0], f(1.0)),
        c!(
            "cvt.f32.f16 %d, %a",
            "f16",
            "f32",
            [0x0001, 0, 0],
            f(2f32.powi(-24))
        ),
        c!("cvt.f32.f16 %d, %a", "f16", "f32", [0x7c00, 0, 0], inf),
        c!("cvt.f32.f16 %d, %a", "f16", "f32", [0xfc00, 0, 0], ninf),
        c!("cvt.f32.f16 %d, %a", "f16", "f32", [0x8000, 0, 0], f(-0.0)),
        c!(
            "cvt.f32.f16 %d, %a",
            "f16",
            "f32",
            [0x7bff, 0, 0],
            f(65504.0)
        ),
        c!("cvt.f32.f16 %d, %a", "f16", "f32", [0x7e00, 0, 0], nan),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(1.0), 0, 0],
            0x3c00
        ),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(65504.0), 0, 0],
            0x7bff
        ),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(65519.99), 0, 0],
            0x7bff
        ),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(65520.0), 0, 0],
            0x7c00
        ),
        c!(
            "cvt.rz.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(1e6), 0, 0],
            0x7bff
        ),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(2f32.powi(-24)), 0, 0],
            0x0001
        ),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(2f32.powi(-25)), 0, 0],
            0x0000
        ),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(1.5 * 2f32.powi(-25)), 0, 0],
            0x0001
        ),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(1.0 + 2f32.powi(-11)), 0, 0],
            0x3c00
        ),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(1.0 + 3.0 * 2f32.powi(-11)), 0, 0],
            0x3c02
        ),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(-0.0), 0, 0],
            0x8000
        ),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(-2.0), 0, 0],
            0xc000
        ),
        c!("cvt.rn.f16.f32 %d, %a", "f32", "f16", [ninf, 0, 0], 0xfc00),
        c!(
            "cvt.rn.f16.f32 %d, %a",
            "f32",
            "f16",
            [f(6.1e-5), 0, 0],
            0x03ff
        ),
        c!(
            "cvt.rn.f16.f64 %d, %a",
            "f64",
            "f16",
            [d(0.1), 0, 0],
            0x2e66
        ),
        c!("cvt.rn.f16.s32 %d, %a", "s32", "f16", [2049, 0, 0], 0x6800),
        c!(
            "cvt.rzi.s32.f16 %d, %a",
            "f16",
            "s32",
            [0xc500, 0, 0],
            i(-5) & 0xffff_ffff
        ),
        // Bit moves.
        c!("mov.b32 %d, %a", "b32", "f32", [0x3f80_0000, 0, 0], f(1.0)),
        c!(
            "mov.b64 %d, {%a, %b}",
            "b32",
            "b64",
            [0x1111_2222, 0x3333_4444, 0],
            0x3333_4444_1111_2222
        ),
        c!(
            "mov.b32 %d, {%a, %b}",
            "b16",
            "b32",
            [0xbeef, 0xdead, 0],
            0xdead_beef
        ),
        c!("mov.f32 %d, 0f3FC00000", "f32", "f32", [0, 0, 0], f(1.5)),
        c!(
            "mov.f64 %d, 0d4004000000000000",
            "f64",
            "f64",
            [0, 0, 0],
            d(2.5)
        ),
        c!(
            "add.f32 %d, %a, 0f40000000",
            "f32",
            "f32",
            [f(1.0), 0, 0],
            f(3.0)
        ),
        c!("add.s32 %d, %a, -1", "s32", "s32", [5, 0, 0], 4),
        c!("and.b32 %d, %a, 0xff", "b32", "b32", [0x1234, 0, 0], 0x34),
    ]
}
