// RUN: memc compile %s --emit kernels --split-input-file
// Scatters: a copy of the data, then a kernel whose rows own disjoint parts of the result and
// whose inner axis walks the updates aimed at a row in order. Each point loads the element the
// index names (`load ... indirect`), combines it with the update by `reduction` and stores it
// back at the same index; an index out of range stores the element back unchanged.

// ScatterElements along axis 1: a row per line of the result along the axis.
func.func @scatter_elements(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> tensor<3x4xf32> {
  %0 = "onnx.ScatterElements"(%x, %i, %u) {axis = 1} : (tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----
// ScatterElements with `reduction = "max"` and i32 indices (cast to i64 first).
func.func @scatter_elements_max(%x: tensor<3x4xf32>, %i: tensor<2x4xi32>, %u: tensor<2x4xf32>) -> tensor<3x4xf32> {
  %0 = "onnx.ScatterElements"(%x, %i, %u) {axis = 0, reduction = "max"} : (tensor<3x4xf32>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----
// ScatterND with index depth 2 into a 3-d tensor: a row per element of the trailing slice,
// two indirect terms, `reduction = "mul"`.
func.func @scatter_nd_mul(%x: tensor<4x4x4xf32>, %i: tensor<2x2xi64>, %u: tensor<2x4xf32>) -> tensor<4x4x4xf32> {
  %0 = "onnx.ScatterND"(%x, %i, %u) {reduction = "mul"} : (tensor<4x4x4xf32>, tensor<2x2xi64>, tensor<2x4xf32>) -> tensor<4x4x4xf32>
  return %0 : tensor<4x4x4xf32>
}

// -----
// TensorScatter in circular mode: the write position is the batch entry's write index plus
// the position along the sequence axis, modulo the cache length.
func.func @tensor_scatter(%past: tensor<2x1x4x5xf32>, %u: tensor<2x1x2x5xf32>, %w: tensor<2xi64>) -> tensor<2x1x4x5xf32> {
  %0 = "onnx.TensorScatter"(%past, %u, %w) {mode = "circular"} : (tensor<2x1x4x5xf32>, tensor<2x1x2x5xf32>, tensor<2xi64>) -> tensor<2x1x4x5xf32>
  return %0 : tensor<2x1x4x5xf32>
}
