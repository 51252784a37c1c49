// RUN: memc opt %s --split-input-file
// A bounded dim (`<=N`: an extent known only at run time) is produced only by the ops that
// write one, where their shape function puts it, and read only by `func.return`.

// NonZero's result prints, parses and verifies; it may be a graph output.
func.func @non_zero(%x: tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=6"]>> {
  %0 = "onnx.NonZero"(%x) : (tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=6"]>>
  return %0 : tensor<2x?xi64, #memc.dims<["<=6"]>>
}

// -----
// A bounded value flowing into an op not marked to accept one.
func.func @bounded_operand(%x: tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=6"]>> {
  %0 = "onnx.NonZero"(%x) : (tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=6"]>>
  %1 = "onnx.Neg"(%0) : (tensor<2x?xi64, #memc.dims<["<=6"]>>) -> tensor<2x?xi64, #memc.dims<["<=6"]>>
  return %1 : tensor<2x?xi64, #memc.dims<["<=6"]>>
}

// -----
// A bound other than the one the operands imply.
func.func @wrong_bound(%x: tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=5"]>> {
  %0 = "onnx.NonZero"(%x) : (tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=5"]>>
  return %0 : tensor<2x?xi64, #memc.dims<["<=5"]>>
}

// -----
// A function argument with a bounded dim.
func.func @bounded_argument(%x: tensor<?xf32, #memc.dims<["<=4"]>>) -> tensor<?xf32, #memc.dims<["<=4"]>> {
  return %x : tensor<?xf32, #memc.dims<["<=4"]>>
}

// -----
// A malformed bound.
func.func @malformed(%x: tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=six"]>> {
  %0 = "onnx.NonZero"(%x) : (tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=six"]>>
  return %0 : tensor<2x?xi64, #memc.dims<["<=six"]>>
}
