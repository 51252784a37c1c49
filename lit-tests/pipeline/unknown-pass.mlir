// RUN: memc opt %s -p canonicalize,fuse-everything
// An unknown pass name is an error that lists the passes memc has.
func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  return %arg0 : tensor<4xf32>
}
