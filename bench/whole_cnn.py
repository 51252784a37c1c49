#!/usr/bin/env python3
"""memc vs onnxruntime on whole CNNs the zoo lacks: MobileNetV2, ResNet-18, ResNet-50 and
ResNeXt-50 (32x4d) at 224x224.

    .venv/bin/python bench/whole_cnn.py [--models mobilenetv2,resnet18,resnet50,resnext50]
                                        [--repeat 50]
                                        [--threads 1,2] [--memc target/release/memc]
                                        [--out DIR]

`bench/conv_layers.py` measures these networks one layer at a time, where onnxruntime pays
for reordering every layer's input and output into its NCHWc layout; a whole network keeps
that layout from layer to layer (and memc keeps its activations in cache between layers), so
only whole networks say how the two compare. Each model is built here with onnx.helper,
random weights (He-scaled) and biases, batch norms folded into the convolutions as an
exporter's optimizer leaves them: MobileNetV2 (width 1.0: inverted residual blocks of 1x1
expansion, 3x3 depthwise and 1x1 projection convolutions, ReLU6 as Clip, residual Adds,
global average pool, a 1000-way Gemm), ResNet-18 (7x7/2 stem, 3x3/2 max pool, basic
blocks with 1x1/2 shortcuts, ReLU, residual Adds, pool and Gemm), and ResNet-50 and
ResNeXt-50 32x4d (the same stem, bottleneck blocks [3, 4, 6, 3] whose 3x3 is grouped 32 ways
in ResNeXt, the stride on the 3x3).

For each model and thread count, on the same input: onnxruntime (default optimizations,
intra-op threads N, sequential) median latency over --repeat runs in this process, then
`memc compile` and `memc run --threads N --repeat R --rss` (median latency, peak-RSS growth of
the first run); memc's output is checked against onnxruntime's (zoo tolerance 1e-4 + 1e-3
|ort|, as a fraction: <= 1 passes). `--rounds K` alternates the two K times (each --repeat
runs), so a machine whose speed drifts between phases slows both alike. Prints a Markdown
table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent


class Builder:
    """Nodes and initializers of one graph, with fresh names."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, array: np.ndarray, prefix: str) -> str:
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(array, n))
        return n

    def conv(self, x: str, cin: int, cout: int, k: int, s: int, group: int = 1,
             act: str | None = "relu") -> str:
        fan = cin // group * k * k
        w = self.const((self.rng.standard_normal((cout, cin // group, k, k))
                        * np.sqrt(2.0 / fan)).astype(np.float32), "w")
        b = self.const((self.rng.standard_normal(cout) * 0.1).astype(np.float32), "b")
        y = self.name("conv")
        self.nodes.append(helper.make_node("Conv", [x, w, b], [y], name=y, kernel_shape=[k, k],
                                           strides=[s, s], pads=[k // 2] * 4, group=group))
        return self.act(y, act)

    def stem(self) -> str:
        """A ResNet's stem: 3->64 7x7/2 convolution, ReLU, 3x3/2 max pool."""
        x = self.conv("x", 3, 64, 7, 2)
        pooled = self.name("pool")
        self.nodes.append(helper.make_node("MaxPool", [x], [pooled], kernel_shape=[3, 3],
                                           strides=[2, 2], pads=[1, 1, 1, 1]))
        return pooled

    def act(self, x: str, act: str | None) -> str:
        if act is None:
            return x
        y = self.name(act)
        if act == "relu":
            self.nodes.append(helper.make_node("Relu", [x], [y], name=y))
        else:
            lo = self.const(np.array(0, np.float32), "lo")
            hi = self.const(np.array(6, np.float32), "hi")
            self.nodes.append(helper.make_node("Clip", [x, lo, hi], [y], name=y))
        return y

    def add(self, a: str, b: str) -> str:
        y = self.name("add")
        self.nodes.append(helper.make_node("Add", [a, b], [y], name=y))
        return y

    def head(self, x: str, channels: int) -> None:
        self.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"]))
        self.nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"]))
        w = self.const((self.rng.standard_normal((1000, channels)) * 0.03).astype(np.float32), "fc")
        b = self.const(np.zeros(1000, np.float32), "fcb")
        self.nodes.append(helper.make_node("Gemm", ["flat", w, b], ["y"], transB=1))

    def model(self, name: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000])],
            self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m


def mobilenetv2(seed: int) -> onnx.ModelProto:
    g = Builder(seed)
    x, cin = g.conv("x", 3, 32, 3, 2, act="relu6"), 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            h, hidden = x, cin * t
            if t != 1:
                h = g.conv(h, cin, hidden, 1, 1, act="relu6")
            h = g.conv(h, hidden, hidden, 3, stride, group=hidden, act="relu6")
            h = g.conv(h, hidden, c, 1, 1, act=None)
            x = g.add(x, h) if stride == 1 and cin == c else h
            cin = c
    x = g.conv(x, 320, 1280, 1, 1, act="relu6")
    g.head(x, 1280)
    return g.model("mobilenetv2")


def resnet18(seed: int) -> onnx.ModelProto:
    g = Builder(seed)
    x, cin = g.stem(), 64
    for c, s in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        for i in range(2):
            stride = s if i == 0 else 1
            h = g.conv(x, cin, c, 3, stride)
            h = g.conv(h, c, c, 3, 1, act=None)
            short = g.conv(x, cin, c, 1, stride, act=None) if stride != 1 or cin != c else x
            x = g.act(g.add(h, short), "relu")
            cin = c
    g.head(x, 512)
    return g.model("resnet18")


def bottlenecks(seed: int, name: str, groups: int, width: int) -> onnx.ModelProto:
    """ResNet-50 (`groups` 1, `width` 64) or ResNeXt-50 32x4d (32, 128) at 224x224:
    bottleneck blocks [3, 4, 6, 3] (1x1 reduce, 3x3 (grouped), 1x1 expand), the stride on the
    3x3, 1x1/2 downsampling shortcuts."""
    g = Builder(seed)
    x, cin = g.stem(), 64
    for stage, (n, s) in enumerate([(3, 1), (4, 2), (6, 2), (3, 2)]):
        mid, out = width << stage, 256 << stage
        for i in range(n):
            stride = s if i == 0 else 1
            h = g.conv(x, cin, mid, 1, 1)
            h = g.conv(h, mid, mid, 3, stride, group=groups)
            h = g.conv(h, mid, out, 1, 1, act=None)
            short = g.conv(x, cin, out, 1, stride, act=None) if stride != 1 or cin != out else x
            x = g.act(g.add(h, short), "relu")
            cin = out
    g.head(x, cin)
    return g.model(name)


MODELS = {
    "mobilenetv2": mobilenetv2,
    "resnet18": resnet18,
    "resnet50": lambda seed: bottlenecks(seed, "resnet50", 1, 64),
    "resnext50": lambda seed: bottlenecks(seed, "resnext50", 32, 128),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mobilenetv2,resnet18")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--memc", default=str(ROOT / "target/release/memc"))
    ap.add_argument("--out", default=None, help="where the models and plans go (default: a temp dir)")
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="latency statistic of both sides: min suits a machine whose speed drifts between runs")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate onnxruntime's and memc's runs this many times (--repeat each), "
                         "so both see the same phases of a machine whose speed drifts; the "
                         "statistic is taken over every round's")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="memc-whole-cnn-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        if name not in MODELS:
            print(f"unknown model {name!r}; known: {', '.join(MODELS)}", file=sys.stderr)
            return 2
        model_path, plan, x_path = out / f"{name}.onnx", out / f"{name}.plan", out / f"{name}_x.npy"
        onnx.save(MODELS[name](0), str(model_path))
        x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
        np.save(x_path, x)
        subprocess.run([args.memc, "compile", str(model_path), "-o", str(plan)], check=True,
                       capture_output=True)
        for threads in [int(t) for t in args.threads.split(",")]:
            so = ort.SessionOptions()
            so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            sess = ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])
            want = sess.run(None, {"x": x})[0]
            for _ in range(5):
                sess.run(None, {"x": x})
            times, memc_stats = [], []
            out_dir = out / f"{name}_out_{threads}"
            for _ in range(max(args.rounds, 1)):
                for _ in range(args.repeat):
                    t = time.perf_counter()
                    sess.run(None, {"x": x})
                    times.append(time.perf_counter() - t)
                run = subprocess.run(
                    [args.memc, "run", str(plan), "--threads", str(threads), "--repeat",
                     str(args.repeat), "--rss", "--input", f"x={x_path}", "--output-dir",
                     str(out_dir)],
                    check=True, capture_output=True, text=True)
                memc_stats.append(
                    json.loads([l for l in run.stdout.splitlines() if l.startswith("{")][-1]))
            ort_ms = float(np.min(times) if args.stat == "min" else np.median(times)) * 1e3
            # Every round's statistic: the least of their minima, the median of their medians.
            pick = np.min if args.stat == "min" else np.median
            stats = dict(memc_stats[0])
            stats[f"{args.stat}_ms"] = float(pick([m[f"{args.stat}_ms"] for m in memc_stats]))
            stats["rss_growth_bytes"] = max(m["rss_growth_bytes"] for m in memc_stats)
            got = np.load(out_dir / "y.npy")
            err = float(np.max(np.abs(got - want) / (1e-4 + 1e-3 * np.abs(want))))
            rss = stats["rss_growth_bytes"] / 2**20
            budget = (stats["arena_bytes"] + stats["io_bytes"]) / 2**20
            rows.append((name, threads, stats[f"{args.stat}_ms"], ort_ms, rss, budget, err))
            print(f"{name} t={threads}: memc {stats[f'{args.stat}_ms']:.3f} ms, ort {ort_ms:.3f} ms",
                  file=sys.stderr)
    print(f"repeat {args.repeat}; {args.stat} latency in ms\n")
    print("| model | threads | memc ms | ORT ms | memc / ORT | memc run RSS growth MiB | arena + I/O MiB | max err |")
    print("|---|---|---|---|---|---|---|---|")
    for name, threads, memc_ms, ort_ms, rss, budget, err in rows:
        print(f"| {name} | {threads} | {memc_ms:.3f} | {ort_ms:.3f} | {memc_ms / ort_ms:.2f} | "
              f"{rss:.2f} | {budget:.2f} | {err:.2e} |")
    return 0 if all(r[6] <= 1 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
