//! Fuzzes plan-file loading, validation and running (see `memc_fuzz::targets::plan_file`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| memc_fuzz::targets::plan_file(data));
