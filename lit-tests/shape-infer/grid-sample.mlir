// RUN: memc opt %s -p shape-infer --split-input-file
// GridSample: X (N, C, D1, ..., Dk) sampled at grid (N, D1_out, ..., Dk_out, k) gives
// (N, C, D1_out, ..., Dk_out); a symbolic batch dim of X survives. AffineGrid: the grid of
// theta (N, 2, 3) or (N, 3, 4) over `size`, whose value comes from `Shape` of a static
// placeholder ([2, 3, 4, 5] and [2, 1, 3, 4, 5]); without a known size the spatial dims are
// unknown.

func.func @grid_sample(%x: tensor<?x3x8x8xf32, #memc.dims<["n"]>>, %grid: tensor<?x4x6x2xf32, #memc.dims<["n"]>>, %v: tensor<1x2x4x4x4xf64>, %vgrid: tensor<1x2x3x5x3xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?x?xf64>) {
  %0 = "onnx.GridSample"(%x, %grid) {align_corners = 1, mode = "cubic", padding_mode = "border"} : (tensor<?x3x8x8xf32, #memc.dims<["n"]>>, tensor<?x4x6x2xf32, #memc.dims<["n"]>>) -> tensor<?x?x?x?xf32>
  %1 = "onnx.GridSample"(%v, %vgrid) {mode = "nearest"} : (tensor<1x2x4x4x4xf64>, tensor<1x2x3x5x3xf32>) -> tensor<?x?x?x?x?xf64>
  return %0, %1 : tensor<?x?x?x?xf32>, tensor<?x?x?x?x?xf64>
}

// -----
func.func @affine_grid(%theta: tensor<2x2x3xf32>, %theta3: tensor<2x3x4xf16>, %p: tensor<2x3x4x5xf32>, %p3: tensor<2x1x3x4x5xf32>, %unknown: tensor<4xi64>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?x?xf16>, tensor<?x?x?x?xf32>) {
  %0 = "onnx.Shape"(%p) : (tensor<2x3x4x5xf32>) -> tensor<?xi64>
  %1 = "onnx.AffineGrid"(%theta, %0) {align_corners = 1} : (tensor<2x2x3xf32>, tensor<?xi64>) -> tensor<?x?x?x?xf32>
  %2 = "onnx.Shape"(%p3) : (tensor<2x1x3x4x5xf32>) -> tensor<?xi64>
  %3 = "onnx.AffineGrid"(%theta3, %2) : (tensor<2x3x4xf16>, tensor<?xi64>) -> tensor<?x?x?x?x?xf16>
  %4 = "onnx.AffineGrid"(%theta, %unknown) : (tensor<2x2x3xf32>, tensor<4xi64>) -> tensor<?x?x?x?xf32>
  return %1, %3, %4 : tensor<?x?x?x?xf32>, tensor<?x?x?x?x?xf16>, tensor<?x?x?x?xf32>
}

// -----
// An error only a known size shows: size [3, 1, 4, 5] (from Shape) against theta's batch of 2.
func.func @size_batch(%theta: tensor<2x2x3xf32>, %p: tensor<3x1x4x5xf32>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.Shape"(%p) : (tensor<3x1x4x5xf32>) -> tensor<?xi64>
  %1 = "onnx.AffineGrid"(%theta, %0) : (tensor<2x2x3xf32>, tensor<?xi64>) -> tensor<?x?x?x?xf32>
  return %1 : tensor<?x?x?x?xf32>
}
