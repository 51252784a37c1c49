//! Where a training step's memory goes: the part of `memc compile --report` (and of the plan
//! JSON) that only training graphs have.
//!
//! A training step is a function with persistent state (`memc_ir::state`). Its ops split in
//! two: the **forward** ops are those the step's non-gradient outputs (the loss) depend on;
//! every other op is **backward** (gradients, their shape computations, the accumulators). The
//! forward/backward boundary is the step of the first backward op that reads a value a forward
//! op made (backward ops that only compute constants may be scheduled before it).
//!
//! Memory is then sorted the way users read it (and onnxruntime's memory optimizer prints it):
//! - **parameters** and **gradient buffers**: the persistent state, outside the arena;
//! - **kept for backward**: arena allocations made in the forward pass (or graph inputs) that a
//!   backward op reads, so they stay live across the boundary; each with its bytes, the
//!   symbolic size formula in the model's dims, the forward op that made it and the backward op
//!   that reads it last. These are what rematerialization can cut;
//! - **transient**: every other arena allocation;
//! - **scratch**: the ops' working memory.
//!
//! Guarantees: the split reads only the function and the memory plan; the kept-for-backward
//! bytes and the transient bytes at the peak step add up, with the scratch live there, to the
//! live bytes the plan reports at that step. [`TrainingMemory`] serializes as the plan JSON's
//! `training` object, and the section is rendered from that object alone.

use super::{buffer_formula, human_bytes, owners, MemoryReport};
use memc_ir::{state, Function, OpId, Opcode, ValueId};
use memc_passes::memory::MemoryPlan;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// One allocation kept live from the forward pass into the backward pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    pub name: String,
    pub bytes: u64,
    /// The size as a formula of the symbolic dims (`1024*batch*seq`).
    pub formula: String,
    /// The forward op that made it (`input` for a graph input).
    pub producer: String,
    /// The backward op that reads it last, in schedule order.
    pub last_reader: String,
    /// The step range during which its bytes are in use.
    pub start: u64,
    pub end: u64,
}

/// The training breakdown of one memory plan: the plan JSON's `training` object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainingMemory {
    pub parameters: usize,
    pub parameter_bytes: u64,
    pub gradient_buffers: usize,
    pub gradient_bytes: u64,
    /// The step of the first backward op.
    pub boundary_step: u64,
    #[serde(rename = "kept_for_backward_bytes")]
    pub kept_bytes: u64,
    pub peak: PeakSplit,
    /// Largest first.
    #[serde(rename = "kept_for_backward")]
    pub kept: Vec<Kept>,
}

/// The live bytes at the peak step, by what they are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeakSplit {
    pub step: u64,
    pub kept_for_backward: u64,
    pub transient: u64,
    pub scratch: u64,
}

fn op_label(func: &Function, op: OpId) -> String {
    let data = func.op(op);
    match &data.loc {
        Some(loc) => format!("{} \"{loc}\"", data.opcode.name()),
        None => data.opcode.name().to_string(),
    }
}

/// The forward ops of a training step: those the outputs other than the accumulators' flags
/// depend on (constants excluded).
fn forward_ops(func: &Function) -> HashSet<OpId> {
    let entry = func.entry_block();
    let Some(&ret) = func.layout().block_ops(entry).last() else {
        return HashSet::new();
    };
    let mut stack: Vec<ValueId> = func
        .op(ret)
        .operands
        .iter()
        .copied()
        .filter(|&v| {
            func.defining_op(v)
                .is_none_or(|op| !state::is_accumulator(func.op(op).opcode))
        })
        .collect();
    let mut forward = HashSet::new();
    while let Some(v) = stack.pop() {
        let Some(op) = func.defining_op(v) else {
            continue;
        };
        // Constants belong to neither pass.
        if matches!(func.op(op).opcode, Opcode::Weight | Opcode::None) {
            continue;
        }
        if forward.insert(op) {
            stack.extend(func.op(op).operands.iter().copied());
        }
    }
    forward
}

/// The training breakdown of `plan` for `func` (the planned function), or `None` when `func`
/// is not a training step. `symbolic` is the function before `--dim` bindings, for formulas.
pub fn training_memory(
    func: &Function,
    plan: &MemoryPlan,
    symbolic: Option<&Function>,
) -> Option<TrainingMemory> {
    if !state::has_state(func) {
        return None;
    }
    let mut memory = TrainingMemory {
        parameters: 0,
        parameter_bytes: 0,
        gradient_buffers: 0,
        gradient_bytes: 0,
        boundary_step: 0,
        kept_bytes: 0,
        peak: PeakSplit {
            step: plan.peak_step,
            kept_for_backward: 0,
            transient: 0,
            scratch: 0,
        },
        kept: Vec::new(),
    };
    for (i, &arg) in func.args().iter().enumerate() {
        let bytes = func
            .value_type(arg)
            .tensor()
            .and_then(|t| t.static_arena_bytes())
            .unwrap_or(0);
        match state::arg_state(func, i) {
            Some(state::StateKind::Parameter) => {
                memory.parameters += 1;
                memory.parameter_bytes += bytes;
            }
            Some(state::StateKind::Gradient) => {
                memory.gradient_buffers += 1;
                memory.gradient_bytes += bytes;
            }
            None => {}
        }
    }
    let forward = forward_ops(func);
    // Steps: 0 holds the inputs, op `i` of the schedule runs at step `i + 1`.
    let step_of: HashMap<OpId, u64> = plan
        .schedule
        .iter()
        .enumerate()
        .map(|(i, &op)| (op, i as u64 + 1))
        .collect();
    // The boundary: the first backward op that reads what a forward op made (backward ops
    // that only compute constants or shapes may be scheduled earlier).
    let reads_forward = |op: &OpId| {
        func.op(*op)
            .operands
            .iter()
            .any(|&v| func.defining_op(v).is_some_and(|d| forward.contains(&d)))
    };
    let backward: Vec<OpId> = plan
        .schedule
        .iter()
        .copied()
        .filter(|op| !forward.contains(op))
        .collect();
    memory.boundary_step = backward
        .iter()
        .find(|op| reads_forward(op))
        .or(backward.first())
        .and_then(|op| step_of.get(op).copied())
        .unwrap_or(plan.schedule.len() as u64 + 1);
    // The last backward reader of each value.
    let mut last_backward: HashMap<ValueId, OpId> = HashMap::new();
    for &op in plan.schedule.iter().filter(|op| !forward.contains(op)) {
        for &v in &func.op(op).operands {
            last_backward.insert(v, op);
        }
    }
    let owner = owners(plan);
    // Owner allocation -> (latest backward reader, its step).
    let mut kept: HashMap<usize, (OpId, u64)> = HashMap::new();
    for (i, b) in plan.buffers.iter().enumerate() {
        let made_forward = func
            .defining_op(b.value)
            .is_none_or(|op| forward.contains(&op));
        let Some(&reader) = last_backward.get(&b.value) else {
            continue;
        };
        if !made_forward {
            continue;
        }
        let step = step_of.get(&reader).copied().unwrap_or(0);
        let entry = kept.entry(owner[i]).or_insert((reader, step));
        if step > entry.1 {
            *entry = (reader, step);
        }
    }
    let mut group_end: Vec<u64> = plan.buffers.iter().map(|b| b.end).collect();
    for (i, b) in plan.buffers.iter().enumerate() {
        group_end[owner[i]] = group_end[owner[i]].max(b.end);
    }
    for (&i, &(reader, _)) in &kept {
        let b = &plan.buffers[i];
        let formula = buffer_formula(b, symbolic);
        memory.kept.push(Kept {
            name: b.name.clone(),
            bytes: b.size,
            formula,
            producer: b.producer.clone(),
            last_reader: op_label(func, reader),
            start: b.start,
            end: group_end[i],
        });
    }
    memory
        .kept
        .sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.start.cmp(&b.start)));
    memory.kept_bytes = memory.kept.iter().map(|k| k.bytes).sum();
    let peak = plan.peak_step;
    for (i, b) in plan.buffers.iter().enumerate() {
        if owner[i] != i || !(b.start <= peak && peak < group_end[i]) {
            continue;
        }
        if kept.contains_key(&i) {
            memory.peak.kept_for_backward += b.size;
        } else {
            memory.peak.transient += b.size;
        }
    }
    memory.peak.scratch = plan
        .scratch
        .iter()
        .filter(|s| s.step == peak)
        .map(|s| s.size)
        .sum();
    Some(memory)
}

/// The report's training section, when the plan is a training step (one of
/// [`super::SECTIONS`]).
pub fn section(report: &MemoryReport) -> Option<String> {
    report
        .training
        .as_ref()
        .map(|memory| table(memory, report.arena_size))
}

/// The breakdown as the report's text section; `arena` is the plan's arena size.
pub fn table(memory: &TrainingMemory, arena: u64) -> String {
    let mut out = String::new();
    let share = |bytes: u64| {
        if arena == 0 {
            "-".to_string()
        } else {
            format!("{:.1}%", 100.0 * bytes as f64 / arena as f64)
        }
    };
    let _ = writeln!(
        out,
        "  training step (forward/backward boundary at step {}):",
        memory.boundary_step
    );
    let _ = writeln!(
        out,
        "    parameters                {:>12}  {} tensors (state, outside the arena)",
        human_bytes(memory.parameter_bytes),
        memory.parameters
    );
    let _ = writeln!(
        out,
        "    gradient buffers          {:>12}  {} tensors (state, updated in place)",
        human_bytes(memory.gradient_bytes),
        memory.gradient_buffers
    );
    let _ = writeln!(
        out,
        "    kept for backward         {:>12}  {} allocations, {} of the arena",
        human_bytes(memory.kept_bytes),
        memory.kept.len(),
        share(memory.kept_bytes)
    );
    let _ = writeln!(
        out,
        "    at the peak (step {}): kept for backward {}, transient {}, scratch {}",
        memory.peak.step,
        human_bytes(memory.peak.kept_for_backward),
        human_bytes(memory.peak.transient),
        human_bytes(memory.peak.scratch)
    );
    let _ = writeln!(
        out,
        "    step peak memory          {:>12}  arena {} + state {}",
        human_bytes(arena + memory.parameter_bytes + memory.gradient_bytes),
        human_bytes(arena),
        human_bytes(memory.parameter_bytes + memory.gradient_bytes)
    );
    let _ = writeln!(out, "    kept for backward, largest first:");
    let _ = writeln!(
        out,
        "      {:<28} {:>11}  {:<24} {:<36} {}",
        "value", "size", "size formula", "made by (forward)", "read last by (backward)"
    );
    for k in &memory.kept {
        let _ = writeln!(
            out,
            "      {:<28} {:>11}  {:<24} {:<36} {}",
            super::clip(&k.name, 28),
            human_bytes(k.bytes),
            super::clip(&k.formula, 24),
            super::clip(&k.producer, 36),
            k.last_reader
        );
    }
    out
}
