//! Fuzzes `.npy` reading (see `memc_fuzz::targets::read_npy`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| memc_fuzz::targets::read_npy(data));
