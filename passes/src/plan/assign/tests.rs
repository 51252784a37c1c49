//! Tests of offset assignment: hand instances with known optima, edge cases, and seeded
//! random instances checked by a plain quadratic overlap check.

use super::best_fit::{self, UNPLACED};
use super::order::Keys;
use super::problem::Problem;
use super::search::{conflict_graph, section_members, Probe, Searches};
use super::{assign_offsets, best_fit_largest_first, reference, skyline, trace};
use super::{order_largest_first, Assignment, Interval};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use trace::Rng;

fn iv(size: u64, start: u64, end: u64) -> Interval {
    Interval {
        size,
        start,
        end,
        align: 1,
    }
}

/// Panics unless `a` places every interval at a multiple of its alignment, keeps intervals
/// live at a common step apart in memory, and reports its arena right.
fn check(intervals: &[Interval], a: &Assignment) {
    assert_eq!(a.offsets.len(), intervals.len());
    let mut arena = 0;
    for (i, x) in intervals.iter().enumerate() {
        assert_eq!(
            a.offsets[i] % x.align.max(1),
            0,
            "interval {i} is misaligned"
        );
        if x.size == 0 || x.start >= x.end {
            continue;
        }
        arena = arena.max(a.offsets[i] + x.size);
        for (j, y) in intervals.iter().enumerate().skip(i + 1) {
            if y.size == 0 || y.start >= y.end || x.end <= y.start || y.end <= x.start {
                continue;
            }
            let apart =
                a.offsets[i] + x.size <= a.offsets[j] || a.offsets[j] + y.size <= a.offsets[i];
            assert!(
                apart,
                "intervals {i} and {j} are live together and overlap in memory"
            );
        }
    }
    assert_eq!(a.arena_size, arena);
}

fn load(intervals: &[Interval]) -> u64 {
    super::super::load(intervals)
}

/// Random intervals: sizes over two orders of magnitude, short and long lives, some aligned.
fn random_instance(rng: &mut Rng, n: usize, steps: u64) -> Vec<Interval> {
    (0..n)
        .map(|_| {
            let start = rng.range(0, steps);
            let len = if rng.range(0, 4) == 0 {
                rng.range(1, steps)
            } else {
                rng.range(1, 8)
            };
            let align = [1, 1, 8, 64][rng.range(0, 4) as usize];
            Interval {
                size: rng.range(1, 100) * rng.range(1, 100),
                start,
                end: start + len,
                align,
            }
        })
        .collect()
}

/// Random intervals where ties are the rule: few sizes, few steps, many identical ranges,
/// alignments that are and are not powers of two, and some intervals that meet nothing.
fn tie_heavy_instance(rng: &mut Rng, n: usize) -> Vec<Interval> {
    (0..n)
        .map(|_| {
            let start = rng.range(0, 6);
            let end = if rng.range(0, 12) == 0 {
                start
            } else {
                start + rng.range(1, 4)
            };
            Interval {
                size: [0, 8, 16, 24, 64][rng.range(0, 5) as usize],
                start,
                end,
                align: [0, 1, 1, 8, 16, 3, 6][rng.range(0, 7) as usize],
            }
        })
        .collect()
}

/// Shuffles `items` (Fisher-Yates).
fn shuffle<T>(rng: &mut Rng, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        let j = rng.range(0, i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// Two intervals live at a common step that overlap in memory, if any: a sweep over steps
/// with the live intervals kept by offset, so that a new one is compared with its two
/// neighbours only (`O(n log n)`, for the large traces).
fn find_overlap(intervals: &[Interval], offsets: &[u64]) -> Option<(usize, usize)> {
    let mut events: Vec<(u64, bool, usize)> = Vec::new();
    for (i, x) in intervals.iter().enumerate() {
        if x.size > 0 && x.start < x.end {
            events.push((x.start, true, i));
            events.push((x.end, false, i));
        }
    }
    // Ends (`false`) sort before starts at the same step.
    events.sort_unstable();
    let mut live = std::collections::BTreeMap::new();
    for (_, is_start, i) in events {
        let (offset, end) = (offsets[i], offsets[i] + intervals[i].size);
        if !is_start {
            live.remove(&(offset, i));
            continue;
        }
        if let Some((&(_, below), &below_end)) = live.range(..(offset, i)).next_back() {
            if below_end > offset {
                return Some((below, i));
            }
        }
        if let Some((&(above_offset, above), _)) = live.range((offset, i)..).next() {
            if above_offset < end {
                return Some((above, i));
            }
        }
        live.insert((offset, i), end);
    }
    None
}

/// A perfect packing: a `steps` x `height` rectangle cut into `pieces` rectangles by
/// guillotine cuts. Every step is fully covered, so LOAD = `height` and it is achievable.
fn perfect_packing(rng: &mut Rng, pieces: usize, steps: u64, height: u64) -> Vec<Interval> {
    let mut rects = vec![(0u64, steps, 0u64, height)];
    while rects.len() < pieces {
        let k = rng.range(0, rects.len() as u64) as usize;
        let (t0, t1, o0, o1) = rects[k];
        let cut_time = rng.range(0, 2) == 0;
        if cut_time && t1 - t0 >= 2 {
            let t = rng.range(t0 + 1, t1);
            rects[k] = (t0, t, o0, o1);
            rects.push((t, t1, o0, o1));
        } else if o1 - o0 >= 2 {
            let o = rng.range(o0 + 1, o1);
            rects[k] = (t0, t1, o0, o);
            rects.push((t0, t1, o, o1));
        }
    }
    // Shuffle so the input order gives nothing away.
    for i in (1..rects.len()).rev() {
        let j = rng.range(0, i as u64 + 1) as usize;
        rects.swap(i, j);
    }
    rects
        .iter()
        .map(|&(t0, t1, o0, o1)| iv(o1 - o0, t0, t1))
        .collect()
}

#[test]
fn reuses_the_bytes_of_a_buffer_that_died() {
    let intervals = [iv(1024, 0, 2), iv(512, 1, 3), iv(1024, 2, 4)];
    let a = assign_offsets(&intervals, Duration::from_millis(100));
    check(&intervals, &a);
    assert_eq!(a.arena_size, 1536);
}

#[test]
fn touching_intervals_share_memory() {
    // Half-open ranges: [0, 2) and [2, 4) are never live together.
    let intervals = [iv(100, 0, 2), iv(100, 2, 4), iv(100, 4, 6)];
    let a = assign_offsets(&intervals, Duration::from_millis(100));
    check(&intervals, &a);
    assert_eq!(a.arena_size, 100);
    assert_eq!(a.offsets, vec![0, 0, 0]);
}

#[test]
fn zero_size_and_never_live_intervals_sit_at_zero() {
    let intervals = [
        iv(0, 0, 10),
        iv(64, 0, 10),
        iv(32, 5, 5),
        iv(16, 7, 3),
        iv(64, 2, 8),
    ];
    let a = assign_offsets(&intervals, Duration::from_millis(100));
    check(&intervals, &a);
    assert_eq!(a.arena_size, 128);
    assert_eq!((a.offsets[0], a.offsets[2], a.offsets[3]), (0, 0, 0));
}

#[test]
fn no_intervals_need_no_arena() {
    let a = assign_offsets(&[], Duration::from_millis(10));
    assert_eq!((a.offsets.len(), a.arena_size), (0, 0));
    let only_empty = [iv(0, 0, 1), iv(8, 3, 3)];
    let a = assign_offsets(&only_empty, Duration::from_millis(10));
    check(&only_empty, &a);
    assert_eq!(a.arena_size, 0);
}

#[test]
fn alignment_is_respected() {
    let mut rng = Rng(7);
    for _ in 0..20 {
        let intervals: Vec<Interval> = (0..30)
            .map(|_| {
                let start = rng.range(0, 20);
                let align = 1 << rng.range(0, 9);
                Interval {
                    size: rng.range(1, 1000),
                    start,
                    end: start + rng.range(1, 6),
                    align,
                }
            })
            .collect();
        let a = assign_offsets(&intervals, Duration::from_millis(20));
        check(&intervals, &a);
        check(&intervals, &best_fit_largest_first(&intervals));
    }
}

#[test]
fn an_alignment_that_is_not_a_power_of_two_is_still_respected() {
    let intervals = [
        Interval {
            size: 5,
            start: 0,
            end: 4,
            align: 1,
        },
        Interval {
            size: 7,
            start: 1,
            end: 3,
            align: 3,
        },
        Interval {
            size: 4,
            start: 2,
            end: 5,
            align: 6,
        },
    ];
    let a = assign_offsets(&intervals, Duration::from_millis(20));
    check(&intervals, &a);
    check(&intervals, &best_fit_largest_first(&intervals));
}

#[test]
fn an_alignment_of_zero_counts_as_one() {
    let intervals = [
        Interval {
            size: 3,
            start: 0,
            end: 2,
            align: 0,
        },
        iv(5, 1, 3),
    ];
    let a = assign_offsets(&intervals, Duration::from_millis(10));
    check(&intervals, &a);
    assert_eq!(a.arena_size, 8);
}

#[test]
fn best_fit_takes_the_smallest_gap() {
    // Steps 2..10 see P at [0, 500), R at [900, 1200) and V at [1450, 1650): gaps of 400 and
    // 250 bytes. W (100 bytes) takes the smaller one; first fit would take the lower.
    let intervals = [
        iv(500, 0, 10), // P
        iv(400, 0, 2),  // Q, at 500
        iv(300, 0, 10), // R, at 900
        iv(250, 0, 2),  // S, at 1200
        iv(200, 0, 10), // V, at 1450
        iv(100, 5, 10), // W
    ];
    let a = best_fit_largest_first(&intervals);
    check(&intervals, &a);
    assert_eq!(a.strategy, super::BEST_FIT_LARGEST_FIRST);
    assert_eq!(a.offsets, vec![0, 500, 900, 1200, 1450, 1200]);
}

#[test]
fn finds_the_optimum_of_perfect_packings() {
    for seed in 0..12 {
        let mut rng = Rng(seed);
        let intervals = perfect_packing(&mut rng, 8 + seed as usize, 40, 1000);
        assert_eq!(load(&intervals), 1000);
        // The search stops as soon as it reaches LOAD; the budget only guards a slow machine.
        let a = assign_offsets(&intervals, Duration::from_secs(20));
        check(&intervals, &a);
        assert_eq!(a.arena_size, 1000, "seed {seed}: {:?}", a.strategy);
    }
}

#[test]
fn the_search_decides_perfect_packings() {
    let mut rng = Rng(99);
    let intervals = perfect_packing(&mut rng, 14, 30, 500);
    let p = Problem::new(&intervals);
    let keys = Keys::new(&p);
    let conflicts = conflict_graph(&p, usize::MAX, &|| false).expect("no pair limit");
    let sections = section_members(&p);
    let cancel = AtomicBool::new(false);
    let mut searches = Searches::new(&p, &conflicts, &sections, &keys, &["WAT", "TAW"], &cancel);
    let deadline = Instant::now() + Duration::from_secs(20);
    match searches.probe(500, deadline) {
        Probe::Found(offsets, _) => assert_eq!(p.arena(&offsets), 500),
        Probe::Infeasible => panic!("a perfect packing fits its height"),
        Probe::Unknown => panic!("twenty seconds were not enough for 14 buffers"),
    }
    assert!(matches!(searches.probe(499, deadline), Probe::Infeasible));
}

#[test]
fn never_worse_than_best_fit_on_random_instances() {
    let mut rng = Rng(2024);
    for round in 0..150 {
        let n = 5 + (round % 60);
        let intervals = random_instance(&mut rng, n, 30);
        let baseline = best_fit_largest_first(&intervals);
        check(&intervals, &baseline);
        assert!(baseline.arena_size >= load(&intervals));
        let a = assign_offsets(&intervals, Duration::from_millis(5));
        check(&intervals, &a);
        assert!(a.arena_size <= baseline.arena_size, "round {round}");
        assert!(a.arena_size >= load(&intervals));
    }
}

#[test]
fn large_problems_take_the_window_path() {
    // Past the small-problem size: constructive strategies and peak windows on two threads.
    let mut rng = Rng(5);
    let intervals = random_instance(&mut rng, super::SMALL_BUFFERS + 500, 400);
    let baseline = best_fit_largest_first(&intervals);
    let a = assign_offsets(&intervals, Duration::from_millis(200));
    check(&intervals, &a);
    assert!(a.arena_size <= baseline.arena_size);
}

#[test]
fn a_zero_budget_still_places_everything() {
    let mut rng = Rng(11);
    let intervals = random_instance(&mut rng, 300, 50);
    let a = assign_offsets(&intervals, Duration::ZERO);
    check(&intervals, &a);
    assert!(a.arena_size <= best_fit_largest_first(&intervals).arena_size);
}

#[test]
fn peak_windows_keep_conflicts_outside_the_tight_sections() {
    // Two peaks of 1000 bytes, on steps 0..40 and 100..140. A (300 bytes) belongs to the
    // first and D (300 bytes) to the second, but both reach into the quiet stretch between,
    // where they meet: the window search sees them clipped to their peaks and must still
    // keep them apart.
    let mut intervals = vec![
        iv(300, 0, 80),    // A
        iv(700, 0, 20),    // B
        iv(700, 20, 40),   // C
        iv(300, 70, 140),  // D
        iv(700, 100, 120), // E
        iv(700, 120, 140), // F
    ];
    for k in 0..10 {
        intervals.push(iv(10 + k, 45 + 4 * k, 55 + 4 * k));
    }
    let p = Problem::new(&intervals);
    assert_eq!(p.load, 1000);
    let keys = Keys::new(&p);
    let cancel = AtomicBool::new(false);
    let mut scratch = super::best_fit::Scratch::new(&p);
    let deadline = Instant::now() + Duration::from_secs(20);
    let offsets =
        super::window::peak_window(&p, &keys, 1000, deadline, &cancel, &mut scratch, &|| false)
            .expect("A below B and C, D above E and F");
    let a = Assignment {
        arena_size: p.arena(&offsets),
        offsets: p.expand(intervals.len(), &offsets),
        strategy: "peak-window",
    };
    check(&intervals, &a);
    assert_eq!(a.arena_size, 1000);
}

#[test]
fn best_fit_matches_the_reference_on_random_instances() {
    // Random orders, alignments, ties, and (every third round) part of the buffers placed
    // beforehand, as the peak windows do.
    let mut rng = Rng(31);
    for round in 0..400 {
        let n = 1 + round % 70;
        let intervals = if round % 2 == 0 {
            random_instance(&mut rng, n, 12 + round as u64 % 30)
        } else {
            tie_heavy_instance(&mut rng, n)
        };
        let p = Problem::new(&intervals);
        let mut order: Vec<u32> = (0..p.len() as u32).collect();
        shuffle(&mut rng, &mut order);
        let fixed = if round % 3 == 0 {
            rng.range(0, p.len() as u64 + 1) as usize
        } else {
            0
        };
        let original = |core: &[u32]| -> Vec<usize> {
            core.iter()
                .map(|&b| p.original[b as usize] as usize)
                .collect()
        };
        let mut expected = vec![None; intervals.len()];
        reference::best_fit(&intervals, &original(&order[..fixed]), &mut expected);
        let mut offsets = vec![UNPLACED; p.len()];
        for &b in &order[..fixed] {
            offsets[b as usize] = expected[p.original[b as usize] as usize].expect("placed");
        }
        let mut scratch = best_fit::Scratch::new(&p);
        let finished =
            best_fit::complete(&p, &mut offsets, &order[fixed..], &mut scratch, &|| false);
        assert!(finished);
        reference::best_fit(&intervals, &original(&order[fixed..]), &mut expected);
        for b in 0..p.len() {
            assert_eq!(
                Some(offsets[b]),
                expected[p.original[b] as usize],
                "round {round}, core buffer {b}"
            );
        }
        // The baseline, through the public entry point: every interval, the others at 0.
        let mut by_size: Vec<usize> = (0..intervals.len()).collect();
        by_size.sort_by_key(|&i| (std::cmp::Reverse(intervals[i].size), intervals[i].start, i));
        let mut expected = vec![None; intervals.len()];
        reference::best_fit(&intervals, &by_size, &mut expected);
        let expected: Vec<u64> = expected.into_iter().map(|o| o.expect("placed")).collect();
        let baseline = best_fit_largest_first(&intervals);
        assert_eq!(baseline.offsets, expected, "round {round}");
        check(&intervals, &baseline);
    }
}

#[test]
fn lowest_floor_first_matches_the_reference_on_random_instances() {
    let mut rng = Rng(32);
    for round in 0..300 {
        let n = 1 + round % 50;
        let intervals = if round % 2 == 0 {
            random_instance(&mut rng, n, 10 + round as u64 % 20)
        } else {
            tie_heavy_instance(&mut rng, n)
        };
        let mut priority: Vec<u32> = (0..n as u32).collect();
        shuffle(&mut rng, &mut priority);
        let expected = reference::lowest_floor_first(&intervals, &priority);
        let p = Problem::new(&intervals);
        let core_priority: Vec<u32> = p.original.iter().map(|&i| priority[i as usize]).collect();
        let mut sky = skyline::Skyline::new(p.n_sections);
        let core = skyline::lowest_floor_first(&p, &core_priority, &mut sky, &|| false)
            .expect("never stopped");
        assert_eq!(p.expand(n, &core), expected, "round {round}");
    }
}

#[test]
fn strategies_stop_when_asked() {
    let mut rng = Rng(33);
    let intervals = random_instance(&mut rng, 2000, 300);
    let p = Problem::new(&intervals);
    let mut scratch = best_fit::Scratch::new(&p);
    let order = order_largest_first(&p);
    assert!(best_fit::best_fit(&p, &order, &mut scratch, &|| true).is_none());
    let mut sky = skyline::Skyline::new(p.n_sections);
    let priority: Vec<u32> = (0..p.len() as u32).collect();
    assert!(skyline::lowest_floor_first(&p, &priority, &mut sky, &|| true).is_none());
}

#[test]
fn best_fit_work_grows_near_linearly() {
    // The transformer training trace of `bench/dsa/make_trace.py` at 6 to 48 layers (4,120
    // to 31,630 buffers). Activations saved for the backward pass live long, so the pairs of
    // buffers live together grow with the square of the layers; best fit's basic operations
    // (nodes visited, blocks walked or pushed down) must not.
    let mut per_buffer = Vec::new();
    for layers in [6, 12, 24, 48] {
        let intervals = trace::transformer(layers, 1);
        let p = Problem::new(&intervals);
        let mut scratch = best_fit::Scratch::new(&p);
        let core = best_fit::best_fit(&p, &order_largest_first(&p), &mut scratch, &|| false)
            .expect("never stopped");
        let offsets = p.expand(intervals.len(), &core);
        assert_eq!(find_overlap(&intervals, &offsets), None, "{layers} layers");
        // Best fit packs this trace perfectly (it is what makes the planner stop early).
        assert_eq!(p.arena(&core), p.load, "{layers} layers");
        let n = p.len() as f64;
        per_buffer.push((scratch.ops as f64 / n, live_pairs(&p) as f64 / n));
    }
    let (first, last) = (per_buffer[0], per_buffer[per_buffer.len() - 1]);
    assert!(
        last.1 > 4.0 * first.1,
        "the trace gets denser with the layers: {per_buffer:?}"
    );
    assert!(
        last.0 < 1.3 * first.0,
        "best fit's work per buffer grows more than logarithmically: {per_buffer:?}"
    );
}

/// The number of pairs of core buffers live at a common step.
fn live_pairs(p: &Problem) -> u64 {
    let mut starts = p.lo.clone();
    starts.sort_unstable();
    // Each buffer meets those that start before its end, less those that ended by its start
    // and itself; every pair is counted twice.
    let mut ends = p.hi.clone();
    ends.sort_unstable();
    let twice: u64 = (0..p.len())
        .map(|b| {
            let started = starts.partition_point(|&s| s < p.hi[b]);
            let ended = ends.partition_point(|&e| e <= p.lo[b]);
            (started - ended - 1) as u64
        })
        .sum();
    twice / 2
}

#[test]
fn the_planner_packs_a_large_training_trace() {
    // 31,630 buffers; best fit reaches LOAD, which ends the search at once.
    let intervals = trace::transformer(48, 1);
    let a = assign_offsets(&intervals, Duration::from_secs(1));
    assert_eq!(find_overlap(&intervals, &a.offsets), None);
    assert_eq!(a.arena_size, load(&intervals));
}
