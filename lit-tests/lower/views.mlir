// RUN: memc compile %s --emit kernels --split-input-file
// Views get no kernel: the planner gives Reshape, Flatten, Squeeze and Unsqueeze the bytes of
// their operand, so their steps say `no kernel` and the next kernel reads the same offset.

// Reshape then Relu: the Relu reads the argument's bytes with the new shape.
func.func @reshape(%x: tensor<2x6xf32>) -> tensor<3x4xf32> {
  %0 = "memc.weight"() {value = dense_resource<"shape"> : tensor<2xi64>} : () -> tensor<2xi64>
  %1 = "onnx.Reshape"(%x, %0) : (tensor<2x6xf32>, tensor<2xi64>) -> tensor<3x4xf32>
  %2 = "onnx.Relu"(%1) : (tensor<3x4xf32>) -> tensor<3x4xf32>
  return %2 : tensor<3x4xf32>
}

// -----
// Flatten between two kernels: Neg writes a buffer that Flatten views and Exp reads.
func.func @flatten(%x: tensor<2x3x4xf32>) -> tensor<2x12xf32> {
  %0 = "onnx.Neg"(%x) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = "onnx.Flatten"(%0) {axis = 1} : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
  %2 = "onnx.Exp"(%1) : (tensor<2x12xf32>) -> tensor<2x12xf32>
  return %2 : tensor<2x12xf32>
}

// -----
// Squeeze (every 1-dim) and Unsqueeze around a Softmax: two views, one kernel.
func.func @squeeze(%x: tensor<1x4x1xf32>) -> tensor<4x1xf32> {
  %0 = "onnx.Squeeze"(%x) : (tensor<1x4x1xf32>) -> tensor<4xf32>
  %1 = "onnx.Softmax"(%0) {axis = 0} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "memc.weight"() {value = dense_resource<"axes"> : tensor<1xi64>} : () -> tensor<1xi64>
  %3 = "onnx.Unsqueeze"(%1, %2) : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
  return %3 : tensor<4x1xf32>
}

// -----
// Transpose is no view: it copies through a strided read.
func.func @transpose(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = "onnx.Transpose"(%x) {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
