#!/usr/bin/env python3
"""memc vs onnxruntime layer by layer inside one whole model: where the time goes.

    .venv/bin/python bench/layer_gaps.py MODEL.onnx --input x=X.npy [--dim seq=128] [--threads 1]
                                         [--rounds 3] [--repeat 40] [--top 25]
                                         [--memc target/release/memc]

`bench/conv_layers.py` times each layer alone, where onnxruntime pays for reordering the layer's
input and output into its NCHWc layout; inside a whole network it keeps that layout from layer
to layer, so only a whole model says which layers memc loses on. This script compiles MODEL
with memc and runs it `--rounds` times with `memc run --profile` (each kernel's minimum over
`--repeat` runs, the minimum over the rounds), runs onnxruntime (default optimizations, its
profiler on, the same input, intra-op threads N) and takes each node's minimum, then joins the
two by node: memc's kernels by the ONNX node they came from, onnxruntime's fused nodes by the
output they write (`_nchwc` stripped), both by fused group: a Conv, Gemm or MatMul with the
BatchNormalization, Relu, Clip and Add that read only its result (one node in onnxruntime, one
kernel and its epilogue in memc). Prints the joined nodes, largest gap first, and both sums.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent


def memc_minima(memc: str, plan: Path, inputs: list[str], threads: int, rounds: int, repeat: int):
    """Per ONNX node: (sum over its kernels of each kernel's minimum, the first kernel's size)."""
    best: dict[str, tuple[float, str, str]] = {}
    args = [a for spec in inputs for a in ("--input", spec)]
    for _ in range(rounds):
        out = subprocess.run(
            [memc, "run", str(plan), "--threads", str(threads), "--repeat", str(repeat),
             "--profile", "--profile-top", "100000", *args],
            capture_output=True, text=True, check=True,
        ).stdout
        for line in out.splitlines():
            m = re.search(r'min\s+([0-9.]+) ms\s+#(\d+) (onnx\.\w+) "([^"]+)": (.*)', line)
            if not m:
                continue
            t, kernel, op, node, what = float(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5)
            key = f"{node}#{kernel}"
            if key not in best or t < best[key][0]:
                best[key] = (t, node, f"{op}: {what}")
    nodes: dict[str, list] = {}
    for t, node, what in best.values():
        entry = nodes.setdefault(node, [0.0, ""])
        entry[0] += t
        if "contract" in what or not entry[1]:
            entry[1] = what
    return {node: (t, what) for node, (t, what) in nodes.items()}


def groups(graph) -> dict[str, str]:
    """Every node's name and output -> the node that leads its fused group.

    A Conv, Gemm or MatMul leads; a BatchNormalization, Relu, Clip or Add that is the only
    reader of the group's output joins it (onnxruntime folds those into its convolution and
    names the fused node after the last output; memc folds them into the kernel's epilogue).
    """
    consumers = collections.defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)
    lead = {}
    for node in graph.node:
        lead.setdefault(node.name, node.name)
        for out in node.output:
            lead.setdefault(out, lead[node.name])
        if node.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        out = node.output[0]
        while True:
            after = consumers.get(out, [])
            if len(after) != 1 or after[0].op_type not in ("BatchNormalization", "Relu", "Clip", "Add"):
                break
            lead[after[0].name] = node.name
            out = after[0].output[0]
            lead[out] = node.name
    return lead


def ort_minima(model: Path, feeds: dict, threads: int, runs: int, lead: dict[str, str]):
    """Per fused group: the sum of onnxruntime's per-node minimum kernel times (ms)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        options.profile_file_prefix = str(Path(tmp) / "ort")
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        for _ in range(runs):
            session.run(None, feeds)
        events = json.load(open(session.end_profiling()))
    times = collections.defaultdict(list)
    for event in events:
        name = event.get("name", "")
        if event.get("cat") == "Node" and name.endswith("_kernel_time"):
            times[name[: -len("_kernel_time")]].append(event["dur"] / 1000)
    result = collections.defaultdict(float)
    for name, values in times.items():
        base = name[: -len("_nchwc")] if name.endswith("_nchwc") else name
        result[lead.get(base, base)] += min(values)
    return dict(result)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--input", action="append", default=[], help="NAME=FILE.npy (repeatable)")
    ap.add_argument("--dim", action="append", default=[], help="NAME=SIZE for `memc compile` (repeatable)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--memc", default=str(ROOT / "target/release/memc"))
    args = ap.parse_args()
    model = Path(args.model)
    feeds = {}
    for spec in args.input:
        name, _, path = spec.partition("=")
        if not path:
            print(f"--input {spec}: expected NAME=FILE.npy", file=sys.stderr)
            return 2
        feeds[name] = np.load(path)
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "model.plan"
        dims = [a for spec in args.dim for a in ("--dim", spec)]
        subprocess.run([args.memc, "compile", str(model), "-o", str(plan), *dims], check=True,
                       capture_output=True)
        mine = memc_minima(args.memc, plan, args.input, args.threads, args.rounds, args.repeat)
    lead = groups(onnx.load(str(model)).graph)
    memc: dict[str, tuple[float, str]] = {}
    for node, (t, what) in mine.items():
        group = lead.get(node, node)
        total, label = memc.get(group, (0.0, ""))
        memc[group] = (total + t, label if "contract" in label or (label and "contract" not in what) else what)
    theirs = ort_minima(model, feeds, args.threads, args.rounds * args.repeat, lead)
    rows = sorted(
        ((t - theirs[node], node, t, theirs[node], what) for node, (t, what) in memc.items()
         if node in theirs),
        reverse=True,
    )
    print(f"{model.name}, {args.threads} thread(s): per-node minima, ms (memc kernels joined by node)\n")
    print("| node | memc | onnxruntime | gap | memc kernel |")
    print("|---|---|---|---|---|")
    for gap, node, mine, ort_ms, what in rows[: args.top]:
        print(f"| {node} | {mine:.3f} | {ort_ms:.3f} | {gap:+.3f} | {what[:60]} |")
    print(f"\njoined nodes: {len(rows)}; sums: memc {sum(r[2] for r in rows):.3f} ms, "
          f"onnxruntime {sum(r[3] for r in rows):.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
