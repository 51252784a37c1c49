//! Assignment: offsets for the chosen schedule's buffers, by the IR-independent planner core
//! (`crate::plan`), turned back into the IR's planned buffers and scratch.
//!
//! The core gets each buffer's size, live range, alignment and sharing constraint; it tries
//! several heuristics and keeps the best ([`plan`]). An error from it means memc built a
//! problem it rejects: a bug in memc.

use super::bufferize::{BufferInfo, Holds};
use super::{PlannedBuffer, PlannedKind, PlannedScratch};
use crate::plan::{load_with_sharing, plan, BufferSpec, Constraint, PlanOptions};
use memc_ir::Diagnostic;

/// The planner core's rejection of a problem memc built: a bug in memc.
fn rejected(e: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::error(format!(
        "internal error: the planner rejected its own problem; this is a bug in memc: {e}"
    ))
}

/// LOAD of a set of buffers with views and in-place taken: what the schedulers compare.
pub(super) fn load(specs: &[BufferSpec]) -> Result<u64, Diagnostic> {
    let (load, _) = load_with_sharing(specs).map_err(rejected)?;
    Ok(load)
}

/// The assigned buffers of one function.
pub(super) struct Assigned {
    pub arena_size: u64,
    pub load: u64,
    pub load_without_sharing: u64,
    pub strategy: &'static str,
    /// The value buffers, in the order of `specs`.
    pub buffers: Vec<PlannedBuffer>,
    /// The scratch buffers, in the order of `specs`.
    pub scratch: Vec<PlannedScratch>,
}

/// Assigns offsets to `specs` (described by `infos`, one each).
pub(super) fn assign(
    specs: &[BufferSpec],
    infos: &[BufferInfo],
    options: &PlanOptions,
) -> Result<Assigned, Diagnostic> {
    let result = plan(specs, options).map_err(rejected)?;
    let mut buffers = Vec::with_capacity(specs.len());
    let mut scratch = Vec::new();
    for (i, (spec, info)) in specs.iter().zip(infos).enumerate() {
        let value = match info.holds {
            Holds::Value(value) => value,
            Holds::Scratch(op) => {
                scratch.push(PlannedScratch {
                    op,
                    name: info.name.clone(),
                    producer: info.producer.clone(),
                    offset: result.offsets[i],
                    size: spec.size,
                    step: spec.start,
                });
                continue;
            }
        };
        let kind = match (info.is_input, spec.constraint) {
            (true, _) => PlannedKind::Input,
            (false, Constraint::AliasOf { base, offset }) => PlannedKind::View { base, offset },
            (false, Constraint::MayShareWith(input)) if result.in_place[i] => {
                PlannedKind::InPlace { input }
            }
            _ => PlannedKind::Owned,
        };
        buffers.push(PlannedBuffer {
            name: info.name.clone(),
            value,
            offset: result.offsets[i],
            size: spec.size,
            start: spec.start,
            end: spec.end,
            producer: info.producer.clone(),
            kind,
            ty: info.ty.clone(),
            is_output: info.is_output,
        });
    }
    Ok(Assigned {
        arena_size: result.arena_size,
        load: result.load,
        load_without_sharing: result.load_without_sharing,
        strategy: result.strategy,
        buffers,
        scratch,
    })
}
