#!/usr/bin/env python3
"""Write memc's older-opset cases: each an old-opset model and its opset-13+ twin, same data.

    .venv/bin/python tests/onnx/make_opset_cases.py

Writes tests/onnx/opsets/<case>/old/ and .../new/, each a node-test directory (model.onnx,
test_data_set_0/input_*.pb and output_*.pb). `old` uses a form that changed before opset 13
(an attribute that became an input, Softmax's 2-D coercion, Resize of opset 10, ...), `new`
computes the same thing in the form memc's op table declares. The expected outputs are
onnxruntime's on the old model, and the script checks that onnxruntime gives the same on the
new one, so both directories hold one answer. The exception is Dropout's mask before opset
12, where onnxruntime returns all false in inference and ONNX's reference implementation (and
every later opset) all true: those cases (`ORACLE_NEW`) take the new model's outputs and check
them against onnx.reference on the old one. tests/onnx_opsets.rs runs both through memc
(the node-test harness): the normalized old form must give the twin's result.

Re-running produces byte-identical files (fixed seeds).
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "opsets")
IR = 7  # onnxruntime reads IR 7 models of every opset used here


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def model(nodes, inputs, outputs, opset, inits=()):
    g = helper.make_graph(nodes, "case", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR,
                             producer_name="memc-opset-cases")


def rnd(seed, shape, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def run(m, feeds):
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def write_dir(path, m, feeds, outputs):
    os.makedirs(os.path.join(path, "test_data_set_0"), exist_ok=True)
    with open(os.path.join(path, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    for i, x in enumerate(m.graph.input):
        t = numpy_helper.from_array(feeds[x.name], x.name)
        with open(os.path.join(path, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    for i, (o, y) in enumerate(zip(m.graph.output, outputs)):
        t = numpy_helper.from_array(np.asarray(y), o.name)
        with open(os.path.join(path, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())


CASES = {}
# Cases whose expected outputs are onnxruntime's on the new model (see the module doc).
ORACLE_NEW = {"dropout_ratio_attr", "dropout_mask_in_data_type"}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# Each case returns (old model, new model, feeds). The graphs read `x` (and the feeds name any
# other input) and write the same outputs.


def one_op(op, old_opset, old_attrs, new_opset, new_inputs, new_attrs, shape, outputs, inits=(), new_nodes=()):
    """An op with attributes in the old model, with constant inputs (initializers) in the new."""
    outs = [vi(name, elem, None) for name, elem in outputs]
    out_names = [name for name, _ in outputs]
    old = model([helper.make_node(op, ["x"], out_names, name="old", **old_attrs)], [vi("x", T.FLOAT, shape)],
                outs, old_opset)
    new = model([*new_nodes, helper.make_node(op, ["x", *new_inputs], out_names, name="new", **new_attrs)],
                [vi("x", T.FLOAT, shape)], outs, new_opset, inits)
    return old, new, {"x": rnd(1, shape)}


@case
def split_attr():
    return one_op("Split", 11, dict(axis=1, split=[1, 3]), 13, ["split"], dict(axis=1), [2, 4, 3],
                  [("a", T.FLOAT), ("b", T.FLOAT)], [const("split", np.array([1, 3], np.int64))])


@case
def squeeze_attr():
    return one_op("Squeeze", 11, dict(axes=[0, -2]), 13, ["axes"], {}, [1, 3, 1, 2], [("y", T.FLOAT)],
                  [const("axes", np.array([0, -2], np.int64))])


@case
def unsqueeze_attr():
    return one_op("Unsqueeze", 12, dict(axes=[0, 3]), 13, ["axes"], {}, [3, 2], [("y", T.FLOAT)],
                  [const("axes", np.array([0, 3], np.int64))])


@case
def reduce_sum_attr():
    return one_op("ReduceSum", 11, dict(axes=[1], keepdims=0), 13, ["axes"], dict(keepdims=0), [2, 3, 4],
                  [("y", T.FLOAT)], [const("axes", np.array([1], np.int64))])


@case
def reduce_max_attr():
    return one_op("ReduceMax", 12, dict(axes=[0, 2]), 18, ["axes"], {}, [2, 3, 4], [("y", T.FLOAT)],
                  [const("axes", np.array([0, 2], np.int64))])


@case
def slice_attrs():
    inits = [const("starts", np.array([1, -3], np.int64)), const("ends", np.array([100, -1], np.int64)),
             const("axes", np.array([0, 2], np.int64))]
    return one_op("Slice", 9, dict(starts=[1, -3], ends=[100, -1], axes=[0, 2]), 13, ["starts", "ends", "axes"], {},
                  [3, 2, 5], [("y", T.FLOAT)], inits)


@case
def top_k_attr():
    return one_op("TopK", 9, dict(k=2, axis=1), 13, ["k"], dict(axis=1), [3, 5],
                  [("values", T.FLOAT), ("indices", T.INT64)], [const("k", np.array([2], np.int64))])


@case
def pad_attrs():
    inits = [const("pads", np.array([0, 1, 2, 0], np.int64)), const("value", np.array(1.5, np.float32))]
    return one_op("Pad", 10, dict(pads=[0, 1, 2, 0], value=1.5), 13, ["pads", "value"], {}, [2, 3],
                  [("y", T.FLOAT)], inits)


@case
def pad_reflect_attrs():
    return one_op("Pad", 2, dict(pads=[1, 2, 0, 1], mode="reflect"), 13, ["pads"], dict(mode="reflect"), [3, 4],
                  [("y", T.FLOAT)], [const("pads", np.array([1, 2, 0, 1], np.int64))])


@case
def clip_attrs():
    inits = [const("lo", np.array(-0.5, np.float32)), const("hi", np.array(0.5, np.float32))]
    return one_op("Clip", 10, dict(min=-0.5, max=0.5), 13, ["lo", "hi"], {}, [3, 4], [("y", T.FLOAT)], inits)


@case
def clip_max_only_opset6():
    return one_op("Clip", 6, dict(max=0.25), 13, ["", "hi"], {}, [3, 4], [("y", T.FLOAT)],
                  [const("hi", np.array(0.25, np.float32))])


@case
def dropout_ratio_attr():
    return one_op("Dropout", 10, dict(ratio=0.3), 13, ["ratio"], {}, [2, 3], [("y", T.FLOAT), ("mask", T.BOOL)],
                  [const("ratio", np.array(0.3, np.float32))])


@case
def dropout_mask_in_data_type():
    """Dropout of opset 7 returned its mask as floats (all ones in inference)."""
    shape = [2, 3]
    outs = [vi("y", T.FLOAT, None), vi("mask", T.FLOAT, None)]
    old = model([helper.make_node("Dropout", ["x"], ["y", "mask"], name="old", ratio=0.2)],
                [vi("x", T.FLOAT, shape)], outs, 7)
    new = model([helper.make_node("Dropout", ["x"], ["y", "m"], name="new"),
                 helper.make_node("Cast", ["m"], ["mask"], to=T.FLOAT)], [vi("x", T.FLOAT, shape)], outs, 13)
    return old, new, {"x": rnd(2, shape)}


def coerced(op, opset, axis, shape):
    """Softmax-like ops before opset 13: 2-D around `axis`; the twin flattens explicitly."""
    attrs = {} if axis is None else dict(axis=axis)
    a = 1 if axis is None else axis
    old = model([helper.make_node(op, ["x"], ["y"], name="old", **attrs)], [vi("x", T.FLOAT, shape)],
                [vi("y", T.FLOAT, shape)], opset)
    new = model([helper.make_node("Flatten", ["x"], ["f"], axis=a),
                 helper.make_node(op, ["f"], ["g"], name="new", axis=-1),
                 helper.make_node("Reshape", ["g", "shape"], ["y"])],
                [vi("x", T.FLOAT, shape)], [vi("y", T.FLOAT, shape)], 13,
                [const("shape", np.array(shape, np.int64))])
    return old, new, {"x": rnd(3, shape)}


@case
def softmax_default_axis():
    return coerced("Softmax", 11, None, [2, 3, 4])


@case
def log_softmax_axis0():
    return coerced("LogSoftmax", 12, 0, [2, 3, 2])


@case
def hardmax_axis1_opset1():
    return coerced("Hardmax", 1, 1, [2, 2, 3])


@case
def softmax_last_axis():
    return coerced("Softmax", 11, -1, [2, 5])


def batch_norm_inputs(c_shape):
    rng = np.random.default_rng(4)
    return [const("scale", rng.uniform(0.5, 1.5, c_shape).astype(np.float32)),
            const("bias", rng.standard_normal(c_shape).astype(np.float32)),
            const("mean", rng.standard_normal(c_shape).astype(np.float32)),
            const("var", rng.uniform(0.5, 2.0, c_shape).astype(np.float32))]


@case
def batch_norm_spatial0():
    """BatchNormalization of opset 7 with statistics per activation: elementwise in the twin."""
    shape = [2, 3, 2]
    inits = [*batch_norm_inputs([3, 2]), const("eps", np.array(1e-3, np.float32))]
    names = ["x", "scale", "bias", "mean", "var"]
    old = model([helper.make_node("BatchNormalization", names, ["y"], name="old", spatial=0, epsilon=1e-3)],
                [vi("x", T.FLOAT, shape)], [vi("y", T.FLOAT, shape)], 7, inits[:4])
    new = model([helper.make_node("Add", ["var", "eps"], ["ve"]),
                 helper.make_node("Sqrt", ["ve"], ["sd"]),
                 helper.make_node("Sub", ["x", "mean"], ["c"]),
                 helper.make_node("Div", ["c", "sd"], ["n"]),
                 helper.make_node("Mul", ["n", "scale"], ["s"]),
                 helper.make_node("Add", ["s", "bias"], ["y"], name="new")],
                [vi("x", T.FLOAT, shape)], [vi("y", T.FLOAT, shape)], 13, inits)
    return old, new, {"x": rnd(5, shape)}


@case
def batch_norm_spatial1_opset8():
    shape = [2, 3, 2, 2]
    inits = batch_norm_inputs([3])
    names = ["x", "scale", "bias", "mean", "var"]
    old = model([helper.make_node("BatchNormalization", names, ["y"], name="old", spatial=1)],
                [vi("x", T.FLOAT, shape)], [vi("y", T.FLOAT, shape)], 8, inits)
    new = model([helper.make_node("BatchNormalization", names, ["y"], name="new")],
                [vi("x", T.FLOAT, shape)], [vi("y", T.FLOAT, shape)], 15, inits)
    return old, new, {"x": rnd(6, shape)}


def resize_pair(old_node, old_opset, new_attrs, scales, shape, inits_old):
    inits_new = [const("scales", np.array(scales, np.float32))]
    old = model([old_node], [vi("x", T.FLOAT, shape)], [vi("y", T.FLOAT, None)], old_opset, inits_old)
    new = model([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="new", **new_attrs)],
                [vi("x", T.FLOAT, shape)], [vi("y", T.FLOAT, None)], 13, inits_new)
    return old, new, {"x": np.arange(np.prod(shape), dtype=np.float32).reshape(shape)}


@case
def resize10_nearest_up():
    scales = [1, 1, 2, 1.5]
    return resize_pair(helper.make_node("Resize", ["x", "scales"], ["y"], name="old"), 10,
                       dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor"), scales,
                       [1, 1, 3, 4], [const("scales", np.array(scales, np.float32))])


@case
def resize10_nearest_down():
    scales = [1, 1, 0.6, 0.5]
    return resize_pair(helper.make_node("Resize", ["x", "scales"], ["y"], name="old"), 10,
                       dict(coordinate_transformation_mode="asymmetric", nearest_mode="ceil"), scales,
                       [1, 1, 5, 6], [const("scales", np.array(scales, np.float32))])


@case
def resize10_linear():
    scales = [1, 1, 1.5, 0.5]
    return resize_pair(helper.make_node("Resize", ["x", "scales"], ["y"], name="old", mode="linear"), 10,
                       dict(coordinate_transformation_mode="asymmetric", mode="linear"), scales,
                       [1, 2, 4, 4], [const("scales", np.array(scales, np.float32))])


@case
def upsample7_nearest():
    scales = [1.0, 1.0, 2.0, 3.0]
    return resize_pair(helper.make_node("Upsample", ["x"], ["y"], name="old", scales=scales), 7,
                       dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor"), scales,
                       [1, 2, 2, 3], [])


@case
def upsample9_linear():
    scales = [1, 1, 2, 1.5]
    return resize_pair(helper.make_node("Upsample", ["x", "scales"], ["y"], name="old", mode="linear"), 9,
                       dict(coordinate_transformation_mode="asymmetric", mode="linear"), scales,
                       [1, 1, 3, 4], [const("scales", np.array(scales, np.float32))])


def tf_half_pixel_for_nn(nearest_old, nearest_new):
    scales = [1, 1, 1.7, 0.6]
    shape = [1, 1, 4, 5]
    attrs = dict(coordinate_transformation_mode="tf_half_pixel_for_nn")
    if nearest_old is not None:
        attrs["nearest_mode"] = nearest_old
    old_node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], name="old", **attrs)
    return resize_pair(old_node, 11, dict(coordinate_transformation_mode="half_pixel", nearest_mode=nearest_new),
                       scales, shape, [const("roi", np.zeros([0], np.float32)),
                                       const("scales", np.array(scales, np.float32))])


@case
def resize11_tf_half_pixel_for_nn_floor():
    return tf_half_pixel_for_nn("floor", "round_prefer_ceil")


@case
def resize11_tf_half_pixel_for_nn_default():
    return tf_half_pixel_for_nn(None, "ceil")


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    for name, fn in CASES.items():
        old, new, feeds = fn()
        if name in ORACLE_NEW:
            want = run(new, feeds)
            got = ReferenceEvaluator(old).run(None, feeds)
            got = [g.astype(w.dtype) for g, w in zip(got, want)]
        else:
            want = run(old, feeds)
            got = run(new, feeds)
        for m in (old, new):  # Outputs declared without a shape get the one onnxruntime computed.
            for o, w in zip(m.graph.output, want):
                o.CopyFrom(vi(o.name, o.type.tensor_type.elem_type, list(w.shape)))
            onnx.checker.check_model(m)
        assert len(want) == len(got), name
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and w.shape == g.shape, (name, w.dtype, w.shape, g.dtype, g.shape)
            assert np.allclose(w, g, rtol=1e-5, atol=1e-6), (name, w, g)
        write_dir(os.path.join(OUT, name, "old"), old, feeds, want)
        write_dir(os.path.join(OUT, name, "new"), new, feeds, want)
        print(f"{name}: opset {old.opset_import[0].version} -> {new.opset_import[0].version}, "
              f"outputs {[w.shape for w in want]}")


if __name__ == "__main__":
    main()
