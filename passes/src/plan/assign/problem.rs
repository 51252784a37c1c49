//! The preprocessed problem every strategy works on.
//!
//! Intervals that can never collide with anything (zero size, or an empty step range) are set
//! aside at offset 0; the rest, the *core*, get dense indices. Schedule steps are compressed to
//! *sections*: section `k` is the span between the `k`-th and `k+1`-th distinct endpoint, and
//! a buffer covers the sections `[lo, hi)`. Two core buffers are live at a common step exactly
//! when their section ranges intersect.

use super::Interval;

/// The core of an offset-assignment problem, indexed by core buffer.
pub(crate) struct Problem {
    /// For each core buffer, its index in the caller's slice.
    pub original: Vec<u32>,
    pub size: Vec<u64>,
    /// A power of two (an alignment of 0 is read as 1).
    pub align: Vec<u64>,
    /// First section the buffer covers.
    pub lo: Vec<u32>,
    /// One past the last section the buffer covers.
    pub hi: Vec<u32>,
    pub n_sections: usize,
    /// The total size of the buffers live in each section.
    pub section_load: Vec<u64>,
    /// The largest entry of `section_load`: a lower bound on every arena.
    pub load: u64,
}

impl Problem {
    pub fn new(intervals: &[Interval]) -> Problem {
        let is_core = |iv: &Interval| iv.size > 0 && iv.start < iv.end;
        let mut times: Vec<u64> = intervals
            .iter()
            .filter(|iv| is_core(iv))
            .flat_map(|iv| [iv.start, iv.end])
            .collect();
        times.sort_unstable();
        times.dedup();
        let rank = |t: u64| -> u32 {
            let r = times
                .binary_search(&t)
                .expect("every core endpoint is in `times`");
            u32::try_from(r).expect("fewer than 2^32 distinct endpoints")
        };
        let n_sections = times.len().saturating_sub(1);
        let mut p = Problem {
            original: Vec::new(),
            size: Vec::new(),
            align: Vec::new(),
            lo: Vec::new(),
            hi: Vec::new(),
            n_sections,
            section_load: Vec::new(),
            load: 0,
        };
        for (idx, iv) in intervals.iter().enumerate() {
            if !is_core(iv) {
                continue;
            }
            p.original
                .push(u32::try_from(idx).expect("fewer than 2^32 intervals"));
            p.size.push(iv.size);
            p.align.push(iv.align.max(1));
            p.lo.push(rank(iv.start));
            p.hi.push(rank(iv.end));
        }
        // Difference array over sections.
        let mut delta = vec![0i128; n_sections + 1];
        for b in 0..p.len() {
            delta[p.lo[b] as usize] += i128::from(p.size[b]);
            delta[p.hi[b] as usize] -= i128::from(p.size[b]);
        }
        let mut live = 0i128;
        p.section_load = (0..n_sections)
            .map(|s| {
                live += delta[s];
                u64::try_from(live).unwrap_or(u64::MAX)
            })
            .collect();
        p.load = p.section_load.iter().copied().max().unwrap_or(0);
        p
    }

    /// The number of core buffers.
    pub fn len(&self) -> usize {
        self.size.len()
    }

    /// Whether core buffers `a` and `b` are live at a common step.
    #[inline]
    pub fn overlap(&self, a: usize, b: usize) -> bool {
        self.lo[a] < self.hi[b] && self.lo[b] < self.hi[a]
    }

    /// The number of sections buffer `b` covers.
    #[inline]
    pub fn width(&self, b: usize) -> u32 {
        self.hi[b] - self.lo[b]
    }

    /// Spreads core offsets back over the caller's intervals (the rest sit at 0).
    pub fn expand(&self, n_intervals: usize, core_offsets: &[u64]) -> Vec<u64> {
        let mut offsets = vec![0u64; n_intervals];
        for (b, &off) in core_offsets.iter().enumerate() {
            offsets[self.original[b] as usize] = off;
        }
        offsets
    }

    /// The arena a core placement needs.
    pub fn arena(&self, core_offsets: &[u64]) -> u64 {
        core_offsets
            .iter()
            .zip(&self.size)
            .map(|(&o, &s)| o + s)
            .max()
            .unwrap_or(0)
    }
}

/// Rounds `x` up to a multiple of `align` (a power of two).
#[inline]
pub(crate) fn align_up(x: u64, align: u64) -> u64 {
    (x + (align - 1)) & !(align - 1)
}

/// A static index answering "which buffers are live at some step of sections `[s, e)`" in
/// `O(log n + answers)`: a centered interval tree over the core buffers.
pub(crate) struct OverlapIndex {
    nodes: Vec<Node>,
    /// Per node, its buffers by ascending `lo`.
    by_lo: Vec<u32>,
    /// Per node, its buffers by descending `hi`.
    by_hi: Vec<u32>,
}

struct Node {
    center: u32,
    /// The node's buffers are `by_lo[first..last]` and `by_hi[first..last]`.
    first: u32,
    last: u32,
    left: u32,
    right: u32,
}

const NO_NODE: u32 = u32::MAX;

impl OverlapIndex {
    pub fn new(p: &Problem) -> OverlapIndex {
        let mut index = OverlapIndex {
            nodes: Vec::new(),
            by_lo: Vec::new(),
            by_hi: Vec::new(),
        };
        let all: Vec<u32> = (0..p.len() as u32).collect();
        index.build(p, all);
        index
    }

    fn build(&mut self, p: &Problem, buffers: Vec<u32>) -> u32 {
        if buffers.is_empty() {
            return NO_NODE;
        }
        // The median of the buffers' midpoints splits them evenly.
        let mut mids: Vec<u32> = buffers
            .iter()
            .map(|&b| (p.lo[b as usize] + p.hi[b as usize] - 1) / 2)
            .collect();
        let half = mids.len() / 2;
        let center = *mids.select_nth_unstable(half).1;
        let (mut here, mut left, mut right) = (Vec::new(), Vec::new(), Vec::new());
        for b in buffers {
            let (lo, hi) = (p.lo[b as usize], p.hi[b as usize]);
            if hi <= center {
                left.push(b);
            } else if lo > center {
                right.push(b);
            } else {
                here.push(b);
            }
        }
        let first = self.by_lo.len() as u32;
        here.sort_unstable_by_key(|&b| p.lo[b as usize]);
        self.by_lo.extend_from_slice(&here);
        here.sort_unstable_by_key(|&b| std::cmp::Reverse(p.hi[b as usize]));
        self.by_hi.extend_from_slice(&here);
        let last = self.by_lo.len() as u32;
        let node = self.nodes.len();
        self.nodes.push(Node {
            center,
            first,
            last,
            left: NO_NODE,
            right: NO_NODE,
        });
        let l = self.build(p, left);
        let r = self.build(p, right);
        self.nodes[node].left = l;
        self.nodes[node].right = r;
        node as u32
    }

    /// Calls `f` once for every buffer whose sections intersect `[s, e)`.
    pub fn for_each_overlap(&self, p: &Problem, s: u32, e: u32, mut f: impl FnMut(u32)) {
        if self.nodes.is_empty() {
            return;
        }
        let mut stack = [0u32; 64];
        let mut depth = 1;
        stack[0] = 0;
        while depth > 0 {
            depth -= 1;
            let node = &self.nodes[stack[depth] as usize];
            let (first, last) = (node.first as usize, node.last as usize);
            let mut push = |child: u32| {
                if child != NO_NODE {
                    stack[depth] = child;
                    depth += 1;
                }
            };
            if node.center < s {
                // Every buffer here starts at or before the center, so it overlaps when it
                // ends after `s`.
                for &b in &self.by_hi[first..last] {
                    if p.hi[b as usize] <= s {
                        break;
                    }
                    f(b);
                }
                push(node.right);
            } else if node.center >= e {
                for &b in &self.by_lo[first..last] {
                    if p.lo[b as usize] >= e {
                        break;
                    }
                    f(b);
                }
                push(node.left);
            } else {
                for &b in &self.by_lo[first..last] {
                    f(b);
                }
                push(node.left);
                push(node.right);
            }
        }
    }
}
