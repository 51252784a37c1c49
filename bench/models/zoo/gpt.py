"""gpt: GPT-2-style causal decoder, 2 layers, hidden 256, 4 heads, MLP 1024, vocab 1024.

Input input_ids[batch,seq] int64; output logits[batch,seq,1024]. Opset 20. Shaped
like an exporter's GPT-2 graph:
  * token + position embeddings (Gather; position ids from Range(0, seq));
  * causal mask built at run time: ConstantOfShape([seq,seq], float32 lowest)
    -> Trilu(upper, k=1) -> Unsqueeze -> Expand to [batch,1,seq,seq];
  * pre-LN blocks: LayerNormalization, fused c_attn MatMul+Add -> Split into
    q/k/v, Reshape (target shape from Shape->Gather->Unsqueeze->Concat) and
    Transpose into heads, MatMul, Mul(1/sqrt(d)), Add mask, Softmax, MatMul,
    merge heads, c_proj, residual Add; MLP with Gelu (opset 20 op,
    approximate="tanh"), residual Add;
  * final LayerNormalization and lm_head MatMul.
"""

import numpy as np
from onnx import TensorProto, helper

from .bert import merge_heads, split_heads
from .builder import GraphBuilder

OPSET = 20
VOCAB, MAX_POS, HIDDEN, HEADS, INTER, LAYERS = 1024, 1024, 256, 4, 1024, 2


def build(seed: int):
    g = GraphBuilder("gpt", seed)
    ids = g.input("input_ids", TensorProto.INT64, ["batch", "seq"])
    head_dim = HIDDEN // HEADS

    with g.scope("transformer"):
        with g.scope("wte"):
            te = g.op("Gather", g.param("weight", (VOCAB, HIDDEN)), ids, axis=0)
        seq = g.scalar_dim(ids, 1)
        pos = g.op("Unsqueeze", g.op("Range", g.const(0), seq, g.const(1)), g.const([0]))
        with g.scope("wpe"):
            pe = g.op("Gather", g.param("weight", (MAX_POS, HIDDEN)), pos, axis=0)
        x = g.op("Add", te, pe)

        with g.scope("causal_mask"):
            s1 = g.dim(ids, 1)
            full = g.op(
                "ConstantOfShape",
                g.op("Concat", s1, s1, axis=0),
                value=helper.make_tensor("value", TensorProto.FLOAT, [1], [float(np.finfo(np.float32).min)]),
            )
            tri = g.op("Trilu", full, g.const(1), upper=1)
            tri = g.op("Unsqueeze", tri, g.const([0, 1]))
            shape = g.op("Concat", g.dim(ids, 0), g.const([1]), s1, s1, axis=0)
            causal = g.op("Expand", tri, shape)

        for layer in range(LAYERS):
            with g.scope(f"h.{layer}"):
                with g.scope("ln_1"):
                    h = g.layer_norm(x, HIDDEN)
                with g.scope("attn"):
                    with g.scope("c_attn"):
                        qkv = g.linear(h, HIDDEN, 3 * HIDDEN)
                    q, k, v = g.op("Split", qkv, g.const([HIDDEN] * 3), outputs=3, axis=-1)
                    q = split_heads(g, q, HEADS, head_dim, [0, 2, 1, 3])
                    kt = split_heads(g, k, HEADS, head_dim, [0, 2, 3, 1])
                    v = split_heads(g, v, HEADS, head_dim, [0, 2, 1, 3])
                    s = g.op("MatMul", q, kt)
                    s = g.op("Mul", s, g.const(float(1.0 / np.sqrt(head_dim)), np.float32))
                    s = g.op("Add", s, causal)
                    p = g.op("Softmax", s, axis=-1)
                    ctx = merge_heads(g, g.op("MatMul", p, v), h, HIDDEN)
                    with g.scope("c_proj"):
                        a = g.linear(ctx, HIDDEN, HIDDEN)
                x = g.op("Add", x, a)
                with g.scope("ln_2"):
                    h = g.layer_norm(x, HIDDEN)
                with g.scope("mlp"):
                    with g.scope("c_fc"):
                        h = g.linear(h, HIDDEN, INTER)
                    h = g.op("Gelu", h, approximate="tanh")
                    with g.scope("c_proj"):
                        h = g.linear(h, INTER, HIDDEN)
                x = g.op("Add", x, h)
        with g.scope("ln_f"):
            x = g.layer_norm(x, HIDDEN)
    with g.scope("lm_head"):
        logits = g.linear(x, HIDDEN, VOCAB, bias=False)
    g.output(logits, "logits", TensorProto.FLOAT, ["batch", "seq", VOCAB])
    return g.make_model(OPSET, __doc__)
