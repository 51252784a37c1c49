//! Times a pointwise (1x1) convolution `Y = W X` (`W` `m x k`, `X` `k x n`: `k` input channels
//! by `n` pixels) as memc's GEMM runs it, `W` packed whole (`Product::a_packed`), one thread,
//! the minimum over many calls, with and without asking for the weight's panels ahead
//! (`GemmBlocking::prefetch_packed`), alternating; checks that both give the same bits.
//!
//! `cargo run --release -p memc-gemm --example product_bench -- M N K [REPEAT]`. The weight
//! comes from the caches (from the last-level cache once it outgrows the second level) unless
//! `FLUSH=1` (flushes the weight's lines before each call: it then comes from memory, as
//! inside a model whose weights outgrow the caches) or `COLD=MIB` (sweeps MIB MiB, 512 by
//! default, before each call: everything comes from memory).

use memc_gemm::{pack_a_whole, packed_a_len, Epilogue, GemmBlocking, Mat, Product};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap_or(0))
        .collect();
    if args.len() < 3 || args.iter().any(|&a| a == 0) {
        eprintln!("usage: product_bench M N K [REPEAT] (positive integers)");
        std::process::exit(2);
    }
    let (m, n, k) = (args[0], args[1], args[2]);
    let repeat = args.get(3).copied().unwrap_or(100);
    let x: Vec<f32> = (0..k * n)
        .map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5)
        .collect();
    let w: Vec<f32> = (0..m * k)
        .map(|i| ((i * 104729) % 1000) as f32 * 1e-3 - 0.5)
        .collect();
    let mut packed = vec![0f32; packed_a_len(m as u64, k as u64) as usize];
    // SAFETY: `w` is `m x k`; `packed` holds its packed length.
    unsafe {
        let wm = Mat {
            ptr: w.as_ptr().cast_mut(),
            rs: k as isize,
            cs: 1,
        };
        pack_a_whole(packed.as_mut_ptr(), wm, m, k);
    }
    let blocking = GemmBlocking::new(1, m as u64, n as u64, k as u64, 4, true).without_a_panel();
    let ahead = GemmBlocking {
        prefetch_packed: true,
        ..blocking
    };
    let mut scratch = vec![0u64; (blocking.slot_bytes() as usize).div_ceil(8) + 8];
    let scratch_ptr = (scratch.as_mut_ptr() as usize).next_multiple_of(64) as *mut u8;
    let mut y1 = vec![0f32; m * n];
    let mut y2 = vec![0f32; m * n];
    let (xp, ap) = (x.as_ptr() as usize, packed.as_ptr() as usize);
    let product = |y: usize| {
        move |_| Product {
            m,
            n,
            k,
            a: Mat {
                ptr: std::ptr::null_mut(),
                rs: 0,
                cs: 0,
            },
            b: Mat {
                ptr: xp as *mut f32,
                rs: n as isize,
                cs: 1,
            },
            c: Mat {
                ptr: y as *mut f32,
                rs: n as isize,
                cs: 1,
            },
            alpha: 1.0,
            accumulate: false,
            a_packed: Some(ap as *const f32),
            b_packed: None,
            epilogue: Epilogue::NONE,
        }
    };
    let (plain, prefetching) = (
        product(y1.as_mut_ptr() as usize),
        product(y2.as_mut_ptr() as usize),
    );
    let one = |t: usize, f: &(dyn Fn(usize) + Sync)| (0..t).for_each(f);
    let mut sweep = match std::env::var("COLD") {
        Ok(mib) => vec![0u8; mib.parse().unwrap_or(512) << 20],
        Err(_) => Vec::new(),
    };
    let flush = std::env::var_os("FLUSH").is_some();
    let weight = (packed.as_ptr() as usize, packed.len() * 4);
    let mut evict = || {
        #[cfg(target_arch = "x86_64")]
        if flush {
            for line in (weight.0..weight.0 + weight.1).step_by(64) {
                // SAFETY: `line` lies in `packed`; flushing a line changes no value.
                unsafe { std::arch::x86_64::_mm_clflush(line as *const u8) };
            }
            // SAFETY: a fence.
            unsafe { std::arch::x86_64::_mm_mfence() };
        }
        for (i, b) in sweep.iter_mut().enumerate().step_by(64) {
            *b = b.wrapping_add(i as u8);
        }
        std::hint::black_box(&sweep);
    };
    let (mut best_plain, mut best_ahead) = (f64::MAX, f64::MAX);
    for _ in 0..repeat {
        evict();
        let t = std::time::Instant::now();
        // SAFETY: operands and scratch as built above.
        unsafe { memc_gemm::run::<f32>(1, &plain, &blocking, Some(scratch_ptr), 1, &one) };
        best_plain = best_plain.min(t.elapsed().as_secs_f64());
        evict();
        let t = std::time::Instant::now();
        // SAFETY: as above.
        unsafe { memc_gemm::run::<f32>(1, &prefetching, &ahead, Some(scratch_ptr), 1, &one) };
        best_ahead = best_ahead.min(t.elapsed().as_secs_f64());
    }
    let same = y1.iter().zip(&y2).all(|(a, b)| a.to_bits() == b.to_bits());
    let flops = 2.0 * (m * n * k) as f64;
    println!(
        "{m}x{n}x{k}: {:.4} ms ({:.1} GFLOP/s), with the weight asked for ahead {:.4} ms ({:.1} GFLOP/s); same bits: {same}",
        best_plain * 1e3,
        flops / best_plain * 1e-9,
        best_ahead * 1e3,
        flops / best_ahead * 1e-9,
    );
    if !same {
        std::process::exit(1);
    }
}
