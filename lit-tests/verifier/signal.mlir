// RUN: memc opt %s --split-input-file
// The window functions, DFT and STFT: the ops printed, parsed and verified, then each error
// their verifier hooks and shape functions report.

func.func @valid(%n: tensor<i64>, %x: tensor<2x8x1xf32>, %len: tensor<i64>, %axis: tensor<i64>, %s: tensor<1x16x2xf32>, %step: tensor<i64>, %w: tensor<4xf32>) -> (tensor<?xf32>, tensor<?xf64>, tensor<?xf16>, tensor<2x?x1xf32>, tensor<1x?x?x2xf32>) {
  %0 = "onnx.HannWindow"(%n) : (tensor<i64>) -> tensor<?xf32>
  %1 = "onnx.HammingWindow"(%n) {output_datatype = f64, periodic = 0} : (tensor<i64>) -> tensor<?xf64>
  %2 = "onnx.BlackmanWindow"(%n) {output_datatype = f16} : (tensor<i64>) -> tensor<?xf16>
  %3 = "onnx.DFT"(%x, %len, %axis) {inverse = 1, onesided = 1} : (tensor<2x8x1xf32>, tensor<i64>, tensor<i64>) -> tensor<2x?x1xf32>
  %4 = "onnx.STFT"(%s, %step, %w) : (tensor<1x16x2xf32>, tensor<i64>, tensor<4xf32>) -> tensor<1x?x?x2xf32>
  return %0, %1, %2, %3, %4 : tensor<?xf32>, tensor<?xf64>, tensor<?xf16>, tensor<2x?x1xf32>, tensor<1x?x?x2xf32>
}

// -----
func.func @periodic_flag(%n: tensor<i64>) -> tensor<?xf32> {
  %0 = "onnx.HannWindow"(%n) {periodic = 2} : (tensor<i64>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----
func.func @size_not_scalar(%n: tensor<1xi64>) -> tensor<?xf32> {
  %0 = "onnx.HammingWindow"(%n) : (tensor<1xi64>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----
func.func @dft_components(%x: tensor<2x8x3xf32>) -> tensor<2x8x2xf32> {
  %0 = "onnx.DFT"(%x) : (tensor<2x8x3xf32>) -> tensor<2x8x2xf32>
  return %0 : tensor<2x8x2xf32>
}

// -----
func.func @dft_length_not_scalar(%x: tensor<2x8x2xf32>, %len: tensor<1xi64>) -> tensor<2x8x2xf32> {
  %0 = "onnx.DFT"(%x, %len) : (tensor<2x8x2xf32>, tensor<1xi64>) -> tensor<2x8x2xf32>
  return %0 : tensor<2x8x2xf32>
}

// -----
func.func @stft_signal_rank(%s: tensor<16x1xf32>, %step: tensor<i64>) -> tensor<1x?x?x2xf32> {
  %0 = "onnx.STFT"(%s, %step) : (tensor<16x1xf32>, tensor<i64>) -> tensor<1x?x?x2xf32>
  return %0 : tensor<1x?x?x2xf32>
}

// -----
func.func @stft_window_rank(%s: tensor<1x16x1xf32>, %step: tensor<i64>, %w: tensor<2x4xf32>) -> tensor<1x?x?x2xf32> {
  %0 = "onnx.STFT"(%s, %step, %w) : (tensor<1x16x1xf32>, tensor<i64>, tensor<2x4xf32>) -> tensor<1x?x?x2xf32>
  return %0 : tensor<1x?x?x2xf32>
}

// -----
func.func @mel_operand_not_scalar(%n: tensor<1xi64>, %l: tensor<i64>, %hz: tensor<f32>) -> tensor<?x?xf32> {
  %0 = "onnx.MelWeightMatrix"(%n, %l, %l, %hz, %hz) : (tensor<1xi64>, tensor<i64>, tensor<i64>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}
