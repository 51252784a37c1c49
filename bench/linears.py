#!/usr/bin/env python3
"""memc vs onnxruntime on stacked linear layers, side by side in one run.

    .venv/bin/python bench/linears.py [--memc target/release/memc] [--layers 8] [--width 2048]
                                      [--batch 16] [--repeat 50] [--threads 1,2]

Writes a model of `--layers` x Linear(width, width) as torch.onnx exports nn.Linear on 2-d
inputs (Gemm with transB=1, random weights, seed 0) to a temporary directory, compiles it with
memc, and times `memc run --threads N --repeat R` (its median) and an onnxruntime session (intra-op
threads N, default optimizations, median of R runs after 3 warm-ups) on the same input. Prints a
Markdown table.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent


def build(layers: int, width: int, batch: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, inits, h = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) * 0.02).astype(np.float32)
        b = (rng.standard_normal(width) * 0.02).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Gemm", [h, f"w{i}", f"b{i}"], [f"h{i}"], transB=1))
        h = f"h{i}"
    graph = helper.make_graph(
        nodes, "linears", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [helper.make_tensor_value_info(h, TensorProto.FLOAT, [batch, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memc", default=str(ROOT / "target/release/memc"))
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        onnx.save(build(args.layers, args.width, args.batch), tmp / "linears.onnx")
        x = np.random.default_rng(1).standard_normal((args.batch, args.width)).astype(np.float32)
        np.save(tmp / "x.npy", x)
        subprocess.run([args.memc, "compile", str(tmp / "linears.onnx"), "-o", str(tmp / "linears.plan")],
                       check=True, capture_output=True)
        print(f"{args.layers} x Linear({args.width}, {args.width}), batch {args.batch}; median of {args.repeat}\n")
        print("| threads | memc ms | onnxruntime ms | memc / ort |")
        print("|---|---|---|---|")
        for t in [int(v) for v in args.threads.split(",")]:
            so = ort.SessionOptions()
            so.intra_op_num_threads = t
            so.inter_op_num_threads = 1
            session = ort.InferenceSession(str(tmp / "linears.onnx"), so, providers=["CPUExecutionProvider"])
            for _ in range(3):
                session.run(None, {"x": x})
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                session.run(None, {"x": x})
                times.append(time.perf_counter() - t0)
            out = subprocess.run([args.memc, "run", str(tmp / "linears.plan"), "--input", f"x={tmp / 'x.npy'}",
                                  "--threads", str(t), "--repeat", str(args.repeat)],
                                 check=True, capture_output=True, text=True).stdout
            line = next(l for l in out.splitlines() if l.startswith("run"))
            memc_ms = float(line.split("median")[1].split("ms")[0])
            ort_ms = float(np.median(times)) * 1e3
            print(f"| {t} | {memc_ms:.3f} | {ort_ms:.3f} | {memc_ms / ort_ms:.2f} |")


if __name__ == "__main__":
    main()
