//! memc-passes: the passes that rewrite memc's IR, and the pass manager that runs them.
//!
//! - [`manager`]: the [`Pass`] trait, the registry of passes by name ([`registered_passes`]),
//!   pipeline parsing ([`parse_pipeline`], `canonicalize,cse,dce`) and the [`PassManager`],
//!   which verifies, dumps and times a pipeline run.
//! - [`canonicalize`]: local folds: bypasses ops that do nothing and merges chains of
//!   Reshape and of Transpose.
//! - [`cse`]: merges pure ops that compute the same value, respecting region scopes.
//! - [`dce`]: removes pure ops whose results are unused.
//! - [`fold_known`]: replaces results whose values are known at compile time (`Shape`, `Size`
//!   and the small integer computations on them) by constant weights.
//! - [`shape_infer`]: refines value types from shape functions and known shape values.
//! - [`egraph`]: equality saturation with egg: fuses DequantizeLinear + MatMul/Gemm into
//!   `memc.matmul_nbits` and folds Transposes and bias Adds, extracting by bytes materialized.
//! - [`memory`]: memory planning on the IR, one module per stage (bufferize, schedule,
//!   liveness, assign, check), run in order by [`memory::plan_function_with_scratch`].
//! - [`plan`]: the IR-independent planner core: sizes, live ranges and alias/in-place
//!   constraints in, offsets out.
//! - [`validate`]: the independent plan checker every plan passes before it is returned.
//!
//! What the crate guarantees: every pass takes verified IR to verified IR, and never panics on
//! verified IR. The manager checks the first half after each pass (unless told not to) and
//! reports a failure as a bug in memc. A pass replaces a value only by a value of exactly its
//! type, so function signatures and the types users see never change, except that
//! `shape-infer` refines types (only ever making them more precise). Passes never reorder
//! ops; erased ops keep their handles as unplaced tombstones, as `memc_ir` specifies.

pub mod accumulate;
pub mod canonicalize;
pub mod cse;
pub mod dce;
pub mod egraph;
pub mod fold_bn;
pub mod fold_known;
pub mod manager;
pub mod memory;
pub mod plan;
pub mod remat;
pub mod shape_infer;
pub mod validate;

mod rewrite;
#[cfg(test)]
mod test_util;

pub use accumulate::{accumulate_into_state, AccumulateIntoState};
pub use canonicalize::{canonicalize_function, Canonicalize};
pub use cse::{eliminate_common_subexpressions, Cse};
pub use dce::{eliminate_dead_ops, Dce};
pub use egraph::Egraph;
pub use fold_bn::FoldBatchNorm;
pub use fold_known::{fold_known_values, FoldKnown};
pub use manager::{
    parse_pipeline, registered_passes, Pass, PassError, PassManager, PassReport, VerifyFn,
};
pub use shape_infer::ShapeInfer;
