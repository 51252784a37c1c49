//! End-to-end tests of the `memc.matmul_nbits` CPU kernels: hand-packed weights run through
//! `CpuProgram` and compared with an f64 reference of `sum_k a[k] * ((q - zp) * scale)`.
//!
//! The weights are packed here by a small packer written from the layout doc of
//! `memc_codegen::nbits` ("nbits v2"), not by the crate's own packer, so a kernel and a packer
//! that agree on a wrong layout still fail. Kernels are validated before they run. The reference
//! backend (`memc_codegen::reference`) runs a set of the cases too and must agree with both.
//!
//! The kernels pick their instruction set once per process; `MEMC_NBITS_ISA` forces one. The
//! test `each_isa_path_matches_the_reference` reruns this binary once per path the CPU has, with
//! the variable set, so the AVX2 and scalar paths are checked on an AVX-512 machine too.

mod common;

use common::rng::Rng;
use memc_codegen::cpu::target::{FEW_ROWS_MAX, SMALL_ROWS};
use memc_codegen::cpu::CpuProgram;
use memc_codegen::kernel::NBitsMatMul;
use memc_codegen::kernel::{Kernel, KernelBody, MatView, Region, RegionSizes};
use memc_codegen::nbits::{row_bytes, scratch_bytes};

// ---------------------------------------------------------------------------------------------
// Buffers, packing, the reference.

/// A 64-byte-aligned byte buffer standing in for the arena or the weights.
struct Buf(Vec<[u8; 64]>);

impl Buf {
    fn new(bytes: u64) -> Buf {
        Buf(vec![[0; 64]; (bytes as usize).div_ceil(64)])
    }

    fn len(&self) -> u64 {
        self.0.len() as u64 * 64
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        self.0.as_flattened_mut()
    }

    fn put_f32(&mut self, byte_offset: u64, values: &[f32]) {
        for (i, v) in values.iter().enumerate() {
            let at = byte_offset as usize + 4 * i;
            self.bytes_mut()[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
    }

    fn get_f32(&self, byte_offset: u64) -> f32 {
        let at = byte_offset as usize;
        let b = &self.0.as_flattened()[at..at + 4];
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

/// Rounds `x` up to a multiple of 64.
fn align64(x: u64) -> u64 {
    x.div_ceil(64) * 64
}

/// Packs `q` (`n` columns of `k` values, column-major: `q[n * k + k]`) as the layout doc says.
fn pack(q: &[i32], n: u64, k: u64, bits: u32) -> Vec<u8> {
    let rb = row_bytes(k, bits) as usize;
    let mut out = vec![0u8; n as usize * rb];
    for col in 0..n as usize {
        let row = &mut out[col * rb..(col + 1) * rb];
        for kk in 0..k as usize {
            let v = q[col * k as usize + kk];
            if bits == 4 {
                let nibble = (v & 0xF) as u8;
                let (group, within) = (kk / 32, kk % 32);
                let byte = &mut row[group * 16 + within % 16];
                *byte |= nibble << (4 * (within / 16));
            } else {
                row[kk] = v as u8;
            }
        }
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Bias {
    None,
    Arena,
    Weights,
}

/// One product to test.
#[derive(Clone, Debug)]
struct Case {
    bits: u32,
    signed: bool,
    zero_points: bool,
    block: u64,
    k: u64,
    n: u64,
    batch: Vec<u64>,
    m: u64,
    /// Extra elements between rows of `A` (its row stride is `k + a_gap`).
    a_gap: u64,
    /// Extra elements between batches of `A` and `C` (0: batches continue the rows evenly).
    batch_gap: u64,
    bias: Bias,
    /// Bytes the zero points lie past a 64-byte boundary (they need no alignment).
    zp_shift: u64,
    /// Whether the kernel has the GEMM form's scratch where the plan would give it (else
    /// none).
    scratch: bool,
}

impl Case {
    fn new(bits: u32, signed: bool, block: u64, k: u64, n: u64, m: u64) -> Case {
        Case {
            bits,
            signed,
            zero_points: true,
            block,
            k,
            n,
            batch: vec![],
            m,
            a_gap: 0,
            batch_gap: 0,
            bias: Bias::None,
            zp_shift: 0,
            scratch: true,
        }
    }

    fn rows(&self) -> u64 {
        self.batch.iter().product::<u64>() * self.m
    }
}

/// A built test: the kernel, its buffers and the expected result.
struct Built {
    kernel: Kernel,
    arena: Buf,
    weights: Buf,
    /// Row `r`'s result: `(byte offset of column 0 in the arena, expected values, sum |a w|
    /// per column)`.
    expected: Vec<(u64, Vec<f64>, Vec<f64>)>,
}

/// Strides (in elements) of `batch` axes whose rows are `rows_stride` apart, each batch
/// followed by `gap` elements.
fn batch_strides(batch: &[u64], m: u64, row_stride: u64, gap: u64) -> Vec<i64> {
    let mut strides = vec![0i64; batch.len()];
    let mut step = m * row_stride + gap;
    for (s, &e) in strides.iter_mut().zip(batch).rev() {
        *s = step as i64;
        step *= e;
    }
    strides
}

fn build(case: &Case, seed: u64) -> Built {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let (n, k, bits) = (case.n, case.k, case.bits);
    let rows = case.rows();
    let kb = k.div_ceil(case.block);
    let (lo, hi) = match (bits, case.signed) {
        (4, false) => (0, 15),
        (4, true) => (-8, 7),
        (_, false) => (0, 255),
        (_, true) => (-128, 127),
    };
    let q: Vec<i32> = (0..n * k).map(|_| rng.int(lo, hi)).collect();
    let scales: Vec<f32> = (0..n * kb).map(|_| rng.float() * 0.1 + 0.001).collect();
    let zps: Vec<i32> = (0..n * kb)
        .map(|_| if case.zero_points { rng.int(lo, hi) } else { 0 })
        .collect();
    let bias: Vec<f32> = (0..n).map(|_| rng.float()).collect();

    // Weights: b, scales, zero points, bias (each 64-byte aligned, but the zero points
    // `zp_shift` bytes past it).
    let packed = pack(&q, n, k, bits);
    let b_off = 0;
    let scales_off = align64(packed.len() as u64);
    let zp_off = align64(scales_off + 4 * n * kb) + case.zp_shift;
    let wbias_off = align64(zp_off + n * kb);
    let mut weights = Buf::new(wbias_off + 4 * n + 64);
    weights.bytes_mut()[..packed.len()].copy_from_slice(&packed);
    weights.put_f32(scales_off, &scales);
    // One byte per block: the zero point's i8 (signed) or u8 (unsigned) value.
    for (i, &zp) in zps.iter().enumerate() {
        weights.bytes_mut()[zp_off as usize + i] = if case.signed {
            zp as i8 as u8
        } else {
            zp as u8
        };
    }
    weights.put_f32(wbias_off, &bias);

    // Arena: a, c, bias, scratch.
    let a_row = k + case.a_gap;
    let a_strides = batch_strides(&case.batch, case.m, a_row, case.batch_gap);
    let c_strides = batch_strides(&case.batch, case.m, n, case.batch_gap);
    let batches: u64 = case.batch.iter().product();
    let a_len = batches * (case.m * a_row + case.batch_gap);
    let c_len = batches * (case.m * n + case.batch_gap);
    let a_off = 0u64;
    let c_off = align64(4 * a_len);
    let abias_off = align64(c_off + 4 * c_len);
    let scratch_off = align64(abias_off + 4 * n);
    let scratch_len = if case.scratch {
        scratch_bytes(rows, n, k)
    } else {
        0
    };
    let mut arena = Buf::new(scratch_off + scratch_len + 64);
    let a: Vec<f32> = (0..a_len).map(|_| rng.float()).collect();
    arena.put_f32(a_off, &a);
    // Junk in C, to see that it is overwritten rather than added to.
    arena.put_f32(c_off, &vec![f32::NAN; c_len as usize]);
    arena.put_f32(abias_off, &bias);

    let kernel_q = NBitsMatMul {
        batch: case.batch.clone(),
        m: case.m,
        n,
        k,
        bits,
        signed: case.signed,
        block: case.block,
        a: MatView {
            region: Region::Arena,
            byte_offset: a_off as i64,
            batch_strides: a_strides,
            row_stride: a_row as i64,
            col_stride: 1,
        },
        c: MatView {
            region: Region::Arena,
            byte_offset: c_off as i64,
            batch_strides: c_strides,
            row_stride: n as i64,
            col_stride: 1,
        },
        b: b_off,
        scales: scales_off,
        zero_points: case.zero_points.then_some(zp_off),
        bias: match case.bias {
            Bias::None => None,
            Bias::Arena => Some((Region::Arena, abias_off)),
            Bias::Weights => Some((Region::Weights, wbias_off)),
        },
        scratch: (scratch_len > 0).then_some(scratch_off),
    };

    let mut expected = vec![];
    for r in 0..rows {
        let a_row_off = (kernel_q.row_offset(&kernel_q.a, r) as u64 - a_off) / 4;
        let c_row_off = kernel_q.row_offset(&kernel_q.c, r) as u64;
        let mut want = vec![0f64; n as usize];
        let mut magnitude = vec![0f64; n as usize];
        for col in 0..n as usize {
            let mut sum = 0f64;
            let mut mag = 0f64;
            for kk in 0..k as usize {
                let p = col * kb as usize + kk / case.block as usize;
                // DequantizeLinear in f32, then the product in f64.
                let w = (q[col * k as usize + kk] as f32 - zps[p] as f32) * scales[p];
                let x = a[(a_row_off + kk as u64) as usize] as f64 * w as f64;
                sum += x;
                mag += x.abs();
            }
            if case.bias != Bias::None {
                sum += bias[col] as f64;
                mag += (bias[col] as f64).abs();
            }
            want[col] = sum;
            magnitude[col] = mag;
        }
        expected.push((c_row_off, want, magnitude));
    }
    let kernel = Kernel {
        name: "matmul_nbits".into(),
        body: KernelBody::NBits(kernel_q),
    };
    kernel
        .validate(RegionSizes {
            arena: arena.len(),
            weights: weights.len(),
            state: 0,
        })
        .unwrap_or_else(|e| panic!("test kernel is invalid: {e} ({case:?})"));
    Built {
        kernel,
        arena,
        weights,
        expected,
    }
}

fn pool(threads: usize) -> memc_codegen::cpu::WorkerPool {
    memc_codegen::cpu::WorkerPool::new(threads).expect("a test thread pool")
}

/// Runs the built kernel on `threads` threads and returns every result element, row by row.
fn run(built: &mut Built, threads: usize) -> Vec<f32> {
    let program = CpuProgram::compile(&[&built.kernel]).unwrap_or_else(|e| panic!("{e}"));
    // SAFETY: the kernel was validated against these buffers' sizes.
    unsafe {
        program.run_kernel(
            0,
            built.arena.0.as_mut_ptr().cast(),
            built.weights.0.as_ptr().cast(),
            &pool(threads),
        )
    };
    let arena = &built.arena;
    built
        .expected
        .iter()
        .flat_map(|(off, want, _)| {
            (0..want.len() as u64).map(move |col| arena.get_f32(off + 4 * col))
        })
        .collect()
}

/// Runs `case` and compares every element with the reference, within `1e-5 * sum |a w|`.
fn check_threads(case: &Case, threads: usize) -> Vec<f32> {
    let mut built = build(case, seed(case));
    let got = run(&mut built, threads);
    let mut i = 0;
    for (r, (_, want, magnitude)) in built.expected.iter().enumerate() {
        for col in 0..want.len() {
            let (g, w, mag) = (got[i] as f64, want[col], magnitude[col]);
            assert!(
                (g - w).abs() <= 1e-5 * mag + 1e-30,
                "row {r} column {col}: got {g}, want {w} (sum |a w| {mag}) in {case:?}"
            );
            i += 1;
        }
    }
    got
}

/// The data seed of `case`.
fn seed(case: &Case) -> u64 {
    case.k * 1000 + case.n * 10 + case.m
}

fn check(case: &Case) {
    check_threads(case, 1);
}

// ---------------------------------------------------------------------------------------------
// The cases.

/// The four value types: (bits, signed).
const KINDS: [(u32, bool); 4] = [(4, false), (4, true), (8, false), (8, true)];

#[test]
fn every_kind_block_and_tail_matches_the_reference() {
    // K a multiple of 32, with a partial last group below and above 16 values, and more than
    // one TILE_K; blocks of one and several halves, an odd number of halves (48), per column
    // (block >= K), and blocks that split halves (24, 40).
    for (bits, signed) in KINDS {
        for zero_points in [false, true] {
            for k in [64u64, 40, 100, 300] {
                for block in [16u64, 24, 32, 48, 64, 128, k, 40] {
                    for m in [1u64, 3, 9] {
                        let mut case = Case::new(bits, signed, block, k, 7, m);
                        case.zero_points = zero_points;
                        check(&case);
                    }
                }
            }
        }
    }
}

/// Row counts that take the tiled GEMM (the kernels decode once per pass of a few rows up to
/// 128 rows).
const GEMM_ROWS: [u64; 2] = [129, 150];

#[test]
fn every_kind_and_block_through_the_tiled_gemm() {
    for (bits, signed) in KINDS {
        for zero_points in [false, true] {
            for (k, block) in [(300u64, 32u64), (300, 16), (100, 48), (300, 24), (40, 40)] {
                let mut case = Case::new(bits, signed, block, k, 70, GEMM_ROWS[0]);
                case.zero_points = zero_points;
                check(&case);
            }
        }
    }
}

#[test]
fn every_row_count_with_batches_and_strides() {
    // Rows are decoded once per pass of a few rows, or (past `SMALL_ROWS`, AVX-512 past 128)
    // multiplied by the GEMM from panels dequantized into scratch. Batches either continue the
    // rows evenly (one GEMM) or leave
    // gaps (one GEMM per batch); A's rows are longer than K.
    for rows in [1u64, 2, 3, 4, 5, 6, 7, 8, 9, 17, 64, GEMM_ROWS[1]] {
        for (batch, m) in [(vec![], rows), (vec![rows], 1), (vec![1, rows], 1)] {
            for (a_gap, batch_gap) in [(0u64, 0u64), (5, 0), (3, 7)] {
                for (bits, signed) in [(4, true), (8, false)] {
                    let mut case = Case::new(bits, signed, 32, 100, 70, m);
                    case.batch = batch.clone();
                    case.a_gap = a_gap;
                    case.batch_gap = batch_gap;
                    case.bias = Bias::Arena;
                    check(&case);
                }
            }
        }
    }
    // Batches of several rows each, with gaps between batches.
    for (batch, m) in [
        (vec![4], 16u64),
        (vec![2, 3], 3),
        (vec![3], 2),
        (vec![3], 50),
        (vec![2, 5], 15),
    ] {
        let mut case = Case::new(4, false, 64, 200, 67, m);
        case.batch = batch;
        case.a_gap = 9;
        case.batch_gap = 5;
        case.bias = Bias::Weights;
        check(&case);
    }
}

#[test]
fn products_without_scratch_pack_on_the_stack() {
    // A kernel without the GEMM form's scratch (a plan of format 8 or older gave it only past
    // 128 rows): up to `FEW_ROWS_MAX` rows it takes the few-rows form, past them the GEMM
    // packs its panels on the threads' stacks.
    for m in [SMALL_ROWS + 1, 64, FEW_ROWS_MAX, FEW_ROWS_MAX + 1, 300] {
        for (bits, signed) in KINDS {
            let mut case = Case::new(bits, signed, 32, 300, 70, m);
            case.scratch = false;
            case.bias = Bias::Arena;
            check_threads(&case, 2);
        }
    }
}

#[test]
fn bias_from_the_arena_and_the_weights() {
    for bias in [Bias::None, Bias::Arena, Bias::Weights] {
        for m in [1u64, 2, 5, 12, GEMM_ROWS[0]] {
            for (bits, signed) in KINDS {
                let mut case = Case::new(bits, signed, 32, 96, 21, m);
                case.bias = bias;
                check(&case);
            }
        }
    }
}

#[test]
fn column_counts_that_are_not_a_multiple_of_the_blocking() {
    for n in [1u64, 2, 3, 5, 6, 9, 63, 64, 65, 130] {
        for m in [1u64, 2, 3, 4, 8, 10, GEMM_ROWS[0]] {
            check(&Case::new(4, false, 32, 64, n, m));
        }
    }
}

#[test]
fn zero_points_at_any_byte_offset() {
    for (bits, signed) in KINDS {
        for zp_shift in [1u64, 3, 63] {
            for m in [1u64, 5, GEMM_ROWS[0]] {
                let mut case = Case::new(bits, signed, 32, 100, 9, m);
                case.zp_shift = zp_shift;
                check(&case);
            }
        }
    }
}

#[test]
fn k_zero_writes_the_bias_or_zero() {
    for bias in [Bias::None, Bias::Arena, Bias::Weights] {
        for m in [1u64, 3, 20, GEMM_ROWS[0]] {
            let mut case = Case::new(4, true, 32, 0, 9, m);
            case.bias = bias;
            let got = check_threads(&case, 2);
            let built = build(&case, seed(&case));
            let want: Vec<f32> = built
                .expected
                .iter()
                .flat_map(|(_, w, _)| w.iter().map(|&x| x as f32))
                .collect();
            assert_eq!(got, want, "k = 0 with {bias:?}");
        }
    }
}

#[test]
fn one_and_two_threads_give_identical_bits() {
    // Large enough to run in parallel: fused rows split columns in groups of 4, the GEMM its
    // blocks.
    let mut cases = vec![];
    for (bits, signed) in KINDS {
        for m in [1u64, 2, 3, 5, 8, 17] {
            cases.push(Case::new(bits, signed, 32, 512, 515, m));
        }
        cases.push(Case::new(bits, signed, 64, 300, 200, GEMM_ROWS[0]));
        cases.push(Case::new(bits, signed, 24, 512, 515, 1));
    }
    for mut case in cases {
        case.bias = Bias::Weights;
        let one = check_threads(&case, 1);
        let two = check_threads(&case, 2);
        let three = check_threads(&case, 3);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&one), bits(&two), "1 vs 2 threads in {case:?}");
        assert_eq!(bits(&one), bits(&three), "1 vs 3 threads in {case:?}");
    }
}

/// The instruction-set paths this CPU can run, by their `MEMC_NBITS_ISA` names.
fn available_paths() -> Vec<&'static str> {
    #[allow(unused_mut)]
    let mut paths = vec!["scalar"];
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            paths.push("avx2");
        }
        if is_x86_feature_detected!("avx512f") {
            paths.push("avx512");
        }
    }
    paths
}

#[test]
fn each_isa_path_matches_the_reference() {
    if std::env::var_os("MEMC_NBITS_ISA").is_some() {
        // A rerun of this binary under a forced path runs the other tests; nothing to do here.
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    for path in available_paths() {
        let output = std::process::Command::new(&exe)
            .env("MEMC_NBITS_ISA", path)
            .args([
                "--skip",
                "each_isa_path",
                "--nocapture",
                "--test-threads",
                "2",
            ])
            .output()
            .expect("rerunning the test binary");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "the tests failed on the {path} path:\n{stdout}\n{stderr}"
        );
        let chosen = format!("nbits kernels use the {path} path\n");
        assert!(
            stderr.contains(&chosen),
            "the rerun did not report using the {path} path:\n{stderr}"
        );
        println!("{path} path: passed");
    }
}

// ---------------------------------------------------------------------------------------------
// The reference backend.

/// Runs the built kernel through the reference backend (`memc_codegen::reference`) and
/// returns every result element, row by row, as `run` does for the CPU backend.
fn run_reference(built: &Built) -> Vec<f32> {
    let mut arena = built.arena.0.as_flattened().to_vec();
    memc_codegen::reference::run_kernel(&built.kernel, &mut arena, built.weights.0.as_flattened())
        .unwrap_or_else(|e| panic!("the reference backend stopped: {e}"));
    built
        .expected
        .iter()
        .flat_map(|(off, want, _)| {
            let arena = &arena;
            (0..want.len() as u64).map(move |col| {
                let at = (off + 4 * col) as usize;
                f32::from_le_bytes([arena[at], arena[at + 1], arena[at + 2], arena[at + 3]])
            })
        })
        .collect()
}

#[test]
fn the_reference_backend_agrees_with_the_f64_reference_and_the_cpu() {
    let mut cases = Vec::new();
    for (bits, signed) in KINDS {
        for zero_points in [false, true] {
            for (k, block) in [(64u64, 16u64), (40, 24), (100, 48), (300, 32)] {
                for m in [1u64, 3] {
                    let mut case = Case::new(bits, signed, block, k, 7, m);
                    case.zero_points = zero_points;
                    cases.push(case);
                }
            }
        }
    }
    for bias in [Bias::Arena, Bias::Weights] {
        let mut case = Case::new(4, false, 64, 200, 67, 3);
        case.batch = vec![2, 3];
        case.a_gap = 9;
        case.batch_gap = 5;
        case.zp_shift = 3;
        case.bias = bias;
        cases.push(case);
    }
    for case in &cases {
        let cpu = check_threads(case, 1);
        let built = build(case, seed(case));
        let reference = run_reference(&built);
        let mut i = 0;
        for (r, (_, want, magnitude)) in built.expected.iter().enumerate() {
            for col in 0..want.len() {
                let (g, c, w, mag) = (
                    reference[i] as f64,
                    cpu[i] as f64,
                    want[col],
                    magnitude[col],
                );
                assert!(
                    (g - w).abs() <= 1e-5 * mag + 1e-30,
                    "row {r} column {col}: the reference backend gives {g}, want {w} in {case:?}"
                );
                assert!(
                    (g - c).abs() <= 1e-5 * mag + 1e-30,
                    "row {r} column {col}: the reference backend gives {g}, the CPU {c} in {case:?}"
                );
                i += 1;
            }
        }
    }
}
