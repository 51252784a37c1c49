"""memc benchmark model zoo: deterministic ONNX model generators (see ../README.md)."""
