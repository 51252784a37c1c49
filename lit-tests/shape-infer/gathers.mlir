// RUN: memc opt %s -p shape-infer --split-input-file
// GatherElements and GatherND, as PyTorch's exporters emit them (BERT token types, the dynamo
// exporter's mask indexing), and HardSwish (MobileNetV3).

func.func @gather_elements(%arg0: tensor<1x512xi64>, %arg1: tensor<1x?xi64, #memc.dims<["seq"]>>) -> tensor<?x?xi64> {
  %0 = "onnx.GatherElements"(%arg0, %arg1) {axis = 1} : (tensor<1x512xi64>, tensor<1x?xi64, #memc.dims<["seq"]>>) -> tensor<?x?xi64>
  return %0 : tensor<?x?xi64>
}

// -----
func.func @gather_nd_mask(%arg0: tensor<?x?xi1, #memc.dims<["batch", "seq"]>>, %arg1: tensor<?x1x1x?x2xi64, #memc.dims<["batch", "seq"]>>) -> tensor<?x?x?x?xi1> {
  %0 = "onnx.GatherND"(%arg0, %arg1) : (tensor<?x?xi1, #memc.dims<["batch", "seq"]>>, tensor<?x1x1x?x2xi64, #memc.dims<["batch", "seq"]>>) -> tensor<?x?x?x?xi1>
  return %0 : tensor<?x?x?x?xi1>
}

// -----
func.func @gather_nd_batch_dims(%arg0: tensor<2x3x4x5xf32>, %arg1: tensor<2x7x1xi64>) -> tensor<?x?x?x?xf32> {
  %0 = "onnx.GatherND"(%arg0, %arg1) {batch_dims = 1} : (tensor<2x3x4x5xf32>, tensor<2x7x1xi64>) -> tensor<?x?x?x?xf32>
  return %0 : tensor<?x?x?x?xf32>
}

// -----
func.func @gather_nd_too_deep(%arg0: tensor<2x3xf32>, %arg1: tensor<4x3xi64>) -> tensor<?xf32> {
  %0 = "onnx.GatherND"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<4x3xi64>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----
func.func @hard_swish(%arg0: tensor<?x16x8x8xf32, #memc.dims<["batch"]>>) -> tensor<?x16x8x8xf32, #memc.dims<["batch"]>> {
  %0 = "onnx.HardSwish"(%arg0) : (tensor<?x16x8x8xf32, #memc.dims<["batch"]>>) -> tensor<?x16x8x8xf32, #memc.dims<["batch"]>>
  return %0 : tensor<?x16x8x8xf32, #memc.dims<["batch"]>>
}
