//! Benchmark of the Cranelift CPU backend on typical loop kernels: JIT compile time per kernel,
//! and run time of an elementwise add, a GELU-like chain and a softmax against plain Rust loops
//! (which rustc vectorizes), on 1 and 2 threads.
//!
//! Run with `cargo run --release -p memc-codegen --example cpu_bench`.

use memc_codegen::cpu::CpuProgram;
use memc_codegen::kernel::{
    f64_bits, BinaryOp, Guard, IndirectIndex, Inst, InstId, InstKind, Kernel, KernelBody,
    LoopKernel, ReduceOp, Region, Scalar, Stage, Store, UnaryOp, View,
};
use std::time::{Duration, Instant};

fn view(elem: Scalar, byte_offset: i64, strides: &[i64]) -> View {
    View {
        region: Region::Arena,
        elem,
        byte_offset,
        strides: strides.to_vec(),
        guards: vec![],
        pad: 0,
    }
}

#[derive(Default)]
struct Insts(Vec<Inst>);

impl Insts {
    fn push(&mut self, ty: Scalar, kind: InstKind) -> InstId {
        self.0.push(Inst { ty, kind });
        (self.0.len() - 1) as InstId
    }
    fn load(&mut self, view: u32) -> InstId {
        self.push(Scalar::F32, InstKind::Load { view })
    }
    fn float(&mut self, value: f64) -> InstId {
        self.push(
            Scalar::F32,
            InstKind::Const {
                bits: f64_bits(value),
            },
        )
    }
    fn bin(&mut self, op: BinaryOp, lhs: InstId, rhs: InstId) -> InstId {
        self.push(Scalar::F32, InstKind::Binary { op, lhs, rhs })
    }
    fn un(&mut self, op: UnaryOp, arg: InstId) -> InstId {
        self.push(Scalar::F32, InstKind::Unary { op, arg })
    }
}

fn kernel(
    name: &str,
    outer: &[u64],
    inner: &[u64],
    views: Vec<View>,
    stages: Vec<Stage>,
) -> Kernel {
    Kernel {
        name: name.into(),
        body: KernelBody::Loop(LoopKernel {
            outer: outer.to_vec(),
            inner: inner.to_vec(),
            views,
            stages,
        }),
    }
}

fn store(view: u32, value: InstId) -> Vec<Store> {
    vec![Store::new(view, value)]
}

/// c[r, i] = a[r, i] + b[i].
fn add_kernel(rows: u64, cols: u64) -> Kernel {
    let mut b = Insts::default();
    let x = b.load(0);
    let y = b.load(1);
    let z = b.bin(BinaryOp::Add, x, y);
    let n = (rows * cols * 4) as i64;
    kernel(
        "add",
        &[rows, cols],
        &[],
        vec![
            view(Scalar::F32, 0, &[cols as i64, 1]),
            view(Scalar::F32, n, &[0, 1]),
            view(Scalar::F32, 2 * n, &[cols as i64, 1]),
        ],
        vec![Stage::Map {
            insts: b.0,
            stores: store(2, z),
        }],
    )
}

/// y = 0.5 * x * (1 + erf(x / sqrt 2)).
fn gelu_kernel(len: u64) -> Kernel {
    let mut b = Insts::default();
    let x = b.load(0);
    let s = b.float(std::f64::consts::FRAC_1_SQRT_2);
    let xs = b.bin(BinaryOp::Mul, x, s);
    let e = b.un(UnaryOp::Erf, xs);
    let one = b.float(1.0);
    let e1 = b.bin(BinaryOp::Add, e, one);
    let half = b.float(0.5);
    let hx = b.bin(BinaryOp::Mul, x, half);
    let y = b.bin(BinaryOp::Mul, hx, e1);
    kernel(
        "gelu",
        &[len],
        &[],
        vec![
            view(Scalar::F32, 0, &[1]),
            view(Scalar::F32, (len * 4) as i64, &[1]),
        ],
        vec![Stage::Map {
            insts: b.0,
            stores: store(1, y),
        }],
    )
}

fn softmax_kernel(rows: u64, cols: u64) -> Kernel {
    let mut s0 = Insts::default();
    s0.load(0);
    let mut s1 = Insts::default();
    let x = s1.load(0);
    let m = s1.push(Scalar::F32, InstKind::Acc { stage: 0 });
    let d = s1.bin(BinaryOp::Sub, x, m);
    s1.un(UnaryOp::Exp, d);
    let mut s2 = Insts::default();
    let x = s2.load(0);
    let m = s2.push(Scalar::F32, InstKind::Acc { stage: 0 });
    let d = s2.bin(BinaryOp::Sub, x, m);
    let e = s2.un(UnaryOp::Exp, d);
    let sum = s2.push(Scalar::F32, InstKind::Acc { stage: 1 });
    let y = s2.bin(BinaryOp::Div, e, sum);
    kernel(
        "softmax",
        &[rows],
        &[cols],
        vec![
            view(Scalar::F32, 0, &[cols as i64, 1]),
            view(Scalar::F32, (rows * cols * 4) as i64, &[cols as i64, 1]),
        ],
        vec![
            Stage::Reduce {
                insts: s0.0,
                value: 0,
                op: ReduceOp::Max,
                init: f64_bits(f64::NEG_INFINITY),
                ty: Scalar::F32,
            },
            Stage::Reduce {
                insts: s1.0,
                value: 3,
                op: ReduceOp::Sum,
                init: f64_bits(0.0),
                ty: Scalar::F32,
            },
            Stage::Map {
                insts: s2.0,
                stores: store(1, y),
            },
        ],
    )
}

/// A 3x3 max pool with padding 1 over a [64, 64] image (guards on four axes).
fn pool_kernel() -> Kernel {
    let mut input = view(Scalar::F32, -(65 * 4), &[64, 1, 64, 1]);
    input.guards = vec![
        Guard {
            coeffs: vec![1, 0, 1, 0],
            offset: -1,
            limit: 64,
        },
        Guard {
            coeffs: vec![0, 1, 0, 1],
            offset: -1,
            limit: 64,
        },
    ];
    input.pad = f64_bits(f64::NEG_INFINITY);
    let mut r = Insts::default();
    r.load(0);
    let mut s = Insts::default();
    let a = s.push(Scalar::F32, InstKind::Acc { stage: 0 });
    kernel(
        "maxpool",
        &[64, 64],
        &[3, 3],
        vec![input, view(Scalar::F32, 64 * 64 * 4, &[64, 1, 0, 0])],
        vec![
            Stage::Reduce {
                insts: r.0,
                value: 0,
                op: ReduceOp::Max,
                init: f64_bits(f64::NEG_INFINITY),
                ty: Scalar::F32,
            },
            Stage::Once {
                insts: s.0,
                stores: store(1, a),
            },
        ],
    )
}

/// out[i, j] = table[idx[i], j]: an embedding lookup.
fn gather_kernel() -> Kernel {
    let mut b = Insts::default();
    let i = b.push(Scalar::I64, InstKind::Load { view: 0 });
    let x = b.push(
        Scalar::F32,
        InstKind::LoadIndirect {
            view: 1,
            indices: vec![IndirectIndex {
                index: i,
                stride: 64,
                limit: 100,
            }],
        },
    );
    kernel(
        "gather",
        &[16, 64],
        &[],
        vec![
            view(Scalar::I64, 0, &[1, 0]),
            view(Scalar::F32, 128, &[0, 1]),
            view(Scalar::F32, 128 + 6400 * 4, &[64, 1]),
        ],
        vec![Stage::Map {
            insts: b.0,
            stores: store(2, x),
        }],
    )
}

fn best_time(budget: Duration, mut f: impl FnMut()) -> Duration {
    f();
    let start = Instant::now();
    let mut best = Duration::MAX;
    let mut runs = 0;
    while start.elapsed() < budget || runs < 3 {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
        runs += 1;
    }
    best
}

fn main() {
    let (rows, cols) = (1024u64, 1024u64);
    let len = rows * cols;
    let kernels = [
        add_kernel(rows, cols),
        gelu_kernel(len),
        softmax_kernel(rows, cols),
        pool_kernel(),
        gather_kernel(),
    ];
    let refs: Vec<&Kernel> = kernels.iter().collect();
    // Compile five times and keep the fastest time of each kernel (the host may be busy).
    let mut best: Vec<Duration> = vec![Duration::MAX; kernels.len()];
    let mut best_total = Duration::MAX;
    let mut program = None;
    for _ in 0..5 {
        let p = CpuProgram::compile(&refs).expect("the benchmark kernels compile");
        for (i, b) in best.iter_mut().enumerate() {
            *b = (*b).min(p.kernel_compile_time(i).unwrap_or_default());
        }
        best_total = best_total.min(p.compile_time());
        program = Some(p);
    }
    let program = program.expect("compiled at least once");
    println!(
        "JIT compile (whole program of {} kernels, best of 5): {:.2} ms",
        kernels.len(),
        best_total.as_secs_f64() * 1e3
    );
    for (i, b) in best.iter().enumerate() {
        println!(
            "  {:<8} {:>7.0} us  (SIMD loops: {})",
            program.kernel_name(i).unwrap_or("?"),
            b.as_secs_f64() * 1e6,
            program.vectorized_loops(i).unwrap_or(0)
        );
    }

    let n = len as usize;
    let mut arena = vec![0.0f32; 3 * n];
    for (i, x) in arena.iter_mut().enumerate() {
        *x = ((i * 31) % 97) as f32 * 0.05 - 2.4;
    }
    let reference_add = |arena: &mut [f32]| {
        let (inputs, out) = arena.split_at_mut(2 * n);
        let (a, b) = inputs.split_at(n);
        for r in 0..rows as usize {
            let row = r * cols as usize;
            for c in 0..cols as usize {
                out[row + c] = a[row + c] + b[c];
            }
        }
    };
    // Rows split over the pool's threads, as the JIT kernel does.
    let reference_softmax = |arena: &mut [f32], pool: &rayon::ThreadPool| {
        use rayon::prelude::*;
        let (x, out) = arena.split_at_mut(n);
        pool.install(|| {
            x.par_chunks(cols as usize)
                .zip(out.par_chunks_mut(cols as usize))
                .for_each(|(row, out_row)| {
                    let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                    let sum: f32 = row.iter().map(|&v| (v - m).exp()).sum();
                    for (o, &v) in out_row.iter_mut().zip(row) {
                        *o = (v - m).exp() / sum;
                    }
                })
        });
    };
    println!(
        "\n{:<10} {:>8} {:>12} {:>12}",
        "kernel", "threads", "JIT ms", "Rust ms"
    );
    for threads in [1usize, 2] {
        let pool = memc_codegen::cpu::WorkerPool::new(threads).expect("a pool");
        let rayon_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool");
        for (index, name) in [(0usize, "add"), (1, "gelu"), (2, "softmax")] {
            let ptr = arena.as_mut_ptr().cast::<u8>();
            let t_jit = best_time(Duration::from_millis(300), || {
                // SAFETY: the arena holds 3 * rows * cols floats, all these kernels touch.
                unsafe { program.run_kernel(index, ptr, std::ptr::null(), &pool) }
            });
            let t_rust = match name {
                "add" => Some(best_time(Duration::from_millis(300), || {
                    reference_add(&mut arena)
                })),
                "softmax" => Some(best_time(Duration::from_millis(300), || {
                    reference_softmax(&mut arena, &rayon_pool)
                })),
                _ => None,
            };
            println!(
                "{:<10} {:>8} {:>12.3} {:>12}",
                name,
                threads,
                t_jit.as_secs_f64() * 1e3,
                t_rust
                    .map(|t| format!("{:.3}", t.as_secs_f64() * 1e3))
                    .unwrap_or_else(|| "-".into())
            );
        }
    }
}
