"""llm_qdq / llm_qdq_1g: a Phi-3-mini-shaped decoder stack, 4-bit QDQ-quantized.

Widths are Phi-3-mini's: hidden 3072, 32 heads (head_dim 96), fused qkv_proj
3072->9216, o_proj 3072->3072, gated MLP with fused gate_up_proj 3072->16384,
Slice into gate/up halves, SiLU written as gate*Sigmoid(gate), down_proj 8192->3072,
RMSNorm (decomposed: Pow, ReduceMean, Add eps, Sqrt, Div, Mul), residual Adds, final
RMSNorm and lm_head. The vocabulary is kept small (1024) so the embedding does not
dominate; rotary embeddings and the KV cache are left out (no effect on weights).
The causal mask is built exporter-style from Range/Unsqueeze/Less/Where and Expand.

Input input_ids[batch,seq] int64; output logits[batch,seq,1024]. Opset 21, IR 10.

Every MatMul with a constant weight (qkv/o/gate_up/down per layer, lm_head) is
quantized by onnxruntime's MatMulNBitsQuantizer with quant_format=QuantFormat.QDQ,
block_size=32, asymmetric: each becomes

    DequantizeLinear(W_DQ_Q4: uint4[K,N], W_DQ_scales: f32[K/32,N],
                     W_DQ_zero_points: uint4[K/32,N]; axis=0, block_size=32) -> MatMul

The Gather embedding stays fp32. `llm_qdq` quantizes the whole fp32 model in one
call. `llm_qdq_1g` (16 layers, ~1.2 GB of weights, stored as external data) is too
big to materialize in fp32 at once (~7.5 GB), so it runs the same quantizer on one
layer's MatMuls at a time and stitches the emitted nodes/initializers back in the
order the whole-model call would produce. Weights are drawn per tensor from
(seed, crc32(name)), so the stitched build equals the whole-model build; this is
checked by `generate.py --check-stitch` (llm_qdq built both ways is byte-identical).
"""

from __future__ import annotations

import logging
import os
import re
import sys

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper, helper

from .builder import IR_VERSION, PRODUCER, GraphBuilder

OPSET = 21
HIDDEN, HEADS, INTER, VOCAB = 3072, 32, 8192, 1024
BLOCK_SIZE = 32
LAYERS_1G = 16
EPS = 1e-5


def build_fp32(layers: int, seed: int, name: str) -> GraphBuilder:
    """The fp32 graph, with lazily materialized weights."""
    g = GraphBuilder(name, seed)
    head_dim = HIDDEN // HEADS
    ids = g.input("input_ids", TensorProto.INT64, ["batch", "seq"])
    with g.scope("model"):
        with g.scope("embed_tokens"):
            x = g.op("Gather", g.param("weight", (VOCAB, HIDDEN)), ids, axis=0)
        with g.scope("causal_mask"):
            seq = g.scalar_dim(ids, 1)
            r = g.op("Range", g.const(0), seq, g.const(1))
            future = g.op("Less", g.op("Unsqueeze", r, g.const([1])), g.op("Unsqueeze", r, g.const([0])))
            lowest = g.const(float(np.finfo(np.float32).min), np.float32)
            m = g.op("Where", future, lowest, g.const(0.0, np.float32))
            m = g.op("Unsqueeze", m, g.const([0, 1]))
            s1 = g.dim(ids, 1)
            causal = g.op("Expand", m, g.op("Concat", g.dim(ids, 0), g.const([1]), s1, s1, axis=0))
        for layer in range(layers):
            with g.scope(f"layers.{layer}"):
                with g.scope("input_layernorm"):
                    h = g.rms_norm(x, HIDDEN, EPS)
                with g.scope("self_attn"):
                    with g.scope("qkv_proj"):
                        qkv = g.linear(h, HIDDEN, 3 * HIDDEN, bias=False)
                    q, k, v = g.op("Split", qkv, g.const([HIDDEN] * 3), outputs=3, axis=-1)
                    heads = []
                    for t, perm in ((q, [0, 2, 1, 3]), (k, [0, 2, 3, 1]), (v, [0, 2, 1, 3])):
                        shape = g.op("Concat", g.dim(h, 0), g.dim(h, 1), g.const([HEADS]), g.const([head_dim]), axis=0)
                        heads.append(g.op("Transpose", g.op("Reshape", t, shape), perm=perm))
                    q, kt, v = heads
                    s = g.op("MatMul", q, kt)
                    s = g.op("Mul", s, g.const(float(1.0 / np.sqrt(head_dim)), np.float32))
                    s = g.op("Add", s, causal)
                    p = g.op("Softmax", s, axis=-1)
                    ctx = g.op("Transpose", g.op("MatMul", p, v), perm=[0, 2, 1, 3])
                    ctx = g.op("Reshape", ctx, g.op("Concat", g.dim(h, 0), g.dim(h, 1), g.const([HIDDEN]), axis=0))
                    with g.scope("o_proj"):
                        a = g.linear(ctx, HIDDEN, HIDDEN, bias=False)
                x = g.op("Add", x, a)
                with g.scope("post_attention_layernorm"):
                    h = g.rms_norm(x, HIDDEN, EPS)
                with g.scope("mlp"):
                    with g.scope("gate_up_proj"):
                        gu = g.linear(h, HIDDEN, 2 * INTER, bias=False)
                    gate = g.op("Slice", gu, g.const([0]), g.const([INTER]), g.const([-1]))
                    up = g.op("Slice", gu, g.const([INTER]), g.const([2 * INTER]), g.const([-1]))
                    act = g.op("Mul", gate, g.op("Sigmoid", gate))  # SiLU
                    h = g.op("Mul", up, act)
                    with g.scope("down_proj"):
                        h = g.linear(h, INTER, HIDDEN, bias=False)
                x = g.op("Add", x, h)
        with g.scope("norm"):
            x = g.rms_norm(x, HIDDEN, EPS)
    with g.scope("lm_head"):
        logits = g.linear(x, HIDDEN, VOCAB, bias=False)
    g.output(logits, "logits", TensorProto.FLOAT, ["batch", "seq", VOCAB])
    return g


def _quantizer(model: onnx.ModelProto):
    # Imported lazily: importing onnxruntime.quantization is slow and only these models need it.
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    return MatMulNBitsQuantizer(
        model,
        bits=4,
        block_size=BLOCK_SIZE,
        is_symmetric=False,
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=("MatMul",),
    )


def quantize_whole(model: onnx.ModelProto) -> onnx.ModelProto:
    q = _quantizer(model)
    q.process()
    return q.model.model


def _chunk_key(node_name: str) -> str:
    m = re.search(r"/layers\.(\d+)/", node_name)
    return m.group(1) if m else "tail"


def _externalize(t: onnx.TensorProto, out_dir: str, location: str) -> onnx.TensorProto:
    """Append `t`'s data to out_dir/location with onnx's own writer; return a data-less copy.

    Same steps and size rule as onnx.save(..., save_as_external_data=True,
    all_tensors_to_one_file=True, size_threshold=1024), one tensor at a time.
    """
    if not (t.HasField("raw_data") and sys.getsizeof(t.raw_data) >= 1024):
        return _detach(t)
    external_data_helper.set_external_data(t, location)
    external_data_helper.save_external_data(t, out_dir)
    t.ClearField("raw_data")
    return _detach(t)


def _detach(t: onnx.TensorProto) -> onnx.TensorProto:
    # A fresh top-level message: keeping a sub-message of the quantizer's model alive
    # would keep that model's whole protobuf arena (with the fp32 weights) alive.
    c = onnx.TensorProto()
    c.CopyFrom(t)
    return c


def quantize_chunked(g: GraphBuilder, progress=None, external: tuple[str, str] | None = None) -> onnx.ModelProto:
    """Quantize one layer's MatMuls at a time and stitch the results together.

    Produces exactly what quantize_whole(g.make_model(OPSET)) produces: nodes in the
    original order with each quantized MatMul replaced by the quantizer's
    [DequantizeLinear, MatMul] pair, the surviving fp32 initializers in their original
    order, then the quantizer's new initializers (q, scales, zero points) in node order.

    With external=(out_dir, location), tensor data is streamed to out_dir/location
    as soon as it is produced, in initializer order, exactly as onnx.save(...,
    save_as_external_data=True, location=location) would lay it out; only the graph
    stays in memory, so peak memory is about one fp32 layer.
    """
    weight_names = {n.input[1] for n in g.nodes if n.op_type == "MatMul" and n.input[1] in g.inits}
    chunks: list[list[onnx.NodeProto]] = []
    last = None
    for n in g.nodes:
        if n.op_type == "MatMul" and n.input[1] in weight_names:
            key = _chunk_key(n.name)
            if key != last:
                chunks.append([])
                last = key
            chunks[-1].append(n)

    sink = (lambda t: _externalize(t, *external)) if external else _detach
    if external:
        data = os.path.join(*external)
        if os.path.exists(data):
            os.remove(data)  # onnx's writer appends

    # Surviving fp32 initializers come first in the final initializer list.
    kept = []
    for k, v in g.inits.items():
        if k not in weight_names:
            arr = np.asarray(v.materialize() if hasattr(v, "materialize") else v, order="C")
            kept.append(sink(onnx.numpy_helper.from_array(arr, k)))

    replaced: dict[str, list[onnx.NodeProto]] = {}
    new_inits: list[onnx.TensorProto] = []
    for ci, chunk in enumerate(chunks):
        inits = [onnx.numpy_helper.from_array(g.inits[n.input[1]].materialize(), n.input[1]) for n in chunk]
        graph = helper.make_graph(
            chunk,
            f"{g.name}_chunk{ci}",
            [helper.make_tensor_value_info(n.input[0], TensorProto.FLOAT, None) for n in chunk],
            [helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, None) for n in chunk],
            initializer=inits,
        )
        del inits
        mini = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        del graph
        qg = quantize_whole(mini).graph
        by_output = {n.output[0]: n.name for n in chunk}
        pending: list[onnx.NodeProto] = []
        for qn in qg.node:
            c = onnx.NodeProto()
            c.CopyFrom(qn)
            pending.append(c)
            if qn.op_type == "MatMul" and qn.output[0] in by_output:
                replaced[by_output[qn.output[0]]] = pending
                pending = []
        assert not pending and len(replaced) == sum(map(len, chunks[: ci + 1])), "unexpected quantizer output"
        new_inits.extend(sink(t) for t in qg.initializer)
        del qg, mini
        if progress:
            progress(ci + 1, len(chunks))

    nodes = [q for n in g.nodes for q in replaced.get(n.name, [n])]
    graph = helper.make_graph(
        nodes, g.name, g.inputs, g.outputs, initializer=kept + new_inits, value_info=g.value_info
    )
    del kept, new_inits
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name=PRODUCER, ir_version=IR_VERSION
    )


def build(seed: int, layers: int = 2, chunked: bool = False) -> onnx.ModelProto:
    g = build_fp32(layers, seed, "llm_qdq")
    if chunked:
        model = quantize_chunked(g)
    else:
        model = quantize_whole(g.make_model(OPSET))
    model.doc_string = __doc__.strip()
    return model


def write_external(seed: int, path: str, layers: int = LAYERS_1G, name: str = "llm_qdq_1g",
                   location: str | None = None, progress=None) -> None:
    """Build and write the model with its weights streamed to one external data file.

    The result is what onnx.save(model, path, save_as_external_data=True,
    all_tensors_to_one_file=True, location=location) writes for the whole-model
    quantized model, without ever holding the whole model's weights in memory
    (checked byte-for-byte by generate.py --check-stitch).
    """
    location = location or os.path.basename(path) + ".data"
    out_dir = os.path.dirname(os.path.abspath(path))
    g = build_fp32(layers, seed, name)
    model = quantize_chunked(g, progress, external=(out_dir, location))
    model.doc_string = __doc__.strip()
    onnx.save(model, path)
    os.chmod(os.path.join(out_dir, location), 0o644)  # onnx creates it 0600


def save_external(model: onnx.ModelProto, path: str, location: str) -> None:
    """Plain onnx.save(..., save_as_external_data=True) (used to cross-check write_external)."""
    out_dir = os.path.dirname(os.path.abspath(path))
    data = os.path.join(out_dir, location)
    if os.path.exists(data):
        os.remove(data)  # onnx appends to an existing data file
    path = os.path.abspath(path)
    cwd = os.getcwd()
    os.chdir(out_dir)  # onnx checks `location` for existence relative to the CWD
    try:
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=location, size_threshold=1024)
    finally:
        os.chdir(cwd)
    os.chmod(data, 0o644)
