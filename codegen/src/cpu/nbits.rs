//! `memc.matmul_nbits` kernels ([`NBitsMatMul`]): products with a packed 4- or 8-bit weight.
//!
//! Guarantees: for a validated kernel every byte read or written lies inside the bounds
//! `NBitsMatMul::validate` checked; the result is the same whichever thread runs which rows.

use crate::kernel::Region;
use crate::nbits::{row_bytes, NBitsMatMul};

/// Runs `q` over all its rows.
///
/// # Safety
/// As [`super::CpuProgram::run_kernel`]: the regions are at least as large as the sizes the
/// kernel was validated against, and the arena is not accessed by anything else meanwhile.
pub(crate) unsafe fn run_nbits(
    q: &NBitsMatMul,
    arena: *mut u8,
    weights: *const u8,
    _pool: &rayon::ThreadPool,
) {
    run_scalar(q, arena, weights);
}

/// The plain reference: decode each value as DequantizeLinear does, multiply-add in f32.
unsafe fn run_scalar(q: &NBitsMatMul, arena: *mut u8, weights: *const u8) {
    let rows = q.rows();
    if rows == 0 || q.n == 0 {
        return;
    }
    let base = |region: Region| match region {
        Region::Arena => arena as *const u8,
        Region::Weights => weights,
    };
    let packed = std::slice::from_raw_parts(
        weights.add(q.b as usize),
        (q.n * row_bytes(q.k, q.bits)) as usize,
    );
    let params = (q.n * q.k_blocks()) as usize;
    let scales = std::slice::from_raw_parts(weights.add(q.scales as usize).cast::<f32>(), params);
    let zero_points = q
        .zero_points
        .map(|o| std::slice::from_raw_parts(weights.add(o as usize).cast::<f32>(), params));
    let bias = q.bias.map(|(region, o)| {
        std::slice::from_raw_parts(base(region).add(o as usize).cast::<f32>(), q.n as usize)
    });
    let kb = q.k_blocks();
    for r in 0..rows {
        let a = base(q.a.region)
            .offset(q.row_offset(&q.a, r) as isize)
            .cast::<f32>();
        let c = arena.offset(q.row_offset(&q.c, r) as isize).cast::<f32>();
        for n in 0..q.n {
            let mut acc = 0f32;
            for k in 0..q.k {
                let p = (n * kb + k / q.block) as usize;
                let zp = zero_points.map_or(0.0, |z| z[p]);
                let w = (q.quantized(packed, n, k) as f32 - zp) * scales[p];
                acc = (*a.add(k as usize)).mul_add(w, acc);
            }
            if let Some(bias) = bias {
                acc += bias[n as usize];
            }
            *c.add(n as usize) = acc;
        }
    }
}
