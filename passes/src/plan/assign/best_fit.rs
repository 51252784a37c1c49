//! Best fit in a given order (the TFLite / XLA greedy).
//!
//! Buffers are placed one at a time in the given order. For each, the already placed buffers
//! that are live at a common step are gathered and sorted by offset; the gaps between them are
//! candidate places, and the smallest gap that fits the buffer (at its alignment) wins, the
//! lowest such gap on ties; with no gap that fits, the buffer goes on top of them. Each step
//! costs `O(k log k)` for `k` time-overlapping placed buffers.

use super::problem::{align_up, OverlapIndex, Problem};

/// The offset of an unplaced buffer.
pub(crate) const UNPLACED: u64 = u64::MAX;

/// Reusable buffers for [`best_fit`].
#[derive(Default)]
pub(crate) struct Scratch {
    neighbors: Vec<(u64, u64)>,
}

/// Places the buffers of `order` (a permutation of the core) by best fit; returns the offsets.
pub(crate) fn best_fit(
    p: &Problem,
    index: &OverlapIndex,
    order: &[u32],
    scratch: &mut Scratch,
) -> Vec<u64> {
    let mut offsets = vec![UNPLACED; p.len()];
    for &b in order {
        let b = b as usize;
        offsets[b] = best_fit_offset(p, index, &offsets, b, scratch);
    }
    offsets
}

/// The best-fit offset for buffer `b` among the placed buffers (`offsets[x] != UNPLACED`).
pub(crate) fn best_fit_offset(
    p: &Problem,
    index: &OverlapIndex,
    offsets: &[u64],
    b: usize,
    scratch: &mut Scratch,
) -> u64 {
    let neighbors = &mut scratch.neighbors;
    neighbors.clear();
    index.for_each_overlap(p, p.lo[b], p.hi[b], |x| {
        let off = offsets[x as usize];
        if off != UNPLACED {
            neighbors.push((off, off + p.size[x as usize]));
        }
    });
    neighbors.sort_unstable_by_key(|&(off, _)| off);
    let (size, align) = (p.size[b], p.align[b]);
    let mut best: Option<(u64, u64)> = None; // (gap size, offset)
    let mut top = 0u64;
    for &(off, end) in neighbors.iter() {
        if off > top {
            let at = align_up(top, align);
            if at + size <= off {
                let gap = off - top;
                if best.is_none_or(|(g, _)| gap < g) {
                    best = Some((gap, at));
                }
            }
        }
        top = top.max(end);
    }
    match best {
        Some((_, at)) => at,
        None => align_up(top, align),
    }
}
