//! The e-graph language and its analysis, both derived from memc's IR and op table.
//!
//! An e-node is an op of the op table ([`Head::Op`], spelled with [`Opcode::name`], so patterns
//! read `(onnx.MatMul ?a (onnx.DequantizeLinear ?w ?s))`), or a value the e-graph does not look
//! into ([`Head::Value`]: a function argument, a result of an op with regions, several results
//! or side effects). Beside its head and children, a node carries a [`SigId`]: its attributes
//! and result type, interned in the analysis ([`Sigs`]). No list of ops is written here: any op
//! in the table is a node, and what a rule may match is decided by the rule's pattern.
//!
//! Patterns match on the head and the number of children only ([`Language::matches`] ignores
//! the signature), so a pattern names an op whatever its attributes; a rule's guard reads the
//! attributes it cares about. Hash-consing compares the whole node, signature included, so two
//! ops merge only when they agree in everything.
//!
//! The analysis ([`Facts`]) gives every e-class the result type its values share (element type
//! and dims), whether it holds a weight (`memc.weight`: a constant), the bytes a tensor of
//! that type takes when materialized, and how many uses its values had in the input IR (the
//! rules' guard against fusing a dequantized weight that someone else still reads as floats).

use egg::{DidMerge, EGraph, FromOp, Id, Language};
use memc_ir::{AttrDict, Dim, Opcode, TensorType, Type, ValueId};
use std::collections::HashMap;
use std::fmt;

/// What an e-node computes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Head {
    /// An op from the op table.
    Op(Opcode),
    /// A value of the input IR that the e-graph takes as given.
    Value(ValueId),
}

/// An interned signature: the attributes and result type of a node.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SigId(u32);

impl SigId {
    /// The signature of pattern nodes, which match nodes of any signature.
    pub const PATTERN: SigId = SigId(u32::MAX);
}

/// An e-node: a head, a signature and the e-classes of its operands, in operand order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Node {
    pub head: Head,
    pub sig: SigId,
    pub children: Vec<Id>,
}

impl Node {
    /// The opcode of an op node.
    pub fn opcode(&self) -> Option<Opcode> {
        match self.head {
            Head::Op(opcode) => Some(opcode),
            Head::Value(_) => None,
        }
    }
}

impl Language for Node {
    type Discriminant = Head;

    fn discriminant(&self) -> Head {
        self.head
    }

    fn matches(&self, other: &Self) -> bool {
        self.head == other.head && self.children.len() == other.children.len()
    }

    fn children(&self) -> &[Id] {
        &self.children
    }

    fn children_mut(&mut self) -> &mut [Id] {
        &mut self.children
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.head {
            Head::Op(opcode) => f.write_str(opcode.name()),
            Head::Value(value) => write!(f, "{value}"),
        }
    }
}

/// Parsing a pattern node: an op name from the table.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not an op in memc's op table")]
pub struct UnknownOp(String);

impl FromOp for Node {
    type Error = UnknownOp;

    fn from_op(op: &str, children: Vec<Id>) -> Result<Node, UnknownOp> {
        let opcode = Opcode::from_name(op).ok_or_else(|| UnknownOp(op.to_string()))?;
        Ok(Node {
            head: Head::Op(opcode),
            sig: SigId::PATTERN,
            children,
        })
    }
}

/// A node's attributes and result type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sig {
    pub attrs: AttrDict,
    pub ty: Type,
}

/// The signature interner: equal signatures get equal ids.
#[derive(Default)]
pub struct Sigs {
    sigs: Vec<Sig>,
    ids: HashMap<Sig, SigId>,
}

impl Sigs {
    pub fn intern(&mut self, sig: Sig) -> SigId {
        if let Some(&id) = self.ids.get(&sig) {
            return id;
        }
        let id = SigId(u32::try_from(self.sigs.len()).expect("fewer than 2^32 signatures"));
        self.sigs.push(sig.clone());
        self.ids.insert(sig, id);
        id
    }

    /// The signature `id` names; `None` for [`SigId::PATTERN`].
    pub fn get(&self, id: SigId) -> Option<&Sig> {
        self.sigs.get(id.0 as usize)
    }
}

/// What the analysis knows about one e-class.
#[derive(Clone, Debug)]
pub struct ClassFacts {
    /// The type every value of the class has.
    pub ty: Type,
    /// Whether the class holds a `memc.weight`: a constant from the weight store.
    pub weight: bool,
    /// The most uses one input-IR value of the class had (0 for classes rules made).
    pub uses: u32,
}

impl ClassFacts {
    pub fn tensor(&self) -> Option<&TensorType> {
        self.ty.tensor()
    }

    /// The static shape, when every dim is static.
    pub fn static_shape(&self) -> Option<Vec<u64>> {
        self.tensor()?.static_shape()
    }

    /// The bytes a value of the class takes when materialized (see [`type_bytes`]).
    pub fn bytes(&self) -> u64 {
        type_bytes(&self.ty)
    }
}

/// The bytes a value of type `ty` takes; a dim that is not static counts as 1, so this is a
/// lower bound for symbolic shapes. `none` takes nothing.
pub fn type_bytes(ty: &Type) -> u64 {
    let Some(t) = ty.tensor() else { return 0 };
    let elems = t.dims.iter().fold(1u64, |acc, d| match d {
        Dim::Static(n) => acc.saturating_mul(*n),
        _ => acc,
    });
    elems.saturating_mul(u64::from(t.elem.bits())).div_ceil(8)
}

/// The e-graph analysis: the signature interner and the per-class [`ClassFacts`].
#[derive(Default)]
pub struct Facts {
    pub sigs: Sigs,
}

pub type Graph = EGraph<Node, Facts>;

impl egg::Analysis<Node> for Facts {
    type Data = ClassFacts;

    fn make(egraph: &mut Graph, enode: &Node, _id: Id) -> ClassFacts {
        let ty = egraph
            .analysis
            .sigs
            .get(enode.sig)
            .map_or(Type::None, |sig| sig.ty.clone());
        ClassFacts {
            ty,
            weight: enode.head == Head::Op(Opcode::Weight),
            uses: 0,
        }
    }

    fn merge(&mut self, a: &mut ClassFacts, b: ClassFacts) -> DidMerge {
        // Rules only merge values of one type, so the types agree; the facts that can grow are
        // the weight flag and the use count.
        let weight = a.weight || b.weight;
        let uses = a.uses.max(b.uses);
        let changed_a = weight != a.weight || uses != a.uses;
        let changed_b = weight != b.weight || uses != b.uses;
        a.weight = weight;
        a.uses = uses;
        DidMerge(changed_a, changed_b)
    }
}

/// An integer attribute of a node's signature, or the op table's default.
pub fn int_attr(attrs: &AttrDict, opcode: Opcode, name: &str) -> Option<i64> {
    opcode.def().int_attr(attrs, name)
}

/// A float attribute of a node's signature, or the op table's default.
pub fn float_attr(attrs: &AttrDict, opcode: Opcode, name: &str) -> Option<f64> {
    opcode.def().float_attr(attrs, name)
}
