//! Helpers shared by the codegen tests: hand-built kernels for the CPU backend tests
//! ([`kernels`]), and models compiled to programs and run through the CPU backend and the
//! reference backend ([`models`]). Each test binary uses part of them.

#![allow(dead_code)]

pub mod kernels;
pub mod models;
pub mod ptx;
pub mod rng;
