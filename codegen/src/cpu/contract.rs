//! Contractions ([`Contract`]) run through memc's GEMM (`gemm.rs`), batches and blocks of
//! each product split over the worker pool. A `B` that is a convolution's implicit column
//! matrix ([`Im2colView`]) is packed panel by panel straight from the input
//! ([`Im2colPacker`], memc-gemm's `run_packing_b`): no column matrix is ever written.
//!
//! Guarantees: for a validated contraction every pointer handed to the GEMM addresses
//! elements the validator bounded, and the packing scratch is the planned range
//! ([`Contract::pack`]) or the threads' stacks; several threads run a contraction only when
//! its result elements are provably distinct for distinct (batch, row, column), and tiny ones
//! run on the calling thread. Nothing is allocated.

use super::fuse::Fusion;
use super::pool::WorkerPool;
use super::regions::RegionPtrs;
use crate::kernel::{Contract, ContractB, Im2colView, MatView, Region, Scalar, MAX_IM2COL_AXES};
use memc_gemm::{self as gemm, Epilogue, Kernels, Mat, Product};

/// Products with at least this many multiply-adds (`batches * m * n * k`) use several threads
/// (and have planned panels).
const PARALLEL_MNK: u64 = memc_gemm::GEMM_PARALLEL_MACS;

impl RegionPtrs {
    /// The address of `view`'s element (batch `b`, 0, 0), as a `T` pointer.
    fn origin<T>(self, view: &MatView, batch_offset: i64) -> *mut T {
        self.base(view.region)
            .wrapping_offset(view.byte_offset as isize)
            .cast::<T>()
            .wrapping_offset(batch_offset as isize)
    }

    /// The address of `view`'s input element `byte_offset` names (batch index 0, channel 0,
    /// position 0), as a `T` pointer.
    fn im2col_origin<T>(self, view: &Im2colView) -> *const T {
        self.base(view.region)
            .wrapping_offset(view.byte_offset as isize)
            .cast::<T>()
            .cast_const()
    }
}

/// Elements from batch index 0 to batch index `linear` (row-major over `batch`) of a view
/// with `strides` along the batch axes.
fn batch_offset(batch: &[u64], strides: &[i64], mut linear: u64) -> i64 {
    let mut offset = 0i64;
    for (&extent, &stride) in batch.iter().zip(strides).rev() {
        offset = offset.wrapping_add(((linear % extent) as i64).wrapping_mul(stride));
        linear /= extent;
    }
    offset
}

/// Runs `c` over all its batch indices.
///
/// # Safety
/// As [`super::CpuProgram::run_kernel`]: the regions are at least as large as the sizes the
/// contraction was validated against.
pub(crate) unsafe fn run_contract(
    c: &Contract,
    fusion: &Fusion,
    regions: RegionPtrs,
    pool: &WorkerPool,
) {
    match c.elem {
        Scalar::F32 => {
            let alpha = f64::from_bits(c.alpha) as f32;
            let epilogue = epilogue_of(fusion, regions, |v| v as f32);
            if !run_winograd(c, epilogue, fusion, regions, pool, alpha)
                && !run_transposed(c, epilogue, fusion, regions, pool, alpha)
                && !run_direct_conv(c, epilogue, fusion, regions, pool, alpha)
            {
                run_typed::<f32>(c, epilogue, fusion, regions, pool, alpha)
            }
        }
        Scalar::F64 => {
            let epilogue = epilogue_of(fusion, regions, |v| v);
            run_typed::<f64>(c, epilogue, fusion, regions, pool, f64::from_bits(c.alpha))
        }
        // `CpuProgram::compile` rejects other element types, so nothing reaches here.
        _ => {}
    }
}

/// Elements from the fused bias's first to batch index `linear`'s (a grouped convolution's
/// group's channels; 0 without a bias or groups).
fn bias_shift(fusion: &Fusion, linear: u64) -> isize {
    fusion.bias.map_or(0, |b| b.shift(linear) as isize)
}

/// `epilogue` for batch index `linear`, its bias moved on to that index's.
fn epilogue_at<T>(epilogue: Epilogue<T>, fusion: &Fusion, linear: u64) -> Epilogue<T> {
    Epilogue {
        bias: epilogue
            .bias
            .map(|(ptr, stride)| (ptr.wrapping_offset(bias_shift(fusion, linear)), stride)),
        ..epilogue
    }
}

/// `fusion` in the element type `T` (`to` converts the clamp's bounds): the bias's first
/// element and the distance between its rows, the residual, the clamp.
fn epilogue_of<T>(fusion: &Fusion, regions: RegionPtrs, to: fn(f64) -> T) -> Epilogue<T> {
    Epilogue {
        bias: fusion.bias.map(|b| {
            let ptr = regions
                .base(b.region)
                .wrapping_offset(b.byte_offset as isize);
            (ptr.cast::<T>().cast_const(), b.stride as isize)
        }),
        add: fusion.add,
        clamp: fusion.clamp.map(|(lo, hi)| (to(lo), to(hi))),
    }
}

unsafe fn run_typed<T: Kernels>(
    c: &Contract,
    epilogue: Epilogue<T>,
    fusion: &Fusion,
    regions: RegionPtrs,
    pool: &WorkerPool,
    alpha: T,
) {
    if c.m == 0 || c.n == 0 || c.batch.contains(&0) {
        return;
    }
    let n_batches: u64 = c.batch.iter().product();
    let batch_offsets =
        |linear: u64, view: &MatView| batch_offset(&c.batch, &view.batch_strides, linear);
    if c.k == 0 {
        let (c_rows, c_cols) = (c.m as usize, c.n as usize);
        if !c.accumulate {
            for linear in 0..n_batches {
                let dst: *mut T = regions.origin(&c.c, batch_offsets(linear, &c.c));
                for r in 0..c.m as i64 {
                    for col in 0..c.n as i64 {
                        let at = r
                            .wrapping_mul(c.c.row_stride)
                            .wrapping_add(col.wrapping_mul(c.c.col_stride));
                        // SAFETY: (r, col) is inside the validated result matrix.
                        unsafe { dst.wrapping_offset(at as isize).write(T::ZERO) };
                    }
                }
            }
        }
        if !epilogue.is_none() {
            for linear in 0..n_batches {
                let c = Mat {
                    ptr: regions.origin::<T>(&c.c, batch_offsets(linear, &c.c)),
                    rs: c.c.row_stride as isize,
                    cs: c.c.col_stride as isize,
                };
                let epilogue = epilogue_at(epilogue, fusion, linear);
                // SAFETY: the block is the validated result matrix.
                unsafe { gemm::finish_block(c, 0, c_rows, c_cols, epilogue) };
            }
        }
        return;
    }
    let mat = |view: &MatView, linear: u64| Mat {
        ptr: regions.origin::<T>(view, batch_offsets(linear, view)),
        rs: view.row_stride as isize,
        cs: view.col_stride as isize,
    };
    let at = |batch: usize| {
        // Batch index `batch`'s matrix of an operand packed whole in the weights section.
        let packed_at = |packed: &crate::kernel::PackedOperand| {
            let offset = batch_offset(&c.batch, &packed.batch_strides, batch as u64);
            regions
                .base(Region::Weights)
                .wrapping_add(packed.byte_offset as usize)
                .cast::<T>()
                .wrapping_offset(offset as isize)
                .cast_const()
        };
        Product {
            m: c.m as usize,
            n: c.n as usize,
            k: c.k as usize,
            a: mat(&c.a, batch as u64),
            b: match &c.b {
                ContractB::Mat(view) => mat(view, batch as u64),
                // Not read: the packer below packs every panel of `B`.
                ContractB::Im2col(_) => Mat {
                    ptr: std::ptr::null_mut(),
                    rs: 0,
                    cs: 0,
                },
            },
            c: mat(&c.c, batch as u64),
            alpha,
            accumulate: c.accumulate,
            a_packed: c.a_packed.as_ref().map(packed_at),
            b_packed: c.b_packed.as_ref().map(packed_at),
            epilogue: epilogue_at(epilogue, fusion, batch as u64),
        }
    };
    let blocking = gemm::GemmBlocking {
        prefetch_packed: fusion.weights_stream,
        ..c.blocking()
    };
    let mnk = c.m.saturating_mul(c.n).saturating_mul(c.k);
    let parallel =
        pool.threads() > 1 && mnk.saturating_mul(n_batches) >= PARALLEL_MNK && results_disjoint(c);
    let slots = c
        .pack
        .map(|offset| regions.arena.wrapping_add(offset as usize));
    let threads = if parallel { pool.threads() } else { 1 };
    let broadcast = |t: usize, f: &(dyn Fn(usize) + Sync)| pool.broadcast(t, f);
    match &c.b {
        ContractB::Mat(_) => gemm::run::<T>(
            n_batches as usize,
            &at,
            &blocking,
            slots,
            threads,
            &broadcast,
        ),
        ContractB::Im2col(view) => {
            let packer = Im2colPacker::<T> {
                view,
                base: regions.im2col_origin::<T>(view),
                batch_offset: &|linear| batch_offset(&c.batch, &view.batch_strides, linear as u64),
            };
            gemm::run_packing_b::<T>(
                n_batches as usize,
                &at,
                &packer,
                &blocking,
                slots,
                threads,
                &broadcast,
            )
        }
    }
}

/// Batch index `batch`'s operands of a convolution run from its input (the direct and the
/// Winograd forms): its packed (or transformed) weight, its input's first element, its result
/// (contiguous columns) and its bias's shift.
fn conv_operands(
    c: &Contract,
    view: &Im2colView,
    packed: &crate::kernel::PackedOperand,
    fusion: &Fusion,
    regions: RegionPtrs,
    batch: usize,
) -> gemm::DirectOperands {
    let offset = |strides: &[i64]| batch_offset(&c.batch, strides, batch as u64) as isize;
    let weights = regions
        .base(Region::Weights)
        .wrapping_add(packed.byte_offset as usize)
        .cast::<f32>()
        .wrapping_offset(offset(&packed.batch_strides))
        .cast_const();
    let input = regions
        .im2col_origin::<f32>(view)
        .wrapping_offset(offset(&view.batch_strides));
    let result = Mat {
        ptr: regions.origin::<f32>(&c.c, offset(&c.c.batch_strides) as i64),
        rs: c.c.row_stride as isize,
        cs: 1,
    };
    gemm::DirectOperands {
        a_packed: weights,
        x: input,
        c: result,
        bias_shift: bias_shift(fusion, batch as u64),
    }
}

/// The threads a convolution run from its input uses: the pool's, for a product of at least
/// `PARALLEL_MNK` multiply-adds whose results are distinct per thread; else one.
fn conv_threads(c: &Contract, pool: &WorkerPool) -> usize {
    let macs =
        c.m.saturating_mul(c.n)
            .saturating_mul(c.k)
            .saturating_mul(c.batch.iter().product());
    if macs >= PARALLEL_MNK {
        disjoint_threads(c, pool)
    } else {
        1
    }
}

/// Every thread of `pool` where `c`'s results are disjoint between threads, else one.
fn disjoint_threads(c: &Contract, pool: &WorkerPool) -> usize {
    if pool.threads() > 1 && results_disjoint(c) {
        pool.threads()
    } else {
        1
    }
}

/// Runs `c` as a direct convolution (memc-gemm's `run_direct`: `B` read from the input as it
/// is, no packing, no scratch) when it is one: an f32 convolution's implicit column matrix
/// (not transposed) whose `A` is packed whole, with contiguous result columns, on a CPU and
/// window the direct kernel takes (`direct_conv_runs`: a contiguous row, read along it or
/// gathered) and
/// that pays (`direct_conv_pays`: tiles at least half full, or depthwise), as the plan
/// assumed when it reserved no panels for it; not where the plan reserved panels for a
/// layer that runs faster through the GEMM (`direct_conv_yields_to_gemm`).
/// Returns whether it ran.
///
/// # Safety
/// As [`run_contract`].
unsafe fn run_direct_conv(
    c: &Contract,
    epilogue: Epilogue<f32>,
    fusion: &Fusion,
    regions: RegionPtrs,
    pool: &WorkerPool,
    alpha: f32,
) -> bool {
    let (ContractB::Im2col(view), Some(packed)) = (&c.b, &c.a_packed) else {
        return false;
    };
    if view.transposed
        || c.c.col_stride != 1
        || c.m == 0
        || c.n == 0
        || c.k == 0
        || c.batch.contains(&0)
    {
        return false;
    }
    let mut axes = [gemm::DirectAxis {
        size: 0,
        stride: 0,
        kernel: 0,
        step: 0,
        dilation: 0,
        pad: 0,
        out: 0,
    }; MAX_IM2COL_AXES];
    for (direct, axis) in axes.iter_mut().zip(&view.axes) {
        *direct = gemm::DirectAxis {
            size: axis.size as i64,
            stride: axis.stride,
            kernel: axis.kernel as i64,
            step: axis.step,
            dilation: axis.dilation,
            pad: axis.pad,
            out: axis.out as i64,
        };
    }
    let axes = &axes[..view.axes.len().min(MAX_IM2COL_AXES)];
    if !gemm::direct_conv_runs(axes, view.channels)
        || !gemm::direct_conv_pays(axes, view.channels)
        || (c.pack.is_some() && gemm::direct_conv_yields_to_gemm(axes, c.m))
    {
        return false;
    }
    let conv = gemm::DirectConv {
        m: c.m as usize,
        channels: view.channels as usize,
        channel_stride: view.channel_stride as isize,
        axes,
        alpha,
        accumulate: c.accumulate,
        epilogue,
    };
    let n_batches: u64 = c.batch.iter().product();
    let at = |batch: usize| conv_operands(c, view, packed, fusion, regions, batch);
    // Every thread the pool has where the results are disjoint: `run_direct` itself weighs
    // the work, the input and output it moves included (a depthwise layer's few
    // multiply-adds stay under `PARALLEL_MNK`: MobileNetV2's 576-channel 3x3/2 at 7x7 ran on
    // one thread).
    let threads = disjoint_threads(c, pool);
    let broadcast = |t: usize, f: &(dyn Fn(usize) + Sync)| pool.broadcast(t, f);
    gemm::run_direct(n_batches as usize, &at, &conv, threads, &broadcast);
    true
}

/// Runs `c` as Winograd F(2x2, 3x3) when it is planned so (`Contract::winograd`, whose
/// form the validator checked: an f32 implicit column matrix of a 3x3 stride-1 window over
/// two axes with contiguous rows, the transformed weight in `a_packed`, the scratch at
/// `pack`), on at most its planned slots' threads. Returns whether it ran (always, for such a
/// product: its `a_packed` is in no other form's layout).
///
/// # Safety
/// As [`run_contract`].
unsafe fn run_winograd(
    c: &Contract,
    epilogue: Epilogue<f32>,
    fusion: &Fusion,
    regions: RegionPtrs,
    pool: &WorkerPool,
    alpha: f32,
) -> bool {
    let (Some(form), ContractB::Im2col(view), Some(packed), Some(pack)) =
        (&c.winograd, &c.b, &c.a_packed, c.pack)
    else {
        return false;
    };
    let [rows, cols] = view.axes.as_slice() else {
        return false;
    };
    if c.m == 0 || c.n == 0 || c.k == 0 || c.batch.contains(&0) {
        return true;
    }
    let conv = gemm::WinogradConv {
        m: c.m as usize,
        channels: view.channels as usize,
        h: rows.size as usize,
        w: cols.size as usize,
        channel_stride: view.channel_stride as isize,
        row_stride: rows.stride as isize,
        pad_top: rows.pad as usize,
        pad_left: cols.pad as usize,
        oh: rows.out as usize,
        ow: cols.out as usize,
        block: form.block as usize,
        chunk: form.chunk as usize,
        depth: form.depth as usize,
        alpha,
        accumulate: c.accumulate,
        epilogue,
    };
    let n_batches: u64 = c.batch.iter().product();
    let at = |batch: usize| conv_operands(c, view, packed, fusion, regions, batch);
    let threads = conv_threads(c, pool).min(form.slots as usize);
    let scratch = regions.arena.wrapping_add(pack as usize);
    let broadcast = |t: usize, f: &(dyn Fn(usize) + Sync)| pool.broadcast(t, f);
    gemm::run_winograd(n_batches as usize, &at, &conv, scratch, threads, &broadcast);
    true
}

/// Runs `c` transposed when it is planned so (`Contract::transposed`): per batch index the
/// product `c^T = col^T a^T` (`n x m`), its `A` panels packed from the column matrix by
/// [`PixelStrips`] (a panel of `B` columns is a strip of `A^T` rows), its `B` the weight's
/// transpose packed whole, its result and offset table in the scratch after the panels
/// (`TransposedScratch`); then each result is transposed into `c` with `alpha`, the
/// accumulation and the epilogue. Returns whether it ran.
///
/// # Safety
/// As [`run_contract`].
unsafe fn run_transposed(
    c: &Contract,
    epilogue: Epilogue<f32>,
    fusion: &Fusion,
    regions: RegionPtrs,
    pool: &WorkerPool,
    alpha: f32,
) -> bool {
    let (ContractB::Im2col(view), Some(packed), Some(pack)) = (&c.b, &c.b_packed, c.pack) else {
        return false;
    };
    if !c.transposed || view.transposed || c.m == 0 || c.n == 0 || c.k == 0 || c.batch.contains(&0)
    {
        return false;
    }
    let n_batches: u64 = c.batch.iter().product();
    let planned = c.blocking();
    let Some(layout) = c.transposed_scratch(&planned) else {
        return false;
    };
    let (m, n) = (c.m as usize, c.n as usize);
    let slots = regions.arena.wrapping_add(pack as usize);
    let results = slots.wrapping_add(layout.result as usize).cast::<f32>();
    // An address, so that the closure below is shared between threads.
    let results_at = results as usize;
    // The offset table, written once per run.
    let table = slots.wrapping_add(layout.table as usize).cast::<i32>();
    let table =
        offset_table(view, table).then_some((table.cast_const(), view.pixels() as usize + 8));
    let packer = PixelStrips {
        packer: Im2colPacker::<f32> {
            view,
            base: regions.im2col_origin::<f32>(view),
            batch_offset: &|linear| batch_offset(&c.batch, &view.batch_strides, linear as u64),
        },
        table,
    };
    let at = |batch: usize| {
        let none = Mat {
            ptr: std::ptr::null_mut(),
            rs: 0,
            cs: 0,
        };
        let offset = batch_offset(&c.batch, &packed.batch_strides, batch as u64);
        Product {
            m: n,
            n: m,
            k: c.k as usize,
            // Not read: the packer packs every `A` panel, `b_packed` is `B`.
            a: none,
            b: none,
            c: Mat {
                ptr: (results_at as *mut f32).wrapping_add(batch * n * m),
                rs: m as isize,
                cs: 1,
            },
            alpha: 1.0,
            accumulate: false,
            a_packed: None,
            b_packed: Some(
                regions
                    .base(Region::Weights)
                    .wrapping_add(packed.byte_offset as usize)
                    .cast::<f32>()
                    .wrapping_offset(offset as isize)
                    .cast_const(),
            ),
            epilogue: Epilogue::NONE,
        }
    };
    let macs = c.m.saturating_mul(c.n).saturating_mul(c.k);
    let parallel = pool.threads() > 1 && macs.saturating_mul(n_batches) >= PARALLEL_MNK;
    let threads = if parallel { pool.threads() } else { 1 };
    let broadcast = |t: usize, f: &(dyn Fn(usize) + Sync)| pool.broadcast(t, f);
    // The weight (`B`, packed whole) asked for ahead where the weights stream from memory.
    let blocking = gemm::GemmBlocking {
        prefetch_packed: fusion.weights_stream,
        ..planned
    };
    gemm::run_packing_a::<f32>(
        n_batches as usize,
        &at,
        &packer,
        &blocking,
        Some(slots),
        threads,
        &broadcast,
    );
    for linear in 0..n_batches {
        let out = Mat {
            ptr: regions.origin::<f32>(&c.c, batch_offset(&c.batch, &c.c.batch_strides, linear)),
            rs: c.c.row_stride as isize,
            cs: c.c.col_stride as isize,
        };
        gemm::transpose_into(
            results.wrapping_add(linear as usize * n * m),
            out,
            m,
            n,
            alpha,
            c.accumulate,
            epilogue_at(epilogue, fusion, linear),
        );
    }
    true
}

/// Packs the `B` panels of an implicit im2col operand straight from the convolution's input
/// (see [`Im2colView`]): per panel row (non-transposed) or column (transposed) the channel
/// and taps are decoded once, then the output positions are walked along the last axis in
/// runs, each run reading one input row (or zeros where an outer axis reads padding).
struct Im2colPacker<'v, T> {
    view: &'v Im2colView,
    /// The input element `byte_offset` names.
    base: *const T,
    /// The element offset of a (linear) batch index.
    batch_offset: &'v (dyn Fn(usize) -> i64 + Sync),
}

// SAFETY: the packer only reads the input (validated in bounds) and writes the panels the GEMM
// hands each thread.
unsafe impl<T> Sync for Im2colPacker<'_, T> {}

/// Positions along the axes of an [`Im2colView`] (kernel taps or output positions).
type Coords = [i64; MAX_IM2COL_AXES];

impl<T: Kernels> Im2colPacker<'_, T> {
    /// `index` (row-major over `extents`) as coordinates.
    fn decode(&self, mut index: u64, extent: impl Fn(usize) -> u64) -> Coords {
        let mut coords = [0i64; MAX_IM2COL_AXES];
        for i in (0..self.view.axes.len()).rev() {
            let e = extent(i);
            coords[i] = (index % e) as i64;
            index /= e;
        }
        coords
    }

    /// Row `row` of the column matrix of the batch index whose input starts at `image`: its
    /// channel's first element and its taps.
    fn row(&self, image: *const T, row: u64) -> (*const T, Coords) {
        let taps = self.view.taps();
        let channel = (row / taps) as i64;
        let base = image.wrapping_offset((channel * self.view.channel_stride) as isize);
        (base, self.decode(row % taps, |i| self.view.axes[i].kernel))
    }

    /// Advances `(base, taps)` from one row of the column matrix to the next: the last tap
    /// first, carrying into earlier axes, then into the channel.
    fn next_row(&self, base: &mut *const T, taps: &mut Coords) {
        let axes = &self.view.axes;
        for i in (0..axes.len()).rev() {
            taps[i] += 1;
            if taps[i] < axes[i].kernel as i64 {
                return;
            }
            taps[i] = 0;
        }
        *base = base.wrapping_offset(self.view.channel_stride as isize);
    }

    /// Writes `count` values of one row of the column matrix (`channel` base `base`, taps
    /// `taps`), from the output position `start` on, to `dst`, `dst + step`, ...
    ///
    /// # Safety
    /// `dst` holds `count` values `step` apart; the positions lie within the output.
    unsafe fn fill(
        &self,
        base: *const T,
        taps: &Coords,
        start: &Coords,
        count: usize,
        dst: *mut T,
        step: usize,
    ) {
        let axes = &self.view.axes;
        let last = axes.len() - 1;
        let mut at = *start;
        let mut done = 0;
        let position =
            |i: usize, o: i64| o * axes[i].step - axes[i].pad + taps[i] * axes[i].dilation;
        while done < count {
            let run = (count - done).min((axes[last].out as i64 - at[last]) as usize);
            // The input row the outer axes select, unless one of them reads padding.
            let mut row = Some(base);
            for (i, axis) in axes[..last].iter().enumerate() {
                let pos = position(i, at[i]);
                if pos < 0 || pos >= axis.size as i64 {
                    row = None;
                    break;
                }
                row = row.map(|r| r.wrapping_offset((pos * axis.stride) as isize));
            }
            let out = dst.add(done * step);
            match row {
                None => {
                    for r in 0..run {
                        *out.add(r * step) = T::ZERO;
                    }
                }
                Some(row) => {
                    // Outputs `r < run` read position `first + r * step`: inside the input
                    // for `lo <= r < hi`, padding before and after.
                    let axis = &axes[last];
                    let first = position(last, at[last]);
                    let size = axis.size as i64;
                    let (lo, hi) = if axis.step == 1 {
                        (-first, size - first)
                    } else {
                        let up = |x: i64| (x + axis.step - 1).div_euclid(axis.step);
                        (up(-first), up(size - first))
                    };
                    let lo = lo.clamp(0, run as i64) as usize;
                    let hi = hi.clamp(lo as i64, run as i64) as usize;
                    for r in (0..lo).chain(hi..run) {
                        *out.add(r * step) = T::ZERO;
                    }
                    // SAFETY: every in-range position is inside the validated input.
                    let src = row
                        .wrapping_offset(((first + lo as i64 * axis.step) * axis.stride) as isize);
                    if step == 1 && axis.step == 1 && axis.stride == 1 {
                        // Runs are short (an output row, at most a strip): a loop, not a call.
                        let out = out.add(lo);
                        for i in 0..hi - lo {
                            *out.add(i) = *src.add(i);
                        }
                    } else {
                        let src_step = (axis.step * axis.stride) as isize;
                        for (i, r) in (lo..hi).enumerate() {
                            *out.add(r * step) = *src.wrapping_offset(i as isize * src_step);
                        }
                    }
                }
            }
            done += run;
            // Advance the output position by `run`, carrying into the outer axes.
            advance(&mut at, axes.len(), run as i64, |i| axes[i].out);
        }
    }
}

impl<T: Kernels> Im2colPacker<'_, T> {
    /// [`gemm::PackB::pack`] of a pointwise window that reads no padding (every axis one
    /// tap, no pad: a strided 1x1 convolution's), not transposed: row `p` of the column
    /// matrix is channel `p` and column `j` the same element offset from every channel's
    /// first, so each strip's offsets are worked out once and every row is `nr` loads at
    /// them. Returns `false` (packing nothing) for any other view or a panel of more than
    /// [`POINTWISE_MAX_COLS`] columns. (The general `fill` walks each row's strip position
    /// by position: 2.6 ns a value, 19% of a 256->512 1x1/2 layer at 56x56.)
    ///
    /// # Safety
    /// As [`gemm::PackB::pack`]; `image` is the batch index's input.
    #[allow(clippy::too_many_arguments)]
    unsafe fn pack_pointwise(
        &self,
        image: *const T,
        dst: *mut T,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) -> bool {
        let axes = &self.view.axes;
        if axes.is_empty()
            || cols > POINTWISE_MAX_COLS
            || nr == 0
            || axes.iter().any(|a| a.kernel != 1 || a.pad != 0)
        {
            return false;
        }
        // Column `j`'s element offset from its channel's first element.
        let mut offsets = [0isize; POINTWISE_MAX_COLS];
        let mut at = self.decode(j0 as u64, |i| axes[i].out);
        for offset in offsets.iter_mut().take(cols) {
            *offset = axes
                .iter()
                .zip(&at)
                .map(|(a, &o)| (o * a.step * a.stride) as isize)
                .sum();
            advance(&mut at, axes.len(), 1, |i| axes[i].out);
        }
        let channel_stride = self.view.channel_stride as isize;
        for s in 0..cols.div_ceil(nr) {
            let live = (cols - s * nr).min(nr);
            let strip = dst.add(s * nr * kc);
            let offsets = &offsets[s * nr..s * nr + live];
            for p in 0..kc {
                // SAFETY: no tap reads padding, so every offset is inside the channel.
                let channel = image.wrapping_offset((p0 + p) as isize * channel_stride);
                let row = strip.add(p * nr);
                for (j, &offset) in offsets.iter().enumerate() {
                    *row.add(j) = *channel.wrapping_offset(offset);
                }
                for j in live..nr {
                    *row.add(j) = T::ZERO;
                }
            }
        }
        true
    }
}

/// The widest panel [`Im2colPacker::pack_pointwise`] packs (memc-gemm's `B` panels are
/// [`gemm::GEMM_NC`] columns).
const POINTWISE_MAX_COLS: usize = 256;

/// Advances `coords` (the first `n` of them, row-major over `extent(i)`) by `by` along the
/// last axis (where `by` keeps it within its extent, or reaches it exactly), carrying into
/// the outer axes.
fn advance(coords: &mut Coords, n: usize, by: i64, extent: impl Fn(usize) -> u64) {
    let mut i = n - 1;
    coords[i] += by;
    while i > 0 && coords[i] == extent(i) as i64 {
        coords[i] = 0;
        coords[i - 1] += 1;
        i -= 1;
    }
}

impl<T: Kernels> gemm::PackB<T> for Im2colPacker<'_, T> {
    unsafe fn pack(
        &self,
        batch: usize,
        dst: *mut T,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) {
        let image = self
            .base
            .wrapping_offset((self.batch_offset)(batch) as isize);
        if self.view.transposed || !self.pack_pointwise(image, dst, p0, kc, j0, cols, nr) {
            self.pack_general(image, dst, p0, kc, j0, cols, nr);
        }
    }
}

impl<T: Kernels> Im2colPacker<'_, T> {
    /// [`gemm::PackB::pack`] of any view, position by position (`fill`).
    ///
    /// # Safety
    /// As [`gemm::PackB::pack`]; `image` is the batch index's input.
    #[allow(clippy::too_many_arguments)]
    unsafe fn pack_general(
        &self,
        image: *const T,
        dst: *mut T,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) {
        let pixel_coords = |pixel: u64| self.decode(pixel, |i| self.view.axes[i].out);
        let n_strips = cols.div_ceil(nr);
        for s in 0..n_strips {
            let strip = dst.add(s * nr * kc);
            let live = (cols - s * nr).min(nr);
            let first = j0 + s * nr;
            if self.view.transposed {
                // Columns are rows of the column matrix; values walk the output positions.
                let start = pixel_coords(p0 as u64);
                for j in 0..nr {
                    if j < live {
                        let (base, taps) = self.row(image, (first + j) as u64);
                        self.fill(base, &taps, &start, kc, strip.add(j), nr);
                    } else {
                        for p in 0..kc {
                            *strip.add(p * nr + j) = T::ZERO;
                        }
                    }
                }
            } else if n_strips > MAX_STRIPS {
                // A panel wider than the strips decoded below (not one memc-gemm makes).
                let start = pixel_coords(first as u64);
                for p in 0..kc {
                    let (base, taps) = self.row(image, (p0 + p) as u64);
                    let row = strip.add(p * nr);
                    self.fill(base, &taps, &start, live, row, 1);
                    for j in live..nr {
                        *row.add(j) = T::ZERO;
                    }
                }
            }
        }
        if self.view.transposed || n_strips > MAX_STRIPS {
            return;
        }
        // Rows of the column matrix outer (the channel and taps advanced without division),
        // strips inner, each strip's first output position decoded once.
        let mut starts = [[0i64; MAX_IM2COL_AXES]; MAX_STRIPS];
        for (s, start) in starts.iter_mut().enumerate().take(n_strips) {
            *start = pixel_coords((j0 + s * nr) as u64);
        }
        let (mut base, mut taps) = self.row(image, p0 as u64);
        for p in 0..kc {
            for (s, start) in starts.iter().enumerate().take(n_strips) {
                let live = (cols - s * nr).min(nr);
                let row = dst.add(s * nr * kc + p * nr);
                self.fill(base, &taps, start, live, row, 1);
                for j in live..nr {
                    *row.add(j) = T::ZERO;
                }
            }
            self.next_row(&mut base, &mut taps);
        }
    }
}

/// The `A` panels of a product run transposed ([`run_transposed`]): strips of `nr` output
/// positions (`A`'s rows), each value of `K` (a channel and taps) the `nr` positions' input
/// elements, read through a table of every tap's input offset for every output position
/// (or [`PADDING`]) that [`offset_table`] writes once per run into planned scratch: per value
/// of `K` each position is then one load from the channel's elements (on AVX2, one gather per
/// strip of 6), or a zero. (The column packer's runs along output rows, `nr` values each,
/// cost as much as the product on a 256-channel 3x3 layer at 14x14; checking each position's
/// window per value, 40% of it; a table per panel, 7%.)
struct PixelStrips<'v, T> {
    packer: Im2colPacker<'v, T>,
    /// The table: tap `t`'s offsets from `table + t * stride`, `stride` the positions plus 8
    /// (a strip's vector of 8 offsets reads past the last position's, masked off); `None`
    /// where the offsets do not fit (the column packer's way then).
    table: Option<(*const i32, usize)>,
}

// SAFETY: the table is only read while the product runs.
unsafe impl<T> Sync for PixelStrips<'_, T> {}

/// A table entry for a position whose tap reads padding.
const PADDING: i32 = i32::MIN;

/// Writes [`PixelStrips`]' table for `view` at `table` (`kernel::TransposedScratch`'s, for
/// its taps and positions), unless an offset would not fit an `i32` (then `false`): entry
/// `(t, j)` the element offset, from its channel's first element, that output position `j`
/// reads for tap `t`, or [`PADDING`].
///
/// # Safety
/// `table` holds `taps x (positions + 8)` values.
unsafe fn offset_table(view: &Im2colView, table: *mut i32) -> bool {
    let axes = &view.axes;
    let small = |x: i64| x.unsigned_abs() < (i32::MAX / 2) as u64;
    if axes.is_empty()
        || axes.len() > MAX_IM2COL_AXES
        || !axes
            .iter()
            .all(|a| small(a.size as i64 * a.stride) && small(a.kernel as i64 * a.dilation))
    {
        return false;
    }
    let (taps, positions) = (view.taps() as usize, view.pixels() as usize);
    let stride = positions + 8;
    let mut tap: Coords = [0; MAX_IM2COL_AXES];
    for t in 0..taps {
        let row = table.add(t * stride);
        let mut at: Coords = [0; MAX_IM2COL_AXES];
        for j in 0..stride {
            if j >= positions {
                *row.add(j) = PADDING;
                continue;
            }
            let mut offset = 0i64;
            let mut inside = true;
            for (i, axis) in axes.iter().enumerate() {
                let pos = at[i] * axis.step - axis.pad + tap[i] * axis.dilation;
                inside &= (0..axis.size as i64).contains(&pos);
                offset += pos * axis.stride;
            }
            *row.add(j) = if inside { offset as i32 } else { PADDING };
            advance(&mut at, axes.len(), 1, |i| axes[i].out);
        }
        advance(&mut tap, axes.len(), 1, |i| axes[i].kernel);
    }
    true
}

impl<T: Kernels> gemm::PackB<T> for PixelStrips<'_, T> {
    unsafe fn pack(
        &self,
        batch: usize,
        dst: *mut T,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) {
        let Some((table, stride)) = self.table else {
            return gemm::PackB::pack(&self.packer, batch, dst, p0, kc, j0, cols, nr);
        };
        let view = self.packer.view;
        let taps = view.taps() as usize;
        let image = self
            .packer
            .base
            .wrapping_offset((self.packer.batch_offset)(batch) as isize);
        let (mut channel, mut tap) = ((p0 / taps) as isize, p0 % taps);
        #[cfg(target_arch = "x86_64")]
        if T::SIZE == 4 && nr == 6 && gemm::isa() != gemm::Isa::Scalar {
            // SAFETY: f32 values; the table's rows hold `j0 + cols + 8` entries.
            x86::gather_strips(
                image.cast::<f32>(),
                view.channel_stride as isize,
                (table.add(j0), stride),
                taps,
                (channel, tap),
                dst.cast::<f32>(),
                kc,
                cols,
            );
            return;
        }
        for p in 0..kc {
            let src = image.wrapping_offset(channel * view.channel_stride as isize);
            let offsets = std::slice::from_raw_parts(table.add(tap * stride + j0), cols);
            let row = dst.add(p * nr);
            for (s, offsets) in offsets.chunks(nr).enumerate() {
                let out = row.add(s * nr * kc);
                for (j, &offset) in offsets.iter().enumerate() {
                    // SAFETY: every offset but `PADDING` is an element inside the validated
                    // input.
                    *out.add(j) = if offset == PADDING {
                        T::ZERO
                    } else {
                        *src.offset(offset as isize)
                    };
                }
            }
            tap += 1;
            if tap == taps {
                tap = 0;
                channel += 1;
            }
        }
        // Rows of the last strip past the positions.
        for j in cols..cols.div_ceil(nr) * nr {
            for p in 0..kc {
                *dst.add(j / nr * nr * kc + p * nr + j % nr) = T::ZERO;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::PADDING;
    use std::arch::x86_64::*;

    /// [`super::PixelStrips`]' values of `K` for strips of 6 f32 positions: per value and
    /// strip, one gather of the strip's 6 offsets (padding and positions past `cols` masked
    /// off, so 0) and one masked store; the strips past `cols` are zeros too.
    ///
    /// # Safety
    /// As `PixelStrips::pack`: `dst` holds `cols.div_ceil(6)` strips of `6 x kc` values; the
    /// table's rows (`stride` apart from `table`, the panel's first position's entry) hold
    /// `cols + 8` entries, every one but `PADDING` an element of the channel.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn gather_strips(
        image: *const f32,
        channel_stride: isize,
        (table, stride): (*const i32, usize),
        taps: usize,
        (mut channel, mut tap): (isize, usize),
        dst: *mut f32,
        kc: usize,
        cols: usize,
    ) {
        let strips = cols.div_ceil(6);
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let padding = _mm256_set1_epi32(PADDING);
        for p in 0..kc {
            let src = image.wrapping_offset(channel * channel_stride);
            let offsets = table.add(tap * stride);
            for s in 0..strips {
                let live = _mm256_set1_epi32((cols - 6 * s).min(6) as i32);
                let index = _mm256_loadu_si256(offsets.add(6 * s).cast());
                let take = _mm256_andnot_si256(
                    _mm256_cmpeq_epi32(index, padding),
                    _mm256_cmpgt_epi32(live, lanes),
                );
                let v = _mm256_mask_i32gather_ps::<4>(
                    _mm256_setzero_ps(),
                    src,
                    index,
                    _mm256_castsi256_ps(take),
                );
                // Six values as a 4- and a 2-value store (a masked store is microcoded on
                // AMD's CPUs).
                let at = dst.add(s * 6 * kc + p * 6);
                _mm_storeu_ps(at, _mm256_castps256_ps128(v));
                _mm_storel_epi64(
                    at.add(4).cast(),
                    _mm_castps_si128(_mm256_extractf128_ps::<1>(v)),
                );
            }
            tap += 1;
            if tap == taps {
                tap = 0;
                channel += 1;
            }
        }
    }
}

/// Strips of one panel whose first output positions [`Im2colPacker::pack`] decodes up front
/// (memc-gemm's panels have at most `NC / NR` = 16).
const MAX_STRIPS: usize = 32;

/// Whether distinct (batch, row, column) indices write distinct result elements: sorted by
/// stride magnitude, every axis of the result must step past everything the smaller axes span.
fn results_disjoint(c: &Contract) -> bool {
    let mut axes = [(0u64, 0u64); crate::kernel::MAX_AXES + 2];
    let mut len = 0;
    let all = c
        .batch
        .iter()
        .zip(&c.c.batch_strides)
        .map(|(&e, &s)| (e, s.unsigned_abs()))
        .chain([
            (c.m, c.c.row_stride.unsigned_abs()),
            (c.n, c.c.col_stride.unsigned_abs()),
        ])
        .filter(|&(e, _)| e > 1);
    for axis in all {
        if len == axes.len() {
            return false;
        }
        axes[len] = axis;
        len += 1;
    }
    let axes = &mut axes[..len];
    axes.sort_unstable_by_key(|&(_, s)| s);
    let mut span: u64 = 0;
    for &(extent, stride) in axes.iter() {
        if stride <= span {
            return false;
        }
        span = span.saturating_add(stride.saturating_mul(extent - 1));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Im2colAxis;

    /// The pointwise packer writes exactly the panels the general one does, for 1-3 axes,
    /// steps 1-3 (strided rows and planes), several batch indices, panels starting mid-row and
    /// mid-channel, last strips part-filled; and declines windows with taps or padding.
    #[test]
    fn pointwise_panels_match_the_general_packer() {
        let cases: [&[(u64, u64, i64)]; 5] = [
            &[(23, 12, 2)],
            &[(23, 12, 2), (9, 5, 2)],
            &[(7, 4, 2), (10, 4, 3)],
            &[(3, 2, 2), (6, 3, 2), (11, 6, 2)],
            &[(8, 8, 1), (8, 4, 2)],
        ];
        for dims in cases {
            let mut stride = 1i64;
            let mut axes: Vec<Im2colAxis> = dims
                .iter()
                .rev()
                .map(|&(size, out, step)| {
                    let axis = Im2colAxis {
                        size,
                        stride,
                        kernel: 1,
                        step,
                        dilation: 1,
                        pad: 0,
                        out,
                    };
                    stride *= size as i64;
                    axis
                })
                .collect();
            axes.reverse();
            let (channels, pixels) = (
                5usize,
                axes.iter().map(|a| a.out as usize).product::<usize>(),
            );
            let view = Im2colView {
                region: Region::Arena,
                byte_offset: 0,
                batch_strides: vec![],
                channels: channels as u64,
                channel_stride: stride,
                axes,
                transposed: false,
            };
            let image_len = channels * stride as usize;
            let input: Vec<f32> = (0..2 * image_len).map(|i| i as f32 + 0.5).collect();
            let batch_offset = |b: usize| (b * image_len) as i64;
            let packer = Im2colPacker {
                view: &view,
                base: input.as_ptr(),
                batch_offset: &batch_offset,
            };
            for (p0, kc) in [(0, channels), (1, 3)] {
                for (j0, cols) in [(0, pixels), (3, pixels - 3), (1, pixels.min(17) - 1)] {
                    for nr in [8, 16] {
                        let len = cols.div_ceil(nr) * nr * kc;
                        let (mut fast, mut slow) = (vec![f32::NAN; len], vec![f32::NAN; len]);
                        for batch in 0..2 {
                            let image = input[batch * image_len..].as_ptr();
                            // SAFETY: the panels hold `len` values; the views lie in `input`.
                            unsafe {
                                assert!(packer.pack_pointwise(
                                    image,
                                    fast.as_mut_ptr(),
                                    p0,
                                    kc,
                                    j0,
                                    cols,
                                    nr
                                ));
                                packer.pack_general(image, slow.as_mut_ptr(), p0, kc, j0, cols, nr);
                            }
                            assert_eq!(
                                fast.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                                slow.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                                "{dims:?} batch {batch} p0 {p0} kc {kc} j0 {j0} cols {cols} nr {nr}"
                            );
                        }
                    }
                }
            }
        }
        // A tap or a pad: the general packer's.
        for (kernel, pad) in [(3, 0), (1, 1)] {
            let view = Im2colView {
                region: Region::Arena,
                byte_offset: 0,
                batch_strides: vec![],
                channels: 1,
                channel_stride: 16,
                axes: vec![Im2colAxis {
                    size: 16,
                    stride: 1,
                    kernel,
                    step: 2,
                    dilation: 1,
                    pad,
                    out: 7,
                }],
                transposed: false,
            };
            let input = [0f32; 16];
            let batch_offset = |_: usize| 0i64;
            let packer = Im2colPacker {
                view: &view,
                base: input.as_ptr(),
                batch_offset: &batch_offset,
            };
            let mut panel = [0f32; 64];
            // SAFETY: declined before anything is read or written.
            let packed =
                unsafe { packer.pack_pointwise(input.as_ptr(), panel.as_mut_ptr(), 0, 1, 0, 7, 8) };
            assert!(!packed, "kernel {kernel}, pad {pad}");
        }
    }
}
