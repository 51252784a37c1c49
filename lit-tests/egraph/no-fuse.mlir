// RUN: memc opt %s -p egraph --split-input-file
// egraph leaves alone what it must not fuse: each function comes out as it went in.

// The quantized weight is not a constant (a function argument): no fusion.
func.func @weight_not_constant(%arg0: tensor<4x64xf32>, %arg1: tensor<64x32xi4>) -> tensor<4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"s"> : tensor<2x32xf32>} : () -> tensor<2x32xf32>
  %1 = "onnx.DequantizeLinear"(%arg1, %0) {axis = 0, block_size = 32} : (tensor<64x32xi4>, tensor<2x32xf32>) -> tensor<64x32xf32>
  %2 = "onnx.MatMul"(%arg0, %1) : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  return %2 : tensor<4x32xf32>
}

// -----
// The float weight has another consumer (it is also returned): the DQ stays, and so does the
// MatMul that reads it, rather than computing the weight and reading the packed one too.
func.func @dq_other_consumer(%arg0: tensor<4x64xf32>) -> (tensor<4x32xf32>, tensor<64x32xf32>) {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi8>} : () -> tensor<64x32xi8>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<32xf32>} : () -> tensor<32xf32>
  %2 = "onnx.DequantizeLinear"(%0, %1) {axis = 1} : (tensor<64x32xi8>, tensor<32xf32>) -> tensor<64x32xf32>
  %3 = "onnx.MatMul"(%arg0, %2) : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  return %3, %2 : tensor<4x32xf32>, tensor<64x32xf32>
}

// -----
// Two MatMuls share one dequantized weight: neither fuses (FIXME: fuse when every consumer can).
func.func @dq_shared(%arg0: tensor<4x64xf32>, %arg1: tensor<3x4x64xf32>) -> (tensor<4x32xf32>, tensor<3x4x32xf32>) {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi4>} : () -> tensor<64x32xi4>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<2x32xf32>} : () -> tensor<2x32xf32>
  %2 = "onnx.DequantizeLinear"(%0, %1) {axis = 0, block_size = 32} : (tensor<64x32xi4>, tensor<2x32xf32>) -> tensor<64x32xf32>
  %3 = "onnx.MatMul"(%arg0, %2) : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  %4 = "onnx.MatMul"(%arg1, %2) : (tensor<3x4x64xf32>, tensor<64x32xf32>) -> tensor<3x4x32xf32>
  return %3, %4 : tensor<4x32xf32>, tensor<3x4x32xf32>
}

// -----
// A MatMul of floats without a DQ, on a 3-d activation, is untouched.
func.func @plain_matmul(%arg0: tensor<1x4x64xf32>, %arg1: tensor<64x32xf32>) -> tensor<1x4x32xf32> {
  %0 = "onnx.MatMul"(%arg0, %arg1) : (tensor<1x4x64xf32>, tensor<64x32xf32>) -> tensor<1x4x32xf32>
  return %0 : tensor<1x4x32xf32>
}

// -----
// 16-bit weights are not low-bit: the DQ of an i16 weight stays.
func.func @int16_weight(%arg0: tensor<4x64xf32>) -> tensor<4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi16>} : () -> tensor<64x32xi16>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<32xf32>} : () -> tensor<32xf32>
  %2 = "onnx.DequantizeLinear"(%0, %1) {axis = 1} : (tensor<64x32xi16>, tensor<32xf32>) -> tensor<64x32xf32>
  %3 = "onnx.MatMul"(%arg0, %2) : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  return %3 : tensor<4x32xf32>
}

// -----
// A Gemm that scales the product (alpha = 0.5) is not a plain product: no fusion.
func.func @gemm_alpha(%arg0: tensor<2x64xf32>) -> tensor<2x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi8>} : () -> tensor<64x32xi8>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<32xf32>} : () -> tensor<32xf32>
  %2 = "onnx.DequantizeLinear"(%0, %1) {axis = 1} : (tensor<64x32xi8>, tensor<32xf32>) -> tensor<64x32xf32>
  %3 = "onnx.Gemm"(%arg0, %2) {alpha = 0.5} : (tensor<2x64xf32>, tensor<64x32xf32>) -> tensor<2x32xf32>
  return %3 : tensor<2x32xf32>
}

// -----
// The scales are not constant (a function argument): no fusion.
func.func @scales_not_constant(%arg0: tensor<4x64xf32>, %arg1: tensor<32xf32>) -> tensor<4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi8>} : () -> tensor<64x32xi8>
  %1 = "onnx.DequantizeLinear"(%0, %arg1) {axis = 1} : (tensor<64x32xi8>, tensor<32xf32>) -> tensor<64x32xf32>
  %2 = "onnx.MatMul"(%arg0, %1) : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  return %2 : tensor<4x32xf32>
}

// -----
// int8 per axis along K (one scale per row of the [K, N] weight): the scale changes with every
// value of K, which the packed kernels do not take (they need runs of K sharing a scale).
func.func @per_axis_along_k(%arg0: tensor<4x64xf32>) -> tensor<4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi8>} : () -> tensor<64x32xi8>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<64xf32>} : () -> tensor<64xf32>
  %2 = "onnx.DequantizeLinear"(%0, %1) {axis = 0} : (tensor<64x32xi8>, tensor<64xf32>) -> tensor<64x32xf32>
  %3 = "onnx.MatMul"(%arg0, %2) : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  return %3 : tensor<4x32xf32>
}

// -----
// int4 blocked along N (axis 1 of the [K, N] weight): again a new scale for every value of K.
func.func @blocked_along_n(%arg0: tensor<4x64xf32>) -> tensor<4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi4>} : () -> tensor<64x32xi4>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<64x2xf32>} : () -> tensor<64x2xf32>
  %2 = "onnx.DequantizeLinear"(%0, %1) {axis = 1, block_size = 16} : (tensor<64x32xi4>, tensor<64x2xf32>) -> tensor<64x32xf32>
  %3 = "onnx.MatMul"(%arg0, %2) : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  return %3 : tensor<4x32xf32>
}
