//! The ops whose output extent depends on the data: NonZero, Compress and Unique
//! (`docs/dynamic-extents.md`). Each result with a bounded dim (`<=N`) is planned for its bound,
//! with an i64 after its elements, the *extent slot* ([`memc_ir::BoundedLayout`]), which the
//! op's kernels fill with the run's actual extent; the runtime reads it and returns the output
//! trimmed to it.
//!
//! NonZero and Compress are one sequential row each (`outer = []`, the input's elements or
//! slices as the inner loop, in order): a first kernel zeroes the extent slot, which then serves
//! as the running count. At each point the count is read (a load after the previous point's
//! store, which the kernel contract orders within a row), the element goes to the output
//! position the count names (an indirect store), and the count grows by one where the element
//! is kept (an accumulating store). A point that is not kept still stores, at the position the
//! next kept point will overwrite, or past the final extent, where nothing reads it; so no store
//! needs a condition. (NonZero's count never reaches its bound before its last point; Compress's
//! can, when the condition is shorter than the axis, and then the clamped index names the last
//! kept slot: there a point not kept stores back the element it loads.) The cost is one pass
//! over the input, on one thread.
//!
//! Unique without `axis` compares every element with every other, `O(n^2)` in rows that run
//! in parallel: a first kernel marks each element's first occurrence in planned scratch; a
//! second gives each element its value's first index, its rank among the distinct values
//! (sorted: the marked values below it; `sorted = 0`: the marked elements before its value's
//! first index) and its count, and writes them at that rank (every row holding the same value
//! writes the same bytes there, so the result does not depend on the order rows run in,
//! although the rows do not own those elements alone), with the inverse index at its own
//! position; a third counts the distinct values into each extent slot. NaN equals nothing, so
//! each NaN is a value of its own (numpy merges them). Unique with `axis` does the same over
//! slices, after a kernel that compares every pair of slices (`unique_slices`).
//! TopK with `K` from data writes its extent in `movement/topk.rs`.
//!
//! Guarantees: every indirect store's index is bounded by the output's bound (the validator
//! clamps it); the extent written is at most the bound, since it counts inner points or marked
//! elements of an input no longer than the bound.

use super::build::{contiguous_strides, Insts, TensorRef};
use super::movement::common::loop_kernel;
use super::{unsupported, LowerCtx, LowerError, LowerResult};
use crate::kernel::{
    BinaryOp, IndirectIndex, InstId, Kernel, KernelBody, LoopKernel, ReduceOp, Region, Scalar,
    Stage, Store, UnaryOp, View,
};
use crate::program::RunExtent;
use memc_ir::OpId;

/// The extent slot of result `index` of `op`, which must have one.
fn extent_slot(ctx: &LowerCtx, op: OpId, index: usize) -> Result<RunExtent, LowerError> {
    let value = ctx.op(op).results[index];
    ctx.extent_slot(value)?.ok_or_else(|| {
        LowerError::Internal(format!(
            "result #{index} of {} has no bounded dim",
            ctx.op_label(op)
        ))
    })
}

/// A view of an extent slot that every one of `n_axes` loop axes leaves in place.
fn slot_view(slot: RunExtent, n_axes: usize) -> View {
    View {
        region: Region::Arena,
        elem: Scalar::I64,
        byte_offset: slot.byte_offset as i64,
        strides: vec![0; n_axes],
        guards: Vec::new(),
        pad: 0,
    }
}

/// One kernel that stores 0 into every slot of `slots`.
fn zero_slots(name: String, slots: &[RunExtent]) -> Kernel {
    let views: Vec<View> = slots.iter().map(|&s| slot_view(s, 0)).collect();
    let mut b = Insts::new();
    let zero = b.constant_int(Scalar::I64, 0);
    let stores = (0..views.len() as u32)
        .map(|v| Store::new(v, zero))
        .collect();
    Kernel {
        name,
        body: KernelBody::Loop(LoopKernel {
            outer: Vec::new(),
            inner: Vec::new(),
            views,
            stages: vec![Stage::Map {
                insts: b.finish(),
                stores,
            }],
        }),
    }
}

/// The running count, read from the slot view `view` (the element a previous point of the row
/// stored, as a scatter's load of its element is).
fn load_count(b: &mut Insts, views: &[View], view: u32) -> InstId {
    let zero = b.constant_int(Scalar::I64, 0);
    b.load_indirect(
        views,
        view,
        vec![IndirectIndex {
            index: zero,
            stride: 0,
            limit: 1,
        }],
    )
}

/// `count += kept` into the slot view `view`.
fn bump_count(b: &mut Insts, view: u32, kept: InstId) -> (InstId, Store) {
    let one = b.cast(kept, Scalar::I64);
    (
        one,
        Store {
            view,
            value: one,
            indices: Vec::new(),
            accumulate: true,
        },
    )
}

/// A one-row kernel over `inner` with one `Map` stage.
fn row_kernel(
    name: String,
    inner: Vec<u64>,
    views: Vec<View>,
    b: Insts,
    stores: Vec<Store>,
) -> Kernel {
    Kernel {
        name,
        body: KernelBody::Loop(LoopKernel {
            outer: Vec::new(),
            inner,
            views,
            stages: vec![Stage::Map {
                insts: b.finish(),
                stores,
            }],
        }),
    }
}

/// Whether the element loaded as `v` is non-zero (NaN is).
fn non_zero_test(b: &mut Insts, v: InstId) -> InstId {
    let ty = b.ty(v);
    let zero = b.constant_int(ty, 0);
    let is_zero = b.binary(BinaryOp::Eq, v, zero);
    b.unary(UnaryOp::Not, is_zero)
}

/// `NonZero`: `Y[a, count] = index along a` of each non-zero element, in row-major order.
pub(super) fn non_zero(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let y = ctx.result(op, 0)?;
    let slot = extent_slot(ctx, op, 0)?;
    let mut kernels = vec![zero_slots(ctx.kernel_name(op, 0), &[slot])];
    let bound = y.shape[1];
    if x.numel() == 0 {
        return Ok(kernels);
    }
    let rank = x.rank();
    let mut views = vec![x.view_with(x.strides()), slot_view(slot, rank)];
    for a in 0..rank {
        let mut row = y.view_with(vec![0; rank]);
        row.byte_offset += (a as u64 * bound * 8) as i64;
        views.push(row);
    }
    let mut b = Insts::new();
    let v = b.load(&views, 0);
    let kept = non_zero_test(&mut b, v);
    let count = load_count(&mut b, &views, 1);
    let mut stores = Vec::new();
    for a in 0..rank {
        let index = b.index(a);
        stores.push(Store {
            view: 2 + a as u32,
            value: index,
            indices: vec![IndirectIndex {
                index: count,
                stride: 1,
                limit: bound as i64,
            }],
            accumulate: false,
        });
    }
    let (_, bump) = bump_count(&mut b, 1, kept);
    stores.push(bump);
    kernels.push(row_kernel(
        ctx.kernel_name(op, 1),
        x.shape.clone(),
        views,
        b,
        stores,
    ));
    Ok(kernels)
}

/// `Compress`: the slices of the input along `axis` (its elements in row-major order without
/// one) whose condition entry is true, in order. The row walks the compressed axis outermost;
/// the count grows at the last point of each slice.
pub(super) fn compress(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let condition = ctx.input(op, 1)?;
    let out = ctx.result(op, 0)?;
    let slot = extent_slot(ctx, op, 0)?;
    let mut kernels = vec![zero_slots(ctx.kernel_name(op, 0), &[slot])];
    if x.numel() == 0 || condition.numel() == 0 {
        return Ok(kernels);
    }
    // The input as `[before.., n, after..]` over the loop axes `[n, before.., after..]`.
    let (x, axis) = match ctx.attr_int_opt(op, "axis") {
        None => (x.reshaped(vec![x.numel()]), 0),
        Some(axis) => {
            let rank = x.rank() as i64;
            let axis = if axis < 0 { axis + rank } else { axis };
            let axis = usize::try_from(axis)
                .ok()
                .filter(|&a| a < x.rank())
                .ok_or_else(|| unsupported(format!("Compress axis {axis} out of range")))?;
            (x, axis)
        }
    };
    let rank = x.rank();
    let loop_axes: Vec<usize> = std::iter::once(axis)
        .chain((0..rank).filter(|&a| a != axis))
        .collect();
    let inner: Vec<u64> = loop_axes.iter().map(|&a| x.shape[a]).collect();
    let x_strides = x.strides();
    let out_strides = contiguous_strides(&out.shape);
    let mut cond_strides = vec![0i64; rank];
    cond_strides[0] = 1;
    let mut cond_view = condition.view_with(cond_strides);
    // Slices past the condition's length are dropped: the entry reads as false.
    let mut coeffs = vec![0i64; rank];
    coeffs[0] = 1;
    cond_view
        .guards
        .push(super::build::guard(coeffs, 0, condition.shape[0] as i64));
    let mut out_view = out.view_with(loop_axes.iter().map(|&a| out_strides[a]).collect());
    out_view.strides[0] = 0;
    let views = vec![
        x.view_with(loop_axes.iter().map(|&a| x_strides[a]).collect()),
        cond_view,
        slot_view(slot, rank),
        out_view,
    ];
    let mut b = Insts::new();
    let v = b.load(&views, 0);
    let kept = b.load(&views, 1);
    let count = load_count(&mut b, &views, 2);
    // The last point of a slice: every other loop axis at its last index.
    let mut last = b.constant_int(Scalar::Bool, 1);
    for (j, &size) in inner.iter().enumerate().skip(1) {
        let i = b.index(j);
        let end = b.constant_int(Scalar::I64, size as i64 - 1);
        let at_end = b.binary(BinaryOp::Eq, i, end);
        last = b.binary(BinaryOp::And, last, at_end);
    }
    let grows = b.binary(BinaryOp::And, kept, last);
    let at_count = vec![IndirectIndex {
        index: count,
        stride: out_strides[axis],
        limit: out.shape[axis] as i64,
    }];
    // Once every slot is taken (the condition is shorter than the axis), the count names the
    // last slot (the index is clamped): a slice not kept stores that element back unchanged.
    let old = b.load_indirect(&views, 3, at_count.clone());
    let value = b.select(kept, v, old);
    let store_out = Store {
        view: 3,
        value,
        indices: at_count,
        accumulate: false,
    };
    let (_, bump) = bump_count(&mut b, 2, grows);
    kernels.push(row_kernel(
        ctx.kernel_name(op, 1),
        inner,
        views,
        b,
        vec![store_out, bump],
    ));
    Ok(kernels)
}

/// Result `index` of `op` when it is present and used.
fn used_result(ctx: &LowerCtx, op: OpId, index: usize) -> Result<Option<TensorRef>, LowerError> {
    if !ctx.result_used(op, index) {
        return Ok(None);
    }
    ctx.result(op, index).map(Some)
}

/// The scratch bytes of a `Unique` op: one i64 first-occurrence mark per element.
pub(super) fn unique_scratch(func: &memc_ir::Function, op: OpId) -> u64 {
    let Some(x) = func.value_type(func.op(op).operands[0]).tensor() else {
        return 0;
    };
    let axis = memc_ir::Opcode::Unique
        .def()
        .int_attr(&func.op(op).attrs, "axis");
    match axis {
        None => x.static_num_elements().map_or(0, |n| n.saturating_mul(8)),
        Some(axis) => {
            // Pairwise equal and less marks `[d, d]`, first marks and ranks `[d]`.
            let rank = x.rank() as i64;
            let axis = if axis < 0 { axis + rank } else { axis };
            let d = usize::try_from(axis)
                .ok()
                .and_then(|a| x.dims.get(a))
                .and_then(memc_ir::Dim::as_static)
                .unwrap_or(0);
            d.saturating_mul(d).saturating_add(d).saturating_mul(16)
        }
    }
}

/// An i64 tensor of `shape` in the scratch at `byte_offset` past its start.
fn scratch_i64(scratch: &TensorRef, byte_offset: u64, shape: Vec<u64>) -> TensorRef {
    TensorRef {
        region: scratch.region,
        byte_offset: scratch.byte_offset + byte_offset as i64,
        elem: Scalar::I64,
        shape,
    }
}

/// `Unique` with `axis`: the unique slices along `axis`. The input is `[pre, d, post]` around
/// the axis; each slice has `pre * post` elements, compared in row-major order (numpy's order
/// of slices). A first kernel compares every pair of slices (`outer = [d, d]`, the slice as the
/// inner loop: the first element where they differ decides) into equal and less marks in
/// scratch; then as without `axis`: first-occurrence marks, per slice its first index, rank
/// and count (written at its rank), each slice copied to its rank in `Y`, and the number of
/// distinct slices into the extent slots.
fn unique_slices(ctx: &LowerCtx, op: OpId, axis: i64, sorted: bool) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let rank = x.rank() as i64;
    let axis = usize::try_from(if axis < 0 { axis + rank } else { axis })
        .ok()
        .filter(|&a| a < x.rank())
        .ok_or_else(|| unsupported(format!("Unique axis {axis} out of range")))?;
    let d = x.shape[axis];
    let pre: u64 = x.shape[..axis].iter().product();
    let post: u64 = x.shape[axis + 1..].iter().product();
    let size = pre * post;
    let mut slots = Vec::new();
    for index in [0, 1, 3] {
        if ctx.result_used(op, index) {
            slots.push(extent_slot(ctx, op, index)?);
        }
    }
    let mut kernels = vec![zero_slots(ctx.kernel_name(op, 0), &slots)];
    if d == 0 {
        return Ok(kernels);
    }
    if size == 0 {
        return Err(unsupported("Unique of slices with no elements"));
    }
    let scratch = ctx
        .scratch(op)
        .ok_or_else(|| unsupported("Unique planned without its scratch (the pair marks)"))?;
    let equal = scratch_i64(&scratch, 0, vec![d, d]);
    let less = scratch_i64(&scratch, d * d * 8, vec![d, d]);
    let first = scratch_i64(&scratch, 2 * d * d * 8, vec![d]);
    let ranks = scratch_i64(&scratch, (2 * d * d + d) * 8, vec![d]);
    let plane = (d * post) as i64;
    let post_i = post as i64;
    // Pairs: axes (i, j, p, q).
    {
        let views = vec![
            x.view_with(vec![post_i, 0, plane, 1]),
            x.view_with(vec![0, post_i, plane, 1]),
            x.view_with(vec![0; 4]),
            equal.view_with(vec![d as i64, 1, 0, 0]),
            less.view_with(vec![d as i64, 1, 0, 0]),
        ];
        let mut b = Insts::new();
        let xi = b.load(&views, 0);
        let xj = b.load(&views, 1);
        let same = b.binary(BinaryOp::Eq, xi, xj);
        let differ = b.unary(UnaryOp::Not, same);
        let (p, q) = (b.index(2), b.index(3));
        let post_c = b.constant_int(Scalar::I64, post_i);
        let at = b.binary(BinaryOp::Mul, p, post_c);
        let e = b.binary(BinaryOp::Add, at, q);
        let none = b.constant_int(Scalar::I64, size as i64);
        let value = b.select(differ, e, none);
        let reduce = Stage::Reduce {
            insts: b.finish(),
            value,
            op: ReduceOp::Min,
            init: size,
            ty: Scalar::I64,
        };
        let mut b = Insts::new();
        let e = b.acc(0, Scalar::I64);
        let none = b.constant_int(Scalar::I64, size as i64);
        let same = b.binary(BinaryOp::Eq, e, none);
        let last = b.constant_int(Scalar::I64, size as i64 - 1);
        let e = b.binary(BinaryOp::Min, e, last);
        let post_c = b.constant_int(Scalar::I64, post_i);
        let p = b.binary(BinaryOp::Div, e, post_c);
        let q = b.binary(BinaryOp::Rem, e, post_c);
        let plane_c = b.constant_int(Scalar::I64, plane);
        let base = b.binary(BinaryOp::Mul, p, plane_c);
        let base = b.binary(BinaryOp::Add, base, q);
        let element = |b: &mut Insts, axis: usize| {
            let i = b.index(axis);
            let at = b.binary(BinaryOp::Mul, i, post_c);
            let linear = b.binary(BinaryOp::Add, base, at);
            b.load_indirect(
                &views,
                2,
                vec![IndirectIndex {
                    index: linear,
                    stride: 1,
                    limit: x.numel() as i64,
                }],
            )
        };
        let xi = element(&mut b, 0);
        let xj = element(&mut b, 1);
        let below = b.binary(BinaryOp::Lt, xj, xi);
        let differ = b.unary(UnaryOp::Not, same);
        let below = b.binary(BinaryOp::And, differ, below);
        let same = b.cast(same, Scalar::I64);
        let below = b.cast(below, Scalar::I64);
        kernels.push(loop_kernel(
            ctx.kernel_name(op, 1),
            vec![d, d],
            vec![pre, post],
            views,
            vec![
                reduce,
                Stage::Once {
                    insts: b.finish(),
                    stores: vec![Store::new(3, same), Store::new(4, below)],
                },
            ],
        ));
    }
    // First-occurrence marks: axes (i, j).
    {
        let views = vec![
            equal.view_with(vec![d as i64, 1]),
            first.view_with(vec![1, 0]),
        ];
        let mut b = Insts::new();
        let same = b.load(&views, 0);
        let (i, j) = (b.index(0), b.index(1));
        let before = b.binary(BinaryOp::Lt, j, i);
        let zero = b.constant_int(Scalar::I64, 0);
        let dup = b.select(before, same, zero);
        let reduce = Stage::Reduce {
            insts: b.finish(),
            value: dup,
            op: ReduceOp::Max,
            init: 0,
            ty: Scalar::I64,
        };
        let mut b = Insts::new();
        let dups = b.acc(0, Scalar::I64);
        let one = b.constant_int(Scalar::I64, 1);
        let mark = b.binary(BinaryOp::Sub, one, dups);
        kernels.push(loop_kernel(
            ctx.kernel_name(op, 2),
            vec![d],
            vec![d],
            views,
            vec![
                reduce,
                Stage::Once {
                    insts: b.finish(),
                    stores: vec![Store::new(1, mark)],
                },
            ],
        ));
    }
    // Per slice i: first index, rank and count; axes (i, j).
    {
        let mut views = vec![
            equal.view_with(vec![d as i64, 1]),
            less.view_with(vec![d as i64, 1]),
            first.view_with(vec![0, 1]),
        ];
        let first_stage = {
            let mut b = Insts::new();
            let same = b.load(&views, 0);
            let one = b.constant_int(Scalar::I64, 1);
            let same = b.binary(BinaryOp::Eq, same, one);
            let j = b.index(1);
            let none = b.constant_int(Scalar::I64, i64::MAX);
            let value = b.select(same, j, none);
            Stage::Reduce {
                insts: b.finish(),
                value,
                op: ReduceOp::Min,
                init: i64::MAX as u64,
                ty: Scalar::I64,
            }
        };
        let rank_stage = {
            let mut b = Insts::new();
            let marked = b.load(&views, 2);
            let counted = if sorted {
                let below = b.load(&views, 1);
                let one = b.constant_int(Scalar::I64, 1);
                b.binary(BinaryOp::Eq, below, one)
            } else {
                let j = b.index(1);
                let first_i = b.acc(0, Scalar::I64);
                b.binary(BinaryOp::Lt, j, first_i)
            };
            let zero = b.constant_int(Scalar::I64, 0);
            let value = b.select(counted, marked, zero);
            Stage::Reduce {
                insts: b.finish(),
                value,
                op: ReduceOp::Sum,
                init: 0,
                ty: Scalar::I64,
            }
        };
        let count_stage = {
            let mut b = Insts::new();
            let same = b.load(&views, 0);
            Stage::Reduce {
                insts: b.finish(),
                value: same,
                op: ReduceOp::Sum,
                init: 0,
                ty: Scalar::I64,
            }
        };
        let mut b = Insts::new();
        let first_index = b.acc(0, Scalar::I64);
        let rank = b.acc(1, Scalar::I64);
        let count = b.acc(2, Scalar::I64);
        let at_rank = vec![IndirectIndex {
            index: rank,
            stride: 1,
            limit: d as i64,
        }];
        views.push(ranks.view_with(vec![1, 0]));
        let mut stores = vec![Store::new(views.len() as u32 - 1, rank)];
        for (index, value) in [(1, first_index), (3, count)] {
            if let Some(result) = used_result(ctx, op, index)? {
                views.push(result.view_with(vec![0, 0]));
                stores.push(Store {
                    view: views.len() as u32 - 1,
                    value,
                    indices: at_rank.clone(),
                    accumulate: false,
                });
            }
        }
        if let Some(inverse) = used_result(ctx, op, 2)? {
            views.push(inverse.view_with(vec![1, 0]));
            stores.push(Store::new(views.len() as u32 - 1, rank));
        }
        kernels.push(loop_kernel(
            ctx.kernel_name(op, 3),
            vec![d],
            vec![d],
            views,
            vec![
                first_stage,
                rank_stage,
                count_stage,
                Stage::Once {
                    insts: b.finish(),
                    stores,
                },
            ],
        ));
    }
    // Each slice to its rank in Y: axes (i, p, q); slices of one value write the same bytes.
    if let Some(y) = used_result(ctx, op, 0)? {
        let views = vec![
            x.view_with(vec![post_i, plane, 1]),
            ranks.view_with(vec![1, 0, 0]),
            y.view_with(vec![0, plane, 1]),
        ];
        let mut b = Insts::new();
        let v = b.load(&views, 0);
        let r = b.load(&views, 1);
        kernels.push(loop_kernel(
            ctx.kernel_name(op, 4),
            vec![d],
            vec![pre, post],
            views,
            vec![Stage::Map {
                insts: b.finish(),
                stores: vec![Store {
                    view: 2,
                    value: v,
                    indices: vec![IndirectIndex {
                        index: r,
                        stride: post_i,
                        limit: d as i64,
                    }],
                    accumulate: false,
                }],
            }],
        ));
    }
    // The number of distinct slices into every extent slot.
    if !slots.is_empty() {
        let mut views = vec![first.view_with(vec![1])];
        views.extend(slots.iter().map(|&s| slot_view(s, 1)));
        let mut b = Insts::new();
        let mark = b.load(&views, 0);
        let reduce = Stage::Reduce {
            insts: b.finish(),
            value: mark,
            op: ReduceOp::Sum,
            init: 0,
            ty: Scalar::I64,
        };
        let mut b = Insts::new();
        let total = b.acc(0, Scalar::I64);
        let stores = (1..views.len() as u32)
            .map(|v| Store::new(v, total))
            .collect();
        kernels.push(loop_kernel(
            ctx.kernel_name(op, 5),
            Vec::new(),
            vec![d],
            views,
            vec![
                reduce,
                Stage::Once {
                    insts: b.finish(),
                    stores,
                },
            ],
        ));
    }
    Ok(kernels)
}

/// `Unique` without `axis`: see the module doc.
pub(super) fn unique(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let sorted = ctx.attr_int(op, "sorted") != 0;
    if let Some(axis) = ctx.attr_int_opt(op, "axis") {
        return unique_slices(ctx, op, axis, sorted);
    }
    let x = ctx.input(op, 0)?;
    let x = x.reshaped(vec![x.numel()]);
    let n = x.numel();
    // The extent slots of Y, indices and counts, where present and used.
    let mut slots = Vec::new();
    for index in [0, 1, 3] {
        if ctx.result_used(op, index) {
            slots.push((index, extent_slot(ctx, op, index)?));
        }
    }
    let slot_list: Vec<RunExtent> = slots.iter().map(|&(_, s)| s).collect();
    let mut kernels = vec![zero_slots(ctx.kernel_name(op, 0), &slot_list)];
    if n == 0 {
        return Ok(kernels);
    }
    let scratch = ctx
        .scratch(op)
        .ok_or_else(|| unsupported("Unique planned without its scratch (the first marks)"))?;
    let first = TensorRef {
        region: scratch.region,
        byte_offset: scratch.byte_offset,
        elem: Scalar::I64,
        shape: vec![n],
    };
    // Kernel 1: first[i] = no j < i holds the same value.
    {
        let views = vec![
            first.view_with(vec![1, 0]),
            x.view_with(vec![1, 0]),
            x.view_with(vec![0, 1]),
        ];
        let mut b = Insts::new();
        let xi = b.load(&views, 1);
        let xj = b.load(&views, 2);
        let same = b.binary(BinaryOp::Eq, xi, xj);
        let (i, j) = (b.index(0), b.index(1));
        let before = b.binary(BinaryOp::Lt, j, i);
        let dup = b.binary(BinaryOp::And, same, before);
        let dup = b.cast(dup, Scalar::I64);
        let reduce = Stage::Reduce {
            insts: b.finish(),
            value: dup,
            op: ReduceOp::Max,
            init: 0,
            ty: Scalar::I64,
        };
        let mut b = Insts::new();
        let dups = b.acc(0, Scalar::I64);
        let one = b.constant_int(Scalar::I64, 1);
        let mark = b.binary(BinaryOp::Sub, one, dups);
        kernels.push(Kernel {
            name: ctx.kernel_name(op, 1),
            body: KernelBody::Loop(LoopKernel {
                outer: vec![n],
                inner: vec![n],
                views,
                stages: vec![
                    reduce,
                    Stage::Once {
                        insts: b.finish(),
                        stores: vec![Store::new(0, mark)],
                    },
                ],
            }),
        });
    }
    // Kernel 2: per element i, its rank among the distinct values (the marked values below
    // it), its value's first index and count; written at that rank, the rank at `inverse[i]`.
    {
        let mut views = vec![
            x.view_with(vec![1, 0]),
            x.view_with(vec![0, 1]),
            first.view_with(vec![0, 1]),
        ];
        let reduce = |op_kind: ReduceOp,
                      value: fn(&mut Insts, InstId, InstId, InstId, InstId) -> InstId,
                      init: i64,
                      views: &[View]| {
            let mut b = Insts::new();
            let xi = b.load(views, 0);
            let xj = b.load(views, 1);
            let marked = b.load(views, 2);
            let j = b.index(1);
            let v = value(&mut b, xi, xj, marked, j);
            Stage::Reduce {
                insts: b.finish(),
                value: v,
                op: op_kind,
                init: init as u64,
                ty: Scalar::I64,
            }
        };
        let first_stage = reduce(
            ReduceOp::Min,
            |b, xi, xj, _, j| {
                let same = b.binary(BinaryOp::Eq, xj, xi);
                let none = b.constant_int(Scalar::I64, i64::MAX);
                b.select(same, j, none)
            },
            i64::MAX,
            &views,
        );
        // Sorted: the distinct values below x[i]; else those first seen before x[i]'s value.
        let rank_stage = {
            let mut b = Insts::new();
            let xi = b.load(&views, 0);
            let xj = b.load(&views, 1);
            let marked = b.load(&views, 2);
            let counted = if sorted {
                b.binary(BinaryOp::Lt, xj, xi)
            } else {
                let j = b.index(1);
                let first_i = b.acc(0, Scalar::I64);
                b.binary(BinaryOp::Lt, j, first_i)
            };
            let zero = b.constant_int(Scalar::I64, 0);
            let value = b.select(counted, marked, zero);
            Stage::Reduce {
                insts: b.finish(),
                value,
                op: ReduceOp::Sum,
                init: 0,
                ty: Scalar::I64,
            }
        };
        let count_stage = reduce(
            ReduceOp::Sum,
            |b, xi, xj, _, _| {
                let same = b.binary(BinaryOp::Eq, xj, xi);
                b.cast(same, Scalar::I64)
            },
            0,
            &views,
        );
        let mut b = Insts::new();
        let first_index = b.acc(0, Scalar::I64);
        let rank = b.acc(1, Scalar::I64);
        let count = b.acc(2, Scalar::I64);
        let value = b.load(&views, 0);
        let mut stores = Vec::new();
        let at_rank = |index| {
            vec![IndirectIndex {
                index,
                stride: 1,
                limit: n as i64,
            }]
        };
        for (index, what) in [(0, value), (1, first_index), (3, count)] {
            let Some(result) = used_result(ctx, op, index)? else {
                continue;
            };
            views.push(result.view_with(vec![0, 0]));
            stores.push(Store {
                view: views.len() as u32 - 1,
                value: what,
                indices: at_rank(rank),
                accumulate: false,
            });
        }
        if let Some(inverse) = used_result(ctx, op, 2)? {
            views.push(inverse.view_with(vec![1, 0]));
            stores.push(Store::new(views.len() as u32 - 1, rank));
        }
        kernels.push(Kernel {
            name: ctx.kernel_name(op, 2),
            body: KernelBody::Loop(LoopKernel {
                outer: vec![n],
                inner: vec![n],
                views,
                stages: vec![
                    first_stage,
                    rank_stage,
                    count_stage,
                    Stage::Once {
                        insts: b.finish(),
                        stores,
                    },
                ],
            }),
        });
    }
    // Kernel 3: the number of distinct values into every extent slot.
    {
        let mut views = vec![first.view_with(vec![1])];
        views.extend(slot_list.iter().map(|&s| slot_view(s, 1)));
        let mut b = Insts::new();
        let mark = b.load(&views, 0);
        let reduce = Stage::Reduce {
            insts: b.finish(),
            value: mark,
            op: ReduceOp::Sum,
            init: 0,
            ty: Scalar::I64,
        };
        let mut b = Insts::new();
        let total = b.acc(0, Scalar::I64);
        let stores = (1..views.len() as u32)
            .map(|v| Store::new(v, total))
            .collect();
        kernels.push(Kernel {
            name: ctx.kernel_name(op, 3),
            body: KernelBody::Loop(LoopKernel {
                outer: Vec::new(),
                inner: vec![n],
                views,
                stages: vec![
                    reduce,
                    Stage::Once {
                        insts: b.finish(),
                        stores,
                    },
                ],
            }),
        });
    }
    Ok(kernels)
}
