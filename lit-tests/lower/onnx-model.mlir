// RUN: memc compile examples/classifier.onnx --emit kernels --dim batch=2
// `--emit kernels` on an ONNX model: the bundled classifier (Conv + Relu + MaxPool, Conv +
// Relu, GlobalAveragePool, Flatten, Gemm, Softmax) through the same stages as a plan file,
// printed as its lowered program. The convolutions take the implicit im2col form (no scratch).
