//! The op table: every operation memc knows, declared exactly once.
//!
//! An [`OpDef`] gives an op's name (`dialect.op`), its operands and results with their type
//! rules, its attribute schema, how many regions it holds, its traits, a verifier hook, a
//! shape function and a fold (the known value of a result, for ops that compute shapes). The
//! printer, the parser, the verifier, shape inference and the passes all read this table;
//! nothing else lists ops.
//!
//! # How to add an op
//!
//! 1. Add one line to the `define_ops!` invocation in `table.rs`: a variant name and its
//!    `OpDef`, built with `op("dialect.Name", "summary")` and the builder methods below. Operand
//!    lists mirror the ONNX spec: required operands first, then optional ones
//!    ([`opt`], omitted from the end when absent), or one trailing [`variadic`] operand. Type
//!    variables (`"T"`) bind one element type across every operand and result that names them.
//!    Declare every optional attribute's ONNX default ([`int_attr`], [`float_attr`],
//!    [`str_attr`]) and read it with `OpCtx::int_attr` / `int_or_default` (never restate it
//!    at a call site). Give the op its traits with `.traits(...)` (in `table.rs`:
//!    `ELEMENTWISE`, which implies [`Traits::IN_PLACE`]; `REDUCTION`; `SAME_BYTES` for a
//!    reshape or identity; [`Traits::VIEW`] for an op that may alias its first operand, and
//!    then a case in `view.rs` saying when it does); the planner, lowering and the e-graph ask
//!    the traits, so an op with the right traits needs no change there. A convolution or pool
//!    reads its window through [`WindowAttrs`] / [`Window`].
//! 2. If the op has rules beyond counts, types and attribute kinds (a permutation, an axis in
//!    range, matching inner dims), write a verifier hook in `verify.rs` and attach it with
//!    `.verify(...)`. A hook returns a sentence that says what is wrong.
//! 3. Write a shape function in `shape.rs` and attach it with `.shape(...)`: it computes the
//!    result types from the operand types, the attributes and the known values of operands
//!    ([`ShapeCtx`]), and returns `Ok(None)` where it cannot tell, never a wrong shape. The
//!    verifier checks written result types against it; shape inference (`crate::infer`) uses
//!    it to fill in types.
//! 4. If the op computes shapes (it may sit between `Shape` and `Reshape`), write a fold in
//!    `fold.rs` and attach it with `.fold(...)`: the known value of a result from the known
//!    values of the operands.
//! 5. Say what one execution costs and whether re-running it may differ (the remat pass asks
//!    both, through [`flops`] and [`is_random`]). An op with the `ELEMENTWISE` or `REDUCTION`
//!    trait, or a view ([`Traits::VIEW`]), gets its FLOP count from its traits; any other op,
//!    and any elementwise op whose formula is more than one operation or that only moves bytes
//!    (`Where`, `Cast`), attaches a count from `cost.rs` with `.flops(...)` (`c::zero` for
//!    pure data movement), following the conventions in `cost.rs`'s module doc. A test fails
//!    for an op that has neither. An op that draws random numbers gets [`Traits::RANDOM`];
//!    one that does only in some uses (Dropout in training mode) attaches the condition with
//!    `.random_when(...)` (in `random.rs`).
//! 6. Lower it (memc-codegen): add the op's arm to the one `match` in
//!    `codegen/src/lower/plan.rs` (`plan_op`; it has no wildcard, so a new opcode without an
//!    arm does not build). Most ops map to one function of their family module (`elementwise`,
//!    `reduce`, `movement`, `linalg`), `fn(&LowerCtx, OpId) -> LowerResult`, that builds the
//!    op's kernels in the kernel IR; an elementwise op instead gets its scalar formula in
//!    `elementwise::emit`, and fusion into chains follows from its `ELEMENTWISE` trait. An op
//!    whose form needs scratch memory or depends on the target (an im2col matrix, dequantized
//!    tiles) gets a `plan` function in its module that reads the target's
//!    `memc_ir::target::TargetInfo` and returns an `OpPlan` carrying the form and its scratch
//!    bytes; the memory planner reserves those bytes and lowering emits the same plan's kernels.
//!    An op with no kernel on the target gets an arm that says why (`OpPlan::unsupported`).
//!    Read attributes with `LowerCtx::attr_int` / `attr_float` (table defaults), views with
//!    [`view_of`], windows with [`Window`]. The kernel IR is backend-neutral: the CPU JIT, the
//!    reference backend (`memc_codegen::reference`) and the text form run any kernel the op
//!    lowers to, so a new op needs no backend change. Only a new kernel IR instruction does,
//!    and their exhaustive matches make a missing case a build error.
//! 7. Tests: a lit-test under `lit-tests/` that shows the op printed, parsed and verified, and
//!    one for each error its hook or shape function can report (if the op has a new trait case
//!    such as a view, a unit test in `view.rs`); a lowering lit-test under `lit-tests/lower/`
//!    (`memc compile %s --emit kernels`) for each of its forms; and its ONNX node tests, which
//!    `tests/node_tests.rs` runs through the CPU and the reference backends (record the new
//!    statuses with `MEMC_UPDATE_NODE_TESTS=1`).

mod attention;
mod cost;
mod einsum;
mod fold;
mod random;
mod rnn;
mod shape;
mod table;
#[cfg(test)]
mod test_util;
mod value;
mod verify;
mod view;
mod window;

pub use attention::{
    AttentionDims, CausalConvDims, LinearAttentionDims, QkOutputMode, RotaryDims, UpdateRule,
};
pub use cost::flops;
pub use einsum::Einsum;
pub use random::is_random;
pub use rnn::{Cell, Direction, RecurrentDims};
pub use shape::{broadcast_dim, broadcast_dims, elem_from_onnx_dtype, fused_matmul_perm};
pub use table::Opcode;
pub use value::{KnownValue, SymInt, MAX_KNOWN_ELEMENTS};
pub use verify::{nbits_k_block, normalize_axis, transpose_perm};
pub use view::{view_of, View};
pub use window::{AutoPad, Window, WindowAttrs};

use crate::attr::AttrKind;
use crate::{
    AttrDict, Attribute, ElemType, Function, OpId, TensorType, Type, ValueId, WeightStore,
};
use std::borrow::Cow;
use std::collections::HashMap;

/// How many values one operand or result entry stands for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Arity {
    /// Exactly one value.
    Required,
    /// Zero or one value; only trailing optional entries may be left out.
    Optional,
    /// Any number of values (zero included); only the last entry may be variadic.
    Variadic,
}

/// The element types an operand or result may have.
#[derive(Copy, Clone, Debug)]
pub enum TypeRule {
    /// A type variable of the op: every entry naming it has the same element type, which must
    /// be one of the variable's allowed types.
    Var(&'static str),
    /// One of these element types, independently of other entries.
    OneOf(&'static [ElemType]),
}

/// One operand or result entry of an op signature.
#[derive(Copy, Clone, Debug)]
pub struct ValueDef {
    pub name: &'static str,
    pub rule: TypeRule,
    pub arity: Arity,
}

/// A default value of an optional attribute.
#[derive(Copy, Clone, Debug)]
pub enum AttrDefault {
    None,
    Int(i64),
    Float(f64),
    Str(&'static str),
}

/// One entry of an op's attribute schema.
#[derive(Copy, Clone, Debug)]
pub struct AttrDef {
    pub name: &'static str,
    pub kind: AttrKind,
    pub required: bool,
    pub default: AttrDefault,
}

/// Op traits, used by passes to decide what they may do with an op.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Traits(u32);

impl Traits {
    pub const NONE: Traits = Traits(0);
    /// No side effects: an unused op may be removed and two equal ops merged.
    pub const PURE: Traits = Traits(1);
    /// Ends a block; must be its last op.
    pub const TERMINATOR: Traits = Traits(1 << 1);
    /// Applies the same function to each element (with broadcasting).
    pub const ELEMENTWISE: Traits = Traits(1 << 2);
    /// The first two operands may be swapped.
    pub const COMMUTATIVE: Traits = Traits(1 << 3);
    /// The result may alias the first operand's bytes (a view: no data moves). Whether one
    /// op is a view, and at which byte offset, is decided by [`view_of`] from its attributes,
    /// operands and shapes; only ops with this trait can be views.
    pub const VIEW: Traits = Traits(1 << 4);
    /// The result is always the first operand's bytes unchanged, whatever the op's attributes
    /// and shapes (a reshape or an identity): it materializes nothing. Implies [`Traits::VIEW`].
    pub const SAME_BYTES: Traits = Traits(1 << 5);
    /// The result may be written over the bytes of an operand of the same type that dies at
    /// the op (in-place): each result element depends only on the operand elements at its own
    /// position.
    pub const IN_PLACE: Traits = Traits(1 << 6);
    /// Combines the elements along some axes into fewer (`ReduceX`, `ArgMax`, `ArgMin`).
    pub const REDUCTION: Traits = Traits(1 << 7);
    /// Re-running the op may give a different result (it draws random numbers), always or,
    /// with a `random_when` hook, in the uses the hook names; [`is_random`] decides for one
    /// op. A rematerialization never recomputes such an op.
    pub const RANDOM: Traits = Traits(1 << 8);
    /// An operand may have a bounded dim ([`crate::Dim::AtMost`]: an extent known only at run
    /// time). Only `func.return` has it: a bounded value may only be a graph output.
    pub const ACCEPTS_BOUNDED: Traits = Traits(1 << 9);
    /// A result may have a bounded dim: the op's lowering writes the run-time extent after the
    /// result's elements (`memc_ir::types::BoundedLayout`). NonZero, Compress, Unique, and TopK
    /// with `K` from data.
    pub const BOUNDED_RESULTS: Traits = Traits(1 << 10);

    pub const fn with(self, other: Traits) -> Traits {
        Traits(self.0 | other.0)
    }

    pub const fn contains(self, other: Traits) -> bool {
        self.0 & other.0 == other.0
    }
}

/// A view of one op for verifier hooks and shape functions.
pub struct OpCtx<'a> {
    pub func: &'a Function,
    pub op: OpId,
}

impl<'a> OpCtx<'a> {
    pub fn operands(&self) -> &'a [ValueId] {
        &self.func.op(self.op).operands
    }

    pub fn n_operands(&self) -> usize {
        self.operands().len()
    }

    /// The tensor type of operand `index`; `None` if the op has fewer operands.
    pub fn operand_type(&self, index: usize) -> Option<&'a TensorType> {
        let value = *self.operands().get(index)?;
        match self.func.value_type(value) {
            Type::Tensor(t) => Some(t),
            // A `none` operand is a left-out optional operand.
            Type::None => None,
        }
    }

    pub fn n_results(&self) -> usize {
        self.func.op(self.op).results.len()
    }

    pub fn result_type(&self, index: usize) -> Option<&'a TensorType> {
        let value = *self.func.op(self.op).results.get(index)?;
        match self.func.value_type(value) {
            Type::Tensor(t) => Some(t),
            Type::None => None,
        }
    }

    pub fn attr(&self, name: &str) -> Option<&'a Attribute> {
        self.func.op(self.op).attrs.get(name)
    }

    /// An integer attribute, or its declared default.
    pub fn int_attr(&self, name: &str) -> Option<i64> {
        self.def().int_attr(&self.func.op(self.op).attrs, name)
    }

    /// A float attribute, or its declared default.
    pub fn float_attr(&self, name: &str) -> Option<f64> {
        self.def().float_attr(&self.func.op(self.op).attrs, name)
    }

    /// An integer-array attribute; `Err` when it is present with another kind.
    pub fn ints_attr(&self, name: &str) -> Result<Option<Vec<i64>>, String> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => a
                .as_ints()
                .map(Some)
                .ok_or_else(|| format!("`{name}` must be an array of integers")),
        }
    }

    /// A string attribute, or its declared default.
    pub fn str_attr(&self, name: &str) -> Option<&'a str> {
        self.def().str_attr(&self.func.op(self.op).attrs, name)
    }

    /// The op's declaration.
    pub fn def(&self) -> &'static OpDef {
        self.func.op(self.op).opcode.def()
    }

    /// An integer attribute the op table declares with a default (`int_attr(name, default)`
    /// in `table.rs`): the op's value, else that default. Call sites never restate the
    /// default; asking for an attribute without a declared integer default is a bug in memc
    /// (debug builds assert it; release builds read 0).
    pub fn int_or_default(&self, name: &str) -> i64 {
        let value = self.int_attr(name);
        debug_assert!(
            value.is_some(),
            "{} declares an integer default for `{name}`",
            self.func.op(self.op).opcode.name()
        );
        value.unwrap_or(0)
    }
}

/// What a shape function or a fold sees: the op, and what is known beyond its types.
///
/// Without weights or known values (as the verifier builds it) shape functions see types and
/// attributes only, and say less; they never say something different.
pub struct ShapeCtx<'a> {
    base: OpCtx<'a>,
    weights: Option<&'a WeightStore>,
    known: Option<&'a HashMap<ValueId, KnownValue>>,
}

impl<'a> ShapeCtx<'a> {
    /// A context with neither weights nor known values.
    pub fn new(func: &'a Function, op: OpId) -> ShapeCtx<'a> {
        ShapeCtx {
            base: OpCtx { func, op },
            weights: None,
            known: None,
        }
    }

    /// Gives shape functions the module's weights (element types of weight attributes,
    /// contents of `memc.weight`).
    pub fn with_weights(mut self, weights: &'a WeightStore) -> ShapeCtx<'a> {
        self.weights = Some(weights);
        self
    }

    /// Gives shape functions the known values of operands.
    pub fn with_known(mut self, known: &'a HashMap<ValueId, KnownValue>) -> ShapeCtx<'a> {
        self.known = Some(known);
        self
    }

    pub fn weights(&self) -> Option<&'a WeightStore> {
        self.weights
    }

    /// The known value of operand `index`. A tensor with a static shape and no elements is
    /// always known.
    pub fn known_operand(&self, index: usize) -> Option<Cow<'a, KnownValue>> {
        let value = *self.base.operands().get(index)?;
        if let Some(known) = self.known.and_then(|k| k.get(&value)) {
            return Some(Cow::Borrowed(known));
        }
        let ty = self.base.operand_type(index)?;
        let shape = ty.static_shape()?;
        shape
            .contains(&0)
            .then(|| KnownValue::new(shape, Vec::new()))
            .flatten()
            .map(Cow::Owned)
    }
}

impl<'a> std::ops::Deref for ShapeCtx<'a> {
    type Target = OpCtx<'a>;

    fn deref(&self) -> &OpCtx<'a> {
        &self.base
    }
}

/// A verifier hook: `Err` holds a sentence saying what is wrong.
pub type VerifyFn = fn(&OpCtx) -> Result<(), String>;

/// A shape function: the result types implied by the operand types, attributes and known
/// operand values. It returns `Ok(None)` when it cannot tell, and may return more types than
/// the op has results (optional results left out); a dim it cannot tell is [`crate::Dim::Unknown`].
pub type ShapeFn = fn(&ShapeCtx) -> Result<Option<Vec<TensorType>>, String>;

/// A fold: the known value of result `index`, given the result types the shape function
/// computed (each with a static shape of at most [`MAX_KNOWN_ELEMENTS`] elements when the fold
/// is called for it); `None` when an operand it needs is not known.
pub type FoldFn = fn(&ShapeCtx, &[TensorType], usize) -> Option<KnownValue>;

/// A FLOP count: the arithmetic operations one execution of the op performs, from its static
/// shapes and attributes; `None` when a shape it needs is not static (see `cost.rs`).
pub type FlopsFn = fn(&OpCtx) -> Option<u64>;

/// Whether one op of a kind with the [`Traits::RANDOM`] trait draws random numbers, from its
/// operands' known or constant values (Dropout: only in training mode with a ratio other than
/// 0). It says `true` whenever it cannot tell.
pub type RandomFn = fn(&ShapeCtx) -> bool;

/// The declaration of one op.
#[derive(Copy, Clone, Debug)]
pub struct OpDef {
    pub name: &'static str,
    pub summary: &'static str,
    pub operands: &'static [ValueDef],
    pub results: &'static [ValueDef],
    pub type_vars: &'static [(&'static str, &'static [ElemType])],
    pub attrs: &'static [AttrDef],
    pub n_regions: usize,
    pub traits: Traits,
    pub verify: Option<VerifyFn>,
    pub infer: Option<ShapeFn>,
    pub fold: Option<FoldFn>,
    /// The op's FLOP count; `None` to derive it from the traits ([`flops`]).
    pub flops: Option<FlopsFn>,
    /// For an op with [`Traits::RANDOM`]: in which uses it is random; `None`: in all.
    pub random: Option<RandomFn>,
}

/// Starts an op declaration: no operands, results or attributes, pure, no regions.
pub const fn op(name: &'static str, summary: &'static str) -> OpDef {
    OpDef {
        name,
        summary,
        operands: &[],
        results: &[],
        type_vars: &[],
        attrs: &[],
        n_regions: 0,
        traits: Traits::PURE,
        verify: None,
        infer: None,
        fold: None,
        flops: None,
        random: None,
    }
}

impl OpDef {
    pub const fn ins(mut self, operands: &'static [ValueDef]) -> OpDef {
        self.operands = operands;
        self
    }

    pub const fn outs(mut self, results: &'static [ValueDef]) -> OpDef {
        self.results = results;
        self
    }

    pub const fn vars(mut self, vars: &'static [(&'static str, &'static [ElemType])]) -> OpDef {
        self.type_vars = vars;
        self
    }

    pub const fn attrs(mut self, attrs: &'static [AttrDef]) -> OpDef {
        self.attrs = attrs;
        self
    }

    pub const fn regions(mut self, n: usize) -> OpDef {
        self.n_regions = n;
        self
    }

    pub const fn traits(mut self, traits: Traits) -> OpDef {
        self.traits = self.traits.with(traits);
        self
    }

    /// Marks the op as having side effects (it is never removed or merged).
    pub const fn effects(mut self) -> OpDef {
        self.traits = Traits(self.traits.0 & !Traits::PURE.0);
        self
    }

    pub const fn verify(mut self, hook: VerifyFn) -> OpDef {
        self.verify = Some(hook);
        self
    }

    pub const fn shape(mut self, infer: ShapeFn) -> OpDef {
        self.infer = Some(infer);
        self
    }

    pub const fn fold(mut self, fold: FoldFn) -> OpDef {
        self.fold = Some(fold);
        self
    }

    /// Declares the op's FLOP count (instead of the one its traits imply).
    pub const fn flops(mut self, count: FlopsFn) -> OpDef {
        self.flops = Some(count);
        self
    }

    /// Marks the op random ([`Traits::RANDOM`]) in the uses `hook` names.
    pub const fn random_when(mut self, hook: RandomFn) -> OpDef {
        self.traits = self.traits.with(Traits::RANDOM);
        self.random = Some(hook);
        self
    }

    /// The dialect part of the name (`onnx` in `onnx.Add`).
    pub fn dialect(&self) -> &'static str {
        self.name.split_once('.').map_or(self.name, |(d, _)| d)
    }

    pub fn attr_def(&self, name: &str) -> Option<&'static AttrDef> {
        self.attrs.iter().find(|a| a.name == name)
    }

    /// Integer attribute `name` of an op of this kind with attributes `attrs`, or the default
    /// this table declares for it.
    pub fn int_attr(&self, attrs: &AttrDict, name: &str) -> Option<i64> {
        attrs
            .get(name)
            .and_then(Attribute::as_int)
            .or_else(|| match self.attr_def(name)?.default {
                AttrDefault::Int(v) => Some(v),
                _ => None,
            })
    }

    /// Float attribute `name` from `attrs`, or its declared default.
    pub fn float_attr(&self, attrs: &AttrDict, name: &str) -> Option<f64> {
        attrs.get(name).and_then(Attribute::as_float).or_else(|| {
            match self.attr_def(name)?.default {
                AttrDefault::Float(v) => Some(v),
                _ => None,
            }
        })
    }

    /// String attribute `name` from `attrs`, or its declared default.
    pub fn str_attr<'s>(&self, attrs: &'s AttrDict, name: &str) -> Option<&'s str> {
        attrs
            .get(name)
            .and_then(Attribute::as_str)
            .or_else(|| match self.attr_def(name)?.default {
                AttrDefault::Str(v) => Some(v),
                _ => None,
            })
    }

    /// The allowed operand counts: `(min, max)`, `max = None` when variadic.
    pub fn operand_range(&self) -> (usize, Option<usize>) {
        arity_range(self.operands)
    }

    pub fn result_range(&self) -> (usize, Option<usize>) {
        arity_range(self.results)
    }

    pub fn is_pure(&self) -> bool {
        self.traits.contains(Traits::PURE)
    }

    pub fn is_terminator(&self) -> bool {
        self.traits.contains(Traits::TERMINATOR)
    }

    /// Whether the op applies the same function to each element (with broadcasting).
    pub fn is_elementwise(&self) -> bool {
        self.traits.contains(Traits::ELEMENTWISE)
    }

    /// Whether the first two operands may be swapped.
    pub fn is_commutative(&self) -> bool {
        self.traits.contains(Traits::COMMUTATIVE)
    }

    /// Whether the op may be a view of its first operand ([`view_of`] decides for one op).
    pub fn is_view(&self) -> bool {
        self.traits.contains(Traits::VIEW)
    }

    /// Whether the op's result is always its first operand's bytes (it materializes nothing).
    pub fn is_same_bytes(&self) -> bool {
        self.traits.contains(Traits::SAME_BYTES)
    }

    /// Whether the result may be written over an operand of the same type that dies at the op.
    pub fn is_in_place(&self) -> bool {
        self.traits.contains(Traits::IN_PLACE)
    }

    /// Whether the op is a reduction (`ReduceX`, `ArgMax`, `ArgMin`).
    pub fn is_reduction(&self) -> bool {
        self.traits.contains(Traits::REDUCTION)
    }

    /// Whether an operand may have a bounded dim ([`Traits::ACCEPTS_BOUNDED`]).
    pub fn accepts_bounded(&self) -> bool {
        self.traits.contains(Traits::ACCEPTS_BOUNDED)
    }

    /// Whether a result may have a bounded dim ([`Traits::BOUNDED_RESULTS`]).
    pub fn produces_bounded(&self) -> bool {
        self.traits.contains(Traits::BOUNDED_RESULTS)
    }

    /// Whether some use of the op may be random ([`is_random`] decides for one op).
    pub fn may_be_random(&self) -> bool {
        self.traits.contains(Traits::RANDOM)
    }
}

fn arity_range(entries: &[ValueDef]) -> (usize, Option<usize>) {
    let min = entries
        .iter()
        .filter(|e| e.arity == Arity::Required)
        .count();
    let max = if entries.iter().any(|e| e.arity == Arity::Variadic) {
        None
    } else {
        Some(entries.len())
    };
    (min, max)
}

/// Which signature entry the value at `position` belongs to, for `n_values` values in all.
/// Required and optional entries take one value each in order; a trailing variadic entry takes
/// the rest.
pub fn entry_for_position(entries: &[ValueDef], position: usize) -> Option<&ValueDef> {
    match entries.get(position) {
        Some(e) if e.arity != Arity::Variadic => Some(e),
        _ => entries
            .last()
            .filter(|e| e.arity == Arity::Variadic && position + 1 >= entries.len()),
    }
}

/// A required operand or result.
pub const fn req(name: &'static str, rule: TypeRule) -> ValueDef {
    ValueDef {
        name,
        rule,
        arity: Arity::Required,
    }
}

/// An optional operand or result (trailing ones may be left out).
pub const fn opt(name: &'static str, rule: TypeRule) -> ValueDef {
    ValueDef {
        name,
        rule,
        arity: Arity::Optional,
    }
}

/// A variadic operand or result (must be the last entry).
pub const fn variadic(name: &'static str, rule: TypeRule) -> ValueDef {
    ValueDef {
        name,
        rule,
        arity: Arity::Variadic,
    }
}

/// The type variable named `name`.
pub const fn var(name: &'static str) -> TypeRule {
    TypeRule::Var(name)
}

/// An optional attribute without a default.
pub const fn attr(name: &'static str, kind: AttrKind) -> AttrDef {
    AttrDef {
        name,
        kind,
        required: false,
        default: AttrDefault::None,
    }
}

/// A required attribute.
pub const fn required(name: &'static str, kind: AttrKind) -> AttrDef {
    AttrDef {
        name,
        kind,
        required: true,
        default: AttrDefault::None,
    }
}

/// An optional integer attribute with a default.
pub const fn int_attr(name: &'static str, default: i64) -> AttrDef {
    AttrDef {
        name,
        kind: AttrKind::Int,
        required: false,
        default: AttrDefault::Int(default),
    }
}

/// An optional float attribute with a default.
pub const fn float_attr(name: &'static str, default: f64) -> AttrDef {
    AttrDef {
        name,
        kind: AttrKind::Float,
        required: false,
        default: AttrDefault::Float(default),
    }
}

/// An optional string attribute with a default.
pub const fn str_attr(name: &'static str, default: &'static str) -> AttrDef {
    AttrDef {
        name,
        kind: AttrKind::String,
        required: false,
        default: AttrDefault::Str(default),
    }
}

/// Element type sets used by type rules.
pub mod types {
    use crate::ElemType::{self, *};

    pub const FLOAT: &[ElemType] = &[F64, F32, F16, BF16];
    pub const INT: &[ElemType] = &[I64, I32, I16, I8, U64, U32, U16, U8];
    pub const SIGNED_NUMERIC: &[ElemType] = &[F64, F32, F16, BF16, I64, I32, I16, I8];
    pub const NUMERIC: &[ElemType] = &[F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8];
    pub const ANY: &[ElemType] = &[
        F64, F32, F16, BF16, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, F4E2M1, F8E8M0, I64, I32,
        I16, I8, U64, U32, U16, U8, I4, U4, I2, U2, Bool,
    ];
    pub const INDEX: &[ElemType] = &[I64, I32];
    pub const I64_ONLY: &[ElemType] = &[I64];
    pub const I32_ONLY: &[ElemType] = &[I32];
    pub const BOOL: &[ElemType] = &[Bool];
    pub const QUANTIZED: &[ElemType] = &[
        I2, U2, I4, U4, I8, U8, I16, U16, I32, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, F4E2M1,
    ];
}
