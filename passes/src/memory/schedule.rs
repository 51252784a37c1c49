//! Scheduling: the dependency graph of the schedulable ops and the candidate orders.
//!
//! Three candidates, in this order: the model's own order, a greedy order that runs the ready
//! op that frees the most bytes, and, for graphs of at most [`EXACT_LIMIT`] ops, an exact
//! search over orders (dynamic programming over sets of scheduled ops). The caller keeps the
//! one with the lowest LOAD (the first on ties). Every candidate is a topological order.

use super::{static_bytes, ScratchFn, EXACT_LIMIT};
use memc_ir::{Function, OpId, ValueId};
use std::collections::HashMap;

/// The schedulable ops of a function and what the schedulers need to know about them.
pub(super) struct Graph {
    /// Schedulable ops in model order (no weights, no `memc.none`, no terminator).
    pub ops: Vec<OpId>,
    pub ret: OpId,
    /// For each schedulable op, indices of ops it depends on.
    pub preds: Vec<Vec<usize>>,
    /// Bytes each op allocates (its results that own their bytes).
    pub alloc: Vec<u64>,
    /// Scratch bytes each op uses during its step.
    pub scratch: Vec<u64>,
}

impl Graph {
    /// The graph of `ops` (in model order) ending in `ret`; `root` maps each arena value to
    /// the value whose bytes it uses.
    pub fn new(
        func: &Function,
        ops: Vec<OpId>,
        ret: OpId,
        root: &HashMap<ValueId, ValueId>,
        scratch: &ScratchFn,
    ) -> Graph {
        // Dependencies among schedulable ops.
        let index: HashMap<OpId, usize> = ops.iter().enumerate().map(|(i, &op)| (op, i)).collect();
        let producer_index =
            |v: ValueId| func.defining_op(v).and_then(|op| index.get(&op).copied());
        let preds: Vec<Vec<usize>> = ops
            .iter()
            .map(|&op| {
                let mut p: Vec<usize> = func
                    .op(op)
                    .operands
                    .iter()
                    .filter_map(|&v| producer_index(v))
                    .collect();
                p.sort();
                p.dedup();
                p
            })
            .collect();
        let alloc: Vec<u64> = ops
            .iter()
            .map(|&op| {
                func.op(op)
                    .results
                    .iter()
                    .filter(|r| root.get(r) == Some(r))
                    .map(|&r| static_bytes(func, r).ok().flatten().unwrap_or(0))
                    .sum()
            })
            .collect();
        let scratch: Vec<u64> = ops.iter().map(|&op| scratch(func, op)).collect();
        Graph {
            ops,
            ret,
            preds,
            alloc,
            scratch,
        }
    }
}

/// The candidate schedules, named, as orders of indices into `graph.ops`.
pub(super) fn candidates(
    func: &Function,
    graph: &Graph,
    root: &HashMap<ValueId, ValueId>,
) -> Vec<(&'static str, Vec<usize>)> {
    let model_order: Vec<usize> = (0..graph.ops.len()).collect();
    let mut candidates: Vec<(&'static str, Vec<usize>)> = vec![("model order", model_order)];
    candidates.push(("greedy min-memory", greedy_order(func, graph, root)));
    if graph.ops.len() <= EXACT_LIMIT {
        if let Some(order) = exact_order(func, graph, root) {
            candidates.push(("exact search", order));
        }
    }
    candidates
}

/// Remaining-use counts per root value, for the schedulers.
fn root_uses(
    func: &Function,
    graph: &Graph,
    root: &HashMap<ValueId, ValueId>,
) -> (HashMap<ValueId, usize>, Vec<Vec<ValueId>>) {
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    let mut reads: Vec<Vec<ValueId>> = Vec::with_capacity(graph.ops.len());
    for &op in &graph.ops {
        let mut r: Vec<ValueId> = func
            .op(op)
            .operands
            .iter()
            .filter_map(|v| root.get(v).copied())
            .collect();
        r.sort();
        r.dedup();
        for &v in &r {
            *uses.entry(v).or_insert(0) += 1;
        }
        reads.push(r);
    }
    // Outputs are never freed.
    for v in &func.op(graph.ret).operands {
        if let Some(&r) = root.get(v) {
            *uses.entry(r).or_insert(0) += 1_000_000;
        }
    }
    (uses, reads)
}

/// Runs the ready op that frees the most bytes net of what it allocates (ties: model order).
fn greedy_order(func: &Function, graph: &Graph, root: &HashMap<ValueId, ValueId>) -> Vec<usize> {
    let n = graph.ops.len();
    let (mut uses, reads) = root_uses(func, graph, root);
    let mut n_preds: Vec<usize> = graph.preds.iter().map(Vec::len).collect();
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, p) in graph.preds.iter().enumerate() {
        for &j in p {
            succs[j].push(i);
        }
    }
    let size_of = |v: ValueId| static_bytes(func, v).ok().flatten().unwrap_or(0) as i128;
    let mut ready: Vec<usize> = (0..n).filter(|&i| n_preds[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while !ready.is_empty() {
        let score = |i: usize, uses: &HashMap<ValueId, usize>| -> i128 {
            let freed: i128 = reads[i]
                .iter()
                .filter(|v| uses.get(v) == Some(&1))
                .map(|&v| size_of(v))
                .sum();
            freed - i128::from(graph.alloc[i])
        };
        let (pos, _) = ready
            .iter()
            .enumerate()
            .max_by_key(|&(_, &i)| (score(i, &uses), std::cmp::Reverse(i)))
            .expect("ready is not empty");
        let i = ready.swap_remove(pos);
        order.push(i);
        for v in &reads[i] {
            if let Some(u) = uses.get_mut(v) {
                *u -= 1;
            }
        }
        for &s in &succs[i] {
            n_preds[s] -= 1;
            if n_preds[s] == 0 {
                ready.push(s);
            }
        }
    }
    order
}

/// The order with the lowest peak, by dynamic programming over sets of scheduled ops
/// (at most [`EXACT_LIMIT`] ops).
fn exact_order(
    func: &Function,
    graph: &Graph,
    root: &HashMap<ValueId, ValueId>,
) -> Option<Vec<usize>> {
    let n = graph.ops.len();
    if n == 0 || n > EXACT_LIMIT {
        return None;
    }
    let (uses, reads) = root_uses(func, graph, root);
    let size_of = |v: ValueId| static_bytes(func, v).ok().flatten().unwrap_or(0);
    let pred_mask: Vec<u32> = graph
        .preds
        .iter()
        .map(|p| p.iter().fold(0u32, |m, &j| m | (1 << j)))
        .collect();
    // Live bytes after the ops in `set` ran: inputs and produced roots with readers left.
    let readers: HashMap<ValueId, u32> = {
        let mut m: HashMap<ValueId, u32> = HashMap::new();
        for (i, r) in reads.iter().enumerate() {
            for &v in r {
                *m.entry(v).or_insert(0) |= 1 << i;
            }
        }
        m
    };
    let producer: HashMap<ValueId, usize> = graph
        .ops
        .iter()
        .enumerate()
        .flat_map(|(i, &op)| {
            func.op(op)
                .results
                .iter()
                .filter(|r| root.get(r) == Some(r))
                .map(move |&r| (r, i))
        })
        .collect();
    let live_after = |set: u32| -> u64 {
        let mut total = 0;
        for (&v, &mask) in &readers {
            let produced = producer.get(&v).is_none_or(|&p| set & (1 << p) != 0);
            let needed = mask & !set != 0 || uses.get(&v).is_some_and(|&u| u >= 1_000_000);
            if produced && needed {
                total += size_of(v);
            }
        }
        for (&v, &p) in &producer {
            if set & (1 << p) != 0
                && !readers.contains_key(&v)
                && uses.get(&v).is_some_and(|&u| u >= 1_000_000)
            {
                total += size_of(v);
            }
        }
        total
    };
    let full: u32 = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
    let mut best: HashMap<u32, (u64, usize, u32)> = HashMap::new(); // set -> (peak, last op, previous set)
    best.insert(0, (live_after(0), usize::MAX, 0));
    let mut frontier = vec![0u32];
    for _ in 0..n {
        let mut next: HashMap<u32, (u64, usize, u32)> = HashMap::new();
        for &set in &frontier {
            let (peak, _, _) = best[&set];
            let before = live_after(set);
            for (i, &preds) in pred_mask.iter().enumerate() {
                if set & (1 << i) != 0 || preds & !set != 0 {
                    continue;
                }
                // The op's scratch is live only during its step.
                let during = before + graph.alloc[i] + graph.scratch[i];
                let candidate = peak.max(during);
                let new_set = set | (1 << i);
                if next.get(&new_set).is_none_or(|&(p, _, _)| candidate < p) {
                    next.insert(new_set, (candidate, i, set));
                }
            }
        }
        frontier = next.keys().copied().collect();
        best.extend(next);
    }
    let mut order = Vec::with_capacity(n);
    let mut set = full;
    while set != 0 {
        let &(_, last, prev) = best.get(&set)?;
        order.push(last);
        set = prev;
    }
    order.reverse();
    Some(order)
}
