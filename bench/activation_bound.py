#!/usr/bin/env python3
"""The activation lower bound of an ONNX model in its own node order, computed from the model
alone (it shares no code with memc's planner: a check of memc's figure, not a copy of it).

    .venv/bin/python bench/activation_bound.py MODEL.onnx [--dim batch=8 --dim seq=256] [--json]

Definition (the one memc's report calls "activation bound, model order"):

- The symbolic dims named by `--dim` are bound on the graph inputs and outputs, and ONNX shape
  inference (with data propagation) gives every tensor's shape.
- Constants are not activations: initializers, `Constant` outputs, `Shape`/`Size` of a tensor
  whose shape is static, and the outputs of every node that reads at least one tensor and
  only constants (a compiler computes them once), except random ops. A node whose outputs
  are all constants does not run, so it reads nothing (a `Shape` does not keep its input
  alive).
- Every other tensor is an activation: a graph input lives from step 0 to the step of its
  last reader; node `i` (in the file's order) runs at step `i + 1`; its outputs live from that
  step to their last reader's step (or to the end, for graph outputs; a step only, for an
  output nobody reads). Every tensor owns its bytes (a Reshape's output counts as its own).
- The bound is the largest sum of the sizes (elements x element size, no alignment) of the
  activations live at one step. No backend scratch, no weights.

Prints the bound in bytes (with `--json`: `{"bound": N, "peak_step": S, "n_nodes": K}`).
Errors (a shape inference cannot make static, a model with subgraphs) exit non-zero with a
message.
"""

from __future__ import annotations

import argparse
import json
import sys

import onnx
from onnx import TensorProto, shape_inference

RANDOM_OPS = {
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
}

ELEM_BYTES = {
    TensorProto.FLOAT: 4,
    TensorProto.DOUBLE: 8,
    TensorProto.FLOAT16: 2,
    TensorProto.BFLOAT16: 2,
    TensorProto.INT64: 8,
    TensorProto.UINT64: 8,
    TensorProto.INT32: 4,
    TensorProto.UINT32: 4,
    TensorProto.INT16: 2,
    TensorProto.UINT16: 2,
    TensorProto.INT8: 1,
    TensorProto.UINT8: 1,
    TensorProto.BOOL: 1,
    # Sub-byte and 8-bit float types: one byte per element, as an unpacked tensor.
    TensorProto.INT4: 1,
    TensorProto.UINT4: 1,
    TensorProto.FLOAT8E4M3FN: 1,
    TensorProto.FLOAT8E4M3FNUZ: 1,
    TensorProto.FLOAT8E5M2: 1,
    TensorProto.FLOAT8E5M2FNUZ: 1,
}


def fail(message: str) -> None:
    print(f"activation_bound: {message}", file=sys.stderr)
    sys.exit(1)


def bind_dims(model: onnx.ModelProto, dims: dict[str, int]) -> None:
    """Replaces every `dim_param` named in `dims` on the graph's inputs and outputs."""
    for vi in [*model.graph.input, *model.graph.output]:
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in dims:
                d.dim_value = dims[d.dim_param]


def static_shape(vi: onnx.ValueInfoProto) -> list[int] | None:
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    shape = []
    for d in tt.shape.dim:
        if not d.HasField("dim_value"):
            return None
        shape.append(d.dim_value)
    return shape


def bound(model: onnx.ModelProto, dims: dict[str, int]) -> dict:
    bind_dims(model, dims)
    model = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    graph = model.graph
    for node in graph.node:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            fail(f"node `{node.name}` ({node.op_type}) has a subgraph; not supported")
    infos: dict[str, onnx.ValueInfoProto] = {}
    for vi in [*graph.value_info, *graph.input, *graph.output]:
        infos[vi.name] = vi

    def size_of(name: str) -> int:
        vi = infos.get(name)
        if vi is None:
            fail(f"shape inference gave no type for `{name}`")
        shape = static_shape(vi)
        if shape is None:
            fail(f"the shape of `{name}` is not static after binding {dims}: bind more dims")
        elem = vi.type.tensor_type.elem_type
        if elem not in ELEM_BYTES:
            fail(f"`{name}` has element type {TensorProto.DataType.Name(elem)}, not known here")
        n = 1
        for d in shape:
            n *= d
        return n * ELEM_BYTES[elem]

    constant = {init.name for init in graph.initializer} | {""}
    for node in graph.node:
        if node.op_type == "Constant":
            is_constant = True
        elif node.op_type in ("Shape", "Size") and node.input[0] in infos and static_shape(infos[node.input[0]]) is not None:
            is_constant = True
        elif node.op_type in RANDOM_OPS:
            is_constant = False
        else:
            read = [i for i in node.input if i]
            is_constant = bool(read) and all(i in constant for i in read)
        if is_constant:
            constant.update(o for o in node.output if o)

    n = len(graph.node)
    last_step = n + 1
    outputs = {o.name for o in graph.output}
    last_use: dict[str, int] = {}
    for step, node in enumerate(graph.node, start=1):
        if all(o in constant for o in node.output):
            continue  # computed once, ahead of time (a Shape reads no data): no use at run time
        for i in node.input:
            if i:
                last_use[i] = max(last_use.get(i, 0), step)
    for o in outputs:
        last_use[o] = last_step

    delta = [0] * (last_step + 3)
    seen = set(constant)

    def add(name: str, start: int) -> None:
        if name in seen:
            return
        seen.add(name)
        end = last_step + 1 if name in outputs else max(last_use.get(name, start), start) + 1
        size = size_of(name)
        delta[start] += size
        delta[end] -= size

    for vi in graph.input:
        add(vi.name, 0)
    for step, node in enumerate(graph.node, start=1):
        for o in node.output:
            if o:
                add(o, step)
    most, most_step, running = 0, 0, 0
    for step, d in enumerate(delta):
        running += d
        if running > most:
            most, most_step = running, step
    return {"bound": most, "peak_step": most_step, "n_nodes": n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--dim", action="append", default=[], help="name=value")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    dims = {}
    for d in args.dim:
        name, _, value = d.partition("=")
        if not value.isdigit():
            fail(f"--dim {d}: expected name=value with a number")
        dims[name] = int(value)
    try:
        model = onnx.load(args.model, load_external_data=False)
    except Exception as e:  # noqa: BLE001 (any load failure is the user's file)
        fail(f"cannot read `{args.model}`: {e}")
    result = bound(model, dims)
    if args.json:
        print(json.dumps(result))
    else:
        print(result["bound"])


if __name__ == "__main__":
    main()
