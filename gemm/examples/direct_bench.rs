//! Times memc-gemm's direct convolution alone (no plan, no runtime): the minimum over many
//! calls on one thread, so a machine whose speed drifts between phases still gives stable
//! figures.
//!
//! `cargo run --release -p memc-gemm --example direct_bench -- C OC SIZE KERNEL STRIDE
//! [depthwise] [REPEAT]`: a `C`-channel `SIZE x SIZE` input, `OC` output channels, a square
//! window "same"-padded (`KERNEL / 2`); `depthwise` runs `C` planes of one channel each
//! (`OC` is ignored: pass `C`), as a depthwise layer's groups.

use memc_gemm::{
    direct_conv_runs, pack_a_whole, packed_a_len, run_direct, DirectAxis, DirectConv,
    DirectOperands, Epilogue, Mat,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: Option<i64>| -> i64 {
        match args.get(i).map(|a| a.parse::<i64>()) {
            Some(Ok(v)) if v > 0 => v,
            None if default.is_some() => default.unwrap_or(1),
            _ => {
                eprintln!(
                    "usage: direct_bench C OC SIZE KERNEL STRIDE [depthwise] [REPEAT] (positive integers)"
                );
                std::process::exit(2)
            }
        }
    };
    let (c, oc, size, kernel, step) = (
        number(0, None) as usize,
        number(1, None) as usize,
        number(2, None),
        number(3, None),
        number(4, None),
    );
    let depthwise = args.get(5).is_some_and(|a| a == "depthwise");
    let repeat = number(if depthwise { 6 } else { 5 }, Some(200)) as usize;
    let pad = kernel / 2;
    let out = (size + 2 * pad - kernel) / step + 1;
    let axis = |stride| DirectAxis {
        size,
        stride,
        kernel,
        step,
        dilation: 1,
        pad,
        out,
    };
    let axes = [axis(size), axis(1)];
    let (batches, m, channels) = if depthwise { (c, 1, 1) } else { (1, oc, c) };
    if !direct_conv_runs(&axes, channels as u64) {
        eprintln!("the direct kernel does not run this convolution on this CPU");
        std::process::exit(1);
    }
    let image = (size * size) as usize;
    let pixels = (out * out) as usize;
    let k = channels * (kernel * kernel) as usize;
    let x: Vec<f32> = (0..c * image).map(|i| (i % 7) as f32 * 0.1).collect();
    let w: Vec<f32> = (0..m * k).map(|i| (i % 11) as f32 * 0.01).collect();
    let packed_len = packed_a_len(m as u64, k as u64) as usize;
    let mut packed = vec![0f32; packed_len];
    let a = Mat {
        ptr: w.as_ptr().cast_mut(),
        rs: k as isize,
        cs: 1,
    };
    // SAFETY: `w` is `m x k` row-major; `packed` holds `packed_a_len(m, k)` values.
    unsafe { pack_a_whole(packed.as_mut_ptr(), a, m, k) };
    let mut y = vec![0f32; batches * m * pixels];
    let conv = DirectConv {
        m,
        channels,
        channel_stride: image as isize,
        axes: &axes,
        alpha: 1.0,
        accumulate: false,
        epilogue: Epilogue::NONE,
    };
    let (x_at, y_at, a_at) = (
        x.as_ptr() as usize,
        y.as_mut_ptr() as usize,
        packed.as_ptr() as usize,
    );
    // Every batch index (depthwise plane) shares the one packed weight.
    let at = |batch: usize| DirectOperands {
        a_packed: a_at as *const f32,
        x: (x_at as *const f32).wrapping_add(batch * channels * image),
        c: Mat {
            ptr: (y_at as *mut f32).wrapping_add(batch * m * pixels),
            rs: pixels as isize,
            cs: 1,
        },
        bias_shift: 0,
    };
    let one_thread = |t: usize, f: &(dyn Fn(usize) + Sync)| (0..t).for_each(f);
    let mut best = f64::MAX;
    for _ in 0..repeat {
        let started = std::time::Instant::now();
        // SAFETY: the operands hold what the axes, channels and `m` address.
        unsafe { run_direct(batches, &at, &conv, 1, &one_thread) };
        best = best.min(started.elapsed().as_secs_f64());
    }
    let flops = 2.0 * (batches * m * pixels * k) as f64;
    println!(
        "{c}->{} {size}x{size} {kernel}x{kernel}/{step}{}: min {:.4} ms, {:.1} GFLOP/s (checksum {})",
        if depthwise { c } else { oc },
        if depthwise { " depthwise" } else { "" },
        best * 1e3,
        flops / best * 1e-9,
        y.iter().sum::<f32>()
    );
}
