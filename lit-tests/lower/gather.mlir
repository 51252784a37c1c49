// RUN: memc compile %s --emit kernels --split-input-file
// Gathers read through `load ... indirect`: the index is an earlier value of the stage, made
// non-negative and clamped to the axis' size at run time.

// Gather rows of an embedding table (a weight) by token id.
func.func @gather(%ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %0 = "memc.weight"() {value = dense_resource<"table"> : tensor<10x4xf32>} : () -> tensor<10x4xf32>
  %1 = "onnx.Gather"(%0, %ids) {axis = 0} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// -----
// Gather along axis 1 with i32 indices (cast to i64 first).
func.func @gather_axis1(%x: tensor<3x5xf32>, %i: tensor<2xi32>) -> tensor<3x2xf32> {
  %0 = "onnx.Gather"(%x, %i) {axis = 1} : (tensor<3x5xf32>, tensor<2xi32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----
// GatherElements: the index has the output's shape and replaces the coordinate along `axis`.
func.func @gather_elements(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>) -> tensor<3x2xf32> {
  %0 = "onnx.GatherElements"(%x, %i) {axis = 1} : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
