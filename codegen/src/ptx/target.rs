//! The CUDA backend's [`TargetInfo`](memc_ir::target::TargetInfo): what lowering and the
//! `egraph` pass may assume when a plan is compiled for `--target cuda`.
//!
//! The GPU kernels compute every type the CPU's do, so a model lowers to the same kernel IR for
//! both targets except where a policy below differs; that is what lets the tests compare the
//! two backends kernel for kernel. Data only: built with or without the `cuda` feature.

use memc_ir::target::{
    ConvPolicy, Im2colForm, NBitsPolicy, TargetInfo, NATIVE_TYPES, STORAGE_TYPES,
};
use memc_ir::ElemType;

/// The id of the packed low-bit weight layout the GPU's nbits kernels read: the CPU's layout,
/// whose 16-byte groups along `K` of one output column are what a warp reads coalesced.
pub const NBITS_LAYOUT: &str = "nbits v2";

/// The CUDA backend's description.
pub static CUDA: TargetInfo = TargetInfo {
    name: "cuda",
    compute_types: NATIVE_TYPES,
    storage_types: STORAGE_TYPES,
    contraction_types: &[ElemType::F64, ElemType::F32],
    // The PTX GEMM loads `B` tiles from strided memory only, so the column matrix is explicit,
    // in scratch within the conv scratch rule (a larger one falls back to products per tap).
    conv: ConvPolicy {
        im2col: Im2colForm::Explicit,
        im2col_min_terms: crate::cpu::target::IM2COL_MIN_TERMS,
        im2col_min_pixels: crate::cpu::target::IM2COL_MIN_PIXELS,
        scratch_per_thread: crate::cpu::target::CONV_SCRATCH_PER_THREAD,
        scratch_percent_of_bound: crate::cpu::target::CONV_SCRATCH_PERCENT_OF_BOUND,
    },
    nbits: NBitsPolicy {
        activation_types: &[ElemType::F32],
        layout: NBITS_LAYOUT,
        // The GPU's many-rows path dequantizes tiles into shared memory, not into the arena.
        stream_rows: u64::MAX,
    },
    max_fused_ops: crate::cpu::target::MAX_FUSED_OPS,
    // The PTX GEMM loads strided tiles of `A` itself.
    prepack_weights: false,
};

/// The CUDA backend's [`TargetInfo`].
pub fn target() -> &'static TargetInfo {
    &CUDA
}
