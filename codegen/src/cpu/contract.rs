//! Contractions ([`Contract`]) run through memc's GEMM (`gemm.rs`), batches and blocks of
//! each product split over the worker pool.
//!
//! Guarantees: for a validated contraction every pointer handed to the GEMM addresses
//! elements the validator bounded, and the packing scratch is the planned range
//! ([`Contract::pack`]) or the threads' stacks; several threads run a contraction only when
//! its result elements are provably distinct for distinct (batch, row, column), and tiny ones
//! run on the calling thread. Nothing is allocated.

use super::pool::WorkerPool;
use super::regions::RegionPtrs;
use crate::kernel::{Contract, MatView, Scalar};
use memc_gemm::{self as gemm, Kernels, Mat, Product};

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
}

/// Runs `c` over all its batch indices.
///
/// # Safety
/// As [`super::CpuProgram::run_kernel`]: the regions are at least as large as the sizes the
/// contraction was validated against.
pub(crate) unsafe fn run_contract(c: &Contract, regions: RegionPtrs, pool: &WorkerPool) {
    match c.elem {
        Scalar::F32 => run_typed::<f32>(c, regions, pool, f64::from_bits(c.alpha) as f32),
        Scalar::F64 => run_typed::<f64>(c, regions, pool, f64::from_bits(c.alpha)),
        // `CpuProgram::compile` rejects other element types, so nothing reaches here.
        _ => {}
    }
}

unsafe fn run_typed<T: Kernels>(c: &Contract, regions: RegionPtrs, pool: &WorkerPool, alpha: T) {
    if c.m == 0 || c.n == 0 || c.batch.contains(&0) {
        return;
    }
    let n_batches: u64 = c.batch.iter().product();
    let batch_offsets = |mut linear: u64, view: &MatView| -> i64 {
        let mut offset = 0i64;
        for (&extent, &stride) in c.batch.iter().zip(&view.batch_strides).rev() {
            offset = offset.wrapping_add(((linear % extent) as i64).wrapping_mul(stride));
            linear /= extent;
        }
        offset
    };
    if c.k == 0 {
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
        return;
    }
    let mat = |view: &MatView, linear: u64| Mat {
        ptr: regions.origin::<T>(view, batch_offsets(linear, view)),
        rs: view.row_stride as isize,
        cs: view.col_stride as isize,
    };
    let at = |batch: usize| Product {
        m: c.m as usize,
        n: c.n as usize,
        k: c.k as usize,
        a: mat(&c.a, batch as u64),
        b: mat(&c.b, batch as u64),
        c: mat(&c.c, batch as u64),
        alpha,
        accumulate: c.accumulate,
    };
    let blocking = c.blocking();
    let mnk = c.m.saturating_mul(c.n).saturating_mul(c.k);
    let parallel =
        pool.threads() > 1 && mnk.saturating_mul(n_batches) >= PARALLEL_MNK && results_disjoint(c);
    let slots = c
        .pack
        .map(|offset| regions.arena.wrapping_add(offset as usize));
    let threads = if parallel { pool.threads() } else { 1 };
    gemm::run::<T>(
        n_batches as usize,
        &at,
        &blocking,
        slots,
        threads,
        &|t, f| pool.broadcast(t, f),
    );
}

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
