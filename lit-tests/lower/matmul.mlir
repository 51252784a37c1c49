// RUN: memc compile %s --emit kernels --split-input-file
// Matrix products lower to `contract` kernels: strided matrix views, a batch loop, and
// `c += a @ b` over an output that first holds the bias.

// Batched MatMul: [2x3x4] @ [2x4x5].
func.func @matmul_batched(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = "onnx.MatMul"(%a, %b) : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----
// Broadcast batch: [2x3x4] @ [4x5], the weight's batch stride is 0.
func.func @matmul_broadcast(%a: tensor<2x3x4xf32>) -> tensor<2x3x5xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<4x5xf32>} : () -> tensor<4x5xf32>
  %1 = "onnx.MatMul"(%a, %0) : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %1 : tensor<2x3x5xf32>
}

// -----
// Gemm with transA and transB, alpha and beta: the transposes are swapped strides.
func.func @gemm_transposed(%a: tensor<4x3xf32>, %b: tensor<5x4xf32>, %c: tensor<5xf32>) -> tensor<3x5xf32> {
  %0 = "onnx.Gemm"(%a, %b, %c) {alpha = 2.0 : f32, beta = 0.5 : f32, transA = 1, transB = 1} : (tensor<4x3xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----
// A matrix-vector product: [6] @ [6x2].
func.func @matmul_vector(%v: tensor<6xf32>, %m: tensor<6x2xf32>) -> tensor<2xf32> {
  %0 = "onnx.MatMul"(%v, %m) : (tensor<6xf32>, tensor<6x2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
