//! SIMD lowering (f32x4) of the loop shapes that dominate run time: elementwise rows over a
//! contiguous last axis, and Map/Sum/Max/Min stages over a contiguous innermost inner axis.
//!
//! A stage qualifies when, along the vectorized axis, every instruction is either *uniform*
//! (independent of that axis: constants, accumulators, loads with stride 0, ops on uniform
//! values) or computes in f32 (lanes of an f32x4) or bool (lanes of an i32x4 mask), loads and
//! stores step by exactly one f32 element, and no guard or indirect index depends on the axis.
//! A stage with an indirect or accumulating store never qualifies.
//! Uniform instructions are emitted once outside the vector loop; `exp`, `tanh` and `erf` are
//! inline polynomials (`vmath.rs`), and other ops without a vector instruction call a 4-lane
//! helper through a stack slot. The vector loop is unrolled twice (8 elements), followed by at
//! most one 4-wide step and a scalar loop for the last `extent % 4` elements. A stage that
//! stores or sums an `exp`, `tanh` or `erf` first runs 16 elements at a time on a host with
//! AVX2 or AVX-512: four bodies in lockstep whose transcendental is one call to a 16-lane
//! helper (`vmath::native`, the same polynomial in the host's widest vectors, bit for bit); a
//! sum's bodies alternate between two partial vectors as the 8-element loop's do, so its order
//! is unchanged. A maximum or minimum reduction runs 16 elements at a time into four partial
//! vectors (the order does not change its result).
//!
//! Each entry point returns `Ok(false)` without emitting anything when its shape does not
//! qualify, and the caller then emits the scalar loop, so vectorization never changes which
//! kernels compile. Results equal the scalar path's bit for bit, except that Sum reductions
//! add in a different order and `exp`, `tanh` and `erf` are within 2 ulp of the scalar path's
//! libm results (see `vmath.rs`).

use super::emitter::{mem_flags, LoopEmitter};
use super::error::CpuError;
use super::helpers;
use super::scalar::{float_cc, transcendental_name};
use super::vmath;
use crate::kernel::{
    BinaryOp, Inst, InstKind, LoopKernel, ReduceOp, Scalar, Stage, Store, UnaryOp,
};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::Variable;

/// How an instruction varies along the vectorized axis.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Lane {
    /// The same at every point of the axis: a scalar computed once.
    Uniform,
    /// An f32 per point: an f32x4.
    F32,
    /// A bool per point: an i32x4 of all-ones or all-zeros lanes.
    Mask,
}

/// What a vectorized stage does with its values at each point.
enum Sink<'a> {
    Stores(&'a [Store]),
    Reduce {
        op: ReduceOp,
        value: u32,
        /// Partial vectors: a sum uses the first two (points 4 apart alternate), a maximum or
        /// minimum all four in its 16-point loop (their order does not change the result, and
        /// four hide the latency of Cranelift's IEEE `fmax`/`fmin` sequences: a ReduceMax
        /// over rows of 128 took six times a ReduceSum's time with two).
        partials: [Variable; 4],
    },
}

/// Classifies `insts` along `axis`, or `None` if some instruction has no vector form.
fn classify(k: &LoopKernel, insts: &[Inst], axis: usize) -> Option<Vec<Lane>> {
    let mut lanes: Vec<Lane> = Vec::with_capacity(insts.len());
    for inst in insts {
        let lane_of = |id: u32| lanes.get(id as usize).copied();
        let all_uniform = |ids: &[u32]| -> Option<bool> {
            let mut uniform = true;
            for &id in ids {
                uniform &= lane_of(id)? == Lane::Uniform;
            }
            Some(uniform)
        };
        let lane = match &inst.kind {
            InstKind::Load { view } | InstKind::LoadIndirect { view, .. } => {
                if let InstKind::LoadIndirect { indices, .. } = &inst.kind {
                    let ids: Vec<u32> = indices.iter().map(|ix| ix.index).collect();
                    if !all_uniform(&ids)? {
                        return None;
                    }
                }
                let view = k.views.get(*view as usize)?;
                if view
                    .guards
                    .iter()
                    .any(|g| g.coeffs.get(axis).copied().unwrap_or(0) != 0)
                {
                    return None;
                }
                match view.strides.get(axis)? {
                    0 => Lane::Uniform,
                    // A vector load does not test guards: a guarded view (even one whose
                    // guards do not depend on this axis) takes the scalar path.
                    1 if view.elem == Scalar::F32 && view.guards.is_empty() => Lane::F32,
                    _ => return None,
                }
            }
            InstKind::Const { .. } | InstKind::Acc { .. } => Lane::Uniform,
            InstKind::Index { axis: a } => {
                if *a as usize == axis {
                    return None;
                }
                Lane::Uniform
            }
            InstKind::Unary { op, arg } => match (lane_of(*arg)?, op) {
                (Lane::Uniform, _) => Lane::Uniform,
                (Lane::F32, UnaryOp::IsNan | UnaryOp::IsPosInf | UnaryOp::IsNegInf) => Lane::Mask,
                (Lane::F32, UnaryOp::Not | UnaryOp::BitNot) => return None,
                (Lane::F32, _) => Lane::F32,
                (Lane::Mask, UnaryOp::Not) => Lane::Mask,
                (Lane::Mask, _) => return None,
            },
            InstKind::Binary { op, lhs, rhs } => {
                if all_uniform(&[*lhs, *rhs])? {
                    Lane::Uniform
                } else {
                    match (insts.get(*lhs as usize)?.ty, op) {
                        (Scalar::F32, op) if op.is_comparison() => Lane::Mask,
                        (
                            Scalar::F32,
                            BinaryOp::Add
                            | BinaryOp::Sub
                            | BinaryOp::Mul
                            | BinaryOp::Div
                            | BinaryOp::Rem
                            | BinaryOp::FloorMod
                            | BinaryOp::Pow
                            | BinaryOp::Min
                            | BinaryOp::Max,
                        ) => Lane::F32,
                        (
                            Scalar::Bool,
                            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::Eq,
                        ) => Lane::Mask,
                        _ => return None,
                    }
                }
            }
            InstKind::Select { cond, then, else_ } => {
                if all_uniform(&[*cond, *then, *else_])? {
                    Lane::Uniform
                } else {
                    match inst.ty {
                        Scalar::F32 => Lane::F32,
                        Scalar::Bool => Lane::Mask,
                        _ => return None,
                    }
                }
            }
            // Narrowing has no vector form.
            InstKind::Narrow { .. } => return None,
            InstKind::Cast { arg } => {
                let from = insts.get(*arg as usize)?.ty;
                match (lane_of(*arg)?, from, inst.ty) {
                    (Lane::Uniform, _, _) => Lane::Uniform,
                    (Lane::F32, _, Scalar::F32) => Lane::F32,
                    (Lane::F32, _, Scalar::Bool) => Lane::Mask,
                    (Lane::Mask, _, Scalar::F32) => Lane::F32,
                    (Lane::Mask, _, Scalar::Bool) => Lane::Mask,
                    _ => return None,
                }
            }
        };
        lanes.push(lane);
    }
    Some(lanes)
}

/// Whether every store steps by one f32 along `axis` and stores an f32 value.
fn stores_qualify(
    k: &LoopKernel,
    insts: &[Inst],
    lanes: &[Lane],
    stores: &[Store],
    axis: usize,
) -> bool {
    stores.iter().all(|st| {
        let Some(view) = k.views.get(st.view as usize) else {
            return false;
        };
        let value_ok = match (lanes.get(st.value as usize), insts.get(st.value as usize)) {
            (Some(Lane::F32), _) => true,
            (Some(Lane::Uniform), Some(inst)) => inst.ty == Scalar::F32,
            _ => false,
        };
        // A scatter or accumulating store runs point by point on the scalar path.
        !st.is_scatter()
            && view.elem == Scalar::F32
            && view.strides.get(axis) == Some(&1)
            && value_ok
    })
}

/// Emits the in-row loop (`extent` points) of a kernel with `inner` empty in SIMD form, if it
/// qualifies: one `Map` stage, vectorized along the last outer axis.
pub(crate) fn try_emit_row(
    em: &mut LoopEmitter,
    row_point: &[Value],
    extent: u64,
) -> Result<bool, CpuError> {
    let k = em.k;
    let [Stage::Map { insts, stores }] = k.stages.as_slice() else {
        return Ok(false);
    };
    if k.outer.is_empty() {
        return Ok(false);
    }
    let axis = k.outer.len() - 1;
    if extent < 4 {
        return Ok(false);
    }
    let Some(lanes) = classify(k, insts, axis) else {
        return Ok(false);
    };
    if !stores_qualify(k, insts, &lanes, stores, axis) {
        return Ok(false);
    }
    let mut point = row_point.to_vec();
    let zero = em.cx.b.ins().iconst(types::I64, 0);
    point.push(zero);
    vector_axis(
        em,
        0,
        insts,
        &lanes,
        &Sink::Stores(stores),
        axis,
        extent,
        &mut point,
    )?;
    em.vectorized += 1;
    Ok(true)
}

/// Emits stage `s` (a Map, or a Sum/Max/Min reduction in f32) over the inner axes with the
/// innermost one vectorized, if it qualifies.
pub(crate) fn try_emit_nest(
    em: &mut LoopEmitter,
    s: usize,
    row_point: &[Value],
) -> Result<bool, CpuError> {
    let k = em.k;
    let Some(&extent) = k.inner.last() else {
        return Ok(false);
    };
    let axis = k.n_axes() - 1;
    if extent < 4 {
        return Ok(false);
    }
    let (insts, sink_kind) = match &k.stages[s] {
        Stage::Map { insts, stores } => (insts, Ok(stores)),
        Stage::Reduce {
            insts,
            value,
            op,
            ty,
            ..
        } => {
            if *ty != Scalar::F32 || !matches!(op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min) {
                return Ok(false);
            }
            (insts, Err((*op, *value)))
        }
        Stage::Once { .. } => return Ok(false),
    };
    let Some(lanes) = classify(k, insts, axis) else {
        return Ok(false);
    };
    let sink = match sink_kind {
        Ok(stores) => {
            if !stores_qualify(k, insts, &lanes, stores, axis) {
                return Ok(false);
            }
            Sink::Stores(stores)
        }
        Err((op, value)) => {
            if lanes.get(value as usize).is_none() {
                return Ok(false);
            }
            let identity = reduce_identity(op);
            let init = em.cx.b.ins().f32const(identity);
            let init = em.cx.b.ins().splat(types::F32X4, init);
            let partials = [
                em.cx.b.declare_var(types::F32X4),
                em.cx.b.declare_var(types::F32X4),
                em.cx.b.declare_var(types::F32X4),
                em.cx.b.declare_var(types::F32X4),
            ];
            for p in partials {
                em.cx.b.def_var(p, init);
            }
            Sink::Reduce {
                op,
                value,
                partials,
            }
        }
    };
    let zero = em.cx.b.ins().iconst(types::I64, 0);
    let mut point = row_point.to_vec();
    point.resize(k.n_axes(), zero);
    nest_to_innermost(em, s, insts, &lanes, &sink, 0, &mut point)?;
    if let Sink::Reduce { op, partials, .. } = sink {
        // Fold the partial vectors, then their lanes, into the scalar accumulator (which
        // holds the init and the scalar tails). A sum's partials 2 and 3 are never written:
        // adding their -0 changes nothing, so its order is the 8-point loop's.
        let [a, b, c, d] = partials.map(|p| em.cx.b.use_var(p));
        let ab = reduce_vectors(em, op, a, b);
        let cd = reduce_vectors(em, op, c, d);
        let v = reduce_vectors(em, op, ab, cd);
        let lanes: Vec<Value> = (0..4u8).map(|l| em.cx.b.ins().extractlane(v, l)).collect();
        let low = reduce_scalars(em, op, lanes[0], lanes[1]);
        let high = reduce_scalars(em, op, lanes[2], lanes[3]);
        let total = reduce_scalars(em, op, low, high);
        let acc_var = em.acc_var(s)?;
        let acc = em.cx.b.use_var(acc_var);
        let acc = reduce_scalars(em, op, acc, total);
        em.cx.b.def_var(acc_var, acc);
    }
    em.vectorized += 1;
    Ok(true)
}

/// The value that leaves every element unchanged under `op`: -0 for Sum (`-0 + x == x` for
/// every x, +0 included), -inf for Max, +inf for Min.
fn reduce_identity(op: ReduceOp) -> f32 {
    match op {
        ReduceOp::Max => f32::NEG_INFINITY,
        ReduceOp::Min => f32::INFINITY,
        _ => -0.0,
    }
}

fn reduce_vectors(em: &mut LoopEmitter, op: ReduceOp, a: Value, b: Value) -> Value {
    match op {
        ReduceOp::Max => em.cx.b.ins().fmax(a, b),
        ReduceOp::Min => em.cx.b.ins().fmin(a, b),
        _ => em.cx.b.ins().fadd(a, b),
    }
}

fn reduce_scalars(em: &mut LoopEmitter, op: ReduceOp, a: Value, b: Value) -> Value {
    reduce_vectors(em, op, a, b)
}

/// Loops over the inner axes before the innermost one, then runs the vector loop.
#[allow(clippy::too_many_arguments)]
fn nest_to_innermost(
    em: &mut LoopEmitter,
    s: usize,
    insts: &[Inst],
    lanes: &[Lane],
    sink: &Sink,
    depth: usize,
    point: &mut Vec<Value>,
) -> Result<(), CpuError> {
    let k = em.k;
    let axis = k.outer.len() + depth;
    if depth + 1 == k.inner.len() {
        return vector_axis(em, s, insts, lanes, sink, axis, k.inner[depth], point);
    }
    let (open, iv) = em.cx.loop_begin(k.inner[depth] as i64, 1);
    point[axis] = iv;
    nest_to_innermost(em, s, insts, lanes, sink, depth + 1, point)?;
    em.cx.loop_end(open);
    Ok(())
}

/// The vectorized loop over `axis` (extent at least 4) with every other axis fixed by `point`:
/// uniform instructions once, the 8-wide unrolled loop, one 4-wide step, the scalar tail.
#[allow(clippy::too_many_arguments)]
fn vector_axis(
    em: &mut LoopEmitter,
    s: usize,
    insts: &[Inst],
    lanes: &[Lane],
    sink: &Sink,
    axis: usize,
    extent: u64,
    point: &mut [Value],
) -> Result<(), CpuError> {
    // Uniform instructions, with the vectorized index 0 (they do not read it).
    let zero = em.cx.b.ins().iconst(types::I64, 0);
    point[axis] = zero;
    let mut uniform: Vec<Value> = Vec::with_capacity(insts.len());
    // Vector instructions get a placeholder here; no uniform instruction reads them.
    for (i, lane) in lanes.iter().enumerate() {
        let v = if *lane == Lane::Uniform {
            em.emit_inst(insts, i, &uniform, point)?
        } else {
            zero
        };
        uniform.push(v);
    }
    // Broadcasts of the uniform f32 and bool values (unused ones are removed as dead code).
    let mut splats: Vec<Option<Value>> = vec![None; insts.len()];
    for (i, inst) in insts.iter().enumerate() {
        if lanes[i] == Lane::Uniform {
            splats[i] = Some(match inst.ty {
                Scalar::F32 => em.cx.b.ins().splat(types::F32X4, uniform[i]),
                Scalar::Bool => {
                    let wide = em.cx.b.ins().uextend(types::I32, uniform[i]);
                    let mask = em.cx.b.ins().ineg(wide);
                    em.cx.b.ins().splat(types::I32X4, mask)
                }
                _ => continue,
            });
        }
    }
    let extent = extent as i64;
    // A stage that stores or sums an exp, tanh or erf runs 16 points at a time where the
    // host has wide vectors: four bodies in lockstep, each such function one call over their
    // 16 lanes (the same bits as the inline polynomial, see `vmath.rs`); so does a maximum or
    // minimum, into four partials.
    let transcendental = insts
        .iter()
        .zip(lanes)
        .any(|(inst, lane)| *lane == Lane::F32 && wide_helper(inst).is_some());
    let extreme = matches!(
        sink,
        Sink::Reduce {
            op: ReduceOp::Max | ReduceOp::Min,
            ..
        }
    );
    // (Without wide vectors a transcendental keeps its inline 4-lane polynomial.)
    let wide = if transcendental {
        vmath::native::fast()
    } else {
        extreme
    };
    let end16 = if wide { extent - extent % 16 } else { 0 };
    let end8 = extent - extent % 8;
    let end4 = extent - extent % 4;
    let mut vs = VecState {
        insts,
        lanes,
        uniform: &uniform,
        splats: &splats,
        sink,
    };
    if end16 > 0 {
        let (open, j) = em.cx.loop_begin(end16, 16);
        let js: [Value; 4] = std::array::from_fn(|u| em.cx.b.ins().iadd_imm_s(j, 4 * u as i64));
        vs.bodies_x16(em, point, axis, js)?;
        em.cx.loop_end(open);
    }
    if end8 > end16 {
        let (open, j) = em.cx.loop_begin_at(end16, end8, 8);
        point[axis] = j;
        vs.body(em, point, 0)?;
        let j4 = em.cx.b.ins().iadd_imm_s(j, 4);
        point[axis] = j4;
        vs.body(em, point, 1)?;
        em.cx.loop_end(open);
    }
    if end4 > end8 {
        point[axis] = em.cx.b.ins().iconst(types::I64, end8);
        vs.body(em, point, 0)?;
    }
    if extent > end4 {
        let (open, j) = em.cx.loop_begin_at(end4, extent, 1);
        point[axis] = j;
        match sink {
            Sink::Stores(stores) => em.emit_stores(insts, stores, point)?,
            Sink::Reduce { .. } => em.fold_at(s, point)?,
        }
        em.cx.loop_end(open);
    }
    Ok(())
}

/// The values one vector body needs.
struct VecState<'a> {
    insts: &'a [Inst],
    lanes: &'a [Lane],
    uniform: &'a [Value],
    splats: &'a [Option<Value>],
    sink: &'a Sink<'a>,
}

impl VecState<'_> {
    /// The vector value of instruction `id`: its own vector, or the broadcast of a uniform one.
    fn vector(&self, em: &LoopEmitter, vecs: &[Value], id: u32) -> Result<Value, CpuError> {
        let i = id as usize;
        match self.lanes.get(i) {
            Some(Lane::Uniform) => self.splats[i]
                .ok_or_else(|| em.unsupported(format!("instruction {id} has no vector broadcast"))),
            Some(_) => vecs.get(i).copied().ok_or_else(|| {
                em.unsupported(format!("operand {id} is not an earlier instruction"))
            }),
            None => Err(em.unsupported(format!("operand {id} is not an earlier instruction"))),
        }
    }

    /// Four lanes starting at `point[axis]`; `partial` picks the reduction's partial vector.
    fn body(
        &mut self,
        em: &mut LoopEmitter,
        point: &[Value],
        partial: usize,
    ) -> Result<(), CpuError> {
        let insts = self.insts;
        let mut vecs: Vec<Value> = Vec::with_capacity(insts.len());
        for (i, inst) in insts.iter().enumerate() {
            let v = if self.lanes[i] == Lane::Uniform {
                self.uniform[i]
            } else {
                self.vector_inst(em, inst, &vecs, point)?
            };
            vecs.push(v);
        }
        match self.sink {
            Sink::Stores(stores) => {
                for st in stores.iter() {
                    let v = self.vector(em, &vecs, st.value)?;
                    let addr = em.address(st.view, point, &[], &[])?;
                    em.cx.b.ins().store(mem_flags(), v, addr, 0);
                }
            }
            Sink::Reduce {
                op,
                value,
                partials,
            } => {
                let v = self.vector(em, &vecs, *value)?;
                let p = em.cx.b.use_var(partials[partial]);
                let new = reduce_vectors(em, *op, p, v);
                em.cx.b.def_var(partials[partial], new);
            }
        }
        Ok(())
    }

    /// Sixteen lanes from `js[0]`, as four bodies at `js` in lockstep: each instruction for
    /// all four, an exp, tanh or erf as one 16-lane call.
    fn bodies_x16(
        &mut self,
        em: &mut LoopEmitter,
        point: &mut [Value],
        axis: usize,
        js: [Value; 4],
    ) -> Result<(), CpuError> {
        let insts = self.insts;
        let mut vecs: [Vec<Value>; 4] = std::array::from_fn(|_| Vec::with_capacity(insts.len()));
        for (i, inst) in insts.iter().enumerate() {
            if self.lanes[i] == Lane::Uniform {
                for body in vecs.iter_mut() {
                    body.push(self.uniform[i]);
                }
                continue;
            }
            if let (Some(helper), InstKind::Unary { arg, .. }) = (wide_helper(inst), &inst.kind) {
                let mut xs = [js[0]; 4];
                for (x, body) in xs.iter_mut().zip(&vecs) {
                    *x = self.vector(em, body, *arg)?;
                }
                let ys = em.cx.call_lanes_x16(helper, xs)?;
                for (body, y) in vecs.iter_mut().zip(ys) {
                    body.push(y);
                }
                continue;
            }
            for (body, &j) in vecs.iter_mut().zip(&js) {
                point[axis] = j;
                let v = self.vector_inst(em, inst, body, point)?;
                body.push(v);
            }
        }
        let stores = match self.sink {
            Sink::Stores(stores) => stores,
            Sink::Reduce {
                op,
                value,
                partials,
            } => {
                // A sum's bodies take partials 0, 1, 0, 1: the order of the 8-point loop's.
                for (u, body) in vecs.iter().enumerate() {
                    let partial = partials[if *op == ReduceOp::Sum { u % 2 } else { u }];
                    let v = self.vector(em, body, *value)?;
                    let p = em.cx.b.use_var(partial);
                    let new = reduce_vectors(em, *op, p, v);
                    em.cx.b.def_var(partial, new);
                }
                return Ok(());
            }
        };
        for (body, &j) in vecs.iter().zip(&js) {
            point[axis] = j;
            for st in stores.iter() {
                let v = self.vector(em, body, st.value)?;
                let addr = em.address(st.view, point, &[], &[])?;
                em.cx.b.ins().store(mem_flags(), v, addr, 0);
            }
        }
        Ok(())
    }

    fn vector_inst(
        &self,
        em: &mut LoopEmitter,
        inst: &Inst,
        vecs: &[Value],
        point: &[Value],
    ) -> Result<Value, CpuError> {
        Ok(match &inst.kind {
            InstKind::Load { view } => {
                let addr = em.address(*view, point, &[], self.uniform)?;
                em.cx.b.ins().load(types::F32X4, mem_flags(), addr, 0)
            }
            InstKind::LoadIndirect { view, indices } => {
                let addr = em.address(*view, point, indices, self.uniform)?;
                em.cx.b.ins().load(types::F32X4, mem_flags(), addr, 0)
            }
            InstKind::Unary { op, arg } => {
                let x = self.vector(em, vecs, *arg)?;
                self.unary(em, *op, x)?
            }
            InstKind::Binary { op, lhs, rhs } => {
                let l = self.vector(em, vecs, *lhs)?;
                let r = self.vector(em, vecs, *rhs)?;
                let ty = em.inst_ty(self.insts, *lhs)?;
                self.binary(em, *op, l, r, ty)?
            }
            InstKind::Select { cond, then, else_ } => {
                let c = self.vector(em, vecs, *cond)?;
                let t = self.vector(em, vecs, *then)?;
                let e = self.vector(em, vecs, *else_)?;
                if inst.ty == Scalar::F32 {
                    let mask = as_f32x4(em, c);
                    em.cx.b.ins().bitselect(mask, t, e)
                } else {
                    em.cx.b.ins().bitselect(c, t, e)
                }
            }
            InstKind::Cast { arg } => {
                let x = self.vector(em, vecs, *arg)?;
                match (self.lanes[*arg as usize], inst.ty) {
                    (Lane::F32, Scalar::Bool) => {
                        let zero = splat_f32(em, 0.0);
                        em.cx.b.ins().fcmp(FloatCC::NotEqual, x, zero)
                    }
                    (Lane::Mask, Scalar::F32) => {
                        let one = splat_f32(em, 1.0);
                        let zero = splat_f32(em, 0.0);
                        let mask = as_f32x4(em, x);
                        em.cx.b.ins().bitselect(mask, one, zero)
                    }
                    _ => x,
                }
            }
            InstKind::Const { .. } | InstKind::Index { .. } | InstKind::Acc { .. } => {
                return Err(em.unsupported("a uniform instruction in a vector body".into()))
            }
            InstKind::Narrow { .. } => {
                return Err(em.unsupported("a narrowing in a vector body".into()))
            }
        })
    }

    fn unary(&self, em: &mut LoopEmitter, op: UnaryOp, x: Value) -> Result<Value, CpuError> {
        let b = &mut em.cx.b;
        Ok(match op {
            UnaryOp::Neg => b.ins().fneg(x),
            UnaryOp::Abs => b.ins().fabs(x),
            UnaryOp::Sqrt => b.ins().sqrt(x),
            UnaryOp::Floor => b.ins().floor(x),
            UnaryOp::Ceil => b.ins().ceil(x),
            UnaryOp::Round => b.ins().nearest(x),
            UnaryOp::Reciprocal => {
                let one = splat_f32(em, 1.0);
                em.cx.b.ins().fdiv(one, x)
            }
            UnaryOp::Sign => {
                let zero = splat_f32(em, 0.0);
                let one = splat_f32(em, 1.0);
                let minus_one = splat_f32(em, -1.0);
                let pos = em.cx.b.ins().fcmp(FloatCC::GreaterThan, x, zero);
                let neg = em.cx.b.ins().fcmp(FloatCC::LessThan, x, zero);
                let pos = as_f32x4(em, pos);
                let neg = as_f32x4(em, neg);
                let low = em.cx.b.ins().bitselect(neg, minus_one, x);
                em.cx.b.ins().bitselect(pos, one, low)
            }
            UnaryOp::IsNan => b.ins().fcmp(FloatCC::Unordered, x, x),
            UnaryOp::IsPosInf | UnaryOp::IsNegInf => {
                let inf = if op == UnaryOp::IsPosInf {
                    f32::INFINITY
                } else {
                    f32::NEG_INFINITY
                };
                let inf = splat_f32(em, inf);
                em.cx.b.ins().fcmp(FloatCC::Equal, x, inf)
            }
            UnaryOp::Not => b.ins().bnot(x),
            UnaryOp::Exp => vmath::exp(b, types::F32X4, x),
            UnaryOp::Tanh => vmath::tanh(b, types::F32X4, x),
            UnaryOp::Erf => vmath::erf(b, types::F32X4, x),
            _ => {
                let name = transcendental_name(op)
                    .ok_or_else(|| em.unsupported(format!("{op:?} has no vector form")))?;
                let helper = helpers::lanes_x4(name)
                    .ok_or_else(|| em.unsupported(format!("{op:?} of f32")))?;
                em.cx.call_lanes_x4(helper, &[x])?
            }
        })
    }

    fn binary(
        &self,
        em: &mut LoopEmitter,
        op: BinaryOp,
        l: Value,
        r: Value,
        ty: Scalar,
    ) -> Result<Value, CpuError> {
        if ty == Scalar::Bool {
            return Ok(match op {
                BinaryOp::And => em.cx.b.ins().band(l, r),
                BinaryOp::Or => em.cx.b.ins().bor(l, r),
                BinaryOp::Xor => em.cx.b.ins().bxor(l, r),
                _ => em.cx.b.ins().icmp(IntCC::Equal, l, r),
            });
        }
        Ok(match op {
            BinaryOp::Add => em.cx.b.ins().fadd(l, r),
            BinaryOp::Sub => em.cx.b.ins().fsub(l, r),
            BinaryOp::Mul => em.cx.b.ins().fmul(l, r),
            BinaryOp::Div => em.cx.b.ins().fdiv(l, r),
            BinaryOp::Min => em.cx.b.ins().fmin(l, r),
            BinaryOp::Max => em.cx.b.ins().fmax(l, r),
            BinaryOp::Pow | BinaryOp::Rem | BinaryOp::FloorMod => {
                let name = if op == BinaryOp::Pow { "pow" } else { "fmod" };
                let helper = helpers::lanes_x4(name)
                    .ok_or_else(|| em.unsupported(format!("{op:?} of f32")))?;
                let v = em.cx.call_lanes_x4(helper, &[l, r])?;
                if op == BinaryOp::FloorMod {
                    floor_mod_fixup_x4(em, v, r)
                } else {
                    v
                }
            }
            _ if op.is_comparison() => em.cx.b.ins().fcmp(float_cc(op), l, r),
            _ => return Err(em.unsupported(format!("{op:?} has no f32x4 form"))),
        })
    }
}

/// Lane-wise floor-modulus fixup of `r = fmod(a, b)`: `r + b` where `r != 0` and the signs
/// of `r` and `b` differ (as the scalar `floor_mod_fixup`).
/// The 16-lane helper of an f32 exp, tanh or erf instruction.
fn wide_helper(inst: &Inst) -> Option<helpers::Helper> {
    match inst.kind {
        InstKind::Unary { op, .. } if inst.ty == Scalar::F32 => match op {
            UnaryOp::Exp => helpers::lanes_x16("exp"),
            UnaryOp::Tanh => helpers::lanes_x16("tanh"),
            UnaryOp::Erf => helpers::lanes_x16("erf"),
            _ => None,
        },
        _ => None,
    }
}

fn floor_mod_fixup_x4(em: &mut LoopEmitter, r: Value, rhs: Value) -> Value {
    let zero = splat_f32(em, 0.0);
    let b = &mut em.cx.b;
    let r_nonzero = b.ins().fcmp(FloatCC::NotEqual, r, zero);
    let r_neg = b.ins().fcmp(FloatCC::LessThan, r, zero);
    let b_neg = b.ins().fcmp(FloatCC::LessThan, rhs, zero);
    let differ = b.ins().bxor(r_neg, b_neg);
    let fix = b.ins().band(r_nonzero, differ);
    let adjusted = b.ins().fadd(r, rhs);
    let fix = as_f32x4(em, fix);
    em.cx.b.ins().bitselect(fix, adjusted, r)
}

fn splat_f32(em: &mut LoopEmitter, value: f32) -> Value {
    let c = em.cx.b.ins().f32const(value);
    em.cx.b.ins().splat(types::F32X4, c)
}

/// An i32x4 mask reinterpreted as f32x4, for `bitselect` between float vectors.
fn as_f32x4(em: &mut LoopEmitter, mask: Value) -> Value {
    em.cx
        .b
        .ins()
        .bitcast(types::F32X4, MemFlagsData::new(), mask)
}
