//! Side-by-side benchmark: memc's GEMM (`memc-gemm`, as the CPU backend runs contractions: its
//! panels in a buffer standing for the planned scratch, threads from memc's worker pool)
//! against the `gemm` crate (its own packing, rayon), on the same row-major f32 inputs, at 1
//! and 2 threads. Prints GFLOP/s, the percentage of the measured FMA peak of the cores used,
//! and checks that both agree.
//!
//! Run with `cargo run --release -p memc-codegen --example memc_gemm_bench` (sizes are
//! `m x k x n`; `MEMC_GEMM_ISA=avx2|scalar` forces memc's microkernels).

use memc_codegen::cpu::WorkerPool;
use memc_gemm::{GemmBlocking, Mat, Product};
use std::time::{Duration, Instant};

/// The best time of `f` over repeated runs for at least `budget`.
fn best_time(budget: Duration, mut f: impl FnMut()) -> Duration {
    f();
    let started = Instant::now();
    let mut best = Duration::MAX;
    let mut runs = 0;
    while runs < 3 || started.elapsed() < budget {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
        runs += 1;
    }
    best
}

/// One core's f32 FMA peak in GFLOP/s, measured with independent vector FMAs.
fn fma_peak() -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        #[target_feature(enable = "avx512f")]
        unsafe fn avx512(iters: u64) -> f32 {
            let mut acc = [_mm512_set1_ps(1.0); 16];
            let (x, y) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
            for _ in 0..iters {
                for a in acc.iter_mut() {
                    *a = _mm512_fmadd_ps(*a, x, y);
                }
            }
            acc.iter().map(|&a| _mm512_reduce_add_ps(a)).sum()
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(iters: u64) -> f32 {
            let mut acc = [_mm256_set1_ps(1.0); 12];
            let (x, y) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
            for _ in 0..iters {
                for a in acc.iter_mut() {
                    *a = _mm256_fmadd_ps(*a, x, y);
                }
            }
            let mut out = [0f32; 8];
            let mut s = 0.0;
            for a in acc {
                _mm256_storeu_ps(out.as_mut_ptr(), a);
                s += out.iter().sum::<f32>();
            }
            s
        }
        let iters = 20_000_000u64;
        if is_x86_feature_detected!("avx512f") {
            let t = best_time(Duration::from_millis(300), || {
                std::hint::black_box(unsafe { avx512(std::hint::black_box(iters)) });
            });
            return (iters * 16 * 16 * 2) as f64 / t.as_secs_f64() / 1e9;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            let t = best_time(Duration::from_millis(300), || {
                std::hint::black_box(unsafe { avx2(std::hint::black_box(iters)) });
            });
            return (iters * 12 * 8 * 2) as f64 / t.as_secs_f64() / 1e9;
        }
    }
    f64::NAN
}

fn main() {
    let peak = fma_peak();
    println!(
        "memc's GEMM vs the gemm crate, f32, row-major; one core's FMA peak {peak:.1} GFLOP/s; memc microkernels: {:?}",
        memc_gemm::isa()
    );
    println!(
        "{:<22} {:>7} {:>12} {:>8} {:>14} {:>12} {:>8} {:>9} {:>11}",
        "m x k x n",
        "threads",
        "memc GF/s",
        "% peak",
        "B packed GF/s",
        "gemm GF/s",
        "% peak",
        "memc/gemm",
        "scratch KiB"
    );
    let sizes: [(&str, usize, usize, usize); 9] = [
        ("256x768x768", 256, 768, 768),
        ("128x1024x256 (FFN out)", 128, 1024, 256),
        ("128x256x1024 (FFN in)", 128, 256, 1024),
        ("1x2048x2048 (GEMV)", 1, 2048, 2048),
        ("16x2048x2048", 16, 2048, 2048),
        ("4096x64x64", 4096, 64, 64),
        ("64x576x3136 (conv)", 64, 9 * 64, 56 * 56),
        ("256x64x3136 (1x1 conv)", 256, 64, 56 * 56),
        ("64x256x3136 (1x1 conv)", 64, 256, 56 * 56),
    ];
    for (label, m, k, n) in sizes {
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7) % 13) as f32 / 13.0 - 0.5)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 5) % 11) as f32 / 11.0 - 0.5)
            .collect();
        // `B` as the plan file holds a constant weight (`prepack`): packed whole.
        let mut b_whole = vec![0f32; memc_gemm::packed_b_len(k as u64, n as u64) as usize];
        let b_mat = Mat {
            ptr: b.as_ptr().cast_mut(),
            rs: n as isize,
            cs: 1,
        };
        // SAFETY: `b` is `k x n` row-major; `b_whole` holds `packed_b_len(k, n)` values.
        unsafe { memc_gemm::pack_b_whole(b_whole.as_mut_ptr(), b_mat, k, n) };
        let blocking_whole = GemmBlocking::new(1, m as u64, n as u64, k as u64, 4, false);
        let mut c_whole = vec![0f32; m * n];
        let mut c_memc = vec![0f32; m * n];
        let mut c_gemm = vec![0f32; m * n];
        let pack_b = !memc_gemm::gemm_b_in_place(m as u64, 1);
        let blocking = GemmBlocking::new(1, m as u64, n as u64, k as u64, 4, pack_b);
        // The planned scratch: 64-aligned, as the arena's offsets are.
        let mut scratch = vec![0u128; (blocking.scratch_bytes() as usize).div_ceil(16) + 4];
        let base = scratch.as_mut_ptr().cast::<u8>();
        let slots = base.wrapping_add(base.align_offset(64));
        let flops = 2.0 * (m * n * k) as f64;
        for threads in [1usize, 2] {
            let pool = WorkerPool::new(threads).expect("a pool");
            let rayon_pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a pool");
            let product = Product {
                m,
                n,
                k,
                a: Mat {
                    ptr: a.as_ptr().cast_mut(),
                    rs: k as isize,
                    cs: 1,
                },
                b: Mat {
                    ptr: b.as_ptr().cast_mut(),
                    rs: n as isize,
                    cs: 1,
                },
                c: Mat {
                    ptr: c_memc.as_mut_ptr(),
                    rs: n as isize,
                    cs: 1,
                },
                alpha: 1.0f32,
                accumulate: false,
                a_packed: None,
                b_packed: None,
                epilogue: memc_gemm::Epilogue::NONE,
            };
            let parallel = (m * n * k) as u64 >= memc_gemm::GEMM_PARALLEL_MACS;
            let t_memc = best_time(Duration::from_millis(500), || unsafe {
                memc_gemm::run::<f32>(
                    1,
                    &|_| product,
                    &blocking,
                    Some(slots),
                    if parallel { threads } else { 1 },
                    &|t, f| pool.broadcast(t, f),
                );
            });
            let whole = Product {
                b_packed: Some(b_whole.as_ptr()),
                c: Mat {
                    ptr: c_whole.as_mut_ptr(),
                    rs: n as isize,
                    cs: 1,
                },
                ..product
            };
            let t_whole = best_time(Duration::from_millis(500), || unsafe {
                memc_gemm::run::<f32>(
                    1,
                    &|_| whole,
                    &blocking_whole,
                    None,
                    if parallel { threads } else { 1 },
                    &|t, f| pool.broadcast(t, f),
                );
            });
            let parallelism = if threads > 1 {
                gemm::Parallelism::Rayon(threads)
            } else {
                gemm::Parallelism::None
            };
            let c_addr = c_gemm.as_mut_ptr() as usize;
            let t_gemm = best_time(Duration::from_millis(500), || {
                rayon_pool.install(|| unsafe {
                    gemm::gemm(
                        m,
                        n,
                        k,
                        c_addr as *mut f32,
                        1,
                        n as isize,
                        false,
                        a.as_ptr(),
                        1,
                        k as isize,
                        b.as_ptr(),
                        1,
                        n as isize,
                        1.0f32,
                        1.0f32,
                        false,
                        false,
                        false,
                        parallelism,
                    )
                })
            });
            let worst = c_memc
                .iter()
                .zip(&c_gemm)
                .map(|(x, y)| (x - y).abs() / (1.0 + y.abs()))
                .fold(0f32, f32::max);
            assert!(worst < 1e-3, "{label}: memc and gemm differ by {worst}");
            let worst_whole = c_whole
                .iter()
                .zip(&c_gemm)
                .map(|(x, y)| (x - y).abs() / (1.0 + y.abs()))
                .fold(0f32, f32::max);
            assert!(
                worst_whole < 1e-3,
                "{label}: B packed whole differs by {worst_whole}"
            );
            let (g_memc, g_gemm) = (
                flops / t_memc.as_secs_f64() / 1e9,
                flops / t_gemm.as_secs_f64() / 1e9,
            );
            let cores_peak = peak * threads as f64;
            let g_whole = flops / t_whole.as_secs_f64() / 1e9;
            println!(
                "{:<22} {:>7} {:>12.1} {:>7.0}% {:>14.1} {:>12.1} {:>7.0}% {:>9.2} {:>11.1}",
                label,
                threads,
                g_memc,
                100.0 * g_memc / cores_peak,
                g_whole,
                g_gemm,
                100.0 * g_gemm / cores_peak,
                g_memc / g_gemm,
                blocking.scratch_bytes() as f64 / 1024.0
            );
        }
    }
}
