//! Fuzzes the ONNX importer: any bytes must give a module or an error, never a panic, a hang
//! or a crash. Seed the corpus with `tests/onnx/fixtures` and `tests/onnx/bad`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = memc_ir::onnx::import_bytes(bytes::Bytes::copy_from_slice(data), None);
});
