//! Hand-built kernels for the CPU backend tests (`cpu_*.rs`): aligned buffers standing in for
//! the arena and the weights, views, instruction lists, stages, and running kernels through
//! `CpuProgram` after validating them, so the tests only exercise kernels the backend is
//! promised.

use memc_codegen::cpu::CpuProgram;
use memc_codegen::kernel::{
    f64_bits, i64_bits, BinaryOp, Inst, InstId, InstKind, Kernel, KernelBody, LoopKernel, ReduceOp,
    Region, RegionSizes, Scalar, Stage, Store, UnaryOp, View,
};

/// An 8-byte-aligned byte buffer standing in for the arena or the weights.
pub struct Buf(pub Vec<u64>);

impl Buf {
    pub fn new(bytes: usize) -> Buf {
        Buf(vec![0; bytes.div_ceil(8)])
    }

    pub fn len(&self) -> u64 {
        self.0.len() as u64 * 8
    }

    pub fn put<T: Copy>(&mut self, byte_offset: usize, values: &[T]) {
        let bytes = std::mem::size_of_val(values);
        assert!(byte_offset + bytes <= self.len() as usize);
        // SAFETY: the range was checked above; T is plain data.
        unsafe {
            std::ptr::copy_nonoverlapping(
                values.as_ptr().cast::<u8>(),
                self.0.as_mut_ptr().cast::<u8>().add(byte_offset),
                bytes,
            )
        }
    }

    pub fn get<T: Copy + Default>(&self, byte_offset: usize, n: usize) -> Vec<T> {
        let mut out = vec![T::default(); n];
        let bytes = std::mem::size_of_val(out.as_slice());
        assert!(byte_offset + bytes <= self.len() as usize);
        // SAFETY: as in `put`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.0.as_ptr().cast::<u8>().add(byte_offset),
                out.as_mut_ptr().cast::<u8>(),
                bytes,
            )
        }
        out
    }
}

pub fn view(region: Region, elem: Scalar, byte_offset: i64, strides: &[i64]) -> View {
    View {
        region,
        elem,
        byte_offset,
        strides: strides.to_vec(),
        guards: vec![],
        pad: 0,
    }
}

pub fn arena(elem: Scalar, byte_offset: i64, strides: &[i64]) -> View {
    view(Region::Arena, elem, byte_offset, strides)
}

/// Builds one stage's instruction list, tracking result types. A type is taken as its compute
/// type (a load of an f16 view is an F32 value), as lowering's builder does.
#[derive(Default)]
pub struct Insts(pub Vec<Inst>);

impl Insts {
    pub fn push(&mut self, ty: Scalar, kind: InstKind) -> InstId {
        let ty = ty.compute();
        self.0.push(Inst { ty, kind });
        (self.0.len() - 1) as InstId
    }
    pub fn ty(&self, id: InstId) -> Scalar {
        self.0[id as usize].ty
    }
    pub fn load(&mut self, ty: Scalar, view: u32) -> InstId {
        self.push(ty, InstKind::Load { view })
    }
    pub fn float(&mut self, ty: Scalar, value: f64) -> InstId {
        self.push(
            ty,
            InstKind::Const {
                bits: f64_bits(value),
            },
        )
    }
    pub fn int(&mut self, ty: Scalar, value: i64) -> InstId {
        self.push(
            ty,
            InstKind::Const {
                bits: i64_bits(value),
            },
        )
    }
    pub fn index(&mut self, axis: u32) -> InstId {
        self.push(Scalar::I64, InstKind::Index { axis })
    }
    pub fn acc(&mut self, ty: Scalar, stage: u32) -> InstId {
        self.push(ty, InstKind::Acc { stage })
    }
    pub fn un(&mut self, op: UnaryOp, arg: InstId) -> InstId {
        let ty = match op {
            UnaryOp::IsNan | UnaryOp::IsPosInf | UnaryOp::IsNegInf => Scalar::Bool,
            _ => self.ty(arg),
        };
        self.push(ty, InstKind::Unary { op, arg })
    }
    pub fn bin(&mut self, op: BinaryOp, lhs: InstId, rhs: InstId) -> InstId {
        let ty = if op.is_comparison() {
            Scalar::Bool
        } else {
            self.ty(lhs)
        };
        self.push(ty, InstKind::Binary { op, lhs, rhs })
    }
    pub fn select(&mut self, cond: InstId, then: InstId, else_: InstId) -> InstId {
        let ty = self.ty(then);
        self.push(ty, InstKind::Select { cond, then, else_ })
    }
    pub fn cast(&mut self, arg: InstId, ty: Scalar) -> InstId {
        self.push(ty, InstKind::Cast { arg })
    }
}

pub fn map(insts: Insts, stores: &[(u32, InstId)]) -> Stage {
    Stage::Map {
        insts: insts.0,
        stores: stores
            .iter()
            .map(|&(view, value)| Store::new(view, value))
            .collect(),
    }
}

pub fn once(insts: Insts, stores: &[(u32, InstId)]) -> Stage {
    Stage::Once {
        insts: insts.0,
        stores: stores
            .iter()
            .map(|&(view, value)| Store::new(view, value))
            .collect(),
    }
}

pub fn loop_kernel(
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

pub fn pool(threads: usize) -> memc_codegen::cpu::WorkerPool {
    memc_codegen::cpu::WorkerPool::new(threads).expect("a test thread pool")
}

/// Validates, compiles and runs `kernels` in order on `threads` threads.
pub fn run_on(kernels: &[Kernel], arena: &mut Buf, weights: &Buf, threads: usize) -> CpuProgram {
    let sizes = RegionSizes {
        arena: arena.len(),
        weights: weights.len(),
        state: 0,
    };
    for k in kernels {
        k.validate(sizes)
            .unwrap_or_else(|e| panic!("test kernel is invalid: {e}"));
    }
    let refs: Vec<&Kernel> = kernels.iter().collect();
    let program = CpuProgram::compile(&refs).unwrap_or_else(|e| panic!("compile failed: {e}"));
    assert_eq!(program.n_kernels(), kernels.len());
    let pool = pool(threads);
    for i in 0..kernels.len() {
        // SAFETY: the kernels were validated against these buffers' sizes.
        unsafe {
            program.run_kernel(
                i,
                arena.0.as_mut_ptr().cast(),
                weights.0.as_ptr().cast(),
                &pool,
            )
        };
    }
    program
}

pub fn run(kernels: &[Kernel], arena: &mut Buf, weights: &Buf) -> CpuProgram {
    run_on(kernels, arena, weights, 1)
}

/// Bitwise equality, with every NaN equal to every other.
pub fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

pub fn same_f64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// A unary elementwise kernel `out[i] = op(x[i])` reading `n` elements of type `ty` at 0 and
/// writing `out_ty` at `out_offset`.
pub fn unary_kernel(op: UnaryOp, ty: Scalar, out_ty: Scalar, n: u64, out_offset: i64) -> Kernel {
    let mut b = Insts::default();
    let x = b.load(ty, 0);
    let y = b.un(op, x);
    assert_eq!(b.ty(y), out_ty.compute());
    loop_kernel(
        &format!("{op:?}"),
        &[n],
        &[],
        vec![arena(ty, 0, &[1]), arena(out_ty, out_offset, &[1])],
        vec![map(b, &[(1, y)])],
    )
}

/// A binary elementwise kernel `out[i] = op(x[i], y[i])`, the result of `ty` (bool for a
/// comparison).
pub fn binary_kernel(op: BinaryOp, ty: Scalar, n: u64, y_offset: i64, out_offset: i64) -> Kernel {
    let mut b = Insts::default();
    let x = b.load(ty, 0);
    let y = b.load(ty, 1);
    let z = b.bin(op, x, y);
    let out_ty = if op.is_comparison() { Scalar::Bool } else { ty };
    loop_kernel(
        &format!("{op:?}"),
        &[n],
        &[],
        vec![
            arena(ty, 0, &[1]),
            arena(ty, y_offset, &[1]),
            arena(out_ty, out_offset, &[1]),
        ],
        vec![map(b, &[(2, z)])],
    )
}

/// Runs `out[i] = cast(x[i])` from `from` to `to` on `n` elements.
pub fn cast_kernel(from: Scalar, to: Scalar, n: u64, out_offset: i64) -> Kernel {
    let mut b = Insts::default();
    let x = b.load(from, 0);
    let y = b.cast(x, to);
    loop_kernel(
        "cast",
        &[n],
        &[],
        vec![arena(from, 0, &[1]), arena(to, out_offset, &[1])],
        vec![map(b, &[(1, y)])],
    )
}

/// Softmax over rows of x [rows, cols] at 0, out at `out_offset`: Reduce max, Reduce sum of
/// exp(x - max), Map exp(x - max) / sum.
pub fn softmax_kernel(rows: u64, cols: u64, out_offset: i64) -> Kernel {
    let mut s0 = Insts::default();
    s0.load(Scalar::F32, 0);
    let mut s1 = Insts::default();
    let x = s1.load(Scalar::F32, 0);
    let m = s1.acc(Scalar::F32, 0);
    let d = s1.bin(BinaryOp::Sub, x, m);
    s1.un(UnaryOp::Exp, d);
    let mut s2 = Insts::default();
    let x = s2.load(Scalar::F32, 0);
    let m = s2.acc(Scalar::F32, 0);
    let d = s2.bin(BinaryOp::Sub, x, m);
    let e = s2.un(UnaryOp::Exp, d);
    let sum = s2.acc(Scalar::F32, 1);
    let y = s2.bin(BinaryOp::Div, e, sum);
    loop_kernel(
        "softmax",
        &[rows],
        &[cols],
        vec![
            arena(Scalar::F32, 0, &[cols as i64, 1]),
            arena(Scalar::F32, out_offset, &[cols as i64, 1]),
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
            map(s2, &[(1, y)]),
        ],
    )
}

pub fn softmax_reference(xs: &[f32], cols: usize) -> Vec<f32> {
    xs.chunks(cols)
        .flat_map(|row| {
            let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let sum = row.iter().fold(0.0f32, |a, &x| a + (x - m).exp());
            row.iter()
                .map(move |&x| (x - m).exp() / sum)
                .collect::<Vec<_>>()
        })
        .collect()
}
