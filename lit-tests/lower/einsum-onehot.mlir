// RUN: memc compile %s --emit kernels --split-input-file
// Einsum: a batched matrix product is one `contract`; a diagonal, a sum and a transpose are loop
// kernels reading the operand through strides (the diagonal's stride is the sum of its dims').
// OneHot compares the index with the position, never addressing memory with it. LpPool sums
// |x|^p over guarded windows and takes the root. BitCast is a view: no kernel.

func.func @einsum_batch_matmul(%a: tensor<5x2x3xf64>, %b: tensor<5x3x4xf64>) -> tensor<5x2x4xf64> {
  %0 = "onnx.Einsum"(%a, %b) {equation = "bij, bjk -> bik"} : (tensor<5x2x3xf64>, tensor<5x3x4xf64>) -> tensor<5x2x4xf64>
  return %0 : tensor<5x2x4xf64>
}

// -----
func.func @einsum_diagonal_sum_transpose(%x: tensor<3x5x5xf32>, %m: tensor<3x4xi32>) -> (tensor<3x5xf32>, tensor<3xi32>, tensor<4x3xi32>) {
  %0 = "onnx.Einsum"(%x) {equation = "...ii->...i"} : (tensor<3x5x5xf32>) -> tensor<3x5xf32>
  %1 = "onnx.Einsum"(%m) {equation = "ij->i"} : (tensor<3x4xi32>) -> tensor<3xi32>
  %2 = "onnx.Einsum"(%m) {equation = "ij->ji"} : (tensor<3x4xi32>) -> tensor<4x3xi32>
  return %0, %1, %2 : tensor<3x5xf32>, tensor<3xi32>, tensor<4x3xi32>
}

// -----
func.func @one_hot(%i: tensor<2x2xf32>, %ten: tensor<10xf32>, %v: tensor<2xf32>) -> tensor<2x10x2xf32> {
  %0 = "onnx.Size"(%ten) : (tensor<10xf32>) -> tensor<i64>
  %1 = "onnx.OneHot"(%i, %0, %v) {axis = 1} : (tensor<2x2xf32>, tensor<i64>, tensor<2xf32>) -> tensor<2x10x2xf32>
  return %1 : tensor<2x10x2xf32>
}

// -----
func.func @lp_pool(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %0 = "onnx.LpPool"(%x) {auto_pad = "SAME_UPPER", kernel_shape = [2, 2], p = 3} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %0 : tensor<1x1x4x4xf32>
}

// -----
func.func @bit_cast(%x: tensor<3xf32>) -> tensor<3xi32> {
  %0 = "onnx.Relu"(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = "onnx.BitCast"(%0) {to = i32} : (tensor<3xf32>) -> tensor<3xi32>
  return %1 : tensor<3xi32>
}
