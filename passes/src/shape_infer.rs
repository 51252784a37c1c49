//! The `shape-infer` pass: refines every value type from the op table's shape functions and
//! the known values of shape computations, over the whole module (see [`memc_ir::infer`]).
//!
//! What the pass guarantees:
//! - Types only get more precise: a written static dim stays, a symbolic or unknown dim may
//!   become static or symbolic; function result types follow the returned values.
//! - With bindings (`--dim batch=4`), every bound symbol is replaced by its value first, so
//!   sizes computed from it become static.
//! - An op whose operands cannot be combined (once shapes are known) is reported with the op's
//!   location as [`PassError::Rejected`]; the pass never panics.

use crate::manager::{Pass, PassError};
use memc_ir::Module;
use std::collections::HashMap;

/// The shape inference pass; see the module doc.
#[derive(Clone, Debug, Default)]
pub struct ShapeInfer {
    bindings: HashMap<String, u64>,
}

impl ShapeInfer {
    /// Shape inference with every symbol left symbolic.
    pub fn new() -> ShapeInfer {
        ShapeInfer::default()
    }

    /// Shape inference that first binds symbols to sizes (`memc compile --dim batch=4`).
    pub fn with_bindings(bindings: HashMap<String, u64>) -> ShapeInfer {
        ShapeInfer { bindings }
    }
}

impl Pass for ShapeInfer {
    fn name(&self) -> &'static str {
        "shape-infer"
    }

    fn description(&self) -> &'static str {
        "infers result types, with symbolic dims, from operand types, attributes and the values \
         of shape computations"
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        memc_ir::infer_module(module, &self.bindings).map_err(|diagnostics| PassError::Rejected {
            pass: self.name(),
            diagnostics,
        })
    }
}
