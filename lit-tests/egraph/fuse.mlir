// RUN: memc opt %s -p egraph --split-input-file
// egraph fuses DequantizeLinear of a constant low-bit weight into the product that reads it:
// one memc.matmul_nbits reads the packed weight, and no float copy of the weight is made.

// int4, blocked along K (block_size 32): scales [K / 32, N].
func.func @int4_blocked(%arg0: tensor<1x4x64xf32>) -> tensor<1x4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi4>} : () -> tensor<64x32xi4>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<2x32xf32>} : () -> tensor<2x32xf32>
  %2 = "onnx.DequantizeLinear"(%0, %1) {axis = 0, block_size = 32} : (tensor<64x32xi4>, tensor<2x32xf32>) -> tensor<64x32xf32> loc("dq")
  %3 = "onnx.MatMul"(%arg0, %2) : (tensor<1x4x64xf32>, tensor<64x32xf32>) -> tensor<1x4x32xf32> loc("matmul")
  return %3 : tensor<1x4x32xf32>
}

// -----
// uint4 with zero points, blocked along K.
func.func @uint4_zero_points(%arg0: tensor<4x64xf32>) -> tensor<4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xui4>} : () -> tensor<64x32xui4>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<4x32xf32>} : () -> tensor<4x32xf32>
  %2 = "memc.weight"() {value = dense_resource<"zp"> : tensor<4x32xui4>} : () -> tensor<4x32xui4>
  %3 = "onnx.DequantizeLinear"(%0, %1, %2) {axis = 0, block_size = 16} : (tensor<64x32xui4>, tensor<4x32xf32>, tensor<4x32xui4>) -> tensor<64x32xf32>
  %4 = "onnx.MatMul"(%arg0, %3) : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  return %4 : tensor<4x32xf32>
}

// -----
// int8 per axis: one scale per output column (axis 1 of the [K, N] weight).
func.func @int8_per_axis(%arg0: tensor<2x3x64xf32>) -> tensor<2x3x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi8>} : () -> tensor<64x32xi8>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<32xf32>} : () -> tensor<32xf32>
  %2 = "onnx.DequantizeLinear"(%0, %1) {axis = 1} : (tensor<64x32xi8>, tensor<32xf32>) -> tensor<64x32xf32>
  %3 = "onnx.MatMul"(%arg0, %2) : (tensor<2x3x64xf32>, tensor<64x32xf32>) -> tensor<2x3x32xf32>
  return %3 : tensor<2x3x32xf32>
}

// -----
// uint8 per tensor: a scalar scale and zero point.
func.func @uint8_per_tensor(%arg0: tensor<64xf32>) -> tensor<32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xui8>} : () -> tensor<64x32xui8>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<f32>} : () -> tensor<f32>
  %2 = "memc.weight"() {value = dense_resource<"zp"> : tensor<ui8>} : () -> tensor<ui8>
  %3 = "onnx.DequantizeLinear"(%0, %1, %2) : (tensor<64x32xui8>, tensor<f32>, tensor<ui8>) -> tensor<64x32xf32>
  %4 = "onnx.MatMul"(%arg0, %3) : (tensor<64xf32>, tensor<64x32xf32>) -> tensor<32xf32>
  return %4 : tensor<32xf32>
}

// -----
// Through a Transpose: the weight is stored [N, K] and read with trans_b = 1; the quantization
// axis stays the stored one.
func.func @through_transpose(%arg0: tensor<1x4x64xf32>) -> tensor<1x4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<32x64xi4>} : () -> tensor<32x64xi4>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<32x2xf32>} : () -> tensor<32x2xf32>
  %2 = "onnx.DequantizeLinear"(%0, %1) {axis = 1, block_size = 32} : (tensor<32x64xi4>, tensor<32x2xf32>) -> tensor<32x64xf32>
  %3 = "onnx.Transpose"(%2) {perm = [1, 0]} : (tensor<32x64xf32>) -> tensor<64x32xf32>
  %4 = "onnx.MatMul"(%arg0, %3) : (tensor<1x4x64xf32>, tensor<64x32xf32>) -> tensor<1x4x32xf32> loc("proj")
  return %4 : tensor<1x4x32xf32>
}

// -----
// Gemm with transB and a bias: the bias becomes the fused op's fifth operand (memc.none holds
// the place of the absent zero points).
func.func @gemm_trans_b_bias(%arg0: tensor<2x64xf32>) -> tensor<2x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<32x64xi8>} : () -> tensor<32x64xi8>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<32xf32>} : () -> tensor<32xf32>
  %2 = "memc.weight"() {value = dense_resource<"b"> : tensor<32xf32>} : () -> tensor<32xf32>
  %3 = "onnx.DequantizeLinear"(%0, %1) {axis = 0} : (tensor<32x64xi8>, tensor<32xf32>) -> tensor<32x64xf32>
  %4 = "onnx.Gemm"(%arg0, %3, %2) {transB = 1} : (tensor<2x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<2x32xf32> loc("fc")
  return %4 : tensor<2x32xf32>
}

// -----
// MatMul + Add(bias) on a 3-d activation: the bias joins the fused op, whichever side of the
// Add it is on.
func.func @matmul_bias(%arg0: tensor<1x4x64xf32>) -> tensor<1x4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi4>} : () -> tensor<64x32xi4>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<2x32xf32>} : () -> tensor<2x32xf32>
  %2 = "memc.weight"() {value = dense_resource<"b"> : tensor<32xf32>} : () -> tensor<32xf32>
  %3 = "onnx.DequantizeLinear"(%0, %1) {axis = 0, block_size = 32} : (tensor<64x32xi4>, tensor<2x32xf32>) -> tensor<64x32xf32>
  %4 = "onnx.MatMul"(%arg0, %3) : (tensor<1x4x64xf32>, tensor<64x32xf32>) -> tensor<1x4x32xf32>
  %5 = "onnx.Add"(%2, %4) : (tensor<32xf32>, tensor<1x4x32xf32>) -> tensor<1x4x32xf32> loc("bias")
  return %5 : tensor<1x4x32xf32>
}

// -----
// Float products: a Transpose folds into a 2-d product (a Gemm with transB), and a 2-d MatMul
// + bias Add becomes a Gemm; neither materializes the transposed or the unbiased tensor.
func.func @float_products(%arg0: tensor<2x64xf32>, %arg1: tensor<32x64xf32>, %arg2: tensor<64x16xf32>, %arg3: tensor<16xf32>) -> (tensor<2x32xf32>, tensor<2x16xf32>) {
  %0 = "onnx.Transpose"(%arg1) {perm = [1, 0]} : (tensor<32x64xf32>) -> tensor<64x32xf32>
  %1 = "onnx.MatMul"(%arg0, %0) : (tensor<2x64xf32>, tensor<64x32xf32>) -> tensor<2x32xf32> loc("t")
  %2 = "onnx.MatMul"(%arg0, %arg2) : (tensor<2x64xf32>, tensor<64x16xf32>) -> tensor<2x16xf32>
  %3 = "onnx.Add"(%2, %arg3) : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32> loc("b")
  return %1, %3 : tensor<2x32xf32>, tensor<2x16xf32>
}

// -----
// A fused product read inside a region and by an op with two results: their operands move
// to the fused op; ops in regions are not rewritten themselves.
func.func @used_in_region(%arg0: tensor<i1>, %arg1: tensor<4x64xf32>) -> (tensor<4x32xf32>, tensor<4x16xf32>) {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<64x32xi8>} : () -> tensor<64x32xi8>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<32xf32>} : () -> tensor<32xf32>
  %2 = "onnx.DequantizeLinear"(%0, %1) {axis = 1} : (tensor<64x32xi8>, tensor<32xf32>) -> tensor<64x32xf32>
  %3 = "onnx.MatMul"(%arg1, %2) : (tensor<4x64xf32>, tensor<64x32xf32>) -> tensor<4x32xf32>
  %4:2 = "onnx.Split"(%3) {axis = 1, num_outputs = 2} : (tensor<4x32xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %5 = "onnx.If"(%arg0) ({
    %6 = "onnx.Neg"(%3) : (tensor<4x32xf32>) -> tensor<4x32xf32>
    "onnx.Yield"(%6) : (tensor<4x32xf32>) -> ()
  }, {
    "onnx.Yield"(%3) : (tensor<4x32xf32>) -> ()
  }) : (tensor<i1>) -> tensor<4x32xf32>
  return %5, %4#1 : tensor<4x32xf32>, tensor<4x16xf32>
}
