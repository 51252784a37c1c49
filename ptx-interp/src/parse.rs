//! The PTX reader: text -> entries of pre-decoded instructions.
//!
//! Parsing happens once per module. Every register name is resolved to a slot index, every
//! label to an instruction index, every shared or parameter symbol to a byte offset, and every
//! immediate to its bit pattern for the instruction's type, so the interpreter never looks at
//! text again. Anything outside the supported subset is a parse error naming the line; the
//! reader never guesses what an unknown instruction or modifier means.

use std::collections::HashMap;

use crate::Error;

/// Slots of the special registers, the same in every entry; user registers follow them.
pub(crate) const TID: u32 = 0;
pub(crate) const NTID: u32 = 3;
pub(crate) const CTAID: u32 = 6;
pub(crate) const NCTAID: u32 = 9;
pub(crate) const LANEID: u32 = 12;
pub(crate) const WARPID: u32 = 13;
/// The sink `_`: writes land here and are never read back meaningfully.
pub(crate) const SINK: u32 = 14;
pub(crate) const FIXED_SLOTS: u32 = 15;
/// The guard value of an unpredicated instruction.
pub(crate) const NO_GUARD: u32 = u32::MAX;
/// Generic addresses of shared memory start here (`cvta.shared` adds it, `cvta.to.shared`
/// subtracts it); global buffers never overlap it.
pub(crate) const SHARED_WINDOW: u64 = 0xFF00_0000_0000_0000;

const SPECIALS: [(&str, u32); 14] = [
    ("%tid.x", TID),
    ("%tid.y", TID + 1),
    ("%tid.z", TID + 2),
    ("%ntid.x", NTID),
    ("%ntid.y", NTID + 1),
    ("%ntid.z", NTID + 2),
    ("%ctaid.x", CTAID),
    ("%ctaid.y", CTAID + 1),
    ("%ctaid.z", CTAID + 2),
    ("%nctaid.x", NCTAID),
    ("%nctaid.y", NCTAID + 1),
    ("%nctaid.z", NCTAID + 2),
    ("%laneid", LANEID),
    ("%warpid", WARPID),
];

/// A scalar PTX type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    B8,
    B16,
    B32,
    B64,
    F16,
    F32,
    F64,
    Pred,
}

impl Ty {
    fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "u8" => Ty::U8,
            "u16" => Ty::U16,
            "u32" => Ty::U32,
            "u64" => Ty::U64,
            "s8" => Ty::S8,
            "s16" => Ty::S16,
            "s32" => Ty::S32,
            "s64" => Ty::S64,
            "b8" => Ty::B8,
            "b16" => Ty::B16,
            "b32" => Ty::B32,
            "b64" => Ty::B64,
            "f16" => Ty::F16,
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            "pred" => Ty::Pred,
            _ => return None,
        })
    }

    pub(crate) fn bits(self) -> u32 {
        match self {
            Ty::Pred => 1,
            Ty::U8 | Ty::S8 | Ty::B8 => 8,
            Ty::U16 | Ty::S16 | Ty::B16 | Ty::F16 => 16,
            Ty::U32 | Ty::S32 | Ty::B32 | Ty::F32 => 32,
            Ty::U64 | Ty::S64 | Ty::B64 | Ty::F64 => 64,
        }
    }

    pub(crate) fn bytes(self) -> u32 {
        self.bits().div_ceil(8)
    }

    pub(crate) fn signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }

    pub(crate) fn float(self) -> bool {
        matches!(self, Ty::F16 | Ty::F32 | Ty::F64)
    }

    /// The register representation of a `bits()`-wide value: sign-extended for signed types,
    /// zero-extended otherwise, so any narrower read sees the same bits.
    #[inline(always)]
    pub(crate) fn ext(self, v: u64) -> u64 {
        match self {
            Ty::S8 => v as i8 as i64 as u64,
            Ty::S16 => v as i16 as i64 as u64,
            Ty::S32 => v as i32 as i64 as u64,
            Ty::U64 | Ty::S64 | Ty::B64 | Ty::F64 => v,
            Ty::Pred => v & 1,
            t => v & ((1u64 << t.bits()) - 1),
        }
    }
}

/// An instruction operand: a register slot or an immediate bit pattern.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Src {
    R(u32),
    I(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Space {
    Global,
    Shared,
    Param,
    Generic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IOp {
    Add,
    AddSat,
    Sub,
    SubSat,
    MulLo,
    MulHi,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IUn {
    Neg,
    Abs,
    Not,
    Cnot,
    Popc,
    Clz,
    Brev,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FOp {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    MinNan,
    MaxNan,
    Copysign,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FUn {
    Neg,
    Abs,
    Sqrt,
    Rcp,
    Rsqrt,
    Ex2,
    Lg2,
    Sin,
    Cos,
    Tanh,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Lo,
    Ls,
    Hi,
    Hs,
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BoolOp {
    None,
    And,
    Or,
    Xor,
}

/// A rounding modifier: `.rn/.rz/.rm/.rp` round to the destination format, the `i` forms round
/// to an integral value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rnd {
    None,
    Rn,
    Rz,
    Rm,
    Rp,
    Rni,
    Rzi,
    Rmi,
    Rpi,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TestKind {
    Nan,
    Finite,
    Infinite,
    Number,
    Normal,
    Subnormal,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShflMode {
    Up,
    Down,
    Bfly,
    Idx,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomOp {
    Add,
    Min,
    Max,
    Exch,
    Cas,
    And,
    Or,
    Xor,
}

/// One decoded instruction body.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// A plain move of `ty`'s bits.
    Mov {
        ty: Ty,
        d: u32,
        a: Src,
    },
    /// `mov.bN d, {parts}`: parts of `w` bits each, lowest first.
    Pack {
        d: u32,
        parts: Box<[Src]>,
        w: u32,
    },
    /// `mov.bN {parts}, a`.
    Unpack {
        parts: Box<[u32]>,
        a: Src,
        w: u32,
    },
    Int {
        op: IOp,
        ty: Ty,
        d: u32,
        a: Src,
        b: Src,
    },
    IntUn {
        op: IUn,
        ty: Ty,
        d: u32,
        a: Src,
    },
    /// `mul.wide` (c unused) and `mad.wide`: `ty` is the source type, d is twice as wide.
    Wide {
        mad: bool,
        ty: Ty,
        d: u32,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `mad.lo` / `mad.hi`.
    Mad {
        hi: bool,
        ty: Ty,
        d: u32,
        a: Src,
        b: Src,
        c: Src,
    },
    Float {
        op: FOp,
        ty: Ty,
        ftz: bool,
        sat: bool,
        d: u32,
        a: Src,
        b: Src,
    },
    FloatUn {
        op: FUn,
        ty: Ty,
        ftz: bool,
        sat: bool,
        d: u32,
        a: Src,
    },
    Fma {
        ty: Ty,
        ftz: bool,
        sat: bool,
        d: u32,
        a: Src,
        b: Src,
        c: Src,
    },
    Setp {
        cmp: Cmp,
        ty: Ty,
        ftz: bool,
        p: u32,
        q: u32,
        a: Src,
        b: Src,
        bop: BoolOp,
        c: Src,
        cneg: bool,
    },
    Selp {
        ty: Ty,
        d: u32,
        a: Src,
        b: Src,
        c: Src,
    },
    Cvt {
        dty: Ty,
        sty: Ty,
        rnd: Rnd,
        sat: bool,
        ftz: bool,
        d: u32,
        a: Src,
    },
    Testp {
        kind: TestKind,
        ty: Ty,
        p: u32,
        a: Src,
    },
    Cvta {
        to: bool,
        shared: bool,
        d: u32,
        a: Src,
    },
    Ld {
        space: Space,
        ty: Ty,
        n: u8,
        d: [u32; 4],
        base: Src,
        off: i64,
    },
    St {
        space: Space,
        ty: Ty,
        n: u8,
        s: [Src; 4],
        base: Src,
        off: i64,
    },
    Atom {
        space: Space,
        op: AtomOp,
        ty: Ty,
        d: u32,
        base: Src,
        off: i64,
        b: Src,
        c: Src,
    },
    Bra {
        target: u32,
    },
    Exit,
    BarSync,
    WarpSync {
        mask: Src,
    },
    Shfl {
        mode: ShflMode,
        d: u32,
        p: u32,
        a: Src,
        b: Src,
        c: Src,
        mask: Src,
    },
    Nop,
}

/// An instruction with its guard predicate (`NO_GUARD` when unpredicated).
#[derive(Clone, Debug)]
pub(crate) struct Inst {
    pub guard: u32,
    pub guard_neg: bool,
    pub op: Op,
}

/// A parsed `.entry`.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub name: String,
    /// Byte offset and size of each parameter in the parameter buffer.
    pub params: Vec<(u32, Ty)>,
    pub param_bytes: u32,
    pub insts: Vec<Inst>,
    /// The source line (1-based) of each instruction.
    pub lines: Vec<u32>,
    pub nregs: u32,
    /// Bytes of static shared memory; dynamic shared memory starts at `extern_offset`.
    pub extern_offset: u32,
    pub maxntid: Option<[u32; 3]>,
    pub reqntid: Option<[u32; 3]>,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Str,
    P(char),
}

#[derive(Clone, Debug)]
struct Token {
    t: Tok,
    line: u32,
}

fn perr(line: u32, message: impl Into<String>) -> Error {
    Error::Parse {
        line: line as usize,
        message: message.into(),
    }
}

fn is_word_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'%' || c == b'.'
}

fn lex(text: &str) -> Result<Vec<Token>, Error> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1u32;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let start = line;
            i += 2;
            loop {
                if i + 1 >= b.len() {
                    return Err(perr(start, "unterminated /* comment"));
                }
                if b[i] == b'*' && b[i + 1] == b'/' {
                    i += 2;
                    break;
                }
                if b[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += 1;
            }
            if i >= b.len() || b[i] != b'"' {
                return Err(perr(line, "unterminated string"));
            }
            i += 1;
            out.push(Token { t: Tok::Str, line });
        } else if is_word_char(c) {
            let start = i;
            let decimal = c.is_ascii_digit();
            while i < b.len() {
                let ch = b[i];
                if is_word_char(ch) {
                    i += 1;
                } else if ch == b':'
                    && b.get(i + 1) == Some(&b':')
                    && b.get(i + 2).is_some_and(|&x| is_word_char(x))
                {
                    i += 2;
                } else if (ch == b'+' || ch == b'-')
                    && decimal
                    && matches!(b[i - 1], b'e' | b'E')
                    && !matches!(
                        b.get(start + 1),
                        Some(b'x' | b'X' | b'f' | b'F' | b'd' | b'D')
                    )
                {
                    i += 1;
                } else {
                    break;
                }
            }
            out.push(Token {
                t: Tok::Word(text[start..i].to_string()),
                line,
            });
        } else if b";,:{}[]()+-|!@<>=".contains(&c) {
            out.push(Token {
                t: Tok::P(c as char),
                line,
            });
            i += 1;
        } else {
            return Err(perr(line, format!("unexpected character `{}`", c as char)));
        }
    }
    Ok(out)
}

/// An operand before decoding.
#[derive(Clone, Debug)]
enum Opnd {
    Name(String),
    Not(String),
    Num(String),
    Pipe(String, String),
    Vec(Vec<String>),
    Addr(Option<String>, i64),
}

pub(crate) struct Parsed {
    pub entries: Vec<Entry>,
}

struct Parser {
    toks: Vec<Token>,
    i: usize,
    /// Module-scope shared variables: name, size, alignment, extern.
    module_shared: Vec<(String, u32, u32, bool)>,
}

pub(crate) fn parse(text: &str) -> Result<Parsed, Error> {
    let toks = lex(text)?;
    let mut p = Parser {
        toks,
        i: 0,
        module_shared: Vec::new(),
    };
    let mut entries = Vec::new();
    while p.i < p.toks.len() {
        let line = p.line();
        match p.toks[p.i].t.clone() {
            Tok::Word(w) => match w.as_str() {
                ".version" | ".target" | ".address_size" | ".file" | ".loc" => p.skip_line(),
                ".visible" | ".weak" => p.i += 1,
                ".pragma" => p.skip_past(';')?,
                ".entry" => {
                    p.i += 1;
                    let e = p.entry()?;
                    if entries.iter().any(|x: &Entry| x.name == e.name) {
                        return Err(perr(line, format!("entry `{}` defined twice", e.name)));
                    }
                    entries.push(e);
                }
                ".extern" | ".shared" => {
                    let (name, size, align, ext) = p.shared_decl()?;
                    p.module_shared.push((name, size, align, ext));
                }
                other => return Err(perr(line, format!("unsupported module-level `{other}`"))),
            },
            t => return Err(perr(line, format!("unexpected {t:?} at module level"))),
        }
    }
    Ok(Parsed { entries })
}

struct Scope {
    regs: HashMap<String, u32>,
    nregs: u32,
    shared: HashMap<String, u32>,
    shared_size: u32,
    extern_names: Vec<String>,
    params: HashMap<String, u32>,
}

impl Parser {
    fn line(&self) -> u32 {
        self.toks
            .get(self.i)
            .or(self.toks.last())
            .map_or(0, |t| t.line)
    }

    fn skip_line(&mut self) {
        let line = self.line();
        while self.i < self.toks.len() && self.toks[self.i].line == line {
            self.i += 1;
        }
    }

    fn skip_past(&mut self, c: char) -> Result<(), Error> {
        let line = self.line();
        while self.i < self.toks.len() {
            self.i += 1;
            if self.toks[self.i - 1].t == Tok::P(c) {
                return Ok(());
            }
        }
        Err(perr(line, format!("expected `{c}`")))
    }

    fn peek_p(&self, c: char) -> bool {
        self.toks.get(self.i).is_some_and(|t| t.t == Tok::P(c))
    }

    fn expect_p(&mut self, c: char) -> Result<(), Error> {
        if self.peek_p(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(perr(self.line(), format!("expected `{c}`")))
        }
    }

    fn word(&mut self) -> Result<String, Error> {
        match self.toks.get(self.i) {
            Some(Token {
                t: Tok::Word(w), ..
            }) => {
                self.i += 1;
                Ok(w.clone())
            }
            _ => Err(perr(self.line(), "expected a name")),
        }
    }

    fn peek_word(&self) -> Option<&str> {
        match self.toks.get(self.i) {
            Some(Token {
                t: Tok::Word(w), ..
            }) => Some(w),
            _ => None,
        }
    }

    fn number(&mut self) -> Result<u64, Error> {
        let line = self.line();
        let w = self.word()?;
        parse_int(&w).ok_or_else(|| perr(line, format!("expected an integer, found `{w}`")))
    }

    /// `[.extern] .shared [.align N] .type name[dims]...;` -> (name, bytes, align, extern).
    fn shared_decl(&mut self) -> Result<(String, u32, u32, bool), Error> {
        let line = self.line();
        let mut ext = false;
        if self.peek_word() == Some(".extern") {
            ext = true;
            self.i += 1;
        }
        if self.word()? != ".shared" {
            return Err(perr(line, "only .shared variables are supported"));
        }
        let mut align = 0;
        let mut ty = None;
        loop {
            match self.peek_word() {
                Some(".align") => {
                    self.i += 1;
                    align = self.number()? as u32;
                }
                Some(w) if w.starts_with('.') => {
                    ty = Some(
                        Ty::parse(&w[1..])
                            .ok_or_else(|| perr(line, format!("unknown type `{w}`")))?,
                    );
                    self.i += 1;
                }
                _ => break,
            }
        }
        let ty = ty.ok_or_else(|| perr(line, "shared variable without a type"))?;
        let name = self.word()?;
        let mut count: u64 = 1;
        let mut unsized_dim = false;
        while self.peek_p('[') {
            self.i += 1;
            if self.peek_p(']') {
                unsized_dim = true;
            } else {
                count *= self.number()?;
            }
            self.expect_p(']')?;
        }
        self.expect_p(';')?;
        if unsized_dim != ext {
            return Err(perr(
                line,
                "only `.extern .shared` arrays may be unsized, and they must be",
            ));
        }
        let align = align.max(ty.bytes());
        let bytes = if ext {
            0
        } else {
            count * u64::from(ty.bytes())
        };
        let bytes = u32::try_from(bytes).map_err(|_| perr(line, "shared variable too large"))?;
        Ok((name, bytes, align, ext))
    }

    fn entry(&mut self) -> Result<Entry, Error> {
        let name = self.word()?;
        let mut scope = Scope {
            regs: SPECIALS.iter().map(|&(n, s)| (n.to_string(), s)).collect(),
            nregs: FIXED_SLOTS,
            shared: HashMap::new(),
            shared_size: 0,
            extern_names: Vec::new(),
            params: HashMap::new(),
        };
        scope.regs.insert("_".to_string(), SINK);
        let mut max_align = 16u32;
        for (n, size, align, ext) in self.module_shared.clone() {
            add_shared(&mut scope, n, size, align, ext, &mut max_align);
        }
        // Parameters.
        let mut params = Vec::new();
        let mut param_bytes = 0u32;
        if self.peek_p('(') {
            self.i += 1;
            while !self.peek_p(')') {
                let line = self.line();
                if self.word()? != ".param" {
                    return Err(perr(line, "expected `.param`"));
                }
                let mut ty = None;
                let mut align = 0;
                while let Some(w) = self.peek_word() {
                    if !w.starts_with('.') {
                        break;
                    }
                    let w = w.to_string();
                    self.i += 1;
                    if w == ".align" {
                        align = self.number()? as u32;
                    } else if w.starts_with(".ptr") || w == ".global" || w == ".shared" {
                    } else {
                        ty = Some(
                            Ty::parse(&w[1..])
                                .ok_or_else(|| perr(line, format!("unknown param type `{w}`")))?,
                        );
                    }
                }
                let ty = ty.ok_or_else(|| perr(line, "parameter without a type"))?;
                let pname = self.word()?;
                if self.peek_p('[') {
                    return Err(perr(line, "array parameters are not supported"));
                }
                let align = align.max(ty.bytes());
                param_bytes = param_bytes.next_multiple_of(align);
                scope.params.insert(pname, param_bytes);
                params.push((param_bytes, ty));
                param_bytes += ty.bytes();
                if self.peek_p(',') {
                    self.i += 1;
                }
            }
            self.i += 1;
        }
        // Performance directives.
        let mut maxntid = None;
        let mut reqntid = None;
        while let Some(w) = self.peek_word() {
            let w = w.to_string();
            let line = self.line();
            match w.as_str() {
                ".maxntid" | ".reqntid" => {
                    self.i += 1;
                    let mut dims = [1u32; 3];
                    for (k, d) in dims.iter_mut().enumerate() {
                        if k > 0 {
                            if !self.peek_p(',') {
                                break;
                            }
                            self.i += 1;
                        }
                        *d = self.number()? as u32;
                    }
                    if w == ".maxntid" {
                        maxntid = Some(dims);
                    } else {
                        reqntid = Some(dims);
                    }
                }
                ".minnctapersm" | ".maxnreg" | ".maxnctapersm" | ".noreturn" => self.skip_line(),
                ".pragma" => self.skip_past(';')?,
                _ => {
                    return Err(perr(
                        line,
                        format!("unexpected `{w}` before the entry body"),
                    ))
                }
            }
        }
        self.expect_p('{')?;
        // Body: collect statements first (labels are resolved after).
        let mut insts: Vec<Inst> = Vec::new();
        let mut lines = Vec::new();
        let mut labels: HashMap<String, u32> = HashMap::new();
        let mut fixups: Vec<(usize, String, u32)> = Vec::new();
        let mut depth = 1;
        loop {
            let line = self.line();
            let Some(tok) = self.toks.get(self.i).cloned() else {
                return Err(perr(line, format!("entry `{name}` is not closed")));
            };
            match tok.t {
                Tok::P('{') => {
                    depth += 1;
                    self.i += 1;
                }
                Tok::P('}') => {
                    depth -= 1;
                    self.i += 1;
                    if depth == 0 {
                        break;
                    }
                }
                Tok::P(';') => self.i += 1,
                Tok::Word(w)
                    if self
                        .toks
                        .get(self.i + 1)
                        .is_some_and(|t| t.t == Tok::P(':'))
                        && !w.starts_with('.') =>
                {
                    if labels.insert(w.clone(), insts.len() as u32).is_some() {
                        return Err(perr(line, format!("label `{w}` defined twice")));
                    }
                    self.i += 2;
                }
                Tok::Word(w) if w.starts_with('.') => match w.as_str() {
                    ".reg" => {
                        self.i += 1;
                        self.reg_decl(&mut scope)?;
                    }
                    ".shared" | ".extern" => {
                        let (n, size, align, ext) = self.shared_decl()?;
                        add_shared(&mut scope, n, size, align, ext, &mut max_align);
                    }
                    ".loc" | ".file" => self.skip_line(),
                    ".pragma" => self.skip_past(';')?,
                    other => {
                        return Err(perr(
                            line,
                            format!("unsupported directive `{other}` in an entry"),
                        ))
                    }
                },
                Tok::P('@') | Tok::Word(_) => {
                    let (guard, guard_neg) = if tok.t == Tok::P('@') {
                        self.i += 1;
                        let neg = self.peek_p('!');
                        if neg {
                            self.i += 1;
                        }
                        let g = self.word()?;
                        (scope.reg(&g, line)?, neg)
                    } else {
                        (NO_GUARD, false)
                    };
                    let opcode = self.word()?;
                    let start = self.i;
                    while self.i < self.toks.len() && self.toks[self.i].t != Tok::P(';') {
                        self.i += 1;
                    }
                    if self.i >= self.toks.len() {
                        return Err(perr(line, "missing `;`"));
                    }
                    let operands = split_operands(&self.toks[start..self.i], line)?;
                    self.i += 1;
                    let op = decode(&opcode, operands, &scope, line, insts.len(), &mut fixups)?;
                    insts.push(Inst {
                        guard,
                        guard_neg,
                        op,
                    });
                    lines.push(line);
                }
                t => return Err(perr(line, format!("unexpected {t:?} in entry body"))),
            }
        }
        for (at, label, line) in fixups {
            let target = *labels
                .get(&label)
                .ok_or_else(|| perr(line, format!("unknown label `{label}`")))?;
            if let Op::Bra { target: t } = &mut insts[at].op {
                *t = target;
            }
        }
        // Falling off the end exits.
        insts.push(Inst {
            guard: NO_GUARD,
            guard_neg: false,
            op: Op::Exit,
        });
        lines.push(
            self.toks
                .get(self.i.saturating_sub(1))
                .map_or(0, |t| t.line),
        );
        let static_shared = scope.shared_size;
        let extern_offset = static_shared.next_multiple_of(max_align);
        let mut entry = Entry {
            name,
            params,
            param_bytes,
            insts,
            lines,
            nregs: scope.nregs,

            extern_offset,
            maxntid,
            reqntid,
        };
        place_externs(&mut entry);
        Ok(entry)
    }

    fn reg_decl(&mut self, scope: &mut Scope) -> Result<(), Error> {
        let line = self.line();
        // Types and vector modifiers; any type is accepted, registers are untyped 64-bit slots.
        while let Some(w) = self.peek_word() {
            if !w.starts_with('.') {
                break;
            }
            let w = w.to_string();
            if w != ".v2" && w != ".v4" && Ty::parse(&w[1..]).is_none() {
                return Err(perr(line, format!("unknown register type `{w}`")));
            }
            self.i += 1;
        }
        loop {
            let name = self.word()?;
            if self.peek_p('<') {
                self.i += 1;
                let n = self.number()?;
                self.expect_p('>')?;
                for k in 0..n {
                    scope.declare(format!("{name}{k}"), line)?;
                }
            } else {
                scope.declare(name, line)?;
            }
            if self.peek_p(',') {
                self.i += 1;
            } else {
                break;
            }
        }
        self.expect_p(';')
    }
}

fn add_shared(
    scope: &mut Scope,
    name: String,
    size: u32,
    align: u32,
    ext: bool,
    max_align: &mut u32,
) {
    *max_align = (*max_align).max(align);
    if ext {
        scope.extern_names.push(name);
        // The offset is known only when the static size is: extern arrays follow all static
        // ones, so uses get a placeholder that `place_externs` fixes when the entry ends.
    } else {
        let off = scope.shared_size.next_multiple_of(align.max(1));
        scope.shared.insert(name, off);
        scope.shared_size = off + size;
    }
}

impl Scope {
    fn declare(&mut self, name: String, line: u32) -> Result<(), Error> {
        if self.regs.contains_key(&name) {
            return Err(perr(line, format!("register `{name}` declared twice")));
        }
        self.regs.insert(name, self.nregs);
        self.nregs += 1;
        Ok(())
    }

    fn reg(&self, name: &str, line: u32) -> Result<u32, Error> {
        self.regs
            .get(name)
            .copied()
            .ok_or_else(|| perr(line, format!("unknown register `{name}`")))
    }
}

fn split_operands(toks: &[Token], line: u32) -> Result<Vec<Opnd>, Error> {
    let mut out = Vec::new();
    let mut i = 0;
    let word = |i: usize| -> Result<String, Error> {
        match toks.get(i) {
            Some(Token {
                t: Tok::Word(w), ..
            }) => Ok(w.clone()),
            _ => Err(perr(line, "malformed operand")),
        }
    };
    while i < toks.len() {
        let op = match &toks[i].t {
            Tok::P('[') => {
                i += 1;
                let mut base = None;
                let mut off: i64 = 0;
                let mut sign = 1i64;
                while i < toks.len() && toks[i].t != Tok::P(']') {
                    match &toks[i].t {
                        Tok::P('+') => {}
                        Tok::P('-') => sign = -sign,
                        Tok::Word(w) => {
                            if let Some(v) = parse_int(w) {
                                off = off.wrapping_add(sign.wrapping_mul(v as i64));
                            } else if base.is_none() {
                                base = Some(w.clone());
                            } else {
                                return Err(perr(line, "malformed address"));
                            }
                            sign = 1;
                        }
                        _ => return Err(perr(line, "malformed address")),
                    }
                    i += 1;
                }
                if i >= toks.len() {
                    return Err(perr(line, "missing `]`"));
                }
                i += 1;
                Opnd::Addr(base, off)
            }
            Tok::P('{') => {
                i += 1;
                let mut v = Vec::new();
                while i < toks.len() && toks[i].t != Tok::P('}') {
                    if toks[i].t != Tok::P(',') {
                        v.push(word(i)?);
                    }
                    i += 1;
                }
                if i >= toks.len() {
                    return Err(perr(line, "missing `}`"));
                }
                i += 1;
                Opnd::Vec(v)
            }
            Tok::P('!') => {
                i += 2;
                Opnd::Not(word(i - 1)?)
            }
            Tok::P('-') => {
                i += 2;
                Opnd::Num(format!("-{}", word(i - 1)?))
            }
            Tok::Word(w) => {
                i += 1;
                if toks.get(i).is_some_and(|t| t.t == Tok::P('|')) {
                    i += 2;
                    Opnd::Pipe(w.clone(), word(i - 1)?)
                } else if w.as_bytes()[0].is_ascii_digit() {
                    Opnd::Num(w.clone())
                } else {
                    Opnd::Name(w.clone())
                }
            }
            t => return Err(perr(line, format!("unexpected {t:?} in operands"))),
        };
        out.push(op);
        if i < toks.len() {
            if toks[i].t != Tok::P(',') {
                return Err(perr(line, "expected `,` between operands"));
            }
            i += 1;
        }
    }
    Ok(out)
}

/// Parses a PTX integer literal: decimal, `0x` hex, `0b` binary, leading-0 octal, optional `U`.
fn parse_int(w: &str) -> Option<u64> {
    let (neg, w) = match w.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, w),
    };
    let w = w.strip_suffix('U').unwrap_or(w);
    let v = if let Some(h) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if let Some(h) = w.strip_prefix("0b").or_else(|| w.strip_prefix("0B")) {
        u64::from_str_radix(h, 2).ok()?
    } else if w.len() > 1 && w.starts_with('0') {
        u64::from_str_radix(&w[1..], 8).ok()?
    } else {
        w.parse::<u64>().ok()?
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Parses a literal as an immediate of type `ty`.
fn parse_imm(w: &str, ty: Ty) -> Option<u64> {
    let (neg, body) = match w.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, w),
    };
    let fbits = |b: &str, base: &str| -> Option<f64> {
        let h = b.strip_prefix(base)?;
        match base.as_bytes()[1].to_ascii_lowercase() {
            b'f' if h.len() == 8 => {
                Some(f64::from(f32::from_bits(u32::from_str_radix(h, 16).ok()?)))
            }
            b'd' if h.len() == 16 => Some(f64::from_bits(u64::from_str_radix(h, 16).ok()?)),
            _ => None,
        }
    };
    let as_float = fbits(body, "0f")
        .or_else(|| fbits(body, "0F"))
        .or_else(|| fbits(body, "0d"))
        .or_else(|| fbits(body, "0D"))
        .or_else(|| {
            if body.contains(['.', 'e', 'E']) && !body.starts_with("0x") {
                body.parse::<f64>().ok()
            } else {
                None
            }
        });
    if ty.float() {
        let x = match as_float {
            Some(x) => x,
            None => parse_int(body)? as i64 as f64,
        };
        let x = if neg { -x } else { x };
        return Some(match ty {
            Ty::F32 => u64::from((x as f32).to_bits()),
            Ty::F64 => x.to_bits(),
            _ => u64::from(crate::num::f64_to_f16(x, Rnd::Rn)),
        });
    }
    if as_float.is_some()
        && (body.starts_with("0f")
            || body.starts_with("0d")
            || body.starts_with("0F")
            || body.starts_with("0D"))
    {
        // A float bit pattern given to a bit-typed instruction (e.g. `mov.b32 %r, 0f3F800000`).
        let h = &body[2..];
        let v = u64::from_str_radix(h, 16).ok()?;
        return Some(ty.ext(if neg { v.wrapping_neg() } else { v }));
    }
    Some(ty.ext(parse_int(w)?))
}

/// The modifiers of an opcode, consumed one by one; leftovers are an error.
struct Mods<'a> {
    list: Vec<&'a str>,
    line: u32,
    opcode: &'a str,
}

impl<'a> Mods<'a> {
    fn has(&mut self, m: &str) -> bool {
        if let Some(k) = self.list.iter().position(|x| *x == m) {
            self.list.remove(k);
            true
        } else {
            false
        }
    }

    fn one_of<T: Copy>(&mut self, table: &[(&str, T)]) -> Option<T> {
        for &(n, v) in table {
            if self.has(n) {
                return Some(v);
            }
        }
        None
    }

    /// Removes and returns the types, in order.
    fn types(&mut self) -> Vec<Ty> {
        let mut out = Vec::new();
        self.list.retain(|m| match Ty::parse(m) {
            Some(t) => {
                out.push(t);
                false
            }
            None => true,
        });
        out
    }

    fn ty(&mut self) -> Result<Ty, Error> {
        let t = self.types();
        if t.len() != 1 {
            return Err(self.err("expects exactly one type"));
        }
        Ok(t[0])
    }

    fn ignore(&mut self, f: impl Fn(&str) -> bool) {
        self.list.retain(|m| !f(m));
    }

    fn err(&self, msg: &str) -> Error {
        perr(self.line, format!("`{}` {msg}", self.opcode))
    }

    fn done(&self) -> Result<(), Error> {
        if let Some(m) = self.list.first() {
            return Err(perr(
                self.line,
                format!("`{}`: unsupported modifier `.{m}`", self.opcode),
            ));
        }
        Ok(())
    }
}

const RNDS: [(&str, Rnd); 8] = [
    ("rn", Rnd::Rn),
    ("rz", Rnd::Rz),
    ("rm", Rnd::Rm),
    ("rp", Rnd::Rp),
    ("rni", Rnd::Rni),
    ("rzi", Rnd::Rzi),
    ("rmi", Rnd::Rmi),
    ("rpi", Rnd::Rpi),
];

struct Dec<'a> {
    scope: &'a Scope,
    ops: Vec<Opnd>,
    line: u32,
    opcode: &'a str,
}

impl Dec<'_> {
    fn n(&self, k: usize) -> Result<(), Error> {
        if self.ops.len() != k {
            return Err(perr(
                self.line,
                format!(
                    "`{}` expects {k} operands, found {}",
                    self.opcode,
                    self.ops.len()
                ),
            ));
        }
        Ok(())
    }

    fn dst(&self, k: usize) -> Result<u32, Error> {
        match &self.ops[k] {
            Opnd::Name(n) => {
                let r = self.scope.reg(n, self.line)?;
                if r < FIXED_SLOTS && r != SINK {
                    return Err(perr(
                        self.line,
                        format!("cannot write special register `{n}`"),
                    ));
                }
                Ok(r)
            }
            o => Err(perr(self.line, format!("expected a register, found {o:?}"))),
        }
    }

    fn src(&self, k: usize, ty: Ty) -> Result<Src, Error> {
        self.src_of(&self.ops[k], ty)
    }

    fn src_of(&self, o: &Opnd, ty: Ty) -> Result<Src, Error> {
        match o {
            Opnd::Name(n) => {
                if let Some(&r) = self.scope.regs.get(n) {
                    Ok(Src::R(r))
                } else if let Some(&off) = self.scope.shared.get(n) {
                    Ok(Src::I(u64::from(off)))
                } else if self.scope.extern_names.contains(n) {
                    Err(perr(
                        self.line,
                        format!("extern shared `{n}` used: take its address with mov first"),
                    ))
                } else {
                    Err(perr(self.line, format!("unknown name `{n}`")))
                }
            }
            Opnd::Num(w) => parse_imm(w, ty)
                .map(Src::I)
                .ok_or_else(|| perr(self.line, format!("bad immediate `{w}` for .{ty:?}"))),
            o => Err(perr(self.line, format!("unexpected operand {o:?}"))),
        }
    }

    /// An address operand: base (register, symbol offset or 0) and byte offset.
    fn addr(&self, k: usize, space: Space) -> Result<(Src, i64), Error> {
        match &self.ops[k] {
            Opnd::Addr(base, off) => {
                let base = match base {
                    None => Src::I(0),
                    Some(n) => {
                        if space == Space::Param {
                            match self.scope.params.get(n) {
                                Some(&o) => Src::I(u64::from(o)),
                                None => {
                                    return Err(perr(self.line, format!("unknown parameter `{n}`")))
                                }
                            }
                        } else if let Some(&r) = self.scope.regs.get(n) {
                            Src::R(r)
                        } else if let Some(&o) = self.scope.shared.get(n) {
                            let o = u64::from(o);
                            Src::I(if space == Space::Generic {
                                o + SHARED_WINDOW
                            } else {
                                o
                            })
                        } else if self.scope.extern_names.contains(n) {
                            Src::I(if space == Space::Generic {
                                EXTERN_MARK.wrapping_add(SHARED_WINDOW)
                            } else {
                                EXTERN_MARK
                            })
                        } else {
                            return Err(perr(self.line, format!("unknown name `{n}` in address")));
                        }
                    }
                };
                Ok((base, *off))
            }
            o => Err(perr(self.line, format!("expected an address, found {o:?}"))),
        }
    }
}

/// Placeholder base of a not-yet-placed extern shared array; fixed after the entry is parsed.
const EXTERN_MARK: u64 = 0xE7E7_E7E7_0000_0000;

fn decode(
    opcode: &str,
    ops: Vec<Opnd>,
    scope: &Scope,
    line: u32,
    at: usize,
    fixups: &mut Vec<(usize, String, u32)>,
) -> Result<Op, Error> {
    let mut parts = opcode.split('.');
    let base = parts.next().unwrap_or("");
    let mut m = Mods {
        list: parts.collect(),
        line,
        opcode,
    };
    let d = Dec {
        scope,
        ops,
        line,
        opcode,
    };
    let op = match base {
        "mov" => {
            let ty = m.ty()?;
            d.n(2)?;
            match (&d.ops[0], &d.ops[1]) {
                (Opnd::Vec(v), _) => {
                    let parts: Vec<u32> = v
                        .iter()
                        .map(|n| scope.reg(n, line))
                        .collect::<Result<_, _>>()?;
                    Op::Unpack {
                        w: ty.bits() / parts.len() as u32,
                        parts: parts.into(),
                        a: d.src(1, ty)?,
                    }
                }
                (_, Opnd::Vec(v)) => {
                    let n = v.len() as u32;
                    let pty = match ty.bits() / n {
                        8 => Ty::B8,
                        16 => Ty::B16,
                        32 => Ty::B32,
                        _ => return Err(m.err("bad vector split")),
                    };
                    let parts: Vec<Src> = v
                        .iter()
                        .map(|x| d.src_of(&Opnd::Name(x.clone()), pty))
                        .collect::<Result<_, _>>()?;
                    Op::Pack {
                        d: d.dst(0)?,
                        parts: parts.into(),
                        w: ty.bits() / n,
                    }
                }
                (_, Opnd::Name(n)) if scope.extern_names.contains(n) => Op::Mov {
                    ty,
                    d: d.dst(0)?,
                    a: Src::I(EXTERN_MARK),
                },
                _ => Op::Mov {
                    ty,
                    d: d.dst(0)?,
                    a: d.src(1, ty)?,
                },
            }
        }
        "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor" | "shl"
        | "shr" | "copysign" => {
            let ftz = m.has("ftz");
            let sat = m.has("sat");
            let rnd = m.one_of(&RNDS[..4]);
            let approx = m.has("approx") || m.has("full");
            let nan = m.has("NaN");
            let hi = m.has("hi");
            let lo = m.has("lo");
            let wide = m.has("wide");
            let ty = m.ty()?;
            m.done()?;
            d.n(3)?;
            if ty.float() {
                if ty == Ty::F16 {
                    return Err(m.err("f16 arithmetic is not supported"));
                }
                if rnd.is_some_and(|r| r != Rnd::Rn) {
                    return Err(m.err("only the .rn rounding mode is supported for arithmetic"));
                }
                let op = match (base, nan) {
                    ("add", false) => FOp::Add,
                    ("sub", false) => FOp::Sub,
                    ("mul", false) => FOp::Mul,
                    ("div", false) => {
                        if rnd.is_none() && !approx {
                            return Err(m.err("needs .rn, .approx or .full"));
                        }
                        FOp::Div
                    }
                    ("min", false) => FOp::Min,
                    ("max", false) => FOp::Max,
                    ("min", true) => FOp::MinNan,
                    ("max", true) => FOp::MaxNan,
                    ("copysign", false) => FOp::Copysign,
                    _ => return Err(m.err("is not a float operation")),
                };
                Op::Float {
                    op,
                    ty,
                    ftz,
                    sat,
                    d: d.dst(0)?,
                    a: d.src(1, ty)?,
                    b: d.src(2, ty)?,
                }
            } else {
                if ftz || approx || nan || rnd.is_some() {
                    return Err(m.err("has float modifiers on an integer type"));
                }
                if wide {
                    if base != "mul" || !matches!(ty, Ty::U16 | Ty::S16 | Ty::U32 | Ty::S32) {
                        return Err(m.err(".wide needs a 16- or 32-bit integer type"));
                    }
                    Op::Wide {
                        mad: false,
                        ty,
                        d: d.dst(0)?,
                        a: d.src(1, ty)?,
                        b: d.src(2, ty)?,
                        c: Src::I(0),
                    }
                } else {
                    let op = match base {
                        "add" if sat => IOp::AddSat,
                        "sub" if sat => IOp::SubSat,
                        "add" => IOp::Add,
                        "sub" => IOp::Sub,
                        "mul" if hi => IOp::MulHi,
                        "mul" if lo => IOp::MulLo,
                        "mul" => return Err(m.err("needs .lo, .hi or .wide")),
                        "div" => IOp::Div,
                        "rem" => IOp::Rem,
                        "min" => IOp::Min,
                        "max" => IOp::Max,
                        "and" => IOp::And,
                        "or" => IOp::Or,
                        "xor" => IOp::Xor,
                        "shl" => IOp::Shl,
                        "shr" => IOp::Shr,
                        _ => return Err(m.err("is not an integer operation")),
                    };
                    if sat && (ty != Ty::S32 || !matches!(op, IOp::AddSat | IOp::SubSat)) {
                        return Err(m.err(".sat is only for add/sub.s32"));
                    }
                    let bty = if matches!(op, IOp::Shl | IOp::Shr) {
                        Ty::U32
                    } else {
                        ty
                    };
                    Op::Int {
                        op,
                        ty,
                        d: d.dst(0)?,
                        a: d.src(1, ty)?,
                        b: d.src(2, bty)?,
                    }
                }
            }
        }
        "mad" | "fma" => {
            let ftz = m.has("ftz");
            let sat = m.has("sat");
            let rnd = m.one_of(&RNDS[..4]);
            let hi = m.has("hi");
            let lo = m.has("lo");
            let wide = m.has("wide");
            let ty = m.ty()?;
            m.done()?;
            d.n(4)?;
            if ty.float() {
                if ty == Ty::F16 || rnd != Some(Rnd::Rn) {
                    return Err(m.err("is supported for f32/f64 with .rn only"));
                }
                Op::Fma {
                    ty,
                    ftz,
                    sat,
                    d: d.dst(0)?,
                    a: d.src(1, ty)?,
                    b: d.src(2, ty)?,
                    c: d.src(3, ty)?,
                }
            } else if wide {
                let cty = match ty {
                    Ty::U16 => Ty::U32,
                    Ty::S16 => Ty::S32,
                    Ty::U32 => Ty::U64,
                    Ty::S32 => Ty::S64,
                    _ => return Err(m.err(".wide needs a 16- or 32-bit integer type")),
                };
                Op::Wide {
                    mad: true,
                    ty,
                    d: d.dst(0)?,
                    a: d.src(1, ty)?,
                    b: d.src(2, ty)?,
                    c: d.src(3, cty)?,
                }
            } else if hi || lo {
                Op::Mad {
                    hi,
                    ty,
                    d: d.dst(0)?,
                    a: d.src(1, ty)?,
                    b: d.src(2, ty)?,
                    c: d.src(3, ty)?,
                }
            } else {
                return Err(m.err("needs .lo, .hi or .wide"));
            }
        }
        "neg" | "abs" | "not" | "cnot" | "popc" | "clz" | "brev" | "sqrt" | "rcp" | "rsqrt"
        | "ex2" | "lg2" | "sin" | "cos" | "tanh" => {
            let ftz = m.has("ftz");
            let sat = m.has("sat");
            let rnd = m.one_of(&RNDS[..4]);
            let approx = m.has("approx");
            let ty = m.ty()?;
            m.done()?;
            d.n(2)?;
            if ty.float() {
                if ty == Ty::F16 {
                    return Err(m.err("f16 arithmetic is not supported"));
                }
                let op = match base {
                    "neg" => FUn::Neg,
                    "abs" => FUn::Abs,
                    "sqrt" => FUn::Sqrt,
                    "rcp" => FUn::Rcp,
                    "rsqrt" => FUn::Rsqrt,
                    "ex2" => FUn::Ex2,
                    "lg2" => FUn::Lg2,
                    "sin" => FUn::Sin,
                    "cos" => FUn::Cos,
                    "tanh" => FUn::Tanh,
                    _ => return Err(m.err("is not a float operation")),
                };
                let needs_mode = matches!(op, FUn::Sqrt | FUn::Rcp);
                let approx_only = matches!(
                    op,
                    FUn::Rsqrt | FUn::Ex2 | FUn::Lg2 | FUn::Sin | FUn::Cos | FUn::Tanh
                );
                if (needs_mode && !approx && rnd != Some(Rnd::Rn)) || (approx_only && !approx) {
                    return Err(m.err("has a missing or unsupported rounding modifier"));
                }
                Op::FloatUn {
                    op,
                    ty,
                    ftz,
                    sat,
                    d: d.dst(0)?,
                    a: d.src(1, ty)?,
                }
            } else {
                if ftz || sat || approx || rnd.is_some() {
                    return Err(m.err("has float modifiers on an integer type"));
                }
                let op = match base {
                    "neg" => IUn::Neg,
                    "abs" => IUn::Abs,
                    "not" => IUn::Not,
                    "cnot" => IUn::Cnot,
                    "popc" => IUn::Popc,
                    "clz" => IUn::Clz,
                    "brev" => IUn::Brev,
                    _ => return Err(m.err("is not an integer operation")),
                };
                Op::IntUn {
                    op,
                    ty,
                    d: d.dst(0)?,
                    a: d.src(1, ty)?,
                }
            }
        }
        "setp" => {
            let cmp = m
                .one_of(&[
                    ("eq", Cmp::Eq),
                    ("ne", Cmp::Ne),
                    ("lt", Cmp::Lt),
                    ("le", Cmp::Le),
                    ("gt", Cmp::Gt),
                    ("ge", Cmp::Ge),
                    ("lo", Cmp::Lo),
                    ("ls", Cmp::Ls),
                    ("hi", Cmp::Hi),
                    ("hs", Cmp::Hs),
                    ("equ", Cmp::Equ),
                    ("neu", Cmp::Neu),
                    ("ltu", Cmp::Ltu),
                    ("leu", Cmp::Leu),
                    ("gtu", Cmp::Gtu),
                    ("geu", Cmp::Geu),
                    ("num", Cmp::Num),
                    ("nan", Cmp::Nan),
                ])
                .ok_or_else(|| m.err("needs a comparison"))?;
            let bop = m
                .one_of(&[
                    ("and", BoolOp::And),
                    ("or", BoolOp::Or),
                    ("xor", BoolOp::Xor),
                ])
                .unwrap_or(BoolOp::None);
            let ftz = m.has("ftz");
            let ty = m.ty()?;
            m.done()?;
            if ty == Ty::F16 || ty == Ty::Pred {
                return Err(m.err("is not supported for this type"));
            }
            let unordered = matches!(
                cmp,
                Cmp::Equ
                    | Cmp::Neu
                    | Cmp::Ltu
                    | Cmp::Leu
                    | Cmp::Gtu
                    | Cmp::Geu
                    | Cmp::Num
                    | Cmp::Nan
            );
            if unordered && !ty.float() {
                return Err(m.err("uses a float comparison on an integer type"));
            }
            if matches!(cmp, Cmp::Lo | Cmp::Ls | Cmp::Hi | Cmp::Hs) && ty.float() {
                return Err(m.err("uses an unsigned comparison on a float type"));
            }
            d.n(if bop == BoolOp::None { 3 } else { 4 })?;
            let (p, q) = match &d.ops[0] {
                Opnd::Pipe(p, q) => (scope.reg(p, line)?, scope.reg(q, line)?),
                _ => (d.dst(0)?, SINK),
            };
            let (c, cneg) = if bop == BoolOp::None {
                (Src::I(0), false)
            } else {
                match &d.ops[3] {
                    Opnd::Not(n) => (Src::R(scope.reg(n, line)?), true),
                    _ => (d.src(3, Ty::Pred)?, false),
                }
            };
            Op::Setp {
                cmp,
                ty,
                ftz,
                p,
                q,
                a: d.src(1, ty)?,
                b: d.src(2, ty)?,
                bop,
                c,
                cneg,
            }
        }
        "selp" => {
            let ty = m.ty()?;
            m.done()?;
            d.n(4)?;
            Op::Selp {
                ty,
                d: d.dst(0)?,
                a: d.src(1, ty)?,
                b: d.src(2, ty)?,
                c: d.src(3, Ty::Pred)?,
            }
        }
        "cvt" => {
            let ftz = m.has("ftz");
            let sat = m.has("sat");
            let rnd = m.one_of(&RNDS).unwrap_or(Rnd::None);
            let tys = m.types();
            m.done()?;
            if tys.len() != 2 {
                return Err(m.err("needs two types"));
            }
            let (dty, sty) = (tys[0], tys[1]);
            if dty == Ty::Pred || sty == Ty::Pred {
                return Err(m.err("cannot convert predicates"));
            }
            let int_rnd = matches!(rnd, Rnd::Rni | Rnd::Rzi | Rnd::Rmi | Rnd::Rpi);
            let ok = match (dty.float(), sty.float()) {
                (false, false) => rnd == Rnd::None,
                (false, true) => int_rnd,
                (true, false) => !int_rnd && rnd != Rnd::None,
                (true, true) => {
                    if dty.bits() < sty.bits() {
                        !int_rnd && rnd != Rnd::None
                    } else if dty.bits() > sty.bits() {
                        rnd == Rnd::None
                    } else {
                        !matches!(rnd, Rnd::Rn | Rnd::Rz | Rnd::Rm | Rnd::Rp)
                    }
                }
            };
            if !ok {
                return Err(m.err("has a missing or invalid rounding modifier for these types"));
            }
            d.n(2)?;
            Op::Cvt {
                dty,
                sty,
                rnd,
                sat,
                ftz,
                d: d.dst(0)?,
                a: d.src(1, sty)?,
            }
        }
        "testp" => {
            if m.list.contains(&"nan") {
                return Err(m.err("is not PTX: the NaN test is spelled `testp.notanumber`"));
            }
            let kind = m
                .one_of(&[
                    ("notanumber", TestKind::Nan),
                    ("finite", TestKind::Finite),
                    ("infinite", TestKind::Infinite),
                    ("number", TestKind::Number),
                    ("normal", TestKind::Normal),
                    ("subnormal", TestKind::Subnormal),
                ])
                .ok_or_else(|| m.err("needs a test"))?;
            let ty = m.ty()?;
            m.done()?;
            if !matches!(ty, Ty::F32 | Ty::F64) {
                return Err(m.err("needs .f32 or .f64"));
            }
            d.n(2)?;
            Op::Testp {
                kind,
                ty,
                p: d.dst(0)?,
                a: d.src(1, ty)?,
            }
        }
        "cvta" => {
            let to = m.has("to");
            let shared = m.has("shared");
            let global = m.has("global");
            let ty = m.ty()?;
            m.done()?;
            if shared == global || !matches!(ty, Ty::U64 | Ty::U32) {
                return Err(m.err("supports .global or .shared with .u64/.u32"));
            }
            d.n(2)?;
            Op::Cvta {
                to,
                shared,
                d: d.dst(0)?,
                a: d.src(1, ty)?,
            }
        }
        "ld" | "st" => {
            let space = m
                .one_of(&[
                    ("global", Space::Global),
                    ("shared", Space::Shared),
                    ("param", Space::Param),
                ])
                .unwrap_or(Space::Generic);
            let n = m.one_of(&[("v2", 2u8), ("v4", 4u8)]).unwrap_or(1);
            m.ignore(|x| {
                matches!(
                    x,
                    "nc" | "ca"
                        | "cg"
                        | "cs"
                        | "lu"
                        | "cv"
                        | "wb"
                        | "wt"
                        | "volatile"
                        | "relaxed"
                        | "weak"
                        | "cta"
                        | "gpu"
                        | "sys"
                ) || x.starts_with("L1::")
                    || x.starts_with("L2::")
            });
            let ty = m.ty()?;
            m.done()?;
            if ty == Ty::Pred || (space == Space::Param && (base == "st" || n != 1)) {
                return Err(m.err("is not supported in this form"));
            }
            d.n(2)?;
            let (vk, ak) = if base == "ld" { (0, 1) } else { (1, 0) };
            let (b, off) = d.addr(ak, space)?;
            let names: Vec<Opnd> = match &d.ops[vk] {
                Opnd::Vec(v) => v.iter().map(|x| Opnd::Name(x.clone())).collect(),
                o => vec![o.clone()],
            };
            if names.len() != n as usize {
                return Err(m.err("has the wrong number of vector elements"));
            }
            if base == "ld" {
                let mut regs = [SINK; 4];
                for (k, o) in names.iter().enumerate() {
                    regs[k] = match o {
                        Opnd::Name(x) => scope.reg(x, line)?,
                        _ => return Err(m.err("needs registers")),
                    };
                }
                Op::Ld {
                    space,
                    ty,
                    n,
                    d: regs,
                    base: b,
                    off,
                }
            } else {
                let mut s = [Src::I(0); 4];
                for (k, o) in names.iter().enumerate() {
                    s[k] = d.src_of(o, ty)?;
                }
                Op::St {
                    space,
                    ty,
                    n,
                    s,
                    base: b,
                    off,
                }
            }
        }
        "atom" | "red" => {
            let space = m
                .one_of(&[("global", Space::Global), ("shared", Space::Shared)])
                .unwrap_or(Space::Generic);
            m.ignore(|x| {
                matches!(
                    x,
                    "relaxed" | "acquire" | "release" | "acq_rel" | "cta" | "gpu" | "sys"
                )
            });
            let op = m
                .one_of(&[
                    ("add", AtomOp::Add),
                    ("min", AtomOp::Min),
                    ("max", AtomOp::Max),
                    ("exch", AtomOp::Exch),
                    ("cas", AtomOp::Cas),
                    ("and", AtomOp::And),
                    ("or", AtomOp::Or),
                    ("xor", AtomOp::Xor),
                ])
                .ok_or_else(|| m.err("needs an operation"))?;
            let ty = m.ty()?;
            m.done()?;
            let ok = match op {
                AtomOp::Add => matches!(ty, Ty::U32 | Ty::S32 | Ty::U64 | Ty::F32 | Ty::F64),
                AtomOp::Min | AtomOp::Max => matches!(ty, Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64),
                AtomOp::Exch | AtomOp::Cas | AtomOp::And | AtomOp::Or | AtomOp::Xor => {
                    matches!(ty, Ty::B32 | Ty::B64)
                }
            };
            if !ok || (base == "red" && op == AtomOp::Cas) {
                return Err(m.err("is not supported for this type"));
            }
            let k = usize::from(base == "atom");
            let nops = k + 2 + usize::from(op == AtomOp::Cas);
            d.n(nops)?;
            let dst = if k == 1 { d.dst(0)? } else { SINK };
            let (b, off) = d.addr(k, space)?;
            let c = if op == AtomOp::Cas {
                d.src(k + 2, ty)?
            } else {
                Src::I(0)
            };
            Op::Atom {
                space,
                op,
                ty,
                d: dst,
                base: b,
                off,
                b: d.src(k + 1, ty)?,
                c,
            }
        }
        "bra" => {
            m.has("uni");
            m.done()?;
            d.n(1)?;
            match &d.ops[0] {
                Opnd::Name(l) => fixups.push((at, l.clone(), line)),
                _ => return Err(m.err("needs a label")),
            }
            Op::Bra { target: u32::MAX }
        }
        "ret" | "exit" => {
            m.has("uni");
            m.done()?;
            d.n(0)?;
            Op::Exit
        }
        "bar" | "barrier" => {
            if m.has("warp") {
                m.has("sync");
                m.done()?;
                d.n(1)?;
                Op::WarpSync {
                    mask: d.src(0, Ty::B32)?,
                }
            } else {
                m.has("sync");
                m.has("aligned");
                m.done()?;
                d.n(1)?;
                match d.src(0, Ty::U32)? {
                    Src::I(0) => Op::BarSync,
                    _ => return Err(m.err("supports only barrier 0 with all threads")),
                }
            }
        }
        "shfl" => {
            if !m.has("sync") {
                return Err(m.err("needs .sync"));
            }
            let mode = m
                .one_of(&[
                    ("up", ShflMode::Up),
                    ("down", ShflMode::Down),
                    ("bfly", ShflMode::Bfly),
                    ("idx", ShflMode::Idx),
                ])
                .ok_or_else(|| m.err("needs a mode"))?;
            let ty = m.ty()?;
            m.done()?;
            if ty != Ty::B32 {
                return Err(m.err("needs .b32"));
            }
            d.n(5)?;
            let (dr, p) = match &d.ops[0] {
                Opnd::Pipe(a, b) => (scope.reg(a, line)?, scope.reg(b, line)?),
                _ => (d.dst(0)?, SINK),
            };
            Op::Shfl {
                mode,
                d: dr,
                p,
                a: d.src(1, Ty::B32)?,
                b: d.src(2, Ty::B32)?,
                c: d.src(3, Ty::B32)?,
                mask: d.src(4, Ty::B32)?,
            }
        }
        "membar" | "fence" => Op::Nop,
        _ => return Err(perr(line, format!("unsupported instruction `{opcode}`"))),
    };
    Ok(op)
}

/// Replaces the extern-shared placeholder by the entry's dynamic shared offset.
pub(crate) fn place_externs(e: &mut Entry) {
    let off = u64::from(e.extern_offset);
    let fix = |s: &mut Src| {
        if let Src::I(v) = s {
            if *v == EXTERN_MARK {
                *v = off;
            } else if *v == EXTERN_MARK.wrapping_add(SHARED_WINDOW) {
                *v = off + SHARED_WINDOW;
            }
        }
    };
    for inst in &mut e.insts {
        match &mut inst.op {
            Op::Mov { a, .. } => fix(a),
            Op::Ld { base, .. } | Op::St { base, .. } | Op::Atom { base, .. } => fix(base),
            _ => {}
        }
    }
}
