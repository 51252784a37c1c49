//! The kernel validator is the only thing between a plan file from outside and JIT-compiled
//! code reading and writing memory. This test attacks it: it lowers real models, then mutates
//! one number of one kernel at a time (offsets, strides, extents, guard and index limits,
//! instruction operands: set to 0, ±1, off by one, doubled, huge, negative) thousands of times.
//! Every mutant the validator accepts is JIT-compiled and run in an arena and a weights region
//! that each sit between inaccessible guard pages, so a read or write out of bounds crashes the
//! test instead of passing silently. Mutants the validator rejects must be rejected with an
//! error, never a panic. The random choices come from a fixed seed, so a failure reproduces.

use memc_codegen::cpu::CpuProgram;
use memc_codegen::kernel::{Kernel, RegionSizes};
use serde_json::Value;
use std::path::Path;

/// A zeroed region of `len` bytes with an inaccessible page before and after it.
struct Guarded {
    base: *mut u8,
    total: usize,
    page: usize,
}

impl Guarded {
    fn new(len: usize) -> Guarded {
        // SAFETY: plain anonymous mappings; every pointer used stays inside `total`.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
            let body = len.div_ceil(page).max(1) * page;
            let total = body + 2 * page;
            let base = libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED, "mmap of a guarded region");
            let base = base as *mut u8;
            let rc = libc::mprotect(
                base.add(page) as *mut _,
                body,
                libc::PROT_READ | libc::PROT_WRITE,
            );
            assert_eq!(rc, 0, "mprotect of the region's body");
            // The region ends exactly at the upper guard page, so a one-byte overrun faults.
            Guarded { base, total, page }
        }
    }

    /// The region's first byte: at the start of the body (an underrun hits the lower guard
    /// page) or, with `at_end`, as close to the upper guard page as the runtime's 64-byte base
    /// alignment allows (an overrun of more than the few bytes of rounding hits it).
    fn start(&self, len: usize, at_end: bool) -> *mut u8 {
        let body = self.total - 2 * self.page;
        let offset = if at_end { (body - len) / 64 * 64 } else { 0 };
        // SAFETY: `offset + len <= body`.
        unsafe { self.base.add(self.page + offset) }
    }
}

impl Guarded {
    /// Sets every byte of the body to `byte`, so that loaded indices are not all zero.
    fn fill(&self, byte: u8) {
        let body = self.total - 2 * self.page;
        // SAFETY: the body is mapped read-write and `body` bytes long.
        unsafe { std::ptr::write_bytes(self.base.add(self.page), byte, body) };
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped.
        unsafe { libc::munmap(self.base as *mut _, self.total) };
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn numbers(value: &Value, path: &mut Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
    match value {
        Value::Number(_) => out.push(path.clone()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(PathStep::Index(i));
                numbers(item, path, out);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                path.push(PathStep::Key(key.clone()));
                numbers(item, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone)]
enum PathStep {
    Key(String),
    Index(usize),
}

fn at<'a>(value: &'a mut Value, path: &[PathStep]) -> &'a mut Value {
    path.iter().fold(value, |v, step| match step {
        PathStep::Key(k) => &mut v[k.as_str()],
        PathStep::Index(i) => &mut v[*i],
    })
}

fn mutate(n: &Value, rng: &mut Rng) -> Value {
    let v = n.as_i64().unwrap_or(0);
    let choices = [
        0,
        1,
        -1,
        v.wrapping_add(1),
        v.wrapping_sub(1),
        v.saturating_mul(2),
        v.saturating_mul(64),
        v.wrapping_neg(),
        i64::MAX,
        i64::MIN,
        1 << 40,
    ];
    let pick = choices[rng.below(choices.len())];
    if n.is_u64() && pick < 0 {
        Value::from(pick as u64)
    } else {
        Value::from(pick)
    }
}

fn lowered(model: &str, dims: &[(&str, u64)]) -> memc_codegen::Program {
    let options = memc::compile::CompileOptions {
        dims: dims.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        lower: true,
        plan_budget: std::time::Duration::from_millis(20),
        ..Default::default()
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    memc::compile::compile(&root.join(model), &options)
        .unwrap_or_else(|d| panic!("{model} compiles: {}", d.message))
        .program
        .expect("lowering was asked for")
}

/// Node tests whose kernels use indirect loads, guards, indices and arg-reductions.
const NODE_TESTS: &[&str] = &[
    "test_gather_1",
    "test_gathernd_example_int32_batch_dim1",
    "test_gather_elements_negative_indices",
    "test_edge_pad",
    "test_reflect_pad",
    "test_resize_upsample_scales_linear",
    "test_resize_downsample_sizes_nearest",
    "test_cumsum_1d_reverse_exclusive",
    "test_top_k_negative_axis",
    "test_averagepool_2d_pads_count_include_pad",
    "test_maxpool_with_argmax_2d_precomputed_pads",
    "test_slice_neg_steps",
    "test_argmax_negative_axis_keepdims_example",
    "test_layer_normalization_4d_axis1",
    "test_softmax_axis_1",
    "test_transpose_all_permutations_3",
    "test_tril_neg",
    "test_convtranspose_pads",
    "test_conv_with_strides_and_asymmetric_padding",
    "test_matmul_4d",
    "test_dequantizelinear_axis",
];

#[test]
fn validated_mutants_stay_in_bounds() {
    let mut programs = vec![
        lowered("examples/classifier.onnx", &[("batch", 1)]),
        lowered("tests/onnx/fixtures/mlp_raw.onnx", &[]),
        lowered(
            "tests/onnx/fixtures/shape_subgraph.onnx",
            &[("batch", 2), ("seq", 3)],
        ),
        // Low-bit products (`NBitsMatMul`): one row, and enough rows for the scratch tiles.
        lowered("tests/onnx/fixtures/qdq_uint4.onnx", &[("batch", 1)]),
        lowered("tests/onnx/fixtures/qdq_int4.onnx", &[("batch", 130)]),
        // A 3x3 convolution through implicit im2col (a `Contract` whose `b` is an
        // `Im2colView` of the input), among the no-heap model's products.
        lowered("tests/onnx/no_heap/model.onnx", &[]),
    ];
    // Kernels of other shapes (indirect loads, guards, indices, arg-reductions) from ONNX's node
    // tests, when the venv that ships them exists (scripts/test makes it).
    let node_dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".venv/lib/python3.11/site-packages/onnx/backend/test/data/node");
    for test in NODE_TESTS {
        let model = node_dir.join(test).join("model.onnx");
        if model.is_file() {
            programs.push(lowered(model.to_str().expect("a UTF-8 path"), &[]));
        }
    }
    println!("{} programs", programs.len());
    let pool = memc_codegen::cpu::WorkerPool::new(2).expect("a thread pool");
    // MEMC_MUTATION_SEED explores other mutants; the default keeps CI reproducible.
    let seed = std::env::var("MEMC_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut rng = Rng(seed.unwrap_or(0x6d65_6d63_2d66_757a) | 1);
    let (mut accepted, mut rejected, mut unparsed, mut ran) = (0, 0, 0, 0);
    for program in &programs {
        let sizes = program.region_sizes();
        let arena = Guarded::new(sizes.arena as usize);
        let weights = Guarded::new(sizes.weights as usize);
        for kernel in program.kernels() {
            let original = serde_json::to_value(kernel).expect("kernels serialize");
            let mut paths = Vec::new();
            numbers(&original, &mut Vec::new(), &mut paths);
            for _ in 0..150 {
                let mut value = original.clone();
                for _ in 0..1 + rng.below(2) {
                    let path = &paths[rng.below(paths.len())];
                    let target = at(&mut value, path);
                    *target = mutate(target, &mut rng);
                }
                let Ok(mutant) = serde_json::from_value::<Kernel>(value) else {
                    unparsed += 1;
                    continue;
                };
                let checked = std::panic::catch_unwind(|| mutant.validate(sizes));
                match checked {
                    Err(_) => panic!("the validator panicked on a mutant of `{}`", kernel.name),
                    Ok(Err(_)) => rejected += 1,
                    Ok(Ok(())) => {
                        accepted += 1;
                        if std::env::var_os("MEMC_MUTATION_TRACE").is_some() {
                            eprintln!("{}", serde_json::to_string(&mutant).expect("serializes"));
                        }
                        ran += usize::from(run_guarded(&mutant, sizes, &arena, &weights, &pool));
                    }
                }
            }
        }
    }
    println!(
        "mutants: {accepted} accepted ({ran} of them run in bounds at both ends of guarded regions), {rejected} rejected, {unparsed} not a kernel"
    );
    assert!(
        ran > 100 && rejected > 100,
        "the mutations exercise both outcomes"
    );
}

/// Runs an accepted mutant with its regions against each guard; `false` when it was too large
/// to run or the backend declined it.
fn run_guarded(
    kernel: &Kernel,
    sizes: RegionSizes,
    arena: &Guarded,
    weights: &Guarded,
    pool: &memc_codegen::cpu::WorkerPool,
) -> bool {
    // Skip mutants whose work is too large to run in a test (the validator allows them).
    let work: u128 = match &kernel.body {
        memc_codegen::KernelBody::Loop(k) => {
            k.outer.iter().chain(&k.inner).map(|&e| e as u128).product()
        }
        memc_codegen::KernelBody::Contract(c) => {
            c.batch.iter().map(|&e| e as u128).product::<u128>()
                * c.m as u128
                * c.n as u128
                * c.k as u128
        }
        memc_codegen::KernelBody::NBits(q) => q.rows() as u128 * q.n as u128 * q.k as u128,
    };
    if work > 1 << 22 {
        return false;
    }
    let Ok(program) = CpuProgram::compile(&[kernel]) else {
        return false;
    };
    for at_end in [false, true] {
        // SAFETY: the kernel passed validation against exactly these region sizes; the regions
        // are that large, and any access outside them hits a guard page and crashes the test.
        unsafe {
            program.run_kernel(
                0,
                arena.start(sizes.arena as usize, at_end),
                weights.start(sizes.weights as usize, at_end),
                pool,
            );
        }
    }
    true
}

/// The scatter-add `ms.GatherGrad` lowers to, built by hand: `table[40, 16] += dY[p, :]` at row
/// `indices[p]` for 24 positions, an accumulating indirect store (the lowered models above have
/// none).
fn scatter_kernel() -> (Kernel, RegionSizes) {
    use memc_codegen::kernel::{
        IndirectIndex, Inst, InstKind, LoopKernel, Region, Scalar, Stage, Store, View,
    };
    let view = |elem, byte_offset, strides: &[i64]| View {
        region: Region::Arena,
        elem,
        byte_offset,
        strides: strides.to_vec(),
        guards: vec![],
        pad: 0,
    };
    let (rows, cols, positions) = (40i64, 16i64, 24i64);
    let dy = 4 * rows * cols;
    let indices = dy + 4 * positions * cols;
    let kernel = Kernel {
        name: "scatter".into(),
        body: memc_codegen::KernelBody::Loop(LoopKernel {
            outer: vec![cols as u64],
            inner: vec![positions as u64],
            views: vec![
                view(Scalar::F32, 0, &[1, 0]),
                view(Scalar::F32, dy, &[1, cols]),
                view(Scalar::I64, indices, &[0, 1]),
            ],
            stages: vec![Stage::Map {
                insts: vec![
                    Inst {
                        ty: Scalar::I64,
                        kind: InstKind::Load { view: 2 },
                    },
                    Inst {
                        ty: Scalar::F32,
                        kind: InstKind::Load { view: 1 },
                    },
                ],
                stores: vec![Store {
                    view: 0,
                    value: 1,
                    indices: vec![IndirectIndex {
                        index: 0,
                        stride: cols,
                        limit: rows,
                    }],
                    accumulate: true,
                }],
            }],
        }),
    };
    let sizes = RegionSizes {
        arena: (indices + 8 * positions) as u64,
        weights: 0,
        state: 0,
    };
    (kernel, sizes)
}

#[test]
fn validated_scatter_mutants_stay_in_bounds() {
    let (kernel, sizes) = scatter_kernel();
    kernel.validate(sizes).expect("the scatter kernel is valid");
    let arena = Guarded::new(sizes.arena as usize);
    // Index bytes of 0x9c read as large negative i64s: the clamp decides every address.
    arena.fill(0x9c);
    let weights = Guarded::new(0);
    let pool = memc_codegen::cpu::WorkerPool::new(2).expect("a thread pool");
    let mut rng = Rng(0x7363_6174_7465_7221);
    let (mut ran, mut rejected) = (0, 0);
    let original = serde_json::to_value(&kernel).expect("kernels serialize");
    let mut paths = Vec::new();
    numbers(&original, &mut Vec::new(), &mut paths);
    for _ in 0..2000 {
        let mut value = original.clone();
        for _ in 0..1 + rng.below(2) {
            let path = &paths[rng.below(paths.len())];
            let target = at(&mut value, path);
            *target = mutate(target, &mut rng);
        }
        let Ok(mutant) = serde_json::from_value::<Kernel>(value) else {
            continue;
        };
        match std::panic::catch_unwind(|| mutant.validate(sizes)) {
            Err(_) => panic!("the validator panicked on a scatter mutant"),
            Ok(Err(_)) => rejected += 1,
            Ok(Ok(())) => ran += usize::from(run_guarded(&mutant, sizes, &arena, &weights, &pool)),
        }
    }
    println!("scatter mutants: {ran} run in bounds, {rejected} rejected");
    assert!(
        ran > 100 && rejected > 100,
        "the mutations exercise both outcomes"
    );
}
