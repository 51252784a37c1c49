//! `memc.matmul_nbits` kernels ([`NBitsMatMul`]): products with a packed 4- or 8-bit weight.
//!
//! Every path computes each weight as DequantizeLinear does, `w = (q - zp) * scale` in f32, and
//! multiply-adds it into f32 accumulators; only the summation order differs between paths.
//!
//! - **Instruction sets.** [`run_nbits`] picks, once per process, the best of an AVX-512F
//!   path, an AVX2+FMA path and a plain-Rust ("scalar") path the CPU supports; the scalar path
//!   is also the one for every other architecture. The environment variable
//!   `MEMC_NBITS_ISA=scalar|avx2|avx512` (read once, a test hook) forces a path; the choice it
//!   makes is printed once to stderr, and a path the CPU lacks falls back to the detected one.
//! - **Few rows** (up to [`Isa::fused_rows`]: 7 on AVX2 and the portable path, 128 on
//!   AVX-512; up to [`FUSED_ROWS`] whenever the plan gave no scratch): blocks of 4 columns are
//!   decoded once per pass of up
//!   to 4 rows (AVX2: 2) and multiplied into those rows; the passes over a block follow each
//!   other, so only the first reads the block from memory. One row is a GEMV bound by reading
//!   the weight: each block's bytes are read in order and the next block's are prefetched
//!   (into L2) at the same pace. At 4 bits on AVX-512 a 32-value group is widened with one
//!   `vpmovzxbd` (the low nibbles index values `k0..k0+16`, bits 4..7 values `k0+16..k0+32`)
//!   and decoded by two `vpermps` from a 16-entry table `(v(i) - zp) * scale` built once per
//!   block, so the lookups give the dequantized values exactly. 8-bit values, and AVX2,
//!   convert and scale each value; AVX-512 subtracts the 8-bit zero point as an integer.
//!   Every path reads a zero point (one byte, i8 or u8 as the weight is signed or not) and
//!   converts it once per block, as it starts.
//! - **More rows**: memc's GEMM (`memc-gemm`'s blocking loop, `A` read where it is) with its
//!   `B` panels dequantized from the packed weight ([`Dequantizer`]: each strip of columns
//!   decoded column by column, then transposed 8 x 8 into the panel's rows) into the planned
//!   scratch, one panel per GEMM thread; each panel is decoded once and multiplied into every
//!   row. `C` starts as the bias.
//! - **Blocks.** A scale block that is a multiple of 16 values, or covers all of `K`, takes
//!   the fast decoders above; any other block size dequantizes runs of each column into a
//!   buffer value by value and multiplies from there.
//! - **Threads.** Columns are split over the pool in multiples of 4 for few rows; many rows
//!   split as the GEMM splits its blocks; tiny products run on the calling thread. Which code sums an
//!   output element depends only on the shape, never on the split.
//!
//! Guarantees: for a validated kernel every byte read or written lies inside the bounds
//! `NBitsMatMul::validate` checked (the packed bytes of a partial last group are the layout's
//! zero padding; loads past `K` in `A` are masked; prefetch hints may name addresses past the
//! weight, which never fault); each output element is summed in an order fixed by the shape
//! and the instruction set alone, so the result does not depend on the number of threads. No
//! heap memory is allocated.

use super::pool::WorkerPool;
use super::target::{FEW_ROWS_MAX, SMALL_ROWS, TILE_K};
use crate::kernel::{NBitsMatMul, Region};
use crate::nbits::{self, row_bytes, GROUP};
use memc_gemm::{Mat, PackB, Product, GEMM_NR_MAX};
use std::sync::OnceLock;

/// Products with fewer multiply-adds (`rows * n * k`) than this run on the calling thread.
const PARALLEL_MACS: u64 = 1 << 18;
/// Columns one call of the few-rows kernel handles at most; thread chunks are multiples of it.
const COLUMN_BLOCK: usize = 4;
/// Values of `K` the odd-block path dequantizes at a time.
const RUN: usize = 256;
/// Halves per block standing for "one block covers all of `K`": even, and more halves than
/// any `K` in memory has.
const WHOLE_K: usize = 1 << 60;
/// The most rows the few-rows kernels take.
const FUSED_ROWS: usize = FEW_ROWS_MAX as usize;

/// The instruction set the kernels use.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Isa {
    Scalar,
    Avx2,
    Avx512,
}

impl Isa {
    fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Rows up to which this path decodes each weight once per pass of a few rows, when the
    /// plan also gave the product scratch for the GEMM form. AVX-512 decodes 4-bit values by
    /// table lookups (the passes ran at ~87 GFLOP/s from 8 to 128 rows, before the GEMM form
    /// packed its panels itself); AVX2 converts each value, once per pass of 2 rows, and the
    /// GEMM form, which decodes each once, is faster from 8 rows (`nbits_bench`, 4-bit, `K = N
    /// = 4096`, one thread: 7 rows 9.7-10.6 ms against 11.3-12.6, 8 rows 11.7-12.1 against
    /// 9.7-12.2, 16 rows 26.7 against 11.5-14.0, 128 rows 60 ms, 71-74 GFLOP/s).
    fn fused_rows(self) -> usize {
        match self {
            Isa::Avx512 => FUSED_ROWS,
            Isa::Avx2 | Isa::Scalar => SMALL_ROWS as usize,
        }
    }

    /// Whether this CPU runs the path.
    fn available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// The path of this process: the best available, or the one `MEMC_NBITS_ISA` forces.
fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        let detected = [Isa::Avx512, Isa::Avx2]
            .into_iter()
            .find(|isa| isa.available())
            .unwrap_or(Isa::Scalar);
        let Ok(wanted) = std::env::var("MEMC_NBITS_ISA") else {
            return detected;
        };
        let forced = [Isa::Scalar, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .find(|isa| isa.name() == wanted && isa.available());
        let chosen = forced.unwrap_or(detected);
        eprintln!(
            "memc: MEMC_NBITS_ISA={wanted}: nbits kernels use the {} path{}",
            chosen.name(),
            if forced.is_some() {
                ""
            } else {
                " (the value is unknown or this CPU lacks it)"
            }
        );
        chosen
    })
}

/// Which decoder a kernel's weight takes (a const parameter of the vector kernels).
const U4: u8 = 0;
const S4: u8 = 1;
const U8: u8 = 2;
const S8: u8 = 3;

/// Whether a weight of `kind` has 4-bit values.
const fn four_bits(kind: u8) -> bool {
    kind == U4 || kind == S4
}

/// The zero point a weight of `kind` stores as `byte` (two's complement for the signed kinds),
/// as an f32, looked up: the vector kernels broadcast it straight from the table with a load,
/// where converting it in a register and broadcasting that would take the shuffle unit the
/// 4-bit decoder keeps busy (measured on AVX-512, Zen 4: the in-cache 4-bit GEMV a quarter
/// slower, a decode step of llm_qdq a fifth).
#[inline(always)]
fn zero_point_f32(kind: u8, byte: u8) -> f32 {
    ZERO_POINTS_F32[usize::from(kind == S4 || kind == S8)][usize::from(byte)]
}

/// Every byte's zero point as an f32: `[0]` unsigned, `[1]` two's complement.
static ZERO_POINTS_F32: [[f32; 256]; 2] = {
    let mut table = [[0f32; 256]; 2];
    let mut byte = 0;
    while byte < 256 {
        table[0][byte] = byte as f32;
        table[1][byte] = byte as u8 as i8 as f32;
        byte += 1;
    }
    table
};

/// The packed weight of one kernel, as raw pointers into the weights section.
#[derive(Copy, Clone)]
struct Packed {
    b: *const u8,
    row_bytes: usize,
    scales: *const f32,
    /// One byte per block ([`zero_point_f32`] decodes it); null when the weight has none.
    zero_points: *const u8,
    k_blocks: usize,
    block: usize,
    k: usize,
    kind: u8,
}

impl Packed {
    /// The packed bytes of column `n`.
    unsafe fn column(&self, n: usize) -> *const u8 {
        self.b.add(n * self.row_bytes)
    }

    /// `(zero point, scale)` of column `n`, block `blk`.
    unsafe fn params(&self, n: usize, blk: usize) -> (f32, f32) {
        let i = n * self.k_blocks + blk;
        let zp = if self.zero_points.is_null() {
            0.0
        } else {
            zero_point_f32(self.kind, *self.zero_points.add(i))
        };
        (zp, *self.scales.add(i))
    }

    /// Halves (16 values) per scale block when every half lies in one block ([`WHOLE_K`]
    /// when one block covers `K`), `None` otherwise.
    fn halves_per_block(&self) -> Option<usize> {
        if self.block >= self.k {
            Some(WHOLE_K)
        } else if self.block % 16 == 0 {
            Some(self.block / 16)
        } else {
            None
        }
    }

    /// The quantized value `(n, k)`.
    unsafe fn quantized(&self, column: *const u8, k: usize) -> i32 {
        match self.kind {
            U4 | S4 => {
                let byte = *column.add(k / 32 * 16 + k % 16);
                let nibble = (byte >> (4 * ((k / 16) & 1))) & 0xF;
                if self.kind == S4 {
                    ((nibble << 4) as i8 >> 4) as i32
                } else {
                    nibble as i32
                }
            }
            S8 => *column.add(k) as i8 as i32,
            _ => *column.add(k) as i32,
        }
    }

    /// Writes the dequantized values `k0..k1` of column `n` to `out[0..k1 - k0]`, value by
    /// value (any block size).
    #[inline(always)]
    unsafe fn dequantize_run(&self, n: usize, k0: usize, k1: usize, out: *mut f32) {
        let column = self.column(n);
        let mut k = k0;
        while k < k1 {
            let blk = k / self.block;
            let end = ((blk + 1) * self.block).min(k1);
            let (zp, scale) = self.params(n, blk);
            while k < end {
                *out.add(k - k0) = (self.quantized(column, k) as f32 - zp) * scale;
                k += 1;
            }
        }
    }
}

/// Walks the halves (16-value runs) of `K` two at a time, one 32-value group per step, and
/// tells which scale block each half of a group is in, as runs of groups with the same pair.
/// Needs every half inside one block (see [`Packed::halves_per_block`]).
struct GroupBlocks {
    /// The block of the next half, and how many halves (it included) are left in that block.
    blk: usize,
    left: usize,
    halves_per_block: usize,
}

impl GroupBlocks {
    /// Starts at group `g`.
    fn new(halves_per_block: usize, g: usize) -> GroupBlocks {
        let half = 2 * g;
        GroupBlocks {
            blk: half / halves_per_block,
            left: halves_per_block - half % halves_per_block,
            halves_per_block,
        }
    }

    /// The next run of at most `max_groups` (at least 1) groups: `(block of the low halves,
    /// block of the high halves, groups)`.
    #[inline(always)]
    fn next_run(&mut self, max_groups: usize) -> (usize, usize, usize) {
        let lo = self.blk;
        if self.left >= 2 {
            let groups = (self.left / 2).min(max_groups);
            self.left -= 2 * groups;
            if self.left == 0 {
                self.blk += 1;
                self.left = self.halves_per_block;
            }
            (lo, lo, groups)
        } else {
            // The group straddles two blocks (only when a block is an odd number of halves).
            self.blk += 1;
            self.left = self.halves_per_block - 1;
            if self.left == 0 {
                self.blk += 1;
                self.left = self.halves_per_block;
            }
            (lo, lo + 1, 1)
        }
    }
}

/// Everything a worker needs, shareable across threads.
#[derive(Copy, Clone)]
struct Job {
    w: Packed,
    /// Null when there is no bias.
    bias: *const f32,
    isa: Isa,
}

// SAFETY: the caller of `run_nbits` guarantees the regions outlive the call and that only this
// kernel accesses the arena meanwhile; workers write disjoint columns of `C` and their own
// scratch slot.
unsafe impl Send for Job {}
unsafe impl Sync for Job {}

/// The rows of a product with at most [`FUSED_ROWS`] rows.
#[derive(Copy, Clone)]
struct FusedRows {
    a: [*const f32; FUSED_ROWS],
    c: [*mut f32; FUSED_ROWS],
    count: usize,
}

// SAFETY: as for `Job`.
unsafe impl Send for FusedRows {}
unsafe impl Sync for FusedRows {}

impl FusedRows {
    /// Splits the rows into passes of at most `max` rows, as even as possible: `(first row,
    /// rows)`.
    fn passes(&self, max: usize) -> impl Iterator<Item = (usize, usize)> {
        let n_passes = self.count.div_ceil(max);
        let (base, extra) = (self.count / n_passes, self.count % n_passes);
        (0..n_passes).map(move |p| (p * base + p.min(extra), base + usize::from(p < extra)))
    }
}

/// How the rows of `A` and `C` lie in memory, for the many-rows path.
#[derive(Copy, Clone)]
enum RowLayout {
    /// Row `r` of `A` at `a + r * a_step` elements, of `C` at `c + r * c_step`.
    Uniform {
        a: *const f32,
        a_step: isize,
        c: *mut f32,
        c_step: isize,
    },
    /// Anything else: one product per batch index, its `m` rows at the views' row strides.
    PerBatch,
}

// SAFETY: as for `Job`.
unsafe impl Send for RowLayout {}
unsafe impl Sync for RowLayout {}

/// Runs `q` over all its rows.
///
/// # Safety
/// As [`super::CpuProgram::run_kernel`]: the regions are at least as large as the sizes the
/// kernel was validated against, and the arena is not accessed by anything else meanwhile.
pub(crate) unsafe fn run_nbits(
    q: &NBitsMatMul,
    regions: super::regions::RegionPtrs,
    pool: &WorkerPool,
) {
    let rows = q.rows();
    if rows == 0 || q.n == 0 {
        return;
    }
    let (arena, weights) = (regions.arena, regions.weights);
    let base = |region: Region| regions.base(region) as *const u8;
    let bias = q.bias.map_or(std::ptr::null(), |(region, o)| {
        base(region).add(o as usize).cast::<f32>()
    });
    let row_ptr = RowPtrs {
        q,
        a: base(q.a.region),
        c: arena,
    };
    let n = q.n as usize;
    if q.k == 0 {
        for r in 0..rows {
            let (_, c) = row_ptr.get(r);
            for col in 0..n {
                *c.add(col) = if bias.is_null() { 0.0 } else { *bias.add(col) };
            }
        }
        return;
    }
    let kind = match (q.bits, q.signed) {
        (4, false) => U4,
        (4, true) => S4,
        (_, false) => U8,
        (_, true) => S8,
    };
    let job = Job {
        w: Packed {
            b: weights.add(q.b as usize),
            row_bytes: row_bytes(q.k, q.bits) as usize,
            scales: weights.add(q.scales as usize).cast(),
            zero_points: q
                .zero_points
                .map_or(std::ptr::null(), |o| weights.add(o as usize)),
            k_blocks: q.k_blocks() as usize,
            block: q.block as usize,
            k: q.k as usize,
            kind,
        },
        bias,
        isa: isa(),
    };
    let threads = if rows.saturating_mul(q.n).saturating_mul(q.k) < PARALLEL_MACS {
        1
    } else {
        pool.current_num_threads().max(1)
    };
    // Without planned scratch (a product too small for threads, or a plan of format 8 or older,
    // which planned none up to 128 rows) a product of up to `FUSED_ROWS` rows takes the
    // few-rows form.
    if rows <= job.isa.fused_rows() as u64 || (q.scratch.is_none() && rows <= FUSED_ROWS as u64) {
        let mut fused = FusedRows {
            a: [std::ptr::null(); FUSED_ROWS],
            c: [std::ptr::null_mut(); FUSED_ROWS],
            count: rows as usize,
        };
        for r in 0..rows {
            (fused.a[r as usize], fused.c[r as usize]) = row_ptr.get(r);
        }
        let blocks = n.div_ceil(COLUMN_BLOCK);
        let workers = threads.min(blocks);
        let per = blocks.div_ceil(workers) * COLUMN_BLOCK;
        let chunk = |w: usize| {
            let (n0, n1) = (w * per, ((w + 1) * per).min(n));
            if n0 < n1 {
                // SAFETY: columns n0..n1 are inside the validated product; chunks are disjoint.
                unsafe { few_rows(&job, &fused, n0, n1) };
            }
        };
        if workers == 1 {
            chunk(0);
        } else {
            pool.broadcast(workers, &chunk);
        }
        return;
    }
    let scratch = q.scratch.map(|offset| arena.add(offset as usize));
    many_rows(q, &job, &row_ptr, scratch, threads, pool);
}

/// The addresses of the rows of `A` and `C`.
#[derive(Copy, Clone)]
struct RowPtrs<'a> {
    q: &'a NBitsMatMul,
    /// The bases of the regions of `A` and `C`.
    a: *const u8,
    c: *mut u8,
}

// SAFETY: as for `Job`.
unsafe impl Send for RowPtrs<'_> {}
unsafe impl Sync for RowPtrs<'_> {}

impl RowPtrs<'_> {
    /// Row `r` of `A` and of `C`.
    unsafe fn get(&self, r: u64) -> (*const f32, *mut f32) {
        let a = self.a.offset(self.q.row_offset(&self.q.a, r) as isize);
        let c = self.c.offset(self.q.row_offset(&self.q.c, r) as isize);
        (a.cast(), c.cast())
    }
}

/// Whether rows of `A` and of `C` are each evenly spaced (the common case: no batch, or
/// batches laid out like one taller matrix), so that one `gemm` covers them all.
unsafe fn row_layout(q: &NBitsMatMul, row_ptr: &RowPtrs) -> RowLayout {
    let rows = q.rows();
    let (a0, c0) = row_ptr.get(0);
    let (a1, c1) = row_ptr.get(1);
    let (a_step, c_step) = (a1.offset_from(a0), c1.offset_from(c0));
    let uniform = (2..rows).all(|r| {
        let (a, c) = row_ptr.get(r);
        a.offset_from(a0) == a_step * r as isize && c.offset_from(c0) == c_step * r as isize
    });
    if uniform {
        RowLayout::Uniform {
            a: a0,
            a_step,
            c: c0,
            c_step,
        }
    } else {
        RowLayout::PerBatch
    }
}

/// Columns `n0..n1` (`n0` a multiple of [`COLUMN_BLOCK`]) of a product with few rows.
unsafe fn few_rows(job: &Job, rows: &FusedRows, n0: usize, n1: usize) {
    match job.isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if job.w.halves_per_block().is_some() => match job.w.kind {
            U4 => avx512::few_rows::<U4>(job, rows, n0, n1),
            S4 => avx512::few_rows::<S4>(job, rows, n0, n1),
            U8 => avx512::few_rows::<U8>(job, rows, n0, n1),
            _ => avx512::few_rows::<S8>(job, rows, n0, n1),
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 if job.w.halves_per_block().is_some() => match job.w.kind {
            U4 => avx2::few_rows::<U4>(job, rows, n0, n1),
            S4 => avx2::few_rows::<S4>(job, rows, n0, n1),
            U8 => avx2::few_rows::<U8>(job, rows, n0, n1),
            _ => avx2::few_rows::<S8>(job, rows, n0, n1),
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => avx512::few_rows_any_block(job, rows, n0, n1),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::few_rows_any_block(job, rows, n0, n1),
        _ => few_rows_any_block::<false>(job, rows, n0, n1),
    }
}

/// Columns `n0..n1` of a product with few rows, for any block size: each column is
/// dequantized [`RUN`] values at a time into a buffer and multiplied from there, 16 partial
/// sums per row. `FUSED` uses `mul_add` (for callers compiled with FMA).
#[inline(always)]
unsafe fn few_rows_any_block<const FUSED: bool>(job: &Job, rows: &FusedRows, n0: usize, n1: usize) {
    let w = &job.w;
    let mut buf = [0f32; RUN];
    for n in n0..n1 {
        let mut acc = [[0f32; 16]; FUSED_ROWS];
        let mut k0 = 0;
        while k0 < w.k {
            let len = RUN.min(w.k - k0);
            w.dequantize_run(n, k0, k0 + len, buf.as_mut_ptr());
            for (r, acc) in acc.iter_mut().enumerate().take(rows.count) {
                let a = std::slice::from_raw_parts(rows.a[r].add(k0), len);
                for (a, w) in a.chunks(16).zip(buf[..len].chunks(16)) {
                    for ((acc, &a), &w) in acc.iter_mut().zip(a).zip(w) {
                        *acc = if FUSED {
                            a.mul_add(w, *acc)
                        } else {
                            a * w + *acc
                        };
                    }
                }
            }
            k0 += len;
        }
        for (r, acc) in acc.iter().enumerate().take(rows.count) {
            let mut sum = sum16(acc);
            if !job.bias.is_null() {
                sum += *job.bias.add(n);
            }
            *rows.c[r].add(n) = sum;
        }
    }
}

/// The sum of 16 partial sums, pairwise.
#[inline(always)]
fn sum16(v: &[f32; 16]) -> f32 {
    let mut s = *v;
    let mut width = 8;
    while width > 0 {
        for i in 0..width {
            s[i] += s[i + width];
        }
        width /= 2;
    }
    s[0]
}

/// Dequantizes the tile `k0..k1` x `n0..n1` into `tile` (column `n` at `(n - n0) * TILE_K`):
/// whole groups by the vector decoders, or (odd blocks, or `k0` inside a group) value by value.
unsafe fn dequantize_tile(job: &Job, tile: *mut f32, n0: usize, n1: usize, k0: usize, k1: usize) {
    let groups = k0 % GROUP as usize == 0;
    match job.isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if groups && job.w.halves_per_block().is_some() => match job.w.kind {
            U4 => avx512::dequantize_tile::<U4>(job, tile, n0, n1, k0, k1),
            S4 => avx512::dequantize_tile::<S4>(job, tile, n0, n1, k0, k1),
            U8 => avx512::dequantize_tile::<U8>(job, tile, n0, n1, k0, k1),
            _ => avx512::dequantize_tile::<S8>(job, tile, n0, n1, k0, k1),
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 if groups && job.w.halves_per_block().is_some() => match job.w.kind {
            U4 => avx2::dequantize_tile::<U4>(job, tile, n0, n1, k0, k1),
            S4 => avx2::dequantize_tile::<S4>(job, tile, n0, n1, k0, k1),
            U8 => avx2::dequantize_tile::<U8>(job, tile, n0, n1, k0, k1),
            _ => avx2::dequantize_tile::<S8>(job, tile, n0, n1, k0, k1),
        },
        _ => {
            for n in n0..n1 {
                job.w
                    .dequantize_run(n, k0, k1, tile.add((n - n0) * TILE_K as usize));
            }
        }
    }
}

/// A product with many rows: memc's GEMM (`memc-gemm`'s blocking loop), its `B` panels
/// dequantized from the packed weight ([`Dequantizer`]) into the planned scratch, one slot per
/// thread (or smaller panels on the threads' stacks, without it); `C` starts as the bias (or
/// zero) and the product accumulates onto it.
unsafe fn many_rows(
    q: &NBitsMatMul,
    job: &Job,
    row_ptr: &RowPtrs,
    scratch: Option<*mut u8>,
    threads: usize,
    pool: &WorkerPool,
) {
    let (n, k) = (q.n as usize, q.k as usize);
    let layout = row_layout(q, row_ptr);
    let (batches, m, threads) = match layout {
        RowLayout::Uniform { .. } => (1, q.rows() as usize, threads),
        // Batch indices whose rows of `C` may overlap run one after another.
        RowLayout::PerBatch => ((q.rows() / q.m) as usize, q.m as usize, 1),
    };
    if !job.bias.is_null() {
        for r in 0..q.rows() {
            let (_, c) = row_ptr.get(r);
            std::ptr::copy_nonoverlapping(job.bias, c, n);
        }
    }
    let blocking = nbits::gemm_blocking(batches as u64, m as u64, n as u64, k as u64);
    // The plan sized the slots for the rows as one product; the slots these threads use must
    // fit in them (one product per batch index runs on one thread).
    let planned = nbits::scratch_bytes(q.rows(), q.n, q.k);
    let used = blocking.slot_bytes() * blocking.slots.min(threads as u64);
    let slots = scratch.filter(|_| used <= planned);
    let at = |batch: usize| {
        let (a, a_step, c, c_step) = match layout {
            RowLayout::Uniform {
                a,
                a_step,
                c,
                c_step,
            } => (a, a_step, c, c_step),
            RowLayout::PerBatch => {
                // SAFETY: row `batch * m` is inside the validated product.
                let (a, c) = unsafe { row_ptr.get(batch as u64 * q.m) };
                (a, q.a.row_stride as isize, c, q.c.row_stride as isize)
            }
        };
        Product {
            m,
            n,
            k,
            a: Mat {
                ptr: a.cast_mut(),
                rs: a_step,
                cs: 1,
            },
            // Not read: the dequantizer packs every panel of `B`.
            b: Mat {
                ptr: std::ptr::null_mut(),
                rs: 0,
                cs: 0,
            },
            c: Mat {
                ptr: c,
                rs: c_step,
                cs: 1,
            },
            alpha: 1.0f32,
            accumulate: !job.bias.is_null(),
            a_packed: None,
            b_packed: None,
            epilogue: memc_gemm::Epilogue::NONE,
        }
    };
    let broadcast = |t: usize, f: &(dyn Fn(usize) + Sync)| pool.broadcast(t, f);
    memc_gemm::run_packing_b::<f32>(
        batches,
        &at,
        &Dequantizer { job },
        &blocking,
        slots,
        threads,
        &broadcast,
    );
}

/// Packs `B`'s panels for the GEMM by dequantizing the packed weight: each strip of columns
/// into a column-major tile on the stack (the decoders of the few-rows path, one column at a
/// time), then transposed into the strip's rows.
struct Dequantizer<'a> {
    job: &'a Job,
}

impl PackB<f32> for Dequantizer<'_> {
    unsafe fn pack(
        &self,
        _batch: usize,
        dst: *mut f32,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) {
        assert!(kc <= TILE_K as usize && nr <= GEMM_NR_MAX as usize);
        let mut tile = std::mem::MaybeUninit::<[f32; (TILE_K * GEMM_NR_MAX) as usize]>::uninit();
        let tile = tile.as_mut_ptr().cast::<f32>();
        for s in 0..cols.div_ceil(nr) {
            let (n0, live) = (j0 + s * nr, (cols - s * nr).min(nr));
            dequantize_tile(self.job, tile, n0, n0 + live, p0, p0 + kc);
            to_strip(self.job.isa, tile, dst.add(s * nr * kc), kc, live, nr);
        }
    }
}

/// Writes `live` columns of `kc` values (column `j` at `tile + j * TILE_K`) as a strip of
/// `nr` columns (value `(p, j)` at `strip + p * nr + j`), zero past `live`.
/// On the AVX-512 and AVX2 paths (CPUs with AVX-512 have AVX2), by 8 x 8 blocks in registers.
unsafe fn to_strip(isa: Isa, tile: *const f32, strip: *mut f32, kc: usize, live: usize, nr: usize) {
    #[cfg(target_arch = "x86_64")]
    if nr % 8 == 0 && matches!(isa, Isa::Avx2 | Isa::Avx512) {
        return avx2::to_strip(tile, strip, kc, live, nr);
    }
    to_strip_rows(tile, strip, 0, kc, live, nr);
}

/// Rows `p0..kc` of [`to_strip`], value by value.
#[inline(always)]
unsafe fn to_strip_rows(
    tile: *const f32,
    strip: *mut f32,
    p0: usize,
    kc: usize,
    live: usize,
    nr: usize,
) {
    for p in p0..kc {
        let row = strip.add(p * nr);
        for j in 0..live {
            *row.add(j) = *tile.add(j * TILE_K as usize + p);
        }
        for j in live..nr {
            *row.add(j) = 0.0;
        }
    }
}

/// The AVX-512F kernels.
#[cfg(target_arch = "x86_64")]
/// Runs `$group!(g, lo, hi)` for every whole 32-group `g < $full` of a column block, with `lo`
/// and `hi` the parameters (`$params(column, block)` for each of the `C` columns) of the
/// group's two halves, fetched once per block; `$on_block(block)` runs as each block starts
/// when blocks are whole groups (the common case). Shared by the vector paths, whose `group!`
/// differ.
macro_rules! for_each_group {
    ($full:expr, $halves_per_block:expr, $params:expr, $group:ident, $on_block:expr) => {{
        let (full, halves_per_block) = ($full, $halves_per_block);
        if halves_per_block % 2 == 0 {
            let groups_per_block = halves_per_block / 2;
            let (mut g, mut blk) = (0, 0);
            while g < full {
                $on_block(blk);
                let p: [Params; C] = std::array::from_fn(|j| $params(j, blk));
                let end = full.min(g + groups_per_block);
                loop {
                    $group!(g, p, p);
                    g += 1;
                    if g == end {
                        break;
                    }
                }
                blk += 1;
            }
        } else {
            let mut blocks = GroupBlocks::new(halves_per_block, 0);
            let mut g = 0;
            while g < full {
                let (blk_lo, blk_hi, groups) = blocks.next_run(full - g);
                let lo: [Params; C] = std::array::from_fn(|j| $params(j, blk_lo));
                let hi: [Params; C] = if blk_hi == blk_lo {
                    lo
                } else {
                    std::array::from_fn(|j| $params(j, blk_hi))
                };
                for g in g..g + groups {
                    $group!(g, lo, hi);
                }
                g += groups;
            }
        }
    }};
}
use for_each_group;

mod avx512 {
    use super::{four_bits, zero_point_f32, FusedRows, GroupBlocks, Job, S4, S8, TILE_K};
    use std::arch::x86_64::*;

    /// The per-half decoding state of one column: at 4 bits `t` is the table `(v(i) - zp) *
    /// scale`; at 8 bits `z` is the zero point (as an integer) and `s` the scale, broadcast.
    /// (`KIND` is the weight's real kind, so a zero point decodes with its signedness.)
    #[derive(Copy, Clone)]
    struct Params {
        t: __m512,
        z: __m512i,
        s: __m512,
    }

    /// `v(i)` for the 16 nibble patterns `i`: unsigned, or two's complement.
    const UNSIGNED_NIBBLES: [f32; 16] = [
        0., 1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12., 13., 14., 15.,
    ];
    const SIGNED_NIBBLES: [f32; 16] = [
        0., 1., 2., 3., 4., 5., 6., 7., -8., -7., -6., -5., -4., -3., -2., -1.,
    ];

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn nibble_values<const KIND: u8>() -> __m512 {
        _mm512_loadu_ps(if KIND == S4 {
            SIGNED_NIBBLES.as_ptr()
        } else {
            UNSIGNED_NIBBLES.as_ptr()
        })
    }

    /// The parameters of block `blk` of the column whose scales start at `scales` (and zero
    /// points at `zero_points`, when `ZP`).
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn params<const KIND: u8, const ZP: bool>(
        scales: *const f32,
        zero_points: *const u8,
        blk: usize,
        nibbles: __m512,
    ) -> Params {
        let s = _mm512_set1_ps(*scales.add(blk));
        let zp = if ZP {
            _mm512_set1_ps(zero_point_f32(KIND, *zero_points.add(blk)))
        } else {
            _mm512_setzero_ps()
        };
        if four_bits(KIND) {
            // v(i) and zp are small integers, so v(i) - zp is exact in f32; (v - 0) * s == v * s
            // exactly, so without zero points the subtraction goes.
            let v = if ZP {
                _mm512_sub_ps(nibbles, zp)
            } else {
                nibbles
            };
            Params {
                t: _mm512_mul_ps(v, s),
                z: _mm512_setzero_si512(),
                s,
            }
        } else {
            // zp is a small integer, so it converts back exactly and q - zp is exact in i32
            // (the integer subtraction runs on any vector pipe, the float one competes with
            // the conversion).
            Params {
                t: zp,
                z: _mm512_cvttps_epi32(zp),
                s,
            }
        }
    }

    /// The 32 dequantized values of group `g` of a column: values `k0..k0+16` and
    /// `k0+16..k0+32`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn decode<const KIND: u8, const ZP: bool>(
        column: *const u8,
        g: usize,
        lo: &Params,
        hi: &Params,
    ) -> (__m512, __m512) {
        if four_bits(KIND) {
            let d = _mm512_cvtepu8_epi32(_mm_loadu_si128(column.add(16 * g).cast()));
            (
                _mm512_permutexvar_ps(d, lo.t),
                _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(d), hi.t),
            )
        } else {
            let p = column.add(32 * g);
            let widen = |p: *const u8| {
                let v = _mm_loadu_si128(p.cast());
                if KIND == S8 {
                    _mm512_cvtepi8_epi32(v)
                } else {
                    _mm512_cvtepu8_epi32(v)
                }
            };
            let scale = |q: __m512i, p: &Params| {
                let q = if ZP { _mm512_sub_epi32(q, p.z) } else { q };
                _mm512_mul_ps(_mm512_cvtepi32_ps(q), p.s)
            };
            (scale(widen(p), lo), scale(widen(p.add(16)), hi))
        }
    }

    /// Columns `n0..n1` of a product with at most `FUSED_ROWS` rows, blocks of whole halves.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn few_rows<const KIND: u8>(
        job: &Job,
        rows: &FusedRows,
        n0: usize,
        n1: usize,
    ) {
        if job.w.zero_points.is_null() {
            few_rows_zp::<KIND, false>(job, rows, n0, n1)
        } else {
            few_rows_zp::<KIND, true>(job, rows, n0, n1)
        }
    }

    /// Blocks of 4 columns (then single columns), each in passes of up to 4 rows: one
    /// accumulator per row, column and half for up to 2 rows, per row and column for more
    /// (registers: rows x 4 accumulators + 8 decoded vectors + 4 tables).
    #[target_feature(enable = "avx512f")]
    unsafe fn few_rows_zp<const KIND: u8, const ZP: bool>(
        job: &Job,
        rows: &FusedRows,
        n0: usize,
        n1: usize,
    ) {
        let mut n = n0;
        while n < n1 {
            let block = if n + 4 <= n1 { 4 } else { 1 };
            for (first, count) in rows.passes(4) {
                let (a, c) = (&rows.a[first..], &rows.c[first..]);
                match (count, block) {
                    (1, 4) => columns::<KIND, ZP, 1, 4, 2>(job, a, c, n),
                    (2, 4) => columns::<KIND, ZP, 2, 4, 1>(job, a, c, n),
                    (3, 4) => columns::<KIND, ZP, 3, 4, 1>(job, a, c, n),
                    (_, 4) => columns::<KIND, ZP, 4, 4, 1>(job, a, c, n),
                    (1, _) => columns::<KIND, ZP, 1, 1, 2>(job, a, c, n),
                    (2, _) => columns::<KIND, ZP, 2, 1, 1>(job, a, c, n),
                    (3, _) => columns::<KIND, ZP, 3, 1, 1>(job, a, c, n),
                    _ => columns::<KIND, ZP, 4, 1, 1>(job, a, c, n),
                }
            }
            n += block;
        }
    }

    /// Columns `n..n + C` of the `R` rows `a` -> `c`, with `ACCS` (1 or 2) accumulators per
    /// row and column: with 2, values `k0..k0+16` and `k0+16..k0+32` of each group go to
    /// separate ones, summed at the end. `ZP`: the weight has zero points.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn columns<
        const KIND: u8,
        const ZP: bool,
        const R: usize,
        const C: usize,
        const ACCS: usize,
    >(
        job: &Job,
        a: &[*const f32],
        c: &[*mut f32],
        n: usize,
    ) {
        let w = &job.w;
        let nibbles = nibble_values::<KIND>();
        let halves_per_block = w.halves_per_block().expect("the caller checked the block");
        let cols: [*const u8; C] = std::array::from_fn(|j| w.column(n + j));
        let scales: [*const f32; C] = std::array::from_fn(|j| w.scales.add((n + j) * w.k_blocks));
        let zero_points: [*const u8; C] =
            std::array::from_fn(|j| w.zero_points.wrapping_add((n + j) * w.k_blocks));
        let params =
            |j: usize, blk: usize| params::<KIND, ZP>(scales[j], zero_points[j], blk, nibbles);
        let a: [*const f32; R] = std::array::from_fn(|r| a[r]);
        let mut acc = [[[_mm512_setzero_ps(); ACCS]; C]; R];
        // The next C columns' bytes are prefetched into L2 at the pace this block reads its
        // own: the hardware prefetchers ramp up too slowly on a column's few KiB.
        let next_b = w.column(n + C);
        let group_bytes = if four_bits(KIND) { 16 * C } else { 32 * C };
        macro_rules! group {
            ($g:expr, $lo:expr, $hi:expr) => {{
                let g = $g;
                let k0 = 32 * g;
                for line in 0..group_bytes.div_ceil(64) {
                    _mm_prefetch::<_MM_HINT_T1>(
                        next_b.wrapping_add(g * group_bytes + 64 * line).cast(),
                    );
                }
                let wv: [(__m512, __m512); C] =
                    std::array::from_fn(|j| decode::<KIND, ZP>(cols[j], g, &$lo[j], &$hi[j]));
                for r in 0..R {
                    let a_lo = _mm512_loadu_ps(a[r].add(k0));
                    let a_hi = _mm512_loadu_ps(a[r].add(k0 + 16));
                    for j in 0..C {
                        acc[r][j][0] = _mm512_fmadd_ps(a_lo, wv[j].0, acc[r][j][0]);
                        acc[r][j][ACCS - 1] = _mm512_fmadd_ps(a_hi, wv[j].1, acc[r][j][ACCS - 1]);
                    }
                }
            }};
        }
        let full = w.k / 32;
        // The next C columns' scales (4 bytes per block) and zero points (1 byte per block) are
        // C * k_blocks of each, contiguous: C of them per block keeps pace.
        let next_scales = scales[0].wrapping_add(C * w.k_blocks);
        let next_zero_points = zero_points[0].wrapping_add(C * w.k_blocks);
        super::for_each_group!(full, halves_per_block, params, group, |blk: usize| {
            _mm_prefetch::<_MM_HINT_T1>(next_scales.wrapping_add(C * blk).cast());
            if ZP {
                _mm_prefetch::<_MM_HINT_T1>(next_zero_points.wrapping_add(C * blk).cast());
            }
        });
        let tail = w.k % 32;
        if tail > 0 {
            // The last, partial group: its padding decodes to finite junk, masked out of the sums.
            let k0 = 32 * full;
            let mask_lo: __mmask16 = ((1u32 << tail.min(16)) - 1) as u16;
            let mask_hi: __mmask16 = ((1u32 << tail.saturating_sub(16)) - 1) as u16;
            let lo: [Params; C] = std::array::from_fn(|j| params(j, k0 / w.block));
            // A high half wholly past K may lie in a block past the last; it is not decoded.
            let hi: [Params; C] = if mask_hi == 0 {
                lo
            } else {
                std::array::from_fn(|j| params(j, (k0 + 16) / w.block))
            };
            let wv: [(__m512, __m512); C] =
                std::array::from_fn(|j| decode::<KIND, ZP>(cols[j], full, &lo[j], &hi[j]));
            for r in 0..R {
                let a_lo = _mm512_maskz_loadu_ps(mask_lo, a[r].add(k0));
                let a_hi = _mm512_maskz_loadu_ps(mask_hi, a[r].add(k0 + 16));
                for j in 0..C {
                    let (lo, hi) = (acc[r][j][0], acc[r][j][ACCS - 1]);
                    acc[r][j][0] = _mm512_mask3_fmadd_ps(a_lo, wv[j].0, lo, mask_lo);
                    let hi = if ACCS == 1 { acc[r][j][0] } else { hi };
                    acc[r][j][ACCS - 1] = _mm512_mask3_fmadd_ps(a_hi, wv[j].1, hi, mask_hi);
                }
            }
        }
        for (acc, c) in acc.iter().zip(c) {
            for (j, acc) in acc.iter().enumerate() {
                let v = if ACCS == 2 {
                    _mm512_add_ps(acc[0], acc[ACCS - 1])
                } else {
                    acc[0]
                };
                let mut sum = _mm512_reduce_add_ps(v);
                if !job.bias.is_null() {
                    sum += *job.bias.add(n + j);
                }
                *c.add(n + j) = sum;
            }
        }
    }

    /// Columns `n0..n1` of a product with few rows and a block that splits halves.
    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn few_rows_any_block(job: &Job, rows: &FusedRows, n0: usize, n1: usize) {
        super::few_rows_any_block::<true>(job, rows, n0, n1);
    }

    /// Dequantizes the tile `k0..k1` x `n0..n1` (`k0` a multiple of 32) into `tile`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn dequantize_tile<const KIND: u8>(
        job: &Job,
        tile: *mut f32,
        n0: usize,
        n1: usize,
        k0: usize,
        k1: usize,
    ) {
        let w = &job.w;
        let nibbles = nibble_values::<KIND>();
        let halves_per_block = w.halves_per_block().expect("the caller checked the block");
        let (g0, g1) = (k0 / 32, k1.div_ceil(32));
        for n in n0..n1 {
            let column = w.column(n);
            let scales = w.scales.add(n * w.k_blocks);
            let zero_points = w.zero_points.wrapping_add(n * w.k_blocks);
            let params = |blk: usize| {
                if w.zero_points.is_null() {
                    params::<KIND, false>(scales, zero_points, blk, nibbles)
                } else {
                    params::<KIND, true>(scales, zero_points, blk, nibbles)
                }
            };
            let out = tile.add((n - n0) * TILE_K as usize);
            let mut blocks = GroupBlocks::new(halves_per_block, g0);
            let mut g = g0;
            while g < g1 {
                let (blk_lo, blk_hi, groups) = blocks.next_run(g1 - g);
                let lo = params(blk_lo);
                // A high half wholly past K may lie in a block past the last: decode it with the
                // low half's parameters (the values are past K and never read).
                let hi = if blk_hi == blk_lo || 32 * (g + groups - 1) + 16 >= w.k {
                    lo
                } else {
                    params(blk_hi)
                };
                for g in g..g + groups {
                    let (w_lo, w_hi) = decode::<KIND, true>(column, g, &lo, &hi);
                    let at = out.add(32 * (g - g0));
                    _mm512_storeu_ps(at, w_lo);
                    _mm512_storeu_ps(at.add(16), w_hi);
                }
                g += groups;
            }
        }
    }
}

/// The AVX2+FMA kernels.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{four_bits, zero_point_f32, FusedRows, GroupBlocks, Job, S4, S8, TILE_K};
    use std::arch::x86_64::*;

    /// The zero point (plus 8 for signed 4-bit values, which are decoded offset by 8) and the
    /// scale of one half, broadcast.
    #[derive(Copy, Clone)]
    struct Params {
        zp: __m256,
        s: __m256,
    }

    /// The parameters of block `blk` of the column whose scales start at `scales` (and zero
    /// points at `zero_points`, when `ZP`).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn params<const KIND: u8, const ZP: bool>(
        scales: *const f32,
        zero_points: *const u8,
        blk: usize,
    ) -> Params {
        let zp = if ZP {
            zero_point_f32(KIND, *zero_points.add(blk))
        } else {
            0.0
        };
        // (q ^ 8) - (zp + 8) == q - zp exactly: both are small integers.
        let zp = if KIND == S4 { zp + 8.0 } else { zp };
        Params {
            zp: _mm256_set1_ps(zp),
            s: _mm256_set1_ps(*scales.add(blk)),
        }
    }

    /// The 32 dequantized values of group `g` of a column, 8 at a time in `k` order.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn decode<const KIND: u8, const ZP: bool>(
        column: *const u8,
        g: usize,
        lo: &Params,
        hi: &Params,
    ) -> [__m256; 4] {
        let scale = |q: __m256i, p: &Params| {
            let v = _mm256_cvtepi32_ps(q);
            // (v - 0) * s == v * s exactly (signed 4-bit values always subtract their offset).
            let v = if ZP || KIND == S4 {
                _mm256_sub_ps(v, p.zp)
            } else {
                v
            };
            _mm256_mul_ps(v, p.s)
        };
        if four_bits(KIND) {
            let mut v = _mm_loadu_si128(column.add(16 * g).cast());
            if KIND == S4 {
                // Flip each nibble's sign bit: two's complement q becomes q + 8, unsigned.
                v = _mm_xor_si128(v, _mm_set1_epi8(0x88u8 as i8));
            }
            let d0 = _mm256_cvtepu8_epi32(v);
            let d1 = _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(v));
            let low = _mm256_set1_epi32(0xF);
            [
                scale(_mm256_and_si256(d0, low), lo),
                scale(_mm256_and_si256(d1, low), lo),
                scale(_mm256_srli_epi32::<4>(d0), hi),
                scale(_mm256_srli_epi32::<4>(d1), hi),
            ]
        } else {
            let p = column.add(32 * g);
            let widen = |i: usize| {
                let v = _mm_loadl_epi64(p.add(8 * i).cast());
                if KIND == S8 {
                    _mm256_cvtepi8_epi32(v)
                } else {
                    _mm256_cvtepu8_epi32(v)
                }
            };
            [
                scale(widen(0), lo),
                scale(widen(1), lo),
                scale(widen(2), hi),
                scale(widen(3), hi),
            ]
        }
    }

    /// Columns `n0..n1` of a product with at most `FUSED_ROWS` rows, blocks of whole halves.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn few_rows<const KIND: u8>(
        job: &Job,
        rows: &FusedRows,
        n0: usize,
        n1: usize,
    ) {
        if job.w.zero_points.is_null() {
            few_rows_zp::<KIND, false>(job, rows, n0, n1)
        } else {
            few_rows_zp::<KIND, true>(job, rows, n0, n1)
        }
    }

    /// Blocks of 4 columns for one row, 2 for more, in passes of up to 2 rows (16 registers).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn few_rows_zp<const KIND: u8, const ZP: bool>(
        job: &Job,
        rows: &FusedRows,
        n0: usize,
        n1: usize,
    ) {
        let mut n = n0;
        while n < n1 {
            let block = if n + 4 <= n1 {
                4
            } else if n + 2 <= n1 {
                2
            } else {
                1
            };
            for (first, count) in rows.passes(2) {
                let (a, c) = (&rows.a[first..], &rows.c[first..]);
                match (count, block) {
                    (1, 4) => {
                        columns::<KIND, ZP, 1, 2>(job, a, c, n);
                        columns::<KIND, ZP, 1, 2>(job, a, c, n + 2);
                    }
                    (1, 2) => columns::<KIND, ZP, 1, 2>(job, a, c, n),
                    (1, _) => columns::<KIND, ZP, 1, 1>(job, a, c, n),
                    (_, 4) => {
                        columns::<KIND, ZP, 2, 2>(job, a, c, n);
                        columns::<KIND, ZP, 2, 2>(job, a, c, n + 2);
                    }
                    (_, 2) => columns::<KIND, ZP, 2, 2>(job, a, c, n),
                    _ => columns::<KIND, ZP, 2, 1>(job, a, c, n),
                }
            }
            n += block;
        }
    }

    /// Columns `n..n + C` of the `R` rows `a` -> `c`: two accumulators (the low and the high
    /// half of each group) per row and column, summed at the end.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn columns<const KIND: u8, const ZP: bool, const R: usize, const C: usize>(
        job: &Job,
        a: &[*const f32],
        c: &[*mut f32],
        n: usize,
    ) {
        let w = &job.w;
        let halves_per_block = w.halves_per_block().expect("the caller checked the block");
        let cols: [*const u8; C] = std::array::from_fn(|j| w.column(n + j));
        let scales: [*const f32; C] = std::array::from_fn(|j| w.scales.add((n + j) * w.k_blocks));
        let zero_points: [*const u8; C] =
            std::array::from_fn(|j| w.zero_points.wrapping_add((n + j) * w.k_blocks));
        let params = |j: usize, blk: usize| params::<KIND, ZP>(scales[j], zero_points[j], blk);
        let a: [*const f32; R] = std::array::from_fn(|r| a[r]);
        let mut acc = [[[_mm256_setzero_ps(); 2]; C]; R];
        // The next C columns' bytes are prefetched into L2 at the pace this block reads its own.
        let next_b = w.column(n + C);
        let group_bytes = if four_bits(KIND) { 16 * C } else { 32 * C };
        macro_rules! group {
            ($g:expr, $lo:expr, $hi:expr) => {{
                let g = $g;
                let k0 = 32 * g;
                for line in 0..group_bytes.div_ceil(64) {
                    _mm_prefetch::<_MM_HINT_T1>(
                        next_b.wrapping_add(g * group_bytes + 64 * line).cast(),
                    );
                }
                for j in 0..C {
                    let wv = decode::<KIND, ZP>(cols[j], g, &$lo[j], &$hi[j]);
                    for r in 0..R {
                        for (i, wv) in wv.iter().enumerate() {
                            let av = _mm256_loadu_ps(a[r].add(k0 + 8 * i));
                            acc[r][j][i / 2] = _mm256_fmadd_ps(av, *wv, acc[r][j][i / 2]);
                        }
                    }
                }
            }};
        }
        let full = w.k / 32;
        super::for_each_group!(full, halves_per_block, params, group, |_: usize| {});
        let tail = w.k % 32;
        if tail > 0 {
            // The last, partial group: its padding decodes to finite junk, masked out of the sums.
            let k0 = 32 * full;
            let lo: [Params; C] = std::array::from_fn(|j| params(j, k0 / w.block));
            // A high half wholly past K may lie in a block past the last; it is not decoded.
            let hi: [Params; C] = if tail <= 16 {
                lo
            } else {
                std::array::from_fn(|j| params(j, (k0 + 16) / w.block))
            };
            let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            let masks: [__m256i; 4] = std::array::from_fn(|i| {
                _mm256_cmpgt_epi32(_mm256_set1_epi32(tail as i32 - 8 * i as i32), lanes)
            });
            for j in 0..C {
                let wv = decode::<KIND, ZP>(cols[j], full, &lo[j], &hi[j]);
                for r in 0..R {
                    for (i, wv) in wv.iter().enumerate() {
                        if 8 * i >= tail {
                            break;
                        }
                        let av = _mm256_maskload_ps(a[r].add(k0 + 8 * i), masks[i]);
                        let sum = _mm256_fmadd_ps(av, *wv, acc[r][j][i / 2]);
                        acc[r][j][i / 2] =
                            _mm256_blendv_ps(acc[r][j][i / 2], sum, _mm256_castsi256_ps(masks[i]));
                    }
                }
            }
        }
        for (acc, c) in acc.iter().zip(c) {
            for (j, acc) in acc.iter().enumerate() {
                let v = _mm256_add_ps(acc[0], acc[1]);
                let v = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
                let v = _mm_add_ps(v, _mm_movehl_ps(v, v));
                let v = _mm_add_ss(v, _mm_movehdup_ps(v));
                let mut sum = _mm_cvtss_f32(v);
                if !job.bias.is_null() {
                    sum += *job.bias.add(n + j);
                }
                *c.add(n + j) = sum;
            }
        }
    }

    /// Columns `n0..n1` of a product with few rows and a block that splits halves.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn few_rows_any_block(job: &Job, rows: &FusedRows, n0: usize, n1: usize) {
        super::few_rows_any_block::<true>(job, rows, n0, n1);
    }

    /// Dequantizes the tile `k0..k1` x `n0..n1` (`k0` a multiple of 32) into `tile`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dequantize_tile<const KIND: u8>(
        job: &Job,
        tile: *mut f32,
        n0: usize,
        n1: usize,
        k0: usize,
        k1: usize,
    ) {
        let w = &job.w;
        let halves_per_block = w.halves_per_block().expect("the caller checked the block");
        let (g0, g1) = (k0 / 32, k1.div_ceil(32));
        for n in n0..n1 {
            let column = w.column(n);
            let scales = w.scales.add(n * w.k_blocks);
            let zero_points = w.zero_points.wrapping_add(n * w.k_blocks);
            let params = |blk: usize| {
                if w.zero_points.is_null() {
                    params::<KIND, false>(scales, zero_points, blk)
                } else {
                    params::<KIND, true>(scales, zero_points, blk)
                }
            };
            let out = tile.add((n - n0) * TILE_K as usize);
            let mut blocks = GroupBlocks::new(halves_per_block, g0);
            let mut g = g0;
            while g < g1 {
                let (blk_lo, blk_hi, groups) = blocks.next_run(g1 - g);
                let lo = params(blk_lo);
                // A high half wholly past K may lie in a block past the last: decode it with the
                // low half's parameters (the values are past K and never read).
                let hi = if blk_hi == blk_lo || 32 * (g + groups - 1) + 16 >= w.k {
                    lo
                } else {
                    params(blk_hi)
                };
                for g in g..g + groups {
                    let wv = decode::<KIND, true>(column, g, &lo, &hi);
                    let at = out.add(32 * (g - g0));
                    for (i, wv) in wv.iter().enumerate() {
                        _mm256_storeu_ps(at.add(8 * i), *wv);
                    }
                }
                g += groups;
            }
        }
    }

    /// [`super::to_strip`] by 8 x 8 blocks transposed in registers (`nr` a multiple of 8).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn to_strip(
        tile: *const f32,
        strip: *mut f32,
        kc: usize,
        live: usize,
        nr: usize,
    ) {
        let full = kc / 8 * 8;
        for j0 in (0..nr).step_by(8) {
            let cols = live.saturating_sub(j0).min(8);
            let mut p = 0;
            while p < full {
                let mut r = [_mm256_setzero_ps(); 8];
                for (j, r) in r.iter_mut().enumerate().take(cols) {
                    *r = _mm256_loadu_ps(tile.add((j0 + j) * TILE_K as usize + p));
                }
                // Rows of the block: columns j0..j0 + 8 of values p..p + 8.
                let rows = crate::cpu::transpose::x86::transpose8(r);
                for (i, row) in rows.iter().enumerate() {
                    _mm256_storeu_ps(strip.add((p + i) * nr + j0), *row);
                }
                p += 8;
            }
        }
        super::to_strip_rows(tile, strip, full, kc, live, nr);
    }
}

// `GROUP` is the layout's group; the decoders above hard-code its 32 values.
const _: () = assert!(GROUP == 32 && TILE_K % GROUP == 0);
