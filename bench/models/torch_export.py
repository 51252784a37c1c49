#!/usr/bin/env python3
"""Export small PyTorch models to ONNX with both torch exporters, to test memc on
real exporter output (see TORCH.md).

    python bench/models/torch_export.py --out DIR [--only resnet,bert] [--seed 0]
                                        [--memc target/release/memc] [--json FILE]

For every model and every exporter that works it writes
    DIR/<model>.<exporter>.onnx          (exporter: "ts" = TorchScript, dynamo=False, opset 17;
                                          "dynamo" = torch.export-based, dynamo=True, default opset)
(the dynamo exporter also writes DIR/<model>.dynamo.onnx.data, its external weight file),
runs the file in onnxruntime at batch=2, seq=16 and prints one line:
    <model> <exporter> <ok|FAIL: why> <file size> <op_type counts>

With --memc it also runs `memc compile FILE --emit ir` with the model's dims symbolic
and then bound (--dim batch=2 --dim seq=16, only the dims the model has), and compares the
result types of the printed func.func with onnxruntime's output shapes.

Models (see TORCH.md): resnet18_narrow, mobilenet_v3_small, unet, bert, bert_tt, gpt2,
gpt2_mask, torch_encoder, mlp_gelu_ln, mha_seq.

Weights are random (torch.manual_seed(seed) before each model is built); nothing is
downloaded, and the same seed and versions give byte-identical files. Needs torch, onnx, onnxruntime, onnxscript; transformers (BERT, GPT-2) and
torchvision (ResNet-18 layout, MobileNetV3) are optional: models that need a missing one
are skipped with a note.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
import traceback
import warnings

sys.dont_write_bytecode = True

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

BATCH, SEQ = 2, 16  # the sizes onnxruntime and `memc --dim` are checked at
EXAMPLE_BATCH, EXAMPLE_SEQ = 3, 8  # the sizes traced with (not 1, not the checked ones)

try:
    import torchvision
except Exception:  # pragma: no cover - optional
    torchvision = None
try:
    import transformers
except Exception:  # pragma: no cover - optional
    transformers = None


# --------------------------------------------------------------------------- models
# Each builder returns (module, spec). spec["inputs"] is a list of
# (name, kind, shape-with-"batch"/"seq"-strings, extra) ; kind "f32" or "ids" (int64 in
# [0, extra)) or "mask" (int64 ones).


def narrow_resnet18():
    """torchvision's ResNet-18 layout (BasicBlock x [2,2,2,2], BN, residual Add,
    1x1-conv downsample, MaxPool, AdaptiveAvgPool, Linear) at 1/4 width (16..128 ch),
    so the file is ~2.8 MB instead of 45 MB."""
    from torchvision.models.resnet import BasicBlock, ResNet

    m = ResNet(BasicBlock, [2, 2, 2, 2], num_classes=10)
    m.inplanes = 16
    m.conv1 = nn.Conv2d(3, 16, kernel_size=7, stride=2, padding=3, bias=False)
    m.bn1 = nn.BatchNorm2d(16)
    m.layer1 = m._make_layer(BasicBlock, 16, 2)
    m.layer2 = m._make_layer(BasicBlock, 32, 2, stride=2)
    m.layer3 = m._make_layer(BasicBlock, 64, 2, stride=2)
    m.layer4 = m._make_layer(BasicBlock, 128, 2, stride=2)
    m.fc = nn.Linear(128, 10)
    _randomize_bn(m)
    return m, {"inputs": [("pixel_values", "f32", ["batch", 3, 64, 64], None)], "outputs": ["logits"]}


def mobilenet_v3_small():
    m = torchvision.models.mobilenet_v3_small(num_classes=10)
    _randomize_bn(m)
    return m, {"inputs": [("pixel_values", "f32", ["batch", 3, 64, 64], None)], "outputs": ["logits"]}


class SmallResNet(nn.Module):
    """Fallback when torchvision is missing: conv/BN/relu, 2 residual stages."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.b1 = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                nn.Conv2d(16, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16))
        self.b2 = nn.Sequential(nn.Conv2d(16, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                                nn.Conv2d(32, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32))
        self.down = nn.Sequential(nn.Conv2d(16, 32, 1, 2, bias=False), nn.BatchNorm2d(32))
        self.fc = nn.Linear(32, 10)

    def forward(self, pixel_values):
        x = self.stem(pixel_values)
        x = torch.relu(x + self.b1(x))
        x = torch.relu(self.down(x) + self.b2(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def small_resnet():
    m = SmallResNet()
    _randomize_bn(m)
    return m, {"inputs": [("pixel_values", "f32", ["batch", 3, 64, 64], None)], "outputs": ["logits"]}


def _randomize_bn(m):
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            with torch.no_grad():
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)


def _double_conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """3 down levels (16/32/64 ch, MaxPool), 128-ch bottleneck; up path uses, per level,
    nn.Upsample(nearest), ConvTranspose2d(2, stride 2) and nn.Upsample(bilinear), each
    followed by torch.cat with the skip."""

    def __init__(self):
        super().__init__()
        self.d1, self.d2, self.d3 = _double_conv(3, 16), _double_conv(16, 32), _double_conv(32, 64)
        self.pool = nn.MaxPool2d(2)
        self.mid = _double_conv(64, 128)
        self.up3 = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(128, 64, 1))
        self.u3 = _double_conv(128, 64)
        self.up2 = nn.ConvTranspose2d(64, 32, 2, stride=2)
        self.u2 = _double_conv(64, 32)
        self.up1 = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                 nn.Conv2d(32, 16, 1))
        self.u1 = _double_conv(32, 16)
        self.head = nn.Conv2d(16, 2, 1)

    def forward(self, image):
        s1 = self.d1(image)
        s2 = self.d2(self.pool(s1))
        s3 = self.d3(self.pool(s2))
        x = self.mid(self.pool(s3))
        x = self.u3(torch.cat([self.up3(x), s3], dim=1))
        x = self.u2(torch.cat([self.up2(x), s2], dim=1))
        x = self.u1(torch.cat([self.up1(x), s1], dim=1))
        return self.head(x)


def unet():
    m = UNet()
    _randomize_bn(m)
    return m, {"inputs": [("image", "f32", ["batch", 3, 64, 64], None)], "outputs": ["logits"]}


class BertWrap(nn.Module):
    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask):
        out = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return out.last_hidden_state, out.pooler_output


def bert():
    cfg = transformers.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=256)
    m = BertWrap(transformers.BertModel(cfg))
    return m, {"inputs": [("input_ids", "ids", ["batch", "seq"], cfg.vocab_size),
                          ("attention_mask", "mask", ["batch", "seq"], None)],
               "outputs": ["last_hidden_state", "pooler_output"],
               "note": f"attn_implementation={cfg._attn_implementation}"}


class BertTTWrap(BertWrap):
    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                        return_dict=True)
        return out.last_hidden_state, out.pooler_output


def bert_tt():
    """The same BERT with token_type_ids as a third input (as optimum exports it); without
    it BertEmbeddings gathers its token_type_ids buffer (GatherElements)."""
    m, spec = bert()
    m = BertTTWrap(m.bert)
    spec["inputs"] = spec["inputs"] + [("token_type_ids", "ids", ["batch", "seq"], m.bert.config.type_vocab_size)]
    return m, spec


class GPT2Wrap(nn.Module):
    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, input_ids):
        return self.gpt(input_ids=input_ids, use_cache=False, return_dict=True).logits


class GPT2MaskWrap(GPT2Wrap):
    def forward(self, input_ids, attention_mask):
        return self.gpt(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                        return_dict=True).logits


def _gpt2_cfg():
    return transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, use_cache=False,
                                   bos_token_id=0, eos_token_id=0)


def gpt2():
    """input_ids only. transformers 5.x then checks position_ids for packed sequences with
    torch.diff, which the TorchScript exporter cannot export (aten::diff)."""
    cfg = _gpt2_cfg()
    m = GPT2Wrap(transformers.GPT2LMHeadModel(cfg))
    return m, {"inputs": [("input_ids", "ids", ["batch", "seq"], cfg.vocab_size)], "outputs": ["logits"],
               "note": f"attn_implementation={cfg._attn_implementation}"}


def gpt2_mask():
    """The same GPT-2 called with an attention_mask too (as optimum exports it)."""
    cfg = _gpt2_cfg()
    m = GPT2MaskWrap(transformers.GPT2LMHeadModel(cfg))
    return m, {"inputs": [("input_ids", "ids", ["batch", "seq"], cfg.vocab_size),
                          ("attention_mask", "mask", ["batch", "seq"], None)], "outputs": ["logits"],
               "note": f"attn_implementation={cfg._attn_implementation}"}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.LayerNorm(512), nn.Linear(512, 512),
                                 nn.GELU(approximate="tanh"), nn.LayerNorm(512), nn.Linear(512, 10))

    def forward(self, x):
        return self.net(x)


def mlp():
    return MLP(), {"inputs": [("x", "f32", ["batch", 256], None)], "outputs": ["logits"]}


class MHASeq(nn.Module):
    """Embedding + learned positions, 2 pre-LN blocks of nn.MultiheadAttention
    (batch_first, causal float mask built from seq) + GELU FFN, tied-free LM head."""

    def __init__(self, vocab=1000, d=128, heads=4, layers=2, max_len=512):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.ln1 = nn.ModuleList([nn.LayerNorm(d) for _ in range(layers)])
        self.attn = nn.ModuleList([nn.MultiheadAttention(d, heads, batch_first=True) for _ in range(layers)])
        self.ln2 = nn.ModuleList([nn.LayerNorm(d) for _ in range(layers)])
        self.ffn = nn.ModuleList([nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
                                  for _ in range(layers)])
        self.head = nn.Linear(d, vocab)

    def forward(self, input_ids):
        seq = input_ids.shape[1]
        pos = torch.arange(seq, device=input_ids.device)
        x = self.emb(input_ids) + self.pos(pos)[None]
        mask = torch.triu(torch.full((seq, seq), float("-inf"), device=input_ids.device), diagonal=1)
        for ln1, attn, ln2, ffn in zip(self.ln1, self.attn, self.ln2, self.ffn):
            h = ln1(x)
            x = x + attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            x = x + ffn(ln2(x))
        return self.head(x)


def mha_seq():
    return MHASeq(), {"inputs": [("input_ids", "ids", ["batch", "seq"], 1000)], "outputs": ["logits"]}


class TorchEncoder(nn.Module):
    def __init__(self, vocab=1000, d=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, dim_feedforward=256, batch_first=True, norm_first=False)
        self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)

    def forward(self, input_ids):
        return self.enc(self.emb(input_ids))


def torch_encoder():
    return TorchEncoder(), {"inputs": [("input_ids", "ids", ["batch", "seq"], 1000)],
                            "outputs": ["last_hidden_state"]}


def registry():
    r = {}
    r["resnet18_narrow" if torchvision else "resnet_small"] = narrow_resnet18 if torchvision else small_resnet
    if torchvision:
        r["mobilenet_v3_small"] = mobilenet_v3_small
    r["unet"] = unet
    if transformers:
        r["bert"] = bert
        r["bert_tt"] = bert_tt
        r["gpt2"] = gpt2
        r["gpt2_mask"] = gpt2_mask
    r["torch_encoder"] = torch_encoder  # (c) fallback / extra: nn.TransformerEncoder
    r["mlp_gelu_ln"] = mlp
    r["mha_seq"] = mha_seq
    return r


# --------------------------------------------------------------------------- export


def example_inputs(spec, batch, seq, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for name, kind, shape, extra in spec["inputs"]:
        dims = [batch if d == "batch" else seq if d == "seq" else d for d in shape]
        if kind == "f32":
            out.append(torch.randn(*dims, generator=g))
        elif kind == "ids":
            out.append(torch.randint(0, extra, dims, generator=g, dtype=torch.int64))
        else:
            out.append(torch.ones(*dims, dtype=torch.int64))
    return tuple(out)


def sym_dims(spec):
    names = []
    for _, _, shape, _ in spec["inputs"]:
        for d in shape:
            if isinstance(d, str) and d not in names:
                names.append(d)
    return names


def export_ts(model, spec, path):
    args = example_inputs(spec, EXAMPLE_BATCH, EXAMPLE_SEQ)
    in_names = [i[0] for i in spec["inputs"]]
    dyn = {}
    for name, _, shape, _ in spec["inputs"]:
        dyn[name] = {i: d for i, d in enumerate(shape) if isinstance(d, str)}
    first_in = spec["inputs"][0][2]
    for o in spec["outputs"]:
        dyn[o] = {0: "batch"}
        if "seq" in first_in and o != "pooler_output":
            dyn[o][1] = "seq"
    torch.onnx.export(model, args, path, dynamo=False, opset_version=17, input_names=in_names,
                      output_names=spec["outputs"], dynamic_axes=dyn)


def export_dynamo(model, spec, path):
    args = example_inputs(spec, EXAMPLE_BATCH, EXAMPLE_SEQ)
    batch = torch.export.Dim("batch", min=1, max=1024)
    seq = torch.export.Dim("seq", min=2, max=512)
    # a tuple, not a dict: dict keys must be forward()'s own arg names (torchvision's is `x`)
    dyn = tuple({i: (batch if d == "batch" else seq) for i, d in enumerate(shape) if isinstance(d, str)}
                for _, _, shape, _ in spec["inputs"])
    # as users call it: f=path with the default external_data=True, so the weights go to
    # <path>.data beside the model (memc reads external data)
    torch.onnx.export(model, args, path, dynamo=True, input_names=[i[0] for i in spec["inputs"]],
                      output_names=spec["outputs"], dynamic_shapes=dyn)


EXPORTERS = {"ts": export_ts, "dynamo": export_dynamo}


def op_counts(model: onnx.ModelProto) -> dict:
    c = collections.Counter()

    def walk(graph):
        for n in graph.node:
            c[(n.domain + "::" if n.domain not in ("", "ai.onnx") else "") + n.op_type] += 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)

    walk(model.graph)
    for f in model.functions:  # local functions (not inlined)
        for n in f.node:
            c[f"[fn {f.name}] " + n.op_type] += 1
    return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def run_ort(path, spec):
    so = ort.SessionOptions()
    so.log_severity_level = 4  # errors come back as the exception
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    ins = example_inputs(spec, BATCH, SEQ, seed=1)
    feeds = {i.name: t.numpy() for i, t in zip(sess.get_inputs(), ins)}
    outs = sess.run(None, feeds)
    for o in outs:
        if np.issubdtype(o.dtype, np.floating) and not np.isfinite(o).all():
            raise RuntimeError("onnxruntime output has NaN/Inf")
    return [(o.name, list(v.shape), str(v.dtype)) for o, v in zip(sess.get_outputs(), outs)], ins, outs


# --------------------------------------------------------------------------- memc

_TENSOR_RE = re.compile(r"tensor<([^,>]*?)(?:,|>)")


def memc_result_types(ir: str):
    for line in ir.splitlines():
        if "func.func" in line:
            m = re.search(r"->\s*(.*)\{\s*$", line)
            if not m:
                return None
            res = m.group(1)
            return [t for t in _TENSOR_RE.findall(res)]
    return None


def ort_type_str(shape, dtype):
    ty = {"float32": "f32", "int64": "i64", "float16": "f16", "int32": "i32", "bool": "i1"}.get(dtype, dtype)
    return "x".join(str(d) for d in shape) + ("x" if shape else "") + ty


def run_memc(memc, path, dims):
    cmd = [memc, "compile", path, "--emit", "ir", "--color", "never"]
    for k, v in dims.items():
        cmd += ["--dim", f"{k}={v}"]
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr.strip(), time.time() - t


# --------------------------------------------------------------------------- main


@contextlib.contextmanager
def quiet():
    """Silence the exporters' progress lines and graph dumps (some come from C++, so at
    the file-descriptor level)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--exporters", default="ts,dynamo")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memc", default="", help="path to the memc binary: also run the memc checks")
    ap.add_argument("--json", default="", help="write all results here")
    ap.add_argument("--verbose", action="store_true", help="show exporter logs and warnings")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if not a.verbose:
        warnings.filterwarnings("ignore")
    reg = registry()
    names = [n for n in a.only.split(",") if n] or list(reg)
    for n in names:
        if n not in reg:
            sys.exit(f"unknown model {n!r}; have: {', '.join(reg)}")
    print(f"# torch {torch.__version__}, onnx {onnx.__version__}, onnxruntime {ort.__version__}, "
          f"transformers {getattr(transformers, '__version__', 'missing')}, "
          f"torchvision {getattr(torchvision, '__version__', 'missing')}", flush=True)
    results = []
    for name in names:
        for exp in [e for e in a.exporters.split(",") if e]:
            torch.manual_seed(a.seed)
            model, spec = reg[name]()
            model.eval()
            path = os.path.join(a.out, f"{name}.{exp}.onnx")
            for stale in (path, path + ".data"):
                if os.path.exists(stale):
                    os.remove(stale)
            r = {"model": name, "exporter": exp, "path": path, "dims": sym_dims(spec), "note": spec.get("note", "")}
            t = time.time()
            try:
                with torch.no_grad(), (contextlib.nullcontext() if a.verbose else quiet()):
                    EXPORTERS[exp](model, spec, path)
            except Exception as e:  # noqa: BLE001
                r["export"] = f"FAIL: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                r["trace"] = traceback.format_exc()[-3000:]
                print(f"{name} {exp} {r['export']}", flush=True)
                results.append(r)
                continue
            r["export_s"] = round(time.time() - t, 1)
            size = os.path.getsize(path) + (os.path.getsize(path + ".data") if os.path.exists(path + ".data") else 0)
            r["bytes"] = size
            m = onnx.load(path, load_external_data=False)
            r["opset"] = {o.domain or "ai.onnx": o.version for o in m.opset_import}
            r["ops"] = op_counts(m)
            r["inputs"] = [(i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim])
                           for i in m.graph.input]
            r["outputs_decl"] = [(o.name, [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim])
                                 for o in m.graph.output]
            try:
                shapes, ins, outs = run_ort(path, spec)
                with torch.no_grad():
                    ref = model(*ins)
                ref = ref if isinstance(ref, tuple) else (ref,)
                r["max_abs_diff_vs_torch"] = float(max(np.abs(o - t.numpy()).max() for o, t in zip(outs, ref)))
                r["ort"] = "ok"
                r["ort_shapes"] = shapes
            except Exception as e:  # noqa: BLE001
                r["ort"] = f"FAIL: {type(e).__name__}: {str(e)[:500]}"
            print(f"{name} {exp} export ok ({r['export_s']} s, {size / 2**20:.2f} MiB, opset {r['opset']}) "
                  f"ort {r['ort']} max|ort-torch|={r.get('max_abs_diff_vs_torch', '-')}", flush=True)
            print(f"    ops: {json.dumps(r['ops'])}", flush=True)
            if a.memc:
                rc, out, err, secs = run_memc(a.memc, path, {})
                r["memc_sym"] = "ok" if rc == 0 else f"rc={rc}: {err}"
                r["memc_sym_results"] = memc_result_types(out) if rc == 0 else None
                bound = {d: (BATCH if d == "batch" else SEQ) for d in r["dims"]}
                rc2, out2, err2, secs2 = run_memc(a.memc, path, bound)
                r["memc_bound"] = "ok" if rc2 == 0 else f"rc={rc2}: {err2}"
                r["memc_s"] = round(secs2, 2)
                if rc2 == 0:
                    got = memc_result_types(out2)
                    want = [ort_type_str(s, d) for _, s, d in r.get("ort_shapes", [])]
                    r["memc_bound_results"] = got
                    r["shape_match"] = (got == want) if r.get("ort") == "ok" else None
                    r["ort_results"] = want
                print(f"    memc (symbolic): {r['memc_sym']}", flush=True)
                if r["memc_sym_results"]:
                    print(f"      results: {r['memc_sym_results']}", flush=True)
                print(f"    memc ({' '.join(f'{k}={v}' for k, v in bound.items())}): {r['memc_bound']}", flush=True)
                if rc2 == 0:
                    print(f"      memc {r['memc_bound_results']} vs ort {r.get('ort_results')} -> "
                          f"{'MATCH' if r['shape_match'] else 'MISMATCH'}", flush=True)
            results.append(r)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"versions": {"torch": torch.__version__, "onnx": onnx.__version__,
                                    "onnxruntime": ort.__version__,
                                    "transformers": getattr(transformers, "__version__", None),
                                    "torchvision": getattr(torchvision, "__version__", None)},
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
