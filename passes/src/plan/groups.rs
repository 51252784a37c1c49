//! Constraints to placement groups, and the [`plan`] entry point.
//!
//! A view ([`Constraint::AliasOf`]) owns no bytes: it joins its base's group at a fixed offset,
//! and the group stays live as long as any member is. An in-place result
//! ([`Constraint::MayShareWith`]) joins its input's group when that is legal: the group's last
//! live step is the step that produces the result (the input dies there) and the result fits in
//! the group's bytes. Otherwise it is placed on its own. Each group is one [`Interval`] for
//! [`assign_offsets`]; a member's offset is its group's plus its offset inside the group.

use super::assign::{assign_offsets, Interval};
use super::load;
use std::time::Duration;

/// How a buffer relates to another.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Constraint {
    /// Owns its bytes.
    None,
    /// A view: must live at `base`'s offset plus `offset`, inside `base`'s bytes.
    AliasOf { base: usize, offset: u64 },
    /// In-place: may reuse the bytes of this buffer, which dies at the step that produces this
    /// one. The planner takes it when it is legal and says so in [`PlanResult::in_place`].
    MayShareWith(usize),
}

/// One buffer of a planning problem.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BufferSpec {
    pub size: u64,
    /// First step the buffer holds a value (the step that writes it).
    pub start: u64,
    /// One past the last step that reads it.
    pub end: u64,
    /// A power of two.
    pub align: u64,
    pub constraint: Constraint,
}

impl BufferSpec {
    /// A buffer of `size` bytes live on `[start, end)`, byte-aligned, without constraint.
    pub fn new(size: u64, start: u64, end: u64) -> BufferSpec {
        BufferSpec {
            size,
            start,
            end,
            align: 1,
            constraint: Constraint::None,
        }
    }

    pub fn with_align(mut self, align: u64) -> BufferSpec {
        self.align = align;
        self
    }

    pub fn with_constraint(mut self, constraint: Constraint) -> BufferSpec {
        self.constraint = constraint;
        self
    }
}

/// Planning options.
#[derive(Clone, Debug)]
pub struct PlanOptions {
    /// Time the improvement search may use; the constructive strategies always run.
    pub budget: Duration,
}

impl Default for PlanOptions {
    fn default() -> PlanOptions {
        PlanOptions {
            budget: Duration::from_millis(200),
        }
    }
}

/// A plan for a problem.
#[derive(Clone, Debug)]
pub struct PlanResult {
    /// One offset per buffer, in the problem's order.
    pub offsets: Vec<u64>,
    pub arena_size: u64,
    /// LOAD with views and the in-place sharing taken: the lower bound for this problem.
    pub load: u64,
    /// LOAD if every buffer owned its bytes (no views, no in-place).
    pub load_without_sharing: u64,
    /// For each buffer, whether its in-place request was taken.
    pub in_place: Vec<bool>,
    /// The strategy whose assignment was kept.
    pub strategy: &'static str,
}

/// A problem that cannot be planned, naming the buffer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("buffer #{buffer} refers to buffer #{target}, which does not exist")]
    BadIndex { buffer: usize, target: usize },
    #[error("buffer #{buffer} is part of a cycle of views")]
    ViewCycle { buffer: usize },
    #[error("view #{buffer} ({size} bytes at offset {offset}) does not fit in its base #{base} ({base_size} bytes)")]
    ViewOutsideBase {
        buffer: usize,
        base: usize,
        offset: u64,
        size: u64,
        base_size: u64,
    },
    #[error("buffer #{buffer} has alignment {align}, which is not a power of two")]
    BadAlign { buffer: usize, align: u64 },
    #[error("buffer #{buffer} has an empty or reversed live range [{start}, {end})")]
    BadRange { buffer: usize, start: u64, end: u64 },
    #[error("the arena size overflows 64 bits")]
    Overflow,
}

/// Constraints resolved into placement groups.
struct Resolved {
    /// One interval per group, in the order of `roots`.
    intervals: Vec<Interval>,
    /// The buffer that owns each group.
    roots: Vec<usize>,
    /// Each buffer's group owner and offset inside the group (`None`: it owns its group).
    root: Vec<Option<(usize, u64)>>,
    in_place: Vec<bool>,
}

/// LOAD of `buffers` with views and legal in-place sharing taken, and without any sharing:
/// what [`plan`] would report, without assigning offsets.
pub fn load_with_sharing(buffers: &[BufferSpec]) -> Result<(u64, u64), PlanError> {
    let resolved = resolve(buffers)?;
    Ok((load(&resolved.intervals), load(&plain_intervals(buffers))))
}

/// The placement groups of `buffers` (views and legal in-place sharing taken) as intervals:
/// the live profile the planner sees, for passes that model memory (remat).
pub fn group_intervals(buffers: &[BufferSpec]) -> Result<Vec<Interval>, PlanError> {
    Ok(resolve(buffers)?.intervals)
}

fn plain_intervals(buffers: &[BufferSpec]) -> Vec<Interval> {
    buffers
        .iter()
        .map(|b| Interval {
            size: b.size,
            start: b.start,
            end: b.end,
            align: b.align,
        })
        .collect()
}

/// Plans `buffers`: an offset for each, the arena size and the lower bound.
pub fn plan(buffers: &[BufferSpec], options: &PlanOptions) -> Result<PlanResult, PlanError> {
    let Resolved {
        intervals,
        roots,
        root,
        in_place,
    } = resolve(buffers)?;
    let n = buffers.len();
    let root_of = |i: usize, root: &[Option<(usize, u64)>]| root[i].map_or((i, 0), |r| r);
    let assignment = assign_offsets(&intervals, options.budget);
    let mut group_offset = vec![0u64; n];
    for (k, &r) in roots.iter().enumerate() {
        group_offset[r] = assignment.offsets[k];
    }
    let mut offsets = Vec::with_capacity(n);
    for i in 0..n {
        let (r, off) = root_of(i, &root);
        offsets.push(
            group_offset[r]
                .checked_add(off)
                .ok_or(PlanError::Overflow)?,
        );
    }
    Ok(PlanResult {
        offsets,
        arena_size: assignment.arena_size,
        load: load(&intervals),
        load_without_sharing: load(&plain_intervals(buffers)),
        in_place,
        strategy: assignment.strategy,
    })
}

/// Resolves views and in-place requests into placement groups.
fn resolve(buffers: &[BufferSpec]) -> Result<Resolved, PlanError> {
    let n = buffers.len();
    for (i, b) in buffers.iter().enumerate() {
        if !b.align.is_power_of_two() {
            return Err(PlanError::BadAlign {
                buffer: i,
                align: b.align,
            });
        }
        if b.start >= b.end && b.size > 0 {
            return Err(PlanError::BadRange {
                buffer: i,
                start: b.start,
                end: b.end,
            });
        }
        match b.constraint {
            Constraint::AliasOf { base: t, .. } | Constraint::MayShareWith(t) if t >= n => {
                return Err(PlanError::BadIndex {
                    buffer: i,
                    target: t,
                });
            }
            _ => {}
        }
    }

    // Each buffer's group root and offset within the group; views first (they are fixed).
    let mut root: Vec<Option<(usize, u64)>> = vec![None; n];
    for i in 0..n {
        resolve_view(buffers, i, &mut root, 0)?;
    }
    let mut group_size: Vec<u64> = vec![0; n];
    let mut group_start: Vec<u64> = vec![u64::MAX; n];
    let mut group_end: Vec<u64> = vec![0; n];
    let mut group_align: Vec<u64> = vec![1; n];
    let root_of = |i: usize, root: &[Option<(usize, u64)>]| root[i].map_or((i, 0), |r| r);
    for i in 0..n {
        let (r, _) = root_of(i, &root);
        if r == i {
            group_size[r] = buffers[r].size;
        }
    }
    for (i, b) in buffers.iter().enumerate() {
        let (r, off) = root_of(i, &root);
        if r != i && off.checked_add(b.size).is_none_or(|e| e > group_size[r]) {
            let base = match b.constraint {
                Constraint::AliasOf { base, .. } => base,
                _ => r,
            };
            return Err(PlanError::ViewOutsideBase {
                buffer: i,
                base,
                offset: off,
                size: b.size,
                base_size: buffers[base].size,
            });
        }
        if b.size > 0 {
            group_start[r] = group_start[r].min(b.start);
            group_end[r] = group_end[r].max(b.end);
        }
        group_align[r] = group_align[r].max(b.align);
    }

    // Members of each group, so a group can move without scanning every buffer.
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in 0..n {
        members[root_of(i, &root).0].push(i);
    }

    // In-place requests, in order of the step they happen: join the input's group when the
    // group dies exactly at this buffer's first step and the buffer fits.
    let mut in_place = vec![false; n];
    let mut order: Vec<usize> = (0..n)
        .filter(|&i| matches!(buffers[i].constraint, Constraint::MayShareWith(_)))
        .collect();
    order.sort_by_key(|&i| (buffers[i].start, i));
    for i in order {
        let Constraint::MayShareWith(input) = buffers[i].constraint else {
            continue;
        };
        let (gi, _) = root_of(i, &root);
        let (gx, x_off) = root_of(input, &root);
        // Only a buffer that owns its group (it and its views) moves, to offset 0 of the
        // input's bytes, and only when the input's group dies at this buffer's first step, no
        // view of this buffer is live before it (it would meet the input's group) and the
        // input's bytes are aligned enough for the group.
        let legal = gx != gi
            && gi == i
            && buffers[i].size > 0
            && group_end[gx] == buffers[i].start + 1
            && group_start[i] == buffers[i].start
            && x_off % group_align[i] == 0
            && x_off
                .checked_add(group_size[i])
                .is_some_and(|e| e <= group_size[gx]);
        if !legal {
            continue;
        }
        let moved = std::mem::take(&mut members[i]);
        for &j in &moved {
            let off = root_of(j, &root).1;
            root[j] = Some((gx, x_off + off));
        }
        members[gx].extend(moved);
        group_end[gx] = group_end[gx].max(group_end[i]);
        group_align[gx] = group_align[gx].max(group_align[i]);
        group_size[i] = 0;
        in_place[i] = true;
    }

    // One interval per group.
    let roots: Vec<usize> = (0..n).filter(|&i| root_of(i, &root).0 == i).collect();
    let intervals: Vec<Interval> = roots
        .iter()
        .map(|&r| Interval {
            size: group_size[r],
            start: if group_start[r] == u64::MAX {
                0
            } else {
                group_start[r]
            },
            end: group_end[r].max(if group_start[r] == u64::MAX {
                0
            } else {
                group_start[r]
            }),
            align: group_align[r],
        })
        .collect();
    Ok(Resolved {
        intervals,
        roots,
        root,
        in_place,
    })
}

/// Follows `AliasOf` from `i` to a buffer that owns its bytes; records (root, offset).
fn resolve_view(
    buffers: &[BufferSpec],
    i: usize,
    root: &mut [Option<(usize, u64)>],
    depth: usize,
) -> Result<(usize, u64), PlanError> {
    if depth > buffers.len() {
        return Err(PlanError::ViewCycle { buffer: i });
    }
    if let Some(r) = root[i] {
        return Ok(r);
    }
    let Constraint::AliasOf { base, offset } = buffers[i].constraint else {
        return Ok((i, 0));
    };
    if base == i {
        return Err(PlanError::ViewCycle { buffer: i });
    }
    let (r, base_off) = resolve_view(buffers, base, root, depth + 1)?;
    if r == i {
        return Err(PlanError::ViewCycle { buffer: i });
    }
    let total = base_off.checked_add(offset).ok_or(PlanError::Overflow)?;
    if offset
        .checked_add(buffers[i].size)
        .is_none_or(|e| e > buffers[base].size)
    {
        return Err(PlanError::ViewOutsideBase {
            buffer: i,
            base,
            offset,
            size: buffers[i].size,
            base_size: buffers[base].size,
        });
    }
    root[i] = Some((r, total));
    Ok((r, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> PlanOptions {
        PlanOptions {
            budget: Duration::from_millis(10),
        }
    }

    #[test]
    fn in_place_chain_shares_one_buffer() {
        // x -> relu (in place) -> exp (in place): one buffer of 100 bytes.
        let buffers = vec![
            BufferSpec::new(100, 0, 2),
            BufferSpec::new(100, 1, 3).with_constraint(Constraint::MayShareWith(0)),
            BufferSpec::new(100, 2, 4).with_constraint(Constraint::MayShareWith(1)),
        ];
        let r = plan(&buffers, &opts()).expect("plans");
        assert_eq!(r.in_place, vec![false, true, true]);
        assert_eq!(r.offsets, vec![0, 0, 0]);
        assert_eq!(r.arena_size, 100);
        assert_eq!(r.load, 100);
        assert_eq!(r.load_without_sharing, 200);
    }

    #[test]
    fn in_place_refused_when_the_input_lives_on() {
        // The input is read after the op (end 3 > start 1 + 1): no sharing.
        let buffers = vec![
            BufferSpec::new(100, 0, 3),
            BufferSpec::new(100, 1, 4).with_constraint(Constraint::MayShareWith(0)),
        ];
        let r = plan(&buffers, &opts()).expect("plans");
        assert_eq!(r.in_place, vec![false, false]);
        assert!(r.offsets[0] + 100 <= r.offsets[1] || r.offsets[1] + 100 <= r.offsets[0]);
    }

    #[test]
    fn views_extend_their_base() {
        // A view read at step 5 keeps its base alive: the third buffer cannot reuse the bytes.
        let buffers = vec![
            BufferSpec::new(64, 0, 2),
            BufferSpec::new(64, 1, 6).with_constraint(Constraint::AliasOf { base: 0, offset: 0 }),
            BufferSpec::new(64, 3, 5),
        ];
        let r = plan(&buffers, &opts()).expect("plans");
        assert_eq!(r.offsets[1], r.offsets[0]);
        assert!(r.offsets[2] >= 64 || r.offsets[0] >= 64);
        assert_eq!(r.load, 128);
    }

    #[test]
    fn groups_are_placed_by_the_reference_best_fit() {
        // Random buffers with views and in-place requests, aligned: the groups they resolve
        // to get from the baseline exactly the offsets of the reference best fit, and the plan
        // keeps the buffers of different groups that are live together apart and every buffer
        // that is not a view (a view sits where its base puts it) aligned.
        use crate::plan::assign::{best_fit_largest_first, reference, trace::Rng};
        let mut rng = Rng(41);
        for round in 0..200 {
            let n = 2 + round % 40;
            let mut buffers: Vec<BufferSpec> = Vec::new();
            for i in 0..n {
                let start = rng.range(0, 12);
                let mut spec =
                    BufferSpec::new(16 * rng.range(1, 20), start, start + rng.range(1, 6))
                        .with_align([1, 8, 64][rng.range(0, 3) as usize]);
                let other = rng.range(0, i as u64 + 1) as usize;
                match rng.range(0, 4) {
                    0 if other < i => {
                        // A view near the end of its base, no larger than it, aligned.
                        let base = buffers[other].size;
                        spec.size = spec.size.min(base);
                        let offset = (base - spec.size) / spec.align * spec.align;
                        spec.constraint = Constraint::AliasOf {
                            base: other,
                            offset,
                        };
                    }
                    1 if other < i => {
                        // In place, legal when the input dies here.
                        if rng.range(0, 2) == 0 {
                            spec.start = buffers[other].end.saturating_sub(1);
                            spec.end = spec.start + rng.range(1, 6);
                        }
                        spec.constraint = Constraint::MayShareWith(other);
                    }
                    _ => {}
                }
                buffers.push(spec);
            }
            let resolved = resolve(&buffers).expect("a valid problem");
            let intervals = &resolved.intervals;
            let mut by_size: Vec<usize> = (0..intervals.len()).collect();
            by_size.sort_by_key(|&k| (std::cmp::Reverse(intervals[k].size), intervals[k].start, k));
            let mut expected = vec![None; intervals.len()];
            reference::best_fit(intervals, &by_size, &mut expected);
            let expected: Vec<u64> = expected.into_iter().map(|o| o.expect("placed")).collect();
            assert_eq!(
                best_fit_largest_first(intervals).offsets,
                expected,
                "round {round}"
            );

            let plan = plan(&buffers, &opts()).expect("a valid problem");
            let group = |i: usize| resolved.root[i].map_or(i, |(r, _)| r);
            for i in 0..n {
                for j in i + 1..n {
                    let (a, b) = (&buffers[i], &buffers[j]);
                    let live_together = a.start < b.end && b.start < a.end;
                    if group(i) == group(j) || !live_together || a.size == 0 || b.size == 0 {
                        continue;
                    }
                    let (oa, ob) = (plan.offsets[i], plan.offsets[j]);
                    assert!(
                        oa + a.size <= ob || ob + b.size <= oa,
                        "round {round}: buffers {i} and {j} overlap"
                    );
                }
                if !matches!(buffers[i].constraint, Constraint::AliasOf { .. }) {
                    assert_eq!(plan.offsets[i] % buffers[i].align, 0, "round {round}");
                }
            }
        }
    }

    #[test]
    fn bad_problems_are_errors() {
        let cycle = vec![
            BufferSpec::new(8, 0, 1).with_constraint(Constraint::AliasOf { base: 1, offset: 0 }),
            BufferSpec::new(8, 0, 1).with_constraint(Constraint::AliasOf { base: 0, offset: 0 }),
        ];
        assert!(matches!(
            plan(&cycle, &opts()),
            Err(PlanError::ViewCycle { .. })
        ));
        let outside = vec![
            BufferSpec::new(8, 0, 2),
            BufferSpec::new(8, 1, 2).with_constraint(Constraint::AliasOf { base: 0, offset: 4 }),
        ];
        assert!(matches!(
            plan(&outside, &opts()),
            Err(PlanError::ViewOutsideBase { .. })
        ));
        let index = vec![BufferSpec::new(8, 0, 1).with_constraint(Constraint::MayShareWith(7))];
        assert_eq!(
            plan(&index, &opts()).unwrap_err(),
            PlanError::BadIndex {
                buffer: 0,
                target: 7
            }
        );
        assert!(matches!(
            plan(&[BufferSpec::new(8, 0, 1).with_align(3)], &opts()),
            Err(PlanError::BadAlign { .. })
        ));
        assert!(matches!(
            plan(&[BufferSpec::new(8, 2, 2)], &opts()),
            Err(PlanError::BadRange { .. })
        ));
    }
}
