// RUN: memc opt %s --split-input-file
// Every verifier error names the op, the rule it breaks, and points at the op.

func.func @operand_count(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Add"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @element_type_not_allowed(%arg0: tensor<4xi1>) -> tensor<4xi1> {
  %0 = "onnx.Relu"(%arg0) : (tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----
func.func @type_variable_mismatch(%arg0: tensor<4xf32>, %arg1: tensor<4xf16>) -> tensor<4xf32> {
  %0 = "onnx.Add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @unknown_attribute(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Relu"(%arg0) {alpha = 0.5} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @missing_required_attribute(%arg0: tensor<4xf32>) -> tensor<8xf32> {
  %0 = "onnx.Concat"(%arg0, %arg0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----
func.func @attribute_kind(%arg0: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = "onnx.Transpose"(%arg0) {perm = "1,0"} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----
func.func @perm_not_a_permutation(%arg0: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = "onnx.Transpose"(%arg0) {perm = [1, 1]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----
func.func @matmul_inner_dims(%arg0: tensor<2x3xf32>, %arg1: tensor<4x5xf32>) -> tensor<2x5xf32> {
  %0 = "onnx.MatMul"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----
func.func @result_shape_disagrees(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x4xf32> {
  %0 = "onnx.Add"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----
func.func @axis_out_of_range(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "onnx.Softmax"(%arg0) {axis = 2} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----
func.func @return_type(%arg0: tensor<4xf32>) -> tensor<4xf16> {
  return %arg0 : tensor<4xf32>
}

// -----
func.func @missing_return(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Relu"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
}

// -----
func.func @terminator_not_last(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  return %arg0 : tensor<4xf32>
  %0 = "onnx.Relu"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
}

// -----
func.func @if_region_without_yield(%arg0: tensor<i1>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.If"(%arg0) ({
    %1 = "onnx.Neg"(%arg1) : (tensor<4xf32>) -> tensor<4xf32>
  }, {
    "onnx.Yield"(%arg1) : (tensor<4xf32>) -> ()
  }) : (tensor<i1>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @weight_type(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "memc.weight"() {value = dense_resource<"w"> : tensor<4xf32>} : () -> tensor<5xf32>
  return %arg0 : tensor<4xf32>
}

// -----
func.func @size_overflow(%arg0: tensor<4294967296x4294967296x16xf32>) {
  return
}

// -----
func.func @cast_result_type(%arg0: tensor<4xf32>) -> tensor<4xi32> {
  %0 = "onnx.Cast"(%arg0) {to = f16} : (tensor<4xf32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----
func.func @none_for_a_required_operand(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "memc.none"() : () -> none
  %1 = "onnx.Add"(%arg0, %0) : (tensor<4xf32>, none) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----
// Several errors in one function are all reported.
func.func @several(%arg0: tensor<2x3xf32>, %arg1: tensor<4xi64>) -> tensor<2x3xf32> {
  %0 = "onnx.Gemm"(%arg0, %arg0) {transB = 0} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>
  %1 = "onnx.Concat"(%arg0, %arg1) {axis = 0} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x3xf32>
  %2 = "onnx.Reshape"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<7xf32>
  return %1 : tensor<2x3xf32>
}

// -----
func.func @einsum_bad_equation(%arg0: tensor<3x4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Einsum"(%arg0) {equation = "ij->k"} : (tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @einsum_label_sizes_differ(%arg0: tensor<3x4xf32>, %arg1: tensor<5x2xf32>) -> tensor<3x2xf32> {
  %0 = "onnx.Einsum"(%arg0, %arg1) {equation = "ij,jk->ik"} : (tensor<3x4xf32>, tensor<5x2xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----
func.func @one_hot_values_not_a_pair(%arg0: tensor<3xi64>, %arg1: tensor<i64>, %arg2: tensor<3xf32>) -> tensor<3x?xf32> {
  %0 = "onnx.OneHot"(%arg0, %arg1, %arg2) : (tensor<3xi64>, tensor<i64>, tensor<3xf32>) -> tensor<3x?xf32>
  return %0 : tensor<3x?xf32>
}

// -----
func.func @lp_pool_p_zero(%arg0: tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32> {
  %0 = "onnx.LpPool"(%arg0) {kernel_shape = [2, 2], p = 0} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----
func.func @bit_cast_width_differs(%arg0: tensor<4xf32>) -> tensor<4xf64> {
  %0 = "onnx.BitCast"(%arg0) {to = f64} : (tensor<4xf32>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}
