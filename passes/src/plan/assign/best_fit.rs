//! Best fit in a given order (the TFLite / XLA greedy).
//!
//! Buffers are placed one at a time in the given order. For each, the already placed buffers
//! that are live at a common step are gathered and sorted by offset; the gaps between them are
//! candidate places, and the smallest gap that fits the buffer (at its alignment) wins, the
//! lowest such gap on ties; with no gap that fits, the buffer goes on top of them.
//!
//! Cost: the placed buffers sit in the nodes of a centered interval tree ([`TreeShape`]), each
//! node's list ordered by first and by last section, so the `k` that overlap a buffer are
//! found in `O(log n + k)`; they are then bucket-sorted by offset (offsets spread over the
//! arena). A buffer that meets a quarter of all buffers instead walks every placed buffer in
//! offset order (a list kept sorted, recent placements merged in batches), `O(placed)`. The
//! whole is `O(n log n + P)` for `P` overlapping pairs, about half a second on a 30k-buffer
//! training trace with 43 million pairs.

use super::problem::{align_up, Problem, TreeShape, NO_NODE};

/// The offset of an unplaced buffer.
pub(crate) const UNPLACED: u64 = u64::MAX;

/// A placed buffer, as the lists below keep it.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Placed {
    offset: u64,
    end: u64,
    lo: u32,
    hi: u32,
}

/// The placed buffers of one tree node.
#[derive(Default, Clone)]
struct NodeLists {
    /// By ascending first section.
    by_lo: Vec<Placed>,
    /// By descending end section.
    by_hi: Vec<Placed>,
}

/// The placed buffers, indexed for best fit, and reusable buffers.
pub(crate) struct Scratch {
    lists: Vec<NodeLists>,
    /// `(offset << 64 | end)` of the gathered neighbors.
    neighbors: Vec<u128>,
    sorted: Vec<u128>,
    counts: Vec<u32>,
    /// Placed buffers by offset.
    by_offset: Vec<Placed>,
    /// Placed buffers not yet merged into `by_offset`.
    pending: Vec<Placed>,
    merged: Vec<Placed>,
}

impl Scratch {
    pub fn new(shape: &TreeShape) -> Scratch {
        Scratch {
            lists: vec![NodeLists::default(); shape.nodes.len()],
            neighbors: Vec::new(),
            sorted: Vec::new(),
            counts: Vec::new(),
            by_offset: Vec::new(),
            pending: Vec::new(),
            merged: Vec::new(),
        }
    }

    fn reset(&mut self) {
        for lists in &mut self.lists {
            lists.by_lo.clear();
            lists.by_hi.clear();
        }
        self.by_offset.clear();
        self.pending.clear();
    }

    fn record(&mut self, shape: &TreeShape, p: &Problem, b: usize, offset: u64) {
        let placed = Placed {
            offset,
            end: offset + p.size[b],
            lo: p.lo[b],
            hi: p.hi[b],
        };
        let lists = &mut self.lists[shape.node_of[b] as usize];
        let at = lists.by_lo.partition_point(|x| x.lo <= placed.lo);
        lists.by_lo.insert(at, placed);
        let at = lists.by_hi.partition_point(|x| x.hi >= placed.hi);
        lists.by_hi.insert(at, placed);
        self.pending.push(placed);
    }

    /// Merges the pending placements into `by_offset`.
    fn merge_pending(&mut self) {
        self.pending.sort_unstable();
        self.merged.clear();
        self.merged
            .reserve(self.by_offset.len() + self.pending.len());
        let (mut i, mut j) = (0, 0);
        while i < self.by_offset.len() && j < self.pending.len() {
            if self.by_offset[i] <= self.pending[j] {
                self.merged.push(self.by_offset[i]);
                i += 1;
            } else {
                self.merged.push(self.pending[j]);
                j += 1;
            }
        }
        self.merged.extend_from_slice(&self.by_offset[i..]);
        self.merged.extend_from_slice(&self.pending[j..]);
        std::mem::swap(&mut self.by_offset, &mut self.merged);
        self.pending.clear();
    }

    fn placed(&self) -> usize {
        self.by_offset.len() + self.pending.len()
    }

    /// Gathers `(offset << 64 | end)` of the placed buffers live in sections `[s, e)`.
    fn gather(&mut self, shape: &TreeShape, s: u32, e: u32) {
        self.neighbors.clear();
        if shape.nodes.is_empty() {
            return;
        }
        let key = |x: &Placed| (u128::from(x.offset) << 64) | u128::from(x.end);
        let mut stack = [0u32; 64];
        let mut depth = 1;
        while depth > 0 {
            depth -= 1;
            let node_idx = stack[depth] as usize;
            let node = &shape.nodes[node_idx];
            let lists = &self.lists[node_idx];
            let mut push = |child: u32| {
                if child != NO_NODE {
                    stack[depth] = child;
                    depth += 1;
                }
            };
            if node.center < s {
                // Every buffer here covers the center, so it is live in `[s, e)` when it
                // ends after `s`.
                for x in &lists.by_hi {
                    if x.hi <= s {
                        break;
                    }
                    self.neighbors.push(key(x));
                }
                push(node.right);
            } else if node.center >= e {
                for x in &lists.by_lo {
                    if x.lo >= e {
                        break;
                    }
                    self.neighbors.push(key(x));
                }
                push(node.left);
            } else {
                self.neighbors.extend(lists.by_lo.iter().map(key));
                push(node.left);
                push(node.right);
            }
        }
    }
}

/// Places the buffers of `order` (a permutation of the core) by best fit; returns the offsets.
pub(crate) fn best_fit(
    p: &Problem,
    shape: &TreeShape,
    order: &[u32],
    scratch: &mut Scratch,
) -> Vec<u64> {
    let mut offsets = vec![UNPLACED; p.len()];
    complete(p, shape, &mut offsets, order, scratch);
    offsets
}

/// Places the buffers of `order` by best fit around those already placed in `offsets`.
pub(crate) fn complete(
    p: &Problem,
    shape: &TreeShape,
    offsets: &mut [u64],
    order: &[u32],
    scratch: &mut Scratch,
) {
    scratch.reset();
    for (b, &off) in offsets.iter().enumerate() {
        if off != UNPLACED {
            scratch.record(shape, p, b, off);
        }
    }
    for &b in order {
        let b = b as usize;
        let at = best_fit_offset(p, shape, b, scratch);
        offsets[b] = at;
        scratch.record(shape, p, b, at);
    }
}

/// Tracks the smallest gap that fits while walking occupied ranges in offset order.
struct GapWalk {
    size: u64,
    align: u64,
    top: u64,
    /// `(gap size, offset)` of the best gap so far.
    best: Option<(u64, u64)>,
}

impl GapWalk {
    #[inline]
    fn visit(&mut self, off: u64, end: u64) {
        if off > self.top {
            let at = align_up(self.top, self.align);
            if at + self.size <= off {
                let gap = off - self.top;
                if self.best.is_none_or(|(g, _)| gap < g) {
                    self.best = Some((gap, at));
                }
            }
        }
        self.top = self.top.max(end);
    }

    fn offset(&self) -> u64 {
        match self.best {
            Some((_, at)) => at,
            None => align_up(self.top, self.align),
        }
    }
}

/// The best-fit offset for buffer `b` among the placed buffers.
fn best_fit_offset(p: &Problem, shape: &TreeShape, b: usize, scratch: &mut Scratch) -> u64 {
    let (lo, hi) = (p.lo[b], p.hi[b]);
    let mut walk = GapWalk {
        size: p.size[b],
        align: p.align[b],
        top: 0,
        best: None,
    };
    if shape.overlaps[b] as usize * 4 > p.len() && scratch.placed() > 64 {
        // This buffer meets a quarter of all buffers: walk the placed ones in offset order
        // rather than gathering and sorting. Recent placements are merged in on the fly, and
        // for good once they are many.
        if scratch.pending.len() * 8 > scratch.by_offset.len() {
            scratch.merge_pending();
        } else {
            scratch.pending.sort_unstable();
        }
        let (sorted, pending) = (&scratch.by_offset, &scratch.pending);
        let (mut i, mut j) = (0, 0);
        while i < sorted.len() || j < pending.len() {
            let x = if j == pending.len() || (i < sorted.len() && sorted[i] <= pending[j]) {
                i += 1;
                &sorted[i - 1]
            } else {
                j += 1;
                &pending[j - 1]
            };
            if x.lo < hi && lo < x.hi {
                walk.visit(x.offset, x.end);
            }
        }
    } else {
        scratch.gather(shape, lo, hi);
        sort_keys(
            &mut scratch.neighbors,
            &mut scratch.sorted,
            &mut scratch.counts,
        );
        for &key in scratch.sorted.iter() {
            walk.visit((key >> 64) as u64, key as u64);
        }
    }
    walk.offset()
}

/// Sorts `keys` into `out`: a bucket sort on the high 64 bits (offsets spread over the arena),
/// finished by sorting each bucket.
fn sort_keys(keys: &mut [u128], out: &mut Vec<u128>, counts: &mut Vec<u32>) {
    out.clear();
    let k = keys.len();
    if k < 64 {
        keys.sort_unstable();
        out.extend_from_slice(keys);
        return;
    }
    let max = keys
        .iter()
        .map(|&key| (key >> 64) as u64)
        .max()
        .unwrap_or(0);
    let bits = 64 - max.leading_zeros();
    let bucket_bits = (usize::BITS - k.leading_zeros()).min(bits);
    let shift = bits - bucket_bits;
    let n_buckets = 1usize << bucket_bits;
    counts.clear();
    counts.resize(n_buckets + 1, 0);
    for &key in keys.iter() {
        counts[(((key >> 64) as u64) >> shift) as usize + 1] += 1;
    }
    for i in 0..n_buckets {
        counts[i + 1] += counts[i];
    }
    out.resize(k, 0);
    for &key in keys.iter() {
        let bucket = (((key >> 64) as u64) >> shift) as usize;
        out[counts[bucket] as usize] = key;
        counts[bucket] += 1;
    }
    // `counts[i]` is now the end of bucket `i`; buckets hold a few keys each.
    let mut start = 0;
    for &end in &counts[..n_buckets] {
        let bucket = &mut out[start..end as usize];
        if bucket.len() > 16 {
            bucket.sort_unstable();
        } else {
            insertion_sort(bucket);
        }
        start = end as usize;
    }
}

fn insertion_sort(keys: &mut [u128]) {
    for i in 1..keys.len() {
        let key = keys[i];
        let mut j = i;
        while j > 0 && keys[j - 1] > key {
            keys[j] = keys[j - 1];
            j -= 1;
        }
        keys[j] = key;
    }
}
