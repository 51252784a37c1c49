// RUN: memc compile %s --emit kernels --split-input-file
// Reductions, softmax and the normalizations: the outer loops walk the kept axes, a `reduce`
// stage folds over the reduced ones and a `once` or `map` stage stores.

// ReduceSum over the last axis; the axes operand is a weight, so its values come from the
// shapes (only axis 1 changes size).
func.func @reduce_sum(%x: tensor<4x6xf32>) -> tensor<4x1xf32> {
  %0 = "memc.weight"() {value = dense_resource<"axes"> : tensor<1xi64>} : () -> tensor<1xi64>
  %1 = "onnx.ReduceSum"(%x, %0) : (tensor<4x6xf32>, tensor<1xi64>) -> tensor<4x1xf32>
  return %1 : tensor<4x1xf32>
}

// -----
// ReduceMean over the middle axis of three, keepdims = 0.
func.func @reduce_mean(%x: tensor<2x5x3xf32>) -> tensor<2x3xf32> {
  %0 = "memc.weight"() {value = dense_resource<"axes"> : tensor<1xi64>} : () -> tensor<1xi64>
  %1 = "onnx.ReduceMean"(%x, %0) {keepdims = 0} : (tensor<2x5x3xf32>, tensor<1xi64>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----
// ArgMax: an i64 accumulator holding the index of the first maximum.
func.func @argmax(%x: tensor<3x7xf32>) -> tensor<3x1xi64> {
  %0 = "onnx.ArgMax"(%x) {axis = 1} : (tensor<3x7xf32>) -> tensor<3x1xi64>
  return %0 : tensor<3x1xi64>
}

// -----
// Softmax over the last axis: max, exp, sum, scale.
func.func @softmax(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = "onnx.Softmax"(%x) {axis = -1} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----
// LayerNormalization over the last axis with scale and bias weights.
func.func @layer_norm(%x: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %0 = "memc.weight"() {value = dense_resource<"gamma"> : tensor<16xf32>} : () -> tensor<16xf32>
  %1 = "memc.weight"() {value = dense_resource<"beta"> : tensor<16xf32>} : () -> tensor<16xf32>
  %2 = "onnx.LayerNormalization"(%x, %0, %1) {axis = -1, epsilon = 1.0e-05 : f32} : (tensor<3x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<3x16xf32>
  return %2 : tensor<3x16xf32>
}
