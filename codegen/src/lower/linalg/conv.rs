//! Conv and ConvTranspose, and Col2Im.
//!
//! The direct form is one loop kernel: outer axes `(n, [g,] m, out spatial...)` walk the output
//! (the group axis only when `group > 1`), inner axes `(c, kernel spatial...)` the reduction
//! over one group's input channels and the kernel window. Conv reads the input through a view
//! with one guard per padded spatial axis (`0 <= o * stride - pad + k * dilation < size`), so
//! padding reads 0; a `Reduce` sums `x * w` and a `Once` stage adds the bias and stores.
//! ConvTranspose gathers instead of scattering: output position `o` receives input `i` through
//! tap `k` when `o + pad - k * dilation = i * stride`, tested with index arithmetic and read
//! with a `LoadIndirect`.
//! Col2Im is that gather with an identity filter: each image position sums the column entries
//! its block taps land on.
//!
//! Convolutions in the target's contraction types (f32 and f64 on the CPU) with at least two
//! input channels per group run as contractions instead. The main form is im2col
//! ([`im2col_form`], chosen by [`plan`] before memory planning): one product per (image,
//! group) `Y[m_g, pixels] (+)= W[m_g, c_g * taps] @ col[c_g * taps, pixels]` over the bias (or
//! without accumulating), where `col` is the column matrix of the input windows (padding reads
//! 0). The column matrix is never stored on the CPU: the product's `B` is an
//! [`Im2colView`] of the input ([`implicit_product`], one `Contract` batched over images and
//! groups), and the GEMM packs each `KC x NC` panel straight from the input, so the only
//! scratch is the GEMM's packing panels. A target whose products read strided matrices only
//! (CUDA: `Im2colForm::Explicit`) copies the windows into a column matrix in scratch with loop
//! kernels (the interior, where no tap reads padding, has no guards, so it is vectorized at
//! stride 1), when one image's matrix is within the conv scratch rule
//! (`ConvPolicy::scratch_cap`). Every product sums exactly the convolution's terms, so inputs
//! holding inf or huge values give what the direct loop gives. Otherwise (im2col off, an
//! explicit matrix over the cap or a plan made without its scratch, a plain 1x1 convolution
//! that is already one product, too little work): one product per kernel tap summing over the
//! input channels, batched over the output rows ([`conv_tap`]); or, for strided 2-d
//! convolutions with fewer input channels than kernel columns, one product per (input
//! channel, kernel row) summing over the kernel columns ([`kernel_row_products`]). No form's
//! scratch is a whole column matrix past the cap.

use super::super::build::{guard, Insts, TensorRef};
use super::super::movement::common::{loop_kernel, map_stage, once_stage, IndexMath};
use super::super::plan::{Form, OpPlan};
use super::super::{elem_type, unsupported, LowerCtx, LowerError, LowerResult};
use super::matmul::check_arith;
use crate::kernel::{
    BinaryOp, Contract, ContractB, Im2colAxis, Im2colView, IndirectIndex, InstId, Kernel,
    KernelBody, MatView, ReduceOp, Scalar, Stage, View, WinogradForm,
};
use memc_ir::ops::{AutoPad, OpCtx, WindowAttrs};
use memc_ir::target::{Im2colForm, TargetInfo};
use memc_ir::{Function, OpId};

pub(crate) mod grad;

/// The window of a convolution or pool, resolved against the actual sizes by the IR's one
/// resolver ([`memc_ir::ops::Window`]), in the signed arithmetic kernels index with.
#[derive(Clone, Debug)]
pub(super) struct Window {
    pub kernel: Vec<i64>,
    pub strides: Vec<i64>,
    pub dilations: Vec<i64>,
    /// The begin pad of every spatial axis.
    pub begin: Vec<i64>,
    /// The end pad of every spatial axis (as given or derived; ceil_mode may read past it).
    pub end: Vec<i64>,
}

/// `values` as `i64`s (window sizes past `i64::MAX` are unsupported).
fn signed(values: &[u64]) -> Result<Vec<i64>, LowerError> {
    values
        .iter()
        .map(|&v| {
            i64::try_from(v).map_err(|_| unsupported("a window size does not fit in 64 bits"))
        })
        .collect()
}

/// The window of a sliding op (Conv, the pools) over `input` spatial sizes: its kernel
/// (`kernel_shape`, else the weight's spatial dims), strides, dilations and the pads `auto_pad`
/// implies, as `memc_ir::ops::Window::of` resolves them for shape inference too.
pub(super) fn window(func: &Function, op: OpId, input: &[u64]) -> Result<Window, LowerError> {
    let resolved = memc_ir::ops::Window::of(func, op, input).map_err(unsupported)?;
    Ok(Window {
        kernel: signed(&resolved.kernel)?,
        strides: signed(&resolved.strides)?,
        dilations: signed(&resolved.dilations)?,
        begin: signed(&resolved.pad_begin)?,
        end: signed(&resolved.pad_end)?,
    })
}

/// The kernel's spatial sizes: `kernel_shape`, else the weight's spatial dims.
fn kernel_shape(ctx: &LowerCtx, op: OpId, w: &TensorRef) -> Result<Vec<i64>, LowerError> {
    let from_weight: Vec<i64> = w.shape[2..].iter().map(|&d| d as i64).collect();
    match ctx.attr_ints(op, "kernel_shape") {
        Some(k) if k != from_weight => {
            Err(unsupported("`kernel_shape` differs from the weight's dims"))
        }
        _ => Ok(from_weight),
    }
}

/// Loop axis positions of a convolution kernel: `n, [g,] m, out spatial..., c, kernel spatial...`.
struct Axes {
    grouped: bool,
    n_spatial: usize,
}

impl Axes {
    fn g(&self) -> Option<usize> {
        self.grouped.then_some(1)
    }
    fn m(&self) -> usize {
        1 + usize::from(self.grouped)
    }
    fn o(&self, i: usize) -> usize {
        self.m() + 1 + i
    }
    fn c(&self) -> usize {
        self.m() + 1 + self.n_spatial
    }
    fn k(&self, i: usize) -> usize {
        self.c() + 1 + i
    }
    fn count(&self) -> usize {
        self.k(self.n_spatial)
    }
}

/// Shared shapes of a convolution: the input `[N, C, D...]`, the output `[N, M, O...]`, and
/// groups (`c_g` input and `m_g` output channels per group).
#[derive(Clone, Debug)]
struct ConvShape {
    n: u64,
    groups: u64,
    c_g: u64,
    m_g: u64,
    in_spatial: Vec<u64>,
    out_spatial: Vec<u64>,
}

impl ConvShape {
    fn loops(&self, kernel: &[i64], axes: &Axes) -> (Vec<u64>, Vec<u64>) {
        let mut outer = vec![self.n];
        if axes.grouped {
            outer.push(self.groups);
        }
        outer.push(self.m_g);
        outer.extend(&self.out_spatial);
        let mut inner = vec![self.c_g];
        inner.extend(kernel.iter().map(|&k| k as u64));
        (outer, inner)
    }
}

/// The output view: `(n, [g,] m, o...)` contiguous, the inner axes broadcast.
fn output_view(out: &TensorRef, s: &ConvShape, axes: &Axes) -> View {
    let own = out.strides();
    let mut strides = vec![0i64; axes.count()];
    strides[0] = own[0];
    if let Some(g) = axes.g() {
        strides[g] = own[1] * s.m_g as i64;
    }
    strides[axes.m()] = own[1];
    for i in 0..axes.n_spatial {
        strides[axes.o(i)] = own[2 + i];
    }
    out.view_with(strides)
}

/// The bias view (`[M]`), indexed by the output channel.
fn bias_view(bias: &TensorRef, s: &ConvShape, axes: &Axes) -> View {
    let mut strides = vec![0i64; axes.count()];
    if let Some(g) = axes.g() {
        strides[g] = s.m_g as i64;
    }
    strides[axes.m()] = 1;
    bias.view_with(strides)
}

/// The `Once` stage: the accumulator plus the bias (view 3 when present), stored in view 0.
fn finish_stage(acc_ty: Scalar, out_elem: Scalar, has_bias: bool) -> Stage {
    let mut insts = Insts::new();
    let mut v = insts.acc(0, acc_ty);
    if has_bias {
        let b = insts.push(out_elem, crate::kernel::InstKind::Load { view: 3 });
        let b = insts.cast(b, acc_ty);
        v = insts.binary(BinaryOp::Add, v, b);
    }
    let v = insts.cast(v, out_elem);
    once_stage(insts, 0, v)
}

/// What [`plan`] decided for a Conv before memory planning: its shapes and window (from its
/// types and attributes), and whether it runs through im2col (so its scratch bytes).
#[derive(Clone, Debug)]
pub struct ConvPlan {
    /// `None` when `group` does not divide the channels (or a shape is not static).
    shape: Option<ConvShape>,
    /// The window over the weight's spatial dims.
    window: Result<Window, LowerError>,
    im2col: Option<Im2col>,
    /// Whether the CPU runs the implicit product transposed ([`transposed_pays`]).
    transposed: bool,
    /// Whether (and how) the CPU runs the implicit product as Winograd F(2x2, 3x3)
    /// ([`winograd_form`]).
    winograd: Option<WinogradForm>,
    /// Whether the CPU runs a convolution the direct kernel takes through the GEMM instead,
    /// its panels planned (`memc_gemm::direct_conv_yields_to_gemm`).
    gemm_over_direct: bool,
}

/// Input and output channels per group from which a 3x3 convolution runs as Winograd: with
/// 3 input channels (a stem) the transforms cost more than the products save (3->16 at 31x31
/// 0.047 -> 0.054 ms), with 16 it pays (16->16 at 64x64 0.378 -> 0.247).
const WINOGRAD_MIN_CHANNELS: u64 = 8;

/// Input and output channels per group from which a grouped 3x3 convolution runs as
/// Winograd: each group's 16 products are tiny, and the direct kernel runs a group of few
/// channels well. One thread, 32 groups (ms, direct vs Winograd): 8 per group at 28x28 0.58
/// vs 0.90, at 56x56 (16 groups) 1.26 vs 1.49; 16 per group at 14x14 0.47 vs 0.62, at 28x28
/// 0.84 vs 1.04; 32 per group at 7x7 0.70 vs 0.56; 64 per group (8 groups) at 14x14 1.69 vs
/// 1.25.
const WINOGRAD_MIN_GROUP_CHANNELS: u64 = 32;

/// Output tiles (2x2) per image from which a convolution runs as Winograd: a 7x7 output is 16
/// (one block of the GEMM microkernel's 16 columns); a 4x4 one, 4, would fill a quarter of
/// them.
const WINOGRAD_MIN_TILES: u64 = 16;

/// Output tiles per image under which a convolution runs as Winograd only if its transformed
/// weight (16/9 of the direct form's) is at most [`WINOGRAD_FEW_TILES_MAX_WEIGHT`] bytes: each
/// weight value then serves fewer than 32 tiles, and a large weight streams from memory at
/// every run. Inside ResNet-50 at 224x224, one thread (Xeon, AVX-512), a 512->512 layer at
/// 7x7 (a 16 MiB transformed weight) took 3.9-4.1 ms as Winograd, onnxruntime 2.0; grouped
/// layers at 7x7 (ResNeXt's 32 groups of 32 channels, 2 MiB) gain from it (0.70 -> 0.56 ms).
const WINOGRAD_MANY_TILES: u64 = 32;

/// See [`WINOGRAD_MANY_TILES`].
const WINOGRAD_FEW_TILES_MAX_WEIGHT: u64 = 4 << 20;

/// How the CPU runs a convolution of `s` over `win` in f32 as Winograd F(2x2, 3x3)
/// (`Contract::winograd`, memc-gemm's `run_winograd`), or `None`: a 2-d 3x3 window at
/// stride 1, undilated, with at least [`WINOGRAD_MIN_CHANNELS`] input and output channels
/// per group, at least [`WINOGRAD_MIN_TILES`] tiles per image, and the transforms' scratch
/// for `GEMM_THREADS` threads (or the units of work, if fewer), each within `slot_cap` (the
/// conv scratch rule's share per thread) and an even share of the room at this step
/// (`headroom`). With [`Slots::AsFit`], fewer slots (2, then 1) where `GEMM_THREADS` do not
/// fit: the free bytes of a placed arena are few in a small model, and one slot runs the
/// transforms on one thread (only in blocks of 32 tiles, below).
///
/// One thread, against the direct kernel (`winograd_bench`, this AVX2 machine): 64->64 at
/// 56x56 3.08 -> 1.83 ms, 128->128 at 28x28 3.43 -> 1.88, 256->256 at 14x14 4.27 -> 1.98,
/// 32->32 at 32x32 0.334 -> 0.233.
fn winograd_form(
    s: &ConvShape,
    win: &Window,
    elem: Scalar,
    slot_cap: u64,
    headroom: u64,
    slots: Slots,
) -> Option<WinogradForm> {
    let window = s.in_spatial.len() == 2
        && memc_gemm::winograd_window(&win.kernel, &win.strides, &win.dilations)
        && win.begin.iter().all(|&p| p >= 0);
    let min_channels = match s.groups {
        1 => WINOGRAD_MIN_CHANNELS,
        _ => WINOGRAD_MIN_GROUP_CHANNELS,
    };
    if elem != Scalar::F32 || !window || s.c_g < min_channels || s.m_g < min_channels {
        return None;
    }
    let tiles = s.out_spatial[0].div_ceil(2) * s.out_spatial[1].div_ceil(2);
    let images = s.n.saturating_mul(s.groups);
    if tiles < WINOGRAD_MIN_TILES {
        return None;
    }
    let weight_bytes = memc_gemm::winograd_weights_len(s.m_g, s.c_g)
        .saturating_mul(s.groups)
        .saturating_mul(elem.size());
    if tiles < WINOGRAD_MANY_TILES && weight_bytes > WINOGRAD_FEW_TILES_MAX_WEIGHT {
        return None;
    }
    // Scratch for as many threads as the GEMM plans for (or as there are units of work): with
    // fewer, a convolution the direct kernel would run on every thread ran on one (the zoo
    // U-Net at two threads, 2.55 -> 3.00 ms). Each slot within the rule and an even share of
    // the headroom; the largest blocking that fits (`memc_gemm::winograd_blocking`).
    //
    // Blocks of 32 tiles on two threads before blocks of 16 on more, and one thread (where
    // the room is short, `Slots::AsFit`) only in blocks of 32: a block of 16 fills half of
    // AVX-512's microkernel, and on one thread ran no faster than the direct kernel, which
    // needs no scratch and runs on every thread (AVX-512, one thread: 64->32 at 32x32 in
    // blocks of 16 0.274 ms, of 32 0.181, direct 0.247; 32->32 at 16x16 0.039, 0.026, 0.034;
    // inside the zoo U-Net, whose arena gave four slots of blocks of 16, 64->32 at 32x32 ran
    // 0.267 ms, onnxruntime 0.210).
    let most = crate::cpu::target::GEMM_THREADS;
    let choices: &[(u64, &[u64])] = &[
        (most, &[32]),
        (2, &[32]),
        (most, &[16]),
        (2, &[16]),
        (1, &[32]),
    ];
    let choices = match slots {
        Slots::All => &choices[..3],
        Slots::AsFit => choices,
    };
    choices
        .iter()
        .filter(|&&(n, _)| n <= most)
        .find_map(|&(max_slots, sizes)| {
            let share = headroom.saturating_sub(64) / max_slots;
            let b = memc_gemm::winograd_blocking_in(s.m_g, s.c_g, slot_cap.min(share), sizes)?;
            // As `run_winograd` splits the work: blocks, or chunks of output channels of each
            // block where the blocks are fewer than the threads.
            let blocks = images.saturating_mul(tiles.div_ceil(b.block));
            let units = if blocks < max_slots {
                blocks.saturating_mul(s.m_g.div_ceil(b.chunk))
            } else {
                blocks
            };
            let form = WinogradForm {
                block: b.block,
                chunk: b.chunk,
                depth: b.depth,
                slots: max_slots.min(units).max(1),
            };
            // As planned: the slots and room to align them (`with_gemm_panels`).
            (form.scratch_bytes().saturating_add(64) <= headroom).then_some(form)
        })
}

/// How many scratch slots a Winograd convolution may plan ([`winograd_form`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Slots {
    /// One per GEMM thread (`GEMM_THREADS`), or two in blocks of 32 tiles, or none: planning
    /// against the model's bound, before the arena is placed (the placed arena's free bytes
    /// may hold more, [`Slots::AsFit`]).
    All,
    /// As many as fit, down to one (in blocks of 32 tiles): planning into the free bytes of a
    /// placed arena (`crate::lower::use_free_bytes`).
    AsFit,
}

/// Output pixels per image (and group) up to which a convolution runs transposed.
const TRANSPOSED_MAX_PIXELS: u64 = 256;
/// Output channels per group from which a strided convolution runs transposed.
const TRANSPOSED_MIN_CHANNELS_STRIDED: u64 = 128;
/// Output channels per group from which a stride-1 convolution whose pixels fill the direct
/// kernel's lanes poorly runs transposed.
const TRANSPOSED_MIN_CHANNELS: u64 = 256;
/// Input channels per group from which a plain 1x1 convolution (a product on its input as it
/// is) may run transposed: the transposed form packs the input into row panels and stores
/// its result transposed, a cost per multiply-add of about `1 / K`. One thread, inside the
/// model: ResNet-50's 512x49x2048 1.01 -> 0.86 ms, 2048x49x512 1.03 -> 0.90-0.93;
/// MobileNetV2's 1280x49x320 0.359 -> 0.335 (two threads 0.182 -> 0.204), 960x49x160 0.12 ->
/// 0.14 (0.061 -> 0.096).
const TRANSPOSED_PLAIN_MIN_CHANNELS: u64 = 512;
/// The most bytes of a transposed product's result (scratch, before it is transposed into
/// the output): ResNet-18's 512-channel 7x7 layers need 98 KiB, ResNet-50's 2048-channel
/// ones 392 KiB (the scratch rule bounds the whole scratch besides).
const TRANSPOSED_MAX_RESULT_BYTES: u64 = 512 * 1024;

/// Whether a convolution of `s` (strided along some axis or not) in f32 pays run
/// transposed (`Contract::transposed`): its output channels in the GEMM's vector lanes, its
/// pixels broadcast, the column matrix packed into the GEMM's row panels (a load per value,
/// which the product repays over many output channels). One group, at most
/// [`TRANSPOSED_MAX_PIXELS`] pixels, a result within [`TRANSPOSED_MAX_RESULT_BYTES`], and
/// - strided, at least [`TRANSPOSED_MIN_CHANNELS_STRIDED`] output channels (the direct
///   kernel reads every other element, or gathers narrow rows): one thread, 128->256 3x3/2
///   at 28 1.28 -> 0.94 ms, 128->256 1x1/2 at 28 0.22 -> 0.15;
/// - else at least [`TRANSPOSED_MIN_CHANNELS`] of them and pixels that fill less than 80%
///   of the direct kernel's 32-lane tiles (a 7x7 image 77%): 512->512 3x3 at 7x7 2.07 ->
///   1.74 ms.
///
/// Measured and left out: 64 or 128 channels at 8x8 or 16x16 (tiles full; 0.15 -> 0.22 and
/// 0.15 -> 0.18 ms), 256 channels at 4x4 (0.19 -> 0.20), 8 groups of 64 channels at 7x7
/// (0.27 -> 0.39: each group's column matrix packed for few products), 192-256 channels at
/// 14x14 (87.5% fill: 5% faster at one thread, 6-9% slower at two).
fn transposed_pays(s: &ConvShape, elem: Scalar, strided: bool) -> bool {
    let pixels = s.out_spatial.iter().product::<u64>();
    let result =
        s.n.saturating_mul(s.groups)
            .saturating_mul(s.m_g)
            .saturating_mul(pixels)
            .saturating_mul(elem.size());
    // The direct kernel's tiles: runs of at most 32 lanes (one vector of 16 for 16 pixels or
    // fewer), the run split into equal tiles.
    let lanes = if pixels <= 16 {
        16
    } else {
        pixels.div_ceil(32) * 32
    };
    let fills_lanes = pixels * 5 >= lanes * 4;
    let channels = if strided {
        TRANSPOSED_MIN_CHANNELS_STRIDED
    } else {
        TRANSPOSED_MIN_CHANNELS
    };
    elem == Scalar::F32
        && s.groups == 1
        && pixels <= TRANSPOSED_MAX_PIXELS
        && result <= TRANSPOSED_MAX_RESULT_BYTES
        && s.m_g >= channels
        && (strided || !fills_lanes)
}

impl ConvPlan {
    /// Whether the convolution runs through implicit im2col (one product whose `B` is an
    /// [`Im2colView`] of the input).
    pub(crate) fn implicit(&self) -> bool {
        matches!(self.im2col, Some(Im2col::Implicit))
    }

    /// Whether the CPU runs the implicit product transposed (`Contract::transposed`).
    pub(crate) fn transposed(&self) -> bool {
        self.transposed
    }

    /// The scratch of the implicit product run as Winograd (`Contract::winograd`), if it is.
    pub(crate) fn winograd_scratch(&self) -> Option<u64> {
        let w = self.winograd.as_ref()?;
        Some(w.scratch_bytes())
    }

    /// The scratch of the implicit product run transposed with `elem_size`-byte elements
    /// (`Contract::scratch_bytes`): per image and group `c^T = col^T w^T`, the column
    /// matrix's `A` panels, then (64-aligned) the results and the table of input offsets. 0
    /// without a static shape.
    pub(crate) fn transposed_scratch(&self, elem_size: u64) -> u64 {
        let (Some(s), Ok(win)) = (&self.shape, &self.window) else {
            return 0;
        };
        let taps = win.kernel.iter().map(|&k| k.max(0) as u64).product::<u64>();
        let pixels = s.out_spatial.iter().product::<u64>();
        let batches = s.n.saturating_mul(s.groups);
        let k = s.c_g.saturating_mul(taps);
        let panels =
            crate::cpu::target::GemmBlocking::new(batches, pixels, s.m_g, k, elem_size, false)
                .with_one_column_block(batches, pixels, s.m_g)
                .scratch_bytes();
        let result = batches
            .saturating_mul(pixels)
            .saturating_mul(s.m_g)
            .saturating_mul(elem_size);
        crate::kernel::TransposedScratch::new(panels, result, taps, pixels).bytes
    }

    /// Whether the CPU runs this convolution as a direct convolution (memc-gemm's
    /// `run_direct`, which needs no GEMM panels): implicit im2col in f32 over a window the
    /// direct kernel's tiling takes (`direct_conv_window_fits`: at most `DIRECT_MAX_TAPS` taps
    /// and `DIRECT_MAX_AXES` axes), where it pays (`direct_conv_pays`: tiles at least half
    /// full, which only a tiny output misses, unless depthwise),
    /// with a constant weight (`weight_constant`), which the plan writer packs
    /// ([`crate::lower::prepack`]). The CPU checks the rest (a contiguous input row, its
    /// instruction set) when it runs, and packs into stack panels where it cannot.
    pub(crate) fn runs_direct(&self, elem: Scalar, weight_constant: bool) -> bool {
        !self.gemm_over_direct && self.direct_takes(elem, weight_constant)
    }

    /// [`ConvPlan::runs_direct`] before the choice of [`ConvPlan::gemm_over_direct`].
    fn direct_takes(&self, elem: Scalar, weight_constant: bool) -> bool {
        let (Ok(win), Some(shape)) = (&self.window, &self.shape) else {
            return false;
        };
        let taps = win
            .kernel
            .iter()
            .try_fold(1u64, |acc, &k| acc.checked_mul(u64::try_from(k).ok()?));
        let n = win.kernel.len();
        let axes = direct_axes(shape, win);
        !self.transposed
            && self.winograd.is_none()
            && weight_constant
            && elem == Scalar::F32
            && matches!(self.im2col, Some(Im2col::Implicit))
            && n <= memc_gemm::DIRECT_MAX_AXES
            && taps.is_some_and(|t| t <= memc_gemm::DIRECT_MAX_TAPS)
            && axes.len() == n
            && memc_gemm::direct_conv_window_fits(&axes, shape.c_g)
            && memc_gemm::direct_conv_pays(&axes, shape.c_g)
    }

    /// Bytes of the GEMM's packing panels for the implicit product, `A` packed whole (a
    /// constant weight) or not, as the plan reserves them (`with_gemm_panels`); 0 without
    /// static shapes.
    fn gemm_panel_bytes(&self, elem_size: u64, a_packed: bool) -> u64 {
        let (Some(s), Ok(win)) = (&self.shape, &self.window) else {
            return 0;
        };
        let taps = win.kernel.iter().map(|&k| k.max(0) as u64).product::<u64>();
        let pixels = s.out_spatial.iter().product::<u64>();
        super::super::plan::conv_panel_bytes(
            s.m_g,
            s.c_g.saturating_mul(taps),
            s.n,
            s.groups,
            pixels,
            elem_size,
            a_packed,
        )
    }
}

/// The axes of a convolution of `shape` over `win` as the direct kernel sees them over a
/// dense input.
fn direct_axes(shape: &ConvShape, win: &Window) -> Vec<memc_gemm::DirectAxis> {
    let n = win.kernel.len();
    let mut stride = 1i64;
    let mut axes = vec![];
    for i in (0..n.min(shape.in_spatial.len())).rev() {
        axes.push(memc_gemm::DirectAxis {
            size: shape.in_spatial[i] as i64,
            stride,
            kernel: win.kernel[i],
            step: win.strides[i],
            dilation: win.dilations[i],
            pad: win.begin[i],
            out: shape.out_spatial.get(i).map_or(0, |&o| o as i64),
        });
        stride = stride.saturating_mul(shape.in_spatial[i] as i64);
    }
    axes.reverse();
    axes
}

/// Plans a Conv on `target`: the im2col form when [`im2col_form`] chooses it (an explicit
/// column matrix, within `scratch_cap` bytes, is the op's scratch); else a form without
/// scratch, or one whose scratch (Winograd's transforms, a transposed product's panels) fits
/// `headroom`, the bytes free at its step, in `slots` ([`Slots`]).
pub fn plan(
    func: &Function,
    target: &TargetInfo,
    op: OpId,
    scratch_cap: u64,
    headroom: u64,
    slots: Slots,
) -> OpPlan {
    let data = func.op(op);
    let shape_of = |value: Option<&memc_ir::ValueId>| {
        func.value_type(*value?)
            .tensor()
            .and_then(|t| t.static_shape())
    };
    let shapes = (
        shape_of(data.operands.first()),
        shape_of(data.operands.get(1)),
        shape_of(data.results.first()),
    );
    let groups = OpCtx { func, op }.int_or_default("group");
    let shape = match &shapes {
        (Some(x), Some(w), Some(out)) => conv_shape(x, w, out, u64::try_from(groups).unwrap_or(0)),
        _ => None,
    };
    let window = match &shape {
        Some(s) => window(func, op, &s.in_spatial),
        None => Err(unsupported(
            "`group` must be positive and divide the channels",
        )),
    };
    let elem = data
        .results
        .first()
        .and_then(|&r| func.value_type(r).tensor())
        .map(|t| Scalar::from_elem(t.elem));
    let (mut plan, bytes) = ConvPlan::choose(target, shape, window, elem, true, scratch_cap);
    // A depthwise convolution (one input channel per group, which im2col leaves to the loop
    // kernel) with a constant weight runs as a direct convolution where the target reads an
    // implicit column matrix: per group a product of `K = taps` over the input as it is.
    let weight_constant = super::super::plan::operand_is_weight(func, op, 1);
    let depthwise = plan.shape.as_ref().is_some_and(|s| s.c_g == 1);
    if plan.im2col.is_none() && depthwise && target.conv.im2col == Im2colForm::Implicit {
        let direct = ConvPlan {
            im2col: Some(Im2col::Implicit),
            ..plan.clone()
        };
        if elem.is_some_and(|elem| direct.runs_direct(elem, weight_constant)) {
            plan = direct;
        }
    }
    // A plain 1x1 convolution is a product on its input as it is; where it pays run
    // transposed, and has at least `TRANSPOSED_PLAIN_MIN_CHANNELS` input channels, it takes
    // the implicit form (its column matrix is the input itself, packed into the row panels)
    // to run so, else it stays plain (right below).
    let plain = plan.im2col.is_none()
        && target.conv.im2col == Im2colForm::Implicit
        && plan.window.as_ref().is_ok_and(plain_window)
        && plan
            .shape
            .as_ref()
            .is_some_and(|s| s.c_g >= TRANSPOSED_PLAIN_MIN_CHANNELS);
    if plain {
        plan.im2col = Some(Im2col::Implicit);
    }
    // Run transposed where it pays, with a constant weight (packed whole as the transposed
    // product's `B` when the plan is written, `prepack`), and its scratch (the column
    // matrix's panels, the result, the offset table) within the conv scratch rule and below
    // the model's peak (`headroom`): where the scratch would raise the arena, the direct
    // kernel (no scratch) runs instead, as the report's scratch uses show.
    plan.transposed = target.prepack_weights
        && weight_constant
        && plan.implicit()
        && plan.window.is_ok()
        && elem.is_some_and(|elem| {
            let strided = plan
                .window
                .as_ref()
                .is_ok_and(|w| w.strides.iter().any(|&st| st > 1));
            plan.shape
                .as_ref()
                .is_some_and(|s| transposed_pays(s, elem, strided))
        });
    if plan.transposed {
        // As planned: the panels and result, and room to align them (`with_gemm_panels`).
        let bytes = plan.transposed_scratch(4) + 64;
        plan.transposed = bytes <= scratch_cap && bytes <= headroom;
    }
    if plain && !plan.transposed {
        plan.im2col = None;
    }
    // Winograd F(2x2, 3x3) where it runs (before the transposed form: 256->256 at 14x14 runs
    // 2.2x the direct kernel's speed that way, transposed ~1.1x).
    if target.prepack_weights && weight_constant && plan.implicit() {
        // What the rule gives each GEMM thread (`scratch_cap` is for all of them: their
        // per-thread parts, or more where 2% of the bound is more).
        let slot_cap = scratch_cap / crate::cpu::target::GEMM_THREADS;
        if let (Some(s), Ok(win), Some(elem)) = (&plan.shape, &plan.window, elem) {
            plan.winograd = winograd_form(s, win, elem, slot_cap, headroom, slots);
        }
        if plan.winograd.is_some() {
            plan.transposed = false;
        }
    }
    // A layer the direct kernel takes but the GEMM runs faster (a strided 1x1 convolution
    // with many output channels) runs through the GEMM where its panels fit the conv scratch
    // rule and the bytes free at its step; elsewhere directly, without scratch.
    if let (Some(elem), Some(s), Ok(win)) = (elem, &plan.shape, &plan.window) {
        if plan.direct_takes(elem, weight_constant)
            && memc_gemm::direct_conv_yields_to_gemm(&direct_axes(s, win), s.m_g)
        {
            let bytes = plan.gemm_panel_bytes(elem.size(), true) + 64;
            plan.gemm_over_direct = bytes <= scratch_cap && bytes <= headroom;
        }
    }
    OpPlan::with_scratch(Form::Conv(Box::new(plan)), bytes, "im2col matrix")
}

impl ConvPlan {
    /// The plan of a convolution of `shape` over `window` computing in `elem`: the im2col form
    /// when `im2col` is wanted and [`im2col_form`] chooses it within `scratch_cap` bytes.
    /// Returns the scratch bytes too.
    fn choose(
        target: &TargetInfo,
        shape: Option<ConvShape>,
        window: Result<Window, LowerError>,
        elem: Option<Scalar>,
        im2col: bool,
        scratch_cap: u64,
    ) -> (ConvPlan, u64) {
        let im2col = match (&shape, &window, elem, im2col) {
            (Some(s), Ok(win), Some(elem), true) => im2col_form(target, elem, s, win, scratch_cap),
            _ => None,
        };
        let bytes = im2col.as_ref().map_or(0, Im2col::bytes);
        let plan = ConvPlan {
            shape,
            window,
            im2col,
            transposed: false,
            winograd: None,
            gemm_over_direct: false,
        };
        (plan, bytes)
    }
}

/// Lowers a Conv in the form `plan` chose: im2col when the memory plan holds its scratch, else
/// a form without scratch.
pub fn conv(ctx: &LowerCtx, op: OpId, plan: &ConvPlan) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let w = ctx.input(op, 1)?;
    let bias = ctx.operand(op, 2)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(out.elem)?;
    let s = plan
        .shape
        .clone()
        .ok_or_else(|| unsupported("`group` must be positive and divide the channels"))?;
    kernel_shape(ctx, op, &w)?;
    let win = plan.window.clone()?;
    match &plan.im2col {
        Some(Im2col::Implicit) => {
            if let Some(mut contract) = implicit_product(&x, &w, &out, &s, &win, bias.is_some()) {
                contract.transposed = plan.transposed;
                contract.winograd = plan.winograd;
                let mut kernels = Vec::new();
                if let Some(b) = &bias {
                    kernels.push(init_output(ctx.kernel_name(op, 0), &out, Some(b)));
                }
                kernels.push(Kernel {
                    name: ctx.kernel_name(op, kernels.len()),
                    body: KernelBody::Contract(contract),
                });
                return Ok(kernels);
            }
        }
        Some(Im2col::Explicit { images, bytes }) => {
            // The scratch is there when the memory plan was made with this plan's scratch
            // bytes.
            if let Some(col) = ctx.scratch(op).filter(|col| col.numel() >= *bytes) {
                return Ok(im2col_kernels(
                    ctx,
                    op,
                    &x,
                    &w,
                    bias.as_ref(),
                    &out,
                    &s,
                    &win,
                    *images,
                    &col,
                ));
            }
        }
        None => {}
    }
    if use_taps(ctx.target, out.elem, &s) {
        if use_kernel_rows(&s, &win) {
            let mut kernels = vec![init_output(ctx.kernel_name(op, 0), &out, bias.as_ref())];
            for contract in kernel_row_products(&x, &w, &out, &s, &win) {
                let name = ctx.kernel_name(op, kernels.len());
                kernels.push(Kernel {
                    name,
                    body: KernelBody::Contract(contract),
                });
            }
            return Ok(kernels);
        }
        let taps: Vec<Tap> = tap_grid(&win.kernel)
            .into_iter()
            .filter_map(|k| conv_tap(&x, &w, &out, &s, &win, &k))
            .collect();
        return Ok(tap_kernels(ctx, op, &out, bias.as_ref(), taps));
    }
    Ok(vec![direct_conv(
        ctx.kernel_name(op, 0),
        &x,
        &w,
        bias.as_ref(),
        &out,
        &s,
        &win,
    )])
}

/// Whether a convolution runs as one contraction per kernel tap (in the target's contraction
/// types only): unless
/// each group has a single input channel (depthwise), whose products would have `k = 1`. On
/// the zoo's resnet and unet the tap form is 5-30x faster than the direct loop, even for the
/// 3-channel stems (measured with `codegen/tests/profile.rs`).
fn use_taps(target: &TargetInfo, elem: Scalar, s: &ConvShape) -> bool {
    target.contracts(elem_type(elem)) && s.c_g >= 2
}

/// Whether a 2-d convolution runs as one product per (input channel, kernel row) summing over
/// the kernel row's taps ([`kernel_row_products`]) instead of one per kernel tap summing over
/// the input channels: when a group has fewer input channels than the kernel has columns (a
/// 3-channel stem with a 7x7 kernel), so the products are fewer and each sums over more terms;
/// both forms make one product per output row.
fn use_kernel_rows(s: &ConvShape, win: &Window) -> bool {
    s.in_spatial.len() == 2 && (s.c_g as i64) < win.kernel[1]
}

/// The products of [`use_kernel_rows`]: for input channel `c` and kernel row `kh`,
/// `C[output channels, output columns] += W[:, c, kh, :] @ B[kernel columns, output columns]`
/// with `B[kw, ow] = x[c, oh * s - pad + kh * d, ow * s - pad + kw * d]`, batched over the
/// output rows that kernel row reads inside the input, and over the output columns where every
/// kernel column reads inside the input. Each remaining (border) output column gets its own
/// product over the kernel columns that read inside the input, its columns running over the
/// output rows. No padding is ever read. The output must already hold the bias or zeros.
fn kernel_row_products(
    x: &TensorRef,
    w: &TensorRef,
    out: &TensorRef,
    s: &ConvShape,
    win: &Window,
) -> Vec<Contract> {
    let (xs, ws, ys) = (x.strides(), w.strides(), out.strides());
    // The output positions `lo..hi` along spatial axis `i` at which kernel index `k` reads
    // inside the input, and the input position of output 0.
    let valid = |i: usize, k: i64| {
        let shift = k * win.dilations[i] - win.begin[i];
        let lo = ceil_div(-shift, win.strides[i]).max(0);
        let hi = ((s.in_spatial[i] as i64 - 1 - shift).div_euclid(win.strides[i]) + 1)
            .min(s.out_spatial[i] as i64);
        (lo, hi.max(lo), shift)
    };
    let kw = win.kernel[1];
    // Output columns where every kernel column reads inside the input.
    let (col_lo, col_hi) = {
        let (lo, _, _) = valid(1, 0);
        let (_, hi, _) = valid(1, kw - 1);
        (lo, hi.max(lo))
    };
    let batch_over = |batch: &mut Vec<u64>, a: &mut MatView, b: &mut MatView, c: &mut MatView| {
        batch.push(s.n);
        a.batch_strides.push(0);
        b.batch_strides.push(xs[0]);
        c.batch_strides.push(ys[0]);
        if s.groups > 1 {
            batch.push(s.groups);
            a.batch_strides.push(s.m_g as i64 * ws[0]);
            b.batch_strides.push(s.c_g as i64 * xs[1]);
            c.batch_strides.push(s.m_g as i64 * ys[1]);
        }
    };
    let contract = |batch, m: u64, n: i64, k: i64, a, b: MatView, c| Contract {
        elem: out.elem,
        batch,
        m,
        n: n as u64,
        k: k as u64,
        a,
        b: b.into(),
        c,
        alpha: 1f64.to_bits(),
        accumulate: true,
        pack: None,
        a_packed: None,
        b_packed: None,
        transposed: false,
        winograd: None,
    };
    let mut contracts = Vec::new();
    for c_in in 0..s.c_g as i64 {
        for kh in 0..win.kernel[0] {
            let (row_lo, row_hi, row_shift) = valid(0, kh);
            if row_hi <= row_lo {
                continue;
            }
            let a_offset = c_in * ws[1] + kh * ws[2];
            // Input element offset of output row `row_lo`, column 0, kernel column 0.
            let x_row =
                c_in * xs[1] + (row_lo * win.strides[0] + row_shift) * xs[2] - win.begin[1] * xs[3];
            let k_step = win.dilations[1] * xs[3];
            if col_hi > col_lo {
                let mut a = matview(w, a_offset, ws[0], ws[3]);
                let mut b = matview(
                    x,
                    x_row + col_lo * win.strides[1] * xs[3],
                    k_step,
                    win.strides[1] * xs[3],
                );
                let mut c = matview(out, row_lo * ys[2] + col_lo * ys[3], ys[1], ys[3]);
                let mut batch = Vec::new();
                batch_over(&mut batch, &mut a, &mut b, &mut c);
                batch.push((row_hi - row_lo) as u64);
                a.batch_strides.push(0);
                b.batch_strides.push(win.strides[0] * xs[2]);
                c.batch_strides.push(ys[2]);
                contracts.push(merge_batch_into_cols(contract(
                    batch,
                    s.m_g,
                    col_hi - col_lo,
                    kw,
                    a,
                    b,
                    c,
                )));
            }
            let border = (0..col_lo).chain(col_hi.max(col_lo)..s.out_spatial[1] as i64);
            for col in border {
                // The kernel columns this output column reads inside the input.
                let inside = |k: i64| {
                    let (lo, hi, _) = valid(1, k);
                    lo <= col && col < hi
                };
                let Some(k_lo) = (0..kw).find(|&k| inside(k)) else {
                    continue;
                };
                let k_hi = (k_lo..kw).take_while(|&k| inside(k)).last().unwrap_or(k_lo) + 1;
                let mut a = matview(w, a_offset + k_lo * ws[3], ws[0], ws[3]);
                let mut b = matview(
                    x,
                    x_row + (col * win.strides[1] + k_lo * win.dilations[1]) * xs[3],
                    k_step,
                    win.strides[0] * xs[2],
                );
                let mut c = matview(out, row_lo * ys[2] + col * ys[3], ys[1], ys[2]);
                let mut batch = Vec::new();
                batch_over(&mut batch, &mut a, &mut b, &mut c);
                contracts.push(contract(
                    batch,
                    s.m_g,
                    row_hi - row_lo,
                    k_hi - k_lo,
                    a,
                    b,
                    c,
                ));
            }
        }
    }
    contracts
}

/// The shapes of a convolution of input `x` by weights `w` into `out` with `groups` groups.
fn conv_shape(x: &[u64], w: &[u64], out: &[u64], groups: u64) -> Option<ConvShape> {
    let rank = x.len();
    if groups == 0 || rank < 3 || w.len() != rank || out.len() != rank || x[1] % groups != 0 {
        return None;
    }
    Some(ConvShape {
        n: x[0],
        groups,
        c_g: w[1],
        m_g: w[0] / groups,
        in_spatial: x[2..].to_vec(),
        out_spatial: out[2..].to_vec(),
    })
}

/// How a convolution runs through im2col.
#[derive(Clone, Debug)]
enum Im2col {
    /// The column matrix is never stored: one product whose `B` is an [`Im2colView`] of the
    /// input ([`implicit_product`]); no scratch of its own (the GEMM's panels only).
    Implicit,
    /// The column matrix of `images` images at once (all of them, or one when all would pass
    /// the scratch cap) is copied into `bytes` of scratch.
    Explicit { images: u64, bytes: u64 },
}

impl Im2col {
    /// The form's own scratch bytes.
    fn bytes(&self) -> u64 {
        match self {
            Im2col::Implicit => 0,
            Im2col::Explicit { bytes, .. } => *bytes,
        }
    }
}

/// The im2col form of a convolution on `target`, when it is chosen (see the module doc): the
/// target allows im2col and contracts in `elem`, at least two input channels per group
/// (depthwise convolutions stay direct loops), at least `im2col_min_terms` terms per output
/// and `im2col_min_pixels` pixels per image, not a 1x1 stride-1 unpadded convolution (already
/// one product over the input); implicit on a target whose products read an [`Im2colView`],
/// else explicit when one image's matrix is within `scratch_cap`.
fn im2col_form(
    target: &TargetInfo,
    elem: Scalar,
    s: &ConvShape,
    win: &Window,
    scratch_cap: u64,
) -> Option<Im2col> {
    let policy = &target.conv;
    if policy.im2col == Im2colForm::Off || !target.contracts(elem_type(elem)) || s.c_g < 2 {
        return None;
    }
    let taps = win
        .kernel
        .iter()
        .try_fold(1u64, |acc, &k| acc.checked_mul(u64::try_from(k).ok()?))?;
    let pixels = s
        .out_spatial
        .iter()
        .try_fold(1u64, |acc, &o| acc.checked_mul(o))?;
    if plain_window(win)
        || s.c_g.saturating_mul(taps) < policy.im2col_min_terms
        || pixels < policy.im2col_min_pixels
    {
        return None;
    }
    if policy.im2col == Im2colForm::Implicit {
        return Some(Im2col::Implicit);
    }
    let per_image = (s.groups * s.c_g)
        .checked_mul(taps)?
        .checked_mul(pixels)?
        .checked_mul(elem.size())?;
    if per_image > scratch_cap {
        return None;
    }
    let images = match per_image.checked_mul(s.n) {
        Some(all) if all <= scratch_cap => s.n.max(1),
        _ => 1,
    };
    Some(Im2col::Explicit {
        images,
        bytes: per_image * images,
    })
}

/// Whether `win` is a 1x1 window at stride 1 without padding: the convolution is a product
/// on its input as it is, with no column matrix.
fn plain_window(win: &Window) -> bool {
    win.kernel.iter().all(|&k| k == 1)
        && win.strides.iter().all(|&st| st == 1)
        && win.begin.iter().chain(&win.end).all(|&p| p == 0)
}

/// The column matrix of a convolution of `x` over `win` as an implicit [`Im2colView`]:
/// `channels x taps` by output pixels of the group whose batch index is `(image, group)`
/// (batch strides `x_batch`), or its transpose. `None` when the view's limits are exceeded
/// (the caller then takes a form without it).
fn im2col_view(
    x: &TensorRef,
    s: &ConvShape,
    win: &Window,
    x_batch: Vec<i64>,
    transposed: bool,
) -> Option<Im2colView> {
    let xs = x.strides();
    let view = Im2colView {
        region: x.region,
        byte_offset: x.byte_offset,
        batch_strides: x_batch,
        channels: s.c_g,
        channel_stride: xs[1],
        axes: (0..s.in_spatial.len())
            .map(|i| Im2colAxis {
                size: s.in_spatial[i],
                stride: xs[2 + i],
                kernel: win.kernel[i] as u64,
                step: win.strides[i],
                dilation: win.dilations[i],
                pad: win.begin[i],
                out: s.out_spatial[i],
            })
            .collect(),
        transposed,
    };
    let (k, n) = view.dims();
    view.validate(k, n).is_ok().then_some(view)
}

/// The implicit im2col form: one product over every (image, group),
/// `Y[m_g, pixels] (+)= W[m_g, c_g * taps] @ im2col(X)[c_g * taps, pixels]`, its `B` packed
/// straight from the input. The output holds the bias first when `accumulate`.
fn implicit_product(
    x: &TensorRef,
    w: &TensorRef,
    out: &TensorRef,
    s: &ConvShape,
    win: &Window,
    accumulate: bool,
) -> Option<Contract> {
    let (xs, ws, ys) = (x.strides(), w.strides(), out.strides());
    let mut batch = vec![s.n];
    let mut x_batch = vec![xs[0]];
    let mut a = matview(w, 0, ws[0], 1);
    let mut c = matview(out, 0, ys[1], 1);
    a.batch_strides.push(0);
    c.batch_strides.push(ys[0]);
    if s.groups > 1 {
        batch.push(s.groups);
        x_batch.push(s.c_g as i64 * xs[1]);
        a.batch_strides.push(s.m_g as i64 * ws[0]);
        c.batch_strides.push(s.m_g as i64 * ys[1]);
    }
    let b = im2col_view(x, s, win, x_batch, false)?;
    let (k, n) = b.dims();
    Some(Contract {
        elem: out.elem,
        batch,
        m: s.m_g,
        n,
        k,
        a,
        b: ContractB::Im2col(b),
        c,
        alpha: 1f64.to_bits(),
        accumulate,
        pack: None,
        a_packed: None,
        b_packed: None,
        transposed: false,
        winograd: None,
    })
}

/// The column matrix `[images, groups * c_g * taps, pixels]` of the explicit im2col form in
/// `scratch`, in `elem`, with the window's taps and the output's pixels (Conv's and ConvGrad's
/// dW share it).
fn column_matrix(
    s: &ConvShape,
    win: &Window,
    images: u64,
    scratch: &TensorRef,
    elem: Scalar,
) -> (TensorRef, u64, u64) {
    let taps: u64 = win.kernel.iter().map(|&k| k as u64).product();
    let pixels: u64 = s.out_spatial.iter().product();
    let col = TensorRef {
        region: scratch.region,
        byte_offset: scratch.byte_offset,
        elem,
        shape: vec![images, s.groups * s.c_g * taps, pixels],
    };
    (col, taps, pixels)
}

/// The kernels of the explicit im2col form: the output first holds the bias (when there is
/// one), then, per pass of `pass_images` images, the loop kernels of [`im2col_copies`] fill
/// the column matrix in `scratch` and one product per (image, group) multiplies it by the
/// weights.
#[allow(clippy::too_many_arguments)]
fn im2col_kernels(
    ctx: &LowerCtx,
    op: OpId,
    x: &TensorRef,
    w: &TensorRef,
    bias: Option<&TensorRef>,
    out: &TensorRef,
    s: &ConvShape,
    win: &Window,
    pass_images: u64,
    scratch: &TensorRef,
) -> Vec<Kernel> {
    let (col, taps, pixels) = column_matrix(s, win, pass_images, scratch, out.elem);
    let rows = s.groups * s.c_g * taps;
    let (xs, ws, ys) = (x.strides(), w.strides(), out.strides());
    let esize = out.elem.size() as i64;
    let mut kernels = Vec::new();
    if let Some(b) = bias {
        kernels.push(init_output(ctx.kernel_name(op, 0), out, Some(b)));
    }
    let mut first = 0;
    while first < s.n {
        let images = pass_images.min(s.n - first);
        let x_pass = TensorRef {
            byte_offset: x.byte_offset + first as i64 * xs[0] * esize,
            ..x.clone()
        };
        for body in im2col_copies(&x_pass, &col, s, win, images) {
            kernels.push(Kernel {
                name: ctx.kernel_name(op, kernels.len()),
                body,
            });
        }
        let k = s.c_g * taps;
        let mut a = matview(w, 0, ws[0], 1);
        let mut b = matview(&col, 0, pixels as i64, 1);
        let mut c = matview(out, first as i64 * ys[0], ys[1], 1);
        let mut batch = vec![images];
        a.batch_strides.push(0);
        b.batch_strides.push((rows * pixels) as i64);
        c.batch_strides.push(ys[0]);
        if s.groups > 1 {
            batch.push(s.groups);
            a.batch_strides.push(s.m_g as i64 * ws[0]);
            b.batch_strides.push((k * pixels) as i64);
            c.batch_strides.push(s.m_g as i64 * ys[1]);
        }
        let contract = Contract {
            elem: out.elem,
            batch,
            m: s.m_g,
            n: pixels,
            k,
            a,
            b: b.into(),
            c,
            alpha: 1f64.to_bits(),
            accumulate: bias.is_some(),
            pack: None,
            a_packed: None,
            b_packed: None,
            transposed: false,
            winograd: None,
        };
        kernels.push(Kernel {
            name: ctx.kernel_name(op, kernels.len()),
            body: KernelBody::Contract(contract),
        });
        first += images;
    }
    kernels
}

/// The loop kernels filling the column matrix `col[image, (c, taps...), (outputs...)] =
/// x[image, c, o * stride - pad + tap * dilation]` (0 in the padding) for `images` images.
///
/// Loop axes: `(image, c, tap..., output...)`, the longest output axis of each box moved
/// innermost (the last one in the interior). Along each
/// spatial axis the outputs `[lo, hi)` read inside the input for every tap; the box of outputs
/// interior on every axis is one kernel without guards (vectorized where the last axis has
/// stride 1). The rest is peeled axis by axis into at most two boxes per axis (outputs before
/// `lo` and from `hi` on, earlier axes interior, later axes whole), whose loads are guarded.
fn im2col_copies(
    x: &TensorRef,
    col: &TensorRef,
    s: &ConvShape,
    win: &Window,
    images: u64,
) -> Vec<KernelBody> {
    let n_spatial = s.in_spatial.len();
    let xs = x.strides();
    let taps: u64 = win.kernel.iter().map(|&k| k as u64).product();
    let pixels: u64 = s.out_spatial.iter().product();
    let channels = s.groups * s.c_g;
    // Element strides of the column matrix along the loop axes.
    let mut col_strides = vec![(channels * taps * pixels) as i64, (taps * pixels) as i64];
    for i in 0..n_spatial {
        let inner_taps: u64 = win.kernel[i + 1..].iter().map(|&k| k as u64).product();
        col_strides.push((inner_taps * pixels) as i64);
    }
    for i in 0..n_spatial {
        col_strides.push(s.out_spatial[i + 1..].iter().product::<u64>() as i64);
    }
    let mut x_strides = vec![xs[0], xs[1]];
    for i in 0..n_spatial {
        x_strides.push(win.dilations[i] * xs[2 + i]);
    }
    for i in 0..n_spatial {
        x_strides.push(win.strides[i] * xs[2 + i]);
    }
    let tap_axis = |i: usize| 2 + i;
    let out_axis = |i: usize| 2 + n_spatial + i;
    // The interior outputs `[lo, hi)` of each axis, and whether an axis ever reads padding.
    let mut interior = Vec::with_capacity(n_spatial);
    let mut needs_guard = Vec::with_capacity(n_spatial);
    for i in 0..n_spatial {
        let out = s.out_spatial[i] as i64;
        let size = s.in_spatial[i] as i64;
        let reach = (win.kernel[i] - 1) * win.dilations[i];
        let lo = ceil_div(win.begin[i], win.strides[i]).clamp(0, out);
        let hi = ((size - 1 + win.begin[i] - reach).div_euclid(win.strides[i]) + 1).clamp(lo, out);
        interior.push((lo, hi));
        let last = (out - 1) * win.strides[i] - win.begin[i] + reach;
        needs_guard.push(win.begin[i] > 0 || last >= size);
    }
    // One box: per axis the first output and the count, and whether its loads are guarded.
    let make = |ranges: &[(i64, i64, bool)]| -> Option<KernelBody> {
        if ranges.iter().any(|&(_, len, _)| len <= 0) {
            return None;
        }
        let mut outer = vec![images, channels];
        outer.extend(win.kernel.iter().map(|&k| k as u64));
        outer.extend(ranges.iter().map(|&(_, len, _)| len as u64));
        let n_axes = outer.len();
        let mut col_view = col.view_with(col_strides.clone());
        let mut x_view = x.view_with(x_strides.clone());
        let mut col_offset = 0i64;
        let mut x_offset = 0i64;
        for (i, &(start, _, guarded)) in ranges.iter().enumerate() {
            col_offset += start * col_strides[out_axis(i)];
            x_offset += (start * win.strides[i] - win.begin[i]) * xs[2 + i];
            if guarded {
                let mut coeffs = vec![0i64; n_axes];
                coeffs[tap_axis(i)] = win.dilations[i];
                coeffs[out_axis(i)] = win.strides[i];
                x_view.guards.push(guard(
                    coeffs,
                    start * win.strides[i] - win.begin[i],
                    s.in_spatial[i] as i64,
                ));
            }
        }
        col_view.byte_offset += col_offset * col.elem.size() as i64;
        x_view.byte_offset += x_offset * x.elem.size() as i64;
        // A guarded box (scalar anyway) runs its longest output axis innermost, one row per
        // backend call, not a border box's single column; the interior keeps the last axis
        // innermost, where it is contiguous.
        let guarded = ranges.iter().any(|&(_, _, g)| g);
        let longest = match (0..n_spatial).max_by_key(|&i| (ranges[i].1, i)) {
            Some(i) if guarded => out_axis(i),
            _ => n_axes - 1,
        };
        let mut order: Vec<usize> = (0..n_axes).filter(|&a| a != longest).collect();
        order.push(longest);
        let outer: Vec<u64> = order.iter().map(|&a| outer[a]).collect();
        let permute = |v: &[i64]| -> Vec<i64> { order.iter().map(|&a| v[a]).collect() };
        col_view.strides = permute(&col_view.strides);
        x_view.strides = permute(&x_view.strides);
        for g in &mut x_view.guards {
            g.coeffs = permute(&g.coeffs);
        }
        let views = vec![col_view, x_view];
        let mut insts = Insts::new();
        let value = insts.load(&views, 1);
        let kernel = loop_kernel(
            String::new(),
            outer,
            Vec::new(),
            views,
            vec![map_stage(insts, 0, value)],
        );
        Some(kernel.body)
    };
    let mut bodies = Vec::new();
    for i in 0..n_spatial {
        let (lo, hi) = interior[i];
        let out = s.out_spatial[i] as i64;
        for (start, end) in [(0, lo), (hi, out)] {
            let ranges: Vec<(i64, i64, bool)> = (0..n_spatial)
                .map(|j| match j.cmp(&i) {
                    std::cmp::Ordering::Less => {
                        (interior[j].0, interior[j].1 - interior[j].0, false)
                    }
                    std::cmp::Ordering::Equal => (start, end - start, true),
                    std::cmp::Ordering::Greater => (0, s.out_spatial[j] as i64, needs_guard[j]),
                })
                .collect();
            bodies.extend(make(&ranges));
        }
    }
    let ranges: Vec<(i64, i64, bool)> = interior
        .iter()
        .map(|&(lo, hi)| (lo, hi - lo, false))
        .collect();
    bodies.extend(make(&ranges));
    bodies
}

/// Every kernel tap (one index per spatial axis), row-major.
fn tap_grid(kernel: &[i64]) -> Vec<Vec<i64>> {
    let mut taps = vec![Vec::new()];
    for &k in kernel {
        taps = taps
            .into_iter()
            .flat_map(|t| (0..k).map(move |i| [t.clone(), vec![i]].concat()))
            .collect();
    }
    taps
}

/// One kernel tap as a batched matrix product: `C[rows = output channels, cols = the last
/// spatial axis] += A[output, input channels] @ B[input channels, cols]`, batched over `n`,
/// the group and the other spatial axes, restricted to the positions where the tap reads
/// inside the input (so no padding is ever read).
struct Tap {
    contract: Contract,
    /// Whether the tap writes every output element.
    covers_all: bool,
}

/// `ceil(a / b)` for `b > 0`.
fn ceil_div(a: i64, b: i64) -> i64 {
    -((-a).div_euclid(b))
}

/// Conv tap `k`: output position `o` reads input `o * stride - pad + k * dilation`.
fn conv_tap(
    x: &TensorRef,
    w: &TensorRef,
    out: &TensorRef,
    s: &ConvShape,
    win: &Window,
    k: &[i64],
) -> Option<Tap> {
    let n_spatial = k.len();
    let (xs, ws, ys) = (x.strides(), w.strides(), out.strides());
    let mut ranges = Vec::with_capacity(n_spatial);
    for (i, &ki) in k.iter().enumerate() {
        let shift = ki * win.dilations[i] - win.begin[i];
        let lo = ceil_div(-shift, win.strides[i]).max(0);
        let hi = ((s.in_spatial[i] as i64 - 1 - shift).div_euclid(win.strides[i]) + 1)
            .min(s.out_spatial[i] as i64);
        if hi <= lo {
            return None;
        }
        ranges.push((lo, hi, shift));
    }
    let covers_all = ranges
        .iter()
        .zip(&s.out_spatial)
        .all(|(&(lo, hi, _), &o)| lo == 0 && hi == o as i64);
    let mut a = matview(
        w,
        sum_of(k.iter().enumerate().map(|(i, &ki)| ki * ws[2 + i])),
        ws[0],
        ws[1],
    );
    let mut b = matview(
        x,
        sum_of(
            ranges
                .iter()
                .enumerate()
                .map(|(i, &(lo, _, shift))| (lo * win.strides[i] + shift) * xs[2 + i]),
        ),
        xs[1],
        win.strides[n_spatial - 1] * xs[1 + n_spatial],
    );
    let mut c = matview(
        out,
        sum_of(
            ranges
                .iter()
                .enumerate()
                .map(|(i, &(lo, _, _))| lo * ys[2 + i]),
        ),
        ys[1],
        ys[1 + n_spatial],
    );
    let mut batch = vec![s.n];
    a.batch_strides.push(0);
    b.batch_strides.push(xs[0]);
    c.batch_strides.push(ys[0]);
    if s.groups > 1 {
        batch.push(s.groups);
        a.batch_strides.push(s.m_g as i64 * ws[0]);
        b.batch_strides.push(s.c_g as i64 * xs[1]);
        c.batch_strides.push(s.m_g as i64 * ys[1]);
    }
    for (i, &(lo, hi, _)) in ranges.iter().enumerate().take(n_spatial - 1) {
        batch.push((hi - lo) as u64);
        a.batch_strides.push(0);
        b.batch_strides.push(win.strides[i] * xs[2 + i]);
        c.batch_strides.push(ys[2 + i]);
    }
    let (lo, hi, _) = ranges[n_spatial - 1];
    let contract = merge_batch_into_cols(Contract {
        elem: out.elem,
        batch,
        m: s.m_g,
        n: (hi - lo) as u64,
        k: s.c_g,
        a,
        b: b.into(),
        c,
        alpha: 1f64.to_bits(),
        accumulate: true,
        pack: None,
        a_packed: None,
        b_packed: None,
        transposed: false,
        winograd: None,
    });
    Some(Tap {
        contract,
        covers_all,
    })
}

fn sum_of(terms: impl Iterator<Item = i64>) -> i64 {
    terms.sum()
}

/// A matrix view of `t` from element offset `offset` with the given row and column strides.
fn matview(t: &TensorRef, offset: i64, row: i64, col: i64) -> MatView {
    MatView {
        region: t.region,
        byte_offset: t.byte_offset + offset * t.elem.size() as i64,
        batch_strides: Vec::new(),
        row_stride: row,
        col_stride: col,
    }
}

/// Folds trailing batch axes into the columns where `b` and `c` both step over them exactly as
/// one more run of columns (a 1x1 stride-1 convolution becomes one product per image).
fn merge_batch_into_cols(mut c: Contract) -> Contract {
    let ContractB::Mat(b) = &mut c.b else {
        return c;
    };
    while let Some(&extent) = c.batch.last() {
        let last = c.batch.len() - 1;
        let (bs, cs) = (b.batch_strides[last], c.c.batch_strides[last]);
        let n = c.n as i64;
        if c.a.batch_strides[last] != 0 || bs != n * b.col_stride || cs != n * c.c.col_stride {
            break;
        }
        c.n *= extent;
        c.batch.pop();
        for v in [&mut c.a, b, &mut c.c] {
            v.batch_strides.pop();
        }
    }
    c
}

/// The kernels of a convolution in tap form: the output first holds the bias (or zeros, unless
/// a tap covering every output goes first and overwrites), then every tap accumulates.
fn tap_kernels(
    ctx: &LowerCtx,
    op: OpId,
    out: &TensorRef,
    bias: Option<&TensorRef>,
    mut taps: Vec<Tap>,
) -> Vec<Kernel> {
    let mut kernels = Vec::new();
    let full = taps.iter().position(|t| t.covers_all);
    match (bias, full) {
        (None, Some(i)) => {
            let mut first = taps.remove(i);
            first.contract.accumulate = false;
            taps.insert(0, first);
        }
        _ => kernels.push(init_output(ctx.kernel_name(op, 0), out, bias)),
    }
    for contract in taps.into_iter().map(|t| t.contract) {
        let name = ctx.kernel_name(op, kernels.len());
        kernels.push(Kernel {
            name,
            body: KernelBody::Contract(contract),
        });
    }
    kernels
}

/// A kernel writing the bias of each output channel (or 0) into the whole output.
fn init_output(name: String, out: &TensorRef, bias: Option<&TensorRef>) -> Kernel {
    let mut views = vec![out.view_identity(0)];
    let mut insts = Insts::new();
    let value = match bias {
        Some(b) => {
            let mut strides = vec![0i64; out.rank()];
            strides[1] = 1;
            views.push(b.view_with(strides));
            insts.load(&views, 1)
        }
        None => insts.constant(out.elem, 0.0),
    };
    loop_kernel(
        name,
        out.shape.clone(),
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )
}

/// Conv as one direct loop kernel (see the module doc).
fn direct_conv(
    name: String,
    x: &TensorRef,
    w: &TensorRef,
    bias: Option<&TensorRef>,
    out: &TensorRef,
    s: &ConvShape,
    win: &Window,
) -> Kernel {
    let axes = Axes {
        grouped: s.groups > 1,
        n_spatial: s.in_spatial.len(),
    };
    let n_axes = axes.count();
    let (outer, inner) = s.loops(&win.kernel, &axes);
    let xs = x.strides();
    let mut x_strides = vec![0i64; n_axes];
    x_strides[0] = xs[0];
    if let Some(g) = axes.g() {
        x_strides[g] = xs[1] * s.c_g as i64;
    }
    x_strides[axes.c()] = xs[1];
    let mut x_view = x.view_with(Vec::new());
    let mut offset = 0i64;
    for i in 0..axes.n_spatial {
        let stride = xs[2 + i];
        x_strides[axes.o(i)] = win.strides[i] * stride;
        x_strides[axes.k(i)] = win.dilations[i] * stride;
        offset -= win.begin[i] * stride;
        let size = s.in_spatial[i] as i64;
        let last = (s.out_spatial[i] as i64 - 1) * win.strides[i] - win.begin[i]
            + (win.kernel[i] - 1) * win.dilations[i];
        if win.begin[i] > 0 || last >= size {
            let mut coeffs = vec![0i64; n_axes];
            coeffs[axes.o(i)] = win.strides[i];
            coeffs[axes.k(i)] = win.dilations[i];
            x_view.guards.push(guard(coeffs, -win.begin[i], size));
        }
    }
    x_view.strides = x_strides;
    x_view.byte_offset += offset * x.elem.size() as i64;
    let ws = w.strides();
    let mut w_strides = vec![0i64; n_axes];
    if let Some(g) = axes.g() {
        w_strides[g] = ws[0] * s.m_g as i64;
    }
    w_strides[axes.m()] = ws[0];
    w_strides[axes.c()] = ws[1];
    for i in 0..axes.n_spatial {
        w_strides[axes.k(i)] = ws[2 + i];
    }
    let mut views = vec![output_view(out, s, &axes), x_view, w.view_with(w_strides)];
    if let Some(b) = bias {
        views.push(bias_view(b, s, &axes));
    }
    let acc_ty = out.elem.compute();
    let mut insts = Insts::new();
    let xv = insts.load(&views, 1);
    let wv = insts.load(&views, 2);
    let prod = insts.binary(BinaryOp::Mul, xv, wv);
    let reduce = Stage::Reduce {
        insts: insts.finish(),
        value: prod,
        op: ReduceOp::Sum,
        init: 0,
        ty: acc_ty,
    };
    loop_kernel(
        name,
        outer,
        inner,
        views,
        vec![reduce, finish_stage(acc_ty, out.elem, bias.is_some())],
    )
}

pub fn conv_transpose(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let w = ctx.input(op, 1)?;
    let bias = ctx.operand(op, 2)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(out.elem)?;
    let n_spatial = x.rank() - 2;
    let groups = u64::try_from(ctx.attr_int(op, "group")).unwrap_or(0);
    if groups == 0 || x.shape[1] % groups != 0 {
        return Err(unsupported(
            "`group` must be positive and divide the channels",
        ));
    }
    // W is [C, M / group, k...].
    let s = ConvShape {
        n: x.shape[0],
        groups,
        c_g: x.shape[1] / groups,
        m_g: w.shape[1],
        in_spatial: x.shape[2..].to_vec(),
        out_spatial: out.shape[2..].to_vec(),
    };
    let kernel = kernel_shape(ctx, op, &w)?;
    let attrs = WindowAttrs::of(&OpCtx { func: ctx.func, op }, n_spatial).map_err(unsupported)?;
    let strides = signed(&attrs.strides)?;
    let dilations = signed(&attrs.dilations)?;
    let output_padding = match ctx.attr_ints(op, "output_padding") {
        None => vec![0; n_spatial],
        Some(v) if v.len() == n_spatial => v,
        Some(v) => {
            return Err(unsupported(format!(
                "`output_padding` has {} entries for {n_spatial} spatial axes",
                v.len()
            )))
        }
    };
    // The begin pads, as the reference derives them: `SAME_*` without `pads` derives them,
    // otherwise the given begin pads (none with `VALID`).
    let pads_given = ctx.attr(op, "pads").is_some();
    let begin: Vec<i64> = match attrs.auto_pad {
        AutoPad::SameUpper | AutoPad::SameLower if !pads_given => (0..n_spatial)
            .map(|i| {
                let extent = (kernel[i] - 1) * dilations[i] + 1;
                let total = strides[i] * (s.in_spatial[i] as i64 - 1) + output_padding[i] + extent
                    - s.out_spatial[i] as i64;
                if attrs.auto_pad == AutoPad::SameUpper {
                    total.div_euclid(2)
                } else {
                    total - total.div_euclid(2)
                }
            })
            .collect(),
        AutoPad::Valid => vec![0; n_spatial],
        _ => signed(
            &(0..n_spatial)
                .map(|i| attrs.explicit_pads(i).0)
                .collect::<Vec<u64>>(),
        )?,
    };
    let win = Window {
        kernel,
        strides,
        dilations,
        begin: begin.clone(),
        end: begin,
    };
    Ok(transposed_conv(
        ctx,
        op,
        &x,
        &w,
        bias.as_ref(),
        &out,
        &s,
        &win,
    ))
}

/// The kernels of a transposed convolution of `x` by `w` (`[C, M / group, k...]`) into `out`
/// (ConvTranspose, and ConvGrad's input gradient): one product per kernel tap in the target's
/// contraction types, else one loop kernel gathering, for each output position, the inputs
/// its taps receive. Only the window's begin pads are read.
#[allow(clippy::too_many_arguments)]
fn transposed_conv(
    ctx: &LowerCtx,
    op: OpId,
    x: &TensorRef,
    w: &TensorRef,
    bias: Option<&TensorRef>,
    out: &TensorRef,
    s: &ConvShape,
    win: &Window,
) -> Vec<Kernel> {
    let kernel = &win.kernel;
    let (strides, dilations, begin) = (&win.strides, &win.dilations, &win.begin);
    let n_spatial = kernel.len();
    if use_taps(ctx.target, out.elem, s) {
        let taps: Vec<Tap> = tap_grid(kernel)
            .into_iter()
            .filter_map(|k| transpose_tap(x, w, out, s, win, &k))
            .collect();
        return tap_kernels(ctx, op, out, bias, taps);
    }
    let axes = Axes {
        grouped: s.groups > 1,
        n_spatial,
    };
    let n_axes = axes.count();
    let (outer, inner) = s.loops(kernel, &axes);
    let xs = x.strides();
    let mut x_strides = vec![0i64; n_axes];
    x_strides[0] = xs[0];
    if let Some(g) = axes.g() {
        x_strides[g] = xs[1] * s.c_g as i64;
    }
    x_strides[axes.c()] = xs[1];
    let ws = w.strides();
    let mut w_strides = vec![0i64; n_axes];
    if let Some(g) = axes.g() {
        w_strides[g] = ws[0] * s.c_g as i64;
    }
    w_strides[axes.m()] = ws[1];
    w_strides[axes.c()] = ws[0];
    for i in 0..n_spatial {
        w_strides[axes.k(i)] = ws[2 + i];
    }
    let mut views = vec![
        output_view(out, s, &axes),
        x.view_with(x_strides),
        w.view_with(w_strides),
    ];
    if let Some(b) = bias {
        views.push(bias_view(b, s, &axes));
    }
    let mut insts = Insts::new();
    let mut valid: Option<InstId> = None;
    let mut terms = Vec::with_capacity(n_spatial);
    for i in 0..n_spatial {
        // t = o + pad - k * dilation must be i * stride for an input index 0 <= i < size.
        let o = insts.index(axes.o(i));
        let k = insts.index(axes.k(i));
        let kd = insts.mul_c(k, dilations[i]);
        let t = insts.add_c(o, begin[i]);
        let t = insts.binary(BinaryOp::Sub, t, kd);
        let st = insts.i64c(strides[i]);
        let rem = insts.binary(BinaryOp::FloorMod, t, st);
        let zero = insts.i64c(0);
        let divisible = insts.binary(BinaryOp::Eq, rem, zero);
        let index = insts.floor_div_c(t, strides[i]);
        let inside = insts.in_range_c(index, 0, s.in_spatial[i] as i64);
        let ok = insts.binary(BinaryOp::And, divisible, inside);
        valid = Some(insts.and(valid, ok));
        let index = insts.clamp_c(index, 0, s.in_spatial[i] as i64 - 1);
        terms.push(IndirectIndex {
            index,
            stride: xs[2 + i],
            limit: s.in_spatial[i] as i64,
        });
    }
    let xv = insts.load_indirect(&views, 1, terms);
    let wv = insts.load(&views, 2);
    let prod = insts.binary(BinaryOp::Mul, xv, wv);
    let zero = insts.constant(out.elem, 0.0);
    let value = match valid {
        Some(v) => insts.select(v, prod, zero),
        None => prod,
    };
    let reduce = Stage::Reduce {
        insts: insts.finish(),
        value,
        op: ReduceOp::Sum,
        init: 0,
        ty: out.elem.compute(),
    };
    vec![loop_kernel(
        ctx.kernel_name(op, 0),
        outer,
        inner,
        views,
        vec![reduce, finish_stage(out.elem, out.elem, bias.is_some())],
    )]
}

/// ConvTranspose tap `k`: input position `i` adds into output `i * stride + k * dilation -
/// pad`; the product's columns walk the input's last spatial axis and write every `stride`-th
/// output.
fn transpose_tap(
    x: &TensorRef,
    w: &TensorRef,
    out: &TensorRef,
    s: &ConvShape,
    win: &Window,
    k: &[i64],
) -> Option<Tap> {
    let n_spatial = k.len();
    let (xs, ws, ys) = (x.strides(), w.strides(), out.strides());
    let mut ranges = Vec::with_capacity(n_spatial);
    for (i, &ki) in k.iter().enumerate() {
        let shift = ki * win.dilations[i] - win.begin[i];
        let lo = ceil_div(-shift, win.strides[i]).max(0);
        let hi = ((s.out_spatial[i] as i64 - 1 - shift).div_euclid(win.strides[i]) + 1)
            .min(s.in_spatial[i] as i64);
        if hi <= lo {
            return None;
        }
        ranges.push((lo, hi, shift));
    }
    // W is [C, M / group, k...]: rows are output channels, columns input channels.
    let mut a = matview(
        w,
        sum_of(k.iter().enumerate().map(|(i, &ki)| ki * ws[2 + i])),
        ws[1],
        ws[0],
    );
    let mut b = matview(
        x,
        sum_of(
            ranges
                .iter()
                .enumerate()
                .map(|(i, &(lo, _, _))| lo * xs[2 + i]),
        ),
        xs[1],
        xs[1 + n_spatial],
    );
    let mut c = matview(
        out,
        sum_of(
            ranges
                .iter()
                .enumerate()
                .map(|(i, &(lo, _, shift))| (lo * win.strides[i] + shift) * ys[2 + i]),
        ),
        ys[1],
        win.strides[n_spatial - 1] * ys[1 + n_spatial],
    );
    let mut batch = vec![s.n];
    a.batch_strides.push(0);
    b.batch_strides.push(xs[0]);
    c.batch_strides.push(ys[0]);
    if s.groups > 1 {
        batch.push(s.groups);
        a.batch_strides.push(s.c_g as i64 * ws[0]);
        b.batch_strides.push(s.c_g as i64 * xs[1]);
        c.batch_strides.push(s.m_g as i64 * ys[1]);
    }
    for (i, &(lo, hi, _)) in ranges.iter().enumerate().take(n_spatial - 1) {
        batch.push((hi - lo) as u64);
        a.batch_strides.push(0);
        b.batch_strides.push(xs[2 + i]);
        c.batch_strides.push(win.strides[i] * ys[2 + i]);
    }
    let (lo, hi, _) = ranges[n_spatial - 1];
    let covers_all = ranges.iter().enumerate().all(|(i, &(lo, hi, shift))| {
        win.strides[i] == 1 && lo + shift == 0 && hi - 1 + shift == s.out_spatial[i] as i64 - 1
    });
    let contract = merge_batch_into_cols(Contract {
        elem: out.elem,
        batch,
        m: s.m_g,
        n: (hi - lo) as u64,
        k: s.c_g,
        a,
        b: b.into(),
        c,
        alpha: 1f64.to_bits(),
        accumulate: true,
        pack: None,
        a_packed: None,
        b_packed: None,
        transposed: false,
        winograd: None,
    });
    Some(Tap {
        contract,
        covers_all,
    })
}

/// Col2Im: `[N, C * prod(block_shape), L]` summed back into `[N, C, image_shape...]`.
/// ConvTranspose's gather form with an identity filter: one loop kernel whose outer axes
/// `(n, c, o...)` walk the image and whose inner axes `(k...)` the block; image position `o`
/// receives block `l` through tap `k` when `o + pad - k * dilation = l * stride`, tested with
/// index arithmetic and read with a `LoadIndirect`.
pub fn col2im(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let x = ctx.input(op, 0)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(out.elem)?;
    let n_spatial = out.rank() - 2;
    let block = ctx
        .const_ints(op, 2)
        .filter(|b| b.len() == n_spatial && b.iter().all(|&k| k > 0))
        .ok_or_else(|| unsupported("Col2Im's `block_shape` must be a compile-time constant"))?;
    let per_axis = |name: &str, len: usize, default: i64| -> Result<Vec<i64>, LowerError> {
        match ctx.attr_ints(op, name) {
            None => Ok(vec![default; len]),
            Some(v) if v.len() == len => Ok(v),
            Some(v) => Err(unsupported(format!(
                "`{name}` has {} entries, expected {len}",
                v.len()
            ))),
        }
    };
    let dilations = per_axis("dilations", n_spatial, 1)?;
    let strides = per_axis("strides", n_spatial, 1)?;
    let pads = per_axis("pads", 2 * n_spatial, 0)?;
    let image: Vec<i64> = signed(&out.shape[2..])?;
    let n_blocks: Vec<i64> = (0..n_spatial)
        .map(|i| {
            (image[i] + pads[i] + pads[n_spatial + i] - dilations[i] * (block[i] - 1) - 1)
                / strides[i]
                + 1
        })
        .collect();
    if n_blocks.iter().product::<i64>() != x.shape[2] as i64 {
        return Err(unsupported(
            "Col2Im's input block count does not match its image and block shapes",
        ));
    }
    let n_axes = 2 + 2 * n_spatial;
    let outer = out.shape.clone();
    let inner: Vec<u64> = block.iter().map(|&k| k as u64).collect();
    let os = out.strides();
    let mut out_strides = vec![0i64; n_axes];
    out_strides[..os.len()].copy_from_slice(&os);
    let xs = x.strides();
    let block_elems: i64 = block.iter().product();
    let mut x_strides = vec![0i64; n_axes];
    x_strides[0] = xs[0];
    x_strides[1] = xs[1] * block_elems;
    for i in 0..n_spatial {
        x_strides[2 + n_spatial + i] = xs[1] * block[i + 1..].iter().product::<i64>();
    }
    let views = vec![out.view_with(out_strides), x.view_with(x_strides)];
    let mut insts = Insts::new();
    let mut valid: Option<InstId> = None;
    let mut terms = Vec::with_capacity(n_spatial);
    for i in 0..n_spatial {
        // t = o + pad - k * dilation must be l * stride for a block index 0 <= l < blocks.
        let o = insts.index(2 + i);
        let k = insts.index(2 + n_spatial + i);
        let kd = insts.mul_c(k, dilations[i]);
        let t = insts.add_c(o, pads[i]);
        let t = insts.binary(BinaryOp::Sub, t, kd);
        let st = insts.i64c(strides[i]);
        let rem = insts.binary(BinaryOp::FloorMod, t, st);
        let zero = insts.i64c(0);
        let divisible = insts.binary(BinaryOp::Eq, rem, zero);
        let index = insts.floor_div_c(t, strides[i]);
        let inside = insts.in_range_c(index, 0, n_blocks[i]);
        let ok = insts.binary(BinaryOp::And, divisible, inside);
        valid = Some(insts.and(valid, ok));
        let index = insts.clamp_c(index, 0, n_blocks[i] - 1);
        terms.push(IndirectIndex {
            index,
            stride: xs[2] * n_blocks[i + 1..].iter().product::<i64>(),
            limit: n_blocks[i],
        });
    }
    let xv = insts.load_indirect(&views, 1, terms);
    let zero = insts.constant(out.elem, 0.0);
    let value = match valid {
        Some(v) => insts.select(v, xv, zero),
        None => xv,
    };
    let acc_ty = out.elem.compute();
    let reduce = Stage::Reduce {
        insts: insts.finish(),
        value,
        op: ReduceOp::Sum,
        init: 0,
        ty: acc_ty,
    };
    Ok(vec![loop_kernel(
        ctx.kernel_name(op, 0),
        outer,
        inner,
        views,
        vec![reduce, finish_stage(acc_ty, out.elem, false)],
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "same" 3x3 convolution of `c` to `m` channels over `size x size`.
    fn same(c: u64, m: u64, size: u64) -> (ConvShape, Window) {
        let shape = ConvShape {
            n: 1,
            groups: 1,
            c_g: c,
            m_g: m,
            in_spatial: vec![size, size],
            out_spatial: vec![size, size],
        };
        let window = Window {
            kernel: vec![3, 3],
            strides: vec![1, 1],
            dilations: vec![1, 1],
            begin: vec![1, 1],
            end: vec![1, 1],
        };
        (shape, window)
    }

    #[test]
    fn winograd_prefers_blocks_of_32_tiles_to_more_slots() {
        let (s, win) = same(64, 32, 32);
        let cap = 4 << 20;
        let form = |room: u64, slots: Slots| winograd_form(&s, &win, Scalar::F32, cap, room, slots);
        let slot = |block: u64, slots: u64| {
            let b = memc_gemm::winograd_blocking_in(32, 64, u64::MAX, &[block]).expect("fits");
            memc_gemm::winograd_scratch_bytes(b.block, b.chunk, b.depth) * slots + 64
        };
        // Room for four slots of 16-tile blocks but only two of 32: two of 32.
        let room = slot(16, 4).max(slot(32, 2));
        assert!(room < slot(32, 4));
        for slots in [Slots::All, Slots::AsFit] {
            let f = form(room, slots).expect("a Winograd form");
            assert_eq!((f.block, f.slots), (32, 2), "{slots:?}: {f:?}");
            assert!(f.scratch_bytes() + 64 <= room);
        }
        // Room for everything: a slot per GEMM thread in blocks of 32.
        let f = form(u64::MAX, Slots::All).expect("a Winograd form");
        assert_eq!((f.block, f.slots), (32, crate::cpu::target::GEMM_THREADS));
        // Never one thread in blocks of 16 (the direct kernel runs as fast, on every thread),
        // never one slot before the arena is placed; some room gives one slot of 32.
        let mut one_of_32 = false;
        for room in (16..2048).map(|kib| kib << 10) {
            for slots in [Slots::All, Slots::AsFit] {
                let Some(f) = form(room, slots) else {
                    continue;
                };
                assert!(f.scratch_bytes() + 64 <= room, "{f:?}");
                assert!(
                    f.slots > 1 || (f.block == 32 && slots == Slots::AsFit),
                    "{f:?}"
                );
                one_of_32 |= f.slots == 1;
            }
        }
        assert!(one_of_32);
        let (small, win16) = same(32, 32, 16);
        let b = memc_gemm::winograd_blocking_in(32, 32, u64::MAX, &[16]).expect("fits");
        let room = memc_gemm::winograd_scratch_bytes(b.block, b.chunk, b.depth) + 64;
        assert!(winograd_form(&small, &win16, Scalar::F32, cap, room, Slots::AsFit).is_none());
    }
}
