//! What a code generation backend computes and prefers: the [`TargetInfo`] that passes and
//! lowering read instead of hard-wiring one backend's facts.
//!
//! The type lives here, at the bottom of the crate chain, so that every stage can read it: the
//! `egraph` pass (memc-passes) asks which activation element types the fused low-bit product
//! computes before it fuses; lowering and scratch sizing (memc-codegen) ask which forms a
//! convolution or a product takes and how much scratch memory they may plan. Each backend
//! defines its own instance beside its kernels (the CPU's is `memc_codegen::cpu::target()`).
//!
//! Guarantees: a `TargetInfo` is plain data (`'static` slices and numbers), so it is cheap to
//! copy into a pass and safe to share between threads; it describes a backend and never
//! depends on a model.

use crate::ElemType;

/// What one backend computes and prefers. See the module doc.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetInfo {
    /// The backend's name, as `--target` spells it (`cpu`).
    pub name: &'static str,
    /// The element types its kernels compute in (load, store, and do arithmetic on).
    pub compute_types: &'static [ElemType],
    /// The element types its kernels load and store but compute in another type (the narrow
    /// floats in f32, the sub-byte integers in i8 or u8): loads widen, stores narrow.
    pub storage_types: &'static [ElemType],
    /// The element types its matrix products (GEMM contractions) compute; a product in another
    /// type is a loop kernel.
    pub contraction_types: &'static [ElemType],
    /// How convolutions are lowered.
    pub conv: ConvPolicy,
    /// How the fused low-bit product (`memc.matmul_nbits`) is lowered.
    pub nbits: NBitsPolicy,
    /// The most elementwise ops one fused kernel computes.
    pub max_fused_ops: usize,
    /// Whether a product's constant `A` (a weight) is also stored packed for the backend's
    /// GEMM, so that no run packs it (the CPU's memc-gemm layout).
    pub prepack_weights: bool,
}

/// A backend's convolution forms and their scratch policy.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvPolicy {
    /// Whether and how a convolution runs as one product per image over its column matrix
    /// (im2col).
    pub im2col: Im2colForm,
    /// im2col pays when each output sums over at least this many products (`channels * taps`)
    /// ...
    pub im2col_min_terms: u64,
    /// ... and each image has at least this many output pixels.
    pub im2col_min_pixels: u64,
    /// The scratch rule of every convolution (and of a convolution's weight gradient): at most
    /// [`ConvPolicy::scratch_cap`] bytes, this many per thread of a product ...
    pub scratch_per_thread: u64,
    /// ... or this many hundredths of the model's activation lower bound, whichever is more.
    pub scratch_percent_of_bound: u64,
}

/// How a backend's im2col form holds the column matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Im2colForm {
    /// No im2col: products per kernel tap, or loops.
    Off,
    /// The column matrix is never stored: the product packs its `B` panels straight from the
    /// input (implicit im2col), so the only scratch is the product's packing panels.
    Implicit,
    /// The column matrix is copied into scratch memory, within [`ConvPolicy::scratch_cap`]
    /// (a backend whose products cannot pack from the input).
    Explicit,
}

impl ConvPolicy {
    /// The most scratch bytes one convolution may plan, for products on `threads` threads in
    /// a model whose activation lower bound is `activation_bound` bytes: the larger of
    /// `scratch_per_thread` per thread and `scratch_percent_of_bound`% of the bound. The one
    /// statement of the rule; scratch sizing (memc-codegen's op plans) applies it and tests
    /// check it.
    pub fn scratch_cap(&self, threads: u64, activation_bound: u64) -> u64 {
        let per_threads = self.scratch_per_thread.saturating_mul(threads);
        let of_bound = activation_bound / 100 * self.scratch_percent_of_bound
            + activation_bound % 100 * self.scratch_percent_of_bound / 100;
        per_threads.max(of_bound)
    }
}

/// A backend's fused low-bit product: what it computes, the packed weight layout it reads, and
/// its scratch policy.
#[derive(Clone, Debug, PartialEq)]
pub struct NBitsPolicy {
    /// The element types of the activations (and results) the product computes; the `egraph`
    /// pass fuses only these.
    pub activation_types: &'static [ElemType],
    /// The id of the packed weight layout its kernels read (`nbits v2`).
    pub layout: &'static str,
    /// Products of up to this many rows stream the weight with no scratch memory; products of
    /// more run a GEMM whose panels of the dequantized weight are planned scratch (the CPU's:
    /// `memc_codegen::nbits::scratch_bytes` sizes them).
    pub stream_rows: u64,
}

/// The element types a processor computes in natively: every type a kernel can address but the
/// 16-bit and narrower floats and the sub-byte integers (those are [`STORAGE_TYPES`]).
pub const NATIVE_TYPES: &[ElemType] = &[
    ElemType::F64,
    ElemType::F32,
    ElemType::I64,
    ElemType::I32,
    ElemType::I16,
    ElemType::I8,
    ElemType::U64,
    ElemType::U32,
    ElemType::U16,
    ElemType::U8,
    ElemType::Bool,
];

/// The element types every memc backend stores and converts to a native type to compute: f16,
/// bf16, the float8 formats and float4 in f32; int4, uint4, int2 and uint2 (one per byte) in
/// i8 or u8.
pub const STORAGE_TYPES: &[ElemType] = &[
    ElemType::F16,
    ElemType::BF16,
    ElemType::F8E4M3FN,
    ElemType::F8E4M3FNUZ,
    ElemType::F8E5M2,
    ElemType::F8E5M2FNUZ,
    ElemType::F4E2M1,
    ElemType::F8E8M0,
    ElemType::I4,
    ElemType::U4,
    ElemType::I2,
    ElemType::U2,
];

impl TargetInfo {
    /// The target of target-independent tools (`memc opt`, which names no backend): what every
    /// memc backend computes, and no form that needs scratch memory. Its fused low-bit product
    /// computes f32 activations, as every backend's does.
    pub const GENERIC: TargetInfo = TargetInfo {
        name: "generic",
        compute_types: NATIVE_TYPES,
        storage_types: STORAGE_TYPES,
        contraction_types: &[],
        conv: ConvPolicy {
            im2col: Im2colForm::Off,
            im2col_min_terms: u64::MAX,
            im2col_min_pixels: u64::MAX,
            scratch_per_thread: 0,
            scratch_percent_of_bound: 0,
        },
        nbits: NBitsPolicy {
            activation_types: &[ElemType::F32],
            layout: "nbits v2",
            stream_rows: u64::MAX,
        },
        max_fused_ops: 1,
        prepack_weights: false,
    };

    /// Whether the backend's kernels compute in `elem`.
    pub fn computes(&self, elem: ElemType) -> bool {
        self.compute_types.contains(&elem)
    }

    /// Whether the backend's kernels load and store `elem`, computing in it or in a wider type.
    pub fn addresses(&self, elem: ElemType) -> bool {
        self.computes(elem) || self.storage_types.contains(&elem)
    }

    /// Whether the backend's matrix products are contractions in `elem`.
    pub fn contracts(&self, elem: ElemType) -> bool {
        self.contraction_types.contains(&elem)
    }
}
