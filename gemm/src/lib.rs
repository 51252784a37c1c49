//! memc's GEMM (the `memc-gemm` crate): `C = alpha * A @ B + (accumulate ? C : 0)` over strided f32 or f64 matrices,
//! blocked BLIS-style, with its packed panels in memory the caller provides.
//!
//! - **Blocking.** [`GemmBlocking`] (below; memc-codegen's `cpu/target.rs` re-exports it, so
//!   that lowering sizes the scratch with the same numbers) cuts a product into units of `MC` rows by `NC` columns (per batch
//!   index). A unit walks `K` in steps of `KC`: it packs `B`'s `KC x NC` panel (column strips
//!   of the microkernel's `NR`, zero-padded), then for each `MC x KC` block of `A` packs it
//!   (row strips of [`MR`], zero-padded; an `A` whose columns are contiguous is read where it
//!   is, since the microkernel only broadcasts its values) and runs the microkernel over every
//!   `MR x NR` tile.
//!   Consecutive units of one thread that share a `B` panel pack it once. Products with at
//!   most [`GEMM_SMALL_M`] rows whose `B` has contiguous columns read `B` where it is.
//!   A constant `B` comes packed whole ([`pack_b_whole`], `Product::b_packed`: strips of 32
//!   columns along all of `K`, written when the plan file is), and no panel of it is packed.
//!   [`run_packing_b`] runs the same loop with a caller's [`PackB`] filling the `B` panels
//!   (memc's convolutions pack them straight from the input windows: implicit im2col).
//! - **Memory.** Each thread packs into its own slot: planned arena scratch
//!   ([`Contract::pack`], `slots x (A panel + B panel)`), or, for a contraction planned without
//!   it (hand-built kernels, old plans) and for the callers inside other kernels, smaller
//!   panels on the thread's stack. Nothing is allocated on the heap.
//! - **Microkernels.** `MR = 6` rows by `NR` columns of accumulators in registers: AVX-512F
//!   (`NR = 32` f32), AVX2+FMA (`NR = 16` f32), and a portable one (`NR = 16` f32, 8 f64;
//!   compiled with AVX2+FMA where the CPU has it, so f64 vectorizes). The choice is made once
//!   per process from `is_x86_feature_detected!`; `MEMC_GEMM_ISA=scalar|avx2|avx512` (read
//!   once, a test hook) forces a path. Partial tiles mask their loads and stores; a `C` whose
//!   columns are not contiguous is written element by element.
//! - **Threads.** Units are split over at most `slots` threads, in contiguous runs (batch
//!   major, then column block, then row block), when the result's elements are provably
//!   distinct for distinct (batch, row, column); otherwise the product runs on the calling
//!   thread in order.
//!
//! Guarantees: for a validated contraction every element read or written lies in the views
//! the validator bounded, and packing writes only the slots it was given; with
//! `accumulate = false` the old `C` is never read (so NaN garbage there does not leak); each
//! output element is summed in an order fixed by the shape and the instruction set, not by
//! the number of threads.

// The microkernels take their operands as plain arguments, so they stay in registers.
#![allow(clippy::too_many_arguments)]

use std::sync::OnceLock;

mod direct;
pub use direct::{
    direct_conv_fills_lanes, direct_conv_pays, direct_conv_runs, direct_conv_window_fits,
    direct_conv_yields_to_gemm, run_direct, DirectAxis, DirectConv, DirectOperands,
    DIRECT_MAX_AXES, DIRECT_MAX_TAPS,
};
mod winograd;
pub use winograd::{
    pack_winograd_weights, run_winograd, winograd_blocking, winograd_blocking_in,
    winograd_scratch_bytes, winograd_weights_len, winograd_window, WinogradBlocking, WinogradConv,
};

/// Rows of `C` one GEMM microkernel call computes (`cpu/gemm.rs`), on every instruction set.
pub const GEMM_MR: u64 = 6;
/// The widest microkernel tile, in columns (AVX-512, f32); packed `B` panels are padded to a
/// multiple of it, so one scratch size serves every instruction set.
pub const GEMM_NR_MAX: u64 = 32;
/// Rows of `A` packed at a time (a multiple of [`GEMM_MR`]).
pub const GEMM_MC: u64 = 96;
/// Bytes of one row of a packed `A` panel along `K`: `KC` is 256 f32 or 128 f64 values.
pub const GEMM_KC_BYTES: u64 = 1024;
/// Columns of `B` packed at a time (a multiple of [`GEMM_NR_MAX`]).
pub const GEMM_NC: u64 = 128;
/// Threads one product runs on at most: the plan reserves one packing slot (an `A` panel of
/// [`GEMM_MC`] x `KC` and a `B` panel of `KC` x [`GEMM_NC`], 224 KiB in f32) per thread, and
/// a session with more threads runs each product on this many.
pub const GEMM_THREADS: u64 = 4;
/// Products with at most this many rows read a `B` whose columns are contiguous where it is,
/// without packing it (each element of `B` is used by so few rows that a copy would cost as
/// much as the product). Stop 29 raised it from 16: MobileNetV2's pointwise convolutions
/// (24 and 48 output channels over 56x56 images, `K` 144) ran 0.249 -> 0.202 and 0.391 ->
/// 0.357 ms at one thread, 32x784x192 0.093 -> 0.073, two threads unchanged, and their
/// `B` panels (350 KiB for the first) leave the plan.
pub const GEMM_SMALL_M: u64 = 48;
/// Products with fewer multiply-adds than this (`batches x m x n x k`) run on one thread and
/// pack into small panels on its stack: no planned scratch (a few KiB of panels would cost more
/// arena than they save time).
pub const GEMM_PARALLEL_MACS: u64 = 64 * 64 * 64;

/// How a product of `batches` x (`m` x `k`) @ (`k` x `n`) with `elem_size`-byte elements is
/// blocked, and so the packing scratch it needs: one slot per thread (at most
/// [`GEMM_THREADS`]), each an `A` panel of `mc x kc` and, unless `B` is read in place, a `B`
/// panel of `kc x nc` elements. The sizes only grow with every argument (and with packing
/// `B`), so a plan sized for bounds on the dims holds any product within them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct GemmBlocking {
    /// Rows of a packed `A` panel: `min(MC, m)` rounded up to [`GEMM_MR`].
    pub mc: u64,
    /// Values of `K` per panel.
    pub kc: u64,
    /// Columns of a packed `B` panel: `min(NC, n)` rounded up to [`GEMM_NR_MAX`].
    pub nc: u64,
    /// Whether `B` is packed (else read in place).
    pub pack_b: bool,
    /// Whether `A` is packed into the slot's panel (else it comes packed whole, `a_packed`,
    /// or has contiguous columns and is read where it is, and the slot has no `A` panel).
    pub pack_a: bool,
    /// Independent pieces of work: `batches x ceil(m / MC) x ceil(n / NC)`.
    pub units: u64,
    /// Packing slots, one per thread that may run the product; 0 for products under
    /// [`GEMM_PARALLEL_MACS`] (and empty ones), which pack on the stack of one thread.
    pub slots: u64,
    pub elem_size: u64,
    /// Whether an operand packed whole (`Product::a_packed` or `b_packed`, a weight) comes
    /// from memory at each call (a model whose weights outgrow the caches between runs): the
    /// loop then asks for each panel of `A` ahead, spread over the calls of the panel before,
    /// and for each strip of `B` over the calls on the strip before. Not part of the scratch;
    /// false from [`GemmBlocking::new`].
    pub prefetch_packed: bool,
}

impl GemmBlocking {
    pub fn new(batches: u64, m: u64, n: u64, k: u64, elem_size: u64, pack_b: bool) -> GemmBlocking {
        let round = |x: u64, to: u64| x.div_ceil(to).saturating_mul(to);
        let mc = round(m.min(GEMM_MC), GEMM_MR);
        let kc = k.min(GEMM_KC_BYTES / elem_size.max(1));
        let nc = round(n.min(GEMM_NC), GEMM_NR_MAX);
        let units = batches
            .saturating_mul(m.div_ceil(GEMM_MC))
            .saturating_mul(n.div_ceil(GEMM_NC));
        let macs = batches
            .saturating_mul(m)
            .saturating_mul(n)
            .saturating_mul(k);
        let slots = if macs < GEMM_PARALLEL_MACS {
            0
        } else {
            units.min(GEMM_THREADS)
        };
        GemmBlocking {
            mc,
            kc,
            nc,
            pack_b,
            pack_a: true,
            units,
            slots,
            elem_size,
            prefetch_packed: false,
        }
    }

    /// The blocking of the same product whose `A` is never packed into a panel (it comes
    /// packed whole, `Product::a_packed`, or its columns are contiguous and it is read where it
    /// is): its slots hold no `A` panel.
    pub fn without_a_panel(self) -> GemmBlocking {
        GemmBlocking {
            pack_a: false,
            ..self
        }
    }

    /// The blocking of a product of `batches` x (`m` x `n`) whose `B` comes packed whole and
    /// whose `A` panels come from a packer that costs far more per value than a copy (a
    /// column matrix, [`run_packing_a`]): all `n` columns in one block, so each `A` panel is
    /// packed once (with 128-column blocks a 512-channel convolution packed its column
    /// matrix four times, and ran at half the speed), and a slot per thread that splitting
    /// the rows into strips of `MR` could keep busy.
    pub fn with_one_column_block(self, batches: u64, m: u64, n: u64) -> GemmBlocking {
        let slots = if self.slots == 0 {
            0
        } else {
            batches
                .saturating_mul(m.div_ceil(GEMM_MR))
                .min(GEMM_THREADS)
        };
        GemmBlocking {
            nc: n.div_ceil(GEMM_NR_MAX).saturating_mul(GEMM_NR_MAX),
            units: batches.saturating_mul(m.div_ceil(GEMM_MC)),
            slots,
            ..self
        }
    }

    /// Bytes of one slot's packed `A` panel (a multiple of 64; 0 when `A` comes packed whole).
    pub fn a_bytes(&self) -> u64 {
        if self.pack_a {
            (self.mc * self.kc * self.elem_size).next_multiple_of(64)
        } else {
            0
        }
    }

    /// Bytes of one slot's packed `B` panel (a multiple of 64; 0 when `B` is read in place).
    pub fn b_bytes(&self) -> u64 {
        if self.pack_b {
            (self.kc * self.nc * self.elem_size).next_multiple_of(64)
        } else {
            0
        }
    }

    pub fn slot_bytes(&self) -> u64 {
        self.a_bytes() + self.b_bytes()
    }

    /// The packing scratch of the whole product.
    pub fn scratch_bytes(&self) -> u64 {
        self.slots.saturating_mul(self.slot_bytes())
    }
}

/// A bound on the packing scratch of any product whose operands and result each have at most
/// `elems` elements: `batches x m x n x k <= elems^2`, a packed `A` panel holds at most
/// `min(MC x KC, 6 x elems)` values (rows rounded up to [`GEMM_MR`]) and a `B` panel
/// `min(KC x NC, 32 x elems)`.
pub fn gemm_scratch_bound(elems: u64, elem_size: u64) -> u64 {
    if elems.saturating_mul(elems) < GEMM_PARALLEL_MACS {
        return 0;
    }
    let kc = GEMM_KC_BYTES / elem_size.max(1);
    let a = (GEMM_MC * kc).min(elems.saturating_mul(GEMM_MR)) * elem_size;
    let b = (kc * GEMM_NC).min(elems.saturating_mul(GEMM_NR_MAX)) * elem_size;
    GEMM_THREADS * (a.next_multiple_of(64) + b.next_multiple_of(64))
}

/// Whether a product with `m` rows reads `B` where it is: few rows, and `B`'s columns
/// contiguous (`col_stride` 1), which the microkernels load as vectors.
pub fn gemm_b_in_place(m: u64, b_col_stride: i64) -> bool {
    m <= GEMM_SMALL_M && b_col_stride == 1
}

/// Rows of a microkernel tile.
const MR: usize = GEMM_MR as usize;

/// An element type the GEMM computes in.
pub trait Elem: Copy + Send + Sync + PartialOrd + 'static {
    const ZERO: Self;
    const SIZE: usize;
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn mul(self, a: Self) -> Self;
    fn add(self, a: Self) -> Self;
}

impl Elem for f32 {
    const ZERO: f32 = 0.0;
    const SIZE: usize = 4;
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32) -> f32 {
        self.mul_add(a, b)
    }
    #[inline(always)]
    fn mul(self, a: f32) -> f32 {
        self * a
    }
    #[inline(always)]
    fn add(self, a: f32) -> f32 {
        self + a
    }
}

impl Elem for f64 {
    const ZERO: f64 = 0.0;
    const SIZE: usize = 8;
    #[inline(always)]
    fn mul_add(self, a: f64, b: f64) -> f64 {
        self.mul_add(a, b)
    }
    #[inline(always)]
    fn mul(self, a: f64) -> f64 {
        self * a
    }
    #[inline(always)]
    fn add(self, a: f64) -> f64 {
        self + a
    }
}

/// A strided matrix: element `(r, c)` at `ptr + r * rs + c * cs` (in elements).
#[derive(Copy, Clone, Debug)]
pub struct Mat<T> {
    pub ptr: *mut T,
    pub rs: isize,
    pub cs: isize,
}

impl<T> Mat<T> {
    #[inline(always)]
    fn at(&self, r: usize, c: usize) -> *mut T {
        self.ptr
            .wrapping_offset(r as isize * self.rs + c as isize * self.cs)
    }
}

/// One product `c = alpha * a @ b + (accumulate ? c : 0)`, `a` `m x k`, `b` `k x n`, `k > 0`.
#[derive(Copy, Clone, Debug)]
pub struct Product<T> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Mat<T>,
    pub b: Mat<T>,
    pub c: Mat<T>,
    pub alpha: T,
    pub accumulate: bool,
    /// `a` already packed whole, in the layout [`pack_a_whole`] writes (a constant weight,
    /// packed when the plan was written): the loop reads its strips in place instead of
    /// packing `a` into the panel (`a` is then not read, except by one-row products, which
    /// never take this form).
    pub a_packed: Option<*const T>,
    /// `b` already packed whole, in the layout [`pack_b_whole`] writes (a constant weight,
    /// packed when the plan was written): the loop reads its strips in place and packs no `B`
    /// panel (`b` is then not read).
    pub b_packed: Option<*const T>,
    /// What happens to each element of `c` once its sum is complete (each thread finishes
    /// the blocks it computed while they are in its cache).
    pub epilogue: Epilogue<T>,
}

/// The last steps of a product's elements once their sums are complete, in this order: plus a
/// bias per row (`bias`: row `i`'s at `ptr + i * stride`; a convolution's, which the
/// product then need not accumulate onto), plus the element `add` elements on (a residual of
/// the same layout, read before anything writes it), clamped to `[lo, hi]` (a ReLU or ReLU6
/// after the product; NaN stays NaN).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Epilogue<T> {
    pub bias: Option<(*const T, isize)>,
    pub add: Option<isize>,
    pub clamp: Option<(T, T)>,
}

// SAFETY: the bias is read only, by every thread finishing a block.
unsafe impl<T: Sync> Send for Epilogue<T> {}
unsafe impl<T: Sync> Sync for Epilogue<T> {}

impl<T> Epilogue<T> {
    /// No last steps.
    pub const NONE: Epilogue<T> = Epilogue {
        bias: None,
        add: None,
        clamp: None,
    };

    pub fn is_none(&self) -> bool {
        self.bias.is_none() && self.add.is_none() && self.clamp.is_none()
    }
}

/// `c = alpha * d^T (+ c)`, then `epilogue` ([`finish_block`]): the result of a product run
/// transposed ([`run_packing_a`]) into `d` (`cols x rows`, row-major, contiguous), stored as
/// the `rows x cols` block of `c` the untransposed product would have written.
///
/// # Safety
/// `d` is valid for `cols x rows` values and does not overlap `c`; `c` and the epilogue as
/// [`finish_block`] needs for the block.
#[allow(clippy::too_many_arguments)]
pub unsafe fn transpose_into<T: Elem>(
    d: *const T,
    c: Mat<T>,
    rows: usize,
    cols: usize,
    alpha: T,
    accumulate: bool,
    epilogue: Epilogue<T>,
) {
    // Rows of `c` in blocks of 16 (a cache line of `d`'s row, for f32), each block's
    // columns inner: a block reads `cols` lines of `d` and writes 16 rows of `c`.
    const BLOCK: usize = 16;
    let mut r0 = 0;
    while r0 < rows {
        let r1 = (r0 + BLOCK).min(rows);
        for j in 0..cols {
            let from = d.add(j * rows);
            for i in r0..r1 {
                let to = c.at(i, j);
                let v = (*from.add(i)).mul(alpha);
                *to = if accumulate { v.add(*to) } else { v };
            }
        }
        r0 = r1;
    }
    finish_block(c, 0, rows, cols, epilogue);
}

/// Applies `epilogue` to the `rows x cols` block of `c` whose first row is row `row0` of the
/// product.
///
/// # Safety
/// `c` is valid for the block, and so is the block `epilogue.add` elements from it, which
/// does not overlap it; the bias holds the block's rows.
pub unsafe fn finish_block<T: Elem>(
    c: Mat<T>,
    row0: usize,
    rows: usize,
    cols: usize,
    epilogue: Epilogue<T>,
) {
    if epilogue.is_none() {
        return;
    }
    // Compiled for the widest vectors the CPU has: the generic loop alone is SSE2, and took
    // as long as the product on a 16-channel pointwise convolution with a bias and a ReLU
    // (37% of its time, 96x12544x16).
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn avx512<T: Elem>(
            c: Mat<T>,
            row0: usize,
            rows: usize,
            cols: usize,
            e: Epilogue<T>,
        ) {
            finish_rows(c, row0, rows, cols, e)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<T: Elem>(c: Mat<T>, row0: usize, rows: usize, cols: usize, e: Epilogue<T>) {
            finish_rows(c, row0, rows, cols, e)
        }
        match isa() {
            Isa::Avx512 => return avx512(c, row0, rows, cols, epilogue),
            Isa::Avx2 => return avx2(c, row0, rows, cols, epilogue),
            _ => {}
        }
    }
    finish_rows(c, row0, rows, cols, epilogue)
}

/// [`finish_block`]'s loop, inlined into each instruction set's copy.
#[inline(always)]
unsafe fn finish_rows<T: Elem>(
    c: Mat<T>,
    row0: usize,
    rows: usize,
    cols: usize,
    epilogue: Epilogue<T>,
) {
    let clamp = |v: T| match epilogue.clamp {
        // NaN compares false and stays.
        Some((lo, _)) if v < lo => lo,
        Some((_, hi)) if v > hi => hi,
        _ => v,
    };
    for i in 0..rows {
        let row = c.at(i, 0);
        let bias = epilogue
            .bias
            .map(|(ptr, stride)| *ptr.wrapping_offset((row0 + i) as isize * stride));
        let biased = |x: T| match bias {
            Some(b) => x.add(b),
            None => x,
        };
        if c.cs == 1 {
            // Whole rows as slices, which the compiler vectorizes (the caller promises the
            // residual does not overlap the block).
            let out = std::slice::from_raw_parts_mut(row, cols);
            match epilogue.add {
                Some(add) => {
                    let residual = std::slice::from_raw_parts(row.wrapping_offset(add), cols);
                    for (x, &r) in out.iter_mut().zip(residual) {
                        *x = clamp(biased(*x).add(r));
                    }
                }
                None => out.iter_mut().for_each(|x| *x = clamp(biased(*x))),
            }
        } else {
            for j in 0..cols {
                let x = c.at(i, j);
                let v = match epilogue.add {
                    Some(add) => biased(*x).add(*x.wrapping_offset(add)),
                    None => biased(*x),
                };
                *x = clamp(v);
            }
        }
    }
}

/// Values of an `m x k` matrix packed whole by [`pack_a_whole`]: its rows rounded up to
/// [`GEMM_MR`], times `k`.
pub fn packed_a_len(m: u64, k: u64) -> u64 {
    m.div_ceil(GEMM_MR)
        .saturating_mul(GEMM_MR)
        .saturating_mul(k)
}

/// Packs the `m x k` matrix `a` whole, as the blocking loop reads it: for each run of `KC`
/// values of `K` starting at `p0` (`kc` values, the last run shorter), at `dst + p0 * mpad`
/// (`mpad` = `m` rounded up to [`GEMM_MR`]), strips of [`GEMM_MR`] rows: strip `s` at
/// `s * MR * kc`, value `(i, p)` of it at `p * MR + i`, zero past `m`. The layout depends on
/// the element size only (`KC` and `MR` do not depend on the instruction set).
///
/// # Safety
/// `a` is valid for `m x k`; `dst` for [`packed_a_len`]`(m, k)` values.
pub unsafe fn pack_a_whole<T: Elem>(dst: *mut T, a: Mat<T>, m: usize, k: usize) {
    let kc_max = (GEMM_KC_BYTES / T::SIZE as u64) as usize;
    let mpad = m.div_ceil(MR) * MR;
    let mut p0 = 0;
    while p0 < k {
        let kc = (k - p0).min(kc_max);
        pack_a(dst.add(p0 * mpad), a, 0, m, p0, kc);
        p0 += kc;
    }
}

/// Columns of one strip of a `B` packed whole ([`pack_b_whole`]): the widest microkernel's
/// `NR`, which the narrower ones read half of at a time.
pub const PACKED_B_STRIP: u64 = GEMM_NR_MAX;

/// Values of a `k x n` matrix packed whole by [`pack_b_whole`]: its columns rounded up to
/// [`PACKED_B_STRIP`], times `k`.
pub fn packed_b_len(k: u64, n: u64) -> u64 {
    n.div_ceil(PACKED_B_STRIP)
        .saturating_mul(PACKED_B_STRIP)
        .saturating_mul(k)
}

/// Packs the `k x n` matrix `b` whole, as the blocking loop reads it: strips of
/// [`PACKED_B_STRIP`] columns over all of `K`, strip `s` at `dst + s * STRIP * k`, value
/// `(p, j)` of it at `p * STRIP + j`, zero past `n`. A run of `K` from `p0` of any length is
/// then `kc` consecutive rows of each strip, so the layout depends on neither the blocking nor
/// the instruction set (a microkernel of 16 columns reads half a strip with row stride 32).
///
/// # Safety
/// `b` is valid for `k x n`; `dst` for [`packed_b_len`]`(k, n)` values.
pub unsafe fn pack_b_whole<T: Elem>(dst: *mut T, b: Mat<T>, k: usize, n: usize) {
    let strip = PACKED_B_STRIP as usize;
    for s in 0..n.div_ceil(strip) {
        pack_b(
            dst.add(s * strip * k),
            b,
            0,
            k,
            s * strip,
            (n - s * strip).min(strip),
            strip,
        );
    }
}

/// A packer of `B` panels for products whose `B` is not a strided matrix in memory (an
/// implicit im2col matrix): it fills a panel exactly as the strided packer does.
pub trait PackB<T>: Sync {
    /// Packs values `p0..p0 + kc` by columns `j0..j0 + cols` of batch index `batch`'s `B` into
    /// strips of `nr` columns: strip `s` at `dst + s * nr * kc`, value `(p, j)` of it at
    /// `p * nr + j`, zero past `cols`.
    ///
    /// # Safety
    /// `dst` is valid for `cols.div_ceil(nr) * nr * kc` values, and the values lie within
    /// the packer's `B` (`p0 + kc <= k`, `j0 + cols <= n`).
    unsafe fn pack(
        &self,
        batch: usize,
        dst: *mut T,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    );
}

// SAFETY: a product is raw addresses; the callers promise that the threads running parts of
// one product write disjoint elements of `c`, and read `a` and `b` only.
unsafe impl<T> Send for Product<T> {}
unsafe impl<T> Sync for Product<T> {}

/// The instruction set the microkernels use.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Isa {
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

    fn available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// The microkernels of this process: the best available, or the one `MEMC_GEMM_ISA` forces.
pub fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        let detected = [Isa::Avx512, Isa::Avx2]
            .into_iter()
            .find(|isa| isa.available())
            .unwrap_or(Isa::Scalar);
        let Ok(wanted) = std::env::var("MEMC_GEMM_ISA") else {
            return detected;
        };
        let forced = [Isa::Scalar, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .find(|isa| isa.name() == wanted && isa.available());
        let chosen = forced.unwrap_or(detected);
        eprintln!(
            "memc: MEMC_GEMM_ISA={wanted}: GEMM microkernels use the {} path{}",
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

/// `mr x nr` tile: `c = alpha * sum_k a[k] b[k] + (beta ? c : 0)`. Value `(i, k)` of `a` is
/// at `a + i * a_rs + k * a_ks`: a packed strip (`a_rs` 1, `a_ks` [`MR`]) or rows of `A`
/// where it is (`a_ks` 1); only its first `mr` rows are read. Row `k` of `b` is at
/// `b + k * b_rs`, of which `b_cols` columns may be read (`NR` for a zero-padded packed strip).
/// With `finish` (`(row0, epilogue)`: the tile's last run of `K`), the tile is also finished
/// with the epilogue, its first row being row `row0` of the product: in registers as it is
/// stored where the kernel can (AVX-512 f32, in [`finish_block`]'s order: the same bits), else
/// by [`finish_block`] right after. `ahead` names lines of a weight that streams from memory
/// to ask for into the second-level cache during the call (spread over its steps where the
/// kernel can: AVX-512 f32 on whole tiles; else all at once first).
type MicroKernel<T> = unsafe fn(
    kc: usize,
    a: *const T,
    a_rs: isize,
    a_ks: isize,
    b: *const T,
    b_rs: isize,
    b_cols: usize,
    mr: usize,
    nr: usize,
    c: Mat<T>,
    alpha: T,
    beta: bool,
    finish: Option<(usize, &Epilogue<T>)>,
    ahead: Ahead,
);

/// One row of `a` times an in-place, row-major `b`: `c[j] = alpha * sum_k a[k] b[k, j] +
/// (beta ? c[j] : 0)` for `j < cols`, `a[k]` at `a + k * a_cs`, row `k` of `b` at `b + k * b_rs`
/// with contiguous columns, `c` contiguous. A product of one row has no reuse of `b` to pack
/// for: this streams each row of `b` once over the whole `K`, with a wide block of
/// independent accumulators (the tile kernels' one row would keep two).
type RowKernel<T> = unsafe fn(
    k: usize,
    a: *const T,
    a_cs: isize,
    b: *const T,
    b_rs: isize,
    cols: usize,
    c: *mut T,
    alpha: T,
    beta: bool,
);

/// `rows` (1 to [`STRIP_ROWS`]) rows of `a` times `k` rows of one strip of a `B` packed whole
/// ([`pack_b_whole`]: rows of [`PACKED_B_STRIP`] contiguous columns, zero past the last
/// column): `c[i, j] = alpha * sum_p a[i, p] strip[p, j] + (beta ? c[i, j] : 0)` for `j < cols`
/// (at most the strip's width), `a[i, p]` at `a + i * a_rs + p * a_cs`, row `i` of `c` at `c +
/// i * c_rs` with contiguous columns. It reads the strip's rows once, front to back: a product
/// of few rows streams its packed weight in order (the tile kernels read each strip in column
/// halves, as short strided runs per block of `K`).
type StripKernel<T> = unsafe fn(
    k: usize,
    a: *const T,
    a_rs: isize,
    a_cs: isize,
    rows: usize,
    strip: *const T,
    cols: usize,
    c: *mut T,
    c_rs: isize,
    alpha: T,
    beta: bool,
);

/// Rows one strip kernel call takes at most.
const STRIP_ROWS: usize = 3;
/// Products of at most this many rows with a `B` packed whole run on the strip kernel (where
/// the CPU has one): rows in groups of up to [`STRIP_ROWS`], each strip's run of `KC` rows
/// read from memory by the first group and from cache by the others. Measured on AVX2 (8 x
/// Linear(2048, 2048), one thread, strip vs tile kernel): 24 rows 27.7-30.3 vs 38.3-38.9 ms, 32
/// rows 31.9-37.4 vs 40.5-43.8, 48 rows 44.5-45.8 vs 52.1-67.4; 64 rows 68.2 vs 66.8, 96 rows
/// 97.7 vs 90.6.
const STRIP_MAX_M: usize = 48;

/// The microkernel of an element type on an instruction set, and its `NR`; and the row kernel
/// for one-row products and the strip kernel for products of few rows, where there are.
pub trait Kernels: Elem {
    fn kernel(isa: Isa) -> (MicroKernel<Self>, usize);
    /// The microkernel for products of at most `NARROW_N` columns, where a wide kernel's
    /// vectors would be half padding: the same sums in the same order, in narrower vectors.
    fn narrow_kernel(isa: Isa) -> (MicroKernel<Self>, usize) {
        Self::kernel(isa)
    }
    fn row_kernel(_isa: Isa) -> Option<RowKernel<Self>> {
        None
    }
    fn strip_kernel(_isa: Isa) -> Option<StripKernel<Self>> {
        None
    }
}

/// Products with at most this many columns take [`Kernels::narrow_kernel`].
const NARROW_N: usize = 16;

impl Kernels for f32 {
    fn kernel(isa: Isa) -> (MicroKernel<f32>, usize) {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => (x86::avx512_f32, 32),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => (x86::avx2_f32, 16),
            _ => (portable::<f32, 16, false>, 16),
        }
    }

    fn narrow_kernel(isa: Isa) -> (MicroKernel<f32>, usize) {
        match isa {
            // AVX-512's 32 columns would be half masked off (on cores that split a 512-bit
            // FMA in two, half the work wasted): AVX2's 16, with the same FMAs per element.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => (x86::avx2_f32, 16),
            _ => Self::kernel(isa),
        }
    }

    fn row_kernel(isa: Isa) -> Option<RowKernel<f32>> {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Some(x86::avx512_row_f32),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => Some(x86::avx2_row_f32),
            _ => None,
        }
    }

    fn strip_kernel(isa: Isa) -> Option<StripKernel<f32>> {
        match isa {
            // AVX-512 CPUs have AVX2: a strip is four of its vectors.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx2 => Some(x86::avx2_strip_f32),
            _ => None,
        }
    }
}

impl Kernels for f64 {
    fn kernel(isa: Isa) -> (MicroKernel<f64>, usize) {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx2 => (x86::fma_f64, 8),
            _ => (portable::<f64, 8, false>, 8),
        }
    }
}

/// The portable microkernel (`FMA`: fused multiply-adds, for callers compiled with FMA).
#[inline(always)]
unsafe fn portable<T: Elem, const NR: usize, const FMA: bool>(
    kc: usize,
    a: *const T,
    a_rs: isize,
    a_ks: isize,
    b: *const T,
    b_rs: isize,
    b_cols: usize,
    mr: usize,
    nr: usize,
    c: Mat<T>,
    alpha: T,
    beta: bool,
    finish: Option<(usize, &Epilogue<T>)>,
    ahead: Ahead,
) {
    ahead.all_now();
    let mut acc = [[T::ZERO; NR]; MR];
    let cols = b_cols.min(NR);
    // Rows past `mr` repeat the last one (they are never stored): an in-place `A` may end there.
    let row_at: [isize; MR] = std::array::from_fn(|i| i.min(mr.max(1) - 1) as isize * a_rs);
    let (mut a, mut b) = (a, b);
    if cols == NR {
        for _ in 0..kc {
            let bv: [T; NR] = std::array::from_fn(|j| *b.add(j));
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = *a.offset(row_at[i]);
                for (x, &bj) in row.iter_mut().zip(&bv) {
                    *x = if FMA {
                        ai.mul_add(bj, *x)
                    } else {
                        x.add(ai.mul(bj))
                    };
                }
            }
            a = a.offset(a_ks);
            b = b.wrapping_offset(b_rs);
        }
    } else {
        for _ in 0..kc {
            let bv: [T; NR] = std::array::from_fn(|j| if j < cols { *b.add(j) } else { T::ZERO });
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = *a.offset(row_at[i]);
                for (x, &bj) in row.iter_mut().zip(&bv) {
                    *x = if FMA {
                        ai.mul_add(bj, *x)
                    } else {
                        x.add(ai.mul(bj))
                    };
                }
            }
            a = a.offset(a_ks);
            b = b.wrapping_offset(b_rs);
        }
    }
    for (i, row) in acc.iter().enumerate().take(mr) {
        for (j, &x) in row.iter().enumerate().take(nr) {
            let p = c.at(i, j);
            let v = alpha.mul(x);
            *p = if beta { v.add(*p) } else { v };
        }
    }
    if let Some((row0, epilogue)) = finish {
        finish_block(c, row0, mr, nr, *epilogue);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{portable, Epilogue, Mat, MR, PACKED_B_STRIP};
    use std::arch::x86_64::*;

    /// Rows of an in-place `B` fetched ahead of the one being multiplied.
    const PREFETCH_ROWS: isize = 8;

    /// Calls `$rows::<M, PACKED>($args)` for the `M` that is `$mr` (1 to MR), with `PACKED`
    /// whether `A` is a packed strip (`$a_rs` 1, `$a_ks` MR): that copy of the loop has the
    /// offsets as constants, so the broadcasts address `a` with immediates.
    macro_rules! rows_by_mr {
        ($rows:ident, $mr:ident, $a_rs:ident, $a_ks:ident; $($arg:ident),*) => {
            if $a_rs == 1 && $a_ks == MR as isize {
                rows_by_mr!(@rows $rows, true, $mr; $($arg),*)
            } else {
                rows_by_mr!(@rows $rows, false, $mr; $($arg),*)
            }
        };
        (@rows $rows:ident, $packed:literal, $mr:ident; $($arg:ident),*) => {
            match $mr {
                1 => $rows::<1, $packed>($($arg),*),
                2 => $rows::<2, $packed>($($arg),*),
                3 => $rows::<3, $packed>($($arg),*),
                4 => $rows::<4, $packed>($($arg),*),
                5 => $rows::<5, $packed>($($arg),*),
                _ => $rows::<6, $packed>($($arg),*),
            }
        };
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn fma_f64(
        kc: usize,
        a: *const f64,
        a_rs: isize,
        a_ks: isize,
        b: *const f64,
        b_rs: isize,
        b_cols: usize,
        mr: usize,
        nr: usize,
        c: Mat<f64>,
        alpha: f64,
        beta: bool,
        finish: Option<(usize, &Epilogue<f64>)>,
        ahead: super::Ahead,
    ) {
        portable::<f64, 8, true>(
            kc, a, a_rs, a_ks, b, b_rs, b_cols, mr, nr, c, alpha, beta, finish, ahead,
        )
    }

    /// Writes `M` rows of accumulators (`V` vectors of `L` lanes each, spilled to `tile`)
    /// into `c` element by element.
    #[inline(always)]
    unsafe fn store_strided<const W: usize>(
        tile: &[[f32; W]; MR],
        mr: usize,
        nr: usize,
        c: Mat<f32>,
        alpha: f32,
        beta: bool,
    ) {
        for (i, row) in tile.iter().enumerate().take(mr) {
            for (j, &x) in row.iter().enumerate().take(nr) {
                let p = c.at(i, j);
                let v = alpha * x;
                *p = if beta { v + *p } else { v };
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2_f32(
        kc: usize,
        a: *const f32,
        a_rs: isize,
        a_ks: isize,
        b: *const f32,
        b_rs: isize,
        b_cols: usize,
        mr: usize,
        nr: usize,
        c: Mat<f32>,
        alpha: f32,
        beta: bool,
        finish: Option<(usize, &Epilogue<f32>)>,
        ahead: super::Ahead,
    ) {
        ahead.all_now();
        // A whole tile of contiguous rows finishes in the registers as it is stored (as a
        // pass after the store, its epilogue took as long as a 16-channel pointwise
        // convolution's product: 96x12544x16 with a bias and a ReLU).
        let fused = if c.cs == 1 && nr == 16 { finish } else { None };
        rows_by_mr!(avx2_rows, mr, a_rs, a_ks; kc, a, a_rs, a_ks, b, b_rs, b_cols, mr, nr, c, alpha, beta, fused);
        if let (Some((row0, epilogue)), None) = (finish, fused) {
            super::finish_block(c, row0, mr, nr, *epilogue);
        }
    }

    /// The lane mask of the first `n` of 8 lanes (`n` may exceed 8).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mask8(n: usize) -> __m256i {
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n.min(8) as i32), lanes)
    }

    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn avx2_rows<const M: usize, const PACKED: bool>(
        kc: usize,
        a: *const f32,
        a_rs: isize,
        a_ks: isize,
        b: *const f32,
        b_rs: isize,
        b_cols: usize,
        mr: usize,
        nr: usize,
        c: Mat<f32>,
        alpha: f32,
        beta: bool,
        finish: Option<(usize, &Epilogue<f32>)>,
    ) {
        let mut acc = [[_mm256_setzero_ps(); 2]; M];
        let (mut a, mut b) = (a, b);
        let (a_rs, a_ks) = if PACKED {
            (1, MR as isize)
        } else {
            (a_rs, a_ks)
        };
        if nr <= 8 {
            // A tile of at most 8 columns (a product's last, 49 = 3 x 16 + 1 columns for a
            // 7x7 image): its second vector would be all padding, so only the first is
            // summed (the same sums in the same order; half the multiply-adds).
            let m0 = mask8(b_cols);
            for _ in 0..kc {
                let b0 = if b_cols >= 8 {
                    _mm256_loadu_ps(b)
                } else {
                    _mm256_maskload_ps(b, m0)
                };
                for (i, acc) in acc.iter_mut().enumerate() {
                    let ai = _mm256_broadcast_ss(&*a.offset(i as isize * a_rs));
                    acc[0] = _mm256_fmadd_ps(ai, b0, acc[0]);
                }
                a = a.offset(a_ks);
                b = b.wrapping_offset(b_rs);
            }
        } else if b_cols >= 16 && b_rs != 16 {
            // `B` read in place (few rows): its rows are far apart, so fetch a few ahead; a
            // `B` packed whole (strips of 32 values a row) further ahead, as on AVX-512: a
            // constant `B` streamed from memory (the zoo bert's feed-forward products inside
            // the model: 0.758-0.790 -> 0.737-0.749 ms, paired rounds) and no cost in cache
            // (256x768x768 3.28 ms both ways).
            let ahead_rows = if b_rs == PACKED_B_STRIP as isize {
                super::PACKED_B_AHEAD_ROWS
            } else {
                PREFETCH_ROWS
            };
            for _ in 0..kc {
                _mm_prefetch::<_MM_HINT_T0>(b.wrapping_offset(ahead_rows * b_rs).cast());
                let b0 = _mm256_loadu_ps(b);
                let b1 = _mm256_loadu_ps(b.add(8));
                for (i, acc) in acc.iter_mut().enumerate() {
                    let ai = _mm256_broadcast_ss(&*a.offset(i as isize * a_rs));
                    acc[0] = _mm256_fmadd_ps(ai, b0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(ai, b1, acc[1]);
                }
                a = a.offset(a_ks);
                b = b.wrapping_offset(b_rs);
            }
        } else if b_cols >= 16 {
            for _ in 0..kc {
                let b0 = _mm256_loadu_ps(b);
                let b1 = _mm256_loadu_ps(b.add(8));
                for (i, acc) in acc.iter_mut().enumerate() {
                    let ai = _mm256_broadcast_ss(&*a.offset(i as isize * a_rs));
                    acc[0] = _mm256_fmadd_ps(ai, b0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(ai, b1, acc[1]);
                }
                a = a.offset(a_ks);
                b = b.wrapping_offset(b_rs);
            }
        } else {
            let (m0, m1) = (mask8(b_cols), mask8(b_cols.saturating_sub(8)));
            for _ in 0..kc {
                let b0 = _mm256_maskload_ps(b, m0);
                let b1 = _mm256_maskload_ps(b.wrapping_add(8), m1);
                for (i, acc) in acc.iter_mut().enumerate() {
                    let ai = _mm256_broadcast_ss(&*a.offset(i as isize * a_rs));
                    acc[0] = _mm256_fmadd_ps(ai, b0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(ai, b1, acc[1]);
                }
                a = a.offset(a_ks);
                b = b.wrapping_offset(b_rs);
            }
        }
        let va = _mm256_set1_ps(alpha);
        if c.cs == 1 {
            let (m0, m1) = (mask8(nr), mask8(nr.saturating_sub(8)));
            for (i, acc) in acc.iter().enumerate().take(mr) {
                let p = c.at(i, 0);
                let (mut r0, mut r1) = (_mm256_mul_ps(va, acc[0]), _mm256_mul_ps(va, acc[1]));
                if nr == 16 {
                    if beta {
                        r0 = _mm256_add_ps(r0, _mm256_loadu_ps(p));
                        r1 = _mm256_add_ps(r1, _mm256_loadu_ps(p.add(8)));
                    }
                    if let Some((row0, e)) = finish {
                        // `finish_block`'s operations in its order: the bias, the residual,
                        // the clamp.
                        if let Some((bias, stride)) = e.bias {
                            let b =
                                _mm256_set1_ps(*bias.wrapping_offset((row0 + i) as isize * stride));
                            r0 = _mm256_add_ps(r0, b);
                            r1 = _mm256_add_ps(r1, b);
                        }
                        if let Some(add) = e.add {
                            let q = p.wrapping_offset(add);
                            r0 = _mm256_add_ps(r0, _mm256_loadu_ps(q));
                            r1 = _mm256_add_ps(r1, _mm256_loadu_ps(q.add(8)));
                        }
                        if let Some((lo, hi)) = e.clamp {
                            // `v < lo ? lo : v > hi ? hi : v`, as `finish_block` (a NaN
                            // compares false and stays).
                            let (lo, hi) = (_mm256_set1_ps(lo), _mm256_set1_ps(hi));
                            let clamp = |v| {
                                let below = _mm256_cmp_ps::<_CMP_LT_OQ>(v, lo);
                                let above = _mm256_cmp_ps::<_CMP_GT_OQ>(v, hi);
                                _mm256_blendv_ps(_mm256_blendv_ps(v, hi, above), lo, below)
                            };
                            (r0, r1) = (clamp(r0), clamp(r1));
                        }
                    }
                    _mm256_storeu_ps(p, r0);
                    _mm256_storeu_ps(p.add(8), r1);
                } else {
                    let p1 = p.wrapping_add(8);
                    if beta {
                        r0 = _mm256_add_ps(r0, _mm256_maskload_ps(p, m0));
                        r1 = _mm256_add_ps(r1, _mm256_maskload_ps(p1, m1));
                    }
                    _mm256_maskstore_ps(p, m0, r0);
                    _mm256_maskstore_ps(p1, m1, r1);
                }
            }
        } else {
            let mut tile = [[0f32; 16]; MR];
            for (row, acc) in tile.iter_mut().zip(&acc) {
                _mm256_storeu_ps(row.as_mut_ptr(), acc[0]);
                _mm256_storeu_ps(row.as_mut_ptr().add(8), acc[1]);
            }
            store_strided(&tile, mr, nr, c, alpha, beta);
        }
    }

    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn avx512_f32(
        kc: usize,
        a: *const f32,
        a_rs: isize,
        a_ks: isize,
        b: *const f32,
        b_rs: isize,
        b_cols: usize,
        mr: usize,
        nr: usize,
        c: Mat<f32>,
        alpha: f32,
        beta: bool,
        finish: Option<(usize, &Epilogue<f32>)>,
        ahead: super::Ahead,
    ) {
        rows_by_mr!(avx512_rows, mr, a_rs, a_ks; kc, a, a_rs, a_ks, b, b_rs, b_cols, mr, nr, c, alpha, beta, finish, ahead)
    }

    /// Columns of `c` one pass of the AVX-512 row kernel holds in accumulators.
    const ROW_COLS_512: usize = 384;
    /// Likewise for AVX2 (12 of its 16 registers).
    const ROW_COLS_256: usize = 96;

    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn avx512_row_f32(
        k: usize,
        a: *const f32,
        a_cs: isize,
        b: *const f32,
        b_rs: isize,
        cols: usize,
        c: *mut f32,
        alpha: f32,
        beta: bool,
    ) {
        const V: usize = ROW_COLS_512 / 16;
        let mut j = 0;
        while j < cols {
            let w = (cols - j).min(ROW_COLS_512);
            let mut acc = [_mm512_setzero_ps(); V];
            if w == ROW_COLS_512 {
                for p in 0..k {
                    let av = _mm512_set1_ps(*a.offset(p as isize * a_cs));
                    let row = b.offset(p as isize * b_rs).add(j);
                    for (v, acc) in acc.iter_mut().enumerate() {
                        *acc = _mm512_fmadd_ps(av, _mm512_loadu_ps(row.add(v * 16)), *acc);
                    }
                }
            } else {
                for p in 0..k {
                    let av = _mm512_set1_ps(*a.offset(p as isize * a_cs));
                    let row = b.offset(p as isize * b_rs).add(j);
                    for (v, acc) in acc.iter_mut().enumerate().take(w.div_ceil(16)) {
                        let x = _mm512_maskz_loadu_ps(mask16(w - v * 16), row.add(v * 16));
                        *acc = _mm512_fmadd_ps(av, x, *acc);
                    }
                }
            }
            let alpha_v = _mm512_set1_ps(alpha);
            for (v, acc) in acc.iter().enumerate().take(w.div_ceil(16)) {
                let mask = mask16(w - v * 16);
                let out = c.add(j + v * 16);
                let mut r = _mm512_mul_ps(alpha_v, *acc);
                if beta {
                    r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, out));
                }
                _mm512_mask_storeu_ps(out, mask, r);
            }
            j += w;
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2_row_f32(
        k: usize,
        a: *const f32,
        a_cs: isize,
        b: *const f32,
        b_rs: isize,
        cols: usize,
        c: *mut f32,
        alpha: f32,
        beta: bool,
    ) {
        const V: usize = ROW_COLS_256 / 8;
        let mut j = 0;
        while j + ROW_COLS_256 <= cols {
            let mut acc = [_mm256_setzero_ps(); V];
            for p in 0..k {
                let av = _mm256_set1_ps(*a.offset(p as isize * a_cs));
                let row = b.offset(p as isize * b_rs).add(j);
                for (v, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm256_fmadd_ps(av, _mm256_loadu_ps(row.add(v * 8)), *acc);
                }
            }
            let alpha_v = _mm256_set1_ps(alpha);
            for (v, acc) in acc.iter().enumerate() {
                let out = c.add(j + v * 8);
                let mut r = _mm256_mul_ps(alpha_v, *acc);
                if beta {
                    r = _mm256_add_ps(r, _mm256_loadu_ps(out));
                }
                _mm256_storeu_ps(out, r);
            }
            j += ROW_COLS_256;
        }
        // The last columns one at a time, summed in the same order.
        for col in j..cols {
            let mut acc = 0.0f32;
            for p in 0..k {
                acc = (*a.offset(p as isize * a_cs))
                    .mul_add(*b.offset(p as isize * b_rs + col as isize), acc);
            }
            let out = c.add(col);
            *out = if beta {
                alpha * acc + *out
            } else {
                alpha * acc
            };
        }
    }

    /// [`super::StripKernel`] on AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2_strip_f32(
        k: usize,
        a: *const f32,
        a_rs: isize,
        a_cs: isize,
        rows: usize,
        strip: *const f32,
        cols: usize,
        c: *mut f32,
        c_rs: isize,
        alpha: f32,
        beta: bool,
    ) {
        match rows {
            1 => avx2_strip_row(k, a, a_cs, strip, cols, c, alpha, beta),
            2 => avx2_strip_rows::<2>(k, a, a_rs, a_cs, strip, cols, c, c_rs, alpha, beta),
            _ => avx2_strip_rows::<3>(k, a, a_rs, a_cs, strip, cols, c, c_rs, alpha, beta),
        }
    }

    /// Stores `alpha * acc` (plus `c`, with `beta`) into the first `cols` of a strip's
    /// columns of the row at `c`.
    #[inline(always)]
    unsafe fn store_strip_row(
        acc: &[__m256; super::PACKED_B_STRIP as usize / 8],
        cols: usize,
        c: *mut f32,
        alpha: f32,
        beta: bool,
    ) {
        const W: usize = super::PACKED_B_STRIP as usize;
        let alpha_v = _mm256_set1_ps(alpha);
        let mut sums = [0f32; W];
        for (v, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(sums.as_mut_ptr().add(8 * v), _mm256_mul_ps(alpha_v, *acc));
        }
        for (j, &sum) in sums.iter().enumerate().take(cols.min(W)) {
            let out = c.add(j);
            *out = if beta { sum + *out } else { sum };
        }
    }

    /// One row: even and odd rows of the strip into two sets of four accumulators (eight
    /// independent chains), added at the end.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_strip_row(
        k: usize,
        a: *const f32,
        a_cs: isize,
        strip: *const f32,
        cols: usize,
        c: *mut f32,
        alpha: f32,
        beta: bool,
    ) {
        const W: usize = super::PACKED_B_STRIP as usize;
        let mut even = [_mm256_setzero_ps(); W / 8];
        let mut odd = [_mm256_setzero_ps(); W / 8];
        let mut p = 0;
        while p + 2 <= k {
            let a0 = _mm256_set1_ps(*a.offset(p as isize * a_cs));
            let a1 = _mm256_set1_ps(*a.offset((p + 1) as isize * a_cs));
            let row = strip.add(p * W);
            for v in 0..W / 8 {
                even[v] = _mm256_fmadd_ps(a0, _mm256_loadu_ps(row.add(8 * v)), even[v]);
                odd[v] = _mm256_fmadd_ps(a1, _mm256_loadu_ps(row.add(W + 8 * v)), odd[v]);
            }
            p += 2;
        }
        if p < k {
            let a0 = _mm256_set1_ps(*a.offset(p as isize * a_cs));
            let row = strip.add(p * W);
            for (v, even) in even.iter_mut().enumerate() {
                *even = _mm256_fmadd_ps(a0, _mm256_loadu_ps(row.add(8 * v)), *even);
            }
        }
        for v in 0..W / 8 {
            even[v] = _mm256_add_ps(even[v], odd[v]);
        }
        store_strip_row(&even, cols, c, alpha, beta);
    }

    /// `R` rows: four accumulators each, every strip row loaded once for all of them.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_strip_rows<const R: usize>(
        k: usize,
        a: *const f32,
        a_rs: isize,
        a_cs: isize,
        strip: *const f32,
        cols: usize,
        c: *mut f32,
        c_rs: isize,
        alpha: f32,
        beta: bool,
    ) {
        const W: usize = super::PACKED_B_STRIP as usize;
        let mut acc = [[_mm256_setzero_ps(); W / 8]; R];
        for p in 0..k {
            let row = strip.add(p * W);
            let mut av = [_mm256_setzero_ps(); R];
            for (r, av) in av.iter_mut().enumerate() {
                *av = _mm256_set1_ps(*a.offset(r as isize * a_rs + p as isize * a_cs));
            }
            for v in 0..W / 8 {
                let b = _mm256_loadu_ps(row.add(8 * v));
                for r in 0..R {
                    acc[r][v] = _mm256_fmadd_ps(av[r], b, acc[r][v]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            store_strip_row(acc, cols, c.offset(r as isize * c_rs), alpha, beta);
        }
    }

    /// The mask of the first `n` of 16 lanes (`n` may exceed 16).
    #[inline(always)]
    fn mask16(n: usize) -> __mmask16 {
        if n >= 16 {
            0xffff
        } else {
            ((1u32 << n) - 1) as __mmask16
        }
    }

    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn avx512_rows<const M: usize, const PACKED: bool>(
        kc: usize,
        a: *const f32,
        a_rs: isize,
        a_ks: isize,
        b: *const f32,
        b_rs: isize,
        b_cols: usize,
        mr: usize,
        nr: usize,
        c: Mat<f32>,
        alpha: f32,
        beta: bool,
        finish: Option<(usize, &Epilogue<f32>)>,
        ahead: super::Ahead,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 2]; M];
        let (mut a, mut b) = (a, b);
        let (a_rs, a_ks) = if PACKED {
            (1, MR as isize)
        } else {
            (a_rs, a_ks)
        };
        // `B` read in place (few rows, far apart) is fetched a few rows ahead, packed strips
        // (32 values a row) further ahead, for a `B` that streams from memory.
        let ahead_rows = if b_rs == 32 {
            super::PACKED_B_AHEAD_ROWS
        } else {
            PREFETCH_ROWS
        };
        if nr <= 16 {
            ahead.all_now();
            // At most 16 live columns (a product's last strip: 196 = 6 x 32 + 4): one vector
            // of accumulators per row, half the multiply-adds (the rest of a packed strip is
            // zero padding, and a `B` read in place has no more columns).
            let m0 = mask16(b_cols);
            for _ in 0..kc {
                _mm_prefetch::<_MM_HINT_T0>(b.wrapping_offset(ahead_rows * b_rs).cast());
                let b0 = _mm512_maskz_loadu_ps(m0, b);
                for (i, acc) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_ps(*a.offset(i as isize * a_rs));
                    acc[0] = _mm512_fmadd_ps(ai, b0, acc[0]);
                }
                a = a.offset(a_ks);
                b = b.wrapping_offset(b_rs);
            }
        } else if b_cols >= 32 {
            // The lines asked for ahead, one every `every` steps (a burst of them before the
            // loop stalled on the line fill buffers: 3.5% of ResNet-50's cycles).
            // (Its own loop: a test at every step cost the products without it 3-4%.)
            let step = |acc: &mut [[__m512; 2]; M], a: &mut *const f32, b: &mut *const f32| {
                let next = b.wrapping_offset(ahead_rows * b_rs);
                _mm_prefetch::<_MM_HINT_T0>(next.cast());
                _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(16).cast());
                let b0 = _mm512_loadu_ps(*b);
                let b1 = _mm512_loadu_ps(b.add(16));
                for (i, acc) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_ps(*a.offset(i as isize * a_rs));
                    acc[0] = _mm512_fmadd_ps(ai, b0, acc[0]);
                    acc[1] = _mm512_fmadd_ps(ai, b1, acc[1]);
                }
                *a = a.offset(a_ks);
                *b = b.wrapping_offset(b_rs);
            };
            if ahead.lines == 0 {
                for _ in 0..kc {
                    step(&mut acc, &mut a, &mut b);
                }
            } else {
                let (mut line, mut left) = (ahead.at, ahead.lines);
                let every = (kc / left).max(1);
                let mut count = 0;
                for _ in 0..kc {
                    step(&mut acc, &mut a, &mut b);
                    count += 1;
                    if count >= every && left > 0 {
                        _mm_prefetch::<_MM_HINT_T1>(line.cast());
                        line = line.wrapping_add(64);
                        left -= 1;
                        count = 0;
                    }
                }
                super::Ahead {
                    at: line,
                    lines: left,
                }
                .all_now();
            }
        } else {
            ahead.all_now();
            let (m0, m1) = (mask16(b_cols), mask16(b_cols.saturating_sub(16)));
            for _ in 0..kc {
                let b0 = _mm512_maskz_loadu_ps(m0, b);
                let b1 = _mm512_maskz_loadu_ps(m1, b.wrapping_add(16));
                for (i, acc) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_ps(*a.offset(i as isize * a_rs));
                    acc[0] = _mm512_fmadd_ps(ai, b0, acc[0]);
                    acc[1] = _mm512_fmadd_ps(ai, b1, acc[1]);
                }
                a = a.offset(a_ks);
                b = b.wrapping_offset(b_rs);
            }
        }
        let va = _mm512_set1_ps(alpha);
        if c.cs == 1 {
            let (m0, m1) = (mask16(nr), mask16(nr.saturating_sub(16)));
            // The epilogue in registers, in `finish_rows`'s order: `+ bias`, `+ residual`,
            // then clamped (`max`/`min` return their second operand, the value, when either
            // is NaN, as the scalar comparisons keep it).
            let (lo, hi) = finish
                .and_then(|(_, e)| e.clamp)
                .unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
            let (lo, hi) = (_mm512_set1_ps(lo), _mm512_set1_ps(hi));
            for (i, acc) in acc.iter().enumerate().take(mr) {
                let p = c.at(i, 0);
                let p1 = p.wrapping_add(16);
                let (mut r0, mut r1) = (_mm512_mul_ps(va, acc[0]), _mm512_mul_ps(va, acc[1]));
                let full = nr == 32;
                let load = |q: *const f32, m: u16| {
                    if full {
                        _mm512_loadu_ps(q)
                    } else {
                        _mm512_maskz_loadu_ps(m, q)
                    }
                };
                if beta {
                    r0 = _mm512_add_ps(r0, load(p, m0));
                    r1 = _mm512_add_ps(r1, load(p1, m1));
                }
                if let Some((row0, e)) = finish {
                    if let Some((ptr, stride)) = e.bias {
                        let bias =
                            _mm512_set1_ps(*ptr.wrapping_offset((row0 + i) as isize * stride));
                        r0 = _mm512_add_ps(r0, bias);
                        r1 = _mm512_add_ps(r1, bias);
                    }
                    if let Some(add) = e.add {
                        r0 = _mm512_add_ps(r0, load(p.wrapping_offset(add), m0));
                        r1 = _mm512_add_ps(r1, load(p1.wrapping_offset(add), m1));
                    }
                    if e.clamp.is_some() {
                        r0 = _mm512_min_ps(hi, _mm512_max_ps(lo, r0));
                        r1 = _mm512_min_ps(hi, _mm512_max_ps(lo, r1));
                    }
                }
                if full {
                    _mm512_storeu_ps(p, r0);
                    _mm512_storeu_ps(p1, r1);
                } else {
                    _mm512_mask_storeu_ps(p, m0, r0);
                    _mm512_mask_storeu_ps(p1, m1, r1);
                }
            }
        } else {
            let mut tile = [[0f32; 32]; MR];
            for (row, acc) in tile.iter_mut().zip(&acc) {
                _mm512_storeu_ps(row.as_mut_ptr(), acc[0]);
                _mm512_storeu_ps(row.as_mut_ptr().add(16), acc[1]);
            }
            store_strided(&tile, mr, nr, c, alpha, beta);
            if let Some((row0, e)) = finish {
                super::finish_block(c, row0, mr, nr, *e);
            }
        }
    }
}

/// Packs rows `i0..i0 + rows` by values `p0..p0 + kc` of `a` into strips of [`MR`] rows:
/// strip `s` at `dst + s * MR * kc`, value `(i, p)` of it at `p * MR + i`, zero past `rows`.
unsafe fn pack_a<T: Elem>(dst: *mut T, a: Mat<T>, i0: usize, rows: usize, p0: usize, kc: usize) {
    for s in 0..rows.div_ceil(MR) {
        let strip = dst.add(s * MR * kc);
        let live = (rows - s * MR).min(MR);
        if a.cs == 1 && live == MR {
            for i in 0..MR {
                let src = a.at(i0 + s * MR + i, p0);
                for p in 0..kc {
                    *strip.add(p * MR + i) = *src.add(p);
                }
            }
        } else {
            for p in 0..kc {
                for i in 0..MR {
                    *strip.add(p * MR + i) = if i < live {
                        *a.at(i0 + s * MR + i, p0 + p)
                    } else {
                        T::ZERO
                    };
                }
            }
        }
    }
}

/// Packs values `p0..p0 + kc` by columns `j0..j0 + cols` of `b` into strips of `nr` columns:
/// strip `s` at `dst + s * nr * kc`, value `(p, j)` of it at `p * nr + j`, zero past `cols`.
unsafe fn pack_b<T: Elem>(
    dst: *mut T,
    b: Mat<T>,
    p0: usize,
    kc: usize,
    j0: usize,
    cols: usize,
    nr: usize,
) {
    if b.cs == 1 {
        // Row by row, each row's columns read once from one place: `B` is most often a
        // weight, its rows far apart and not in cache, so a few rows ahead are fetched too
        // (their misses overlap the copies).
        let strips = cols.div_ceil(nr);
        let row_bytes = cols * T::SIZE;
        for p in 0..kc {
            if p + PACK_B_AHEAD < kc {
                prefetch_span(b.at(p0 + p + PACK_B_AHEAD, j0).cast(), row_bytes);
            }
            let src = b.at(p0 + p, j0);
            for s in 0..strips {
                let row = dst.add(s * nr * kc + p * nr);
                let live = (cols - s * nr).min(nr);
                copy_strip_row(src.add(s * nr), row, live, nr);
            }
        }
        return;
    }
    for s in 0..cols.div_ceil(nr) {
        let strip = dst.add(s * nr * kc);
        let live = (cols - s * nr).min(nr);
        for j in 0..nr {
            if j < live {
                let src = b.at(p0, j0 + s * nr + j);
                for p in 0..kc {
                    *strip.add(p * nr + j) = *src.wrapping_offset(p as isize * b.rs);
                }
            } else {
                for p in 0..kc {
                    *strip.add(p * nr + j) = T::ZERO;
                }
            }
        }
    }
}

/// Rows of a strided `B` fetched ahead of the one [`pack_b`] copies.
const PACK_B_AHEAD: usize = 4;

/// Copies `live` values from `src` to `dst` and zeroes `dst` up to `nr`: a copy of a
/// known size (inlined as a few vector moves, not a call) for the widths a strip has.
#[inline(always)]
unsafe fn copy_strip_row<T: Elem>(src: *const T, dst: *mut T, live: usize, nr: usize) {
    match (live, nr) {
        (32, 32) => std::ptr::copy_nonoverlapping(src.cast::<[T; 32]>(), dst.cast::<[T; 32]>(), 1),
        (16, 16) => std::ptr::copy_nonoverlapping(src.cast::<[T; 16]>(), dst.cast::<[T; 16]>(), 1),
        (8, 8) => std::ptr::copy_nonoverlapping(src.cast::<[T; 8]>(), dst.cast::<[T; 8]>(), 1),
        _ => {
            std::ptr::copy_nonoverlapping(src, dst, live);
            for j in live..nr {
                *dst.add(j) = T::ZERO;
            }
        }
    }
}

/// Rows of a packed `B` strip (32 values each) that the AVX-512 microkernel fetches ahead of
/// the one it multiplies. A constant `B` packed whole larger than the caches streams from
/// memory strip by strip, with four to six strips read side by side; fetching 4 KiB ahead of
/// each sped up 8 x Linear(2048, 2048) at batch 16 from 18.9-19.8 to 15.5-16.2 ms (one
/// thread; onnxruntime 17.3-18.5 in the same runs), and cost nothing measurable on panels in
/// cache (256x768x768: 147 GFLOP/s both ways).
const PACKED_B_AHEAD_ROWS: isize = 32;

/// Asks for the cache lines of `bytes` bytes from `at` (a hint: no fault, no effect on
/// results).
#[inline(always)]
fn prefetch_span(at: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    prefetch_span_hint::<{ std::arch::x86_64::_MM_HINT_T0 }>(at, bytes);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, bytes);
}

/// Like [`prefetch_span`], into the second-level cache only (a panel asked for ahead of its
/// use would otherwise push the panels in use out of the first).
#[inline(always)]
fn prefetch_span_l2(at: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    prefetch_span_hint::<{ std::arch::x86_64::_MM_HINT_T1 }>(at, bytes);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, bytes);
}

/// [`prefetch_span`] with the prefetch hint `HINT`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_span_hint<const HINT: i32>(at: *const u8, bytes: usize) {
    let mut off = 0;
    while off < bytes {
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe { std::arch::x86_64::_mm_prefetch::<HINT>(at.wrapping_add(off).cast()) };
        off += 64;
    }
}

/// Lines of a weight that a microkernel call asks for ahead (into the second-level cache):
/// `lines` cache lines from `at`.
#[derive(Copy, Clone)]
pub struct Ahead {
    at: *const u8,
    lines: usize,
}

impl Ahead {
    /// Nothing to ask for.
    pub const NONE: Ahead = Ahead {
        at: std::ptr::null(),
        lines: 0,
    };

    /// Asks for all the lines at once.
    #[inline(always)]
    fn all_now(self) {
        prefetch_span_l2(self.at, self.lines * 64);
    }
}

/// Runs of a weight packed whole asked for ahead of their use (into the second-level cache), a
/// share at each microkernel call: `runs` runs of `run_bytes`, `stride` bytes apart. The
/// default asks for nothing.
#[derive(Default)]
struct Stream {
    next: usize,
    run_end: usize,
    run_bytes: usize,
    stride: usize,
    runs_left: usize,
    step: usize,
}

impl Stream {
    /// The runs from address `at`, spread over `calls` calls.
    fn new(at: usize, run_bytes: usize, stride: usize, runs: usize, calls: usize) -> Stream {
        let total = run_bytes.saturating_mul(runs);
        Stream {
            next: at,
            run_end: at.wrapping_add(run_bytes),
            run_bytes,
            stride,
            runs_left: runs.saturating_sub(1),
            step: total.div_ceil(calls.max(1)).next_multiple_of(64),
        }
    }

    /// The next share, within one run (the share's rest, past a run's end, is not asked for).
    #[inline(always)]
    fn take(&mut self) -> Ahead {
        if self.next >= self.run_end {
            return Ahead::NONE;
        }
        let bytes = self.step.min(self.run_end - self.next);
        let ahead = Ahead {
            at: self.next as *const u8,
            lines: bytes.div_ceil(64),
        };
        self.next += bytes;
        if self.next == self.run_end && self.runs_left > 0 {
            self.next = self.run_end - self.run_bytes + self.stride;
            self.run_end = self.next + self.run_bytes;
            self.runs_left -= 1;
        }
        ahead
    }
}

/// Asks for every cache line that the `bytes` bytes from `at` touch (a hint).
#[inline(always)]
fn prefetch_lines(at: *const u8, bytes: usize) {
    let first = at as usize & !63;
    let end = at as usize + bytes;
    prefetch_span(first as *const u8, end - first);
}

/// A product's blocking in `usize`, with the microkernel chosen.
struct Plan<T> {
    mc: usize,
    kc: usize,
    nc: usize,
    pack_b: bool,
    n_ic: usize,
    n_jc: usize,
    kernel: MicroKernel<T>,
    nr: usize,
    row_kernel: Option<RowKernel<T>>,
    strip_kernel: Option<StripKernel<T>>,
    prefetch_packed: bool,
}

impl<T: Kernels> Plan<T> {
    /// The units `begin..end` that thread `t` of `threads` runs, of `batches` products of `m
    /// x n`: consecutive runs of about equal work, a unit's work its strips of [`MR`] rows
    /// times its tiles of `nr` columns. Equal numbers of units split a short last column
    /// block badly: 196 columns in blocks of 128 are 4 and 3 tiles, and ResNet-50's
    /// 256x196x1024 at two threads ran 57% of its work on one (1.6x one thread's speed).
    fn share(
        &self,
        batches: usize,
        m: usize,
        n: usize,
        t: usize,
        threads: usize,
    ) -> (usize, usize) {
        let per_batch = self.n_ic * self.n_jc;
        let units = batches * per_batch;
        // Equal column blocks (or many units, a batched product's): equal counts are equal
        // work, up to the rows `balanced_rows` evened out, and cost no walk over the units.
        if threads <= 1 || units == 0 || n % self.nc.max(1) == 0 || units > SHARE_MAX_UNITS {
            return (units * t / threads.max(1), units * (t + 1) / threads.max(1));
        }
        let work = |unit: usize| {
            let (jc, ic) = (unit % per_batch / self.n_ic, unit % self.n_ic);
            let rows = (m - (ic * self.mc).min(m)).min(self.mc);
            let cols = (n - (jc * self.nc).min(n)).min(self.nc);
            rows.div_ceil(MR) * cols.div_ceil(self.nr.max(1))
        };
        let total: usize = (0..units).map(work).sum();
        // The unit boundary nearest each thread's start, `total * t / threads`.
        let boundary = |t: usize| {
            if t == 0 {
                return 0;
            }
            if t >= threads {
                return units;
            }
            let target = total * t / threads;
            let mut done = 0;
            for unit in 0..units {
                let next = done + work(unit);
                if next > target {
                    return if target - done <= next - target {
                        unit
                    } else {
                        unit + 1
                    };
                }
                done = next;
            }
            units
        };
        let begin = boundary(t);
        (begin, boundary(t + 1).max(begin))
    }

    fn new(blocking: &GemmBlocking, m: usize, n: usize) -> Plan<T> {
        let (kernel, nr) = if n <= NARROW_N {
            T::narrow_kernel(isa())
        } else {
            T::kernel(isa())
        };
        let (mc, nc) = (blocking.mc as usize, blocking.nc as usize);
        Plan {
            mc,
            kc: blocking.kc as usize,
            nc,
            pack_b: blocking.pack_b,
            n_ic: m.div_ceil(mc),
            n_jc: n.div_ceil(nc),
            kernel,
            nr,
            row_kernel: T::row_kernel(isa()),
            strip_kernel: T::strip_kernel(isa()),
            prefetch_packed: blocking.prefetch_packed,
        }
    }
}

/// Runs units `begin..end` (of one batch index's product `p`, numbered column block major)
/// with panels at `a_buf` (`mc x kc`) and `b_buf` (`kc x nc`, unused when `B` is read in
/// place).
unsafe fn run_units<T: Kernels>(
    p: &Product<T>,
    packer: Option<(&dyn PackB<T>, usize, Side)>,
    plan: &Plan<T>,
    begin: usize,
    end: usize,
    a_buf: *mut T,
    b_buf: *mut T,
) {
    // The packer of `A`'s panels (it packs `A^T`'s strips of `MR` columns), or of `B`'s,
    // whose `B` is never packed whole.
    let packer_a = packer.filter(|&(_, _, side)| side == Side::A);
    let packer = packer.filter(|&(_, _, side)| side == Side::B);
    let b_packed = p.b_packed.filter(|_| packer.is_none());
    let mut unit = begin;
    while unit < end {
        let jc = unit / plan.n_ic;
        // The row blocks of this column block in the range share each `B` panel.
        let ic_begin = unit % plan.n_ic;
        let ic_end = (end - jc * plan.n_ic).min(plan.n_ic);
        let j0 = jc * plan.nc;
        let cols = (p.n - j0).min(plan.nc);
        if let Some(row) = plan.row_kernel.filter(|_| {
            p.m == 1
                && packer_a.is_none()
                && p.a_packed.is_none()
                && b_packed.is_none()
                && packer.is_none()
                && !plan.pack_b
                && p.b.cs == 1
                && p.c.cs == 1
                && plan.n_ic == 1
        }) {
            // One row: every unit is one column block; the row kernel takes them all at once.
            let cols = (end * plan.nc).min(p.n) - j0;
            row(
                p.k,
                p.a.at(0, 0),
                p.a.cs,
                p.b.at(0, j0),
                p.b.rs,
                cols,
                p.c.at(0, j0),
                p.alpha,
                p.accumulate,
            );
            if !p.epilogue.is_none() {
                finish_block(
                    Mat {
                        ptr: p.c.at(0, j0),
                        ..p.c
                    },
                    0,
                    1,
                    cols,
                    p.epilogue,
                );
            }
            return;
        }
        if let Some((strip_kernel, packed)) = plan.strip_kernel.zip(b_packed).filter(|_| {
            p.m <= STRIP_MAX_M
                && packer_a.is_none()
                && p.a_packed.is_none()
                && p.c.cs == 1
                && plan.n_ic == 1
        }) {
            // Few rows times a `B` packed whole: strip by strip (units are column blocks,
            // whole strips each), each strip's rows read once from memory. One row sums all of
            // `K` at once; more rows go in groups per run of `KC`, the later groups reading
            // the run from cache.
            let strip = PACKED_B_STRIP as usize;
            let end_col = (end * plan.nc).min(p.n);
            let kc = if p.m == 1 { p.k } else { plan.kc };
            let groups = p.m.div_ceil(STRIP_ROWS);
            let mut p0 = 0;
            while p0 < p.k {
                let k_run = (p.k - p0).min(kc);
                let beta = p.accumulate || p0 > 0;
                let mut j = j0;
                while j < end_col {
                    let cols = (end_col - j).min(strip);
                    for g in 0..groups {
                        // Groups as even as possible: `rows` from row `r0`.
                        let r0 = g * p.m / groups;
                        let rows = (g + 1) * p.m / groups - r0;
                        strip_kernel(
                            k_run,
                            p.a.at(r0, p0),
                            p.a.rs,
                            p.a.cs,
                            rows,
                            packed.add(j * p.k + p0 * strip),
                            cols,
                            p.c.at(r0, j),
                            p.c.rs,
                            p.alpha,
                            beta,
                        );
                    }
                    j += strip;
                }
                p0 += k_run;
            }
            if !p.epilogue.is_none() {
                finish_block(
                    Mat {
                        ptr: p.c.at(0, j0),
                        ..p.c
                    },
                    0,
                    p.m,
                    end_col - j0,
                    p.epilogue,
                );
            }
            return;
        }
        let mut p0 = 0;
        while p0 < p.k {
            let kc = (p.k - p0).min(plan.kc);
            let beta = p.accumulate || p0 > 0;
            let last_k = p0 + kc == p.k;
            let (b_strips, b_rs) = if let Some(packed) = b_packed {
                // Rows `p0..` of the strips from column `j0` (a multiple of the strip width).
                let strip = PACKED_B_STRIP as usize;
                (packed.add(j0 * p.k + p0 * strip), strip as isize)
            } else if let Some((packer, batch, _)) = packer {
                packer.pack(batch, b_buf, p0, kc, j0, cols, plan.nr);
                (b_buf as *const T, plan.nr as isize)
            } else if plan.pack_b {
                pack_b(b_buf, p.b, p0, kc, j0, cols, plan.nr);
                (b_buf as *const T, plan.nr as isize)
            } else {
                (p.b.at(p0, j0) as *const T, p.b.rs)
            };
            // `B` packed whole that streams from memory (`prefetch_packed`, a weight: the
            // product run transposed): the first row block's calls on one strip ask for the
            // next strip's rows of this run of `K` (32 KiB for a `KC` of 256; a whole run of
            // a wide column block, 2 MiB for 2048 columns, would flood the cache).
            let mut b_ahead = Stream::default();
            if let Some(packed) = b_packed.filter(|_| plan.prefetch_packed) {
                let strip = PACKED_B_STRIP as usize;
                let strips = cols.div_ceil(strip);
                let size = std::mem::size_of::<T>();
                let first_rows = (p.m - ic_begin * plan.mc).min(plan.mc);
                let calls_per_strip = first_rows.div_ceil(MR) * strip.div_ceil(plan.nr);
                b_ahead = Stream::new(
                    packed.add((j0 + strip) * p.k + p0 * strip) as usize,
                    kc * strip * size,
                    strip * p.k * size,
                    strips.saturating_sub(1),
                    calls_per_strip * strips.saturating_sub(1),
                );
            }
            for ic in ic_begin..ic_end {
                let i0 = ic * plan.mc;
                let rows = (p.m - i0).min(plan.mc);
                // The strip of rows from `ir` at `a_panel + ir * a_step`, value `(i, p)` of it
                // at `i * a_rs + p * a_ks`.
                let (a_panel, a_step, a_rs, a_ks) = match p.a_packed {
                    // Strips `i0 / MR..` of the run of `K` at `p0` (`i0` is a multiple of MR).
                    Some(packed) => (
                        packed.add(p0 * p.m.div_ceil(MR) * MR + i0 * kc),
                        kc as isize,
                        1,
                        MR as isize,
                    ),
                    // `A^T`'s strips of `MR` columns are `A`'s strips of `MR` rows, laid out
                    // as `pack_a` lays them.
                    None if packer_a.is_some() => {
                        if let Some((packer, batch, _)) = packer_a {
                            packer.pack(batch, a_buf, p0, kc, i0, rows, MR);
                        }
                        (a_buf as *const T, kc as isize, 1, MR as isize)
                    }
                    // Contiguous rows are read where they are: the microkernel broadcasts one
                    // value of each row per step, so a packed copy would only cost its writes.
                    None if p.a.cs == 1 => (p.a.at(i0, p0) as *const T, p.a.rs, p.a.rs, 1),
                    None => {
                        pack_a(a_buf, p.a, i0, rows, p0, kc);
                        (a_buf as *const T, kc as isize, 1, MR as isize)
                    }
                };
                // `A` packed whole that streams from memory (`prefetch_packed`, a weight):
                // each call below asks for its share of the panel after this one (this block's
                // rows in the next run of `K`, or the next block's in this run), so that the
                // stream overlaps the multiply-adds; else the first pass over a panel's tiles
                // waits on memory and the others find it in cache.
                let mut a_ahead = Stream::default();
                if let Some(packed) = p.a_packed.filter(|_| plan.prefetch_packed) {
                    let mpad = p.m.div_ceil(MR) * MR;
                    let next = if ic + 1 < ic_end {
                        let i1 = i0 + plan.mc;
                        let rows1 = (p.m - i1).min(plan.mc).div_ceil(MR) * MR;
                        Some((packed.add(p0 * mpad + i1 * kc), rows1 * kc))
                    } else if p0 + kc < p.k {
                        let (p1, kc1) = (p0 + kc, (p.k - p0 - kc).min(plan.kc));
                        let i1 = ic_begin * plan.mc;
                        let rows1 = (p.m - i1).min(plan.mc).div_ceil(MR) * MR;
                        Some((packed.add(p1 * mpad + i1 * kc1), rows1 * kc1))
                    } else {
                        None
                    };
                    if let Some((at, len)) = next {
                        let calls = rows.div_ceil(MR) * cols.div_ceil(plan.nr);
                        let bytes = len * std::mem::size_of::<T>();
                        a_ahead = Stream::new(at as usize, bytes, 0, 1, calls);
                    }
                }
                // The residual the epilogue adds: read a tile ahead.
                let residual = p.epilogue.add.filter(|_| last_k && p.c.cs == 1);
                let mut jr = 0;
                while jr < cols {
                    let nr = (cols - jr).min(plan.nr);
                    let (b, b_cols) = if b_packed.is_some() {
                        // Column `jr` of the strips: whole strips of `k` rows apart.
                        let strip = PACKED_B_STRIP as usize;
                        (b_strips.add(jr / strip * strip * p.k + jr % strip), plan.nr)
                    } else if plan.pack_b || packer.is_some() {
                        (b_strips.add(jr * kc), plan.nr)
                    } else {
                        (b_strips.wrapping_add(jr), nr)
                    };
                    let mut ir = 0;
                    while ir < rows {
                        let mr = (rows - ir).min(MR);
                        let c = Mat {
                            ptr: p.c.at(i0 + ir, j0 + jr),
                            ..p.c
                        };
                        // The tile is complete after the last run of `K`: finished as it
                        // is stored (a pass over the whole block afterwards read it back from
                        // L2: 16% of a 16-channel pointwise convolution's time; reading the
                        // stored tile back, 8% of MobileNetV2's).
                        let finish =
                            (last_k && !p.epilogue.is_none()).then_some((i0 + ir, &p.epilogue));
                        let mut ahead = a_ahead.take();
                        if ahead.lines == 0 && ic == ic_begin {
                            ahead = b_ahead.take();
                        }
                        if let Some(add) = residual {
                            // The next tile's rows of the residual: a row of `C` apart, which
                            // the hardware prefetchers do not follow (ResNet-50's 56x56 1x1
                            // convolutions with the block's residual, 256x3136x64, one
                            // thread: 1.09-1.13 -> 0.82-1.0 ms).
                            let (ir1, jr1) = if ir + MR < rows {
                                (ir + MR, jr)
                            } else {
                                (0, jr + plan.nr)
                            };
                            if jr1 < cols {
                                let bytes = (cols - jr1).min(plan.nr) * std::mem::size_of::<T>();
                                for i in ir1..(ir1 + MR).min(rows) {
                                    let at = p.c.at(i0 + i, j0 + jr1).wrapping_offset(add);
                                    prefetch_lines(at.cast(), bytes);
                                }
                            }
                        }
                        (plan.kernel)(
                            kc,
                            a_panel.wrapping_offset(ir as isize * a_step),
                            a_rs,
                            a_ks,
                            b,
                            b_rs,
                            b_cols,
                            mr,
                            nr,
                            c,
                            p.alpha,
                            beta,
                            finish,
                            ahead,
                        );
                        ir += MR;
                    }
                    jr += plan.nr;
                }
            }
            p0 += kc;
        }
        unit = (jc + 1) * plan.n_ic;
    }
}

/// Units from which [`Plan::share`] splits by count, not work (its walk over the units runs on
/// every thread at every call).
const SHARE_MAX_UNITS: usize = 256;

/// Rows below which a product whose `B` panels come from a packer, and whose threads would
/// each pack the same panel (fewer column blocks and batch indices than threads), runs on one
/// thread: on the zoo's 128-row 4x4 convolutions two threads each packing the column matrix
/// took 0.11 ms against one thread's 0.067.
const SHARED_PANEL_MIN_ROWS: u64 = 256;

/// `blocking` with its row blocks evened out: the fewest blocks of at most `mc` rows (a
/// multiple of `MR`) whose units split evenly over `threads` (when that needs no more than
/// one block per `MR` rows), each as tall as the others. 128 rows are then two blocks of 66
/// and 62 rather than 96 and 32, which two threads share equally. Only `mc` changes (never
/// up), so the planned panels still hold a block and every sum runs over `K` as before.
fn balanced_rows(
    blocking: &GemmBlocking,
    batches: usize,
    m: usize,
    n: usize,
    threads: usize,
) -> GemmBlocking {
    let mc = blocking.mc as usize;
    if mc == 0 || m == 0 {
        return *blocking;
    }
    let nc = blocking.nc.max(1) as usize;
    let n_jc = n.div_ceil(nc).max(1);
    let max_blocks = m.div_ceil(MR);
    let mut blocks = m.div_ceil(mc);
    // A last column block narrower than the others: rows in at least four blocks per thread,
    // so that the units, split by their work (`Plan::share`), can even out (256x196 in
    // blocks of 128 columns at two threads: a block of 4 tiles and one of 3, eight row
    // blocks of 36 rows split 48/52).
    if threads > 1 && n_jc > 1 && n % nc != 0 {
        blocks = blocks.max((4 * threads).div_ceil(batches).min(max_blocks));
    }
    if threads > 1 {
        let mut even = blocks;
        while (batches * even * n_jc) % threads != 0 && even < max_blocks {
            even += 1;
        }
        if (batches * even * n_jc) % threads == 0 {
            blocks = even;
        }
    }
    let rows = m.div_ceil(blocks).div_ceil(MR) * MR;
    GemmBlocking {
        mc: (rows as u64).min(blocking.mc),
        ..*blocking
    }
}

/// Runs `f(0..t)` on `t` threads and returns when all have finished (a pool's broadcast).
pub type Broadcast<'a> = &'a dyn Fn(usize, &(dyn Fn(usize) + Sync));

/// Runs `p` for batch indices `0..batches` (batch `b`'s operands found by `at(b)`), split
/// over at most `threads` threads (never more than `blocking.slots`) that `broadcast(t, f)`
/// runs `f(0..t)` on, returning when all have finished; packing into `slots`.
///
/// # Safety
/// Every product's operands are valid for its dims; `slots` is `None` or holds
/// `blocking.slots` slots of `blocking.slot_bytes()` bytes, 64-aligned, that nothing else
/// uses meanwhile; `threads > 1` only when distinct (batch, row, column) write distinct
/// elements.
pub unsafe fn run<T: Kernels>(
    batches: usize,
    at: &(dyn Fn(usize) -> Product<T> + Sync),
    blocking: &GemmBlocking,
    slots: Option<*mut u8>,
    threads: usize,
    broadcast: Broadcast<'_>,
) {
    run_with(batches, at, None, blocking, slots, threads, broadcast);
}

/// [`run`] with `B`'s panels packed by `packer` (each product's `b` is not read): the one
/// blocking loop, for a `B` that exists only as a rule (an implicit im2col matrix).
/// `blocking` must pack `B` (`pack_b`).
///
/// # Safety
/// As [`run`]; `packer` packs any panel of each batch index's `k x n` `B`.
pub unsafe fn run_packing_b<T: Kernels>(
    batches: usize,
    at: &(dyn Fn(usize) -> Product<T> + Sync),
    packer: &dyn PackB<T>,
    blocking: &GemmBlocking,
    slots: Option<*mut u8>,
    threads: usize,
    broadcast: Broadcast<'_>,
) {
    let blocking = GemmBlocking {
        pack_b: true,
        ..*blocking
    };
    run_with(
        batches,
        at,
        Some((packer, Side::B)),
        &blocking,
        slots,
        threads,
        broadcast,
    );
}

/// Which operand a caller's packer fills.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Side {
    A,
    B,
}

/// [`run`] with `A`'s panels packed by `packer`, which packs `A^T` (`k x m`: its strips of
/// `MR` columns are `A`'s strips of `MR` rows; each product's `a` is not read), and `B`
/// packed whole (`b_packed`): a convolution run transposed, `C^T = col(X)^T W^T`, its column
/// matrix packed into `A` panels and its output channels in the vector lanes.
/// `blocking` must pack `A` (not [`GemmBlocking::without_a_panel`]).
///
/// # Safety
/// As [`run`]; `packer` packs any panel of each batch index's `k x m` `A^T`; every product
/// has `b_packed`.
pub unsafe fn run_packing_a<T: Kernels>(
    batches: usize,
    at: &(dyn Fn(usize) -> Product<T> + Sync),
    packer: &dyn PackB<T>,
    blocking: &GemmBlocking,
    slots: Option<*mut u8>,
    threads: usize,
    broadcast: Broadcast<'_>,
) {
    run_with(
        batches,
        at,
        Some((packer, Side::A)),
        blocking,
        slots,
        threads,
        broadcast,
    );
}

unsafe fn run_with<T: Kernels>(
    batches: usize,
    at: &(dyn Fn(usize) -> Product<T> + Sync),
    packer: Option<(&dyn PackB<T>, Side)>,
    blocking: &GemmBlocking,
    slots: Option<*mut u8>,
    threads: usize,
    broadcast: Broadcast<'_>,
) {
    let first = at(0);
    let mut threads = threads.min(blocking.slots as usize).max(1);
    // Threads splitting one column block's rows each pack its `B` panel again. From a packer
    // (an implicit im2col matrix) that costs about `1 / m` of the product: below
    // `SHARED_PANEL_MIN_ROWS` rows, one thread does it all.
    let column_blocks = first.n.div_ceil(blocking.nc.max(1) as usize);
    let packs_b = packer.is_some_and(|(_, side)| side == Side::B);
    if packs_b && batches * column_blocks < threads && (first.m as u64) < SHARED_PANEL_MIN_ROWS {
        threads = 1;
    }
    // `B` packed whole has no panel to pack (a packer's `B` never comes packed whole).
    let unpacked_b = GemmBlocking {
        pack_b: blocking.pack_b && (first.b_packed.is_none() || packs_b),
        ..*blocking
    };
    // A product whose `A` panels come from a packer and whose `B` comes packed whole (a
    // convolution run transposed, `B` its weight) splits its columns over the threads when
    // it has at least as many columns as rows: each thread then streams its share of the
    // weight (ResNet-18's 9 MiB 512-channel 7x7 weights from memory) and packs every `A`
    // panel itself, where split rows would each stream all of it.
    let packs_a = packer.is_some_and(|(_, side)| side == Side::A);
    let balanced = if packs_a && threads > 1 && first.n >= first.m {
        GemmBlocking {
            nc: (first.n.div_ceil(threads) as u64).div_ceil(GEMM_NR_MAX) * GEMM_NR_MAX,
            ..unpacked_b
        }
    } else {
        balanced_rows(&unpacked_b, batches, first.m, first.n, threads)
    };
    let blocking = &balanced;
    let plan = Plan::<T>::new(blocking, first.m, first.n);
    let per_batch = plan.n_ic * plan.n_jc;
    let units = batches * per_batch;
    let threads = threads.min(units).max(1);
    // Slots planned without an `A` panel serve only a product that never packs `A`.
    let never_packs_a = packer.is_none_or(|(_, side)| side == Side::B)
        && (first.a_packed.is_some() || first.a.cs == 1);
    let slots = slots.filter(|_| blocking.slots > 0 && (blocking.pack_a || never_packs_a));
    let slot_bytes = blocking.slot_bytes() as usize;
    let a_bytes = blocking.a_bytes() as usize;
    // A product that packs nothing (`A` packed whole or read in place, `B` packed whole) runs
    // in the planned blocking with no panels at all.
    let panel_free = never_packs_a && !blocking.pack_b;
    let slots = SendPtr(slots.unwrap_or(std::ptr::null_mut()));
    let a_packed = first.a_packed.is_some();

    let work = |t: usize| {
        let slots = slots.get();
        let mut stack = std::mem::MaybeUninit::<StackPanels<T>>::uninit();
        let (a_buf, b_buf, plan_here);
        if panel_free {
            plan_here = Plan::<T>::new(blocking, first.m, first.n);
            (a_buf, b_buf) = (std::ptr::null_mut(), std::ptr::null_mut());
        } else if slots.is_null() {
            // No planned scratch: small panels on this thread's stack.
            let small = StackPanels::<T>::blocking(blocking, a_packed);
            plan_here = Plan::<T>::new(&small, first.m, first.n);
            (a_buf, b_buf) = StackPanels::panels(&mut stack);
        } else {
            let slot = slots.add(t * slot_bytes);
            plan_here = Plan::<T>::new(blocking, first.m, first.n);
            (a_buf, b_buf) = (slot.cast::<T>(), slot.add(a_bytes).cast::<T>());
        }
        let plan = &plan_here;
        let per_batch = plan.n_ic * plan.n_jc;
        // This thread's units in this thread's blocking (stack panels are smaller, so the
        // units are renumbered in theirs).
        let (begin, end) = plan.share(batches, first.m, first.n, t, threads);
        let mut unit = begin;
        while unit < end {
            let batch = unit / per_batch;
            let batch_end = ((batch + 1) * per_batch).min(end);
            let p = at(batch);
            run_units(
                &p,
                packer.map(|(packer, side)| (packer, batch, side)),
                plan,
                unit - batch * per_batch,
                batch_end - batch * per_batch,
                a_buf,
                b_buf,
            );
            unit = batch_end;
        }
    };
    if threads > 1 {
        broadcast(threads, &work);
    } else {
        work(0);
    }
}

#[derive(Copy, Clone)]
struct SendPtr(*mut u8);
// SAFETY: each thread uses its own slot of the scratch.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    /// The pointer; a method so closures capture the whole (Sync) struct.
    fn get(self) -> *mut u8 {
        self.0
    }
}

/// Bytes of the panels on a thread's stack, for products without planned scratch: 48 rows
/// and 64 columns of a `KC` of [`GEMM_KC_BYTES`] (112 KiB of a thread's stack).
const STACK_A_BYTES: usize = 48 * GEMM_KC_BYTES as usize;
const STACK_B_BYTES: usize = GEMM_KC_BYTES as usize * 64;

#[repr(C, align(64))]
struct StackPanels<T> {
    a: [u8; STACK_A_BYTES],
    b: [u8; STACK_B_BYTES],
    _elem: std::marker::PhantomData<T>,
}

impl<T: Elem> StackPanels<T> {
    /// The blocking of a product whose panels live on the stack: the planned `KC` (so each
    /// value sums its terms in the order planned panels would: a plan that leaves a
    /// product's panels out where they would raise its peak computes the same bits), at most
    /// as many rows and columns per panel as fit (48 and 64 for a whole `KC`). With `A`
    /// packed whole (`a_packed`) only the `B` panel narrows.
    fn blocking(planned: &GemmBlocking, a_packed: bool) -> GemmBlocking {
        let row_bytes = (planned.kc * T::SIZE as u64).max(1);
        let cols = STACK_B_BYTES as u64 / row_bytes;
        let nc = planned
            .nc
            .min((cols / GEMM_NR_MAX * GEMM_NR_MAX).max(GEMM_NR_MAX));
        if a_packed {
            return GemmBlocking { nc, ..*planned };
        }
        let rows = STACK_A_BYTES as u64 / row_bytes;
        GemmBlocking {
            mc: planned.mc.min((rows / GEMM_MR * GEMM_MR).max(GEMM_MR)),
            nc,
            ..*planned
        }
    }

    /// The two panels of uninitialized stack memory (packing writes before any read).
    fn panels(stack: &mut std::mem::MaybeUninit<StackPanels<T>>) -> (*mut T, *mut T) {
        let base = stack.as_mut_ptr();
        // SAFETY: field addresses of a live (if uninitialized) value; nothing is read.
        unsafe {
            (
                std::ptr::addr_of_mut!((*base).a).cast(),
                std::ptr::addr_of_mut!((*base).b).cast(),
            )
        }
    }
}

/// `c = alpha * a @ b + (accumulate ? c : 0)` on the calling thread with stack panels: for
/// callers inside other kernels (the low-bit products' tiles).
///
/// # Safety
/// The operands are valid for the product's dims.
pub unsafe fn product_on_stack<T: Kernels>(p: &Product<T>) {
    if p.m == 0 || p.n == 0 || p.k == 0 {
        return;
    }
    let pack_b = !gemm_b_in_place(p.m as u64, p.b.cs as i64);
    let blocking = GemmBlocking::new(
        1,
        p.m as u64,
        p.n as u64,
        p.k as u64,
        T::SIZE as u64,
        pack_b,
    );
    run(1, &|_| *p, &blocking, None, 1, &|_, f| f(0));
}

const _: () = assert!(GEMM_NR_MAX >= 32 && GEMM_SMALL_M >= 1);
