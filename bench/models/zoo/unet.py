"""unet: a small U-Net, input image[batch,3,64,64] -> mask logits[batch,2,64,64].

Encoder: two (Conv3x3+Relu)x2 stages (16, 32 channels) each followed by MaxPool2x2;
bottleneck (Conv3x3+Relu)x2 at 64 channels (16x16); decoder: ConvTranspose 2x2/2
upsampling, Concat with the matching encoder feature map (skip connection, axis 1),
(Conv3x3+Relu)x2; final 1x1 Conv to 2 classes. Opset 17. Skip connections keep
encoder activations alive across the whole decoder, which is what makes U-Nets
interesting for a memory planner.
"""

from onnx import TensorProto

from .builder import GraphBuilder

OPSET = 17


def conv(g, x, cin, cout, k=3, relu=True):
    w = g.param("weight", (cout, cin, k, k), std=(2.0 / (cin * k * k)) ** 0.5)
    b = g.param("bias", (cout,), std=0.01)
    y = g.op("Conv", x, w, b, kernel_shape=[k, k], pads=[k // 2] * 4)
    return g.op("Relu", y) if relu else y


def double_conv(g, x, cin, cout):
    with g.scope("conv1"):
        x = conv(g, x, cin, cout)
    with g.scope("conv2"):
        x = conv(g, x, cout, cout)
    return x


def build(seed: int):
    g = GraphBuilder("unet", seed)
    x = g.input("image", TensorProto.FLOAT, ["batch", 3, 64, 64])
    skips = []
    cin = 3
    for i, c in enumerate([16, 32]):
        with g.scope(f"down{i}"):
            x = double_conv(g, x, cin, c)
            skips.append((x, c))
            x = g.op("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2])
        cin = c
    with g.scope("bottleneck"):
        x = double_conv(g, x, cin, 64)
    cin = 64
    for i, (skip, c) in enumerate(reversed(skips)):
        with g.scope(f"up{i}"):
            with g.scope("upconv"):
                w = g.param("weight", (cin, c, 2, 2), std=(1.0 / (cin * 4)) ** 0.5)
                b = g.param("bias", (c,), std=0.01)
                x = g.op("ConvTranspose", x, w, b, kernel_shape=[2, 2], strides=[2, 2])
            x = g.op("Concat", x, skip, axis=1)
            x = double_conv(g, x, 2 * c, c)
        cin = c
    with g.scope("head"):
        x = conv(g, x, cin, 2, k=1, relu=False)
    g.output(x, "logits", TensorProto.FLOAT, ["batch", 2, 64, 64])
    return g.make_model(OPSET, __doc__)
