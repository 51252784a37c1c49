"""The memc Python package against onnxruntime, and every error it raises.

Models are built here with onnx.helper (nothing large is committed); the model zoo
(bench/models/generate.py, as tests/zoo.rs uses it) is generated into a temporary directory
when the repository is beside this file, and those cases are skipped, saying why, when it is
not (unless MEMC_REQUIRE_ZOO is set, as scripts/test does, which makes that a failure).
Outputs must match onnxruntime within |memc - ort| <= ATOL + RTOL * |ort|, the tolerance of
tests/zoo.rs.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import memc

RTOL = 1e-3
ATOL = 1e-4
ROOT = Path(__file__).resolve().parents[2]
ZOO_MODELS = ["mlp", "bert", "gpt", "resnet", "unet"]
ZOO_DIMS = {"batch": 2, "seq": 16}


# --- small models -------------------------------------------------------------------------


def save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def make_model(nodes, inputs, outputs, initializers=(), opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def mlp_model(rng) -> onnx.ModelProto:
    """x[batch, 8] -> MatMul -> Add -> Relu -> Gemm -> Softmax -> probs[batch, 5]."""
    w1 = numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((5, 16)).astype(np.float32), "w2")
    b2 = numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    return make_model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 5])],
        [w1, b1, w2, b2],
    )


def conv_model(rng) -> onnx.ModelProto:
    """image[1, 3, 8, 8] -> Conv 3x3 -> Relu -> MaxPool -> Flatten -> feat[1, 64]."""
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["image", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["feat"]),
    ]
    return make_model(
        nodes,
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("feat", TensorProto.FLOAT, [1, 64])],
        [w, b],
    )


def embedding_model(rng) -> onnx.ModelProto:
    """ids[batch, seq] (int64) -> Gather -> ReduceSum over seq -> pooled[batch, 6], and
    positive[batch, 6] (bool): pooled > 0."""
    table = numpy_helper.from_array(rng.standard_normal((10, 6)).astype(np.float32), "table")
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    zero = numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"]),
        helper.make_node("ReduceSum", ["e", "axes"], ["pooled"], keepdims=0),
        helper.make_node("Greater", ["pooled", "zero"], ["positive"]),
    ]
    return make_model(
        nodes,
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [
            helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", 6]),
            helper.make_tensor_value_info("positive", TensorProto.BOOL, ["batch", 6]),
        ],
        [table, axes, zero],
    )


SMALL_MODELS = {
    # name: (builder, dims, inputs(rng))
    "mlp": (mlp_model, {"batch": 3}, lambda rng: {"x": rng.standard_normal((3, 8)).astype(np.float32)}),
    "conv": (conv_model, None, lambda rng: {"image": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}),
    "embedding": (
        embedding_model,
        {"batch": 2, "seq": 5},
        lambda rng: {"ids": rng.integers(0, 10, size=(2, 5), dtype=np.int64)},
    ),
}


def onnxruntime_outputs(path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


def assert_matches(got: dict[str, np.ndarray], want: dict[str, np.ndarray], what: str) -> None:
    assert list(got) == list(want), f"{what}: output names"
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype, f"{what}: `{name}` dtype {g.dtype}, onnxruntime {w.dtype}"
        assert g.shape == w.shape, f"{what}: `{name}` shape {g.shape}, onnxruntime {w.shape}"
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"{what}: `{name}`")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: `{name}`")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def mlp_path(tmp_path, rng) -> Path:
    return save(mlp_model(rng), tmp_path / "mlp.onnx")


@pytest.fixture
def mlp_plan(mlp_path) -> memc.Plan:
    return memc.compile(mlp_path, dims={"batch": 3})


# --- compile and run ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SMALL_MODELS))
def test_small_models_match_onnxruntime(tmp_path, rng, name):
    build, dims, make_inputs = SMALL_MODELS[name]
    path = save(build(rng), tmp_path / f"{name}.onnx")
    inputs = make_inputs(rng)
    plan = memc.compile(path, dims=dims)
    assert_matches(plan.run(inputs), onnxruntime_outputs(path, inputs), name)
    # A second run on other inputs reuses the session and the arena.
    inputs = make_inputs(rng)
    assert_matches(plan.run(inputs), onnxruntime_outputs(path, inputs), f"{name}, second run")


def test_plan_describes_its_inputs_and_outputs(mlp_plan):
    assert mlp_plan.inputs == {"x": (np.dtype(np.float32), (3, 8))}
    assert mlp_plan.outputs == {"probs": (np.dtype(np.float32), (3, 5))}
    assert mlp_plan.target == "cpu"
    assert mlp_plan.dims == {"batch": 3}
    assert mlp_plan.arena_size == mlp_plan.report()["arena_size"]
    assert repr(mlp_plan).startswith("<memc.Plan mlp.onnx target=cpu arena=")


def test_path_objects_and_strings_are_both_paths(mlp_path):
    assert memc.compile(str(mlp_path), dims={"batch": 3}).inputs == memc.compile(
        mlp_path, dims={"batch": 3}
    ).inputs


def test_inputs_that_are_not_c_contiguous_are_copied(mlp_path, mlp_plan, rng):
    x = rng.standard_normal((3, 8)).astype(np.float32)
    want = onnxruntime_outputs(mlp_path, {"x": x})
    fortran = np.asfortranarray(x)
    assert not fortran.flags.c_contiguous
    assert_matches(mlp_plan.run({"x": fortran}), want, "Fortran-ordered input")
    wide = np.zeros((3, 16), np.float32)
    wide[:, ::2] = x
    strided = wide[:, ::2]
    assert not strided.flags.c_contiguous
    assert_matches(mlp_plan.run({"x": strided}), want, "strided view input")


def test_outputs_are_fresh_arrays(mlp_plan, rng):
    x = rng.standard_normal((3, 8)).astype(np.float32)
    first = mlp_plan.run({"x": x})["probs"]
    kept = first.copy()
    second = mlp_plan.run({"x": -x})["probs"]
    # The second run does not write into the arrays the first returned.
    np.testing.assert_array_equal(first, kept)
    assert not np.array_equal(first, second)
    first[:] = 0  # they are ordinary writable arrays
    assert first.flags.owndata or first.base is not None


def test_outputs_with_a_run_time_extent_are_trimmed(tmp_path):
    """NonZero's and Compress's outputs are planned for their bound; each run returns the
    extent it found, from none to all, as onnxruntime does."""
    model = make_model(
        [
            helper.make_node("NonZero", ["x"], ["indices"]),
            helper.make_node("Compress", ["x", "keep"], ["kept"], axis=1),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("keep", TensorProto.BOOL, [3]),
        ],
        [
            helper.make_tensor_value_info("indices", TensorProto.INT64, [2, None]),
            helper.make_tensor_value_info("kept", TensorProto.FLOAT, [2, None]),
        ],
    )
    path = save(model, tmp_path / "extents.onnx")
    plan = memc.compile(path)
    for x, keep in [
        (np.zeros((2, 3), np.float32), np.zeros(3, bool)),
        (np.array([[0, 7, 0], [0, 0, -0.5]], np.float32), np.array([True, False, True])),
        (np.arange(1, 7, dtype=np.float32).reshape(2, 3), np.ones(3, bool)),
    ]:
        got = plan.run({"x": x, "keep": keep})
        want = onnxruntime_outputs(path, {"x": x, "keep": keep})
        for name in ["indices", "kept"]:
            assert got[name].shape == want[name].shape, name
            np.testing.assert_array_equal(got[name], want[name])


def test_save_and_load_round_trip(tmp_path, mlp_path, mlp_plan, rng):
    x = rng.standard_normal((3, 8)).astype(np.float32)
    saved = tmp_path / "mlp.plan"
    mlp_plan.save(saved)
    loaded = memc.load(saved)
    assert loaded.inputs == mlp_plan.inputs and loaded.outputs == mlp_plan.outputs
    assert loaded.report() == mlp_plan.report()
    assert_matches(loaded.run({"x": x}), onnxruntime_outputs(mlp_path, {"x": x}), "loaded plan")
    # Saving a loaded plan over its own file replaces it whole; the plan still runs.
    loaded.save(saved)
    assert_matches(loaded.run({"x": x}), mlp_plan.run({"x": x}), "plan saved over itself")
    assert_matches(memc.load(str(saved)).run({"x": x}), mlp_plan.run({"x": x}), "reloaded")


def test_memory_report(mlp_plan):
    report = mlp_plan.report()
    assert report["arena_size"] >= report["load"] > 0
    assert max(report["live_bytes"]) == report["live_bytes"][report["peak_step"]] >= report["load"]
    buffers = report["buffers"]
    assert [b["name"] for b in buffers if b["input"]] == ["x"]
    assert sum(b["output"] for b in buffers) == 1
    for b in buffers:
        assert b["kind"] in ("input", "owned", "scratch"), b
        assert 0 <= b["start"] < b["end"], b
        assert b["offset"] + b["size"] <= report["arena_size"], b
    # The buffers are the arena's allocations (views and in-place results are listed apart,
    # as aliases): no two live at the same step overlap.
    for i, a in enumerate(buffers):
        for b in buffers[i + 1 :]:
            live_together = a["start"] < b["end"] and b["start"] < a["end"]
            overlap = a["offset"] < b["offset"] + b["size"] and b["offset"] < a["offset"] + a["size"]
            assert not (live_together and overlap), (a, b)
    for alias in report["aliases"]:
        assert alias["buffer"] in {b["name"] for b in buffers}, alias


def test_report_svg(mlp_plan):
    svg = mlp_plan.report_svg()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")


def test_memory_budget_forms(mlp_path):
    base = memc.compile(mlp_path, dims={"batch": 3})
    for budget in ["100%", f"{base.arena_size}", base.arena_size, "1MiB"]:
        plan = memc.compile(mlp_path, dims={"batch": 3}, memory_budget=budget)
        assert plan.arena_size <= base.arena_size, budget


def test_an_unmet_memory_budget_warns_and_still_runs(mlp_path, rng):
    with pytest.warns(UserWarning, match=r"the memory budget 1 B \(1 bytes\) cannot be met"):
        plan = memc.compile(mlp_path, dims={"batch": 3}, memory_budget=1)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    assert_matches(plan.run({"x": x}), onnxruntime_outputs(mlp_path, {"x": x}), "unmet budget")


def wide_model(rng) -> onnx.ModelProto:
    """x[1, 1024] through three 1024x1024 MatMuls with Tanh between: 12 MiB of weights."""
    weights = [
        numpy_helper.from_array((rng.standard_normal((1024, 1024)) / 32).astype(np.float32), f"w{i}")
        for i in range(3)
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["h0"]),
        helper.make_node("Tanh", ["h0"], ["t0"]),
        helper.make_node("MatMul", ["t0", "w1"], ["h1"]),
        helper.make_node("Tanh", ["h1"], ["t1"]),
        helper.make_node("MatMul", ["t1", "w2"], ["y"]),
    ]
    return make_model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])],
        weights,
    )


def test_progress_hears_the_weights_as_they_are_written(tmp_path, rng):
    path = save(wide_model(rng), tmp_path / "wide.onnx")
    calls = []
    plan = memc.compile(path, progress=lambda done, total: calls.append((done, total)))
    total = calls[0][1]
    assert total >= 3 * 1024 * 1024 * 4
    assert calls[0] == (0, total)
    assert calls[-1] == (total, total)
    assert all(a[0] < b[0] and a[1] == b[1] for a, b in zip(calls, calls[1:])), calls
    assert len(calls) >= 4, calls
    x = rng.standard_normal((1, 1024)).astype(np.float32)
    assert_matches(plan.run({"x": x}), onnxruntime_outputs(path, {"x": x}), "wide")


def test_an_exception_in_progress_stops_the_compile(tmp_path, rng):
    path = save(wide_model(rng), tmp_path / "wide.onnx")

    class Enough(Exception):
        pass

    seen = []

    def stop(done, total):
        seen.append((done, total))
        if done >= total // 2:
            raise Enough(f"stopped at {done} of {total}")

    with pytest.raises(Enough, match="stopped at"):
        memc.compile(path, progress=stop)
    # The weights section holds the three weights, and their copies packed for the GEMM.
    done, total = seen[-1]
    assert total >= 3 * 1024 * 1024 * 4
    assert 0 < done < total


def test_progress_must_be_callable(mlp_path):
    with pytest.raises(TypeError, match=r"progress: expected a callable progress\(done, total\), got int"):
        memc.compile(mlp_path, dims={"batch": 3}, progress=3)


def test_a_cuda_plan_compiles_and_saves_without_a_gpu(tmp_path, mlp_path):
    plan = memc.compile(mlp_path, dims={"batch": 3}, target="cuda")
    assert plan.target == "cuda"
    plan.save(tmp_path / "mlp.cuda.plan")
    assert memc.load(tmp_path / "mlp.cuda.plan").target == "cuda"
    # Where the machine has no NVIDIA driver, running says so; where it has one, the GPU
    # computes what the CPU does.
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    try:
        got = plan.run({"x": x})
    except memc.Error as e:
        assert "NVIDIA" in str(e) or "CUDA" in str(e), str(e)
        return
    assert_matches(got, onnxruntime_outputs(mlp_path, {"x": x}), "cuda plan")


# --- errors -------------------------------------------------------------------------------


def test_error_is_an_exception_class():
    assert issubclass(memc.Error, Exception)


def test_a_file_that_is_not_a_model(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x12\x34 this is not a protobuf")
    with pytest.raises(memc.Error) as e:
        memc.compile(bad)
    message = str(e.value)
    assert "error: this is not a valid ONNX model" in message
    assert f"in {bad}" in message


def test_a_model_memc_rejects_names_the_node(tmp_path):
    # A MatMul whose inner dims disagree: shape inference names the node.
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="the_matmul")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.zeros((4, 5), np.float32), "w")],
    )
    path = tmp_path / "mismatch.onnx"
    onnx.save(model, str(path))
    with pytest.raises(memc.Error, match="the_matmul"):
        memc.compile(path)


def test_a_missing_model(tmp_path):
    with pytest.raises(memc.Error, match=r"cannot read `.*nowhere\.onnx`: No such file"):
        memc.compile(tmp_path / "nowhere.onnx")


def test_unbound_symbolic_dims(mlp_path):
    with pytest.raises(memc.Error, match="unbound symbolic dims: batch"):
        memc.compile(mlp_path)
    with pytest.raises(memc.Error, match=r"`--dim seq=\.\.\.` names no symbolic dim of the model"):
        memc.compile(mlp_path, dims={"batch": 1, "seq": 4})


SHAPE_INPUTS = ROOT / "tests" / "onnx" / "fixtures" / "shape_inputs"


def test_consts_bind_shape_inputs_and_match_onnxruntime():
    model = SHAPE_INPUTS / "model.onnx"
    feeds = {n: np.load(SHAPE_INPUTS / f"{n}.npy") for n in ("x", "shape", "pads", "scale")}
    with pytest.raises(memc.Error):
        memc.compile(model)
    plan = memc.compile(model, consts={"shape": feeds["shape"], "pads": feeds["pads"]})
    assert list(plan.inputs) == ["x", "scale"]
    (y,) = plan.run({"x": feeds["x"], "scale": feeds["scale"]}).values()
    want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert y.shape == want.shape == (5, 4, 4)
    np.testing.assert_allclose(y, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "consts, error, message",
    [
        ({"sahpe": np.array([4, -1, 2])}, memc.Error, r"`--const sahpe=\.\.\.` names no input of the model"),
        ({"shape": np.array([4, -1, 2], np.int32)}, memc.Error, r"the value is i32\[3\] but input `shape` is declared i64\[3\]"),
        ({"shape": [4, -1, 2]}, TypeError, r"input `shape`: expected a numpy.ndarray, got list"),
        ([("shape", 1)], TypeError, r"consts: expected a dict of input names to numpy arrays"),
    ],
)
def test_bad_consts(consts, error, message):
    with pytest.raises(error, match=message):
        memc.compile(SHAPE_INPUTS / "model.onnx", consts=consts)


@pytest.mark.parametrize(
    "dims, error, message",
    [
        ({"batch": 0}, ValueError, r'dims\["batch"\]: expected a positive int, got 0'),
        ({"batch": -2}, ValueError, r'dims\["batch"\]: expected a positive int, got -2'),
        ({"batch": True}, TypeError, r'dims\["batch"\]: expected a positive int, got bool'),
        ({"batch": 1.5}, TypeError, r'dims\["batch"\]: expected a positive int, got float'),
        ({"batch": "2"}, TypeError, r'dims\["batch"\]: expected a positive int, got str'),
        ({1: 2}, TypeError, r"dims: a dim name must be a str, got 1 \(int\)"),
        ([("batch", 1)], TypeError, r"dims: expected a dict of dim names to positive ints"),
    ],
)
def test_bad_dims(mlp_path, dims, error, message):
    with pytest.raises(error, match=message):
        memc.compile(mlp_path, dims=dims)


@pytest.mark.parametrize(
    "budget, error, message",
    [
        ("12 pigs", ValueError, r'memory_budget="12 pigs": expected a size such as `512MiB`'),
        ("0%", ValueError, r'memory_budget="0%": a percentage must be above 0 and at most 100'),
        (-1, ValueError, r"memory_budget: expected a non-negative number of bytes, got -1"),
        (1.5, TypeError, r"memory_budget: expected a size .* got float"),
        (True, TypeError, r"memory_budget: expected a size .* got bool"),
    ],
)
def test_bad_memory_budgets(mlp_path, budget, error, message):
    with pytest.raises(error, match=message):
        memc.compile(mlp_path, dims={"batch": 3}, memory_budget=budget)


def test_unknown_target(mlp_path):
    with pytest.raises(ValueError, match=r'target: unknown target "tpu"; memc compiles for "cpu", "cuda"'):
        memc.compile(mlp_path, dims={"batch": 3}, target="tpu")


def test_wrong_input_name(mlp_plan):
    x = np.zeros((3, 8), np.float32)
    with pytest.raises(memc.Error, match=r"unknown input `image`; the plan's inputs are `x` \(f32\[3, 8\]\)"):
        mlp_plan.run({"image": x})


def test_missing_input(mlp_plan):
    with pytest.raises(memc.Error, match=r"missing input `x` \(f32\[3, 8\]\)"):
        mlp_plan.run({})


def test_wrong_dtype(mlp_plan):
    with pytest.raises(memc.Error, match=r"input `x`: expected element type f32, got f64"):
        mlp_plan.run({"x": np.zeros((3, 8), np.float64)})
    with pytest.raises(memc.Error, match=r"input `x`: expected element type f32, got i64"):
        mlp_plan.run({"x": np.zeros((3, 8), np.int64)})


def test_a_dtype_memc_has_no_element_type_for(mlp_plan):
    with pytest.raises(memc.Error, match=r"input `x`: numpy dtype\('complex64'\) is not an element type"):
        mlp_plan.run({"x": np.zeros((3, 8), np.complex64)})
    with pytest.raises(memc.Error, match=r"input `x`: numpy dtype\('>f4'\) is not an element type"):
        mlp_plan.run({"x": np.zeros((3, 8), ">f4")})


def test_wrong_shape(mlp_plan):
    with pytest.raises(memc.Error, match=r"input `x`: expected shape \[3, 8\], got \[2, 8\]"):
        mlp_plan.run({"x": np.zeros((2, 8), np.float32)})
    with pytest.raises(memc.Error, match=r"input `x`: expected shape \[3, 8\], got \[24\]"):
        mlp_plan.run({"x": np.zeros(24, np.float32)})


def test_inputs_of_the_wrong_python_type(mlp_plan):
    with pytest.raises(TypeError, match=r"input `x`: expected a numpy.ndarray, got list"):
        mlp_plan.run({"x": [[0.0] * 8] * 3})
    with pytest.raises(TypeError, match=r"inputs: expected a dict of input names to numpy arrays, got list"):
        mlp_plan.run([np.zeros((3, 8), np.float32)])
    with pytest.raises(TypeError, match=r"inputs: an input name must be a str, got int"):
        mlp_plan.run({0: np.zeros((3, 8), np.float32)})


def test_a_file_that_is_not_a_plan(tmp_path, mlp_path):
    with pytest.raises(memc.Error, match=r"is not a memc plan file \(it does not start with `MEMCPLAN`\)"):
        memc.load(mlp_path)
    empty = tmp_path / "empty.plan"
    empty.write_bytes(b"")
    with pytest.raises(memc.Error, match=r"empty\.plan"):
        memc.load(empty)


def test_a_damaged_plan(tmp_path, mlp_plan):
    saved = tmp_path / "mlp.plan"
    mlp_plan.save(saved)
    data = bytearray(saved.read_bytes())
    truncated = tmp_path / "truncated.plan"
    truncated.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(memc.Error, match=r"truncated\.plan"):
        memc.load(truncated)
    # Flip a byte of the metadata (just past the header): its checksum catches it.
    corrupted = tmp_path / "corrupted.plan"
    data[200] ^= 0xFF
    corrupted.write_bytes(bytes(data))
    with pytest.raises(memc.Error, match=r"corrupted\.plan"):
        memc.load(corrupted)


def test_a_missing_plan(tmp_path):
    with pytest.raises(memc.Error, match=r"cannot read `.*nowhere\.plan`: No such file"):
        memc.load(tmp_path / "nowhere.plan")


def test_saving_where_it_cannot(tmp_path, mlp_plan):
    with pytest.raises(memc.Error, match=r"cannot write `.*no-such-dir/mlp\.plan`"):
        mlp_plan.save(tmp_path / "no-such-dir" / "mlp.plan")


# --- the model zoo ------------------------------------------------------------------------


def load_reference_module():
    spec = importlib.util.spec_from_file_location("memc_reference", ROOT / "bench/models/reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    generate = ROOT / "bench/models/generate.py"
    if not generate.exists():
        if os.environ.get("MEMC_REQUIRE_ZOO"):
            pytest.fail(f"MEMC_REQUIRE_ZOO is set but {generate} is missing")
        pytest.skip(f"the model zoo's generator {generate} is not here (tests run outside the repository)")
    out = tmp_path_factory.mktemp("zoo")
    subprocess.run(
        [sys.executable, str(generate), "--out", str(out), "--only", ",".join(ZOO_MODELS)],
        check=True,
        capture_output=True,
    )
    return out


@pytest.mark.parametrize("name", ZOO_MODELS)
def test_zoo_matches_onnxruntime(zoo, name):
    reference = load_reference_module()
    path = zoo / f"{name}.onnx"
    model = onnx.load(str(path), load_external_data=False)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    symbols = {
        d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param
    }
    dims = {k: v for k, v in ZOO_DIMS.items() if k in symbols}
    vocab = reference.gather_vocab(model)
    rng = np.random.default_rng(0)
    inputs = {}
    for i in session.get_inputs():
        shape = [dims[d] if isinstance(d, str) else d for d in i.shape]
        inputs[i.name] = reference.make_input(rng, i.name, reference.ORT_TYPES[i.type], shape, vocab)
    plan = memc.compile(path, dims=dims)
    names = [o.name for o in session.get_outputs()]
    want = dict(zip(names, session.run(names, inputs)))
    assert_matches(plan.run(inputs), want, name)
