// RUN: memc opt %s -p dce
// Input that fails the verifier is rejected before any pass runs.
func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Relu"(%arg0) : (tensor<4xf32>) -> tensor<5xf32>
  return %arg0 : tensor<4xf32>
}
