"""Writes conversions.txt: ONNX's reference conversions (onnx.reference.ops.op_cast.cast_to,
which uses ml_dtypes) between float32 and the narrow element types, for ir/tests/conversions.rs.

Run from the repository root: .venv/bin/python ir/tests/data/conversions.py

Sections start with a header line `decode TYPE`, `encode TYPE` or `int TYPE`; the lines after
it, up to the next header, are (all numbers hexadecimal):
  decode: CODE F32BITS      the value of every code of a float8/float4 type
  encode: F32BITS CODE SAT  f32 to TYPE with saturate=0 (CODE) and saturate=1 (SAT)
                            (FLOAT8E8M0: round_mode "up", the default)
  int: F32BITS CODE         f32 to a 4- or 2-bit integer (the code in the low bits)
"""

from pathlib import Path

import warnings

import numpy as np
import onnx
from onnx import TensorProto
from onnx.reference.ops.op_cast import cast_to

FLOATS = {
    "FLOAT16": TensorProto.FLOAT16,
    "BFLOAT16": TensorProto.BFLOAT16,
    "FLOAT8E4M3FN": TensorProto.FLOAT8E4M3FN,
    "FLOAT8E4M3FNUZ": TensorProto.FLOAT8E4M3FNUZ,
    "FLOAT8E5M2": TensorProto.FLOAT8E5M2,
    "FLOAT8E5M2FNUZ": TensorProto.FLOAT8E5M2FNUZ,
    "FLOAT4E2M1": TensorProto.FLOAT4E2M1,
    "FLOAT8E8M0": TensorProto.FLOAT8E8M0,
}
INTS = {
    "INT4": TensorProto.INT4,
    "UINT4": TensorProto.UINT4,
    "INT2": TensorProto.INT2,
    "UINT2": TensorProto.UINT2,
}
CODE_BITS = {"FLOAT16": 16, "BFLOAT16": 16, "FLOAT4E2M1": 4}


def codes_of(values: np.ndarray, bits: int) -> list[int]:
    raw = values.view(np.uint16 if bits == 16 else np.uint8)
    return [int(c) & ((1 << bits) - 1) for c in raw.ravel()]


def f32_bits(x: np.ndarray) -> list[int]:
    return [int(b) for b in np.asarray(x, dtype=np.float32).view(np.uint32).ravel()]


def neighbours(x: np.ndarray) -> np.ndarray:
    """x and the float32 values one step below and above it."""
    return np.concatenate(
        [x, np.nextafter(x, np.float32(-np.inf)), np.nextafter(x, np.float32(np.inf))]
    )


def main() -> None:
    # Overflowing casts are the point of several probes.
    warnings.simplefilter("ignore", RuntimeWarning)
    lines = []
    rng = np.random.default_rng(17)
    for name, to in FLOATS.items():
        dtype = onnx.helper.tensor_dtype_to_np_dtype(to)
        bits = CODE_BITS.get(name, 8)
        codes = np.arange(1 << bits, dtype=np.uint16 if bits == 16 else np.uint8)
        values = codes.view(dtype).astype(np.float32)
        if bits <= 8:
            lines.append(f"decode {name}")
            for c, v in zip(codes, f32_bits(values)):
                lines.append(f"{int(c):x} {v:x}")
        finite = np.unique(np.abs(values[np.isfinite(values)]))
        if bits == 16:
            # Every 1009th value and the smallest and largest ones stand for the rest (the half
            # crate checks f16 and bf16 exhaustively in ir/src/minifloat.rs).
            finite = np.unique(np.concatenate([finite[::1009], finite[-4:], finite[:4]]))
        mids = (finite[:-1].astype(np.float64) + finite[1:]) / 2
        top = float(finite[-1])
        probes = np.concatenate(
            [
                finite,
                neighbours(mids.astype(np.float32)),
                np.array([top * 1.03, top * 1.07, top * 2, 1e30, 3e38, np.inf, np.nan],
                         dtype=np.float32),
                rng.normal(0, 4, 64).astype(np.float32),
            ]
        )
        probes = np.unique(np.concatenate([probes, -probes]))
        probes = np.concatenate([probes, -np.array([np.nan], dtype=np.float32)])
        if name == "FLOAT8E8M0":
            # Exponent only: the f32 exponents and their neighbours, zero, subnormals.
            powers = np.ldexp(np.float32(1), np.arange(-149, 128)).astype(np.float32)
            probes = np.concatenate([neighbours(powers), probes, np.float32([0, 3e-45, 1e-40])])
            probes = np.unique(np.concatenate([probes, -probes]))
        plain = codes_of(cast_to(probes, to, saturate=False, round_mode="up"), bits)
        sat = codes_of(cast_to(probes, to, saturate=True, round_mode="up"), bits)
        lines.append(f"encode {name}")
        for x, c, s in zip(f32_bits(probes), plain, sat):
            lines.append(f"{x:x} {c:x} {s:x}")
    xs = np.concatenate(
        [np.arange(-20, 20, 0.75), [0.5, -0.5, 1.5, -1.5, 2.5, 1e6, -1e6, 123456.7]]
    ).astype(np.float32)
    for name, to in INTS.items():
        out = cast_to(xs, to, saturate=True)
        bits = 4 if "4" in name else 2
        lines.append(f"int {name}")
        for x, c in zip(f32_bits(xs), codes_of(out, 8)):
            lines.append(f"{x:x} {c & ((1 << bits) - 1):x}")
    path = Path(__file__).with_name("conversions.txt")
    path.write_text("\n".join(lines) + "\n")
    print(f"{path}: {len(lines)} lines")


if __name__ == "__main__":
    main()
