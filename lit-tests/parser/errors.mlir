// RUN: memc opt %s --split-input-file
// Every parse error names what is wrong and points at it.

func.func @unknown_op(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Frobnicate"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @case_typo(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.relu"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @undefined_value(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Relu"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @redefinition(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Relu"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %0 = "onnx.Relu"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @operand_type_mismatch(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Relu"(%arg0) : (tensor<5xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @unterminated_string(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Gelu"(%arg0) {approximate = "tanh} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @bad_element_type(%arg0: tensor<4xf8>) {
  return
}

// -----
func.func @unranked(%arg0: tensor<*xf32>) {
  return
}

// -----
func.func @bare_scalar_type(%arg0: f32) {
  return
}

// -----
func.func @missing_arrow(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Relu"(%arg0) : (tensor<4xf32>) tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @dim_names_count(%arg0: tensor<?x?xf32, #memc.dims<["batch"]>>) {
  return
}

// -----
func.func @result_count(%arg0: tensor<6xf32>) {
  %0 = "onnx.Split"(%arg0) {num_outputs = 2} : (tensor<6xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return
}

// -----
func.func @huge_integer(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Softmax"(%arg0) {axis = 99999999999999999999} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @result_index_out_of_range(%arg0: tensor<6xf32>) -> tensor<3xf32> {
  %0:2 = "onnx.Split"(%arg0) {num_outputs = 2} : (tensor<6xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return %0#2 : tensor<3xf32>
}

// -----
func.func @region_value_not_visible_outside(%arg0: tensor<i1>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.If"(%arg0) ({
    %1 = "onnx.Neg"(%arg1) : (tensor<4xf32>) -> tensor<4xf32>
    "onnx.Yield"(%1) : (tensor<4xf32>) -> ()
  }, {
    "onnx.Yield"(%arg1) : (tensor<4xf32>) -> ()
  }) : (tensor<i1>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----
func.func @malformed_dim_expression(%arg0: tensor<?xf32, #memc.dims<["2*"]>>) {
  return
}

// -----
func.func @unclosed_body(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Relu"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
