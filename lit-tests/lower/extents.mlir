// RUN: memc compile %s --emit kernels --split-input-file
// Ops with a run-time extent: the result is planned for its bound, with an i64 extent slot
// after its elements. A first kernel zeroes the slot; NonZero and Compress are then one
// sequential row that reads the count from the slot (an indirect load), stores at the position
// it names (an indirect store) and adds 1 where the element is kept (an accumulating store).

func.func @non_zero(%x: tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=6"]>> {
  %0 = "onnx.NonZero"(%x) : (tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=6"]>>
  return %0 : tensor<2x?xi64, #memc.dims<["<=6"]>>
}

// -----
// Compress along axis 1: the row walks the compressed axis outermost; the count grows at the
// last point of each slice.
func.func @compress_axis(%x: tensor<3x2xf32>, %c: tensor<2xi1>) -> tensor<3x?xf32, #memc.dims<["<=2"]>> {
  %0 = "onnx.Compress"(%x, %c) {axis = 1} : (tensor<3x2xf32>, tensor<2xi1>) -> tensor<3x?xf32, #memc.dims<["<=2"]>>
  return %0 : tensor<3x?xf32, #memc.dims<["<=2"]>>
}

// -----
// Unique (sorted): first-occurrence marks in scratch, then rank, first index and count per
// element, then the number of distinct values into each extent slot.
func.func @unique(%x: tensor<6xf32>) -> (tensor<?xf32, #memc.dims<["<=6"]>>, tensor<?xi64, #memc.dims<["<=6"]>>, tensor<6xi64>, tensor<?xi64, #memc.dims<["<=6"]>>) {
  %0:4 = "onnx.Unique"(%x) : (tensor<6xf32>) -> (tensor<?xf32, #memc.dims<["<=6"]>>, tensor<?xi64, #memc.dims<["<=6"]>>, tensor<6xi64>, tensor<?xi64, #memc.dims<["<=6"]>>)
  return %0#0, %0#1, %0#2, %0#3 : tensor<?xf32, #memc.dims<["<=6"]>>, tensor<?xi64, #memc.dims<["<=6"]>>, tensor<6xi64>, tensor<?xi64, #memc.dims<["<=6"]>>
}
