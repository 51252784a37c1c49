// RUN: memc opt %s -p shape-infer
// Floor, Ceil and Relu fold on known floats, as an expanded Range computes its trip count
// (`Relu(Ceil((limit - start) / delta))`, cast to i64): here Ceil(5 / 2) = 3, Floor(5 / 2) = 2
// and Relu(-3) = 0 give the sizes of three ConstantOfShape results.
func.func @float_folds(%five: tensor<5xf32>, %two: tensor<2xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %0 = "onnx.Shape"(%five) : (tensor<5xf32>) -> tensor<?xi64>
  %1 = "onnx.Cast"(%0) {to = f32} : (tensor<?xi64>) -> tensor<?xf32>
  %2 = "onnx.Shape"(%two) : (tensor<2xf32>) -> tensor<?xi64>
  %3 = "onnx.Cast"(%2) {to = f32} : (tensor<?xi64>) -> tensor<?xf32>
  %4 = "onnx.Div"(%1, %3) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  %5 = "onnx.Ceil"(%4) : (tensor<?xf32>) -> tensor<?xf32>
  %6 = "onnx.Relu"(%5) : (tensor<?xf32>) -> tensor<?xf32>
  %7 = "onnx.Cast"(%6) {to = i64} : (tensor<?xf32>) -> tensor<?xi64>
  %8 = "onnx.ConstantOfShape"(%7) : (tensor<?xi64>) -> tensor<?xf32>
  %9 = "onnx.Floor"(%4) : (tensor<?xf32>) -> tensor<?xf32>
  %10 = "onnx.Cast"(%9) {to = i64} : (tensor<?xf32>) -> tensor<?xi64>
  %11 = "onnx.ConstantOfShape"(%10) : (tensor<?xi64>) -> tensor<?xf32>
  %12 = "onnx.Neg"(%5) : (tensor<?xf32>) -> tensor<?xf32>
  %13 = "onnx.Relu"(%12) : (tensor<?xf32>) -> tensor<?xf32>
  %14 = "onnx.Cast"(%13) {to = i64} : (tensor<?xf32>) -> tensor<?xi64>
  %15 = "onnx.ConstantOfShape"(%14) : (tensor<?xi64>) -> tensor<?xf32>
  return %8, %11, %15 : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
}
