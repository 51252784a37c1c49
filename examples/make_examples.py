#!/usr/bin/env python3
"""Regenerates the bundled example model and its input (small binary fixtures, committed).

    .venv/bin/python examples/make_examples.py

Writes examples/classifier.onnx: a small image classifier with a symbolic batch dim
(Conv 3->8 3x3, Relu, MaxPool 2x2, Conv 8->16 3x3, Relu, GlobalAveragePool, Flatten,
Gemm 16->10, Softmax), about 6 KB of weights; and examples/classifier_input.npy: one
deterministic 1x3x16x16 float32 image; and examples/classifier_expected.npy: onnxruntime's output
for that image (the CLI tests compare memc's with it). The weights come from a fixed seed.
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    rng = np.random.default_rng(7)

    def w(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        w("conv1.w", 8, 3, 3, 3), w("conv1.b", 8, scale=0.1),
        w("conv2.w", 16, 8, 3, 3, scale=0.15), w("conv2.b", 16, scale=0.1),
        w("fc.w", 10, 16), w("fc.b", 10, scale=0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "classifier",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="memc-examples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, "classifier.onnx"))
    image = np.random.default_rng(11).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(os.path.join(HERE, "classifier_input.npy"), image)
    import onnxruntime as ort

    session = ort.InferenceSession(os.path.join(HERE, "classifier.onnx"), providers=["CPUExecutionProvider"])
    np.save(os.path.join(HERE, "classifier_expected.npy"), session.run(None, {"image": image})[0])


if __name__ == "__main__":
    main()
