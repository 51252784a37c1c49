//! Lowering from planned IR to kernels. (Being written.)
