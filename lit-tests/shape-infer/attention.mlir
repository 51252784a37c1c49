// RUN: memc opt %s -p shape-infer --split-input-file
// Attention and RotaryEmbedding results from their operands, with symbolic dims: the scores
// and the present key and value span the past and the new keys (`past + seq`).

// 4-d grouped-query attention with a key-value cache: 8 query heads over 2 key-value heads.
func.func @gqa_with_cache(%q: tensor<?x8x?x16xf32, #memc.dims<["batch", "seq"]>>, %k: tensor<?x2x?x16xf32, #memc.dims<["batch", "seq"]>>, %v: tensor<?x2x?x32xf32, #memc.dims<["batch", "seq"]>>, %pk: tensor<?x2x?x16xf32, #memc.dims<["batch", "past"]>>, %pv: tensor<?x2x?x32xf32, #memc.dims<["batch", "past"]>>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) {
  %none = "memc.none"() : () -> none
  %0:4 = "onnx.Attention"(%q, %k, %v, %none, %pk, %pv) {is_causal = 1, qk_matmul_output_mode = 3} : (tensor<?x8x?x16xf32, #memc.dims<["batch", "seq"]>>, tensor<?x2x?x16xf32, #memc.dims<["batch", "seq"]>>, tensor<?x2x?x32xf32, #memc.dims<["batch", "seq"]>>, none, tensor<?x2x?x16xf32, #memc.dims<["batch", "past"]>>, tensor<?x2x?x32xf32, #memc.dims<["batch", "past"]>>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
  return %0#0, %0#1, %0#2, %0#3 : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
}

// -----
// 3-d inputs: hidden sizes split by the head-count attributes; Y is [batch, seq, 4 * 8].
func.func @three_d(%q: tensor<?x?x64xf32, #memc.dims<["batch", "seq"]>>, %k: tensor<?x?x32xf32, #memc.dims<["batch", "kv"]>>, %v: tensor<?x?x16xf32, #memc.dims<["batch", "kv"]>>, %mask: tensor<?x?xi1, #memc.dims<["seq", "kv"]>>) -> tensor<?x?x?xf32> {
  %0 = "onnx.Attention"(%q, %k, %v, %mask) {q_num_heads = 4, kv_num_heads = 2} : (tensor<?x?x64xf32, #memc.dims<["batch", "seq"]>>, tensor<?x?x32xf32, #memc.dims<["batch", "kv"]>>, tensor<?x?x16xf32, #memc.dims<["batch", "kv"]>>, tensor<?x?xi1, #memc.dims<["seq", "kv"]>>) -> tensor<?x?x?xf32>
  return %0 : tensor<?x?x?xf32>
}

// -----
// RotaryEmbedding keeps X's type.
func.func @rotary(%x: tensor<?x?x64xf32, #memc.dims<["batch", "seq"]>>, %cos: tensor<128x4xf32>, %sin: tensor<128x4xf32>, %ids: tensor<?x?xi64, #memc.dims<["batch", "seq"]>>) -> tensor<?x?x?xf32> {
  %0 = "onnx.RotaryEmbedding"(%x, %cos, %sin, %ids) {num_heads = 4, rotary_embedding_dim = 8, interleaved = 1} : (tensor<?x?x64xf32, #memc.dims<["batch", "seq"]>>, tensor<128x4xf32>, tensor<128x4xf32>, tensor<?x?xi64, #memc.dims<["batch", "seq"]>>) -> tensor<?x?x?xf32>
  return %0 : tensor<?x?x?xf32>
}

// -----
// LinearAttention: the output packs 8 query heads of value size 4; the state is per key-value
// head, [batch, 2, 8, 4], in the past state's type.
func.func @linear_attention(%q: tensor<?x?x64xf32, #memc.dims<["batch", "seq"]>>, %k: tensor<?x?x16xf32, #memc.dims<["batch", "seq"]>>, %v: tensor<?x?x8xf32, #memc.dims<["batch", "seq"]>>, %past: tensor<?x2x8x4xf32, #memc.dims<["batch"]>>, %decay: tensor<?x?x2xf32, #memc.dims<["batch", "seq"]>>, %beta: tensor<?x?x1xf32, #memc.dims<["batch", "seq"]>>) -> (tensor<?x?x?xf32>, tensor<?x?x?x?xf32>) {
  %0:2 = "onnx.LinearAttention"(%q, %k, %v, %past, %decay, %beta) {q_num_heads = 8, kv_num_heads = 2} : (tensor<?x?x64xf32, #memc.dims<["batch", "seq"]>>, tensor<?x?x16xf32, #memc.dims<["batch", "seq"]>>, tensor<?x?x8xf32, #memc.dims<["batch", "seq"]>>, tensor<?x2x8x4xf32, #memc.dims<["batch"]>>, tensor<?x?x2xf32, #memc.dims<["batch", "seq"]>>, tensor<?x?x1xf32, #memc.dims<["batch", "seq"]>>) -> (tensor<?x?x?xf32>, tensor<?x?x?x?xf32>)
  return %0#0, %0#1 : tensor<?x?x?xf32>, tensor<?x?x?x?xf32>
}

// -----
// CausalConvWithState: the output like the input, the state the last kernel - 1 = 3 positions.
func.func @causal_conv(%x: tensor<?x16x?xf32, #memc.dims<["batch", "seq"]>>, %w: tensor<16x1x4xf32>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>) {
  %0:2 = "onnx.CausalConvWithState"(%x, %w) {activation = "silu"} : (tensor<?x16x?xf32, #memc.dims<["batch", "seq"]>>, tensor<16x1x4xf32>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>)
  return %0#0, %0#1 : tensor<?x?x?xf32>, tensor<?x?x?xf32>
}
