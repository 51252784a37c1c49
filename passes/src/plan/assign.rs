//! Offset assignment for plain intervals (dynamic storage allocation).
//!
//! (Being written.)

use std::time::Duration;

pub(crate) mod best_fit;
pub(crate) mod problem;
pub(crate) mod search;
pub(crate) mod skyline;

use problem::{OverlapIndex, Problem};

/// One block to place: `size` bytes live on steps `[start, end)`, at an offset that is a
/// multiple of `align` (a power of two).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    pub size: u64,
    pub start: u64,
    pub end: u64,
    pub align: u64,
}

/// What [`assign_offsets`] found.
#[derive(Clone, Debug)]
pub struct Assignment {
    pub offsets: Vec<u64>,
    /// The arena size: the largest `offset + size`.
    pub arena_size: u64,
    /// The strategy that produced the kept assignment.
    pub strategy: &'static str,
}

/// Best fit with the largest buffers first (the TFLite and XLA greedy).
pub fn best_fit_largest_first(intervals: &[Interval]) -> Assignment {
    let p = Problem::new(intervals);
    let index = OverlapIndex::new(&p);
    let order = order_largest_first(&p);
    let core = best_fit::best_fit(&p, &index, &order, &mut best_fit::Scratch::default());
    Assignment {
        arena_size: p.arena(&core),
        offsets: p.expand(intervals.len(), &core),
        strategy: "best-fit-largest-first",
    }
}

/// Largest size first; ties: longer lifetime first, then earlier start, then index.
pub(crate) fn order_largest_first(p: &Problem) -> Vec<u32> {
    let mut order: Vec<u32> = (0..p.len() as u32).collect();
    order.sort_by_key(|&b| {
        let b = b as usize;
        (
            std::cmp::Reverse(p.size[b]),
            std::cmp::Reverse(p.width(b)),
            p.lo[b],
            b,
        )
    });
    order
}

/// Places every interval; no two intervals live at a common step overlap in memory.
pub fn assign_offsets(intervals: &[Interval], budget: Duration) -> Assignment {
    let _ = budget;
    best_fit_largest_first(intervals)
}
