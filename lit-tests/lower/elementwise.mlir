// RUN: memc compile %s --emit kernels --split-input-file
// Elementwise lowering: one loop kernel whose outer space is the output shape and whose views
// broadcast with zero strides; consecutive single-use elementwise ops fuse into the kernel of
// the last one (the earlier steps have no kernel).

// Broadcast: [2x3] + [3] reads the bias with stride 0 along the rows. Names of arguments,
// results and ops (`memc.name`, `loc`) are the program's I/O names and step labels.
func.func @add_broadcast(%x: tensor<2x3xf32> {memc.name = "x"}, %b: tensor<3xf32> {memc.name = "bias"}) -> (tensor<2x3xf32> {memc.name = "y"}) {
  %0 = "onnx.Add"(%x, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("add")
  return %0 : tensor<2x3xf32>
}

// -----
// Broadcast on both sides: [4x1] * [1x5] is an outer product.
func.func @mul_outer(%x: tensor<4x1xf32>, %y: tensor<1x5xf32>) -> tensor<4x5xf32> {
  %0 = "onnx.Mul"(%x, %y) : (tensor<4x1xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----
// A fused chain: Mul, Add, Relu become one kernel at the Relu's step.
func.func @fused_chain(%x: tensor<8xf32>, %s: tensor<8xf32>, %t: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "onnx.Mul"(%x, %s) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = "onnx.Add"(%0, %t) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = "onnx.Relu"(%1) : (tensor<8xf32>) -> tensor<8xf32>
  return %2 : tensor<8xf32>
}

// -----
// Comparison, Where and Cast: bool values and a conversion in one kernel.
func.func @where_cast(%x: tensor<6xf32>, %y: tensor<6xf32>) -> tensor<6xi32> {
  %0 = "onnx.Less"(%x, %y) : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xi1>
  %1 = "onnx.Where"(%0, %x, %y) : (tensor<6xi1>, tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  %2 = "onnx.Cast"(%1) {to = i32} : (tensor<6xf32>) -> tensor<6xi32>
  return %2 : tensor<6xi32>
}

// -----
// A weight operand is read from the weights section; the constant of Gelu's tanh form is inline.
func.func @weight_operand(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = "memc.weight"() {value = dense_resource<"scale"> : tensor<4xf32>} : () -> tensor<4xf32>
  %1 = "onnx.Mul"(%x, %0) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %2 = "onnx.Gelu"(%1) {approximate = "tanh"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %2 : tensor<2x4xf32>
}
