//! Fuzzes the whole pipeline from ONNX bytes (see `memc_fuzz::targets::compile_onnx`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| memc_fuzz::targets::compile_onnx(data));
