// RUN: memc compile %s --emit kernels --split-input-file
// Convolution forms. A 3x3 convolution with enough channels and pixels is one product whose
// `b` is its column matrix read straight from the input (implicit im2col: no scratch, the
// window per axis printed as `size:stride k/s/d pad -> out`; its constant weight also packed,
// `a packed`, which the CPU's direct convolution reads); a depthwise one with a constant
// weight is that product per group, `K` its taps; a 1x1 one is one product per image, no
// scratch.

// im2col: 4 input channels x 9 taps, 8x8 output pixels, padded by 1.
func.func @conv_im2col(%x: tensor<1x4x8x8xf32>) -> tensor<1x8x8x8xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<8x4x3x3xf32>} : () -> tensor<8x4x3x3xf32>
  %1 = "memc.weight"() {value = dense_resource<"b"> : tensor<8xf32>} : () -> tensor<8xf32>
  %2 = "onnx.Conv"(%x, %0, %1) {pads = [1, 1, 1, 1]} : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>) -> tensor<1x8x8x8xf32>
  return %2 : tensor<1x8x8x8xf32>
}

// -----
// Depthwise (group = channels): one input channel per group, a product of K = 9 per group.
func.func @conv_depthwise(%x: tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<4x1x3x3xf32>} : () -> tensor<4x1x3x3xf32>
  %1 = "onnx.Conv"(%x, %0) {group = 4, pads = [1, 1, 1, 1]} : (tensor<1x4x6x6xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %1 : tensor<1x4x6x6xf32>
}

// -----
// Grouped (2 groups of 2 channels), stride 2, no padding.
func.func @conv_grouped(%x: tensor<1x4x5x5xf32>) -> tensor<1x4x2x2xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<4x2x3x3xf32>} : () -> tensor<4x2x3x3xf32>
  %1 = "onnx.Conv"(%x, %0) {group = 2, strides = [2, 2]} : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x2x2xf32>
  return %1 : tensor<1x4x2x2xf32>
}

// -----
// 1x1: already a product, W [8x4] @ X [4 x 16 pixels] per image.
func.func @conv_1x1(%x: tensor<2x4x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<8x4x1x1xf32>} : () -> tensor<8x4x1x1xf32>
  %1 = "onnx.Conv"(%x, %0) : (tensor<2x4x4x4xf32>, tensor<8x4x1x1xf32>) -> tensor<2x8x4x4xf32>
  return %1 : tensor<2x8x4x4xf32>
}
