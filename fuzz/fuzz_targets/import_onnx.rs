//! Fuzzes the ONNX importer (see `memc_fuzz::targets::import_onnx`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| memc_fuzz::targets::import_onnx(data));
