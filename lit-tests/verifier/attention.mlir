// RUN: memc opt %s --split-input-file
// Every rule between Attention's (and RotaryEmbedding's) operands and attributes is an error
// that says which operand or attribute is wrong.

// 3-d inputs without head counts.
func.func @three_d_without_heads(%q: tensor<2x4x64xf32>, %k: tensor<2x6x64xf32>, %v: tensor<2x6x64xf32>) -> tensor<2x4x64xf32> {
  %0 = "onnx.Attention"(%q, %k, %v) : (tensor<2x4x64xf32>, tensor<2x6x64xf32>, tensor<2x6x64xf32>) -> tensor<2x4x64xf32>
  return %0 : tensor<2x4x64xf32>
}

// -----
// A hidden size that the head count does not divide.
func.func @hidden_not_divisible(%q: tensor<2x4x64xf32>, %k: tensor<2x6x60xf32>, %v: tensor<2x6x60xf32>) -> tensor<2x4x60xf32> {
  %0 = "onnx.Attention"(%q, %k, %v) {q_num_heads = 4, kv_num_heads = 8} : (tensor<2x4x64xf32>, tensor<2x6x60xf32>, tensor<2x6x60xf32>) -> tensor<2x4x60xf32>
  return %0 : tensor<2x4x60xf32>
}

// -----
// 6 query heads over 4 key-value heads: not a whole group each.
func.func @heads_not_grouped(%q: tensor<2x6x4x8xf32>, %k: tensor<2x4x5x8xf32>, %v: tensor<2x4x5x8xf32>) -> tensor<2x6x4x8xf32> {
  %0 = "onnx.Attention"(%q, %k, %v) : (tensor<2x6x4x8xf32>, tensor<2x4x5x8xf32>, tensor<2x4x5x8xf32>) -> tensor<2x6x4x8xf32>
  return %0 : tensor<2x6x4x8xf32>
}

// -----
// Q and K head sizes differ.
func.func @head_sizes(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x5x6xf32>, %v: tensor<2x2x5x8xf32>) -> tensor<2x2x4x8xf32> {
  %0 = "onnx.Attention"(%q, %k, %v) : (tensor<2x2x4x8xf32>, tensor<2x2x5x6xf32>, tensor<2x2x5x8xf32>) -> tensor<2x2x4x8xf32>
  return %0 : tensor<2x2x4x8xf32>
}

// -----
// A mask with 3 query rows for 4 queries.
func.func @mask_rows(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x2x5x8xf32>, %m: tensor<3x5xf32>) -> tensor<2x2x4x8xf32> {
  %0 = "onnx.Attention"(%q, %k, %v, %m) : (tensor<2x2x4x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<3x5xf32>) -> tensor<2x2x4x8xf32>
  return %0 : tensor<2x2x4x8xf32>
}

// -----
// A mask with more columns than there are keys.
func.func @mask_columns(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x2x5x8xf32>, %m: tensor<4x7xi1>) -> tensor<2x2x4x8xf32> {
  %0 = "onnx.Attention"(%q, %k, %v, %m) : (tensor<2x2x4x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<4x7xi1>) -> tensor<2x2x4x8xf32>
  return %0 : tensor<2x2x4x8xf32>
}

// -----
// A past key without a past value.
func.func @past_key_alone(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x2x5x8xf32>, %pk: tensor<2x2x3x8xf32>) -> tensor<2x2x4x8xf32> {
  %none = "memc.none"() : () -> none
  %0 = "onnx.Attention"(%q, %k, %v, %none, %pk) : (tensor<2x2x4x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, none, tensor<2x2x3x8xf32>) -> tensor<2x2x4x8xf32>
  return %0 : tensor<2x2x4x8xf32>
}

// -----
// qk_matmul_output_mode out of range.
func.func @qk_mode(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x2x5x8xf32>) -> tensor<2x2x4x8xf32> {
  %0 = "onnx.Attention"(%q, %k, %v) {qk_matmul_output_mode = 4} : (tensor<2x2x4x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>) -> tensor<2x2x4x8xf32>
  return %0 : tensor<2x2x4x8xf32>
}

// -----
// softmax_precision names int32.
func.func @softmax_precision(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x2x5x8xf32>) -> tensor<2x2x4x8xf32> {
  %0 = "onnx.Attention"(%q, %k, %v) {softmax_precision = 6} : (tensor<2x2x4x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>) -> tensor<2x2x4x8xf32>
  return %0 : tensor<2x2x4x8xf32>
}

// -----
// A written result type that disagrees: Y has V's head size (6), not Q's (8).
func.func @result_type(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x2x5x6xf32>) -> tensor<2x2x4x8xf32> {
  %0 = "onnx.Attention"(%q, %k, %v) : (tensor<2x2x4x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x6xf32>) -> tensor<2x2x4x8xf32>
  return %0 : tensor<2x2x4x8xf32>
}

// -----
// RotaryEmbedding: an odd rotary dim.
func.func @rotary_odd(%x: tensor<2x3x4x8xf32>, %cos: tensor<2x3x2xf32>, %sin: tensor<2x3x2xf32>) -> tensor<2x3x4x8xf32> {
  %0 = "onnx.RotaryEmbedding"(%x, %cos, %sin) {rotary_embedding_dim = 5} : (tensor<2x3x4x8xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> tensor<2x3x4x8xf32>
  return %0 : tensor<2x3x4x8xf32>
}

// -----
// RotaryEmbedding: caches with 3 columns for a rotary dim of 8.
func.func @rotary_cache(%x: tensor<2x4x3x8xf32>, %cos: tensor<16x3xf32>, %sin: tensor<16x3xf32>, %ids: tensor<2x3xi64>) -> tensor<2x4x3x8xf32> {
  %0 = "onnx.RotaryEmbedding"(%x, %cos, %sin, %ids) : (tensor<2x4x3x8xf32>, tensor<16x3xf32>, tensor<16x3xf32>, tensor<2x3xi64>) -> tensor<2x4x3x8xf32>
  return %0 : tensor<2x4x3x8xf32>
}

// -----
// RotaryEmbedding: a 3-d X without num_heads.
func.func @rotary_heads(%x: tensor<2x3x32xf32>, %cos: tensor<2x3x4xf32>, %sin: tensor<2x3x4xf32>) -> tensor<2x3x32xf32> {
  %0 = "onnx.RotaryEmbedding"(%x, %cos, %sin) : (tensor<2x3x32xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x32xf32>
  return %0 : tensor<2x3x32xf32>
}

// -----
// LinearAttention: the gated delta rule (the default) without its beta.
func.func @linear_attention_beta(%q: tensor<2x4x32xf32>, %k: tensor<2x4x32xf32>, %v: tensor<2x4x32xf32>, %decay: tensor<2x4x4xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x8x8xf32>) {
  %none = "memc.none"() : () -> none
  %0:2 = "onnx.LinearAttention"(%q, %k, %v, %none, %decay) {q_num_heads = 4, kv_num_heads = 4} : (tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32>, none, tensor<2x4x4xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x8x8xf32>)
  return %0#0, %0#1 : tensor<2x4x32xf32>, tensor<2x4x8x8xf32>
}

// -----
// LinearAttention: a decay whose last dim is neither per head nor per key element.
func.func @linear_attention_decay(%q: tensor<2x4x32xf32>, %k: tensor<2x4x32xf32>, %v: tensor<2x4x32xf32>, %decay: tensor<2x4x6xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x8x8xf32>) {
  %none = "memc.none"() : () -> none
  %0:2 = "onnx.LinearAttention"(%q, %k, %v, %none, %decay) {q_num_heads = 4, kv_num_heads = 4, update_rule = "gated"} : (tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32>, none, tensor<2x4x6xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x8x8xf32>)
  return %0#0, %0#1 : tensor<2x4x32xf32>, tensor<2x4x8x8xf32>
}

// -----
// CausalConvWithState: a past state of 2 positions for a kernel of 4.
func.func @causal_conv_state(%x: tensor<2x4x8xf32>, %w: tensor<4x1x4xf32>, %past: tensor<2x4x2xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x3xf32>) {
  %none = "memc.none"() : () -> none
  %0:2 = "onnx.CausalConvWithState"(%x, %w, %none, %past) : (tensor<2x4x8xf32>, tensor<4x1x4xf32>, none, tensor<2x4x2xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x3xf32>)
  return %0#0, %0#1 : tensor<2x4x8xf32>, tensor<2x4x3xf32>
}

// -----
// CausalConvWithState: an unknown activation.
func.func @causal_conv_activation(%x: tensor<2x4x8xf32>, %w: tensor<4x1x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x3xf32>) {
  %0:2 = "onnx.CausalConvWithState"(%x, %w) {activation = "gelu"} : (tensor<2x4x8xf32>, tensor<4x1x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x3xf32>)
  return %0#0, %0#1 : tensor<2x4x8xf32>, tensor<2x4x3xf32>
}
