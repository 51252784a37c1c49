//! Recompute candidates: for every buffer held across a gap, the chains of ops that can derive
//! it again right before the later read from what is live there.
//!
//! A buffer (a value that owns its bytes, with the views of it) made at base position `p` and
//! read at `r_1 < r_2 < ...` is held over each gap `(r_j, r_{j+1})` only to be read again, and
//! over `(p, r_1)` before it is read at all. A candidate recomputes, right before the gap's
//! end, the buffer's producer and the views of it that are read from there on. Over the first
//! gap it is a move (`Candidate::moves`): the original then has no reader and no longer runs,
//! so only the rest of the chain costs FLOPs.
//!
//! Each operand of a cloned op is either live at that point anyway (free), or recomputed in
//! turn (its producer joins the chain, up to a number of ops, [`DEPTHS`]), or kept alive longer
//! (`extends`: graph inputs, random ops, anything that may not run again, or what the depth
//! leaves out). The variants of one gap: each depth, each with two answers to "live anyway":
//! everything live there, or only what is live for a reason of its own (read at that point,
//! or not recomputable), so that a value merely held across a gap of its own is recomputed
//! too and several buffers can be derived again from one kept value (a checkpoint).
//! Selection ([`super::select`]) weighs their FLOPs against what they free.

use super::model::{Candidate, Model};

/// How many ops each variant's chain may recompute behind the buffer's own ops: the shallow
/// one none, then one (an operand's producer), short chains, and whole layers (checkpointing
/// from the residual stream).
pub const DEPTHS: [usize; 4] = [0, 1, 4, 32];

/// Facts about the base schedule the candidates are drawn from.
pub struct Base {
    /// The buffer (root value) whose bytes each value uses.
    pub root: Vec<usize>,
    /// For each root, the base positions that read it or a view of it (sorted, unique;
    /// `ops.len()` for the return).
    pub reads: Vec<Vec<usize>>,
    /// For each root, the position of its first producer (`None` for inputs).
    pub produced: Vec<Option<usize>>,
}

impl Base {
    pub fn new(model: &Model) -> Base {
        let n = model.ops.len();
        let mut root: Vec<usize> = (0..model.values.len()).collect();
        // Views come after their sources (SSA order), so one pass in producer order works.
        for op in &model.ops {
            for &r in &op.results {
                if let Some((source, _)) = model.values[r].view_of {
                    root[r] = root[source];
                }
            }
        }
        let mut reads: Vec<Vec<usize>> = vec![Vec::new(); model.values.len()];
        for (p, op) in model.ops.iter().enumerate() {
            for &v in &op.operands {
                reads[root[v]].push(p);
            }
        }
        for (v, value) in model.values.iter().enumerate() {
            if value.output {
                reads[root[v]].push(n);
            }
        }
        for r in &mut reads {
            r.sort_unstable();
            r.dedup();
        }
        // The first producer: a value the e-graph proves equal to an earlier one has two, and
        // every reader comes after the first, so chains in position order stay topological.
        let mut produced = vec![None; model.values.len()];
        for (p, op) in model.ops.iter().enumerate() {
            for &r in &op.results {
                produced[r].get_or_insert(p);
            }
        }
        Base {
            root,
            reads,
            produced,
        }
    }

    /// Whether `value`'s buffer is live at base position `at` without any recomputation: made
    /// before it and read at or after it.
    pub fn live_at(&self, value: usize, at: usize) -> bool {
        let r = self.root[value];
        self.produced[r].is_none_or(|p| p < at) && self.reads[r].last().is_some_and(|&l| l >= at)
    }
}

impl Base {
    /// Whether `value`'s buffer is live at `at` for a reason other than a gap of its own that
    /// a candidate could drop: it is read at `at`, or it may not be made again.
    fn kept_at(&self, model: &Model, value: usize, at: usize) -> bool {
        let r = self.root[value];
        self.reads[r].binary_search(&at).is_ok()
            || self.produced[r].is_none_or(|p| !model.ops[p].recompute)
            || model.values[r].input
    }
}

/// Every candidate of the model's schedule.
pub fn candidates(model: &Model, base: &Base) -> Vec<Candidate> {
    let n = model.ops.len();
    // The values derived from each root through views, by root.
    let mut group: Vec<Vec<usize>> = vec![Vec::new(); model.values.len()];
    for v in 0..model.values.len() {
        group[base.root[v]].push(v);
    }
    // Reads of each value itself (not through views), for choosing which views to redo.
    let mut own_reads: Vec<Vec<usize>> = vec![Vec::new(); model.values.len()];
    for (p, op) in model.ops.iter().enumerate() {
        for &v in &op.operands {
            own_reads[v].push(p);
        }
    }
    for (v, value) in model.values.iter().enumerate() {
        if value.output {
            own_reads[v].push(n);
        }
    }
    let mut out = Vec::new();
    for (root, value) in model.values.iter().enumerate() {
        if base.root[root] != root || value.input || value.size == 0 {
            continue;
        }
        let Some(producer) = base.produced[root] else {
            continue;
        };
        if !model.ops[producer].recompute {
            continue;
        }
        // The gaps: from the producer to the first read (a chain there moves the computation
        // later: the original no longer runs), and between consecutive reads.
        let reads = &base.reads[root];
        let gaps = std::iter::once(producer)
            .chain(reads.iter().copied())
            .zip(reads.iter().copied());
        for (from, at) in gaps {
            if at < from + 2 {
                continue; // no op runs in between: nothing to gain
            }
            // The buffer's own ops: its producer and the views read from `at` on.
            let mut own = vec![producer];
            let mut ok = true;
            for &y in &group[root] {
                if y == root || !own_reads[y].iter().any(|&p| p >= at) {
                    continue;
                }
                // The views on the path from the root to `y`.
                let mut v = y;
                while let Some((source, _)) = model.values[v].view_of {
                    match base.produced[v] {
                        Some(p) if model.ops[p].recompute => own.push(p),
                        _ => ok = false,
                    }
                    v = source;
                }
            }
            if !ok {
                continue;
            }
            own.sort_unstable();
            own.dedup();
            // A move when the gap starts at the producer and the chain's own ops make nothing
            // but this buffer (an op with another result read earlier keeps running): their
            // originals stop running, so they cost nothing.
            let moves = from == producer
                && own
                    .iter()
                    .all(|&o| model.ops[o].results.iter().all(|&r| base.root[r] == root));
            let flops = |ops: &[usize]| {
                ops.iter()
                    .fold(0u64, |a, &o| a.saturating_add(model.ops[o].flops))
            };
            let moved = if moves { flops(&own) } else { 0 };
            let make = |(chain, extends): (Vec<usize>, Vec<usize>)| Candidate {
                target: root,
                at,
                flops: flops(&chain).saturating_sub(moved),
                label: label(model, &chain),
                chain,
                moves,
                gap_from: from,
                extends,
            };
            let mut variants: Vec<Candidate> = Vec::new();
            for depth in DEPTHS {
                for reuse in [Reuse::Live, Reuse::Kept] {
                    let c = make(derive(model, base, &own, root, at, depth, reuse));
                    if !variants.iter().any(|v| v.chain == c.chain) {
                        variants.push(c);
                    }
                }
            }
            out.extend(variants);
        }
    }
    out
}

/// Which operands live at the recompute point a chain reads instead of recomputing.
#[derive(Clone, Copy, PartialEq)]
enum Reuse {
    /// Everything live there.
    Live,
    /// Only what is live there for a reason of its own: read by the op at that point, or not
    /// recomputable. A value merely held across a gap of its own is recomputed too (up to the
    /// depth), so that this candidate and the one dropping that value can be chosen together:
    /// the checkpoint shape, where several values are derived again from one kept value.
    Kept,
}

/// The chain that recomputes `own` (base op indices) before `at`, recomputing unavailable
/// operands up to `depth` more ops; and the values it keeps alive longer instead.
fn derive(
    model: &Model,
    base: &Base,
    own: &[usize],
    root: usize,
    at: usize,
    depth: usize,
    reuse: Reuse,
) -> (Vec<usize>, Vec<usize>) {
    let mut chain: Vec<usize> = own.to_vec();
    let mut extends = Vec::new();
    let mut budget = depth;
    let mut queue: Vec<usize> = own.to_vec();
    let mut seen_values: Vec<usize> = Vec::new();
    while let Some(o) = queue.pop() {
        for &x in &model.ops[o].operands {
            let rx = base.root[x];
            if rx == root || seen_values.contains(&x) {
                continue;
            }
            // Produced inside the chain already?
            if base.produced[x].is_some_and(|p| chain.contains(&p)) {
                continue;
            }
            seen_values.push(x);
            if base.live_at(x, at) && (reuse == Reuse::Live || base.kept_at(model, x, at)) {
                continue;
            }
            // Recompute x (its buffer's producer and the views down to x) if the depth allows
            // and every op on the way may run again.
            let mut ops = Vec::new();
            let mut v = x;
            let mut ok = true;
            loop {
                match base.produced[v] {
                    Some(p) if model.ops[p].recompute => ops.push(p),
                    _ => {
                        ok = false;
                        break;
                    }
                }
                match model.values[v].view_of {
                    Some((source, _)) => v = source,
                    None => break,
                }
            }
            let fresh: Vec<usize> = ops.iter().copied().filter(|p| !chain.contains(p)).collect();
            if ok && fresh.len() <= budget {
                budget -= fresh.len();
                for p in fresh {
                    chain.push(p);
                    queue.push(p);
                }
            } else {
                extends.push(x);
            }
        }
    }
    chain.sort_unstable();
    chain.dedup();
    extends.sort_unstable();
    extends.dedup();
    (chain, extends)
}

/// onnxruntime's subgraph string of a chain: its op types in order, each followed by `+`.
pub fn label(model: &Model, chain: &[usize]) -> String {
    chain
        .iter()
        .map(|&o| format!("{}+", model.ops[o].kind))
        .collect()
}
