// RUN: memc opt %s -p canonicalize,dce --print-ir-after-all
// --print-ir-after-all shows the IR after each pass on standard error.
func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Identity"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "onnx.Relu"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "onnx.Exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
