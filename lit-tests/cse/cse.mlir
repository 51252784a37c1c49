// RUN: memc opt %s -p cse --split-input-file
// cse merges equal pure ops; the later one's users read the earlier one.

func.func @duplicates(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Relu"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "onnx.Relu"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "onnx.Add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "onnx.Add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = "onnx.Mul"(%2, %3) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %4 : tensor<4xf32>
}

// -----
// Different attributes or operands keep ops apart; locations do not.
func.func @not_equal(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = "onnx.LeakyRelu"(%arg0) {alpha = 0.1} : (tensor<4xf32>) -> tensor<4xf32> loc("a")
  %1 = "onnx.LeakyRelu"(%arg0) {alpha = 0.2} : (tensor<4xf32>) -> tensor<4xf32> loc("b")
  %2 = "onnx.LeakyRelu"(%arg1) {alpha = 0.1} : (tensor<4xf32>) -> tensor<4xf32> loc("c")
  %3 = "onnx.LeakyRelu"(%arg0) {alpha = 0.1} : (tensor<4xf32>) -> tensor<4xf32> loc("d")
  %4 = "onnx.Add"(%0, %3) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %4, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----
// References to the same weight merge.
func.func @weights(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "memc.weight"() {value = dense_resource<"bias"> : tensor<4xf32>} : () -> tensor<4xf32>
  %1 = "memc.weight"() {value = dense_resource<"bias"> : tensor<4xf32>} : () -> tensor<4xf32>
  %2 = "onnx.Add"(%arg0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "onnx.Add"(%2, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----
// An op in a region reuses an equal op before it outside; an op outside never reuses one
// inside a region.
func.func @regions(%arg0: tensor<i1>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "onnx.Neg"(%arg1) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "onnx.If"(%arg0) ({
    %2 = "onnx.Neg"(%arg1) : (tensor<4xf32>) -> tensor<4xf32>
    %3 = "onnx.Exp"(%2) : (tensor<4xf32>) -> tensor<4xf32>
    "onnx.Yield"(%3) : (tensor<4xf32>) -> ()
  }, {
    "onnx.Yield"(%0) : (tensor<4xf32>) -> ()
  }) : (tensor<i1>) -> tensor<4xf32>
  %4 = "onnx.Exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1, %4 : tensor<4xf32>, tensor<4xf32>
}
