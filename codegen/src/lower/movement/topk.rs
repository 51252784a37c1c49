//! TopK as repeated selection, in one loop kernel without scratch memory: the outer loop walks
//! every row (all axes but `axis`), the inner loop the row. Slot `r` of the output is the
//! best element after slot `r - 1` in the order the reference sorts by (value descending for
//! `largest`, ascending otherwise; ties by index ascending): a `Reduce` finds the best value
//! among the elements ordered after the previous slot's `(value, index)` (read with `Acc`), a
//! second finds the lowest index holding that value, and a final `Once` stage stores all
//! slots. The cost is `O(k * n)` per row, which suits the small `k` of models; NaN ordering is
//! not the reference's. With `K` from data (a graph input), the results have a bounded dim: the
//! kernel selects as many slots as the axis is long, and the run's K, clamped to
//! `[0, axis length]`, goes into each result's extent slot (`docs/dynamic-extents.md`).

use super::super::build::Insts;
use super::super::{unsupported, LowerCtx, LowerResult};
use super::common::{loop_kernel, norm_axis};
use super::output;
use crate::kernel::{
    BinaryOp, InstKind, Kernel, KernelBody, LoopKernel, ReduceOp, Region, Scalar, Stage, Store,
    View,
};
use memc_ir::OpId;

/// Most output slots; each costs three stages.
const MAX_K: u64 = 256;

pub fn top_k(ctx: &LowerCtx, op: OpId) -> LowerResult {
    // With `K` from data the results are planned for the axis length (a bounded dim): the
    // kernel below selects that many slots, and a second one writes `min(max(K, 0), n)` into
    // each result's extent slot, so the run returns the first K.
    let mut kernels = select_kernel(ctx, op)?;
    kernels.extend(extent_kernel(ctx, op)?);
    Ok(kernels)
}

/// The kernel writing the run's K into the extent slot of each used result, when the results
/// have a bounded dim (none otherwise).
fn extent_kernel(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let mut slots = Vec::new();
    for index in 0..2 {
        if ctx.result_used(op, index) {
            if let Some(slot) = ctx.extent_slot(ctx.op(op).results[index])? {
                slots.push(slot);
            }
        }
    }
    let Some(first) = slots.first() else {
        return Ok(Vec::new());
    };
    let bound = ctx.result(op, 0)?.shape[first.axis as usize];
    let k = ctx.input(op, 1)?;
    let mut views = vec![k.view_with(vec![])];
    for slot in &slots {
        views.push(View {
            region: Region::Arena,
            elem: Scalar::I64,
            byte_offset: slot.byte_offset as i64,
            strides: vec![],
            guards: Vec::new(),
            pad: 0,
        });
    }
    let mut b = Insts::new();
    let k_value = b.load(&views, 0);
    let k_value = b.cast(k_value, Scalar::I64);
    let zero = b.constant_int(Scalar::I64, 0);
    let n = b.constant_int(Scalar::I64, bound as i64);
    let at_least_zero = b.binary(BinaryOp::Max, k_value, zero);
    let extent = b.binary(BinaryOp::Min, at_least_zero, n);
    let stores = (1..views.len() as u32)
        .map(|v| Store::new(v, extent))
        .collect();
    Ok(vec![Kernel {
        name: ctx.kernel_name(op, 1),
        body: KernelBody::Loop(LoopKernel {
            outer: Vec::new(),
            inner: Vec::new(),
            views,
            stages: vec![Stage::Map {
                insts: b.finish(),
                stores,
            }],
        }),
    }])
}

/// The selection kernel (the module doc).
fn select_kernel(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let Some(values) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let indices = ctx.result(op, 1)?;
    let axis = norm_axis(ctx.attr_int(op, "axis"), x.rank())?;
    let largest = ctx.attr_int(op, "largest") != 0;
    let k = values.shape[axis];
    if k > MAX_K {
        return Err(unsupported(format!("TopK with k = {k} (at most {MAX_K})")));
    }
    if x.elem == Scalar::Bool {
        return Err(unsupported(format!("TopK of {}", x.elem.name())));
    }
    let n = x.shape[axis] as i64;
    let kept: Vec<usize> = (0..x.rank()).filter(|&a| a != axis).collect();
    let outer: Vec<u64> = kept.iter().map(|&a| x.shape[a]).collect();
    let n_axes = kept.len() + 1;
    let on_loops = |strides: &[i64]| {
        let mut s: Vec<i64> = kept.iter().map(|&a| strides[a]).collect();
        s.push(0);
        s
    };
    let mut x_strides = on_loops(&x.strides());
    x_strides[n_axes - 1] = x.strides()[axis];
    let (vs, is) = (values.strides(), indices.strides());
    let mut views = vec![x.view_with(x_strides)];
    for r in 0..k as i64 {
        let mut v = values.view_with(on_loops(&vs));
        v.byte_offset += r * vs[axis] * values.elem.size() as i64;
        let mut i = indices.view_with(on_loops(&is));
        i.byte_offset += r * is[axis] * indices.elem.size() as i64;
        views.push(v);
        views.push(i);
    }
    // The worst value: what a non-candidate contributes to the best-value reduction.
    let worst = match (x.elem.is_float(), largest) {
        (true, true) => f64::NEG_INFINITY.to_bits(),
        (true, false) => f64::INFINITY.to_bits(),
        (false, true) => super::common::int_range(x.elem).0 as u64,
        (false, false) if x.elem.is_unsigned_int() => u64::MAX >> (64 - 8 * x.elem.size()),
        (false, false) => super::common::int_range(x.elem).1 as u64,
    };
    let (better, best_op) = if largest {
        (BinaryOp::Lt, ReduceOp::Max)
    } else {
        (BinaryOp::Gt, ReduceOp::Min)
    };
    let mut stages = Vec::with_capacity(2 * k as usize + 1);
    for r in 0..k as usize {
        // Whether element j comes after slot r - 1: strictly worse, or equal with a larger index.
        let candidate = |insts: &mut Insts| {
            let xv = insts.load(&views, 0);
            let j = insts.index(n_axes - 1);
            if r == 0 {
                return (xv, j, None);
            }
            let prev_v = insts.acc(2 * (r - 1), x.elem);
            let prev_i = insts.acc(2 * (r - 1) + 1, Scalar::I64);
            let worse = insts.binary(better, xv, prev_v);
            let tie = insts.binary(BinaryOp::Eq, xv, prev_v);
            let later = insts.binary(BinaryOp::Gt, j, prev_i);
            let tie_later = insts.binary(BinaryOp::And, tie, later);
            (xv, j, Some(insts.binary(BinaryOp::Or, worse, tie_later)))
        };
        let mut insts = Insts::new();
        let (xv, _, cand) = candidate(&mut insts);
        let value = match cand {
            Some(c) => {
                let w = insts.push(x.elem, InstKind::Const { bits: worst });
                insts.select(c, xv, w)
            }
            None => xv,
        };
        stages.push(Stage::Reduce {
            insts: insts.finish(),
            value,
            op: best_op,
            init: worst,
            ty: x.elem.compute(),
        });
        let mut insts = Insts::new();
        let (xv, j, cand) = candidate(&mut insts);
        let best = insts.acc(2 * r, x.elem);
        let hit = insts.binary(BinaryOp::Eq, xv, best);
        let hit = match cand {
            Some(c) => insts.binary(BinaryOp::And, c, hit),
            None => hit,
        };
        let none = insts.constant_int(Scalar::I64, n);
        let value = insts.select(hit, j, none);
        stages.push(Stage::Reduce {
            insts: insts.finish(),
            value,
            op: ReduceOp::Min,
            init: n as u64,
            ty: Scalar::I64,
        });
    }
    let mut insts = Insts::new();
    let mut stores = Vec::with_capacity(2 * k as usize);
    for r in 0..k as usize {
        let v = insts.acc(2 * r, x.elem);
        let i = insts.acc(2 * r + 1, Scalar::I64);
        let i = insts.cast(i, indices.elem);
        stores.push(Store::new((1 + 2 * r) as u32, v));
        stores.push(Store::new((2 + 2 * r) as u32, i));
    }
    stages.push(Stage::Once {
        insts: insts.finish(),
        stores,
    });
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        outer,
        vec![n as u64],
        views,
        stages,
    )])
}
