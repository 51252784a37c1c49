// RUN: memc compile %s --emit kernels --split-input-file
// Col2Im: one loop kernel over the image (outer) and the block (inner), each tap's block
// found by index arithmetic (divisible by the stride, inside the block grid) and read
// through `load ... indirect`, summed. CenterCropPad: a guarded view, like a constant Pad
// by zero, whose offset crops.

// Col2Im of 2x2 blocks, stride 2 along columns, one pad on each side of the columns, into a
// 3x4 image: blocks (3 - 2) + 1 = 2 by (4 + 2 - 2) / 2 + 1 = 3, so 6 of them.
func.func @col2im(%x: tensor<1x8x6xf32>, %image: tensor<3x4xf32>, %block: tensor<2x2xf32>) -> tensor<1x2x3x4xf32> {
  %0 = "onnx.Shape"(%image) : (tensor<3x4xf32>) -> tensor<2xi64>
  %1 = "onnx.Shape"(%block) : (tensor<2x2xf32>) -> tensor<2xi64>
  %2 = "onnx.Col2Im"(%x, %0, %1) {strides = [1, 2], pads = [0, 1, 0, 1]} : (tensor<1x8x6xf32>, tensor<2xi64>, tensor<2xi64>) -> tensor<1x2x3x4xf32>
  return %2 : tensor<1x2x3x4xf32>
}

// -----
// CenterCropPad: axis 0 cropped from 5 to 2 (starting at row 1), axis 1 padded from 3 to 6
// (one column before, two after).
func.func @center_crop_pad(%y: tensor<5x3xf32>, %dims: tensor<2x6xf32>) -> tensor<2x6xf32> {
  %0 = "onnx.Shape"(%dims) : (tensor<2x6xf32>) -> tensor<2xi64>
  %1 = "onnx.CenterCropPad"(%y, %0) : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2x6xf32>
  return %1 : tensor<2x6xf32>
}
