// RUN: memc opt examples/mlp.mlir -p canonicalize,cse,dce
// The bundled example through the default cleanup pipeline (the README's main command).
