// RUN: memc compile %s --emit kernels --split-input-file
// GridSample: one map kernel over the output; the grid's coordinates are loaded (the last
// grid axis, x first), denormalized in f32, and every tap is a `load ... indirect` of X at
// indices clamped into the axis. AffineGrid: one map kernel, each coordinate a row of theta
// times the homogeneous point of the output index.

// Bilinear with zeros padding: four taps, each read only where inside X.
func.func @bilinear_zeros(%x: tensor<1x2x4x5xf32>, %grid: tensor<1x3x2x2xf32>) -> tensor<1x2x3x2xf32> {
  %0 = "onnx.GridSample"(%x, %grid) : (tensor<1x2x4x5xf32>, tensor<1x3x2x2xf32>) -> tensor<1x2x3x2xf32>
  return %0 : tensor<1x2x3x2xf32>
}

// -----
// Nearest with reflection and align_corners: the rounded coordinate is reflected into
// [0, d - 1] (in f64), then the integer index again, and truncated.
func.func @nearest_reflection(%x: tensor<1x1x3x4xf32>, %grid: tensor<1x2x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %0 = "onnx.GridSample"(%x, %grid) {align_corners = 1, mode = "nearest", padding_mode = "reflection"} : (tensor<1x1x3x4xf32>, tensor<1x2x2x2xf32>) -> tensor<1x1x2x2xf32>
  return %0 : tensor<1x1x2x2xf32>
}

// -----
// AffineGrid with a size known from Shape ([1, 1, 2, 3]).
func.func @affine_grid(%theta: tensor<1x2x3xf32>, %p: tensor<1x1x2x3xf32>) -> tensor<1x2x3x2xf32> {
  %0 = "onnx.Shape"(%p) : (tensor<1x1x2x3xf32>) -> tensor<4xi64>
  %1 = "onnx.AffineGrid"(%theta, %0) : (tensor<1x2x3xf32>, tensor<4xi64>) -> tensor<1x2x3x2xf32>
  return %1 : tensor<1x2x3x2xf32>
}

// -----
// Errors: a `size` known only at run time (the declared grid shape does not stand for it),
// and interpolation of integers (the reference's integer weights are not supported).
func.func @unsupported(%theta: tensor<1x2x3xf32>, %size: tensor<4xi64>, %x: tensor<1x1x3x4xi32>, %grid: tensor<1x2x2x2xf32>) -> (tensor<1x2x3x2xf32>, tensor<1x1x2x2xi32>) {
  %0 = "onnx.AffineGrid"(%theta, %size) : (tensor<1x2x3xf32>, tensor<4xi64>) -> tensor<1x2x3x2xf32>
  %1 = "onnx.GridSample"(%x, %grid) : (tensor<1x1x3x4xi32>, tensor<1x2x2x2xf32>) -> tensor<1x1x2x2xi32>
  return %0, %1 : tensor<1x2x3x2xf32>, tensor<1x1x2x2xi32>
}
