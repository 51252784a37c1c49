//! Lowering of one [`LoopKernel`] to one Cranelift function
//! `extern "C" fn(arena: *mut u8, weights: *const u8, row_begin: u64, row_end: u64)`.
//!
//! The function walks rows `[row_begin, row_end)` in the order of
//! [`LoopKernel::parallel_rows`]: the row axes are all outer axes, except that with `inner`
//! empty the last outer axis is looped inside each row. One refinement ([`row_schedule`]): a
//! long last axis of such a kernel is cut into blocks of 4096 elements, each a row of its own,
//! so that a kernel with one row still spreads over threads. The row's multi-index is computed
//! once from `row_begin` and then advanced like an odometer. Inside a row, each stage runs at every
//! point of its index space (the inner axes; one point for `Once`), with accumulators held in
//! SSA variables. Every extent, stride and offset is a compile-time constant.
//!
//! Guarantees: for a validated kernel the function reads and writes only addresses the
//! validator bounded (guarded loads branch around the memory access; indirect indices are
//! wrapped and clamped before use), and no emitted instruction traps.

use super::func::{FnCx, HelperIds};
use super::scalar::clif_type;
use super::simd;
use super::CpuError;
use crate::kernel::{
    BinaryOp, IndirectIndex, Inst, InstKind, Kernel, LoopKernel, ReduceOp, Region, Scalar, Stage,
    Store, View,
};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, AbiParam, BlockArg, InstBuilder, MemFlagsData, Value};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage, Module};

/// The memory flags of every kernel access: validated addresses never trap.
pub(crate) fn mem_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Compiles `lk` (the body of `kernel`) into function `func_name` of `module`; returns the
/// function and how many SIMD loops it got.
pub(crate) fn compile_loop(
    module: &mut JITModule,
    helper_ids: &mut HelperIds,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    kernel: &Kernel,
    lk: &LoopKernel,
    func_name: &str,
) -> Result<(FuncId, usize), CpuError> {
    check_types(kernel, lk)?;
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    for ty in [ptr, ptr, types::I64, types::I64] {
        sig.params.push(AbiParam::new(ty));
    }
    module.clear_context(ctx);
    ctx.func.signature = sig.clone();
    let target_config = module.target_config();
    let n_vectorized;
    {
        let b = FunctionBuilder::new(&mut ctx.func, fctx);
        let cx = FnCx::new(b, module, helper_ids, &kernel.name);
        let mut emitter = LoopEmitter::new(cx, lk);
        emitter.emit_function()?;
        let LoopEmitter { cx, vectorized, .. } = emitter;
        n_vectorized = vectorized;
        let mut b = cx.b;
        b.seal_all_blocks();
        b.finalize(target_config);
    }
    let id = module
        .declare_function(func_name, Linkage::Local, &sig)
        .map_err(|e| CpuError::Cranelift(e.to_string()))?;
    module
        .define_function(id, ctx)
        .map_err(|e| CpuError::Cranelift(format!("kernel `{}`: {e:?}", kernel.name)))?;
    module.clear_context(ctx);
    Ok((id, n_vectorized))
}

/// Elements of the last outer axis per row piece when a kernel with `inner` empty splits that
/// axis (a multiple of the SIMD step).
const BLOCK_LEN: u64 = 4096;

/// How a loop kernel's function divides its work into rows.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct RowSchedule {
    /// Independent pieces the function takes as `[row_begin, row_end)`.
    pub rows: u64,
    /// Elements of work in one piece.
    pub work_per_row: u64,
    /// With `inner` empty and a long last axis: that axis is cut into `count` blocks of
    /// `BLOCK_LEN` elements (the last one shorter), each its own row, so even a one-row kernel
    /// runs on several threads.
    pub blocks: Option<u64>,
}

/// The rows of `k`: [`LoopKernel::parallel_rows`], with the last outer axis cut into blocks
/// where it is long and every store writes a different element at each of its points (a
/// nonzero stride), so blocks never write the same element.
pub(crate) fn row_schedule(k: &LoopKernel) -> RowSchedule {
    let rows = k.parallel_rows();
    let work_per_row = k.work_per_row();
    let unblocked = RowSchedule {
        rows,
        work_per_row,
        blocks: None,
    };
    let Some(&last) = k.outer.last() else {
        return unblocked;
    };
    let axis = k.outer.len() - 1;
    let stores_distinct = k.stages.iter().all(|stage| match stage {
        Stage::Map { stores, .. } | Stage::Once { stores, .. } => stores.iter().all(|st| {
            k.views
                .get(st.view as usize)
                .and_then(|v| v.strides.get(axis))
                .is_some_and(|&s| s != 0)
        }),
        Stage::Reduce { .. } => true,
    });
    if !k.inner.is_empty() || last < 2 * BLOCK_LEN || !stores_distinct {
        return unblocked;
    }
    let count = last.div_ceil(BLOCK_LEN);
    RowSchedule {
        rows: rows.saturating_mul(count),
        work_per_row: BLOCK_LEN.saturating_mul(k.stages.len() as u64),
        blocks: Some(count),
    }
}

/// Rejects the types this backend does not compute in (F16) before any code is emitted.
fn check_types(kernel: &Kernel, lk: &LoopKernel) -> Result<(), CpuError> {
    let unsupported = |what: String| CpuError::Unsupported {
        kernel: kernel.name.clone(),
        message: what,
    };
    for (idx, view) in lk.views.iter().enumerate() {
        if clif_type(view.elem).is_none() {
            return Err(unsupported(format!(
                "view {idx} has element type {}",
                view.elem.name()
            )));
        }
    }
    for (stage_idx, stage) in lk.stages.iter().enumerate() {
        let insts = stage_insts(stage);
        if let Some(inst) = insts.iter().find(|i| clif_type(i.ty).is_none()) {
            return Err(unsupported(format!(
                "stage {stage_idx} computes in {}",
                inst.ty.name()
            )));
        }
        if let Stage::Reduce { ty, .. } = stage {
            if clif_type(*ty).is_none() {
                return Err(unsupported(format!(
                    "stage {stage_idx} reduces in {}",
                    ty.name()
                )));
            }
        }
    }
    Ok(())
}

pub(crate) fn stage_insts(stage: &Stage) -> &[Inst] {
    match stage {
        Stage::Reduce { insts, .. } | Stage::Map { insts, .. } | Stage::Once { insts, .. } => insts,
    }
}

/// The variables of one `Reduce` stage: its accumulator and, for ArgMax/ArgMin, the best value
/// so far.
#[derive(Copy, Clone)]
struct AccVars {
    acc: Variable,
    best: Option<Variable>,
}

pub(crate) struct LoopEmitter<'f, 'm, 'k> {
    pub cx: FnCx<'f, 'm>,
    pub k: &'k LoopKernel,
    arena: Option<Value>,
    weights: Option<Value>,
    /// The number of leading outer axes that index rows.
    n_row_axes: usize,
    /// The number of blocks the last outer axis is cut into (see [`RowSchedule`]).
    blocks: Option<u64>,
    /// In a blocked row: the index of the block's first element on the last outer axis. In-row
    /// indices of that axis count from it; the row bases include it.
    block_offset: Option<Value>,
    /// Per view: the address of its element at the current row with every in-row index 0.
    pub row_base: Vec<Value>,
    acc: Vec<Option<AccVars>>,
    /// How many stages (or whole rows) got a SIMD loop.
    pub vectorized: usize,
}

impl<'f, 'm, 'k> LoopEmitter<'f, 'm, 'k> {
    fn new(cx: FnCx<'f, 'm>, k: &'k LoopKernel) -> Self {
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
            n_row_axes,
            blocks: row_schedule(k).blocks,
            block_offset: None,
            row_base: Vec::new(),
            acc: vec![None; k.stages.len()],
            vectorized: 0,
        }
    }

    pub(crate) fn unsupported(&self, message: String) -> CpuError {
        self.cx.unsupported(message)
    }

    fn emit_function(&mut self) -> Result<(), CpuError> {
        let entry = self.cx.b.create_block();
        self.cx.b.append_block_params_for_function_params(entry);
        self.cx.b.switch_to_block(entry);
        self.cx.b.seal_block(entry);
        let params = self.cx.b.block_params(entry).to_vec();
        let (row_begin, row_end) = (params[2], params[3]);
        self.arena = Some(params[0]);
        self.weights = Some(params[1]);
        let rows = row_schedule(self.k).rows;
        let exit = self.cx.b.create_block();
        if rows == 0 {
            self.cx.b.ins().jump(exit, &[]);
        } else {
            self.emit_rows(row_begin, row_end, exit)?;
        }
        self.cx.b.switch_to_block(exit);
        self.cx.b.ins().return_(&[]);
        Ok(())
    }

    /// The row loop: decompose `row_begin` into row-axis indices, run each row, advance the
    /// indices like an odometer.
    fn emit_rows(
        &mut self,
        row_begin: Value,
        row_end: Value,
        exit: cranelift_codegen::ir::Block,
    ) -> Result<(), CpuError> {
        let start = self.cx.b.create_block();
        let empty = self
            .cx
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, row_begin, row_end);
        self.cx.b.ins().brif(empty, exit, &[], start, &[]);
        self.cx.b.switch_to_block(start);
        self.cx.b.seal_block(start);

        // The odometer's axes: the row axes, then the block axis of a blocked kernel.
        let mut extents: Vec<u64> = self.k.outer[..self.n_row_axes].to_vec();
        extents.extend(self.blocks);
        let n = extents.len();
        let idx_vars: Vec<Variable> = (0..n).map(|_| self.cx.b.declare_var(types::I64)).collect();
        let mut rest = row_begin;
        for a in (0..n).rev() {
            let extent = self.cx.b.ins().iconst(types::I64, extents[a] as i64);
            let idx = self.cx.b.ins().urem(rest, extent);
            self.cx.b.def_var(idx_vars[a], idx);
            rest = self.cx.b.ins().udiv(rest, extent);
        }
        let row_var = self.cx.b.declare_var(types::I64);
        self.cx.b.def_var(row_var, row_begin);
        let row_block = self.cx.b.create_block();
        self.cx.b.ins().jump(row_block, &[]);
        self.cx.b.switch_to_block(row_block);

        let mut row_idx: Vec<Value> = idx_vars.iter().map(|&v| self.cx.b.use_var(v)).collect();
        let block = if self.blocks.is_some() {
            row_idx.pop()
        } else {
            None
        };
        self.block_offset = block.map(|b| self.cx.b.ins().imul_imm_s(b, BLOCK_LEN as i64));
        self.compute_row_bases(&row_idx);
        self.emit_row_body(&row_idx, block)?;

        let row = self.cx.b.use_var(row_var);
        let next = self.cx.b.ins().iadd_imm_s(row, 1);
        self.cx.b.def_var(row_var, next);
        let done = self.cx.b.ins().icmp(IntCC::Equal, next, row_end);
        let advance = self.cx.b.create_block();
        self.cx.b.ins().brif(done, exit, &[], advance, &[]);
        self.cx.b.switch_to_block(advance);
        self.cx.b.seal_block(advance);
        // Odometer: bump the last row axis; on wrap-around reset it and carry into the one before.
        for a in (0..n).rev() {
            let idx = self.cx.b.use_var(idx_vars[a]);
            let bumped = self.cx.b.ins().iadd_imm_s(idx, 1);
            if a == 0 {
                // The first axis never wraps while rows remain.
                self.cx.b.def_var(idx_vars[a], bumped);
                break;
            }
            let wrapped = self
                .cx
                .b
                .ins()
                .icmp_imm_s(IntCC::Equal, bumped, extents[a] as i64);
            let zero = self.cx.b.ins().iconst(types::I64, 0);
            let new_idx = self.cx.b.ins().select(wrapped, zero, bumped);
            self.cx.b.def_var(idx_vars[a], new_idx);
            let carry = self.cx.b.create_block();
            self.cx.b.ins().brif(wrapped, carry, &[], row_block, &[]);
            self.cx.b.switch_to_block(carry);
            self.cx.b.seal_block(carry);
        }
        self.cx.b.ins().jump(row_block, &[]);
        self.cx.b.seal_block(row_block);
        self.cx.b.seal_block(exit);
        Ok(())
    }

    fn compute_row_bases(&mut self, row_idx: &[Value]) {
        let arena = self
            .arena
            .expect("the entry block sets the arena pointer before any row");
        let weights = self
            .weights
            .expect("the entry block sets the weights pointer before any row");
        self.row_base.clear();
        for view in &self.k.views {
            let region = match view.region {
                Region::Arena => arena,
                Region::Weights => weights,
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

    /// One row: with `inner` empty, the loop over the last outer axis (or over one `block` of
    /// it); otherwise each stage over the inner axes in turn.
    fn emit_row_body(&mut self, row_idx: &[Value], block: Option<Value>) -> Result<(), CpuError> {
        let k = self.k;
        let point: Vec<Value> = row_idx.to_vec();
        if k.inner.is_empty() {
            let Some(&last) = k.outer.last() else {
                return self.emit_all_stages(&point);
            };
            let (Some(count), Some(block)) = (self.blocks, block) else {
                return self.emit_last_axis(&point, last);
            };
            // Every block but the last has BLOCK_LEN elements: one body for each length.
            let last_len = last - (count - 1) * BLOCK_LEN;
            let is_last = self
                .cx
                .b
                .ins()
                .icmp_imm_s(IntCC::Equal, block, count as i64 - 1);
            let full = self.cx.b.create_block();
            let short = self.cx.b.create_block();
            let merge = self.cx.b.create_block();
            self.cx.b.ins().brif(is_last, short, &[], full, &[]);
            for (body, len) in [(full, BLOCK_LEN), (short, last_len)] {
                self.cx.b.switch_to_block(body);
                self.cx.b.seal_block(body);
                self.emit_last_axis(&point, len)?;
                self.cx.b.ins().jump(merge, &[]);
            }
            self.cx.b.switch_to_block(merge);
            self.cx.b.seal_block(merge);
            return Ok(());
        }
        let inner_empty = k.inner.contains(&0);
        let zero = self.cx.b.ins().iconst(types::I64, 0);
        for (s, stage) in k.stages.iter().enumerate() {
            match stage {
                Stage::Reduce { .. } => {
                    self.init_acc(s)?;
                    if !inner_empty && !simd::try_emit_nest(self, s, &point)? {
                        let mut p = point.clone();
                        p.resize(k.n_axes(), zero);
                        self.nest(s, 0, &mut p)?;
                    }
                }
                Stage::Map { .. } => {
                    if !inner_empty && !simd::try_emit_nest(self, s, &point)? {
                        let mut p = point.clone();
                        p.resize(k.n_axes(), zero);
                        self.nest(s, 0, &mut p)?;
                    }
                }
                Stage::Once { insts, stores } => {
                    let mut p = point.clone();
                    p.resize(k.n_axes(), zero);
                    self.emit_stores(insts, stores, &p)?;
                }
            }
        }
        Ok(())
    }

    /// With `inner` empty: the loop over `len` points of the last outer axis (from the block
    /// offset, if any), all stages at each.
    fn emit_last_axis(&mut self, row_point: &[Value], len: u64) -> Result<(), CpuError> {
        if len == 0 || simd::try_emit_row(self, row_point, len)? {
            return Ok(());
        }
        let mut point = row_point.to_vec();
        let (open, j) = self.cx.loop_begin(len as i64, 1);
        point.push(j);
        self.emit_all_stages(&point)?;
        self.cx.loop_end(open);
        Ok(())
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

    /// With `inner` empty: every stage once at `point`.
    fn emit_all_stages(&mut self, point: &[Value]) -> Result<(), CpuError> {
        for (s, stage) in self.k.stages.iter().enumerate() {
            match stage {
                Stage::Reduce { .. } => {
                    self.init_acc(s)?;
                    self.fold_at(s, point)?;
                }
                Stage::Map { insts, stores } | Stage::Once { insts, stores } => {
                    self.emit_stores(insts, stores, point)?;
                }
            }
        }
        Ok(())
    }

    /// The loop nest over the inner axes from `depth` on, running stage `s` at each point.
    fn nest(&mut self, s: usize, depth: usize, point: &mut Vec<Value>) -> Result<(), CpuError> {
        let k = self.k;
        if depth == k.inner.len() {
            return match &k.stages[s] {
                Stage::Reduce { .. } => self.fold_at(s, point),
                Stage::Map { insts, stores } | Stage::Once { insts, stores } => {
                    self.emit_stores(insts, stores, point)
                }
            };
        }
        let axis = k.outer.len() + depth;
        let (open, iv) = self.cx.loop_begin(k.inner[depth] as i64, 1);
        point[axis] = iv;
        self.nest(s, depth + 1, point)?;
        self.cx.loop_end(open);
        Ok(())
    }

    fn init_acc(&mut self, s: usize) -> Result<(), CpuError> {
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
            let value = operand(&vals, store.value, self)?;
            let addr = self.address(store.view, point, &[], &[])?;
            self.cx.b.ins().store(mem_flags(), value, addr, 0);
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
        })
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
        if view.guards.is_empty() {
            let addr = self.address(view_idx, point, indices, vals)?;
            return Ok(self.cx.b.ins().load(ty, mem_flags(), addr, 0));
        }
        // Guarded: branch around the access, which may be out of bounds where a guard fails.
        let ok = self.guards_hold(view, point);
        let pad = self.cx.pad_value(view.elem, view.pad)?;
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
        let loaded = self.cx.b.ins().load(ty, mem_flags(), addr, 0);
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
