//! Transposes in native AVX2 code: a copy kernel whose output is contiguous along its last
//! axis while its input is read at a stride there, and contiguously along another axis (the
//! key transpose of attention, `[seq, heads * dim] -> [heads * dim, seq]`), runs in blocks of
//! 8 x 8 elements: eight loads along the contiguous input axis, a transpose in registers,
//! eight stores along the output's rows. Cranelift's loop reads such an input one element at a
//! time: the zoo gpt's and bert's [128, 256] key transposes took 0.042-0.047 ms each,
//! onnxruntime 0.016.
//!
//! - **What it computes.** Exactly the loop's copy: every output element is written once with
//!   the bits of its input element (no arithmetic: the shuffles move bits, NaN payloads
//!   included). Elements past the last whole block along either axis are copied one by one.
//! - **Memory.** Reads the input and writes the output once each; no scratch.
//! - **When.** [`recognize`] takes a loop kernel with no inner axes and one map stage that
//!   stores a plain load of a 4-byte element (f32, i32, u32) into a view of the same type;
//!   both views unguarded, the output dense and row-major over the loop's axes, the input's
//!   stride along the last axis at least 2 in magnitude and 1 along another axis (the
//!   transposed one), both of those axes at least 8 long, and the two views apart in memory.
//!   AVX2 hosts (every AVX-512 host too); elsewhere, or with `MEMC_NO_TRANSPOSE` set, the
//!   kernel compiles as loop code.

use super::pool::WorkerPool;
use super::regions::RegionPtrs;
use crate::kernel::{InstKind, LoopKernel, Region, Scalar};

/// Elements below which a transpose runs on one thread.
const PARALLEL_WORK: u64 = 64 * 1024;

/// Elements of a block's side.
const BLOCK: u64 = 8;

/// A recognized transpose (see the module doc). Axis `a` is the one the input reads
/// contiguously, axis `b` the last; the others (`batch`) index whole planes.
#[derive(Clone, Debug)]
pub(crate) struct Transpose {
    /// Extents and (input, output) strides in elements of the axes other than `a` and `b`.
    batch: Vec<(u64, i64, i64)>,
    /// Extents of axes `a` and `b`.
    a_len: u64,
    b_len: u64,
    /// The input's stride along `b`, the output's along `a` (1 along the other).
    in_b: i64,
    out_a: i64,
    input: (Region, i64),
    output: (Region, i64),
}

/// Whether this CPU runs transposes natively.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::env::var_os("MEMC_NO_TRANSPOSE").is_none()
            && std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The transpose that `k` computes, if it has exactly the form of the module doc.
pub(crate) fn recognize(k: &LoopKernel) -> Option<Transpose> {
    let n = k.outer.len();
    if !k.inner.is_empty() || n < 2 {
        return None;
    }
    let (load, store) = k.plain_copy()?;
    let InstKind::Load { view: lv } = load.kind else {
        return None;
    };
    let (x, y) = (k.views.get(lv as usize)?, k.views.get(store.view as usize)?);
    let word = |s: Scalar| matches!(s, Scalar::F32 | Scalar::I32 | Scalar::U32);
    let plain = |v: &crate::kernel::View| {
        v.elem == load.ty && v.guards.is_empty() && v.strides.len() == n && v.byte_offset % 4 == 0
    };
    if !word(load.ty) || !plain(x) || !plain(y) {
        return None;
    }
    // The output dense and row-major.
    let mut dense = 1i64;
    for (&s, &e) in y.strides.iter().zip(&k.outer).rev() {
        if s != dense {
            return None;
        }
        dense = dense.checked_mul(i64::try_from(e).ok()?)?;
    }
    let in_b = x.strides[n - 1];
    let a = (0..n - 1).rev().find(|&i| x.strides[i] == 1)?;
    let (a_len, b_len) = (k.outer[a], k.outer[n - 1]);
    if in_b.unsigned_abs() < 2 || a_len < BLOCK || b_len < BLOCK {
        return None;
    }
    // The input's reach, against the output's `0..dense` elements from its offset.
    let (xo, yo) = (x.byte_offset / 4, y.byte_offset / 4);
    let (mut lo, mut hi) = (xo, xo);
    for (&s, &e) in x.strides.iter().zip(&k.outer) {
        let span = s.checked_mul(i64::try_from(e).ok()? - 1)?;
        lo += span.min(0);
        hi += span.max(0);
    }
    if x.region == y.region && !(hi < yo || yo + dense <= lo) {
        return None;
    }
    let batch = (0..n - 1)
        .filter(|&i| i != a)
        .map(|i| (k.outer[i], x.strides[i], y.strides[i]))
        .collect();
    Some(Transpose {
        batch,
        a_len,
        b_len,
        in_b,
        out_a: y.strides[a],
        input: (x.region, xo),
        output: (y.region, yo),
    })
}

/// Runs `t` (units of 8 values of axis `a` in one plane, split over `pool`).
///
/// # Safety
/// As [`super::CpuProgram::run_kernel_in`]: every element the kernel reads or writes lies in
/// its region; and [`available`] held when `t` was recognized.
pub(crate) unsafe fn run_transpose(t: &Transpose, regions: RegionPtrs, pool: &WorkerPool) {
    let planes: u64 = t.batch.iter().map(|b| b.0).product();
    let per_plane = t.a_len.div_ceil(BLOCK);
    let units = planes.saturating_mul(per_plane);
    if units == 0 {
        return;
    }
    let work = planes.saturating_mul(t.a_len).saturating_mul(t.b_len);
    let run_units = |begin: u64, end: u64| {
        let regions = regions.get();
        let (x_base, y_base) = (
            regions.base(t.input.0).cast::<u32>().cast_const(),
            regions.base(t.output.0).cast::<u32>(),
        );
        for unit in begin..end {
            let (mut plane, block) = (unit / per_plane, unit % per_plane);
            let (mut x, mut y) = (t.input.1, t.output.1);
            for &(extent, xs, ys) in t.batch.iter().rev() {
                let i = (plane % extent) as i64;
                plane /= extent;
                x += i * xs;
                y += i * ys;
            }
            let a0 = block * BLOCK;
            let rows = (t.a_len - a0).min(BLOCK) as usize;
            let x = x_base.wrapping_offset((x + a0 as i64) as isize);
            let y = y_base.wrapping_offset((y + a0 as i64 * t.out_a) as isize);
            // SAFETY: the caller's contract.
            unsafe { rows_of(t, x, y, rows) };
        }
    };
    pool.for_row_runs(units, work >= PARALLEL_WORK, &run_units);
}

/// Output rows `0..rows` (at most 8) of one plane from `x` (its element `(a0, 0)`) into `y`
/// (its row `a0`).
///
/// # Safety
/// As [`run_transpose`].
unsafe fn rows_of(t: &Transpose, x: *const u32, y: *mut u32, rows: usize) {
    let (b_len, in_b, out_a) = (t.b_len as usize, t.in_b as isize, t.out_a as isize);
    let mut b0 = 0;
    #[cfg(target_arch = "x86_64")]
    if rows == BLOCK as usize {
        while b0 + BLOCK as usize <= b_len {
            // SAFETY: `available` (AVX2); the block's elements are the kernel's.
            unsafe {
                x86::block(
                    x.wrapping_offset(b0 as isize * in_b),
                    in_b,
                    y.add(b0),
                    out_a,
                )
            };
            b0 += BLOCK as usize;
        }
    }
    for i in 0..rows {
        let row = y.wrapping_offset(i as isize * out_a);
        for b in b0..b_len {
            *row.add(b) = *x.wrapping_offset(b as isize * in_b + i as isize);
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use std::arch::x86_64::*;

    /// The 8 x 8 block whose rows are `r` (8 lanes each), transposed: row `i` of the result
    /// holds lane `i` of every row of `r`. Pairs of rows interleaved, then pairs of pairs (lane
    /// halves holding columns `i` and `i + 4`), then the halves exchanged. Inlined into callers
    /// compiled with AVX2 (the native transposes here, `nbits.rs`'s strip packing).
    #[inline(always)]
    pub(in crate::cpu) unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
        let t: [__m256; 8] = std::array::from_fn(|j| {
            let (p, q) = (r[j & !1], r[j | 1]);
            if j % 2 == 0 {
                _mm256_unpacklo_ps(p, q)
            } else {
                _mm256_unpackhi_ps(p, q)
            }
        });
        let u: [__m256; 8] = std::array::from_fn(|j| {
            // Rows 0-3 from t[0..4], rows 4-7 from t[4..8]: columns j % 4 (low halves).
            let base = 4 * (j / 4);
            let (lo, hi) = (t[base + (j % 4) / 2], t[base + 2 + (j % 4) / 2]);
            if j % 2 == 0 {
                _mm256_shuffle_ps::<0x44>(lo, hi)
            } else {
                _mm256_shuffle_ps::<0xEE>(lo, hi)
            }
        });
        std::array::from_fn(|i| {
            if i < 4 {
                _mm256_permute2f128_ps::<0x20>(u[i], u[4 + i])
            } else {
                _mm256_permute2f128_ps::<0x31>(u[i - 4], u[i])
            }
        })
    }

    /// One 8 x 8 block: `x[j * in_b + i]` to `y[i * out_a + j]`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn block(x: *const u32, in_b: isize, y: *mut u32, out_a: isize) {
        let r: [__m256; 8] =
            std::array::from_fn(|j| _mm256_loadu_ps(x.wrapping_offset(j as isize * in_b).cast()));
        for (i, row) in transpose8(r).into_iter().enumerate() {
            _mm256_storeu_ps(y.wrapping_offset(i as isize * out_a).cast(), row);
        }
    }
}
