//! Winograd F(2x2, 3x3) convolution: a 3x3, stride-1, undilated 2-d convolution computed per
//! 2x2 output tile from its 4x4 input tile as `Y = A^T [(G g G^T) . (B^T d B)] A` (Lavin and
//! Gray, 2015): 16 products per tile and channel pair where the direct form takes 36, so 2.25x
//! fewer multiply-adds, in 16 ordinary products (one per point `xi` of the 4x4 transform):
//! `M[xi] = U[xi] @ V[xi]`, `U[xi]` the transformed weight (`m x channels`, packed whole at
//! compile time by [`pack_winograd_weights`]) and `V[xi]` the transformed input (`channels x
//! tiles`).
//!
//! - **Blocks of tiles.** The output's tiles (row-major, `ceil(oh / 2) x ceil(ow / 2)`) are cut
//!   into blocks of at most [`WinogradConv::block`] tiles. Per block, a thread transforms the
//!   input into `V` (16 matrices, in the layout of a `B` packed whole, so the GEMM's
//!   microkernel reads it as it is), runs the 16 products with the GEMM microkernels into `M`,
//!   and transforms `M` into the block's outputs with the epilogue (alpha, bias, residual,
//!   clamp) applied as they are stored. A block's `V` and `M` stay in the thread's cache.
//! - **Memory.** Per thread, [`winograd_scratch_bytes`]: `V` (16 x input channels of a piece
//!   x the block rounded up to a strip), `M` (16 x output channels of a chunk x block) and a
//!   staging row of 16 x (block + 8) values, in planned scratch. Where the cap is too small
//!   for every channel at once, output channels go in chunks (each chunk's `M`, then its
//!   outputs) and input channels in pieces (each piece's `V` once, then each chunk's `M` of
//!   that piece, its outputs added into the result). The weight is 16/9 of the direct form's
//!   (its transform).
//! - **Numerics.** The transforms add and subtract (and halve, in `G`), so an output differs
//!   from the direct sum by rounding only (relative error ~1e-6 for f32 on unit-scale data),
//!   and is the same whatever the number of threads (a block's outputs are computed by one
//!   thread, in one order).
//! - **Threads.** Units of (batch index, block), taken from a shared counter; with fewer
//!   blocks than threads (a 7x7 image is one block), units of (batch index, block, run of
//!   whole chunks of output channels), one run per thread, each transforming its block's
//!   input itself.
//!
//! Guarantees: every input element read lies inside the input (tiles over the padding read
//! zeros from a bounded copy), and every output written is an output of the convolution.

use crate::{isa, DirectOperands, Epilogue, Isa, Kernels, Mat, GEMM_KC_BYTES, MR, PACKED_B_STRIP};

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Points of the transformed tile (4 x 4).
const POINTS: usize = 16;
/// Lanes of the transforms' vectors.
const LANES: usize = 8;
/// Groups of [`LANES`] tiles of one block's input transform whose masks are worked out once
/// per block: every group of a block of up to 32 tiles (each group holds a tile at least);
/// larger blocks work out the rest per load.
const MAX_GROUPS: usize = 32;
/// Columns of a strip of `V` (a `B` packed whole).
const STRIP: usize = PACKED_B_STRIP as usize;

/// A Winograd convolution of one image: `m` output channels from `channels` input channels
/// of `h x w`, padded by `pad_top` and `pad_left` (the other pads are implied by `oh`, `ow`:
/// `oh = h + pad_top + pad_bottom - 2`).
#[derive(Copy, Clone, Debug)]
pub struct WinogradConv {
    pub m: usize,
    pub channels: usize,
    pub h: usize,
    pub w: usize,
    /// Elements between consecutive input channels, and rows (columns are contiguous).
    pub channel_stride: isize,
    pub row_stride: isize,
    pub pad_top: usize,
    pub pad_left: usize,
    pub oh: usize,
    pub ow: usize,
    /// Tiles per block, output channels per chunk and input channels per piece
    /// ([`winograd_blocking`]).
    pub block: usize,
    pub chunk: usize,
    pub depth: usize,
    pub alpha: f32,
    /// Whether the result is added to what the output holds (before the epilogue).
    pub accumulate: bool,
    pub epilogue: Epilogue<f32>,
}

/// Values of the transformed weight of `m x channels x 3 x 3`: 16 matrices `m x channels`,
/// each packed whole.
pub fn winograd_weights_len(m: u64, channels: u64) -> u64 {
    crate::packed_a_len(m, channels).saturating_mul(POINTS as u64)
}

/// Columns of a strip of `V` for blocks of `block` tiles: 16 (the AVX2 microkernel's, and the
/// narrow one's) for blocks of 16, else a packed `B`'s strip.
fn strip(block: usize) -> usize {
    if block <= 16 {
        16
    } else {
        STRIP
    }
}

/// `V`'s columns for a block of `block` tiles: whole strips.
fn v_cols(block: usize) -> usize {
    block.div_ceil(strip(block)) * strip(block)
}

/// Values between the 16 points' matrices of `V` and of `M`, past their own values: a stride
/// that is a multiple of 4 KiB puts all 16 in the same L1 sets (blocks of 32 tiles in pieces
/// of 64 or 96 channels, one thread, AVX-512: 128->128 at 28x28 1.20 ms, pieces of 88 1.08).
const POINT_PAD: usize = 16;

/// Values from one point's matrix of `V` to the next's, for pieces of `depth` channels.
fn v_point_stride(block: usize, depth: usize) -> usize {
    depth * v_cols(block) + POINT_PAD
}

/// Values from one point's matrix of `M` to the next's, for chunks of `chunk` channels.
fn m_point_stride(block: usize, chunk: usize) -> usize {
    chunk * block + POINT_PAD
}

/// Values of one thread's scratch, in the order `V`, `M`, staging (each a multiple of 16), for
/// blocks of `block` tiles, chunks of `chunk` output channels and pieces of `depth` input
/// channels.
fn scratch_parts(block: usize, chunk: usize, depth: usize) -> [usize; 3] {
    let round = |x: usize| x.div_ceil(16) * 16;
    [
        round(POINTS * v_point_stride(block, depth)),
        round(POINTS * m_point_stride(block, chunk)),
        round(POINTS * (block + LANES)),
    ]
}

/// Bytes of one thread's scratch for blocks of `block` tiles, chunks of `chunk` output
/// channels and pieces of `depth` input channels (a multiple of 64).
pub fn winograd_scratch_bytes(block: u64, chunk: u64, depth: u64) -> u64 {
    let (Ok(b), Ok(o), Ok(d)) = (
        usize::try_from(block),
        usize::try_from(chunk),
        usize::try_from(depth),
    ) else {
        return u64::MAX;
    };
    if [b, o, d].iter().any(|&x| x > 1 << 24) {
        return u64::MAX;
    }
    scratch_parts(b, o, d)
        .iter()
        .fold(0u64, |sum, &part| sum.saturating_add(part as u64 * 4))
        .next_multiple_of(64)
}

/// A Winograd convolution's blocking: tiles per block, output channels per chunk, input
/// channels per piece.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WinogradBlocking {
    pub block: u64,
    pub chunk: u64,
    pub depth: u64,
}

/// The blocking for `m` output and `channels` input channels within `cap` bytes of scratch per
/// thread, in this order of preference: blocks of 32 tiles in pieces of at least 64 input
/// channels (or all of them, if fewer), then blocks of 16 likewise; within each, the fewest
/// pieces (each piece's output is added into the result: an output transform more per
/// piece; pieces within a packed run of `KC` are as even as multiples of 8 make them), then
/// every output channel in one chunk before chunks of 96, 48, 24, 12 or 6. `None` when none fits (then the convolution is not run
/// this way). Blocks of 32 before fewer pieces: on AVX-512 a block of 16 fills half the
/// microkernel's 32 columns (one thread, Xeon with AVX-512, 256->256 at 14x14: blocks of 32
/// in pieces of 88 channels 1.31 ms, 64 1.54, blocks of 16 in pieces of 128 1.97; the
/// direct kernel 1.87); on AVX2 the two are even (1.97 and 2.02 ms). Blocks under 16 tiles
/// would leave the vectors half empty. Small chunks fit small arenas and cost little
/// (`winograd_bench`, 32->32 at 16x16 in blocks of 16: chunks of 36, 12 and 6 channels
/// 0.0399, 0.0398 and 0.040-0.041 ms).
pub fn winograd_blocking(m: u64, channels: u64, cap: u64) -> Option<WinogradBlocking> {
    winograd_blocking_in(m, channels, cap, &[32, 16])
}

/// [`winograd_blocking`] with blocks of the sizes in `blocks` only (each 16 or 32), in their
/// order of preference.
pub fn winograd_blocking_in(
    m: u64,
    channels: u64,
    cap: u64,
    blocks: &[u64],
) -> Option<WinogradBlocking> {
    let whole = m.div_ceil(MR as u64) * MR as u64;
    // Pieces never cross a packed run of `KC` (`block_body`): a piece holds at most a run.
    let run = channels.min(GEMM_KC_BYTES / 4);
    // The depth of `pieces` pieces per run: all channels in one, else as even as multiples of
    // 8 allow.
    let depth_of = |pieces: u64| {
        if pieces == 1 && channels <= run {
            channels
        } else {
            run.div_ceil(pieces).next_multiple_of(8).min(run)
        }
    };
    let fits = |block: u64, depth: u64| {
        [whole, 96, 48, 24, 12, 6]
            .into_iter()
            .filter(|&chunk| chunk <= whole)
            .find(|&chunk| winograd_scratch_bytes(block, chunk, depth) <= cap)
            .map(|chunk| WinogradBlocking {
                block,
                chunk,
                depth,
            })
    };
    // Smaller pieces cost an output transform each and lose to the direct kernel.
    let least = channels.min(64);
    for &block in blocks {
        let mut pieces = 1;
        loop {
            let depth = depth_of(pieces);
            if depth < least {
                break;
            }
            if let Some(b) = fits(block, depth) {
                return Some(b);
            }
            if depth <= 8 {
                break;
            }
            pieces += 1;
        }
    }
    None
}

/// Whether a 2-d convolution's window runs as Winograd F(2x2, 3x3): 3x3 taps, stride 1,
/// dilation 1 (any pads: tiles over the padding read zeros).
pub fn winograd_window(kernel: &[i64], strides: &[i64], dilations: &[i64]) -> bool {
    kernel == [3, 3] && strides == [1, 1] && dilations == [1, 1]
}

/// Packs the weight `a` (`m x (channels * 9)`, value `(o, c * 9 + 3 * ky + kx)`) transformed
/// (`U = G g G^T` per output and input channel) into 16 matrices `m x channels`, matrix `xi`
/// at `dst + xi * packed_a_len(m, channels)`, each packed whole ([`crate::pack_a_whole`]).
/// Allocates one `m x channels` matrix (at compile time, never in a run).
///
/// # Safety
/// `a` is valid for `m x 9 * channels`; `dst` for [`winograd_weights_len`] values.
pub unsafe fn pack_winograd_weights(dst: *mut f32, a: Mat<f32>, m: usize, channels: usize) {
    let len = crate::packed_a_len(m as u64, channels as u64) as usize;
    let mut u = vec![0f32; POINTS * m * channels];
    for o in 0..m {
        for c in 0..channels {
            let g = |ky: usize, kx: usize| *a.at(o, c * 9 + 3 * ky + kx);
            // G g: 4 x 3, G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]].
            let mut gg = [[0f32; 3]; 4];
            for kx in 0..3 {
                let (g0, g1, g2) = (g(0, kx), g(1, kx), g(2, kx));
                gg[0][kx] = g0;
                gg[1][kx] = 0.5 * (g0 + g1 + g2);
                gg[2][kx] = 0.5 * (g0 - g1 + g2);
                gg[3][kx] = g2;
            }
            // (G g) G^T: 4 x 4.
            for (i, row) in gg.iter().enumerate() {
                let [r0, r1, r2] = *row;
                let t = [r0, 0.5 * (r0 + r1 + r2), 0.5 * (r0 - r1 + r2), r2];
                for (j, value) in t.into_iter().enumerate() {
                    u[((i * 4 + j) * m + o) * channels + c] = value;
                }
            }
        }
    }
    for xi in 0..POINTS {
        let src = Mat {
            ptr: u.as_mut_ptr().add(xi * m * channels),
            rs: channels as isize,
            cs: 1,
        };
        crate::pack_a_whole(dst.add(xi * len), src, m, channels);
    }
}

/// Runs the convolution for batch indices `0..batches` (operands `at(b)`: `a_packed` the
/// weight transformed by [`pack_winograd_weights`], `x` the input's element (channel 0, row 0,
/// column 0), `c` the output, `m` rows of `oh x ow` contiguous pixels), split over at most
/// `threads` threads that `broadcast(t, f)` runs `f(0..t)` on, thread `t` using the scratch at
/// `scratch + t * winograd_scratch_bytes(..)` (64-aligned).
///
/// # Safety
/// The operands are valid for the convolution's extents; the scratch holds `threads` slots;
/// the output overlaps neither the input nor the weight (a residual `add` may be anything the
/// epilogue can read before the element is written).
pub unsafe fn run_winograd(
    batches: usize,
    at: &(dyn Fn(usize) -> DirectOperands + Sync),
    conv: &WinogradConv,
    scratch: *mut u8,
    threads: usize,
    broadcast: crate::Broadcast<'_>,
) {
    let tiles = conv.oh.div_ceil(2) * conv.ow.div_ceil(2);
    if batches == 0
        || tiles == 0
        || conv.m == 0
        || conv.channels == 0
        || conv.block == 0
        || conv.chunk == 0
        || conv.depth == 0
    {
        return;
    }
    let blocks = tiles.div_ceil(conv.block);
    // Fewer blocks than threads (a small image): each block's chunks of output channels in
    // as many runs as there are threads, every run transforming its block's input itself
    // (once: a unit per chunk transformed it once per chunk, 64->64 at 8x8 on two threads in
    // chunks of 6 0.034 -> 0.094 ms).
    let chunks = conv.m.div_ceil(conv.chunk);
    let split = batches * blocks < threads && chunks > 1;
    let per_block = if split { chunks.min(threads) } else { 1 };
    let units = batches * blocks * per_block;
    let threads = threads.clamp(1, units);
    let slot =
        winograd_scratch_bytes(conv.block as u64, conv.chunk as u64, conv.depth as u64) as usize;
    let next = AtomicUsize::new(0);
    let scratch_at = scratch as usize;
    let work = |t: usize| {
        let scratch = (scratch_at as *mut u8).wrapping_add(t * slot).cast::<f32>();
        loop {
            let unit = next.fetch_add(1, Ordering::Relaxed);
            if unit >= units {
                break;
            }
            let (batch, block, part) = (
                unit / (blocks * per_block),
                unit / per_block % blocks,
                unit % per_block,
            );
            let first = block * conv.block;
            let count = conv.block.min(tiles - first);
            let rows = if split {
                let (c0, c1) = (part * chunks / per_block, (part + 1) * chunks / per_block);
                c0 * conv.chunk..(c1 * conv.chunk).min(conv.m)
            } else {
                0..conv.m
            };
            run_block(conv, &at(batch), first, count, rows, scratch);
        }
    };
    if threads == 1 {
        work(0);
    } else {
        broadcast(threads, &work);
    }
}

/// Output channels `rows` (whole chunks) of one block of `count` tiles from tile `first`, in
/// the instruction set's copy.
unsafe fn run_block(
    conv: &WinogradConv,
    ops: &DirectOperands,
    first: usize,
    count: usize,
    rows: Range<usize>,
    scratch: *mut f32,
) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(
            conv: &WinogradConv,
            ops: &DirectOperands,
            first: usize,
            count: usize,
            rows: Range<usize>,
            scratch: *mut f32,
        ) {
            block_body::<x86::Ymm>(conv, ops, first, count, rows, scratch)
        }
        if matches!(isa(), Isa::Avx2 | Isa::Avx512) {
            return avx2(conv, ops, first, count, rows, scratch);
        }
    }
    block_body::<[f32; LANES]>(conv, ops, first, count, rows, scratch)
}

/// Eight lanes of f32: the transforms' operations.
trait Lanes: Copy {
    fn zero() -> Self;
    fn splat(x: f32) -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn store(self, p: *mut f32);
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// `[p[2 i + j] for i in 0..8]` for `j` in 0..4 (18 values read).
    #[inline(always)]
    unsafe fn columns(p: *const f32) -> [Self; 4] {
        Self::columns_of([
            Self::load(p),
            Self::load(p.add(8)),
            Self::load(p.add(2)),
            Self::load(p.add(10)),
        ])
    }
    /// [`Lanes::columns`] of the 18 values whose vectors at 0, 8, 2 and 10 are `v`.
    fn columns_of(v: [Self; 4]) -> [Self; 4];
    /// Lane `l` from `p + l` where `lo <= l < hi`, else 0 (those lanes' addresses are not
    /// read: `p` may point outside the data).
    unsafe fn load_masked(p: *const f32, lo: isize, hi: isize) -> Self;
    /// The lanes `lo <= l < hi`, for [`Lanes::load_in`].
    type Mask: Copy;
    unsafe fn mask_of(lo: isize, hi: isize) -> Self::Mask;
    /// [`Lanes::load_masked`] with the lanes of a mask worked out before.
    unsafe fn load_in(p: *const f32, mask: Self::Mask) -> Self;
    /// Stores lanes `lo <= l < hi` at `p + l` (the others' addresses are not written).
    unsafe fn store_masked(self, p: *mut f32, lo: isize, hi: isize);
    /// The 16 values `even[0], odd[0], even[1], ...` as two vectors.
    fn interleave(even: Self, odd: Self) -> [Self; 2];
    /// `v < lo ? lo : v > hi ? hi : v` (NaN stays NaN), as [`crate::finish_block`].
    fn clamp(self, lo: Self, hi: Self) -> Self;
}

impl Lanes for [f32; LANES] {
    #[inline(always)]
    fn zero() -> Self {
        [0.0; LANES]
    }
    #[inline(always)]
    fn splat(x: f32) -> Self {
        [x; LANES]
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        std::ptr::read_unaligned(p.cast::<Self>())
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        std::ptr::write_unaligned(p.cast::<Self>(), self)
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        std::array::from_fn(|i| self[i] + o[i])
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        std::array::from_fn(|i| self[i] - o[i])
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        std::array::from_fn(|i| self[i] * o[i])
    }
    #[inline(always)]
    fn columns_of(v: [Self; 4]) -> [Self; 4] {
        // Value `k` of the 18 is in `v[0]` (0..8), `v[1]` (8..16) or `v[3]` (16..18).
        let at = |k: usize| match k {
            0..=7 => v[0][k],
            8..=15 => v[1][k - 8],
            _ => v[3][k - 10],
        };
        std::array::from_fn(|j| std::array::from_fn(|i| at(2 * i + j)))
    }
    #[inline(always)]
    unsafe fn load_masked(p: *const f32, lo: isize, hi: isize) -> Self {
        std::array::from_fn(|l| {
            let l = l as isize;
            if lo <= l && l < hi {
                *p.wrapping_offset(l)
            } else {
                0.0
            }
        })
    }
    type Mask = (isize, isize);
    #[inline(always)]
    unsafe fn mask_of(lo: isize, hi: isize) -> (isize, isize) {
        (lo, hi)
    }
    #[inline(always)]
    unsafe fn load_in(p: *const f32, (lo, hi): (isize, isize)) -> Self {
        Self::load_masked(p, lo, hi)
    }
    #[inline(always)]
    unsafe fn store_masked(self, p: *mut f32, lo: isize, hi: isize) {
        for (l, v) in self.into_iter().enumerate() {
            let l = l as isize;
            if lo <= l && l < hi {
                *p.wrapping_offset(l) = v;
            }
        }
    }
    #[inline(always)]
    fn interleave(even: Self, odd: Self) -> [Self; 2] {
        let at = |k: usize| if k % 2 == 0 { even[k / 2] } else { odd[k / 2] };
        [
            std::array::from_fn(at),
            std::array::from_fn(|k| at(k + LANES)),
        ]
    }
    #[inline(always)]
    fn clamp(self, lo: Self, hi: Self) -> Self {
        std::array::from_fn(|i| {
            let v = self[i];
            if v < lo[i] {
                lo[i]
            } else if v > hi[i] {
                hi[i]
            } else {
                v
            }
        })
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Lanes;
    use std::arch::x86_64::*;

    /// An AVX2 vector (used only inside `avx2, fma` functions).
    #[derive(Copy, Clone)]
    pub(super) struct Ymm(__m256);

    /// The even and odd elements of the 16 in `a` then `b`: [a0 a2 b0 b2 | a4 a6 b4 b6] (and
    /// the odd ones likewise), then the middle 64-bit pairs swapped.
    #[inline(always)]
    unsafe fn split(a: __m256, b: __m256) -> (__m256, __m256) {
        let even = _mm256_shuffle_ps::<0b10_00_10_00>(a, b);
        let odd = _mm256_shuffle_ps::<0b11_01_11_01>(a, b);
        let order = _mm256_permute4x64_pd::<0b11_01_10_00>;
        (
            _mm256_castpd_ps(order(_mm256_castps_pd(even))),
            _mm256_castpd_ps(order(_mm256_castps_pd(odd))),
        )
    }

    /// The mask of lanes `lo <= l < hi`.
    #[inline(always)]
    unsafe fn mask(lo: isize, hi: isize) -> __m256i {
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let lo = _mm256_set1_epi32(lo.clamp(-1, 9) as i32 - 1);
        let hi = _mm256_set1_epi32(hi.clamp(-1, 9) as i32);
        _mm256_and_si256(_mm256_cmpgt_epi32(lanes, lo), _mm256_cmpgt_epi32(hi, lanes))
    }

    impl Lanes for Ymm {
        #[inline(always)]
        fn zero() -> Self {
            // SAFETY: AVX is enabled wherever `Ymm` is used.
            Ymm(unsafe { _mm256_setzero_ps() })
        }
        #[inline(always)]
        fn splat(x: f32) -> Self {
            // SAFETY: as `zero`.
            Ymm(unsafe { _mm256_set1_ps(x) })
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            Ymm(_mm256_loadu_ps(p))
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            _mm256_storeu_ps(p, self.0)
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            // SAFETY: as `zero`.
            Ymm(unsafe { _mm256_add_ps(self.0, o.0) })
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            // SAFETY: as `zero`.
            Ymm(unsafe { _mm256_sub_ps(self.0, o.0) })
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            // SAFETY: as `zero`.
            Ymm(unsafe { _mm256_mul_ps(self.0, o.0) })
        }
        #[inline(always)]
        fn columns_of(v: [Self; 4]) -> [Self; 4] {
            // SAFETY: as `zero`.
            unsafe {
                let (d0, d1) = split(v[0].0, v[1].0);
                let (d2, d3) = split(v[2].0, v[3].0);
                [Ymm(d0), Ymm(d1), Ymm(d2), Ymm(d3)]
            }
        }
        #[inline(always)]
        unsafe fn load_masked(p: *const f32, lo: isize, hi: isize) -> Self {
            Ymm(_mm256_maskload_ps(p, mask(lo, hi)))
        }
        type Mask = __m256i;
        #[inline(always)]
        unsafe fn mask_of(lo: isize, hi: isize) -> __m256i {
            mask(lo, hi)
        }
        #[inline(always)]
        unsafe fn load_in(p: *const f32, mask: __m256i) -> Self {
            Ymm(_mm256_maskload_ps(p, mask))
        }
        #[inline(always)]
        unsafe fn store_masked(self, p: *mut f32, lo: isize, hi: isize) {
            // Through the stack, value by value: `vmaskmovps` stores are slow on AMD (the
            // 64-channel 56x56 layers, whose tile rows end mid-vector, ran 1.3x slower).
            let (lo, hi) = (lo.max(0) as usize, hi.min(8) as usize);
            if lo == 0 && hi == 8 {
                return self.store(p);
            }
            let mut all = [0f32; 8];
            _mm256_storeu_ps(all.as_mut_ptr(), self.0);
            for (l, &v) in all.iter().enumerate().take(hi).skip(lo) {
                *p.add(l) = v;
            }
        }
        #[inline(always)]
        fn interleave(even: Self, odd: Self) -> [Self; 2] {
            // SAFETY: as `zero`.
            unsafe {
                let lo = _mm256_unpacklo_ps(even.0, odd.0);
                let hi = _mm256_unpackhi_ps(even.0, odd.0);
                [
                    Ymm(_mm256_permute2f128_ps::<0x20>(lo, hi)),
                    Ymm(_mm256_permute2f128_ps::<0x31>(lo, hi)),
                ]
            }
        }
        #[inline(always)]
        fn clamp(self, lo: Self, hi: Self) -> Self {
            // SAFETY: as `zero`.
            unsafe {
                let above = _mm256_cmp_ps::<_CMP_GT_OQ>(self.0, hi.0);
                let below = _mm256_cmp_ps::<_CMP_LT_OQ>(self.0, lo.0);
                Ymm(_mm256_blendv_ps(
                    _mm256_blendv_ps(self.0, hi.0, above),
                    lo.0,
                    below,
                ))
            }
        }
    }
}

#[inline(always)]
unsafe fn block_body<X: Lanes>(
    conv: &WinogradConv,
    ops: &DirectOperands,
    first: usize,
    count: usize,
    rows: Range<usize>,
    scratch: *mut f32,
) {
    let [v_len, m_len, _] = scratch_parts(conv.block, conv.chunk, conv.depth);
    let v = scratch;
    let mm = scratch.add(v_len);
    let staging = mm.add(m_len);
    // Pieces of input channels: at most `depth`, never across a packed run of `KC` (so a
    // piece's strip of `U` is one stretch of its run).
    let kc_max = GEMM_KC_BYTES as usize / 4;
    let next_piece = |k0: usize| {
        let run_end = (k0 / kc_max * kc_max + kc_max).min(conv.channels);
        (k0 + conv.depth).min(run_end)
    };
    // Each piece of input channels (all of them, where they fit): its `V` once, then every
    // chunk's `M` of that piece alone, transformed and added into the output (the output
    // transform is linear, so the pieces' outputs sum to the whole). The first piece writes
    // the output with the bias and the residual (each element read before it is written),
    // the last clamps. Per chunk a piece's input transform again cost more than its product
    // (256->256 at 14x14 in blocks of 32, pieces of 128 channels, chunks of 24: 2.68 ms, whole
    // in one piece 1.05).
    let mut k0 = 0;
    while k0 < conv.channels {
        let k1 = next_piece(k0);
        transform_input::<X>(conv, ops, first, count, k0, k1, v, staging);
        let stage = Stage {
            first: k0 == 0,
            last: k1 == conv.channels,
        };
        let mut row0 = rows.start;
        while row0 < rows.end {
            let rows = (rows.end - row0).min(conv.chunk);
            products(conv, ops, row0, rows, count, k0, k1, v, mm);
            transform_output::<X>(conv, ops, row0, rows, first, count, mm, stage);
            row0 += rows;
        }
        k0 = k1;
    }
}

/// Which piece of input channels an output transform adds ([`block_body`]): the first
/// writes the output (added to it with `accumulate`) with the bias and the residual, later
/// ones add to what it holds; the last clamps.
#[derive(Copy, Clone)]
struct Stage {
    first: bool,
    last: bool,
}

/// `V` for the block and input channels `k0..k1`: for each, each tile's 4x4 input `d` as
/// `B^T d B`, point `xi` of tile `j` of channel `k0 + c` at `v + xi * v_point_stride + (j /
/// strip) * strip * depth + c * strip + j % strip` (each point's matrix a `B` packed whole,
/// in strips of `strip` columns, `depth = k1 - k0`). Columns past the block up to the next 16
/// are zero.
#[inline(always)]
unsafe fn transform_input<X: Lanes>(
    conv: &WinogradConv,
    ops: &DirectOperands,
    first: usize,
    count: usize,
    k0: usize,
    k1: usize,
    v: *mut f32,
    staging: *mut f32,
) {
    let tw = conv.ow.div_ceil(2);
    let sw = strip(conv.block);
    let depth = k1 - k0;
    let point_stride = v_point_stride(conv.block, depth);
    let stage = conv.block + LANES;
    // The masks of the groups of 8 tiles whose 18 values cross the row's ends (the same for
    // every row and channel: worked out once per block, not per load; a 16-wide image's every
    // group crosses one: 32->32 at 16x16 0.0395-0.0401 -> 0.0381-0.0383 ms), in the order the
    // loops below visit the groups.
    let masks_at = |ix: isize| {
        [0, 8, 2, 10].map(|o| {
            let at = ix + o;
            X::mask_of(-at, conv.w as isize - at)
        })
    };
    let mut masks = [[X::mask_of(0, 0); 4]; MAX_GROUPS];
    let mut tile = first;
    let mut g = 0;
    while tile < first + count && g < MAX_GROUPS {
        let tx = tile % tw;
        let len = (first + count - tile).min(tw - tx);
        let mut q = 0;
        while q < len && g < MAX_GROUPS {
            masks[g] = masks_at((2 * (tx + q)) as isize - conv.pad_left as isize);
            g += 1;
            q += LANES;
        }
        tile += len;
    }
    for c in 0..depth {
        let xc = ops
            .x
            .wrapping_offset((k0 + c) as isize * conv.channel_stride);
        // Each input row's horizontal transform `d B` for every tile of the block, row `r`'s
        // value `j` at `staging + (4 r + j) * stage + tile`.
        let mut tile = first;
        let mut g0 = 0;
        while tile < first + count {
            let (ty, tx) = (tile / tw, tile % tw);
            let len = (first + count - tile).min(tw - tx);
            let pos = tile - first;
            for r in 0..4 {
                let iy = (2 * ty + r) as isize - conv.pad_top as isize;
                let row_inside = iy >= 0 && (iy as usize) < conv.h;
                let row = xc.wrapping_offset(iy * conv.row_stride);
                let mut q = 0;
                let mut g = g0;
                while q < len {
                    let u = if row_inside {
                        let ix = (2 * (tx + q)) as isize - conv.pad_left as isize;
                        let columns = if ix >= 0 && ix as usize + 2 * LANES + 2 <= conv.w {
                            X::columns(row.offset(ix))
                        } else {
                            // Masked loads of the 18 values at `ix`: those outside the row
                            // read as 0 (padding) and are not touched.
                            let [m0, m8, m2, m10] =
                                masks.get(g).copied().unwrap_or_else(|| masks_at(ix));
                            let part = |o: isize, m| X::load_in(row.wrapping_offset(ix + o), m);
                            X::columns_of([part(0, m0), part(8, m8), part(2, m2), part(10, m10)])
                        };
                        let [d0, d1, d2, d3] = columns;
                        [d0.sub(d2), d1.add(d2), d2.sub(d1), d1.sub(d3)]
                    } else {
                        [X::zero(); 4]
                    };
                    for (j, value) in u.into_iter().enumerate() {
                        value.store(staging.add((4 * r + j) * stage + pos + q));
                    }
                    q += LANES;
                    g += 1;
                }
            }
            g0 += len.div_ceil(LANES);
            tile += len;
        }
        // The vertical transform `B^T (d B)` into `V`.
        let vc = v.add(c * sw);
        let mut q = 0;
        while q < count {
            let at = (q / sw) * sw * depth + q % sw;
            for j in 0..4 {
                let s = |r: usize| X::load(staging.add((4 * r + j) * stage + q));
                let (s0, s1, s2, s3) = (s(0), s(1), s(2), s(3));
                let col = [s0.sub(s2), s1.add(s2), s2.sub(s1), s1.sub(s3)];
                for (i, value) in col.into_iter().enumerate() {
                    value.store(vc.add((4 * i + j) * point_stride + at));
                }
            }
            q += LANES;
        }
        // Zero the columns the microkernel may read past the block (a 16-column half strip).
        let mut q = count.div_ceil(LANES) * LANES;
        while q < count.div_ceil(16) * 16 {
            let at = (q / sw) * sw * depth + q % sw;
            for xi in 0..POINTS {
                X::zero().store(vc.add(xi * point_stride + at));
            }
            q += LANES;
        }
    }
}

/// `M[xi] = U[xi] @ V[xi]` for output channels `row0..row0 + rows` (`row0` a multiple of
/// [`MR`]), input channels `k0..k1` (within one packed run of `KC`) and the block's `count`
/// tiles: row `o` of `M[xi]` at `mm + xi * m_point_stride + (o - row0) * block`, by the GEMM's
/// microkernel over `A` strips of [`MR`] rows.
#[inline(always)]
unsafe fn products(
    conv: &WinogradConv,
    ops: &DirectOperands,
    row0: usize,
    rows: usize,
    count: usize,
    k0: usize,
    k1: usize,
    v: *const f32,
    mm: *mut f32,
) {
    let (kernel, nr) = if count <= 16 {
        <f32 as Kernels>::narrow_kernel(isa())
    } else {
        <f32 as Kernels>::kernel(isa())
    };
    let (m, k) = (conv.m, conv.channels);
    let depth = k1 - k0;
    let sw = strip(conv.block);
    let kc_max = GEMM_KC_BYTES as usize / 4;
    // The packed run holding `k0..k1`.
    let run = k0 / kc_max * kc_max;
    let kc = (k - run).min(kc_max);
    let mpad = m.div_ceil(MR) * MR;
    let a_len = crate::packed_a_len(m as u64, k as u64) as usize;
    // A weight that streams from memory (inside a model whose weights outgrow the caches,
    // ResNet-50's 256->256 at 14x14: 4 MiB, read once per block): the next point's strip
    // asked for while this one's products run. Inside ResNet-50, one thread, AVX-512 Xeon:
    // 256->256 at 14x14 1.86-1.92 -> 1.50-1.63 ms, 128->128 at 28x28 (1 MiB) 1.16-1.35 ->
    // 1.10-1.27; `winograd_bench` with the caches evicted before each call (`COLD=1`) 1.84 ->
    // 1.60, with them warm 1.22 -> 1.28.
    let prefetch_u = a_len * POINTS * 4 >= PREFETCH_WEIGHT_BYTES;
    for xi in 0..POINTS {
        let u = ops.a_packed.add(xi * a_len);
        let vx = v.add(xi * v_point_stride(conv.block, depth));
        let mx = mm.add(xi * m_point_stride(conv.block, conv.chunk));
        for strip in row0 / MR..(row0 + rows).div_ceil(MR) {
            let height = (m - strip * MR).min(MR);
            let a = u.add(run * mpad + strip * MR * kc + (k0 - run) * MR);
            // The next point's strip: a run of `MR x depth` values (2 KiB for pieces of 88
            // channels) in one of 16 matrices a quarter of the weight apart, too short a run
            // for the hardware prefetcher to follow.
            if prefetch_u && xi + 1 < POINTS {
                crate::prefetch_span(a.add(a_len).cast(), MR * depth * 4);
            }
            let mut j0 = 0;
            while j0 < count {
                let width = (count - j0).min(nr);
                let b = vx.add((j0 / sw) * sw * depth + j0 % sw);
                let c = Mat {
                    ptr: mx.add((strip * MR - row0) * conv.block + j0),
                    rs: conv.block as isize,
                    cs: 1,
                };
                kernel(
                    depth,
                    a,
                    1,
                    MR as isize,
                    b,
                    sw as isize,
                    nr,
                    height,
                    width,
                    c,
                    1.0,
                    false,
                    None,
                    crate::Ahead::NONE,
                );
                j0 += nr;
            }
        }
    }
}

/// Bytes of a transformed weight from which [`products`] prefetches the next point's strip
/// of `U` (below, the weight stays in cache from one block to the next).
const PREFETCH_WEIGHT_BYTES: usize = 1 << 20;

/// The outputs of channels `row0..row0 + rows` for the block: per output channel and 8
/// tiles, `A^T M A` times alpha, plus the output (`accumulate`), plus the bias and the
/// residual, clamped, stored as 2x2 pixels (16 contiguous values per output row when the 8
/// tiles lie in one tile row and inside the output; else per run of lanes within a tile row,
/// the outputs inside the output only).
#[inline(always)]
unsafe fn transform_output<X: Lanes>(
    conv: &WinogradConv,
    ops: &DirectOperands,
    row0: usize,
    rows: usize,
    first: usize,
    count: usize,
    mm: *const f32,
    stage: Stage,
) {
    let tw = conv.ow.div_ceil(2);
    let e = conv.epilogue;
    let (lo, hi) = match e.clamp {
        Some(bounds) if stage.last => bounds,
        _ => (f32::NEG_INFINITY, f32::INFINITY),
    };
    // Later pieces add to the output and take no bias or residual (the first did).
    let accumulate = conv.accumulate || !stage.first;
    let residual = e.add.filter(|_| stage.first);
    let (lo_bound, hi_bound) = (X::splat(lo), X::splat(hi));
    let alpha = X::splat(conv.alpha);
    let point_stride = m_point_stride(conv.block, conv.chunk);
    for o in row0..row0 + rows {
        let bias = match e.bias {
            Some((ptr, stride)) if stage.first => {
                *ptr.wrapping_offset(ops.bias_shift + o as isize * stride)
            }
            _ => 0.0,
        };
        let bias = X::splat(bias);
        let out = ops.c.ptr.wrapping_offset(o as isize * ops.c.rs);
        let mo = mm.add((o - row0) * conv.block);
        let mut q = 0;
        while q < count {
            let m = |xi: usize| X::load(mo.add(xi * point_stride + q));
            // A^T m: rows s0 = m0 + m1 + m2, s1 = m1 - m2 - m3 (each a row of 4 points).
            let mut s = [[X::zero(); 4]; 2];
            for j in 0..4 {
                let (m0, m1, m2, m3) = (m(j), m(4 + j), m(8 + j), m(12 + j));
                s[0][j] = m0.add(m1).add(m2);
                s[1][j] = m1.sub(m2).sub(m3);
            }
            let finish = |v: X| {
                if conv.alpha == 1.0 {
                    v
                } else {
                    v.mul(alpha)
                }
            };
            let y = [
                [
                    finish(s[0][0].add(s[0][1]).add(s[0][2])),
                    finish(s[0][1].sub(s[0][2]).sub(s[0][3])),
                ],
                [
                    finish(s[1][0].add(s[1][1]).add(s[1][2])),
                    finish(s[1][1].sub(s[1][2]).sub(s[1][3])),
                ],
            ];
            let tile = first + q;
            let (ty, tx) = (tile / tw, tile % tw);
            if q + LANES <= count
                && tx + LANES <= tw
                && 2 * ty + 2 <= conv.oh
                && 2 * (tx + LANES) <= conv.ow
            {
                for (i, [even, odd]) in y.into_iter().enumerate() {
                    let dst = out.add((2 * ty + i) * conv.ow + 2 * tx);
                    for (h, mut half) in X::interleave(even, odd).into_iter().enumerate() {
                        let at = dst.add(h * LANES);
                        if accumulate {
                            half = half.add(X::load(at));
                        }
                        half = half.add(bias);
                        if let Some(add) = residual {
                            half = half.add(X::load(at.offset(add)));
                        }
                        half.clamp(lo_bound, hi_bound).store(at);
                    }
                }
            } else {
                // Per run of lanes within one tile row, masked: the lanes' outputs inside the
                // output, at 16 interleaved values per output row as above.
                let lanes = LANES.min(count - q);
                let mut l0 = 0;
                while l0 < lanes {
                    let (ty, tx) = ((tile + l0) / tw, (tile + l0) % tw);
                    let l1 = lanes.min(l0 + tw - tx);
                    // Interleaved value `k` is output column `shift + k` of the row.
                    let shift = 2 * tx as isize - 2 * l0 as isize;
                    let end = (2 * l1 as isize).min(conv.ow as isize - shift);
                    for (i, [even, odd]) in y.into_iter().enumerate() {
                        let oy = 2 * ty + i;
                        if oy >= conv.oh {
                            continue;
                        }
                        let row = out.add(oy * conv.ow).wrapping_offset(shift);
                        for (h, mut half) in X::interleave(even, odd).into_iter().enumerate() {
                            let base = (h * LANES) as isize;
                            let (lo, hi) = (2 * l0 as isize - base, end - base);
                            if hi <= 0 || lo >= LANES as isize {
                                continue;
                            }
                            let at = row.wrapping_offset(base);
                            if accumulate {
                                half = half.add(X::load_masked(at, lo, hi));
                            }
                            half = half.add(bias);
                            if let Some(add) = residual {
                                half = half.add(X::load_masked(at.wrapping_offset(add), lo, hi));
                            }
                            half.clamp(lo_bound, hi_bound).store_masked(at, lo, hi);
                        }
                    }
                    l0 = l1;
                }
            }
            q += LANES;
        }
    }
}
