//! Lowest floor first: the canonical greedy (MiniMalloc's search without backtracking).
//!
//! The *floor* of an unplaced buffer is the highest top of the placed buffers live at a
//! common step, rounded up to its alignment. Repeatedly, the unplaced buffer with the lowest
//! floor is placed at its floor, ties going to the earlier buffer of a static priority order.
//! Offsets come out in non-decreasing order, and every buffer rests on another (or on 0): the
//! shape MiniMalloc calls canonical. A section tree (range "raise to at least", range max)
//! gives a floor in `O(log sections)`; the queue holds floors that may have gone stale, and a
//! buffer whose floor rose since it was queued goes back in when it reaches the front. That
//! is `O(n log n)` plus `O(log n)` per requeue, at most one per overlapping pair (about a
//! quarter of a second on a 30k-buffer training trace).

use super::problem::{align_up, Problem};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A segment tree over sections: raise a range to at least a value; the maximum of a range.
pub(crate) struct Skyline {
    size: usize,
    /// The maximum over the node's range.
    max: Vec<u64>,
    /// A pending "at least" that applies to the node's whole range.
    raise: Vec<u64>,
}

impl Skyline {
    pub fn new(n_sections: usize) -> Skyline {
        let size = n_sections.max(1).next_power_of_two();
        Skyline {
            size,
            max: vec![0; 2 * size],
            raise: vec![0; 2 * size],
        }
    }

    pub fn clear(&mut self) {
        self.max.fill(0);
        self.raise.fill(0);
    }

    /// Raises sections `[lo, hi)` to at least `value`.
    pub fn raise(&mut self, lo: u32, hi: u32, value: u64) {
        let (mut l, mut r) = (lo as usize + self.size, hi as usize + self.size);
        let (l0, r0) = (l, r - 1);
        while l < r {
            if l & 1 == 1 {
                self.apply(l, value);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                self.apply(r, value);
            }
            l >>= 1;
            r >>= 1;
        }
        self.pull(l0);
        self.pull(r0);
    }

    fn apply(&mut self, node: usize, value: u64) {
        self.max[node] = self.max[node].max(value);
        self.raise[node] = self.raise[node].max(value);
    }

    fn pull(&mut self, mut node: usize) {
        node >>= 1;
        while node >= 1 {
            let m = self.max[2 * node]
                .max(self.max[2 * node + 1])
                .max(self.raise[node]);
            self.max[node] = m;
            node >>= 1;
        }
    }

    /// The maximum over sections `[lo, hi)`.
    pub fn max(&self, lo: u32, hi: u32) -> u64 {
        let (mut l, mut r) = (lo as usize + self.size, hi as usize + self.size);
        let mut m = 0;
        // Pending raises of the ancestors of the two boundary leaves apply to the range.
        let (mut a, mut b) = (l >> 1, (r - 1) >> 1);
        while a >= 1 {
            m = m.max(self.raise[a]).max(self.raise[b]);
            a >>= 1;
            b >>= 1;
        }
        while l < r {
            if l & 1 == 1 {
                m = m.max(self.max[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                m = m.max(self.max[r]);
            }
            l >>= 1;
            r >>= 1;
        }
        m
    }
}

/// Places every core buffer by lowest floor first; `priority[b]` breaks ties (lower first).
pub(crate) fn lowest_floor_first(p: &Problem, priority: &[u32], sky: &mut Skyline) -> Vec<u64> {
    sky.clear();
    let mut offsets = vec![0u64; p.len()];
    let mut heap: BinaryHeap<Reverse<(u64, u32, u32)>> = (0..p.len())
        .map(|b| Reverse((0, priority[b], b as u32)))
        .collect();
    while let Some(Reverse((floor, prio, b))) = heap.pop() {
        let bu = b as usize;
        let now = align_up(sky.max(p.lo[bu], p.hi[bu]), p.align[bu]);
        if now > floor {
            unsafe {
                REPUSH += 1;
            }
            heap.push(Reverse((now, prio, b)));
            continue;
        }
        offsets[bu] = now;
        sky.raise(p.lo[bu], p.hi[bu], now + p.size[bu]);
    }
    offsets
}

pub static mut REPUSH: u64 = 0;
