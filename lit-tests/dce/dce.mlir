// RUN: memc opt %s -p dce --split-input-file
// dce removes pure ops whose results nobody uses, chains included.

func.func @dead_chain(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Relu"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "onnx.Exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "onnx.Log"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "onnx.Neg"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----
// Unused arguments and weights used by live ops stay; an unused weight reference goes.
func.func @weights(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "memc.weight"() {value = dense_resource<"used"> : tensor<4xf32>} : () -> tensor<4xf32>
  %1 = "memc.weight"() {value = dense_resource<"unused"> : tensor<4xf32>} : () -> tensor<4xf32>
  %2 = "onnx.Add"(%arg0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----
// A multi-result op stays while any result is used.
func.func @multi_result(%arg0: tensor<6xf32>) -> tensor<3xf32> {
  %0:2 = "onnx.Split"(%arg0) {num_outputs = 2} : (tensor<6xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  %1:2 = "onnx.Split"(%arg0) {num_outputs = 2} : (tensor<6xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return %0#1 : tensor<3xf32>
}

// -----
// An unused If goes with its regions; dead ops inside a live If's regions go too.
func.func @regions(%arg0: tensor<i1>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.If"(%arg0) ({
    %1 = "onnx.Neg"(%arg1) : (tensor<4xf32>) -> tensor<4xf32>
    "onnx.Yield"(%1) : (tensor<4xf32>) -> ()
  }, {
    "onnx.Yield"(%arg1) : (tensor<4xf32>) -> ()
  }) : (tensor<i1>) -> tensor<4xf32>
  %2 = "onnx.If"(%arg0) ({
    %3 = "onnx.Exp"(%arg1) : (tensor<4xf32>) -> tensor<4xf32>
    "onnx.Yield"(%arg1) : (tensor<4xf32>) -> ()
  }, {
    "onnx.Yield"(%arg1) : (tensor<4xf32>) -> ()
  }) : (tensor<i1>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
