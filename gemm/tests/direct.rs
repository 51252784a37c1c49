//! The direct convolution against a naive loop: 1-, 2- and 3-d windows, "same" padding (whole
//! rows tiled flat) and valid, asymmetric, dilated or strided windows (row by row; stride 2
//! along the row; short rows or other strides gathered across rows), a padded input row stride, output channels around the strip height, `K` past one packed run, `alpha` and
//! `accumulate`, several batch indices, one and several threads.
//! `MEMC_GEMM_ISA=avx2` runs the same on the AVX2 kernel.

use memc_gemm::{
    direct_conv_fills_lanes, direct_conv_runs, direct_conv_window_fits, pack_a_whole, packed_a_len,
    run_direct, DirectAxis, DirectConv, DirectOperands, Epilogue, Mat,
};

/// A deterministic value in [-0.5, 0.5).
fn value(i: usize, salt: usize) -> f32 {
    ((i * 2654435761 + salt * 40503) % 1000) as f32 / 1000.0 - 0.5
}

/// One axis: input `size`, `kernel`, `dilation`, begin pad `pad` and end pad `end`, stride 1.
fn axis(size: i64, kernel: i64, dilation: i64, pad: i64, end: i64) -> DirectAxis {
    strided(size, kernel, 1, dilation, pad, end)
}

/// One axis with a stride (`step`).
fn strided(size: i64, kernel: i64, step: i64, dilation: i64, pad: i64, end: i64) -> DirectAxis {
    DirectAxis {
        size,
        stride: 0,
        kernel,
        step,
        dilation,
        pad,
        out: (size + pad + end - (kernel - 1) * dilation - 1) / step + 1,
    }
}

/// Runs a convolution of `m` output channels over `channels` input channels and `axes`
/// (strides filled in here: dense, or with `row_pad` spare elements after each row of the
/// last axis) on `threads` threads, and checks it against the naive loop.
fn check(m: usize, channels: usize, mut axes: Vec<DirectAxis>, row_pad: i64, threads: usize) {
    let n = axes.len();
    let mut stride = 1;
    for i in (0..n).rev() {
        axes[i].stride = stride;
        stride *= axes[i].size + if i == n - 1 { row_pad } else { 0 };
    }
    let image = stride as usize;
    let taps: usize = axes.iter().map(|a| a.kernel as usize).product();
    let pixels: usize = axes.iter().map(|a| a.out as usize).product();
    let k = channels * taps;
    assert!(
        direct_conv_fills_lanes(&axes, channels as u64),
        "a case the direct kernel leaves to the GEMM: {axes:?}"
    );
    if !direct_conv_runs(&axes, channels as u64) {
        eprintln!("skipped: this CPU has neither AVX-512 nor AVX2 with FMA");
        return;
    }
    const BATCHES: usize = 2;
    let x: Vec<f32> = (0..BATCHES * channels * image)
        .map(|i| value(i, 1))
        .collect();
    let w: Vec<f32> = (0..m * k).map(|i| value(i, 2)).collect();
    let mut packed = vec![0f32; packed_a_len(m as u64, k as u64) as usize];
    let a = Mat {
        ptr: w.as_ptr().cast_mut(),
        rs: k as isize,
        cs: 1,
    };
    // SAFETY: `w` is `m x k` row-major; `packed` holds `packed_a_len(m, k)` values.
    unsafe { pack_a_whole(packed.as_mut_ptr(), a, m, k) };
    for (accumulate, alpha) in [(false, 1.0f32), (true, -0.5)] {
        let start: Vec<f32> = (0..BATCHES * m * pixels)
            .map(|i| if accumulate { value(i, 3) } else { f32::NAN })
            .collect();
        let mut out = start.clone();
        let conv = DirectConv {
            m,
            channels,
            channel_stride: image as isize,
            axes: &axes,
            alpha,
            accumulate,
            epilogue: Epilogue::NONE,
        };
        let (x_ptr, out_ptr) = (x.as_ptr() as usize, out.as_mut_ptr() as usize);
        let packed_ptr = packed.as_ptr() as usize;
        let at = |batch: usize| DirectOperands {
            a_packed: packed_ptr as *const f32,
            x: (x_ptr as *const f32).wrapping_add(batch * channels * image),
            c: Mat {
                ptr: (out_ptr as *mut f32).wrapping_add(batch * m * pixels),
                rs: pixels as isize,
                cs: 1,
            },
            bias_shift: 0,
        };
        let broadcast = |t: usize, f: &(dyn Fn(usize) + Sync)| {
            std::thread::scope(|s| {
                for i in 0..t {
                    s.spawn(move || f(i));
                }
            })
        };
        // SAFETY: the operands hold what the axes, channels and `m` address.
        unsafe { run_direct(BATCHES, &at, &conv, threads, &broadcast) };
        {
            // Finished as stored: the same values plus each batch index's rows' bias (without
            // `accumulate`: a grouped convolution's groups, their biases one after the other)
            // or a residual (with it; it lies right after the results), clamped (NaN stays
            // NaN), bit for bit.
            let len = start.len();
            let residual: Vec<f32> = (0..len).map(|i| value(i, 4)).collect();
            let biases: Vec<f32> = (0..BATCHES * m).map(|i| value(i, 5)).collect();
            let mut finished = start.clone();
            finished.extend_from_slice(&residual);
            let finished_ptr = finished.as_mut_ptr() as usize;
            let at = |batch: usize| DirectOperands {
                c: Mat {
                    ptr: (finished_ptr as *mut f32).wrapping_add(batch * m * pixels),
                    ..at(batch).c
                },
                bias_shift: (batch * m) as isize,
                ..at(batch)
            };
            let (lo, hi) = (-0.05f32, 0.1f32);
            let add = accumulate.then_some(len as isize);
            let bias = (!accumulate).then_some((biases.as_ptr(), 1isize));
            let conv = DirectConv {
                epilogue: Epilogue {
                    bias,
                    add,
                    clamp: Some((lo, hi)),
                },
                ..conv
            };
            // SAFETY: as above; the residual lies `len` elements on in the same buffer.
            unsafe { run_direct(BATCHES, &at, &conv, threads, &broadcast) };
            for (i, (&got, &plain)) in finished[..len].iter().zip(&out).enumerate() {
                let plain = if add.is_some() {
                    plain + residual[i]
                } else {
                    plain + biases[i / pixels]
                };
                let want = if plain < lo {
                    lo
                } else if plain > hi {
                    hi
                } else {
                    plain
                };
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "axes {axes:?} threads {threads} accumulate {accumulate}: finished [{i}] \
                     {got}, want {want}"
                );
            }
        }
        for batch in 0..BATCHES {
            for row in 0..m {
                for pixel in 0..pixels {
                    let mut sum = 0f64;
                    for c in 0..channels {
                        for t in 0..taps {
                            let (mut o, mut tp) = (pixel, t);
                            let mut at = (batch * channels + c) * image;
                            let mut inside = true;
                            for ax in axes.iter().rev() {
                                let (oi, ti) = (o % ax.out as usize, tp % ax.kernel as usize);
                                o /= ax.out as usize;
                                tp /= ax.kernel as usize;
                                let pos = oi as i64 * ax.step - ax.pad + ti as i64 * ax.dilation;
                                inside &= (0..ax.size).contains(&pos);
                                at = at.wrapping_add((pos * ax.stride) as usize);
                            }
                            if inside {
                                sum += w[row * k + c * taps + t] as f64 * x[at] as f64;
                            }
                        }
                    }
                    let index = (batch * m + row) * pixels + pixel;
                    let mut want = alpha as f64 * sum;
                    if accumulate {
                        want += start[index] as f64;
                    }
                    let got = out[index] as f64;
                    assert!(
                        (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "m {m} channels {channels} axes {axes:?} row_pad {row_pad} threads \
                         {threads} accumulate {accumulate}: batch {batch} row {row} pixel \
                         {pixel}: {got} != {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn same_padded_2d_windows_tile_whole_rows() {
    for size in [5, 7, 14, 32, 33] {
        for (m, channels) in [(1, 2), (6, 3), (13, 16), (32, 40)] {
            let axes = vec![axis(size, 3, 1, 1, 1), axis(size, 3, 1, 1, 1)];
            check(m, channels, axes, 0, 1);
        }
    }
}

#[test]
fn valid_asymmetric_and_dilated_windows_tile_row_by_row() {
    let cases = [
        vec![axis(10, 3, 1, 0, 0), axis(12, 3, 1, 0, 0)],
        vec![axis(9, 3, 1, 0, 1), axis(40, 3, 1, 1, 0)],
        vec![axis(11, 3, 2, 2, 2), axis(11, 3, 2, 2, 2)],
        vec![axis(8, 5, 1, 2, 2), axis(70, 7, 1, 3, 3)],
        vec![axis(6, 1, 1, 0, 0), axis(6, 4, 1, 2, 1)],
        // Pointwise (one tap: `K` is the channels, walked without the taps' counters).
        vec![axis(6, 1, 1, 0, 0), axis(19, 1, 1, 0, 0)],
    ];
    for axes in cases {
        check(7, 5, axes.clone(), 0, 1);
        check(12, 24, axes, 0, 2);
    }
}

#[test]
fn padded_rows_1d_and_3d_windows() {
    check(8, 4, vec![axis(12, 3, 1, 1, 1), axis(12, 3, 1, 1, 1)], 3, 1);
    check(8, 4, vec![axis(37, 5, 1, 2, 2)], 0, 1);
    check(9, 30, vec![axis(100, 9, 1, 4, 4)], 0, 3);
    let cube = vec![
        axis(4, 3, 1, 1, 1),
        axis(5, 3, 1, 1, 1),
        axis(6, 3, 1, 1, 1),
    ];
    check(10, 3, cube.clone(), 0, 1);
    check(10, 3, cube, 0, 2);
}

#[test]
fn strided_windows_read_every_other_element() {
    let cases = [
        // ResNet's stem and downsampling windows.
        vec![strided(64, 7, 2, 1, 3, 3), strided(64, 7, 2, 1, 3, 3)],
        vec![strided(16, 3, 2, 1, 1, 1), strided(16, 3, 2, 1, 1, 1)],
        vec![strided(20, 3, 2, 1, 1, 1), strided(20, 3, 2, 1, 1, 1)],
        // Odd sizes, a dilated strided row, a stride of 3 on the outer axis only.
        vec![strided(9, 3, 1, 1, 1, 1), strided(75, 3, 2, 2, 0, 3)],
        vec![strided(13, 2, 3, 1, 0, 0), strided(23, 4, 2, 1, 2, 1)],
        vec![strided(99, 5, 2, 1, 2, 2)],
    ];
    for axes in cases {
        check(7, 3, axes.clone(), 0, 1);
        check(32, 9, axes.clone(), 0, 2);
        check(12, 4, axes, 5, 1);
    }
}

#[test]
fn strided_rows_from_a_padded_copy() {
    // 2-d windows at stride 2 along the row whose input rows for one output row fit a small
    // copy (the stems: 3 channels, 7x7 or 3x3; 64 channels of 3x3): padded, split into even
    // and odd columns, read unmasked.
    let cases = [
        // ResNet-18's and MobileNetV2's stems, narrowed: 7x7 pad 3, 3x3 pad 1.
        vec![strided(40, 7, 2, 1, 3, 3), strided(72, 7, 2, 1, 3, 3)],
        vec![strided(30, 3, 2, 1, 1, 1), strided(31, 3, 2, 1, 1, 1)],
        // Pads wider than the window reaches (whole copy rows of zeros, and columns of only
        // padding at both ends), asymmetric, stride 1 or 3 on the outer axis.
        vec![strided(9, 3, 1, 1, 4, 2), strided(21, 3, 2, 1, 4, 5)],
        vec![strided(11, 2, 3, 1, 0, 1), strided(17, 4, 2, 1, 0, 3)],
        // Dilations 2 (every tap in one phase) and 3 (alternating), odd and even widths.
        vec![strided(12, 3, 2, 2, 2, 2), strided(50, 3, 2, 2, 2, 2)],
        vec![strided(12, 3, 2, 3, 3, 3), strided(49, 5, 2, 3, 6, 6)],
        // Rows of 9 output columns (one short tile), and of 8 tiles (255 columns).
        vec![strided(6, 3, 2, 1, 1, 1), strided(19, 3, 2, 1, 0, 0)],
        vec![strided(4, 3, 2, 1, 1, 1), strided(509, 3, 2, 1, 1, 1)],
        // Pointwise at stride 2 (ResNet's downsampling 1x1): one tap, `K` the channels.
        vec![strided(10, 1, 2, 1, 0, 0), strided(30, 1, 2, 1, 0, 0)],
        vec![strided(9, 1, 2, 1, 0, 0), strided(57, 1, 2, 1, 0, 0)],
    ];
    for axes in cases {
        check(64, 3, axes.clone(), 0, 1);
        check(13, 4, axes.clone(), 7, 2);
        check(6, 1, axes.clone(), 0, 3);
    }
    // ResNet's downsampling 3x3 (64 channels, 29 values per phase row: 45 KiB of copy).
    let down = vec![strided(8, 3, 2, 1, 1, 1), strided(56, 3, 2, 1, 1, 1)];
    check(20, 64, down, 0, 2);
    // ResNet-50's (128 channels: 87 KiB of copy, the largest size on the stack).
    let down = vec![strided(6, 3, 2, 1, 1, 1), strided(56, 3, 2, 1, 1, 1)];
    check(16, 128, down, 0, 2);
    // Too many channels for the copy, and rows of more than 8 tiles: read in place.
    let wide = vec![strided(6, 3, 2, 1, 1, 1), strided(56, 3, 2, 1, 1, 1)];
    check(8, 200, wide, 0, 2);
    check(
        7,
        2,
        vec![strided(4, 3, 2, 1, 1, 1), strided(600, 3, 2, 1, 1, 1)],
        0,
        1,
    );
}

#[test]
fn depthwise_shapes_one_channel_per_product() {
    // A depthwise convolution's product per group: one input channel, `K` its taps, one or
    // two output channels (a channel multiplier).
    for m in [1, 2] {
        check(m, 1, vec![axis(56, 3, 1, 1, 1), axis(56, 3, 1, 1, 1)], 0, 1);
        check(
            m,
            1,
            vec![strided(28, 3, 2, 1, 1, 1), strided(28, 3, 2, 1, 1, 1)],
            0,
            2,
        );
        check(m, 1, vec![axis(7, 5, 1, 2, 2), axis(7, 5, 1, 2, 2)], 0, 3);
    }
}

#[test]
fn depthwise_planes_match_the_naive_loop() {
    // One input and one output channel per batch index, two axes: run plane by plane on
    // AVX-512 (rows in groups of up to four vectors, row-tap masks per plane). Rows of 3, 16,
    // 56, 112 (seven vectors: a group of four and one of three) and 200 outputs; stride 2
    // (every other element), dilation, asymmetric and large pads, a 5x5 and a 7x3 window,
    // padded input rows; 1-3 threads over the two batch indices.
    let cases = [
        (vec![axis(56, 3, 1, 1, 1), axis(56, 3, 1, 1, 1)], 0, 1),
        (vec![axis(9, 3, 1, 1, 1), axis(112, 3, 1, 1, 1)], 5, 2),
        (
            vec![strided(14, 3, 2, 1, 1, 1), strided(112, 3, 2, 1, 1, 1)],
            0,
            3,
        ),
        (
            vec![strided(9, 3, 2, 1, 0, 1), strided(33, 3, 2, 1, 0, 1)],
            3,
            2,
        ),
        (vec![axis(6, 5, 1, 2, 2), axis(200, 5, 1, 2, 2)], 0, 1),
        (vec![axis(8, 3, 2, 2, 2), axis(16, 3, 2, 2, 2)], 1, 2),
        (vec![axis(5, 7, 1, 3, 3), axis(3, 3, 1, 1, 1)], 0, 1),
        (vec![axis(7, 3, 1, 0, 4), axis(20, 3, 1, 4, 0)], 2, 3),
        // Rows of 7 at stride 2 (gathered by the general kernel, read every other element
        // plane by plane), and stride 3 (gathered, never plane by plane).
        (
            vec![strided(14, 3, 2, 1, 1, 1), strided(14, 3, 2, 1, 1, 1)],
            0,
            2,
        ),
        (
            vec![strided(12, 3, 3, 1, 1, 1), strided(30, 3, 3, 1, 1, 1)],
            1,
            2,
        ),
    ];
    for (axes, row_pad, threads) in cases {
        check(1, 1, axes, row_pad, threads);
    }
}

#[test]
fn depthwise_flat_planes_match_the_naive_loop() {
    // Planes read flat on AVX2, and on AVX-512 where rows are under 12 wide (vectors across
    // rows, a mask per vector and tap, the last vector
    // overlapping the one before): "same" stride-1 planes of 7x7, 14x14 and 28x28 (the mask
    // table's limit is 1024 vectors x taps), rows shorter than a vector (3x5), 9 values (two
    // vectors overlapping by 7), a 5x5 window dilated, asymmetric pads; stride 2 on both axes
    // from four phase copies, even and odd sizes (14, 15, 28 and 56 wide), a 5x5 window;
    // `accumulate` and the residual store only the last vector's own lanes. 1-3 threads.
    let same = |h: i64, w: i64, k: i64, d: i64| {
        let p = (k - 1) * d / 2;
        vec![axis(h, k, d, p, p), axis(w, k, d, p, p)]
    };
    let half = |h: i64, w: i64, k: i64| {
        let p = (k - 1) / 2;
        vec![strided(h, k, 2, 1, p, p), strided(w, k, 2, 1, p, p)]
    };
    let cases = [
        (same(7, 7, 3, 1), 1),
        (same(14, 14, 3, 1), 2),
        (same(28, 28, 3, 1), 3),
        (same(5, 3, 3, 1), 1),
        (same(3, 3, 3, 1), 1),
        (same(9, 9, 5, 2), 2),
        (vec![axis(10, 3, 1, 0, 2), axis(6, 3, 1, 2, 0)], 1),
        (half(14, 14, 3), 1),
        (half(15, 15, 3), 2),
        (half(28, 28, 3), 3),
        (half(56, 56, 3), 1),
        (half(12, 16, 5), 1),
    ];
    for (axes, threads) in cases {
        check(1, 1, axes, 0, threads);
    }
}

#[test]
fn depthwise_square_planes_match_the_naive_loop() {
    // 3x3 and 5x5 windows at stride 1 or 2 with pads of at most half the window run from a
    // ring of row copies with the weights splat once per plane (on AVX2): rows of exactly 8,
    // 9 (the last vector overlapping the one before by 7), 16, 17 and 56 outputs; 1, 2, 3 and
    // 5 output rows (a last row alone); "same" and valid windows, asymmetric pads (0 before, 1
    // after and the reverse), odd and even input widths at stride 2, padded input rows;
    // `accumulate` and the residual store only the last vector's own lanes. 1-3 threads.
    let same = |h: i64, w: i64| vec![axis(h, 3, 1, 1, 1), axis(w, 3, 1, 1, 1)];
    let half = |h: i64, w: i64, pad: i64, end: i64| {
        vec![strided(h, 3, 2, 1, pad, end), strided(w, 3, 2, 1, pad, end)]
    };
    let cases = [
        (same(1, 8), 0, 1),
        (same(2, 9), 0, 2),
        (same(3, 16), 3, 1),
        (same(5, 17), 0, 3),
        (same(56, 56), 0, 2),
        (vec![axis(4, 3, 1, 0, 0), axis(10, 3, 1, 0, 0)], 0, 1),
        (vec![axis(6, 3, 1, 0, 1), axis(12, 3, 1, 1, 0)], 1, 2),
        (half(16, 16, 1, 1), 0, 1),
        (half(17, 17, 1, 1), 2, 2),
        (half(5, 19, 0, 0), 0, 3),
        (half(9, 33, 0, 1), 0, 1),
        (half(112, 112, 1, 1), 0, 2),
        (half(3, 20, 1, 0), 0, 1),
        // 5x5 (EfficientNet's and MobileNetV3's depthwise layers).
        (vec![axis(1, 5, 1, 2, 2), axis(8, 5, 1, 2, 2)], 0, 1),
        (vec![axis(3, 5, 1, 2, 2), axis(9, 5, 1, 2, 2)], 2, 2),
        (vec![axis(28, 5, 1, 2, 2), axis(28, 5, 1, 2, 2)], 0, 3),
        (vec![axis(6, 5, 1, 0, 0), axis(13, 5, 1, 0, 0)], 0, 1),
        (vec![axis(5, 5, 1, 1, 2), axis(17, 5, 1, 2, 1)], 1, 2),
        (
            vec![strided(28, 5, 2, 1, 2, 2), strided(28, 5, 2, 1, 2, 2)],
            0,
            1,
        ),
        (
            vec![strided(9, 5, 2, 1, 2, 1), strided(35, 5, 2, 1, 1, 2)],
            3,
            2,
        ),
        (
            vec![strided(7, 5, 2, 1, 0, 1), strided(21, 5, 2, 1, 0, 0)],
            0,
            1,
        ),
    ];
    for (axes, row_pad, threads) in cases {
        check(1, 1, axes, row_pad, threads);
    }
}

#[test]
fn threads_split_tiles_and_strips() {
    // Few tiles (a 7x7 image is two), many row blocks: the blocks are split (block-major, its
    // weights outweighing its input). Both are large enough for several threads (a layer under
    // a few million multiply-adds runs on one).
    for threads in [2, 3, 4] {
        let small = vec![axis(7, 3, 1, 1, 1), axis(7, 3, 1, 1, 1)];
        check(256, 64, small, 0, threads);
        let wide = vec![axis(30, 3, 1, 1, 1), axis(30, 3, 1, 1, 1)];
        check(40, 32, wide, 0, threads);
    }
}

#[test]
fn short_rows_are_gathered_across_rows() {
    // A strided convolution's 7- or 8-wide output rows would fill half a vector or less: the
    // tiles are cut from the whole output and each lane's element gathered, so the lanes fill.
    let row = |size| vec![strided(14, 3, 2, 1, 1, 1), strided(size, 3, 2, 1, 1, 1)];
    assert!(direct_conv_fills_lanes(&row(14), 8));
    assert!(direct_conv_fills_lanes(&row(16), 8));
    // Unless the input is past an L1 cache (ResNet-18's 256 channels at 14x14): each lane's
    // element would miss on its own, and the GEMM runs those better.
    assert!(!direct_conv_fills_lanes(&row(14), 256));
    // A "same" 7x7 output at stride 1 is tiled whole (49 positions in two tiles of 25).
    let mut flat = vec![axis(7, 3, 1, 1, 1), axis(7, 3, 1, 1, 1)];
    flat[0].stride = 7;
    flat[1].stride = 1;
    assert!(direct_conv_fills_lanes(&flat, 8));
    // The same 7x7 output of a valid window over a 9x9 input is gathered across rows too.
    let mut rows = vec![axis(9, 3, 1, 0, 0), axis(9, 3, 1, 0, 0)];
    rows[0].stride = 9;
    rows[1].stride = 1;
    assert!(direct_conv_fills_lanes(&rows, 8));
    // A 2x2 output fills 4 of 16 lanes whatever the tiling: the GEMM takes it.
    let mut tiny = vec![strided(4, 3, 2, 1, 1, 1), strided(4, 3, 2, 1, 1, 1)];
    tiny[0].stride = 4;
    tiny[1].stride = 1;
    assert!(!direct_conv_fills_lanes(&tiny, 8));
}

#[test]
fn gathered_tiles_match_the_naive_loop() {
    let cases = [
        // ResNet's late strided windows: 4- and 7-wide output rows.
        vec![strided(8, 3, 2, 1, 1, 1), strided(8, 3, 2, 1, 1, 1)],
        vec![strided(14, 3, 2, 1, 1, 1), strided(14, 3, 2, 1, 1, 1)],
        // A 1x1 window at stride 2, strides of 3 and 4 (with dilation) along the row.
        vec![strided(14, 1, 2, 1, 0, 0), strided(14, 1, 2, 1, 0, 0)],
        vec![strided(17, 3, 3, 1, 1, 1), strided(17, 3, 3, 1, 1, 1)],
        vec![strided(12, 2, 1, 1, 0, 0), strided(30, 3, 4, 2, 1, 0)],
        // Valid windows with short rows, and a volume whose rows are 3 wide.
        vec![axis(9, 3, 1, 0, 0), axis(9, 3, 1, 0, 0)],
        vec![
            strided(5, 3, 1, 1, 1, 1),
            strided(6, 3, 2, 1, 1, 1),
            strided(6, 3, 2, 1, 1, 1),
        ],
    ];
    for axes in cases {
        check(7, 3, axes.clone(), 0, 1);
        check(30, 9, axes.clone(), 0, 2);
        check(12, 4, axes, 3, 1);
    }
}

#[test]
fn unsupported_windows_are_refused() {
    let mut contiguous = vec![axis(8, 3, 1, 1, 1), axis(8, 3, 1, 1, 1)];
    contiguous[0].stride = 8;
    contiguous[1].stride = 1;
    let available = direct_conv_runs(&contiguous, 8);
    // Too many taps, a last axis not contiguous, a stride of 3 along it, no axes.
    let big: Vec<DirectAxis> = [axis(20, 9, 1, 4, 4), axis(20, 9, 1, 4, 4)]
        .iter()
        .map(|a| DirectAxis { stride: 1, ..*a })
        .collect();
    let mut gaps = contiguous.clone();
    gaps[1].stride = 2;
    assert!(!direct_conv_runs(&big, 8));
    assert!(!direct_conv_runs(&gaps, 8));
    assert!(!direct_conv_runs(&[], 8));
    // A stride of 3 along the row is gathered (on a CPU the kernel runs on).
    let mut step3 = contiguous.clone();
    step3[1].step = 3;
    step3[1].out = 3;
    assert!(direct_conv_window_fits(&step3, 8));
    assert_eq!(direct_conv_runs(&step3, 8), available);
    if !available {
        eprintln!("skipped the positive case: this CPU has neither AVX-512 nor AVX2 with FMA");
    }
}
