#!/usr/bin/env python3
"""Attention models for memc's tests, written with onnx.helper (opset 23).

    .venv/bin/python tests/onnx/make_attention.py --reference DIR
    .venv/bin/python tests/onnx/make_attention.py --bad

--reference DIR writes DIR/decoder.onnx, a one-layer decoder step with symbolic dims `batch`,
`seq` (new tokens), `past` (cached tokens) and `total` (= past + seq, the mask's width):

    x [batch, seq, 32] -> q, k, v projections (MatMul with weights)
    q, k <- RotaryEmbedding (3-d, num_heads 4 and 2, position_ids, interleaved=0)
    y, present_key, present_value = Attention(q, k, v, attn_mask (bool), past_key, past_value;
        q_num_heads=4, kv_num_heads=2 (grouped-query), is_causal=1, softcap=8)
    out = y @ Wo

and DIR/meta.json plus .npy inputs and onnxruntime's outputs for batch=2, seq=5, past=3,
total=8 (`tests/attention.rs` compiles the model with those dims bound and compares). The
weights come from a fixed seed; the run is deterministic.

--bad writes tests/onnx/bad/attention_*.onnx: models that are valid protobuf but break one
rule of Attention or RotaryEmbedding, each with a named node, so memc's message must name
the node and the rule (`tests/onnx_import.rs` snapshots it). See tests/onnx/bad/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
BAD = os.path.join(HERE, "bad")
OPSET = 23
IR = 10
PRODUCER = "memc-attention-fixtures"
DIMS = {"batch": 2, "seq": 5, "past": 3, "total": 8}
HIDDEN, Q_HEADS, KV_HEADS, HEAD = 32, 4, 2, 8
MAX_POS = 64


def model(nodes, inputs, outputs, inits=(), name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    return helper.make_model(
        g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR, producer_name=PRODUCER
    )


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def decoder() -> onnx.ModelProto:
    rng = np.random.default_rng(23)
    w = lambda name, shape: numpy_helper.from_array(
        (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), name
    )
    # Rotary caches for positions 0..MAX_POS, rotating each head's first 4 elements (partial).
    rot = 4
    inv = 1.0 / (10000 ** (np.arange(0, rot, 2) / rot))
    angles = np.outer(np.arange(MAX_POS), inv)
    inits = [
        w("Wq", [HIDDEN, Q_HEADS * HEAD]),
        w("Wk", [HIDDEN, KV_HEADS * HEAD]),
        w("Wv", [HIDDEN, KV_HEADS * HEAD]),
        w("Wo", [Q_HEADS * HEAD, HIDDEN]),
        numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos_cache"),
        numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin_cache"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "Wq"], ["q"], name="q_proj"),
        helper.make_node("MatMul", ["x", "Wk"], ["k"], name="k_proj"),
        helper.make_node("MatMul", ["x", "Wv"], ["v"], name="v_proj"),
        helper.make_node(
            "RotaryEmbedding",
            ["q", "cos_cache", "sin_cache", "position_ids"],
            ["q_rot"],
            name="q_rope",
            num_heads=Q_HEADS,
            rotary_embedding_dim=rot,
        ),
        helper.make_node(
            "RotaryEmbedding",
            ["k", "cos_cache", "sin_cache", "position_ids"],
            ["k_rot"],
            name="k_rope",
            num_heads=KV_HEADS,
            rotary_embedding_dim=rot,
        ),
        helper.make_node(
            "Attention",
            ["q_rot", "k_rot", "v", "attn_mask", "past_key", "past_value"],
            ["y", "present_key", "present_value"],
            name="attn",
            q_num_heads=Q_HEADS,
            kv_num_heads=KV_HEADS,
            is_causal=1,
            softcap=8.0,
        ),
        helper.make_node("MatMul", ["y", "Wo"], ["out"], name="o_proj"),
    ]
    inputs = [
        vi("x", TensorProto.FLOAT, ["batch", "seq", HIDDEN]),
        vi("position_ids", TensorProto.INT64, ["batch", "seq"]),
        vi("attn_mask", TensorProto.BOOL, ["batch", 1, "seq", "total"]),
        vi("past_key", TensorProto.FLOAT, ["batch", KV_HEADS, "past", HEAD]),
        vi("past_value", TensorProto.FLOAT, ["batch", KV_HEADS, "past", HEAD]),
    ]
    outputs = [
        vi("out", TensorProto.FLOAT, ["batch", "seq", HIDDEN]),
        vi("present_key", TensorProto.FLOAT, ["batch", KV_HEADS, "total", HEAD]),
        vi("present_value", TensorProto.FLOAT, ["batch", KV_HEADS, "total", HEAD]),
    ]
    m = model(nodes, inputs, outputs, inits, name="decoder_step")
    onnx.checker.check_model(m)
    return m


def reference(out_dir: str) -> None:
    import onnxruntime as ort

    os.makedirs(out_dir, exist_ok=True)
    m = decoder()
    path = os.path.join(out_dir, "decoder.onnx")
    onnx.save(m, path)
    b, s, p, t = DIMS["batch"], DIMS["seq"], DIMS["past"], DIMS["total"]
    rng = np.random.default_rng(7)
    mask = rng.random((b, 1, s, t)) > 0.2
    mask[..., 0] = True  # every query sees at least the first key
    feeds = {
        "x": rng.standard_normal((b, s, HIDDEN)).astype(np.float32),
        "position_ids": (p + np.arange(s)[None, :] + np.array([[0], [7]])).astype(np.int64),
        "attn_mask": mask,
        "past_key": rng.standard_normal((b, KV_HEADS, p, HEAD)).astype(np.float32),
        "past_value": rng.standard_normal((b, KV_HEADS, p, HEAD)).astype(np.float32),
    }
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    results = session.run(names, feeds)
    meta = {"dims": DIMS, "inputs": [], "outputs": []}
    for name, value in feeds.items():
        np.save(os.path.join(out_dir, f"in_{name}.npy"), value)
        meta["inputs"].append({"name": name, "file": f"in_{name}.npy"})
    for name, value in zip(names, results):
        np.save(os.path.join(out_dir, f"{name}.npy"), value)
        meta["outputs"].append({"name": name, "file": f"{name}.npy"})
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def attention_node(name="attn", inputs=("Q", "K", "V"), outputs=("Y",), **attrs):
    return helper.make_node("Attention", list(inputs), list(outputs), name=name, **attrs)


def bad_models() -> dict[str, onnx.ModelProto]:
    f = TensorProto.FLOAT
    qkv4 = lambda q, k, v: [vi("Q", f, q), vi("K", f, k), vi("V", f, v)]
    out = {}
    # 3-d inputs whose hidden size the head count does not divide.
    out["attention_hidden_not_divisible"] = model(
        [attention_node(q_num_heads=4, kv_num_heads=4)],
        qkv4([2, 3, 30], [2, 3, 30], [2, 3, 30]),
        [vi("Y", f, [2, 3, 30])],
    )
    # 6 query heads over 4 key-value heads.
    out["attention_heads_not_grouped"] = model(
        [attention_node()],
        qkv4([1, 6, 3, 8], [1, 4, 3, 8], [1, 4, 3, 8]),
        [vi("Y", f, [1, 6, 3, 8])],
    )
    # qk_matmul_output_mode 7.
    out["attention_qk_mode"] = model(
        [attention_node(outputs=("Y", "", "", "qk"), qk_matmul_output_mode=7)],
        qkv4([1, 2, 3, 8], [1, 2, 3, 8], [1, 2, 3, 8]),
        [vi("Y", f, [1, 2, 3, 8]), vi("qk", f, [1, 2, 3, 3])],
    )
    # A mask that does not broadcast over the queries.
    out["attention_mask_shape"] = model(
        [attention_node(inputs=("Q", "K", "V", "mask"))],
        qkv4([1, 2, 3, 8], [1, 2, 3, 8], [1, 2, 3, 8]) + [vi("mask", TensorProto.BOOL, [2, 3])],
        [vi("Y", f, [1, 2, 3, 8])],
    )
    # RotaryEmbedding with an odd rotary dim.
    out["rotary_odd_dim"] = model(
        [
            helper.make_node(
                "RotaryEmbedding",
                ["X", "cos", "sin"],
                ["Y"],
                name="rope",
                rotary_embedding_dim=3,
            )
        ],
        [vi("X", f, [1, 2, 3, 8]), vi("cos", f, [1, 3, 1]), vi("sin", f, [1, 3, 1])],
        [vi("Y", f, [1, 2, 3, 8])],
    )
    return out


def write_bad() -> None:
    for name, m in bad_models().items():
        with open(os.path.join(BAD, f"{name}.onnx"), "wb") as fh:
            fh.write(m.SerializeToString())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", metavar="DIR")
    parser.add_argument("--bad", action="store_true")
    args = parser.parse_args()
    if not args.reference and not args.bad:
        parser.error("give --reference DIR or --bad")
    if args.reference:
        reference(args.reference)
    if args.bad:
        write_bad()
    return 0


if __name__ == "__main__":
    sys.exit(main())
