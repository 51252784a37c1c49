"""resnet: a small ResNet-style CNN (ResNet-18 layout, narrow), input [batch,3,64,64].

Stem Conv7x7/2 + BatchNormalization + Relu + MaxPool3x3/2, then three stages of two
basic blocks (32, 64, 128 channels; stride 2 at the start of stages 2 and 3 with a
1x1 Conv+BN projection shortcut), residual Add + Relu, GlobalAveragePool, Flatten,
Gemm -> logits[batch,10]. BatchNormalization is left unfused (inference mode), as
torch.onnx.export emits with training=TrainingMode.PRESERVE / do_constant_folding=False.
Opset 17.
"""

from onnx import TensorProto

from .builder import GraphBuilder

OPSET = 17


def conv_bn(g, x, cin, cout, k, stride, relu):
    with g.scope("conv"):
        w = g.param("weight", (cout, cin, k, k), std=(2.0 / (cin * k * k)) ** 0.5)
        y = g.op("Conv", x, w, kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
    with g.scope("bn"):
        y = g.op(
            "BatchNormalization",
            y,
            g.param("weight", (cout,), std=0.1, mean=1.0),
            g.param("bias", (cout,), std=0.1),
            g.param("running_mean", (cout,), std=0.1),
            g.positive("running_var", (cout,)),
            epsilon=1e-5,
        )
    return g.op("Relu", y) if relu else y


def basic_block(g, x, cin, cout, stride):
    with g.scope("conv1"):
        h = conv_bn(g, x, cin, cout, 3, stride, relu=True)
    with g.scope("conv2"):
        h = conv_bn(g, h, cout, cout, 3, 1, relu=False)
    if stride != 1 or cin != cout:
        with g.scope("downsample"):
            x = conv_bn(g, x, cin, cout, 1, stride, relu=False)
    return g.op("Relu", g.op("Add", h, x))


def build(seed: int):
    g = GraphBuilder("resnet", seed)
    x = g.input("pixel_values", TensorProto.FLOAT, ["batch", 3, 64, 64])
    with g.scope("stem"):
        h = conv_bn(g, x, 3, 32, 7, 2, relu=True)
        h = g.op("MaxPool", h, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 32
    for s, cout in enumerate([32, 64, 128]):
        for b in range(2):
            with g.scope(f"layer{s + 1}.{b}"):
                h = basic_block(g, h, cin, cout, 2 if (b == 0 and s > 0) else 1)
            cin = cout
    h = g.op("Flatten", g.op("GlobalAveragePool", h), axis=1)
    with g.scope("fc"):
        h = g.op("Gemm", h, g.param("weight", (10, 128), std=0.05), g.param("bias", (10,)), transB=1)
    g.output(h, "logits", TensorProto.FLOAT, ["batch", 10])
    return g.make_model(OPSET, __doc__)
