//! Eviction search: recomputation found by running the schedule under the target, evicting
//! values when memory runs over it and deriving them again, recursively, when they are read
//! (Dynamic Tensor Rematerialization's simulation, with the whole schedule known ahead).
//!
//! The gap candidates ([`super::candidates`]) derive a buffer again right before its next read
//! from what the base schedule holds there. A solution at a tight budget often needs more: a
//! value derived again at one point and held to serve a later derivation (two-level
//! recomputation), or a derivation placed early, where its sources are still held. Such
//! solutions are sets of single-op recomputations (each op cloned before some base op, every
//! later read going to the newest copy) that no candidate helps towards alone. The simulation
//! finds them directly:
//!
//! - it runs the base ops in order; before each, every operand that is not held is made again
//!   from what is held (its producer cloned there, after the operands it needs in turn);
//! - while an op's results (and scratch) would take memory over the limit, it evicts a held
//!   value the op does not read: first one nothing will need (not read again, not needed to
//!   make an evicted value again, not an operand of a held value's producer), then the one
//!   with the least cost per byte and step until it is next needed (or, in the other run, the
//!   one needed last). A value read again or needed to make an evicted value is evicted only
//!   if it can be made again itself (never a graph input or a random op's result); values
//!   held past their last read stay until evicted, as checkpoints to derive others from;
//! - a run that gets stuck (nothing may go) is repeated with a value protected (never
//!   evicted up to a point): the nearest single ancestor from which the value blocking it
//!   could have been made again (a checkpoint), or else its producer's operands, or the value
//!   it was making again when memory ran out (a bounded number of times).
//!
//! The simulation holds every value in its own bytes (no in-place sharing), so it runs with
//! several limits at and above the target. A run's recomputations become one chain per base
//! op they run before, in the order the run made them, so that the [`Model`] (which shares
//! bytes as the planner does) measures the run's own schedule; they are also measured in
//! schedule order, where a value made twice at one point is made twice in a row and one copy
//! can go. Each is pruned by reverse deletion (each recomputation the target does not need is
//! dropped, most expensive first), and the best that meets the target is kept. Only for models of at most [`MAX_OPS`] ops, and only when the
//! candidates fall short (`super::rematerialize` decides); the work it may do is bounded by a
//! [`Work`] budget, so the result does not depend on the machine.

use super::candidates::label;
use super::model::{Candidate, Model, Profile};
use super::select::Work;

/// The largest model (in ops) the search runs on.
pub const MAX_OPS: usize = 160;
/// Limits tried, as steps of a sixteenth of the target above it.
const LIMIT_STEPS: u64 = 6;
/// How many times a run that got stuck is repeated with more values protected.
const REPAIRS: usize = 24;

/// Which held value to evict.
#[derive(Clone, Copy, PartialEq)]
enum Victim {
    /// The least FLOPs to make again per byte and step until its next read.
    CostPerByteStep,
    /// The one read last (Belady's choice), the cheapest of those.
    FarthestRead,
}

/// A set of single-op recomputations, `(op, at)`: op `op` cloned right before base op `at`,
/// in the order a run made them (by `at`, then in making order).
type Atoms = Vec<(usize, usize)>;

struct Sim<'a> {
    model: &'a Model,
    /// The base positions reading each value (`ops.len()` for the return), sorted.
    reads: &'a [Vec<usize>],
    /// For each value, the values of the ops that read it.
    consumers: &'a [Vec<usize>],
    work: &'a Work,
    held: Vec<bool>,
    atoms: Atoms,
    /// For each value, the base position up to which it is never evicted (see [`search`]).
    protected: &'a [Option<usize>],
    /// Set when memory could not be brought under the limit: the values to protect in the
    /// next run so that it can be, and up to where (empty if none would help).
    stuck: Option<Vec<(usize, usize)>>,
    /// The values being made again, outermost first.
    making: Vec<usize>,
}

impl Sim<'_> {
    /// The first read of `v` at or after `p`.
    fn next_read(&self, v: usize, p: usize) -> Option<usize> {
        let r = &self.reads[v];
        r.get(r.partition_point(|&x| x < p)).copied()
    }

    /// Whether `v` may be made again (is held, or its producer may run again and its
    /// operands may be made), not counting `without`, which will not be held; `memo` holds the
    /// answers found so far for the same `without`.
    fn makeable_in(&self, v: usize, without: usize, memo: &mut [Option<bool>]) -> bool {
        if self.held[v] && v != without {
            return true;
        }
        if let Some(known) = memo[v] {
            return known;
        }
        // Assume not while deciding (no value is made from itself).
        memo[v] = Some(false);
        let answer = self.model.values[v].producer.is_some_and(|q| {
            let op = &self.model.ops[q];
            op.recompute
                && op
                    .operands
                    .iter()
                    .all(|&x| x != v && self.makeable_in(x, without, memo))
        });
        memo[v] = Some(answer);
        answer
    }

    /// Whether `v` may be made again if it is not held.
    fn makeable(&self, v: usize) -> bool {
        self.makeable_in(v, v, &mut vec![None; self.held.len()])
    }

    /// Makes `v` again before base op `p` if it is not held, within `limit` where evicting
    /// what `pinned` does not list allows; false if it cannot be made.
    fn make(&mut self, v: usize, p: usize, pinned: &[usize], limit: u64, victim: Victim) -> bool {
        if self.held[v] {
            return true;
        }
        let Some(q) = self.model.values[v].producer else {
            return false;
        };
        if !self.model.ops[q].recompute {
            return false;
        }
        let op = &self.model.ops[q];
        let mut keep: Vec<usize> = pinned.to_vec();
        keep.extend(op.operands.iter().copied());
        self.making.push(v);
        for &x in &op.operands {
            if x == v || !self.make(x, p, &keep, limit, victim) {
                return false;
            }
        }
        self.evict(q, &keep, p, limit, victim);
        self.making.pop();
        self.atoms.push((q, p));
        for &r in &self.model.ops[q].results {
            self.held[r] = true;
        }
        true
    }

    /// Bytes of `v` in the simulation (a view shares its source's).
    fn size(&self, v: usize) -> u64 {
        let value = &self.model.values[v];
        if value.view_of.is_some() {
            0
        } else {
            value.size
        }
    }

    /// FLOPs to make `v` again now: its producer and every operand not held, recursively.
    fn cost(&self, v: usize, seen: &mut [bool]) -> u64 {
        let Some(q) = self.model.values[v].producer else {
            return 0;
        };
        if std::mem::replace(&mut seen[q], true) {
            return 0;
        }
        let op = &self.model.ops[q];
        op.operands
            .iter()
            .filter(|&&x| x != v && !self.held[x])
            .fold(op.flops, |a, &x| a.saturating_add(self.cost(x, seen)))
    }

    /// For each held value, the first read at or after `p` of a value not held that may need
    /// it to be made again (through values not held).
    fn sources(&self, p: usize) -> Vec<Option<usize>> {
        let n_values = self.model.values.len();
        // For each value not held: when it (or a value not held made from it) is read next.
        let mut demand: Vec<Option<usize>> = vec![None; n_values];
        // Values are numbered in schedule order, so one pass from the last settles almost
        // everything; values the e-graph merged may need another.
        for _ in 0..n_values {
            let mut changed = false;
            for v in (0..n_values).rev() {
                if self.held[v] {
                    continue;
                }
                let d = self.consumers[v]
                    .iter()
                    .filter(|&&c| !self.held[c])
                    .filter_map(|&c| demand[c])
                    .chain(self.next_read(v, p))
                    .min();
                if d != demand[v] {
                    demand[v] = d;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        (0..n_values)
            .map(|x| {
                if !self.held[x] {
                    return None;
                }
                self.consumers[x]
                    .iter()
                    .filter(|&&c| !self.held[c])
                    .filter_map(|&c| demand[c])
                    .min()
            })
            .collect()
    }

    /// Evicts held values other than `pinned` until op `o` (run before base op `p`) runs
    /// within `limit`, or nothing more may go.
    fn evict(&mut self, o: usize, pinned: &[usize], p: usize, limit: u64, victim: Victim) {
        let op = &self.model.ops[o];
        let running: u64 = op
            .results
            .iter()
            .map(|&r| self.size(r))
            .sum::<u64>()
            .saturating_add(op.scratch);
        loop {
            let held: u64 = (0..self.held.len())
                .filter(|&v| self.held[v])
                .map(|v| self.size(v))
                .sum();
            if held.saturating_add(running) <= limit {
                return;
            }
            let need_at = self.sources(p);
            // When a held value read later would need it, were that value evicted: a value
            // held past its last read keeps its readers cheap to make again.
            let mut potential: Vec<Option<usize>> = vec![None; self.held.len()];
            for w in (0..self.held.len()).filter(|&w| self.held[w]) {
                let (Some(next), Some(q)) = (self.next_read(w, p), self.model.values[w].producer)
                else {
                    continue;
                };
                for &x in &self.model.ops[q].operands {
                    let at = potential[x].get_or_insert(next);
                    *at = (*at).min(next);
                }
            }
            // A held view of a value keeps its bytes.
            let mut viewed = vec![false; self.held.len()];
            for u in (0..self.held.len()).filter(|&u| self.held[u]) {
                if let Some((source, _)) = self.model.values[u].view_of {
                    viewed[source] = true;
                }
            }
            // Each round looks at every value (and what it is made from).
            self.work.charge(self.held.len() as u64);
            let mut best: Option<(f64, usize)> = None;
            for v in 0..self.held.len() {
                if !self.held[v] || self.size(v) == 0 || pinned.contains(&v) {
                    continue;
                }
                if self.protected[v].is_some_and(|until| until > p) {
                    continue;
                }
                // The next time it is needed: read, read to make a value not held, or
                // possibly read to make a held one.
                let needed = [self.next_read(v, p), need_at[v]]
                    .into_iter()
                    .flatten()
                    .min();
                let Some(next) = needed.or(potential[v]) else {
                    // Needed by nothing: the first to go.
                    best = Some((f64::NEG_INFINITY, v));
                    break;
                };
                if viewed[v] {
                    continue;
                }
                // Deciding whether it can be made again looks at what it is made from.
                self.work.charge(self.held.len() as u64 / 4 + 1);
                let makeable = self.makeable(v);
                if needed.is_some() && !makeable {
                    continue;
                }
                // Only possibly needed and never to be made again: its readers could not be
                // evicted any more; the last resort.
                let cost = if makeable {
                    self.cost(v, &mut vec![false; self.model.ops.len()]) as f64 + 1.0
                } else {
                    self.model.flops() as f64 + 1.0
                };
                let distance = (next - p).max(1) as f64;
                let score = match victim {
                    Victim::CostPerByteStep => cost / (self.size(v) as f64 * distance),
                    Victim::FarthestRead => -distance + cost * 1e-18,
                };
                if best.is_none_or(|(s, _)| score < s) {
                    best = Some((score, v));
                }
            }
            match best {
                Some((_, v)) => self.held[v] = false,
                None => {
                    if self.stuck.is_none() {
                        self.stuck = Some(self.unblock(pinned, p));
                    }
                    return;
                }
            }
        }
    }
}

impl Sim<'_> {
    /// What held values kept memory over the limit before base op `p`: the one read last
    /// among those that could not be made again, and the values to protect in the next run so
    /// that it can be: the nearest single ancestor it can be made again from (a checkpoint),
    /// or else the operands of its producer that the run had let go.
    fn unblock(&mut self, pinned: &[usize], p: usize) -> Vec<(usize, usize)> {
        let blocked = (0..self.held.len())
            .filter(|&v| self.held[v] && self.size(v) > 0 && !pinned.contains(&v))
            .filter_map(|v| self.next_read(v, p).map(|next| (next, v)))
            .filter(|&(_, v)| {
                let producer = self.model.values[v].producer;
                producer.is_some_and(|q| self.model.ops[q].recompute) && !self.makeable(v)
            })
            .max();
        let Some((_, v)) = blocked else {
            // Nothing held could go: what is being made again here needs too much at once.
            // Keep what this run evicted and now makes again until here.
            let made = self.atoms.iter().filter(|&&(_, at)| at == p);
            let mut keep: Vec<usize> = match self.making.first() {
                Some(&v) => vec![v],
                None => made
                    .filter_map(|&(q, _)| self.model.ops[q].results.first().copied())
                    .filter(|&x| pinned.contains(&x))
                    .collect(),
            };
            keep.retain(|&x| self.protected[x].is_none_or(|u| u < p));
            keep.sort_unstable();
            keep.dedup();
            return keep.into_iter().map(|x| (x, p)).collect();
        };
        let until = self.reads[v].last().copied().unwrap_or(p);
        let Some(q) = self.model.values[v].producer else {
            return Vec::new();
        };
        if !self.model.ops[q].recompute {
            return Vec::new();
        }
        // Its ancestors, nearest first (breadth first), that were let go.
        let mut ancestors: Vec<usize> = Vec::new();
        let mut k = 0;
        let mut frontier = vec![v];
        while k < frontier.len() && frontier.len() < 64 {
            let u = frontier[k];
            k += 1;
            let Some(q) = self.model.values[u].producer else {
                continue;
            };
            for &x in &self.model.ops[q].operands {
                if !frontier.contains(&x) {
                    frontier.push(x);
                    if !self.held[x] && self.protected[x].is_none_or(|u| u < until) {
                        ancestors.push(x);
                    }
                }
            }
        }
        for &a in &ancestors {
            self.held[a] = true;
            let enough = self.makeable(v);
            self.held[a] = false;
            if enough {
                return vec![(a, until)];
            }
        }
        self.model.ops[q]
            .operands
            .iter()
            .copied()
            .filter(|&x| !self.held[x] && self.protected[x].is_none_or(|u| u < until))
            .map(|x| (x, until))
            .collect()
    }
}

/// The reads of each value, and what is made from it.
struct Facts {
    /// The base positions reading each value (`ops.len()` for the return), sorted.
    reads: Vec<Vec<usize>>,
    /// For each value, the values of the ops that read it.
    consumers: Vec<Vec<usize>>,
}

/// Runs the schedule under `limit`; the recomputations it made, or `None` if a value it
/// needed could not be made again.
fn simulate(
    model: &Model,
    facts: &Facts,
    work: &Work,
    limit: u64,
    victim: Victim,
    protected: &[Option<usize>],
) -> Result<Atoms, Vec<(usize, usize)>> {
    let n = model.ops.len();
    let mut sim = Sim {
        model,
        reads: &facts.reads,
        consumers: &facts.consumers,
        work,
        held: model.values.iter().map(|v| v.input).collect(),
        atoms: Vec::new(),
        protected,
        stuck: None,
        making: Vec::new(),
    };
    let outputs: Vec<usize> = (0..model.values.len())
        .filter(|&v| model.values[v].output)
        .collect();
    for p in 0..=n {
        let needs = if p < n {
            &model.ops[p].operands
        } else {
            &outputs
        };
        for &x in needs {
            if !sim.make(x, p, needs, limit, victim) {
                return Err(Vec::new());
            }
        }
        if p < n {
            sim.evict(p, needs, p, limit, victim);
            for &r in &model.ops[p].results {
                sim.held[r] = true;
            }
        }
        if let Some(protect) = sim.stuck {
            return Err(protect);
        }
    }
    Ok(sim.atoms)
}

/// The candidates of a set of recomputations: one chain per base position, the
/// recomputations there in the order the run made them (which the model and the IR rewrite
/// keep, so that the memory they see is the run's).
fn candidates_of(model: &Model, reads: &[Vec<usize>], atoms: &[(usize, usize)]) -> Vec<Candidate> {
    atoms
        .chunk_by(|a, b| a.1 == b.1)
        .map(|group| {
            let at = group[0].1;
            let chain: Vec<usize> = group.iter().map(|&(q, _)| q).collect();
            let last = *chain.last().expect("chunks are not empty");
            let target = model.ops[last].results.first().copied().unwrap_or(0);
            let before = &reads[target];
            let gap_from = before[..before.partition_point(|&r| r < at)]
                .last()
                .copied()
                .unwrap_or(last);
            Candidate {
                target,
                at,
                flops: chain
                    .iter()
                    .fold(0u64, |a, &q| a.saturating_add(model.ops[q].flops)),
                label: label(model, &chain),
                chain,
                gap_from,
                extends: Vec::new(),
                moves: false,
            }
        })
        .collect()
}

fn evaluate(model: &Model, reads: &[Vec<usize>], atoms: &[(usize, usize)], work: &Work) -> Profile {
    work.charge((model.ops.len() + atoms.len()) as u64 + 256);
    let cands = candidates_of(model, reads, atoms);
    let refs: Vec<&Candidate> = cands.iter().collect();
    model.evaluate(&refs)
}

/// Reverse deletion: drops, most expensive first, each recomputation the target does not need.
fn prune(
    model: &Model,
    reads: &[Vec<usize>],
    atoms: &mut Atoms,
    profile: &mut Profile,
    target: u64,
    work: &Work,
) {
    let mut order: Atoms = atoms.clone();
    order.sort_by_key(|&(q, at)| {
        (
            std::cmp::Reverse(model.ops[q].flops),
            std::cmp::Reverse(at),
            q,
        )
    });
    order.dedup();
    for atom in order {
        // Each copy of a recomputation made more than once at one point, the last first.
        while let Some(k) = atoms.iter().rposition(|&a| a == atom) {
            if work.spent() {
                return;
            }
            let removed = atoms.remove(k);
            let trial = evaluate(model, reads, atoms, work);
            if trial.load <= target {
                *profile = trial;
            } else {
                atoms.insert(k, removed);
                break;
            }
        }
    }
}

/// Recomputations that bring the model's LOAD to at most `target` (one candidate per base op
/// they run before, its chain in run order), with the fewest extra FLOPs the runs found;
/// `None` if no run meets it (or the model is over [`MAX_OPS`]).
pub fn search(model: &Model, target: u64, work: &Work) -> Option<(Vec<Candidate>, Profile)> {
    let n = model.ops.len();
    if n > MAX_OPS || n == 0 {
        return None;
    }
    let mut reads: Vec<Vec<usize>> = vec![Vec::new(); model.values.len()];
    for (p, op) in model.ops.iter().enumerate() {
        for &v in &op.operands {
            reads[v].push(p);
        }
    }
    for (v, value) in model.values.iter().enumerate() {
        if value.output {
            reads[v].push(n);
        }
    }
    for r in &mut reads {
        r.sort_unstable();
        r.dedup();
    }
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); model.values.len()];
    for op in &model.ops {
        for &v in &op.operands {
            consumers[v].extend(op.results.iter().copied());
        }
    }
    for c in &mut consumers {
        c.sort_unstable();
        c.dedup();
    }
    let facts = Facts { reads, consumers };
    let mut best: Option<(Vec<Candidate>, Profile)> = None;
    let mut tried: Vec<Atoms> = Vec::new();
    for victim in [Victim::CostPerByteStep, Victim::FarthestRead] {
        for step in 0..LIMIT_STEPS {
            if work.spent() {
                return best;
            }
            let limit = target.saturating_add(target / 16 * step);
            // Each run that gets stuck protects the values that would have unblocked it, and
            // runs again.
            let mut protected: Vec<Option<usize>> = vec![None; model.values.len()];
            let mut outcome = Err(Vec::new());
            for _ in 0..REPAIRS {
                work.charge(n as u64);
                outcome = simulate(model, &facts, work, limit, victim, &protected);
                match &outcome {
                    Err(protect) if !protect.is_empty() && !work.spent() => {
                        for &(v, until) in protect {
                            protected[v] = Some(protected[v].map_or(until, |u| u.max(until)));
                        }
                    }
                    _ => break,
                }
            }
            let Ok(atoms) = outcome else {
                continue;
            };
            if atoms.is_empty() || tried.contains(&atoms) {
                continue;
            }
            tried.push(atoms.clone());
            // The recomputations at each point in the order the run made them, and in
            // schedule order (a value the run made twice at one point is then made twice in a
            // row, and reverse deletion drops one copy): whichever prunes to fewer FLOPs.
            let mut in_schedule_order = atoms.clone();
            in_schedule_order.sort_by_key(|&(q, at)| (at, q));
            let orders = if in_schedule_order == atoms {
                vec![atoms]
            } else {
                vec![atoms, in_schedule_order]
            };
            for mut atoms in orders {
                let mut profile = evaluate(model, &facts.reads, &atoms, work);
                if profile.load > target {
                    continue;
                }
                prune(model, &facts.reads, &mut atoms, &mut profile, target, work);
                if best
                    .as_ref()
                    .is_none_or(|(_, b)| profile.extra_flops < b.extra_flops)
                {
                    best = Some((candidates_of(model, &facts.reads, &atoms), profile));
                }
            }
        }
    }
    best
}
