"""Random convolutions that memc may run transposed, against onnxruntime.

Each model reduces a 2 MiB input first (so the convolution is not the model's activation peak
and its scratch fits under it), then runs Conv + Add (a residual) + Relu, which memc fuses
into the convolution. Shapes are drawn at random around the transposed form's rule (few output
pixels, 128-264 output channels, strides 1-3, dilations 1-2); each model is compiled with
memc, run at one and two threads, and compared with onnxruntime (graph optimizations off)
within the zoo test's tolerance `1e-4 + 1e-3 max |ort|`.

    .venv/bin/python bench/conv_transposed_check.py [--memc target/release/memc] [--seed 1] [--count 16]

Prints one line per model and thread count (whether it ran transposed, the error as a
fraction of the tolerance) and exits non-zero when any output is outside it.
"""

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memc", default=str(ROOT / "target/release/memc"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=16)
    args = ap.parse_args()
    random.seed(args.seed)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for case in range(args.count):
            n = random.choice([1, 2])
            c = random.choice([3, 8, 16, 33])
            m = random.choice([128, 130, 256, 264])
            hw = random.choice([5, 7, 9, 12, 14, 16])
            k = random.choice([1, 2, 3, 5])
            s = random.choice([1, 2, 2, 3])
            dil = random.choice([1, 1, 2])
            p = random.choice([0, 1, 2])
            oh = (hw + 2 * p - dil * (k - 1) - 1) // s + 1
            if oh < 1:
                continue
            rng = np.random.default_rng(case)
            w = (rng.standard_normal((m, c, k, k)) * (2.0 / (c * k * k)) ** 0.5).astype(np.float32)
            b = (rng.standard_normal(m) * 0.1).astype(np.float32)
            nodes = [
                h.make_node("ReduceMax", ["z"], ["r"], keepdims=0),
                h.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], strides=[s, s],
                            pads=[p] * 4, dilations=[dil, dil]),
                h.make_node("Add", ["c", "res"], ["a"]),
                h.make_node("Relu", ["a"], ["y"]),
            ]
            inputs = [
                h.make_tensor_value_info("x", T.FLOAT, [n, c, hw, hw]),
                h.make_tensor_value_info("z", T.FLOAT, [1 << 19]),
                h.make_tensor_value_info("res", T.FLOAT, [n, m, oh, oh]),
            ]
            outputs = [h.make_tensor_value_info("y", T.FLOAT, None),
                       h.make_tensor_value_info("r", T.FLOAT, None)]
            graph = h.make_graph(nodes, "conv", inputs, outputs,
                                 [nh.from_array(w, "w"), nh.from_array(b, "b")])
            model = d / "conv.onnx"
            onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), model)
            feeds = {
                "x": rng.standard_normal((n, c, hw, hw)).astype(np.float32),
                "z": rng.standard_normal(1 << 19).astype(np.float32),
                "res": rng.standard_normal((n, m, oh, oh)).astype(np.float32),
            }
            for name, value in feeds.items():
                np.save(d / f"{name}.npy", value)
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            ref = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
            plan = d / "conv.plan"
            subprocess.run([args.memc, "compile", str(model), "-o", str(plan)], check=True,
                           capture_output=True)
            kernels = subprocess.run([args.memc, "compile", str(model), "--emit", "kernels"],
                                     check=True, capture_output=True, text=True).stdout
            transposed = kernels.count("run transposed")
            for threads in (1, 2):
                run = [args.memc, "run", str(plan), "--threads", str(threads), "--output-dir",
                       str(d / "out")]
                for name in feeds:
                    run += ["--input", f"{name}={d / (name + '.npy')}"]
                subprocess.run(run, check=True, capture_output=True)
                y = np.load(d / "out" / "y.npy")
                err = np.abs(y - ref).max() / (1e-4 + 1e-3 * np.abs(ref).max())
                bad += err > 1
                print(f"n{n} c{c} m{m} {hw}x{hw} k{k} s{s} d{dil} p{p} -> {oh}x{oh} "
                      f"transposed={transposed} threads={threads} err/tol {err:.3f}")
    print("outside the tolerance:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
