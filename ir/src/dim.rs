//! Dimensions: static sizes, named symbols, and polynomial expressions over symbols.
//!
//! Exporters name dynamic dims (`batch`, `seq`); shape inference combines them: a Reshape from
//! `[batch, seq, 768]` to `[-1, 768]` gives `batch*seq`, a Concat of a KV cache gives
//! `past+seq`. A [`Dim`] is kept in one canonical form, so equal dims compare equal:
//!
//! - [`Dim::Static`] for any expression without symbols (a negative constant is not a size and
//!   is rejected where it would arise);
//! - [`Dim::Symbol`] for exactly one symbol with coefficient 1;
//! - [`Dim::Expr`] for everything else: a sum of terms `coefficient * symbol * symbol ...`,
//!   terms sorted, no zero coefficients;
//! - [`Dim::Unknown`] for a size nobody can name; it is never equal to another dim's value,
//!   even another `Unknown` (compare with [`Dim::provably_equal`]).
//!
//! Text form (inside `#memc.dims<[...]>`): `batch`, `batch*seq`, `2*seq+1`, `past+seq-1`.
//! Symbol names are identifiers (`[A-Za-z_][A-Za-z0-9_]*`); [`sanitize_symbol`] maps any other
//! name onto one.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A product of symbols (with repetition), sorted by name. Empty for the constant term.
type Monomial = Vec<Arc<str>>;

/// A polynomial over symbols with integer coefficients, in canonical form.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DimExpr {
    /// Sorted by monomial; no zero coefficients.
    terms: Vec<(Monomial, i64)>,
}

impl DimExpr {
    fn from_map(map: BTreeMap<Monomial, i64>) -> DimExpr {
        DimExpr {
            terms: map.into_iter().filter(|(_, c)| *c != 0).collect(),
        }
    }

    fn constant(value: i64) -> DimExpr {
        DimExpr::from_map(BTreeMap::from([(Vec::new(), value)]))
    }

    fn symbol(name: Arc<str>) -> DimExpr {
        DimExpr {
            terms: vec![(vec![name], 1)],
        }
    }

    /// The terms: each a sorted list of symbols and a coefficient.
    pub fn terms(&self) -> impl Iterator<Item = (&[Arc<str>], i64)> {
        self.terms.iter().map(|(m, c)| (m.as_slice(), *c))
    }

    fn add(&self, other: &DimExpr) -> Option<DimExpr> {
        let mut map: BTreeMap<Monomial, i64> = self.terms.iter().cloned().collect();
        for (m, c) in &other.terms {
            let entry = map.entry(m.clone()).or_insert(0);
            *entry = entry.checked_add(*c)?;
        }
        Some(DimExpr::from_map(map))
    }

    fn mul(&self, other: &DimExpr) -> Option<DimExpr> {
        let mut map: BTreeMap<Monomial, i64> = BTreeMap::new();
        for (ma, ca) in &self.terms {
            for (mb, cb) in &other.terms {
                let mut m: Monomial = ma.iter().chain(mb).cloned().collect();
                m.sort();
                let entry = map.entry(m).or_insert(0);
                *entry = entry.checked_add(ca.checked_mul(*cb)?)?;
            }
        }
        Some(DimExpr::from_map(map))
    }

    fn scale(&self, factor: i64) -> Option<DimExpr> {
        self.mul(&DimExpr::constant(factor))
    }

    /// `self / divisor` when the divisor is one term that divides every term exactly.
    fn div_exact(&self, divisor: &DimExpr) -> Option<DimExpr> {
        let [(d_mono, d_coeff)] = divisor.terms.as_slice() else {
            return None;
        };
        let mut map = BTreeMap::new();
        for (m, c) in &self.terms {
            if c % d_coeff != 0 {
                return None;
            }
            let mut rest = m.clone();
            for name in d_mono {
                let pos = rest.iter().position(|n| n == name)?;
                rest.remove(pos);
            }
            map.insert(rest, c / d_coeff);
        }
        Some(DimExpr::from_map(map))
    }

    /// The value under `bindings`; `None` if a symbol is unbound or the arithmetic overflows.
    fn eval(&self, bindings: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
        let mut total: i64 = 0;
        for (m, c) in &self.terms {
            let mut term = *c;
            for name in m {
                term = term.checked_mul(bindings(name)?)?;
            }
            total = total.checked_add(term)?;
        }
        Some(total)
    }
}

impl fmt::Display for DimExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        // Higher-degree terms first, then by name; the constant last: `2*batch*seq-batch+1`.
        let mut ordered: Vec<&(Monomial, i64)> = self.terms.iter().collect();
        ordered.sort_by(|(a, _), (b, _)| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        for (i, (m, c)) in ordered.into_iter().enumerate() {
            let magnitude = c.unsigned_abs();
            if *c < 0 {
                f.write_str("-")?;
            } else if i > 0 {
                f.write_str("+")?;
            }
            if m.is_empty() {
                write!(f, "{magnitude}")?;
                continue;
            }
            if magnitude != 1 {
                write!(f, "{magnitude}*")?;
            }
            for (j, name) in m.iter().enumerate() {
                if j > 0 {
                    f.write_str("*")?;
                }
                f.write_str(name)?;
            }
        }
        Ok(())
    }
}

/// One dimension of a tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A size known at compile time.
    Static(u64),
    /// A size bound later (`--dim batch=4`); the name is shared by every dim that must be equal.
    Symbol(Arc<str>),
    /// A polynomial over symbols that is neither a constant nor a plain symbol.
    Expr(Arc<DimExpr>),
    /// A size nobody named (ONNX dims with neither value nor param).
    Unknown,
    /// A size known only at run time, at most the bound (the number of non-zero elements of
    /// `NonZero`'s input). Memory is planned for the bound; the run returns the actual extent
    /// (`docs/dynamic-extents.md`). Never static, never provably equal to another dim, and no
    /// arithmetic on it is known (the result is `Unknown`).
    AtMost(u64),
}

impl Dim {
    pub fn symbol(name: &str) -> Dim {
        Dim::Symbol(Arc::from(name))
    }

    pub fn as_static(&self) -> Option<u64> {
        match self {
            Dim::Static(n) => Some(*n),
            _ => None,
        }
    }

    /// Whether the dim is a symbol or an expression of symbols.
    pub fn is_symbolic(&self) -> bool {
        matches!(self, Dim::Symbol(_) | Dim::Expr(_))
    }

    /// Whether the dim is a run-time extent with a static bound ([`Dim::AtMost`]).
    pub fn is_bounded(&self) -> bool {
        matches!(self, Dim::AtMost(_))
    }

    /// The size memory is planned for: a static size, or a bounded dim's bound.
    pub fn planned_size(&self) -> Option<u64> {
        match self {
            Dim::Static(n) | Dim::AtMost(n) => Some(*n),
            _ => None,
        }
    }

    /// Whether both dims are known to have the same value: equal static sizes or equal
    /// expressions. `Unknown` and bounded dims are never provably equal to anything.
    pub fn provably_equal(&self, other: &Dim) -> bool {
        !matches!(self, Dim::Unknown | Dim::AtMost(_)) && self == other
    }

    fn to_expr(&self) -> Option<DimExpr> {
        match self {
            Dim::Static(n) => Some(DimExpr::constant(i64::try_from(*n).ok()?)),
            Dim::Symbol(name) => Some(DimExpr::symbol(name.clone())),
            Dim::Expr(e) => Some((**e).clone()),
            Dim::Unknown | Dim::AtMost(_) => None,
        }
    }

    /// The canonical dim for an expression; `None` for a negative constant.
    fn from_expr(expr: DimExpr) -> Option<Dim> {
        match expr.terms.as_slice() {
            [] => Some(Dim::Static(0)),
            [(m, c)] if m.is_empty() => u64::try_from(*c).ok().map(Dim::Static),
            [(m, 1)] if m.len() == 1 => Some(Dim::Symbol(m[0].clone())),
            _ => Some(Dim::Expr(Arc::new(expr))),
        }
    }

    fn combine(&self, other: &Dim, op: impl Fn(&DimExpr, &DimExpr) -> Option<DimExpr>) -> Dim {
        let (Some(a), Some(b)) = (self.to_expr(), other.to_expr()) else {
            return Dim::Unknown;
        };
        op(&a, &b).and_then(Dim::from_expr).unwrap_or(Dim::Unknown)
    }

    /// `self + other` (`Unknown` if either is unknown or the result would overflow).
    pub fn add(&self, other: &Dim) -> Dim {
        self.combine(other, DimExpr::add)
    }

    /// `self - other` (`Unknown` if it could be negative as a constant, or on overflow).
    pub fn sub(&self, other: &Dim) -> Dim {
        self.combine(other, |a, b| a.add(&b.scale(-1)?))
    }

    /// `self * other`.
    pub fn mul(&self, other: &Dim) -> Dim {
        self.combine(other, DimExpr::mul)
    }

    /// `self / other` when the division is exact as polynomials (`batch*seq*768 / 768` is
    /// `batch*seq`); `None` when it cannot be shown exact.
    pub fn div_exact(&self, other: &Dim) -> Option<Dim> {
        let (a, b) = (self.to_expr()?, other.to_expr()?);
        if b.terms.is_empty() {
            return None;
        }
        Dim::from_expr(a.div_exact(&b)?)
    }

    /// The value with every symbol bound by `bindings`, or `None` when a symbol is unbound,
    /// the dim is unknown, or the value is negative or overflows.
    pub fn evaluate(&self, bindings: &dyn Fn(&str) -> Option<u64>) -> Option<u64> {
        let expr = self.to_expr()?;
        let value = expr.eval(&|name| bindings(name).and_then(|v| i64::try_from(v).ok()))?;
        u64::try_from(value).ok()
    }

    /// Replaces the symbols `bindings` knows by their values and simplifies; other symbols stay.
    pub fn substitute(&self, bindings: &dyn Fn(&str) -> Option<u64>) -> Dim {
        let Some(expr) = self.to_expr() else {
            return Dim::Unknown;
        };
        let mut map: BTreeMap<Monomial, i64> = BTreeMap::new();
        for (m, c) in expr.terms {
            let mut coeff = Some(c);
            let mut rest = Vec::new();
            for name in m {
                match bindings(&name).and_then(|v| i64::try_from(v).ok()) {
                    Some(v) => coeff = coeff.and_then(|c| c.checked_mul(v)),
                    None => rest.push(name),
                }
            }
            let Some(coeff) = coeff else {
                return Dim::Unknown;
            };
            let entry = map.entry(rest).or_insert(0);
            match entry.checked_add(coeff) {
                Some(v) => *entry = v,
                None => return Dim::Unknown,
            }
        }
        Dim::from_expr(DimExpr::from_map(map)).unwrap_or(Dim::Unknown)
    }

    /// Every symbol the dim mentions, sorted, without repetition.
    pub fn symbols(&self) -> Vec<Arc<str>> {
        let mut out: Vec<Arc<str>> = match self {
            Dim::Symbol(name) => vec![name.clone()],
            Dim::Expr(e) => e
                .terms
                .iter()
                .flat_map(|(m, _)| m.iter().cloned())
                .collect(),
            Dim::Static(_) | Dim::Unknown | Dim::AtMost(_) => Vec::new(),
        };
        out.sort();
        out.dedup();
        out
    }

    /// Parses the text form (`batch`, `batch*seq`, `2*seq+1`, `past+seq-1`, `12`, `<=12` for
    /// a bounded dim); `""` is `Unknown`. Returns a message on malformed text.
    pub fn parse(text: &str) -> Result<Dim, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Dim::Unknown);
        }
        if let Some(bound) = text.strip_prefix("<=") {
            return bound
                .trim()
                .parse::<u64>()
                .map(Dim::AtMost)
                .map_err(|_| format!("the bound of `{text}` is not a size"));
        }
        let mut sum = DimExpr::constant(0);
        let bytes = text.as_bytes();
        let mut i = 0;
        let mut first = true;
        while i < bytes.len() {
            let mut sign = 1i64;
            if bytes[i] == b'+' || bytes[i] == b'-' {
                if bytes[i] == b'-' {
                    sign = -1;
                }
                i += 1;
            } else if !first {
                return Err(format!("expected `+` or `-` at byte {i} of `{text}`"));
            }
            first = false;
            let mut term = DimExpr::constant(sign);
            loop {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let factor = &text[start..i];
                let factor_expr = if factor.is_empty() {
                    return Err(format!(
                        "expected a symbol or a number at byte {start} of `{text}`"
                    ));
                } else if factor.bytes().all(|b| b.is_ascii_digit()) {
                    let n: i64 = factor
                        .parse()
                        .map_err(|_| format!("`{factor}` is too large"))?;
                    DimExpr::constant(n)
                } else if factor.as_bytes()[0].is_ascii_digit() {
                    return Err(format!("`{factor}` is neither a number nor a symbol name"));
                } else {
                    DimExpr::symbol(Arc::from(factor))
                };
                term = term
                    .mul(&factor_expr)
                    .ok_or_else(|| format!("`{text}` overflows"))?;
                if i < bytes.len() && bytes[i] == b'*' {
                    i += 1;
                } else {
                    break;
                }
            }
            sum = sum
                .add(&term)
                .ok_or_else(|| format!("`{text}` overflows"))?;
        }
        Dim::from_expr(sum).ok_or_else(|| format!("`{text}` is a negative size"))
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Static(n) => write!(f, "{n}"),
            Dim::Symbol(name) => f.write_str(name),
            Dim::Expr(e) => write!(f, "{e}"),
            Dim::Unknown => f.write_str("?"),
            Dim::AtMost(n) => write!(f, "<={n}"),
        }
    }
}

/// Maps an arbitrary name (an ONNX `dim_param` such as `batch size` or `2*seq`) onto a symbol
/// name: every character outside `[A-Za-z0-9_]` becomes `_`, and a leading digit gets a `_`
/// in front. Empty names stay empty (they mean an unknown dim).
pub fn sanitize_symbol(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Dim {
        Dim::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn canonical_forms() {
        assert_eq!(d("12"), Dim::Static(12));
        assert_eq!(d("batch"), Dim::symbol("batch"));
        assert_eq!(d("seq*batch").to_string(), "batch*seq");
        assert_eq!(d("1+2*seq").to_string(), "2*seq+1");
        assert_eq!(d("seq-seq+4"), Dim::Static(4));
        assert_eq!(d(""), Dim::Unknown);
        assert_eq!(d("past+seq-1").to_string(), "past+seq-1");
    }

    #[test]
    fn arithmetic() {
        let bs = d("batch").mul(&d("seq"));
        assert_eq!(bs.to_string(), "batch*seq");
        assert_eq!(
            bs.mul(&Dim::Static(768)).div_exact(&Dim::Static(768)),
            Some(bs.clone())
        );
        assert_eq!(bs.div_exact(&d("seq")), Some(d("batch")));
        assert_eq!(d("batch").div_exact(&Dim::Static(2)), None);
        assert_eq!(d("past").add(&d("seq")).to_string(), "past+seq");
        assert_eq!(d("seq").sub(&d("seq")), Dim::Static(0));
        assert_eq!(Dim::Static(2).sub(&Dim::Static(3)), Dim::Unknown);
        assert_eq!(d("batch").add(&Dim::Unknown), Dim::Unknown);
        assert!(!Dim::Unknown.provably_equal(&Dim::Unknown));
    }

    #[test]
    fn evaluation_and_substitution() {
        let bind = |n: &str| match n {
            "batch" => Some(4),
            "seq" => Some(128),
            _ => None,
        };
        assert_eq!(d("batch*seq*768").evaluate(&bind), Some(4 * 128 * 768));
        assert_eq!(d("past+seq").evaluate(&bind), None);
        assert_eq!(d("past+seq").substitute(&bind).to_string(), "past+128");
        assert_eq!(d("batch*seq").substitute(&bind), Dim::Static(512));
        assert_eq!(d("batch*past").symbols().len(), 2);
    }

    #[test]
    fn malformed_text() {
        for bad in [
            "2*",
            "*seq",
            "seq seq",
            "1batch",
            "a+",
            "99999999999999999999",
        ] {
            assert!(Dim::parse(bad).is_err(), "{bad} should not parse");
        }
        assert_eq!(sanitize_symbol("batch size"), "batch_size");
        assert_eq!(sanitize_symbol("2*seq"), "_2_seq");
    }
}

/// `dim + c` for a signed constant.
pub(crate) fn add_const(dim: &Dim, c: i128) -> Dim {
    match u64::try_from(c.unsigned_abs()) {
        Ok(magnitude) if c >= 0 => dim.add(&Dim::Static(magnitude)),
        Ok(magnitude) => dim.sub(&Dim::Static(magnitude)),
        Err(_) => Dim::Unknown,
    }
}

/// A static dim from an `i128` size; `Unknown` when it does not fit.
pub(crate) fn static_dim(n: i128) -> Dim {
    u64::try_from(n).map_or(Dim::Unknown, Dim::Static)
}

/// `a / b` rounded up (toward positive infinity), for `b > 0`.
pub(crate) fn ceil_div(a: i128, b: i128) -> i128 {
    -((-a).div_euclid(b))
}

/// Broadcasts two dims; `Err` when they are static, different and neither is 1.
pub fn broadcast_dim(a: &Dim, b: &Dim) -> Result<Dim, String> {
    Ok(match (a, b) {
        (a, b) if a.provably_equal(b) => a.clone(),
        (Dim::Static(1), other) | (other, Dim::Static(1)) => other.clone(),
        (Dim::Static(x), Dim::Static(y)) => {
            return Err(format!("dims {x} and {y} do not broadcast"));
        }
        (Dim::Static(n), _) | (_, Dim::Static(n)) => Dim::Static(*n),
        _ => Dim::Unknown,
    })
}
