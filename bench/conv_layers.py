#!/usr/bin/env python3
"""memc vs onnxruntime, one convolution at a time: every Conv layer of the zoo's CNNs, and the
layer shapes of models the zoo lacks.

    .venv/bin/python bench/conv_layers.py [--models resnet,unet,resnet18,mobilenetv2,mixed]
                                          [--repeat 50] [--threads 1,2]
                                          [--memc target/release/memc] [--zoo DIR]

Each Conv node of each zoo model (generated with bench/models/generate.py into --zoo if missing,
batch 1) becomes a one-node ONNX model with the layer's own weights and its inferred static
input shape; layers with the same shapes and attributes are measured once and counted. The
other names are lists of one-node models with random weights and biases (`SYNTHETIC`): a
ResNet-18 at 224x224 (its stem, its max pool and each stage's convolutions), a MobileNetV2 at
224x224 (depthwise, pointwise and strided depthwise layers, with their counts) and "mixed"
(grouped, dilated, 1-d and 3-d convolutions). For each layer and thread count, in one run and
on the same input:

* memc: `memc compile` then `memc run --threads N --repeat R --rss` (median latency, peak-RSS
  growth of the first run), and from `memc inspect --json` the arena, the layer's activation
  lower bound (its input plus its output: model order) and the planned scratch;
* onnxruntime in this process with intra-op threads N, at two graph optimization levels:
  ORT_ENABLE_ALL (the default; on x86 it runs convolutions in the NCHWc layout with its direct
  kernels) and ORT_ENABLE_EXTENDED (no layout change: MLAS's im2col + GEMM convolution).

Prints a Markdown table, with memc's worst error against onnxruntime's output as a fraction of
the zoo tolerance 1e-4 + 1e-3 |ort| (<= 1 passes).
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
from onnx import helper, numpy_helper, shape_inference

ROOT = Path(__file__).resolve().parent.parent


def static_shape(value_info) -> list[int] | None:
    dims = value_info.type.tensor_type.shape.dim
    shape = []
    for d in dims:
        if d.HasField("dim_value"):
            shape.append(d.dim_value)
        elif d.dim_param == "batch":
            shape.append(1)
        else:
            return None
    return shape


def conv_layers(model_path: Path):
    """(key, one-node model, count, description) for each distinct Conv layer of the model."""
    model = onnx.load(str(model_path))
    # Bind the batch so every shape is static.
    for vi in list(model.graph.input) + list(model.graph.output):
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param == "batch":
                d.ClearField("dim_param")
                d.dim_value = 1
    model = shape_inference.infer_shapes(model)
    shapes = {}
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        s = static_shape(vi)
        if s is not None:
            shapes[vi.name] = s
    inits = {t.name: t for t in model.graph.initializer}
    layers: dict[str, list] = {}
    opset = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        x, w = node.input[0], node.input[1]
        if x not in shapes or node.output[0] not in shapes or w not in inits:
            continue
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        wshape = list(inits[w].dims)
        key = json.dumps([shapes[x], wshape, bias is not None, sorted((k, str(v)) for k, v in attrs.items())])
        if key in layers:
            layers[key][2] += 1
            continue
        inputs = ["x", "w", "b"] if bias else ["x", "w"]
        new_inits = [numpy_helper.from_array(numpy_helper.to_array(inits[w]), "w")]
        if bias:
            new_inits.append(numpy_helper.from_array(numpy_helper.to_array(inits[bias]), "b"))
        conv = helper.make_node("Conv", inputs, ["y"], **attrs)
        graph = helper.make_graph(
            [conv], "conv",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shapes[x])],
            [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shapes[node.output[0]])],
            new_inits,
        )
        one = helper.make_model(graph, opset_imports=opset or [helper.make_opsetid("", 17)])
        one.ir_version = model.ir_version
        k = "x".join(str(v) for v in wshape[2:])
        stride = attrs.get("strides", [1] * len(wshape[2:]))
        group = attrs.get("group", 1)
        desc = (f"{shapes[x][1]}->{wshape[0]} k{k} s{stride[0]}"
                + (f" g{group}" if group != 1 else "")
                + (f" d{attrs['dilations'][0]}" if any(d != 1 for d in attrs.get("dilations", [1])) else "")
                + f" @{'x'.join(str(v) for v in shapes[x][2:])}")
        layers[key] = [key, one, 1, desc, node.name]
    return list(layers.values())


# name: [(op, in channels, out channels, kernel, stride, pad, group, dilation, input spatial
# dims, count)]; op "Conv" or "MaxPool" (out channels ignored).
SYNTHETIC = {
    "resnet18": [
        ("Conv", 3, 64, 7, 2, 3, 1, 1, (224, 224), 1),
        ("MaxPool", 64, 64, 3, 2, 1, 1, 1, (112, 112), 1),
        ("Conv", 64, 64, 3, 1, 1, 1, 1, (56, 56), 4),
        ("Conv", 64, 128, 3, 2, 1, 1, 1, (56, 56), 1),
        ("Conv", 64, 128, 1, 2, 0, 1, 1, (56, 56), 1),
        ("Conv", 128, 128, 3, 1, 1, 1, 1, (28, 28), 3),
        ("Conv", 128, 256, 3, 2, 1, 1, 1, (28, 28), 1),
        ("Conv", 128, 256, 1, 2, 0, 1, 1, (28, 28), 1),
        ("Conv", 256, 256, 3, 1, 1, 1, 1, (14, 14), 3),
        ("Conv", 256, 512, 3, 2, 1, 1, 1, (14, 14), 1),
        ("Conv", 256, 512, 1, 2, 0, 1, 1, (14, 14), 1),
        ("Conv", 512, 512, 3, 1, 1, 1, 1, (7, 7), 3),
    ],
    "mobilenetv2": [
        ("Conv", 3, 32, 3, 2, 1, 1, 1, (224, 224), 1),
        ("Conv", 32, 32, 3, 1, 1, 32, 1, (112, 112), 1),
        ("Conv", 32, 16, 1, 1, 0, 1, 1, (112, 112), 1),
        ("Conv", 16, 96, 1, 1, 0, 1, 1, (112, 112), 1),
        ("Conv", 96, 96, 3, 2, 1, 96, 1, (112, 112), 1),
        ("Conv", 24, 144, 1, 1, 0, 1, 1, (56, 56), 2),
        ("Conv", 144, 144, 3, 1, 1, 144, 1, (56, 56), 1),
        ("Conv", 144, 24, 1, 1, 0, 1, 1, (56, 56), 1),
        ("Conv", 144, 144, 3, 2, 1, 144, 1, (56, 56), 1),
        ("Conv", 192, 192, 3, 1, 1, 192, 1, (28, 28), 2),
        ("Conv", 32, 192, 1, 1, 0, 1, 1, (28, 28), 3),
        ("Conv", 384, 384, 3, 1, 1, 384, 1, (14, 14), 4),
        ("Conv", 576, 576, 3, 1, 1, 576, 1, (14, 14), 3),
        ("Conv", 960, 960, 3, 1, 1, 960, 1, (7, 7), 3),
    ],
    "mixed": [
        ("Conv", 128, 128, 3, 1, 1, 32, 1, (28, 28), 1),
        ("Conv", 64, 64, 3, 1, 2, 1, 2, (56, 56), 1),
        ("Conv", 64, 64, 5, 1, 2, 1, 1, (1024,), 1),
        ("Conv", 16, 16, 3, 1, 1, 1, 1, (16, 32, 32), 1),
    ],
}


def synthetic_layers(name: str):
    """(key, one-node model, count, description, name) for each layer of a SYNTHETIC list."""
    rng = np.random.default_rng(1)
    layers = []
    for i, (op, cin, cout, k, stride, pad, group, dil, spatial, count) in enumerate(SYNTHETIC[name]):
        n = len(spatial)
        x_shape = [1, cin, *spatial]
        out = [(s + 2 * pad - dil * (k - 1) - 1) // stride + 1 for s in spatial]
        attrs = dict(kernel_shape=[k] * n, strides=[stride] * n, pads=[pad] * (2 * n))
        inits = []
        if op == "Conv":
            attrs.update(group=group, dilations=[dil] * n)
            w = (rng.standard_normal([cout, cin // group] + [k] * n) / np.sqrt(cin // group * k ** n)).astype(np.float32)
            b = rng.standard_normal(cout).astype(np.float32)
            inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
            inputs = ["x", "w", "b"]
            y_shape = [1, cout, *out]
            desc = (f"{cin}->{cout} k{k} s{stride}" + (f" g{group}" if group != 1 else "")
                    + (f" d{dil}" if dil != 1 else "") + f" @{'x'.join(map(str, spatial))}")
        else:
            inputs = ["x"]
            y_shape = [1, cin, *out]
            desc = f"maxpool {cin} k{k} s{stride} @{'x'.join(map(str, spatial))}"
        node = helper.make_node(op, inputs, ["y"], **attrs)
        graph = helper.make_graph(
            [node], "layer",
            [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, y_shape)],
            inits,
        )
        one = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        one.ir_version = 8
        layers.append((f"{name}{i}", one, count, desc, f"{name}{i}"))
    return layers


def ort_median(path: Path, x: np.ndarray, threads: int, level, repeat: int):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = level
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    out = sess.run(None, {"x": x})[0]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, {"x": x})
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet,unet")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--memc", default=str(ROOT / "target/release/memc"))
    ap.add_argument("--zoo", default="/tmp/memc-bench-zoo")
    args = ap.parse_args()
    zoo = Path(args.zoo)
    zoo.mkdir(parents=True, exist_ok=True)
    models = args.models.split(",")
    missing = [m for m in models if m not in SYNTHETIC and not (zoo / f"{m}.onnx").exists()]
    if missing:
        subprocess.run([sys.executable, str(ROOT / "bench/models/generate.py"), "--out", str(zoo), "--only", ",".join(missing)], check=True)
    threads_list = [int(t) for t in args.threads.split(",")]
    rows = []
    totals = {}
    work = Path(tempfile.mkdtemp(prefix="memc-conv-layers-"))
    rng = np.random.default_rng(0)
    for m in models:
        layers = synthetic_layers(m) if m in SYNTHETIC else conv_layers(zoo / f"{m}.onnx")
        for i, (key, one, count, desc, name) in enumerate(layers):
            path = work / f"{m}_{i}.onnx"
            onnx.save(one, str(path))
            x_shape = [d.dim_value for d in one.graph.input[0].type.tensor_type.shape.dim]
            x = rng.standard_normal(x_shape).astype(np.float32)
            np.save(work / "x.npy", x)
            plan = work / f"{m}_{i}.plan"
            res = subprocess.run([args.memc, "compile", str(path), "-o", str(plan)], capture_output=True, text=True)
            if res.returncode != 0:
                rows.append((m, desc, count, None, res.stderr.strip()))
                continue
            meta = json.loads(subprocess.run([args.memc, "inspect", str(plan), "--json"], capture_output=True, text=True, check=True).stdout)["meta"]["planner"]
            for threads in threads_list:
                out_dir = work / "out"
                r = subprocess.run([args.memc, "run", str(plan), "--threads", str(threads), "--repeat", str(args.repeat), "--rss", "--time",
                                    "--input", f"x={work / 'x.npy'}", "--output-dir", str(out_dir)], capture_output=True, text=True)
                if r.returncode != 0:
                    rows.append((m, desc, count, None, r.stderr.strip()))
                    break
                # `--rss` and `--time` each end with a JSON line: the run (input copied into the
                # arena, outputs read in place) and the kernels alone.
                mr = {}
                for line in r.stdout.splitlines():
                    if line.startswith("{"):
                        mr.update(json.loads(line))
                t_all, ref = ort_median(path, x, threads, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, args.repeat)
                t_ext, _ = ort_median(path, x, threads, ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, args.repeat)
                got = np.load(out_dir / "y.npy")
                err = float(np.max(np.abs(got.astype(np.float64) - ref) / (1e-4 + 1e-3 * np.abs(ref))))
                rows.append((m, desc, count, dict(threads=threads, memc=mr["median_ms"], kernels=mr["backend_median_ms"], all=t_all, ext=t_ext,
                                                   arena=meta["arena_size"], bound=meta["bound_model_order"],
                                                   scratch=meta["scratch_peak"], rss=mr["rss_growth_bytes"], err=err), None))
                tot = totals.setdefault((m, threads), [0.0, 0.0, 0.0])
                tot[0] += count * mr["median_ms"]
                tot[1] += count * t_all
                tot[2] += count * t_ext
                print(f"{m} {desc} x{count} t={threads}: memc {mr['median_ms']:.3f} ms, ort {t_all:.3f} / {t_ext:.3f} ms", file=sys.stderr)
    kib = lambda b: f"{b / 1024:.0f}"
    print(f"repeat {args.repeat}; median latency in ms; KiB")
    print()
    print("memc ms: the whole `memc run` (the input copied into the arena first); memc kernels ms: its kernels alone (`--time`)")
    print()
    print("| model | layer | count | threads | memc ms | memc kernels ms | ORT all ms | ORT extended ms | memc / ORT all | memc / ORT ext | arena KiB | bound KiB | scratch KiB | run RSS growth KiB | max err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m, desc, count, r, err in rows:
        if r is None:
            print(f"| {m} | {desc} | {count} | — | — | — | — | — | — | — | — | — | — | — | {err} |")
            continue
        print(f"| {m} | {desc} | {count} | {r['threads']} | {r['memc']:.3f} | {r['kernels']:.3f} | {r['all']:.3f} | {r['ext']:.3f} | "
              f"{r['memc'] / r['all']:.2f} | {r['memc'] / r['ext']:.2f} | {kib(r['arena'])} | {kib(r['bound'])} | "
              f"{kib(r['scratch'])} | {kib(r['rss'] or 0)} | {r['err']:.2e} |")
    print()
    print("| model | threads | sum of layers, memc ms | ORT all ms | ORT extended ms | memc / ORT all | memc / ORT ext |")
    print("|---|---|---|---|---|---|---|")
    for (m, threads), (a, b, c) in totals.items():
        print(f"| {m} | {threads} | {a:.3f} | {b:.3f} | {c:.3f} | {a / b:.2f} | {a / c:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
