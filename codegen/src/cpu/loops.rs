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
//! This file is the function-level half (entry block, row loop, each row's stages); the
//! per-point half, shared with the SIMD forms of `simd.rs`, is `emitter.rs`.
//!
//! Guarantees: for a validated kernel the function reads and writes only addresses the
//! validator bounded (guarded loads branch around the memory access; indirect indices are
//! wrapped and clamped before use), and no emitted instruction traps.

use super::emitter::LoopEmitter;
use super::error::CpuError;
use super::func::{clif_type, FnCx, HelperIds};
use super::simd;
use crate::kernel::{Inst, Kernel, LoopKernel, Stage};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, InstBuilder, Value};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage, Module};

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
    for ty in [ptr, ptr, ptr, types::I64, types::I64] {
        sig.params.push(AbiParam::new(ty));
    }
    module.clear_context(ctx);
    ctx.func.signature = sig.clone();
    let target_config = module.target_config();
    let n_vectorized;
    {
        let b = FunctionBuilder::new(&mut ctx.func, fctx);
        let cx = FnCx::new(b, module, helper_ids, &kernel.name);
        let mut emitter = LoopEmitter::new(cx, lk, row_schedule(lk).blocks);
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
/// nonzero stride, and no scatter or accumulation), so blocks never write the same element.
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
            // A scatter's element is chosen by data, so only whole rows are known disjoint.
            !st.is_scatter()
                && k.views
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

/// Rejects, before any code is emitted, instructions typed with a storage type (which only
/// views may have; [`Kernel::validate`] rejects them too) and any type without a Cranelift form.
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
        if let Some(inst) = insts
            .iter()
            .find(|i| i.ty.is_storage_only() || clif_type(i.ty).is_none())
        {
            return Err(unsupported(format!(
                "stage {stage_idx} computes in {}",
                inst.ty.name()
            )));
        }
        if let Stage::Reduce { ty, .. } = stage {
            if ty.is_storage_only() || clif_type(*ty).is_none() {
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

/// The function-level half of emission: the entry block, the row loop and each row's stages
/// (the per-point half is `emitter.rs`).
impl LoopEmitter<'_, '_, '_> {
    fn emit_function(&mut self) -> Result<(), CpuError> {
        let entry = self.cx.b.create_block();
        self.cx.b.append_block_params_for_function_params(entry);
        self.cx.b.switch_to_block(entry);
        self.cx.b.seal_block(entry);
        let params = self.cx.b.block_params(entry).to_vec();
        let (row_begin, row_end) = (params[3], params[4]);
        self.arena = Some(params[0]);
        self.weights = Some(params[1]);
        self.state = Some(params[2]);
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
}
