//! Lowest floor first: the canonical greedy (MiniMalloc's search without backtracking).
//!
//! The *floor* of an unplaced buffer is the highest top of the placed buffers live at a
//! common step, rounded up to its alignment. Repeatedly, the unplaced buffer with the lowest
//! floor is placed at its floor, ties going to the earlier buffer of a static priority order.
//! Offsets come out in non-decreasing order, and every buffer rests on another (or on 0): the
//! shape MiniMalloc calls canonical. A section tree (range "raise to at least", range max)
//! gives a floor in `O(log sections)`; the queue holds floors that may have gone stale, and a
//! buffer whose floor rose since it was queued goes back in when it reaches the front.
//! Buffers with the same sections and alignment always share their floor, so only the first
//! of each such group (in priority order) waits in the queue. That is `O(n log n)` plus
//! `O(log n)` per requeue, at most one per overlapping pair: 1.7 million requeues and 0.25 s
//! on S_1 (28,526 buffers, 43 million pairs), 5.3 million and 0.65 s on the 63k-buffer
//! transformer trace of `bench/dsa.md` in area order.

use super::problem::{align_up, Problem};
use std::cmp::Reverse;
use std::collections::binary_heap::{BinaryHeap, PeekMut};

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
/// Returns `None` when `stop` says so (it is asked every few hundred buffers).
pub(crate) fn lowest_floor_first(
    p: &Problem,
    priority: &[u32],
    sky: &mut Skyline,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<u64>> {
    sky.clear();
    let mut offsets = vec![0u64; p.len()];
    // Buffers with the same sections and alignment always have the same floor, so only the
    // first of each such group (in priority order) waits in the queue; the next one enters
    // when it is placed.
    let mut by_range: Vec<u32> = (0..p.len() as u32).collect();
    by_range.sort_unstable_by_key(|&b| {
        let b = b as usize;
        (p.lo[b], p.hi[b], p.align[b], priority[b])
    });
    let mut next_in_group = vec![NONE; p.len()];
    let same_group =
        |a: usize, b: usize| (p.lo[a], p.hi[a], p.align[a]) == (p.lo[b], p.hi[b], p.align[b]);
    let mut heap: BinaryHeap<Reverse<u128>> = BinaryHeap::new();
    for (k, &b) in by_range.iter().enumerate() {
        let b = b as usize;
        match by_range.get(k + 1) {
            Some(&next) if same_group(b, next as usize) => next_in_group[b] = next,
            _ => {}
        }
        if k == 0 || !same_group(by_range[k - 1] as usize, b) {
            heap.push(Reverse(entry(0, priority[b], b as u32)));
        }
    }
    let mut steps = 0u32;
    while let Some(mut top) = heap.peek_mut() {
        steps = steps.wrapping_add(1);
        if steps.is_multiple_of(STOP_CHECK_INTERVAL) && stop() {
            return None;
        }
        let Reverse(key) = *top;
        let (floor, prio, b) = ((key >> 64) as u64, (key >> 32) as u32, key as u32);
        let bu = b as usize;
        let now = align_up(sky.max(p.lo[bu], p.hi[bu]), p.align[bu]);
        if now > floor {
            // The floor rose since the buffer was queued: requeue it (the heap sifts the new
            // key down when `top` goes out of scope).
            *top = Reverse(entry(now, prio, b));
            continue;
        }
        let top_of_b = now + p.size[bu];
        match next_in_group[bu] {
            NONE => {
                PeekMut::pop(top);
            }
            next => {
                // The whole group's range now ends at `top_of_b`: that is the next member's
                // floor.
                let nu = next as usize;
                *top = Reverse(entry(align_up(top_of_b, p.align[nu]), priority[nu], next));
            }
        }
        offsets[bu] = now;
        sky.raise(p.lo[bu], p.hi[bu], top_of_b);
    }
    Some(offsets)
}

/// A queue entry: floor, then priority, then buffer, as one number (the queue compares
/// them a lot).
#[inline]
fn entry(floor: u64, priority: u32, b: u32) -> u128 {
    (u128::from(floor) << 64) | (u128::from(priority) << 32) | u128::from(b)
}

/// No next member of a group.
const NONE: u32 = u32::MAX;

/// How many heap steps pass between two questions to `stop`.
const STOP_CHECK_INTERVAL: u32 = 256;
