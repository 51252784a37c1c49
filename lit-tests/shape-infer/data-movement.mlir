// RUN: memc opt %s -p shape-infer --split-input-file
// Data movement with known operand values: Split, Slice, Pad, Tile, Resize, Squeeze,
// Unsqueeze, reductions. Constants come from `Shape` of static placeholder arguments (the
// text format carries no weight values): `Shape(tensor<2x5xf32>)` is [2, 5].

// Split by num_outputs: the last part is smaller; by sizes; symbolic halves.
func.func @split(%x: tensor<7x4xf32>, %sizes: tensor<2x5xf32>, %y: tensor<?x4xf32, #memc.dims<["2*seq"]>>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %0:3 = "onnx.Split"(%x) {axis = 0, num_outputs = 3} : (tensor<7x4xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>)
  %1 = "onnx.Shape"(%sizes) : (tensor<2x5xf32>) -> tensor<?xi64>
  %2:2 = "onnx.Split"(%x, %1) {axis = 0} : (tensor<7x4xf32>, tensor<?xi64>) -> (tensor<?x?xf32>, tensor<?x?xf32>)
  %3:2 = "onnx.Split"(%y) {axis = 0} : (tensor<?x4xf32, #memc.dims<["2*seq"]>>) -> (tensor<?x?xf32>, tensor<?x?xf32>)
  return %0#0, %0#1, %0#2, %2#0, %2#1, %3#0, %3#1 : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}

// -----
// Slice rows 2..7 by 2: starts [2] and ends [7] are Shape(tensor<2x7xf32>) split in two,
// axes [0] is Shape(tensor<0xf32>), steps [2] is Shape(tensor<2xf32>). On the symbolic axis,
// [0, Shape(x)[1]) is the whole axis and keeps its name; [2, 7) of it is unknown.
func.func @slice(%x: tensor<10x?xf32, #memc.dims<["seq"]>>, %bounds: tensor<2x7xf32>, %axis0: tensor<0xf32>, %axis1: tensor<1xf32>, %step: tensor<2xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %0 = "onnx.Shape"(%bounds) : (tensor<2x7xf32>) -> tensor<?xi64>
  %1:2 = "onnx.Split"(%0) {axis = 0, num_outputs = 2} : (tensor<?xi64>) -> (tensor<?xi64>, tensor<?xi64>)
  %2 = "onnx.Shape"(%axis0) : (tensor<0xf32>) -> tensor<?xi64>
  %3 = "onnx.Shape"(%step) : (tensor<2xf32>) -> tensor<?xi64>
  %4 = "onnx.Slice"(%x, %1#0, %1#1, %2, %3) : (tensor<10x?xf32, #memc.dims<["seq"]>>, tensor<?xi64>, tensor<?xi64>, tensor<?xi64>, tensor<?xi64>) -> tensor<?x?xf32>
  %5 = "onnx.Shape"(%axis1) : (tensor<1xf32>) -> tensor<?xi64>
  %6 = "onnx.Shape"(%x) {start = 1} : (tensor<10x?xf32, #memc.dims<["seq"]>>) -> tensor<?xi64>
  %7 = "onnx.Slice"(%x, %2, %6, %5) : (tensor<10x?xf32, #memc.dims<["seq"]>>, tensor<?xi64>, tensor<?xi64>, tensor<?xi64>) -> tensor<?x?xf32>
  %8 = "onnx.Slice"(%x, %1#0, %1#1, %5) : (tensor<10x?xf32, #memc.dims<["seq"]>>, tensor<?xi64>, tensor<?xi64>, tensor<?xi64>) -> tensor<?x?xf32>
  return %4, %7, %8 : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}

// -----
// Pad grows each axis by its begin and end pads ([1, 0] and [2, 1]); Tile multiplies by
// [2, 4]; Resize takes `sizes` (empty `roi` and `scales` stand for absent ones).
func.func @pad_tile_resize(%x: tensor<?x3xf32, #memc.dims<["seq"]>>, %pads: tensor<1x0x2x1xf32>, %repeats: tensor<2x4xf32>, %img: tensor<1x3x8x8xf32>, %none: tensor<0xf32>, %sizes: tensor<1x3x16x4xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?x?x?xf32>) {
  %0 = "onnx.Shape"(%pads) : (tensor<1x0x2x1xf32>) -> tensor<?xi64>
  %1 = "onnx.Pad"(%x, %0) : (tensor<?x3xf32, #memc.dims<["seq"]>>, tensor<?xi64>) -> tensor<?x?xf32>
  %2 = "onnx.Shape"(%repeats) : (tensor<2x4xf32>) -> tensor<?xi64>
  %3 = "onnx.Tile"(%x, %2) : (tensor<?x3xf32, #memc.dims<["seq"]>>, tensor<?xi64>) -> tensor<?x?xf32>
  %4 = "onnx.Shape"(%sizes) : (tensor<1x3x16x4xf32>) -> tensor<?xi64>
  %5 = "onnx.Resize"(%img, %none, %none, %4) {mode = "nearest"} : (tensor<1x3x8x8xf32>, tensor<0xf32>, tensor<0xf32>, tensor<?xi64>) -> tensor<?x?x?x?xf32>
  return %1, %3, %5 : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?x?x?xf32>
}

// -----
// Unsqueeze inserts 1s at result positions [0, 3]; reductions keep or drop the reduced
// axes; Squeeze without axes cannot tell whether a symbolic dim is 1, so its type stays.
func.func @axes(%x: tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, %axes: tensor<0x3xf32>, %last: tensor<2xf32>) -> (tensor<?x?x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, tensor<?x?x?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %0 = "onnx.Shape"(%axes) : (tensor<0x3xf32>) -> tensor<?xi64>
  %1 = "onnx.Unsqueeze"(%x, %0) : (tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, tensor<?xi64>) -> tensor<?x?x?x?x?xf32>
  %2 = "onnx.Shape"(%last) : (tensor<2xf32>) -> tensor<?xi64>
  %3 = "onnx.ReduceMean"(%x, %2) : (tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>, tensor<?xi64>) -> tensor<?x?x?xf32>
  %4 = "onnx.ReduceSum"(%x) {axes = [1, 2], keepdims = 0} : (tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>) -> tensor<?xf32>
  %5 = "onnx.ReduceMax"(%1, %2) {keepdims = 0} : (tensor<?x?x?x?x?xf32>, tensor<?xi64>) -> tensor<?x?x?x?xf32>
  %6 = "onnx.Squeeze"(%3, %2) : (tensor<?x?x?xf32>, tensor<?xi64>) -> tensor<?x?xf32>
  %7 = "onnx.Squeeze"(%3) : (tensor<?x?x?xf32>) -> tensor<?x?xf32>
  return %1, %3, %4, %5, %6, %7 : tensor<?x?x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, tensor<?x?x?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}

// -----
// Branches that agree give the If its type; function results follow what is returned.
func.func @branches(%c: tensor<i1>, %x: tensor<?x4xf32, #memc.dims<["batch"]>>) -> tensor<?x?xf32> {
  %0 = "onnx.If"(%c) ({
    %1 = "onnx.Relu"(%x) : (tensor<?x4xf32, #memc.dims<["batch"]>>) -> tensor<?x?xf32>
    "onnx.Yield"(%1) : (tensor<?x?xf32>) -> ()
  }, {
    %1 = "onnx.Neg"(%x) : (tensor<?x4xf32, #memc.dims<["batch"]>>) -> tensor<?x?xf32>
    "onnx.Yield"(%1) : (tensor<?x?xf32>) -> ()
  }) : (tensor<i1>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----
// Branches that differ: each yielded value keeps the If's own dim where they disagree.
func.func @branches_differ(%c: tensor<i1>, %x: tensor<2x4xf32>, %y: tensor<3x4xf32>) -> tensor<?x?xf32> {
  %0 = "onnx.If"(%c) ({
    %1 = "onnx.Relu"(%x) : (tensor<2x4xf32>) -> tensor<?x?xf32>
    "onnx.Yield"(%1) : (tensor<?x?xf32>) -> ()
  }, {
    %1 = "onnx.Relu"(%y) : (tensor<3x4xf32>) -> tensor<?x?xf32>
    "onnx.Yield"(%1) : (tensor<?x?xf32>) -> ()
  }) : (tensor<i1>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----
// Quantization: DequantizeLinear gives the scale's type, QuantizeLinear the zero point's.
func.func @quantize(%x: tensor<?x64xf32, #memc.dims<["n"]>>, %scale: tensor<f32>, %zp: tensor<i8>) -> (tensor<?x?xi8>, tensor<?x?xf32>) {
  %0 = "onnx.QuantizeLinear"(%x, %scale, %zp) : (tensor<?x64xf32, #memc.dims<["n"]>>, tensor<f32>, tensor<i8>) -> tensor<?x?xi8>
  %1 = "onnx.DequantizeLinear"(%0, %scale, %zp) : (tensor<?x?xi8>, tensor<f32>, tensor<i8>) -> tensor<?x?xf32>
  return %0, %1 : tensor<?x?xi8>, tensor<?x?xf32>
}
