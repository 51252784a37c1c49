//! The last stage: the plan, re-checked by the independent validator (`crate::validate`).
//!
//! It turns a [`MemoryPlan`] into the validator's input (buffers with their kinds and
//! alignments, scratch, and the accesses of every step) and reports a failure as a memc bug.

use super::{MemoryPlan, PlannedKind, ALIGN};
use crate::validate::{validate, Access, BufferKind, CheckedBuffer, PlanToCheck};
use memc_ir::{Diagnostic, Function, OpId, ValueId};
use std::collections::HashMap;

/// Re-checks the plan with the independent validator; a failure is a memc bug.
pub(super) fn check(func: &Function, plan: &MemoryPlan) -> Result<(), Diagnostic> {
    let buffer_of: HashMap<ValueId, usize> = plan
        .buffers
        .iter()
        .enumerate()
        .map(|(i, b)| (b.value, i))
        .collect();
    let mut checked: Vec<CheckedBuffer> = plan
        .buffers
        .iter()
        .map(|b| CheckedBuffer {
            name: b.name.clone(),
            offset: b.offset,
            size: b.size,
            start: b.start,
            end: b.end,
            // Allocations are cache-line aligned; a view only needs its element alignment.
            align: match b.kind {
                PlannedKind::View { .. } => b.ty.elem.arena_bytes(),
                _ => ALIGN,
            },
            kind: match b.kind {
                PlannedKind::View { base, offset } => BufferKind::View { base, offset },
                PlannedKind::InPlace { input } => BufferKind::InPlace { input },
                PlannedKind::Input | PlannedKind::Owned => BufferKind::Owned,
            },
            is_input: b.kind == PlannedKind::Input,
        })
        .collect();
    // Scratch buffers follow the value buffers; the op at their step writes them.
    let mut scratch_of: HashMap<OpId, Vec<usize>> = HashMap::new();
    for s in &plan.scratch {
        scratch_of.entry(s.op).or_default().push(checked.len());
        checked.push(CheckedBuffer {
            name: s.name.clone(),
            offset: s.offset,
            size: s.size,
            start: s.step,
            end: s.step + 1,
            align: ALIGN,
            kind: BufferKind::Scratch,
            is_input: false,
        });
    }
    let mut accesses = Vec::new();
    let last_step = plan.schedule.len() as u64 + 1;
    let steps = plan
        .schedule
        .iter()
        .enumerate()
        .map(|(i, &op)| (op, i as u64 + 1))
        .chain(
            // The return reads the outputs after the last step (the schedule may be empty when
            // every output is an input or a weight).
            func.layout()
                .block_ops(func.entry_block())
                .last()
                .map(|&ret| (ret, last_step)),
        );
    for (op, step) in steps {
        let data = func.op(op);
        accesses.push(Access {
            step,
            op: data
                .loc
                .clone()
                .unwrap_or_else(|| data.opcode.name().to_string()),
            reads: data
                .operands
                .iter()
                .filter_map(|v| buffer_of.get(v).copied())
                .collect(),
            writes: data
                .results
                .iter()
                .filter_map(|v| buffer_of.get(v).copied())
                .chain(scratch_of.get(&op).into_iter().flatten().copied())
                .collect(),
            // The validator's in-place rule: only ops that may write over an operand.
            elementwise: data.opcode.def().is_in_place(),
        });
    }
    let to_check = PlanToCheck {
        arena_size: plan.arena_size,
        buffers: checked,
        accesses,
    };
    validate(&to_check).map_err(|violations| {
        let mut diag = Diagnostic::error(
            "internal error: the memory plan fails validation; this is a bug in memc",
        );
        for v in violations.iter().take(5) {
            diag = diag.with_note(v.to_string());
        }
        diag
    })
}
