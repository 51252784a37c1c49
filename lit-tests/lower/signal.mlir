// RUN: memc compile %s --emit kernels --split-input-file
// The window functions: one map kernel over the points, in f64. DFT and STFT: one kernel, the
// outer space the result's complex points, two sum stages (real and imaginary parts, in f64,
// the twiddle angle from `(k * n) mod L`) over the input points, then one stage storing both
// parts (scaled by 1 / L for an inverse transform).

func.func @hann(%p: tensor<5xf32>) -> tensor<5xf32> {
  %0 = "onnx.Size"(%p) : (tensor<5xf32>) -> tensor<i64>
  %1 = "onnx.HannWindow"(%0) {periodic = 0} : (tensor<i64>) -> tensor<5xf32>
  return %1 : tensor<5xf32>
}

// -----
// A forward transform of a complex input along axis -2.
func.func @dft_complex(%x: tensor<2x6x2xf32>) -> tensor<2x6x2xf32> {
  %0 = "onnx.DFT"(%x) : (tensor<2x6x2xf32>) -> tensor<2x6x2xf32>
  return %0 : tensor<2x6x2xf32>
}

// -----
// An inverse one-sided transform (irfft): 4 bins summed into 6 real points, bins 1 and 2
// counted twice.
func.func @irfft(%x: tensor<4x2xf32>) -> tensor<6x1xf32> {
  %0 = "onnx.DFT"(%x) {inverse = 1, onesided = 1} : (tensor<4x2xf32>) -> tensor<6x1xf32>
  return %0 : tensor<6x1xf32>
}

// -----
// STFT with a window: frames are strided views of the signal (step 2).
func.func @stft(%s: tensor<1x8x1xf32>, %w: tensor<4xf32>, %p: tensor<2xf32>) -> tensor<1x3x3x2xf32> {
  %0 = "onnx.Size"(%p) : (tensor<2xf32>) -> tensor<i64>
  %1 = "onnx.STFT"(%s, %0, %w) : (tensor<1x8x1xf32>, tensor<i64>, tensor<4xf32>) -> tensor<1x3x3x2xf32>
  return %1 : tensor<1x3x3x2xf32>
}

// -----
// MelWeightMatrix: 2 bands over the 5 bins of a 8-point spectrum at 8 Hz between 0 and 4 Hz
// (the operands Size and Cast of Size: 2, 8, 8, 0, 4); the band edges become select chains.
func.func @mel(%two: tensor<2xf32>, %eight: tensor<8xf32>, %none: tensor<0xf32>, %four: tensor<4xf32>) -> tensor<5x2xf32> {
  %0 = "onnx.Size"(%two) : (tensor<2xf32>) -> tensor<i64>
  %1 = "onnx.Size"(%eight) : (tensor<8xf32>) -> tensor<i64>
  %2 = "onnx.Size"(%none) : (tensor<0xf32>) -> tensor<i64>
  %3 = "onnx.Cast"(%2) {to = f32} : (tensor<i64>) -> tensor<f32>
  %4 = "onnx.Size"(%four) : (tensor<4xf32>) -> tensor<i64>
  %5 = "onnx.Cast"(%4) {to = f32} : (tensor<i64>) -> tensor<f32>
  %6 = "onnx.MelWeightMatrix"(%0, %1, %1, %3, %5) : (tensor<i64>, tensor<i64>, tensor<i64>, tensor<f32>, tensor<f32>) -> tensor<5x2xf32>
  return %6 : tensor<5x2xf32>
}

// -----
// Errors: a window `size`, a DFT length and mel band edges known only at run time.
func.func @unsupported(%n: tensor<i64>, %x: tensor<6x1xf32>, %len: tensor<i64>, %hz: tensor<f32>, %four: tensor<4xf32>, %eight: tensor<8xf32>) -> (tensor<4xf32>, tensor<6x2xf32>, tensor<5x4xf32>) {
  %0 = "onnx.HammingWindow"(%n) : (tensor<i64>) -> tensor<4xf32>
  %1 = "onnx.DFT"(%x, %len) : (tensor<6x1xf32>, tensor<i64>) -> tensor<6x2xf32>
  %2 = "onnx.Size"(%four) : (tensor<4xf32>) -> tensor<i64>
  %3 = "onnx.Size"(%eight) : (tensor<8xf32>) -> tensor<i64>
  %4 = "onnx.MelWeightMatrix"(%2, %3, %3, %hz, %hz) : (tensor<i64>, tensor<i64>, tensor<i64>, tensor<f32>, tensor<f32>) -> tensor<5x4xf32>
  return %0, %1, %4 : tensor<4xf32>, tensor<6x2xf32>, tensor<5x4xf32>
}
