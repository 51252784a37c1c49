#!/usr/bin/env python3
"""Run an ONNX model in onnxruntime (CPU) on deterministic random inputs.

    python bench/models/reference.py MODEL.onnx --out DIR [--dim batch=2 --dim seq=16] [--seed 0]

Writes DIR/inputs/<name>.npy, DIR/outputs/<name>.npy (tensor names sanitized for
file names) and DIR/meta.json (names, files, shapes, dtypes, dims, seed). Inputs:
  * integer inputs whose name contains "mask": all ones;
  * other integer inputs (token ids): uniform in [0, vocab), where vocab is the
    row count of the Gather table the input indexes (fallback 100);
  * bool inputs: all true; float inputs: standard normal.
Symbolic dims must be given with --dim unless they are `batch` (default 2) or
`seq` (default 16). Exits non-zero if an output contains NaN or Inf.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

DEFAULT_DIMS = {"batch": 2, "seq": 16}

ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".")
    return s or "tensor"


def gather_vocab(model: onnx.ModelProto) -> dict[str, int]:
    """input name -> rows of the Gather table it indexes (for token-id ranges)."""
    shapes = {t.name: list(t.dims) for t in model.graph.initializer}
    vocab = {}
    for n in model.graph.node:
        if n.op_type == "Gather" and len(n.input) == 2 and n.input[0] in shapes:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
            vocab.setdefault(n.input[1], shapes[n.input[0]][axis])
    return vocab


def make_input(rng, name: str, dtype, shape, vocab: dict[str, int]) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        if "mask" in name.lower():
            return np.ones(shape, dtype=dtype)
        return rng.integers(0, vocab.get(name, 100), size=shape, dtype=np.int64).astype(dtype)
    if dtype == np.bool_:
        return np.ones(shape, dtype=np.bool_)
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE", help="bind a symbolic dim")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0 = default)")
    ap.add_argument("--no-graph-opt", action="store_true",
                    help="disable onnxruntime's graph optimizations: its DequantizeLinear+MatMul fusion "
                         "(MatMulNBits) computes 4-bit QDQ models less exactly than the model says")
    args = ap.parse_args()

    dims = dict(DEFAULT_DIMS)
    for d in args.dim:
        k, _, v = d.partition("=")
        if not v:
            ap.error(f"--dim expects NAME=VALUE, got {d!r}")
        dims[k] = int(v)

    # Graph only (no external data) to find Gather tables for token-id ranges.
    vocab = gather_vocab(onnx.load(args.model, load_external_data=False))

    so = ort.SessionOptions()
    if args.threads:
        so.intra_op_num_threads = args.threads
    t0 = time.perf_counter()
    if args.no_graph_opt:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    t_load = time.perf_counter() - t0

    rng = np.random.default_rng(args.seed)
    feeds, meta_in = {}, []
    for i in sess.get_inputs():
        shape = []
        for d in i.shape:
            if isinstance(d, int):
                shape.append(d)
            elif d in dims:
                shape.append(dims[d])
            else:
                sys.exit(f"input {i.name!r}: symbolic dim {d!r} not bound; pass --dim {d}=N")
        dtype = ORT_TYPES[i.type]
        feeds[i.name] = make_input(rng, i.name, dtype, shape, vocab)
        meta_in.append({"name": i.name, "file": f"inputs/{sanitize(i.name)}.npy", "shape": shape,
                        "dtype": np.dtype(dtype).name})

    t0 = time.perf_counter()
    results = sess.run(None, feeds)
    t_run = time.perf_counter() - t0

    os.makedirs(os.path.join(args.out, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "outputs"), exist_ok=True)
    for m in meta_in:
        np.save(os.path.join(args.out, m["file"]), feeds[m["name"]])
    meta_out, bad = [], []
    for o, r in zip(sess.get_outputs(), results):
        r = np.asarray(r)
        f = f"outputs/{sanitize(o.name)}.npy"
        np.save(os.path.join(args.out, f), r)
        meta_out.append({"name": o.name, "file": f, "shape": list(r.shape), "dtype": r.dtype.name})
        if np.issubdtype(r.dtype, np.floating) and not np.all(np.isfinite(r)):
            bad.append(o.name)
    meta = {
        "model": os.path.basename(args.model),
        "seed": args.seed,
        "dims": {k: v for k, v in sorted(dims.items())},
        "onnxruntime": ort.__version__,
        "inputs": meta_in,
        "outputs": meta_out,
    }
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    outs = ", ".join(f"{m['name']}{m['shape']}" for m in meta_out)
    print(f"{os.path.basename(args.model)}: load {t_load:.2f}s run {t_run:.2f}s -> {outs}")
    if bad:
        sys.exit(f"non-finite values in outputs: {', '.join(bad)}")


if __name__ == "__main__":
    main()
