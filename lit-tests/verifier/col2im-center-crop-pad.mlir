// RUN: memc opt %s --split-input-file
// Col2Im's and CenterCropPad's rules beyond counts and types, each an error naming what is
// wrong; the first case is valid and prints back unchanged.

// Valid: Col2Im of [1, 2 * 4, 9] blocks into a 4x4 image with 2x2 blocks; CenterCropPad of
// axes [1, 2] to a two-entry shape.
func.func @valid(%x: tensor<1x8x9xf32>, %image: tensor<2xi64>, %block: tensor<2xi64>, %y: tensor<3x4x5xf32>, %shape: tensor<2xi64>) -> (tensor<1x2x?x?xf32>, tensor<3x?x?xf32>) {
  %0 = "onnx.Col2Im"(%x, %image, %block) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]} : (tensor<1x8x9xf32>, tensor<2xi64>, tensor<2xi64>) -> tensor<1x2x?x?xf32>
  %1 = "onnx.CenterCropPad"(%y, %shape) {axes = [1, -1]} : (tensor<3x4x5xf32>, tensor<2xi64>) -> tensor<3x?x?xf32>
  return %0, %1 : tensor<1x2x?x?xf32>, tensor<3x?x?xf32>
}

// -----
// Col2Im's input must be 3-d.
func.func @col2im_rank(%x: tensor<8x9xf32>, %image: tensor<2xi64>, %block: tensor<2xi64>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.Col2Im"(%x, %image, %block) : (tensor<8x9xf32>, tensor<2xi64>, tensor<2xi64>) -> tensor<?x?x?x?xf32>
  return %0 : tensor<?x?x?x?xf32>
}

// -----
// image_shape and block_shape of different lengths.
func.func @col2im_lengths(%x: tensor<1x8x9xf32>, %image: tensor<2xi64>, %block: tensor<3xi64>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.Col2Im"(%x, %image, %block) : (tensor<1x8x9xf32>, tensor<2xi64>, tensor<3xi64>) -> tensor<?x?x?x?xf32>
  return %0 : tensor<?x?x?x?xf32>
}

// -----
// Two spatial axes need four pads.
func.func @col2im_pads(%x: tensor<1x8x9xf32>, %image: tensor<2xi64>, %block: tensor<2xi64>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.Col2Im"(%x, %image, %block) {pads = [1, 1]} : (tensor<1x8x9xf32>, tensor<2xi64>, tensor<2xi64>) -> tensor<?x?x?x?xf32>
  return %0 : tensor<?x?x?x?xf32>
}

// -----
// A stride of 0.
func.func @col2im_stride(%x: tensor<1x8x9xf32>, %image: tensor<2xi64>, %block: tensor<2xi64>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.Col2Im"(%x, %image, %block) {strides = [1, 0]} : (tensor<1x8x9xf32>, tensor<2xi64>, tensor<2xi64>) -> tensor<?x?x?x?xf32>
  return %0 : tensor<?x?x?x?xf32>
}

// -----
// CenterCropPad: two axes but three shape entries.
func.func @center_crop_pad_shape(%y: tensor<3x4x5xf32>, %shape: tensor<3xi64>) -> tensor<?x?x?xf32> {
  %0 = "onnx.CenterCropPad"(%y, %shape) {axes = [0, 1]} : (tensor<3x4x5xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  return %0 : tensor<?x?x?xf32>
}

// -----
// CenterCropPad: axis 1 listed twice (as 1 and -2).
func.func @center_crop_pad_axes(%y: tensor<3x4x5xf32>, %shape: tensor<2xi64>) -> tensor<?x?x?xf32> {
  %0 = "onnx.CenterCropPad"(%y, %shape) {axes = [1, -2]} : (tensor<3x4x5xf32>, tensor<2xi64>) -> tensor<?x?x?xf32>
  return %0 : tensor<?x?x?xf32>
}
