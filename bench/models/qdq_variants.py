#!/usr/bin/env python3
"""QDQ models made by onnxruntime's own quantizers with settings the zoo does not use.

    python bench/models/qdq_variants.py --out DIR

Builds one small fp32 model (below) and quantizes it several ways, each written as
DIR/<variant>.onnx, and writes DIR/variants.json: for each variant its name, file, whether
activations are quantized, and for each graph output a DequantizeLinear writes with one scale,
that scale (`output_steps`: the output's quantization step, the size of a rounding flip;
tests/qdq_variants.rs allows a few such flips where float math in another order rounds an
activation that lies on a rounding boundary the other way). Prints each variant's name and, for every DequantizeLinear, the
quantized tensor's type and shape, the scale's and zero point's shapes, `axis` and
`block_size`, so a reader sees what the quantizer produced. Deterministic: the same
onnxruntime version writes the same files.

The fp32 model (opset 21, IR 10), input x: f32[batch, seq, 96]:

    MatMul 96->128 (3-d input) + bias, Relu; MatMul 128->80, Sigmoid; MatMul 80->64, Tanh;
    Reshape to [batch*seq, 64]; Gemm 64->48 (transB=1, bias) -> output `g` f32[batch*seq, 48];
    Relu; Reshape to [batch, seq, 48]; MatMul 48->200 -> output `y` f32[batch, seq, 200].

K = 96, 80 and 48 are not multiples of 32, 64 or 128, so blocked variants have a partial last
block (and block 128 is wider than every K but 128).

Variants:
  * q4_b16_sym, q4_b64_asym, q4_b128_sym, q4_b128_asym: MatMulNBitsQuantizer with
    quant_format=QDQ, bits=4, that block size, symmetric (int4, no zero point) or asymmetric
    (uint4 zero points). Only MatMuls are quantized; the Gemm stays fp32.
  * q4_channel_asym, q4_channel_sym: the same quantizer with channel_wised_quantize=True
    (block_size = K). Symmetric it lays the weight out transposed for Intel NPUs:
    int4[N, K] with axis=1, then a Transpose before the MatMul.
  * s8_u8act_channel, s8_s8act_channel: quantize_static (QDQ, MinMax calibration on four
    deterministic batches) with per_channel=True, int8 weights and uint8 / int8 activations:
    QuantizeLinear+DequantizeLinear on activations, per-channel int8 weight DQs, int32 bias DQs.
  * u8_u8act_channel: the same with uint8 (asymmetric) weights.
  * s8_weight_only_channel: s8_u8act_channel (with QDQKeepRemovableActivations, so the Relus
    stay) with every activation QuantizeLinear -> DequantizeLinear pair removed by this script
    (the consumers read the float tensor again); the weight and bias DQs are onnxruntime's,
    unchanged: int8 per-channel weights, int32 Gemm bias, the MatMul's Add bias as uint8. onnxruntime has no QDQ int8
    weight-only mode (MatMulNBitsQuantizer's QDQ format is 4-bit only; quantize_dynamic
    writes QOperator MatMulInteger).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 21
IR_VERSION = 10  # int4/uint4 need opset 21, which needs IR 10
IN_FEATURES = 96
SEED = 0


def weight(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    return (rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(fan_in))).astype(np.float32)


def build_fp32() -> onnx.ModelProto:
    rng = np.random.default_rng(SEED)
    inits, nodes = [], []

    def init(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(array, name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=f"{output}_{op.lower()}", **attrs))
        return output

    x = "x"
    h = node("MatMul", [x, init("w1", weight(rng, (96, 128), 96))], "mm1")
    h = node("Add", [h, init("b1", (0.1 * rng.standard_normal(128)).astype(np.float32))], "mm1_bias")
    h = node("Relu", [h], "relu1")
    h = node("MatMul", [h, init("w2", weight(rng, (128, 80), 128))], "mm2")
    h = node("Sigmoid", [h], "sigmoid2")
    h = node("MatMul", [h, init("w3", weight(rng, (80, 64), 80))], "mm3")
    h = node("Tanh", [h], "tanh3")
    # [batch, seq] of x, for reshaping back to 3-d after the Gemm.
    shape = node("Shape", [x], "x_shape")
    lead = node("Slice", [shape, init("c0", np.array([0], np.int64)), init("c2", np.array([2], np.int64))], "lead")
    h = node("Reshape", [h, init("rows64", np.array([-1, 64], np.int64))], "flat")
    g = node(
        "Gemm",
        [h, init("wg", weight(rng, (48, 64), 64)), init("bg", (0.1 * rng.standard_normal(48)).astype(np.float32))],
        "g",
        transB=1,
    )
    h = node("Relu", [g], "relu_g")
    back = node("Concat", [lead, init("c48", np.array([48], np.int64))], "back_shape", axis=0)
    h = node("Reshape", [h, back], "unflat")
    y = node("MatMul", [h, init("w4", weight(rng, (48, 200), 48))], "y")

    graph = helper.make_graph(
        nodes,
        "qdq_variants",
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "seq", IN_FEATURES])],
        [
            helper.make_tensor_value_info(y, TensorProto.FLOAT, ["batch", "seq", 200]),
            helper.make_tensor_value_info(g, TensorProto.FLOAT, [None, 48]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="memc-qdq-variants")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def nbits(model: onnx.ModelProto, block_size: int, symmetric: bool, channel: bool = False) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    q = MatMulNBitsQuantizer(
        onnx.ModelProto.FromString(model.SerializeToString()),
        bits=4,
        block_size=block_size,
        is_symmetric=symmetric,
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=("MatMul",),
        channel_wised_quantize=channel,
    )
    q.process()
    return q.model.model


class Calibration:
    """Four deterministic batches of x, [2, 5, 96], standard normal."""

    def __init__(self) -> None:
        rng = np.random.default_rng(1)
        self.batches = iter([{"x": rng.standard_normal((2, 5, IN_FEATURES), dtype=np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.batches, None)

    def rewind(self) -> None:
        self.__init__()


def static(model: onnx.ModelProto, weight_type, activation_type, extra_options=None) -> onnx.ModelProto:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Reader(Calibration, CalibrationDataReader):
        pass

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "fp32.onnx"), os.path.join(tmp, "q.onnx")
        onnx.save(model, src)
        quantize_static(
            src,
            dst,
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            weight_type=weight_type,
            activation_type=activation_type,
            extra_options=extra_options,
        )
        return onnx.load(dst)


def strip_activation_qdq(model: onnx.ModelProto) -> onnx.ModelProto:
    """Removes every QuantizeLinear -> DequantizeLinear pair on an activation.

    A QuantizeLinear whose input is not an initializer quantizes an activation; each
    DequantizeLinear reading its output is dropped and its consumers read the QuantizeLinear's
    float input instead. Weight and bias DequantizeLinears read initializers and stay.
    """
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    quantized = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in inits}
    dequantized = {n.output[0]: quantized[n.input[0]] for n in graph.node if n.op_type == "DequantizeLinear" and n.input[0] in quantized}
    kept = [
        n for n in graph.node
        if not (n.op_type == "QuantizeLinear" and n.output[0] in quantized)
        and not (n.op_type == "DequantizeLinear" and n.output[0] in dequantized)
    ]
    # A DQ output read in place of its float source; where the DQ output is a graph output,
    # the float source takes the output's name instead (its producer writes the output).
    rename = {}
    for dq_out, src in dequantized.items():
        if dq_out in {o.name for o in graph.output}:
            rename[src] = dq_out
    for dq_out, src in dequantized.items():
        rename.setdefault(dq_out, rename.get(src, src))
    for n in kept:
        for i, name in enumerate(n.input):
            n.input[i] = rename.get(name, name)
        for i, name in enumerate(n.output):
            n.output[i] = rename.get(name, name)
    del graph.node[:]
    graph.node.extend(kept)
    used = {i for n in kept for i in n.input}
    live = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(live)
    onnx.checker.check_model(model, full_check=True)
    return model


def variants() -> dict[str, onnx.ModelProto]:
    from onnxruntime.quantization import QuantType

    fp32 = build_fp32()
    out = {
        "q4_b16_sym": nbits(fp32, 16, True),
        "q4_b64_asym": nbits(fp32, 64, False),
        "q4_b128_sym": nbits(fp32, 128, True),
        "q4_b128_asym": nbits(fp32, 128, False),
        "q4_channel_asym": nbits(fp32, 32, False, channel=True),
        "q4_channel_sym": nbits(fp32, 32, True, channel=True),
        "s8_u8act_channel": static(fp32, QuantType.QInt8, QuantType.QUInt8),
        "s8_s8act_channel": static(fp32, QuantType.QInt8, QuantType.QInt8),
        "u8_u8act_channel": static(fp32, QuantType.QUInt8, QuantType.QUInt8),
    }
    # Keep the Relus that quantize_static drops as redundant with a uint8 quantization: without
    # the activation QDQs they are not redundant.
    keep_relu = static(fp32, QuantType.QInt8, QuantType.QUInt8, {"QDQKeepRemovableActivations": True})
    out["s8_weight_only_channel"] = strip_activation_qdq(keep_relu)
    return out


def describe(name: str, model: onnx.ModelProto) -> str:
    """The variant's name, its op counts and one line per DequantizeLinear."""
    inits = {t.name: t for t in model.graph.initializer}
    dtype = lambda t: TensorProto.DataType.Name(t.data_type).lower()  # noqa: E731
    counts: dict[str, int] = {}
    for n in model.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    lines = [f"{name}: " + ", ".join(f"{op} x{c}" for op, c in sorted(counts.items()))]
    for n in model.graph.node:
        if n.op_type != "DequantizeLinear":
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        x = inits.get(n.input[0])
        what = f"{dtype(x)}{list(x.dims)}" if x is not None else f"activation {n.input[0]}"
        scale = inits[n.input[1]]
        zp = inits.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None
        zp_text = f"{dtype(zp)}{list(zp.dims)}" if zp is not None else "none"
        attr_text = " ".join(f"{k}={v}" for k, v in sorted(attrs.items())) or "(no attributes)"
        if x is None and not attrs and not scale.dims:
            continue  # per-tensor activation DQs are all alike; the Q count says how many
        lines.append(f"  DQ {what} scale {dtype(scale)}{list(scale.dims)} zero_point {zp_text} {attr_text}")
    return "\n".join(lines)


def manifest_entry(name: str, model: onnx.ModelProto) -> dict:
    inits = {t.name: t for t in model.graph.initializer}
    activations = any(n.op_type == "QuantizeLinear" and n.input[0] not in inits for n in model.graph.node)
    outputs = {o.name for o in model.graph.output}
    steps = {}
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] in outputs:
            scale = numpy_helper.to_array(inits[n.input[1]])
            if scale.size == 1:
                steps[n.output[0]] = float(scale.reshape(()))
    return {"name": name, "file": f"{name}.onnx", "activations_quantized": activations, "output_steps": steps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    args = ap.parse_args()
    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    logging.disable(logging.WARNING)  # the quantizers' advice to pre-process the model
    os.makedirs(args.out, exist_ok=True)
    manifest = []
    for name, model in variants().items():
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, os.path.join(args.out, f"{name}.onnx"))
        manifest.append(manifest_entry(name, model))
        print(describe(name, model))
    with open(os.path.join(args.out, "variants.json"), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
