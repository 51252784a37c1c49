//! Eviction search: recomputation found by running the schedule under the target, evicting
//! values when memory runs over it and deriving them again, recursively, when they are read
//! (Dynamic Tensor Rematerialization's simulation, with the whole schedule known ahead).
//!
//! The gap candidates ([`super::candidates`]) derive a buffer again right before its next read
//! from what the base schedule holds there. A solution at a tight budget often needs more: a
//! value derived again at one point and held to serve a later derivation (two-level
//! recomputation), a derivation placed early, where its sources are still held, or one value
//! held through most of the schedule as a checkpoint from which many values are derived again
//! together at one late point. Such solutions are sets of single-op recomputations (each op
//! cloned before some base op, every later read going to the newest copy) that no candidate
//! helps towards alone. The simulation finds them directly:
//!
//! - it runs the base ops in order; before each, every operand that is not held is made again
//!   from what is held (its producer cloned there, after the operands it needs in turn), in
//!   operand order or, by the other `Order`, the one whose making computes the most bytes
//!   first (Sethi and Ullman's order);
//! - while an op's results (and scratch) would take memory over the limit, it evicts a held
//!   value the op does not read: first one nothing will need (not read again, not needed to
//!   make an evicted value again, not an operand of a held value's producer), then the one
//!   with the least cost per byte and step until it is next needed (or, by the other
//!   `Victim` rule, the one needed last). A value read again or needed to make an evicted
//!   value is evicted only if it can be made again itself (never a graph input or a random
//!   op's result); values held past their last read stay until evicted, as checkpoints to
//!   derive others from;
//! - a run that gets stuck (nothing may go) is repeated with a value protected (never
//!   evicted up to a point), as its `Repair` rule says: the nearest single ancestor from
//!   which the value blocking it could have been made again, or one ancestor from which every
//!   blocked value could (a checkpoint, possibly a graph input read late anyway: the one that
//!   costs least to hold), or else the blocking value's producer's operands, or the value it
//!   was making again when memory ran out (a bounded number of times).
//!
//! The runs try every limit (at and above the target: the simulation holds every value in its
//! own bytes, with no in-place sharing), tightest first, each with every `POLICIES` entry (an
//! eviction rule, a making order and a repair rule; no one of them meets every tight budget).
//! A run's recomputations become one chain per base op they run before, in the order the run
//! made them, so that the [`Model`] (which shares bytes as the planner does) measures the
//! run's own schedule; they are also measured in schedule order, where a value made twice at
//! one point is made twice in a row and one copy can go. Each is pruned by reverse deletion
//! (each recomputation the target does not need is dropped, most expensive first), and the
//! best that meets the target is kept. Only for models of at most [`MAX_OPS`] ops, and only
//! when the candidates fall short (`super::rematerialize` decides); the work it may do is
//! bounded by a [`Work`] budget, so the result does not depend on the machine.

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

/// The order a run makes the values an op reads in.
#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// Operand order, every operand pinned (never evicted) until the op has run.
    Operands,
    /// The operand whose making computes the most bytes first (Sethi and Ullman's order:
    /// what is made first is held while the rest are made), each pinned once made; one held
    /// now but made later in the order may go while the others are made, and is made again.
    MostFirst,
}

/// What a run that got stuck protects in the next one.
#[derive(Clone, Copy, PartialEq)]
enum Repair {
    /// For the held value read last among those that could not be made again, the nearest
    /// single ancestor it could be made from (a checkpoint), until its last read.
    Nearest,
    /// One ancestor from which every blocked value (read again, or needed to make a value
    /// not held) could be made, the one cheapest to hold, until the last of them is needed;
    /// where none serves all, as [`Repair::Nearest`] for the one needed last.
    Checkpoint,
}

/// How a run chooses: each run of the search follows one.
#[derive(Clone, Copy)]
struct Policy {
    victim: Victim,
    order: Order,
    repair: Repair,
}

/// The policies each limit is tried with, in order (when the work runs out, the first ones
/// have run): the one that finds the fewest FLOPs most often, then the one that meets the
/// tightest budgets most often (a checkpoint held long, from which many values are derived
/// again), then the others that sometimes do better. None meets every budget the others meet:
/// at four buffers, seed 10 of `tests/remat_oracle.rs` needs the first, seeds 5 and 17 the
/// second.
const POLICIES: [Policy; 5] = {
    use Order::{MostFirst, Operands};
    use Repair::{Checkpoint, Nearest};
    use Victim::{CostPerByteStep, FarthestRead};
    [
        Policy::new(CostPerByteStep, Operands, Nearest),
        Policy::new(CostPerByteStep, MostFirst, Checkpoint),
        Policy::new(FarthestRead, Operands, Nearest),
        Policy::new(FarthestRead, MostFirst, Checkpoint),
        Policy::new(CostPerByteStep, Operands, Checkpoint),
    ]
};

impl Policy {
    const fn new(victim: Victim, order: Order, repair: Repair) -> Policy {
        Policy {
            victim,
            order,
            repair,
        }
    }
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
    /// The most bytes held at once.
    limit: u64,
    policy: Policy,
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

    /// Makes `v` again before base op `p` if it is not held, within the limit where evicting
    /// what `pinned` does not list allows; false if it cannot be made.
    fn make(&mut self, v: usize, p: usize, pinned: &[usize]) -> bool {
        if self.held[v] {
            return true;
        }
        let Some(q) = self.model.values[v].producer else {
            return false;
        };
        if !self.model.ops[q].recompute {
            return false;
        }
        let operands = &self.model.ops[q].operands;
        let (order, mut keep) = self.making_order(operands, pinned);
        self.making.push(v);
        for x in order {
            if !keep.contains(&x) {
                keep.push(x);
            }
            if x == v || !self.make(x, p, &keep) {
                return false;
            }
        }
        self.evict(q, &keep, p);
        self.making.pop();
        self.atoms.push((q, p));
        for &r in &self.model.ops[q].results {
            self.held[r] = true;
        }
        true
    }

    /// Bytes of the values not held that making `v` would compute: `v` and, recursively, the
    /// operands of their producers (each counted once).
    fn unheld_bytes(&self, v: usize, seen: &mut [bool]) -> u64 {
        if self.held[v] || std::mem::replace(&mut seen[v], true) {
            return 0;
        }
        let own = self.size(v);
        self.model.values[v].producer.map_or(own, |q| {
            self.model.ops[q]
                .operands
                .iter()
                .fold(own, |a, &x| a.saturating_add(self.unheld_bytes(x, seen)))
        })
    }

    /// The order to make `operands` in, as the policy says, and what is pinned before the
    /// first is made (`pinned` and, in operand order, every operand).
    fn making_order(&self, operands: &[usize], pinned: &[usize]) -> (Vec<usize>, Vec<usize>) {
        let mut keep = pinned.to_vec();
        match self.policy.order {
            Order::Operands => {
                keep.extend_from_slice(operands);
                (operands.to_vec(), keep)
            }
            Order::MostFirst => {
                // Each operand's making looks at what it is made from.
                self.work
                    .charge(operands.len() as u64 * (self.held.len() as u64 / 4 + 1));
                let mut order: Vec<(u64, usize)> = operands
                    .iter()
                    .map(|&x| (self.unheld_bytes(x, &mut vec![false; self.held.len()]), x))
                    .collect();
                // A stable sort keeps operand order among equals.
                order.sort_by_key(|&(bytes, _)| std::cmp::Reverse(bytes));
                (order.into_iter().map(|(_, x)| x).collect(), keep)
            }
        }
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
    /// within the limit, or nothing more may go.
    fn evict(&mut self, o: usize, pinned: &[usize], p: usize) {
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
            if held.saturating_add(running) <= self.limit {
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
                let score = match self.policy.victim {
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
    /// What held values kept memory over the limit before base op `p` (those that could not
    /// be made again), and the values to protect in the next run so that it can be, and up to
    /// where, as the policy's [`Repair`] says: one checkpoint for all of them, or for the one
    /// needed last the nearest single ancestor it can be made again from, or else the operands
    /// of its producer that the run had let go.
    fn unblock(&mut self, pinned: &[usize], p: usize) -> Vec<(usize, usize)> {
        // Held values that could not go: needed (read again, or with a checkpoint to choose,
        // to make a value not held) and not makeable. Each with when it is next needed and up
        // to when it is needed.
        let need_at = match self.policy.repair {
            Repair::Nearest => vec![None; self.held.len()],
            Repair::Checkpoint => {
                self.work.charge(self.held.len() as u64);
                self.sources(p)
            }
        };
        let blocked: Vec<(usize, usize, usize)> = (0..self.held.len())
            .filter(|&v| self.held[v] && self.size(v) > 0 && !pinned.contains(&v))
            .filter(|&v| {
                let producer = self.model.values[v].producer;
                producer.is_some_and(|q| self.model.ops[q].recompute)
            })
            .filter_map(|v| {
                let read = self.next_read(v, p);
                let next = [read, need_at[v]].into_iter().flatten().min()?;
                let last = read.and_then(|_| self.reads[v].last().copied());
                let until = [last, need_at[v]].into_iter().flatten().max()?;
                Some((next, until, v))
            })
            .filter(|&(_, _, v)| !self.makeable(v))
            .collect();
        if blocked.is_empty() {
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
        }
        if self.policy.repair == Repair::Checkpoint {
            if let Some(protect) = self.checkpoint(&blocked, p) {
                return vec![protect];
            }
        }
        // The one needed last: its nearest single ancestor, or else its producer's operands.
        let &(_, until, v) = blocked
            .iter()
            .max_by_key(|&&(next, _, v)| (next, v))
            .expect("some value is blocked");
        let q = self.model.values[v]
            .producer
            .expect("blocked values have producers");
        for a in self.let_go_ancestors(&[v], until) {
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

    /// One ancestor from which every `blocked` value (with when it is next needed and until
    /// when) could be made again, to hold until the last is needed: of those, the one that
    /// costs least to hold, the fewest bytes times steps beyond its own last read (a graph
    /// input read late anyway costs little), the nearest of equals.
    fn checkpoint(
        &mut self,
        blocked: &[(usize, usize, usize)],
        p: usize,
    ) -> Option<(usize, usize)> {
        let until_all = blocked
            .iter()
            .map(|&(_, until, _)| until)
            .max()
            .unwrap_or(p);
        let all: Vec<usize> = blocked.iter().map(|&(_, _, v)| v).collect();
        let mut checkpoint: Option<(u128, usize)> = None;
        for a in self.let_go_ancestors(&all, until_all) {
            self.work
                .charge(all.len() as u64 * (self.held.len() as u64 / 4 + 1));
            self.held[a] = true;
            let enough = all.iter().all(|&v| self.makeable(v));
            self.held[a] = false;
            if enough {
                let own = self.reads[a].last().copied().unwrap_or(0);
                let cost = u128::from(self.size(a)) * until_all.saturating_sub(own) as u128;
                if checkpoint.is_none_or(|(c, _)| cost < c) {
                    checkpoint = Some((cost, a));
                }
            }
        }
        checkpoint.map(|(_, a)| (a, until_all))
    }

    /// The ancestors of `values`, nearest first (breadth first), that the run let go and
    /// are not protected up to `until` already.
    fn let_go_ancestors(&self, values: &[usize], until: usize) -> Vec<usize> {
        let mut ancestors: Vec<usize> = Vec::new();
        let mut k = 0;
        let mut frontier = values.to_vec();
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
        ancestors
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
    policy: Policy,
    protected: &[Option<usize>],
) -> Result<Atoms, Vec<(usize, usize)>> {
    let n = model.ops.len();
    let mut sim = Sim {
        model,
        reads: &facts.reads,
        consumers: &facts.consumers,
        work,
        limit,
        policy,
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
        let (order, mut keep) = sim.making_order(needs, &[]);
        for x in order {
            if !keep.contains(&x) {
                keep.push(x);
            }
            if !sim.make(x, p, &keep) {
                return Err(Vec::new());
            }
        }
        if p < n {
            sim.evict(p, needs, p);
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
    for step in 0..LIMIT_STEPS {
        for policy in POLICIES {
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
                outcome = simulate(model, &facts, work, limit, policy, &protected);
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
