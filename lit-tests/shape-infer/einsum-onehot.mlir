// RUN: memc opt %s -p shape-infer --split-input-file
// Einsum's output from its equation (explicit or implicit, ellipsis dims broadcast, a symbolic
// batch kept); OneHot's depth from a known value, inserted at `axis`; LpPool's window; BitCast
// keeps the shape and takes `to`.

func.func @einsum(%a: tensor<?x2x3xf32, #memc.dims<["b"]>>, %b: tensor<?x3x4xf32, #memc.dims<["b"]>>, %d: tensor<7x5x5xf64>, %m: tensor<3x4xf32>) -> (tensor<?x?x?xf32>, tensor<?x?xf64>, tensor<?x?xf32>, tensor<?xf32>, tensor<?x?xf32>) {
  %0 = "onnx.Einsum"(%a, %b) {equation = "bij, bjk -> bik"} : (tensor<?x2x3xf32, #memc.dims<["b"]>>, tensor<?x3x4xf32, #memc.dims<["b"]>>) -> tensor<?x?x?xf32>
  %1 = "onnx.Einsum"(%d) {equation = "...ii->...i"} : (tensor<7x5x5xf64>) -> tensor<?x?xf64>
  %2 = "onnx.Einsum"(%m) {equation = "ij->ji"} : (tensor<3x4xf32>) -> tensor<?x?xf32>
  %3 = "onnx.Einsum"(%m) {equation = "ij->i"} : (tensor<3x4xf32>) -> tensor<?xf32>
  // Implicit output: the letters seen once, sorted (i k).
  %4 = "onnx.Einsum"(%m, %m) {equation = "ji,jk"} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<?x?xf32>
  return %0, %1, %2, %3, %4 : tensor<?x?x?xf32>, tensor<?x?xf64>, tensor<?x?xf32>, tensor<?xf32>, tensor<?x?xf32>
}

// -----
// The depth is the Size of a 10-element tensor; without a known depth the dim is unknown.
func.func @one_hot(%i: tensor<2x3xi64>, %ten: tensor<10xf32>, %v: tensor<2xf32>, %depth: tensor<i64>) -> (tensor<?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>) {
  %0 = "onnx.Size"(%ten) : (tensor<10xf32>) -> tensor<i64>
  %1 = "onnx.OneHot"(%i, %0, %v) : (tensor<2x3xi64>, tensor<i64>, tensor<2xf32>) -> tensor<?x?x?xf32>
  %2 = "onnx.OneHot"(%i, %0, %v) {axis = -3} : (tensor<2x3xi64>, tensor<i64>, tensor<2xf32>) -> tensor<?x?x?xf32>
  %3 = "onnx.OneHot"(%i, %depth, %v) {axis = 1} : (tensor<2x3xi64>, tensor<i64>, tensor<2xf32>) -> tensor<?x?x?xf32>
  return %1, %2, %3 : tensor<?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>
}

// -----
func.func @lp_pool_and_bit_cast(%x: tensor<1x3x32x32xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xi32>) {
  %0 = "onnx.LpPool"(%x) {kernel_shape = [5, 5], p = 3, strides = [3, 3]} : (tensor<1x3x32x32xf32>) -> tensor<?x?x?x?xf32>
  %1 = "onnx.BitCast"(%x) {to = i32} : (tensor<1x3x32x32xf32>) -> tensor<?x?x?x?xi32>
  return %0, %1 : tensor<?x?x?x?xf32>, tensor<?x?x?x?xi32>
}
