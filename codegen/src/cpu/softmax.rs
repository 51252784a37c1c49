//! Softmax rows in native AVX-512 or AVX2 code: the loop kernel ONNX Softmax lowers to (per row, a
//! maximum over `x`, `y = exp(x - max)` stored, the sum of `y`, then `y * (1 / sum)`) runs 16
//! lanes at a time. Cranelift's loops are 4 lanes wide, and its IEEE `fmax` is a long
//! sequence: BERT's [4, 128, 128] softmax took 0.086-0.111 ms against onnxruntime's 0.032.
//!
//! - **What it computes.** Per row: the maximum with `vmaxps` (a NaN may be dropped there, but
//!   its `exp` makes the sum NaN, so every output of the row is NaN, as the loop gives; the
//!   sign of a zero maximum does not change `x - max`'s `exp`), `exp` with the same polynomial
//!   as the loop's 16-lane helper (`vmath::native`), the sum in two partial vectors (a
//!   different order from the loop's: within rounding), and the scale by `1 / sum` exactly as
//!   the loop writes it. Ragged ends are masked.
//! - **Memory.** Reads every element of the row of `x`, writes every element of the row of
//!   `y` and reads it back, as the loop does; `y` is `x` itself or apart from it (checked). No
//!   scratch.
//! - **When.** [`recognize`] takes a kernel with one inner axis and exactly those four stages
//!   (as `lower` emits Softmax), both views f32, unguarded and contiguous along the row. AVX-512F
//!   (16 lanes), or AVX2 with FMA (8 lanes, the same polynomial's 8-lane form: an AMD EPYC
//!   without AVX-512 ran the zoo BERT's softmax as loop code); elsewhere, or with
//!   `MEMC_NO_SOFTMAX` set, the kernel compiles as loop code.

use super::pool::WorkerPool;
use super::regions::RegionPtrs;
use crate::kernel::{
    BinaryOp, Inst, InstKind, LoopKernel, ReduceOp, Region, Scalar, Stage, UnaryOp,
};

/// Elements below which a softmax kernel runs on one thread.
const PARALLEL_WORK: u64 = 64 * 1024;

/// One view of a softmax kernel: its region, the element offset of point 0, and its strides
/// along the outer axes (1 along the row).
#[derive(Clone, Debug, PartialEq)]
struct RowView {
    region: Region,
    offset: i64,
    strides: Vec<i64>,
}

impl RowView {
    /// The lowest and highest element offsets the view reaches over `outer` rows of `len`.
    fn reach(&self, outer: &[u64], len: u64) -> (i64, i64) {
        let (mut lo, mut hi) = (self.offset, self.offset + len as i64 - 1);
        for (&s, &e) in self.strides.iter().zip(outer) {
            let span = s * (e as i64 - 1);
            lo += span.min(0);
            hi += span.max(0);
        }
        (lo, hi)
    }

    /// The element offset of row `row` (row-major over `outer`).
    fn row_offset(&self, outer: &[u64], mut row: u64) -> i64 {
        let mut offset = self.offset;
        for (&s, &e) in self.strides.iter().zip(outer).rev() {
            offset += s * (row % e) as i64;
            row /= e;
        }
        offset
    }
}

/// A recognized softmax kernel (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct Softmax {
    outer: Vec<u64>,
    len: u64,
    x: RowView,
    y: RowView,
}

/// Whether this CPU runs softmax kernels natively.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::env::var_os("MEMC_NO_SOFTMAX").is_none()
            && (std::arch::is_x86_feature_detected!("avx512f")
                || (std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The f32 view `inst` loads, if it is a plain load.
fn loaded(inst: &Inst) -> Option<u32> {
    match inst.kind {
        InstKind::Load { view } if inst.ty == Scalar::F32 => Some(view),
        _ => None,
    }
}

/// Whether every instruction computes in f32.
fn all_f32(insts: &[Inst]) -> bool {
    insts.iter().all(|i| i.ty == Scalar::F32)
}

/// The softmax that `k` computes, if it has exactly the form of the module doc.
pub(crate) fn recognize(k: &LoopKernel) -> Option<Softmax> {
    let (&[len], [max, exp, sum, scale]) = (k.inner.as_slice(), k.stages.as_slice()) else {
        return None;
    };
    let n_outer = k.outer.len();
    let view = |id: u32| -> Option<RowView> {
        let v = k.views.get(id as usize)?;
        let plain = v.elem == Scalar::F32
            && v.guards.is_empty()
            && v.strides.len() == n_outer + 1
            && v.strides[n_outer] == 1
            && v.byte_offset % 4 == 0;
        plain.then(|| RowView {
            region: v.region,
            offset: v.byte_offset / 4,
            strides: v.strides[..n_outer].to_vec(),
        })
    };
    // max over x
    let Stage::Reduce {
        insts,
        value: 0,
        op: ReduceOp::Max,
        init,
        ty: Scalar::F32,
    } = max
    else {
        return None;
    };
    let ([load_x], true) = (insts.as_slice(), f64::from_bits(*init) == f64::NEG_INFINITY) else {
        return None;
    };
    let xv = loaded(load_x)?;
    // y = exp(x - max)
    let Stage::Map { insts, stores } = exp else {
        return None;
    };
    let [a, b, c, d] = insts.as_slice() else {
        return None;
    };
    let exp_form = loaded(a) == Some(xv)
        && all_f32(insts)
        && matches!(b.kind, InstKind::Acc { stage: 0 })
        && matches!(
            c.kind,
            InstKind::Binary {
                op: BinaryOp::Sub,
                lhs: 0,
                rhs: 1
            }
        )
        && matches!(
            d.kind,
            InstKind::Unary {
                op: UnaryOp::Exp,
                arg: 2
            }
        );
    let [store] = stores.as_slice() else {
        return None;
    };
    if !exp_form || store.value != 3 || !store.indices.is_empty() || store.accumulate {
        return None;
    }
    let yv = store.view;
    // sum of y
    let Stage::Reduce {
        insts,
        value: 0,
        op: ReduceOp::Sum,
        init,
        ty: Scalar::F32,
    } = sum
    else {
        return None;
    };
    let ([load_y], true) = (insts.as_slice(), f64::from_bits(*init) == 0.0) else {
        return None;
    };
    if loaded(load_y) != Some(yv) {
        return None;
    }
    // y = y * (1 / sum)
    let Stage::Map { insts, stores } = scale else {
        return None;
    };
    let [a, b, c, d, e] = insts.as_slice() else {
        return None;
    };
    let scale_form = loaded(a) == Some(yv)
        && all_f32(insts)
        && matches!(b.kind, InstKind::Acc { stage: 2 })
        && matches!(c.kind, InstKind::Const { bits } if f64::from_bits(bits) == 1.0)
        && matches!(
            d.kind,
            InstKind::Binary {
                op: BinaryOp::Div,
                lhs: 2,
                rhs: 1
            }
        )
        && matches!(
            e.kind,
            InstKind::Binary {
                op: BinaryOp::Mul,
                lhs: 0,
                rhs: 3
            }
        );
    let [store] = stores.as_slice() else {
        return None;
    };
    if !scale_form
        || store.value != 4
        || store.view != yv
        || !store.indices.is_empty()
        || store.accumulate
    {
        return None;
    }
    let (x, y) = (view(xv)?, view(yv)?);
    // `y` is `x`, or reaches none of it (a partial overlap would read what a wider step wrote).
    let apart = x.region != y.region || {
        let ((xl, xh), (yl, yh)) = (x.reach(&k.outer, len), y.reach(&k.outer, len));
        xh < yl || yh < xl
    };
    if len == 0 || !(x == y || apart) {
        return None;
    }
    Some(Softmax {
        outer: k.outer.clone(),
        len,
        x,
        y,
    })
}

/// Runs a recognized softmax kernel, rows split over `pool`.
///
/// # Safety
/// `regions` holds what the kernel was validated against, and [`available`] held.
pub(crate) unsafe fn run_softmax(s: &Softmax, regions: RegionPtrs, pool: &WorkerPool) {
    let rows: u64 = s.outer.iter().product();
    if rows == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    let wide = std::arch::is_x86_feature_detected!("avx512f");
    let run_rows = |begin: u64, end: u64| {
        let regions = regions.get();
        let (x_base, y_base) = (
            regions.base(s.x.region).cast::<f32>(),
            regions.base(s.y.region).cast::<f32>(),
        );
        for row in begin..end {
            let x = x_base.wrapping_offset(s.x.row_offset(&s.outer, row) as isize);
            let y = y_base.wrapping_offset(s.y.row_offset(&s.outer, row) as isize);
            // SAFETY: the row lies inside the validated views; AVX-512F is there, or AVX2
            // and FMA (`available`).
            #[cfg(target_arch = "x86_64")]
            unsafe {
                if wide {
                    x86::row(x, y, s.len as usize)
                } else {
                    x86::row_avx2(x, y, s.len as usize)
                }
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (x, y);
        }
    };
    pool.for_row_runs(rows, rows.saturating_mul(s.len) >= PARALLEL_WORK, &run_rows);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::cpu::vmath::native::{exp_avx2, exp_avx512};
    use std::arch::x86_64::*;

    /// The first `n` of 16 lanes (all from 16 on).
    fn mask16(n: usize) -> __mmask16 {
        if n >= 16 {
            0xffff
        } else {
            ((1u32 << n) - 1) as __mmask16
        }
    }

    /// One row of `n` elements: `y = exp(x - max) / sum` as the module doc says.
    ///
    /// # Safety
    /// `x` and `y` hold `n` elements (the same ones, or apart); AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn row(x: *const f32, y: *mut f32, n: usize) {
        let mut m = [_mm512_set1_ps(f32::NEG_INFINITY); 4];
        let mut j = 0;
        while j + 64 <= n {
            for (u, m) in m.iter_mut().enumerate() {
                *m = _mm512_max_ps(*m, _mm512_loadu_ps(x.add(j + 16 * u)));
            }
            j += 64;
        }
        while j < n {
            let k = mask16(n - j);
            m[0] = _mm512_mask_max_ps(m[0], k, m[0], _mm512_maskz_loadu_ps(k, x.add(j)));
            j += 16;
        }
        let top = _mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3]));
        let top = _mm512_set1_ps(_mm512_reduce_max_ps(top));
        let mut s = [_mm512_setzero_ps(); 2];
        j = 0;
        while j < n {
            let k = mask16(n - j);
            let e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x.add(j)), top));
            _mm512_mask_storeu_ps(y.add(j), k, e);
            let p = (j / 16) % 2;
            s[p] = _mm512_mask_add_ps(s[p], k, s[p], e);
            j += 16;
        }
        let total = _mm512_reduce_add_ps(_mm512_add_ps(s[0], s[1]));
        let inv = _mm512_set1_ps(1.0 / total);
        j = 0;
        while j < n {
            let k = mask16(n - j);
            let v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y.add(j)), inv);
            _mm512_mask_storeu_ps(y.add(j), k, v);
            j += 16;
        }
    }

    /// The first `n` of 8 lanes (all from 8 on), as a vector mask.
    #[inline(always)]
    unsafe fn mask8(n: usize) -> __m256i {
        let n = n.min(8) as i32;
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(n),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }

    /// The maximum of the 8 lanes of `v`.
    #[inline(always)]
    unsafe fn reduce_max8(v: __m256) -> f32 {
        let q = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let q = _mm_max_ps(q, _mm_movehl_ps(q, q));
        _mm_cvtss_f32(_mm_max_ss(q, _mm_shuffle_ps::<0b01>(q, q)))
    }

    /// The sum of the 8 lanes of `v`.
    #[inline(always)]
    unsafe fn reduce_add8(v: __m256) -> f32 {
        let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let q = _mm_add_ps(q, _mm_movehl_ps(q, q));
        _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps::<0b01>(q, q)))
    }

    /// [`row`] on AVX2 with FMA: 8 lanes, `exp` the 8-lane form of the same polynomial.
    ///
    /// # Safety
    /// As [`row`]; AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn row_avx2(x: *const f32, y: *mut f32, n: usize) {
        let low = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut m = [low; 4];
        let mut j = 0;
        while j + 32 <= n {
            for (u, m) in m.iter_mut().enumerate() {
                *m = _mm256_max_ps(*m, _mm256_loadu_ps(x.add(j + 8 * u)));
            }
            j += 32;
        }
        while j < n {
            let k = mask8(n - j);
            let v = _mm256_blendv_ps(low, _mm256_maskload_ps(x.add(j), k), _mm256_castsi256_ps(k));
            m[0] = _mm256_max_ps(m[0], v);
            j += 8;
        }
        let top = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
        let top = _mm256_set1_ps(reduce_max8(top));
        // Whole vectors unmasked, the ragged end masked: a masked store is microcoded on
        // AMD's CPUs (with every vector masked the rows ran slower than the loop code).
        let mut s = [_mm256_setzero_ps(); 2];
        j = 0;
        while j + 8 <= n {
            let e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x.add(j)), top));
            _mm256_storeu_ps(y.add(j), e);
            let p = (j / 8) % 2;
            s[p] = _mm256_add_ps(s[p], e);
            j += 8;
        }
        if j < n {
            let k = mask8(n - j);
            let e = exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(x.add(j), k), top));
            _mm256_maskstore_ps(y.add(j), k, e);
            let p = (j / 8) % 2;
            s[p] = _mm256_add_ps(s[p], _mm256_and_ps(e, _mm256_castsi256_ps(k)));
        }
        let total = reduce_add8(_mm256_add_ps(s[0], s[1]));
        let inv = _mm256_set1_ps(1.0 / total);
        j = 0;
        while j + 8 <= n {
            _mm256_storeu_ps(y.add(j), _mm256_mul_ps(_mm256_loadu_ps(y.add(j)), inv));
            j += 8;
        }
        if j < n {
            let k = mask8(n - j);
            let v = _mm256_mul_ps(_mm256_maskload_ps(y.add(j), k), inv);
            _mm256_maskstore_ps(y.add(j), k, v);
        }
    }
}
