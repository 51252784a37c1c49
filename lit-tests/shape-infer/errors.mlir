// RUN: memc opt %s -p shape-infer --split-input-file
// Errors shape inference finds once types are refined or shape values are known: the
// verifier cannot see them in the input, where the dims are written as `?`. Each points at
// the op.

// Relu refines to [2, 3]; the MatMul then multiplies [2, 3] by [4, 5].
func.func @matmul_inner_dims(%x: tensor<2x3xf32>, %w: tensor<4x5xf32>) -> tensor<?x?xf32> {
  %0 = "onnx.Relu"(%x) : (tensor<2x3xf32>) -> tensor<?x?xf32>
  %1 = "onnx.MatMul"(%0, %w) : (tensor<?x?xf32>, tensor<4x5xf32>) -> tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}

// -----
// The shape operand is known to be [4]: 6 elements do not fit.
func.func @reshape_count(%x: tensor<2x3xf32>, %four: tensor<4xf32>) -> tensor<?xf32> {
  %0 = "onnx.Shape"(%four) : (tensor<4xf32>) -> tensor<?xi64>
  %1 = "onnx.Reshape"(%x, %0) : (tensor<2x3xf32>, tensor<?xi64>) -> tensor<?xf32>
  return %1 : tensor<?xf32>
}

// -----
// Split sizes [2, 4] do not add up to 7.
func.func @split_sizes(%x: tensor<7xf32>, %sizes: tensor<2x4xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %0 = "onnx.Shape"(%sizes) : (tensor<2x4xf32>) -> tensor<?xi64>
  %1:2 = "onnx.Split"(%x, %0) : (tensor<7xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?xf32>)
  return %1#0, %1#1 : tensor<?xf32>, tensor<?xf32>
}

// -----
// A written static dim that contradicts the inferred one: Transpose of [2, 3] is [3, 2].
func.func @written_dim_conflicts(%x: tensor<2x3xf32>) -> tensor<2x?xf32> {
  %0 = "onnx.Relu"(%x) : (tensor<2x3xf32>) -> tensor<?x?xf32>
  %1 = "onnx.Transpose"(%0) : (tensor<?x?xf32>) -> tensor<2x?xf32>
  return %1 : tensor<2x?xf32>
}

// -----
// A Gather index known to be out of range.
func.func @gather_index(%x: tensor<3x4xf32>, %index: tensor<5x1xf32>) -> tensor<?x?xf32> {
  %0 = "onnx.Shape"(%index) {end = 1} : (tensor<5x1xf32>) -> tensor<?xi64>
  %1 = "onnx.Gather"(%x, %0) {axis = 0} : (tensor<3x4xf32>, tensor<?xi64>) -> tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}
