//! Times a "same" 3x3 convolution as memc-gemm's direct kernel and as Winograd F(2x2, 3x3),
//! alternating, one thread, the minimum of each over many calls; prints the largest
//! difference between their outputs.
//!
//! `cargo run --release -p memc-gemm --example winograd_bench -- C OC SIZE [REPEAT] [CAP_KIB]`

use memc_gemm::{
    pack_a_whole, pack_winograd_weights, packed_a_len, run_direct, run_winograd, winograd_blocking,
    winograd_scratch_bytes, winograd_weights_len, DirectAxis, DirectConv, DirectOperands, Epilogue,
    Mat, WinogradBlocking, WinogradConv,
};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap_or(0))
        .collect();
    if args.len() < 3 || args.iter().any(|&a| a == 0) {
        eprintln!("usage: winograd_bench C OC SIZE [REPEAT] [CAP_KIB] (positive integers)");
        std::process::exit(2);
    }
    let (c, m, size) = (args[0], args[1], args[2]);
    let repeat = args.get(3).copied().unwrap_or(100);
    let cap = args.get(4).copied().unwrap_or(256) as u64 * 1024;
    let pixels = size * size;
    let k = c * 9;
    let x: Vec<f32> = (0..c * pixels)
        .map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5)
        .collect();
    let w: Vec<f32> = (0..m * k)
        .map(|i| ((i * 104729) % 1000) as f32 * 1e-3 - 0.5)
        .collect();
    let a = Mat {
        ptr: w.as_ptr().cast_mut(),
        rs: k as isize,
        cs: 1,
    };
    let mut packed = vec![0f32; packed_a_len(m as u64, k as u64) as usize];
    let mut u = vec![0f32; winograd_weights_len(m as u64, c as u64) as usize];
    // SAFETY: `w` is `m x k`; the destinations hold their lengths.
    unsafe {
        pack_a_whole(packed.as_mut_ptr(), a, m, k);
        pack_winograd_weights(u.as_mut_ptr(), a, m, c);
    }
    let Some(WinogradBlocking {
        block,
        chunk,
        depth,
    }) = winograd_blocking(m as u64, c as u64, cap)
    else {
        eprintln!("no block fits {cap} bytes of scratch");
        std::process::exit(1);
    };
    // `WINOGRAD_BLOCKING=block,chunk,depth` overrides the choice (to compare blockings).
    let (block, chunk, depth) = match std::env::var("WINOGRAD_BLOCKING") {
        Ok(v) => {
            let v: Vec<u64> = v.split(',').map(|x| x.parse().unwrap_or(0)).collect();
            (v[0], v[1], v[2])
        }
        Err(_) => (block, chunk, depth),
    };
    let slot = winograd_scratch_bytes(block, chunk, depth) as usize;
    let mut scratch = vec![0u64; slot.div_ceil(8) + 8];
    let scratch_ptr = (scratch.as_mut_ptr() as usize).next_multiple_of(64) as *mut u8;
    let axis = |stride| DirectAxis {
        size: size as i64,
        stride,
        kernel: 3,
        step: 1,
        dilation: 1,
        pad: 1,
        out: size as i64,
    };
    let axes = [axis(size as i64), axis(1)];
    let direct = DirectConv {
        m,
        channels: c,
        channel_stride: pixels as isize,
        axes: &axes,
        alpha: 1.0,
        accumulate: false,
        epilogue: Epilogue::NONE,
    };
    let wino = WinogradConv {
        m,
        channels: c,
        h: size,
        w: size,
        channel_stride: pixels as isize,
        row_stride: size as isize,
        pad_top: 1,
        pad_left: 1,
        oh: size,
        ow: size,
        block: block as usize,
        chunk: chunk as usize,
        depth: depth as usize,
        alpha: 1.0,
        accumulate: false,
        epilogue: Epilogue::NONE,
    };
    let mut y1 = vec![0f32; m * pixels];
    let mut y2 = vec![0f32; m * pixels];
    let (xp, y1p, y2p, pp, up) = (
        x.as_ptr() as usize,
        y1.as_mut_ptr() as usize,
        y2.as_mut_ptr() as usize,
        packed.as_ptr() as usize,
        u.as_ptr() as usize,
    );
    let one = |t: usize, f: &(dyn Fn(usize) + Sync)| (0..t).for_each(f);
    let d_at = |_| DirectOperands {
        a_packed: pp as *const f32,
        x: xp as *const f32,
        c: Mat {
            ptr: y1p as *mut f32,
            rs: pixels as isize,
            cs: 1,
        },
        bias_shift: 0,
    };
    let w_at = |_| DirectOperands {
        a_packed: up as *const f32,
        x: xp as *const f32,
        c: Mat {
            ptr: y2p as *mut f32,
            rs: pixels as isize,
            cs: 1,
        },
        bias_shift: 0,
    };
    let (mut best_d, mut best_w) = (f64::MAX, f64::MAX);
    // `COLD=1` evicts the caches before each call (a 512 MiB sweep): the weights then come
    // from memory, as inside a large model whose weights do not fit the caches.
    let mut sweep = match std::env::var_os("COLD") {
        Some(_) => vec![0u8; 512 << 20],
        None => Vec::new(),
    };
    let mut evict = || {
        for (i, b) in sweep.iter_mut().enumerate().step_by(64) {
            *b = b.wrapping_add(i as u8);
        }
        std::hint::black_box(&sweep);
    };
    for _ in 0..repeat {
        evict();
        let t = std::time::Instant::now();
        // SAFETY: operands as built above.
        unsafe { run_direct(1, &d_at, &direct, 1, &one) };
        best_d = best_d.min(t.elapsed().as_secs_f64());
        evict();
        let t = std::time::Instant::now();
        // SAFETY: operands and scratch as built above.
        unsafe { run_winograd(1, &w_at, &wino, scratch_ptr, 1, &one) };
        best_w = best_w.min(t.elapsed().as_secs_f64());
    }
    let diff = y1
        .iter()
        .zip(&y2)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    let scale = y1.iter().map(|a| a.abs()).fold(0f32, f32::max);
    let flops = 2.0 * (m * pixels * k) as f64;
    println!(
        "{c}->{m} {size}x{size} 3x3: direct {:.4} ms ({:.1} GFLOP/s), winograd {:.4} ms (block {block}, chunk {chunk}, depth {depth}, scratch {} KiB), {:.2}x; max |diff| {diff:.2e} of {scale:.2e}",
        best_d * 1e3,
        flops / best_d * 1e-9,
        best_w * 1e3,
        slot / 1024,
        best_d / best_w,
    );
}
