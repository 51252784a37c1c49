//! DRAM read-bandwidth probe: the ceiling a memory-bound kernel (a low-bit GEMV streaming its
//! weights once) is measured against.
//!
//! Run with `cargo run --release -p memc-codegen --example bandwidth [-- MIB]` (default 1024
//! MiB, far larger than any cache). It fills the buffer once (so every page is resident), then
//! reads it end to end with 1 and with all available threads, each thread summing its own
//! contiguous part with 8 independent u64 accumulators (the compiler vectorizes the loop), and
//! prints the best of 5 passes in GB/s (10^9 bytes per second) and GiB/s.
//!
//! `nbits_bench` includes this file (`#[path]`) to measure the same ceiling with
//! [`read_bandwidth`].

use std::time::Instant;

fn sum_part(part: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let chunks = part.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = a.wrapping_add(v);
        }
    }
    let mut total = tail.iter().fold(0u64, |s, &v| s.wrapping_add(v));
    for a in acc {
        total = total.wrapping_add(a);
    }
    total
}

fn read_pass(data: &[u64], threads: usize) -> (f64, u64) {
    let started = Instant::now();
    let per = data.len().div_ceil(threads);
    let total = std::thread::scope(|s| {
        let handles: Vec<_> = data
            .chunks(per)
            .map(|part| s.spawn(move || sum_part(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a reader thread panicked"))
            .fold(0u64, u64::wrapping_add)
    });
    (started.elapsed().as_secs_f64(), total)
}

/// The best of `passes` read passes over `data` on `threads` threads, in bytes per second,
/// and a checksum of what was read.
pub fn read_bandwidth(data: &[u64], threads: usize, passes: usize) -> (f64, u64) {
    let mut best = f64::INFINITY;
    let mut check = 0u64;
    for _ in 0..passes {
        let (seconds, total) = read_pass(data, threads);
        best = best.min(seconds);
        check = check.wrapping_add(total);
    }
    ((data.len() * 8) as f64 / best, check)
}

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1024);
    let words = mib * 1024 * 1024 / 8;
    let data: Vec<u64> = (0..words as u64).collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("buffer {mib} MiB, {cores} cores available");
    let mut check = 0u64;
    for threads in [1, cores] {
        let (bytes_per_second, total) = read_bandwidth(&data, threads, 5);
        check = check.wrapping_add(total);
        println!(
            "{threads} thread(s): {:.2} GB/s ({:.2} GiB/s), best of 5 passes",
            bytes_per_second / 1e9,
            bytes_per_second / (1u64 << 30) as f64
        );
        if cores == 1 {
            break;
        }
    }
    // Printing the checksum keeps the reads from being optimized away.
    println!("checksum {check:x}");
}
