//! Best fit in a given order (the TFLite / XLA greedy).
//!
//! Buffers are placed one at a time in the given order. For each, the gaps of the memory
//! occupied by the placed buffers that are live at a common step are the candidate places,
//! and the smallest gap that fits the buffer (at its alignment) wins, the lowest such gap on
//! ties; with no gap that fits, the buffer goes on top of them. (A gap is a maximal free
//! stretch below the highest of those buffers; touching buffers leave none between them.)
//!
//! The gap index, [`Scratch`], makes a placement cost about the number of gaps rather than
//! the number of placed buffers live beside it. It is a segment tree over the sections in
//! which every node keeps the memory occupied, at some step of its span, by the placed
//! buffers: the union of their `[offset, offset + size)`, as sorted disjoint blocks (buffers
//! that touch make one block). A placed buffer is added to the nodes of the canonical
//! decomposition of its sections and to their ancestors; the nodes below a canonical node
//! get it lazily: the canonical node keeps a *pending* list, merged into its children when a
//! query passes through it. A query for sections `[lo, hi)` pushes the pending blocks down
//! the two boundary paths and merges the blocks of the canonical nodes in offset order,
//! skipping (by galloping) the blocks that end below the walk's top. A buffer live for a few
//! sections meets one to three nodes, whose blocks are about the gaps there.
//!
//! The queries to come are known (the buffers of the order), so a node keeps its `occupied`
//! blocks only while a query to come will read them (it is one of its canonical nodes) and its
//! pending blocks only while a query will pass through it: the nodes high above short buffers
//! are never canonical, and nothing is kept past its last use.
//!
//! Cost: a query or an insertion visits `O(log sections)` nodes. The blocks walked and pushed
//! down have no useful worst-case bound (a long buffer's block may reach every node below its
//! canonical ones), but in practice they grow with the gaps, not with the pairs of buffers
//! live together: on the 63,530-buffer transformer trace of `bench/dsa.md` (54 million such
//! pairs) best fit does about 3.2 million basic operations (nodes visited, blocks walked or
//! merged into a list: [`Scratch::ops`]); on S_1 (28,526 buffers, 43 million pairs) 9.7
//! million (the test `best_fit_work_grows_near_linearly` keeps it so). On a random trace
//! without structure (memory fragmented, many gaps everywhere) it does about as much work as
//! walking the buffers live together would.

use super::problem::{align_up, Problem};

/// The offset of an unplaced buffer.
pub(crate) const UNPLACED: u64 = u64::MAX;

/// A block `[start, end)` of occupied memory.
type Block = (u64, u64);

/// The gap index over the placed buffers, and reusable buffers.
pub(crate) struct Scratch {
    /// Leaves of the segment tree: a power of two at least the number of sections.
    size: usize,
    /// For each node (1 is the root, `2k` and `2k + 1` the children of `k`), the memory
    /// occupied at some step of its sections by the buffers placed so far, except for those
    /// still pending at an ancestor: sorted, disjoint and never touching.
    occupied: Vec<Vec<Block>>,
    /// For each inner node, blocks of buffers that cover its whole span and are not yet in
    /// its descendants' `occupied`.
    pending: Vec<Vec<Block>>,
    /// For each node, how many of the queries still to come read its `occupied` (it is one of
    /// their canonical nodes): at 0 the list is neither kept up to date nor kept.
    as_canonical: Vec<u32>,
    /// For each inner node, how many of the queries still to come pass through it to nodes
    /// below: at 0 its `pending` list is neither kept up to date nor kept.
    passing: Vec<u32>,
    /// The canonical nodes of the current query.
    canonical: Vec<u32>,
    /// Basic operations so far: nodes visited, blocks walked, blocks merged into a list.
    pub ops: u64,
}

impl Scratch {
    pub fn new(p: &Problem) -> Scratch {
        let size = p.n_sections.max(1).next_power_of_two();
        Scratch {
            size,
            occupied: vec![Vec::new(); 2 * size],
            pending: vec![Vec::new(); size],
            as_canonical: vec![0; 2 * size],
            passing: vec![0; size],
            canonical: Vec::new(),
            ops: 0,
        }
    }

    /// Empties the index and counts the visits of the queries for the buffers of `order`.
    fn reset(&mut self, p: &Problem, order: &[u32]) {
        for blocks in self.occupied.iter_mut().chain(self.pending.iter_mut()) {
            blocks.clear();
        }
        self.as_canonical.fill(0);
        self.passing.fill(0);
        for &b in order {
            let b = b as usize;
            self.count_visits(1, 0, self.size, p.lo[b] as usize, p.hi[b] as usize);
        }
    }

    fn count_visits(&mut self, node: usize, nl: usize, nr: usize, lo: usize, hi: usize) {
        if lo <= nl && nr <= hi {
            self.as_canonical[node] += 1;
            return;
        }
        self.passing[node] += 1;
        let mid = (nl + nr) / 2;
        if lo < mid {
            self.count_visits(2 * node, nl, mid, lo, hi);
        }
        if mid < hi {
            self.count_visits(2 * node + 1, mid, nr, lo, hi);
        }
    }

    /// Whether a query to come will read `node`'s `occupied`.
    fn read_later(&self, node: usize) -> bool {
        self.as_canonical[node] > 0
    }

    /// Whether a query to come will pass through `node` (so push its pending blocks down).
    fn passed_later(&self, node: usize) -> bool {
        node < self.size && self.passing[node] > 0
    }

    /// Records a placed buffer: sections `[lo, hi)`, memory `[start, end)`.
    fn record(&mut self, lo: u32, hi: u32, start: u64, end: u64) {
        self.insert(1, 0, self.size, lo as usize, hi as usize, (start, end));
    }

    fn insert(&mut self, node: usize, nl: usize, nr: usize, lo: usize, hi: usize, block: Block) {
        let passed = self.passed_later(node);
        if !passed && !self.read_later(node) {
            return; // no query will visit this node again, nor any below it
        }
        self.ops += 1;
        if self.read_later(node) {
            insert_block(&mut self.occupied[node], block);
        }
        if lo <= nl && nr <= hi {
            if passed {
                insert_block(&mut self.pending[node], block);
            }
            return;
        }
        let mid = (nl + nr) / 2;
        if lo < mid {
            self.insert(2 * node, nl, mid, lo, hi, block);
        }
        if mid < hi {
            self.insert(2 * node + 1, mid, nr, lo, hi, block);
        }
    }

    /// Collects the canonical nodes of `[lo, hi)` in `canonical`, pushing pending blocks
    /// down on the way so that their `occupied` is complete.
    fn collect(&mut self, node: usize, nl: usize, nr: usize, lo: usize, hi: usize) {
        self.ops += 1;
        if lo <= nl && nr <= hi {
            // Counted done once the walk has read it.
            self.canonical.push(node as u32);
            return;
        }
        self.push_down(node);
        self.passing[node] -= 1;
        if self.passing[node] == 0 {
            self.pending[node] = Vec::new();
        }
        let mid = (nl + nr) / 2;
        if lo < mid {
            self.collect(2 * node, nl, mid, lo, hi);
        }
        if mid < hi {
            self.collect(2 * node + 1, mid, nr, lo, hi);
        }
    }

    /// Merges the pending blocks of inner node `node` into its children, where a query to
    /// come needs them.
    fn push_down(&mut self, node: usize) {
        if self.pending[node].is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending[node]);
        for child in [2 * node, 2 * node + 1] {
            if self.read_later(child) {
                self.ops += pending.len() as u64;
                union_into(&mut self.occupied[child], &pending);
            }
            if self.passed_later(child) {
                self.ops += pending.len() as u64;
                union_into(&mut self.pending[child], &pending);
            }
        }
        self.pending[node] = pending;
        self.pending[node].clear();
    }

    /// Walks the gaps of the memory occupied at some step of sections `[lo, hi)`.
    fn walk(&mut self, lo: u32, hi: u32, walk: &mut GapWalk) {
        self.canonical.clear();
        self.collect(1, 0, self.size, lo as usize, hi as usize);
        if let [node] = self.canonical[..] {
            let blocks = &self.occupied[node as usize];
            self.ops += blocks.len() as u64;
            for &(start, end) in blocks {
                walk.visit(start, end);
            }
        } else {
            self.merge_canonical(walk);
        }
        for &node in &self.canonical {
            let node = node as usize;
            self.as_canonical[node] -= 1;
            if self.as_canonical[node] == 0 {
                self.occupied[node] = Vec::new();
            }
        }
    }

    /// Walks the blocks of several canonical nodes.
    fn merge_canonical(&mut self, walk: &mut GapWalk) {
        // A merge of the canonical nodes' blocks in offset order that skips, by galloping,
        // the blocks that end below the walk's top: they change nothing.
        let mut heads: [&[Block]; MAX_CANONICAL] = [&[]; MAX_CANONICAL];
        let n_heads = self.canonical.len();
        for (head, &node) in heads.iter_mut().zip(&self.canonical) {
            *head = &self.occupied[node as usize];
        }
        let heads = &mut heads[..n_heads];
        let mut visited = 0u64;
        loop {
            let mut next: Option<(u64, usize)> = None;
            for (i, head) in heads.iter_mut().enumerate() {
                if head.first().is_some_and(|b| b.1 <= walk.top) {
                    *head = &head[skip_below(head, walk.top)..];
                }
                if let Some(&(start, _)) = head.first() {
                    if next.is_none_or(|(s, _)| start < s) {
                        next = Some((start, i));
                    }
                }
            }
            let Some((_, i)) = next else { break };
            let (start, end) = heads[i][0];
            heads[i] = &heads[i][1..];
            walk.visit(start, end);
            visited += 1;
        }
        self.ops += visited + n_heads as u64;
    }
}

/// The canonical nodes of a range: at most two per level of the tree.
const MAX_CANONICAL: usize = 2 * 33;

/// The number of leading blocks of `blocks` that end at or below `top` (a galloping search:
/// cheap when few are skipped).
fn skip_below(blocks: &[Block], top: u64) -> usize {
    let mut hi = 1;
    while hi < blocks.len() && blocks[hi].1 <= top {
        hi *= 2;
    }
    let lo = hi / 2;
    let hi = hi.min(blocks.len());
    lo + blocks[lo..hi].partition_point(|b| b.1 <= top)
}

/// Adds `block` to the sorted, disjoint, non-touching blocks of `blocks`.
fn insert_block(blocks: &mut Vec<Block>, (start, end): Block) {
    // The first block that ends at or after `start`, and past the last that starts at or
    // before `end`: those merge with the new one.
    let i = blocks.partition_point(|b| b.1 < start);
    let mut j = i;
    while j < blocks.len() && blocks[j].0 <= end {
        j += 1;
    }
    if i == j {
        blocks.insert(i, (start, end));
    } else {
        blocks[i] = (start.min(blocks[i].0), end.max(blocks[j - 1].1));
        blocks.drain(i + 1..j);
    }
}

/// `dst = dst ∪ src`, both sorted, disjoint and non-touching.
fn union_into(dst: &mut Vec<Block>, src: &[Block]) {
    if dst.is_empty() {
        dst.extend_from_slice(src);
        return;
    }
    if src.len() * 8 <= dst.len() {
        for &block in src {
            insert_block(dst, block);
        }
        return;
    }
    // Merge from the back into the grown vector (the blocks that end before the first new one
    // stay where they are), then join the blocks that overlap or touch.
    let Some(&(first_start, _)) = src.first() else {
        return;
    };
    let keep = dst.partition_point(|b| b.1 < first_start);
    let (n, m) = (dst.len(), src.len());
    dst.resize(n + m, (0, 0));
    let (mut i, mut j) = (n, m);
    while j > 0 {
        if i > keep && dst[i - 1].0 > src[j - 1].0 {
            dst[i + j - 1] = dst[i - 1];
            i -= 1;
        } else {
            dst[i + j - 1] = src[j - 1];
            j -= 1;
        }
    }
    let mut len = keep;
    for r in keep..n + m {
        let block = dst[r];
        if len > keep && block.0 <= dst[len - 1].1 {
            dst[len - 1].1 = dst[len - 1].1.max(block.1);
        } else {
            dst[len] = block;
            len += 1;
        }
    }
    dst.truncate(len);
}

/// Places the buffers of `order` (a permutation of the core) by best fit; returns the
/// offsets, or `None` when `stop` says so (it is asked every few hundred buffers).
pub(crate) fn best_fit(
    p: &Problem,
    order: &[u32],
    scratch: &mut Scratch,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<u64>> {
    let mut offsets = vec![UNPLACED; p.len()];
    complete(p, &mut offsets, order, scratch, stop).then_some(offsets)
}

/// Places the buffers of `order` by best fit around those already placed in `offsets`;
/// returns `false` when `stop` said so before the end.
pub(crate) fn complete(
    p: &Problem,
    offsets: &mut [u64],
    order: &[u32],
    scratch: &mut Scratch,
    stop: &dyn Fn() -> bool,
) -> bool {
    scratch.reset(p, order);
    for (b, &off) in offsets.iter().enumerate() {
        if off != UNPLACED {
            scratch.record(p.lo[b], p.hi[b], off, off + p.size[b]);
        }
    }
    for (k, &b) in order.iter().enumerate() {
        if k % STOP_CHECK_INTERVAL == STOP_CHECK_INTERVAL - 1 && stop() {
            return false;
        }
        let b = b as usize;
        let mut walk = GapWalk {
            size: p.size[b],
            align: p.align[b],
            top: 0,
            best: None,
        };
        scratch.walk(p.lo[b], p.hi[b], &mut walk);
        let at = walk.offset();
        offsets[b] = at;
        scratch.record(p.lo[b], p.hi[b], at, at + p.size[b]);
    }
    true
}

/// How many buffers are placed between two questions to `stop`.
const STOP_CHECK_INTERVAL: usize = 256;

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
