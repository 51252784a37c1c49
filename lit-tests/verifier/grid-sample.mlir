// RUN: memc opt %s --split-input-file
// GridSample and AffineGrid: the op printed, parsed and verified, then each error their
// verifier hook and shape functions report.

func.func @valid(%x: tensor<1x3x8x8xf32>, %grid: tensor<1x4x6x2xf32>, %theta: tensor<1x2x3xf32>, %size: tensor<4xi64>) -> (tensor<1x3x4x6xf32>, tensor<1x?x?x2xf32>) {
  %0 = "onnx.GridSample"(%x, %grid) {align_corners = 0, mode = "linear", padding_mode = "reflection"} : (tensor<1x3x8x8xf32>, tensor<1x4x6x2xf32>) -> tensor<1x3x4x6xf32>
  %1 = "onnx.AffineGrid"(%theta, %size) {align_corners = 1} : (tensor<1x2x3xf32>, tensor<4xi64>) -> tensor<1x?x?x2xf32>
  return %0, %1 : tensor<1x3x4x6xf32>, tensor<1x?x?x2xf32>
}

// -----
// Opset 16's spelling is renamed by the importer; the IR takes opset 20's.
func.func @bad_mode(%x: tensor<1x3x8x8xf32>, %grid: tensor<1x4x6x2xf32>) -> tensor<1x3x4x6xf32> {
  %0 = "onnx.GridSample"(%x, %grid) {mode = "bilinear"} : (tensor<1x3x8x8xf32>, tensor<1x4x6x2xf32>) -> tensor<1x3x4x6xf32>
  return %0 : tensor<1x3x4x6xf32>
}

// -----
func.func @bad_padding_mode(%x: tensor<1x3x8x8xf32>, %grid: tensor<1x4x6x2xf32>) -> tensor<1x3x4x6xf32> {
  %0 = "onnx.GridSample"(%x, %grid) {padding_mode = "constant"} : (tensor<1x3x8x8xf32>, tensor<1x4x6x2xf32>) -> tensor<1x3x4x6xf32>
  return %0 : tensor<1x3x4x6xf32>
}

// -----
func.func @no_spatial_dim(%x: tensor<1x3xf32>, %grid: tensor<1x3xf32>) -> tensor<1x3xf32> {
  %0 = "onnx.GridSample"(%x, %grid) : (tensor<1x3xf32>, tensor<1x3xf32>) -> tensor<1x3xf32>
  return %0 : tensor<1x3xf32>
}

// -----
func.func @grid_rank(%x: tensor<1x3x8x8xf32>, %grid: tensor<1x24x2xf32>) -> tensor<1x3x24xf32> {
  %0 = "onnx.GridSample"(%x, %grid) : (tensor<1x3x8x8xf32>, tensor<1x24x2xf32>) -> tensor<1x3x24xf32>
  return %0 : tensor<1x3x24xf32>
}

// -----
func.func @coordinate_count(%x: tensor<1x3x8x8xf32>, %grid: tensor<1x4x6x3xf32>) -> tensor<1x3x4x6xf32> {
  %0 = "onnx.GridSample"(%x, %grid) : (tensor<1x3x8x8xf32>, tensor<1x4x6x3xf32>) -> tensor<1x3x4x6xf32>
  return %0 : tensor<1x3x4x6xf32>
}

// -----
func.func @batch_mismatch(%x: tensor<2x3x8x8xf32>, %grid: tensor<1x4x6x2xf32>) -> tensor<2x3x4x6xf32> {
  %0 = "onnx.GridSample"(%x, %grid) : (tensor<2x3x8x8xf32>, tensor<1x4x6x2xf32>) -> tensor<2x3x4x6xf32>
  return %0 : tensor<2x3x4x6xf32>
}

// -----
func.func @wrong_result(%x: tensor<1x3x8x8xf32>, %grid: tensor<1x4x6x2xf32>) -> tensor<1x3x6x4xf32> {
  %0 = "onnx.GridSample"(%x, %grid) : (tensor<1x3x8x8xf32>, tensor<1x4x6x2xf32>) -> tensor<1x3x6x4xf32>
  return %0 : tensor<1x3x6x4xf32>
}

// -----
func.func @theta_rank(%theta: tensor<2x3xf32>, %size: tensor<4xi64>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.AffineGrid"(%theta, %size) : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<?x?x?x?xf32>
  return %0 : tensor<?x?x?x?xf32>
}

// -----
func.func @size_rank(%theta: tensor<1x2x3xf32>, %size: tensor<1x4xi64>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.AffineGrid"(%theta, %size) : (tensor<1x2x3xf32>, tensor<1x4xi64>) -> tensor<?x?x?x?xf32>
  return %0 : tensor<?x?x?x?xf32>
}

// -----
func.func @size_length(%theta: tensor<1x2x3xf32>, %size: tensor<3xi64>) -> tensor<?x?x?xf32> {
  %0 = "onnx.AffineGrid"(%theta, %size) : (tensor<1x2x3xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  return %0 : tensor<?x?x?xf32>
}

// -----
func.func @theta_for_volume(%theta: tensor<1x2x3xf32>, %size: tensor<5xi64>) -> tensor<?x?x?x?x?xf32> {
  %0 = "onnx.AffineGrid"(%theta, %size) : (tensor<1x2x3xf32>, tensor<5xi64>) -> tensor<?x?x?x?x?xf32>
  return %0 : tensor<?x?x?x?x?xf32>
}

