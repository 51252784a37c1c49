#!/usr/bin/env python3
"""Compile time and peak RSS, side by side in one run: `memc compile` against creating an
onnxruntime.InferenceSession on the same file (all graph optimizations on, so onnxruntime fuses
DequantizeLinear + MatMul into MatMulNBits as it loads), next to the model's weight bytes.

Usage: .venv/bin/python bench/import_rss.py [--plan [--dim NAME=V ...]] MODEL.onnx [...]
Without --plan memc only imports (`--emit ir`); with --plan it compiles to a plan file (fusion,
memory plan, kernels, and the plan file written with every low-bit weight re-laid into the
kernels' layout as it streams), which needs every symbolic dim bound (--dim).
(build memc first: cargo build --release). Each command runs under /usr/bin/time -v, which
reports the peak RSS of the whole process. The onnxruntime figure includes the Python
interpreter and the onnxruntime import; the `python -c "import onnxruntime"` baseline is
printed so the two can be told apart.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEMC = os.path.join(ROOT, "target", "release", "memc")


def weight_bytes(path):
    """Bytes of all initializers, external data included, without loading the data."""
    model = onnx.load(path, load_external_data=False)
    total = 0
    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            info = {e.key: e.value for e in t.external_data}
            total += int(info.get("length", 0))
        elif t.raw_data:
            total += len(t.raw_data)
        else:
            n = 1
            for d in t.dims:
                n *= d
            total += n * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    return total


def timed(cmd):
    """Runs cmd under /usr/bin/time -v; returns (seconds, peak RSS bytes, exit code)."""
    proc = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    err = proc.stderr
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (.+)", err).group(1)
    parts = [float(p) for p in wall.strip().split(":")]
    seconds = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    if proc.returncode != 0:
        sys.stderr.write(err[-2000:])
    return seconds, rss_kb * 1024, proc.returncode


def mib(n):
    return f"{n / 2**20:,.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--plan", action="store_true", help="compile to a plan file, not just import")
    ap.add_argument("--dim", action="append", default=[], help="NAME=VALUE, passed to memc compile")
    args = ap.parse_args()
    ort_session = (
        "import onnxruntime as ort, sys; so = ort.SessionOptions(); "
        "so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL; "
        "ort.InferenceSession(sys.argv[1], so, providers=['CPUExecutionProvider'])"
    )
    _, base_rss, _ = timed([sys.executable, "-c", "import onnxruntime"])
    print(f"python + import onnxruntime baseline: {mib(base_rss)} MiB peak RSS")
    print()
    what = "compile to plan" if args.plan else "import"
    print(f"| model | weights MiB | memc {what} s | memc peak RSS MiB | memc RSS / weights | ORT session s | ORT peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for path in args.models:
        wb = weight_bytes(path)
        if args.plan:
            with tempfile.TemporaryDirectory() as tmp:
                dims = [a for d in args.dim for a in ("--dim", d)]
                cmd = [MEMC, "compile", path, *dims, "-o", os.path.join(tmp, "model.plan")]
                m_s, m_rss, m_rc = timed(cmd)
        else:
            m_s, m_rss, m_rc = timed([MEMC, "compile", path, "--emit", "ir", "-o", "/dev/null"])
        o_s, o_rss, o_rc = timed([sys.executable, "-c", ort_session, path])
        ratio = f"{m_rss / wb:.3f}" if wb else "-"
        memc_s = f"{m_s:.2f}" if m_rc == 0 else f"failed ({m_rc})"
        ort_s = f"{o_s:.2f}" if o_rc == 0 else f"failed ({o_rc})"
        name = os.path.basename(path)
        print(f"| {name} | {mib(wb)} | {memc_s} | {mib(m_rss)} | {ratio} | {ort_s} | {mib(o_rss)} |")


if __name__ == "__main__":
    main()
