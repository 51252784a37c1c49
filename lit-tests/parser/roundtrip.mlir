// RUN: memc opt %s --split-input-file
// Printing what the parser read gives the same text: every type, attribute kind and structure.

// Symbolic dims keep their names; unnamed `?` dims print as "".
module {
  func.func @symbolic(%arg0: tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, %arg1: tensor<?x4xf32>, %arg2: tensor<?x?x4xf32, #memc.dims<["", "seq"]>>) -> tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>> {
    %0 = "onnx.Relu"(%arg0) : (tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>) -> tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>
    return %0 : tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>
  }
}

// -----
// Computed dims are polynomials over symbols, in canonical order.
module {
  func.func @expressions(%arg0: tensor<?x?x768xf32, #memc.dims<["seq*batch", "1+past+seq"]>>) -> tensor<?x768xf32, #memc.dims<["2*batch*seq-batch"]>> {
    %0 = "memc.weight"() {value = dense_resource<"shape"> : tensor<2xi64>} : () -> tensor<2xi64>
    %1 = "onnx.Reshape"(%arg0, %0) : (tensor<?x?x768xf32, #memc.dims<["seq*batch", "1+past+seq"]>>, tensor<2xi64>) -> tensor<?x768xf32, #memc.dims<["2*batch*seq-batch"]>>
    return %1 : tensor<?x768xf32, #memc.dims<["2*batch*seq-batch"]>>
  }
}

// -----
// Every element type, and scalars.
module {
  func.func @elements(%arg0: tensor<f64>, %arg1: tensor<f32>, %arg2: tensor<2xf16>, %arg3: tensor<2xbf16>, %arg4: tensor<2xi64>, %arg5: tensor<2xi32>, %arg6: tensor<2xi16>, %arg7: tensor<2xi8>, %arg8: tensor<2xui8>, %arg9: tensor<8xi4>, %arg10: tensor<8xui4>, %arg11: tensor<2xi1>, %arg12: tensor<2xui16>, %arg13: tensor<2xui32>, %arg14: tensor<2xui64>, %arg15: tensor<0x3xf32>) {
    return
  }
}

// -----
// The float8 and float4 types (MLIR's builtin spellings) and the 2-bit integers, as values
// and as Cast's `to`.
module {
  func.func @narrow_elements(%arg0: tensor<2xf8E4M3FN>, %arg1: tensor<2xf8E4M3FNUZ>, %arg2: tensor<2xf8E5M2>, %arg3: tensor<2xf8E5M2FNUZ>, %arg4: tensor<2xf4E2M1FN>, %arg5: tensor<2xi2>, %arg6: tensor<2xui2>) -> tensor<2xf8E5M2FNUZ> {
    %0 = "onnx.Cast"(%arg0) {saturate = 0, to = f8E5M2FNUZ} : (tensor<2xf8E4M3FN>) -> tensor<2xf8E5M2FNUZ>
    return %0 : tensor<2xf8E5M2FNUZ>
  }
}

// -----
// Attributes of every kind; attribute dictionaries print sorted by name.
module {
  func.func @attributes(%arg0: tensor<2x3xf32>) -> tensor<2x3xf16> {
    %0 = "onnx.Cast"(%arg0) {saturate = 1, to = f16} : (tensor<2x3xf32>) -> tensor<2x3xf16>
    %1 = "onnx.LeakyRelu"(%arg0) {alpha = 1.0e-5} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %2 = "onnx.LeakyRelu"(%arg0) {alpha = -0.25} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %3 = "onnx.LeakyRelu"(%arg0) {alpha = 0x7FF0000000000000 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %4 = "onnx.LeakyRelu"(%arg0) {alpha = 0x7FF8000000000000 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %5 = "onnx.Gelu"(%arg0) {approximate = "tanh"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %6 = "onnx.Transpose"(%arg0) {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %7 = "onnx.Resize"(%arg0) {axes = [], coordinate_transformation_mode = "a \"quoted\" \\ name\n\09"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf16>
  }
}

// -----
// Weights are references into the weight store, spelled as MLIR dense resources.
module {
  func.func @weights(%arg0: tensor<4x8xf32>) -> tensor<4x16xf32> {
    %0 = "memc.weight"() {value = dense_resource<"layer.0/w"> : tensor<8x16xf32>} : () -> tensor<8x16xf32>
    %1 = "onnx.MatMul"(%arg0, %0) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    return %1 : tensor<4x16xf32>
  }
}

// -----
// Multi-result ops, locations, argument and result attributes, several results.
module {
  func.func @multi(%arg0: tensor<6x4xf32> {memc.name = "x"}) -> (tensor<3x4xf32> {memc.name = "a"}, tensor<3x4xf32>) {
    %0:2 = "onnx.Split"(%arg0) {axis = 0, num_outputs = 2} : (tensor<6x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) loc("split/node")
    return %0#1, %0#0 : tensor<3x4xf32>, tensor<3x4xf32>
  }
}

// -----
// Regions: onnx.If with a then and an else region; region ops see outer values.
module {
  func.func @regions(%arg0: tensor<i1>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "onnx.Relu"(%arg1) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "onnx.If"(%arg0) ({
      %2 = "onnx.Neg"(%0) : (tensor<4xf32>) -> tensor<4xf32>
      "onnx.Yield"(%2) : (tensor<4xf32>) -> ()
    }, {
      "onnx.Yield"(%arg1) : (tensor<4xf32>) -> ()
    }) : (tensor<i1>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}

// -----
// A left-out optional operand before a given one is `memc.none`, of type `none`.
module {
  func.func @left_out(%arg0: tensor<1x2x4x3xf32>, %arg1: tensor<4xi64>) -> tensor<?x?x?x?xf32> {
    %0 = "memc.none"() : () -> none
    %1 = "onnx.Resize"(%arg0, %0, %0, %arg1) {mode = "linear"} : (tensor<1x2x4x3xf32>, none, none, tensor<4xi64>) -> tensor<?x?x?x?xf32>
    return %1 : tensor<?x?x?x?xf32>
  }
}

// -----
// Hand-written variants normalize to the printed form: no `module`, named values, typed
// integers, `array<i64: ...>`, generic `func.return`, comments and odd spacing.
func.func @handwritten(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %t = "onnx.Transpose"(%x) {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>  // a comment
  %s = "onnx.Softmax"(%t)   {axis = 1 : i64}   : (tensor<3x2xf32>) -> tensor<3x2xf32>
  "func.return"(%s) : (tensor<3x2xf32>) -> ()
}
