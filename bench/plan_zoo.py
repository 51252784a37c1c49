#!/usr/bin/env python3
"""Plans every zoo model with memc and prints the README's table: the activation lower bound
(no scratch, no weights) in the model's own node order and in the chosen order, the largest
scratch of one op, the arena, arena / the model's bound (the headline), LOAD with scratch and
arena/LOAD, and the planning time.

Usage: .venv/bin/python bench/plan_zoo.py ZOO_DIR [--dim batch=1 --dim seq=128]
(ZOO_DIR from `bench/models/generate.py --out ZOO_DIR`; build memc first with
`cargo build --release`, or name a binary in `$MEMC`). Only the dims a model has are passed to it.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEMC = os.environ.get("MEMC", os.path.join(ROOT, "target", "release", "memc"))
MODELS = ["mlp", "bert", "gpt", "resnet", "unet", "llm_qdq", "llm_qdq_1g"]


def mib(n):
    if n >= 2**20:
        return f"{n / 2**20:,.2f} MiB"
    return f"{n / 2**10:,.1f} KiB"


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    zoo, dims = args[0], {}
    for i, a in enumerate(args):
        if a == "--dim":
            name, value = args[i + 1].split("=")
            dims[name] = value
    print(f"dims: {', '.join(f'{k}={v}' for k, v in dims.items())}")
    print()
    print("| model | ops | activation bound, model order | bound, chosen order | largest scratch | arena | arena/bound | LOAD with scratch | arena/LOAD | schedule | views | in place | plan ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    for name in MODELS:
        path = os.path.join(zoo, f"{name}.onnx")
        if not os.path.exists(path):
            continue
        ir = subprocess.run([MEMC, "compile", path, "--emit", "ir"], capture_output=True, text=True).stdout
        cmd = [MEMC, "compile", path, "--emit", "plan-json"]
        for k, v in dims.items():
            if f'"{k}"' in ir:
                cmd += ["--dim", f"{k}={v}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"| {name} | failed: {proc.stderr.strip().splitlines()[0]} |")
            continue
        plan = json.loads(proc.stdout)
        views = sum(1 for a in plan["aliases"] if a["kind"] == "view")
        in_place = sum(1 for a in plan["aliases"] if a["kind"] == "in-place")
        ratio = plan["arena_size"] / plan["load"] if plan["load"] else float("nan")
        bound = plan["bound_model_order"]
        headline = plan["arena_size"] / bound if bound else float("nan")
        print(
            f"| {name} | {plan['n_steps'] - 2} | {mib(bound)} | {mib(plan['bound_chosen_order'])} | "
            f"{mib(plan['scratch_peak'])} | {mib(plan['arena_size'])} | {headline:.4f} | {mib(plan['load'])} | "
            f"{ratio:.4f} | {plan['schedule']} | {views} | {in_place} | {plan['plan_time_ms']:.1f} |"
        )


if __name__ == "__main__":
    main()
