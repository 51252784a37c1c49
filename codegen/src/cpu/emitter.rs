//! The per-point half of loop-kernel emission: a [`LoopEmitter`] holds the function being
//! built and the kernel, and emits a stage's scalar instructions at one point of its index
//! space (loads through strided, guarded and indirect views; constants; unary, binary, select
//! and cast; reduction folds into accumulators; stores, indirect and accumulating ones
//! included).
//!
//! The row and stage loops that call it are `loops.rs`; the SIMD forms (`simd.rs`) call it for
//! what they do not vectorize. This file calls neither, so the three import one way.
//!
//! Guarantees: every emitted address was bounded by the validator (guarded loads branch around
//! the access; indirect indices are wrapped and clamped first); no emitted instruction traps.

use super::error::CpuError;
use super::func::{memory_type, FnCx};
use crate::kernel::{
    BinaryOp, IndirectIndex, Inst, InstKind, LoopKernel, ReduceOp, Region, Scalar, Stage, Store,
    View,
};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::Variable;

/// The memory flags of every kernel access: validated addresses never trap.
pub(crate) fn mem_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// The variables of one `Reduce` stage: its accumulator and, for ArgMax/ArgMin, the best value
/// so far.
#[derive(Copy, Clone)]
struct AccVars {
    acc: Variable,
    best: Option<Variable>,
}

/// The emission state of one loop kernel's function (see the module doc).
pub(crate) struct LoopEmitter<'f, 'm, 'k> {
    pub(crate) cx: FnCx<'f, 'm>,
    pub(crate) k: &'k LoopKernel,
    pub(crate) arena: Option<Value>,
    pub(crate) weights: Option<Value>,
    pub(crate) state: Option<Value>,
    /// The number of leading outer axes that index rows.
    pub(crate) n_row_axes: usize,
    /// The number of blocks the last outer axis is cut into (see `loops::RowSchedule`).
    pub(crate) blocks: Option<u64>,
    /// In a blocked row: the index of the block's first element on the last outer axis. In-row
    /// indices of that axis count from it; the row bases include it.
    pub(crate) block_offset: Option<Value>,
    /// Per view: the address of its element at the current row with every in-row index 0.
    pub(crate) row_base: Vec<Value>,
    acc: Vec<Option<AccVars>>,
    /// How many stages (or whole rows) got a SIMD loop.
    pub(crate) vectorized: usize,
}

impl<'f, 'm, 'k> LoopEmitter<'f, 'm, 'k> {
    /// An emitter for `k`, whose last outer axis is cut into `blocks` blocks if set.
    pub(crate) fn new(cx: FnCx<'f, 'm>, k: &'k LoopKernel, blocks: Option<u64>) -> Self {
        let n_row_axes = if k.inner.is_empty() {
            k.outer.len().saturating_sub(1)
        } else {
            k.outer.len()
        };
        LoopEmitter {
            cx,
            k,
            arena: None,
            weights: None,
            state: None,
            n_row_axes,
            blocks,
            block_offset: None,
            row_base: Vec::new(),
            acc: vec![None; k.stages.len()],
            vectorized: 0,
        }
    }

    pub(crate) fn unsupported(&self, message: String) -> CpuError {
        self.cx.unsupported(message)
    }

    /// Sets [`LoopEmitter::row_base`] for the row at `row_idx` (the block offset included).
    pub(crate) fn compute_row_bases(&mut self, row_idx: &[Value]) {
        let arena = self
            .arena
            .expect("the entry block sets the arena pointer before any row");
        let weights = self
            .weights
            .expect("the entry block sets the weights pointer before any row");
        let state = self
            .state
            .expect("the entry block sets the state pointer before any row");
        self.row_base.clear();
        for view in &self.k.views {
            let region = match view.region {
                Region::Arena => arena,
                Region::Weights => weights,
                Region::State => state,
            };
            let size = view.elem.size() as i64;
            let mut addr = self.cx.b.ins().iadd_imm_s(region, view.byte_offset);
            let block_term = self.block_offset.map(|j0| (self.k.outer.len() - 1, j0));
            for (a, idx) in row_idx.iter().copied().enumerate().chain(block_term) {
                let step = view.strides[a].wrapping_mul(size);
                if step != 0 {
                    let term = self.cx.b.ins().imul_imm_s(idx, step);
                    addr = self.cx.b.ins().iadd(addr, term);
                }
            }
            self.row_base.push(addr);
        }
    }

    /// The index of axis `axis` at `point` counted from the start of the axis (in-row indices of
    /// a blocked axis count from the block's start).
    fn global_index(&mut self, axis: usize, point: &[Value]) -> Value {
        match self.block_offset {
            Some(j0) if axis + 1 == self.k.outer.len() && self.blocks.is_some() => {
                self.cx.b.ins().iadd(point[axis], j0)
            }
            _ => point[axis],
        }
    }

    /// Declares stage `s`'s accumulator (and best value) and sets it to the initial value.
    pub(crate) fn init_acc(&mut self, s: usize) -> Result<(), CpuError> {
        let Stage::Reduce {
            insts,
            value,
            op,
            init,
            ty,
        } = &self.k.stages[s]
        else {
            return Ok(());
        };
        let clif = self.cx.ty(*ty)?;
        let acc = self.cx.b.declare_var(clif);
        let init_value = self.cx.const_bits(*ty, *init)?;
        self.cx.b.def_var(acc, init_value);
        let best = match op {
            ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. } => {
                let value_ty = self.inst_ty(insts, *value)?;
                let clif = self.cx.ty(value_ty)?;
                let best = self.cx.b.declare_var(clif);
                let zero = self.cx.const_bits(value_ty, 0)?;
                self.cx.b.def_var(best, zero);
                Some(best)
            }
            _ => None,
        };
        self.acc[s] = Some(AccVars { acc, best });
        Ok(())
    }

    pub(crate) fn acc_var(&self, s: usize) -> Result<Variable, CpuError> {
        self.acc
            .get(s)
            .copied()
            .flatten()
            .map(|a| a.acc)
            .ok_or_else(|| self.unsupported(format!("stage {s} is not an earlier reduction")))
    }

    pub(crate) fn inst_ty(&self, insts: &[Inst], id: u32) -> Result<Scalar, CpuError> {
        insts
            .get(id as usize)
            .map(|i| i.ty)
            .ok_or_else(|| self.unsupported(format!("missing instruction {id}")))
    }

    /// Folds stage `s`'s value at `point` into its accumulator.
    pub(crate) fn fold_at(&mut self, s: usize, point: &[Value]) -> Result<(), CpuError> {
        let Stage::Reduce {
            insts,
            value,
            op,
            ty,
            ..
        } = &self.k.stages[s]
        else {
            return Ok(());
        };
        let vals = self.emit_insts(insts, point)?;
        let v = operand(&vals, *value, self)?;
        let vars =
            self.acc[s].ok_or_else(|| self.unsupported(format!("stage {s} has no accumulator")))?;
        let acc = self.cx.b.use_var(vars.acc);
        let new = match op {
            ReduceOp::Sum => self.cx.binary(BinaryOp::Add, acc, v, *ty)?,
            ReduceOp::Prod => self.cx.binary(BinaryOp::Mul, acc, v, *ty)?,
            ReduceOp::Max => self.cx.binary(BinaryOp::Max, acc, v, *ty)?,
            ReduceOp::Min => self.cx.binary(BinaryOp::Min, acc, v, *ty)?,
            ReduceOp::ArgMax { last } | ReduceOp::ArgMin { last } => {
                let is_max = matches!(op, ReduceOp::ArgMax { .. });
                let value_ty = self.inst_ty(insts, *value)?;
                let best_var = vars
                    .best
                    .ok_or_else(|| self.unsupported("no best value".into()))?;
                let best = self.cx.b.use_var(best_var);
                let lin = self.inner_linear_index(point);
                let take = self.arg_take(v, best, value_ty, is_max, *last);
                let first = self.cx.b.ins().icmp_imm_s(IntCC::Equal, lin, 0);
                let take = self.cx.b.ins().bor(take, first);
                let new_best = self.cx.b.ins().select(take, v, best);
                self.cx.b.def_var(best_var, new_best);
                self.cx.b.ins().select(take, lin, acc)
            }
        };
        self.cx.b.def_var(vars.acc, new);
        Ok(())
    }

    /// Whether ArgMax/ArgMin replaces `best` by `v`. NaN counts as the extreme: the first
    /// (or, with `last`, the last) NaN wins.
    fn arg_take(&mut self, v: Value, best: Value, ty: Scalar, is_max: bool, last: bool) -> Value {
        let b = &mut self.cx.b;
        if ty.is_float() {
            let cc = match (is_max, last) {
                (true, false) => FloatCC::GreaterThan,
                (true, true) => FloatCC::GreaterThanOrEqual,
                (false, false) => FloatCC::LessThan,
                (false, true) => FloatCC::LessThanOrEqual,
            };
            let better = b.ins().fcmp(cc, v, best);
            let v_nan = b.ins().fcmp(FloatCC::Unordered, v, v);
            let best_ordered = b.ins().fcmp(FloatCC::Ordered, best, best);
            if last {
                // isnan(v) || (!isnan(best) && v >= best)
                let ordered_better = b.ins().band(best_ordered, better);
                b.ins().bor(v_nan, ordered_better)
            } else {
                // (isnan(v) && !isnan(best)) || v > best
                let first_nan = b.ins().band(v_nan, best_ordered);
                b.ins().bor(first_nan, better)
            }
        } else {
            let signed = ty.is_signed_int();
            let cc = match (is_max, last, signed) {
                (true, false, true) => IntCC::SignedGreaterThan,
                (true, true, true) => IntCC::SignedGreaterThanOrEqual,
                (false, false, true) => IntCC::SignedLessThan,
                (false, true, true) => IntCC::SignedLessThanOrEqual,
                (true, false, false) => IntCC::UnsignedGreaterThan,
                (true, true, false) => IntCC::UnsignedGreaterThanOrEqual,
                (false, false, false) => IntCC::UnsignedLessThan,
                (false, true, false) => IntCC::UnsignedLessThanOrEqual,
            };
            b.ins().icmp(cc, v, best)
        }
    }

    /// The row-major linear index over the inner axes at `point` (0 with `inner` empty).
    fn inner_linear_index(&mut self, point: &[Value]) -> Value {
        let k = self.k;
        let mut lin = self.cx.b.ins().iconst(types::I64, 0);
        let mut scale: i64 = 1;
        for j in (0..k.inner.len()).rev() {
            let term = self.cx.b.ins().imul_imm_s(point[k.outer.len() + j], scale);
            lin = self.cx.b.ins().iadd(lin, term);
            scale = scale.wrapping_mul(k.inner[j] as i64);
        }
        lin
    }

    pub(crate) fn emit_stores(
        &mut self,
        insts: &[Inst],
        stores: &[Store],
        point: &[Value],
    ) -> Result<(), CpuError> {
        let vals = self.emit_insts(insts, point)?;
        for store in stores {
            let mut value = operand(&vals, store.value, self)?;
            // A scatter's indirect terms are wrapped and clamped like an indirect load's.
            let addr = self.address(store.view, point, &store.indices, &vals)?;
            let elem = self.view(store.view)?.elem;
            if store.accumulate {
                let mem = self.memory_ty(elem)?;
                let raw = self.cx.b.ins().load(mem, mem_flags(), addr, 0);
                let old = self.cx.widen(raw, elem)?;
                value = self.cx.binary(BinaryOp::Add, old, value, elem.compute())?;
            }
            let raw = self.cx.narrow(value, elem)?;
            self.cx.b.ins().store(mem_flags(), raw, addr, 0);
        }
        Ok(())
    }

    /// Emits `insts` at `point` and returns one value per instruction.
    pub(crate) fn emit_insts(
        &mut self,
        insts: &[Inst],
        point: &[Value],
    ) -> Result<Vec<Value>, CpuError> {
        let mut vals: Vec<Value> = Vec::with_capacity(insts.len());
        for i in 0..insts.len() {
            let v = self.emit_inst(insts, i, &vals, point)?;
            vals.push(v);
        }
        Ok(vals)
    }

    /// Emits instruction `i` of `insts` at `point`, its operands taken from `vals` (one value per
    /// earlier instruction).
    pub(crate) fn emit_inst(
        &mut self,
        insts: &[Inst],
        i: usize,
        vals: &[Value],
        point: &[Value],
    ) -> Result<Value, CpuError> {
        let inst = &insts[i];
        Ok(match &inst.kind {
            InstKind::Load { view } => self.load(*view, point, &[], vals)?,
            InstKind::LoadIndirect { view, indices } => self.load(*view, point, indices, vals)?,
            InstKind::Const { bits } => self.cx.const_bits(inst.ty, *bits)?,
            InstKind::Index { axis } => {
                if *axis as usize >= point.len() {
                    return Err(self.unsupported(format!("no loop axis {axis}")));
                }
                self.global_index(*axis as usize, point)
            }
            InstKind::Acc { stage } => {
                let var = self.acc_var(*stage as usize)?;
                self.cx.b.use_var(var)
            }
            InstKind::Unary { op, arg } => {
                let x = operand(vals, *arg, self)?;
                let arg_ty = self.inst_ty(insts, *arg)?;
                self.cx.unary(*op, x, arg_ty)?
            }
            InstKind::Binary { op, lhs, rhs } => {
                let l = operand(vals, *lhs, self)?;
                let r = operand(vals, *rhs, self)?;
                let arg_ty = self.inst_ty(insts, *lhs)?;
                self.cx.binary(*op, l, r, arg_ty)?
            }
            InstKind::Select { cond, then, else_ } => {
                let c = operand(vals, *cond, self)?;
                let t = operand(vals, *then, self)?;
                let e = operand(vals, *else_, self)?;
                self.cx.b.ins().select(c, t, e)
            }
            InstKind::Cast { arg } => {
                let x = operand(vals, *arg, self)?;
                let arg_ty = self.inst_ty(insts, *arg)?;
                self.cx.cast(x, arg_ty, inst.ty)?
            }
            InstKind::Narrow { arg, to } => {
                let x = operand(vals, *arg, self)?;
                let raw = self.cx.narrow(x, *to)?;
                self.cx.widen(raw, *to)?
            }
        })
    }

    /// The Cranelift type of an element of `elem` in memory.
    fn memory_ty(&self, elem: Scalar) -> Result<cranelift_codegen::ir::Type, CpuError> {
        memory_type(elem).ok_or_else(|| self.unsupported(format!("{} elements", elem.name())))
    }

    pub(crate) fn view(&self, view: u32) -> Result<&'k View, CpuError> {
        self.k
            .views
            .get(view as usize)
            .ok_or_else(|| self.unsupported(format!("missing view {view}")))
    }

    /// The address of `view`'s element at `point`, plus the indirect terms of `indices`.
    pub(crate) fn address(
        &mut self,
        view_idx: u32,
        point: &[Value],
        indices: &[IndirectIndex],
        vals: &[Value],
    ) -> Result<Value, CpuError> {
        let view = self.view(view_idx)?;
        let size = view.elem.size() as i64;
        let mut addr = self.row_base[view_idx as usize];
        for (a, &idx) in point.iter().enumerate().skip(self.n_row_axes) {
            let step = view.strides[a].wrapping_mul(size);
            if step != 0 {
                let term = self.cx.b.ins().imul_imm_s(idx, step);
                addr = self.cx.b.ins().iadd(addr, term);
            }
        }
        for ix in indices {
            let raw = operand(vals, ix.index, self)?;
            // Negative indices count from the end; then clamp into [0, limit).
            let negative = self.cx.b.ins().icmp_imm_s(IntCC::SignedLessThan, raw, 0);
            let wrapped = self.cx.b.ins().iadd_imm_s(raw, ix.limit);
            let idx = self.cx.b.ins().select(negative, wrapped, raw);
            let zero = self.cx.b.ins().iconst(types::I64, 0);
            let top = self
                .cx
                .b
                .ins()
                .iconst(types::I64, ix.limit.saturating_sub(1).max(0));
            let idx = self.cx.b.ins().smax(idx, zero);
            let idx = self.cx.b.ins().smin(idx, top);
            let step = ix.stride.wrapping_mul(size);
            if step != 0 {
                let term = self.cx.b.ins().imul_imm_s(idx, step);
                addr = self.cx.b.ins().iadd(addr, term);
            }
        }
        Ok(addr)
    }

    /// Whether every guard of `view` holds at `point`, as a bool (I8).
    pub(crate) fn guards_hold(&mut self, view: &View, point: &[Value]) -> Value {
        let mut ok = self.cx.b.ins().iconst(types::I8, 1);
        for guard in &view.guards {
            let mut g = self.cx.b.ins().iconst(types::I64, guard.offset);
            for (a, &c) in guard.coeffs.iter().enumerate() {
                if c != 0 {
                    let idx = self.global_index(a, point);
                    let term = self.cx.b.ins().imul_imm_s(idx, c);
                    g = self.cx.b.ins().iadd(g, term);
                }
            }
            // 0 <= g < limit as one unsigned comparison (a negative g is huge unsigned).
            let holds = if guard.limit <= 0 {
                self.cx.b.ins().iconst(types::I8, 0)
            } else {
                self.cx
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedLessThan, g, guard.limit)
            };
            ok = self.cx.b.ins().band(ok, holds);
        }
        ok
    }

    fn load(
        &mut self,
        view_idx: u32,
        point: &[Value],
        indices: &[IndirectIndex],
        vals: &[Value],
    ) -> Result<Value, CpuError> {
        let view = self.view(view_idx)?;
        let ty = self.cx.ty(view.elem)?;
        let mem = self.memory_ty(view.elem)?;
        if view.guards.is_empty() {
            let addr = self.address(view_idx, point, indices, vals)?;
            let raw = self.cx.b.ins().load(mem, mem_flags(), addr, 0);
            return self.cx.widen(raw, view.elem);
        }
        // Guarded: branch around the access, which may be out of bounds where a guard fails.
        let ok = self.guards_hold(view, point);
        let pad = self.cx.pad_value(view)?;
        let in_bounds = self.cx.b.create_block();
        let merge = self.cx.b.create_block();
        let result = self.cx.b.append_block_param(merge, ty);
        self.cx
            .b
            .ins()
            .brif(ok, in_bounds, &[], merge, &[BlockArg::Value(pad)]);
        self.cx.b.switch_to_block(in_bounds);
        self.cx.b.seal_block(in_bounds);
        let addr = self.address(view_idx, point, indices, vals)?;
        let raw = self.cx.b.ins().load(mem, mem_flags(), addr, 0);
        let loaded = self.cx.widen(raw, view.elem)?;
        self.cx.b.ins().jump(merge, &[BlockArg::Value(loaded)]);
        self.cx.b.switch_to_block(merge);
        self.cx.b.seal_block(merge);
        Ok(result)
    }
}

/// The value of instruction `id`, or an error if it is not an earlier instruction.
pub(crate) fn operand(vals: &[Value], id: u32, em: &LoopEmitter) -> Result<Value, CpuError> {
    vals.get(id as usize)
        .copied()
        .ok_or_else(|| em.unsupported(format!("operand {id} is not an earlier instruction")))
}
