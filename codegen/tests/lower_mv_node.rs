//! The ONNX backend node tests of the movement and linalg ops, compiled to kernels and run
//! through the reference interpreter in `lower_mv_support::interp` (independent of the JIT).
//!
//! `MEMC_NODE_FILTER=substring` runs only the tests whose name contains it and prints each
//! outcome; without it every listed test runs and the outcomes must match `EXPECTED_FAILURES`.

mod lower_mv_support;

use lower_mv_support::{node_test_dir, run_node_test, Outcome};

fn panic_message(e: &Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Name prefixes of the node tests of the ops lowered in `movement.rs` and `linalg.rs`.
const PREFIXES: &[&str] = &[
    "test_reshape_",
    "test_flatten_",
    "test_squeeze",
    "test_unsqueeze_",
    "test_transpose_",
    "test_concat_",
    "test_split_",
    "test_slice",
    "test_gather_",
    "test_gathernd_",
    "test_expand_",
    "test_tile",
    "test_constant_pad",
    "test_edge_pad",
    "test_reflect_pad",
    "test_wrap_pad",
    "test_trilu",
    "test_tril",
    "test_triu",
    "test_range_",
    "test_constantofshape_",
    "test_shape",
    "test_size",
    "test_eyelike_",
    "test_depthtospace_",
    "test_spacetodepth",
    "test_resize_",
    "test_top_k",
    "test_identity",
    "test_matmul_",
    "test_gemm_",
    "test_conv_",
    "test_basic_conv_",
    "test_convtranspose",
    "test_maxpool_",
    "test_averagepool_",
    "test_globalaveragepool",
    "test_globalmaxpool",
    "test_dequantizelinear",
    "test_quantizelinear",
];

/// Node tests that do not pass, each with the reason. Everything else listed must pass.
const EXPECTED_FAILURES: &[(&str, &str)] = &[
    // Element types memc's importer or kernels do not have.
    (
        "test_dequantizelinear_e4m3fn",
        "float8 is not an element type memc imports",
    ),
    (
        "test_dequantizelinear_e4m3fn_float16",
        "float8 is not an element type memc imports",
    ),
    (
        "test_dequantizelinear_e4m3fn_zero_point",
        "float8 is not an element type memc imports",
    ),
    (
        "test_dequantizelinear_e5m2",
        "float8 is not an element type memc imports",
    ),
    (
        "test_dequantizelinear_float4e2m1",
        "float4 is not an element type memc imports",
    ),
    (
        "test_dequantizelinear_int2",
        "int2 is not an element type memc imports",
    ),
    (
        "test_dequantizelinear_uint2",
        "uint2 is not an element type memc imports",
    ),
    (
        "test_quantizelinear_e4m3fn",
        "float8 is not an element type memc imports",
    ),
    (
        "test_quantizelinear_e5m2",
        "float8 is not an element type memc imports",
    ),
    (
        "test_quantizelinear_float4e2m1",
        "float4 is not an element type memc imports",
    ),
    (
        "test_quantizelinear_int2",
        "int2 is not an element type memc imports",
    ),
    (
        "test_quantizelinear_uint2",
        "uint2 is not an element type memc imports",
    ),
    (
        "test_range_bfloat16_type_positive_delta",
        "bf16 has no kernel type",
    ),
    ("test_identity_opt", "optional values are not imported"),
    ("test_identity_sequence", "sequences are not imported"),
    // Ops memc does not import (the `_expanded` Range tests use Loop).
    (
        "test_range_bfloat16_type_positive_delta_expanded",
        "Loop is not supported",
    ),
    (
        "test_range_float16_type_positive_delta_expanded",
        "Loop is not supported",
    ),
    (
        "test_range_float_type_positive_delta_expanded",
        "Loop is not supported",
    ),
    (
        "test_range_int32_type_negative_delta_expanded",
        "Loop is not supported",
    ),
    (
        "test_split_to_sequence_1",
        "SplitToSequence is not supported",
    ),
    (
        "test_split_to_sequence_2",
        "SplitToSequence is not supported",
    ),
    (
        "test_split_to_sequence_nokeepdims",
        "SplitToSequence is not supported",
    ),
    // FIXME: a 4-bit graph input or output has no kernel element type, so neither the
    // program's I/O nor a lowering can address it.
    (
        "test_dequantizelinear_int4",
        "4-bit graph inputs are not addressable",
    ),
    (
        "test_dequantizelinear_uint4",
        "4-bit graph inputs are not addressable",
    ),
    (
        "test_quantizelinear_int4",
        "4-bit graph outputs are not addressable",
    ),
    (
        "test_quantizelinear_uint4",
        "4-bit graph outputs are not addressable",
    ),
    // The CPU backend has no f16 arithmetic.
    ("test_range_float16_type_positive_delta", "f16 arithmetic"),
];

#[test]
fn node_tests_of_movement_and_linalg_ops() {
    let Some(dir) = node_test_dir() else {
        println!("skipped: the ONNX backend node tests are not installed in .venv");
        return;
    };
    let filter = std::env::var("MEMC_NODE_FILTER").ok();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("the node test directory reads")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| PREFIXES.iter().any(|p| n.starts_with(p)))
        .filter(|n| filter.as_ref().is_none_or(|f| n.contains(f.as_str())))
        .collect();
    names.sort();
    let mut unexpected = Vec::new();
    let (mut passed, mut failed) = (0, 0);
    for name in &names {
        let path = dir.join(name);
        let outcome = std::panic::catch_unwind(|| run_node_test(&path))
            .unwrap_or_else(|e| Outcome::Panic(panic_message(&e)));
        let expected_failure = EXPECTED_FAILURES.iter().find(|(n, _)| n == name);
        match (&outcome, expected_failure) {
            (Outcome::Pass, None) => passed += 1,
            (Outcome::Pass, Some(_)) => unexpected.push(format!(
                "{name}: passes now; drop it from EXPECTED_FAILURES"
            )),
            (_, Some(_)) => failed += 1,
            (other, None) => unexpected.push(format!("{name}: {other:?}")),
        }
        if filter.is_some() {
            println!("{name}: {outcome:?}");
        }
    }
    println!(
        "{passed} passed, {failed} expected failures, {} unexpected",
        unexpected.len()
    );
    assert!(
        unexpected.is_empty(),
        "{} unexpected outcomes:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}
