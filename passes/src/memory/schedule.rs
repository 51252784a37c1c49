//! Scheduling: the dependency graph of the schedulable ops and the candidate orders.
//!
//! Three candidates, in this order: the model's own order, a greedy order that runs the ready
//! op that frees the most bytes, and, for graphs of at most [`EXACT_LIMIT`] ops, an exact
//! search over orders (dynamic programming over sets of scheduled ops). The caller keeps the
//! one with the lowest LOAD (the first on ties). Every candidate is a topological order.

use super::{static_bytes, ScratchFn, EXACT_LIMIT};
use memc_ir::{Function, OpId, ValueId};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

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
///
/// An op's score (what it frees less what it allocates) only grows as other ops run: a value
/// is freed by its last reader, and once all readers but one have run, that one's score rises
/// by the value's size. So the ready ops wait in a max-heap of (score, earlier op), and an
/// entry whose score has grown since is skipped: `O((ops + reads) log ops)`.
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
    let mut readers: HashMap<ValueId, Vec<usize>> = HashMap::new();
    for (i, r) in reads.iter().enumerate() {
        for &v in r {
            readers.entry(v).or_default().push(i);
        }
    }
    let size_of = |v: ValueId| static_bytes(func, v).ok().flatten().unwrap_or(0) as i128;
    let mut score: Vec<i128> = (0..n)
        .map(|i| {
            let freed: i128 = reads[i]
                .iter()
                .filter(|v| uses.get(v) == Some(&1))
                .map(|&v| size_of(v))
                .sum();
            freed - i128::from(graph.alloc[i])
        })
        .collect();
    let mut done = vec![false; n];
    let mut ready: BinaryHeap<(i128, Reverse<usize>)> = (0..n)
        .filter(|&i| n_preds[i] == 0)
        .map(|i| (score[i], Reverse(i)))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some((s, Reverse(i))) = ready.pop() {
        if done[i] || s != score[i] {
            // Run already (an empty value's reader is pushed again with the same score), or
            // its score grew: a newer entry is in the heap.
            continue;
        }
        done[i] = true;
        order.push(i);
        for v in &reads[i] {
            let Some(u) = uses.get_mut(v) else { continue };
            *u -= 1;
            if *u == 1 {
                // One reader is left (outputs never get here): it now frees the value.
                let last = readers[v].iter().copied().find(|&j| !done[j]);
                if let Some(j) = last {
                    score[j] += size_of(*v);
                    if n_preds[j] == 0 {
                        ready.push((score[j], Reverse(j)));
                    }
                }
            }
        }
        for &s in &succs[i] {
            n_preds[s] -= 1;
            if n_preds[s] == 0 {
                ready.push((score[s], Reverse(s)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::root_values;
    use memc_ir::{Attribute, ElemType, Module, Opcode, TensorType, Type, WeightBytes};
    use std::sync::Arc;

    /// The greedy order as first written: every step scores every ready op (`O(ops x ready)`).
    fn greedy_order_reference(
        func: &Function,
        graph: &Graph,
        root: &HashMap<ValueId, ValueId>,
    ) -> Vec<usize> {
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
                .max_by_key(|&(_, &i)| (score(i, &uses), Reverse(i)))
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

    /// A random function: elementwise ops on vectors of a few lengths (so that what an op
    /// frees differs), views, values read by many ops, many ops ready at once, several
    /// outputs.
    fn random_module(seed: u64, n_ops: usize) -> Module {
        let mut rng = crate::plan::assign::trace::Rng(seed);
        let mut module = Module::new();
        let ty = |len: u64| Type::Tensor(TensorType::with_shape(ElemType::F32, &[len]));
        let lens = [16u64, 64, 256];
        let mut func = Function::new("random", lens.iter().map(|&l| ty(l)).collect(), Vec::new());
        let block = func.entry_block();
        // Values by length, available as operands.
        let mut pool: Vec<Vec<ValueId>> = func.args().iter().map(|&a| vec![a]).collect();
        let shape_weights: Vec<ValueId> = lens
            .iter()
            .map(|&l| {
                let bytes: Vec<u8> = (l as i64).to_le_bytes().to_vec();
                let w = module
                    .weights
                    .insert(
                        &format!("shape{l}"),
                        TensorType::with_shape(ElemType::I64, &[1]),
                        WeightBytes::Owned(Arc::from(bytes)),
                    )
                    .expect("a fresh name");
                let op = func.build_op(
                    block,
                    Opcode::Weight,
                    vec![],
                    vec![Type::Tensor(TensorType::with_shape(ElemType::I64, &[1]))],
                    [("value", Attribute::Weight(w))],
                );
                func.op(op).results[0]
            })
            .collect();
        for _ in 0..n_ops {
            let k = rng.range(0, lens.len() as u64) as usize;
            let values = &pool[k];
            // Mostly recent values, sometimes old ones (long lives, many readers).
            let pick = |rng: &mut crate::plan::assign::trace::Rng| {
                let back = if rng.range(0, 4) == 0 {
                    rng.range(0, values.len() as u64)
                } else {
                    rng.range(0, values.len().min(3) as u64)
                };
                values[values.len() - 1 - back as usize]
            };
            let (x, y) = (pick(&mut rng), pick(&mut rng));
            let (opcode, operands) = match rng.range(0, 6) {
                0 => (Opcode::Relu, vec![x]),
                1 => (Opcode::Exp, vec![x]),
                2 => (Opcode::Add, vec![x, y]),
                3 => (Opcode::Mul, vec![x, y]),
                4 => (Opcode::Reshape, vec![x, shape_weights[k]]),
                _ => (Opcode::Identity, vec![x]),
            };
            let attrs: Vec<(&'static str, Attribute)> = Vec::new();
            let op = func.build_op(block, opcode, operands, vec![ty(lens[k])], attrs);
            pool[k].push(func.op(op).results[0]);
        }
        let outputs: Vec<ValueId> = pool.iter().filter_map(|v| v.last().copied()).collect();
        let types: Vec<Type> = outputs
            .iter()
            .map(|&v| func.value_type(v).clone())
            .collect();
        func.build_op(block, Opcode::Return, outputs, vec![], []);
        for t in types {
            func.push_result_type(t);
        }
        module.add_function(func);
        module
    }

    #[test]
    fn greedy_order_matches_the_reference() {
        for seed in 0..60 {
            let module = random_module(seed, 5 + 7 * seed as usize);
            let (_, func) = module.functions().next().expect("one function");
            let (ops, ret) = crate::memory::schedulable_ops(func).expect("plannable");
            let root = root_values(func, &module.weights, &ops);
            let graph = Graph::new(func, ops, ret, &root, &|_, _| 0);
            assert_eq!(
                greedy_order(func, &graph, &root),
                greedy_order_reference(func, &graph, &root),
                "seed {seed}"
            );
        }
    }
}
