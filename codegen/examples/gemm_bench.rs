//! Side-by-side benchmark for contractions: the `gemm` crate against a simple Cranelift
//! register-blocked f32x4 micro-kernel (a 4x8 tile of accumulators, `fma` over k; a 1x16 tile
//! when m is 1), on 1 and 2 threads.
//!
//! Run with `cargo run --release -p memc-codegen --example gemm_bench`. It prints GFLOP/s for
//! each size and checks that both agree. The micro-kernel bakes m, n and k in as constants, as
//! memc's loop kernels do, and splits column panels over threads.

use cranelift_codegen::ir::{types, AbiParam, InstBuilder, MemFlagsData, Value};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use rayon::prelude::*;
use std::time::{Duration, Instant};

/// `fn(a, b, c, panel_begin, panel_end)`: computes the column panels `[panel_begin, panel_end)`
/// of `c = a @ b` for row-major `a` (m x k), `b` (k x n), `c` (m x n).
type MicroFn = unsafe extern "C" fn(*const f32, *const f32, *mut f32, u64, u64);

struct Micro {
    func: MicroFn,
    n_panels: u64,
    _module: JITModule,
}

/// JIT-compiles the micro-kernel for one size. `rows` (the tile height) must divide m and
/// `4 * vecs` (the tile width) must divide n.
fn compile_micro(m: usize, n: usize, k: usize, rows: usize, vecs: usize) -> Micro {
    assert!(
        m % rows == 0 && n % (4 * vecs) == 0,
        "the benchmark sizes fill whole tiles"
    );
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").expect("a known flag");
    flags.set("is_pic", "false").expect("a known flag");
    let isa = cranelift_native::builder()
        .expect("a supported host")
        .finish(settings::Flags::new(flags))
        .expect("valid flags");
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    for ty in [ptr, ptr, ptr, types::I64, types::I64] {
        sig.params.push(AbiParam::new(ty));
    }
    let mut ctx = module.make_context();
    ctx.func.signature = sig.clone();
    let mut fctx = FunctionBuilderContext::new();
    let flags = MemFlagsData::new().with_notrap();
    let width = 4 * vecs;
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let (a, bm, c, begin, end) = (p[0], p[1], p[2], p[3], p[4]);
        // for panel in begin..end { for row_tile in 0..m/rows { acc = 0; for p in 0..k {..} store } }
        let panel_var = b.declare_var(types::I64);
        b.def_var(panel_var, begin);
        let panel_head = b.create_block();
        let exit = b.create_block();
        let empty = b.ins().icmp(
            cranelift_codegen::ir::condcodes::IntCC::UnsignedGreaterThanOrEqual,
            begin,
            end,
        );
        b.ins().brif(empty, exit, &[], panel_head, &[]);
        b.switch_to_block(panel_head);
        let panel = b.use_var(panel_var);
        let col_bytes = b.ins().imul_imm_s(panel, (width * 4) as i64);
        let b_panel = b.ins().iadd(bm, col_bytes);
        let c_panel = b.ins().iadd(c, col_bytes);
        let tile_var = b.declare_var(types::I64);
        let zero = b.ins().iconst(types::I64, 0);
        b.def_var(tile_var, zero);
        let tile_head = b.create_block();
        b.ins().jump(tile_head, &[]);
        b.switch_to_block(tile_head);
        let tile = b.use_var(tile_var);
        let a_tile = b.ins().imul_imm_s(tile, (rows * k * 4) as i64);
        let a_tile = b.ins().iadd(a, a_tile);
        let c_tile = b.ins().imul_imm_s(tile, (rows * n * 4) as i64);
        let c_tile = b.ins().iadd(c_panel, c_tile);
        let zero_f = b.ins().f32const(0.0);
        let zero_v = b.ins().splat(types::F32X4, zero_f);
        let accs: Vec<_> = (0..rows * vecs)
            .map(|_| b.declare_var(types::F32X4))
            .collect();
        for &acc in &accs {
            b.def_var(acc, zero_v);
        }
        let p_var = b.declare_var(types::I64);
        b.def_var(p_var, zero);
        let k_head = b.create_block();
        b.ins().jump(k_head, &[]);
        b.switch_to_block(k_head);
        let pk = b.use_var(p_var);
        let b_row = b.ins().imul_imm_s(pk, (n * 4) as i64);
        let b_row = b.ins().iadd(b_panel, b_row);
        let bv: Vec<Value> = (0..vecs)
            .map(|v| b.ins().load(types::F32X4, flags, b_row, (16 * v) as i32))
            .collect();
        let a_col = b.ins().imul_imm_s(pk, 4);
        let a_col = b.ins().iadd(a_tile, a_col);
        for r in 0..rows {
            let a_scalar = b.ins().load(types::F32, flags, a_col, (r * k * 4) as i32);
            let a_vec = b.ins().splat(types::F32X4, a_scalar);
            for v in 0..vecs {
                let acc = b.use_var(accs[r * vecs + v]);
                let acc = b.ins().fma(a_vec, bv[v], acc);
                b.def_var(accs[r * vecs + v], acc);
            }
        }
        let next_p = b.ins().iadd_imm_s(pk, 1);
        b.def_var(p_var, next_p);
        let more_k = b.ins().icmp_imm_s(
            cranelift_codegen::ir::condcodes::IntCC::SignedLessThan,
            next_p,
            k as i64,
        );
        let k_done = b.create_block();
        b.ins().brif(more_k, k_head, &[], k_done, &[]);
        b.seal_block(k_head);
        b.switch_to_block(k_done);
        for r in 0..rows {
            for v in 0..vecs {
                let acc = b.use_var(accs[r * vecs + v]);
                b.ins()
                    .store(flags, acc, c_tile, (r * n * 4 + 16 * v) as i32);
            }
        }
        let next_tile = b.ins().iadd_imm_s(tile, 1);
        b.def_var(tile_var, next_tile);
        let more_tiles = b.ins().icmp_imm_s(
            cranelift_codegen::ir::condcodes::IntCC::SignedLessThan,
            next_tile,
            (m / rows) as i64,
        );
        let tiles_done = b.create_block();
        b.ins().brif(more_tiles, tile_head, &[], tiles_done, &[]);
        b.seal_block(tile_head);
        b.switch_to_block(tiles_done);
        let next_panel = b.ins().iadd_imm_s(panel, 1);
        b.def_var(panel_var, next_panel);
        let more_panels = b.ins().icmp(
            cranelift_codegen::ir::condcodes::IntCC::UnsignedLessThan,
            next_panel,
            end,
        );
        b.ins().brif(more_panels, panel_head, &[], exit, &[]);
        b.seal_block(panel_head);
        b.switch_to_block(exit);
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    let id = module
        .declare_function("micro", Linkage::Local, &sig)
        .expect("a fresh name");
    module
        .define_function(id, &mut ctx)
        .expect("the micro-kernel compiles");
    module.finalize_definitions().expect("linking succeeds");
    // SAFETY: `id` was defined with exactly `MicroFn`'s signature.
    let func =
        unsafe { std::mem::transmute::<*const u8, MicroFn>(module.get_finalized_function(id)) };
    Micro {
        func,
        n_panels: (n / width) as u64,
        _module: module,
    }
}

#[derive(Copy, Clone)]
struct Ptrs(*const f32, *const f32, *mut f32);
// SAFETY: threads write disjoint column panels of `c` and only read `a` and `b`.
unsafe impl Send for Ptrs {}
unsafe impl Sync for Ptrs {}
impl Ptrs {
    fn get(self) -> (*const f32, *const f32, *mut f32) {
        (self.0, self.1, self.2)
    }
}

fn run_micro(micro: &Micro, ptrs: Ptrs, pool: &rayon::ThreadPool) {
    let threads = pool.current_num_threads() as u64;
    let func = micro.func;
    let n_panels = micro.n_panels;
    if threads <= 1 {
        let (a, b, c) = ptrs.get();
        // SAFETY: the buffers hold m x k, k x n and m x n floats.
        unsafe { func(a, b, c, 0, n_panels) };
        return;
    }
    let chunk = n_panels.div_ceil(threads);
    pool.install(|| {
        (0..threads).into_par_iter().for_each(|t| {
            let (begin, end) = (t * chunk, ((t + 1) * chunk).min(n_panels));
            let (a, b, c) = ptrs.get();
            // SAFETY: as above; threads write disjoint panels.
            unsafe { func(a, b, c, begin, end) };
        })
    });
}

fn run_gemm(m: usize, n: usize, k: usize, ptrs: Ptrs, pool: &rayon::ThreadPool) {
    let threads = pool.current_num_threads();
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    pool.install(|| {
        let (a, b, c) = ptrs.get();
        // SAFETY: row-major buffers of the right sizes.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c,
                1,
                n as isize,
                false,
                a,
                1,
                k as isize,
                b,
                1,
                n as isize,
                0.0f32,
                1.0f32,
                false,
                false,
                false,
                parallelism,
            )
        }
    });
}

/// Runs `f` repeatedly for at least `budget` and returns the best time of one run.
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
    let sizes = [
        (1usize, 768usize, 768usize),
        (128, 768, 768),
        (512, 512, 512),
    ];
    println!(
        "{:>14} {:>7} {:>12} {:>12} {:>9} {:>10}",
        "m x n x k", "threads", "gemm GF/s", "clif GF/s", "max diff", "clif jit"
    );
    for (m, n, k) in sizes {
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7) % 13) as f32 * 0.1 - 0.6)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 5) % 11) as f32 * 0.1 - 0.5)
            .collect();
        let mut c_gemm = vec![0.0f32; m * n];
        let mut c_micro = vec![0.0f32; m * n];
        let jit_start = Instant::now();
        let micro = if m == 1 {
            compile_micro(m, n, k, 1, 4)
        } else {
            compile_micro(m, n, k, 4, 2)
        };
        let jit = jit_start.elapsed();
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a pool");
            let flops = 2.0 * (m * n * k) as f64;
            let gemm_ptrs = Ptrs(a.as_ptr(), b.as_ptr(), c_gemm.as_mut_ptr());
            let t_gemm = best_time(Duration::from_millis(400), || {
                run_gemm(m, n, k, gemm_ptrs, &pool)
            });
            let micro_ptrs = Ptrs(a.as_ptr(), b.as_ptr(), c_micro.as_mut_ptr());
            let t_micro = best_time(Duration::from_millis(400), || {
                run_micro(&micro, micro_ptrs, &pool)
            });
            let diff = c_gemm
                .iter()
                .zip(&c_micro)
                .map(|(x, y)| (x - y).abs() / x.abs().max(1.0))
                .fold(0.0f32, f32::max);
            println!(
                "{:>14} {:>7} {:>12.1} {:>12.1} {:>9.1e} {:>8.2}ms",
                format!("{m}x{n}x{k}"),
                threads,
                flops / t_gemm.as_secs_f64() / 1e9,
                flops / t_micro.as_secs_f64() / 1e9,
                diff,
                jit.as_secs_f64() * 1e3
            );
        }
    }
}
