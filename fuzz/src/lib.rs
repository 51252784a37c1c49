//! memc's fuzz targets as a library: the cargo-fuzz binaries in `fuzz_targets/` each call one
//! function of [`targets`], which the root crate's `tests/fuzz_corpus.rs` also includes to
//! replay the committed corpus on stable Rust.

pub mod targets;
