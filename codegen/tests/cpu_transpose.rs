//! The CPU backend's native transpose (`cpu/transpose.rs`): a copy kernel whose output is
//! dense and whose input is read at a stride along the last axis and contiguously along
//! another runs in 8 x 8 blocks on AVX2, and copies every element's bits where the loop does:
//! extents that are and are not multiples of 8, batch axes before, between and after the
//! transposed one, a reversed input, i32 elements, NaN payloads and negative zeros, one and
//! two threads. Kernels it must not take (an output overlapping the input, a side under 8, a
//! contiguous input) stay loop code.

mod common;

use common::kernels::*;
use memc_codegen::kernel::{Kernel, Scalar};

/// `out = x` over `outer`, `x` read with `x_strides` from element `x_at`, `out` dense from
/// element `out_at`.
fn copy(outer: &[u64], elem: Scalar, x_at: i64, x_strides: &[i64], out_at: i64) -> Kernel {
    let mut strides = vec![0i64; outer.len()];
    let mut step = 1i64;
    for (s, &e) in strides.iter_mut().zip(outer).rev() {
        *s = step;
        step *= e as i64;
    }
    let mut insts = Insts::default();
    let v = insts.load(elem, 0);
    loop_kernel(
        "transpose",
        outer,
        &[],
        vec![
            arena(elem, 4 * x_at, x_strides),
            arena(elem, 4 * out_at, &strides),
        ],
        vec![map(insts, &[(1, v)])],
    )
}

/// Whether this host runs the native transpose.
fn native() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::env::var_os("MEMC_NO_TRANSPOSE").is_none()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The bits of input element `i`: distinct values, with NaNs of distinct payloads and
/// negative zeros among them.
fn bits(i: usize) -> u32 {
    match i % 23 {
        5 => 0x7fc0_0000 | i as u32,
        11 => 0x8000_0000,
        _ => (i as f32 * 0.25 - 100.0).to_bits(),
    }
}

/// Runs `copy(outer, x_strides)` over an input of `x_len` elements at element `x_at` of the
/// arena (the output after it), its point 0 at its element `origin`, on `threads`, and checks
/// every output element's bits against the loop's meaning; returns whether the kernel ran
/// natively.
fn check(
    outer: &[u64],
    elem: Scalar,
    (x_at, origin): (i64, i64),
    x_strides: &[i64],
    x_len: usize,
    threads: usize,
) -> bool {
    let total: u64 = outer.iter().product();
    let out_at = x_at + x_len as i64;
    let mut buf = Buf::new(4 * (out_at as usize + total as usize));
    let xs: Vec<u32> = (0..x_len).map(bits).collect();
    buf.put(4 * x_at as usize, &xs);
    let kernel = copy(outer, elem, x_at + origin, x_strides, out_at);
    let program = run_on(&[kernel], &mut buf, &Buf::new(0), threads);
    let got: Vec<u32> = buf.get(4 * out_at as usize, total as usize);
    for (flat, &g) in got.iter().enumerate() {
        let mut rest = flat as u64;
        let mut at = origin;
        for (&e, &s) in outer.iter().zip(x_strides).rev() {
            at += (rest % e) as i64 * s;
            rest /= e;
        }
        let want = xs[at as usize];
        assert_eq!(
            g, want,
            "outer {outer:?} strides {x_strides:?} threads {threads}: element {flat} {g:#x}, want {want:#x}"
        );
    }
    program.is_transpose(0)
}

#[test]
fn transposes_copy_every_element() {
    // [R, C] from a [C, R] input, sides that are and are not multiples of 8.
    for (r, c) in [
        (8u64, 8u64),
        (256, 128),
        (13, 21),
        (64, 9),
        (9, 64),
        (130, 70),
    ] {
        for threads in [1, 2] {
            let taken = check(
                &[r, c],
                Scalar::F32,
                (0, 0),
                &[1, r as i64],
                (r * c) as usize,
                threads,
            );
            assert!(taken || !native(), "[{r}, {c}] was not taken natively");
        }
    }
    // Attention's key transpose: [heads, dim, seq] from [seq, heads * dim].
    let (heads, dim, seq) = (4u64, 64u64, 37u64);
    assert!(
        check(
            &[heads, dim, seq],
            Scalar::F32,
            (0, 0),
            &[dim as i64, 1, (heads * dim) as i64],
            (heads * dim * seq) as usize,
            2
        ) || !native()
    );
    // Batch axes before and between the transposed ones, the input padded and offset.
    assert!(
        check(
            &[3, 16, 2, 24],
            Scalar::F32,
            (5, 0),
            &[2000, 1, 700, 40],
            6000,
            1
        ) || !native()
    );
    // The input reversed along the last axis (stride -R from its last column).
    let (r, c) = (24u64, 17u64);
    assert!(
        check(
            &[r, c],
            Scalar::F32,
            (0, ((c - 1) * r) as i64),
            &[1, -(r as i64)],
            (r * c) as usize,
            1
        ) || !native()
    );
    // i32 elements.
    assert!(check(&[40, 12], Scalar::I32, (0, 0), &[1, 40], 480, 2) || !native());
}

#[test]
fn other_copies_stay_loop_code() {
    // A side under 8.
    assert!(!check(&[4, 64], Scalar::F32, (0, 0), &[1, 4], 256, 1));
    assert!(!check(&[64, 7], Scalar::F32, (0, 0), &[1, 64], 448, 1));
    // A contiguous input: a plain copy.
    assert!(!check(&[16, 16], Scalar::F32, (0, 0), &[16, 1], 256, 1));
    // The output overlapping the input's elements.
    let kernel = copy(&[16, 16], Scalar::F32, 0, &[1, 16], 8);
    let mut buf = Buf::new(4 * (16 * 16 + 8));
    let program = run_on(&[kernel], &mut buf, &Buf::new(0), 1);
    assert!(!program.is_transpose(0));
}

/// An ONNX Transpose as `lower` emits it today is the kernel the native transpose takes: if
/// lowering changes the copy's form, this fails rather than the native path silently going
/// unused. The result agrees with the reference backend.
#[test]
fn lowered_onnx_transpose_runs_natively() {
    use common::models::lowered_natives;
    let text = "func.func @f(%x: tensor<2x24x40xf32>) -> tensor<2x40x24xf32> {\n  %0 = \"onnx.Transpose\"(%x) {perm = [0, 2, 1]} : (tensor<2x24x40xf32>) -> tensor<2x40x24xf32>\n  return %0 : tensor<2x40x24xf32>\n}\n";
    let xs: Vec<f32> = (0..2 * 24 * 40).map(|i| i as f32 - 7.5).collect();
    let inputs = vec![xs.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()];
    let (natives, kernels) = lowered_natives(text, &inputs, |cpu, i| cpu.is_transpose(i));
    assert!(
        natives == 1 || !native(),
        "{natives} of {kernels} kernels run as the native transpose"
    );
}
