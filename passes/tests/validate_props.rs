//! Property tests for the independent plan validator, `memc_passes::validate`.
//!
//! The plans here come from placers and checkers written in this file, obviously correct and
//! sharing nothing with memc's planner or with the validator's sweep:
//! - a stacking placer puts every storage group above the previous one, so nothing overlaps;
//! - a random-program generator builds schedules with graph inputs, views and in-place results;
//! - a pairwise `O(n^2)` checker restates rules 2 and 5 for plans of plain buffers.

use std::collections::BTreeSet;

use memc_passes::validate::{
    validate, validate_with_limit, Access, BufferKind, CheckedBuffer, PlanToCheck, Violation,
};
use proptest::prelude::*;

fn round_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align) * align
}

fn owned(index: usize, offset: u64, size: u64, start: u64, end: u64, align: u64) -> CheckedBuffer {
    CheckedBuffer {
        name: format!("%{index}"),
        offset,
        size,
        start,
        end,
        align,
        kind: BufferKind::Owned,
        is_input: false,
    }
}

/// One access per step at which some buffer starts, writing every buffer that starts there
/// (all buffers here are plain and produced).
fn producers(buffers: &[CheckedBuffer]) -> Vec<Access> {
    let steps: BTreeSet<u64> = buffers.iter().map(|b| b.start).collect();
    steps
        .into_iter()
        .map(|step| Access {
            step,
            op: format!("op{step}"),
            reads: Vec::new(),
            writes: (0..buffers.len())
                .filter(|&i| buffers[i].start == step)
                .collect(),
            elementwise: false,
        })
        .collect()
}

/// A buffer before placement: size, first step, number of live steps, log2 of its alignment.
type IntervalSpec = (u64, u64, u64, u32);

fn interval_specs(max_len: usize) -> impl Strategy<Value = Vec<IntervalSpec>> {
    prop::collection::vec((0u64..300, 0u64..50, 1u64..20, 0u32..7), 0..max_len)
}

/// The trivial placer: each buffer above the previous one, aligned; the arena is the top.
fn stacked(specs: &[IntervalSpec]) -> PlanToCheck {
    let mut top = 0;
    let mut buffers = Vec::new();
    for (index, &(size, start, len, align_log)) in specs.iter().enumerate() {
        let align = 1u64 << align_log;
        let offset = round_up(top, align);
        top = offset + size;
        buffers.push(owned(index, offset, size, start, start + len, align));
    }
    let accesses = producers(&buffers);
    PlanToCheck {
        arena_size: top,
        buffers,
        accesses,
    }
}

fn lives_overlap(a: &CheckedBuffer, b: &CheckedBuffer) -> bool {
    a.start.max(b.start) < a.end.min(b.end)
}

fn bytes_overlap(a: &CheckedBuffer, b: &CheckedBuffer) -> bool {
    a.size > 0
        && b.size > 0
        && a.offset.max(b.offset)
            < a.offset
                .saturating_add(a.size)
                .min(b.offset.saturating_add(b.size))
}

fn overlapping_pairs(violations: &[Violation]) -> BTreeSet<(usize, usize)> {
    violations
        .iter()
        .filter_map(|v| match v {
            Violation::Overlap { first, second, .. } => {
                Some((first.index.min(second.index), first.index.max(second.index)))
            }
            _ => None,
        })
        .collect()
}

/// What rule 2 says about one buffer, restated: (index, which check) for each failed check.
fn reference_rule2(plan: &PlanToCheck) -> BTreeSet<(usize, &'static str)> {
    let mut failed = BTreeSet::new();
    for (i, b) in plan.buffers.iter().enumerate() {
        let power_of_two = b.align != 0 && b.align & (b.align - 1) == 0;
        if !power_of_two {
            failed.insert((i, "align"));
        } else if b.offset % b.align != 0 {
            failed.insert((i, "misaligned"));
        }
        if u128::from(b.offset) + u128::from(b.size) > u128::from(plan.arena_size) {
            failed.insert((i, "arena"));
        }
        if b.size > 0 && b.start >= b.end {
            failed.insert((i, "live"));
        }
    }
    failed
}

fn rule2_of(violations: &[Violation]) -> BTreeSet<(usize, &'static str)> {
    violations
        .iter()
        .filter_map(|v| match v {
            Violation::BadAlign { buffer, .. } => Some((buffer.index, "align")),
            Violation::Misaligned { buffer, .. } => Some((buffer.index, "misaligned")),
            Violation::OutOfArena { buffer, .. } => Some((buffer.index, "arena")),
            Violation::EmptyLiveRange { buffer, .. } => Some((buffer.index, "live")),
            _ => None,
        })
        .collect()
}

/// Rule 5 for plain buffers, restated pairwise: every pair live at a common step sharing a byte.
fn reference_rule5(plan: &PlanToCheck) -> BTreeSet<(usize, usize)> {
    let mut pairs = BTreeSet::new();
    for (i, a) in plan.buffers.iter().enumerate() {
        for (j, b) in plan.buffers.iter().enumerate().skip(i + 1) {
            if lives_overlap(a, b) && bytes_overlap(a, b) {
                pairs.insert((i, j));
            }
        }
    }
    pairs
}

/// A plain buffer of a random plan: offset, size, first step, number of live steps (0 gives an
/// empty range), alignment (not always a power of two).
type RawBuffer = (u64, u64, u64, u64, u64);

fn raw_buffer() -> impl Strategy<Value = RawBuffer> {
    let align = prop_oneof![8 => (0u32..6).prop_map(|log| 1u64 << log), 1 => Just(0u64), 1 => Just(3u64), 1 => Just(12u64)];
    (
        0u64..1024,
        0u64..200,
        0u64..40,
        prop_oneof![1 => Just(0u64), 9 => 1u64..10],
        align,
    )
}

/// One op of a random program (see [`program`]).
#[derive(Debug, Clone)]
struct OpSpec {
    /// 0..6: a plain op; 6..8: a view of one of its reads; 8..10: an elementwise op, written in
    /// place over a read that dies there when one can be.
    kind: u8,
    /// Picks the buffers it reads (modulo the number of buffers so far).
    reads: Vec<u32>,
    /// The result's size (for a view: a fraction of what its base has room for, in 1/256ths).
    size: u64,
    /// log2 of the result's alignment.
    align_log: u32,
    /// For a view: where it starts in its base, as a fraction in 1/256ths.
    view_at: u64,
}

fn op_spec() -> impl Strategy<Value = OpSpec> {
    (
        0u8..10,
        prop::collection::vec(any::<u32>(), 1..4),
        0u64..257,
        0u32..6,
        0u64..257,
    )
        .prop_map(|(kind, reads, size, align_log, view_at)| OpSpec {
            kind,
            reads,
            size,
            align_log,
            view_at,
        })
}

/// A random program: graph inputs (size, log2 align), then one op per step from step 1, each
/// producing one buffer. Liveness, views and in-place results are worked out here, the
/// buffers are stacked (a view inside its base, an in-place result on its input), and the
/// result must be valid.
fn program(inputs: &[(u64, u32)], ops: &[OpSpec]) -> PlanToCheck {
    #[derive(Clone, Copy, PartialEq)]
    enum Made {
        Input,
        Plain { elementwise: bool },
        View { base: usize, at: u64 },
    }
    let mut made = Vec::new();
    let mut sizes = Vec::new();
    let mut aligns = Vec::new();
    let mut starts = Vec::new();
    let mut accesses: Vec<Access> = Vec::new();
    for &(size, align_log) in inputs {
        made.push(Made::Input);
        sizes.push(size);
        aligns.push(1u64 << align_log);
        starts.push(0);
    }
    for (i, op) in ops.iter().enumerate() {
        let step = i as u64 + 1;
        let result = made.len();
        let mut reads: Vec<usize> = if result == 0 {
            Vec::new()
        } else {
            op.reads.iter().map(|&r| r as usize % result).collect()
        };
        // Elementwise ops mostly consume the latest result, which then often dies there: chains
        // of in-place results.
        if op.kind >= 8 && result > 0 {
            reads[0] = result - 1;
        }
        let is_view = (6..8).contains(&op.kind) && !reads.is_empty();
        if is_view {
            let base = reads[0];
            // The view's alignment divides its base's, and it starts at a multiple of it.
            let align = aligns[base].min(1 << op.align_log);
            let at =
                round_up(sizes[base] * op.view_at / 256, align).min(sizes[base]) / align * align;
            let size = (sizes[base] - at) * op.size / 256;
            made.push(Made::View { base, at });
            sizes.push(size);
            aligns.push(align);
        } else {
            let elementwise = op.kind >= 8;
            made.push(Made::Plain { elementwise });
            match reads.first() {
                // An elementwise result is no larger or more aligned than its first operand.
                Some(&operand) if elementwise => {
                    sizes.push(op.size.min(sizes[operand]));
                    aligns.push(aligns[operand].min(1 << op.align_log));
                }
                _ => {
                    sizes.push(op.size);
                    aligns.push(1 << op.align_log);
                }
            }
        }
        starts.push(step);
        let reads = if is_view { vec![reads[0]] } else { reads };
        accesses.push(Access {
            step,
            op: format!("op{step}"),
            reads,
            writes: vec![result],
            elementwise: op.kind >= 8,
        });
    }
    let n = made.len();
    // Liveness: from the producing step to the last read, then bases outlive their views.
    let mut ends: Vec<u64> = starts.iter().map(|&s| s + 1).collect();
    for access in &accesses {
        for &r in &access.reads {
            ends[r] = ends[r].max(access.step + 1);
        }
    }
    let mut has_views = vec![false; n];
    for index in (0..n).rev() {
        if let Made::View { base, .. } = made[index] {
            ends[base] = ends[base].max(ends[index]);
            has_views[base] = true;
        }
    }
    // In place: an elementwise result over a read that dies at its step, owns its bytes, has no
    // views, and has the room and alignment the result (and the result's views) need.
    let mut in_place_of = vec![None; n];
    for access in &accesses {
        let result = access.writes[0];
        if made[result] != (Made::Plain { elementwise: true }) {
            continue;
        }
        let dying = access.reads.iter().copied().find(|&r| {
            !matches!(made[r], Made::View { .. })
                && !has_views[r]
                && ends[r] == access.step + 1
                && sizes[r] >= sizes[result]
                && aligns[r] >= aligns[result]
                && in_place_of.iter().all(|&other| other != Some(r))
        });
        if let Some(input) = dying {
            in_place_of[result] = Some(input);
        }
    }
    // Stacking.
    let mut top = 0;
    let mut buffers: Vec<CheckedBuffer> = Vec::with_capacity(n);
    for index in 0..n {
        let (offset, kind) = match (made[index], in_place_of[index]) {
            (Made::View { base, at }, _) => (
                buffers[base].offset + at,
                BufferKind::View { base, offset: at },
            ),
            (_, Some(input)) => (buffers[input].offset, BufferKind::InPlace { input }),
            _ => {
                let offset = round_up(top, aligns[index]);
                top = offset + sizes[index];
                (offset, BufferKind::Owned)
            }
        };
        buffers.push(CheckedBuffer {
            name: format!("%{index}"),
            offset,
            size: sizes[index],
            start: starts[index],
            end: ends[index],
            align: aligns[index],
            kind,
            is_input: made[index] == Made::Input,
        });
    }
    PlanToCheck {
        arena_size: top,
        buffers,
        accesses,
    }
}

/// Any plan at all, indices and numbers unchecked, for "never panics".
fn arbitrary_plan() -> impl Strategy<Value = PlanToCheck> {
    let number = prop_oneof![4 => 0u64..64, 1 => any::<u64>(), 1 => Just(u64::MAX)];
    let index = 0usize..24;
    let kind = prop_oneof![
        2 => Just(BufferKind::Owned),
        1 => (index.clone(), number.clone()).prop_map(|(base, offset)| BufferKind::View { base, offset }),
        1 => index.clone().prop_map(|input| BufferKind::InPlace { input }),
    ];
    let buffer = (
        number.clone(),
        number.clone(),
        number.clone(),
        number.clone(),
        number.clone(),
        kind,
        any::<bool>(),
    )
        .prop_map(
            |(offset, size, start, end, align, kind, is_input)| CheckedBuffer {
                name: "%b".to_string(),
                offset,
                size,
                start,
                end,
                align,
                kind,
                is_input,
            },
        );
    let access = (
        number.clone(),
        prop::collection::vec(index.clone(), 0..3),
        prop::collection::vec(index, 0..3),
        any::<bool>(),
    )
        .prop_map(|(step, reads, writes, elementwise)| Access {
            step,
            op: "op".to_string(),
            reads,
            writes,
            elementwise,
        });
    (
        number,
        prop::collection::vec(buffer, 0..20),
        prop::collection::vec(access, 0..20),
    )
        .prop_map(|(arena_size, buffers, accesses)| PlanToCheck {
            arena_size,
            buffers,
            accesses,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// (a) Stacked intervals never overlap, so the plan is valid.
    #[test]
    fn validate_accepts_stacked_intervals(specs in interval_specs(200)) {
        let plan = stacked(&specs);
        prop_assert_eq!(validate(&plan), Ok(()));
    }

    /// (a) Random programs with inputs, views and in-place results, stacked, are valid.
    #[test]
    fn validate_accepts_stacked_programs(
        inputs in prop::collection::vec((0u64..300, 0u32..6), 0..4),
        ops in prop::collection::vec(op_spec(), 1..120),
    ) {
        let plan = program(&inputs, &ops);
        prop_assert_eq!(validate(&plan), Ok(()), "plan: {:#?}", plan);
    }

    /// (b) Moving one buffer onto another that is live at a common step is reported, naming both.
    #[test]
    fn validate_reports_a_buffer_moved_onto_a_live_one(
        specs in interval_specs(200),
        first in (1u64..300, 0u64..50, 1u64..20, 0u32..7),
        second_size in 1u64..300,
        pick in any::<prop::sample::Index>(),
    ) {
        // Two buffers that are surely live together, then the random rest.
        let mut specs = specs;
        specs.insert(0, first);
        specs.insert(1, (second_size, first.1, 1, 0));
        let mut plan = stacked(&specs);
        let candidates: Vec<(usize, usize)> = (0..plan.buffers.len())
            .flat_map(|i| (0..plan.buffers.len()).map(move |j| (i, j)))
            .filter(|&(i, j)| {
                let (a, b) = (&plan.buffers[i], &plan.buffers[j]);
                i != j && a.size > 0 && b.size > 0 && lives_overlap(a, b)
            })
            .collect();
        let (moved, onto) = candidates[pick.index(candidates.len())];
        plan.buffers[moved].offset = plan.buffers[onto].offset;
        let violations = validate_with_limit(&plan, usize::MAX).unwrap_err();
        let pair = (moved.min(onto), moved.max(onto));
        prop_assert!(
            overlapping_pairs(&violations).contains(&pair),
            "no overlap of {:?} in {:?}", pair, violations
        );
        let message = violations
            .iter()
            .map(ToString::to_string)
            .find(|m| m.contains(&format!("`%{}`", pair.0)) && m.contains(&format!("`%{}`", pair.1)));
        prop_assert!(message.is_some());
    }

    /// (c) On random plans of plain buffers in a small arena, `validate` and the pairwise
    /// reference agree on rule 2 and rule 5, violation for violation.
    #[test]
    fn validate_agrees_with_pairwise_reference(
        raw in prop::collection::vec(raw_buffer(), 0..200),
        arena_size in 512u64..1300,
    ) {
        let buffers: Vec<CheckedBuffer> = raw
            .iter()
            .enumerate()
            .map(|(i, &(offset, size, start, len, align))| owned(i, offset, size, start, start + len, align))
            .collect();
        let accesses = producers(&buffers);
        let plan = PlanToCheck { arena_size, buffers, accesses };
        let expected_rule2 = reference_rule2(&plan);
        let expected_rule5 = reference_rule5(&plan);
        let violations = validate_with_limit(&plan, usize::MAX).err().unwrap_or_default();
        prop_assert_eq!(rule2_of(&violations), expected_rule2.clone());
        prop_assert_eq!(overlapping_pairs(&violations), expected_rule5.clone());
        // Nothing else is wrong with these plans, so valid means valid to both.
        prop_assert_eq!(violations.is_empty(), expected_rule2.is_empty() && expected_rule5.is_empty());
        prop_assert!(violations.iter().all(|v| matches!(v.rule(), Some(2) | Some(5))));
        // With the default limit, it agrees on valid vs invalid.
        prop_assert_eq!(validate(&plan).is_ok(), violations.is_empty());
    }

    /// Whatever the plan, `validate` answers without panicking, and stops at its limit.
    #[test]
    fn validate_never_panics(plan in arbitrary_plan(), limit in 0usize..8) {
        let _ = validate(&plan);
        if let Err(violations) = validate_with_limit(&plan, limit) {
            prop_assert!(violations.len() <= limit + 1);
        }
    }
}

/// A small deterministic generator (splitmix64), so the scale test needs no extra crate.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// 100k buffers in 256 lanes of memory; within a lane, buffers follow one another in time
/// (often touching), so bytes are reused heavily and nothing live together overlaps.
#[test]
fn validate_accepts_100k_non_overlapping_buffers() {
    const N_LANES: u64 = 256;
    const LANE_BYTES: u64 = 1 << 16;
    let mut rng = SplitMix(7);
    let mut lane_time = vec![0u64; N_LANES as usize];
    let mut buffers = Vec::with_capacity(100_000);
    for index in 0..100_000 {
        let lane = rng.below(N_LANES);
        let align = 1 << rng.below(7);
        let size = rng.below(LANE_BYTES / 2) + 1;
        let offset = lane * LANE_BYTES + round_up(rng.below(LANE_BYTES / 2), align);
        let start = lane_time[lane as usize] + rng.below(2);
        let end = start + 1 + rng.below(8);
        lane_time[lane as usize] = end;
        buffers.push(owned(index, offset, size, start, end, align));
    }
    let accesses = producers(&buffers);
    let mut plan = PlanToCheck {
        arena_size: N_LANES * LANE_BYTES,
        buffers,
        accesses,
    };
    assert_eq!(validate(&plan), Ok(()));

    // Moving one buffer into the next lane's bytes at a step where that lane is busy is caught.
    let moved = 50_000;
    let b = plan.buffers[moved].clone();
    let victim = plan
        .buffers
        .iter()
        .position(|o| o.offset / LANE_BYTES != b.offset / LANE_BYTES && lives_overlap(o, &b))
        .expect("with 256 busy lanes, some other lane has a buffer live with it");
    plan.buffers[moved].offset = plan.buffers[victim].offset;
    plan.buffers[moved].align = 1;
    let violations = validate(&plan).unwrap_err();
    let pair = (moved.min(victim), moved.max(victim));
    assert!(
        overlapping_pairs(&violations).contains(&pair),
        "{violations:?}"
    );
}
