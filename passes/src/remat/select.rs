//! Choosing candidates: the fewest extra FLOPs that bring the schedule's LOAD under a target.
//!
//! - **Exact** when few gaps matter (at most [`EXACT_LIMIT`] buffer gaps, each with its
//!   variants, hold bytes across a step over the target): a depth-first search over subsets
//!   (at most one variant per gap), cheapest first, pruned by the FLOPs of the best subset
//!   found so far; the model's own evaluation decides feasibility. It may spend half the work
//!   left, so that later rounds have some.
//! - **Greedy** otherwise (and as the exact search's first bound): while the LOAD is over the
//!   target, take the candidates that hold bytes across the peak step, estimate each by bytes
//!   freed per FLOP, evaluate the best few that improve exactly and keep the one that removes
//!   the most bytes over an aim (summed over all steps) per FLOP it really adds, the aim being
//!   the target or, when that is far, just under the current peak (so an unreachable target
//!   still brings the peak down as far as it goes); then drop, most expensive first, every
//!   chosen candidate the target no longer needs. A run that ends on one costly candidate is
//!   repeated without it and its like ([`REPAIRS`] times at most).
//! - **Checkpoints**, when the greedy runs fall short: for each set of values candidates keep
//!   alive longer, every buffer recomputed from that set at once, then pruned: the solutions
//!   where no single recomputation pays for the values it keeps, but many together do.
//!
//! At most one candidate per (buffer, gap): the variants of one gap exclude each other. All
//! searches stop when a budget of work ([`Work`], [`super::WORK_LIMIT`] for the whole pass) is
//! spent, with the best found: deterministic, whatever the machine's load.

use super::model::{Candidate, Model, Profile};
use std::cell::Cell;

/// The most relevant gaps (buffer and gap, each with its variants) for which the search is
/// exact.
pub const EXACT_LIMIT: usize = 24;
/// How many of the best-estimated candidates each greedy step evaluates exactly.
const SHORTLIST: usize = 6;
/// The most plans one greedy step evaluates before it gives up on finding an improvement.
const MAX_EVALUATIONS: usize = 96;
/// How many times a greedy run is repeated without its most expensive choice.
const REPAIRS: usize = 3;
/// The most subsets the exact search evaluates before it settles for the best found.
const EXACT_EVALUATIONS: usize = 1 << 18;

/// What selection chose.
pub struct Selection {
    /// Indices into the candidate list, in the order chosen.
    pub chosen: Vec<usize>,
    pub profile: Profile,
    /// Whether the profile's LOAD is at most the target.
    pub reached: bool,
    /// Whether the choice is the optimum of the candidate set (the exact search finished).
    pub exact: bool,
}

/// Bytes over `target`, summed over steps.
fn excess(profile: &Profile, target: u64) -> u128 {
    profile
        .live
        .iter()
        .map(|&l| u128::from(l.saturating_sub(target)))
        .sum()
}

/// A budget of work for selection, counted in ops evaluated (each evaluation of a schedule
/// costs its length), so that how far selection gets does not depend on the machine or its
/// load: the same model and budget always give the same plan.
pub struct Work(Cell<u64>);

impl Work {
    pub fn new(ops: u64) -> Work {
        Work(Cell::new(ops))
    }

    /// Whether the budget is spent.
    pub fn spent(&self) -> bool {
        self.0.get() == 0
    }

    pub(super) fn charge(&self, ops: u64) {
        self.0.set(self.0.get().saturating_sub(ops));
    }

    /// Runs `f` with half of what is left, and charges what it spent.
    fn with_half<T>(&self, f: impl FnOnce(&Work) -> T) -> T {
        let given = self.0.get() / 2;
        let half = Work::new(given);
        let result = f(&half);
        self.charge(given - half.0.get());
        result
    }
}

fn eval(model: &Model, cands: &[Candidate], chosen: &[usize], work: &Work) -> Profile {
    let list: Vec<&Candidate> = chosen.iter().map(|&i| &cands[i]).collect();
    let clones: usize = list.iter().map(|c| c.chain.len()).sum();
    // Plus a fixed cost per evaluation: small schedules cost more than their length.
    work.charge((model.ops.len() + clones) as u64 + 256);
    model.evaluate(&list)
}

/// Whether candidate `c` holds its buffer across base position `p` (frees bytes there).
fn covers(c: &Candidate, p: usize) -> bool {
    c.gap_from < p && p < c.at
}

/// Chooses candidates so that the LOAD is at most `target`, starting from `forced` (always
/// kept, e.g. the user's `--recompute` choices).
pub fn select(
    model: &Model,
    cands: &[Candidate],
    target: u64,
    forced: &[usize],
    work: &Work,
) -> Selection {
    let greedy = greedy(model, cands, target, forced, work);
    // The candidates that matter: those holding bytes across a step over the target.
    let base = eval(model, cands, forced, work);
    let hot: Vec<usize> = base
        .live
        .iter()
        .enumerate()
        .filter(|(_, &l)| l > target)
        .map(|(s, _)| base.base_at[s])
        .collect();
    let relevant: Vec<usize> = (0..cands.len())
        .filter(|i| !forced.contains(i))
        .filter(|&i| hot.iter().any(|&p| covers(&cands[i], p)))
        .collect();
    // The variants of one gap exclude each other: the search branches on gaps.
    let mut gaps: Vec<(usize, usize)> = relevant
        .iter()
        .map(|&i| (cands[i].target, cands[i].gap_from))
        .collect();
    gaps.sort_unstable();
    gaps.dedup();
    if gaps.len() > EXACT_LIMIT || hot.is_empty() {
        return greedy;
    }
    // The exact search may spend half of what is left: rounds after this one (a lower target
    // when fragmentation keeps the arena over the budget) need some too.
    let found =
        work.with_half(|half| exact(model, cands, target, forced, &relevant, &greedy, half));
    match found {
        Some(better) => better,
        None => greedy,
    }
}

/// The best of two greedy runs (one weighing every step over the target, one aiming just
/// under the current peak) and, when the first falls short, the checkpoints.
fn greedy(
    model: &Model,
    cands: &[Candidate],
    target: u64,
    forced: &[usize],
    work: &Work,
) -> Selection {
    // The wide run first; the narrow one and the checkpoints when that falls short.
    let wide = repaired(model, cands, target, forced, false, work);
    if wide.reached {
        return wide;
    }
    let key = |s: &Selection| {
        if s.reached {
            (0, s.profile.extra_flops)
        } else {
            (1, s.profile.load)
        }
    };
    let mut best = wide;
    for other in [
        repaired(model, cands, target, forced, true, work),
        checkpoints(model, cands, target, forced, work),
    ] {
        if key(&other) < key(&best) {
            best = other;
        }
    }
    best
}

/// Checkpointing: for each set of values some candidate keeps alive longer (a checkpoint),
/// every buffer recomputed from what the checkpoint keeps and what is live anyway (the
/// cheapest such variant per gap), then, if that meets the target, reverse deletion. Finds
/// the solutions where no single recomputation pays for the longer life of the values it
/// reads, but many together do.
fn checkpoints(
    model: &Model,
    cands: &[Candidate],
    target: u64,
    forced: &[usize],
    work: &Work,
) -> Selection {
    let mut sets: Vec<&[usize]> = cands.iter().map(|c| c.extends.as_slice()).collect();
    sets.sort_unstable();
    sets.dedup();
    let mut best: Option<Selection> = None;
    for set in sets {
        if work.spent() {
            break;
        }
        let mut chosen: Vec<usize> = forced.to_vec();
        let mut order: Vec<usize> = (0..cands.len())
            .filter(|&i| cands[i].extends.iter().all(|v| set.contains(v)))
            .collect();
        order.sort_by_key(|&i| (cands[i].flops, i));
        for i in order {
            if !chosen.iter().any(|&c| cands[c].same_gap(&cands[i])) {
                chosen.push(i);
            }
        }
        let profile = eval(model, cands, &chosen, work);
        if profile.load > target {
            continue;
        }
        let mut selection = Selection {
            chosen,
            profile,
            reached: true,
            exact: false,
        };
        prune(model, cands, target, forced, &mut selection, work);
        if best
            .as_ref()
            .is_none_or(|b| selection.profile.extra_flops < b.profile.extra_flops)
        {
            best = Some(selection);
        }
    }
    best.unwrap_or_else(|| {
        let profile = eval(model, cands, forced, work);
        Selection {
            chosen: forced.to_vec(),
            reached: profile.load <= target,
            profile,
            exact: false,
        }
    })
}

/// Reverse deletion: drops, most expensive first, every chosen candidate (not forced) the
/// target no longer needs.
fn prune(
    model: &Model,
    cands: &[Candidate],
    target: u64,
    forced: &[usize],
    selection: &mut Selection,
    work: &Work,
) {
    let mut order: Vec<usize> = selection
        .chosen
        .iter()
        .copied()
        .filter(|i| !forced.contains(i))
        .collect();
    order.sort_by_key(|&i| std::cmp::Reverse(cands[i].flops));
    for i in order {
        if work.spent() {
            break;
        }
        let without: Vec<usize> = selection
            .chosen
            .iter()
            .copied()
            .filter(|&c| c != i)
            .collect();
        let trial = eval(model, cands, &without, work);
        if trial.load <= target {
            selection.chosen = without;
            selection.profile = trial;
        }
    }
}

/// A greedy run, then up to [`REPAIRS`] tries to do without its most expensive choice: a
/// run that ends on one costly candidate (the cheap ones had stalled a little over the
/// target) often has a cheap way there that a run banning the costly ones finds.
fn repaired(
    model: &Model,
    cands: &[Candidate],
    target: u64,
    forced: &[usize],
    peak_first: bool,
    work: &Work,
) -> Selection {
    let mut banned = vec![false; cands.len()];
    let mut best = greedy_with(model, cands, target, forced, peak_first, &banned, work);
    for _ in 0..REPAIRS {
        if !best.reached || work.spent() {
            break;
        }
        let Some(&costly) = best
            .chosen
            .iter()
            .filter(|i| !forced.contains(i))
            .max_by_key(|&&i| (cands[i].flops, std::cmp::Reverse(i)))
        else {
            break;
        };
        // Only worth it when that one candidate is most of the cost.
        let limit = cands[costly].flops / 2;
        if limit == 0 || cands[costly].flops * 2 < best.profile.extra_flops {
            break;
        }
        for (i, c) in cands.iter().enumerate() {
            banned[i] = banned[i] || c.flops > limit;
        }
        let kept: Vec<usize> = best
            .chosen
            .iter()
            .copied()
            .filter(|&i| !banned[i])
            .collect();
        let mut trial = greedy_with(model, cands, target, &kept, peak_first, &banned, work);
        if !trial.reached {
            break;
        }
        prune(model, cands, target, forced, &mut trial, work);
        if trial.profile.extra_flops < best.profile.extra_flops {
            best = trial;
        }
    }
    best
}

fn greedy_with(
    model: &Model,
    cands: &[Candidate],
    target: u64,
    forced: &[usize],
    peak_first: bool,
    banned: &[bool],
    work: &Work,
) -> Selection {
    let mut chosen: Vec<usize> = forced.to_vec();
    let mut profile = eval(model, cands, &chosen, work);
    while profile.load > target && !work.spent() {
        let peak = profile
            .live
            .iter()
            .enumerate()
            .max_by_key(|&(s, &l)| (l, std::cmp::Reverse(s)))
            .map_or(0, |(s, _)| s);
        let p = profile.base_at[peak];
        let mut options: Vec<usize> = (0..cands.len())
            .filter(|&i| {
                !chosen
                    .iter()
                    .any(|&c| c == i || cands[c].same_gap(&cands[i]))
            })
            .filter(|&i| !banned[i] && covers(&cands[i], p))
            .collect();
        if options.is_empty() {
            break;
        }
        // Bytes freed per FLOP, estimated: the buffer's size, less what the chain keeps alive.
        let estimate = |c: &Candidate| {
            let freed = model.values[c.target].size as f64;
            let kept: f64 = c.extends.iter().map(|&v| model.values[v].size as f64).sum();
            (freed - kept) / (c.flops as f64 + 1.0)
        };
        options.sort_by(|&a, &b| {
            estimate(&cands[b])
                .partial_cmp(&estimate(&cands[a]))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.cmp(&b))
        });
        // Aim just under the current peak (or at the target, when that is closer): the
        // steps that decide the arena count, not every step over an unreachable target.
        let aim = if peak_first {
            target.max(profile.load - profile.load / 32)
        } else {
            target
        };
        let before = excess(&profile, aim);
        // Each option alone, and with every other candidate that keeps alive only what it
        // keeps alive (the values a layer is recomputed from: a checkpoint, whose cost only
        // pays off when the whole layer uses it).
        let mut best: Option<(f64, Vec<usize>, Profile)> = None;
        let mut evaluations = 0;
        let mut improving = 0;
        for &i in &options {
            // The best few that improve (a cheap estimate that does not improve, e.g. a move
            // the order already made pointless, does not use up the shortlist).
            if improving >= SHORTLIST || evaluations >= MAX_EVALUATIONS {
                break;
            }
            let mut moves = vec![vec![i]];
            if !cands[i].extends.is_empty() {
                let mut group = vec![i];
                for (j, c) in cands.iter().enumerate() {
                    let free = !chosen
                        .iter()
                        .chain(&group)
                        .any(|&k| k == j || cands[k].same_gap(c));
                    if free
                        && !banned[j]
                        && !c.extends.is_empty()
                        && c.extends.iter().all(|v| cands[i].extends.contains(v))
                    {
                        group.push(j);
                    }
                }
                if group.len() > 1 {
                    moves.push(group);
                }
            }
            for m in moves {
                evaluations += 1;
                let len = chosen.len();
                chosen.extend_from_slice(&m);
                let trial = eval(model, cands, &chosen, work);
                chosen.truncate(len);
                let after = excess(&trial, aim);
                if after >= before {
                    continue;
                }
                improving += 1;
                // The FLOPs the move really adds (a move's originals may keep running).
                let flops = trial.extra_flops.saturating_sub(profile.extra_flops);
                let gain = (before - after) as f64 / (flops as f64 + 1.0);
                if best.as_ref().is_none_or(|(g, _, _)| gain > *g) {
                    best = Some((gain, m, trial));
                }
            }
        }
        match best {
            Some((_, m, trial)) => {
                chosen.extend(m);
                profile = trial;
            }
            None => break,
        }
    }
    let reached = profile.load <= target;
    let mut selection = Selection {
        chosen,
        profile,
        reached,
        exact: false,
    };
    if reached {
        prune(model, cands, target, forced, &mut selection, work);
    }
    selection
}

/// The exact search over `relevant`; `None` when it finds nothing better than `greedy`.
fn exact(
    model: &Model,
    cands: &[Candidate],
    target: u64,
    forced: &[usize],
    relevant: &[usize],
    greedy: &Selection,
    work: &Work,
) -> Option<Selection> {
    let mut order = relevant.to_vec();
    order.sort_by_key(|&i| (cands[i].flops, i));
    let greedy_flops = if greedy.reached {
        Some(greedy.profile.extra_flops)
    } else {
        None
    };
    let mut search = Search {
        model,
        cands,
        target,
        order: &order,
        best: None,
        best_flops: greedy_flops,
        evaluations: 0,
        work,
        out_of_time: false,
    };
    let mut chosen = forced.to_vec();
    let forced_flops: u64 = forced.iter().map(|&i| cands[i].flops).sum();
    search.dfs(0, &mut chosen, forced_flops);
    let finished = search.evaluations < EXACT_EVALUATIONS && !search.out_of_time;
    match search.best {
        Some((chosen, profile)) => Some(Selection {
            chosen,
            reached: true,
            profile,
            exact: finished,
        }),
        None if finished && greedy.reached => Some(Selection {
            chosen: greedy.chosen.clone(),
            profile: greedy.profile.clone(),
            reached: true,
            exact: true,
        }),
        None => None,
    }
}

struct Search<'a> {
    model: &'a Model,
    cands: &'a [Candidate],
    target: u64,
    order: &'a [usize],
    best: Option<(Vec<usize>, Profile)>,
    /// FLOPs of the best feasible choice so far: a subset must cost less to be worth a look.
    best_flops: Option<u64>,
    evaluations: usize,
    work: &'a Work,
    out_of_time: bool,
}

impl Search<'_> {
    /// Whether no choice among `order[k..]` added to `chosen` can bring `profile` under the
    /// target: some step over it by more than every remaining gap around it could free. A
    /// candidate frees at most its buffer over its gap (ends included), plus, at the gap's
    /// start, what an in-place result may now share; a step whose op a move would take away
    /// is not judged.
    fn hopeless(&self, profile: &Profile, k: usize, chosen: &[usize]) -> bool {
        let remaining: Vec<&Candidate> = self.order[k..]
            .iter()
            .map(|&i| &self.cands[i])
            .filter(|c| !chosen.iter().any(|&x| self.cands[x].same_gap(c)))
            .collect();
        let model = self.model;
        for (step, &live) in profile.live.iter().enumerate() {
            if live <= self.target {
                continue;
            }
            let p = profile.base_at[step];
            if let Some(op) = profile.op_at[step] {
                if remaining.iter().any(|c| c.moves && c.chain.contains(&op)) {
                    continue;
                }
            }
            let mut gaps: Vec<(usize, usize)> = Vec::new();
            let mut can = 0u64;
            let mut shares = false;
            for c in &remaining {
                if c.gap_from <= p && p <= c.at && !gaps.contains(&(c.target, c.gap_from)) {
                    gaps.push((c.target, c.gap_from));
                    can = can.saturating_add(model.values[c.target].size);
                    shares |= c.gap_from == p;
                }
            }
            if shares {
                if let Some(op) = model.ops.get(p) {
                    can = op
                        .results
                        .iter()
                        .fold(can, |a, &r| a.saturating_add(model.values[r].size));
                }
            }
            if live.saturating_sub(can) > self.target {
                return true;
            }
        }
        false
    }

    fn dfs(&mut self, k: usize, chosen: &mut Vec<usize>, flops: u64) {
        if self.evaluations >= EXACT_EVALUATIONS || self.out_of_time {
            return;
        }
        if self.work.spent() {
            self.out_of_time = true;
            return;
        }
        if self.best_flops.is_some_and(|b| flops >= b) {
            return;
        }
        self.evaluations += 1;
        let profile = eval(self.model, self.cands, chosen, self.work);
        if profile.load <= self.target {
            self.best_flops = Some(profile.extra_flops);
            self.best = Some((chosen.clone(), profile));
            return;
        }
        if self.hopeless(&profile, k, chosen) {
            return;
        }
        for j in k..self.order.len() {
            let i = self.order[j];
            if chosen
                .iter()
                .any(|&c| self.cands[c].same_gap(&self.cands[i]))
            {
                continue;
            }
            chosen.push(i);
            self.dfs(j + 1, chosen, flops.saturating_add(self.cands[i].flops));
            chosen.pop();
        }
    }
}
