// RUN: memc compile %s --emit kernels --split-input-file
// The attention family's kernels. Attention lowers to contractions into the op's scratch (the scores), one row kernel for the
// bias and softmax, and contractions into Y; grouped query heads share their key head through
// a zero batch stride. RotaryEmbedding is one map kernel (and a copy of the unrotated part).

// 4-d grouped-query attention (4 query heads over 2) with a cache, causal, the present key
// and value, and the softmax as qk_matmul_output: each product runs once per segment (the
// past keys, then the new ones).
func.func @gqa_cache(%q: tensor<1x4x2x8xf32>, %k: tensor<1x2x2x8xf32>, %v: tensor<1x2x2x8xf32>, %pk: tensor<1x2x3x8xf32>, %pv: tensor<1x2x3x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x4x2x5xf32>) {
  %none = "memc.none"() : () -> none
  %0:4 = "onnx.Attention"(%q, %k, %v, %none, %pk, %pv) {is_causal = 1, qk_matmul_output_mode = 3} : (tensor<1x4x2x8xf32>, tensor<1x2x2x8xf32>, tensor<1x2x2x8xf32>, none, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x4x2x5xf32>)
  return %0#0, %0#1, %0#2, %0#3 : tensor<1x4x2x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x4x2x5xf32>
}

// -----
// 3-d inputs read through strides, a bool mask shorter than the keys (its last column
// guarded and masked out) and a softcap.
func.func @three_d_mask(%q: tensor<2x3x16xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %m: tensor<3x3xi1>) -> tensor<2x3x16xf32> {
  %0 = "onnx.Attention"(%q, %k, %v, %m) {q_num_heads = 2, kv_num_heads = 2, softcap = 2.0 : f32, scale = 0.5 : f32} : (tensor<2x3x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<3x3xi1>) -> tensor<2x3x16xf32>
  return %0 : tensor<2x3x16xf32>
}

// -----
// RotaryEmbedding, interleaved, with position ids (indirect loads of the caches) and a
// partial rotary dim (the rest copied).
func.func @rotary(%x: tensor<1x2x3x8xf32>, %cos: tensor<10x2xf32>, %sin: tensor<10x2xf32>, %ids: tensor<1x3xi64>) -> tensor<1x2x3x8xf32> {
  %0 = "onnx.RotaryEmbedding"(%x, %cos, %sin, %ids) {interleaved = 1, rotary_embedding_dim = 4} : (tensor<1x2x3x8xf32>, tensor<10x2xf32>, tensor<10x2xf32>, tensor<1x3xi64>) -> tensor<1x2x3x8xf32>
  return %0 : tensor<1x2x3x8xf32>
}

// -----
// LinearAttention, gated delta rule with a per-head decay, 2 query heads sharing 1 key-value
// head, 2 tokens: one kernel runs the recurrence token by token (decay, retrieve, write,
// read) over each row's state column in scratch; the present state is the first head's copy.
func.func @linear_attention(%q: tensor<1x2x4xf32>, %k: tensor<1x2x2xf32>, %v: tensor<1x2x2xf32>, %decay: tensor<1x2x1xf32>, %beta: tensor<1x2x1xf32>) -> (tensor<1x2x4xf32>, tensor<1x1x2x2xf32>) {
  %none = "memc.none"() : () -> none
  %0:2 = "onnx.LinearAttention"(%q, %k, %v, %none, %decay, %beta) {q_num_heads = 2, kv_num_heads = 1} : (tensor<1x2x4xf32>, tensor<1x2x2xf32>, tensor<1x2x2xf32>, none, tensor<1x2x1xf32>, tensor<1x2x1xf32>) -> (tensor<1x2x4xf32>, tensor<1x1x2x2xf32>)
  return %0#0, %0#1 : tensor<1x2x4xf32>, tensor<1x1x2x2xf32>
}

// -----
// CausalConvWithState with a past state, a bias and the SiLU: the past and the input are
// read through guarded views at position l + j, nothing is concatenated.
func.func @causal_conv(%x: tensor<1x2x5xf32>, %w: tensor<2x1x3xf32>, %b: tensor<2xf32>, %past: tensor<1x2x2xf32>) -> (tensor<1x2x5xf32>, tensor<1x2x2xf32>) {
  %0:2 = "onnx.CausalConvWithState"(%x, %w, %b, %past) {activation = "silu"} : (tensor<1x2x5xf32>, tensor<2x1x3xf32>, tensor<2xf32>, tensor<1x2x2xf32>) -> (tensor<1x2x5xf32>, tensor<1x2x2xf32>)
  return %0#0, %0#1 : tensor<1x2x5xf32>, tensor<1x2x2xf32>
}

// -----
// f16 attention has no kernels (its products are f32 or f64 contractions).
func.func @f16(%q: tensor<1x1x2x4xf16>, %k: tensor<1x1x2x4xf16>, %v: tensor<1x1x2x4xf16>) -> tensor<1x1x2x4xf16> {
  %0 = "onnx.Attention"(%q, %k, %v) : (tensor<1x1x2x4xf16>, tensor<1x1x2x4xf16>, tensor<1x1x2x4xf16>) -> tensor<1x1x2x4xf16>
  return %0 : tensor<1x1x2x4xf16>
}
