//! The last step of lowering for a target that lays weights out for its GEMM (the CPU,
//! [`crate::prepack`]). For every contraction over a constant weight (a plain slot of the
//! weights section):
//!
//! - a convolution's `A` (its `B` an implicit column matrix), and any other `A` of more than
//!   one row (a one-row product's row kernel reads `A` where it is), gets a packed copy, and
//!   its [`PackedOperand`] points there. A convolution needs it whatever its size: with a stride-1
//!   window the CPU runs it as a direct convolution, which reads only a packed `A`, and the
//!   plan reserves no GEMM panels for it (`ConvPlan::runs_direct`);
//! - a `B` that is a strided matrix (a MatMul's or Gemm's weight, transposed or not) gets a
//!   copy packed whole ([`memc_gemm::pack_b_whole`]), and its `b_packed` points there: no run
//!   packs a `B` panel of it, and the plan reserves none ([`predicted_blocking`]).
//!
//! Two contractions laying out the same matrices the same way share a slot. Other operands of
//! fewer than [`MIN_ELEMS`] values are left as they are: packing them costs a run about a
//! microsecond, and each copy adds to the plan file.

use crate::kernel::{Contract, ContractB, KernelBody, MatView, PackedOperand, Region, Scalar};
use crate::prepack::{OperandLayout, OperandPack};
use crate::program::{Program, WeightSlot, WEIGHT_ALIGN};
use std::collections::HashMap;

/// The fewest values (per matrix) of an operand worth a laid-out copy.
const MIN_ELEMS: u64 = 1024;

pub(crate) fn prepack_weights(program: &mut Program) {
    let mut slots = Slots {
        by_spec: HashMap::new(),
        added: Vec::new(),
        size: program.weights_size,
    };
    let plain = &program.weights;
    for step in &mut program.steps {
        for kernel in &mut step.kernels {
            let KernelBody::Contract(c) = &mut kernel.body else {
                continue;
            };
            if !matches!(c.elem, Scalar::F32 | Scalar::F64)
                || c.m == 0
                || c.n == 0
                || c.k == 0
                || c.batch.contains(&0)
            {
                continue;
            }
            // The packing scratch lowering planned for what this pass was expected to do.
            if c.transposed && c.pack.is_none() {
                // Planned without its scratch (the result has nowhere to go): as written.
                c.transposed = false;
            }
            if c.winograd.is_some() && c.pack.is_none() {
                // Planned without its scratch: the direct form, as written.
                c.winograd = None;
            }
            let planned = c.pack.map(|_| c.scratch_of(&predicted_blocking(c)));
            if c.winograd.is_some() {
                // The product run as Winograd reads its weight transformed.
                match layout(c, &c.a, c.m, c.k, OperandLayout::Winograd, plain) {
                    Some((spec, batch_strides)) => {
                        c.a_packed = Some(PackedOperand {
                            byte_offset: slots.offset(spec),
                            batch_strides,
                        });
                        continue;
                    }
                    // Not a plain weight: the product runs as written, in the panels the
                    // Winograd scratch leaves (`planned` below).
                    None => c.winograd = None,
                }
            }
            if c.transposed {
                // The product run transposed reads `a^T` packed whole as its `B`.
                let a_t = MatView {
                    row_stride: c.a.col_stride,
                    col_stride: c.a.row_stride,
                    ..c.a.clone()
                };
                match layout(c, &a_t, c.k, c.m, OperandLayout::PackedB, plain) {
                    Some((spec, batch_strides)) => {
                        c.b_packed = Some(PackedOperand {
                            byte_offset: slots.offset(spec),
                            batch_strides,
                        });
                        continue;
                    }
                    // Not a plain weight: the product runs as written.
                    None => c.transposed = false,
                }
            }
            if packs_a(c) {
                if let Some((spec, batch_strides)) =
                    layout(c, &c.a, c.m, c.k, OperandLayout::PackedA, plain)
                {
                    c.a_packed = Some(PackedOperand {
                        byte_offset: slots.offset(spec),
                        batch_strides,
                    });
                }
            }
            if let Some(b) = c.b.as_mat().filter(|_| packs_b(c)) {
                if let Some((spec, batch_strides)) =
                    layout(c, b, c.k, c.n, OperandLayout::PackedB, plain)
                {
                    c.b_packed = Some(PackedOperand {
                        byte_offset: slots.offset(spec),
                        batch_strides,
                    });
                }
            }
            if planned.is_some_and(|planned| c.scratch_bytes() > planned) {
                // Its panels were sized for a weight packed whole, which this one could not
                // be: the product packs on its threads' stacks instead.
                c.pack = None;
            }
        }
    }
    program.weights.extend(slots.added);
    program.weights_size = slots.size;
}

/// Whether a constant `B` of `k x n` values gets a packed copy: every one that is not tiny.
/// A run then packs no `B` panel: the loop reads strips of 32 columns that lie one after
/// the other along `K` (for a product of few rows, which read a `B` with contiguous columns
/// where it is, this still beats reading rows `n` apart: 16x2048x2048 81 -> 104 GF/s, a GEMV
/// 10 -> 13 GF/s, `memc_gemm_bench`).
pub(crate) fn packs_b_whole(k: u64, n: u64) -> bool {
    k.saturating_mul(n) >= MIN_ELEMS
}

/// The blocking of `c` once this pass has laid out its constant operands, as lowering for
/// a target that prepacks weights sizes its panels: no `A` panel for a convolution's weight
/// (packed whole whatever its size, so that a direct convolution can read it), no `B` panel
/// for a constant `B` ([`packs_b_whole`]). Where a weight turns out not to be packable, the
/// pass drops the contraction's panels.
pub(crate) fn predicted_blocking(c: &Contract) -> memc_gemm::GemmBlocking {
    let float = matches!(c.elem, Scalar::F32 | Scalar::F64);
    let a_packed = c.a_packed.is_some()
        || (float && c.a.region == Region::Weights && matches!(c.b, ContractB::Im2col(_)));
    let b_packed = c.b_packed.is_some()
        || (float && c.b.as_mat().is_some_and(|b| b.region == Region::Weights) && packs_b(c));
    c.blocking_with(a_packed, b_packed)
}

/// Whether a constant `A` of `c` gets a packed copy: a convolution's (its `B` an implicit
/// column matrix, which a stride-1 window reads directly with the packed weight: see
/// `ConvPlan::runs_direct`, which plans no GEMM panels for it), or one of more than one row
/// (a one-row product's row kernel reads `A` where it is) and at least [`MIN_ELEMS`] values.
fn packs_a(c: &Contract) -> bool {
    match c.b {
        ContractB::Im2col(_) => true,
        ContractB::Mat(_) => c.m >= 2 && c.m.saturating_mul(c.k) >= MIN_ELEMS,
    }
}

/// Whether a constant `B` of `c` (a strided matrix) gets a packed copy ([`packs_b_whole`]).
fn packs_b(c: &Contract) -> bool {
    matches!(c.b, ContractB::Mat(_)) && packs_b_whole(c.k, c.n)
}

/// The slots added so far.
struct Slots {
    by_spec: HashMap<OperandPack, u64>,
    added: Vec<WeightSlot>,
    size: u64,
}

impl Slots {
    /// The weights-section offset of the slot `spec` describes, added on first use.
    fn offset(&mut self, spec: OperandPack) -> u64 {
        if let Some(&offset) = self.by_spec.get(&spec) {
            return offset;
        }
        let offset = self.size.next_multiple_of(WEIGHT_ALIGN);
        self.size = offset + spec.byte_size();
        self.added.push(WeightSlot {
            name: spec.slot_name(),
            byte_offset: offset,
            byte_size: spec.byte_size(),
            pack: None,
            unpacked: None,
            operand: Some(spec.clone()),
        });
        self.by_spec.insert(spec, offset);
        offset
    }
}

/// The slot for `c`'s operand `view` (`rows x cols`) in `layout`, and the strides of its
/// matrices along `c`'s batch axes (in elements): `None` unless the operand lies inside one
/// plain weight slot.
fn layout(
    c: &Contract,
    view: &MatView,
    rows: u64,
    cols: u64,
    layout: OperandLayout,
    slots: &[WeightSlot],
) -> Option<(OperandPack, Vec<i64>)> {
    if view.region != Region::Weights {
        return None;
    }
    let size = c.elem.size();
    let (lo, hi) = view.byte_range(&c.batch, rows, cols, size);
    let slot = slots.iter().find(|s| {
        s.pack.is_none()
            && s.unpacked.is_none()
            && s.operand.is_none()
            && lo >= s.byte_offset as i128
            && hi <= (s.byte_offset + s.byte_size) as i128
    })?;
    let offset = view.byte_offset - slot.byte_offset as i64;
    if offset < 0 || offset % size as i64 != 0 {
        return None;
    }
    // Axes along which the operand changes hold distinct matrices; the others share one.
    let distinct = |d: usize| c.batch[d] > 1 && view.batch_strides[d] != 0;
    let spec = OperandPack {
        weight: slot.name.clone(),
        elem: c.elem,
        layout,
        rows,
        cols,
        offset: offset as u64 / size,
        row_stride: view.row_stride,
        col_stride: view.col_stride,
        matrices: (0..c.batch.len())
            .filter(|&d| distinct(d))
            .map(|d| (c.batch[d], view.batch_strides[d]))
            .collect(),
    };
    spec.check_layout().ok()?;
    let mut batch_strides = vec![0i64; c.batch.len()];
    let mut step = spec.matrix_len() as i64;
    for d in (0..c.batch.len()).rev() {
        if distinct(d) {
            batch_strides[d] = step;
            step = step.checked_mul(c.batch[d] as i64)?;
        }
    }
    Some((spec, batch_strides))
}
