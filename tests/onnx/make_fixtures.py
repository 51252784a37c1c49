#!/usr/bin/env python3
"""Write the small ONNX fixtures for memc's importer tests, deterministically.

    .venv/bin/python tests/onnx/make_fixtures.py [--check]

Writes tests/onnx/fixtures/ (valid models), tests/onnx/bad/ (malformed or
invalid models) and tests/onnx/secret.bin (target of bad/external_dotdot.onnx).
Re-running produces byte-identical files (fixed seeds, no timestamps). See
fixtures/README.md and bad/README.md for what each file exercises.

--check additionally runs onnx.checker and onnxruntime on every file and prints
what they say, to confirm the valid fixtures are valid and the bad ones are bad.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")
BAD = os.path.join(HERE, "bad")
IR = 10
PRODUCER = "memc-fixtures"


def model(nodes, inputs, outputs, inits=(), value_info=(), opset=17, extra_opsets=(), name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits), value_info=list(value_info))
    ops = [helper.make_opsetid("", opset), *[helper.make_opsetid(d, v) for d, v in extra_opsets]]
    return helper.make_model(g, opset_imports=ops, ir_version=IR, producer_name=PRODUCER)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def save(m: onnx.ModelProto, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(m.SerializeToString())


def write_bytes(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def rnd(seed, shape):
    """Small float32 values with few significant digits (readable in float_data dumps)."""
    return np.round(np.random.default_rng(seed).standard_normal(shape), 3).astype(np.float32)


# ---------------------------------------------------------------------------------------
# valid fixtures
# ---------------------------------------------------------------------------------------


def mlp_arrays():
    return {
        "fc1.weight": rnd(1, (4, 8)),
        "fc1.bias": rnd(2, (8,)),
        "fc2.weight": rnd(3, (8, 3)),
        "fc2.bias": rnd(4, (3,)),
        "out_shape": np.array([2, 3], dtype=np.int64),
    }


def mlp(inits) -> onnx.ModelProto:
    """x[2,4] -> MatMul+Add -> Relu -> MatMul+Add -> Reshape(out_shape) -> y[2,3]."""
    nodes = [
        helper.make_node("MatMul", ["x", "fc1.weight"], ["h0"], name="fc1/MatMul"),
        helper.make_node("Add", ["h0", "fc1.bias"], ["h1"], name="fc1/Add"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "fc2.weight"], ["h3"], name="fc2/MatMul"),
        helper.make_node("Add", ["h3", "fc2.bias"], ["h4"], name="fc2/Add"),
        helper.make_node("Reshape", ["h4", "out_shape"], ["y"], name="reshape"),
    ]
    return model(nodes, [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 3])], inits, name="mlp")


def mlp_raw():
    return mlp([numpy_helper.from_array(a, n) for n, a in mlp_arrays().items()])


def linear_transb():
    """x[4,64] -> Gemm(transB=1, w[48,64]) -> Relu -> Gemm(transB=1, w2[16,48]) -> y[4,16]: PyTorch's
    Linear as torch.onnx exports it for 2-d inputs (tests/prepack.rs: a transposed constant B of a
    product with few rows)."""
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h0"], name="fc1", transB=1),
        helper.make_node("Relu", ["h0"], ["h1"], name="relu"),
        helper.make_node("Gemm", ["h1", "w2"], ["y"], name="fc2", transB=1),
    ]
    inits = [numpy_helper.from_array(rnd(11, (48, 64)), "w1"), numpy_helper.from_array(rnd(12, (48,)), "b1"),
             numpy_helper.from_array(rnd(13, (16, 48)), "w2")]
    return model(nodes, [vi("x", TensorProto.FLOAT, [4, 64])], [vi("y", TensorProto.FLOAT, [4, 16])], inits,
                 name="linear_transb")


def mlp_typed():
    inits = []
    for n, a in mlp_arrays().items():
        dt = helper.np_dtype_to_tensor_dtype(a.dtype)
        inits.append(helper.make_tensor(n, dt, a.shape, a.reshape(-1).tolist(), raw=False))
    m = mlp(inits)
    assert all(not t.HasField("raw_data") for t in m.graph.initializer)
    return m


def symbolic():
    """x[batch,seq,8] -> MatMul -> Relu -> Add(x) -> y; ReduceSum over seq -> pooled[batch,8]."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "x"], ["y"], name="residual"),
        helper.make_node("ReduceSum", ["y", "axes"], ["pooled"], name="pool", keepdims=0),
    ]
    inits = [numpy_helper.from_array(rnd(5, (8, 8)), "w"), numpy_helper.from_array(np.array([1], np.int64), "axes")]
    value_info = [vi("h", TensorProto.FLOAT, ["batch", "seq", 8]), vi("r", TensorProto.FLOAT, ["batch", "seq", 8])]
    return model(
        nodes,
        [vi("x", TensorProto.FLOAT, ["batch", "seq", 8])],
        [vi("y", TensorProto.FLOAT, ["batch", "seq", 8]), vi("pooled", TensorProto.FLOAT, ["batch", 8])],
        inits,
        value_info,
        name="symbolic",
    )


def shape_subgraph():
    """Run-time shape arithmetic as exporters emit it.

    x[batch,seq,8]:
      Shape -> Gather(0|1) -> Unsqueeze -> Concat(b, s, [2], [4]) -> Reshape(x) -> split[batch,seq,2,4]
      ConstantOfShape(Concat(s, s), value=1.0)                           -> ones[seq,seq]
      Range(0, s, 1) -> Cast(float) -> Expand(Concat(b, s))               -> positions[batch,seq]
    """
    c = lambda n, v: numpy_helper.from_array(np.array(v, dtype=np.int64), n)  # noqa: E731
    inits = [c("zero", 0), c("one", 1), c("axes0", [0]), c("two", [2]), c("four", [4])]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["b0"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["s0"], axis=0),
        helper.make_node("Unsqueeze", ["b0", "axes0"], ["b"]),
        helper.make_node("Unsqueeze", ["s0", "axes0"], ["s"]),
        helper.make_node("Concat", ["b", "s", "two", "four"], ["split_shape"], axis=0),
        helper.make_node("Reshape", ["x", "split_shape"], ["split"]),
        helper.make_node("Concat", ["s", "s"], ["sq_shape"], axis=0),
        helper.make_node(
            "ConstantOfShape", ["sq_shape"], ["ones"], value=helper.make_tensor("value", TensorProto.FLOAT, [1], [1.0])
        ),
        helper.make_node("Range", ["zero", "s0", "one"], ["range"]),
        helper.make_node("Cast", ["range"], ["range_f"], to=TensorProto.FLOAT),
        helper.make_node("Concat", ["b", "s"], ["bs_shape"], axis=0),
        helper.make_node("Expand", ["range_f", "bs_shape"], ["positions"]),
    ]
    for i, n in enumerate(nodes):
        n.name = f"n{i}_{n.op_type}"
    return model(
        nodes,
        [vi("x", TensorProto.FLOAT, ["batch", "seq", 8])],
        [
            vi("split", TensorProto.FLOAT, ["batch", "seq", 2, 4]),
            vi("ones", TensorProto.FLOAT, ["seq", "seq"]),
            vi("positions", TensorProto.FLOAT, ["batch", "seq"]),
        ],
        inits,
        name="shape_subgraph",
    )


def constant_node():
    """Constant nodes: value (tensor), value_float, value_ints. y = Reshape((x + c0) * c1, c2)."""
    nodes = [
        helper.make_node(
            "Constant", [], ["c0"], name="c_tensor",
            value=numpy_helper.from_array(rnd(6, (2, 3)), "c0_value"),
        ),
        helper.make_node("Constant", [], ["c1"], name="c_float", value_float=2.0),
        helper.make_node("Constant", [], ["c2"], name="c_ints", value_ints=[3, 2]),
        helper.make_node("Add", ["x", "c0"], ["a"], name="add"),
        helper.make_node("Mul", ["a", "c1"], ["m"], name="mul"),
        helper.make_node("Reshape", ["m", "c2"], ["y"], name="reshape"),
    ]
    inputs, outputs = [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [3, 2])]
    return model(nodes, inputs, outputs, name="constant_node")


def qdq(symmetric: bool):
    """x[batch,64] @ W[64,32] quantized by MatMulNBitsQuantizer (QDQ, 4 bits, block_size 32)."""
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)

    fp = model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")],
        [vi("x", TensorProto.FLOAT, ["batch", 64])],
        [vi("y", TensorProto.FLOAT, ["batch", 32])],
        [numpy_helper.from_array(rnd(7, (64, 32)), "w")],
        opset=21,
        name="qdq_int4" if symmetric else "qdq_uint4",
    )
    q = MatMulNBitsQuantizer(fp, bits=4, block_size=32, is_symmetric=symmetric, quant_format=QuantFormat.QDQ)
    q.process()
    m = q.model.model
    dq = [n for n in m.graph.node if n.op_type == "DequantizeLinear"]
    want = TensorProto.INT4 if symmetric else TensorProto.UINT4
    inits = {t.name: t for t in m.graph.initializer}
    assert len(dq) == 1 and inits[dq[0].input[0]].data_type == want
    assert any(a.name == "block_size" and a.i == 32 for a in dq[0].attribute)
    return m


def sub_byte(dirpath: str):
    """Sub-byte weights and values, with one data set computed by onnx's reference evaluator.

    int4 and uint2 initializers (odd counts, so the packing pads) read by Cast, a 4-bit
    DequantizeLinear of a weight with a weight zero point (read packed, in place) and one with a
    uint2 graph-input zero point (read element by element), and an int4 graph output.
    """
    from onnx.reference import ReferenceEvaluator

    def packed(name, data_type, values):
        t = helper.make_tensor(name, data_type, [len(values)], values)
        return t

    nodes = [
        helper.make_node("Cast", ["w4"], ["w4_f"], name="cast_w4", to=TensorProto.FLOAT),
        helper.make_node("Cast", ["w2"], ["w2_f"], name="cast_w2", to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "w2_f"], ["y_add"], name="add"),
        helper.make_node("DequantizeLinear", ["w4", "scale", "zp4"], ["y_dq_weight"], name="dq_weight"),
        helper.make_node("DequantizeLinear", ["w2", "scale", "zp2"], ["y_dq_input"], name="dq_input"),
        helper.make_node("Cast", ["x"], ["y_int4"], name="to_int4", to=TensorProto.INT4),
    ]
    inits = [
        packed("w4", TensorProto.INT4, [-8, -1, 0, 3, 7]),
        packed("w2", TensorProto.UINT2, [0, 1, 2, 3, 3]),
        helper.make_tensor("zp4", TensorProto.INT4, [], [1]),
        numpy_helper.from_array(np.array(2.0, dtype=np.float32), "scale"),
    ]
    m = model(
        nodes,
        [vi("x", TensorProto.FLOAT, [5]), vi("zp2", TensorProto.UINT2, [])],
        [
            vi("w4_f", TensorProto.FLOAT, [5]),
            vi("y_add", TensorProto.FLOAT, [5]),
            vi("y_dq_weight", TensorProto.FLOAT, [5]),
            vi("y_dq_input", TensorProto.FLOAT, [5]),
            vi("y_int4", TensorProto.INT4, [5]),
        ],
        inits,
        opset=25,
        name="sub_byte",
    )
    x = np.array([-9.5, -1.25, 0.75, 7.5, 15.0], dtype=np.float32)
    zp2 = np.array(1, dtype=onnx.helper.tensor_dtype_to_np_dtype(TensorProto.UINT2))
    outputs = ReferenceEvaluator(m).run(None, {"x": x, "zp2": zp2})
    data = os.path.join(dirpath, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    for i, (name, value) in enumerate([("x", x), ("zp2", zp2)]):
        save_tensor(numpy_helper.from_array(value, name), os.path.join(data, f"input_{i}.pb"))
    for i, (out, value) in enumerate(zip(m.graph.output, outputs)):
        save_tensor(numpy_helper.from_array(value, out.name), os.path.join(data, f"output_{i}.pb"))
    return m


def save_tensor(t: onnx.TensorProto, path: str) -> None:
    write_bytes(path, t.SerializeToString())


def external(dirpath: str):
    """MLP whose four float initializers live in weights.bin at offsets 0, 128, 160, 256.

    Written with onnx's own external-data writer (set_external_data + save_external_data,
    i.e. what onnx.save(save_as_external_data=True, size_threshold=0) does). The int64
    out_shape stays inline (raw_data), so the file mixes inline and external tensors.
    """
    m = mlp_raw()
    data = os.path.join(dirpath, "weights.bin")
    os.makedirs(dirpath, exist_ok=True)
    if os.path.exists(data):
        os.remove(data)
    for t in m.graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            external_data_helper.set_external_data(t, "weights.bin")
            external_data_helper.save_external_data(t, dirpath)
            t.ClearField("raw_data")
    os.chmod(data, 0o644)
    m.graph.name = "external"
    return m


def subgraph_if():
    """If(cond): then y = x + c (c an initializer of the then-branch), else y = x * x.

    Both branches read `x` from the outer scope.
    """
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "then_c"], ["then_y"], name="then_add")],
        "then_branch",
        [],
        [vi("then_y", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(rnd(8, (2, 3)), "then_c")],
    )
    else_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["else_y"], name="else_mul")],
        "else_branch",
        [],
        [vi("else_y", TensorProto.FLOAT, [2, 3])],
    )
    nodes = [helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    return model(
        nodes,
        [vi("cond", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2, 3])],
        [vi("y", TensorProto.FLOAT, [2, 3])],
        name="subgraph_if",
    )


def if_known_condition():
    """Two Ifs whose conditions are known at import, as in exporters' rank dispatch (ONNX's
    AffineGrid function): `Equal(Size(x), 4)` is false for x [2, 3], and the untaken
    then-branch splits x's 3 columns into 4 parts, which no shape inference accepts; the
    second If's condition is a bool initializer (true). Only the taken branches are imported,
    in place of the Ifs.
    """
    four = numpy_helper.from_array(np.array(4, dtype=np.int64), "four")
    yes = numpy_helper.from_array(np.array(True), "yes")
    split_g = helper.make_graph(
        [helper.make_node("Split", ["x"], ["s0", "s1", "s2", "s3"], axis=1, num_outputs=4)],
        "then_branch",
        [],
        [vi("s0", TensorProto.FLOAT, None)],
    )
    square_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["square"], name="square")],
        "else_branch",
        [],
        [vi("square", TensorProto.FLOAT, [2, 3])],
    )
    add_g = helper.make_graph(
        [helper.make_node("Add", ["y", "x"], ["sum"], name="add")],
        "then_branch",
        [],
        [vi("sum", TensorProto.FLOAT, [2, 3])],
    )
    missing_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["negated"], name="neg")],
        "else_branch",
        [],
        [vi("negated", TensorProto.FLOAT, [2, 3])],
    )
    nodes = [
        helper.make_node("Size", ["x"], ["n"], name="size"),
        helper.make_node("Equal", ["n", "four"], ["is_four"], name="equal"),
        helper.make_node("If", ["is_four"], ["y"], name="by_size", then_branch=split_g, else_branch=square_g),
        helper.make_node("If", ["yes"], ["z"], name="by_initializer", then_branch=add_g, else_branch=missing_g),
    ]
    return model(
        nodes,
        [vi("x", TensorProto.FLOAT, [2, 3])],
        [vi("z", TensorProto.FLOAT, [2, 3])],
        inits=[four, yes],
        opset=18,
        name="if_known_condition",
    )


def optional_inputs():
    """Optional inputs left out before given ones (empty input names), as exporters write them:
    Clip(x, "", max), Resize(x, "", scales), Resize(x, "", "", sizes), Pad(x, pads, "", axes),
    Slice(x, starts, ends, "", steps)."""
    i64 = lambda name, values: numpy_helper.from_array(np.array(values, dtype=np.int64), name)
    f32 = lambda name, values: numpy_helper.from_array(np.array(values, dtype=np.float32), name)
    nodes = [
        helper.make_node("Clip", ["x", "", "clip_max"], ["clipped"], name="clip"),
        helper.make_node("Resize", ["clipped", "", "scales"], ["up_scales"], name="resize_scales", mode="nearest"),
        helper.make_node("Resize", ["clipped", "", "", "sizes"], ["up_sizes"], name="resize_sizes", mode="linear"),
        helper.make_node("Pad", ["x", "pads", "", "pad_axes"], ["padded"], name="pad"),
        helper.make_node("Slice", ["x", "starts", "ends", "", "steps"], ["sliced"], name="slice"),
    ]
    inits = [
        f32("clip_max", 0.5),
        f32("scales", [1, 1, 2, 2]),
        i64("sizes", [1, 2, 8, 6]),
        i64("pads", [1, 2]),
        i64("pad_axes", [3]),
        i64("starts", [0, 0, 0, 0]),
        i64("ends", [1, 2, 4, 3]),
        i64("steps", [1, 1, 2, 1]),
    ]
    return model(
        nodes,
        [vi("x", TensorProto.FLOAT, [1, 2, 4, 3])],
        [
            vi("up_scales", TensorProto.FLOAT, None),
            vi("up_sizes", TensorProto.FLOAT, None),
            vi("padded", TensorProto.FLOAT, None),
            vi("sliced", TensorProto.FLOAT, None),
        ],
        inits=inits,
        opset=18,
        name="optional_inputs",
    )


def unsupported_ops():
    """2x NonMaxSuppression, 1x Det, 1x com.example.Foo (custom domain), plus a supported Relu."""
    nodes = [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou_a"], ["sel_a"], name="nms_a"),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou_b"], ["sel_b"], name="nms_b",
                         center_point_box=1),
        helper.make_node("Det", ["m"], ["det"], name="det"),
        helper.make_node("Foo", ["det"], ["foo"], name="foo", domain="com.example", alpha=0.5),
        helper.make_node("Relu", ["foo"], ["out"], name="relu"),
    ]
    inits = [
        numpy_helper.from_array(np.array([5], np.int64), "max_out"),
        numpy_helper.from_array(np.array([0.5], np.float32), "iou_a"),
        numpy_helper.from_array(np.array([0.7], np.float32), "iou_b"),
    ]
    return model(
        nodes,
        [
            vi("boxes", TensorProto.FLOAT, [1, 6, 4]),
            vi("scores", TensorProto.FLOAT, [1, 1, 6]),
            vi("m", TensorProto.FLOAT, [2, 3, 3]),
        ],
        [
            vi("sel_a", TensorProto.INT64, [None, 3]),
            vi("sel_b", TensorProto.INT64, [None, 3]),
            vi("out", TensorProto.FLOAT, [2]),
        ],
        inits,
        extra_opsets=[("com.example", 1)],
        name="unsupported_ops",
    )


# ---------------------------------------------------------------------------------------
# bad fixtures
# ---------------------------------------------------------------------------------------


def simple(nodes, inputs=None, outputs=None, inits=(), name="bad"):
    inputs = inputs if inputs is not None else [vi("x", TensorProto.FLOAT, [2, 2])]
    outputs = outputs if outputs is not None else [vi("y", TensorProto.FLOAT, [2, 2])]
    return model(nodes, inputs, outputs, inits, name=name)


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def wrong_field_type() -> bytes:
    """ModelProto with ir_version=10, opset_import {"" 17}, then field 7 (graph) as a VARINT."""
    opset = b"\x10" + varint(17)  # OperatorSetIdProto.version = 17 (domain "" omitted)
    return (
        b"\x08" + varint(IR)  # field 1 ir_version, varint
        + b"\x42" + varint(len(opset)) + opset  # field 8 opset_import, length-delimited
        + b"\x38" + varint(1)  # field 7 graph, wire type 0 (varint) instead of 2
    )


def random_bytes() -> bytes:
    data = np.random.default_rng(1234).bytes(256)
    try:
        onnx.ModelProto.FromString(data)
    except Exception:  # noqa: BLE001
        return data
    raise AssertionError("random bytes parsed as a ModelProto; pick another seed")


def ext_tensor(name, shape, location, offset, length):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def ext_model(location, offset=0, n=2, name="bad_external"):
    """y = x + w, w[n,n] float stored externally at `location` (length = n*n*4, consistent)."""
    shape = [n, n]
    return simple(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        inputs=[vi("x", TensorProto.FLOAT, shape)],
        outputs=[vi("y", TensorProto.FLOAT, shape)],
        inits=[ext_tensor("w", shape, location, offset, n * n * 4)],
        name=name,
    )


def write_bad():
    os.makedirs(BAD, exist_ok=True)
    good = mlp_raw().SerializeToString()
    write_bytes(os.path.join(BAD, "truncated.onnx"), good[: len(good) // 2])
    write_bytes(os.path.join(BAD, "random_bytes.onnx"), random_bytes())
    write_bytes(os.path.join(BAD, "wrong_field_type.onnx"), wrong_field_type())

    save(simple([helper.make_node("Add", ["x", "bias"], ["y"], name="add")], name="missing_initializer"),
         os.path.join(BAD, "missing_initializer.onnx"))
    save(simple([helper.make_node("Relu", ["t"], ["y"], name="relu_first"),
                 helper.make_node("Neg", ["x"], ["t"], name="neg_second")], name="use_before_def"),
         os.path.join(BAD, "use_before_def.onnx"))
    save(simple([helper.make_node("Add", ["x", "b"], ["a"], name="add_a"),
                 helper.make_node("Relu", ["a"], ["b"], name="relu_b")],
                outputs=[vi("a", TensorProto.FLOAT, [2, 2])], name="cycle"),
         os.path.join(BAD, "cycle.onnx"))
    save(simple([helper.make_node("Relu", ["x"], ["y"], name="relu"),
                 helper.make_node("Neg", ["x"], ["y"], name="neg")], name="duplicate_names"),
         os.path.join(BAD, "duplicate_names.onnx"))
    save(simple([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                inputs=[vi("x", TensorProto.FLOAT, [-3, 4])], outputs=[vi("y", TensorProto.FLOAT, [-3, 4])],
                name="negative_dim"),
         os.path.join(BAD, "negative_dim.onnx"))
    big = [4294967296, 4294967296, 16]
    save(simple([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                inputs=[vi("x", TensorProto.FLOAT, big)], outputs=[vi("y", TensorProto.FLOAT, big)],
                name="dim_overflow"),
         os.path.join(BAD, "dim_overflow.onnx"))
    save(simple([helper.make_node("Identity", ["x"], ["y"], name="identity")],
                inputs=[vi("x", 99, [2, 2])], outputs=[vi("y", 99, [2, 2])], name="unknown_elem_type"),
         os.path.join(BAD, "unknown_elem_type.onnx"))
    # Cast to a type memc has no tensors of (strings): the node and its `to` are named.
    save(simple([helper.make_node("Cast", ["x"], ["s"], name="to_string", to=TensorProto.STRING),
                 helper.make_node("Cast", ["s"], ["y"], name="from_string", to=TensorProto.FLOAT)],
                name="cast_to_string"),
         os.path.join(BAD, "cast_to_string.onnx"))

    save(ext_model("/etc/passwd", name="external_absolute"), os.path.join(BAD, "external_absolute.onnx"))
    save(ext_model("../secret.bin", name="external_dotdot"), os.path.join(BAD, "external_dotdot.onnx"))
    write_bytes(os.path.join(HERE, "secret.bin"), b"memc-test-secret")  # 16 bytes; must never be read

    d = os.path.join(BAD, "external_symlink")
    save(ext_model("link.bin", name="external_symlink"), os.path.join(d, "model.onnx"))
    link = os.path.join(d, "link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("../random_bytes.onnx", link)  # 256 bytes, so offset/length are in range

    d = os.path.join(BAD, "external_beyond_eof")
    save(ext_model("weights.bin", offset=8, n=4, name="external_beyond_eof"), os.path.join(d, "model.onnx"))
    write_bytes(os.path.join(d, "weights.bin"), np.arange(4, dtype=np.float32).tobytes())  # 16 bytes

    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 4], raw_data=b"\x00" * 10)  # needs 64
    save(simple([helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")],
                inputs=[vi("x", TensorProto.FLOAT, [2, 4])], outputs=[vi("y", TensorProto.FLOAT, [2, 4])],
                inits=[w], name="raw_data_size_mismatch"),
         os.path.join(BAD, "raw_data_size_mismatch.onnx"))
    write_bounded_operand()
    write_bad_training()
    write_bad_opsets()
    write_bad_loops()


def write_bounded_operand():
    """NonZero's output, whose extent is known only at run time, read by a Transpose: memc
    plans such values only as graph outputs."""
    save(simple([helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
                 helper.make_node("Transpose", ["nz"], ["y"], name="transpose")],
                outputs=[vi("y", TensorProto.INT64, [None, 2])], name="bounded_operand"),
         os.path.join(BAD, "bounded_operand.onnx"))


def write_bad_opsets():
    """Older-opset forms memc cannot read, each named with its node."""
    x4 = [vi("x", TensorProto.FLOAT, [1, 1, 4, 4])]
    # Add of opset 6 broadcast with `broadcast`/`axis` attributes; memc reads Add from opset 7.
    save(model([helper.make_node("Add", ["x", "b"], ["y"], name="add_old", broadcast=1, axis=0)],
               [vi("x", TensorProto.FLOAT, [2, 2])], [vi("y", TensorProto.FLOAT, [2, 2])],
               [numpy_helper.from_array(np.ones([2], np.float32), "b")], opset=6, name="opset6_broadcast"),
         os.path.join(BAD, "opset6_broadcast.onnx"))
    # BatchNormalization of opset 9 asking for its saved statistics (dropped in opset 14).
    bn_inits = [numpy_helper.from_array(np.ones([2], np.float32), n) for n in ["s", "b", "m", "v"]]
    save(model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv", "sm", "sv"],
                                 name="bn_train")],
               [vi("x", TensorProto.FLOAT, [2, 2])],
               [vi("y", TensorProto.FLOAT, [2, 2]), *[vi(n, TensorProto.FLOAT, [2]) for n in ["rm", "rv", "sm", "sv"]]],
               bn_inits, opset=9, name="batchnorm_saved_stats"),
         os.path.join(BAD, "batchnorm_saved_stats.onnx"))
    # Resize of opset 10 that up-samples one axis and down-samples another (nearest pixels
    # round down on one, up on the other).
    save(model([helper.make_node("Resize", ["x", "scales"], ["y"], name="resize_mixed")], x4,
               [vi("y", TensorProto.FLOAT, [1, 1, 8, 2])],
               [numpy_helper.from_array(np.array([1, 1, 2, 0.5], np.float32), "scales")], opset=10,
               name="resize10_mixed_scales"),
         os.path.join(BAD, "resize10_mixed_scales.onnx"))
    # Upsample in opset 10, which removed it.
    save(model([helper.make_node("Upsample", ["x", "scales"], ["y"], name="upsample10")], x4,
               [vi("y", TensorProto.FLOAT, [1, 1, 8, 8])],
               [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")], opset=10,
               name="upsample_opset10"),
         os.path.join(BAD, "upsample_opset10.onnx"))
    # Softmax of opset 11 with an axis beyond the input's rank: found while the node is built.
    save(model([helper.make_node("Softmax", ["x"], ["y"], name="softmax_axis3", axis=3)],
               [vi("x", TensorProto.FLOAT, [2, 2])], [vi("y", TensorProto.FLOAT, [2, 2])], opset=11,
               name="softmax_axis_out_of_range"),
         os.path.join(BAD, "softmax_axis_out_of_range.onnx"))
    # An optimizer of ai.onnx.preview.training, in a model that imports no default domain.
    g = helper.make_graph(
        [helper.make_node("Adagrad", ["r", "t", "x", "g", "h"], ["x_new", "h_new"], name="adagrad",
                          domain="ai.onnx.preview.training")],
        "preview_training",
        [vi("r", TensorProto.FLOAT, []), vi("t", TensorProto.INT64, []), vi("x", TensorProto.FLOAT, [2]),
         vi("g", TensorProto.FLOAT, [2]), vi("h", TensorProto.FLOAT, [2])],
        [vi("x_new", TensorProto.FLOAT, [2]), vi("h_new", TensorProto.FLOAT, [2])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("ai.onnx.preview.training", 1)], ir_version=IR,
                           producer_name=PRODUCER),
         os.path.join(BAD, "preview_training.onnx"))


def accumulator_model(nodes, value_shape, name):
    """A one-step training graph: W_grad = Gemm(x, x, transA) accumulated into a buffer."""
    inputs = [vi("x", TensorProto.FLOAT, [2, 4]), vi("W_grad.accumulation.buffer", TensorProto.FLOAT, [4, 4]),
              vi("lazy_reset_grad", TensorProto.BOOL, [1])]
    outputs = [vi("flag", TensorProto.BOOL, [1])]
    m = model(nodes, inputs, outputs, extra_opsets=[("com.microsoft", 1)], name=name)
    return m


def write_bad_training():
    grad = helper.make_node("Gemm", ["x", "x"], ["W_grad"], transA=1, name="grad")
    acc = lambda buf, value: helper.make_node(  # noqa: E731
        "InPlaceAccumulatorV2", [buf, value, "lazy_reset_grad"], ["flag"], domain="com.microsoft",
        name="GradientAccumulator")
    # The accumulation buffer is computed by an op instead of being a graph input.
    save(accumulator_model([grad, helper.make_node("Neg", ["W_grad.accumulation.buffer"], ["buf"], name="neg"),
                            acc("buf", "W_grad")], [4, 4], "training_buffer_computed"),
         os.path.join(BAD, "training_buffer_computed.onnx"))
    # The gradient's shape is not the buffer's.
    save(accumulator_model([helper.make_node("Gemm", ["x", "x"], ["W_grad"], transB=1, name="grad"),
                            acc("W_grad.accumulation.buffer", "W_grad")], [2, 2], "training_wrong_accumulator_type"),
         os.path.join(BAD, "training_wrong_accumulator_type.onnx"))
    # Another op reads the gradient buffer, which the accumulator updates in place.
    m = accumulator_model([grad, helper.make_node("Add", ["W_grad", "W_grad.accumulation.buffer"], ["g2"], name="peek"),
                           acc("W_grad.accumulation.buffer", "g2")], [4, 4], "training_buffer_read_twice")
    save(m, os.path.join(BAD, "training_buffer_read_twice.onnx"))


def legacy_opset9():
    """Opset 9 forms memc normalizes at import: Upsample (scales input) -> Slice (attributes)
    -> Softmax (2-D coercion at the default axis 1)."""
    nodes = [
        helper.make_node("Upsample", ["x", "scales"], ["up"], name="upsample"),
        helper.make_node("Slice", ["up"], ["cut"], name="slice", starts=[1], ends=[7], axes=[3]),
        helper.make_node("Softmax", ["cut"], ["y"], name="softmax"),
    ]
    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    return model(nodes, [vi("x", TensorProto.FLOAT, [1, 2, 2, 4])], [vi("y", TensorProto.FLOAT, [1, 2, 4, 6])],
                 inits, opset=9, name="legacy_opset9")


# ---------------------------------------------------------------------------------------
# Loop and Scan (unrolled at import)
# ---------------------------------------------------------------------------------------


def loop_body(cond_out_node=None):
    """A Loop body: y_out = y_in + x (x from the outer scope), scan_out = y_out * iter_num.

    `cond_out_node`, when given, computes `cond_out`; otherwise it passes `cond_in` through.
    """
    nodes = [
        helper.make_node("Add", ["y_in", "x"], ["y_out"], name="body_add"),
        helper.make_node("Cast", ["iter_num"], ["iter_f"], name="body_cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["y_out", "iter_f"], ["scan_out"], name="body_mul"),
        cond_out_node or helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
    ]
    return helper.make_graph(
        nodes,
        "loop_body",
        [vi("iter_num", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
         vi("y_in", TensorProto.FLOAT, [2])],
        [vi("cond_out", TensorProto.BOOL, []), vi("y_out", TensorProto.FLOAT, [2]),
         vi("scan_out", TensorProto.FLOAT, [2])],
    )


def loop_model(m_input, inits, inputs, name, cond_out_node=None):
    nodes = [helper.make_node("Loop", [m_input, "cond", "y0"], ["y", "scans"], name="loop",
                              body=loop_body(cond_out_node))]
    inits = list(inits) + [
        numpy_helper.from_array(np.array(True), "cond"),
        numpy_helper.from_array(np.zeros(2, np.float32), "y0"),
    ]
    return model(
        nodes,
        [vi("x", TensorProto.FLOAT, [2])] + inputs,
        [vi("y", TensorProto.FLOAT, [2]), vi("scans", TensorProto.FLOAT, [None, 2])],
        inits,
        name=name,
    )


def loop_unrolled():
    """Loop with trip count 3 (an initializer): unrolled into three copies of its body."""
    return loop_model("trip_count", [numpy_helper.from_array(np.array(3, np.int64), "trip_count")], [],
                      "loop_unrolled")


def scan_unrolled():
    """Scan (opset 17) over x[3, 2] along axis 0 in reverse, a running sum as its state."""
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "x_t"], ["sum_out"], name="body_add"),
         helper.make_node("Identity", ["sum_out"], ["scan_out"], name="body_id")],
        "scan_body",
        [vi("sum_in", TensorProto.FLOAT, [2]), vi("x_t", TensorProto.FLOAT, [2])],
        [vi("sum_out", TensorProto.FLOAT, [2]), vi("scan_out", TensorProto.FLOAT, [2])],
    )
    nodes = [helper.make_node("Scan", ["s0", "x"], ["s", "sums"], name="scan", body=body,
                              num_scan_inputs=1, scan_input_directions=[1], scan_output_axes=[1])]
    return model(
        nodes,
        [vi("s0", TensorProto.FLOAT, [2]), vi("x", TensorProto.FLOAT, [3, 2])],
        [vi("s", TensorProto.FLOAT, [2]), vi("sums", TensorProto.FLOAT, [2, 3])],
        name="scan_unrolled",
    )


def write_bad_loops():
    """Loops memc cannot unroll, each named with its node."""
    save(loop_model("trip_count", [], [vi("trip_count", TensorProto.INT64, [])], "loop_unknown_trip_count"),
         os.path.join(BAD, "loop_unknown_trip_count.onnx"))
    data_cond = helper.make_node("Greater", ["limit", "y_out"], ["cond_out"], name="body_cond")
    m = loop_model("trip_count", [numpy_helper.from_array(np.array(3, np.int64), "trip_count")],
                   [vi("limit", TensorProto.FLOAT, [2])], "loop_data_dependent_condition", data_cond)
    save(m, os.path.join(BAD, "loop_data_dependent_condition.onnx"))
    big = numpy_helper.from_array(np.array(1 << 40, np.int64), "trip_count")
    save(loop_model("trip_count", [big], [], "loop_too_large"), os.path.join(BAD, "loop_too_large.onnx"))
    zero = numpy_helper.from_array(np.array(0, np.int64), "trip_count")
    save(loop_model("trip_count", [zero], [], "loop_no_iteration_with_scan_outputs"),
         os.path.join(BAD, "loop_no_iteration_with_scan_outputs.onnx"))
    endless = loop_model("", [], [], "loop_without_end")
    endless.graph.node[0].input[1] = ""
    save(endless, os.path.join(BAD, "loop_without_end.onnx"))
    # Nested: 1000 outer iterations of a body whose inner Loop runs 1000 iterations of its own.
    m = numpy_helper.from_array(np.array(1000, np.int64), "m")
    inner_body = helper.make_graph(
        [helper.make_node("Add", ["in_y", "x"], ["in_y_out"], name="inner_add"),
         helper.make_node("Identity", ["in_y_out"], ["in_scan"], name="inner_scan"),
         helper.make_node("Identity", ["in_cond"], ["in_cond_out"], name="inner_cond")],
        "inner_body",
        [vi("in_i", TensorProto.INT64, []), vi("in_cond", TensorProto.BOOL, []),
         vi("in_y", TensorProto.FLOAT, [2])],
        [vi("in_cond_out", TensorProto.BOOL, []), vi("in_y_out", TensorProto.FLOAT, [2]),
         vi("in_scan", TensorProto.FLOAT, [2])],
    )
    outer_body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="outer_cond"),
         helper.make_node("Loop", ["m", "cond_in", "y_in"], ["y_out", "inner_scans"], name="inner",
                          body=inner_body),
         helper.make_node("Identity", ["y_out"], ["scan_out"], name="outer_scan")],
        "outer_body",
        [vi("iter_num", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
         vi("y_in", TensorProto.FLOAT, [2])],
        [vi("cond_out", TensorProto.BOOL, []), vi("y_out", TensorProto.FLOAT, [2]),
         vi("scan_out", TensorProto.FLOAT, [2])],
    )
    nested = loop_model("m", [m], [], "loop_nested_too_large")
    nested.graph.node[0].attribute[0].g.CopyFrom(outer_body)
    save(nested, os.path.join(BAD, "loop_nested_too_large.onnx"))
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "x_t"], ["sum_out"], name="body_add")],
        "scan_body",
        [vi("sum_in", TensorProto.FLOAT, [2]), vi("x_t", TensorProto.FLOAT, [2])],
        [vi("sum_out", TensorProto.FLOAT, [2])],
    )
    nodes = [helper.make_node("Scan", ["s0", "x"], ["s"], name="scan", body=body, num_scan_inputs=1)]
    save(model(nodes, [vi("s0", TensorProto.FLOAT, [2]), vi("x", TensorProto.FLOAT, ["seq", 2])],
               [vi("s", TensorProto.FLOAT, [2])], name="scan_unknown_length"),
         os.path.join(BAD, "scan_unknown_length.onnx"))


def winograd_convs():
    """3x3 stride-1 convolutions the CPU runs as Winograd F(2x2, 3x3) (tests/prepack.rs): odd
    extents (a last tile half outside), a residual and a ReLU fused, two groups (of 32 channels:
    grouped layers run as Winograd from 32 per group), asymmetric and zero pads, a batch of 2.
    Weights scaled by 1/sqrt(fan-in), so sums keep the size of their inputs."""
    w1, b1 = rnd(81, [64, 64, 3, 3]) / 24, rnd(82, [64])
    w2, b2 = rnd(83, [64, 32, 3, 3]) / 17, rnd(84, [64])
    w3 = rnd(85, [12, 64, 3, 3]) / 24
    inits = [numpy_helper.from_array(a, n) for a, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"), (w3, "w3")]]
    reps = numpy_helper.from_array(np.array([1, 4, 4, 4], dtype=np.int64), "reps")
    inits.append(reps)
    nodes = [
        # A peak before the convolutions (x tiled to 2x256x36x44, 3.1 MiB, then its maximum):
        # the Winograd scratch fits below it, which memc requires.
        helper.make_node("Tile", ["x", "reps"], ["tiled"], name="tile"),
        helper.make_node("ReduceMax", ["tiled"], ["peak"], name="peak", keepdims=1),
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="same", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c1", "x"], ["r1"], name="residual"),
        helper.make_node("Relu", ["r1"], ["a1"], name="relu"),
        helper.make_node("Conv", ["a1", "w2", "b2"], ["c2"], name="grouped", group=2, pads=[0, 1, 2, 1]),
        helper.make_node("Conv", ["c2", "w3"], ["c3"], name="valid"),
        helper.make_node("Add", ["c3", "peak"], ["y"], name="plus_peak"),
    ]
    return model(nodes, [vi("x", TensorProto.FLOAT, [2, 64, 9, 11])], [vi("y", TensorProto.FLOAT, [2, 12, 7, 9])],
                 inits, name="winograd_convs")


def winograd_free_bytes():
    """A ResNet-style stem and basic block (tests/prepack.rs): the peak is the stem's output and
    its ReLU (the model's bound counts both, 256 KiB; the arena holds the ReLU in place, 176
    KiB), so the block's 3x3 convolutions have less room in the placed arena than the bound
    says. Their Winograd scratch must go into the bytes the placed arena leaves free."""
    ws = rnd(91, [32, 3, 7, 7]) * 0.1
    w1, b1 = rnd(92, [32, 32, 3, 3]) * 0.1, rnd(93, [32])
    w2, b2 = rnd(94, [32, 32, 3, 3]) * 0.1, rnd(95, [32])
    inits = [numpy_helper.from_array(a.astype(np.float32), n)
             for a, n in [(ws, "ws"), (w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]]
    nodes = [
        helper.make_node("Conv", ["x", "ws"], ["s"], name="stem", strides=[2, 2], pads=[3, 3, 3, 3]),
        helper.make_node("Relu", ["s"], ["sr"], name="stem_relu"),
        helper.make_node("MaxPool", ["sr"], ["p"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["a1"], name="relu1"),
        helper.make_node("Conv", ["a1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "p"], ["r"], name="residual"),
        helper.make_node("Relu", ["r"], ["y"], name="relu2"),
    ]
    return model(nodes, [vi("x", TensorProto.FLOAT, [1, 3, 64, 64])], [vi("y", TensorProto.FLOAT, [1, 32, 16, 16])],
                 inits, name="winograd_free_bytes")


def strided_shortcut():
    """A wide 1x1 expansion (the model's peak) before a ResNet-style downsampling shortcut, a
    1x1 stride-2 convolution with 64 output channels over an odd 23x23 input, beside a 3x3/2
    branch (tests/prepack.rs): with room for its GEMM panels at its step, the shortcut runs
    through the GEMM (its panels packed straight from the input) instead of the direct kernel."""
    w0, b0 = rnd(101, [192, 32, 1, 1]) * 0.2, rnd(102, [192])
    w1, b1 = rnd(103, [96, 192, 1, 1]) * 0.1, rnd(104, [96])
    ws, bs = rnd(105, [64, 96, 1, 1]) * 0.1, rnd(106, [64])
    wt = rnd(107, [64, 96, 3, 3]) * 0.05
    inits = [numpy_helper.from_array(a.astype(np.float32), n)
             for a, n in [(w0, "w0"), (b0, "b0"), (w1, "w1"), (b1, "b1"), (ws, "ws"), (bs, "bs"),
                          (wt, "wt")]]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["e"], name="expand"),
        helper.make_node("Relu", ["e"], ["er"], name="expand_relu"),
        helper.make_node("Conv", ["er", "w1", "b1"], ["c"], name="project"),
        helper.make_node("Relu", ["c"], ["cr"], name="project_relu"),
        helper.make_node("Conv", ["cr", "wt"], ["t"], name="branch", strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["cr", "ws", "bs"], ["s"], name="shortcut", strides=[2, 2]),
        helper.make_node("Add", ["t", "s"], ["r"], name="residual"),
        helper.make_node("Relu", ["r"], ["y"], name="out_relu"),
    ]
    return model(nodes, [vi("x", TensorProto.FLOAT, [1, 32, 23, 23])], [vi("y", TensorProto.FLOAT, [1, 64, 12, 12])],
                 inits, name="strided_shortcut")


def write_valid():
    os.makedirs(FIX, exist_ok=True)
    for name, fn in [
        ("mlp_raw", mlp_raw),
        ("mlp_typed", mlp_typed),
        ("linear_transb", linear_transb),
        ("symbolic", symbolic),
        ("shape_subgraph", shape_subgraph),
        ("constant_node", constant_node),
        ("qdq_int4", lambda: qdq(True)),
        ("qdq_uint4", lambda: qdq(False)),
        ("subgraph_if", subgraph_if),
        ("if_known_condition", if_known_condition),
        ("optional_inputs", optional_inputs),
        ("unsupported_ops", unsupported_ops),
        ("legacy_opset9", legacy_opset9),
        ("loop_unrolled", loop_unrolled),
        ("scan_unrolled", scan_unrolled),
        ("winograd_convs", winograd_convs),
        ("winograd_free_bytes", winograd_free_bytes),
        ("strided_shortcut", strided_shortcut),
    ]:
        save(fn(), os.path.join(FIX, f"{name}.onnx"))
    save(external(os.path.join(FIX, "external")), os.path.join(FIX, "external", "model.onnx"))
    save(sub_byte(os.path.join(FIX, "sub_byte")), os.path.join(FIX, "sub_byte", "model.onnx"))


# ---------------------------------------------------------------------------------------
# --check
# ---------------------------------------------------------------------------------------

FEEDS = {
    "x": lambda shape: np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape),
    "cond": lambda shape: np.array(True),
}


def check():
    import onnxruntime as ort

    ort.set_default_logger_severity(4)

    files = []
    for root, dirs, names in os.walk(HERE):
        dirs.sort()
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".onnx")]
    ok = True
    for path in files:
        rel = os.path.relpath(path, HERE)
        if rel.startswith("opsets"):
            continue  # make_opset_cases.py checks those against onnxruntime itself
        valid = rel.startswith("fixtures")
        try:
            onnx.checker.check_model(path, full_check=not rel.endswith("unsupported_ops.onnx"))
            chk = "checker ok"
        except Exception as e:  # noqa: BLE001
            chk = "checker: " + str(e).strip().splitlines()[0][:110]
        try:
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            feeds = {}
            for i in sess.get_inputs():
                shape = [d if isinstance(d, int) else 2 for d in i.shape]
                feeds[i.name] = FEEDS.get(i.name, FEEDS["x"])(shape)
            outs = sess.run(None, feeds)
            finite = all(np.all(np.isfinite(o)) for o in outs if np.issubdtype(o.dtype, np.floating))
            run = "ort ok" if finite else "ort: non-finite output"
        except Exception as e:  # noqa: BLE001
            run = "ort: " + str(e).strip().splitlines()[0][:110]
        if valid:
            expect_run = "ort: " if rel.endswith("unsupported_ops.onnx") else "ort ok"
            good = chk == "checker ok" and run.startswith(expect_run)
            tag = "ok " if good else "BAD"
            ok &= good
        else:
            tag = "-- "  # informational: what onnx / onnxruntime make of a bad file
        print(f"{tag} {rel:<38} {chk} | {run}")
    total = sum(os.path.getsize(p) for p in files)
    print(f"total .onnx bytes: {total}")
    if not ok:
        sys.exit("unexpected checker/onnxruntime result")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="run onnx.checker and onnxruntime on every file")
    args = ap.parse_args()
    write_valid()
    write_bad()
    if args.check:
        check()


if __name__ == "__main__":
    main()
