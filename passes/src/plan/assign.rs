//! Offset assignment for plain intervals (dynamic storage allocation).
//!
//! Given intervals (a size, a half-open range of live steps, an alignment), give each an
//! offset so that no two intervals live at a common step overlap in memory, with the arena
//! (the largest `offset + size`) as small as possible. LOAD, the largest total size live at
//! one step, is a lower bound; the problem is NP-hard, so [`assign_offsets`] runs several
//! strategies and keeps the best placement any of them finds.
//!
//! 1. **Best fit, largest first** ([`best_fit_largest_first`], the TFLite / XLA greedy): in
//!    order of decreasing size, each buffer takes the smallest gap among the placed buffers it
//!    meets in time, or goes on top. It always runs, so the result is never worse than it; a
//!    gap index (`best_fit`) keeps its cost near `n log n` rather than proportional to the
//!    pairs of buffers live together (under 0.1 s for 63k buffers and 54 million such pairs).
//! 2. **More constructive strategies** (`best_fit`, `skyline`): best fit in other orders
//!    (fullest section first, longest first), and *lowest floor first*: repeatedly place, at
//!    its floor, the unplaced buffer that can sit lowest, a static order breaking ties (by
//!    area, by start, by size). Best fit costs the same in any order; lowest floor first a few
//!    times more on large traces.
//! 3. **Search** within the time budget:
//!    - on problems of up to 2000 buffers with a modest conflict graph, MiniMalloc's exact
//!      search (`search`: depth-first over canonical placements with section inference,
//!      dominance and dynamic decomposition) as a decision procedure, first at LOAD (the
//!      placement is optimal when it succeeds), then in a binary search on the arena between
//!      LOAD and the best found, several preorders taking turns under growing node limits;
//!    - on larger traces, *peak windows* (`window`): the same search on the buffers live
//!      where the live total is within 3% of the target (around each peak), and best fit for
//!      everything else, fullest section first.
//!
//! Two worker threads share the work (the baseline and constructive strategies on one, the
//! search on the other, or the search split by preorder) and the best arena found. The search
//! ends at the budget, and everything as soon as an arena is within 0.1% of LOAD (what is left
//! to gain is smaller than what searching costs): running strategies give up then too. On
//! large problems a constructive strategy starts only while the budget lasts (one started
//! then runs to its end). Every strategy is deterministic; the budget, and which worker finds
//! what first, decide how far the search gets. The strategies share nothing but
//! the preprocessed `problem`; the caller's validator checks the result independently.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(crate) mod best_fit;
pub(crate) mod order;
pub(crate) mod problem;
pub(crate) mod search;
pub(crate) mod skyline;
pub(crate) mod window;

use order::{ranks, Keys};
use problem::Problem;

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

/// The name of the baseline strategy.
pub const BEST_FIT_LARGEST_FIRST: &str = "best-fit-largest-first";

/// Best fit with the largest buffers first (the TFLite and XLA greedy); ties go to the earlier
/// start, then to the earlier interval.
pub fn best_fit_largest_first(intervals: &[Interval]) -> Assignment {
    let p = Problem::new(intervals);
    let mut scratch = best_fit::Scratch::new(&p);
    let core = best_fit::best_fit(&p, &order_largest_first(&p), &mut scratch, &|| false)
        .expect("never stopped");
    Assignment {
        arena_size: p.arena(&core),
        offsets: p.expand(intervals.len(), &core),
        strategy: BEST_FIT_LARGEST_FIRST,
    }
}

/// Largest size first; ties: earlier start first, then the caller's order.
fn order_largest_first(p: &Problem) -> Vec<u32> {
    let mut order: Vec<u32> = (0..p.len() as u32).collect();
    order.sort_unstable_by_key(|&b| {
        let b = b as usize;
        (std::cmp::Reverse(p.size[b]), p.start[b], b)
    });
    order
}

/// Places every interval; no two intervals live at a common step overlap in memory.
///
/// `budget` bounds the improvement search; best fit, largest first always runs, so a tiny
/// budget still returns that; every other strategy gives up at the deadline (the baseline
/// may outlast a budget shorter than itself). A zero-size interval, or one with `start >= end`, meets nothing and gets offset
/// 0. Alignments are powers of two (0 counts as 1), and the sizes and alignments must be small
/// enough that stacking every interval fits in a `u64`.
pub fn assign_offsets(intervals: &[Interval], budget: Duration) -> Assignment {
    let start = Instant::now();
    let p = Problem::new(intervals);
    let keys = Keys::new(&p);
    let run = Run {
        p: &p,
        keys: &keys,
        deadline: start + budget,
        cancel: AtomicBool::new(false),
        best_arena: AtomicU64::new(u64::MAX),
        baseline_time: AtomicU64::new(0),
    };
    let stack = deep_stack(p.len().min(window::MAX_WINDOW_BUFFERS.max(SMALL_BUFFERS)));
    // Two workers (the machine may have two cores), each keeping its own best; on a tie the
    // first worker's placement is kept.
    let (first, second) = std::thread::scope(|scope| {
        let run = &run;
        let spawn = |name: &str| {
            std::thread::Builder::new()
                .name(name.into())
                .stack_size(stack)
        };
        let first = spawn("memc-assign-1").spawn_scoped(scope, move || run.first_worker());
        let second = spawn("memc-assign-2").spawn_scoped(scope, move || run.second_worker());
        (join(first), join(second))
    });
    // Without threads, best fit alone on this one.
    let mut best = first.unwrap_or_else(|| run.baseline());
    if let Some(other) = second {
        best.offer(other.arena, other.offsets, other.strategy);
    }
    Assignment {
        arena_size: best.arena,
        offsets: p.expand(intervals.len(), &best.offsets),
        strategy: best.strategy,
    }
}

/// The result of a worker thread, if it could be started.
fn join<T>(worker: std::io::Result<std::thread::ScopedJoinHandle<'_, Option<T>>>) -> Option<T> {
    let worker = worker.ok()?;
    worker
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// A placement and its arena.
struct Best {
    arena: u64,
    offsets: Vec<u64>,
    strategy: &'static str,
}

impl Best {
    /// Keeps `offsets` when strictly better.
    fn offer(&mut self, arena: u64, offsets: Vec<u64>, strategy: &'static str) {
        if arena < self.arena {
            (self.arena, self.offsets, self.strategy) = (arena, offsets, strategy);
        }
    }
}

/// What both workers share.
struct Run<'a> {
    p: &'a Problem,
    keys: &'a Keys,
    deadline: Instant,
    /// Set once some placement is [`good_enough`].
    cancel: AtomicBool,
    /// The smallest arena found by either worker.
    best_arena: AtomicU64,
    /// How long the baseline took, in nanoseconds (0 until known): the estimate of what one
    /// more constructive strategy costs.
    baseline_time: AtomicU64,
}

impl Run<'_> {
    /// Best fit, largest first.
    fn baseline(&self) -> Best {
        let p = self.p;
        let mut scratch = best_fit::Scratch::new(p);
        let offsets = best_fit::best_fit(p, &order_largest_first(p), &mut scratch, &|| false)
            .expect("never stopped");
        Best {
            arena: p.arena(&offsets),
            offsets,
            strategy: BEST_FIT_LARGEST_FIRST,
        }
    }

    /// Records a placement in `best` and tells the other worker about its arena.
    fn offer(&self, best: &mut Best, offsets: Vec<u64>, strategy: &'static str) {
        let arena = self.p.arena(&offsets);
        self.best_arena.fetch_min(arena, Ordering::Relaxed);
        if arena <= good_enough(self.p.load) {
            self.cancel.store(true, Ordering::Relaxed);
        }
        best.offer(arena, offsets, strategy);
    }

    fn done(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }

    /// Whether a running strategy should give up: some placement is good enough.
    fn interrupted(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// Whether one more constructive strategy fits in the budget. While the baseline runs,
    /// its time is unknown; a strategy started then runs beside it.
    fn time_for_one_more(&self) -> bool {
        !self.done() && Instant::now() + self.strategy_estimate() <= self.deadline
    }

    /// What one constructive strategy is expected to cost: a quarter more than the baseline
    /// took (zero while it runs).
    fn strategy_estimate(&self) -> Duration {
        Duration::from_nanos(self.baseline_time.load(Ordering::Relaxed)) * 5 / 4
    }

    /// The baseline, then constructive strategies, then (on small problems) the exact search
    /// with half of the preorders.
    fn first_worker(&self) -> Option<Best> {
        let p = self.p;
        let started = Instant::now();
        let baseline = self.baseline();
        let elapsed = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.baseline_time.store(elapsed.max(1), Ordering::Relaxed);
        let mut best = Best {
            arena: u64::MAX,
            offsets: Vec::new(),
            strategy: "",
        };
        self.offer(&mut best, baseline.offsets, baseline.strategy);
        if p.len() <= SMALL_BUFFERS {
            self.constructive(CONSTRUCTIVE, &mut best);
            // Where the exact search does not apply, the second worker takes the large path.
            self.exact_search(SEARCH_PREORDERS_FIRST, &mut best);
        } else {
            self.constructive(CONSTRUCTIVE_LARGE_FIRST, &mut best);
        }
        Some(best)
    }

    /// On small problems the exact search with the other preorders; on large ones (or where
    /// the exact search would not fit in memory) peak windows, then more constructive
    /// strategies.
    fn second_worker(&self) -> Option<Best> {
        let p = self.p;
        let mut best = Best {
            arena: u64::MAX,
            offsets: Vec::new(),
            strategy: "",
        };
        if p.len() > SMALL_BUFFERS || !self.exact_search(SEARCH_PREORDERS_SECOND, &mut best) {
            self.peak_windows(&[0], &mut best);
            self.constructive(CONSTRUCTIVE_LARGE_SECOND, &mut best);
            self.peak_windows(&[1, 2, 4], &mut best);
        }
        (best.arena != u64::MAX).then_some(best)
    }

    /// Runs `strategies` in turn while the budget lasts (small problems run them all: they
    /// take microseconds).
    fn constructive(&self, strategies: &[(Construct, &'static str)], best: &mut Best) {
        let p = self.p;
        let mut scratch = best_fit::Scratch::new(p);
        let mut sky = skyline::Skyline::new(p.n_sections);
        for (construct, name) in strategies {
            if self.cancel.load(Ordering::Relaxed)
                || (p.len() > SMALL_BUFFERS && !self.time_for_one_more())
            {
                return;
            }
            // Past the deadline a strategy gives up too: the baseline already stands.
            let stop = || self.interrupted() || Instant::now() >= self.deadline;
            let found = match construct {
                Construct::BestFit(order_keys) => {
                    best_fit::best_fit(p, &self.keys.order(p, order_keys), &mut scratch, &stop)
                }
                Construct::LowestFloor(order_keys) => skyline::lowest_floor_first(
                    p,
                    &ranks(&self.keys.order(p, order_keys)),
                    &mut sky,
                    &stop,
                ),
            };
            match found {
                Some(offsets) => self.offer(best, offsets, name),
                None => return,
            }
        }
    }

    /// MiniMalloc's search on the whole problem, when its conflict graph is modest; whether
    /// it was.
    fn exact_search(&self, preorders: &[&'static str], best: &mut Best) -> bool {
        let p = self.p;
        let memberships: u64 = (0..p.len()).map(|b| u64::from(p.width(b))).sum();
        if memberships > SEARCH_MAX_MEMBERSHIPS {
            return false;
        }
        let stop = || self.cancel.load(Ordering::Relaxed);
        let Some(conflicts) = search::conflict_graph(p, SEARCH_MAX_PAIRS, &stop) else {
            // Too many pairs, unless it was cancelled (then nothing is left to do).
            return stop();
        };
        if self.done() {
            return true;
        }
        let sections = search::section_members(p);
        let mut searches =
            search::Searches::new(p, &conflicts, &sections, self.keys, preorders, &self.cancel);
        searches.minimize(&self.best_arena, self.deadline, |offsets, _| {
            self.offer(best, offsets, "search");
        });
        true
    }

    /// Peak windows at LOAD plus the given thousandths, while the budget lasts.
    fn peak_windows(&self, permilles: &[u64], best: &mut Best) {
        let p = self.p;
        let mut scratch = best_fit::Scratch::new(p);
        for &permille in permilles {
            let cap = p.load + p.load / 1000 * permille;
            if cap >= self.best_arena.load(Ordering::Relaxed) || !self.time_for_one_more() {
                return;
            }
            // The search gets a third of the time left once the best fit that completes the
            // window is set aside: a window that needs more is rarely worth it, and the
            // constructive strategies still get their turn.
            let now = Instant::now();
            let spare = self
                .deadline
                .saturating_duration_since(now)
                .saturating_sub(self.strategy_estimate());
            let deadline = now + spare / 3;
            let found = window::peak_window(
                p,
                self.keys,
                cap,
                deadline,
                &self.cancel,
                &mut scratch,
                &|| self.interrupted(),
            );
            if let Some(offsets) = found {
                self.offer(best, offsets, "peak-window");
            }
        }
    }
}

/// An arena within 1/1024 (0.1%) of LOAD ends the search: what is left to gain is smaller
/// than what the search would cost on large problems.
fn good_enough(load: u64) -> u64 {
    load.saturating_add(load / 1024)
}

/// A constructive strategy: best fit or lowest floor first, in a static order.
enum Construct {
    BestFit(&'static str),
    LowestFloor(&'static str),
}

/// The constructive strategies after the baseline, with their names.
const CONSTRUCTIVE: &[(Construct, &str)] = &[
    (Construct::BestFit("TZ"), "best-fit-fullest-first"),
    (Construct::LowestFloor("A"), "lowest-floor-area"),
    (Construct::LowestFloor("S"), "lowest-floor-start"),
    (Construct::BestFit("WZ"), "best-fit-longest-first"),
    (Construct::LowestFloor("Z"), "lowest-floor-size"),
    (Construct::LowestFloor("TZW"), "lowest-floor-fullest"),
    (Construct::LowestFloor("WAT"), "lowest-floor-longest"),
];

/// On large problems, the strategies worth their time (each takes 0.1-0.3 s on 30k buffers),
/// most useful first, split between the workers.
const CONSTRUCTIVE_LARGE_FIRST: &[(Construct, &str)] = &[
    (Construct::LowestFloor("S"), "lowest-floor-start"),
    (Construct::BestFit("WZ"), "best-fit-longest-first"),
];
const CONSTRUCTIVE_LARGE_SECOND: &[(Construct, &str)] = &[
    (Construct::LowestFloor("A"), "lowest-floor-area"),
    (Construct::BestFit("TZ"), "best-fit-fullest-first"),
];

/// Problems up to this many buffers run every constructive strategy and the exact search.
const SMALL_BUFFERS: usize = 2000;

/// The exact search takes problems with at most this many conflicting pairs...
const SEARCH_MAX_PAIRS: usize = 2_000_000;
/// ... and at most this many (buffer, section) memberships.
const SEARCH_MAX_MEMBERSHIPS: u64 = 4_000_000;

/// The preorders the exact search takes turns with, split between the workers.
const SEARCH_PREORDERS_FIRST: &[&str] = &["WAT", "TWA", "TCA", "AWT"];
const SEARCH_PREORDERS_SECOND: &[&str] = &["TAW", "CAT", "WTA"];

/// A stack size for a search that recurses once per buffer placed.
fn deep_stack(n_buffers: usize) -> usize {
    (8 << 20) + n_buffers * 4096
}

#[cfg(test)]
pub(crate) mod reference;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod trace;
