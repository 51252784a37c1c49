// RUN: memc opt %s -p shape-infer --split-input-file
// The window functions: `size` points (Size gives 6) of `output_datatype`. DFT: the axis
// (default -2) gets `dft_length` points, `length / 2 + 1` forward one-sided; an inverse
// one-sided transform defaults to `2 * (n - 1)` points and is real. STFT: 1 + (16 - 4) / 3
// = 5 frames of 4 points, 3 bins one-sided. Then the errors known values reveal: a DFT along
// the last dim, and a window shorter than `frame_length`.

func.func @windows(%p: tensor<6xf32>) -> (tensor<?xf32>, tensor<?xf64>) {
  %0 = "onnx.Size"(%p) : (tensor<6xf32>) -> tensor<i64>
  %1 = "onnx.HannWindow"(%0) : (tensor<i64>) -> tensor<?xf32>
  %2 = "onnx.BlackmanWindow"(%0) {output_datatype = f64, periodic = 0} : (tensor<i64>) -> tensor<?xf64>
  return %1, %2 : tensor<?xf32>, tensor<?xf64>
}

// -----
func.func @dft(%x: tensor<3x8x1xf32>, %c: tensor<3x5x2xf64>, %p: tensor<6xf32>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf64>, tensor<?x?x?xf32>) {
  %0 = "onnx.DFT"(%x) {onesided = 1} : (tensor<3x8x1xf32>) -> tensor<?x?x?xf32>
  %1 = "onnx.DFT"(%c) {inverse = 1, onesided = 1} : (tensor<3x5x2xf64>) -> tensor<?x?x?xf64>
  %2 = "onnx.Size"(%p) : (tensor<6xf32>) -> tensor<i64>
  %3 = "onnx.DFT"(%x, %2) : (tensor<3x8x1xf32>, tensor<i64>) -> tensor<?x?x?xf32>
  return %0, %1, %3 : tensor<?x?x?xf32>, tensor<?x?x?xf64>, tensor<?x?x?xf32>
}

// -----
func.func @stft(%s: tensor<2x16x1xf32>, %w: tensor<4xf32>, %p: tensor<3xf32>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.Size"(%p) : (tensor<3xf32>) -> tensor<i64>
  %1 = "onnx.STFT"(%s, %0, %w) : (tensor<2x16x1xf32>, tensor<i64>, tensor<4xf32>) -> tensor<?x?x?x?xf32>
  return %1 : tensor<?x?x?x?xf32>
}

// -----
// MelWeightMatrix: (dft_length / 2 + 1, num_mel_bins) = (5, 4) of `output_datatype`.
func.func @mel(%four: tensor<4xf32>, %eight: tensor<8xf32>, %hz: tensor<f32>) -> tensor<?x?xf64> {
  %0 = "onnx.Size"(%four) : (tensor<4xf32>) -> tensor<i64>
  %1 = "onnx.Size"(%eight) : (tensor<8xf32>) -> tensor<i64>
  %2 = "onnx.MelWeightMatrix"(%0, %1, %1, %hz, %hz) {output_datatype = f64} : (tensor<i64>, tensor<i64>, tensor<i64>, tensor<f32>, tensor<f32>) -> tensor<?x?xf64>
  return %2 : tensor<?x?xf64>
}

// -----
// The axis may not be the last dim (the real and imaginary parts): Size gives 2.
func.func @dft_last_axis(%x: tensor<2x8x2xf32>, %p: tensor<2xf32>) -> tensor<2x8x2xf32> {
  %0 = "onnx.Size"(%p) : (tensor<2xf32>) -> tensor<i64>
  %1 = "memc.none"() : () -> none
  %2 = "onnx.DFT"(%x, %1, %0) : (tensor<2x8x2xf32>, none, tensor<i64>) -> tensor<2x8x2xf32>
  return %2 : tensor<2x8x2xf32>
}

// -----
func.func @stft_window_length(%s: tensor<1x16x1xf32>, %step: tensor<i64>, %w: tensor<4xf32>, %p: tensor<6xf32>) -> tensor<1x?x?x2xf32> {
  %0 = "onnx.Size"(%p) : (tensor<6xf32>) -> tensor<i64>
  %1 = "onnx.STFT"(%s, %step, %w, %0) : (tensor<1x16x1xf32>, tensor<i64>, tensor<4xf32>, tensor<i64>) -> tensor<1x?x?x2xf32>
  return %1 : tensor<1x?x?x2xf32>
}
