//! `--memory-budget` and `--recompute` for the CLI and library users: the parsers of
//! `memc_passes::remat::config`, with a type clap takes as one value.

pub use memc_passes::remat::config::{parse_budget, Budget, ConfigEntry};

/// The entries of one `--recompute` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recompute(pub Vec<ConfigEntry>);

/// Parses `--recompute Gelu+:1:-1,...`.
pub fn parse_recompute(text: &str) -> Result<Recompute, String> {
    memc_passes::remat::config::parse_recompute(text).map(Recompute)
}
