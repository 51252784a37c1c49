// RUN: memc opt %s -p shape-infer --split-input-file
// RNN, GRU and LSTM: Y is [seq, directions, batch, hidden] (layout 1: [batch, seq, directions,
// hidden]), Y_h and Y_c [directions, batch, hidden] (layout 1: [batch, directions, hidden]);
// the hidden size from R (or `hidden_size`), a symbolic batch kept.

func.func @cells(%x: tensor<2x?x4xf32, #memc.dims<["b"]>>, %w: tensor<1x5x4xf32>, %r: tensor<1x5x5xf32>, %gw: tensor<2x15x4xf32>, %gr: tensor<2x15x5xf32>, %lw: tensor<1x20x4xf32>, %lr: tensor<1x20x5xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>) {
  %0:2 = "onnx.RNN"(%x, %w, %r) : (tensor<2x?x4xf32, #memc.dims<["b"]>>, tensor<1x5x4xf32>, tensor<1x5x5xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?xf32>)
  %1 = "onnx.GRU"(%x, %gw, %gr) {direction = "bidirectional"} : (tensor<2x?x4xf32, #memc.dims<["b"]>>, tensor<2x15x4xf32>, tensor<2x15x5xf32>) -> tensor<?x?x?x?xf32>
  %2:3 = "onnx.LSTM"(%x, %lw, %lr) {hidden_size = 5} : (tensor<2x?x4xf32, #memc.dims<["b"]>>, tensor<1x20x4xf32>, tensor<1x20x5xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>)
  return %0#0, %0#1, %1, %2#1, %2#2 : tensor<?x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>
}

// -----
func.func @batchwise(%x: tensor<3x2x4xf32>, %w: tensor<1x15x4xf32>, %r: tensor<1x15x5xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?xf32>) {
  %0:2 = "onnx.GRU"(%x, %w, %r) {layout = 1} : (tensor<3x2x4xf32>, tensor<1x15x4xf32>, tensor<1x15x5xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?xf32>)
  return %0#0, %0#1 : tensor<?x?x?x?xf32>, tensor<?x?x?xf32>
}
