//! The CPU backend's epilogue fusion (`cpu/fuse.rs`): a convolution's bias written into its
//! result just before the product, and a residual Add and a ReLU or Clip of the result in place
//! just after it, run inside the contraction (the direct convolution's stores, the GEMM's
//! finished blocks), and those loop kernels do nothing. Each case compiles a small function
//! with constant weights as `memc compile` would, checks which kernels were fused, and
//! compares the CPU backend with the reference interpreter (which runs both kernels), on
//! inputs with NaN, infinities and values on both sides of the bounds.

mod common;

use common::models::{
    assert_backends_agree, compile_module, f32_bytes, run_cpu, run_reference, weights_section,
};
use memc_codegen::cpu::CpuProgram;
use std::collections::HashMap;

/// Deterministic values in [-4, 4), with NaN, infinities and exact bounds sprinkled in.
fn values(n: usize, salt: u64, specials: bool) -> Vec<f32> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ salt;
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let v = ((state >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0) as f32;
            match (specials, i % 97) {
                (true, 5) => f32::NAN,
                (true, 17) => f32::INFINITY,
                (true, 41) => f32::NEG_INFINITY,
                (true, 60) => 6.0,
                (true, 70) => -0.0,
                _ => v,
            }
        })
        .collect()
}

/// Compiles `body` (text IR of `func.func @f(%x: x_ty) -> ...`) whose constant weights are
/// `weights` (name, type, values), runs it on the CPU and in the reference interpreter on
/// `x`, and returns how many kernels the CPU fused.
fn check(signature: &str, body: &str, weights: &[(&str, &str, Vec<f32>)], x: Vec<f32>) -> usize {
    let defs: String = weights
        .iter()
        .map(|(name, ty, _)| {
            format!(
                "  %{name} = \"memc.weight\"() {{value = dense_resource<\"{name}\"> : {ty}}} : () -> {ty}\n"
            )
        })
        .collect();
    let text = format!("func.func @f{signature} {{\n{defs}{body}}}\n");
    let mut module = memc_ir::parse_module(&text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
    let mut store = memc_ir::WeightStore::new();
    for (_, weight) in module.weights.iter() {
        let values = &weights
            .iter()
            .find(|(name, _, _)| *name == weight.name())
            .expect("a weight of the test")
            .2;
        store
            .insert(
                weight.name(),
                weight.ty().clone(),
                memc_ir::WeightBytes::Owned(f32_bytes(values).into()),
            )
            .expect("the weight is well-formed");
    }
    module.weights = store;
    memc_ir::infer::infer_module(&mut module, &HashMap::new()).expect("shapes infer");
    let compiled = compile_module(module).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let program = &compiled.program;
    let weights = weights_section(program, &compiled.module.weights);
    let inputs = vec![f32_bytes(&x)];
    let cpu = run_cpu(program, &weights, &inputs);
    let reference = run_reference(program, &weights, &inputs);
    assert_backends_agree(program, &cpu, &reference);
    let kernels: Vec<_> = program.kernels().collect();
    let cpu = CpuProgram::compile(&kernels).expect("the kernels compile");
    (0..kernels.len()).filter(|&i| cpu.is_fused(i)).count()
}

fn conv_weights(m: usize, c: usize) -> Vec<(&'static str, String, Vec<f32>)> {
    vec![
        (
            "w",
            format!("tensor<{m}x{c}x3x3xf32>"),
            values(m * c * 9, 1, false),
        ),
        ("b", format!("tensor<{m}xf32>"), values(m, 2, false)),
    ]
}

fn borrowed<'a>(
    w: &'a [(&'static str, String, Vec<f32>)],
) -> Vec<(&'static str, &'a str, Vec<f32>)> {
    w.iter()
        .map(|(n, t, v)| (*n, t.as_str(), v.clone()))
        .collect()
}

#[test]
fn relu_after_a_direct_convolution_runs_in_its_stores() {
    // Stride 1, "same" padding: a direct convolution (a bias, then the product onto it).
    let w = conv_weights(16, 8);
    let fused = check(
        "(%x: tensor<1x8x12x12xf32>) -> tensor<1x16x12x12xf32>",
        "  %0 = \"onnx.Conv\"(%x, %w, %b) {pads = [1, 1, 1, 1]} : (tensor<1x8x12x12xf32>, tensor<16x8x3x3xf32>, tensor<16xf32>) -> tensor<1x16x12x12xf32>\n  %1 = \"onnx.Relu\"(%0) : (tensor<1x16x12x12xf32>) -> tensor<1x16x12x12xf32>\n  return %1 : tensor<1x16x12x12xf32>\n",
        &borrowed(&w),
        values(8 * 144, 3, true),
    );
    assert_eq!(fused, 2, "the bias and the ReLU run in the convolution");
}

#[test]
fn clip_after_a_strided_convolution_runs_in_the_gemm() {
    // Stride 3 over an input past an L1 cache, which the direct kernel leaves to the GEMM
    // (it would gather a small one): the GEMM with the column matrix packed from the input.
    let mut w = conv_weights(24, 64);
    w.push(("lo", "tensor<f32>".into(), vec![0.0]));
    w.push(("hi", "tensor<f32>".into(), vec![6.0]));
    let fused = check(
        "(%x: tensor<2x64x16x16xf32>) -> tensor<2x24x6x6xf32>",
        "  %0 = \"onnx.Conv\"(%x, %w, %b) {pads = [1, 1, 1, 1], strides = [3, 3]} : (tensor<2x64x16x16xf32>, tensor<24x64x3x3xf32>, tensor<24xf32>) -> tensor<2x24x6x6xf32>\n  %1 = \"onnx.Clip\"(%0, %lo, %hi) : (tensor<2x24x6x6xf32>, tensor<f32>, tensor<f32>) -> tensor<2x24x6x6xf32>\n  return %1 : tensor<2x24x6x6xf32>\n",
        &borrowed(&w),
        values(2 * 64 * 256, 4, true),
    );
    assert_eq!(fused, 2, "the bias and the Clip run in the GEMM");
}

#[test]
fn grouped_convolutions_take_each_groups_bias() {
    // Depthwise (16 groups of one channel), direct: the bias and the ReLU in its stores,
    // each group's from its own channel.
    let w = vec![
        (
            "w",
            "tensor<16x1x3x3xf32>".to_string(),
            values(16 * 9, 1, false),
        ),
        ("b", "tensor<16xf32>".to_string(), values(16, 2, false)),
    ];
    let fused = check(
        "(%x: tensor<1x16x20x20xf32>) -> tensor<1x16x20x20xf32>",
        "  %0 = \"onnx.Conv\"(%x, %w, %b) {group = 16 : i64, pads = [1, 1, 1, 1]} : (tensor<1x16x20x20xf32>, tensor<16x1x3x3xf32>, tensor<16xf32>) -> tensor<1x16x20x20xf32>\n  %1 = \"onnx.Relu\"(%0) : (tensor<1x16x20x20xf32>) -> tensor<1x16x20x20xf32>\n  return %1 : tensor<1x16x20x20xf32>\n",
        &borrowed(&w),
        values(16 * 400, 3, true),
    );
    assert_eq!(
        fused, 2,
        "the depthwise bias and ReLU run in the convolution"
    );
    // Four groups of two channels each, at stride 2 with 5-wide rows (gathered), batch 2.
    let w = vec![
        (
            "w",
            "tensor<8x2x3x3xf32>".to_string(),
            values(8 * 2 * 9, 4, false),
        ),
        ("b", "tensor<8xf32>".to_string(), values(8, 5, false)),
    ];
    let fused = check(
        "(%x: tensor<2x8x10x10xf32>) -> tensor<2x8x5x5xf32>",
        "  %0 = \"onnx.Conv\"(%x, %w, %b) {group = 4 : i64, pads = [1, 1, 1, 1], strides = [2, 2]} : (tensor<2x8x10x10xf32>, tensor<8x2x3x3xf32>, tensor<8xf32>) -> tensor<2x8x5x5xf32>\n  return %0 : tensor<2x8x5x5xf32>\n",
        &borrowed(&w),
        values(2 * 8 * 100, 6, true),
    );
    assert_eq!(fused, 1, "the grouped bias runs in the convolution");
    // Two groups over an input past an L1 cache at stride 3: the GEMM, one group a batch
    // index of its product.
    let w = vec![
        (
            "w",
            "tensor<12x32x3x3xf32>".to_string(),
            values(12 * 32 * 9, 7, false),
        ),
        ("b", "tensor<12xf32>".to_string(), values(12, 8, false)),
    ];
    let fused = check(
        "(%x: tensor<1x64x24x24xf32>) -> tensor<1x12x8x8xf32>",
        "  %0 = \"onnx.Conv\"(%x, %w, %b) {group = 2 : i64, pads = [1, 1, 1, 1], strides = [3, 3]} : (tensor<1x64x24x24xf32>, tensor<12x32x3x3xf32>, tensor<12xf32>) -> tensor<1x12x8x8xf32>\n  %1 = \"onnx.Relu\"(%0) : (tensor<1x12x8x8xf32>) -> tensor<1x12x8x8xf32>\n  return %1 : tensor<1x12x8x8xf32>\n",
        &borrowed(&w),
        values(64 * 576, 9, true),
    );
    assert_eq!(fused, 2, "the grouped bias and ReLU run in the GEMM");
}

#[test]
fn relu_after_a_matmul_runs_in_the_gemm() {
    // Enough rows and columns for several blocks of the GEMM, and threads.
    let w = [("w", "tensor<96x200xf32>", values(96 * 200, 5, false))];
    let fused = check(
        "(%x: tensor<130x96xf32>) -> tensor<130x200xf32>",
        "  %0 = \"onnx.MatMul\"(%x, %w) : (tensor<130x96xf32>, tensor<96x200xf32>) -> tensor<130x200xf32>\n  %1 = \"onnx.Relu\"(%0) : (tensor<130x200xf32>) -> tensor<130x200xf32>\n  return %1 : tensor<130x200xf32>\n",
        &w,
        values(130 * 96, 6, true),
    );
    assert_eq!(fused, 1, "the ReLU runs in the GEMM");
}

#[test]
fn a_relu_that_keeps_the_product_is_not_fused_but_the_bias_is() {
    // The product is an output too, so the ReLU writes a buffer of its own.
    let w = conv_weights(16, 8);
    let fused = check(
        "(%x: tensor<1x8x12x12xf32>) -> (tensor<1x16x12x12xf32>, tensor<1x16x12x12xf32>)",
        "  %0 = \"onnx.Conv\"(%x, %w, %b) {pads = [1, 1, 1, 1]} : (tensor<1x8x12x12xf32>, tensor<16x8x3x3xf32>, tensor<16xf32>) -> tensor<1x16x12x12xf32>\n  %1 = \"onnx.Relu\"(%0) : (tensor<1x16x12x12xf32>) -> tensor<1x16x12x12xf32>\n  return %0, %1 : tensor<1x16x12x12xf32>, tensor<1x16x12x12xf32>\n",
        &borrowed(&w),
        values(8 * 144, 7, true),
    );
    assert_eq!(fused, 1, "only the bias runs in the convolution");
}

#[test]
fn a_residual_add_and_relu_after_a_convolution_run_in_its_stores() {
    // ResNet's block end: the second convolution, plus the block's input, then ReLU.
    let w = conv_weights(8, 8);
    let fused = check(
        "(%x: tensor<1x8x12x12xf32>) -> tensor<1x8x12x12xf32>",
        "  %r = \"onnx.Sigmoid\"(%x) : (tensor<1x8x12x12xf32>) -> tensor<1x8x12x12xf32>\n  %0 = \"onnx.Conv\"(%r, %w, %b) {pads = [1, 1, 1, 1]} : (tensor<1x8x12x12xf32>, tensor<8x8x3x3xf32>, tensor<8xf32>) -> tensor<1x8x12x12xf32>\n  %1 = \"onnx.Add\"(%0, %r) : (tensor<1x8x12x12xf32>, tensor<1x8x12x12xf32>) -> tensor<1x8x12x12xf32>\n  %2 = \"onnx.Relu\"(%1) : (tensor<1x8x12x12xf32>) -> tensor<1x8x12x12xf32>\n  return %2 : tensor<1x8x12x12xf32>\n",
        &borrowed(&w),
        values(8 * 144, 8, true),
    );
    assert_eq!(
        fused, 2,
        "the bias, the Add and the ReLU run in the convolution"
    );
}

#[test]
fn a_residual_add_and_relu_after_a_pointwise_convolution_run_in_the_gemm() {
    // A 1x1 convolution is a GEMM on the input itself (a MatMul's residual instead becomes
    // the product's accumulator when it is planned, and needs no epilogue).
    let w = [
        ("w", "tensor<8x8x1x1xf32>", values(64, 11, false)),
        ("b", "tensor<8xf32>", values(8, 12, false)),
    ];
    let fused = check(
        "(%x: tensor<2x8x20x20xf32>) -> tensor<2x8x20x20xf32>",
        "  %r = \"onnx.Sigmoid\"(%x) : (tensor<2x8x20x20xf32>) -> tensor<2x8x20x20xf32>\n  %0 = \"onnx.Conv\"(%r, %w, %b) : (tensor<2x8x20x20xf32>, tensor<8x8x1x1xf32>, tensor<8xf32>) -> tensor<2x8x20x20xf32>\n  %1 = \"onnx.Add\"(%0, %r) : (tensor<2x8x20x20xf32>, tensor<2x8x20x20xf32>) -> tensor<2x8x20x20xf32>\n  %2 = \"onnx.Relu\"(%1) : (tensor<2x8x20x20xf32>) -> tensor<2x8x20x20xf32>\n  return %2 : tensor<2x8x20x20xf32>\n",
        &w,
        values(2 * 8 * 400, 10, true),
    );
    assert_eq!(fused, 2, "the bias, the Add and the ReLU run in the GEMM");
}

#[test]
fn a_bias_that_is_not_a_constant_stays_a_kernel() {
    // The bias is computed (a Neg of a weight): it lies in the arena, so the loop that writes
    // it into the result stays; the ReLU is still fused.
    let w = conv_weights(16, 8);
    let fused = check(
        "(%x: tensor<1x8x12x12xf32>) -> tensor<1x16x12x12xf32>",
        "  %nb = \"onnx.Neg\"(%b) : (tensor<16xf32>) -> tensor<16xf32>\n  %0 = \"onnx.Conv\"(%x, %w, %nb) {pads = [1, 1, 1, 1]} : (tensor<1x8x12x12xf32>, tensor<16x8x3x3xf32>, tensor<16xf32>) -> tensor<1x16x12x12xf32>\n  %1 = \"onnx.Relu\"(%0) : (tensor<1x16x12x12xf32>) -> tensor<1x16x12x12xf32>\n  return %1 : tensor<1x16x12x12xf32>\n",
        &borrowed(&w),
        values(8 * 144, 13, true),
    );
    assert_eq!(fused, 1, "only the ReLU runs in the convolution");
}
