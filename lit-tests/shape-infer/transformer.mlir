// RUN: memc opt %s -p shape-infer --split-input-file
// shape-infer fills in the result types written as `?`, keeping symbolic dims through the
// shape computations exporters emit. The text format carries no weight values, so constants
// come from `Shape` and `Size` of static placeholder arguments: `Shape(tensor<12x64xf32>)` is
// [12, 64], `Size(tensor<1xf32>)` is 1.

// Split heads: Reshape(x, Concat(Shape(x)[0:2], [12, 64])), then Transpose.
func.func @split_heads(%x: tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, %heads: tensor<12x64xf32>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.Shape"(%x) {end = 2} : (tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>) -> tensor<?xi64>
  %1 = "onnx.Shape"(%heads) : (tensor<12x64xf32>) -> tensor<?xi64>
  %2 = "onnx.Concat"(%0, %1) {axis = 0} : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %3 = "onnx.Reshape"(%x, %2) : (tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, tensor<?xi64>) -> tensor<?x?x?x?xf32>
  %4 = "onnx.Transpose"(%3) {perm = [0, 2, 1, 3]} : (tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  return %4 : tensor<?x?x?x?xf32>
}

// -----
// Merge heads: Reshape(t, [0, 0, -1]) copies batch and seq and infers 12 * 64.
// [0, 0] is Shape(tensor<0x0xf32>); [-1] is Shape(tensor<0xf32>) - Shape(tensor<1xf32>).
func.func @merge_heads(%t: tensor<?x?x12x64xf32, #memc.dims<["batch", "seq"]>>, %zeros: tensor<0x0xf32>, %zero: tensor<0xf32>, %one: tensor<1xf32>) -> tensor<?x?x?xf32> {
  %0 = "onnx.Shape"(%zeros) : (tensor<0x0xf32>) -> tensor<?xi64>
  %1 = "onnx.Shape"(%zero) : (tensor<0xf32>) -> tensor<?xi64>
  %2 = "onnx.Shape"(%one) : (tensor<1xf32>) -> tensor<?xi64>
  %3 = "onnx.Sub"(%1, %2) : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %4 = "onnx.Concat"(%0, %3) {axis = 0} : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %5 = "onnx.Reshape"(%t, %4) : (tensor<?x?x12x64xf32, #memc.dims<["batch", "seq"]>>, tensor<?xi64>) -> tensor<?x?x?xf32>
  return %5 : tensor<?x?x?xf32>
}

// -----
// Flatten the tokens: -1 becomes the product batch*seq.
func.func @flatten_tokens(%x: tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, %zero: tensor<0xf32>, %one: tensor<1xf32>, %width: tensor<768xf32>) -> tensor<?x?xf32> {
  %0 = "onnx.Shape"(%zero) : (tensor<0xf32>) -> tensor<?xi64>
  %1 = "onnx.Shape"(%one) : (tensor<1xf32>) -> tensor<?xi64>
  %2 = "onnx.Sub"(%0, %1) : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %3 = "onnx.Shape"(%width) : (tensor<768xf32>) -> tensor<?xi64>
  %4 = "onnx.Concat"(%2, %3) {axis = 0} : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %5 = "onnx.Reshape"(%x, %4) : (tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, tensor<?xi64>) -> tensor<?x?xf32>
  return %5 : tensor<?x?xf32>
}

// -----
// Attention with a KV cache: the keys grow to past+seq; scores are [batch, 12, seq, past+seq].
func.func @attention(%q: tensor<?x12x?x64xf32, #memc.dims<["batch", "seq"]>>, %k: tensor<?x12x?x64xf32, #memc.dims<["batch", "seq"]>>, %past_k: tensor<?x12x?x64xf32, #memc.dims<["batch", "past"]>>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) {
  %0 = "onnx.Concat"(%past_k, %k) {axis = 2} : (tensor<?x12x?x64xf32, #memc.dims<["batch", "past"]>>, tensor<?x12x?x64xf32, #memc.dims<["batch", "seq"]>>) -> tensor<?x?x?x?xf32>
  %1 = "onnx.Transpose"(%0) {perm = [0, 1, 3, 2]} : (tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  %2 = "onnx.MatMul"(%q, %1) : (tensor<?x12x?x64xf32, #memc.dims<["batch", "seq"]>>, tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  %3 = "onnx.Softmax"(%2) {axis = -1} : (tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  return %3, %0 : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
}

// -----
// Position ids: Range(0, seq, 1), then an embedding Gather and a broadcast Add.
func.func @positions(%x: tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, %table: tensor<1024x768xf32>, %zero: tensor<0xf32>, %one: tensor<1xf32>) -> tensor<?x?x?xf32> {
  %0 = "onnx.Size"(%zero) : (tensor<0xf32>) -> tensor<i64>
  %1 = "onnx.Size"(%one) : (tensor<1xf32>) -> tensor<i64>
  %2 = "onnx.Shape"(%x) : (tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>) -> tensor<?xi64>
  %3 = "onnx.Gather"(%2, %1) {axis = 0} : (tensor<?xi64>, tensor<i64>) -> tensor<i64>
  %4 = "onnx.Range"(%0, %3, %1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %5 = "onnx.Gather"(%table, %4) {axis = 0} : (tensor<1024x768xf32>, tensor<?xi64>) -> tensor<?x?xf32>
  %6 = "onnx.Add"(%x, %5) : (tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, tensor<?x?xf32>) -> tensor<?x?x?xf32>
  return %6 : tensor<?x?x?xf32>
}

// -----
// The exporter's Expand pattern: Where(Equal(shape, -1), ones, shape) is the shape itself,
// because dims are never -1; ConstantOfShape of a shape has that shape.
func.func @expand_like(%x: tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, %bias: tensor<768xf32>, %zero: tensor<0xf32>, %one: tensor<1xf32>) -> tensor<?x?x?xf32> {
  %0 = "onnx.Shape"(%x) : (tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>) -> tensor<?xi64>
  %1 = "onnx.Size"(%zero) : (tensor<0xf32>) -> tensor<i64>
  %2 = "onnx.Size"(%one) : (tensor<1xf32>) -> tensor<i64>
  %3 = "onnx.Sub"(%1, %2) : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %4 = "onnx.Equal"(%0, %3) : (tensor<?xi64>, tensor<i64>) -> tensor<?xi1>
  %5 = "onnx.ConstantOfShape"(%0) : (tensor<?xi64>) -> tensor<?x?x?xf32>
  %6 = "onnx.Shape"(%5) : (tensor<?x?x?xf32>) -> tensor<?xi64>
  %7 = "onnx.Where"(%4, %6, %0) : (tensor<?xi1>, tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %8 = "onnx.Expand"(%bias, %7) : (tensor<768xf32>, tensor<?xi64>) -> tensor<?x?x?xf32>
  return %8 : tensor<?x?x?xf32>
}

// -----
// LayerNormalization's statistics keep the dims before `axis` and are 1 from it on.
func.func @layer_norm(%x: tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, %scale: tensor<768xf32>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>) {
  %0:3 = "onnx.LayerNormalization"(%x, %scale) {axis = -1} : (tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, tensor<768xf32>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>)
  return %0#0, %0#1 : tensor<?x?x?xf32>, tensor<?x?x?xf32>
}
