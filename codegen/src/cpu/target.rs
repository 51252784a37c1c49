//! The CPU backend's [`TargetInfo`](memc_ir::target::TargetInfo) and the tuning constants behind it.
//!
//! Lowering, scratch sizing and the `egraph` pass read the CPU's facts through [`target()`](crate::cpu::target::target);
//! the CPU kernels (`cpu/nbits.rs`) and the packed-product validator read the same constants,
//! so what the plan reserves and what the kernels use are one number. This file needs no cargo
//! feature: it is data, compiled whether or not the Cranelift backend is.

use memc_ir::target::{
    ConvPolicy, Im2colForm, NBitsPolicy, TargetInfo, NATIVE_TYPES, STORAGE_TYPES,
};
use memc_ir::ElemType;

/// Products with more rows than this run `memc.matmul_nbits` as memc's GEMM with its `B`
/// panels dequantized from the packed weight into planned scratch (`cpu/nbits.rs`,
/// [`crate::nbits::scratch_bytes`]). Up to [`FEW_ROWS_MAX`] rows a kernel may instead decode each weight
/// once per pass of a few rows and multiply it into them (no scratch), where that is faster on
/// the CPU that runs the plan: AVX-512 up to 128 rows, AVX2 up to 7 (measured: `cpu/nbits.rs`).
pub const SMALL_ROWS: u64 = 7;
/// The most rows the few-rows form takes: AVX-512's bound, and any product's without scratch
/// (past it, the GEMM form packs on the threads' stacks).
pub const FEW_ROWS_MAX: u64 = 128;
/// Values of `K` one dequantized panel holds at most: the GEMM's `KC` for f32.
pub const TILE_K: u64 = memc_gemm::GEMM_KC_BYTES / 4;
/// The id of the packed low-bit weight layout the CPU's nbits kernels read (`crate::nbits`).
pub const NBITS_LAYOUT: &str = "nbits v2";

/// A convolution's scratch may take this many bytes per thread of its product (memc-gemm's
/// panels take 224 KiB per thread) ...
pub const CONV_SCRATCH_PER_THREAD: u64 = 256 << 10;
/// ... or this many hundredths of the model's activation lower bound, whichever is more
/// (`ConvPolicy::scratch_cap`).
pub const CONV_SCRATCH_PERCENT_OF_BOUND: u64 = 2;
/// im2col pays when each output sums over at least this many products (`c_g * taps`) ...
pub const IM2COL_MIN_TERMS: u64 = 8;
/// ... and each image has at least this many output pixels.
pub const IM2COL_MIN_PIXELS: u64 = 16;

/// The most ops one fused elementwise kernel computes (bounds a JIT function's size).
pub const MAX_FUSED_OPS: usize = 32;

/// The CPU backend's description.
pub static CPU: TargetInfo = TargetInfo {
    name: "cpu",
    // The narrow floats compute in f32, the sub-byte integers in i8/u8.
    compute_types: NATIVE_TYPES,
    storage_types: STORAGE_TYPES,
    // The GEMM crate runs f32 and f64 products; other types are loop kernels.
    contraction_types: &[ElemType::F64, ElemType::F32],
    // memc-gemm packs a convolution's `B` panels straight from its input: no column matrix.
    conv: ConvPolicy {
        im2col: Im2colForm::Implicit,
        im2col_min_terms: IM2COL_MIN_TERMS,
        im2col_min_pixels: IM2COL_MIN_PIXELS,
        scratch_per_thread: CONV_SCRATCH_PER_THREAD,
        scratch_percent_of_bound: CONV_SCRATCH_PERCENT_OF_BOUND,
    },
    nbits: NBitsPolicy {
        activation_types: &[ElemType::F32],
        layout: NBITS_LAYOUT,
        stream_rows: SMALL_ROWS,
    },
    max_fused_ops: MAX_FUSED_OPS,
    prepack_weights: true,
};

/// The CPU backend's [`TargetInfo`].
pub fn target() -> &'static TargetInfo {
    &CPU
}

/// The GEMM's blocking constants and the packing scratch they imply (`memc-gemm`), here with
/// the other tuning constants so that lowering and the kernels read one number.
pub use memc_gemm::{
    gemm_b_in_place, gemm_scratch_bound, GemmBlocking, GEMM_KC_BYTES, GEMM_MC, GEMM_MR, GEMM_NC,
    GEMM_NR_MAX, GEMM_PARALLEL_MACS, GEMM_SMALL_M, GEMM_THREADS,
};
