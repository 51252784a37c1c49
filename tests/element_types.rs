//! Sub-byte element types end to end: `tests/onnx/fixtures/sub_byte/` (int4 and uint2 weights
//! read by Cast and by both DequantizeLinear forms, a uint2 graph input, an int4 graph output;
//! expected outputs from onnx's reference evaluator) compiled, written as a plan file, run by
//! the runtime through the CPU backend and by the reference backend, through the node-test
//! harness. Sub-byte elements are one per byte in the arena and the runtime's tensors, and
//! packed two or four per byte in the model's weights: the plan holds the int4 weight both
//! ways (packed for the in-place 4-bit DequantizeLinear, unpacked for Cast) and the uint2
//! weight unpacked.

mod common;
#[path = "common/node_harness.rs"]
mod node_harness;

use common::root;
use memc_codegen::Scalar;
use node_harness::{run_test, Status, NODE_TESTS};

#[test]
fn sub_byte_weights_inputs_and_outputs_match_onnx_reference() {
    let dir = root().join("tests/onnx/fixtures/sub_byte");
    let scratch = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("element_types");
    std::fs::create_dir_all(&scratch).expect("the target tmpdir is writable");
    let (status, by_reference) = run_test(&dir, &scratch, NODE_TESTS);
    assert_eq!(status, Status::Pass);
    assert!(by_reference, "the reference backend ran it too");

    let options = memc::compile::CompileOptions {
        lower: true,
        ..Default::default()
    };
    let compiled = memc::compile::compile(&dir.join("model.onnx"), &options)
        .unwrap_or_else(|d| panic!("compile: {}", d.message));
    let program = compiled.program.expect("a program");
    let slot = |name: &str, unpacked: Option<Scalar>| {
        program
            .weights
            .iter()
            .find(|s| s.name == name && s.unpacked == unpacked)
            .map(|s| s.byte_size)
    };
    // Five int4 elements: three packed bytes, five unpacked ones.
    assert_eq!(slot("w4", None), Some(3));
    assert_eq!(slot("w4", Some(Scalar::I4)), Some(5));
    assert_eq!(slot("w2", Some(Scalar::U2)), Some(5));
    let output = |name: &str| program.outputs.iter().find(|io| io.name == name);
    let y = output("y_int4").expect("the int4 output");
    assert_eq!((y.elem, y.byte_size()), (Scalar::I4, 5));
}
