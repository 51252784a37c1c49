//! Winograd F(2x2, 3x3) against a naive loop in f64: "same" and valid pads, asymmetric pads,
//! odd extents (a last tile half outside), a padded input row, channels past one packed run of
//! `K` (256) and around the strip height, blocks of 16 and 32 tiles, output channels in one
//! chunk or several, alpha, accumulation, the epilogue (bias, residual, clamp), several batch indices, one
//! and several threads. `MEMC_GEMM_ISA=scalar` runs the portable copy.

use memc_gemm::{
    pack_winograd_weights, run_winograd, winograd_blocking, winograd_blocking_in,
    winograd_scratch_bytes, winograd_weights_len, winograd_window, DirectOperands, Epilogue, Mat,
    WinogradBlocking, WinogradConv,
};

/// A deterministic value in [-0.5, 0.5).
fn value(i: usize, salt: usize) -> f32 {
    ((i * 2654435761 + salt * 40503) % 1000) as f32 / 1000.0 - 0.5
}

struct Case {
    m: usize,
    c: usize,
    h: usize,
    w: usize,
    /// Top, left, bottom, right.
    pads: [usize; 4],
    /// Spare elements after each input row.
    row_pad: usize,
    /// Scratch per thread the blocking must fit.
    cap: u64,
}

/// Runs `case` and checks it against the naive sum; with `in_place` the residual is the
/// output itself (the planner's in-place residual add: each element read before it is
/// written, also when the input channels go in pieces).
fn check(
    case: &Case,
    threads: usize,
    alpha: f32,
    accumulate: bool,
    epilogue: bool,
    in_place: bool,
) {
    let Case {
        m,
        c,
        h,
        w,
        pads,
        row_pad,
        cap,
    } = *case;
    let oh = h + pads[0] + pads[2] - 2;
    let ow = w + pads[1] + pads[3] - 2;
    let rs = w + row_pad;
    let image = c * h * rs;
    const BATCHES: usize = 2;
    let x: Vec<f32> = (0..BATCHES * image).map(|i| value(i, 1)).collect();
    let k = c * 9;
    let wt: Vec<f32> = (0..m * k).map(|i| value(i, 2)).collect();
    let bias: Vec<f32> = (0..m).map(|i| value(i, 4)).collect();
    let pixels = oh * ow;
    // Output then residual, per batch index: the residual `add` elements after the output.
    let residual: Vec<f32> = (0..BATCHES * m * pixels).map(|i| value(i, 5)).collect();
    let start: Vec<f32> = (0..BATCHES * m * pixels)
        .map(|i| if accumulate { value(i, 3) } else { f32::NAN })
        .collect();
    let mut out = vec![f32::NAN; 2 * BATCHES * m * pixels];
    out[..BATCHES * m * pixels].copy_from_slice(if in_place { &residual } else { &start });
    out[BATCHES * m * pixels..].copy_from_slice(&residual);
    let add = if in_place {
        0
    } else {
        (BATCHES * m * pixels) as isize
    };
    let mut u = vec![0f32; winograd_weights_len(m as u64, c as u64) as usize];
    let a = Mat {
        ptr: wt.as_ptr().cast_mut(),
        rs: k as isize,
        cs: 1,
    };
    // SAFETY: `wt` is `m x 9c`; `u` holds the transformed length.
    unsafe { pack_winograd_weights(u.as_mut_ptr(), a, m, c) };
    let WinogradBlocking {
        block,
        chunk,
        depth,
    } = winograd_blocking(m as u64, c as u64, cap).expect("a blocking fits");
    let slot = winograd_scratch_bytes(block, chunk, depth) as usize;
    // A canary after the slots: the run writes none of it.
    let mut scratch = vec![0xABu8; slot * threads + 64 + 4096];
    let base = (scratch.as_mut_ptr() as usize).next_multiple_of(64) as *mut u8;
    let conv = WinogradConv {
        m,
        channels: c,
        h,
        w,
        channel_stride: (h * rs) as isize,
        row_stride: rs as isize,
        pad_top: pads[0],
        pad_left: pads[1],
        oh,
        ow,
        block: block as usize,
        chunk: chunk as usize,
        depth: depth as usize,
        alpha,
        accumulate,
        epilogue: if epilogue {
            Epilogue {
                bias: Some((bias.as_ptr(), 1)),
                add: Some(add),
                clamp: Some((-0.6, 0.7)),
            }
        } else {
            Epilogue::NONE
        },
    };
    let (xp, op, up) = (
        x.as_ptr() as usize,
        out.as_mut_ptr() as usize,
        u.as_ptr() as usize,
    );
    let at = |b: usize| DirectOperands {
        a_packed: up as *const f32,
        x: (xp as *const f32).wrapping_add(b * image),
        c: Mat {
            ptr: (op as *mut f32).wrapping_add(b * m * pixels),
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
    // SAFETY: the operands hold what the extents address; `scratch` holds `threads` slots.
    unsafe { run_winograd(BATCHES, &at, &conv, base, threads, &broadcast) };
    let off = base as usize - scratch.as_ptr() as usize;
    assert!(
        scratch[off + slot * threads..].iter().all(|&b| b == 0xAB),
        "the run wrote past its {threads} scratch slots of {slot} bytes"
    );
    let mut worst = 0f64;
    for b in 0..BATCHES {
        for o in 0..m {
            for oy in 0..oh {
                for ox in 0..ow {
                    let (mut sum, mut scale) = (0f64, 0f64);
                    for ch in 0..c {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let iy = (oy + ky) as isize - pads[0] as isize;
                                let ix = (ox + kx) as isize - pads[1] as isize;
                                if iy < 0 || ix < 0 || iy as usize >= h || ix as usize >= w {
                                    continue;
                                }
                                let xv = x[b * image + (ch * h + iy as usize) * rs + ix as usize];
                                let wv = wt[o * k + ch * 9 + ky * 3 + kx];
                                sum += xv as f64 * wv as f64;
                                scale += (xv as f64 * wv as f64).abs();
                            }
                        }
                    }
                    let at = (b * m + o) * pixels + oy * ow + ox;
                    let mut want = alpha as f64 * sum;
                    if accumulate {
                        want += start[at] as f64;
                    }
                    if epilogue {
                        want = (want + bias[o] as f64 + residual[at] as f64).clamp(-0.6, 0.7);
                    }
                    let got = out[at] as f64;
                    let err = (got - want).abs() / (scale * alpha.abs() as f64 + 1.0);
                    assert!(
                        err < 2e-6,
                        "m {m} c {c} {h}x{w} pads {pads:?} threads {threads} alpha {alpha} accumulate {accumulate} batch {b} channel {o} at ({oy}, {ox}): {got} vs {want}"
                    );
                    worst = worst.max(err);
                }
            }
        }
    }
    // The residual is untouched.
    assert_eq!(&out[BATCHES * m * pixels..], &residual[..]);
    eprintln!(
        "m {m} c {c} {h}x{w} pads {pads:?} block {block} chunk {chunk} depth {depth}: worst {worst:.1e}"
    );
}

const CAP: u64 = 256 * 1024;

#[test]
fn winograd_matches_the_naive_loop() {
    let cases = [
        // "same", even and odd extents, whole and split chunks.
        Case {
            m: 16,
            c: 16,
            h: 16,
            w: 16,
            pads: [1; 4],
            row_pad: 0,
            cap: CAP,
        },
        Case {
            m: 13,
            c: 5,
            h: 9,
            w: 11,
            pads: [1; 4],
            row_pad: 0,
            cap: CAP,
        },
        Case {
            m: 64,
            c: 64,
            h: 20,
            w: 20,
            pads: [1; 4],
            row_pad: 0,
            cap: CAP,
        },
        Case {
            m: 50,
            c: 24,
            h: 7,
            w: 7,
            pads: [1; 4],
            row_pad: 3,
            cap: 64 * 1024,
        },
        // Valid, asymmetric and 2-wide pads; a tall narrow image.
        Case {
            m: 8,
            c: 7,
            h: 12,
            w: 10,
            pads: [0; 4],
            row_pad: 0,
            cap: CAP,
        },
        Case {
            m: 7,
            c: 6,
            h: 10,
            w: 13,
            pads: [0, 1, 2, 1],
            row_pad: 1,
            cap: CAP,
        },
        Case {
            m: 9,
            c: 3,
            h: 40,
            w: 3,
            pads: [2, 2, 2, 2],
            row_pad: 0,
            cap: CAP,
        },
        // `K` past one packed run (256), two runs of the strip.
        Case {
            m: 12,
            c: 300,
            h: 6,
            w: 6,
            pads: [1; 4],
            row_pad: 0,
            cap: 1 << 20,
        },
        // Input channels in pieces (of 64 within runs of 256: 0..64, .., 192..256, 256..300)
        // and output channels in chunks.
        Case {
            m: 100,
            c: 300,
            h: 6,
            w: 9,
            pads: [1; 4],
            row_pad: 0,
            cap: 120 * 1024,
        },
        Case {
            m: 40,
            c: 160,
            h: 8,
            w: 8,
            pads: [1; 4],
            row_pad: 0,
            cap: 140 * 1024,
        },
        // Wide rows: tiles of one block across two tile rows.
        Case {
            m: 30,
            c: 20,
            h: 5,
            w: 70,
            pads: [1; 4],
            row_pad: 0,
            cap: 120 * 1024,
        },
    ];
    for case in &cases {
        for threads in [1, 3] {
            check(case, threads, 1.0, false, true, false);
        }
        check(case, 2, -0.5, false, false, false);
        check(case, 1, 0.75, true, true, false);
        check(case, 2, 1.0, false, true, true);
    }
}

#[test]
fn the_blocking_fits_its_cap() {
    for (m, c) in [(64, 64), (128, 128), (256, 256), (16, 3), (512, 512)] {
        for cap in [64 << 10, 256 << 10, 1 << 20] {
            if let Some(b) = winograd_blocking(m, c, cap) {
                assert!(winograd_scratch_bytes(b.block, b.chunk, b.depth) <= cap);
                assert!(b.block >= 16 && b.chunk >= 6 && b.chunk % 6 == 0);
                assert!(b.depth >= 64.min(c) && b.depth <= c);
            }
        }
    }
    // Blocks of the sizes asked for only: 128 KiB holds blocks of 16 tiles of 64 channels, not
    // of 32.
    let sixteen = winograd_blocking(64, 64, 128 << 10).expect("a blocking fits");
    assert_eq!(sixteen.block, 16);
    assert_eq!(
        winograd_blocking_in(64, 64, 128 << 10, &[16]),
        Some(sixteen)
    );
    assert!(winograd_blocking_in(64, 64, 128 << 10, &[32]).is_none());
    assert_eq!(
        winograd_blocking_in(64, 64, 1 << 20, &[16]).map(|b| b.block),
        Some(16)
    );
    assert!(winograd_blocking(512, 512, 64 << 10).is_none());
    // 512 channels in 256 KiB: pieces of 128 input channels.
    let b = winograd_blocking(512, 512, 256 << 10).expect("a blocking fits");
    assert!(b.depth < 512);
    assert!(winograd_window(&[3, 3], &[1, 1], &[1, 1]));
    assert!(!winograd_window(&[3, 3], &[2, 2], &[1, 1]));
    assert!(!winograd_window(&[5, 5], &[1, 1], &[1, 1]));
}
