// RUN: memc opt %s -p shape-infer --split-input-file
// Convolutions and pools: output sizes from pads, strides, dilations, auto_pad and ceil_mode;
// a symbolic spatial dim survives where the window keeps its size.

func.func @resnet_stem(%x: tensor<?x3x224x224xf32, #memc.dims<["n"]>>, %w: tensor<64x3x7x7xf32>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.Conv"(%x, %w) {pads = [3, 3, 3, 3], strides = [2, 2]} : (tensor<?x3x224x224xf32, #memc.dims<["n"]>>, tensor<64x3x7x7xf32>) -> tensor<?x?x?x?xf32>
  %1 = "onnx.Relu"(%0) : (tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  %2 = "onnx.MaxPool"(%1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : (tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  return %2 : tensor<?x?x?x?xf32>
}

// -----
// SAME_UPPER gives ceil(in / stride); dilation 2 widens a 3x3 kernel to 5.
func.func @same_and_dilation(%x: tensor<1x8x15x10xf32>, %w: tensor<16x8x3x3xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) {
  %0 = "onnx.Conv"(%x, %w) {auto_pad = "SAME_UPPER", strides = [2, 2]} : (tensor<1x8x15x10xf32>, tensor<16x8x3x3xf32>) -> tensor<?x?x?x?xf32>
  %1 = "onnx.Conv"(%x, %w) {dilations = [2, 2]} : (tensor<1x8x15x10xf32>, tensor<16x8x3x3xf32>) -> tensor<?x?x?x?xf32>
  return %0, %1 : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
}

// -----
// Symbolic height and width: kept by a 3x3 stride-1 conv with pads 1, shrunk by 2 without.
func.func @symbolic_spatial(%x: tensor<1x8x?x?xf32, #memc.dims<["h", "w"]>>, %w: tensor<8x8x3x3xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) {
  %0 = "onnx.Conv"(%x, %w) {pads = [1, 1, 1, 1]} : (tensor<1x8x?x?xf32, #memc.dims<["h", "w"]>>, tensor<8x8x3x3xf32>) -> tensor<?x?x?x?xf32>
  %1 = "onnx.Conv"(%x, %w) : (tensor<1x8x?x?xf32, #memc.dims<["h", "w"]>>, tensor<8x8x3x3xf32>) -> tensor<?x?x?x?xf32>
  %2 = "onnx.ConvTranspose"(%x, %w) {output_padding = [1, 1], pads = [1, 1, 1, 1], strides = [2, 2]} : (tensor<1x8x?x?xf32, #memc.dims<["h", "w"]>>, tensor<8x8x3x3xf32>) -> tensor<?x?x?x?xf32>
  return %0, %1, %2 : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
}

// -----
// ceil_mode rounds up, but drops a window that would start in the right padding.
func.func @ceil_mode(%x: tensor<1x1x6x2xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xi64>) {
  %0 = "onnx.AveragePool"(%x) {kernel_shape = [3, 1], strides = [2, 2]} : (tensor<1x1x6x2xf32>) -> tensor<?x?x?x?xf32>
  %1:2 = "onnx.MaxPool"(%x) {ceil_mode = 1, kernel_shape = [3, 1], strides = [2, 2]} : (tensor<1x1x6x2xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xi64>)
  return %0, %1#0, %1#1 : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xi64>
}

// -----
// The classifier head: global pool, Flatten, Gemm with a transposed weight.
func.func @head(%x: tensor<?x512x7x7xf32, #memc.dims<["n"]>>, %w: tensor<1000x512xf32>, %b: tensor<1000xf32>) -> tensor<?x?xf32> {
  %0 = "onnx.GlobalAveragePool"(%x) : (tensor<?x512x7x7xf32, #memc.dims<["n"]>>) -> tensor<?x?x?x?xf32>
  %1 = "onnx.Flatten"(%0) {axis = 1} : (tensor<?x?x?x?xf32>) -> tensor<?x?xf32>
  %2 = "onnx.Gemm"(%1, %w, %b) {transB = 1} : (tensor<?x?xf32>, tensor<1000x512xf32>, tensor<1000xf32>) -> tensor<?x?xf32>
  return %2 : tensor<?x?xf32>
}
