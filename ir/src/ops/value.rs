//! Known values of small tensors: what shape inference knows about the data of shape
//! computations (`Shape -> Gather -> Concat -> Reshape` and the like).
//!
//! A [`KnownValue`] is a tensor with a static shape and at most [`MAX_KNOWN_ELEMENTS`]
//! elements, each a [`SymInt`]: an integer, a float, or a dim (symbolic such as `batch` or
//! `past+seq`, or unknown). Element arithmetic never overflows and never panics: a result that
//! cannot be represented, or that nobody can tell, is an unknown element.

use crate::Dim;
use std::cmp::Ordering;
use std::fmt;

/// The most elements a known value may have; larger tensors are never tracked.
pub const MAX_KNOWN_ELEMENTS: u64 = 1024;

/// One element of a known value.
#[derive(Clone, Debug, PartialEq)]
pub enum SymInt {
    /// An integer; bools are 0 and 1.
    Const(i64),
    /// A floating-point number (Resize scales, fill values).
    Float(f64),
    /// A dim taken from a tensor's shape: symbolic, or [`Dim::Unknown`] for an element nobody
    /// can tell. Constructors normalize a static dim to [`SymInt::Const`]; the accessors accept
    /// either spelling.
    Dim(Dim),
}

impl SymInt {
    /// The element for a dim: `Const` for a static dim, `Dim` otherwise.
    pub fn from_dim(dim: Dim) -> SymInt {
        match dim {
            Dim::Static(n) => i64::try_from(n).map_or(SymInt::unknown(), SymInt::Const),
            other => SymInt::Dim(other),
        }
    }

    /// An element nobody can tell.
    pub fn unknown() -> SymInt {
        SymInt::Dim(Dim::Unknown)
    }

    pub fn is_unknown(&self) -> bool {
        matches!(self, SymInt::Dim(Dim::Unknown))
    }

    /// The integer, for a constant (or a static dim).
    pub fn as_const(&self) -> Option<i64> {
        match self {
            SymInt::Const(c) => Some(*c),
            SymInt::Dim(Dim::Static(n)) => i64::try_from(*n).ok(),
            _ => None,
        }
    }

    /// The float, for a float element.
    pub fn as_float(&self) -> Option<f64> {
        match self {
            SymInt::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The element as a tensor dim: a non-negative constant or a dim (possibly unknown);
    /// `None` for a negative constant or a float.
    pub fn as_dim(&self) -> Option<Dim> {
        match self {
            SymInt::Const(c) => u64::try_from(*c).ok().map(Dim::Static),
            SymInt::Float(_) => None,
            SymInt::Dim(d) => Some(d.clone()),
        }
    }

    /// A dim and whether it stands negated (`-3` is `(3, true)`); `None` for unknown and float
    /// elements.
    fn signed_dim(&self) -> Option<(Dim, bool)> {
        match self {
            SymInt::Const(c) => Some((Dim::Static(c.unsigned_abs()), *c < 0)),
            SymInt::Float(_) | SymInt::Dim(Dim::Unknown) => None,
            SymInt::Dim(d) => Some((d.clone(), false)),
        }
    }

    pub fn add(&self, other: &SymInt) -> SymInt {
        if let Some(out) = float_op(self, other, |a, b| a + b) {
            return out;
        }
        if let (Some(a), Some(b)) = (self.as_const(), other.as_const()) {
            return a.checked_add(b).map_or(SymInt::unknown(), SymInt::Const);
        }
        let (Some((a, a_neg)), Some((b, b_neg))) = (self.signed_dim(), other.signed_dim()) else {
            return SymInt::unknown();
        };
        SymInt::from_dim(match (a_neg, b_neg) {
            (false, false) => a.add(&b),
            (false, true) => a.sub(&b),
            (true, false) => b.sub(&a),
            (true, true) => Dim::Unknown,
        })
    }

    pub fn sub(&self, other: &SymInt) -> SymInt {
        if let Some(out) = float_op(self, other, |a, b| a - b) {
            return out;
        }
        if let (Some(a), Some(b)) = (self.as_const(), other.as_const()) {
            return a.checked_sub(b).map_or(SymInt::unknown(), SymInt::Const);
        }
        let (Some((a, a_neg)), Some((b, b_neg))) = (self.signed_dim(), other.signed_dim()) else {
            return SymInt::unknown();
        };
        SymInt::from_dim(match (a_neg, b_neg) {
            (false, false) => a.sub(&b),
            (false, true) => a.add(&b),
            (true, true) => b.sub(&a),
            (true, false) => Dim::Unknown,
        })
    }

    pub fn mul(&self, other: &SymInt) -> SymInt {
        if let Some(out) = float_op(self, other, |a, b| a * b) {
            return out;
        }
        if let (Some(a), Some(b)) = (self.as_const(), other.as_const()) {
            return a.checked_mul(b).map_or(SymInt::unknown(), SymInt::Const);
        }
        match (self.signed_dim(), other.signed_dim()) {
            (Some((a, false)), Some((b, false))) => SymInt::from_dim(a.mul(&b)),
            _ => SymInt::unknown(),
        }
    }

    /// Division as ONNX does it: integers truncate toward zero; a symbolic dividend gives a
    /// result only when the division is exact as polynomials.
    pub fn div(&self, other: &SymInt) -> SymInt {
        if let Some(out) = float_op(self, other, |a, b| a / b) {
            return out;
        }
        if let (Some(a), Some(b)) = (self.as_const(), other.as_const()) {
            return a.checked_div(b).map_or(SymInt::unknown(), SymInt::Const);
        }
        match (self.signed_dim(), other.signed_dim()) {
            (Some((a, false)), Some((b, false))) => {
                a.div_exact(&b).map_or(SymInt::unknown(), SymInt::from_dim)
            }
            _ => SymInt::unknown(),
        }
    }

    /// `Mod`: with `fmod` the sign of the dividend (C `fmod`), else of the divisor (Python).
    pub fn rem(&self, other: &SymInt, fmod: bool) -> SymInt {
        if let Some(out) = float_op(self, other, |a, b| a % b) {
            return out;
        }
        let (Some(a), Some(b)) = (self.as_const(), other.as_const()) else {
            return SymInt::unknown();
        };
        let Some(r) = a.checked_rem(b) else {
            return SymInt::unknown();
        };
        if !fmod && r != 0 && ((r < 0) != (b < 0)) {
            return r.checked_add(b).map_or(SymInt::unknown(), SymInt::Const);
        }
        SymInt::Const(r)
    }

    pub fn neg(&self) -> SymInt {
        match self {
            SymInt::Float(f) => SymInt::Float(-f),
            _ => match self.as_const() {
                Some(c) => c.checked_neg().map_or(SymInt::unknown(), SymInt::Const),
                None => SymInt::unknown(),
            },
        }
    }

    /// The order of two elements when it is certain. Dims are never negative, so a dim is
    /// greater than any negative constant; two dims compare when their difference is a
    /// constant.
    pub fn compare(&self, other: &SymInt) -> Option<Ordering> {
        match (self, other) {
            (SymInt::Float(a), SymInt::Float(b)) => return a.partial_cmp(b),
            (SymInt::Float(_), _) | (_, SymInt::Float(_)) => return None,
            _ => {}
        }
        match (self.as_const(), other.as_const()) {
            (Some(a), Some(b)) => return Some(a.cmp(&b)),
            (Some(a), None) if a < 0 && !other.is_unknown() => return Some(Ordering::Less),
            (None, Some(b)) if b < 0 && !self.is_unknown() => return Some(Ordering::Greater),
            _ => {}
        }
        match self.sub(other) {
            SymInt::Const(d) => Some(d.cmp(&0)),
            _ => match other.sub(self) {
                SymInt::Const(d) => Some(0.cmp(&d)),
                _ => None,
            },
        }
    }

    /// `1` when the comparison holds, `0` when it does not, unknown when nobody can tell.
    pub fn compare_with(&self, other: &SymInt, holds: fn(Ordering) -> bool) -> SymInt {
        match self.compare(other) {
            Some(order) => SymInt::Const(i64::from(holds(order))),
            None => SymInt::unknown(),
        }
    }

    pub fn max(&self, other: &SymInt) -> SymInt {
        match self.compare(other) {
            Some(Ordering::Less) => other.clone(),
            Some(_) => self.clone(),
            None => SymInt::unknown(),
        }
    }

    pub fn min(&self, other: &SymInt) -> SymInt {
        match self.compare(other) {
            Some(Ordering::Greater) => other.clone(),
            Some(_) => self.clone(),
            None => SymInt::unknown(),
        }
    }
}

/// Applies `op` when both elements are floats; unknown when only one is (ONNX never mixes
/// element types in one op); `None` when neither is.
fn float_op(a: &SymInt, b: &SymInt, op: fn(f64, f64) -> f64) -> Option<SymInt> {
    match (a, b) {
        (SymInt::Float(x), SymInt::Float(y)) => Some(SymInt::Float(op(*x, *y))),
        (SymInt::Float(_), _) | (_, SymInt::Float(_)) => Some(SymInt::unknown()),
        _ => None,
    }
}

impl fmt::Display for SymInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymInt::Const(c) => write!(f, "{c}"),
            SymInt::Float(x) => write!(f, "{x:?}"),
            SymInt::Dim(d) => write!(f, "{d}"),
        }
    }
}

/// A small tensor whose elements are known (each possibly symbolic or unknown).
#[derive(Clone, Debug, PartialEq)]
pub struct KnownValue {
    /// Row-major; the product of `shape` is `elems.len()`.
    shape: Vec<u64>,
    elems: Vec<SymInt>,
}

impl KnownValue {
    /// A value of the given shape; `None` when the element count does not match the shape or
    /// exceeds [`MAX_KNOWN_ELEMENTS`].
    pub fn new(shape: Vec<u64>, elems: Vec<SymInt>) -> Option<KnownValue> {
        let count = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))?;
        (count <= MAX_KNOWN_ELEMENTS && u64::try_from(elems.len()).ok() == Some(count))
            .then_some(KnownValue { shape, elems })
    }

    /// A rank-0 value.
    pub fn scalar(elem: SymInt) -> KnownValue {
        KnownValue {
            shape: Vec::new(),
            elems: vec![elem],
        }
    }

    /// A 1-d value.
    pub fn vector(elems: Vec<SymInt>) -> Option<KnownValue> {
        let len = u64::try_from(elems.len()).ok()?;
        KnownValue::new(vec![len], elems)
    }

    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The elements in row-major order.
    pub fn elems(&self) -> &[SymInt] {
        &self.elems
    }

    /// Every element as an integer, when all are constants.
    pub fn ints(&self) -> Option<Vec<i64>> {
        self.elems.iter().map(SymInt::as_const).collect()
    }

    /// Every element as a float, when all are floats.
    pub fn floats(&self) -> Option<Vec<f64>> {
        self.elems.iter().map(SymInt::as_float).collect()
    }
}

impl fmt::Display for KnownValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, e) in self.elems.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{e}")?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> SymInt {
        SymInt::from_dim(Dim::parse(text).expect("test dims parse"))
    }

    #[test]
    fn arithmetic_mixes_constants_and_dims() {
        assert_eq!(d("seq").add(&SymInt::Const(-1)), d("seq-1"));
        assert_eq!(d("past+seq").sub(&d("past")), d("seq"));
        assert_eq!(d("batch").mul(&d("seq")), d("batch*seq"));
        assert_eq!(d("batch*seq").div(&d("seq")), d("batch"));
        assert!(d("batch").div(&SymInt::Const(2)).is_unknown());
        assert!(d("batch").mul(&SymInt::Const(-1)).is_unknown());
        assert_eq!(
            SymInt::Const(i64::MAX).add(&SymInt::Const(1)),
            SymInt::unknown()
        );
        assert_eq!(
            SymInt::Const(i64::MIN).div(&SymInt::Const(-1)),
            SymInt::unknown()
        );
        assert_eq!(SymInt::Const(7).div(&SymInt::Const(0)), SymInt::unknown());
        assert_eq!(
            SymInt::Const(-7).rem(&SymInt::Const(3), false),
            SymInt::Const(2)
        );
        assert_eq!(
            SymInt::Const(-7).rem(&SymInt::Const(3), true),
            SymInt::Const(-1)
        );
    }

    #[test]
    fn comparisons_use_what_dims_guarantee() {
        assert_eq!(
            d("seq").compare(&SymInt::Const(-1)),
            Some(Ordering::Greater)
        );
        assert_eq!(d("seq").compare(&SymInt::Const(0)), None);
        assert_eq!(d("seq+1").compare(&d("seq")), Some(Ordering::Greater));
        assert_eq!(d("seq").compare(&d("seq")), Some(Ordering::Equal));
        assert_eq!(d("seq").compare(&d("batch")), None);
        assert_eq!(SymInt::unknown().compare(&SymInt::Const(-1)), None);
    }

    #[test]
    fn values_check_their_shape() {
        assert!(KnownValue::new(vec![2, 2], vec![SymInt::Const(0); 3]).is_none());
        assert!(KnownValue::new(vec![2048], vec![SymInt::Const(0); 2048]).is_none());
        assert!(KnownValue::new(vec![u64::MAX, 2], Vec::new()).is_none());
        assert_eq!(KnownValue::scalar(SymInt::Const(3)).rank(), 0);
    }
}
