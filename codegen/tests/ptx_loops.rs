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
use common::ptx::assemble;
use memc_codegen::kernel::{
    f64_bits, BinaryOp, Guard, IndirectIndex, InstKind, Kernel, ReduceOp, Region, RegionSizes,
    Scalar, Stage, Store, UnaryOp,
};
use memc_codegen::ptx::{emit_kernel, entry_name, PtxError, HEADER};

const ALL: [Scalar; 12] = [
    Scalar::Bool,
    Scalar::I8,
    Scalar::I16,
    Scalar::I32,
    Scalar::I64,
    Scalar::U8,
    Scalar::U16,
    Scalar::U32,
    Scalar::U64,
    Scalar::F16,
    Scalar::F32,
    Scalar::F64,
];

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
            arena(acc_ty, 1 << 24, &[1, 0]),
        ],
        vec![
            Stage::Reduce {
                insts: s0.0,
                value: x,
                op,
                init,
                ty: acc_ty,
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
    assert_eq!(l.grid, [4096, 1, 1]);
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
