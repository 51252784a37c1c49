// RUN: memc compile %s --emit kernels --split-input-file
// The training forms of convolutional nets. ConvGrad's dX is a transposed convolution (one
// product per tap); its dW multiplies dY per image by the transposed column matrix read straight
// from the input (implicit im2col, no scratch), or, for a depthwise convolution, is
// one loop kernel summing over images and outputs; dB is a reduction. The pool gradients
// gather over the window taps; the batch normalizations are one kernel per channel.

// im2col dW, 2 input channels x 9 taps, 4x4 outputs; dX and dB present.
func.func @conv_grad_im2col(%dy: tensor<1x3x4x4xf32>, %x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xf32>) -> (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>, tensor<3xf32>) {
  %0:3 = "ms.ConvGrad"(%dy, %x, %w) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : (tensor<1x3x4x4xf32>, tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>, tensor<3xf32>)
  return %0#0, %0#1, %0#2 : tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>, tensor<3xf32>
}

// -----
// Depthwise, dW only (dX unused): the direct loop, padding read as 0 through guards.
func.func @conv_grad_depthwise(%dy: tensor<1x2x3x3xf32>, %x: tensor<1x2x3x3xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<2x1x3x3xf32> {
  %0:2 = "ms.ConvGrad"(%dy, %x, %w) {group = 2, kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<2x1x3x3xf32>) -> (tensor<1x2x3x3xf32>, tensor<2x1x3x3xf32>)
  return %0#1 : tensor<2x1x3x3xf32>
}

// -----
func.func @batch_norm_internal(%x: tensor<2x3x2x2xf32>, %p: tensor<3xf32>) -> (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>) {
  %0:5 = "ms.BatchNormInternal"(%x, %p, %p, %p, %p) : (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0, %0#3, %0#4 : tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----
func.func @batch_norm_grad(%dy: tensor<2x3x2x2xf32>, %x: tensor<2x3x2x2xf32>, %p: tensor<3xf32>) -> (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>) {
  %0:3 = "ms.BatchNormalizationGrad"(%dy, %x, %p, %p, %p) : (tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0, %0#1, %0#2 : tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----
func.func @max_pool_grad(%dy: tensor<1x2x2x2xf32>, %i: tensor<1x2x2x2xi64>) -> tensor<1x2x4x3xf32> {
  %0 = "onnx.MaxPoolGrad"(%dy, %i) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xi64>) -> tensor<1x2x4x3xf32>
  return %0 : tensor<1x2x4x3xf32>
}

// -----
func.func @average_pool_grad(%dy: tensor<1x2x2x2xf32>) -> tensor<1x2x4x4xf32> {
  %0 = "onnx.AveragePoolGrad"(%dy) {kernel_shape = [2, 2], strides = [2, 2]} : (tensor<1x2x2x2xf32>) -> tensor<1x2x4x4xf32>
  return %0 : tensor<1x2x4x4xf32>
}

// -----
// dY's spatial dims must be the pool's output sizes over dX: 4x4 pools to 2x2, not 3x3.
func.func @max_pool_grad_sizes(%dy: tensor<1x2x3x3xf32>, %i: tensor<1x2x3x3xi64>) -> tensor<1x2x4x4xf32> {
  %0 = "onnx.MaxPoolGrad"(%dy, %i) {kernel_shape = [2, 2], strides = [2, 2]} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xi64>) -> tensor<1x2x4x4xf32>
  return %0 : tensor<1x2x4x4xf32>
}
