"""bert: BERT-style encoder, 2 layers, hidden 256, 4 heads, intermediate 1024, vocab 1024.

Inputs input_ids[batch,seq] int64 and attention_mask[batch,seq] int64; outputs
last_hidden_state[batch,seq,256] and pooler_output[batch,256]. Shaped like a
torch.onnx.export of HF BertModel at opset 17:
  * embeddings: word/position/token-type Gather, position ids from Range(0, seq),
    token types from ConstantOfShape(Shape(input_ids)), LayerNormalization;
  * additive mask: Unsqueeze(mask,[1,2]) -> Cast -> Sub(1, m) -> Mul(-10000);
  * head split/merge via Reshape whose target shape is computed at run time by
    Shape -> Gather -> Unsqueeze -> Concat (shapes are NOT constants), Transpose;
  * scores MatMul, Div(sqrt(d)), Add mask, Softmax, context MatMul;
  * GELU via the Erf formula; residual Adds; post-LN LayerNormalization;
  * pooler: Gather(token 0) -> Gemm -> Tanh.
"""

import numpy as np
from onnx import TensorProto, helper

from .builder import GraphBuilder

OPSET = 17
VOCAB, MAX_POS, HIDDEN, HEADS, INTER, LAYERS = 1024, 512, 256, 4, 1024, 2


def split_heads(g, x, heads, head_dim, perm):
    shape = g.op("Concat", g.dim(x, 0), g.dim(x, 1), g.const([heads]), g.const([head_dim]), axis=0)
    return g.op("Transpose", g.op("Reshape", x, shape), perm=perm)


def merge_heads(g, ctx, like, hidden):
    t = g.op("Transpose", ctx, perm=[0, 2, 1, 3])
    shape = g.op("Concat", g.dim(like, 0), g.dim(like, 1), g.const([hidden]), axis=0)
    return g.op("Reshape", t, shape)


def build(seed: int):
    g = GraphBuilder("bert", seed)
    ids = g.input("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = g.input("attention_mask", TensorProto.INT64, ["batch", "seq"])
    head_dim = HIDDEN // HEADS

    with g.scope("embeddings"):
        with g.scope("word_embeddings"):
            we = g.op("Gather", g.param("weight", (VOCAB, HIDDEN)), ids, axis=0)
        seq = g.scalar_dim(ids, 1)
        pos_ids = g.op("Unsqueeze", g.op("Range", g.const(0), seq, g.const(1)), g.const([0]))
        with g.scope("position_embeddings"):
            pe = g.op("Gather", g.param("weight", (MAX_POS, HIDDEN)), pos_ids, axis=0)
        tt_ids = g.op("ConstantOfShape", g.op("Shape", ids),
                      value=helper.make_tensor("value", TensorProto.INT64, [1], [0]))
        with g.scope("token_type_embeddings"):
            te = g.op("Gather", g.param("weight", (2, HIDDEN)), tt_ids, axis=0)
        x = g.op("Add", g.op("Add", we, te), pe)
        with g.scope("LayerNorm"):
            x = g.layer_norm(x, HIDDEN, eps=1e-12)

    with g.scope("extended_attention_mask"):
        m = g.op("Unsqueeze", mask, g.const([1, 2]))
        m = g.op("Cast", m, to=TensorProto.FLOAT)
        m = g.op("Sub", g.const(1.0, np.float32), m)
        add_mask = g.op("Mul", m, g.const(-10000.0, np.float32))

    for layer in range(LAYERS):
        with g.scope(f"encoder.layer.{layer}"):
            with g.scope("attention.self"):
                qkv = {}
                for n in ("query", "key", "value"):
                    with g.scope(n):
                        qkv[n] = g.linear(x, HIDDEN, HIDDEN)
                q = split_heads(g, qkv["query"], HEADS, head_dim, [0, 2, 1, 3])
                kt = split_heads(g, qkv["key"], HEADS, head_dim, [0, 2, 3, 1])
                v = split_heads(g, qkv["value"], HEADS, head_dim, [0, 2, 1, 3])
                s = g.op("MatMul", q, kt)
                s = g.op("Div", s, g.const(float(np.sqrt(head_dim)), np.float32))
                s = g.op("Add", s, add_mask)
                p = g.op("Softmax", s, axis=-1)
                ctx = merge_heads(g, g.op("MatMul", p, v), x, HIDDEN)
            with g.scope("attention.output"):
                with g.scope("dense"):
                    a = g.linear(ctx, HIDDEN, HIDDEN)
                a = g.op("Add", a, x)
                with g.scope("LayerNorm"):
                    x = g.layer_norm(a, HIDDEN, eps=1e-12)
            with g.scope("intermediate"):
                with g.scope("dense"):
                    h = g.linear(x, HIDDEN, INTER)
                h = g.gelu_erf(h)
            with g.scope("output"):
                with g.scope("dense"):
                    h = g.linear(h, INTER, HIDDEN)
                h = g.op("Add", h, x)
                with g.scope("LayerNorm"):
                    x = g.layer_norm(h, HIDDEN, eps=1e-12)

    with g.scope("pooler"):
        first = g.op("Gather", x, g.const(0), axis=1)
        with g.scope("dense"):
            w = g.param("weight", (HIDDEN, HIDDEN))
            b = g.param("bias", (HIDDEN,))
            pooled = g.op("Tanh", g.op("Gemm", first, w, b, transB=1))

    g.output(x, "last_hidden_state", TensorProto.FLOAT, ["batch", "seq", HIDDEN])
    g.output(pooled, "pooler_output", TensorProto.FLOAT, ["batch", HIDDEN])
    return g.make_model(OPSET, __doc__)
