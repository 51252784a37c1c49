"""A small, deterministic ONNX graph builder shared by the zoo models.

Everything here is deterministic: node and tensor names come from a scope stack
and per-name counters, and every random weight is drawn from its *own* RNG stream
seeded by ``(seed, crc32(name))``. A weight's values therefore depend only on the
model seed and the weight's name, not on the order tensors are materialized in,
which lets the large LLM model be built (and quantized) one layer at a time and
still come out identical to a whole-model build.
"""

from __future__ import annotations

import contextlib
import zlib
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10  # loads in onnxruntime >= 1.20; required for int4/uint4 (opset 21)
PRODUCER = "memc-zoo"

NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.bool_): TensorProto.BOOL,
}


@dataclass
class LazyRandn:
    """A float32 weight drawn from N(mean, std^2) on first materialization."""

    name: str
    shape: tuple
    std: float
    mean: float
    seed: int

    def materialize(self) -> np.ndarray:
        rng = np.random.default_rng([self.seed, zlib.crc32(self.name.encode())])
        a = rng.standard_normal(self.shape, dtype=np.float32)
        a *= np.float32(self.std)
        if self.mean:
            a += np.float32(self.mean)
        return a

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * 4


@dataclass
class LazyPositive:
    """A float32 tensor uniform in [lo, hi) (BatchNorm running variances)."""

    name: str
    shape: tuple
    lo: float
    hi: float
    seed: int

    def materialize(self) -> np.ndarray:
        rng = np.random.default_rng([self.seed, zlib.crc32(self.name.encode())])
        return rng.uniform(self.lo, self.hi, self.shape).astype(np.float32)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * 4


class GraphBuilder:
    def __init__(self, name: str, seed: int):
        self.name = name
        self.seed = seed
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, object] = {}  # name -> np.ndarray | Lazy*
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.value_info: list[onnx.ValueInfoProto] = []
        self._scope: list[str] = []
        self._counts: dict[str, int] = {}

    # ---- naming -----------------------------------------------------------------
    @contextlib.contextmanager
    def scope(self, s: str):
        self._scope.append(s)
        try:
            yield
        finally:
            self._scope.pop()

    def _prefix(self) -> str:
        return "/" + "/".join(self._scope) if self._scope else ""

    def _unique(self, base: str) -> str:
        n = self._counts.get(base, 0)
        self._counts[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def pname(self, leaf: str) -> str:
        """Parameter name, PyTorch style: 'layers.0.attn.q_proj.weight'."""
        return ".".join([*self._scope, leaf]) if self._scope else leaf

    # ---- graph interface ----------------------------------------------------------
    def input(self, name: str, elem_type: int, shape) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def output(self, value: str, name: str, elem_type: int, shape) -> str:
        """Mark `value` as a graph output called `name` (renaming the producing node's output)."""
        if value != name:
            for n in self.nodes:
                for seq in (n.input, n.output):
                    for i, v in enumerate(seq):
                        if v == value:
                            seq[i] = name
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def init(self, name: str, value) -> str:
        if name in self.inits:
            raise ValueError(f"duplicate initializer {name}")
        self.inits[name] = value
        return name

    def param(self, leaf: str, shape, std: float = 0.02, mean: float = 0.0) -> str:
        name = self.pname(leaf)
        return self.init(name, LazyRandn(name, tuple(shape), std, mean, self.seed))

    def positive(self, leaf: str, shape, lo=0.5, hi=1.5) -> str:
        name = self.pname(leaf)
        return self.init(name, LazyPositive(name, tuple(shape), lo, hi, self.seed))

    def const(self, values, dtype=np.int64) -> str:
        """A small shared constant initializer, named after its value (deduplicated)."""
        arr = np.asarray(values, dtype=dtype)
        tag = "_".join(str(v).replace("-", "m").replace(".", "p") for v in arr.reshape(-1).tolist())
        kind = {np.dtype(np.int64): "i64", np.dtype(np.float32): "f32", np.dtype(np.bool_): "b"}[arr.dtype]
        shape_tag = "s" if arr.ndim == 0 else "x".join(map(str, arr.shape))
        name = f"const_{kind}_{shape_tag}_{tag}"
        if name not in self.inits:
            self.inits[name] = arr
        return name

    def op(self, op_type: str, *inputs: str, outputs: int = 1, domain: str = "", **attrs):
        base = f"{self._prefix()}/{op_type}"
        node_name = self._unique(base)
        outs = [f"{node_name}_output_{i}" for i in range(outputs)]
        self.nodes.append(
            helper.make_node(op_type, list(inputs), outs, name=node_name, domain=domain or None, **attrs)
        )
        return outs[0] if outputs == 1 else tuple(outs)

    # ---- common exporter-like patterns -----------------------------------------------
    def dim(self, x: str, axis: int) -> str:
        """Shape(x) -> Gather(axis) -> Unsqueeze(0): a 1-element int64 tensor, like exporters."""
        shape = self.op("Shape", x)
        d = self.op("Gather", shape, self.const(axis), axis=0)
        return self.op("Unsqueeze", d, self.const([0]))

    def scalar_dim(self, x: str, axis: int) -> str:
        shape = self.op("Shape", x)
        return self.op("Gather", shape, self.const(axis), axis=0)

    def linear(self, x: str, in_f: int, out_f: int, bias: bool = True, std: float = 0.02) -> str:
        w = self.param("weight", (in_f, out_f), std=std)
        y = self.op("MatMul", x, w)
        if bias:
            y = self.op("Add", y, self.param("bias", (out_f,), std=std))
        return y

    def layer_norm(self, x: str, hidden: int, eps: float = 1e-5) -> str:
        g = self.param("weight", (hidden,), std=0.02, mean=1.0)
        b = self.param("bias", (hidden,), std=0.02)
        return self.op("LayerNormalization", x, g, b, axis=-1, epsilon=eps)

    def rms_norm(self, x: str, hidden: int, eps: float = 1e-5) -> str:
        """RMSNorm as exporters decompose it (opset 18+: ReduceMean takes axes as an input)."""
        g = self.param("weight", (hidden,), std=0.02, mean=1.0)
        sq = self.op("Pow", x, self.const(2.0, np.float32))
        ms = self.op("ReduceMean", sq, self.const([-1]), keepdims=1)
        rs = self.op("Sqrt", self.op("Add", ms, self.const(eps, np.float32)))
        y = self.op("Div", x, rs)
        return self.op("Mul", y, g)

    def gelu_erf(self, x: str) -> str:
        """GELU via the Erf formula (what the PyTorch exporter emits below opset 20)."""
        t = self.op("Div", x, self.const(1.4142135381698608, np.float32))
        t = self.op("Erf", t)
        t = self.op("Add", t, self.const(1.0, np.float32))
        t = self.op("Mul", x, t)
        return self.op("Mul", t, self.const(0.5, np.float32))

    # ---- output ---------------------------------------------------------------------
    def tensor_protos(self) -> list[onnx.TensorProto]:
        out = []
        for name, v in self.inits.items():
            arr = v.materialize() if hasattr(v, "materialize") else v
            out.append(numpy_helper.from_array(np.asarray(arr, order="C"), name))
        return out

    def make_model(self, opset: int, doc: str = "", extra_opsets=()) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes,
            self.name,
            self.inputs,
            self.outputs,
            initializer=self.tensor_protos(),
            value_info=self.value_info,
        )
        opsets = [helper.make_opsetid("", opset), *[helper.make_opsetid(d, v) for d, v in extra_opsets]]
        model = helper.make_model(graph, opset_imports=opsets, producer_name=PRODUCER, ir_version=IR_VERSION)
        if doc:
            model.doc_string = doc.strip()
        return model


def weight_bytes(model: onnx.ModelProto) -> int:
    """Bytes of initializer payload (inline or external), int4/uint4 counted packed."""
    total = 0

    def visit(graph):
        nonlocal total
        for t in graph.initializer:
            total += tensor_bytes(t)
        for n in graph.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    visit(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for g in a.graphs:
                        visit(g)

    visit(model.graph)
    return total


def tensor_bytes(t: onnx.TensorProto) -> int:
    if t.data_location == TensorProto.EXTERNAL:
        for kv in t.external_data:
            if kv.key == "length":
                return int(kv.value)
    if t.HasField("raw_data"):
        return len(t.raw_data)
    n = int(np.prod(t.dims)) if len(t.dims) else 1
    bits = {TensorProto.INT4: 4, TensorProto.UINT4: 4}.get(t.data_type)
    if bits:
        return (n + 1) // 2
    return n * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
