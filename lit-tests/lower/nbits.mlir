// RUN: memc compile %s --emit kernels --split-input-file
// `memc.matmul_nbits` lowers to one `nbits` kernel over packed weight slots (the program lists
// how each slot is computed from the model's weights). Up to 128 rows decode each weight once
// into every row; more rows dequantize tiles into planned scratch for a gemm.

// Few rows: int4 blocked along K, zero points and a bias; B stored [N, K].
func.func @few_rows(%a: tensor<2x4x64xf32>, %bias: tensor<32xf32>) -> tensor<2x4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<32x64xi4>} : () -> tensor<32x64xi4>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<32x2xf32>} : () -> tensor<32x2xf32>
  %2 = "memc.weight"() {value = dense_resource<"zp"> : tensor<32x2xi4>} : () -> tensor<32x2xi4>
  %3 = "memc.matmul_nbits"(%a, %0, %1, %2, %bias) {K = 64, N = 32, axis = 1, bits = 4, block_size = 32, trans_b = 1} : (tensor<2x4x64xf32>, tensor<32x64xi4>, tensor<32x2xf32>, tensor<32x2xi4>, tensor<32xf32>) -> tensor<2x4x32xf32>
  return %3 : tensor<2x4x32xf32>
}

// -----
// Many rows (200 > 128): uint8 per output column, no zero points; the step has scratch.
func.func @many_rows(%a: tensor<200x32xf32>) -> tensor<200x16xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w8"> : tensor<32x16xui8>} : () -> tensor<32x16xui8>
  %1 = "memc.weight"() {value = dense_resource<"s8"> : tensor<16xf32>} : () -> tensor<16xf32>
  %2 = "memc.matmul_nbits"(%a, %0, %1) {K = 32, N = 16, axis = 1, bits = 8} : (tensor<200x32xf32>, tensor<32x16xui8>, tensor<16xf32>) -> tensor<200x16xf32>
  return %2 : tensor<200x16xf32>
}
