//! Liveness: the step of every op under a schedule, the last step that reads each value, and
//! the live-bytes profile of a finished plan.
//!
//! Step `0` holds the graph inputs; the op at position `i` of the schedule runs at step
//! `i + 1`, and the terminator reads the outputs at the last step, `n + 1`. A value is live on
//! `[producer step, last reading step + 1)`; bufferization turns these steps into each
//! buffer's range.

use super::schedule::Graph;
use super::{static_bytes, PlannedBuffer, PlannedKind, PlannedScratch};
use memc_ir::ops::is_random;
use memc_ir::{Diagnostic, Function, OpId, Opcode, ValueId, WeightStore};
use std::collections::HashMap;
use std::collections::HashSet;

/// The steps of one schedule.
pub(super) struct Steps {
    /// The step of every scheduled op, and of the terminator (the last step).
    pub step_of: HashMap<OpId, u64>,
    /// The last step that reads each value.
    pub last_use: HashMap<ValueId, u64>,
    /// The terminator's step: `n + 1` for `n` scheduled ops.
    pub last_step: u64,
}

impl Steps {
    /// The steps of the graph's ops run in `order` (indices into `graph.ops`).
    pub fn new(func: &Function, graph: &Graph, order: &[usize]) -> Steps {
        let last_step = order.len() as u64 + 1;
        let mut step_of: HashMap<OpId, u64> = HashMap::new();
        for (pos, &i) in order.iter().enumerate() {
            step_of.insert(graph.ops[i], pos as u64 + 1);
        }
        step_of.insert(graph.ret, last_step);
        // Last reading step of every value.
        let mut last_use: HashMap<ValueId, u64> = HashMap::new();
        for (&op, &step) in &step_of {
            for &v in &func.op(op).operands {
                let e = last_use.entry(v).or_insert(0);
                *e = (*e).max(step);
            }
        }
        Steps {
            step_of,
            last_use,
            last_step,
        }
    }
}

/// The activation lower bound of one schedule: the most bytes live at one step when every
/// arena value owns its bytes, with no scratch.
///
/// Counted: the graph inputs (live from step 0 to their last reading step) and every op
/// result (from its op's step to its last reading step, or to the end for a graph output),
/// each with its exact byte size (no alignment), a view as a tensor of its own; not counted:
/// weights, persistent state and views of them ([`super::bufferize::root_values`] leaves
/// them out), values computed from weights alone ([`constant_values`]: a compiler can compute
/// them once, so they are no activation even where memc computes them in a run), and
/// scratch. A value nobody reads is live at its op's step only. This is what
/// the model's tensors need in this order before any planner trick; a plan's arena can be
/// below it, since views and in-place results share bytes, and is above it by alignment and
/// scratch.
pub(super) fn activation_bound(
    func: &Function,
    weights: &WeightStore,
    graph: &Graph,
    order: &[usize],
    root: &HashMap<ValueId, ValueId>,
    steps: &Steps,
) -> Result<u64, Diagnostic> {
    let live = activation_live(func, weights, graph, order, root, steps)?;
    Ok(live.iter().copied().max().unwrap_or(0))
}

/// The activation bytes live at each step of `order` (as [`activation_bound`] counts them;
/// its maximum is the bound).
pub(super) fn activation_live(
    func: &Function,
    weights: &WeightStore,
    graph: &Graph,
    order: &[usize],
    root: &HashMap<ValueId, ValueId>,
    steps: &Steps,
) -> Result<Vec<u64>, Diagnostic> {
    let outputs = &func.op(graph.ret).operands;
    let n = steps.last_step as usize + 2;
    let mut delta = vec![0i128; n + 1];
    let mut add = |value: ValueId, start: u64| -> Result<(), Diagnostic> {
        let size = static_bytes(func, value)?.unwrap_or(0);
        let end = if outputs.contains(&value) {
            steps.last_step + 1
        } else {
            steps
                .last_use
                .get(&value)
                .map_or(start + 1, |&u| u + 1)
                .max(start + 1)
        };
        delta[(start as usize).min(n)] += i128::from(size);
        delta[(end as usize).min(n)] -= i128::from(size);
        Ok(())
    };
    let mut seen = constant_values(func, weights);
    for &arg in func.args().iter().filter(|a| root.contains_key(a)) {
        if seen.insert(arg) {
            add(arg, 0)?;
        }
    }
    for &i in order {
        let op = graph.ops[i];
        let step = steps.step_of[&op];
        for &r in &func.op(op).results {
            if root.contains_key(&r) && seen.insert(r) {
                add(r, step)?;
            }
        }
    }
    let mut running = 0i128;
    Ok(delta[..n]
        .iter()
        .map(|d| {
            running += d;
            u64::try_from(running).unwrap_or(0)
        })
        .collect())
}

/// The values computed from weights alone: weights, and the results of every op (in model
/// order) that reads at least one value, reads only such values (or `none`), and draws no
/// random numbers. Persistent state is no constant: a training step changes it.
pub(super) fn constant_values(func: &Function, weights: &WeightStore) -> HashSet<ValueId> {
    let entry = func.entry_block();
    let mut constant = HashSet::new();
    for &op in func.layout().block_ops(entry) {
        let data = func.op(op);
        let is_constant = match data.opcode {
            Opcode::Weight | Opcode::None => true,
            Opcode::Return => false,
            _ => {
                !data.operands.is_empty()
                    && data.operands.iter().all(|v| constant.contains(v))
                    && !is_random(func, weights, op)
            }
        };
        if is_constant {
            constant.extend(data.results.iter().copied());
        }
    }
    constant
}

/// Live bytes at each of `n_steps` steps (scratch included), and the step with the most
/// (the earliest on ties).
pub(super) fn live_bytes(
    buffers: &[PlannedBuffer],
    scratch: &[PlannedScratch],
    n_steps: u64,
) -> (Vec<u64>, u64) {
    let mut live_bytes = live_profile(buffers, n_steps);
    for s in scratch {
        if let Some(live) = live_bytes.get_mut(s.step as usize) {
            *live += s.size;
        }
    }
    let peak_step = live_bytes
        .iter()
        .enumerate()
        .max_by_key(|&(i, &b)| (b, std::cmp::Reverse(i)))
        .map_or(0, |(i, _)| i as u64);
    (live_bytes, peak_step)
}

/// Live bytes at each step: each group of shared bytes (an owner with its views and in-place
/// successors) counts its owner's size from the owner's first step to the group's last.
fn live_profile(buffers: &[PlannedBuffer], n_steps: u64) -> Vec<u64> {
    // A view or in-place buffer comes after the buffer it shares, so one pass finds roots.
    let mut root: Vec<usize> = Vec::with_capacity(buffers.len());
    for (i, b) in buffers.iter().enumerate() {
        let parent = match b.kind {
            PlannedKind::View { base, .. } => Some(base),
            PlannedKind::InPlace { input } => Some(input),
            PlannedKind::Input | PlannedKind::Owned => None,
        };
        root.push(parent.filter(|&p| p < i).map_or(i, |p| root[p]));
    }
    let mut group_end: Vec<u64> = buffers.iter().map(|b| b.end).collect();
    for (i, b) in buffers.iter().enumerate() {
        group_end[root[i]] = group_end[root[i]].max(b.end);
    }
    let len = n_steps as usize + 2;
    let mut delta = vec![0i128; len + 1];
    for (i, b) in buffers.iter().enumerate() {
        if root[i] != i {
            continue;
        }
        let start = (b.start as usize).min(len);
        let end = (group_end[i] as usize).min(len);
        delta[start] += i128::from(b.size);
        delta[end] -= i128::from(b.size);
    }
    let mut live = Vec::with_capacity(len);
    let mut running = 0i128;
    for d in &delta[..len] {
        running += d;
        live.push(u64::try_from(running).unwrap_or(0));
    }
    live
}
