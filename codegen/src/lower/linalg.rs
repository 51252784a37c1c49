//! (Being written.)

use super::{LowerCtx, LowerResult};
use memc_ir::OpId;

pub fn lower(ctx: &LowerCtx, op: OpId) -> Option<LowerResult> {
    let _ = (ctx, op);
    None
}
