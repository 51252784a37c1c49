//! ScatterElements, ScatterND and TensorScatter (a KV cache update): a copy of `data`, then the updates written at the indexed
//! elements, each combined with the element's current value by the op's `reduction` (`none`
//! overwrites, `add`, `mul`, `max`, `min`; on bools `add` and `max` are `or`, `mul` and `min`
//! `and`, as numpy computes them).
//!
//! Two kernels: a linear copy of `data` into the result, then the scatter. The scatter's rows
//! are positions of the result that no other row writes (ScatterElements: a line of the result
//! along `axis`; ScatterND: one position of the trailing slice axes), and its one inner axis
//! walks the updates aimed at that row in index order. At each point the `Map` stage loads the
//! current element through a `LoadIndirect` at the (wrapped) index, combines it with the update
//! and stores the result back with an indirect store, so repeated indices apply in index order
//! (the last write wins for `none`, as the ONNX reference does) and the result does not depend
//! on the threads. An index outside `[-n, n)` hits nothing: the store writes the element it was
//! clamped to back unchanged, so no input writes outside the result.

use super::super::build::{Insts, TensorRef};
use super::super::{unsupported, LowerCtx, LowerError, LowerResult};
use super::common::{loop_kernel, norm_axis, strided_copy};
use super::{dense, output};
use crate::kernel::{BinaryOp, IndirectIndex, InstId, Kernel, Scalar, Stage, Store, View};
use memc_ir::OpId;

/// How a scatter combines an update with the element it hits.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

impl Reduction {
    fn of(ctx: &LowerCtx, op: OpId) -> Result<Reduction, LowerError> {
        match ctx.attr_str(op, "reduction").unwrap_or_default() {
            "none" => Ok(Reduction::None),
            "add" => Ok(Reduction::Add),
            "mul" => Ok(Reduction::Mul),
            "max" => Ok(Reduction::Max),
            "min" => Ok(Reduction::Min),
            other => Err(unsupported(format!(
                "scatter reduction \"{other}\" (expected none, add, mul, max or min)"
            ))),
        }
    }

    /// The instruction combining the current value `current` with `update` (both of type
    /// `ty`, a compute type).
    fn combine(self, insts: &mut Insts, ty: Scalar, current: InstId, update: InstId) -> InstId {
        let op = match (self, ty == Scalar::Bool) {
            (Reduction::None, _) => return update,
            (Reduction::Add | Reduction::Max, true) => BinaryOp::Or,
            (Reduction::Mul | Reduction::Min, true) => BinaryOp::And,
            (Reduction::Add, false) => BinaryOp::Add,
            (Reduction::Mul, false) => BinaryOp::Mul,
            (Reduction::Max, false) => BinaryOp::Max,
            (Reduction::Min, false) => BinaryOp::Min,
        };
        insts.binary(op, current, update)
    }
}

/// The kernel copying all of `data` into `out` (same shape, both contiguous).
fn copy_data(ctx: &LowerCtx, op: OpId, out: &TensorRef, data: &TensorRef) -> Kernel {
    let flat = vec![out.numel()];
    strided_copy(
        ctx.kernel_name(op, 0),
        &flat,
        dense(&out.reshaped(flat.clone())),
        dense(&data.reshaped(flat.clone())),
    )
}

/// Where a scatter's index comes from.
enum IndexSource {
    /// Loaded from view `view` (any integer type).
    Load(u32),
    /// TensorScatter's write position: `start + i` with `i` the loop index of axis `axis` and
    /// `start` loaded from view `start` (0 without one), taken modulo `limit` when `circular`.
    Position {
        start: Option<u32>,
        axis: usize,
        circular: bool,
    },
}

/// One indirect term of a scatter's address: an index stepping `stride` elements over `limit`
/// positions.
struct IndexTerm {
    source: IndexSource,
    stride: i64,
    limit: i64,
}

impl IndexTerm {
    /// The index as an I64 instruction.
    fn emit(&self, insts: &mut Insts, views: &[View]) -> InstId {
        match self.source {
            IndexSource::Load(view) => {
                let index = insts.load(views, view);
                insts.cast(index, Scalar::I64)
            }
            IndexSource::Position {
                start,
                axis,
                circular,
            } => {
                let mut index = insts.index(axis);
                if let Some(view) = start {
                    let start = insts.load(views, view);
                    let start = insts.cast(start, Scalar::I64);
                    index = insts.binary(BinaryOp::Add, start, index);
                }
                if circular {
                    let limit = insts.constant_int(Scalar::I64, self.limit);
                    index = insts.binary(BinaryOp::FloorMod, index, limit);
                }
                index
            }
        }
    }
}

/// The `Map` stage of a scatter over `views` (0: the result, 1: the updates, then the views
/// the indices of `terms` read): the element of the result the indices name is combined with
/// the update and stored back; where any index is outside `[-limit, limit)` the element (at the
/// clamped address) is stored back unchanged.
fn scatter_stage(views: &[View], reduction: Reduction, terms: &[IndexTerm]) -> Stage {
    let mut insts = Insts::new();
    let mut indices = Vec::with_capacity(terms.len());
    let mut outside: Option<InstId> = None;
    for term in terms {
        let index = term.emit(&mut insts, views);
        let low = insts.constant_int(Scalar::I64, -term.limit);
        let high = insts.constant_int(Scalar::I64, term.limit);
        let below = insts.binary(BinaryOp::Lt, index, low);
        let above = insts.binary(BinaryOp::Ge, index, high);
        let out_of_range = insts.binary(BinaryOp::Or, below, above);
        outside = Some(match outside {
            None => out_of_range,
            Some(before) => insts.binary(BinaryOp::Or, before, out_of_range),
        });
        indices.push(IndirectIndex {
            index,
            stride: term.stride,
            limit: term.limit,
        });
    }
    let current = insts.load_indirect(views, 0, indices.clone());
    let update = insts.load(views, 1);
    let ty = insts.ty(current);
    let combined = reduction.combine(&mut insts, ty, current, update);
    let value = match outside {
        Some(outside) => insts.select(outside, current, combined),
        None => combined,
    };
    Stage::Map {
        insts: insts.finish(),
        stores: vec![Store {
            view: 0,
            value,
            indices,
            accumulate: false,
        }],
    }
}

/// `ScatterElements(data, indices, updates)`: `out = data`, then for every position `i` of the
/// indices, `out[i with i[axis] replaced by indices[i]] = combine(that, updates[i])`. The
/// scatter's outer axes are the indices' axes other than `axis`, its inner axis `axis`: each
/// outer point owns the result's line along `axis` at its position.
pub fn scatter_elements(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let data = ctx.input(op, 0)?;
    let indices = ctx.input(op, 1)?;
    let updates = ctx.input(op, 2)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let reduction = Reduction::of(ctx, op)?;
    let rank = out.rank();
    let axis = norm_axis(ctx.attr_int(op, "axis"), rank)?;
    if data.shape != out.shape
        || indices.rank() != rank
        || updates.shape != indices.shape
        || updates.elem != out.elem
    {
        return Err(unsupported(
            "ScatterElements' data, indices, updates and result do not match (a memc bug)",
        ));
    }
    if indices
        .shape
        .iter()
        .zip(&out.shape)
        .enumerate()
        .any(|(d, (&i, &o))| d != axis && i > o)
    {
        return Err(unsupported(
            "ScatterElements' indices are larger than its data off the axis",
        ));
    }
    let copy = copy_data(ctx, op, &out, &data);
    if indices.numel() == 0 {
        return Ok(vec![copy]);
    }
    // Loop axes: the indices' axes without `axis` (outer), then `axis` (inner).
    let order: Vec<usize> = (0..rank).filter(|&d| d != axis).chain([axis]).collect();
    let permute = |strides: &[i64]| -> Vec<i64> { order.iter().map(|&d| strides[d]).collect() };
    let outer: Vec<u64> = order[..rank - 1]
        .iter()
        .map(|&d| indices.shape[d])
        .collect();
    let inner = vec![indices.shape[axis]];
    let out_own = out.strides();
    let mut out_strides = out_own.clone();
    out_strides[axis] = 0;
    let views: Vec<View> = vec![
        out.view_with(permute(&out_strides)),
        updates.view_with(permute(&updates.strides())),
        indices.view_with(permute(&indices.strides())),
    ];
    let scatter = scatter_stage(
        &views,
        reduction,
        &[IndexTerm {
            source: IndexSource::Load(2),
            stride: out_own[axis],
            limit: out.shape[axis] as i64,
        }],
    );
    Ok(vec![
        copy,
        loop_kernel(ctx.kernel_name(op, 1), outer, inner, views, vec![scatter]),
    ])
}

/// `ScatterND(data, indices, updates)`: `out = data`, then for every index position `p`
/// (the indices' axes but the last, whose extent `k` is the index depth), the slice
/// `out[indices[p]]` (over the data's axes from `k` on) is combined with `updates[p]`. The
/// scatter's outer axes are the slice axes, its inner axis the flattened index positions:
/// each outer point owns the result's elements at its slice position.
pub fn scatter_nd(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let data = ctx.input(op, 0)?;
    let indices = ctx.input(op, 1)?;
    let updates = ctx.input(op, 2)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let reduction = Reduction::of(ctx, op)?;
    let rank = out.rank();
    let q = indices.rank();
    let Some(&depth) = indices.shape.last() else {
        return Err(unsupported("ScatterND indices have rank 0"));
    };
    let k = depth as usize;
    if k > rank {
        return Err(unsupported(
            "ScatterND's index depth exceeds the data's rank",
        ));
    }
    let mut expected: Vec<u64> = indices.shape[..q - 1].to_vec();
    expected.extend_from_slice(&out.shape[k..]);
    if data.shape != out.shape || updates.shape != expected || updates.elem != out.elem {
        return Err(unsupported(
            "ScatterND's data, indices, updates and result do not match (a memc bug)",
        ));
    }
    let copy = copy_data(ctx, op, &out, &data);
    let positions: u64 = indices.shape[..q - 1].iter().product();
    if positions == 0 {
        return Ok(vec![copy]);
    }
    if k == 0 {
        return Err(unsupported(
            "ScatterND with index depth 0 (every update replaces all of data)",
        ));
    }
    // Loop axes: the slice axes `data[k..]` (outer), then the index positions (inner).
    let n_axes = rank - k + 1;
    let out_own = out.strides();
    let mut out_strides = out_own[k..].to_vec();
    out_strides.push(0);
    // The updates as [positions, slice]: an index position steps over one slice.
    let slice: i64 = out.shape[k..].iter().product::<u64>() as i64;
    let mut update_strides = updates.strides()[q - 1..].to_vec();
    update_strides.push(slice);
    let mut index_strides = vec![0i64; n_axes];
    index_strides[n_axes - 1] = k as i64;
    let mut views: Vec<View> = vec![
        out.view_with(out_strides),
        updates.view_with(update_strides),
    ];
    let mut terms = Vec::with_capacity(k);
    for j in 0..k {
        let mut view = indices.view_with(index_strides.clone());
        view.byte_offset += j as i64 * indices.elem.size() as i64;
        views.push(view);
        terms.push(IndexTerm {
            source: IndexSource::Load((views.len() - 1) as u32),
            stride: out_own[j],
            limit: out.shape[j] as i64,
        });
    }
    let scatter = scatter_stage(&views, reduction, &terms);
    Ok(vec![
        copy,
        loop_kernel(
            ctx.kernel_name(op, 1),
            out.shape[k..].to_vec(),
            vec![positions],
            views,
            vec![scatter],
        ),
    ])
}

/// `TensorScatter(past_cache, update, write_indices?)`: `present = past`, then for every batch
/// entry `b` and update position `s` along `axis`, the slice `update[b, .., s, ..]` is written
/// at position `write_indices[b] + s` (0 + s without write indices; modulo the axis' size in
/// `circular` mode). The scatter's outer axes are the update's axes other than `axis`, its
/// inner axis `axis`: each outer point owns the cache's line along `axis` at its position.
pub fn tensor_scatter(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let past = ctx.input(op, 0)?;
    let update = ctx.input(op, 1)?;
    let write_indices = ctx.operand(op, 2)?;
    let Some(out) = output(ctx, op, 0)? else {
        return Ok(Vec::new());
    };
    let rank = out.rank();
    let axis = norm_axis(ctx.attr_int(op, "axis"), rank)?;
    let circular = match ctx.attr_str(op, "mode").unwrap_or_default() {
        "linear" => false,
        "circular" => true,
        other => {
            return Err(unsupported(format!(
                "TensorScatter mode \"{other}\" (expected linear or circular)"
            )))
        }
    };
    let shapes_match = update.rank() == rank
        && update
            .shape
            .iter()
            .zip(&out.shape)
            .enumerate()
            .all(|(d, (&u, &o))| if d == axis { u <= o } else { u == o });
    if axis == 0
        || past.shape != out.shape
        || !shapes_match
        || update.elem != out.elem
        || write_indices
            .as_ref()
            .is_some_and(|w| w.shape != [out.shape[0]])
    {
        return Err(unsupported(
            "TensorScatter's past cache, update, write indices and result do not match (a memc bug)",
        ));
    }
    let copy = copy_data(ctx, op, &out, &past);
    if update.numel() == 0 {
        return Ok(vec![copy]);
    }
    // Loop axes: the update's axes without `axis` (outer), then `axis` (inner).
    let order: Vec<usize> = (0..rank).filter(|&d| d != axis).chain([axis]).collect();
    let permute = |strides: &[i64]| -> Vec<i64> { order.iter().map(|&d| strides[d]).collect() };
    let outer: Vec<u64> = order[..rank - 1].iter().map(|&d| update.shape[d]).collect();
    let inner = vec![update.shape[axis]];
    let out_own = out.strides();
    let mut out_strides = out_own.clone();
    out_strides[axis] = 0;
    let mut views: Vec<View> = vec![
        out.view_with(permute(&out_strides)),
        update.view_with(permute(&update.strides())),
    ];
    let start = write_indices.map(|w| {
        // One start per batch entry: the batch axis (0, never the scatter axis) is outer axis 0.
        let mut strides = vec![0i64; rank];
        strides[0] = 1;
        views.push(w.view_with(strides));
        (views.len() - 1) as u32
    });
    let scatter = scatter_stage(
        &views,
        Reduction::None,
        &[IndexTerm {
            source: IndexSource::Position {
                start,
                axis: rank - 1,
                circular,
            },
            stride: out_own[axis],
            limit: out.shape[axis] as i64,
        }],
    );
    Ok(vec![
        copy,
        loop_kernel(ctx.kernel_name(op, 1), outer, inner, views, vec![scatter]),
    ])
}
