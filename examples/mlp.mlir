// A two-layer MLP with a symbolic batch dim, written as memc's importer will write it.
// Run: memc opt examples/mlp.mlir -p canonicalize,cse,dce
module {
  func.func @mlp(%arg0: tensor<?x784xf32, #memc.dims<["batch"]>> {memc.name = "input"}) -> (tensor<?x10xf32, #memc.dims<["batch"]>> {memc.name = "logits"}) {
    %0 = "memc.weight"() {value = dense_resource<"fc1.weight"> : tensor<784x256xf32>} : () -> tensor<784x256xf32>
    %1 = "memc.weight"() {value = dense_resource<"fc1.bias"> : tensor<256xf32>} : () -> tensor<256xf32>
    %2 = "memc.weight"() {value = dense_resource<"fc2.weight"> : tensor<256x10xf32>} : () -> tensor<256x10xf32>
    %3 = "memc.weight"() {value = dense_resource<"fc2.bias"> : tensor<10xf32>} : () -> tensor<10xf32>
    %4 = "onnx.Identity"(%arg0) : (tensor<?x784xf32, #memc.dims<["batch"]>>) -> tensor<?x784xf32, #memc.dims<["batch"]>> loc("input_identity")
    %5 = "onnx.MatMul"(%4, %0) : (tensor<?x784xf32, #memc.dims<["batch"]>>, tensor<784x256xf32>) -> tensor<?x256xf32, #memc.dims<["batch"]>> loc("fc1/MatMul")
    %6 = "onnx.Add"(%5, %1) : (tensor<?x256xf32, #memc.dims<["batch"]>>, tensor<256xf32>) -> tensor<?x256xf32, #memc.dims<["batch"]>> loc("fc1/Add")
    %7 = "onnx.Relu"(%6) : (tensor<?x256xf32, #memc.dims<["batch"]>>) -> tensor<?x256xf32, #memc.dims<["batch"]>> loc("relu")
    %8 = "onnx.Relu"(%6) : (tensor<?x256xf32, #memc.dims<["batch"]>>) -> tensor<?x256xf32, #memc.dims<["batch"]>> loc("relu_dup")
    %9 = "onnx.Transpose"(%7) {perm = [0, 1]} : (tensor<?x256xf32, #memc.dims<["batch"]>>) -> tensor<?x256xf32, #memc.dims<["batch"]>>
    %10 = "onnx.MatMul"(%9, %2) : (tensor<?x256xf32, #memc.dims<["batch"]>>, tensor<256x10xf32>) -> tensor<?x10xf32, #memc.dims<["batch"]>> loc("fc2/MatMul")
    %11 = "onnx.Add"(%10, %3) : (tensor<?x10xf32, #memc.dims<["batch"]>>, tensor<10xf32>) -> tensor<?x10xf32, #memc.dims<["batch"]>> loc("fc2/Add")
    %12 = "onnx.Sigmoid"(%8) : (tensor<?x256xf32, #memc.dims<["batch"]>>) -> tensor<?x256xf32, #memc.dims<["batch"]>>
    return %11 : tensor<?x10xf32, #memc.dims<["batch"]>>
  }
}
