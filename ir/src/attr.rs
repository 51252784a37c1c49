//! Attributes: compile-time constants attached to operations.
//!
//! Text form (MLIR builtin attribute syntax): `5` (i64), `1.0e-05` (f64), `"text"`, `[1, 2]`,
//! `true`, `f16` (an element type), `tensor<2xf32>` (a type), and
//! `dense_resource<"name"> : tensor<...>` for a reference to a weight in the module's
//! [`crate::WeightStore`]: weights are never copied into the IR.
//!
//! Floats compare and hash by bit pattern, so CSE treats `0.0` and `-0.0` as different and a NaN
//! as equal to itself.

use crate::{ElemType, Type, WeightId};
use std::hash::{Hash, Hasher};

#[derive(Clone, Debug)]
pub enum Attribute {
    Int(i64),
    Float(f64),
    Bool(bool),
    String(String),
    Array(Vec<Attribute>),
    ElemType(ElemType),
    Type(Type),
    Weight(WeightId),
}

/// The kind of an attribute, as declared in an op's attribute schema.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AttrKind {
    Int,
    Float,
    Bool,
    String,
    /// An array of integers (an empty array is accepted).
    Ints,
    /// An array of floats (an empty array is accepted).
    Floats,
    /// An array of strings (an empty array is accepted).
    Strings,
    ElemType,
    Type,
    Weight,
}

impl AttrKind {
    pub fn describe(self) -> &'static str {
        match self {
            AttrKind::Int => "an integer",
            AttrKind::Float => "a float",
            AttrKind::Bool => "a bool",
            AttrKind::String => "a string",
            AttrKind::Ints => "an array of integers",
            AttrKind::Floats => "an array of floats",
            AttrKind::Strings => "an array of strings",
            AttrKind::ElemType => "an element type",
            AttrKind::Type => "a type",
            AttrKind::Weight => "a weight reference",
        }
    }
}

impl Attribute {
    /// Whether this attribute has the given kind. An integer is accepted where a float is
    /// expected, as in ONNX text formats.
    pub fn has_kind(&self, kind: AttrKind) -> bool {
        let all = |items: &[Attribute], pred: fn(&Attribute) -> bool| items.iter().all(pred);
        match (self, kind) {
            (Attribute::Int(_), AttrKind::Int) => true,
            (Attribute::Float(_) | Attribute::Int(_), AttrKind::Float) => true,
            (Attribute::Bool(_), AttrKind::Bool) => true,
            (Attribute::String(_), AttrKind::String) => true,
            (Attribute::Array(items), AttrKind::Ints) => {
                all(items, |a| matches!(a, Attribute::Int(_)))
            }
            (Attribute::Array(items), AttrKind::Floats) => all(items, |a| {
                matches!(a, Attribute::Float(_) | Attribute::Int(_))
            }),
            (Attribute::Array(items), AttrKind::Strings) => {
                all(items, |a| matches!(a, Attribute::String(_)))
            }
            (Attribute::ElemType(_), AttrKind::ElemType) => true,
            (Attribute::Type(_), AttrKind::Type) => true,
            (Attribute::Weight(_), AttrKind::Weight) => true,
            _ => false,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Attribute::Int(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_float(&self) -> Option<f64> {
        match self {
            Attribute::Float(v) => Some(*v),
            Attribute::Int(v) => Some(*v as f64),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Attribute::String(s) => Some(s),
            _ => None,
        }
    }

    /// The integers of an integer array.
    pub fn as_ints(&self) -> Option<Vec<i64>> {
        match self {
            Attribute::Array(items) => items.iter().map(Attribute::as_int).collect(),
            _ => None,
        }
    }

    pub fn as_elem_type(&self) -> Option<ElemType> {
        match self {
            Attribute::ElemType(e) => Some(*e),
            _ => None,
        }
    }

    pub fn as_weight(&self) -> Option<WeightId> {
        match self {
            Attribute::Weight(w) => Some(*w),
            _ => None,
        }
    }

    /// An array of integers.
    pub fn ints(values: impl IntoIterator<Item = i64>) -> Attribute {
        Attribute::Array(values.into_iter().map(Attribute::Int).collect())
    }
}

impl PartialEq for Attribute {
    fn eq(&self, other: &Attribute) -> bool {
        match (self, other) {
            (Attribute::Int(a), Attribute::Int(b)) => a == b,
            (Attribute::Float(a), Attribute::Float(b)) => a.to_bits() == b.to_bits(),
            (Attribute::Bool(a), Attribute::Bool(b)) => a == b,
            (Attribute::String(a), Attribute::String(b)) => a == b,
            (Attribute::Array(a), Attribute::Array(b)) => a == b,
            (Attribute::ElemType(a), Attribute::ElemType(b)) => a == b,
            (Attribute::Type(a), Attribute::Type(b)) => a == b,
            (Attribute::Weight(a), Attribute::Weight(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Attribute {}

impl Hash for Attribute {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Attribute::Int(v) => v.hash(state),
            Attribute::Float(v) => v.to_bits().hash(state),
            Attribute::Bool(v) => v.hash(state),
            Attribute::String(v) => v.hash(state),
            Attribute::Array(v) => v.hash(state),
            Attribute::ElemType(v) => v.hash(state),
            Attribute::Type(v) => v.hash(state),
            Attribute::Weight(v) => v.hash(state),
        }
    }
}

/// Named attributes of one operation, kept sorted by name (as MLIR's `DictionaryAttr`), so two
/// operations with the same attributes compare equal whatever order they were written in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AttrDict {
    entries: Vec<(String, Attribute)>,
}

impl AttrDict {
    pub fn new() -> AttrDict {
        AttrDict::default()
    }

    /// Sets `name` to `value`, replacing an earlier value; returns the earlier value.
    pub fn insert(&mut self, name: impl Into<String>, value: Attribute) -> Option<Attribute> {
        let name = name.into();
        match self
            .entries
            .binary_search_by(|(n, _)| n.as_str().cmp(&name))
        {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (name, value));
                None
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&Attribute> {
        self.entries
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| &self.entries[i].1)
    }

    pub fn remove(&mut self, name: &str) -> Option<Attribute> {
        let i = self
            .entries
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()?;
        Some(self.entries.remove(i).1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Attribute)> {
        self.entries.iter().map(|(n, a)| (n.as_str(), a))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<S: Into<String>> FromIterator<(S, Attribute)> for AttrDict {
    fn from_iter<I: IntoIterator<Item = (S, Attribute)>>(iter: I) -> AttrDict {
        let mut dict = AttrDict::new();
        for (name, value) in iter {
            dict.insert(name, value);
        }
        dict
    }
}
