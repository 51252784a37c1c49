//! Peak windows: the exact search where memory is tight, best fit everywhere else.
//!
//! On a large trace the arena is decided by a few tight stretches of the schedule, around the
//! peak of the live total. The window is the span of sections whose live total is within a
//! fraction of the target; the buffers live in it, clipped to it, form a subproblem small
//! enough for the search of [`super::search`]. Clipping keeps every conflict between them
//! (two buffers that both meet the window and meet each other meet inside it), so a solution
//! of the subproblem fixes their offsets for their whole lives. The remaining buffers are then
//! placed by best fit around them, fullest section first: the window's neighbourhood is the
//! next tightest, and it goes first.

use super::best_fit::{self, UNPLACED};
use super::order::Keys;
use super::problem::{Problem, TreeShape};
use super::search::{conflict_graph, section_members, Probe, Searches};
use super::Interval;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// The largest subproblem the window search takes on.
pub(crate) const MAX_WINDOW_BUFFERS: usize = 3000;

/// Solves the window of sections within `fraction` of `cap` exactly at `cap`, then places the
/// rest by best fit. Returns the core offsets, or `None` when the window is too large or its
/// search does not find a placement before `deadline`.
pub(crate) fn peak_window(
    p: &Problem,
    shape: &TreeShape,
    keys: &Keys,
    cap: u64,
    fraction: f64,
    deadline: Instant,
    cancel: &AtomicBool,
    scratch: &mut best_fit::Scratch,
) -> Option<Vec<u64>> {
    let threshold = (cap as f64 * fraction) as u64;
    let first = p.section_load.iter().position(|&l| l >= threshold)? as u32;
    let last = p.section_load.iter().rposition(|&l| l >= threshold)? as u32;
    let (wlo, whi) = (first, last + 1);
    let members: Vec<usize> = (0..p.len())
        .filter(|&b| p.lo[b] < whi && p.hi[b] > wlo)
        .collect();
    if members.len() > MAX_WINDOW_BUFFERS {
        return None;
    }
    let clipped: Vec<Interval> = members
        .iter()
        .map(|&b| Interval {
            size: p.size[b],
            start: u64::from(p.lo[b].max(wlo)),
            end: u64::from(p.hi[b].min(whi)),
            align: p.align[b],
        })
        .collect();
    let sub = Problem::new(&clipped);
    let conflicts = conflict_graph(&sub, usize::MAX)?;
    let sections = section_members(&sub);
    let sub_keys = Keys::new(&sub);
    let mut searches = Searches::new(
        &sub,
        &conflicts,
        &sections,
        &sub_keys,
        &["TZW", "TAW", "WAT"],
        cancel,
    );
    let Probe::Found(sub_offsets, _) = searches.probe(cap, deadline) else {
        return None;
    };
    let mut offsets = vec![UNPLACED; p.len()];
    for (k, &off) in sub_offsets.iter().enumerate() {
        offsets[members[sub.original[k] as usize]] = off;
    }
    let mut rest: Vec<u32> = (0..p.len() as u32)
        .filter(|&b| offsets[b as usize] == UNPLACED)
        .collect();
    rest.sort_unstable_by_key(|&b| {
        let b = b as usize;
        (std::cmp::Reverse((keys.fullest[b], p.size[b])), b)
    });
    best_fit::complete(p, shape, &mut offsets, &rest, scratch);
    Some(offsets)
}
