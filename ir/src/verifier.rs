//! The verifier (being written).
use crate::{Diagnostic, Module};

/// Checks every invariant; returns all violations found.
pub fn verify_module(module: &Module) -> Result<(), Vec<Diagnostic>> {
    let _ = module;
    Ok(())
}
