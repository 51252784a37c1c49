"""mlp: a 784-256-10 MLP (MNIST-shaped) with a symbolic `batch` dim.

Graph: x[batch,784] -> Gemm(transB=1) -> Relu -> Gemm(transB=1) -> logits[batch,10],
which is what torch.onnx.export emits for nn.Linear layers. Opset 17.
"""

from onnx import TensorProto

from .builder import GraphBuilder

OPSET = 17


def build(seed: int):
    g = GraphBuilder("mlp", seed)
    x = g.input("x", TensorProto.FLOAT, ["batch", 784])
    h = x
    for i, (fin, fout) in enumerate([(784, 256), (256, 10)]):
        with g.scope(f"fc{i + 1}"):
            w = g.param("weight", (fout, fin), std=0.05)
            b = g.param("bias", (fout,), std=0.05)
            h = g.op("Gemm", h, w, b, alpha=1.0, beta=1.0, transB=1)
            if i == 0:
                h = g.op("Relu", h)
    g.output(h, "logits", TensorProto.FLOAT, ["batch", 10])
    return g.make_model(OPSET, __doc__)
