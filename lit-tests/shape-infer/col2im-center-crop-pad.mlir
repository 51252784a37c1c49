// RUN: memc opt %s -p shape-infer --split-input-file
// Col2Im and CenterCropPad with known shape operands (`Shape` of static placeholder
// arguments: `Shape(tensor<4x5xf32>)` is [4, 5]), and the errors their values can show.

// Col2Im: [2, 3 * 4, 12] columns of 2x2 blocks into a 4x5 image (3 x 4 = 12 blocks at
// stride 1): [2, 3, 4, 5]. With an unknown image_shape the spatial rank is still known.
func.func @col2im(%x: tensor<2x12x12xf32>, %image: tensor<4x5xf32>, %block: tensor<2x2xf32>, %shape: tensor<2xi64>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) {
  %0 = "onnx.Shape"(%image) : (tensor<4x5xf32>) -> tensor<?xi64>
  %1 = "onnx.Shape"(%block) : (tensor<2x2xf32>) -> tensor<?xi64>
  %2 = "onnx.Col2Im"(%x, %0, %1) : (tensor<2x12x12xf32>, tensor<?xi64>, tensor<?xi64>) -> tensor<?x?x?x?xf32>
  %3 = "onnx.Col2Im"(%x, %shape, %1) : (tensor<2x12x12xf32>, tensor<2xi64>, tensor<?xi64>) -> tensor<?x?x?x?xf32>
  return %2, %3 : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
}

// -----
// Col2Im: a 4x5 image in 2x2 blocks has 12 blocks, not 10.
func.func @col2im_blocks(%x: tensor<2x12x10xf32>, %image: tensor<4x5xf32>, %block: tensor<2x2xf32>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.Shape"(%image) : (tensor<4x5xf32>) -> tensor<?xi64>
  %1 = "onnx.Shape"(%block) : (tensor<2x2xf32>) -> tensor<?xi64>
  %2 = "onnx.Col2Im"(%x, %0, %1) : (tensor<2x12x10xf32>, tensor<?xi64>, tensor<?xi64>) -> tensor<?x?x?x?xf32>
  return %2 : tensor<?x?x?x?xf32>
}

// -----
// Col2Im: 10 rows are not a multiple of the 2x2 block's 4 elements.
func.func @col2im_rows(%x: tensor<2x10x12xf32>, %image: tensor<4x5xf32>, %block: tensor<2x2xf32>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.Shape"(%image) : (tensor<4x5xf32>) -> tensor<?xi64>
  %1 = "onnx.Shape"(%block) : (tensor<2x2xf32>) -> tensor<?xi64>
  %2 = "onnx.Col2Im"(%x, %0, %1) : (tensor<2x10x12xf32>, tensor<?xi64>, tensor<?xi64>) -> tensor<?x?x?x?xf32>
  return %2 : tensor<?x?x?x?xf32>
}

// -----
// CenterCropPad to [4, 5] on axes [0, 2] (the default: every axis with a rank-2 input);
// with an unknown shape the cropped or padded axes are unknown.
func.func @center_crop_pad(%y: tensor<3x9x6xf32>, %z: tensor<7x2xf32>, %dims: tensor<4x5xf32>, %shape: tensor<2xi64>) -> (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?x?x?xf32>) {
  %0 = "onnx.Shape"(%dims) : (tensor<4x5xf32>) -> tensor<?xi64>
  %1 = "onnx.CenterCropPad"(%y, %0) {axes = [0, 2]} : (tensor<3x9x6xf32>, tensor<?xi64>) -> tensor<?x?x?xf32>
  %2 = "onnx.CenterCropPad"(%z, %0) : (tensor<7x2xf32>, tensor<?xi64>) -> tensor<?x?xf32>
  %3 = "onnx.CenterCropPad"(%y, %shape) {axes = [0, 2]} : (tensor<3x9x6xf32>, tensor<2xi64>) -> tensor<?x?x?xf32>
  return %1, %2, %3 : tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?x?x?xf32>
}
