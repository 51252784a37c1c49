//! The PTX of loop kernels: hand-built kernels covering every unary and binary operation, cast,
//! reduction, kernel type, guard, broadcast, indirect load and scattering store are emitted as
//! one module, which must be deterministic and assemble with `ptxas` for sm_80 and sm_90 with
//! no errors and no spills (skipped, and said so, where no ptxas is found, unless
//! `MEMC_REQUIRE_PTXAS=1`).

mod common;

use common::kernels::{
    arena, binary_kernel, cast_kernel, loop_kernel, map, once, softmax_kernel, unary_kernel, view,
    Insts,
};
use common::ptx::{assemble, compare, run_kernels_both};
use common::rng::Rng;
use memc_codegen::kernel::{
    f64_bits, BinaryOp, Guard, IndirectIndex, InstKind, Kernel, ReduceOp, Region, RegionSizes,
    Scalar, Stage, Store, UnaryOp,
};
use memc_codegen::ptx::{emit_kernel, entry_name, PtxError, HEADER};

/// Every kernel type: the compute types, and the storage types (views of f16, bf16, float8,
/// float4 and the 4- and 2-bit integers, loaded widened and stored narrowed).
const ALL: [Scalar; 23] = Scalar::ALL;

const UNARY: [UnaryOp; 28] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Sign,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sqrt,
    UnaryOp::Reciprocal,
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Tan,
    UnaryOp::Asin,
    UnaryOp::Acos,
    UnaryOp::Atan,
    UnaryOp::Sinh,
    UnaryOp::Cosh,
    UnaryOp::Tanh,
    UnaryOp::Asinh,
    UnaryOp::Acosh,
    UnaryOp::Atanh,
    UnaryOp::Erf,
    UnaryOp::Not,
    UnaryOp::BitNot,
    UnaryOp::IsNan,
    UnaryOp::IsPosInf,
    UnaryOp::IsNegInf,
];

const BINARY: [BinaryOp; 22] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Rem,
    BinaryOp::FloorMod,
    BinaryOp::Pow,
    BinaryOp::Min,
    BinaryOp::Max,
    BinaryOp::And,
    BinaryOp::Or,
    BinaryOp::Xor,
    BinaryOp::BitAnd,
    BinaryOp::BitOr,
    BinaryOp::BitXor,
    BinaryOp::Shl,
    BinaryOp::Shr,
    BinaryOp::Eq,
    BinaryOp::Lt,
    BinaryOp::Le,
    BinaryOp::Gt,
    BinaryOp::Ge,
];

const SIZES: RegionSizes = RegionSizes {
    arena: 1 << 30,
    weights: 1 << 30,
    state: 1 << 30,
};

fn unary_defined(op: UnaryOp, ty: Scalar) -> bool {
    match op {
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign => true,
        UnaryOp::Not => ty == Scalar::Bool,
        UnaryOp::BitNot => ty.is_int(),
        _ => ty.is_float(),
    }
}

fn binary_defined(op: BinaryOp, ty: Scalar) -> bool {
    match op {
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => ty == Scalar::Bool,
        BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => ty.is_int(),
        BinaryOp::Shl | BinaryOp::Shr => ty.is_unsigned_int(),
        BinaryOp::FloorMod => ty != Scalar::Bool,
        _ => true,
    }
}

fn reduce_kernel(op: ReduceOp, ty: Scalar, rows: u64, cols: u64) -> Kernel {
    let mut s0 = Insts::default();
    let x = s0.load(ty, 0);
    let acc_ty = match op {
        ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. } => Scalar::I64,
        _ => ty,
    };
    let mut s1 = Insts::default();
    let a = s1.acc(acc_ty, 0);
    // Zero is the same bits as an f64, an i64 and a u64.
    let init = 0;
    loop_kernel(
        &format!("reduce {op:?} {}", ty.name()),
        &[rows],
        &[cols],
        vec![
            arena(ty, 0, &[cols as i64, 1]),
            arena(acc_ty, 1 << 20, &[1, 0]),
        ],
        vec![
            Stage::Reduce {
                insts: s0.0,
                value: x,
                op,
                init,
                ty: acc_ty.compute(),
            },
            once(s1, &[(1, a)]),
        ],
    )
}

/// Every kernel of the coverage module.
fn kernels() -> Vec<Kernel> {
    let mut out = Vec::new();
    for ty in ALL {
        for op in UNARY {
            if unary_defined(op, ty) {
                let out_ty = match op {
                    UnaryOp::IsNan | UnaryOp::IsPosInf | UnaryOp::IsNegInf => Scalar::Bool,
                    _ => ty,
                };
                out.push(unary_kernel(op, ty, out_ty, 1000, 1 << 20));
            }
        }
        for op in BINARY {
            if binary_defined(op, ty) {
                out.push(binary_kernel(op, ty, 1000, 1 << 16, 1 << 20));
            }
        }
        for to in ALL {
            out.push(cast_kernel(ty, to, 1000, 1 << 20));
        }
        for op in [
            ReduceOp::Sum,
            ReduceOp::Prod,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::ArgMax { last: false },
            ReduceOp::ArgMin { last: true },
        ] {
            out.push(reduce_kernel(op, ty, 10, 100));
            out.push(reduce_kernel(op, ty, 2, 10000));
            out.push(reduce_kernel(op, ty, 300, 1));
        }
    }
    out.push(softmax_kernel(64, 1000, 1 << 20));
    out.push(softmax_kernel(1, 100_000, 1 << 20));
    out.extend(special_kernels());
    out
}

/// Guards, broadcast, indices, indirect loads, scatter stores, weights and state.
fn special_kernels() -> Vec<Kernel> {
    let mut out = Vec::new();
    // A padded 2-d window: out[i, j] = x[i - 1, j - 2] where in range, else 7.5.
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let mut padded = view(Region::Weights, Scalar::F32, -4 * (10 + 2), &[10, 1]);
    padded.guards = vec![
        Guard {
            coeffs: vec![1, 0],
            offset: -1,
            limit: 8,
        },
        Guard {
            coeffs: vec![0, 1],
            offset: -2,
            limit: 10,
        },
    ];
    padded.pad = f64_bits(7.5);
    out.push(loop_kernel(
        "pad",
        &[10, 14],
        &[],
        vec![padded, arena(Scalar::F32, 0, &[14, 1])],
        vec![map(b, &[(1, x)])],
    ));
    // Broadcast add with an index: out[i, j] = x[j] + y[i] + i*j into the state.
    let mut b = Insts::default();
    let x = b.load(Scalar::F64, 0);
    let y = b.load(Scalar::F64, 1);
    let s = b.bin(BinaryOp::Add, x, y);
    let i = b.index(0);
    let j = b.index(1);
    let ij = b.bin(BinaryOp::Mul, i, j);
    let f = b.cast(ij, Scalar::F64);
    let z = b.bin(BinaryOp::Add, s, f);
    out.push(loop_kernel(
        "broadcast",
        &[7, 33],
        &[],
        vec![
            arena(Scalar::F64, 0, &[0, 1]),
            arena(Scalar::F64, 4096, &[1, 0]),
            view(Region::State, Scalar::F64, 0, &[33, 1]),
        ],
        vec![map(b, &[(2, z)])],
    ));
    // A gather: out[i, j] = table[idx[i], j], idx i64 with negatives.
    let mut b = Insts::default();
    let ix = b.load(Scalar::I64, 0);
    let g = b.push(
        Scalar::F32,
        InstKind::LoadIndirect {
            view: 1,
            indices: vec![IndirectIndex {
                index: ix,
                stride: 16,
                limit: 50,
            }],
        },
    );
    out.push(loop_kernel(
        "gather",
        &[20, 16],
        &[],
        vec![
            arena(Scalar::I64, 0, &[1, 0]),
            view(Region::Weights, Scalar::F32, 0, &[0, 1]),
            arena(Scalar::F32, 8192, &[16, 1]),
        ],
        vec![map(b, &[(2, g)])],
    ));
    // A scatter-add (GatherGrad): grad[idx[i], j] += dy[i, j], rows are j.
    let mut b = Insts::default();
    let ix = b.load(Scalar::I64, 0);
    let dy = b.load(Scalar::F32, 1);
    out.push(loop_kernel(
        "scatter",
        &[16],
        &[20],
        vec![
            arena(Scalar::I64, 0, &[0, 1]),
            arena(Scalar::F32, 4096, &[1, 16]),
            view(Region::State, Scalar::F32, 0, &[1, 0]),
        ],
        vec![Stage::Map {
            insts: b.0,
            stores: vec![Store {
                view: 2,
                value: dy,
                indices: vec![IndirectIndex {
                    index: ix,
                    stride: 16,
                    limit: 50,
                }],
                accumulate: true,
            }],
        }],
    ));
    // A cumulative sum along the last axis, walked in order (inner empty, scatter store).
    let mut b = Insts::default();
    let x = b.load(Scalar::I32, 0);
    out.push(loop_kernel(
        "accumulate_rows",
        &[5, 300],
        &[],
        vec![
            arena(Scalar::I32, 0, &[300, 1]),
            arena(Scalar::I32, 8192, &[1, 0]),
        ],
        vec![Stage::Map {
            insts: b.0,
            stores: vec![Store {
                view: 1,
                value: x,
                indices: vec![],
                accumulate: true,
            }],
        }],
    ));
    out
}

fn module(kernels: &[Kernel]) -> Result<String, PtxError> {
    let mut text = String::from(HEADER);
    for (i, k) in kernels.iter().enumerate() {
        k.validate(SIZES).unwrap_or_else(|e| panic!("{e}"));
        let entry = emit_kernel(k, &entry_name(0, i), SIZES)?;
        text.push('\n');
        text.push_str(&entry.text);
    }
    Ok(text)
}

#[test]
fn every_loop_kernel_is_emitted_deterministically() {
    let ks = kernels();
    let a = module(&ks).expect("every kernel has PTX");
    let b = module(&ks).expect("every kernel has PTX");
    assert_eq!(a, b);
}

#[test]
fn the_coverage_module_assembles_without_spills() {
    let text = module(&kernels()).expect("every kernel has PTX");
    for arch in ["sm_80", "sm_90"] {
        if let Some(report) = assemble(&text, arch) {
            report.unwrap_or_else(|e| panic!("{arch}: {e}"));
        }
    }
}

#[test]
fn launches_follow_the_forms() {
    let e = |k: &Kernel| emit_kernel(k, "k", SIZES).expect("emitted").launch;
    // Elementwise: one thread per point.
    let l = e(&unary_kernel(
        UnaryOp::Exp,
        Scalar::F32,
        Scalar::F32,
        1 << 20,
        1 << 24,
    ));
    assert_eq!(l.block, [256, 1, 1]);
    assert_eq!(l.grid, [1024, 1, 1]);
    // Many rows: a warp per row, 8 rows per block.
    let l = e(&softmax_kernel(64, 1000, 1 << 20));
    assert_eq!((l.block[0], l.grid[0]), (256, 8));
    // One long row: a block of 512 per row.
    let l = e(&softmax_kernel(1, 100_000, 1 << 20));
    assert_eq!((l.block[0], l.grid[0]), (512, 1));
}

#[test]
fn once_stages_and_empty_spaces_emit() {
    // An empty outer space runs nothing; an empty inner space folds nothing.
    let mut b = Insts::default();
    let c = b.float(Scalar::F32, 1.0);
    let k = loop_kernel(
        "empty",
        &[0, 4],
        &[],
        vec![arena(Scalar::F32, 0, &[4, 1])],
        vec![map(b, &[(0, c)])],
    );
    let entry = emit_kernel(&k, "k", SIZES).expect("emitted");
    assert!(entry.text.contains("ret;"));
    let k = reduce_kernel(ReduceOp::Sum, Scalar::F32, 4, 0);
    let entry = emit_kernel(&k, "k", SIZES).expect("emitted");
    assert!(!entry.text.contains("$L_inner_"), "{}", entry.text);
}

// ---------------------------------------------------------------------------------------------
// Semantics: the PTX run in the interpreter against the reference interpreter.

/// Little-endian bytes of `v` in type `ty` (floats rounded, integers wrapped).
fn encode(ty: Scalar, v: f64, bits: u64) -> Vec<u8> {
    match ty {
        Scalar::F64 => v.to_le_bytes().to_vec(),
        Scalar::F32 => (v as f32).to_le_bytes().to_vec(),
        Scalar::Bool => vec![(bits & 1) as u8],
        narrow if narrow.is_float() => narrow.narrow(f64::from(v as f32).to_bits()).to_le_bytes()
            [..ty.size() as usize]
            .to_vec(),
        _ => ty.narrow(bits).to_le_bytes()[..ty.size() as usize].to_vec(),
    }
}

const SPECIAL: [f64; 24] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.5,
    2.5,
    -2.5,
    3.5,
    1.5,
    0.999,
    -0.999,
    1e-3,
    -7.25,
    100.0,
    -100.0,
    1e-8,
    30.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e30,
    -1e-30,
    5e-324,
];

/// `n` elements of `ty`: special values, then random ones (floats in [-8, 8] and [-1, 1],
/// integers small or of any bits).
fn data(ty: Scalar, n: usize, seed: u64) -> Vec<u8> {
    data_below(ty, n, seed, f64::INFINITY)
}

/// [`data`] with finite special values of magnitude `limit` or more left out (replaced by 0.75).
fn data_below(ty: Scalar, n: usize, seed: u64, limit: f64) -> Vec<u8> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) + 1);
    let mut out = Vec::new();
    for i in 0..n {
        let r = rng.next();
        let special = SPECIAL.get(i).filter(|_| seed.is_multiple_of(2));
        let v = if let Some(&v) = special {
            if v.is_finite() && v.abs() >= limit {
                0.75
            } else {
                v
            }
        } else if i % 3 == 0 {
            rng.unit() * 2.0 - 1.0
        } else {
            (rng.unit() * 16.0 - 8.0) * if i % 5 == 0 { 1.0 } else { 0.37 }
        };
        let bits = match i % 4 {
            0 => r,
            1 => (r % 9).wrapping_sub(4),
            2 => r % 70,
            _ => (r >> 60).wrapping_neg(),
        };
        out.extend(encode(ty, v, bits));
    }
    out
}

const OUT: usize = 1 << 20;

/// Runs elementwise kernels (inputs at 0 and `1 << 16`, output at `1 << 20`) through both
/// interpreters and compares `n` output elements; returns the failures.
fn check_elementwise(
    k: &Kernel,
    ty: Scalar,
    out_ty: Scalar,
    n: usize,
    rtol: f64,
) -> Option<String> {
    check_elementwise_below(k, ty, out_ty, n, rtol, f64::INFINITY)
}

/// [`check_elementwise`] with the first operand's finite specials below `limit`.
fn check_elementwise_below(
    k: &Kernel,
    ty: Scalar,
    out_ty: Scalar,
    n: usize,
    rtol: f64,
    limit: f64,
) -> Option<String> {
    let mut arena = vec![0u8; OUT + n * 8];
    let x = data_below(ty, n, 2, limit);
    let y = data(ty, n, 7);
    arena[..x.len()].copy_from_slice(&x);
    arena[1 << 16..(1 << 16) + y.len()].copy_from_slice(&y);
    let run = run_kernels_both(std::slice::from_ref(k), &arena, &[], &[]);
    let [(ga, _), (ra, _)] = match run {
        Ok(r) => r,
        Err(e) => return Some(format!("{}: {e}", k.name)),
    };
    let m = n * out_ty.size() as usize;
    compare(out_ty, &ga[OUT..OUT + m], &ra[OUT..OUT + m], rtol)
        .err()
        .map(|e| format!("{} ({} -> {}): {e}", k.name, ty.name(), out_ty.name()))
}

fn rtol(ty: Scalar) -> f64 {
    match ty {
        Scalar::F64 => 1e-12,
        _ => 2e-7,
    }
}

#[test]
fn unary_operations_match_the_reference() {
    let mut failures = Vec::new();
    for ty in ALL {
        for op in UNARY {
            if unary_defined(op, ty) {
                let out_ty = match op {
                    UnaryOp::IsNan | UnaryOp::IsPosInf | UnaryOp::IsNegInf => Scalar::Bool,
                    _ => ty,
                };
                let k = unary_kernel(op, ty, out_ty, 300, OUT as i64);
                // sin, cos and tan reduce their argument exactly only below 2^20 pi/2 (see
                // the PTX math module).
                let limit = match op {
                    UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tan => 1e6,
                    _ => f64::INFINITY,
                };
                failures.extend(check_elementwise_below(
                    &k,
                    ty,
                    out_ty,
                    300,
                    rtol(ty),
                    limit,
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn binary_operations_match_the_reference() {
    let mut failures = Vec::new();
    for ty in ALL {
        for op in BINARY {
            if binary_defined(op, ty) {
                let k = binary_kernel(op, ty, 300, 1 << 16, OUT as i64);
                let out_ty = if op.is_comparison() { Scalar::Bool } else { ty };
                failures.extend(check_elementwise(&k, ty, out_ty, 300, rtol(ty)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn casts_match_the_reference() {
    let mut failures = Vec::new();
    for from in ALL {
        for to in ALL {
            let k = cast_kernel(from, to, 300, OUT as i64);
            failures.extend(check_elementwise(&k, from, to, 300, 0.0));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Values on a 0.25 grid in [-2, 2] (so float sums are exact in any order, and ties occur),
/// with NaNs at the first element of row 0 and inside row 1 for float types.
fn reduce_data(ty: Scalar, rows: usize, cols: usize) -> Vec<u8> {
    let mut rng = Rng(99);
    let mut out = Vec::new();
    for r in 0..rows {
        for c in 0..cols {
            let q = (rng.next() % 17) as i64 - 8;
            let mut v = q as f64 * 0.25;
            if ty.is_float() && ((r == 0 && c == 0) || (r == 1 && c == cols / 2)) {
                v = f64::NAN;
            }
            out.extend(encode(ty, v, q as u64));
        }
    }
    out
}

#[test]
fn reductions_match_the_reference() {
    let mut failures = Vec::new();
    for ty in ALL {
        for op in [
            ReduceOp::Sum,
            ReduceOp::Prod,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::ArgMax { last: false },
            ReduceOp::ArgMax { last: true },
            ReduceOp::ArgMin { last: false },
            ReduceOp::ArgMin { last: true },
        ] {
            for (rows, cols) in [(10, 100), (2, 5000), (40, 1), (3, 33), (5, 301)] {
                if op == ReduceOp::Prod && ty.is_float() && (cols > 100 || ty.is_storage_only()) {
                    // Order-dependent overflow; covered by the integer products.
                    continue;
                }
                let k = reduce_kernel(op, ty, rows as u64, cols as u64);
                let mut arena = vec![0u8; OUT + 4096];
                let x = reduce_data(ty, rows, cols);
                arena[..x.len()].copy_from_slice(&x);
                let acc_ty = match op {
                    ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. } => Scalar::I64,
                    _ => ty,
                };
                match run_kernels_both(std::slice::from_ref(&k), &arena, &[], &[]) {
                    Ok([(ga, _), (ra, _)]) => {
                        let m = rows * acc_ty.size() as usize;
                        if let Err(e) = compare(acc_ty, &ga[OUT..OUT + m], &ra[OUT..OUT + m], 1e-6)
                        {
                            failures.push(format!("{} {rows}x{cols}: {e}", k.name));
                        }
                    }
                    Err(e) => failures.push(format!("{} {rows}x{cols}: {e}", k.name)),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn softmax_and_special_kernels_match_the_reference() {
    let mut failures = Vec::new();
    for (rows, cols) in [(64u64, 100u64), (2, 5000), (16, 777)] {
        let k = softmax_kernel(rows, cols, OUT as i64);
        let mut arena = vec![0u8; OUT + (rows * cols * 4) as usize];
        let x = data(Scalar::F32, (rows * cols) as usize, 3);
        arena[..x.len()].copy_from_slice(&x);
        match run_kernels_both(&[k], &arena, &[], &[]) {
            Ok([(ga, _), (ra, _)]) => {
                if let Err(e) = compare(Scalar::F32, &ga[OUT..], &ra[OUT..], 1e-5) {
                    failures.push(format!("softmax {rows}x{cols}: {e}"));
                }
            }
            Err(e) => failures.push(format!("softmax: {e}")),
        }
    }
    // The special kernels over random regions: every byte of the arena and state must match.
    let mut rng = Rng(5);
    let mut bytes = |n: usize| -> Vec<u8> { (0..n).map(|_| (rng.next() % 7) as u8).collect() };
    for k in special_kernels() {
        let arena = bytes(16384);
        let weights = data(Scalar::F32, 1024, 1);
        let state = bytes(8192);
        // Indices: small, some negative, some out of range (clamped).
        let mut arena = arena;
        for i in 0..32 {
            let v: i64 = [3, -1, 49, 200, -300, 0, 17, -50][i % 8];
            arena[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        let mut state = state;
        for c in state.chunks_mut(4) {
            c.copy_from_slice(&0.5f32.to_le_bytes());
        }
        match run_kernels_both(std::slice::from_ref(&k), &arena, &weights, &state) {
            Ok([(ga, gs), (ra, rs)]) => {
                if ga != ra || gs != rs {
                    failures.push(format!("{}: the regions differ", k.name));
                }
            }
            Err(e) => failures.push(format!("{}: {e}", k.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Whole programs: the lowering lit tests' functions, planned and lowered, run as PTX.

/// Every function of the lit files: weights filled (floats small, integers 1), random
/// inputs; programs whose lowering needs particular weight values are skipped, as are programs
/// with contractions or low-bit products (other emitters). Each program's outputs must match
/// the reference.
#[test]
fn lowered_lit_programs_match_the_reference() {
    use memc_ir::{ElemType, WeightBytes, WeightStore};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../lit-tests/lower");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the lit tests")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "mlir"))
        .collect();
    files.sort();
    let (mut checked, mut skipped, mut failures) = (0, 0, Vec::new());
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        for (i, chunk) in text.split("// -----").enumerate() {
            let Ok(mut module) = memc_ir::parse_module(chunk) else {
                skipped += 1;
                continue;
            };
            let mut store = WeightStore::new();
            for (_, w) in module.weights.iter() {
                let ty = w.ty().clone();
                let n = ty.static_num_elements().unwrap_or(0) as usize;
                let bytes: Vec<u8> = match ty.elem {
                    ElemType::F32 => (0..n)
                        .flat_map(|j| (((j % 13) as f32 - 6.0) / 8.0).to_le_bytes())
                        .collect(),
                    ElemType::I64 => (0..n).flat_map(|_| 1i64.to_le_bytes()).collect(),
                    ElemType::I32 => (0..n).flat_map(|_| 1i32.to_le_bytes()).collect(),
                    _ => vec![1u8; ty.static_byte_size().unwrap_or(0) as usize],
                };
                let _ = store.insert(w.name(), ty, WeightBytes::Owned(bytes.into()));
            }
            module.weights = store;
            let Ok(c) = common::models::compile_module_without_scratch(module) else {
                skipped += 1;
                continue;
            };
            let program = &c.program;
            let loops_only = program
                .kernels()
                .all(|k| matches!(k.body, memc_codegen::KernelBody::Loop(_)));
            if !loops_only {
                skipped += 1;
                continue;
            }
            let weights = common::models::weights_section(program, &c.module.weights);
            let mut arena = vec![0u8; program.arena_size as usize];
            for (j, io) in program.inputs.iter().enumerate() {
                let n = io.shape.iter().product::<u64>() as usize;
                let bytes = data(io.elem, n, 2 * j as u64 + 3);
                let at = io.byte_offset as usize;
                arena[at..at + bytes.len()].copy_from_slice(&bytes);
            }
            let state = vec![0u8; program.state_size as usize];
            let name = format!("{}#{i}", file.display());
            match common::ptx::check_program(program, &arena, &weights, &state, 1e-5) {
                Ok(()) => checked += 1,
                Err(e) => failures.push(format!("{name}: {e}")),
            }
        }
    }
    eprintln!("lit programs: {checked} checked, {skipped} skipped");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 20, "only {checked} programs checked");
}

#[test]
fn unrolled_elementwise_points_match_the_reference() {
    // 5000 points: grid 5 of 256 threads, so some threads run four points per iteration and
    // the rest the one-point tail.
    let mut failures = Vec::new();
    for ty in [Scalar::F32, Scalar::I8, Scalar::F16, Scalar::F64] {
        let k = binary_kernel(BinaryOp::Mul, ty, 5000, 1 << 16, OUT as i64);
        failures.extend(check_elementwise(&k, ty, ty, 5000, rtol(ty)));
        let k = unary_kernel(UnaryOp::Neg, ty, ty, 5000, OUT as i64);
        failures.extend(check_elementwise(&k, ty, ty, 5000, rtol(ty)));
    }
    let k = unary_kernel(UnaryOp::Erf, Scalar::F32, Scalar::F32, 5000, OUT as i64);
    failures.extend(check_elementwise(&k, Scalar::F32, Scalar::F32, 5000, 2e-7));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
