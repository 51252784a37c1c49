//! Fuzzes the IR text parser and printer (see `memc_fuzz::targets::parse_ir`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| memc_fuzz::targets::parse_ir(data));
