//! Plain reference versions of the constructive strategies, for the tests: straight from
//! their definitions, quadratic or worse, sharing no code with [`super::best_fit`] or
//! [`super::skyline`]. They work on the caller's intervals, by step, not on sections.

use super::Interval;

/// Whether two intervals hold memory at a common step.
fn meet(a: &Interval, b: &Interval) -> bool {
    a.size > 0
        && b.size > 0
        && a.start < b.end
        && b.start < a.end
        && a.start < a.end
        && b.start < b.end
}

/// The smallest multiple of `align` (0 counts as 1) at or above `x`.
fn round_up(x: u64, align: u64) -> u64 {
    let align = align.max(1);
    x.div_ceil(align) * align
}

/// Best fit: places the intervals of `order` in turn, around those already placed
/// (`offsets[i]` is `Some`). Each takes the smallest gap that fits, at its alignment, among
/// the memory of the placed intervals it meets (the lowest such gap on ties), or goes on top.
pub(crate) fn best_fit(intervals: &[Interval], order: &[usize], offsets: &mut [Option<u64>]) {
    for &i in order {
        let x = &intervals[i];
        let mut taken: Vec<(u64, u64)> = (0..intervals.len())
            .filter(|&j| j != i && meet(x, &intervals[j]))
            .filter_map(|j| offsets[j].map(|o| (o, o + intervals[j].size)))
            .collect();
        taken.sort_unstable();
        // The gaps: between the highest end so far and the next start above it.
        let mut top = 0;
        let mut gaps: Vec<(u64, u64)> = Vec::new();
        for (start, end) in taken {
            if start > top {
                gaps.push((top, start));
            }
            top = top.max(end);
        }
        let fitting = gaps
            .into_iter()
            .filter(|&(lo, hi)| round_up(lo, x.align) + x.size <= hi)
            .min_by_key(|&(lo, hi)| (hi - lo, lo));
        offsets[i] = Some(match fitting {
            Some((lo, _)) => round_up(lo, x.align),
            None => round_up(top, x.align),
        });
    }
}

/// Lowest floor first: repeatedly places, at its floor (the highest end among the placed
/// intervals it meets, at its alignment), the unplaced interval with the lowest floor, ties
/// to the lowest `priority` (distinct values). Intervals that meet nothing (zero size, empty
/// range) get 0.
pub(crate) fn lowest_floor_first(intervals: &[Interval], priority: &[u32]) -> Vec<u64> {
    let n = intervals.len();
    let mut offsets: Vec<Option<u64>> = vec![None; n];
    for _ in 0..n {
        let floor = |i: usize, offsets: &[Option<u64>]| {
            let highest = (0..n)
                .filter(|&j| j != i && meet(&intervals[i], &intervals[j]))
                .filter_map(|j| offsets[j].map(|o| o + intervals[j].size))
                .max()
                .unwrap_or(0);
            round_up(highest, intervals[i].align)
        };
        let next = (0..n)
            .filter(|&i| offsets[i].is_none())
            .min_by_key(|&i| (floor(i, &offsets), priority[i]))
            .expect("an unplaced interval is left");
        offsets[next] = Some(floor(next, &offsets));
    }
    offsets
        .into_iter()
        .map(|o| o.expect("every interval is placed"))
        .collect()
}
