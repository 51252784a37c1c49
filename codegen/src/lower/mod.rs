//! Lowering: from a planned function to a [`Program`] of kernels, for one target.
//!
//! Lowering runs in two halves around memory planning:
//!
//! 1. Before planning, [`plan_ops`] decides each op's form on the target ([`plan_op`]: one
//!    exhaustive `match` on the opcode, in `plan.rs`) and the scratch bytes that form needs
//!    (a convolution's im2col matrix, a low-bit product's dequantized tiles). The memory planner
//!    gives each such op its own bytes for its step
//!    ([`memc_passes::memory::plan_function_with_scratch`] with [`OpPlans::scratch_bytes`]).
//! 2. After planning, [`lower_planned`] emits every scheduled op's kernels in the form its plan
//!    chose, as one [`Step`] per op in schedule order; kernels find their scratch with
//!    [`LowerCtx::scratch`]. An op planned without its scratch falls back to a form that needs
//!    none (or, where there is none, is reported), so kernels never allocate.
//!
//! An op whose result the planner made a view of its operand (Reshape, Squeeze, a contiguous
//! Slice, ...) or that is a view of a weight gets no kernel: its bytes are already there.
//! Elementwise chains are fused into one kernel at the step of their last op (see
//! `elementwise::chains`). Each op family lowers in its own module, one function per op:
//!
//! - `elementwise`: unary, binary, variadic and select ops, casts, activations, and fusion;
//! - `reduce`: reductions, arg-reductions, softmax and the normalizations, cumulative ops;
//! - `movement`: transpose, concat, split, slice, gathers, expand, tile, pad, resize, trilu,
//!   range, shape ops, copies for view ops the planner could not alias, TopK;
//! - `linalg`: MatMul, Gemm, convolutions, pooling, (de)quantization, `memc.matmul_nbits`;
//! - `quant4`: DequantizeLinear of 4-bit tensors;
//! - `attention`: Attention (products, bias and softmax over planned scratch) and
//!   RotaryEmbedding;
//! - `recurrent`: LinearAttention (its recurrence unrolled over the tokens, the state in
//!   planned scratch) and CausalConvWithState.
//!
//! What the target computes and prefers (element types, contraction types, im2col policy, the
//! low-bit product's rows and tiles, the longest fused chain) is read from its
//! [`TargetInfo`] (the CPU's is `crate::cpu::target::target()`), never hard-wired here.
//!
//! Guarantees: lowering reads only verified, planned IR; every kernel it returns addresses the
//! planner's offsets and passes [`Kernel::validate`] (checked here, a failure is a memc bug);
//! an op it cannot lower is reported with its name and the reason, all such ops at once.

mod attention;
pub mod build;
mod elementwise;
mod extents;
mod linalg;
mod loss;
mod movement;
mod plan;
mod prepack;
mod quant4;
mod recurrent;
mod reduce;
mod rnn;
mod signal;
mod state;

pub use build::TensorRef;
pub use plan::{
    conv_scratch_cap, plan_op, plan_ops, plan_ops_without_headroom, use_free_bytes, OpPlan, OpPlans,
};

use crate::kernel::{Kernel, Region, Scalar};
use crate::program::{
    IoTensor, Program, RunExtent, StateKind, StateTensor, Step, WeightSlot, STATE_ALIGN,
    WEIGHT_ALIGN,
};
use memc_ir::ops::{OpCtx, ShapeCtx};
use memc_ir::target::TargetInfo;
use memc_ir::{
    Attribute, Diagnostic, ElemType, Function, OpData, OpId, Opcode, TensorType, ValueId, WeightId,
    WeightStore,
};
use memc_passes::memory::{MemoryPlan, PlannedKind};
use std::cell::RefCell;
use std::collections::HashMap;

/// Most elements of a weight that lowering decodes as a compile-time constant.
pub const MAX_CONSTANT_ELEMENTS: u64 = 4096;

/// Why one op could not be lowered.
#[derive(Clone, Debug, PartialEq)]
pub enum LowerError {
    /// The op, or this use of it, has no kernel yet; the message says what.
    Unsupported(String),
    /// The memory plan and lowering disagree about the program (a value the plan gives no
    /// place that lowering must address): a bug in memc, never the model's fault, so it is
    /// reported as one and not as an unsupported op.
    Internal(String),
}

pub type LowerResult = Result<Vec<Kernel>, LowerError>;

/// The IR element type of a kernel scalar type (what a [`TargetInfo`] lists).
pub(crate) fn elem_type(scalar: Scalar) -> ElemType {
    scalar.elem()
}

/// The diagnostic of a [`LowerError::Internal`] at `place`: a memc bug, said as one.
fn internal_error(place: &str, reason: &str) -> Diagnostic {
    Diagnostic::error(format!(
        "internal error (a bug in memc, not in the model; please report it with the model): {place}: {reason}"
    ))
}

/// Shorthand for an unsupported-case error.
pub fn unsupported(message: impl Into<String>) -> LowerError {
    LowerError::Unsupported(message.into())
}

/// What lowering knows while it lowers one function: the IR, the weights and the plan.
pub struct LowerCtx<'a> {
    pub func: &'a Function,
    pub weights: &'a WeightStore,
    pub plan: &'a MemoryPlan,
    /// The backend the kernels are for: which element types and forms it computes.
    pub target: &'a TargetInfo,
    buffer_of: HashMap<ValueId, usize>,
    scratch_of: HashMap<OpId, usize>,
    slots: RefCell<WeightSlots>,
    /// The persistent arguments' places in the state region, in argument order.
    state: Vec<(ValueId, StateTensorPlace)>,
    state_size: u64,
}

/// Where a persistent argument lives in the state region.
#[derive(Clone, Debug)]
struct StateTensorPlace {
    kind: StateKind,
    byte_offset: u64,
}

#[derive(Default)]
struct WeightSlots {
    by_weight: HashMap<WeightId, usize>,
    /// Sub-byte weights one element per byte (the slots kernels address them in).
    by_unpacked: HashMap<WeightId, usize>,
    by_pack: HashMap<crate::nbits::PackSpec, usize>,
    slots: Vec<WeightSlot>,
    size: u64,
}

impl<'a> LowerCtx<'a> {
    pub fn new(
        func: &'a Function,
        weights: &'a WeightStore,
        plan: &'a MemoryPlan,
        target: &'a TargetInfo,
    ) -> LowerCtx<'a> {
        let buffer_of = plan
            .buffers
            .iter()
            .enumerate()
            .map(|(i, b)| (b.value, i))
            .collect();
        let scratch_of = plan
            .scratch
            .iter()
            .enumerate()
            .map(|(i, s)| (s.op, i))
            .collect();
        // Persistent arguments go into the state region in argument order, each aligned.
        let mut state = Vec::new();
        let mut state_size = 0u64;
        for (i, &arg) in func.args().iter().enumerate() {
            let Some(kind) = memc_ir::state::arg_state(func, i) else {
                continue;
            };
            let bytes = func
                .value_type(arg)
                .tensor()
                .and_then(TensorType::static_arena_bytes)
                .unwrap_or(0);
            let byte_offset = state_size.div_ceil(STATE_ALIGN) * STATE_ALIGN;
            state_size = byte_offset + bytes;
            state.push((arg, StateTensorPlace { kind, byte_offset }));
        }
        LowerCtx {
            func,
            weights,
            plan,
            target,
            buffer_of,
            scratch_of,
            slots: RefCell::default(),
            state,
            state_size,
        }
    }

    /// The place of `value` in the state region, when it is a persistent argument.
    fn state_place(&self, value: ValueId) -> Option<&StateTensorPlace> {
        self.state
            .iter()
            .find(|(v, _)| *v == value)
            .map(|(_, place)| place)
    }

    pub fn op(&self, op: OpId) -> &'a OpData {
        self.func.op(op)
    }

    /// `onnx.MatMul "fc1/MatMul"`: how messages and kernel names refer to an op.
    pub fn op_label(&self, op: OpId) -> String {
        let data = self.func.op(op);
        match &data.loc {
            Some(loc) => format!("{} \"{}\"", data.opcode.name(), loc),
            None => data.opcode.name().to_string(),
        }
    }

    /// `result #0 of onnx.Slice "emb/Slice"` (or `argument #2`): how messages name a value.
    fn value_label(&self, value: ValueId) -> String {
        match self.func.defining_op(value) {
            Some(op) => {
                let index = self.func.op(op).results.iter().position(|&r| r == value);
                format!("result #{} of {}", index.unwrap_or(0), self.op_label(op))
            }
            None => match self.func.args().iter().position(|&a| a == value) {
                Some(i) => format!("argument #{i}"),
                None => "a value".to_string(),
            },
        }
    }

    /// A kernel name for kernel `index` of `op`.
    pub fn kernel_name(&self, op: OpId, index: usize) -> String {
        format!("{} #{index}", self.op_label(op))
    }

    /// The weight a value is, when it is the result of `memc.weight`.
    pub fn weight_of(&self, value: ValueId) -> Option<WeightId> {
        let def = self.func.defining_op(value)?;
        let data = self.func.op(def);
        if data.opcode != Opcode::Weight {
            return None;
        }
        data.attrs.get("value").and_then(Attribute::as_weight)
    }

    /// The weights-section offset of a copy of `weight` (its ONNX bytes: sub-byte elements
    /// packed).
    fn weight_slot(&self, weight: WeightId) -> Result<u64, LowerError> {
        self.weight_slot_as(weight, false)
    }

    /// The weights-section offset of `weight` as kernels address its elements: a copy, or for
    /// a sub-byte type its elements one per byte (an unpacked slot).
    fn element_slot(&self, weight: WeightId) -> Result<u64, LowerError> {
        self.weight_slot_as(weight, true)
    }

    fn weight_slot_as(&self, weight: WeightId, elements: bool) -> Result<u64, LowerError> {
        let w = self
            .weights
            .get(weight)
            .ok_or_else(|| unsupported("a weight is missing from the weight store"))?;
        let unpack = elements && w.ty().elem.is_sub_byte();
        let mut slots = self.slots.borrow_mut();
        let existing = if unpack {
            slots.by_unpacked.get(&weight)
        } else {
            slots.by_weight.get(&weight)
        };
        if let Some(&i) = existing {
            return Ok(slots.slots[i].byte_offset);
        }
        let size = if unpack {
            w.ty().static_arena_bytes()
        } else {
            w.ty().static_byte_size()
        }
        .ok_or_else(|| unsupported(format!("weight `{}` has no static size", w.name())))?;
        let offset = slots.size.div_ceil(WEIGHT_ALIGN) * WEIGHT_ALIGN;
        slots.size = offset + size;
        let i = slots.slots.len();
        slots.slots.push(WeightSlot {
            name: w.name().to_string(),
            byte_offset: offset,
            byte_size: size,
            pack: None,
            unpacked: unpack.then(|| Scalar::from_elem(w.ty().elem)),
            operand: None,
        });
        if unpack {
            slots.by_unpacked.insert(weight, i);
        } else {
            slots.by_weight.insert(weight, i);
        }
        Ok(offset)
    }

    /// The weights-section offset of the packed slot `spec` describes, added on first use (two
    /// ops packing the same weight the same way share it).
    pub fn packed_slot(&self, spec: crate::nbits::PackSpec) -> u64 {
        let mut slots = self.slots.borrow_mut();
        if let Some(&i) = slots.by_pack.get(&spec) {
            return slots.slots[i].byte_offset;
        }
        let size = spec.byte_size();
        let offset = slots.size.div_ceil(WEIGHT_ALIGN) * WEIGHT_ALIGN;
        slots.size = offset + size;
        let i = slots.slots.len();
        slots.slots.push(WeightSlot {
            name: spec.slot_name(),
            byte_offset: offset,
            byte_size: size,
            pack: Some(spec.clone()),
            unpacked: None,
            operand: None,
        });
        slots.by_pack.insert(spec, i);
        offset
    }

    /// Where `value`'s bytes are while the plan runs.
    pub fn tensor(&self, value: ValueId) -> Result<TensorRef, LowerError> {
        let ty = self
            .func
            .value_type(value)
            .tensor()
            .ok_or_else(|| unsupported("an operand is not a tensor"))?;
        if !self.target.addresses(ty.elem) {
            return Err(unsupported(format!(
                "element type {} has no {} kernels",
                ty.elem.mlir_name(),
                self.target.name
            )));
        }
        let elem = Scalar::from_elem(ty.elem);
        // A bounded dim (`<=N`) is addressed at its bound: only the op that writes the value
        // and the return see such a value (verifier invariant 13).
        let shape = ty
            .dims
            .iter()
            .map(memc_ir::Dim::planned_size)
            .collect::<Option<Vec<u64>>>()
            .ok_or_else(|| unsupported("a shape is not static"))?;
        if let Some(weight) = self.weight_of(value) {
            let offset = self.element_slot(weight)?;
            return Ok(TensorRef {
                region: Region::Weights,
                byte_offset: offset as i64,
                elem,
                shape,
            });
        }
        if let Some(place) = self.state_place(value) {
            return Ok(TensorRef {
                region: Region::State,
                byte_offset: place.byte_offset as i64,
                elem,
                shape,
            });
        }
        let Some(&buffer) = self.buffer_of.get(&value) else {
            // A view of a weight or of state (a Reshape of a constant the canonicalizer left, a
            // Transpose of unit dims, a contiguous Slice) has no arena buffer: it is the
            // source's own bytes (from the view's offset on) with another shape.
            if let Some(view) = self.view_source(value) {
                let base = self.tensor(view.source)?;
                if base.region != Region::Arena {
                    return Ok(TensorRef {
                        region: base.region,
                        byte_offset: base.byte_offset + view.byte_offset as i64,
                        elem,
                        shape,
                    });
                }
            }
            return Err(LowerError::Internal(format!(
                "the memory plan has no place for {}: no arena buffer, and it is no view of a \
                 weight or of state (the planner and lowering disagree about it)",
                self.value_label(value)
            )));
        };
        let b = &self.plan.buffers[buffer];
        Ok(TensorRef {
            region: Region::Arena,
            byte_offset: b.offset as i64,
            elem,
            shape,
        })
    }

    /// Where the run-time extent of `value` (a tensor with a bounded dim) lives: its bounded
    /// axis and the arena byte offset of the i64 after its elements
    /// ([`memc_ir::BoundedLayout`]); `None` for a tensor without a bounded dim.
    pub fn extent_slot(&self, value: ValueId) -> Result<Option<RunExtent>, LowerError> {
        let Some(ty) = self.func.value_type(value).tensor() else {
            return Ok(None);
        };
        let (Some(axis), Some(layout)) = (ty.bounded_axis(), ty.bounded_arena_layout()) else {
            return Ok(None);
        };
        let t = self.tensor(value)?;
        if t.region != Region::Arena {
            return Err(LowerError::Internal(format!(
                "{} has a bounded dim but does not live in the arena",
                self.value_label(value)
            )));
        }
        Ok(Some(RunExtent {
            axis: axis as u32,
            byte_offset: t.byte_offset as u64 + layout.extent_offset,
        }))
    }

    /// The scratch memory the plan gave `op` for its step, as a 1-d u8 tensor in the arena;
    /// `None` when the plan has none for it (planned without [`OpPlans::scratch_bytes`]).
    pub fn scratch(&self, op: OpId) -> Option<TensorRef> {
        let s = &self.plan.scratch[*self.scratch_of.get(&op)?];
        Some(TensorRef {
            region: Region::Arena,
            byte_offset: s.offset as i64,
            elem: Scalar::U8,
            shape: vec![s.size],
        })
    }

    /// The ONNX bytes of a 4-bit weight, as a 1-d u8 tensor (two elements per byte, rounded
    /// up). Values in the arena hold sub-byte elements one per byte and are read with
    /// [`LowerCtx::tensor`].
    pub fn packed_tensor(&self, value: ValueId) -> Result<TensorRef, LowerError> {
        let ty = self
            .func
            .value_type(value)
            .tensor()
            .ok_or_else(|| unsupported("an operand is not a tensor"))?;
        let n = ty
            .static_num_elements()
            .ok_or_else(|| unsupported("a shape is not static"))?;
        let shape = vec![n.div_ceil(2)];
        let weight = self.weight_of(value).ok_or_else(|| {
            unsupported("packed 4-bit bytes of a value that is not a weight (a memc bug)")
        })?;
        let offset = self.weight_slot(weight)?;
        Ok(TensorRef {
            region: Region::Weights,
            byte_offset: offset as i64,
            elem: Scalar::U8,
            shape,
        })
    }

    /// Whether `op` is a view op whose result is a weight's bytes, or persistent state's (it
    /// needs no kernel).
    pub fn is_weight_view(&self, op: OpId) -> bool {
        let Some(&value) = self.func.op(op).results.first() else {
            return false;
        };
        !self.buffer_of.contains_key(&value)
            && self.view_source(value).is_some()
            && self.tensor(value).is_ok_and(|t| t.region != Region::Arena)
    }

    /// The bytes `value` aliases, when its producer is a view ([`memc_ir::ops::view_of`], the
    /// answer the planner also uses) and `value` is that op's result 0.
    fn view_source(&self, value: ValueId) -> Option<memc_ir::ops::View> {
        let def = self.func.defining_op(value)?;
        if self.func.op(def).results.first() != Some(&value) {
            return None;
        }
        memc_ir::ops::view_of(self.func, self.weights, def)
    }

    /// Operand `index` of `op`, or `None` when it is absent (`memc.none` or past the end).
    pub fn operand(&self, op: OpId, index: usize) -> Result<Option<TensorRef>, LowerError> {
        let Some(&value) = self.func.op(op).operands.get(index) else {
            return Ok(None);
        };
        if self.func.value_type(value).is_none() {
            return Ok(None);
        }
        self.tensor(value).map(Some)
    }

    /// Operand `index` of `op`, which the verifier guarantees is present.
    pub fn input(&self, op: OpId, index: usize) -> Result<TensorRef, LowerError> {
        self.operand(op, index)?
            .ok_or_else(|| unsupported(format!("operand #{index} is missing")))
    }

    /// Result `index` of `op`.
    pub fn result(&self, op: OpId, index: usize) -> Result<TensorRef, LowerError> {
        let &value = self
            .func
            .op(op)
            .results
            .get(index)
            .ok_or_else(|| unsupported(format!("result #{index} is missing")))?;
        self.tensor(value)
    }

    /// Whether result `index` of `op` is present and used (optional outputs may be left out).
    pub fn result_used(&self, op: OpId, index: usize) -> bool {
        let Some(&value) = self.func.op(op).results.get(index) else {
            return false;
        };
        !self.func.value_type(value).is_none() && self.buffer_of.contains_key(&value)
    }

    /// The element type and bytes of operand `index` of `op` when it is a weight with loaded
    /// bytes and at most [`MAX_CONSTANT_ELEMENTS`] elements. This is the one place lowering
    /// reads weight bytes at compile time; larger weights are never touched (reading them would
    /// fault the mapped model into memory).
    pub fn weight_constant(&self, op: OpId, index: usize) -> Option<(ElemType, &'a [u8])> {
        let &value = self.func.op(op).operands.get(index)?;
        let weight = self.weights.get(self.weight_of(value)?)?;
        if weight.ty().static_num_elements()? > MAX_CONSTANT_ELEMENTS {
            return None;
        }
        Some((weight.ty().elem, weight.bytes()?))
    }

    /// The integer values of operand `index` when they are compile-time constants: a small
    /// weight, or a value shape inference folded.
    pub fn const_ints(&self, op: OpId, index: usize) -> Option<Vec<i64>> {
        if let Some((elem, bytes)) = self.weight_constant(op, index) {
            return movement::common::decode_i64(elem, bytes);
        }
        let ctx = ShapeCtx::new(self.func, op).with_weights(self.weights);
        ctx.known_operand(index).and_then(|k| k.ints())
    }

    /// The values of operand `index` as `f64` when they are compile-time constants.
    pub fn const_floats(&self, op: OpId, index: usize) -> Option<Vec<f64>> {
        if let Some((elem, bytes)) = self.weight_constant(op, index) {
            return movement::common::decode_f64(elem, bytes);
        }
        let ctx = ShapeCtx::new(self.func, op).with_weights(self.weights);
        let known = ctx.known_operand(index)?;
        known.floats().or_else(|| {
            known
                .ints()
                .map(|v| v.into_iter().map(|i| i as f64).collect())
        })
    }

    pub fn attr(&self, op: OpId, name: &str) -> Option<&'a Attribute> {
        self.func.op(op).attrs.get(name)
    }

    /// The table's reader of `op`'s attributes (they fall back to the declared defaults).
    fn op_ctx(&self, op: OpId) -> OpCtx<'a> {
        OpCtx {
            func: self.func,
            op,
        }
    }

    /// An integer attribute of `op`, else the default the op table declares for it. Asking for
    /// an attribute the table declares with no integer default (and the op lacks) is a memc bug
    /// (see [`OpCtx::int_or_default`]).
    pub fn attr_int(&self, op: OpId, name: &str) -> i64 {
        self.op_ctx(op).int_or_default(name)
    }

    /// An integer attribute of `op`, else its declared default; `None` when it has neither
    /// (an attribute whose default depends on the operands, such as Shape's `end`).
    pub fn attr_int_opt(&self, op: OpId, name: &str) -> Option<i64> {
        self.op_ctx(op).int_attr(name)
    }

    /// A float attribute of `op`, else the default the op table declares for it (a memc bug
    /// when there is none: debug builds assert it; release builds read 0).
    pub fn attr_float(&self, op: OpId, name: &str) -> f64 {
        let value = self.op_ctx(op).float_attr(name);
        debug_assert!(
            value.is_some(),
            "{} declares a float default for `{name}`",
            self.func.op(op).opcode.name()
        );
        value.unwrap_or(0.0)
    }

    pub fn attr_ints(&self, op: OpId, name: &str) -> Option<Vec<i64>> {
        self.attr(op, name).and_then(Attribute::as_ints)
    }

    /// A string attribute of `op`, else its declared default.
    pub fn attr_str(&self, op: OpId, name: &str) -> Option<&'a str> {
        self.op_ctx(op).str_attr(name)
    }

    /// Whether the planner made result 0 of `op` a view of another buffer (no kernel needed).
    pub fn is_planned_view(&self, op: OpId) -> bool {
        let Some(&value) = self.func.op(op).results.first() else {
            return false;
        };
        self.buffer_of
            .get(&value)
            .is_some_and(|&b| matches!(self.plan.buffers[b].kind, PlannedKind::View { .. }))
    }
}

/// Lowers the planned function `func` to a program for the CPU target, planning each op's form
/// here ([`plan_ops`]); the memory plan must have been made with the same ops' scratch bytes
/// (or none: an op planned without its scratch falls back to a form that needs none). On
/// failure, returns one diagnostic listing every op that could not be lowered.
pub fn lower_function(
    func: &Function,
    weights: &WeightStore,
    plan: &MemoryPlan,
) -> Result<Program, Diagnostic> {
    lower_function_for(func, weights, plan, crate::cpu::target::target())
}

/// [`lower_function`] for the target `target` describes (`Target::info`).
pub fn lower_function_for(
    func: &Function,
    weights: &WeightStore,
    plan: &MemoryPlan,
    target: &'static TargetInfo,
) -> Result<Program, Diagnostic> {
    let ops = plan_ops(func, weights, target);
    lower_planned(func, weights, plan, &ops)
}

/// Lowers the planned function `func` to a program with the forms `ops` chose before memory
/// planning (the memory plan was made with [`OpPlans::scratch_bytes`]). On failure, returns
/// one diagnostic listing every op that could not be lowered.
pub fn lower_planned(
    func: &Function,
    weights: &WeightStore,
    plan: &MemoryPlan,
    ops: &OpPlans,
) -> Result<Program, Diagnostic> {
    let ctx = LowerCtx::new(func, weights, plan, ops.target);
    let mut failures: Vec<(String, String)> = Vec::new();
    let chains = elementwise::chains(&ctx);
    let mut steps = Vec::with_capacity(plan.schedule.len());
    for &op in &plan.schedule {
        let label = ctx.op_label(op);
        let lowered = match chains.get(&op) {
            Some(elementwise::ChainRole::Inner) => Ok(Vec::new()),
            Some(elementwise::ChainRole::Last(chain)) => elementwise::lower_chain(&ctx, chain),
            None => plan::lower_op(&ctx, op, ops.get(op)),
        };
        match lowered {
            Ok(kernels) => steps.push(Step { op: label, kernels }),
            Err(LowerError::Unsupported(reason)) => failures.push((label, reason)),
            Err(LowerError::Internal(reason)) => return Err(internal_error(&label, &reason)),
        }
    }
    if !failures.is_empty() {
        let mut d = Diagnostic::error(format!(
            "the {} backend cannot lower {} op{} of this model",
            ops.target.name.to_uppercase(),
            failures.len(),
            if failures.len() == 1 { "" } else { "s" }
        ));
        for (label, reason) in failures.iter().take(50) {
            d = d.with_note(format!("{label}: {reason}"));
        }
        if failures.len() > 50 {
            d = d.with_note(format!("... and {} more", failures.len() - 50));
        }
        return Err(d);
    }
    let io = |value: ValueId, name: String| -> Result<IoTensor, Diagnostic> {
        let t = ctx.tensor(value).map_err(|e| match e {
            LowerError::Unsupported(reason) => {
                Diagnostic::error(format!("graph input or output `{name}`: {reason}"))
            }
            LowerError::Internal(reason) => {
                internal_error(&format!("graph input or output `{name}`"), &reason)
            }
        })?;
        let extent = ctx.extent_slot(value).map_err(|e| match e {
            LowerError::Unsupported(reason) | LowerError::Internal(reason) => {
                internal_error(&format!("graph output `{name}`"), &reason)
            }
        })?;
        Ok(IoTensor {
            name,
            elem: t.elem,
            shape: t.shape,
            region: t.region,
            byte_offset: t.byte_offset as u64,
            extent,
        })
    };
    let mut inputs = Vec::new();
    let mut state = Vec::new();
    for (i, &arg) in func.args().iter().enumerate() {
        let name = io_name(func.arg_attrs(i), || format!("input{i}"));
        let tensor = io(arg, name)?;
        match ctx.state_place(arg) {
            Some(place) => state.push(StateTensor {
                name: tensor.name,
                kind: place.kind,
                elem: tensor.elem,
                shape: tensor.shape,
                byte_offset: place.byte_offset,
            }),
            None => inputs.push(tensor),
        }
    }
    let mut outputs = Vec::new();
    let ret = func
        .layout()
        .block_ops(func.entry_block())
        .last()
        .copied()
        .filter(|&op| func.op(op).opcode == Opcode::Return)
        .ok_or_else(|| Diagnostic::error("the function has no return (a memc bug)"))?;
    for (i, &value) in func.op(ret).operands.iter().enumerate() {
        let output = io(
            value,
            io_name(func.result_attrs(i), || format!("output{i}")),
        )?;
        if output.region == Region::State {
            return Err(Diagnostic::error(format!(
                "graph output `{}` is a parameter or gradient buffer (persistent state); memc keeps state out of the outputs: read it from the session after the run",
                output.name
            )));
        }
        outputs.push(output);
    }
    let slots = ctx.slots.into_inner();
    let mut program = Program {
        arena_size: plan.arena_size,
        weights_size: slots.size,
        state_size: ctx.state_size,
        inputs,
        outputs,
        weights: slots.slots,
        state,
        steps,
    };
    if ops.target.prepack_weights {
        prepack::prepack_weights(&mut program);
    }
    program.validate().map_err(|e| {
        Diagnostic::error(format!(
            "lowering produced an invalid kernel (a memc bug): {e}"
        ))
    })?;
    Ok(program)
}

/// The ONNX name of a function argument or result, from its `memc.name` attribute.
fn io_name(attrs: &memc_ir::AttrDict, fallback: impl FnOnce() -> String) -> String {
    attrs
        .get("memc.name")
        .and_then(Attribute::as_str)
        .map(str::to_string)
        .unwrap_or_else(fallback)
}
