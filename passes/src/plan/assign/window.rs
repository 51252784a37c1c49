//! Peak windows: the exact search where memory is tight, best fit everywhere else.
//!
//! On a large trace the arena is decided by a few tight stretches of the schedule, around the
//! peaks of the live total. The *tight* sections are those whose live total is within 3% of
//! the target. The buffers live in at least one tight section, each clipped to the span from
//! the first tight section it covers to the last, form a subproblem small enough for the
//! search of [`super::search`]. Two such buffers that meet in a tight section still meet in
//! the subproblem's sections; the pairs that meet only outside the tight sections keep their
//! conflict in the search's conflict graph (taken from their full ranges), and the search is
//! told so ([`Searches::with_conflicts_beyond_sections`]). A solution of the subproblem thus
//! fixes their offsets for their whole lives, and separate peaks become separate parts of the
//! search. The remaining buffers are then placed by best fit around them, fullest section
//! first: the neighbourhood of the peaks is the next tightest, and it goes first.
//!
//! The window gives up (returns `None`) on more than [`MAX_WINDOW_BUFFERS`] buffers, and its
//! search stops after a few dives' worth of nodes: on a trace with one sharp peak the first
//! dive usually succeeds, and a window that needs more rarely pays for its time.

use super::best_fit::{self, UNPLACED};
use super::order::Keys;
use super::problem::Problem;
use super::search::{conflict_graph_of, section_members, Csr, Probe, Searches};
use super::Interval;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// A section is tight when its live total is at least this percentage of the target.
const TIGHT_PERCENT: u64 = 97;

/// The window search gives up once its node limit passes this many nodes per buffer.
const WINDOW_NODES_PER_BUFFER: u64 = 16;

/// The largest subproblem the window search takes on.
pub(crate) const MAX_WINDOW_BUFFERS: usize = 3000;

/// Solves the buffers live in tight sections (within 3% of `cap`) by the exact search at
/// `cap`, then places the rest by best fit. Returns the core offsets, or `None` when the
/// window holds too many buffers or its search finds no placement within its node limit or
/// before `deadline` (or `cancel`), or when `stop` interrupts the best fit that completes it.
pub(crate) fn peak_window(
    p: &Problem,
    keys: &Keys,
    cap: u64,
    deadline: Instant,
    cancel: &AtomicBool,
    scratch: &mut best_fit::Scratch,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<u64>> {
    let threshold = cap / 100 * TIGHT_PERCENT;
    let tight = |s: usize| p.section_load[s] >= threshold;
    // For each section, the first tight section at or after it and the last one before it
    // (`u32::MAX` where there is none).
    let mut next_tight = vec![u32::MAX; p.n_sections + 1];
    for s in (0..p.n_sections).rev() {
        next_tight[s] = if tight(s) {
            s as u32
        } else {
            next_tight[s + 1]
        };
    }
    let mut last_tight_before = vec![u32::MAX; p.n_sections + 1];
    for s in 1..=p.n_sections {
        last_tight_before[s] = if tight(s - 1) {
            s as u32 - 1
        } else {
            last_tight_before[s - 1]
        };
    }
    // The members: buffers live in a tight section.
    let members: Vec<usize> = (0..p.len())
        .filter(|&b| next_tight[p.lo[b] as usize] < p.hi[b])
        .collect();
    if members.is_empty() || members.len() > MAX_WINDOW_BUFFERS {
        return None;
    }
    // Each member is clipped to the span from the first tight section it covers to the last.
    // Two members that meet in a tight section still meet in the subproblem's sections; the
    // pairs that meet only in the loose stretches outside get their conflict from the full
    // ranges, so the placement is valid for their whole lives, and separate peaks fall into
    // separate parts of the search.
    let clipped: Vec<Interval> = members
        .iter()
        .map(|&b| Interval {
            size: p.size[b],
            start: u64::from(next_tight[p.lo[b] as usize]),
            end: u64::from(last_tight_before[p.hi[b] as usize]) + 1,
            align: p.align[b],
        })
        .collect();
    let sub = Problem::new(&clipped);
    debug_assert_eq!(
        sub.len(),
        members.len(),
        "every member covers a tight section"
    );
    let member_lo: Vec<u32> = members.iter().map(|&b| p.lo[b]).collect();
    let member_hi: Vec<u32> = members.iter().map(|&b| p.hi[b]).collect();
    let conflicts = conflict_graph_of(&member_lo, &member_hi, usize::MAX, &|| {
        cancel.load(Ordering::Relaxed) || Instant::now() >= deadline
    })?;
    let cross = pairs_beyond_sections(&sub, &conflicts);
    let sections = section_members(&sub);
    let sub_keys = Keys::new(&sub);
    let mut searches = Searches::new(
        &sub,
        &conflicts,
        &sections,
        &sub_keys,
        &["TZW", "TAW", "WAT"],
        cancel,
    )
    .with_conflicts_beyond_sections(&cross);
    // A few dives: a window that needs more rarely pays for its time.
    let max_limit = WINDOW_NODES_PER_BUFFER * members.len() as u64;
    let Probe::Found(sub_offsets, _) = searches.probe_within(cap, deadline, max_limit) else {
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
    best_fit::complete(p, &mut offsets, &rest, scratch, stop).then_some(offsets)
}

/// The pairs of `conflicts` that share no section of `sub`, one list per buffer.
fn pairs_beyond_sections(sub: &Problem, conflicts: &Csr) -> Csr {
    let mut start = Vec::with_capacity(sub.len() + 1);
    let mut items = Vec::new();
    start.push(0);
    for u in 0..sub.len() {
        for &v in conflicts.of(u) {
            let v = v as usize;
            if sub.hi[u] <= sub.lo[v] || sub.hi[v] <= sub.lo[u] {
                items.push(v as u32);
            }
        }
        start.push(items.len() as u32);
    }
    Csr { start, items }
}
