//! Elementwise ops and their fusion. (Being written.)

use super::{LowerCtx, LowerResult};
use memc_ir::OpId;
use std::collections::HashMap;

/// An op's part in a fused elementwise chain.
pub enum ChainRole {
    /// Fused into a later op of its chain: no kernel at this step.
    Inner,
    /// The chain's last op: its step runs the whole chain (ops in schedule order).
    Last(Vec<OpId>),
}

/// The fused chains of the function: every op in a chain of two or more has a role.
pub fn chains(ctx: &LowerCtx) -> HashMap<OpId, ChainRole> {
    let _ = ctx;
    HashMap::new()
}

/// Lowers a fused chain into one kernel.
pub fn lower_chain(ctx: &LowerCtx, chain: &[OpId]) -> LowerResult {
    let _ = (ctx, chain);
    Err(super::unsupported("fusion is not written yet"))
}

pub fn lower(ctx: &LowerCtx, op: OpId) -> Option<LowerResult> {
    let _ = (ctx, op);
    None
}
