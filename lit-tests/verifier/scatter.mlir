// RUN: memc opt %s --split-input-file
// ScatterElements and ScatterND: well-formed ones print back; each rule on `axis`,
// `reduction`, the ranks and the updates' shape has its error.

func.func @scatters(%d: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>, %ni: tensor<2x1xi64>, %nu: tensor<2x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %0 = "onnx.ScatterElements"(%d, %i, %u) {axis = 0, reduction = "max"} : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  %1 = "onnx.ScatterElements"(%0, %i, %u) {axis = -2} : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  %2 = "onnx.ScatterND"(%1, %ni, %nu) {reduction = "add"} : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %0, %1, %2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// -----
func.func @unknown_reduction(%d: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>) -> tensor<3x4xf32> {
  %0 = "onnx.ScatterElements"(%d, %i, %u) {reduction = "sum"} : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----
func.func @axis_out_of_range(%d: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>) -> tensor<3x4xf32> {
  %0 = "onnx.ScatterElements"(%d, %i, %u) {axis = 2} : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----
func.func @updates_not_indices_shape(%d: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x3xf32>) -> tensor<3x4xf32> {
  %0 = "onnx.ScatterElements"(%d, %i, %u) : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----
func.func @indices_wider_than_data(%d: tensor<3x4xf32>, %i: tensor<2x5xi64>, %u: tensor<2x5xf32>) -> tensor<3x4xf32> {
  %0 = "onnx.ScatterElements"(%d, %i, %u) {axis = 0} : (tensor<3x4xf32>, tensor<2x5xi64>, tensor<2x5xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----
func.func @nd_reduction(%d: tensor<3x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>) -> tensor<3x4xf32> {
  %0 = "onnx.ScatterND"(%d, %i, %u) {reduction = "avg"} : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----
func.func @nd_too_deep(%d: tensor<3x4xf32>, %i: tensor<2x3xi64>, %u: tensor<2xf32>) -> tensor<3x4xf32> {
  %0 = "onnx.ScatterND"(%d, %i, %u) : (tensor<3x4xf32>, tensor<2x3xi64>, tensor<2xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----
func.func @nd_updates_wrong_shape(%d: tensor<3x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x3xf32>) -> tensor<3x4xf32> {
  %0 = "onnx.ScatterND"(%d, %i, %u) : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----
func.func @tensor_scatter(%past: tensor<2x1x4x5xf32>, %u: tensor<2x1x2x5xf32>, %w: tensor<2xi64>) -> (tensor<2x1x4x5xf32>, tensor<2x1x4x5xf32>) {
  %0 = "onnx.TensorScatter"(%past, %u, %w) {mode = "circular"} : (tensor<2x1x4x5xf32>, tensor<2x1x2x5xf32>, tensor<2xi64>) -> tensor<2x1x4x5xf32>
  %1 = "onnx.TensorScatter"(%0, %u) : (tensor<2x1x4x5xf32>, tensor<2x1x2x5xf32>) -> tensor<2x1x4x5xf32>
  return %0, %1 : tensor<2x1x4x5xf32>, tensor<2x1x4x5xf32>
}

// -----
func.func @tensor_scatter_batch_axis(%past: tensor<2x4x5xf32>, %u: tensor<2x4x5xf32>) -> tensor<2x4x5xf32> {
  %0 = "onnx.TensorScatter"(%past, %u) {axis = 0} : (tensor<2x4x5xf32>, tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
  return %0 : tensor<2x4x5xf32>
}

// -----
func.func @tensor_scatter_mode(%past: tensor<2x4x5xf32>, %u: tensor<2x1x5xf32>) -> tensor<2x4x5xf32> {
  %0 = "onnx.TensorScatter"(%past, %u) {mode = "ring"} : (tensor<2x4x5xf32>, tensor<2x1x5xf32>) -> tensor<2x4x5xf32>
  return %0 : tensor<2x4x5xf32>
}

// -----
func.func @tensor_scatter_update_too_long(%past: tensor<2x4x5xf32>, %u: tensor<2x5x5xf32>) -> tensor<2x4x5xf32> {
  %0 = "onnx.TensorScatter"(%past, %u) : (tensor<2x4x5xf32>, tensor<2x5x5xf32>) -> tensor<2x4x5xf32>
  return %0 : tensor<2x4x5xf32>
}

// -----
func.func @tensor_scatter_write_indices(%past: tensor<2x4x5xf32>, %u: tensor<2x1x5xf32>, %w: tensor<3xi64>) -> tensor<2x4x5xf32> {
  %0 = "onnx.TensorScatter"(%past, %u, %w) : (tensor<2x4x5xf32>, tensor<2x1x5xf32>, tensor<3xi64>) -> tensor<2x4x5xf32>
  return %0 : tensor<2x4x5xf32>
}
