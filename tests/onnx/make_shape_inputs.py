#!/usr/bin/env python3
"""Write the fixture of `memc compile --const`: a model whose shapes come from graph inputs.

    .venv/bin/python tests/onnx/make_shape_inputs.py

Writes tests/onnx/fixtures/shape_inputs/: model.onnx, the inputs x.npy, shape.npy, pads.npy,
and expected.npy, onnxruntime's output for them; and default_input.onnx, a Reshape whose
`shape` input also has an initializer (its default value), which `--const` refuses to bind.
Deterministic (fixed seed).

    x[2, 3, 4] f32, shape[3] i64, pads[6] i64, scale[] f32:
      Reshape(x, shape) -> r                 (r's shape is shape's value)
      Pad(r, pads)      -> p                 (p's shape adds pads' values)
      Mul(p, scale)     -> y[?, ?, ?]        (declared with unnamed dims)

Without `--const shape=... --const pads=...` the sizes of r, p and y are not known at
compile time, and memc cannot plan them; with them, the plan's only inputs are x and scale.
"""

import os

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "shape_inputs")


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
        helper.make_node("Pad", ["r", "pads"], ["p"], name="pad", mode="constant"),
        helper.make_node("Mul", ["p", "scale"], ["y"], name="mul"),
    ]
    graph = helper.make_graph(
        nodes,
        "shape_inputs",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [3]),
            helper.make_tensor_value_info("pads", TensorProto.INT64, [6]),
            helper.make_tensor_value_info("scale", TensorProto.FLOAT, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None, None])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10, producer_name="memc-fixtures"
    )
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, "model.onnx"))
    rng = np.random.default_rng(17)
    feeds = {
        "x": np.round(rng.standard_normal((2, 3, 4)), 3).astype(np.float32),
        "shape": np.array([4, -1, 2], dtype=np.int64),
        "pads": np.array([0, 1, 0, 1, 0, 2], dtype=np.int64),
        "scale": np.array(1.5, dtype=np.float32),
    }
    for name, value in feeds.items():
        np.save(os.path.join(OUT, f"{name}.npy"), value)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, feeds)
    np.save(os.path.join(OUT, "expected.npy"), y)
    default = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
        "default_input",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 4])],
        initializer=[onnx.numpy_helper.from_array(np.array([6, 4], dtype=np.int64), "shape")],
    )
    default = helper.make_model(
        default, opset_imports=[helper.make_opsetid("", 17)], ir_version=10, producer_name="memc-fixtures"
    )
    onnx.checker.check_model(default)
    onnx.save(default, os.path.join(OUT, "default_input.onnx"))
    print(f"wrote {OUT}: y {y.shape}")


if __name__ == "__main__":
    main()
