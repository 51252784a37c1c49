// RUN: memc compile %s --emit kernels --split-input-file
// What the CPU backend cannot lower is reported as one error naming every such op and why.

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
// Kernels loop over at most 16 axes; two ops fail, both are named.
func.func @rank17(%x: tensor<1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x2xf32>) -> tensor<1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x2xf32> {
  %0 = "onnx.Neg"(%x) : (tensor<1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x2xf32>) -> tensor<1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x2xf32>
  %1 = "onnx.Abs"(%0) : (tensor<1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x2xf32>) -> tensor<1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x2xf32>
  return %1 : tensor<1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x2xf32>
}

// -----
// Symbolic dims must be bound before memory is planned.
func.func @symbolic(%x: tensor<?x4xf32, #memc.dims<["batch"]>>) -> tensor<?x4xf32, #memc.dims<["batch"]>> {
  %0 = "onnx.Relu"(%x) : (tensor<?x4xf32, #memc.dims<["batch"]>>) -> tensor<?x4xf32, #memc.dims<["batch"]>>
  return %0 : tensor<?x4xf32, #memc.dims<["batch"]>>
}
