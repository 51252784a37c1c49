// RUN: memc compile %s --emit kernels --split-input-file
// Element types kernels only store: f16, bf16, float8, float4 and the 4- and 2-bit integers.
// Loads widen them to f32 (i8/u8 for the integers) and stores narrow them back, so an op on
// f16 computes in f32 and rounds once; sub-byte elements take a byte each in the arena.

// f16 arithmetic: f16 views, f32 instructions.
func.func @add_f16(%arg0: tensor<4xf16>, %arg1: tensor<4xf16>) -> tensor<4xf16> {
  %0 = "onnx.Add"(%arg0, %arg1) : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----
// Cast to float8 saturates by default: clamped to +-448 before the store rounds.
func.func @cast_f8(%arg0: tensor<4xf32>) -> (tensor<4xf8E4M3FN>, tensor<4xf8E5M2>) {
  %0 = "onnx.Cast"(%arg0) {to = f8E4M3FN} : (tensor<4xf32>) -> tensor<4xf8E4M3FN>
  %1 = "onnx.Cast"(%arg0) {saturate = 0, to = f8E5M2} : (tensor<4xf32>) -> tensor<4xf8E5M2>
  return %0, %1 : tensor<4xf8E4M3FN>, tensor<4xf8E5M2>
}

// -----
// A float goes to a 4-bit integer through i64 (truncated), wrapped to the width by the store.
func.func @cast_i4(%arg0: tensor<4xf32>) -> tensor<4xi4> {
  %0 = "onnx.Cast"(%arg0) {to = i4} : (tensor<4xf32>) -> tensor<4xi4>
  return %0 : tensor<4xi4>
}

// -----
// A fused chain rounds an intermediate of a storage type where its store would have.
func.func @round_trip_bf16(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Cast"(%arg0) {to = bf16} : (tensor<4xf32>) -> tensor<4xbf16>
  %1 = "onnx.Cast"(%0) {to = f32} : (tensor<4xbf16>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----
// float4 and 2-bit integers dequantize element by element.
func.func @dequantize(%arg0: tensor<4xf4E2M1FN>, %arg1: tensor<4xui2>, %arg2: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "onnx.DequantizeLinear"(%arg0, %arg2) : (tensor<4xf4E2M1FN>, tensor<f32>) -> tensor<4xf32>
  %1 = "onnx.DequantizeLinear"(%arg1, %arg2) : (tensor<4xui2>, tensor<f32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
