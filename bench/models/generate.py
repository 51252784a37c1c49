#!/usr/bin/env python3
"""Generate the memc benchmark model zoo deterministically.

    python bench/models/generate.py --out DIR [--only mlp,bert] [--seed 0] [--llm-layers 2]

Same seed -> byte-identical files. Prints one line per model:
    <name> <path> <file size> <weight bytes> <seconds>
(file size includes the external data file for llm_qdq_1g).

Models: mlp, bert, gpt, resnet, unet, llm_qdq, llm_qdq_1g (see README.md). By
default all models except llm_qdq_1g are generated (it takes minutes and writes
~1.2 GB); name it in --only, or pass --all.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import onnx  # noqa: E402

from zoo import bert, gpt, llm, mlp, resnet, unet  # noqa: E402
from zoo.builder import weight_bytes  # noqa: E402

SMALL = {"mlp": mlp.build, "bert": bert.build, "gpt": gpt.build, "resnet": resnet.build, "unet": unet.build}
ALL = [*SMALL, "llm_qdq", "llm_qdq_1g"]
DEFAULT = [m for m in ALL if m != "llm_qdq_1g"]
EXTERNAL_LOCATION = "llm_qdq_1g.onnx.data"


def human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    raise AssertionError


def generate(name: str, out: str, seed: int, llm_layers: int, stitched: bool = False) -> tuple[str, int, int]:
    path = os.path.join(out, f"{name}.onnx")
    if name in SMALL:
        model = SMALL[name](seed)
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, path)
        return path, os.path.getsize(path), weight_bytes(model)
    if name == "llm_qdq":
        model = llm.build(seed, llm_layers, chunked=stitched)
        onnx.checker.check_model(model)
        onnx.save(model, path)
        return path, os.path.getsize(path), weight_bytes(model)
    if name == "llm_qdq_1g":
        def progress(i, n):
            print(f"  llm_qdq_1g: quantized chunk {i}/{n}", file=sys.stderr, flush=True)

        llm.write_external(seed, path, llm.LAYERS_1G, "llm_qdq_1g", EXTERNAL_LOCATION, progress)
        onnx.checker.check_model(path)  # path form: checks without loading the external data
        wbytes = weight_bytes(onnx.load(path, load_external_data=False))
        assert wbytes >= 1 << 30, f"llm_qdq_1g weights only {wbytes} bytes"
        size = os.path.getsize(path) + os.path.getsize(os.path.join(out, EXTERNAL_LOCATION))
        return path, size, wbytes
    raise SystemExit(f"unknown model {name!r}; known: {', '.join(ALL)}")


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    ap.add_argument("--only", help=f"comma-separated subset of: {','.join(ALL)}")
    ap.add_argument("--all", action="store_true", help="also generate llm_qdq_1g")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--llm-layers", type=int, default=2, help="decoder layers in llm_qdq (default 2)")
    ap.add_argument(
        "--check-stitch",
        action="store_true",
        help="self-test: build llm_qdq by whole-model and by per-layer (stitched) quantization "
        "and check the files are byte-identical (the per-layer path is what llm_qdq_1g uses)",
    )
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    if args.check_stitch:
        # 1. llm_qdq inline: whole-model quantization vs per-layer quantization + stitching.
        a = os.path.join(args.out, "whole")
        b = os.path.join(args.out, "stitched")
        os.makedirs(a, exist_ok=True)
        os.makedirs(b, exist_ok=True)
        pa, _, _ = generate("llm_qdq", a, args.seed, args.llm_layers, stitched=False)
        pb, _, _ = generate("llm_qdq", b, args.seed, args.llm_layers, stitched=True)
        # 2. external data: onnx.save(save_as_external_data=True) of the whole-model result vs
        #    the streaming writer llm_qdq_1g uses (same layer count and names).
        loc = "llm_qdq.onnx.data"
        pc = os.path.join(args.out, "whole_ext", "llm_qdq.onnx")
        pd = os.path.join(args.out, "streamed_ext", "llm_qdq.onnx")
        for p in (pc, pd):
            os.makedirs(os.path.dirname(p), exist_ok=True)
        model = llm.build(args.seed, args.llm_layers, chunked=False)
        llm.save_external(model, pc, loc)
        del model
        llm.write_external(args.seed, pd, args.llm_layers, "llm_qdq", loc)
        pairs = [(pa, pb), (pc, pd), (os.path.join(os.path.dirname(pc), loc), os.path.join(os.path.dirname(pd), loc))]
        ok = True
        for x, y in pairs:
            hx, hy = sha256(x), sha256(y)
            print(f"{'same' if hx == hy else 'DIFF'} {hx[:16]} {x}\n     {hy[:16]} {y}")
            ok &= hx == hy
        if not ok:
            raise SystemExit("MISMATCH: per-layer/streamed build differs from the whole-model build")
        print("OK: identical")
        return

    names = args.only.split(",") if args.only else (ALL if args.all else DEFAULT)
    for name in names:
        name = name.strip()
        t0 = time.perf_counter()
        path, size, wbytes = generate(name, args.out, args.seed, args.llm_layers)
        dt = time.perf_counter() - t0
        print(f"{name:<11} {path}  size={size} ({human(size)})  weights={wbytes} ({human(wbytes)})  {dt:.1f}s",
              flush=True)


if __name__ == "__main__":
    main()
