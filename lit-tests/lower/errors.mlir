// RUN: memc compile %s --emit kernels --split-input-file
// What the CPU backend cannot lower is reported as one error naming every such op and why.

// f16 arithmetic: the CPU kernels compute f32 and f64, not f16.
func.func @f16_add(%x: tensor<4xf16>, %y: tensor<4xf16>) -> tensor<4xf16> {
  %0 = "onnx.Add"(%x, %y) : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----
// If with a condition known only at run time: the memory planner refuses regions before
// lowering would (lowering has no kernel for it either).
func.func @if_unknown(%c: tensor<i1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.If"(%c) ({
    %1 = "onnx.Neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    "onnx.Yield"(%1) : (tensor<4xf32>) -> ()
  }, {
    "onnx.Yield"(%x) : (tensor<4xf32>) -> ()
  }) : (tensor<i1>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
// bf16 has no kernels at all; two ops fail, both are named.
func.func @bf16(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = "onnx.Neg"(%x) : (tensor<4xbf16>) -> tensor<4xbf16>
  %1 = "onnx.Abs"(%0) : (tensor<4xbf16>) -> tensor<4xbf16>
  return %1 : tensor<4xbf16>
}

// -----
// Symbolic dims must be bound before memory is planned.
func.func @symbolic(%x: tensor<?x4xf32, #memc.dims<["batch"]>>) -> tensor<?x4xf32, #memc.dims<["batch"]>> {
  %0 = "onnx.Relu"(%x) : (tensor<?x4xf32, #memc.dims<["batch"]>>) -> tensor<?x4xf32, #memc.dims<["batch"]>>
  return %0 : tensor<?x4xf32, #memc.dims<["batch"]>>
}
