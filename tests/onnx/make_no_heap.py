"""Write the models of `tests/no_heap.rs`, deterministically: small graphs that exercise every
kernel family a run may parallelize (MatMul and Gemm with packed and in-place `B`, batched
attention products, convolutions through im2col and as one product, low-bit products on the
few-rows and many-rows paths (QDQ int4, fused by memc), ONNX Attention), committed because they are small.

Usage: .venv/bin/python tests/onnx/make_no_heap.py
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "no_heap")


def rnd(rng, *shape):
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


def int4_weight(rng, name, k, n, block=32):
    """A blockwise int4 weight [K, N] with its scales [K / block, N] (QDQ, as onnxruntime's
    MatMulNBitsQuantizer writes it), which memc fuses with its MatMul into a low-bit product."""
    q = rng.integers(-8, 8, size=(k, n)).astype(np.int64)
    scales = (rng.random((k // block, n)) * 0.02 + 0.01).astype(np.float32)
    return [
        helper.make_tensor(f"{name}_q", TensorProto.INT4, [k, n], q.flatten().tolist()),
        numpy_helper.from_array(scales, f"{name}_s"),
    ]


def model():
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array(rnd(rng, 128, 64), "w1"),  # Gemm transB: B packed
        numpy_helper.from_array(rnd(rng, 128, 128), "w2"),  # MatMul
        numpy_helper.from_array(rnd(rng, 16, 8, 3, 3), "wc"),
        numpy_helper.from_array(rnd(rng, 16, 16, 1, 1), "wp"),
        numpy_helper.from_array(np.array([4, 32, 32], dtype=np.int64), "heads"),
        numpy_helper.from_array(np.array([2, 32, 64], dtype=np.int64), "qkv_shape"),
    ]
    inits += int4_weight(rng, "nb1", 128, 96)
    inits += int4_weight(rng, "nb2", 128, 96)
    nodes = [
        # Linear layers: 32 rows (B packed), then 2 rows (B read in place).
        helper.make_node("Gemm", ["x", "w1"], ["h1"], name="fc1", transB=1),
        helper.make_node("Relu", ["h1"], ["h1r"], name="relu1"),
        helper.make_node("MatMul", ["h1r", "w2"], ["h2"], name="fc2"),
        helper.make_node("MatMul", ["v", "w2"], ["y_small"], name="gemv"),
        # Self-attention products over 4 heads of [32, 32].
        helper.make_node("Reshape", ["h2", "heads"], ["q"], name="split_heads"),
        helper.make_node("Transpose", ["q"], ["kt"], name="kt", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        helper.make_node("Softmax", ["scores"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "q"], ["y_attn"], name="pv"),
        # ONNX Attention (opset 23) on [2, 32, 64] with 4 heads.
        helper.make_node("Reshape", ["h2", "qkv_shape"], ["qkv"], name="qkv"),
        helper.make_node(
            "Attention", ["qkv", "qkv", "qkv"], ["y_onnx_attn"], name="attention",
            q_num_heads=4, kv_num_heads=4,
        ),
        # Convolutions: 3x3 (im2col) and 1x1 (one product).
        helper.make_node("Conv", ["img", "wc"], ["c1"], name="conv3x3", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["c1r"], name="relu2"),
        helper.make_node("Conv", ["c1r", "wp"], ["y_conv"], name="conv1x1"),
        # Low-bit products: 4 rows (few-rows path) and 160 rows (tiles and a GEMM).
        helper.make_node("DequantizeLinear", ["nb1_q", "nb1_s"], ["nb1"], name="dq1", axis=0, block_size=32),
        helper.make_node("MatMul", ["v", "nb1"], ["y_nbits_few"], name="nbits_few"),
        helper.make_node("DequantizeLinear", ["nb2_q", "nb2_s"], ["nb2"], name="dq2", axis=0, block_size=32),
        helper.make_node("MatMul", ["rows", "nb2"], ["y_nbits_many"], name="nbits_many"),
    ]
    f = TensorProto.FLOAT
    inputs = [
        helper.make_tensor_value_info("x", f, [32, 64]),
        helper.make_tensor_value_info("v", f, [2, 128]),
        helper.make_tensor_value_info("img", f, [1, 8, 16, 16]),
        helper.make_tensor_value_info("rows", f, [160, 128]),
    ]
    outputs = [
        helper.make_tensor_value_info(name, f, None)
        for name in ["y_small", "y_attn", "y_onnx_attn", "y_conv", "y_nbits_few", "y_nbits_many"]
    ]
    g = helper.make_graph(nodes, "no_heap", inputs, outputs, inits)
    m = helper.make_model(
        g,
        opset_imports=[helper.make_opsetid("", 23)],
        ir_version=10,
        producer_name="memc-tests",
    )
    return m


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    onnx.save(model(), os.path.join(HERE, "model.onnx"))
