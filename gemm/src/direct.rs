//! Direct convolution: a convolution's product `C = alpha * A @ col(X) (+ C)` with `A` packed
//! whole ([`crate::pack_a_whole`]) and the column matrix `col(X)` never packed: the
//! microkernel loads each row of a tile straight from the input.
//!
//! - **Why it works.** Output positions `o..o + len` along the input's contiguous last axis
//!   read, for one input channel and kernel tap, the input elements `x + off(tap) + c *
//!   channel_stride + step * (0..len)`: a contiguous run at stride 1, every other element at
//!   stride 2 (loaded as two vectors whose even elements are gathered by a permute). When
//!   every inner axis of the output is as wide as the input's (a "same"-padded stride-1
//!   convolution) and the input is dense, that holds for a run of flat output positions across
//!   rows too, so small images are tiled whole rather than row by row. Lanes that read padding
//!   are masked off: the masked loads read nothing there (so the padding's addresses, outside
//!   the input, are never touched) and give 0, which is what padding contributes.
//! - **Tiles.** A tile is at most 32 (AVX-512) or 16 (AVX2) consecutive output positions of
//!   one run; a run is split into equal tiles. For each tile the lane masks of every tap are
//!   worked out once, then every strip of [`MR`](crate::GEMM_MR) output channels runs over all
//!   of `K` with its accumulators in registers (per run of `KC` values of the packed `A`, tap
//!   by tap, each tap's channels inner: the tap's mask stays in the mask registers), and is
//!   stored once. The tile's input (channels x the rows its taps reach)
//!   stays in cache across the strips.
//! - **Memory.** No scratch: `A` is the packed weight, `B` the input, `C` the output. The tap
//!   tables live on each thread's stack (a `TapStore`: 24 KiB, uninitialized until a table is
//!   worked out into it; every tile's table for the whole call when they fit, else a span's).
//! - **Threads.** Units of (span of tiles, batch index, group of row blocks), in chunks of
//!   consecutive units that each thread takes from a shared counter as it finishes the last
//!   (about four per thread, so a thread the scheduler delays holds up one chunk); row blocks are grouped finer only when there are fewer spans and batch
//!   indices than threads. With several batch indices a span is 8 tiles, whose tap tables
//!   they share: a grouped convolution (each group a batch index) works out each tile's masks
//!   once and walks each group's input in order.
//! - **Depthwise planes.** A depthwise 2-d convolution (one input and one output channel per
//!   batch index) runs plane by plane on AVX-512 or AVX2 ([`planes`], `x86::plane`): two output rows
//!   at a time, up to four vectors each, their accumulators over every tap, the row loads
//!   masked by one table per convolution ([`PlaneMasks`]); the batch indices split evenly
//!   over the threads. On AVX2, a 3x3 or 5x5 window at stride 1 or 2 over rows at least 8
//!   wide runs from a ring of padded row copies with its weights splat once per plane
//!   ([`PlaneSquare`]); other planes of up to ~900 outputs ("same" at stride 1, or halved at
//!   stride 2) are read flat, vectors across rows with a mask per vector and tap
//!   ([`PlaneFlat`]), and larger ones from a ring of padded row copies ([`PlaneRing`]).
//! - **Strided rows from a copy.** A 2-d convolution at stride 2 along its rows whose input
//!   rows for one output row fit 64 KiB (the 3-channel stems, 3x3 layers of up to about 100
//!   channels: [`Padded`]) runs one output row at a time from a copy of those rows on the
//!   stack, padded with zeros and split into even and odd columns: every tap then reads whole
//!   vectors, unmasked and not permuted, and the tap tables are the same on every row. The copy is the only extra memory (at most
//!   [`PADDED_MAX`] values per thread, on its stack).
//!
//! Guarantees: every element loaded is an input element inside the input (lanes outside it
//! are masked), and every element stored is an element of `C` of a row below `m` and a column
//! of the tile; each output is summed over `K` in one order (runs of `KC`, taps, channels),
//! whatever the number of threads.

use crate::{isa, Broadcast, Isa, Mat, GEMM_KC_BYTES, MR};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Taps of the largest kernel window the direct kernel takes (the tap table is on the stack).
pub const DIRECT_MAX_TAPS: u64 = 64;
/// Spatial axes of the largest convolution the direct kernel takes.
pub const DIRECT_MAX_AXES: usize = 8;

/// One spatial axis of a direct convolution: output position `o` and tap `t` read input
/// position `o * step - pad + t * dilation`, which is padding outside `0..size`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DirectAxis {
    /// The input's extent.
    pub size: i64,
    /// Elements between consecutive input positions (1 on the last axis).
    pub stride: i64,
    pub kernel: i64,
    /// The convolution's stride along the axis.
    pub step: i64,
    pub dilation: i64,
    /// The begin pad.
    pub pad: i64,
    /// The output's extent.
    pub out: i64,
}

/// A stride-1 convolution as one product per batch index: `C[m, pixels] = alpha *
/// A[m, channels * taps] @ col(X) (+ C)`.
#[derive(Copy, Clone, Debug)]
pub struct DirectConv<'a> {
    /// Rows of `A` and `C` (output channels).
    pub m: usize,
    pub channels: usize,
    /// Elements between consecutive input channels.
    pub channel_stride: isize,
    pub axes: &'a [DirectAxis],
    pub alpha: f32,
    pub accumulate: bool,
    /// Applied to each result as it is stored.
    pub epilogue: crate::Epilogue<f32>,
}

/// One batch index's operands: `A` packed whole (for [`crate::run_winograd`], transformed by
/// [`crate::pack_winograd_weights`]), the input's element (channel 0, position 0...), and `C`
/// (`m x pixels`, contiguous columns); and where its rows' bias starts, in elements after the
/// epilogue's (a grouped convolution's group's channels; 0 otherwise).
#[derive(Copy, Clone, Debug)]
pub struct DirectOperands {
    pub a_packed: *const f32,
    pub x: *const f32,
    pub c: Mat<f32>,
    pub bias_shift: isize,
}

impl DirectConv<'_> {
    fn taps(&self) -> usize {
        self.axes.iter().map(|a| a.kernel as usize).product()
    }

    fn pixels(&self) -> usize {
        self.axes.iter().map(|a| a.out as usize).product()
    }
}

/// Whether consecutive flat output positions read consecutive input elements across the rows
/// of every axis: each inner axis of the output as wide as the input's, stride 1, the input
/// dense.
fn flat(axes: &[DirectAxis]) -> bool {
    axes.windows(2).all(|pair| {
        let (outer, inner) = (pair[0], pair[1]);
        inner.out == inner.size
            && outer.stride == inner.size * inner.stride
            && outer.step == 1
            && inner.step == 1
    })
}

/// Whether tiles are cut from the whole output with each lane's input element gathered
/// (`vgatherdps`) rather than loaded from one row: when the output is not [`flat`] and its
/// rows would fill less than two thirds of the lanes of their vectors (a strided layer's 7-
/// or 8-wide rows: a gather costs about a third more than a load, measured in a 12 x 32
/// microkernel held in L1, 115 against 170 GFLOP/s), or when the last axis's stride is
/// above 2 (which rows do not load); and when every lane's offset from the tile's first
/// fits the gather's 32-bit indices; and only when one batch index's input (`channels` of
/// it) is at most [`GATHER_MAX_INPUT`] elements: a gather's lanes each miss the L1 cache on
/// their own where a row's share a line or two (ResNet-18's 256->512 3x3/2 at 14x14, a 200
/// KiB input, ran 1.9 ms gathered against 1.2 through the GEMM).
fn gathers(axes: &[DirectAxis], channels: u64) -> bool {
    let Some(last) = axes.last() else {
        return false;
    };
    let input = axes
        .iter()
        .try_fold(channels, |acc, a| acc.checked_mul(a.size.max(0) as u64));
    if flat(axes) || input.is_none_or(|n| n > GATHER_MAX_INPUT) {
        return false;
    }
    let tile = tile_len(last.out.max(1) as usize);
    let span = axes.iter().try_fold(0i64, |acc, a| {
        (a.out.max(1) - 1)
            .checked_mul(a.step)?
            .checked_mul(a.stride.checked_abs()?)?
            .checked_add(acc)
    });
    (last.step > 2 || 3 * tile < 2 * tile.div_ceil(16) * 16)
        && span.is_some_and(|s| s <= i64::from(i32::MAX))
}

/// Whether this CPU gathers the lanes of a convolution that [`gathers`] says may: AVX-512
/// does; on AVX2 (16 lanes a tile, in 8-lane vectors) `vgatherdps` is slow on some CPUs (an
/// AMD EPYC's 32->64 3x3/2 at 16x16, gathered: 0.143 ms, onnxruntime 0.043), and rows of
/// at least 4 positions fill half a vector or more, so lanes are gathered there only where
/// rows cannot be read (a stride above 2) or fill less.
fn gathers_here(axes: &[DirectAxis], channels: u64) -> bool {
    gathers(axes, channels)
        && (isa() == Isa::Avx512
            || axes.last().is_some_and(|a| {
                let tile = tile_len(a.out.max(1) as usize).min(16);
                a.step > 2 || 2 * tile < tile.div_ceil(8) * 8
            }))
}

/// The length of the equal tiles of at most 32 positions a run of `run` positions is cut
/// into.
fn tile_len(run: usize) -> usize {
    run.div_ceil(run.div_ceil(32).max(1))
}

/// Elements of one batch index's input above which lanes are not [`gathers`]ed (48 KiB of
/// f32, an L1 data cache).
const GATHER_MAX_INPUT: u64 = 12 * 1024;

/// Output positions per run that tiles are cut from: the whole output when [`flat`] or when
/// the lanes are gathered (`gathered`), else a row of the last axis.
fn run_len(axes: &[DirectAxis], gathered: bool) -> usize {
    if flat(axes) || gathered {
        axes.iter().map(|a| a.out.max(0) as usize).product()
    } else {
        axes.last().map_or(1, |a| a.out.max(1) as usize)
    }
}

/// Whether the direct kernel keeps at least half its lanes busy on `axes`: a run cut into
/// equal tiles of at most 32 positions, each padded to 16-lane vectors. Short rows are
/// gathered across rows ([`gathers`]), so only a tiny output (a 2 x 2 image) leaves most
/// lanes idle; the GEMM runs those.
/// Independent of the CPU, so the plan, which reserves no GEMM panels for a direct
/// convolution, asks it too (`memc-codegen`'s `ConvPlan::runs_direct`).
pub fn direct_conv_fills_lanes(axes: &[DirectAxis], channels: u64) -> bool {
    let tile = tile_len(run_len(axes, gathers(axes, channels)));
    2 * tile >= tile.div_ceil(16) * 16
}

/// Whether a convolution of `channels` input channels per group over `axes` runs better
/// direct than through the GEMM: when its tiles fill at least half their lanes, or when it is
/// depthwise (one channel: `K` is its taps, too few for a GEMM to gain anything, and its
/// other form is a scalar loop).
pub fn direct_conv_pays(axes: &[DirectAxis], channels: u64) -> bool {
    channels == 1 || direct_conv_fills_lanes(axes, channels)
}

/// Whether a convolution over `axes` with `m` output channels per group that the direct
/// kernel takes runs faster as a GEMM whose `B` panels are packed from the input, given its
/// panels: a strided window of one tap per axis without padding (a ResNet's 1x1/2
/// downsampling shortcut) and at least 64 output channels. The direct kernel reads every
/// other input element of such a layer and copies its rows; the GEMM packs each panel once
/// and reuses it for every row block. One thread, 1x1/2, direct vs GEMM (ms): 256->512 at 56
/// 3.58 vs 2.49, 512->1024 at 28 3.07 vs 2.61, 64->128 at 56 0.278 vs 0.216, 128->256 at 28
/// 0.213 vs 0.176, 32->64 at 112 0.381 vs 0.302; 7x7 outputs even (1024->2048 at 14 2.83 vs
/// 2.84, 256->512 at 14 0.179 vs 0.180). A plan asks this where the panels fit the bytes free at
/// the layer's step, and the CPU runs the GEMM only where the plan reserved them.
pub fn direct_conv_yields_to_gemm(axes: &[DirectAxis], m: u64) -> bool {
    m >= 64
        && !axes.is_empty()
        && axes.iter().all(|a| a.kernel == 1 && a.pad == 0)
        && axes.iter().any(|a| a.step > 1)
}

/// Whether the direct kernel takes a convolution over `axes` on this CPU (AVX-512 or AVX2
/// with FMA, f32): [`direct_conv_window_fits`] and the instruction set. Whether it should
/// is [`direct_conv_pays`].
pub fn direct_conv_runs(axes: &[DirectAxis], channels: u64) -> bool {
    direct_conv_window_fits(axes, channels) && matches!(isa(), Isa::Avx512 | Isa::Avx2)
}

/// Whether the direct kernel's tiling takes a window over `axes`, on any CPU: 1 to
/// [`DIRECT_MAX_AXES`] axes, at most [`DIRECT_MAX_TAPS`] taps, the last axis contiguous,
/// with a stride (`step`) of 1 or 2 (lanes read every input element or every other one) or
/// lanes that are [`gathers`]ed, every extent, stride and dilation at least 1.
pub fn direct_conv_window_fits(axes: &[DirectAxis], channels: u64) -> bool {
    let taps = axes.iter().try_fold(1u64, |acc, a| {
        acc.checked_mul(u64::try_from(a.kernel).ok()?)
    });
    !axes.is_empty()
        && axes.len() <= DIRECT_MAX_AXES
        && taps.is_some_and(|t| (1..=DIRECT_MAX_TAPS).contains(&t))
        && axes
            .iter()
            .all(|a| a.size >= 1 && a.out >= 1 && a.kernel >= 1 && a.dilation >= 1 && a.step >= 1)
        && axes.last().is_some_and(|a| {
            a.stride == 1 && ((1..=2).contains(&a.step) || gathers(axes, channels))
        })
}

/// A tile: `len` output positions from flat position `start`.
#[derive(Copy, Clone, Debug)]
struct Tile {
    start: usize,
    len: usize,
}

/// The tiles of the output: runs (the whole output when [`DirectConv::flat`], else each row of
/// the last axis) cut into equal tiles of at most `lanes` positions.
struct Tiling {
    run_len: usize,
    per_run: usize,
    tile_len: usize,
    count: usize,
}

impl Tiling {
    fn new(conv: &DirectConv, lanes: usize) -> Tiling {
        let pixels = conv.pixels();
        let run_len = run_len(conv.axes, gathers_here(conv.axes, conv.channels as u64));
        let per_run = run_len.div_ceil(lanes);
        let tile_len = run_len.div_ceil(per_run);
        Tiling {
            run_len,
            per_run,
            tile_len,
            count: pixels / run_len * per_run,
        }
    }

    fn tile(&self, index: usize) -> Tile {
        let (run, within) = (index / self.per_run, index % self.per_run);
        let start = within * self.tile_len;
        Tile {
            start: run * self.run_len + start,
            len: (self.run_len - start).min(self.tile_len),
        }
    }
}

/// Tiles per span when there are several batch indices ([`run_direct`]).
const SPAN_TILES: usize = 8;

/// The work (multiply-adds, plus [`WORK_PER_ELEMENT`] per input and output element) below
/// which [`run_direct`] runs on one thread. Stop 27 set 4 million, when a second thread gained
/// nothing on the zoo resnet's small layers; with their bias, ReLU and residual adds inside the
/// convolution (`memc-codegen`'s `cpu/fuse.rs`) the whole model runs faster with those layers
/// split: resnet at two threads 0.745 -> 0.585 ms (any threshold from 0.1 to 2 million gave
/// 0.58-0.60; one thread 0.74).
const DIRECT_PARALLEL_WORK: usize = 1_000_000;

/// Multiply-adds one input or output element's movement is worth, in that count.
const WORK_PER_ELEMENT: usize = 8;

/// Chunks of units per thread that [`run_direct`] hands out.
const CHUNKS_PER_THREAD: usize = 4;

/// Output vectors (16 lanes) of a row that [`planes`] takes at most: its lane masks, one per
/// vector and tap along the row, are a table on the stack.
const PLANE_MAX_VECTORS: usize = 64;
/// Output rows narrower than this run flat ([`PlaneFlat`]) on AVX-512 too: a 7-wide row
/// fills 7 of an AVX-512 vector's 16 lanes per output row (MobileNetV2's 960-channel 3x3 at
/// 7x7, one thread: 0.092 -> 0.059 ms).
const FLAT_MAX_ROW: usize = 12;

/// Taps along the row of a window that [`planes`] takes at most.
const PLANE_MAX_ROW_TAPS: usize = 16;

/// Whether [`run_direct`] runs `conv` plane by plane (`x86::plane`): a depthwise 2-d
/// convolution (one input and one output channel per batch index) whose rows are read whole
/// or every other element, on AVX-512 or AVX2. The tiles of the general kernel would each hold
/// one row of accumulators over the few taps, and work out their tables per span of tiles: a
/// 144-channel 3x3 layer at 56x56 spent 0.58 ms there inside MobileNetV2, onnxruntime 0.23
/// (on an AMD EPYC with AVX2 only: 2.09 ms inside MobileNetV2; plane by plane 0.46 alone,
/// onnxruntime 0.29 alone).
fn planes(conv: &DirectConv, read: Read) -> bool {
    let [_, row] = conv.axes else {
        return false;
    };
    conv.m == 1
        && conv.channels == 1
        && (1..=2).contains(&row.step)
        && read != Read::Gathered
        && (row.out as usize).div_ceil(plane_lanes()) <= PLANE_MAX_VECTORS
        && row.kernel as usize <= PLANE_MAX_ROW_TAPS
        && matches!(isa(), Isa::Avx512 | Isa::Avx2)
}

/// Lanes of a [`planes`] vector on this CPU: 16 (AVX-512) or 8 (AVX2).
fn plane_lanes() -> usize {
    if isa() == Isa::Avx512 {
        16
    } else {
        8
    }
}

/// The lane masks of a [`planes`] convolution's output rows, the same for every row and
/// plane: entry `v * kw + dx` holds the lanes of output vector `v` ([`plane_lanes`] positions
/// from `lanes * v`)
/// whose input element at row tap `dx` is inside the row (bit `j`, or bit `2 j` when the row
/// is read every other element).
struct PlaneMasks([u32; PLANE_MAX_VECTORS * PLANE_MAX_ROW_TAPS]);

impl PlaneMasks {
    fn new(conv: &DirectConv, read: Read) -> PlaneMasks {
        let mut masks = [0u32; PLANE_MAX_VECTORS * PLANE_MAX_ROW_TAPS];
        let Some(row) = conv.axes.last() else {
            return PlaneMasks(masks);
        };
        let kw = row.kernel as usize;
        let width = row.out as usize;
        for dx in 0..kw {
            // The outputs `x` with `0 <= x * step + shift < size`.
            let shift = dx as i64 * row.dilation - row.pad;
            let lo = (-shift.div_euclid(row.step)).clamp(0, width as i64) as usize;
            let hi = ((row.size - 1 - shift).div_euclid(row.step) + 1)
                .clamp(lo as i64, width as i64) as usize;
            let n = plane_lanes();
            for v in 0..width.div_ceil(n) {
                let (a, b) = (lo.clamp(n * v, n * v + n), hi.clamp(n * v, n * v + n));
                let bits = ((1u64 << (b - n * v)) - (1u64 << (a - n * v))) as u32;
                masks[v * kw + dx] = if read == Read::EveryOther {
                    spread(bits) as u32
                } else {
                    bits
                };
            }
        }
        PlaneMasks(masks)
    }
}

/// Masks (one per 8-lane output vector and tap) a [`PlaneFlat`] table holds at most: 32 KiB
/// on the stack.
const PLANE_FLAT_MAX_MASKS: usize = 1024;

/// Values of the phase copy a [`PlaneFlat`] at stride 2 makes of each plane, at most (32 KiB
/// on each thread's stack).
const PLANE_FLAT_MAX_COPY: usize = 8192;

/// A depthwise [`planes`] convolution whose plane is read flat (`x86::plane_flat`), on AVX2:
/// 8-lane vectors run over the plane's output values in order, across its rows (the last
/// vector ends at the plane's end, overlapping the one before), and each tap reads the 8
/// input values at a fixed offset from the vector's, with a lane mask from a table worked
/// out once per call (the lanes whose input is padding, or wraps to the next row, read
/// nothing). Small planes spent their time on row overheads: the 7x7 planes of MobileNetV2's
/// 960-channel layer (one 7-lane vector per row, stored masked, which AMD microcodes) took
/// 0.185 ms there, onnxruntime's channel-vectorized kernel 0.046.
///
/// At stride 1 the convolution is "same" along the row (as wide as the input) and reads the
/// plane in place: output value `o` at tap `t` reads input value `o + offsets[t]`. At stride 2
/// (both axes) the output is half the input's width, rounded up, and each plane is copied
/// into its four phases first (even or odd rows, by even or odd columns, each `rows x out`
/// values and a gap of 8): `o` reads value `o + offsets[t]` of phase `sources[t]`.
#[derive(Copy, Clone, Debug)]
struct PlaneFlat {
    /// Output values of a plane (at least 8), and the vectors over them.
    n: usize,
    vectors: usize,
    taps: usize,
    step: usize,
    /// Values of one phase of the copy (0 at stride 1).
    phase: usize,
    sources: [u8; DIRECT_MAX_TAPS as usize],
    offsets: [isize; DIRECT_MAX_TAPS as usize],
}

impl PlaneFlat {
    /// [`PlaneFlat::of`] where this instruction set runs it: AVX2, or AVX-512 for rows
    /// narrower than [`FLAT_MAX_ROW`] (in AVX2 code).
    fn here(conv: &DirectConv, isa: Isa) -> Option<PlaneFlat> {
        let short = conv
            .axes
            .last()
            .is_some_and(|a| (a.out as usize) < FLAT_MAX_ROW);
        match isa {
            Isa::Avx2 => PlaneFlat::of(conv),
            Isa::Avx512 if short => PlaneFlat::of(conv),
            _ => None,
        }
    }

    /// The flat form of `conv` (which [`planes`] runs), where it applies: stride 1 with the
    /// output as wide as the input, or stride 2 on both axes with half its width (rounded up);
    /// dense rows, at least 8 output values, a mask table within [`PLANE_FLAT_MAX_MASKS`] and
    /// a phase copy within [`PLANE_FLAT_MAX_COPY`].
    fn of(conv: &DirectConv) -> Option<PlaneFlat> {
        let [outer, row] = conv.axes else {
            return None;
        };
        let step = usize::try_from(row.step).ok()?;
        let dense = row.stride == 1 && outer.stride == row.size;
        let fits = match step {
            1 => outer.step == 1 && row.out == row.size,
            2 => outer.step == 2 && row.out == (row.size + 1) / 2,
            _ => false,
        };
        if !dense || !fits || outer.kernel < 1 || row.kernel < 1 {
            return None;
        }
        let (kh, kw) = (outer.kernel, row.kernel);
        let taps = usize::try_from(kh.checked_mul(kw)?).ok()?;
        let out_w = usize::try_from(row.out).ok()?;
        let n = usize::try_from(outer.out).ok()?.checked_mul(out_w)?;
        let vectors = n.div_ceil(8);
        // Phase rows: the input's rows halved, rounded up.
        let phase_rows = usize::try_from(outer.size).ok()?.div_ceil(step);
        // A gap of 8 values after each phase takes the copy's last vector's spare lanes.
        let phase = if step == 2 {
            phase_rows.checked_mul(out_w)?.checked_add(8)?
        } else {
            0
        };
        if n < 8
            || taps > DIRECT_MAX_TAPS as usize
            || vectors.checked_mul(taps)? > PLANE_FLAT_MAX_MASKS
            || phase.checked_mul(4)? > PLANE_FLAT_MAX_COPY
        {
            return None;
        }
        let mut sources = [0u8; DIRECT_MAX_TAPS as usize];
        let mut offsets = [0isize; DIRECT_MAX_TAPS as usize];
        for t in 0..taps {
            let (dy, dx) = ((t as i64) / kw, (t as i64) % kw);
            // The tap's input row and column for output row and column 0.
            let iy = dy.checked_mul(outer.dilation)? - outer.pad;
            let ix = dx.checked_mul(row.dilation)? - row.pad;
            let (source, offset) = if step == 1 {
                (0, iy.checked_mul(row.size)?.checked_add(ix)?)
            } else {
                let (py, px) = (iy.rem_euclid(2), ix.rem_euclid(2));
                let offset = iy.div_euclid(2).checked_mul(row.out)? + ix.div_euclid(2);
                ((py * 2 + px) as u8, offset)
            };
            sources[t] = source;
            offsets[t] = isize::try_from(offset).ok()?;
        }
        Some(PlaneFlat {
            n,
            vectors,
            taps,
            step,
            phase,
            sources,
            offsets,
        })
    }
}

/// Slots of a [`PlaneSquare`]'s ring of input rows: the `K + 1` (stride 1) or `K + 2` (stride
/// 2) rows that two output rows read, at most 7, rounded up to a power of two.
const PLANE_SQUARE_ROWS: usize = 8;

/// A depthwise [`planes`] convolution with a 3x3 or 5x5 window, undilated, at stride 1 or 2
/// along both axes, pads of at most half the window, on AVX2 (nearly every depthwise layer:
/// MobileNet's 3x3, EfficientNet's and MobileNetV3's 3x3 and 5x5): `x86::planes_square_avx2`.
/// Like a [`PlaneRing`], each input row is copied once into a slot of a ring, its padding as
/// zeros and, at stride 2, split into its even and odd columns; unlike it, the weights are
/// splat once per plane (a 3x3 window's nine stay in registers), the two output rows of a step
/// read each input row's vectors once for both, and the vectors of a row are the row's first 8
/// columns, the next 8, ..., the last ending at the row's end (overlapping the one before): no
/// masks. Rows under 8 wide (7x7 planes) run flat ([`PlaneFlat`]), where a vector holds several
/// rows (through here with a masked vector per row, 960 channels at 7x7 took 0.106 ms, flat
/// 0.057). On an AMD EPYC (AVX2), one thread (`direct_bench C C SIZE K STRIDE depthwise`):
/// 144 channels at 56x56 3x3 0.311 -> 0.23 ms and 32 at 112x112 0.254 -> 0.173 (from a
/// [`PlaneRing`]), 192 at 28x28 0.139 -> 0.097 and 576 at 14x14 0.109-0.140 -> 0.093-0.097
/// (from [`PlaneFlat`]); at stride 2, 144 channels 56 -> 28 0.189 -> 0.157 and 96 channels
/// 112 -> 56 0.354 -> 0.321. Two rows of three vectors' sums: with four, a 3x3 window's sums
/// and weights spilled (192 at 28x28 0.138 ms).
///
/// A slot holds at stride 1 the input row's column `u - pad` at `u` (`u < width + K - 1`),
/// at stride 2 its column `2 j - pad` at `j` and `2 j + 1 - pad` at `half + j`, `width` the
/// output row's width; 0 outside the input. Tap column `dx` of output column
/// `x` is then element `x + dx` (stride 1), or `x + dx / 2` of phase `dx % 2` (stride 2).
#[derive(Copy, Clone, Debug)]
struct PlaneSquare {
    /// The window's side (3 or 5) and the step.
    kernel: usize,
    step: usize,
    /// Values of a slot, and the offset of its odd phase (stride 2).
    slot: usize,
    half: usize,
    /// The elements `lo..hi` of each phase that hold input (the rest are zeros in every slot).
    data: [(usize, usize); 2],
}

impl PlaneSquare {
    /// The kernel for `conv` (which [`planes`] runs, read as `read`), when it has a 3x3 or
    /// 5x5 undilated window at the same step (1 or 2) along both axes, pads of at most half
    /// the window, rows at least 8 wide, and its ring fits the stack ([`RING_MAX`] values).
    fn of(conv: &DirectConv, read: Read) -> Option<PlaneSquare> {
        let [outer, row] = conv.axes else {
            return None;
        };
        let step = copy_step(row, read)?;
        let kernel = row.kernel;
        let window = matches!(kernel, 3 | 5)
            && [outer, row].iter().all(|a| {
                a.kernel == kernel && a.dilation == 1 && (0..=kernel / 2).contains(&a.pad)
            });
        if !window || outer.step != row.step || row.stride != 1 || row.out < 8 || outer.out < 1 {
            return None;
        }
        let kernel = kernel as usize;
        let (pad, size) = (row.pad as usize, usize::try_from(row.size).ok()?);
        let width = usize::try_from(row.out).ok()?;
        // Phase `q`'s element `j` is the input at column `step * j + q - pad`; tap `dx` reads
        // element `x + dx` (stride 1) or `x + dx / 2` of phase `dx % 2`.
        let lens = if step == 1 {
            [width + kernel - 1, 0]
        } else {
            [width + (kernel - 1) / 2, width + (kernel - 2) / 2]
        };
        let data = phase_data(pad, size, step, lens);
        let half = lens[0].next_multiple_of(8);
        let slot = (half + lens[1]).next_multiple_of(8);
        let square = PlaneSquare {
            kernel,
            step,
            slot,
            half,
            data,
        };
        (square.values() <= RING_MAX).then_some(square)
    }

    /// Values of the ring and its row of zeros.
    fn values(&self) -> usize {
        self.slot * (PLANE_SQUARE_ROWS + 1)
    }
}

/// The step along the row of a ring of row copies ([`PlaneRing`], [`PlaneSquare`]): 1 for a row
/// read whole, 2 for one read every other element; `None` otherwise.
fn copy_step(row: &DirectAxis, read: Read) -> Option<usize> {
    match read {
        Read::Row if row.step == 1 => Some(1),
        Read::EveryOther if row.step == 2 => Some(2),
        _ => None,
    }
}

/// The elements `lo..hi` of each phase of a padded row copy ([`PlaneRing`], [`PlaneSquare`]) that
/// hold input, phase `q`'s element `j` being the input at column `step * j + q - pad` of a
/// row of `size`, phase `q` holding `lens[q]` elements.
fn phase_data(pad: usize, size: usize, step: usize, lens: [usize; 2]) -> [(usize, usize); 2] {
    let mut data = [(0, 0); 2];
    for (q, data) in data.iter_mut().enumerate().take(step) {
        let lo = pad.saturating_sub(q).div_ceil(step).min(lens[q]);
        let hi = (size + pad)
            .checked_sub(q + 1)
            .map_or(lo, |last| (last / step + 1).clamp(lo, lens[q]));
        *data = (lo, hi);
    }
    data
}

/// Rows of input that a [`PlaneRing`] holds at most (beside its row of zeros).
const PLANE_RING_MAX_ROWS: usize = 32;

/// A depthwise [`planes`] convolution run from a ring of padded copies of its input rows
/// (`x86::plane_ring`), on AVX2: each input row is copied once, with its padding as zeros
/// and, at stride 2, split into its even and odd elements, so that every tap reads whole
/// vectors at a fixed offset into the copy, unmasked and unpermuted; rows above or below
/// the input read a row of zeros. `plane` instead builds a vector mask from bits per load
/// and branches per vector on whether a row reads padding: on an AMD EPYC (AVX2) the
/// 144-channel 3x3 at 56x56 took 0.46 ms so, onnxruntime 0.29.
///
/// Slot `s` of the ring (input row `iy` in slot `iy mod rows`; slot `rows` the zeros) starts
/// at `s * slot`; at stride 1 element `u` of a slot is the input at column `u - pad`, at
/// stride 2 phase `q` (at `q * phase`) element `j` is the input at column `2 j + q - pad`
/// (0 outside the input).
#[derive(Copy, Clone, Debug)]
struct PlaneRing {
    /// Input rows held: the rows one step of two output rows reads, rounded up to a power of
    /// two (a slot's row is then a mask away, not a division).
    rows: usize,
    /// Values of one slot, and of one phase of it (the slot at stride 1).
    slot: usize,
    phase: usize,
    /// Offset into a slot of each row tap's first element.
    taps: [usize; PLANE_MAX_ROW_TAPS],
    /// The elements `lo..hi` of each phase that hold input (the rest are zeros, the same
    /// in every slot).
    data: [(usize, usize); 2],
}

impl PlaneRing {
    /// The ring for `conv` (which [`planes`] runs, read as `read`) with vectors of `lanes`,
    /// when it fits on the stack ([`RING_MAX`] values).
    fn of(conv: &DirectConv, read: Read, lanes: usize) -> Option<PlaneRing> {
        let [outer, row] = conv.axes else {
            return None;
        };
        let step = copy_step(row, read)?;
        if outer.kernel < 1 || row.kernel < 1 || outer.step < 1 || row.pad < 0 {
            return None;
        }
        let kw = usize::try_from(row.kernel).ok()?;
        let reach = usize::try_from((row.kernel - 1).checked_mul(row.dilation)?).ok()?;
        let vectors = usize::try_from(row.out).ok()?.div_ceil(lanes);
        // Two output rows per step read `step_h + (kh - 1) * dilation + 1` input rows.
        let rows = usize::try_from(
            outer
                .step
                .checked_add((outer.kernel - 1).checked_mul(outer.dilation)?)?
                .checked_add(1)?,
        )
        .ok()?
        .checked_next_power_of_two()?;
        let phase = (lanes * vectors).checked_add(reach / step)?;
        let slot = phase.checked_mul(step)?;
        let mut taps = [0; PLANE_MAX_ROW_TAPS];
        for (dx, tap) in taps.iter_mut().enumerate().take(kw) {
            let u = dx * usize::try_from(row.dilation).ok()?;
            *tap = if step == 1 {
                u
            } else {
                (u % 2) * phase + u / 2
            };
        }
        // Phase `q`'s element `j` is the input at column `step * j + q - pad`.
        let (pad, size) = (
            usize::try_from(row.pad).ok()?,
            usize::try_from(row.size).ok()?,
        );
        let data = phase_data(pad, size, step, [phase; 2]);
        let values = slot.checked_mul(rows.checked_add(1)?)?;
        (kw <= PLANE_MAX_ROW_TAPS && rows <= PLANE_RING_MAX_ROWS && values <= RING_MAX).then_some(
            PlaneRing {
                rows,
                slot,
                phase,
                taps,
                data,
            },
        )
    }
}

/// How a tile's lanes read a tap's input.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Read {
    /// Lane `j` reads element `j` from lane 0's (one row, stride 1).
    Row,
    /// Lane `j` reads element `2 j` (one row, stride 2).
    EveryOther,
    /// Lane `j` reads element `Taps::lanes[j]` (any positions: [`gathers`]).
    Gathered,
    /// Lane `j` reads element `j` from lane 0's, every lane of every vector, unmasked: a
    /// [`Padded`] copy, which holds every element a tile's lanes reach (lanes past the tile
    /// read what lies there and are not stored).
    Whole,
}

impl Read {
    fn of(conv: &DirectConv) -> Read {
        if gathers_here(conv.axes, conv.channels as u64) {
            Read::Gathered
        } else {
            Read::rows_of(conv)
        }
    }

    /// How `conv`'s rows read without gathering: every other element at stride 2, else whole.
    fn rows_of(conv: &DirectConv) -> Read {
        if conv.axes.last().is_some_and(|a| a.step == 2) {
            Read::EveryOther
        } else {
            Read::Row
        }
    }
}

/// The tap table of one tile: for each tap (row-major over the axes), the element offset
/// (from the input's channel-0 element) that lane 0 reads, and the mask of the input elements
/// from there that the lanes read, where they read the input rather than padding: bit `j` for
/// lane `j` ([`Read::Row`], [`Read::Gathered`]), bit `2 j` at stride 2 ([`Read::EveryOther`]).
/// Gathered lanes read element `lanes[j]` from lane 0's. The entries live in a [`TapStore`].
#[derive(Copy, Clone)]
struct Taps {
    offsets: *const isize,
    masks: *const u64,
    /// 32 entries when the lanes are gathered (else not read).
    lanes: *const i32,
    count: usize,
}

/// Tap entries a [`TapStore`] holds (offsets and masks: 16 KiB).
const TAP_ENTRIES: usize = 1024;
/// Tiles a [`TapStore`] holds the gathered lanes of, and the most tiles whose tables one
/// thread keeps for a whole call.
const TAP_TILES: usize = 64;

/// Room on a thread's stack for the tap tables of several tiles, slot by slot (slot `s` of
/// tables of `count` taps at entries `s * count..`), uninitialized until a table is worked
/// out into it.
struct TapStore {
    offsets: std::mem::MaybeUninit<[isize; TAP_ENTRIES]>,
    masks: std::mem::MaybeUninit<[u64; TAP_ENTRIES]>,
    lanes: std::mem::MaybeUninit<[i32; 32 * TAP_TILES]>,
}

impl TapStore {
    fn new() -> TapStore {
        TapStore {
            offsets: std::mem::MaybeUninit::uninit(),
            masks: std::mem::MaybeUninit::uninit(),
            lanes: std::mem::MaybeUninit::uninit(),
        }
    }

    /// Slots of tables of `count` taps the store holds.
    fn slots(count: usize) -> usize {
        (TAP_ENTRIES / count.max(1)).min(TAP_TILES)
    }

    /// The table in `slot` (worked out by [`TapStore::fill`] before it is read).
    fn get(&self, slot: usize, count: usize) -> Taps {
        debug_assert!(slot < TapStore::slots(count));
        Taps {
            offsets: self
                .offsets
                .as_ptr()
                .cast::<isize>()
                .wrapping_add(slot * count),
            masks: self.masks.as_ptr().cast::<u64>().wrapping_add(slot * count),
            lanes: self.lanes.as_ptr().cast::<i32>().wrapping_add(slot * 32),
            count,
        }
    }

    /// Where slot `slot`'s entries go.
    fn slot_mut(&mut self, slot: usize, count: usize) -> (*mut isize, *mut u64, *mut i32) {
        assert!(
            slot < TapStore::slots(count),
            "tap store slot {slot} of {count} taps"
        );
        (
            self.offsets
                .as_mut_ptr()
                .cast::<isize>()
                .wrapping_add(slot * count),
            self.masks
                .as_mut_ptr()
                .cast::<u64>()
                .wrapping_add(slot * count),
            self.lanes
                .as_mut_ptr()
                .cast::<i32>()
                .wrapping_add(slot * 32),
        )
    }
}

/// `bits` with bit `j` moved to bit `2 j`.
fn spread(bits: u32) -> u64 {
    let mut x = u64::from(bits);
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

impl TapStore {
    /// Works out the table of `tile` of `conv`, whose lanes read as `read` ([`Read::of`]),
    /// into `slot`, and returns it.
    fn fill(&mut self, slot: usize, conv: &DirectConv, tile: Tile, read: Read) -> Taps {
        let axes = conv.axes;
        let n_axes = axes.len();
        let last = n_axes - 1;
        // The output coordinates of the tile's first position.
        let mut first = [0i64; DIRECT_MAX_AXES];
        let mut rest = tile.start;
        for i in (0..n_axes).rev() {
            first[i] = (rest % axes[i].out as usize) as i64;
            rest /= axes[i].out as usize;
        }
        let mut lanes = [0i32; 32];
        // `valid[i][t]`: the lanes whose position along axis `i` with tap `t` is inside. The
        // tile is walked in segments along the last axis (its lanes of one output row): along
        // an outer axis a segment is inside or not as a whole, along the last axis its inside
        // lanes are one range, so no lane is visited one by one (except to gather).
        // Per axis `i`, its taps' entries from `base[i]` in flat tables: the kernels' sum is at
        // most their product (at most `DIRECT_MAX_TAPS`) plus the axes, and small tables cost
        // less to clear per tile.
        let mut base = [0usize; DIRECT_MAX_AXES + 1];
        for (i, axis) in axes.iter().enumerate() {
            base[i + 1] = base[i] + axis.kernel as usize;
        }
        const ENTRIES: usize = DIRECT_MAX_TAPS as usize + DIRECT_MAX_AXES;
        let mut valid = [0u32; ENTRIES];
        let mut lane = first;
        let mut at = 0usize;
        while at < tile.len {
            let x0 = lane[last];
            let len = ((axes[last].out - x0) as usize).min(tile.len - at);
            let bits = |from: usize, to: usize| ((1u64 << to) - (1u64 << from)) as u32;
            let segment = bits(at, at + len);
            for (i, axis) in axes[..last].iter().enumerate() {
                for (t, valid) in valid[base[i]..base[i + 1]].iter_mut().enumerate() {
                    let pos = lane[i] * axis.step - axis.pad + t as i64 * axis.dilation;
                    if (0..axis.size).contains(&pos) {
                        *valid |= segment;
                    }
                }
            }
            let axis = axes[last];
            for (t, valid) in valid[base[last]..base[last + 1]].iter_mut().enumerate() {
                // The x with `0 <= x * step + shift < size`, within the segment's.
                let shift = t as i64 * axis.dilation - axis.pad;
                let lo = (-shift.div_euclid(axis.step)).max(x0);
                let hi = ((axis.size - 1 - shift).div_euclid(axis.step) + 1).min(x0 + len as i64);
                if lo < hi {
                    *valid |= bits(at + (lo - x0) as usize, at + (hi - x0) as usize);
                }
            }
            if read == Read::Gathered {
                // `gathers` checked that every offset fits an i32.
                let outer: i64 = axes[..last]
                    .iter()
                    .enumerate()
                    .map(|(i, a)| (lane[i] - first[i]) * a.step * a.stride)
                    .sum();
                for (j, gathered) in lanes[at..at + len].iter_mut().enumerate() {
                    let x = x0 + j as i64 - first[last];
                    *gathered = (outer + x * axis.step * axis.stride) as i32;
                }
            }
            at += len;
            lane[last] = x0 + len as i64;
            let mut i = last;
            while i > 0 && lane[i] == axes[i].out {
                lane[i] = 0;
                lane[i - 1] += 1;
                i -= 1;
            }
        }
        let count = conv.taps();
        let (offsets, masks, lanes_out) = self.slot_mut(slot, count);
        if read == Read::Gathered {
            // SAFETY: the slot holds 32 lanes.
            unsafe { std::ptr::copy_nonoverlapping(lanes.as_ptr(), lanes_out, 32) };
        }
        // Per axis and tap, its part of the offset and its lanes (spread to every other bit
        // when lanes read every other element: spreading distributes over the AND below).
        let mut part = [0isize; ENTRIES];
        let mut bits = [0u64; ENTRIES];
        for (i, axis) in axes.iter().enumerate() {
            for t in 0..axis.kernel as usize {
                let position = first[i] * axis.step - axis.pad + t as i64 * axis.dilation;
                part[base[i] + t] = (position * axis.stride) as isize;
                let valid = valid[base[i] + t];
                bits[base[i] + t] = if read == Read::EveryOther {
                    spread(valid)
                } else {
                    u64::from(valid)
                };
            }
        }
        let mut tap = [0usize; DIRECT_MAX_AXES];
        for index in 0..count {
            let mut offset = 0isize;
            let mut mask = u64::MAX;
            for i in 0..n_axes {
                offset += part[base[i] + tap[i]];
                mask &= bits[base[i] + tap[i]];
            }
            // SAFETY: the slot holds `count` entries.
            unsafe {
                offsets.add(index).write(offset);
                masks.add(index).write(mask);
            }
            let mut i = last;
            tap[i] += 1;
            while i > 0 && tap[i] == axes[i].kernel as usize {
                tap[i] = 0;
                tap[i - 1] += 1;
                i -= 1;
            }
        }
        self.get(slot, count)
    }
}

/// What one microkernel call computes: `rows` rows of `C` from row `row` (a multiple of
/// [`MR`], so strips `row / MR..` of `A`) over one tile.
struct Call<'a> {
    conv: &'a DirectConv<'a>,
    /// How the lanes read the input ([`Read::of`] the convolution, worked out once).
    read: Read,
    ops: DirectOperands,
    taps: Taps,
    tile: Tile,
    row: usize,
    rows: usize,
    /// `K = channels x taps`.
    k: usize,
    /// Whether to fetch `A`'s next run of `K` ahead ([`PREFETCH_WEIGHT_BYTES`]).
    prefetch: bool,
    /// Whether to walk `K` tap by tap (`x86::walk`).
    taps_first: bool,
    /// Channels per block of the tap-by-tap walk ([`tap_block`]).
    tap_block: usize,
}

/// Lines of one block of channels that [`tap_block`] lets share a set of the L1 data cache
/// (8-way at 32 KiB): 4 or 8 for the zoo U-Net's 16->16 3x3 at 64x64 took 0.375 or 0.368 ms
/// (0.416 unblocked; 2: 0.50), 32->32 at 32x32 0.345 or 0.330 (0.365).
const TAP_BLOCK_WAYS: usize = 8;

/// Channels per block when the direct kernel walks `K` tap by tap (`x86::walk_taps`): each
/// block's channels over every tap, then the next block's. A tap's channels lie `channel_stride`
/// elements apart, and when that is a multiple of 4 KiB (a 32x32 or 64x64 plane) every
/// channel's line for a lane falls in the same set of the L1 cache (its sets repeat every 4
/// KiB), so walking a tap over more channels than the set has ways evicts the lines the next
/// taps read again: the zoo U-Net's 16->16 3x3 at 64x64 ran at 45 GFLOP/s on an AMD EPYC
/// (AVX2), 74 at 16x16 or 56x56. Blocks keep at most [`TAP_BLOCK_WAYS`] channels per set.
fn tap_block(channel_stride: isize) -> usize {
    const PERIOD: usize = 4096;
    let bytes = channel_stride.unsigned_abs().saturating_mul(4) % PERIOD;
    // Channels `PERIOD / gcd` apart share a set.
    let mut gcd = (bytes, PERIOD);
    while gcd.1 != 0 {
        gcd = (gcd.1, gcd.0 % gcd.1);
    }
    let share = if bytes == 0 { PERIOD } else { gcd.0 };
    TAP_BLOCK_WAYS * PERIOD / share.max(64)
}

/// Bytes of packed weights from which the direct kernel fetches each run of `K` of its
/// strips of `A` a run ahead (`prefetch`): weights this large come from memory on every run
/// of a model (ResNet-18's 44 MiB of weights pass through the caches each time), and the
/// hardware prefetchers restart at every run (`KC` values of two strips, then a jump of
/// `m x KC`). ResNet-18's 512->512 3x3 at 7x7 (9 MiB) took 2.54 ms inside the model, 2.0-2.1
/// with the prefetch (2.0-2.2 alone, its weights in cache); the model 34.5-37.5 -> 30.4-31.3
/// ms. Smaller weights stay in L2 from tile to tile, and the prefetches only cost load slots
/// (the 64->64 3x3 at 56x56 took 1.64 ms without, 1.79 with).
const PREFETCH_WEIGHT_BYTES: usize = 1 << 20;

/// Runs the direct convolution for batch indices `0..batches` (operands from `at`), split
/// over at most `threads` threads that `broadcast(t, f)` runs `f(0..t)` on.
///
/// # Safety
/// [`direct_conv_runs`] holds for `conv.axes`; each batch index's `a_packed` holds
/// [`crate::packed_a_len`]`(m, channels x taps)` values, its input every element the axes
/// and channels address inside the input, and its `c` `m x pixels` elements with contiguous
/// columns; `threads > 1` only when distinct (batch, row, column) write distinct elements.
pub unsafe fn run_direct(
    batches: usize,
    at: &(dyn Fn(usize) -> DirectOperands + Sync),
    conv: &DirectConv,
    threads: usize,
    broadcast: Broadcast<'_>,
) {
    let isa = isa();
    // Lanes of a tile and rows of `C` of one call: AVX-512 holds 12 x 32 accumulators in 24
    // of its 32 registers (two strips of `A` per load of `B`), AVX2 6 x 16 in 12 of 16, or
    // 12 x 8 where every tile is one vector ([`block_rows`]).
    let lanes = if isa == Isa::Avx512 { 32 } else { 16 };
    let tiling = Tiling::new(conv, lanes);
    let block_rows = block_rows(isa, tiling.tile_len);
    let read = Read::of(conv);
    let k = conv.channels * conv.taps();
    if conv.m == 0 || k == 0 || tiling.count == 0 || batches == 0 {
        return;
    }
    let blocks = conv.m.div_ceil(block_rows);
    let prefetch = conv.m.saturating_mul(k).saturating_mul(4) >= PREFETCH_WEIGHT_BYTES;
    // Spans of consecutive tiles: the batch indices of a span share its tap tables, and each
    // walks the span's part of its input in order (a depthwise convolution's groups are batch
    // indices of a few values of `K` each, so working out a tile's masks per batch index, or
    // visiting every group's plane per tile, would cost more than the products).
    let span_tiles = if batches > 1 { SPAN_TILES } else { 1 };
    let spans = tiling.count.div_ceil(span_tiles);
    let pairs = spans * batches;
    // The order of the work. A tile's input (its channels' rows) and a row block's weights
    // (`block_rows x K`) are both reused: tile-major order loads each tile's input once and
    // streams the weights past it, which suits early layers (large images, small weights);
    // when the weights outweigh the input (late layers: few pixels, `K` in the thousands),
    // streaming them past every tile would read them from memory once per tile, so each row
    // block runs over every tile instead (block-major), its weights staying in cache.
    let input_elems = conv.channels * conv.axes.iter().map(|a| a.size as usize).product::<usize>();
    let block_major = blocks > 1 && conv.m * k > input_elems;
    // `K` tap by tap where the lanes are masked and a tap has enough channels, unless the
    // weights stream past the tiles (block-major: a tap's channels then sit `taps x MR`
    // values apart in `A`, a new line of each strip per value; the zoo resnet's 128-channel
    // 3x3 layers at 4x4 took 0.042 -> 0.050 ms so on AVX-512). On AVX2 every masked read
    // walks tap by tap, block-major too: its loads' vector masks are built from bits, per
    // value of `K` in the channel-major walk (an AMD EPYC's 128-channel 3x3 at 28x28, block-
    // major: 4.14 -> 3.06 ms; 64 channels at 56x56 4.3-4.8 -> 3.3-3.4).
    let tap_block = tap_block(conv.channel_stride);
    let taps_first = (matches!(read, Read::EveryOther | Read::Gathered)
        || (read == Read::Row && isa == Isa::Avx2))
        && conv.channels >= TAP_MAJOR_CHANNELS
        && (!block_major || isa == Isa::Avx2);
    // A small layer runs on one thread: a second one gains nothing under a few million
    // multiply-adds (the input and the outputs then move between the cores' caches each run,
    // and each thread's share slows by about half; the zoo resnet's 32->32 3x3 at 16x16, 2.4
    // million, took 0.030 ms on one thread and 0.034-0.040 on two), while data movement counts
    // too (a depthwise layer of 2.7 million gains 1.3x).
    let pixels = conv.pixels();
    let work = batches.saturating_mul(
        (conv.m * k * pixels).saturating_add(WORK_PER_ELEMENT * (input_elems + conv.m * pixels)),
    );
    let threads = if work < DIRECT_PARALLEL_WORK {
        1
    } else {
        threads
    };
    // Groups of row blocks per (span, batch index) pair: each block its own group when
    // block-major; else one, unless there are fewer pairs than twice the threads.
    let groups = if block_major {
        blocks
    } else if threads > 1 && pairs < 2 * threads {
        blocks.min((2 * threads).div_ceil(pairs))
    } else {
        1
    };
    // A depthwise plane reads its rows whole or every other element, however short: a
    // 7-wide row gathered tile by tile (the general kernel, one plane per batch index) took
    // MobileNetV2's 576-channel 3x3/2 from 14x14 0.111 ms on one thread or two, onnxruntime
    // 0.015 at two.
    let read = match read {
        Read::Gathered if planes(conv, Read::rows_of(conv)) => Read::rows_of(conv),
        read => read,
    };
    if planes(conv, read) {
        // Depthwise: each batch index one plane, the batch indices split evenly over the
        // threads in runs (a plane and its output stay on one core).
        let threads = threads.clamp(1, batches);
        #[cfg(target_arch = "x86_64")]
        if let Some(square) = (isa == Isa::Avx2)
            .then(|| PlaneSquare::of(conv, read))
            .flatten()
        {
            // A 3x3 or 5x5 window: its own kernel ([`PlaneSquare`]), the ring's padding
            // zeroed once per thread.
            let work = |t: usize| {
                let mine = batches * t / threads..batches * (t + 1) / threads;
                with_stack_buffer(square.values(), &mut |buffer| {
                    x86::planes_square_avx2(conv, &square, buffer, mine.clone(), at);
                });
            };
            if threads > 1 {
                broadcast(threads, &work);
            } else {
                work(0);
            }
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(flat) = PlaneFlat::here(conv, isa) {
            // The mask table, worked out once on this thread, read by every thread.
            with_stack_buffer(flat.vectors * flat.taps * 8, &mut |table| {
                x86::plane_flat_masks(conv, &flat, table.cast());
                let table = table as usize;
                let work = |t: usize| {
                    let mine = batches * t / threads..batches * (t + 1) / threads;
                    let table = table as *const i32;
                    let run = |copy: *mut f32| {
                        for batch in mine.clone() {
                            x86::plane_flat(conv, &flat, table, copy, &at(batch));
                        }
                    };
                    if flat.step == 2 {
                        with_stack_buffer(4 * flat.phase, &mut |copy| run(copy));
                    } else {
                        run(std::ptr::null_mut());
                    }
                };
                if threads > 1 {
                    broadcast(threads, &work);
                } else {
                    work(0);
                }
            });
            return;
        }
        let ring = (isa == Isa::Avx2)
            .then(|| PlaneRing::of(conv, read, 8))
            .flatten();
        let masks = PlaneMasks::new(conv, read);
        let work = |t: usize| {
            let mine = batches * t / threads..batches * (t + 1) / threads;
            #[cfg(target_arch = "x86_64")]
            if let Some(ring) = &ring {
                with_stack_buffer(ring.slot * (ring.rows + 1), &mut |buffer| {
                    for batch in mine.clone() {
                        x86::plane_ring_avx2(conv, ring, buffer, &at(batch));
                    }
                });
                return;
            }
            for batch in mine {
                #[cfg(target_arch = "x86_64")]
                if isa == Isa::Avx512 {
                    x86::plane_avx512(conv, read, &masks, &at(batch));
                } else {
                    x86::plane_avx2(conv, read, &masks, &at(batch));
                }
            }
        };
        if threads > 1 {
            broadcast(threads, &work);
        } else {
            work(0);
        }
        return;
    }
    if let Some(padded) = Padded::of(conv, read, lanes) {
        padded.run(batches, at, conv, threads, broadcast, prefetch);
        return;
    }
    let units = pairs * groups;
    let threads = threads.clamp(1, units);
    // Threads take chunks of consecutive units as they finish the last, so a thread the
    // scheduler delays holds up only its current chunk, not a fixed share.
    let chunk = units.div_ceil(threads * CHUNKS_PER_THREAD).max(1);
    let next = AtomicUsize::new(0);
    // Each thread keeps the tap tables of every tile when they fit its store (each worked out
    // when first used: block-major order runs each tile once per row block, and working its
    // table out each time cost the zoo resnet's 32->32 3x3 at 16x16 15% of its time), else
    // those of its current span.
    let count = conv.taps();
    let keep_all = tiling.count <= TapStore::slots(count);
    let work = |_: usize| {
        let mut store = TapStore::new();
        // Which tiles' tables are in the store (every tile's, or the span's).
        let mut kept = 0u64;
        let mut taps_span = usize::MAX;
        loop {
            let begin = next.fetch_add(chunk, Ordering::Relaxed);
            if begin >= units {
                break;
            }
            for unit in begin..(begin + chunk).min(units) {
                let (pair, group) = if block_major {
                    (unit % pairs, unit / pairs)
                } else {
                    (unit / groups, unit % groups)
                };
                let (span, batch) = (pair / batches, pair % batches);
                let first = span * span_tiles;
                let n_tiles = (tiling.count - first).min(span_tiles);
                if !keep_all && span != taps_span {
                    taps_span = span;
                    for i in 0..n_tiles {
                        store.fill(i, conv, tiling.tile(first + i), read);
                    }
                }
                let ops = at(batch);
                for i in 0..n_tiles {
                    let tile = tiling.tile(first + i);
                    let slot = if keep_all { first + i } else { i };
                    let taps = if keep_all && kept & (1 << slot) == 0 {
                        kept |= 1 << slot;
                        store.fill(slot, conv, tile, read)
                    } else {
                        store.get(slot, count)
                    };
                    for block in blocks * group / groups..blocks * (group + 1) / groups {
                        let row = block * block_rows;
                        let call = Call {
                            conv,
                            read,
                            ops,
                            taps,
                            tile,
                            row,
                            rows: (conv.m - row).min(block_rows),
                            k,
                            prefetch,
                            taps_first,
                            tap_block,
                        };
                        match isa {
                            #[cfg(target_arch = "x86_64")]
                            Isa::Avx512 => x86::avx512(&call),
                            #[cfg(target_arch = "x86_64")]
                            Isa::Avx2 => x86::avx2(&call),
                            // `direct_conv_runs` is false on other instruction sets.
                            _ => {}
                        }
                    }
                }
            }
        }
    };
    if threads > 1 {
        broadcast(threads, &work);
    } else {
        work(0);
    }
}

/// Rows of `C` one microkernel call computes on `isa` over tiles of at most `tile_len`
/// positions: two strips of `A` ([`MR`] rows each) on AVX-512, and on AVX2 where a tile is one
/// vector of 8 (a stride-2 layer's 8-wide rows, 7x7 and 8x8 images): a strip of 6 rows then
/// loads 6 values of `A` and one of the input per 6 multiply-adds, more loads than an AMD
/// EPYC issues beside its 2 FMAs a cycle, 12 rows 13 per 12.
fn block_rows(isa: Isa, tile_len: usize) -> usize {
    if isa == Isa::Avx512 || (isa == Isa::Avx2 && tile_len <= 8) {
        2 * MR
    } else {
        MR
    }
}

/// Input channels from which the direct kernel walks `K` tap by tap (`x86::walk`; a grouped
/// convolution's 4 channels per group ran 12% slower so, 8 ran 20% faster).
const TAP_MAJOR_CHANNELS: usize = 8;

/// Values of the padded input rows one output row of a [`Padded`] convolution reads, at
/// most (a buffer of 128 KiB on each thread's stack: ResNet-18's 128-channel 3x3 at stride 2
/// needs 45 KiB, ResNet-50's 128-channel 3x3 at stride 2 from 56x56 87 KiB, and ran 2.07 ->
/// 1.74-1.77 ms inside the model this way, one thread, AVX-512 Xeon; onnxruntime 1.31).
const PADDED_MAX: usize = 32768;

/// Values of a depthwise plane's ring of row copies ([`PlaneSquare`], [`PlaneRing`]) on the
/// stack, at most (64 KiB).
const RING_MAX: usize = 16384;

/// Tiles per output row of a [`Padded`] convolution, at most (their tap tables, the same on
/// every row, are worked out once per call on the stack).
const PADDED_MAX_TILES: usize = 8;

/// A 2-d convolution read every other element along its rows (stride 2), run one output row
/// at a time from a copy of the input rows that row reads, padded with zeros and split by
/// phase: the even input columns, then the odd ones. Every tap's lanes then read one
/// contiguous run of the copy, all of them inside it, so the microkernel loads whole vectors
/// where the input itself needs two masked loads and a permute per vector, and the tap
/// tables (offsets into the copy) are the same on every row, worked out once per call. The
/// stems of CNNs (3 input channels, a 7x7 or 3x3 window at stride 2) spent most of their
/// time on those loads and tables: ResNet-18's 7x7 took 3.2 ms inside the model (35% of the
/// FMA peak), onnxruntime 1.5.
///
/// Copy of batch index `b`, output row `y`: channel `c`, kernel row `r`, phase `p` at
/// `c * channel + (r * 2 + p) * width`, its element `j` the input at column `2 j + p - pad`
/// of row `y * step - pad + r * dilation` (0 outside the input). Output column `x` with tap
/// column `q` reads element `x + (q * dilation) / 2` of phase `(q * dilation) % 2`.
#[derive(Copy, Clone, Debug)]
struct Padded {
    /// Values of one phase of one kernel row.
    width: usize,
    /// Values between channels in the copy.
    channel: usize,
    /// Tiles per output row, and their length (the last may be shorter).
    tiles: usize,
    tile_len: usize,
    /// Lanes of a tile's vectors, which may read that many values past the copy.
    lanes: usize,
    /// Whether a tap reads the odd phase (not a 1x1 window, nor one dilated by an even
    /// number: their copies fill the even phase only, and the odd one stays zero).
    odd: bool,
}

impl Padded {
    /// The copy's layout for `conv` read as `read` with tiles of `lanes`, when it runs this
    /// way: 2-d, stride 2 along the row read without gathering, the copy within
    /// [`PADDED_MAX`] values and a row within [`PADDED_MAX_TILES`] tiles.
    fn of(conv: &DirectConv, read: Read, lanes: usize) -> Option<Padded> {
        let [outer, row] = conv.axes else {
            return None;
        };
        if read != Read::EveryOther || row.step != 2 || outer.kernel < 1 || row.kernel < 1 {
            return None;
        }
        let reach = usize::try_from((row.kernel - 1).checked_mul(row.dilation)? / 2).ok()?;
        let out = usize::try_from(row.out).ok()?;
        let width = out.checked_add(reach)?;
        let channel = (outer.kernel as usize).checked_mul(2)?.checked_mul(width)?;
        let tiles = out.div_ceil(lanes);
        // The last tile's lanes may reach `lanes` values past the copy.
        let values = channel.checked_mul(conv.channels)?.checked_add(lanes)?;
        (values <= PADDED_MAX && tiles <= PADDED_MAX_TILES && width <= 8 * FILL_MAX_VECTORS)
            .then_some(Padded {
                width,
                channel,
                tiles,
                tile_len: out.div_ceil(tiles),
                lanes,
                odd: (0..row.kernel).any(|q| (q * row.dilation) % 2 == 1),
            })
    }

    /// Runs `conv` (as [`run_direct`]): the output rows of every batch index split evenly
    /// over the threads in runs; per row, the copy, then per tile each block of
    /// `block_rows` output channels over all of `K`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn run(
        self,
        batches: usize,
        at: &(dyn Fn(usize) -> DirectOperands + Sync),
        conv: &DirectConv,
        threads: usize,
        broadcast: Broadcast<'_>,
        prefetch: bool,
    ) {
        let [outer, row] = conv.axes else {
            return;
        };
        let (out_rows, out_cols) = (outer.out as usize, row.out as usize);
        let units = batches * out_rows;
        let threads = threads.clamp(1, units);
        let block_rows = block_rows(isa(), self.tile_len);
        // The tiles' tap tables: offsets into the copy, every lane inside it.
        let mut store = TapStore::new();
        let (kh, kw) = (outer.kernel as usize, row.kernel as usize);
        let count = kh * kw;
        for tile in 0..self.tiles {
            let x0 = tile * self.tile_len;
            let len = (out_cols - x0).min(self.tile_len);
            let (offsets, masks, _) = store.slot_mut(tile, count);
            for r in 0..kh {
                for q in 0..kw {
                    let shift = q * row.dilation as usize;
                    offsets
                        .add(r * kw + q)
                        .write(((2 * r + shift % 2) * self.width + shift / 2 + x0) as isize);
                    masks.add(r * kw + q).write((1u64 << len) - 1);
                }
            }
        }
        // The convolution as the microkernel sees it: its input channels `channel` apart.
        let copy_conv = DirectConv {
            channel_stride: self.channel as isize,
            ..*conv
        };
        let used = conv.channels * self.channel;
        let work = |t: usize| {
            with_stack_buffer(used + self.lanes, &mut |copy| {
                self.rows(
                    conv,
                    &copy_conv,
                    at,
                    &store,
                    copy,
                    units * t / threads..units * (t + 1) / threads,
                    block_rows,
                    prefetch,
                )
            })
        };
        if threads > 1 {
            broadcast(threads, &work);
        } else {
            work(0);
        }
    }

    /// Output rows `units` (batch index x output row, row-major) into `copy` (at least the
    /// copy's values plus [`Padded::lanes`]).
    #[allow(clippy::too_many_arguments)]
    unsafe fn rows(
        &self,
        conv: &DirectConv,
        copy_conv: &DirectConv,
        at: &(dyn Fn(usize) -> DirectOperands + Sync),
        store: &TapStore,
        copy: *mut f32,
        units: std::ops::Range<usize>,
        block_rows: usize,
        prefetch: bool,
    ) {
        let [outer, row] = conv.axes else {
            return;
        };
        let (out_rows, out_cols) = (outer.out as usize, row.out as usize);
        let count = outer.kernel as usize * row.kernel as usize;
        let k = conv.channels * count;
        let tables: [Taps; PADDED_MAX_TILES] = std::array::from_fn(|tile| store.get(tile, count));
        // Every row's copy writes values `0..used` (the even phases only, unless `odd`: the
        // odd ones are zeros, written once); the lanes past them are zeros.
        let used = conv.channels * self.channel;
        if self.odd {
            std::ptr::write_bytes(copy.add(used), 0, self.lanes);
        } else {
            std::ptr::write_bytes(copy, 0, used + self.lanes);
        }
        for unit in units {
            let (batch, y) = (unit / out_rows, unit % out_rows);
            let ops = at(batch);
            self.fill(conv, ops.x, y, copy);
            let ops = DirectOperands { x: copy, ..ops };
            for (tile, &taps) in tables.iter().enumerate().take(self.tiles) {
                let x0 = tile * self.tile_len;
                let tile = Tile {
                    start: y * out_cols + x0,
                    len: (out_cols - x0).min(self.tile_len),
                };
                let mut first = 0;
                while first < conv.m {
                    let call = Call {
                        conv: copy_conv,
                        read: Read::Whole,
                        ops,
                        taps,
                        tile,
                        row: first,
                        rows: (conv.m - first).min(block_rows),
                        k,
                        prefetch,
                        taps_first: false,
                        tap_block: usize::MAX,
                    };
                    match isa() {
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx512 => x86::avx512(&call),
                        #[cfg(target_arch = "x86_64")]
                        Isa::Avx2 => x86::avx2(&call),
                        // `direct_conv_runs` is false on other instruction sets.
                        _ => {}
                    }
                    first += block_rows;
                }
            }
        }
    }

    /// Writes the copy for output row `y` of the input at `x` into `copy` (`x86::fill_padded`).
    unsafe fn fill(&self, conv: &DirectConv, x: *const f32, y: usize, copy: *mut f32) {
        #[cfg(target_arch = "x86_64")]
        x86::fill_padded(self, conv, x, y, copy);
        // `direct_conv_runs` is false on other instruction sets.
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (conv, x, y, copy);
    }
}

/// Calls `f` with an uninitialized buffer of at least `n` values (at most [`PADDED_MAX`]) on
/// the stack, of one of a few sizes: a frame is probed page by page, so a small copy in the
/// largest buffer would touch all its pages (16 of them per thread, counted in a run's
/// memory).
fn with_stack_buffer(n: usize, f: &mut dyn FnMut(*mut f32)) {
    #[inline(never)]
    fn with<const N: usize>(f: &mut dyn FnMut(*mut f32)) {
        let mut buffer = std::mem::MaybeUninit::<[f32; N]>::uninit();
        f(buffer.as_mut_ptr().cast());
    }
    match n {
        0..=2048 => with::<2048>(f),
        2049..=8192 => with::<8192>(f),
        8193..=16384 => with::<16384>(f),
        _ => with::<PADDED_MAX>(f),
    }
}

/// Vectors of 8 values per phase of a [`Padded`] copy's row that `x86::fill_padded` takes
/// at most (their load masks are a table on the stack): wider rows do not run as `Padded`.
const FILL_MAX_VECTORS: usize = 32;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{
        Call, DirectConv, DirectOperands, PlaneFlat, PlaneMasks, PlaneRing, PlaneSquare, Read,
        GEMM_KC_BYTES, MR, PLANE_RING_MAX_ROWS, PLANE_SQUARE_ROWS,
    };
    use std::arch::x86_64::*;

    /// Values of `K` per run of the packed `A` ([`crate::pack_a_whole`]'s `KC` for f32).
    const KC: usize = GEMM_KC_BYTES as usize / 4;

    /// Walks `K` for one call of a tile read at stride `S`: `step(a, a_next, b, mask)` per
    /// value of `K`, with `a` the call's first strip's `MR` values of `A` (the next strip's
    /// are `a_next` further on), `b` the input element lane 0 reads and `mask` the tap's. Tap
    /// by tap ([`walk_taps`]) for strided or gathered lanes when the call says
    /// (`Call::taps_first`: a tap of `TAP_MAJOR_CHANNELS` channels or more, the weights not
    /// streaming; on AVX2, 8-lane tiles of `lanes`, stride-1 reads too): the channel-major
    /// walk reloads the tap's masks at every value of `K` (two masks, or a gather's; on AVX2
    /// builds each vector mask). Channel by channel ([`walk_channels`]) otherwise: on AVX-512
    /// at stride 1 the gain was within the runs' spread (2-3% on 64-channel 3x3 layers at
    /// 56x56), the zoo U-Net's 16- and 32-channel layers lost 9-11%, and ResNet-18's stem (3
    /// channels from the padded copy) 18%.
    #[inline(always)]
    unsafe fn walk<const S: usize>(
        call: &Call,
        lanes: usize,
        step: impl FnMut(*const f32, usize, *const f32, u64),
    ) {
        // Only strided and gathered reads (and AVX2's stride-1 reads) walk tap by tap: the
        // AVX-512 tiles of the other reads keep one walk (with both, the code around the
        // channel-major loop of a stride-1 tile ran about 3% slower on the zoo U-Net's 16-
        // and 32-channel layers). `lanes` is a constant of each tile's instance. A pointwise
        // window (one tap: `K` is its channels, the same order either way) walks tap by tap
        // too: the channel-by-channel walk spent more instructions on its counters than on
        // the 12 multiply-adds per value of `K`.
        if call.taps.count == 1 {
            walk_taps::<false>(call, step)
        } else if (S == 0 || S == 2 || (S == 1 && lanes == 8)) && call.taps_first {
            if call.tap_block < call.conv.channels {
                walk_taps::<true>(call, step)
            } else {
                walk_taps::<false>(call, step)
            }
        } else {
            walk_channels(call, step)
        }
    }

    /// [`walk`] tap by tap: for every run of `KC` values, each tap's channels in the run in
    /// order. A tap's mask and offset hold for every channel, so the loop over the channels
    /// keeps the mask in the mask registers and moves two pointers.
    #[inline(always)]
    unsafe fn walk_taps<const STRETCH: bool>(
        call: &Call,
        mut step: impl FnMut(*const f32, usize, *const f32, u64),
    ) {
        let conv = call.conv;
        let mpad = conv.m.div_ceil(MR) * MR;
        let n_taps = call.taps.count;
        let x = call.ops.x;
        // With `STRETCH`, stretches of `K` of `tap_block` channels (and never across a
        // packed run), each walked tap by tap; else whole runs (the same loop without the
        // stretches' arithmetic, which cost ResNet-18's 256-channel 3x3 ~1%).
        let stretch = call.tap_block.saturating_mul(n_taps);
        let mut p0 = 0;
        while p0 < call.k {
            let start = if STRETCH { p0 / KC * KC } else { p0 };
            let kc = (call.k - start).min(KC);
            let p1 = if STRETCH {
                p0.saturating_add(stretch).min(start + kc)
            } else {
                p0 + kc
            };
            let run = call.ops.a_packed.add(start * mpad + call.row * kc);
            let a_next = MR * kc;
            // The channels whose value of `K` for tap `t` (`c * taps + t`) lies in the
            // stretch: from `c0`, or `c0 + 1` for the taps before `r0`, to `c1` or `c1 + 1`
            // (two divisions a stretch, not two a tap: a 32-channel 3x3 layer's taps each
            // walk 28 or 29 channels in the first run of 256 values, 3 or 4 in the second).
            let (c0, r0) = (p0 / n_taps, p0 % n_taps);
            let (c1, r1) = (p1 / n_taps, p1 % n_taps);
            for t in 0..n_taps {
                let mask = *call.taps.masks.add(t);
                if mask == 0 {
                    continue;
                }
                let first = c0 + usize::from(t < r0);
                let end = c1 + usize::from(t < r1);
                if first >= end {
                    continue;
                }
                let mut a = run.add((first * n_taps + t - start) * MR);
                let mut b = x
                    .wrapping_offset(first as isize * conv.channel_stride)
                    .wrapping_offset(*call.taps.offsets.add(t));
                for _ in first..end {
                    if call.prefetch {
                        // Both strips' values of the next run of `K`, a run ahead.
                        let ahead = a.wrapping_add(mpad * kc);
                        _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(a_next).cast());
                    }
                    step(a, a_next, b, mask);
                    a = a.add(n_taps * MR);
                    b = b.wrapping_offset(conv.channel_stride);
                }
            }
            p0 = p1;
        }
    }

    /// [`walk`] as `A` is laid out: channel by channel, each channel's taps inner.
    #[inline(always)]
    unsafe fn walk_channels(call: &Call, mut step: impl FnMut(*const f32, usize, *const f32, u64)) {
        let conv = call.conv;
        let mpad = conv.m.div_ceil(MR) * MR;
        let n_taps = call.taps.count;
        let x = call.ops.x;
        let (mut channel, mut tap) = (0usize, 0usize);
        let mut p0 = 0;
        while p0 < call.k {
            let kc = (call.k - p0).min(KC);
            let mut a = call.ops.a_packed.add(p0 * mpad + call.row * kc);
            let a_next = MR * kc;
            let mut q = 0;
            while q < kc {
                let count = (n_taps - tap).min(kc - q);
                let xc = x.wrapping_offset(channel as isize * conv.channel_stride);
                for t in tap..tap + count {
                    if call.prefetch {
                        // Both strips' values of the next run of `K`, a run ahead.
                        let ahead = a.wrapping_add(mpad * kc);
                        _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(a_next).cast());
                    }
                    let mask = *call.taps.masks.add(t);
                    if mask != 0 {
                        let b = xc.wrapping_offset(*call.taps.offsets.add(t));
                        step(a, a_next, b, mask);
                    }
                    a = a.add(MR);
                }
                q += count;
                tap += count;
                if tap == n_taps {
                    tap = 0;
                    channel += 1;
                }
            }
            p0 += kc;
        }
    }

    /// [`Padded::fill`] in vectors (AVX2, which every AVX-512 CPU has): each phase's row in
    /// vectors of 8 values, each the even elements of two masked loads of the input row (the
    /// masks, the same on every row, hold the lanes inside the input and inside the phase's
    /// `width`). A stride-2 3x3 layer's copy is 32 to 64 rows of 9 values per output row:
    /// element by element, with a `memset` for each row's pad on either side, it took about a
    /// quarter of the convolution (the zoo resnet's 32->64 3x3/2 at 16x16).
    ///
    /// The last vector of a phase stores up to 7 values past it, zeros (lanes past `width`
    /// are masked): into the next phase's or row's values, written after it, or past the
    /// copy's `used` values, where the copy is zeros ([`Padded::rows`]).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn fill_padded(
        padded: &super::Padded,
        conv: &DirectConv,
        x: *const f32,
        y: usize,
        copy: *mut f32,
    ) {
        use super::FILL_MAX_VECTORS;
        let [outer, row] = conv.axes else {
            return;
        };
        let width = padded.width;
        let vectors = width.div_ceil(8);
        let phases = 1 + usize::from(padded.odd);
        // Per phase and vector, the masks of its two loads: input column `16 v + lane + p -
        // pad`, element `8 v + lane / 2` of the phase (odd lanes are loaded and dropped).
        let mut masks = [[_mm256_setzero_si256(); 2]; 2 * FILL_MAX_VECTORS];
        for p in 0..phases {
            for v in 0..vectors {
                for (half, mask) in masks[p * FILL_MAX_VECTORS + v].iter_mut().enumerate() {
                    let mut bits = 0u64;
                    for i in 0..8 {
                        let lane = 8 * half + i;
                        let column = (16 * v + lane + p) as i64 - row.pad;
                        if 8 * v + lane / 2 < width && (0..row.size).contains(&column) {
                            bits |= 1 << i;
                        }
                    }
                    *mask = lanes8(bits);
                }
            }
        }
        for c in 0..conv.channels {
            let xc = x.wrapping_offset(c as isize * conv.channel_stride);
            for r in 0..outer.kernel as usize {
                let iy = y as i64 * outer.step - outer.pad + r as i64 * outer.dilation;
                let line = copy.add(c * padded.channel + 2 * r * width);
                if !(0..outer.size).contains(&iy) {
                    std::ptr::write_bytes(line, 0, 2 * width);
                    continue;
                }
                let src = xc.wrapping_offset((iy * outer.stride) as isize);
                for p in 0..phases {
                    let dst = line.add(p * width);
                    let from = src.wrapping_offset(p as isize - row.pad as isize);
                    for v in 0..vectors {
                        let [lo, hi] = masks[p * FILL_MAX_VECTORS + v];
                        let at = from.wrapping_add(16 * v);
                        let even = even8(
                            _mm256_maskload_ps(at, lo),
                            _mm256_maskload_ps(at.wrapping_add(8), hi),
                        );
                        _mm256_storeu_ps(dst.add(8 * v), even);
                    }
                }
            }
        }
    }

    /// [`plane`] on AVX-512.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn plane_avx512(
        conv: &DirectConv,
        read: Read,
        masks: &PlaneMasks,
        ops: &DirectOperands,
    ) {
        plane::<Zmm>(conv, read, masks, ops)
    }

    /// [`plane`] on AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn plane_avx2(
        conv: &DirectConv,
        read: Read,
        masks: &PlaneMasks,
        ops: &DirectOperands,
    ) {
        plane::<Ymm>(conv, read, masks, ops)
    }

    /// Fills the mask table of a [`PlaneFlat`] convolution at `table` (`vectors x taps`
    /// entries of 8 lanes, -1 where the lane reads the input, 0 where it reads padding): lane
    /// `j` of vector `v` is output value `min(8 v, n - 8) + j`, whose row and column are
    /// carried from vector to vector.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn plane_flat_masks(conv: &DirectConv, flat: &PlaneFlat, table: *mut i32) {
        let [outer, row] = conv.axes else {
            return;
        };
        let out_w = row.out as i32;
        let kw = row.kernel as usize;
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let width = _mm256_set1_epi32(out_w);
        // The lanes' output rows and columns (vector 0).
        let (mut oy, mut ox) = (_mm256_setzero_si256(), lanes);
        let wrap = |oy: &mut __m256i, ox: &mut __m256i| {
            // Columns past the row move to the next (as often as a row is shorter than 8).
            loop {
                let over = _mm256_cmpgt_epi32(*ox, _mm256_sub_epi32(width, _mm256_set1_epi32(1)));
                if _mm256_testz_si256(over, over) != 0 {
                    break;
                }
                *ox = _mm256_sub_epi32(*ox, _mm256_and_si256(over, width));
                *oy = _mm256_sub_epi32(*oy, over);
            }
        };
        wrap(&mut oy, &mut ox);
        // `lo <= x < hi` per lane, as a mask.
        let inside = |x: __m256i, lo: i64, hi: i64| {
            let above = _mm256_cmpgt_epi32(x, _mm256_set1_epi32((lo - 1) as i32));
            let below = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi as i32), x);
            _mm256_and_si256(above, below)
        };
        for v in 0..flat.vectors {
            if v + 1 == flat.vectors && 8 * v > flat.n - 8 {
                // The last vector ends at the plane's end.
                let first = (flat.n - 8) as i32;
                let mut row_of = [0i32; 8];
                let mut col_of = [0i32; 8];
                for (j, (r, c)) in row_of.iter_mut().zip(&mut col_of).enumerate() {
                    let o = first + j as i32;
                    (*r, *c) = (o / out_w, o % out_w);
                }
                oy = _mm256_loadu_si256(row_of.as_ptr().cast());
                ox = _mm256_loadu_si256(col_of.as_ptr().cast());
            }
            let iy0 = _mm256_mullo_epi32(oy, _mm256_set1_epi32(outer.step as i32));
            let ix0 = _mm256_mullo_epi32(ox, _mm256_set1_epi32(row.step as i32));
            for t in 0..flat.taps {
                let (dy, dx) = ((t / kw) as i64, (t % kw) as i64);
                // Input row `oy * step + dy * dilation - pad` inside `0..size`, and so the
                // column.
                let rows = inside(
                    iy0,
                    outer.pad - dy * outer.dilation,
                    outer.size + outer.pad - dy * outer.dilation,
                );
                let cols = inside(
                    ix0,
                    row.pad - dx * row.dilation,
                    row.size + row.pad - dx * row.dilation,
                );
                _mm256_storeu_si256(
                    table.add((v * flat.taps + t) * 8).cast(),
                    _mm256_and_si256(rows, cols),
                );
            }
            ox = _mm256_add_epi32(ox, _mm256_set1_epi32(8));
            wrap(&mut oy, &mut ox);
        }
    }

    /// One batch index of a [`PlaneFlat`] convolution: at stride 2 its plane copied into
    /// `copy` (four phases of `phase` values) first; then groups of up to eight vectors, their
    /// accumulators over every tap (masked loads, masks from `table`), finished and stored
    /// whole (the last vector, which overlaps the one before, stores only its own lanes where
    /// a store reads what it overwrites: `accumulate` or a residual).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn plane_flat(
        conv: &DirectConv,
        flat: &PlaneFlat,
        table: *const i32,
        copy: *mut f32,
        ops: &DirectOperands,
    ) {
        let [outer, row] = conv.axes else {
            return;
        };
        let source = if flat.step == 1 {
            ops.x
        } else {
            // Phase `py * 2 + px` row `i` = input row `2 i + py`, its columns `px, px + 2, ..`.
            let (width, out_w) = (row.size as usize, row.out as usize);
            for iy in 0..outer.size as usize {
                let src = ops.x.add(iy * width);
                for px in 0..2 {
                    let dst = copy.add(((iy % 2) * 2 + px) * flat.phase + (iy / 2) * out_w);
                    // Columns `px + 2 j` inside the row, 8 at a time: the last vector's
                    // lanes past the row land on the phase's next row (written after) or in
                    // the gap after the phase.
                    let n = (width + 1 - px) / 2;
                    let mut j = 0;
                    while j < n {
                        let at = px + 2 * j;
                        // The `width - at` elements left in the row, masked past them.
                        let x = if width - at >= 15 {
                            Ymm::load_even(src.add(at))
                        } else {
                            let left = (1u64 << (width - at)) - 1;
                            Ymm(load8::<2>(src.add(at), left, 0, std::ptr::null()))
                        };
                        x.storeu(dst.add(j));
                        j += 8;
                    }
                }
            }
            copy.cast_const()
        };
        let mut bases = [std::ptr::null::<f32>(); super::DIRECT_MAX_TAPS as usize];
        for (t, base) in bases.iter_mut().enumerate().take(flat.taps) {
            *base = source
                .wrapping_add(flat.sources[t] as usize * flat.phase)
                .wrapping_offset(flat.offsets[t]);
        }
        let epilogue = PlaneEpilogue::<Ymm>::of(conv, ops);
        // Whether a store reads the values it overwrites (then the overlapping last vector
        // stores only its own lanes).
        let rereads = epilogue.rereads();
        let group = FlatGroup {
            bases: &bases,
            taps: flat.taps,
            a: ops.a_packed,
            table: table.cast(),
            n: flat.n,
            vectors: flat.vectors,
            out: ops.c.ptr,
            rereads,
        };
        let mut v = 0;
        while v < flat.vectors {
            let count = (flat.vectors - v).min(8);
            match count {
                8 => group.run::<8>(v, &epilogue),
                7 => group.run::<7>(v, &epilogue),
                6 => group.run::<6>(v, &epilogue),
                5 => group.run::<5>(v, &epilogue),
                4 => group.run::<4>(v, &epilogue),
                3 => group.run::<3>(v, &epilogue),
                2 => group.run::<2>(v, &epilogue),
                _ => group.run::<1>(v, &epilogue),
            }
            v += count;
        }
    }

    /// The vectors of a [`plane_flat`] plane: each tap's input at `bases` (for output value
    /// 0), `A` at `a`, the mask table, the output at `out`.
    struct FlatGroup<'a> {
        bases: &'a [*const f32; super::DIRECT_MAX_TAPS as usize],
        taps: usize,
        a: *const f32,
        table: *const __m256i,
        n: usize,
        vectors: usize,
        out: *mut f32,
        rereads: bool,
    }

    impl FlatGroup<'_> {
        /// Vectors `v..v + G`: their accumulators over every tap, finished and stored.
        #[inline(always)]
        unsafe fn run<const G: usize>(&self, v: usize, epilogue: &PlaneEpilogue<Ymm>) {
            let first = |g: usize| (8 * (v + g)).min(self.n - 8);
            let mut acc = [_mm256_setzero_ps(); G];
            for t in 0..self.taps {
                // `A` packed whole: tap `t` of the one row at `t * MR` (`K` <= `KC`).
                let w = _mm256_set1_ps(*self.a.add(t * MR));
                let base = self.bases[t];
                for (g, acc) in acc.iter_mut().enumerate() {
                    let mask = _mm256_loadu_si256(self.table.add((v + g) * self.taps + t));
                    let x = _mm256_maskload_ps(base.wrapping_add(first(g)), mask);
                    *acc = _mm256_fmadd_ps(w, x, *acc);
                }
            }
            if !self.rereads {
                // Neither `accumulate` nor a residual: every vector stored whole.
                for (g, acc) in acc.iter().enumerate() {
                    epilogue.store_whole(*acc, self.out.add(first(g)));
                }
                return;
            }
            for (g, acc) in acc.iter().enumerate() {
                // The last vector's lanes that the one before did not store.
                let lanes = if v + g + 1 == self.vectors {
                    0xffu64 << (8 * (v + g) - first(g))
                } else {
                    0xff
                };
                epilogue.store(Ymm(*acc), self.out.add(first(g)), lanes & 0xff);
            }
        }
    }

    /// The planes `batches` of a [`PlaneSquare`] convolution, the ring in `buffer`
    /// ([`PlaneSquare::values`]).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn planes_square_avx2(
        conv: &DirectConv,
        square: &PlaneSquare,
        buffer: *mut f32,
        batches: std::ops::Range<usize>,
        at: &(dyn Fn(usize) -> DirectOperands + Sync),
    ) {
        // Every slot's padding and the row of zeros, once: the copies write only `lo..hi`.
        zero_ring_padding(
            buffer,
            PLANE_SQUARE_ROWS,
            square.slot,
            square.half,
            [square.half, square.slot - square.half],
            square.data,
            square.step,
        );
        for batch in batches {
            let ops = at(batch);
            match (square.step, square.kernel) {
                (1, 3) => plane_square::<1, 3>(conv, square, buffer, &ops),
                (2, 3) => plane_square::<2, 3>(conv, square, buffer, &ops),
                (1, _) => plane_square::<1, 5>(conv, square, buffer, &ops),
                _ => plane_square::<2, 5>(conv, square, buffer, &ops),
            }
        }
    }

    /// One plane of a [`PlaneSquare`] convolution at step `S` with a `K x K` window: two
    /// output rows per step, in groups of up to three vectors ([`SquareStep::run`]).
    #[inline(always)]
    unsafe fn plane_square<const S: usize, const K: usize>(
        conv: &DirectConv,
        square: &PlaneSquare,
        buffer: *mut f32,
        ops: &DirectOperands,
    ) {
        let [outer, row] = conv.axes else {
            return;
        };
        let zeros = buffer.add(PLANE_SQUARE_ROWS * square.slot).cast_const();
        // The weights (tap `K dy + dx`), splat once; a 5x5 window's 25 do not all fit the
        // registers, and the rest are read back as a broadcast would be.
        let w: [[__m256; K]; K] = std::array::from_fn(|dy| {
            std::array::from_fn(|dx| _mm256_set1_ps(*ops.a_packed.add((K * dy + dx) * MR)))
        });
        let epilogue = PlaneEpilogue::<Ymm>::of(conv, ops);
        let taps: [usize; K] = std::array::from_fn(|dx| {
            if S == 1 {
                dx
            } else {
                (dx % 2) * square.half + dx / 2
            }
        });
        let width = row.out as usize;
        let vectors = width.div_ceil(8);
        let mut next = 0i64;
        let mut y = 0;
        while y < outer.out as usize {
            let rows = (outer.out as usize - y).min(2);
            let top = (S * y) as i64 - outer.pad;
            // Copy the input rows this step reads that are not in the ring yet.
            let bottom = (top + (S * (rows - 1) + K - 1) as i64).min(outer.size - 1);
            next = next.max(top);
            let slot_of = |iy: i64| buffer.add((iy as usize % PLANE_SQUARE_ROWS) * square.slot);
            copy_rows::<Ymm, S>(
                ops.x,
                conv,
                &mut next,
                bottom,
                square.data,
                square.half,
                slot_of,
            );
            // Input row `top + e`: the first output row's tap row `e`, the second's `e - S`.
            let lines: [*const f32; 7] = std::array::from_fn(|e| {
                let iy = top + e as i64;
                if (0..outer.size).contains(&iy) {
                    buffer
                        .add((iy as usize % PLANE_SQUARE_ROWS) * square.slot)
                        .cast_const()
                } else {
                    zeros
                }
            });
            let out = ops.c.ptr.add(y * width);
            let mut v = 0;
            while v < vectors {
                let count = (vectors - v).min(3);
                let step = SquareStep {
                    lines: &lines,
                    taps: &taps,
                    w: &w,
                    v,
                    vectors,
                    width,
                    out,
                };
                match (rows, count) {
                    (2, 3) => step.run::<S, 2, 3>(&epilogue),
                    (2, 2) => step.run::<S, 2, 2>(&epilogue),
                    (2, _) => step.run::<S, 2, 1>(&epilogue),
                    (_, 3) => step.run::<S, 1, 3>(&epilogue),
                    (_, 2) => step.run::<S, 1, 2>(&epilogue),
                    _ => step.run::<S, 1, 1>(&epilogue),
                }
                v += count;
            }
            y += rows;
        }
    }

    /// Vectors `v..` of one or two output rows of a [`PlaneSquare`] plane with a `K x K`
    /// window.
    struct SquareStep<'a, const K: usize> {
        lines: &'a [*const f32; 7],
        taps: &'a [usize; K],
        w: &'a [[__m256; K]; K],
        v: usize,
        vectors: usize,
        width: usize,
        /// The first row's first output.
        out: *mut f32,
    }

    impl<const K: usize> SquareStep<'_, K> {
        /// The `R` rows' `G` vectors (`G` at most 3): each input row's vectors loaded once
        /// per tap column and fed to both rows' sums (each sum over its taps in the order
        /// `dy`, `dx`, as the other plane kernels), then finished and stored.
        #[inline(always)]
        #[allow(clippy::needless_range_loop)]
        unsafe fn run<const S: usize, const R: usize, const G: usize>(
            &self,
            epilogue: &PlaneEpilogue<Ymm>,
        ) {
            // Vector `i`'s first column: the row's last vector ends at its end (rows are at
            // least 8 wide).
            let first = |i: usize| (8 * (self.v + i)).min(self.width - 8);
            let mut acc = [[_mm256_setzero_ps(); G]; R];
            for e in 0..if R == 2 { S + K } else { K } {
                let line = self.lines[e];
                for (dx, &tap) in self.taps.iter().enumerate() {
                    let p = line.add(tap);
                    for i in 0..G {
                        let x = _mm256_loadu_ps(p.add(first(i)));
                        if e < K {
                            acc[0][i] = _mm256_fmadd_ps(self.w[e][dx], x, acc[0][i]);
                        }
                        if R == 2 && e >= S && e - S < K {
                            acc[R - 1][i] = _mm256_fmadd_ps(self.w[e - S][dx], x, acc[R - 1][i]);
                        }
                    }
                }
            }
            let rereads = epilogue.rereads();
            for (r, acc) in acc.iter().enumerate() {
                let out = self.out.add(r * self.width);
                for (i, &acc) in acc.iter().enumerate() {
                    let last = self.v + i + 1 == self.vectors;
                    if !rereads {
                        // Every lane stored whole: the last vector's overlap with the one
                        // before takes the same values again.
                        epilogue.store_whole(acc, out.add(first(i)));
                    } else {
                        // The last vector's lanes that the one before did not store.
                        let lanes = if last {
                            (0xffu64 << (8 * (self.v + i) - first(i))) & 0xff
                        } else {
                            0xff
                        };
                        epilogue.store(Ymm(acc), out.add(first(i)), lanes);
                    }
                }
            }
        }
    }

    /// [`plane_ring`] on AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn plane_ring_avx2(
        conv: &DirectConv,
        ring: &PlaneRing,
        buffer: *mut f32,
        ops: &DirectOperands,
    ) {
        plane_ring::<Ymm>(conv, ring, buffer, ops)
    }

    /// One batch index of a depthwise convolution ([`super::planes`]) from a [`PlaneRing`]
    /// of its padded input rows in `buffer` (`slot x (rows + 1)` values): two output rows at
    /// a time, each in groups of up to four vectors whose accumulators take every tap, each
    /// tap a whole-vector load from the copy of its input row (zeros above and below the
    /// input), then finished and stored from the registers. Each input row is copied once,
    /// just before the first step that reads it; the slots' padding is zeroed once per plane.
    #[inline(always)]
    unsafe fn plane_ring<X: Vector>(
        conv: &DirectConv,
        ring: &PlaneRing,
        buffer: *mut f32,
        ops: &DirectOperands,
    ) {
        let [outer, row] = conv.axes else {
            return;
        };
        let (kh, kw) = (outer.kernel as usize, row.kernel as usize);
        let width = row.out as usize;
        let vectors = width.div_ceil(X::LANES);
        let step = row.step as usize;
        // Every slot's padding, and the row of zeros.
        let zeros = buffer.add(ring.rows * ring.slot);
        zero_ring_padding(
            buffer,
            ring.rows,
            ring.slot,
            ring.phase,
            [ring.phase; 2],
            ring.data,
            step,
        );
        let epilogue = PlaneEpilogue::<X>::of(conv, ops);
        // Input rows below `next` are copied (those still read are in their slots).
        let mut next = 0i64;
        let mut lines = [[zeros.cast_const(); PLANE_RING_MAX_ROWS]; 2];
        let mut y = 0;
        while y < outer.out as usize {
            let rows = (outer.out as usize - y).min(2);
            let top = y as i64 * outer.step - outer.pad;
            let bottom = ((y + rows - 1) as i64 * outer.step - outer.pad
                + (kh as i64 - 1) * outer.dilation)
                .min(outer.size - 1);
            next = next.max(top);
            // `rows` is a power of two.
            let slot_of = |iy: i64| buffer.add((iy as usize & (ring.rows - 1)) * ring.slot);
            if step == 1 {
                copy_rows::<X, 1>(
                    ops.x, conv, &mut next, bottom, ring.data, ring.phase, slot_of,
                );
            } else {
                copy_rows::<X, 2>(
                    ops.x, conv, &mut next, bottom, ring.data, ring.phase, slot_of,
                );
            }
            for (r, lines) in lines.iter_mut().enumerate().take(rows) {
                for (dy, line) in lines.iter_mut().enumerate().take(kh) {
                    let iy = top + r as i64 * outer.step + dy as i64 * outer.dilation;
                    *line = if (0..outer.size).contains(&iy) {
                        // `rows` is a power of two.
                        buffer.add((iy as usize & (ring.rows - 1)) * ring.slot)
                    } else {
                        zeros
                    };
                }
            }
            let mut v = 0;
            while v < vectors {
                let count = (vectors - v).min(4);
                let x0 = X::LANES * v;
                let group = RingGroup {
                    lines: &lines,
                    taps: &ring.taps,
                    a: ops.a_packed,
                    kh,
                    kw,
                    first: x0,
                    out: ops.c.ptr.add(y * width + x0),
                    width,
                    // Lanes of the group's last vector.
                    last: (1u64 << (width - x0 - X::LANES * (count - 1)).min(X::LANES)) - 1,
                };
                if kw == 3 {
                    group.dispatch::<X, 3>(rows, count, &epilogue);
                } else {
                    group.dispatch::<X, 0>(rows, count, &epilogue);
                }
                v += count;
            }
            y += rows;
        }
    }

    /// Zeros what the copies of a ring of input rows ([`PlaneRing`], [`PlaneSquare`]) never
    /// write: in each of its `rows` slots of `slot` values, each phase's elements outside
    /// `data` (phase `q` at `q * phase`, `lens[q]` elements), and the row of zeros after the
    /// slots.
    #[inline(always)]
    unsafe fn zero_ring_padding(
        buffer: *mut f32,
        rows: usize,
        slot: usize,
        phase: usize,
        lens: [usize; 2],
        data: [(usize, usize); 2],
        step: usize,
    ) {
        for s in 0..rows {
            for (q, &(lo, hi)) in data.iter().enumerate().take(step) {
                let at = buffer.add(s * slot + q * phase);
                for j in (0..lo).chain(hi..lens[q]) {
                    *at.add(j) = 0.0;
                }
            }
        }
        for u in 0..slot {
            *buffer.add(rows * slot + u) = 0.0;
        }
    }

    /// Copies input rows `*next..=bottom` of the plane at `x` into their slots of a ring
    /// (`slot_of`; [`PlaneRing`], [`PlaneSquare`]) at step `STEP`, the phases `phase` apart with
    /// their elements `data`, and moves `*next` past them.
    #[inline(always)]
    unsafe fn copy_rows<X: Vector, const STEP: usize>(
        x: *const f32,
        conv: &DirectConv,
        next: &mut i64,
        bottom: i64,
        data: [(usize, usize); 2],
        phase: usize,
        slot_of: impl Fn(i64) -> *mut f32,
    ) {
        let [outer, row] = conv.axes else {
            return;
        };
        while *next <= bottom {
            let slot = slot_of(*next);
            let src = x.wrapping_offset((*next * outer.stride) as isize);
            copy_phase::<X, STEP>(slot, src, row, data[0], 0);
            if STEP == 2 {
                copy_phase::<X, 2>(slot.add(phase), src, row, data[1], 1);
            }
            *next += 1;
        }
    }

    /// Phase `q` of a [`PlaneRing`] slot's copy of the input row at `src` along `row` (the
    /// phase's values at `dst`, `STEP` the row's step): its elements `lo..hi` (`data`), element
    /// `j` the input at column `STEP * j + q - pad`.
    #[inline(always)]
    unsafe fn copy_phase<X: Vector, const STEP: usize>(
        dst: *mut f32,
        src: *const f32,
        row: &super::DirectAxis,
        (lo, hi): (usize, usize),
        q: usize,
    ) {
        let n = hi - lo;
        if n == 0 {
            return;
        }
        // Column of element `lo` (at least 0 when `lo < hi`).
        let from = src.add(STEP * lo + q - row.pad as usize);
        let dst = dst.add(lo);
        let load = |j: usize| {
            if STEP == 1 {
                X::loadu(from.add(j))
            } else {
                X::load_even(from.add(2 * j))
            }
        };
        if n < X::LANES {
            for j in 0..n {
                *dst.add(j) = *from.add(STEP * j);
            }
            return;
        }
        let mut j = 0;
        while j + X::LANES <= n {
            load(j).storeu(dst.add(j));
            j += X::LANES;
        }
        // The ragged end as one vector ending at `n` (overlapping the last).
        if j < n {
            load(n - X::LANES).storeu(dst.add(n - X::LANES));
        }
    }

    /// How a depthwise plane's results are finished as they are stored ([`plane`],
    /// [`plane_ring`], [`plane_flat`]): one output channel, so one bias.
    struct PlaneEpilogue<X> {
        finish: Finish<X>,
        alpha: X,
        bias: Option<X>,
        accumulate: bool,
    }

    impl<X: Vector> PlaneEpilogue<X> {
        #[inline(always)]
        unsafe fn of(conv: &DirectConv, ops: &DirectOperands) -> PlaneEpilogue<X> {
            let finish = Finish::<X>::of(conv);
            let bias = finish
                .bias
                .map(|(ptr, _)| X::splat(*ptr.offset(ops.bias_shift)));
            PlaneEpilogue {
                finish,
                alpha: X::splat(conv.alpha),
                bias,
                accumulate: conv.accumulate,
            }
        }

        /// Whether a store reads the values it overwrites (`accumulate`, or a residual).
        #[inline(always)]
        fn rereads(&self) -> bool {
            self.accumulate || self.finish.add.is_some()
        }

        /// Finishes `acc` into the lanes of `p` that `lanes` (low bits) allows.
        #[inline(always)]
        unsafe fn store(&self, acc: X, p: *mut f32, lanes: u64) {
            acc.store(
                self.alpha,
                self.bias,
                &self.finish,
                p,
                lanes,
                self.accumulate,
            );
        }
    }

    impl PlaneEpilogue<Ymm> {
        /// Finishes `acc` into all 8 values at `p` where no store rereads ([`Self::rereads`]),
        /// without branches: the multiply by alpha and a clamp to infinities where there is
        /// none change nothing, and `max` and `min` return `r` when it is NaN. Through
        /// `Ymm::store` the 384-channel 14x14 plane took 0.090 ms, with its operations behind
        /// branches 0.075, so 0.072.
        #[inline(always)]
        unsafe fn store_whole(&self, acc: __m256, p: *mut f32) {
            let infinite = || (Ymm::splat(f32::NEG_INFINITY), Ymm::splat(f32::INFINITY));
            let (lo, hi) = self.finish.clamp.unwrap_or_else(infinite);
            let mut r = _mm256_mul_ps(self.alpha.0, acc);
            if let Some(bias) = self.bias {
                r = _mm256_add_ps(r, bias.0);
            }
            r = _mm256_min_ps(hi.0, _mm256_max_ps(lo.0, r));
            _mm256_storeu_ps(p, r);
        }
    }

    /// Up to four output vectors of one or two rows of a [`plane_ring`], from output position
    /// `first`, reading each kernel row's copy in `lines`, stored at `out` (the first row's
    /// first vector; rows `width` apart).
    struct RingGroup<'a> {
        lines: &'a [[*const f32; PLANE_RING_MAX_ROWS]; 2],
        taps: &'a [usize; super::PLANE_MAX_ROW_TAPS],
        a: *const f32,
        kh: usize,
        kw: usize,
        first: usize,
        out: *mut f32,
        width: usize,
        /// The lanes of the last vector of each row (low bits).
        last: u64,
    }

    impl RingGroup<'_> {
        /// [`RingGroup::run`] for `rows` rows of `count` vectors, with `KW` row taps (0:
        /// `kw`).
        #[inline(always)]
        unsafe fn dispatch<X: Vector, const KW: usize>(
            &self,
            rows: usize,
            count: usize,
            epilogue: &PlaneEpilogue<X>,
        ) {
            match (rows, count) {
                (2, 4) => self.run::<X, 2, 4, KW>(epilogue),
                (2, 3) => self.run::<X, 2, 3, KW>(epilogue),
                (2, 2) => self.run::<X, 2, 2, KW>(epilogue),
                (2, _) => self.run::<X, 2, 1, KW>(epilogue),
                (_, 4) => self.run::<X, 1, 4, KW>(epilogue),
                (_, 3) => self.run::<X, 1, 3, KW>(epilogue),
                (_, 2) => self.run::<X, 1, 2, KW>(epilogue),
                _ => self.run::<X, 1, 1, KW>(epilogue),
            }
        }

        /// The `R` rows' `G` accumulators over every tap, finished and stored.
        #[inline(always)]
        unsafe fn run<X: Vector, const R: usize, const G: usize, const KW: usize>(
            &self,
            epilogue: &PlaneEpilogue<X>,
        ) {
            let kw = if KW == 0 { self.kw } else { KW };
            let mut acc = [[X::zero(); G]; R];
            for dy in 0..self.kh {
                for dx in 0..kw {
                    // `A` packed whole: tap `t` of the one row at `t * MR` (`K` <= `KC`).
                    let w = X::splat(*self.a.add((dy * kw + dx) * MR));
                    let at = self.taps[dx] + self.first;
                    for (lines, acc) in self.lines.iter().zip(acc.iter_mut()) {
                        let p = lines[dy].add(at);
                        for (i, acc) in acc.iter_mut().enumerate() {
                            *acc = w.fma(X::loadu(p.add(X::LANES * i)), *acc);
                        }
                    }
                }
            }
            let whole = (1u64 << X::LANES) - 1;
            for (r, acc) in acc.iter().enumerate() {
                let out = self.out.add(r * self.width);
                for (i, acc) in acc.iter().enumerate() {
                    let lanes = if i + 1 < G { whole } else { self.last };
                    epilogue.store(*acc, out.add(X::LANES * i), lanes);
                }
            }
        }
    }

    /// One batch index of a depthwise convolution ([`super::planes`]): its plane of output
    /// rows, two at a time, each in groups of up to four vectors whose accumulators take
    /// every tap (lanes masked by `masks`, the taps' weights broadcast from `A`), then
    /// stored once with the epilogue.
    #[inline(always)]
    unsafe fn plane<X: Vector>(
        conv: &DirectConv,
        read: Read,
        masks: &PlaneMasks,
        ops: &DirectOperands,
    ) {
        let [outer, row] = conv.axes else {
            return;
        };
        let (kh, kw) = (outer.kernel as usize, row.kernel as usize);
        let width = row.out as usize;
        let vectors = width.div_ceil(X::LANES);
        let conv_row = |v: usize| (X::LANES * v) as i64 * row.step - row.pad;
        let epilogue = PlaneEpilogue::<X>::of(conv, ops);
        // Two output rows at a time: twice the independent sums per tap (each vector's sum is
        // a chain of dependent multiply-adds, as long as the window).
        let mut y = 0;
        while y < outer.out as usize {
            let rows = (outer.out as usize - y).min(2);
            let mut v = 0;
            while v < vectors {
                let count = (vectors - v).min(4);
                let group = Group {
                    conv,
                    ops,
                    masks: masks.0.as_ptr().add(v * kw),
                    kh,
                    kw,
                    y,
                    first: conv_row(v),
                };
                // A 3-wide window (most depthwise layers) with its row taps unrolled.
                let acc = if kw == 3 {
                    group.dispatch::<X, 3>(rows, count, read)
                } else {
                    group.dispatch::<X, 0>(rows, count, read)
                };
                for (r, acc) in acc.iter().enumerate().take(rows) {
                    let out = ops.c.ptr.add((y + r) * width);
                    for (i, acc) in acc.iter().enumerate().take(count) {
                        let x0 = X::LANES * (v + i);
                        let lanes = (1u64 << (width - x0).min(X::LANES)) - 1;
                        epilogue.store(*acc, out.add(x0), lanes);
                    }
                }
                v += count;
            }
            y += rows;
        }
    }

    /// Up to four output vectors of one or two rows of a [`plane`]: from output position
    /// `lanes * v` of rows `y..`, whose lane 0 reads input position `first + dx * dilation`
    /// along the row.
    struct Group<'a> {
        conv: &'a DirectConv<'a>,
        ops: &'a DirectOperands,
        /// The first vector's masks (`kw` per vector).
        masks: *const u32,
        kh: usize,
        kw: usize,
        y: usize,
        first: i64,
    }

    impl Group<'_> {
        /// [`Group::run`] for `rows` rows of `count` vectors read as `read`, with `KW` row
        /// taps (0: `kw`).
        #[inline(always)]
        unsafe fn dispatch<X: Vector, const KW: usize>(
            &self,
            rows: usize,
            count: usize,
            read: Read,
        ) -> [[X; 4]; 2] {
            match (rows, count, read) {
                (2, 4, Read::EveryOther) => self.run::<X, 2, 4, 2, KW>(),
                (2, 3, Read::EveryOther) => self.run::<X, 2, 3, 2, KW>(),
                (2, 2, Read::EveryOther) => self.run::<X, 2, 2, 2, KW>(),
                (2, _, Read::EveryOther) => self.run::<X, 2, 1, 2, KW>(),
                (2, 4, _) => self.run::<X, 2, 4, 1, KW>(),
                (2, 3, _) => self.run::<X, 2, 3, 1, KW>(),
                (2, 2, _) => self.run::<X, 2, 2, 1, KW>(),
                (2, _, _) => self.run::<X, 2, 1, 1, KW>(),
                (_, 4, Read::EveryOther) => self.run::<X, 1, 4, 2, KW>(),
                (_, 3, Read::EveryOther) => self.run::<X, 1, 3, 2, KW>(),
                (_, 2, Read::EveryOther) => self.run::<X, 1, 2, 2, KW>(),
                (_, _, Read::EveryOther) => self.run::<X, 1, 1, 2, KW>(),
                (_, 4, _) => self.run::<X, 1, 4, 1, KW>(),
                (_, 3, _) => self.run::<X, 1, 3, 1, KW>(),
                (_, 2, _) => self.run::<X, 1, 2, 1, KW>(),
                _ => self.run::<X, 1, 1, 1, KW>(),
            }
        }

        /// The `R` rows' `G` accumulators over every tap (`S`: 1 a row read whole, 2 every
        /// other element).
        #[inline(always)]
        unsafe fn run<
            X: Vector,
            const R: usize,
            const G: usize,
            const S: usize,
            const KW: usize,
        >(
            &self,
        ) -> [[X; 4]; 2] {
            let kw = if KW == 0 { self.kw } else { KW };
            let mut acc = [[X::zero(); 4]; 2];
            let [outer, row] = self.conv.axes else {
                return acc;
            };
            for dy in 0..self.kh {
                // Each row's input line at this tap, unless it reads padding.
                let mut lines = [std::ptr::null::<f32>(); 2];
                let mut any = false;
                for (r, line) in lines.iter_mut().enumerate().take(R) {
                    let iy =
                        (self.y + r) as i64 * outer.step - outer.pad + dy as i64 * outer.dilation;
                    if (0..outer.size).contains(&iy) {
                        *line = self.ops.x.wrapping_offset((iy * outer.stride) as isize);
                        any = true;
                    }
                }
                if !any {
                    continue;
                }
                for dx in 0..kw {
                    // `A` packed whole: tap `t` of the one row at `t * MR` (`K` <= `KC`).
                    let w = X::splat(*self.ops.a_packed.add((dy * kw + dx) * MR));
                    let shift = (self.first + dx as i64 * row.dilation) as isize;
                    for (line, acc) in lines.iter().zip(acc.iter_mut()).take(R) {
                        if line.is_null() {
                            continue;
                        }
                        let at = line.wrapping_offset(shift);
                        for (i, acc) in acc.iter_mut().enumerate().take(G) {
                            // Vector `i` of the row from `at`: `load_row`'s forms with the
                            // vector's own mask (no lane table: never gathered); a whole
                            // 8-lane row vector unmasked (AVX2 builds a vector mask per load).
                            let mask = u64::from(*self.masks.add(i * kw + dx));
                            let b = at.wrapping_add(X::LANES * S * i);
                            let x = if X::LANES == 8 && S == 1 && mask & 0xff == 0xff {
                                X::loadu(b)
                            } else if X::LANES == 8 && S == 2 && mask & 0xffff == 0x5555 {
                                X::load_even(b)
                            } else {
                                X::load_row::<S>(b, mask, 0, std::ptr::null())
                            };
                            *acc = w.fma(x, *acc);
                        }
                    }
                }
            }
            acc
        }
    }

    /// Row `i` (below `2 * MR`) of the call's `A` values at `a`.
    #[inline(always)]
    unsafe fn a_row(a: *const f32, a_next: usize, i: usize) -> *const f32 {
        if i < MR {
            a.add(i)
        } else {
            a.add(a_next + i - MR)
        }
    }

    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn avx512(call: &Call) {
        macro_rules! rows {
            ($v:literal, $s:literal) => {
                match call.rows {
                    1 => avx512_tile::<1, $v, $s>(call),
                    2 => avx512_tile::<2, $v, $s>(call),
                    3 => avx512_tile::<3, $v, $s>(call),
                    4 => avx512_tile::<4, $v, $s>(call),
                    5 => avx512_tile::<5, $v, $s>(call),
                    6 => avx512_tile::<6, $v, $s>(call),
                    7 => avx512_tile::<7, $v, $s>(call),
                    8 => avx512_tile::<8, $v, $s>(call),
                    9 => avx512_tile::<9, $v, $s>(call),
                    10 => avx512_tile::<10, $v, $s>(call),
                    11 => avx512_tile::<11, $v, $s>(call),
                    _ => avx512_tile::<12, $v, $s>(call),
                }
            };
        }
        match (call.tile.len > 16, call.read) {
            (true, Read::Row) => rows!(2, 1),
            (false, Read::Row) => rows!(1, 1),
            (true, Read::Whole) => rows!(2, 3),
            (false, Read::Whole) => rows!(1, 3),
            (true, Read::EveryOther) => rows!(2, 2),
            (false, Read::EveryOther) => rows!(1, 2),
            (true, Read::Gathered) => rows!(2, 0),
            (false, Read::Gathered) => rows!(1, 0),
        }
    }

    /// Vector `v` (16 lanes) of a tap's row from `b`: the elements `b + 16 v + j` at stride 1
    /// (`S`), `b + 2 (16 v + j)` at stride 2 (two loads, their even elements gathered),
    /// `b + lanes[16 v + j]` when gathered (`S` 0), where `mask` allows.
    #[inline(always)]
    unsafe fn load16<const S: usize>(
        b: *const f32,
        mask: u64,
        v: usize,
        lanes: *const i32,
    ) -> __m512 {
        if S == 0 {
            let index = _mm512_loadu_si512(lanes.add(16 * v).cast());
            _mm512_mask_i32gather_ps::<4>(
                _mm512_setzero_ps(),
                (mask >> (16 * v)) as __mmask16,
                index,
                b,
            )
        } else if S == 1 {
            _mm512_maskz_loadu_ps((mask >> (16 * v)) as __mmask16, b.wrapping_add(16 * v))
        } else if S == 3 {
            _mm512_loadu_ps(b.wrapping_add(16 * v))
        } else {
            let at = b.wrapping_add(32 * v);
            let lo = _mm512_maskz_loadu_ps((mask >> (32 * v)) as __mmask16, at);
            let hi =
                _mm512_maskz_loadu_ps((mask >> (32 * v + 16)) as __mmask16, at.wrapping_add(16));
            let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            _mm512_permutex2var_ps(lo, even, hi)
        }
    }

    /// `R` rows (at most `2 * MR`) by `V` vectors of 16 lanes, at stride `S` along the row
    /// (gathered when `S` is 0, unmasked at stride 1 when 3: [`Read::Whole`]).
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn avx512_tile<const R: usize, const V: usize, const S: usize>(call: &Call) {
        tile::<Zmm, R, V, S>(call)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2(call: &Call) {
        // Up to 6 rows of `$v` vectors.
        macro_rules! strip {
            ($v:literal, $s:literal, $call:expr) => {
                match $call.rows {
                    1 => avx2_tile::<1, $v, $s>($call),
                    2 => avx2_tile::<2, $v, $s>($call),
                    3 => avx2_tile::<3, $v, $s>($call),
                    4 => avx2_tile::<4, $v, $s>($call),
                    5 => avx2_tile::<5, $v, $s>($call),
                    _ => avx2_tile::<6, $v, $s>($call),
                }
            };
        }
        // Two vectors by up to 6 rows, or one by up to 12 (`block_rows`).
        macro_rules! rows {
            (2, $s:literal) => {
                strip!(2, $s, call)
            };
            (1, $s:literal) => {
                match call.rows {
                    1..=6 => strip!(1, $s, call),
                    // A remainder of 7-11 rows as a strip of 6 and the rest (a kernel for
                    // each count cost 226 KB of code, which a run's first pages touch).
                    7..=11 => {
                        strip!(1, $s, &Call { rows: MR, ..*call });
                        let rest = Call {
                            row: call.row + MR,
                            rows: call.rows - MR,
                            ..*call
                        };
                        strip!(1, $s, &rest)
                    }
                    _ => avx2_tile::<12, 1, $s>(call),
                }
            };
        }
        match (call.tile.len > 8, call.read) {
            (true, Read::Row) => rows!(2, 1),
            (false, Read::Row) => rows!(1, 1),
            (true, Read::Whole) => rows!(2, 3),
            (false, Read::Whole) => rows!(1, 3),
            (true, Read::EveryOther) => rows!(2, 2),
            (false, Read::EveryOther) => rows!(1, 2),
            (true, Read::Gathered) => rows!(2, 0),
            (false, Read::Gathered) => rows!(1, 0),
        }
    }

    /// The lanes of 8 whose bits are set in the low byte of `mask`, as a vector mask.
    #[inline(always)]
    unsafe fn lanes8(mask: u64) -> __m256i {
        let bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        let set = _mm256_and_si256(_mm256_set1_epi32(mask as i32), bits);
        _mm256_cmpeq_epi32(set, bits)
    }

    /// Vector `v` (8 lanes) of a tap's row from `b`, as [`load16`] does with 16.
    #[inline(always)]
    unsafe fn load8<const S: usize>(
        b: *const f32,
        mask: u64,
        v: usize,
        lanes: *const i32,
    ) -> __m256 {
        if S == 0 {
            let index = _mm256_loadu_si256(lanes.add(8 * v).cast());
            _mm256_mask_i32gather_ps::<4>(
                _mm256_setzero_ps(),
                b,
                index,
                _mm256_castsi256_ps(lanes8(mask >> (8 * v))),
            )
        } else if S == 1 {
            _mm256_maskload_ps(b.wrapping_add(8 * v), lanes8(mask >> (8 * v)))
        } else if S == 3 {
            _mm256_loadu_ps(b.wrapping_add(8 * v))
        } else {
            let at = b.wrapping_add(16 * v);
            let lo = _mm256_maskload_ps(at, lanes8(mask >> (16 * v)));
            let hi = _mm256_maskload_ps(at.wrapping_add(8), lanes8(mask >> (16 * v + 8)));
            even8(lo, hi)
        }
    }

    /// The even elements of the 16 in `lo` then `hi`.
    #[inline(always)]
    unsafe fn even8(lo: __m256, hi: __m256) -> __m256 {
        // [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6], then the middle 64-bit pairs swapped.
        let mixed = _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi);
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(
            mixed,
        )))
    }

    /// `R` rows (at most `MR`) by `V` vectors of 8 lanes, at stride `S` along the row
    /// (gathered when `S` is 0, unmasked at stride 1 when 3: [`Read::Whole`]).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_tile<const R: usize, const V: usize, const S: usize>(call: &Call) {
        tile::<Ymm, R, V, S>(call)
    }

    /// The vector operations a tile needs, on one instruction set's registers; every method
    /// is inlined into the caller, whose target features it must be compiled with.
    trait Vector: Copy {
        /// Lanes of one vector.
        const LANES: usize;
        unsafe fn zero() -> Self;
        unsafe fn splat(x: f32) -> Self;
        /// Vector `v` of a tap's row from `b` at stride `S`, or gathered at `lanes` (`S` 0)
        /// (`mask`: the tap's).
        unsafe fn load_row<const S: usize>(
            b: *const f32,
            mask: u64,
            v: usize,
            lanes: *const i32,
        ) -> Self;
        /// `self * x + acc`.
        unsafe fn fma(self, x: Self, acc: Self) -> Self;
        /// The lanes at `p`, and stored at `p` (unaligned).
        unsafe fn loadu(p: *const f32) -> Self;
        /// The even elements of the `2 * LANES` at `p`, every lane's inside (the last, odd,
        /// element is not read).
        unsafe fn load_even(p: *const f32) -> Self;
        unsafe fn storeu(self, p: *mut f32);
        /// Stores `alpha * self (+ p)`, plus the row's `bias`, plus the lanes `add` elements
        /// on when there is a residual, clamped to `[lo, hi]` (NaN stays NaN), into the lanes
        /// of `p` that `lanes` (low bits) allows.
        unsafe fn store(
            self,
            alpha: Self,
            bias: Option<Self>,
            epilogue: &Finish<Self>,
            p: *mut f32,
            lanes: u64,
            accumulate: bool,
        );
    }

    /// A tile's epilogue in vectors: the residual's distance in elements, whether `alpha`
    /// scales the products (not when it is 1), and the clamp. A depthwise plane's outputs
    /// each take 9 multiply-adds, so the epilogue's multiply by 1 and clamp to infinities
    /// were a tenth of its instructions.
    struct Finish<X> {
        bias: Option<(*const f32, isize)>,
        add: Option<isize>,
        scaled: bool,
        clamp: Option<(X, X)>,
    }

    impl<X: Vector> Finish<X> {
        #[inline(always)]
        unsafe fn of(conv: &DirectConv) -> Finish<X> {
            Finish {
                bias: conv.epilogue.bias,
                add: conv.epilogue.add,
                scaled: conv.alpha != 1.0,
                clamp: conv
                    .epilogue
                    .clamp
                    .map(|(lo, hi)| (X::splat(lo), X::splat(hi))),
            }
        }
    }

    #[derive(Copy, Clone)]
    struct Zmm(__m512);

    impl Vector for Zmm {
        const LANES: usize = 16;
        #[inline(always)]
        unsafe fn zero() -> Zmm {
            Zmm(_mm512_setzero_ps())
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> Zmm {
            Zmm(_mm512_set1_ps(x))
        }
        #[inline(always)]
        unsafe fn load_row<const S: usize>(
            b: *const f32,
            mask: u64,
            v: usize,
            lanes: *const i32,
        ) -> Zmm {
            Zmm(load16::<S>(b, mask, v, lanes))
        }
        #[inline(always)]
        unsafe fn fma(self, x: Zmm, acc: Zmm) -> Zmm {
            Zmm(_mm512_fmadd_ps(self.0, x.0, acc.0))
        }
        #[inline(always)]
        unsafe fn load_even(p: *const f32) -> Zmm {
            Zmm(load16::<2>(p, 0x5555_5555, 0, std::ptr::null()))
        }
        #[inline(always)]
        unsafe fn loadu(p: *const f32) -> Zmm {
            Zmm(_mm512_loadu_ps(p))
        }
        #[inline(always)]
        unsafe fn storeu(self, p: *mut f32) {
            _mm512_storeu_ps(p, self.0)
        }
        #[inline(always)]
        unsafe fn store(
            self,
            alpha: Zmm,
            bias: Option<Zmm>,
            epilogue: &Finish<Zmm>,
            p: *mut f32,
            lanes: u64,
            accumulate: bool,
        ) {
            let mask = lanes as __mmask16;
            let mut r = if epilogue.scaled {
                _mm512_mul_ps(alpha.0, self.0)
            } else {
                self.0
            };
            if accumulate {
                r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, p));
            }
            if let Some(bias) = bias {
                r = _mm512_add_ps(r, bias.0);
            }
            if let Some(add) = epilogue.add {
                r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, p.wrapping_offset(add)));
            }
            // `max`/`min` return their second operand when either is NaN: `r`.
            if let Some((lo, hi)) = epilogue.clamp {
                r = _mm512_min_ps(hi.0, _mm512_max_ps(lo.0, r));
            }
            _mm512_mask_storeu_ps(p, mask, r);
        }
    }

    #[derive(Copy, Clone)]
    struct Ymm(__m256);

    impl Vector for Ymm {
        const LANES: usize = 8;
        #[inline(always)]
        unsafe fn zero() -> Ymm {
            Ymm(_mm256_setzero_ps())
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> Ymm {
            Ymm(_mm256_set1_ps(x))
        }
        #[inline(always)]
        unsafe fn load_row<const S: usize>(
            b: *const f32,
            mask: u64,
            v: usize,
            lanes: *const i32,
        ) -> Ymm {
            Ymm(load8::<S>(b, mask, v, lanes))
        }
        #[inline(always)]
        unsafe fn fma(self, x: Ymm, acc: Ymm) -> Ymm {
            Ymm(_mm256_fmadd_ps(self.0, x.0, acc.0))
        }
        #[inline(always)]
        unsafe fn load_even(p: *const f32) -> Ymm {
            // A constant mask for the second half's 7 elements (no mask built per load).
            let lo = _mm256_loadu_ps(p);
            let hi = _mm256_maskload_ps(p.add(8), _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, -1, 0));
            Ymm(even8(lo, hi))
        }
        #[inline(always)]
        unsafe fn loadu(p: *const f32) -> Ymm {
            Ymm(_mm256_loadu_ps(p))
        }
        #[inline(always)]
        unsafe fn storeu(self, p: *mut f32) {
            _mm256_storeu_ps(p, self.0)
        }
        #[inline(always)]
        unsafe fn store(
            self,
            alpha: Ymm,
            bias: Option<Ymm>,
            epilogue: &Finish<Ymm>,
            p: *mut f32,
            lanes: u64,
            accumulate: bool,
        ) {
            // Whole vectors unmasked: a masked store is microcoded on some CPUs (AMD's), a
            // 12-row tile's 24 of them a tenth of a 32-channel 3x3 layer's time.
            let full = lanes & 0xff == 0xff;
            let mask = lanes8(lanes);
            let load = |q: *const f32| {
                if full {
                    _mm256_loadu_ps(q)
                } else {
                    _mm256_maskload_ps(q, mask)
                }
            };
            let mut r = if epilogue.scaled {
                _mm256_mul_ps(alpha.0, self.0)
            } else {
                self.0
            };
            if accumulate {
                r = _mm256_add_ps(r, load(p));
            }
            if let Some(bias) = bias {
                r = _mm256_add_ps(r, bias.0);
            }
            if let Some(add) = epilogue.add {
                r = _mm256_add_ps(r, load(p.wrapping_offset(add)));
            }
            // `max`/`min` return their second operand when either is NaN: `r`.
            if let Some((lo, hi)) = epilogue.clamp {
                r = _mm256_min_ps(hi.0, _mm256_max_ps(lo.0, r));
            }
            if full {
                _mm256_storeu_ps(p, r);
            } else {
                _mm256_maskstore_ps(p, mask, r);
            }
        }
    }

    /// `R` rows by `V` vectors of `X`'s lanes: the accumulators over all of `K`, then one
    /// store per row and vector.
    #[inline(always)]
    unsafe fn tile<X: Vector, const R: usize, const V: usize, const S: usize>(call: &Call) {
        let mut acc = [[X::zero(); V]; R];
        let lanes = call.taps.lanes;
        walk::<S>(
            call,
            X::LANES,
            #[inline(always)]
            |a, a_next, b, mask| {
                let mut bv = [X::zero(); V];
                for (v, bv) in bv.iter_mut().enumerate() {
                    *bv = X::load_row::<S>(b, mask, v, lanes);
                }
                for (i, acc) in acc.iter_mut().enumerate() {
                    let ai = X::splat(*a_row(a, a_next, i));
                    for (acc, &bv) in acc.iter_mut().zip(&bv) {
                        *acc = ai.fma(bv, *acc);
                    }
                }
            },
        );
        let conv = call.conv;
        let alpha = X::splat(conv.alpha);
        let finish = Finish::<X>::of(conv);
        // The accumulators leave their registers once, into a block on the stack, and the
        // epilogue reads them from there: a loop over them whose body (bias, residual, clamp)
        // the compiler would not unroll would otherwise index `acc` at run time and keep it in
        // memory inside the loop over `K` (twice as slow).
        // Uninitialized: each of the `R` rows' `V` vectors is written before it is read (a
        // zeroed block cost a 1.5 KiB memset per call, 3.6% of a 32-channel 3x3 at 16x16).
        let mut block = std::mem::MaybeUninit::<[[f32; 32]; 12]>::uninit();
        let out: *mut [f32; 32] = block.as_mut_ptr().cast();
        for (i, acc) in acc.iter().enumerate() {
            for (v, acc) in acc.iter().enumerate() {
                acc.storeu(out.add(i).cast::<f32>().add(X::LANES * v));
            }
        }
        let lanes = (1u64 << call.tile.len) - 1;
        let c = call.ops.c;
        for i in 0..R {
            let values = out.add(i).cast::<f32>().cast_const();
            let row = c
                .ptr
                .offset((call.row + i) as isize * c.rs)
                .add(call.tile.start);
            let bias = finish.bias.map(|(ptr, stride)| {
                X::splat(*ptr.offset(call.ops.bias_shift + (call.row + i) as isize * stride))
            });
            for v in 0..V {
                let p = row.wrapping_add(X::LANES * v);
                X::loadu(values.add(X::LANES * v)).store(
                    alpha,
                    bias,
                    &finish,
                    p,
                    lanes >> (X::LANES * v),
                    conv.accumulate,
                );
            }
        }
    }
}
