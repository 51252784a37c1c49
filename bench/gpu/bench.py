#!/usr/bin/env python3
"""memc's CUDA backend against the GPU's limits and against PyTorch eager, in one run.

Given a memc binary built with the cuda backend, this script measures on the one visible GPU:

  (a) device-to-device copy bandwidth with torch (bytes read + written, median of many runs,
      CUDA events): the roof for memory-bound kernels;
  (b) SGEMM 4096^3 with torch, TF32 off: the roof for f32 contractions;
  (c) memc on single-op ONNX models built here with onnx.helper: an f32 Add over 64M elements,
      ReduceSum and Softmax over the last axis of [8192, 4096], a MatMul 4096^3 f32, and 4-bit
      GEMVs (M=1; K=4096, N=4096 and N=11008) in the DequantizeLinear(block_size=32) + MatMul
      QDQ form that memc fuses into `memc.matmul_nbits`; each is compiled with
      `memc compile --target cuda` and run with `memc run --repeat N --time`, whose JSON line
      gives the median wall time of the backend's run call alone (the kernels and the device
      synchronization; no input or output copies). Achieved GB/s counts the bytes each kernel
      must move at least; TFLOP/s counts 2*M*N*K. Each output is checked against numpy/torch;
  (d) whole models defined here in torch and exported with torch.onnx.export (an MLP, a small
      GPT-style decoder, a small ResNet-style CNN): latency of memc vs torch eager on the same
      inputs, and memc's planned arena vs torch's peak activation memory
      (torch.cuda.max_memory_allocated() over one forward, less what was allocated before).

It prints one table at the end and writes the results as JSON to $OUT/bench_gpu.json when OUT
is set (and to --json PATH when given). Every case runs on its own: one that fails (a compile
error, a wrong answer) is reported in its row and the others still run.

Usage: python3 bench/gpu/bench.py --memc target/release/memc [--repeat 50] [--only copy,add]
       [--target cpu]  (a dry run of the memc side on the CPU backend, e.g. before the PTX
       emitters land; the torch side still needs a GPU)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import torch

GB = 1e9
CASES = [
    "copy",
    "sgemm",
    "add",
    "reducesum",
    "softmax",
    "matmul",
    "gemv_q4_4096",
    "gemv_q4_11008",
    "mlp",
    "gpt",
    "cnn",
]


# ----------------------------------------------------------------------------------------------
# Timing with torch


def cuda_median_ms(fn, iters: int, warmup: int = 5) -> float:
    """Median of `iters` timings of `fn()` with CUDA events around each call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def bench_copy(iters: int) -> dict:
    n_bytes = 1 << 30
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device="cuda").fill_(1.0)
    dst = torch.empty_like(src)
    ms = cuda_median_ms(lambda: dst.copy_(src), iters)
    moved = 2 * n_bytes
    del src, dst
    return {"ms": ms, "bytes": moved, "gbps": moved / (ms * 1e-3) / GB}


def bench_sgemm(iters: int) -> dict:
    torch.backends.cuda.matmul.allow_tf32 = False
    n = 4096
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    c = torch.empty(n, n, device="cuda")
    ms = cuda_median_ms(lambda: torch.mm(a, b, out=c), iters)
    flops = 2 * n**3
    return {"ms": ms, "flops": flops, "tflops": flops / (ms * 1e-3) / 1e12}


# ----------------------------------------------------------------------------------------------
# memc


class Memc:
    def __init__(self, binary: str, target: str, work: str, repeat: int):
        self.binary = os.path.abspath(binary)
        self.target = target
        self.work = work
        self.repeat = repeat

    def compile(self, model: str, plan: str) -> float:
        started = time.perf_counter()
        cmd = [self.binary, "compile", model, "--target", self.target, "-o", plan]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"memc compile failed ({done.returncode}): {done.stderr.strip()}")
        return time.perf_counter() - started

    def run(self, plan: str, inputs: dict[str, np.ndarray], name: str) -> dict:
        """Runs `plan` `repeat` times; returns the timing JSON and the outputs (by file name)."""
        case_dir = os.path.join(self.work, name)
        out_dir = os.path.join(case_dir, "out")
        os.makedirs(out_dir, exist_ok=True)
        cmd = [self.binary, "run", plan, "--repeat", str(self.repeat), "--time",
               "--output-dir", out_dir]
        for input_name, array in inputs.items():
            path = os.path.join(case_dir, f"in_{input_name}.npy")
            np.save(path, array)
            cmd += ["--input", f"{input_name}={path}"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"memc run failed ({done.returncode}): {done.stderr.strip()}")
        timing = None
        for line in done.stdout.splitlines():
            if line.startswith('{"backend_min_ms"'):
                timing = json.loads(line)
        if timing is None:
            raise RuntimeError(f"memc run printed no --time line:\n{done.stdout}")
        outputs = {}
        for file in sorted(os.listdir(out_dir)):
            if file.endswith(".npy"):
                outputs[file[:-4]] = np.load(os.path.join(out_dir, file))
        timing["outputs"] = outputs
        return timing


def max_rel_err(got: np.ndarray, want: np.ndarray) -> float:
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise RuntimeError(f"output shape {got.shape}, expected {want.shape}")
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return float(np.max(np.abs(got - want))) / scale


# ----------------------------------------------------------------------------------------------
# (c) single-op models


def save_model(graph, path: str, opset: int = 21) -> None:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    onnx.save(model, path)


def f32_info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def model_add(path: str, n: int) -> None:
    shape = [n // 8192, 8192]
    node = helper.make_node("Add", ["a", "b"], ["y"])
    graph = helper.make_graph([node], "add", [f32_info("a", shape), f32_info("b", shape)],
                              [f32_info("y", shape)])
    save_model(graph, path)


def model_reduce(path: str, op: str, rows: int, cols: int) -> None:
    if op == "ReduceSum":
        axes = numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes")
        node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)
        out_shape, inits = [rows, 1], [axes]
    else:
        node = helper.make_node("Softmax", ["x"], ["y"], axis=-1)
        out_shape, inits = [rows, cols], []
    graph = helper.make_graph([node], op.lower(), [f32_info("x", [rows, cols])],
                              [f32_info("y", out_shape)], initializer=inits)
    save_model(graph, path)


def model_matmul(path: str, n: int, rng) -> np.ndarray:
    b = (rng.standard_normal((n, n), dtype=np.float32) / np.sqrt(n)).astype(np.float32)
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    graph = helper.make_graph([node], "matmul", [f32_info("a", [n, n])], [f32_info("y", [n, n])],
                              initializer=[numpy_helper.from_array(b, "b")])
    save_model(graph, path)
    return b


def pack_u4(values: np.ndarray) -> bytes:
    """uint4 values (row-major) packed two per byte, the first in the low nibble (ONNX)."""
    flat = values.astype(np.uint8).reshape(-1)
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.uint8)])
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()


def model_gemv_q4(path: str, k: int, n: int, rng, block: int = 32):
    """x[1,K] @ DequantizeLinear(W: uint4[K,N], scales: f32[K/32,N], zero points: uint4[K/32,N];
    axis 0, block_size 32): the QDQ form onnxruntime's MatMulNBitsQuantizer writes
    (bench/models/README.md), which memc's egraph fuses into memc.matmul_nbits."""
    q = rng.integers(0, 16, size=(k, n), dtype=np.uint8)
    zp = rng.integers(0, 16, size=(k // block, n), dtype=np.uint8)
    scales = (rng.random((k // block, n), dtype=np.float32) * 0.02 + 0.001).astype(np.float32)
    inits = [
        helper.make_tensor("w_q4", TensorProto.UINT4, [k, n], pack_u4(q), raw=True),
        numpy_helper.from_array(scales, "w_scales"),
        helper.make_tensor("w_zp", TensorProto.UINT4, [k // block, n], pack_u4(zp), raw=True),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["w_q4", "w_scales", "w_zp"], ["w"], axis=0,
                         block_size=block),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "gemv_q4", [f32_info("x", [1, k])], [f32_info("y", [1, n])],
                              initializer=inits)
    save_model(graph, path)
    expand = lambda a: np.repeat(a, block, axis=0)  # noqa: E731
    w = (q.astype(np.float32) - expand(zp).astype(np.float32)) * expand(scales)
    return w


def op_case(memc: Memc, name: str, iters: int, rng) -> dict:
    path = os.path.join(memc.work, f"{name}.onnx")
    plan = os.path.join(memc.work, f"{name}.plan")
    row: dict = {"case": name}
    if name == "add":
        n = 64 << 20
        model_add(path, n)
        a = rng.standard_normal((n // 8192, 8192), dtype=np.float32)
        b = rng.standard_normal((n // 8192, 8192), dtype=np.float32)
        inputs, want = {"a": a, "b": b}, a + b
        row["bytes"] = 3 * 4 * n
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        out = torch.empty_like(ta)
        row["torch_ms"] = cuda_median_ms(lambda: torch.add(ta, tb, out=out), iters)
    elif name in ("reducesum", "softmax"):
        rows, cols = 8192, 4096
        op = "ReduceSum" if name == "reducesum" else "Softmax"
        model_reduce(path, op, rows, cols)
        x = rng.standard_normal((rows, cols), dtype=np.float32)
        inputs = {"x": x}
        tx = torch.from_numpy(x).cuda()
        if op == "ReduceSum":
            want = x.astype(np.float64).sum(axis=-1, keepdims=True)
            row["bytes"] = 4 * rows * cols + 4 * rows
            row["torch_ms"] = cuda_median_ms(lambda: tx.sum(dim=-1, keepdim=True), iters)
        else:
            e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
            want = e / e.sum(axis=-1, keepdims=True)
            row["bytes"] = 2 * 4 * rows * cols
            row["torch_ms"] = cuda_median_ms(lambda: torch.softmax(tx, dim=-1), iters)
    elif name == "matmul":
        n = 4096
        b = model_matmul(path, n, rng)
        a = rng.standard_normal((n, n), dtype=np.float32)
        inputs = {"a": a}
        torch.backends.cuda.matmul.allow_tf32 = False
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        want = (ta.double() @ tb.double()).cpu().numpy()
        row["flops"] = 2 * n**3
        row["torch_ms"] = cuda_median_ms(lambda: ta @ tb, iters)
    else:
        k, n = 4096, int(name.rsplit("_", 1)[1])
        w = model_gemv_q4(path, k, n, rng)
        x = rng.standard_normal((1, k), dtype=np.float32)
        inputs = {"x": x}
        want = x.astype(np.float64) @ w.astype(np.float64)
        # What the kernel must read at least: the 4-bit codes, the f32 scales and the 4-bit
        # zero points (the ONNX form's bytes), and x; it writes y.
        row["bytes"] = k * n // 2 + (k // 32) * n * 4 + (k // 32) * n // 2 + 4 * k + 4 * n
        # Torch has no int4 GEMV here; its f32 GEMV over the dequantized weight (8x the bytes)
        # is listed for scale only.
        tx, tw = torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()
        row["torch_ms"] = cuda_median_ms(lambda: tx @ tw, iters)
        row["torch_note"] = "f32 weight"
    row["compile_s"] = memc.compile(path, plan)
    timing = memc.run(plan, inputs, name)
    (got,) = timing.pop("outputs").values()
    row["max_rel_err"] = max_rel_err(got, want)
    row["memc_ms"] = timing["backend_median_ms"]
    row["memc_run_ms"] = timing["median_ms"]
    row["memc_arena_bytes"] = timing["arena_bytes"]
    if "bytes" in row:
        row["memc_gbps"] = row["bytes"] / (row["memc_ms"] * 1e-3) / GB
        row["torch_gbps"] = row["bytes"] / (row["torch_ms"] * 1e-3) / GB
    if "flops" in row:
        row["memc_tflops"] = row["flops"] / (row["memc_ms"] * 1e-3) / 1e12
        row["torch_tflops"] = row["flops"] / (row["torch_ms"] * 1e-3) / 1e12
    return row


# ----------------------------------------------------------------------------------------------
# (d) whole models


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
            torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
            torch.nn.Linear(4096, 1024),
        )

    def forward(self, x):
        return self.net(x)


class Block(torch.nn.Module):
    """A pre-LN GPT-2 block with attention written out (no fused SDPA, so the exporter emits
    plain MatMul/Softmax)."""

    def __init__(self, d: int, heads: int, seq: int):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, 4 * d)
        self.out = torch.nn.Linear(4 * d, d)
        mask = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.reshape(b, s, h, d // h).transpose(1, 2)
        k = k.reshape(b, s, h, d // h).transpose(1, 2)
        v = v.reshape(b, s, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-1, -2)) * (1.0 / (d // h) ** 0.5) + self.mask
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self, vocab=8192, d=512, heads=8, layers=4, seq=256):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = torch.nn.ModuleList([Block(d, heads, seq) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class ResBlock(torch.nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.c1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(cout)
        self.c2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(cout)
        self.skip = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False),
                                        torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + self.skip(x))


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, 2, 1, bias=False),
                                        torch.nn.BatchNorm2d(32), torch.nn.ReLU())
        self.blocks = torch.nn.Sequential(ResBlock(32, 64, 2), ResBlock(64, 128, 2),
                                          ResBlock(128, 256, 2))
        self.fc = torch.nn.Linear(256, 1000)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(x.mean(dim=(2, 3)))


def whole_model(name: str, rng):
    """The torch model and its input (as a numpy array), by name."""
    torch.manual_seed(0)
    if name == "mlp":
        return MLP(), "x", rng.standard_normal((64, 1024), dtype=np.float32)
    if name == "gpt":
        return GPT(), "input_ids", rng.integers(0, 8192, size=(4, 256), dtype=np.int64)
    model = CNN()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return model, "image", rng.standard_normal((16, 3, 128, 128), dtype=np.float32)


def export(model, example: torch.Tensor, input_name: str, path: str) -> None:
    kwargs = dict(input_names=[input_name], output_names=["y"], opset_version=17)
    try:
        torch.onnx.export(model, (example,), path, dynamo=False, **kwargs)
    except TypeError:
        # A torch without the `dynamo` argument exports with TorchScript anyway.
        torch.onnx.export(model, (example,), path, **kwargs)


def model_case(memc: Memc, name: str, iters: int, rng) -> dict:
    row: dict = {"case": name}
    model, input_name, x = whole_model(name, rng)
    model.eval()
    path = os.path.join(memc.work, f"{name}.onnx")
    plan = os.path.join(memc.work, f"{name}.plan")
    export(model, torch.from_numpy(x), input_name, path)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = model.cuda()
    tx = torch.from_numpy(x).cuda()
    with torch.no_grad():
        model(tx)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        want = model(tx)
        torch.cuda.synchronize()
        row["torch_peak_bytes"] = torch.cuda.max_memory_allocated() - before
        want = want.cpu().numpy()
        row["torch_ms"] = cuda_median_ms(lambda: model(tx), iters)
    row["weights_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
    del model, tx
    torch.cuda.empty_cache()
    row["compile_s"] = memc.compile(path, plan)
    timing = memc.run(plan, {input_name: x}, name)
    (got,) = timing.pop("outputs").values()
    row["max_rel_err"] = max_rel_err(got, want)
    row["memc_ms"] = timing["backend_median_ms"]
    row["memc_run_ms"] = timing["median_ms"]
    row["memc_arena_bytes"] = timing["arena_bytes"]
    return row


# ----------------------------------------------------------------------------------------------
# Report


def fmt(value, spec: str) -> str:
    """`value` formatted by `spec`, or `-` padded to the spec's width when there is none."""
    if value is None:
        width = re.match(r"\d*", spec).group(0)
        return "-".rjust(int(width) if width else 1)
    return format(value, spec)


def table(rows: list[dict], copy_gbps, sgemm_tflops) -> str:
    head = (f"{'case':<16}{'memc ms':>10}{'memc run':>10}{'torch ms':>10}{'memc GB/s':>11}"
            f"{'torch GB/s':>11}{'memc TF/s':>10}{'torch TF/s':>11}{'% roof':>8}{'rel err':>10}"
            f"{'arena MiB':>12}{'torch MiB':>12}  note")
    lines = [head, "-" * len(head)]
    mib = lambda b: None if b is None else b / 2**20  # noqa: E731
    for r in rows:
        if "error" in r:
            lines.append(f"{r['case']:<16}ERROR: {r['error'].splitlines()[0][:150]}")
            continue
        roof = None
        if r.get("memc_gbps") and copy_gbps:
            roof = 100 * r["memc_gbps"] / copy_gbps
        elif r.get("memc_tflops") and sgemm_tflops:
            roof = 100 * r["memc_tflops"] / sgemm_tflops
        elif r["case"] == "copy":
            roof = 100.0
        elif r["case"] == "sgemm":
            roof = 100.0
        lines.append(
            f"{r['case']:<16}{fmt(r.get('memc_ms'), '10.3f')}{fmt(r.get('memc_run_ms'), '10.3f')}"
            f"{fmt(r.get('torch_ms', r.get('ms')), '10.3f')}{fmt(r.get('memc_gbps'), '11.1f')}"
            f"{fmt(r.get('torch_gbps', r.get('gbps')), '11.1f')}{fmt(r.get('memc_tflops'), '10.2f')}"
            f"{fmt(r.get('torch_tflops', r.get('tflops')), '11.2f')}{fmt(roof, '8.1f')}"
            f"{fmt(r.get('max_rel_err'), '10.1e')}"
            f"{fmt(mib(r.get('memc_arena_bytes')), '12.1f')}"
            f"{fmt(mib(r.get('torch_peak_bytes')), '12.1f')}  {r.get('torch_note', '')}"
        )
    lines.append("")
    lines.append("memc ms: median of the backend's run call (kernels + sync); memc run: median of "
                 "a whole run (inputs copied in, outputs out); torch ms: CUDA events, eager.")
    lines.append("% roof: memc GB/s of the copy bandwidth (memory-bound rows) or memc TF/s of "
                 "torch SGEMM (MatMul). torch peak: max_memory_allocated over one forward, less "
                 "what was allocated before (weights and input); memc arena holds inputs too.")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memc", required=True, help="memc binary built with the cuda backend")
    parser.add_argument("--target", default="cuda", choices=["cuda", "cpu"],
                        help="memc target (cpu: a dry run of the memc side)")
    parser.add_argument("--repeat", type=int, default=50, help="memc runs per case")
    parser.add_argument("--iters", type=int, default=50, help="torch timings per case")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {','.join(CASES)}")
    parser.add_argument("--work", default=None, help="directory for models and plans")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("error: torch sees no CUDA device", file=sys.stderr)
        return 1
    only = [c for c in args.only.split(",") if c] or CASES
    unknown = [c for c in only if c not in CASES]
    if unknown:
        print(f"error: unknown cases {unknown}; known: {CASES}", file=sys.stderr)
        return 2
    work = args.work or tempfile.mkdtemp(prefix="memc-gpu-bench-")
    os.makedirs(work, exist_ok=True)
    memc = Memc(args.memc, args.target, work, args.repeat)
    rng = np.random.default_rng(0)
    device = torch.cuda.get_device_name(0)
    print(f"device: {device}; torch {torch.__version__}; memc {args.memc} --target {args.target}; "
          f"work {work}", flush=True)
    rows: list[dict] = []
    copy_gbps = sgemm_tflops = None
    for case in only:
        started = time.perf_counter()
        try:
            if case == "copy":
                row = {"case": "copy", **bench_copy(args.iters)}
                copy_gbps = row["gbps"]
            elif case == "sgemm":
                row = {"case": "sgemm", **bench_sgemm(args.iters)}
                sgemm_tflops = row["tflops"]
            elif case in ("mlp", "gpt", "cnn"):
                row = model_case(memc, case, args.iters, rng)
            else:
                row = op_case(memc, case, args.iters, rng)
        except Exception as e:  # noqa: BLE001 - one case's failure is reported in its row
            row = {"case": case, "error": f"{type(e).__name__}: {e}",
                   "traceback": traceback.format_exc()}
        row["wall_s"] = time.perf_counter() - started
        rows.append(row)
        print(f"{case}: {json.dumps({k: v for k, v in row.items() if k != 'traceback'})}",
              flush=True)
        torch.cuda.empty_cache()
    report = table(rows, copy_gbps, sgemm_tflops)
    print()
    print(report)
    result = {"device": device, "torch": torch.__version__, "memc": args.memc,
              "target": args.target, "rows": rows}
    paths = [p for p in [args.json, os.environ.get("OUT") and
                         os.path.join(os.environ["OUT"], "bench_gpu.json")] if p]
    for path in paths:
        with open(path, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {path}")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
