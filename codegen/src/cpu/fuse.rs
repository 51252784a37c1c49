//! A peephole of the CPU backend: a clamp of a contraction's result in place (ReLU: `max(x,
//! 0)`; ReLU6 and Clip: a `max` and a `min` with constants), the loop kernel right after the
//! contraction, runs inside it: the GEMM clamps each block it finished while the block is in
//! its thread's cache, the direct convolution as it stores its accumulators. The loop kernel
//! then does nothing. The program is unchanged (every other backend and the reference run
//! the two kernels as they are); this only saves the CPU a pass over the result and a
//! dispatch to the workers.
//!
//! Guarantees: a clamp is fused only when the loop reads and writes, in place and unguarded,
//! exactly the elements of the contraction's result (both dense over the same bytes, so no
//! batch index of the contraction writes another's elements), in the contraction's element
//! type, and its body is a chain of `max`/`min` with constants; the values are those the loop
//! would store (NaN stays NaN), except that `max(-0.0, 0.0)` may keep `-0.0`.

use crate::kernel::{BinaryOp, Contract, InstKind, Kernel, KernelBody, LoopKernel, Region, Stage};

/// The clamp `[lo, hi]` that `next` applies to `c`'s result in place, if it is one.
pub(super) fn fused_clamp(c: &Contract, next: &Kernel) -> Option<(f64, f64)> {
    let KernelBody::Loop(lk) = &next.body else {
        return None;
    };
    let (view, clamp) = clamp_in_place(lk)?;
    let view = &lk.views[view as usize];
    if view.region != c.c.region || view.region != Region::Arena || view.elem != c.elem {
        return None;
    }
    let axes = lk
        .outer
        .iter()
        .chain(&lk.inner)
        .copied()
        .zip(view.strides.iter().copied());
    let loop_elems = dense_elems(axes)?;
    let c_axes = c
        .batch
        .iter()
        .copied()
        .zip(c.c.batch_strides.iter().copied())
        .chain([(c.m, c.c.row_stride), (c.n, c.c.col_stride)]);
    let c_elems = dense_elems(c_axes)?;
    (loop_elems == c_elems && view.byte_offset == c.c.byte_offset).then_some(clamp)
}

/// The view a loop kernel clamps in place and the clamp: one `Map` stage storing, into the
/// unguarded view it loads from, the loaded value through `max`/`min` with constants.
fn clamp_in_place(lk: &LoopKernel) -> Option<(u32, (f64, f64))> {
    let [Stage::Map { insts, stores }] = lk.stages.as_slice() else {
        return None;
    };
    let [store] = stores.as_slice() else {
        return None;
    };
    if store.is_scatter() {
        return None;
    }
    // The value of each instruction: the loaded element clamped to (lo, hi), or a constant.
    enum Value {
        Clamped(u32, f64, f64),
        Const(f64),
    }
    let mut values = Vec::with_capacity(insts.len());
    for inst in insts {
        let value = match &inst.kind {
            InstKind::Load { view } => Value::Clamped(*view, f64::NEG_INFINITY, f64::INFINITY),
            InstKind::Const { bits } => Value::Const(f64::from_bits(*bits)),
            InstKind::Binary { op, lhs, rhs } => {
                let (x, k) = match (values.get(*lhs as usize)?, values.get(*rhs as usize)?) {
                    (Value::Clamped(v, lo, hi), Value::Const(k))
                    | (Value::Const(k), Value::Clamped(v, lo, hi)) => ((*v, *lo, *hi), *k),
                    _ => return None,
                };
                if k.is_nan() {
                    return None;
                }
                let (v, lo, hi) = x;
                match op {
                    BinaryOp::Max => Value::Clamped(v, lo.max(k), hi.max(k)),
                    BinaryOp::Min => Value::Clamped(v, lo.min(k), hi.min(k)),
                    _ => return None,
                }
            }
            _ => return None,
        };
        values.push(value);
    }
    let Value::Clamped(loaded, lo, hi) = values.get(store.value as usize)? else {
        return None;
    };
    let (load, out) = (
        lk.views.get(*loaded as usize)?,
        lk.views.get(store.view as usize)?,
    );
    let in_place = load.region == out.region
        && load.elem == out.elem
        && load.byte_offset == out.byte_offset
        && load.strides == out.strides
        && load.guards.is_empty()
        && out.guards.is_empty();
    // A clamp to the whole line is no clamp at all (and the loop may be something else).
    let clamps = *lo > f64::NEG_INFINITY || *hi < f64::INFINITY;
    (in_place && clamps).then_some((store.view, (*lo, *hi)))
}

/// The number of elements of a view over `axes` (extent, stride) when they are dense: no
/// element twice, none skipped (the strides, without axes of extent 1, are 1 and then each
/// the product of the faster axes' extents); `None` otherwise.
fn dense_elems(axes: impl Iterator<Item = (u64, i64)>) -> Option<u64> {
    let mut axes: Vec<(u64, i64)> = axes.filter(|&(e, _)| e != 1).collect();
    if axes.iter().any(|&(e, _)| e == 0) {
        return None;
    }
    axes.sort_by_key(|&(_, s)| s);
    let mut expect = 1i64;
    for (e, s) in axes {
        if s != expect {
            return None;
        }
        expect = expect.checked_mul(i64::try_from(e).ok()?)?;
    }
    u64::try_from(expect).ok()
}

#[cfg(test)]
mod tests {
    use super::dense_elems;

    #[test]
    fn dense_views_cover_each_element_once() {
        assert_eq!(dense_elems([(4, 8), (8, 1)].into_iter()), Some(32));
        assert_eq!(dense_elems([(1, 99), (4, 8), (8, 1)].into_iter()), Some(32));
        assert_eq!(dense_elems([(8, 1), (4, 8)].into_iter()), Some(32));
        // Padded rows, a broadcast, a reversed axis, overlapping axes.
        assert_eq!(dense_elems([(4, 9), (8, 1)].into_iter()), None);
        assert_eq!(dense_elems([(4, 0), (8, 1)].into_iter()), None);
        assert_eq!(dense_elems([(4, -8), (8, 1)].into_iter()), None);
        assert_eq!(dense_elems([(4, 4), (8, 1)].into_iter()), None);
        assert_eq!(dense_elems([(0, 1)].into_iter()), None);
    }
}
