// RUN: memc opt %s -p canonicalize --split-input-file
// canonicalize folds ops that do nothing; it leaves dead producers for dce.

// Identity is removed; its users read its input.
func.func @identity(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Identity"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "onnx.Relu"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "onnx.Identity"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----
// A Reshape to the same type is removed, symbolic dims included.
func.func @reshape_identity(%arg0: tensor<?x8xf32, #memc.dims<["batch"]>>, %arg1: tensor<2xi64>) -> tensor<?x8xf32, #memc.dims<["batch"]>> {
  %0 = "onnx.Reshape"(%arg0, %arg1) : (tensor<?x8xf32, #memc.dims<["batch"]>>, tensor<2xi64>) -> tensor<?x8xf32, #memc.dims<["batch"]>>
  return %0 : tensor<?x8xf32, #memc.dims<["batch"]>>
}

// -----
// A Reshape that changes the shape stays; a Reshape of a Reshape reads the first input.
func.func @reshape_chain(%arg0: tensor<2x8xf32>, %arg1: tensor<1xi64>, %arg2: tensor<2xi64>) -> tensor<4x4xf32> {
  %0 = "onnx.Reshape"(%arg0, %arg1) : (tensor<2x8xf32>, tensor<1xi64>) -> tensor<16xf32>
  %1 = "onnx.Reshape"(%0, %arg2) : (tensor<16xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}

// -----
// Unknown dims are never assumed equal: this Reshape stays.
func.func @reshape_unknown(%arg0: tensor<?x8xf32>, %arg1: tensor<2xi64>) -> tensor<?x8xf32> {
  %0 = "onnx.Reshape"(%arg0, %arg1) : (tensor<?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----
// An identity permutation is removed; a real one stays.
func.func @transpose_identity(%arg0: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = "onnx.Transpose"(%arg0) {perm = [0, 1, 2]} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = "onnx.Transpose"(%0) {perm = [2, 0, 1]} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}

// -----
// Two Transposes that undo each other disappear.
func.func @transpose_inverse(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "onnx.Transpose"(%arg0) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = "onnx.Transpose"(%0) {perm = [1, 0]} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----
// Two Transposes compose into one.
func.func @transpose_compose(%arg0: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> {
  %0 = "onnx.Transpose"(%arg0) {perm = [1, 0, 2]} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %1 = "onnx.Transpose"(%0) {perm = [0, 2, 1]} : (tensor<3x2x4xf32>) -> tensor<3x4x2xf32>
  return %1 : tensor<3x4x2xf32>
}

// -----
// A Cast to the element type the input already has is removed; a real Cast stays.
func.func @cast(%arg0: tensor<4xf32>) -> tensor<4xf16> {
  %0 = "onnx.Cast"(%arg0) {to = f32} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "onnx.Cast"(%0) {to = f16} : (tensor<4xf32>) -> tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----
// Inference-mode Dropout (no mask, no training flag) is the identity.
func.func @dropout(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Dropout"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
// Folds apply inside regions too.
func.func @in_region(%arg0: tensor<i1>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.If"(%arg0) ({
    %1 = "onnx.Identity"(%arg1) : (tensor<4xf32>) -> tensor<4xf32>
    "onnx.Yield"(%1) : (tensor<4xf32>) -> ()
  }, {
    "onnx.Yield"(%arg1) : (tensor<4xf32>) -> ()
  }) : (tensor<i1>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
