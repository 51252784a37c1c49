//! Benchmark of the `memc.matmul_nbits` CPU kernels against the machine's DRAM read bandwidth.
//!
//! Run with `cargo run --release -p memc-codegen --example nbits_bench` (set
//! `MEMC_NBITS_ISA=avx2|scalar` to time another path). It first measures the read bandwidth
//! as `bandwidth.rs` does (a 1 GiB buffer summed end to end, best of 5 passes), then runs the
//! products through the public API (`CpuProgram::run_kernel`) on 1 and on all threads:
//!
//! - the GEMV (M = 1) with 4-bit and 8-bit weights in blocks of 32 with zero points, `K = N =
//!   4096`, cycling through enough distinct matrices (>= 256 MiB of packed weight, scale and
//!   zero-point bytes) that every call reads from DRAM; it prints those bytes per second
//!   (GB/s, 10^9) and their ratio to the measured bandwidth at the same thread count;
//! - M = 4, 16 and 128 on the same weights (or the row counts `NBITS_BENCH_ROWS=4,8,...`
//!   names), in GFLOP/s (`2 M N K` per product);
//! - on one thread, the GEMV over the first 128 columns of one matrix again and again (its
//!   weight stays in L2): the kernel's compute ceiling, to tell how far DRAM holds it back.
//!
//! Each figure is the best of several passes over all the matrices.

#[path = "bandwidth.rs"]
#[allow(dead_code)]
mod bandwidth;

use memc_codegen::cpu::CpuProgram;
use memc_codegen::kernel::NBitsMatMul;
use memc_codegen::kernel::{Kernel, KernelBody, MatView, Region, RegionSizes};
use memc_codegen::nbits::{row_bytes, scratch_bytes};
use std::time::Instant;

const K: u64 = 4096;
const N: u64 = 4096;
/// Columns of the in-cache GEMV (its weight fits in L2: the kernel's compute ceiling).
const N_IN_CACHE: u64 = 128;
const BLOCK: u64 = 32;
/// Weight bytes the GEMV cycles through, at least.
const MIN_WEIGHT_BYTES: u64 = 256 << 20;

/// A 64-byte aligned buffer.
struct Buf(Vec<[u8; 64]>);

impl Buf {
    fn new(bytes: u64) -> Buf {
        Buf(vec![[0; 64]; (bytes as usize).div_ceil(64)])
    }
    fn bytes(&mut self) -> &mut [u8] {
        self.0.as_flattened_mut()
    }
}

/// One weight matrix's slots, relative to its start, and its size.
struct Layout {
    b: u64,
    scales: u64,
    zero_points: u64,
    /// Bytes the kernel reads: packed values, scales, zero points.
    read: u64,
    /// Distance between consecutive matrices (64-byte aligned).
    stride: u64,
}

fn layout(bits: u32) -> Layout {
    let packed = N * row_bytes(K, bits);
    // f32 scales and one byte of zero point per block.
    let blocks = N * K.div_ceil(BLOCK);
    let align = |x: u64| x.div_ceil(64) * 64;
    Layout {
        b: 0,
        scales: align(packed),
        zero_points: align(packed) + align(4 * blocks),
        read: packed + 4 * blocks + blocks,
        stride: align(packed) + align(4 * blocks) + align(blocks),
    }
}

/// Fills `count` matrices: random packed values, scales near 0.01, zero points 8.
fn fill(weights: &mut Buf, l: &Layout, count: u64) {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let bytes = weights.bytes();
    for i in 0..count {
        let base = (i * l.stride) as usize;
        let packed = &mut bytes[base + l.b as usize..base + l.scales as usize];
        for chunk in packed.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
        }
        let blocks = (N * K.div_ceil(BLOCK)) as usize;
        for j in 0..blocks {
            let s = base + l.scales as usize + 4 * j;
            bytes[s..s + 4].copy_from_slice(&(0.01f32 + j as f32 * 1e-7).to_le_bytes());
            bytes[base + l.zero_points as usize + j] = 8;
        }
    }
}

fn kernel(m: u64, n: u64, bits: u32, l: &Layout) -> (Kernel, u64) {
    let a_bytes = m * K * 4;
    let c_off = a_bytes.div_ceil(64) * 64;
    let scratch_off = (c_off + m * n * 4).div_ceil(64) * 64;
    // The scratch the plan gives a product of `m` rows.
    let scratch = scratch_bytes(m, n, K);
    let arena = scratch_off + scratch;
    let q = NBitsMatMul {
        batch: vec![],
        m,
        n,
        k: K,
        bits,
        signed: false,
        block: BLOCK,
        a: MatView {
            region: Region::Arena,
            byte_offset: 0,
            batch_strides: vec![],
            row_stride: K as i64,
            col_stride: 1,
        },
        c: MatView {
            region: Region::Arena,
            byte_offset: c_off as i64,
            batch_strides: vec![],
            row_stride: n as i64,
            col_stride: 1,
        },
        b: l.b,
        scales: l.scales,
        zero_points: Some(l.zero_points),
        bias: None,
        scratch: (scratch > 0).then_some(scratch_off),
    };
    let kernel = Kernel {
        name: format!("nbits{bits}_m{m}"),
        body: KernelBody::NBits(q),
    };
    kernel
        .validate(RegionSizes {
            arena,
            weights: l.stride,
            state: 0,
        })
        .expect("the benchmark kernel is valid");
    (kernel, arena)
}

/// The best time of one pass over `matrices` matrices (each a product), in seconds per
/// matrix, over `passes` passes after a warm-up pass.
fn time(
    kernel: &Kernel,
    arena: &mut Buf,
    weights: &Buf,
    l: &Layout,
    matrices: u64,
    passes: usize,
    pool: &memc_codegen::cpu::WorkerPool,
) -> f64 {
    let program = CpuProgram::compile(&[kernel]).expect("the kernel compiles");
    let run_pass = |arena: &mut Buf| {
        let started = Instant::now();
        for i in 0..matrices {
            // SAFETY: the kernel was validated against an arena of this size and weights of
            // `l.stride` bytes, which start at matrix `i`.
            unsafe {
                program.run_kernel(
                    0,
                    arena.0.as_mut_ptr().cast(),
                    weights.0.as_ptr().cast::<u8>().add((i * l.stride) as usize),
                    pool,
                )
            };
        }
        started.elapsed().as_secs_f64() / matrices as f64
    };
    run_pass(arena);
    (0..passes)
        .map(|_| run_pass(arena))
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let thread_counts: Vec<usize> = if cores > 1 { vec![1, cores] } else { vec![1] };

    println!("DRAM read bandwidth (1 GiB buffer, best of 5 passes):");
    let mut bandwidth = vec![];
    {
        let data: Vec<u64> = (0..(1u64 << 27)).collect();
        for &threads in &thread_counts {
            let (bytes_per_second, check) = bandwidth::read_bandwidth(&data, threads, 5);
            println!(
                "  {threads} thread(s): {:6.2} GB/s   (checksum {check:x})",
                bytes_per_second / 1e9
            );
            bandwidth.push(bytes_per_second);
        }
    }

    let isa = std::env::var("MEMC_NBITS_ISA").unwrap_or_else(|_| "detected".into());
    println!("\nnbits products, K = N = {K}, block {BLOCK}, zero points, path: {isa}");
    for bits in [4u32, 8] {
        let l = layout(bits);
        let matrices = MIN_WEIGHT_BYTES.div_ceil(l.read);
        let mut weights = Buf::new(matrices * l.stride);
        fill(&mut weights, &l, matrices);
        println!(
            "{bits}-bit: {matrices} matrices of {:.1} MiB read each ({:.0} MiB in all)",
            l.read as f64 / (1 << 20) as f64,
            (matrices * l.read) as f64 / (1 << 20) as f64
        );
        for (t, &threads) in thread_counts.iter().enumerate() {
            let pool = memc_codegen::cpu::WorkerPool::new(threads).expect("a thread pool");
            if threads == 1 {
                // The same GEMV on the first N_IN_CACHE columns of one matrix, over and over.
                let (kernel, arena_bytes) = kernel(1, N_IN_CACHE, bits, &l);
                let mut arena = Buf::new(arena_bytes);
                let seconds = time(&kernel, &mut arena, &weights, &l, 1, 2000, &pool);
                let read = l.read as f64 * N_IN_CACHE as f64 / N as f64;
                println!(
                    "  {threads} thread(s) M =   1 in cache (N = {N_IN_CACHE}): {:6.2} GB/s",
                    read / seconds / 1e9
                );
            }
            let rows: Vec<u64> =
                std::env::var("NBITS_BENCH_ROWS").map_or(vec![1, 4, 16, 128], |v| {
                    v.split(',')
                        .map(|x| {
                            x.parse()
                                .expect("NBITS_BENCH_ROWS: comma-separated row counts")
                        })
                        .collect()
                });
            for m in rows {
                let (kernel, arena_bytes) = kernel(m, N, bits, &l);
                let mut arena = Buf::new(arena_bytes);
                // A small non-zero activation.
                for (i, chunk) in arena.bytes()[..(m * K * 4) as usize]
                    .chunks_mut(4)
                    .enumerate()
                {
                    chunk.copy_from_slice(&(((i % 7) as f32 - 3.0) * 0.25).to_le_bytes());
                }
                // Compute-bound sizes need not cycle through all of the weights.
                let (count, passes) = if m >= 128 {
                    (matrices.min(4), 2)
                } else {
                    (matrices, 5)
                };
                let seconds = time(&kernel, &mut arena, &weights, &l, count, passes, &pool);
                let gbs = l.read as f64 / seconds / 1e9;
                let gflops = 2.0 * (m * N * K) as f64 / seconds / 1e9;
                if m == 1 {
                    println!(
                        "  {threads} thread(s) M = {m:3}: {:7.3} ms  {gbs:6.2} GB/s  {:5.1}% of bandwidth  {gflops:6.1} GFLOP/s",
                        seconds * 1e3,
                        100.0 * l.read as f64 / seconds / bandwidth[t],
                    );
                } else {
                    println!(
                        "  {threads} thread(s) M = {m:3}: {:7.3} ms  {gbs:6.2} GB/s                     {gflops:6.1} GFLOP/s",
                        seconds * 1e3,
                    );
                }
            }
        }
    }
}
