//! Bufferization: which values share bytes (views and in-place results), and one arena
//! buffer per value with its live range and its sharing constraint.
//!
//! - **Weights** (`memc.weight` results, and views of them) get no buffer: the runtime reads
//!   them from the memory-mapped model. Nor does **persistent state** (arguments marked
//!   `memc.state`, a training step's parameters and gradient buffers, and views of them): it
//!   lives in the program's state region, outside the arena, across runs.
//! - **Views** ([`view_of`]: reshapes, identities, inference Dropout, Transpose that only moves
//!   size-1 dims, Slice that cuts one contiguous run) alias their source's bytes at the view's
//!   byte offset (`Constraint::AliasOf`); a view keeps its base alive.
//! - **In-place**: an op with the `IN_PLACE` trait whose result has exactly the type of an
//!   operand that owns its bytes and dies at the op may write over it
//!   (`Constraint::MayShareWith`; the assignment decides).
//! - **Graph inputs** live from step 0; **graph outputs** until after the last step.
//! - **Scratch**: one buffer per op that asked for it, live over its step only.

use super::liveness::Steps;
use super::schedule::Graph;
use super::{op_label, scratch_names, static_bytes, value_name, ALIGN};
use crate::plan::{BufferSpec, Constraint};
use memc_ir::ops::view_of;
use memc_ir::state;
use memc_ir::{Diagnostic, ElemType, Function, OpId, TensorType, Type, ValueId, WeightStore};
use std::collections::HashMap;

/// The root value whose bytes a value uses (itself, or the source of its view chain), or
/// `None` for values outside the arena (weights, persistent state, `none`).
pub(super) fn root_values(
    func: &Function,
    weights: &WeightStore,
    ops: &[OpId],
) -> HashMap<ValueId, ValueId> {
    let mut root: HashMap<ValueId, ValueId> = HashMap::new();
    for &arg in func.args() {
        if state::value_state(func, arg).is_none() {
            root.insert(arg, arg);
        }
    }
    for &op in ops {
        let source = view_of(func, weights, op).map(|v| v.source);
        for &r in &func.op(op).results {
            match source.and_then(|s| root.get(&s).copied()) {
                Some(base) => root.insert(r, base),
                None if source.is_some() => None, // a view of a weight or state: outside the arena
                None => root.insert(r, r),
            };
        }
    }
    root
}

/// What a planned buffer holds.
#[derive(Copy, Clone)]
pub(super) enum Holds {
    Value(ValueId),
    /// The scratch memory of an op.
    Scratch(OpId),
}

pub(super) struct BufferInfo {
    pub name: String,
    pub holds: Holds,
    pub producer: String,
    pub ty: TensorType,
    pub is_input: bool,
    pub is_output: bool,
}

/// The buffers (with live ranges and constraints) for the ops in `order`, with the steps
/// liveness computed for that order. Scratch buffers come after every value's.
pub(super) fn buffers_for(
    func: &Function,
    weights: &WeightStore,
    graph: &Graph,
    order: &[usize],
    root: &HashMap<ValueId, ValueId>,
    steps: &Steps,
) -> Result<(Vec<BufferSpec>, Vec<BufferInfo>), Diagnostic> {
    let outputs: Vec<ValueId> = func.op(graph.ret).operands.clone();
    let Steps {
        step_of,
        last_use,
        last_step,
    } = steps;
    let last_step = *last_step;
    let mut specs = Vec::new();
    let mut infos = Vec::new();
    let mut buffer_of: HashMap<ValueId, usize> = HashMap::new();
    let add = |value: ValueId,
               start: u64,
               producer: String,
               constraint: Constraint,
               specs: &mut Vec<BufferSpec>,
               infos: &mut Vec<BufferInfo>,
               buffer_of: &mut HashMap<ValueId, usize>|
     -> Result<(), Diagnostic> {
        let size = static_bytes(func, value)?.unwrap_or(0);
        let is_output = outputs.contains(&value);
        let end = if is_output {
            last_step + 1
        } else {
            last_use
                .get(&value)
                .map_or(start + 1, |&u| u + 1)
                .max(start + 1)
        };
        let ty = func
            .value_type(value)
            .tensor()
            .cloned()
            .unwrap_or_else(|| TensorType::new(memc_ir::ElemType::U8, vec![]));
        buffer_of.insert(value, specs.len());
        // Allocations are cache-line aligned; a view only needs its element alignment.
        let align = match constraint {
            Constraint::AliasOf { .. } => ty.elem.arena_bytes(),
            _ => ALIGN,
        };
        specs.push(
            BufferSpec::new(size, start, end)
                .with_align(align)
                .with_constraint(constraint),
        );
        infos.push(BufferInfo {
            name: value_name(func, value),
            holds: Holds::Value(value),
            producer,
            ty,
            is_input: start == 0,
            is_output,
        });
        Ok(())
    };
    for &arg in func.args().iter().filter(|a| root.contains_key(a)) {
        add(
            arg,
            0,
            "input".to_string(),
            Constraint::None,
            &mut specs,
            &mut infos,
            &mut buffer_of,
        )?;
    }
    // Scratch buffers go after every value's, so value buffers keep their indices.
    let mut scratch_specs = Vec::new();
    let mut scratch_infos = Vec::new();
    for &i in order {
        let op = graph.ops[i];
        let step = step_of[&op];
        let data = func.op(op);
        let producer = op_label(func, op);
        if graph.scratch[i] > 0 {
            let (name, producer) = scratch_names(func, op);
            scratch_specs.push(BufferSpec::new(graph.scratch[i], step, step + 1).with_align(ALIGN));
            scratch_infos.push(BufferInfo {
                name,
                holds: Holds::Scratch(op),
                producer,
                ty: TensorType::with_shape(ElemType::U8, &[graph.scratch[i]]),
                is_input: false,
                is_output: false,
            });
        }
        let source = view_of(func, weights, op).map(|v| (v.source, v.byte_offset));
        for &r in &data.results {
            if !root.contains_key(&r) {
                continue; // a view of a weight or of state
            }
            let constraint =
                match source.and_then(|(s, offset)| Some((*buffer_of.get(&s)?, offset))) {
                    Some((base, offset)) => Constraint::AliasOf { base, offset },
                    None => in_place_candidate(
                        func, op, r, step, last_use, &buffer_of, root, &outputs, &specs,
                    ),
                };
            add(
                r,
                step,
                producer.clone(),
                constraint,
                &mut specs,
                &mut infos,
                &mut buffer_of,
            )?;
        }
    }
    // A view keeps its base alive: the base's range covers its views' (views come after
    // their bases, so one backward pass handles chains of views).
    for i in (0..specs.len()).rev() {
        if let Constraint::AliasOf { base, .. } = specs[i].constraint {
            specs[base].end = specs[base].end.max(specs[i].end);
        }
    }
    specs.extend(scratch_specs);
    infos.extend(scratch_infos);
    Ok((specs, infos))
}

/// `MayShareWith(x)` for an in-place capable op (the `IN_PLACE` trait) whose result has `x`'s exact type, where `x` owns
/// its bytes (not a view) and is last read at this step; of several such operands, the one
/// written last (the first of those on a tie). The CPU runs an elementwise kernel in place
/// over the result of the contraction just before it as that contraction's epilogue
/// (`memc-codegen`'s `cpu/fuse.rs`): ResNet's residual `Add` after a block's shortcut
/// convolution, which runs after the main path's, then runs inside the shortcut's product.
/// The sizes are equal, so the peak is the same either way.
#[allow(clippy::too_many_arguments)]
fn in_place_candidate(
    func: &Function,
    op: OpId,
    result: ValueId,
    step: u64,
    last_use: &HashMap<ValueId, u64>,
    buffer_of: &HashMap<ValueId, usize>,
    root: &HashMap<ValueId, ValueId>,
    outputs: &[ValueId],
    specs: &[BufferSpec],
) -> Constraint {
    if !func.op(op).opcode.def().is_in_place() {
        return Constraint::None;
    }
    let ty = func.value_type(result);
    func.op(op)
        .operands
        .iter()
        .filter(|&&x| {
            let owns = root.get(&x) == Some(&x);
            let dies_here = last_use.get(&x) == Some(&step) && !outputs.contains(&x);
            owns && dies_here && func.value_type(x) == ty && !matches!(ty, Type::None)
        })
        .filter_map(|x| buffer_of.get(x).copied())
        .rev()
        .max_by_key(|&b| specs[b].start)
        .map_or(Constraint::None, Constraint::MayShareWith)
}
