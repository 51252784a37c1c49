// RUN: memc opt %s --split-input-file
// memc.matmul_nbits as written by hand: a valid op round-trips, and each broken rule of its
// verifier hook is reported at the op.

// Valid: int4 blocked, with zero points and a bias, B stored [N, K].
func.func @valid(%arg0: tensor<2x4x64xf32>, %arg1: tensor<32xf32>) -> tensor<2x4x32xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<32x64xi4>} : () -> tensor<32x64xi4>
  %1 = "memc.weight"() {value = dense_resource<"s"> : tensor<32x2xf32>} : () -> tensor<32x2xf32>
  %2 = "memc.weight"() {value = dense_resource<"zp"> : tensor<32x2xi4>} : () -> tensor<32x2xi4>
  %3 = "memc.matmul_nbits"(%arg0, %0, %1, %2, %arg1) {K = 64, N = 32, axis = 1, bits = 4, block_size = 32, trans_b = 1} : (tensor<2x4x64xf32>, tensor<32x64xi4>, tensor<32x2xf32>, tensor<32x2xi4>, tensor<32xf32>) -> tensor<2x4x32xf32>
  return %3 : tensor<2x4x32xf32>
}

// -----
func.func @b_not_k_by_n(%arg0: tensor<4x64xf32>, %arg1: tensor<64x32xi8>, %arg2: tensor<32xf32>) -> tensor<4x32xf32> {
  %0 = "memc.matmul_nbits"(%arg0, %arg1, %arg2) {K = 64, N = 32, bits = 8, trans_b = 1} : (tensor<4x64xf32>, tensor<64x32xi8>, tensor<32xf32>) -> tensor<4x32xf32>
  return %0 : tensor<4x32xf32>
}

// -----
func.func @bits_disagree(%arg0: tensor<4x64xf32>, %arg1: tensor<64x32xi8>, %arg2: tensor<32xf32>) -> tensor<4x32xf32> {
  %0 = "memc.matmul_nbits"(%arg0, %arg1, %arg2) {K = 64, N = 32, bits = 4} : (tensor<4x64xf32>, tensor<64x32xi8>, tensor<32xf32>) -> tensor<4x32xf32>
  return %0 : tensor<4x32xf32>
}

// -----
func.func @a_k_disagrees(%arg0: tensor<4x16xf32>, %arg1: tensor<64x32xi8>, %arg2: tensor<32xf32>) -> tensor<4x32xf32> {
  %0 = "memc.matmul_nbits"(%arg0, %arg1, %arg2) {K = 64, N = 32, bits = 8} : (tensor<4x16xf32>, tensor<64x32xi8>, tensor<32xf32>) -> tensor<4x32xf32>
  return %0 : tensor<4x32xf32>
}

// -----
func.func @scales_wrong_shape(%arg0: tensor<4x64xf32>, %arg1: tensor<64x32xi4>, %arg2: tensor<3x32xf32>) -> tensor<4x32xf32> {
  %0 = "memc.matmul_nbits"(%arg0, %arg1, %arg2) {K = 64, N = 32, axis = 0, bits = 4, block_size = 32} : (tensor<4x64xf32>, tensor<64x32xi4>, tensor<3x32xf32>) -> tensor<4x32xf32>
  return %0 : tensor<4x32xf32>
}

// -----
func.func @zero_points_wrong_shape(%arg0: tensor<4x64xf32>, %arg1: tensor<64x32xui8>, %arg2: tensor<32xf32>, %arg3: tensor<ui8>) -> tensor<4x32xf32> {
  %0 = "memc.matmul_nbits"(%arg0, %arg1, %arg2, %arg3) {K = 64, N = 32, bits = 8} : (tensor<4x64xf32>, tensor<64x32xui8>, tensor<32xf32>, tensor<ui8>) -> tensor<4x32xf32>
  return %0 : tensor<4x32xf32>
}

// -----
func.func @bias_wrong_shape(%arg0: tensor<4x64xf32>, %arg1: tensor<64x32xi8>, %arg2: tensor<32xf32>, %arg3: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %0 = "memc.none"() : () -> none
  %1 = "memc.matmul_nbits"(%arg0, %arg1, %arg2, %0, %arg3) {K = 64, N = 32, bits = 8} : (tensor<4x64xf32>, tensor<64x32xi8>, tensor<32xf32>, none, tensor<4x32xf32>) -> tensor<4x32xf32>
  return %1 : tensor<4x32xf32>
}

// -----
func.func @weight_not_low_bit(%arg0: tensor<4x64xf32>, %arg1: tensor<64x32xi16>, %arg2: tensor<32xf32>) -> tensor<4x32xf32> {
  %0 = "memc.matmul_nbits"(%arg0, %arg1, %arg2) {K = 64, N = 32, bits = 16} : (tensor<4x64xf32>, tensor<64x32xi16>, tensor<32xf32>) -> tensor<4x32xf32>
  return %0 : tensor<4x32xf32>
}

// -----
func.func @result_not_m_by_n(%arg0: tensor<4x64xf32>, %arg1: tensor<64x32xi8>, %arg2: tensor<32xf32>) -> tensor<4x64xf32> {
  %0 = "memc.matmul_nbits"(%arg0, %arg1, %arg2) {K = 64, N = 32, bits = 8} : (tensor<4x64xf32>, tensor<64x32xi8>, tensor<32xf32>) -> tensor<4x64xf32>
  return %0 : tensor<4x64xf32>
}
