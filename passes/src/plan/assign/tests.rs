//! Tests of offset assignment: hand instances with known optima, edge cases, and seeded
//! random instances checked by a plain quadratic overlap check.

use super::order::Keys;
use super::problem::Problem;
use super::search::{conflict_graph, section_members, Probe, Searches};
use super::{assign_offsets, best_fit_largest_first, Assignment, Interval};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

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

/// A deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
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
    let conflicts = conflict_graph(&p, usize::MAX).expect("no pair limit");
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
    let shape = super::problem::TreeShape::new(&p);
    let keys = Keys::new(&p);
    let cancel = AtomicBool::new(false);
    let mut scratch = super::best_fit::Scratch::new(&shape);
    let deadline = Instant::now() + Duration::from_secs(20);
    let offsets =
        super::window::peak_window(&p, &shape, &keys, 1000, deadline, &cancel, &mut scratch)
            .expect("A below B and C, D above E and F");
    let a = Assignment {
        arena_size: p.arena(&offsets),
        offsets: p.expand(intervals.len(), &offsets),
        strategy: "peak-window",
    };
    check(&intervals, &a);
    assert_eq!(a.arena_size, 1000);
}
