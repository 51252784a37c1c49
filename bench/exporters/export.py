#!/usr/bin/env python3
"""Write the exporter fixtures: small models exported the ways users export them, with
onnxruntime's outputs, for `tests/exporters.rs` (see README.md beside this file).

    .venv-export/bin/python bench/exporters/export.py [--out tests/fixtures/exporters]
                                                     [--only bert_dynamo,cnn_ts] [--seed 0]

For every fixture it writes DIR/<fixture>/:
    model.onnx            the exporter's file (the dynamo exporter's weights go to
                          model.onnx.data beside it, its default external_data=True)
    inputs/<name>.npy     random inputs at the bound dims (seeded)
    outputs/<name>.npy    onnxruntime's outputs on them (CPUExecutionProvider)
    meta.json             exporter, opset, versions, the symbolic dims the file's inputs
                          declare (`symbolic_dims`) and the values to bind (`dims`), dims
                          invented for outputs alone (`output_only_dims`, not bound), each
                          input's and output's name, file, shape, dtype

Fixture names are <model>_<exporter>: exporter "dynamo" is `torch.onnx.export(...,
dynamo=True, dynamic_shapes=...)` (the default exporter in current PyTorch, its default
opset), "ts" is the TorchScript exporter `torch.onnx.export(..., dynamo=False,
opset_version=17, dynamic_axes=...)`. Models are traced at batch 3, seq 8 and run at the
bound dims (batch 2, seq 16), so a traced size baked into the file shows.

Weights are random: torch.manual_seed(seed) before each model is built; transformers
models are built from tiny configs (nothing is downloaded). The same seed and versions
(requirements.txt) give the same files.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
import time
import warnings

sys.dont_write_bytecode = True

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

BOUND = {"batch": 2, "seq": 16}  # the dims memc binds and onnxruntime runs at
TRACED = {"batch": 3, "seq": 8}  # the dims the exporters trace with (not 1, not the bound ones)


# --------------------------------------------------------------------------- models
# Each builder returns (module, spec): spec["inputs"] lists (name, kind, shape, extra) where a
# shape entry is an int or a dim name ("batch", "seq"); kind is "f32" (standard normal),
# "ids" (int64 uniform in [0, extra)) or "mask" (int64 ones, the last quarter of the second
# row zero, so padding is exercised). spec["outputs"] names the outputs.


class SmallCNN(nn.Module):
    """Conv + BatchNorm + ReLU, MaxPool, a strided conv, residual add, global average
    pool, Linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(2))
        self.down = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.res = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32))
        self.head = nn.Linear(32, 10)

    def forward(self, pixel_values):
        x = self.down(self.stem(pixel_values))
        x = F.relu(x + self.res(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _randomize_bn(m):
    """Random running statistics, so BatchNorm is not the identity."""
    for mod in m.modules():
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            with torch.no_grad():
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)


def cnn():
    m = SmallCNN()
    _randomize_bn(m)
    return m, {"inputs": [("pixel_values", "f32", ["batch", 3, 32, 32], None)], "outputs": ["logits"]}


class Block(nn.Module):
    """One pre-LN transformer block written as users write one: fused qkv Linear, heads split
    with view(batch, seq, heads, dim) from the input's shape, scaled_dot_product_attention with
    a causal mask, GELU MLP, residuals."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


def block():
    return Block(), {"inputs": [("x", "f32", ["batch", "seq", 64], None)], "outputs": ["y"], "seq_outputs": ["y"]}


class HFWrap(nn.Module):
    """Calls a transformers model with keyword inputs and returns the named outputs as a
    tuple (the exporters want tensors, not ModelOutput)."""

    def __init__(self, model, in_names, out_names, **extra):
        super().__init__()
        self.model = model
        self.in_names = in_names
        self.out_names = out_names
        self.extra = extra

    def forward(self, *args):
        out = self.model(**dict(zip(self.in_names, args)), **self.extra, return_dict=True)
        return tuple(getattr(out, n) for n in self.out_names)


def _hf(model, inputs, outputs, seq_outputs=(), **extra):
    model.eval()
    return (HFWrap(model, [i[0] for i in inputs], outputs, **extra),
            {"inputs": inputs, "outputs": outputs, "seq_outputs": seq_outputs})


def bert():
    cfg = transformers.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=64)
    return _hf(transformers.BertModel(cfg),
               [("input_ids", "ids", ["batch", "seq"], cfg.vocab_size),
                ("attention_mask", "mask", ["batch", "seq"], None),
                ("token_type_ids", "ids", ["batch", "seq"], cfg.type_vocab_size)],
               ["last_hidden_state", "pooler_output"], seq_outputs=["last_hidden_state"])


def gpt2():
    cfg = transformers.GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                  use_cache=False, bos_token_id=0, eos_token_id=0)
    return _hf(transformers.GPT2LMHeadModel(cfg),
               [("input_ids", "ids", ["batch", "seq"], cfg.vocab_size),
                ("attention_mask", "mask", ["batch", "seq"], None)],
               ["logits"], seq_outputs=["logits"], use_cache=False)


def vit():
    cfg = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=128)
    return _hf(transformers.ViTModel(cfg), [("pixel_values", "f32", ["batch", 3, 32, 32], None)],
               ["last_hidden_state", "pooler_output"])


def t5():
    """A T5 encoder-decoder, one decoder step without a cache: the encoder over input_ids, the
    decoder over one decoder_input_ids token, the LM head."""
    cfg = transformers.T5Config(vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
                                num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=32,
                                decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, use_cache=False)
    return _hf(transformers.T5ForConditionalGeneration(cfg),
               [("input_ids", "ids", ["batch", "seq"], cfg.vocab_size),
                ("attention_mask", "mask", ["batch", "seq"], None),
                ("decoder_input_ids", "ids", ["batch", 1], cfg.vocab_size)],
               ["logits", "encoder_last_hidden_state"], seq_outputs=["encoder_last_hidden_state"], use_cache=False)


def whisper():
    """Whisper's audio encoder: two conv1d (the second strided) + GELU, sinusoidal positions,
    pre-LN attention blocks. It requires the frame count to be 2 * max_source_positions, so only
    batch is symbolic."""
    cfg = transformers.WhisperConfig(vocab_size=1000, num_mel_bins=16, d_model=64, encoder_layers=2,
                                     encoder_attention_heads=4, encoder_ffn_dim=128, decoder_layers=1,
                                     decoder_attention_heads=4, decoder_ffn_dim=128, max_source_positions=32,
                                     max_target_positions=32, pad_token_id=0, bos_token_id=0,
                                     eos_token_id=1, decoder_start_token_id=0)
    enc = transformers.WhisperModel(cfg).get_encoder()
    return _hf(enc, [("input_features", "f32", ["batch", 16, 64], None)], ["last_hidden_state"])


def mobilenet():
    """MobileNetV2 (inverted residuals: 1x1 expand, 3x3 depthwise, 1x1 project, ReLU6) at
    depth multiplier 0.35, 10 classes."""
    cfg = transformers.MobileNetV2Config(num_channels=3, image_size=64, depth_multiplier=0.35, num_labels=10)
    m, spec = _hf(transformers.MobileNetV2ForImageClassification(cfg),
                  [("pixel_values", "f32", ["batch", 3, 64, 64], None)], ["logits"])
    _randomize_bn(m)
    return m, spec


MODELS = {"cnn": cnn, "block": block, "bert": bert, "gpt2": gpt2, "vit": vit, "t5": t5, "whisper": whisper,
          "mobilenet": mobilenet}
# Which exporters each model goes through (model -> exporters).
FIXTURES = {
    "cnn": ["dynamo", "ts"],
    "block": ["dynamo", "ts"],
    "bert": ["dynamo", "ts"],
    "gpt2": ["dynamo", "ts"],
    "vit": ["dynamo", "ts"],
    "t5": ["dynamo", "ts"],
    "whisper": ["dynamo", "ts"],
    "mobilenet": ["dynamo", "ts"],
}


# --------------------------------------------------------------------------- inputs


def make_inputs(spec, dims, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for name, kind, shape, extra in spec["inputs"]:
        size = [dims[d] if isinstance(d, str) else d for d in shape]
        if kind == "f32":
            out.append(torch.randn(*size, generator=g))
        elif kind == "ids":
            out.append(torch.randint(0, extra, size, generator=g, dtype=torch.int64))
        else:
            mask = torch.ones(*size, dtype=torch.int64)
            if size[0] > 1:
                mask[1, size[1] - size[1] // 4:] = 0
            out.append(mask)
    return tuple(out)


# --------------------------------------------------------------------------- export


def export_dynamo(model, spec, path):
    args = make_inputs(spec, TRACED, 0)
    dims = {"batch": torch.export.Dim("batch", min=1, max=64), "seq": torch.export.Dim("seq", min=2, max=64)}
    dyn = tuple({i: dims[d] for i, d in enumerate(shape) if isinstance(d, str)} for _, _, shape, _ in spec["inputs"])
    if isinstance(model, HFWrap):
        dyn = (dyn,)  # HFWrap.forward(*args): one parameter holding every input
    torch.onnx.export(model, args, path, dynamo=True, input_names=[i[0] for i in spec["inputs"]],
                      output_names=spec["outputs"], dynamic_shapes=dyn)


def export_ts(model, spec, path):
    args = make_inputs(spec, TRACED, 0)
    dyn = {name: {i: d for i, d in enumerate(shape) if isinstance(d, str)} for name, _, shape, _ in spec["inputs"]}
    # Outputs: axis 0 is batch; axis 1 is seq for the outputs spec["seq_outputs"] names.
    for o in spec["outputs"]:
        dyn[o] = {0: "batch", 1: "seq"} if o in spec.get("seq_outputs", ()) else {0: "batch"}
    torch.onnx.export(model, args, path, dynamo=False, opset_version=17, input_names=[i[0] for i in spec["inputs"]],
                      output_names=spec["outputs"], dynamic_axes=dyn)


EXPORTERS = {"dynamo": export_dynamo, "ts": export_ts}


def symbolic_dims(model: onnx.ModelProto, values):
    """The dim_params `values` (graph inputs or outputs) declare, in order."""
    names = []
    for vi in values:
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param not in names:
                names.append(d.dim_param)
    return names


def safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def write_fixture(out_dir, name, model_name, exporter, seed):
    torch.manual_seed(seed)
    model, spec = MODELS[model_name]()
    model.eval()
    fdir = os.path.join(out_dir, name)
    shutil.rmtree(fdir, ignore_errors=True)
    os.makedirs(os.path.join(fdir, "inputs"))
    os.makedirs(os.path.join(fdir, "outputs"))
    path = os.path.join(fdir, "model.onnx")
    t0 = time.time()
    log = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(log), contextlib.redirect_stderr(log), torch.no_grad():
        warnings.simplefilter("ignore")
        EXPORTERS[exporter](model, spec, path)
    proto = onnx.load(path, load_external_data=False)
    declared = symbolic_dims(proto, proto.graph.input)
    # Only the inputs' dims are bound; a dim the exporter invented for an output alone
    # (the TorchScript exporter names output axes it cannot infer, e.g.
    # `MatMullogits_dim_1`) is the compiler's to infer.
    output_only = [d for d in symbolic_dims(proto, proto.graph.output) if d not in declared]
    unknown = [d for d in declared if d not in BOUND]
    if unknown:
        raise RuntimeError(f"the file's inputs declare dims {unknown}, which this script does not bind")
    bind = {d: BOUND[d] for d in declared}

    inputs = make_inputs(spec, BOUND, seed + 1)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {i.name: t.numpy() for i, t in zip(sess.get_inputs(), inputs)}
    outs = sess.run(None, feeds)
    with torch.no_grad():
        want = model(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    meta = {
        "fixture": name,
        "model": model_name,
        "exporter": exporter,
        "opset": next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "onnx": onnx.__version__, "onnxruntime": ort.__version__},
        "seed": seed,
        "symbolic_dims": declared,
        "dims": bind,
        "output_only_dims": output_only,
        "inputs": [],
        "outputs": [],
    }
    for i, arr in feeds.items():
        f = f"inputs/{safe(i)}.npy"
        np.save(os.path.join(fdir, f), arr)
        meta["inputs"].append({"name": i, "file": f, "shape": list(arr.shape), "dtype": str(arr.dtype)})
    worst_torch = 0.0
    for o, arr, ref in zip(sess.get_outputs(), outs, want):
        if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
            raise RuntimeError(f"onnxruntime output `{o.name}` has NaN/Inf")
        worst_torch = max(worst_torch, float(np.abs(arr - ref.numpy()).max()))
        f = f"outputs/{safe(o.name)}.npy"
        np.save(os.path.join(fdir, f), arr)
        meta["outputs"].append({"name": o.name, "file": f, "shape": list(arr.shape), "dtype": str(arr.dtype)})
    meta["max_abs_ort_vs_torch"] = worst_torch
    with open(os.path.join(fdir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(fdir) for x in fs)
    print(f"{name:18} opset {meta['opset']:2}  dims {bind}  {len(proto.graph.node):4} nodes  "
          f"{size / 1e6:5.2f} MB  |ort-torch| {worst_torch:.1e}  {time.time() - t0:5.1f} s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../../tests/fixtures/exporters"))
    ap.add_argument("--only", help="comma-separated fixture names (<model>_<exporter>)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(2)
    wanted = set(args.only.split(",")) if args.only else None
    failed = []
    for model_name, exporters in FIXTURES.items():
        for exporter in exporters:
            name = f"{model_name}_{exporter}"
            if wanted is not None and name not in wanted:
                continue
            try:
                write_fixture(args.out, name, model_name, exporter, args.seed)
            except Exception as e:  # an exporter's own failure: say it and go on
                msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                print(f"{name:18} FAILED: {type(e).__name__}: {msg}", flush=True)
                shutil.rmtree(os.path.join(args.out, name), ignore_errors=True)
                failed.append(name)
    if failed:
        print(f"{len(failed)} export(s) failed: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
