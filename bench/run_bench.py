#!/usr/bin/env python3
"""memc vs onnxruntime, side by side: latency and peak-RSS growth while running.

    .venv/bin/python bench/run_bench.py [--models mlp,bert,...] [--repeat 20] [--threads 1,2]
                                        [--memc target/release/memc] [--zoo DIR]

For each zoo model (generated with bench/models/generate.py into --zoo if missing), with the
same deterministic inputs (bench/models/reference.py) and the same thread counts:

* onnxruntime 1.31 runs in this process: one session per thread count (intra-op threads = N,
  inter-op = 1, sequential execution). Peak-RSS growth is that of the first run after the
  session is created: VmHWM after it minus VmRSS before, with the high-water mark reset through
  /proc/self/clear_refs ("5"). Then --repeat timed runs.
* memc runs as `memc run PLAN --threads N --repeat R --rss`, which measures itself the same way
  (weights made resident, clear_refs, first run, VmHWM - VmRSS; then timed runs) and prints one
  JSON line.

Prints a Markdown table: median (or `--stat min`) latency of each, the ratio, and RSS growth next to memc's
planned arena plus input and output bytes. Also checks memc's outputs against onnxruntime's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
DIMS = {"batch": 1, "seq": 128}
# `name@dim=value` overrides a dim for that row: llm_qdq at seq 1 is one decode step (M = 1,
# the memory-bound GEMV of the low-bit products), at seq 128 a prefill (M = 128).
MODELS = ["mlp", "bert", "gpt", "resnet", "unet", "llm_qdq", "llm_qdq@seq=1"]


def proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_hwm() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".")
    return s or "tensor"


def relative_error(out_dir: Path, refs: dict) -> float:
    """memc's worst output error as a fraction of the zoo test's tolerance 1e-4 + 1e-3 |want|."""
    worst = 0.0
    for name, want in refs.items():
        got = np.load(out_dir / f"{sanitize(name)}.npy")
        if want.dtype.kind == "f":
            err = np.max(np.abs(got.astype(np.float64) - want) / (1e-4 + 1e-3 * np.abs(want))) if want.size else 0.0
            worst = max(worst, float(err))
        elif not np.array_equal(got, want):
            worst = float("inf")
    return worst


def ort_bench(model: Path, inputs: dict, threads: int, repeat: int):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    # Peak-RSS growth of the first run, from the loaded session (as memc run --rss measures).
    reset_hwm()
    before = proc_status_kib("VmRSS")
    outputs = sess.run(None, inputs)
    growth = (proc_status_kib("VmHWM") - before) * 1024
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, inputs)
        times.append(time.perf_counter() - t)
    names = [o.name for o in sess.get_outputs()]
    del sess
    return float(STAT[0](times)), max(growth, 0), dict(zip(names, outputs))


# The latency statistic (`--stat`), set by main.
STAT = [np.median]


def memc_bench(memc: str, plan: Path, ref_dir: Path, meta: dict, threads: int, repeat: int, out_dir: Path):
    cmd = [memc, "run", str(plan), "--threads", str(threads), "--repeat", str(repeat), "--rss", "--output-dir", str(out_dir)]
    for inp in meta["inputs"]:
        cmd += ["--input", f"{inp['name']}={ref_dir / inp['file']}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"memc run failed: {res.stderr.strip()}")
    line = [l for l in res.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--memc", default=str(ROOT / "target/release/memc"))
    ap.add_argument("--zoo", default="/tmp/memc-bench-zoo")
    ap.add_argument("--dim", action="append", default=[])
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="latency statistic of both sides: min suits a machine whose speed drifts between runs")
    args = ap.parse_args()
    STAT[0] = np.min if args.stat == "min" else np.median
    dims = dict(DIMS)
    for d in args.dim:
        k, v = d.split("=")
        dims[k] = int(v)
    zoo = Path(args.zoo)
    zoo.mkdir(parents=True, exist_ok=True)
    models = args.models.split(",")
    missing = sorted({m.split("@")[0] for m in models if not (zoo / f"{m.split('@')[0]}.onnx").exists()})
    if missing:
        subprocess.run([sys.executable, str(ROOT / "bench/models/generate.py"), "--out", str(zoo), "--only", ",".join(missing)], check=True)
    rows = []
    base_dims = dims
    for m in models:
        name, *overrides = m.split("@")
        dims = dict(base_dims)
        for o in overrides:
            k, v = o.split("=")
            dims[k] = int(v)
        model = zoo / f"{name}.onnx"
        ref_dir = zoo / f"bench_ref_{sanitize(m)}"
        exact_dir = zoo / f"bench_ref_exact_{sanitize(m)}"
        dim_args = []
        for k, v in dims.items():
            dim_args += ["--dim", f"{k}={v}"]
        for out, extra in [(ref_dir, []), (exact_dir, ["--no-graph-opt"])]:
            subprocess.run([sys.executable, str(ROOT / "bench/models/reference.py"), str(model), "--out", str(out)] + dim_args + extra,
                           check=True, capture_output=True)
        meta = json.loads((ref_dir / "meta.json").read_text())
        exact_meta = json.loads((exact_dir / "meta.json").read_text())
        inputs = {i["name"]: np.load(ref_dir / i["file"]) for i in meta["inputs"]}
        # Bind only the dims the model has.
        ir = subprocess.run([args.memc, "compile", str(model), "--emit", "ir"], capture_output=True, text=True).stdout
        bind = []
        for k, v in dims.items():
            if f'"{k}"' in ir:
                bind += ["--dim", f"{k}={v}"]
        plan = zoo / f"{sanitize(m)}.plan"
        res = subprocess.run([args.memc, "compile", str(model), "-o", str(plan)] + bind, capture_output=True, text=True)
        if res.returncode != 0:
            rows.append((m, None, res.stderr.strip().splitlines()[0] if res.stderr else "compile failed"))
            continue
        for threads in [int(t) for t in args.threads.split(",")]:
            t_ort, rss_ort, ref_out = ort_bench(model, inputs, threads, args.repeat)
            out_dir = zoo / f"bench_out_{sanitize(m)}"
            out_dir.mkdir(exist_ok=True)
            try:
                r = memc_bench(args.memc, plan, ref_dir, meta, threads, args.repeat, out_dir)
            except RuntimeError as e:
                rows.append((m, None, str(e)))
                break
            exact = {o["name"]: np.load(exact_dir / o["file"]) for o in exact_meta["outputs"]}
            worst, worst_exact = relative_error(out_dir, ref_out), relative_error(out_dir, exact)
            rows.append((m, dict(threads=threads, ort_ms=t_ort * 1e3, memc_ms=r[f"{args.stat}_ms"], ort_rss=rss_ort,
                                 memc_rss=r["rss_growth_bytes"], arena=r["arena_bytes"], io=r["io_bytes"],
                                 err=worst, err_exact=worst_exact), None))
            print(f"{m} t={threads}: memc {r[f'{args.stat}_ms']:.3f} ms, ort {t_ort*1e3:.3f} ms", file=sys.stderr)
    mib = lambda b: f"{b / 1048576:.2f}"
    print(f"dims: {base_dims} (rows named name@dim=value override); repeat {args.repeat}; {args.stat} latency")
    print()
    print("| model | threads | memc ms | onnxruntime ms | memc / ort | memc run RSS growth MiB | arena + I/O MiB | growth / (arena + I/O) | onnxruntime RSS growth MiB | max err vs ort | max err vs ort unoptimized |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for m, r, err in rows:
        if r is None:
            print(f"| {m} | — | — | — | — | — | — | — | — | {err} | — |")
            continue
        total = r["arena"] + r["io"]
        print(f"| {m} | {r['threads']} | {r['memc_ms']:.3f} | {r['ort_ms']:.3f} | {r['memc_ms'] / r['ort_ms']:.2f} | "
              f"{mib(r['memc_rss'])} | {mib(total)} | {r['memc_rss'] / max(total, 1):.2f} | {mib(r['ort_rss'])} | "
              f"{r['err']:.2e} | {r['err_exact']:.2e} |")
    print()
    print("max err: max |memc - ort| / (1e-4 + 1e-3 |ort|), the zoo test's tolerance (<= 1 passes); "
          "'unoptimized' is onnxruntime with graph optimizations off (exact DequantizeLinear semantics)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
