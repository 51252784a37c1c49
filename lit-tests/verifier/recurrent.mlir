// RUN: memc opt %s --split-input-file
// RNN, GRU and LSTM: well-formed ones print back (layout 0 and 1, bidirectional, optional
// operands left out); each rule between X, W, R, B, the states and the attributes has its error.

func.func @cells(%x: tensor<2x3x4xf32>, %w: tensor<1x5x4xf32>, %r: tensor<1x5x5xf32>, %b: tensor<1x10xf32>, %gw: tensor<2x15x4xf32>, %gr: tensor<2x15x5xf32>, %lw: tensor<1x20x4xf32>, %lr: tensor<1x20x5xf32>, %lens: tensor<3xi32>, %h: tensor<1x3x5xf32>, %p: tensor<1x15xf32>) -> (tensor<2x1x3x5xf32>, tensor<1x3x5xf32>, tensor<2x2x3x5xf32>, tensor<2x1x3x5xf32>, tensor<1x3x5xf32>, tensor<1x3x5xf32>) {
  %none = "memc.none"() : () -> none
  %0:2 = "onnx.RNN"(%x, %w, %r, %b) {hidden_size = 5} : (tensor<2x3x4xf32>, tensor<1x5x4xf32>, tensor<1x5x5xf32>, tensor<1x10xf32>) -> (tensor<2x1x3x5xf32>, tensor<1x3x5xf32>)
  %1:2 = "onnx.GRU"(%x, %gw, %gr) {direction = "bidirectional", linear_before_reset = 1} : (tensor<2x3x4xf32>, tensor<2x15x4xf32>, tensor<2x15x5xf32>) -> (tensor<2x2x3x5xf32>, tensor<2x3x5xf32>)
  %2:3 = "onnx.LSTM"(%x, %lw, %lr, %none, %lens, %h, %h, %p) {clip = 3.0 : f64} : (tensor<2x3x4xf32>, tensor<1x20x4xf32>, tensor<1x20x5xf32>, none, tensor<3xi32>, tensor<1x3x5xf32>, tensor<1x3x5xf32>, tensor<1x15xf32>) -> (tensor<2x1x3x5xf32>, tensor<1x3x5xf32>, tensor<1x3x5xf32>)
  return %0#0, %0#1, %1#0, %2#0, %2#1, %2#2 : tensor<2x1x3x5xf32>, tensor<1x3x5xf32>, tensor<2x2x3x5xf32>, tensor<2x1x3x5xf32>, tensor<1x3x5xf32>, tensor<1x3x5xf32>
}

// -----
func.func @rnn_batchwise(%x: tensor<3x2x4xf32>, %w: tensor<1x5x4xf32>, %r: tensor<1x5x5xf32>) -> (tensor<3x2x1x5xf32>, tensor<3x1x5xf32>) {
  %0:2 = "onnx.RNN"(%x, %w, %r) {layout = 1} : (tensor<3x2x4xf32>, tensor<1x5x4xf32>, tensor<1x5x5xf32>) -> (tensor<3x2x1x5xf32>, tensor<3x1x5xf32>)
  return %0#0, %0#1 : tensor<3x2x1x5xf32>, tensor<3x1x5xf32>
}

// -----
func.func @directions_disagree(%x: tensor<2x3x4xf32>, %w: tensor<1x5x4xf32>, %r: tensor<1x5x5xf32>) -> tensor<2x2x3x5xf32> {
  %0 = "onnx.RNN"(%x, %w, %r) {direction = "bidirectional"} : (tensor<2x3x4xf32>, tensor<1x5x4xf32>, tensor<1x5x5xf32>) -> tensor<2x2x3x5xf32>
  return %0 : tensor<2x2x3x5xf32>
}

// -----
func.func @gate_rows(%x: tensor<2x3x4xf32>, %w: tensor<1x12x4xf32>, %r: tensor<1x12x5xf32>) -> tensor<2x1x3x5xf32> {
  %0 = "onnx.GRU"(%x, %w, %r) : (tensor<2x3x4xf32>, tensor<1x12x4xf32>, tensor<1x12x5xf32>) -> tensor<2x1x3x5xf32>
  return %0 : tensor<2x1x3x5xf32>
}

// -----
func.func @bias_shape(%x: tensor<2x3x4xf32>, %w: tensor<1x5x4xf32>, %r: tensor<1x5x5xf32>, %b: tensor<1x5xf32>) -> tensor<2x1x3x5xf32> {
  %0 = "onnx.RNN"(%x, %w, %r, %b) : (tensor<2x3x4xf32>, tensor<1x5x4xf32>, tensor<1x5x5xf32>, tensor<1x5xf32>) -> tensor<2x1x3x5xf32>
  return %0 : tensor<2x1x3x5xf32>
}

// -----
func.func @hidden_size_attr(%x: tensor<2x3x4xf32>, %w: tensor<1x5x4xf32>, %r: tensor<1x5x5xf32>) -> tensor<2x1x3x5xf32> {
  %0 = "onnx.RNN"(%x, %w, %r) {hidden_size = 4} : (tensor<2x3x4xf32>, tensor<1x5x4xf32>, tensor<1x5x5xf32>) -> tensor<2x1x3x5xf32>
  return %0 : tensor<2x1x3x5xf32>
}

// -----
func.func @input_size(%x: tensor<2x3x3xf32>, %w: tensor<1x5x4xf32>, %r: tensor<1x5x5xf32>) -> tensor<2x1x3x5xf32> {
  %0 = "onnx.RNN"(%x, %w, %r) : (tensor<2x3x3xf32>, tensor<1x5x4xf32>, tensor<1x5x5xf32>) -> tensor<2x1x3x5xf32>
  return %0 : tensor<2x1x3x5xf32>
}

// -----
func.func @initial_h_shape(%x: tensor<2x3x4xf32>, %w: tensor<1x5x4xf32>, %r: tensor<1x5x5xf32>, %h: tensor<1x3x4xf32>) -> tensor<2x1x3x5xf32> {
  %none = "memc.none"() : () -> none
  %0 = "onnx.RNN"(%x, %w, %r, %none, %none, %h) : (tensor<2x3x4xf32>, tensor<1x5x4xf32>, tensor<1x5x5xf32>, none, none, tensor<1x3x4xf32>) -> tensor<2x1x3x5xf32>
  return %0 : tensor<2x1x3x5xf32>
}

// -----
func.func @peepholes_shape(%x: tensor<2x3x4xf32>, %w: tensor<1x20x4xf32>, %r: tensor<1x20x5xf32>, %p: tensor<1x20xf32>) -> tensor<2x1x3x5xf32> {
  %none = "memc.none"() : () -> none
  %0 = "onnx.LSTM"(%x, %w, %r, %none, %none, %none, %none, %p) : (tensor<2x3x4xf32>, tensor<1x20x4xf32>, tensor<1x20x5xf32>, none, none, none, none, tensor<1x20xf32>) -> tensor<2x1x3x5xf32>
  return %0 : tensor<2x1x3x5xf32>
}

// -----
func.func @bad_layout(%x: tensor<2x3x4xf32>, %w: tensor<1x5x4xf32>, %r: tensor<1x5x5xf32>) -> tensor<2x1x3x5xf32> {
  %0 = "onnx.RNN"(%x, %w, %r) {layout = 2} : (tensor<2x3x4xf32>, tensor<1x5x4xf32>, tensor<1x5x5xf32>) -> tensor<2x1x3x5xf32>
  return %0 : tensor<2x1x3x5xf32>
}

// -----
func.func @bad_direction(%x: tensor<2x3x4xf32>, %w: tensor<1x5x4xf32>, %r: tensor<1x5x5xf32>) -> tensor<2x1x3x5xf32> {
  %0 = "onnx.RNN"(%x, %w, %r) {direction = "sideways"} : (tensor<2x3x4xf32>, tensor<1x5x4xf32>, tensor<1x5x5xf32>) -> tensor<2x1x3x5xf32>
  return %0 : tensor<2x1x3x5xf32>
}

// -----
func.func @bad_clip(%x: tensor<2x3x4xf32>, %w: tensor<1x5x4xf32>, %r: tensor<1x5x5xf32>) -> tensor<2x1x3x5xf32> {
  %0 = "onnx.RNN"(%x, %w, %r) {clip = -1.0 : f64} : (tensor<2x3x4xf32>, tensor<1x5x4xf32>, tensor<1x5x5xf32>) -> tensor<2x1x3x5xf32>
  return %0 : tensor<2x1x3x5xf32>
}
