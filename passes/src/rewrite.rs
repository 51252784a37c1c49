//! Small helpers shared by the rewriting passes.

use memc_ir::{Dim, Function, OpId, ValueId};
use std::collections::HashMap;

/// Rewrites the operands of `op` through `replacements`.
///
/// The passes record a replacement when they remove a value, and resolve each op's operands
/// before looking at it. Every value in a map is already resolved when it is inserted, so one
/// lookup suffices.
pub(crate) fn resolve_operands(
    func: &mut Function,
    op: OpId,
    replacements: &HashMap<ValueId, ValueId>,
) {
    if replacements.is_empty() {
        return;
    }
    for operand in &mut func.op_mut(op).operands {
        if let Some(&replacement) = replacements.get(operand) {
            *operand = replacement;
        }
    }
}

/// Whether the type of `value` has a dim nobody named, which equals no other dim.
pub(crate) fn has_unknown_dim(func: &Function, value: ValueId) -> bool {
    func.value_type(value)
        .tensor()
        .is_none_or(|t| t.dims.contains(&Dim::Unknown))
}
