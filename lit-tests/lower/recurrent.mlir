// RUN: memc compile %s --emit kernels --split-input-file
// RNN, GRU and LSTM unroll their time loop: X W^T for every token is one contraction, the
// states start in scratch, and each step is H R^T (a contraction) and one gate kernel over
// [batch, hidden] that writes the new state and the step's Y (the last step also Y_h, Y_c).
// GRU without linear_before_reset adds a reset kernel and a second contraction per step;
// LSTM's sequence_lens selects between the new and the kept state; the reverse direction
// visits the tokens backwards.

func.func @rnn(%x: tensor<2x1x2xf32>, %w: tensor<1x3x2xf32>, %r: tensor<1x3x3xf32>, %b: tensor<1x6xf32>) -> (tensor<2x1x1x3xf32>, tensor<1x1x3xf32>) {
  %0:2 = "onnx.RNN"(%x, %w, %r, %b) : (tensor<2x1x2xf32>, tensor<1x3x2xf32>, tensor<1x3x3xf32>, tensor<1x6xf32>) -> (tensor<2x1x1x3xf32>, tensor<1x1x3xf32>)
  return %0#0, %0#1 : tensor<2x1x1x3xf32>, tensor<1x1x3xf32>
}

// -----
func.func @gru_reverse(%x: tensor<2x1x2xf32>, %w: tensor<1x6x2xf32>, %r: tensor<1x6x2xf32>) -> tensor<1x1x2xf32> {
  %0:2 = "onnx.GRU"(%x, %w, %r) {direction = "reverse"} : (tensor<2x1x2xf32>, tensor<1x6x2xf32>, tensor<1x6x2xf32>) -> (tensor<2x1x1x2xf32>, tensor<1x1x2xf32>)
  return %0#1 : tensor<1x1x2xf32>
}

// -----
func.func @lstm_lens(%x: tensor<1x2x2xf32>, %w: tensor<1x8x2xf32>, %r: tensor<1x8x2xf32>, %lens: tensor<2xi32>) -> (tensor<1x2x2xf32>, tensor<1x2x2xf32>) {
  %none = "memc.none"() : () -> none
  %0:3 = "onnx.LSTM"(%x, %w, %r, %none, %lens) {clip = 2.0 : f64} : (tensor<1x2x2xf32>, tensor<1x8x2xf32>, tensor<1x8x2xf32>, none, tensor<2xi32>) -> (tensor<1x1x2x2xf32>, tensor<1x2x2xf32>, tensor<1x2x2xf32>)
  return %0#1, %0#2 : tensor<1x2x2xf32>, tensor<1x2x2xf32>
}

// -----
// Other activations have no kernel yet.
func.func @rnn_relu(%x: tensor<2x1x2xf32>, %w: tensor<1x3x2xf32>, %r: tensor<1x3x3xf32>) -> tensor<1x1x3xf32> {
  %0:2 = "onnx.RNN"(%x, %w, %r) {activations = ["Relu"]} : (tensor<2x1x2xf32>, tensor<1x3x2xf32>, tensor<1x3x3xf32>) -> (tensor<2x1x1x3xf32>, tensor<1x1x3xf32>)
  return %0#1 : tensor<1x1x3xf32>
}
