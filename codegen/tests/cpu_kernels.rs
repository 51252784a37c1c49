//! End-to-end tests of the Cranelift CPU backend: hand-built kernels run through
//! `CpuProgram` and compared with plain Rust references computed here.
//!
//! Every test checks values the backend computes, so a wrong lowering fails it; kernels are
//! validated first, so the tests only exercise inputs the backend is promised.

use memc_codegen::cpu::{host_isa_flags, CpuError, CpuProgram};
use memc_codegen::kernel::{
    f64_bits, i64_bits, BinaryOp, Contract, Guard, IndirectIndex, Inst, InstId, InstKind, Kernel,
    KernelBody, LoopKernel, MatView, ReduceOp, Region, RegionSizes, Scalar, Stage, Store, UnaryOp,
    View,
};

// ---------------------------------------------------------------------------------------------
// Helpers: buffers, views, instruction lists, running kernels.

/// An 8-byte-aligned byte buffer standing in for the arena or the weights.
struct Buf(Vec<u64>);

impl Buf {
    fn new(bytes: usize) -> Buf {
        Buf(vec![0; bytes.div_ceil(8)])
    }

    fn len(&self) -> u64 {
        self.0.len() as u64 * 8
    }

    fn put<T: Copy>(&mut self, byte_offset: usize, values: &[T]) {
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

    fn get<T: Copy + Default>(&self, byte_offset: usize, n: usize) -> Vec<T> {
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

fn view(region: Region, elem: Scalar, byte_offset: i64, strides: &[i64]) -> View {
    View {
        region,
        elem,
        byte_offset,
        strides: strides.to_vec(),
        guards: vec![],
        pad: 0,
    }
}

fn arena(elem: Scalar, byte_offset: i64, strides: &[i64]) -> View {
    view(Region::Arena, elem, byte_offset, strides)
}

/// Builds one stage's instruction list, tracking result types.
#[derive(Default)]
struct Insts(Vec<Inst>);

impl Insts {
    fn push(&mut self, ty: Scalar, kind: InstKind) -> InstId {
        self.0.push(Inst { ty, kind });
        (self.0.len() - 1) as InstId
    }
    fn ty(&self, id: InstId) -> Scalar {
        self.0[id as usize].ty
    }
    fn load(&mut self, ty: Scalar, view: u32) -> InstId {
        self.push(ty, InstKind::Load { view })
    }
    fn float(&mut self, ty: Scalar, value: f64) -> InstId {
        self.push(
            ty,
            InstKind::Const {
                bits: f64_bits(value),
            },
        )
    }
    fn int(&mut self, ty: Scalar, value: i64) -> InstId {
        self.push(
            ty,
            InstKind::Const {
                bits: i64_bits(value),
            },
        )
    }
    fn index(&mut self, axis: u32) -> InstId {
        self.push(Scalar::I64, InstKind::Index { axis })
    }
    fn acc(&mut self, ty: Scalar, stage: u32) -> InstId {
        self.push(ty, InstKind::Acc { stage })
    }
    fn un(&mut self, op: UnaryOp, arg: InstId) -> InstId {
        let ty = match op {
            UnaryOp::IsNan | UnaryOp::IsPosInf | UnaryOp::IsNegInf => Scalar::Bool,
            _ => self.ty(arg),
        };
        self.push(ty, InstKind::Unary { op, arg })
    }
    fn bin(&mut self, op: BinaryOp, lhs: InstId, rhs: InstId) -> InstId {
        let ty = if op.is_comparison() {
            Scalar::Bool
        } else {
            self.ty(lhs)
        };
        self.push(ty, InstKind::Binary { op, lhs, rhs })
    }
    fn select(&mut self, cond: InstId, then: InstId, else_: InstId) -> InstId {
        let ty = self.ty(then);
        self.push(ty, InstKind::Select { cond, then, else_ })
    }
    fn cast(&mut self, arg: InstId, ty: Scalar) -> InstId {
        self.push(ty, InstKind::Cast { arg })
    }
}

fn map(insts: Insts, stores: &[(u32, InstId)]) -> Stage {
    Stage::Map {
        insts: insts.0,
        stores: stores
            .iter()
            .map(|&(view, value)| Store { view, value })
            .collect(),
    }
}

fn once(insts: Insts, stores: &[(u32, InstId)]) -> Stage {
    Stage::Once {
        insts: insts.0,
        stores: stores
            .iter()
            .map(|&(view, value)| Store { view, value })
            .collect(),
    }
}

fn loop_kernel(
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

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a test thread pool")
}

/// Validates, compiles and runs `kernels` in order on `threads` threads.
fn run_on(kernels: &[Kernel], arena: &mut Buf, weights: &Buf, threads: usize) -> CpuProgram {
    let sizes = RegionSizes {
        arena: arena.len(),
        weights: weights.len(),
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

fn run(kernels: &[Kernel], arena: &mut Buf, weights: &Buf) -> CpuProgram {
    run_on(kernels, arena, weights, 1)
}

/// Bitwise equality, with every NaN equal to every other.
fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn same_f64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// A unary elementwise kernel `out[i] = op(x[i])` reading `n` elements of type `ty` at 0 and
/// writing `out_ty` at `out_offset`.
fn unary_kernel(op: UnaryOp, ty: Scalar, out_ty: Scalar, n: u64, out_offset: i64) -> Kernel {
    let mut b = Insts::default();
    let x = b.load(ty, 0);
    let y = b.un(op, x);
    assert_eq!(b.ty(y), out_ty);
    loop_kernel(
        &format!("{op:?}"),
        &[n],
        &[],
        vec![arena(ty, 0, &[1]), arena(out_ty, out_offset, &[1])],
        vec![map(b, &[(1, y)])],
    )
}

/// A binary elementwise kernel `out[i] = op(x[i], y[i])`.
fn binary_kernel(op: BinaryOp, ty: Scalar, n: u64, y_offset: i64, out_offset: i64) -> Kernel {
    let mut b = Insts::default();
    let x = b.load(ty, 0);
    let y = b.load(ty, 1);
    let z = b.bin(op, x, y);
    let out_ty = b.ty(z);
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

// ---------------------------------------------------------------------------------------------
// Elementwise maps.

#[test]
fn add_with_broadcasting() {
    // out[3,5] = a[3,5] + b[5] (b broadcast over rows, from the weights).
    let a: Vec<f32> = (0..15).map(|i| i as f32 * 1.5).collect();
    let bias: Vec<f32> = (0..5).map(|i| 100.0 * i as f32 - 0.25).collect();
    let mut ar = Buf::new(15 * 4 * 2);
    ar.put(0, &a);
    let mut w = Buf::new(5 * 4);
    w.put(0, &bias);
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let y = b.load(Scalar::F32, 1);
    let z = b.bin(BinaryOp::Add, x, y);
    let k = loop_kernel(
        "add",
        &[3, 5],
        &[],
        vec![
            arena(Scalar::F32, 0, &[5, 1]),
            view(Region::Weights, Scalar::F32, 0, &[0, 1]),
            arena(Scalar::F32, 60, &[5, 1]),
        ],
        vec![map(b, &[(2, z)])],
    );
    let program = run(&[k], &mut ar, &w);
    assert_eq!(
        program.vectorized_loops(0),
        Some(1),
        "a contiguous f32 row is vectorized"
    );
    let out: Vec<f32> = ar.get(60, 15);
    for r in 0..3 {
        for c in 0..5 {
            assert_eq!(out[r * 5 + c], a[r * 5 + c] + bias[c], "at ({r}, {c})");
        }
    }
}

const UNARY_FLOAT_OPS: &[UnaryOp] = &[
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
];

const FLOAT_INPUTS: &[f64] = &[
    0.0,
    -0.0,
    0.5,
    -0.5,
    1.5,
    2.5,
    -2.5,
    3.5,
    0.25,
    -0.75,
    1.0,
    -1.0,
    2.0,
    7.3,
    -7.3,
    100.0,
    1e-3,
    -1e-3,
    0.999,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e30,
    -1e30,
    4.5,
    5.5,
];

fn ref_unary_f64(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round_ties_even(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sinh => x.sinh(),
        UnaryOp::Cosh => x.cosh(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Asinh => x.asinh(),
        UnaryOp::Acosh => x.acosh(),
        UnaryOp::Atanh => x.atanh(),
        _ => unreachable!("not a float-to-float op: {op:?}"),
    }
}

fn ref_unary_f32(op: UnaryOp, x: f32) -> f32 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round_ties_even(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sinh => x.sinh(),
        UnaryOp::Cosh => x.cosh(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Asinh => x.asinh(),
        UnaryOp::Acosh => x.acosh(),
        UnaryOp::Atanh => x.atanh(),
        _ => unreachable!("not a float-to-float op: {op:?}"),
    }
}

#[test]
fn every_unary_float_op_f64() {
    let n = FLOAT_INPUTS.len();
    let out_offset = (n * 8) as i64;
    let kernels: Vec<Kernel> = UNARY_FLOAT_OPS
        .iter()
        .map(|&op| unary_kernel(op, Scalar::F64, Scalar::F64, n as u64, out_offset))
        .collect();
    for (k, &op) in kernels.iter().zip(UNARY_FLOAT_OPS) {
        let mut ar = Buf::new(n * 16);
        ar.put(0, FLOAT_INPUTS);
        run(std::slice::from_ref(k), &mut ar, &Buf::new(0));
        let out: Vec<f64> = ar.get(out_offset as usize, n);
        for (i, &x) in FLOAT_INPUTS.iter().enumerate() {
            let want = ref_unary_f64(op, x);
            assert!(
                same_f64(out[i], want),
                "{op:?}({x}) = {} want {want}",
                out[i]
            );
        }
    }
}

#[test]
fn every_unary_float_op_f32() {
    let inputs: Vec<f32> = FLOAT_INPUTS.iter().map(|&x| x as f32).collect();
    let n = inputs.len();
    let out_offset = (n * 4) as i64;
    // All ops in one program: also covers programs of many kernels.
    let kernels: Vec<Kernel> = UNARY_FLOAT_OPS
        .iter()
        .map(|&op| unary_kernel(op, Scalar::F32, Scalar::F32, n as u64, out_offset))
        .collect();
    let refs: Vec<&Kernel> = kernels.iter().collect();
    let program = CpuProgram::compile(&refs).expect("the unary kernels compile");
    let pool = pool(1);
    for (i, &op) in UNARY_FLOAT_OPS.iter().enumerate() {
        let mut ar = Buf::new(n * 8);
        ar.put(0, &inputs);
        // SAFETY: each kernel touches 2n f32 from offset 0, inside the buffer.
        unsafe { program.run_kernel(i, ar.0.as_mut_ptr().cast(), std::ptr::null(), &pool) };
        let out: Vec<f32> = ar.get(out_offset as usize, n);
        for (j, &x) in inputs.iter().enumerate() {
            let want = ref_unary_f32(op, x);
            // The SIMD path computes these inline (see `inline_transcendentals_f32`).
            let close = matches!(op, UnaryOp::Exp | UnaryOp::Tanh)
                && ulps_f32(out[j], want) <= 2
                && out[j].is_sign_negative() == want.is_sign_negative();
            assert!(
                same_f32(out[j], want) || close,
                "{op:?}({x}) = {} want {want}",
                out[j]
            );
        }
        assert_eq!(program.kernel_name(i), Some(format!("{op:?}").as_str()));
    }
}

/// The distance in representable f32 values between two finite floats of the same sign, or
/// `u32::MAX` for anything else that is not bit-identical.
fn ulps_f32(a: f32, b: f32) -> u32 {
    if same_f32(a, b) {
        return 0;
    }
    if !a.is_finite() || !b.is_finite() || a.is_sign_negative() != b.is_sign_negative() {
        return if a == b { 0 } else { u32::MAX };
    }
    a.to_bits().abs_diff(b.to_bits())
}

/// The ulp error of `got` against the f64 reference `want`, in units of the f32 spacing at
/// `want` (at least the smallest subnormal).
fn ulp_error(got: f32, want: f64) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if (want as f32).is_infinite() || got.is_infinite() {
        return if got as f64 == want as f32 as f64 {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let w = want as f32;
    let spacing = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64;
    (got as f64 - want).abs() / spacing.max(f64::from(f32::from_bits(1)))
}

/// `exp`, `tanh` and `erf` on the SIMD path are inline polynomials: within 1, 2 and 2 ulp of
/// the f64 result over a dense grid, with the special values and signs of libm.
#[test]
fn inline_transcendentals_f32() {
    extern "C" {
        fn erf(x: f64) -> f64;
    }
    let mut inputs: Vec<f32> = (0..=200_000)
        .map(|i| -10.0 + 20.0 * i as f32 / 200_000.0)
        .chain((0..=20_000).map(|i| -110.0 + 200.0 * i as f32 / 20_000.0))
        .chain([
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            88.72,
            88.73,
            -87.5,
            -103.0,
            -104.5,
            0.625,
            0.927_734_4,
            4.0,
            -4.0,
        ])
        .collect();
    // A multiple of 8, so every element goes through the vector loop.
    while inputs.len() % 8 != 0 {
        inputs.push(0.5);
    }
    let n = inputs.len();
    let ops: [(UnaryOp, f64, fn(f64) -> f64); 3] = [
        (UnaryOp::Exp, 1.0, f64::exp),
        (UnaryOp::Tanh, 2.0, f64::tanh),
        // SAFETY: `erf` is a pure libm function defined for every input.
        (UnaryOp::Erf, 2.0, |x| unsafe { erf(x) }),
    ];
    for (op, max_ulp, reference) in ops {
        let mut ar = Buf::new(n * 8);
        ar.put(0, &inputs);
        let program = run(
            &[unary_kernel(
                op,
                Scalar::F32,
                Scalar::F32,
                n as u64,
                (n * 4) as i64,
            )],
            &mut ar,
            &Buf::new(0),
        );
        assert!(
            program.vectorized_loops(0) >= Some(1),
            "{op:?} is vectorized"
        );
        let out: Vec<f32> = ar.get(n * 4, n);
        for (&x, &got) in inputs.iter().zip(&out) {
            let want = reference(f64::from(x));
            let err = ulp_error(got, want);
            assert!(
                err <= max_ulp,
                "{op:?}({x}) = {got}, want {want} ({err} ulp)"
            );
            if want == 0.0 && op != UnaryOp::Exp {
                assert_eq!(
                    got.is_sign_negative(),
                    x.is_sign_negative(),
                    "{op:?}({x}) sign"
                );
            }
        }
    }
}

#[test]
fn erf_matches_known_values() {
    let xs = [0.0f64, 0.5, 1.0, -2.0, 3.0, -0.1];
    let want = [
        0.0,
        0.5204998778130465,
        0.8427007929497149,
        -0.9953222650189527,
        0.9999779095030014,
        -0.1124629160182849,
    ];
    let mut ar = Buf::new(6 * 8 * 2);
    ar.put(0, &xs);
    run(
        &[unary_kernel(UnaryOp::Erf, Scalar::F64, Scalar::F64, 6, 48)],
        &mut ar,
        &Buf::new(0),
    );
    let out: Vec<f64> = ar.get(48, 6);
    for i in 0..6 {
        assert!(
            (out[i] - want[i]).abs() < 1e-15,
            "erf({}) = {} want {}",
            xs[i],
            out[i],
            want[i]
        );
    }
    let xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    let mut ar = Buf::new(6 * 4 * 2);
    ar.put(0, &xs32);
    run(
        &[unary_kernel(UnaryOp::Erf, Scalar::F32, Scalar::F32, 6, 24)],
        &mut ar,
        &Buf::new(0),
    );
    let out: Vec<f32> = ar.get(24, 6);
    for i in 0..6 {
        assert!(
            (out[i] as f64 - want[i]).abs() < 1e-6,
            "erff({}) = {} want {}",
            xs[i],
            out[i],
            want[i]
        );
    }
}

#[test]
fn float_tests_give_bools() {
    let n = FLOAT_INPUTS.len();
    for (op, f) in [
        (UnaryOp::IsNan, (|x: f64| x.is_nan()) as fn(f64) -> bool),
        (UnaryOp::IsPosInf, |x: f64| x == f64::INFINITY),
        (UnaryOp::IsNegInf, |x: f64| x == f64::NEG_INFINITY),
    ] {
        let mut ar = Buf::new(n * 9);
        ar.put(0, FLOAT_INPUTS);
        run(
            &[unary_kernel(
                op,
                Scalar::F64,
                Scalar::Bool,
                n as u64,
                (n * 8) as i64,
            )],
            &mut ar,
            &Buf::new(0),
        );
        let out: Vec<u8> = ar.get(n * 8, n);
        for (i, &x) in FLOAT_INPUTS.iter().enumerate() {
            assert_eq!(out[i], f(x) as u8, "{op:?}({x})");
        }
    }
}

fn float_pairs() -> Vec<(f64, f64)> {
    let vals = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.5,
        -7.25,
        3.0,
        0.5,
        f64::NAN,
        f64::INFINITY,
        -3.0,
        10.0,
    ];
    vals.iter()
        .flat_map(|&a| vals.iter().map(move |&b| (a, b)))
        .collect()
}

fn ref_floor_mod(a: f64, b: f64) -> f64 {
    let mut r = a % b;
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
        r += b;
    }
    r
}

const FLOAT_BINARY_OPS: &[BinaryOp] = &[
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Rem,
    BinaryOp::FloorMod,
    BinaryOp::Pow,
    BinaryOp::Min,
    BinaryOp::Max,
    BinaryOp::Eq,
    BinaryOp::Lt,
    BinaryOp::Le,
    BinaryOp::Gt,
    BinaryOp::Ge,
];

/// A float result, or 0/1 for comparisons.
fn ref_binary_f64(op: BinaryOp, a: f64, b: f64) -> f64 {
    let nan_min_max = |f: fn(f64, f64) -> f64| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            f(a, b)
        }
    };
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Rem => a % b,
        BinaryOp::FloorMod => ref_floor_mod(a, b),
        BinaryOp::Pow => a.powf(b),
        // -0 < +0 for min/max, as IEEE 754-2019 minimum/maximum.
        BinaryOp::Min => nan_min_max(|a, b| {
            if a == b {
                if a.is_sign_negative() {
                    a
                } else {
                    b
                }
            } else {
                a.min(b)
            }
        }),
        BinaryOp::Max => nan_min_max(|a, b| {
            if a == b {
                if a.is_sign_positive() {
                    a
                } else {
                    b
                }
            } else {
                a.max(b)
            }
        }),
        BinaryOp::Eq => (a == b) as u8 as f64,
        BinaryOp::Lt => (a < b) as u8 as f64,
        BinaryOp::Le => (a <= b) as u8 as f64,
        BinaryOp::Gt => (a > b) as u8 as f64,
        BinaryOp::Ge => (a >= b) as u8 as f64,
        _ => unreachable!(),
    }
}

fn ref_binary_f32(op: BinaryOp, a: f32, b: f32) -> f32 {
    let nan_min_max = |f: fn(f32, f32) -> f32| {
        if a.is_nan() || b.is_nan() {
            f32::NAN
        } else {
            f(a, b)
        }
    };
    let mut r = a % b;
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
        r += b;
    }
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Rem => a % b,
        BinaryOp::FloorMod => r,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Min => nan_min_max(|a, b| {
            if a == b {
                if a.is_sign_negative() {
                    a
                } else {
                    b
                }
            } else {
                a.min(b)
            }
        }),
        BinaryOp::Max => nan_min_max(|a, b| {
            if a == b {
                if a.is_sign_positive() {
                    a
                } else {
                    b
                }
            } else {
                a.max(b)
            }
        }),
        BinaryOp::Eq => (a == b) as u8 as f32,
        BinaryOp::Lt => (a < b) as u8 as f32,
        BinaryOp::Le => (a <= b) as u8 as f32,
        BinaryOp::Gt => (a > b) as u8 as f32,
        BinaryOp::Ge => (a >= b) as u8 as f32,
        _ => unreachable!(),
    }
}

#[test]
fn every_binary_float_op() {
    let pairs = float_pairs();
    let n = pairs.len();
    let (xs, ys): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    let ys32: Vec<f32> = ys.iter().map(|&x| x as f32).collect();
    for &op in FLOAT_BINARY_OPS {
        // f64.
        let mut ar = Buf::new(n * 24);
        ar.put(0, &xs);
        ar.put(n * 8, &ys);
        run(
            &[binary_kernel(
                op,
                Scalar::F64,
                n as u64,
                (n * 8) as i64,
                (n * 16) as i64,
            )],
            &mut ar,
            &Buf::new(0),
        );
        for i in 0..n {
            let want = ref_binary_f64(op, xs[i], ys[i]);
            let got = if op.is_comparison() {
                ar.get::<u8>(n * 16 + i, 1)[0] as f64
            } else {
                ar.get::<f64>(n * 16 + i * 8, 1)[0]
            };
            assert!(
                same_f64(got, want),
                "f64 {op:?}({}, {}) = {got} want {want}",
                xs[i],
                ys[i]
            );
        }
        // f32.
        let mut ar = Buf::new(n * 12);
        ar.put(0, &xs32);
        ar.put(n * 4, &ys32);
        run(
            &[binary_kernel(
                op,
                Scalar::F32,
                n as u64,
                (n * 4) as i64,
                (n * 8) as i64,
            )],
            &mut ar,
            &Buf::new(0),
        );
        for i in 0..n {
            let want = ref_binary_f32(op, xs32[i], ys32[i]);
            let got = if op.is_comparison() {
                ar.get::<u8>(n * 8 + i, 1)[0] as f32
            } else {
                ar.get::<f32>(n * 8 + i * 4, 1)[0]
            };
            assert!(
                same_f32(got, want),
                "f32 {op:?}({}, {}) = {got} want {want}",
                xs32[i],
                ys32[i]
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Integers.

fn i32_pairs() -> Vec<(i32, i32)> {
    let vals = [0, 1, -1, 7, -7, 3, -3, 2, i32::MIN, i32::MAX, 100, -100];
    vals.iter()
        .flat_map(|&a| vals.iter().map(move |&b| (a, b)))
        .collect()
}

fn ref_i32(op: BinaryOp, a: i32, b: i32) -> i32 {
    match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Div => {
            if b == 0 {
                0
            } else {
                a.wrapping_div(b)
            }
        }
        BinaryOp::Rem => {
            if b == 0 {
                0
            } else {
                a.wrapping_rem(b)
            }
        }
        BinaryOp::FloorMod => {
            if b == 0 {
                0
            } else {
                let r = a.wrapping_rem(b);
                if r != 0 && ((r < 0) != (b < 0)) {
                    r.wrapping_add(b)
                } else {
                    r
                }
            }
        }
        BinaryOp::Min => a.min(b),
        BinaryOp::Max => a.max(b),
        BinaryOp::BitAnd => a & b,
        BinaryOp::BitOr => a | b,
        BinaryOp::BitXor => a ^ b,
        BinaryOp::Pow => {
            if b < 0 {
                match a {
                    1 => 1,
                    -1 => {
                        if b % 2 == 0 {
                            1
                        } else {
                            -1
                        }
                    }
                    _ => 0,
                }
            } else {
                a.wrapping_pow(b as u32)
            }
        }
        BinaryOp::Eq => (a == b) as i32,
        BinaryOp::Lt => (a < b) as i32,
        BinaryOp::Le => (a <= b) as i32,
        BinaryOp::Gt => (a > b) as i32,
        BinaryOp::Ge => (a >= b) as i32,
        _ => unreachable!(),
    }
}

#[test]
fn i32_binary_ops_never_trap() {
    let pairs: Vec<(i32, i32)> = i32_pairs();
    let n = pairs.len();
    let (xs, ys): (Vec<i32>, Vec<i32>) = pairs.iter().copied().unzip();
    let ops = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::FloorMod,
        BinaryOp::Min,
        BinaryOp::Max,
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
        BinaryOp::Pow,
        BinaryOp::Eq,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
    ];
    for op in ops {
        let mut ar = Buf::new(n * 12);
        ar.put(0, &xs);
        ar.put(n * 4, &ys);
        run(
            &[binary_kernel(
                op,
                Scalar::I32,
                n as u64,
                (n * 4) as i64,
                (n * 8) as i64,
            )],
            &mut ar,
            &Buf::new(0),
        );
        for i in 0..n {
            let got = if op.is_comparison() {
                ar.get::<u8>(n * 8 + i, 1)[0] as i32
            } else {
                ar.get::<i32>(n * 8 + i * 4, 1)[0]
            };
            assert_eq!(
                got,
                ref_i32(op, xs[i], ys[i]),
                "{op:?}({}, {})",
                xs[i],
                ys[i]
            );
        }
    }
}

#[test]
fn narrow_and_wide_integer_division_and_floor_mod() {
    // i8: -128 / -1 wraps, x / 0 = 0, floor mod takes the divisor's sign.
    let xs: [i8; 6] = [-128, 7, -7, 7, -7, 5];
    let ys: [i8; 6] = [-1, 0, 2, -2, -2, 3];
    for (op, want) in [
        (BinaryOp::Div, [-128i8, 0, -3, -3, 3, 1]),
        (BinaryOp::Rem, [0, 0, -1, 1, -1, 2]),
        (BinaryOp::FloorMod, [0, 0, 1, -1, -1, 2]),
    ] {
        let mut ar = Buf::new(18);
        ar.put(0, &xs);
        ar.put(6, &ys);
        run(
            &[binary_kernel(op, Scalar::I8, 6, 6, 12)],
            &mut ar,
            &Buf::new(0),
        );
        assert_eq!(ar.get::<i8>(12, 6), want, "i8 {op:?}");
    }
    // i64 and u64.
    let xs: [i64; 4] = [i64::MIN, -9, 9, 5];
    let ys: [i64; 4] = [-1, 4, -4, 0];
    let mut ar = Buf::new(96);
    ar.put(0, &xs);
    ar.put(32, &ys);
    run(
        &[binary_kernel(BinaryOp::FloorMod, Scalar::I64, 4, 32, 64)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i64>(64, 4), [0, 3, -3, 0]);
    let xs: [u64; 3] = [u64::MAX, 10, 10];
    let ys: [u64; 3] = [2, 0, 3];
    for (op, want) in [
        (BinaryOp::Div, [u64::MAX / 2, 0, 3]),
        (BinaryOp::FloorMod, [1, 0, 1]),
    ] {
        let mut ar = Buf::new(72);
        ar.put(0, &xs);
        ar.put(24, &ys);
        run(
            &[binary_kernel(op, Scalar::U64, 3, 24, 48)],
            &mut ar,
            &Buf::new(0),
        );
        assert_eq!(ar.get::<u64>(48, 3), want, "u64 {op:?}");
    }
}

#[test]
fn shifts_past_the_width_give_zero() {
    let xs: [u32; 6] = [1, 0x8000_0001, 5, 5, 5, u32::MAX];
    let ys: [u32; 6] = [31, 1, 32, 33, 1000, 0];
    for (op, f) in [
        (
            BinaryOp::Shl,
            (|a: u32, b: u32| if b >= 32 { 0 } else { a << b }) as fn(u32, u32) -> u32,
        ),
        (
            BinaryOp::Shr,
            |a: u32, b: u32| if b >= 32 { 0 } else { a >> b },
        ),
    ] {
        let mut ar = Buf::new(72);
        ar.put(0, &xs);
        ar.put(24, &ys);
        run(
            &[binary_kernel(op, Scalar::U32, 6, 24, 48)],
            &mut ar,
            &Buf::new(0),
        );
        let want: Vec<u32> = xs.iter().zip(&ys).map(|(&a, &b)| f(a, b)).collect();
        assert_eq!(ar.get::<u32>(48, 6), want, "{op:?}");
    }
    let xs: [u8; 4] = [0x81, 0x81, 3, 3];
    let ys: [u8; 4] = [1, 7, 8, 255];
    let mut ar = Buf::new(12);
    ar.put(0, &xs);
    ar.put(4, &ys);
    run(
        &[binary_kernel(BinaryOp::Shl, Scalar::U8, 4, 4, 8)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(8, 4), [0x02, 0x80, 0, 0]);
}

#[test]
fn integer_unary_ops() {
    let xs: [i16; 5] = [0, 5, -5, i16::MIN, i16::MAX];
    for (op, want) in [
        (UnaryOp::Neg, [0i16, -5, 5, i16::MIN, -i16::MAX]),
        (UnaryOp::Abs, [0, 5, 5, i16::MIN, i16::MAX]),
        (UnaryOp::Sign, [0, 1, -1, -1, 1]),
        (UnaryOp::BitNot, [-1, !5, !-5, i16::MAX, i16::MIN]),
    ] {
        let mut ar = Buf::new(20);
        ar.put(0, &xs);
        run(
            &[unary_kernel(op, Scalar::I16, Scalar::I16, 5, 10)],
            &mut ar,
            &Buf::new(0),
        );
        assert_eq!(ar.get::<i16>(10, 5), want, "{op:?}");
    }
    let xs: [u8; 3] = [0, 9, 255];
    let mut ar = Buf::new(6);
    ar.put(0, &xs);
    run(
        &[unary_kernel(UnaryOp::Sign, Scalar::U8, Scalar::U8, 3, 3)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(3, 3), [0, 1, 1]);
    let bools: [u8; 2] = [0, 1];
    let mut ar = Buf::new(4);
    ar.put(0, &bools);
    run(
        &[unary_kernel(UnaryOp::Not, Scalar::Bool, Scalar::Bool, 2, 2)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(2, 2), [1, 0]);
}

#[test]
fn bool_logic_and_unsigned_pow() {
    let xs: [u8; 4] = [0, 0, 1, 1];
    let ys: [u8; 4] = [0, 1, 0, 1];
    for (op, want) in [
        (BinaryOp::And, [0u8, 0, 0, 1]),
        (BinaryOp::Or, [0, 1, 1, 1]),
        (BinaryOp::Xor, [0, 1, 1, 0]),
    ] {
        let mut ar = Buf::new(12);
        ar.put(0, &xs);
        ar.put(4, &ys);
        run(
            &[binary_kernel(op, Scalar::Bool, 4, 4, 8)],
            &mut ar,
            &Buf::new(0),
        );
        assert_eq!(ar.get::<u8>(8, 4), want, "{op:?}");
    }
    let xs: [u16; 3] = [3, 2, 10];
    let ys: [u16; 3] = [4, 17, 0];
    let mut ar = Buf::new(18);
    ar.put(0, &xs);
    ar.put(6, &ys);
    run(
        &[binary_kernel(BinaryOp::Pow, Scalar::U16, 3, 6, 12)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u16>(12, 3), [81, 0, 1]);
}

// ---------------------------------------------------------------------------------------------
// Casts and selects.

/// Runs `out[i] = cast(x[i])` from `from` to `to` on `n` elements.
fn cast_kernel(from: Scalar, to: Scalar, n: u64, out_offset: i64) -> Kernel {
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

#[test]
fn float_casts_saturate_and_send_nan_to_zero() {
    let xs: [f32; 8] = [
        300.0,
        -300.0,
        f32::NAN,
        2.7,
        -2.7,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
    ];
    let mut ar = Buf::new(64);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::F32, Scalar::I8, 8, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i8>(32, 8), [127, -128, 0, 2, -2, 127, -128, 0]);
    run(
        &[cast_kernel(Scalar::F32, Scalar::U8, 8, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(32, 8), [255, 0, 0, 2, 0, 255, 0, 0]);
    run(
        &[cast_kernel(Scalar::F32, Scalar::I32, 8, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(
        ar.get::<i32>(32, 8),
        [300, -300, 0, 2, -2, i32::MAX, i32::MIN, 0]
    );
    run(
        &[cast_kernel(Scalar::F32, Scalar::U16, 8, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u16>(32, 8), [300, 0, 0, 2, 0, u16::MAX, 0, 0]);
    run(
        &[cast_kernel(Scalar::F32, Scalar::Bool, 8, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(32, 8), [1, 1, 1, 1, 1, 1, 1, 0]);

    let xs: [f64; 5] = [1e30, -1.0, f64::NAN, 4e9, 18446744073709549568.0];
    let mut ar = Buf::new(80);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::F64, Scalar::U64, 5, 40)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(
        ar.get::<u64>(40, 5),
        [u64::MAX, 0, 0, 4_000_000_000, 18446744073709549568]
    );
    run(
        &[cast_kernel(Scalar::F64, Scalar::U32, 5, 40)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(
        ar.get::<u32>(40, 5),
        [u32::MAX, 0, 0, 4_000_000_000, u32::MAX]
    );
    run(
        &[cast_kernel(Scalar::F64, Scalar::I64, 5, 40)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(
        ar.get::<i64>(40, 5),
        [i64::MAX, -1, 0, 4_000_000_000, i64::MAX]
    );
    run(
        &[cast_kernel(Scalar::F64, Scalar::F32, 5, 40)],
        &mut ar,
        &Buf::new(0),
    );
    let got = ar.get::<f32>(40, 5);
    for i in 0..5 {
        assert!(same_f32(got[i], xs[i] as f32));
    }
}

#[test]
fn integer_and_bool_casts() {
    let xs: [i64; 4] = [300, -1, -129, 1 << 40];
    let mut ar = Buf::new(64);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::I64, Scalar::I8, 4, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i8>(32, 4), [44, -1, 127, 0]);
    run(
        &[cast_kernel(Scalar::I64, Scalar::Bool, 4, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u8>(32, 4), [1, 1, 1, 1]);
    run(
        &[cast_kernel(Scalar::I64, Scalar::F32, 4, 32)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(
        ar.get::<f32>(32, 4),
        [300.0, -1.0, -129.0, (1u64 << 40) as f32]
    );

    let xs: [i8; 3] = [-1, 5, -128];
    let mut ar = Buf::new(32);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::I8, Scalar::I64, 3, 8)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i64>(8, 3), [-1, 5, -128]);
    run(
        &[cast_kernel(Scalar::I8, Scalar::U32, 3, 8)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<u32>(8, 3), [u32::MAX, 5, 0xFFFF_FF80]);
    run(
        &[cast_kernel(Scalar::I8, Scalar::F64, 3, 8)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<f64>(8, 3), [-1.0, 5.0, -128.0]);

    let xs: [u8; 3] = [255, 0, 128];
    let mut ar = Buf::new(32);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::U8, Scalar::I32, 3, 4)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i32>(4, 3), [255, 0, 128]);
    run(
        &[cast_kernel(Scalar::U8, Scalar::F32, 3, 4)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<f32>(4, 3), [255.0, 0.0, 128.0]);

    let xs: [u64; 2] = [u64::MAX, 1 << 63];
    let mut ar = Buf::new(32);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::U64, Scalar::F64, 2, 16)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<f64>(16, 2), [u64::MAX as f64, (1u64 << 63) as f64]);

    let xs: [u8; 2] = [1, 0];
    let mut ar = Buf::new(32);
    ar.put(0, &xs);
    run(
        &[cast_kernel(Scalar::Bool, Scalar::F32, 2, 4)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<f32>(4, 2), [1.0, 0.0]);
    run(
        &[cast_kernel(Scalar::Bool, Scalar::I64, 2, 8)],
        &mut ar,
        &Buf::new(0),
    );
    assert_eq!(ar.get::<i64>(8, 2), [1, 0]);
}

#[test]
fn select_picks_per_element() {
    // out = x > 0 ? x : 0.1 * x (leaky relu).
    let xs: Vec<f32> = (0..11).map(|i| i as f32 - 5.0).collect();
    let mut ar = Buf::new(88);
    ar.put(0, &xs);
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let zero = b.float(Scalar::F32, 0.0);
    let slope = b.float(Scalar::F32, 0.1);
    let pos = b.bin(BinaryOp::Gt, x, zero);
    let scaled = b.bin(BinaryOp::Mul, x, slope);
    let y = b.select(pos, x, scaled);
    let k = loop_kernel(
        "leaky",
        &[11],
        &[],
        vec![arena(Scalar::F32, 0, &[1]), arena(Scalar::F32, 44, &[1])],
        vec![map(b, &[(1, y)])],
    );
    run(&[k], &mut ar, &Buf::new(0));
    let want: Vec<f32> = xs
        .iter()
        .map(|&x| if x > 0.0 { x } else { x * 0.1f32 })
        .collect();
    assert_eq!(ar.get::<f32>(44, 11), want);
}

// ---------------------------------------------------------------------------------------------
// Index, reductions.

#[test]
fn index_gives_loop_positions() {
    // Range: out[i] = 2.5 + 0.5 * i.
    let mut b = Insts::default();
    let i = b.index(0);
    let f = b.cast(i, Scalar::F32);
    let delta = b.float(Scalar::F32, 0.5);
    let start = b.float(Scalar::F32, 2.5);
    let scaled = b.bin(BinaryOp::Mul, f, delta);
    let y = b.bin(BinaryOp::Add, scaled, start);
    let range = loop_kernel(
        "range",
        &[7],
        &[],
        vec![arena(Scalar::F32, 0, &[1])],
        vec![map(b, &[(0, y)])],
    );
    // Two axes: out[i, j] = 10 * i + j as i64, on a 3 x 4 grid (rows are i).
    let mut b = Insts::default();
    let i = b.index(0);
    let j = b.index(1);
    let ten = b.int(Scalar::I64, 10);
    let ti = b.bin(BinaryOp::Mul, i, ten);
    let y = b.bin(BinaryOp::Add, ti, j);
    let grid = loop_kernel(
        "grid",
        &[3, 4],
        &[],
        vec![arena(Scalar::I64, 32, &[4, 1])],
        vec![map(b, &[(0, y)])],
    );
    let mut ar = Buf::new(32 + 96);
    run(&[range, grid], &mut ar, &Buf::new(0));
    let want: Vec<f32> = (0..7).map(|i| 2.5 + 0.5 * i as f32).collect();
    assert_eq!(ar.get::<f32>(0, 7), want);
    let want: Vec<i64> = (0..3)
        .flat_map(|i| (0..4).map(move |j| 10 * i + j))
        .collect();
    assert_eq!(ar.get::<i64>(32, 12), want);
}

/// `out[o] = reduce(x[o, :, :])` for x of shape [4, 3, 5] (inner axes 1 and 2).
fn reduce_kernel(op: ReduceOp, ty: Scalar, init: u64, acc_ty: Scalar, out_offset: i64) -> Kernel {
    let mut r = Insts::default();
    let x = r.load(ty, 0);
    let _ = x;
    let mut s = Insts::default();
    let a = s.acc(acc_ty, 0);
    loop_kernel(
        &format!("{op:?}"),
        &[4],
        &[3, 5],
        vec![
            arena(ty, 0, &[15, 5, 1]),
            arena(acc_ty, out_offset, &[1, 0, 0]),
        ],
        vec![
            Stage::Reduce {
                insts: r.0,
                value: 0,
                op,
                init,
                ty: acc_ty,
            },
            once(s, &[(1, a)]),
        ],
    )
}

#[test]
fn reductions_over_inner_axes() {
    let mut xs: Vec<f32> = (0..60).map(|i| ((i * 37) % 23) as f32 - 11.0).collect();
    xs[20] = f32::NAN; // Row 1 has a NaN.
    xs[47] = 12.0; // Row 3: a tie at the maximum, at inner positions 2 and 14.
    xs[59] = 12.0;
    xs[45] = -20.0; // Row 3's minimum.
    let kernels = vec![
        reduce_kernel(ReduceOp::Sum, Scalar::F32, f64_bits(0.0), Scalar::F32, 240),
        reduce_kernel(
            ReduceOp::Max,
            Scalar::F32,
            f64_bits(f64::NEG_INFINITY),
            Scalar::F32,
            256,
        ),
        reduce_kernel(
            ReduceOp::ArgMax { last: false },
            Scalar::F32,
            0,
            Scalar::I64,
            272,
        ),
        reduce_kernel(
            ReduceOp::ArgMax { last: true },
            Scalar::F32,
            0,
            Scalar::I64,
            304,
        ),
        reduce_kernel(
            ReduceOp::ArgMin { last: false },
            Scalar::F32,
            0,
            Scalar::I64,
            336,
        ),
        reduce_kernel(
            ReduceOp::Min,
            Scalar::F32,
            f64_bits(f64::INFINITY),
            Scalar::F32,
            368,
        ),
        reduce_kernel(ReduceOp::Prod, Scalar::F32, f64_bits(1.0), Scalar::F32, 384),
    ];
    let mut ar = Buf::new(400);
    ar.put(0, &xs);
    run(&kernels, &mut ar, &Buf::new(0));
    let rows: Vec<&[f32]> = xs.chunks(15).collect();
    let sums: Vec<f32> = rows
        .iter()
        .map(|r| r.iter().fold(0.0f32, |a, &b| a + b))
        .collect();
    let got = ar.get::<f32>(240, 4);
    for o in 0..4 {
        assert!(
            same_f32(got[o], sums[o]),
            "sum row {o}: {} want {}",
            got[o],
            sums[o]
        );
    }
    let maxes = ar.get::<f32>(256, 4);
    assert!(maxes[1].is_nan(), "Max propagates NaN");
    for o in [0, 2, 3] {
        assert_eq!(
            maxes[o],
            rows[o].iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b))
        );
    }
    let argmax_first = ar.get::<i64>(272, 4);
    let argmax_last = ar.get::<i64>(304, 4);
    assert_eq!(argmax_first[1], 5, "the NaN wins ArgMax");
    assert_eq!(argmax_first[3], 2);
    assert_eq!(argmax_last[3], 14);
    for o in [0, 2] {
        let best = rows[o].iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let first = rows[o].iter().position(|&v| v == best).unwrap() as i64;
        let last = rows[o].iter().rposition(|&v| v == best).unwrap() as i64;
        assert_eq!((argmax_first[o], argmax_last[o]), (first, last), "row {o}");
    }
    assert_eq!(ar.get::<i64>(336, 4)[3], 0);
    let mins = ar.get::<f32>(368, 4);
    assert_eq!(mins[3], -20.0);
    let prods = ar.get::<f32>(384, 4);
    assert_eq!(prods[0], rows[0].iter().fold(1.0f32, |a, &b| a * b));
}

#[test]
fn reduce_over_a_middle_axis() {
    // x [4, 3, 5] -> out [4, 5] summing axis 1: outer [4, 5], inner [3].
    let xs: Vec<i32> = (0..60).map(|i| i * 3 - 70).collect();
    let mut ar = Buf::new(240 + 80);
    ar.put(0, &xs);
    let mut r = Insts::default();
    r.load(Scalar::I32, 0);
    let mut s = Insts::default();
    let a = s.acc(Scalar::I32, 0);
    let k = loop_kernel(
        "sum1",
        &[4, 5],
        &[3],
        vec![
            arena(Scalar::I32, 0, &[15, 1, 5]),
            arena(Scalar::I32, 240, &[5, 1, 0]),
        ],
        vec![
            Stage::Reduce {
                insts: r.0,
                value: 0,
                op: ReduceOp::Sum,
                init: 0,
                ty: Scalar::I32,
            },
            once(s, &[(1, a)]),
        ],
    );
    run(&[k], &mut ar, &Buf::new(0));
    let got = ar.get::<i32>(240, 20);
    for o in 0..4 {
        for c in 0..5 {
            let want: i32 = (0..3).map(|m| xs[o * 15 + m * 5 + c]).sum();
            assert_eq!(got[o * 5 + c], want);
        }
    }
}

/// Softmax over rows of x [rows, cols] at 0, out at `out_offset`: Reduce max, Reduce sum of
/// exp(x - max), Map exp(x - max) / sum.
fn softmax_kernel(rows: u64, cols: u64, out_offset: i64) -> Kernel {
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

fn softmax_reference(xs: &[f32], cols: usize) -> Vec<f32> {
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

#[test]
fn softmax_reduce_reduce_map() {
    let (rows, cols) = (6usize, 10usize);
    let xs: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919) % 31) as f32 * 0.3 - 4.0)
        .collect();
    let mut ar = Buf::new(rows * cols * 8);
    ar.put(0, &xs);
    let kernel = softmax_kernel(rows as u64, cols as u64, (rows * cols * 4) as i64);
    let program = run(&[kernel], &mut ar, &Buf::new(0));
    assert_eq!(
        program.vectorized_loops(0),
        Some(3),
        "max, sum of exp and the map"
    );
    let got = ar.get::<f32>(rows * cols * 4, rows * cols);
    let want = softmax_reference(&xs, cols);
    for i in 0..rows * cols {
        assert!(
            (got[i] - want[i]).abs() <= 1e-6 * want[i].abs().max(1e-6),
            "at {i}: {} want {}",
            got[i],
            want[i]
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Guards and indirect loads.

#[test]
fn guarded_view_pads() {
    // 1-D: out[9] = pad(x[5], 2 each side, -1.5).
    let xs: [f32; 5] = [1.0, 2.0, 3.0, 4.0, 5.0];
    let mut ar = Buf::new(20 + 36);
    ar.put(0, &xs);
    let mut input = arena(Scalar::F32, -8, &[1]);
    input.guards = vec![Guard {
        coeffs: vec![1],
        offset: -2,
        limit: 5,
    }];
    input.pad = f64_bits(-1.5);
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let k = loop_kernel(
        "pad",
        &[9],
        &[],
        vec![input, arena(Scalar::F32, 20, &[1])],
        vec![map(b, &[(1, x)])],
    );
    run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(
        ar.get::<f32>(20, 9),
        [-1.5, -1.5, 1.0, 2.0, 3.0, 4.0, 5.0, -1.5, -1.5]
    );

    // 2-D, guard on the row axis too: out[4, 4] = pad(x[2, 3], top 1, left 1, i32 pad 7).
    let xs: [i32; 6] = [1, 2, 3, 4, 5, 6];
    let mut ar = Buf::new(24 + 64);
    ar.put(0, &xs);
    let mut input = arena(Scalar::I32, -16, &[3, 1]);
    input.guards = vec![
        Guard {
            coeffs: vec![1, 0],
            offset: -1,
            limit: 2,
        },
        Guard {
            coeffs: vec![0, 1],
            offset: -1,
            limit: 3,
        },
    ];
    input.pad = f64_bits(7.0);
    let mut b = Insts::default();
    let x = b.load(Scalar::I32, 0);
    let k = loop_kernel(
        "pad2",
        &[4, 4],
        &[],
        vec![input, arena(Scalar::I32, 24, &[4, 1])],
        vec![map(b, &[(1, x)])],
    );
    run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(
        ar.get::<i32>(24, 16),
        [7, 7, 7, 7, 7, 1, 2, 3, 7, 4, 5, 6, 7, 7, 7, 7]
    );
}

#[test]
fn max_pool_with_guards_on_inner_axes() {
    // 1-D max pool, window 3, padding 1: out[o] = max(x[o - 1 + w]) for w in 0..3, pad -inf.
    let xs: [f32; 6] = [3.0, -1.0, 4.0, 1.0, -5.0, 9.0];
    let mut ar = Buf::new(24 + 24);
    ar.put(0, &xs);
    let mut input = arena(Scalar::F32, -4, &[1, 1]);
    input.guards = vec![Guard {
        coeffs: vec![1, 1],
        offset: -1,
        limit: 6,
    }];
    input.pad = f64_bits(f64::NEG_INFINITY);
    let mut r = Insts::default();
    r.load(Scalar::F32, 0);
    let mut s = Insts::default();
    let a = s.acc(Scalar::F32, 0);
    let k = loop_kernel(
        "maxpool",
        &[6],
        &[3],
        vec![input, arena(Scalar::F32, 24, &[1, 0])],
        vec![
            Stage::Reduce {
                insts: r.0,
                value: 0,
                op: ReduceOp::Max,
                init: f64_bits(f64::NEG_INFINITY),
                ty: Scalar::F32,
            },
            once(s, &[(1, a)]),
        ],
    );
    run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(ar.get::<f32>(24, 6), [3.0, 4.0, 4.0, 4.0, 9.0, 9.0]);
}

#[test]
fn gather_wraps_negative_indices_and_clamps() {
    // data [5, 3] in the weights; out[i, j] = data[idx[i], j].
    let data: Vec<f32> = (0..15).map(|i| i as f32 * 10.0).collect();
    let idx: [i64; 6] = [0, -1, 2, -5, 7, -9];
    let mut w = Buf::new(60);
    w.put(0, &data);
    let mut ar = Buf::new(48 + 72);
    ar.put(0, &idx);
    let mut b = Insts::default();
    let i = b.load(Scalar::I64, 0);
    let x = b.push(
        Scalar::F32,
        InstKind::LoadIndirect {
            view: 1,
            indices: vec![IndirectIndex {
                index: i,
                stride: 3,
                limit: 5,
            }],
        },
    );
    let k = loop_kernel(
        "gather",
        &[6, 3],
        &[],
        vec![
            arena(Scalar::I64, 0, &[1, 0]),
            view(Region::Weights, Scalar::F32, 0, &[0, 1]),
            arena(Scalar::F32, 48, &[3, 1]),
        ],
        vec![map(b, &[(2, x)])],
    );
    run(&[k], &mut ar, &w);
    let rows = [0usize, 4, 2, 0, 4, 0]; // 7 clamps to 4; -9 wraps to -4, clamps to 0.
    let data = &data;
    let want: Vec<f32> = rows
        .iter()
        .flat_map(|&r| (0..3).map(move |j| data[r * 3 + j]))
        .collect();
    assert_eq!(ar.get::<f32>(48, 18), want);
}

// ---------------------------------------------------------------------------------------------
// Contractions.

fn contract_reference(c: &Contract, a: &[f64], b: &[f64], out: &mut [f64]) {
    let alpha = f64::from_bits(c.alpha);
    let n_batches: u64 = c.batch.iter().product();
    for lin in 0..n_batches {
        let mut offs = [0i64; 3];
        let mut rest = lin;
        for axis in (0..c.batch.len()).rev() {
            let i = (rest % c.batch[axis]) as i64;
            rest /= c.batch[axis];
            for (o, v) in offs.iter_mut().zip([&c.a, &c.b, &c.c]) {
                *o += i * v.batch_strides[axis];
            }
        }
        for r in 0..c.m as i64 {
            for col in 0..c.n as i64 {
                let mut sum = 0.0;
                for k in 0..c.k as i64 {
                    sum += a[(offs[0] + r * c.a.row_stride + k * c.a.col_stride) as usize]
                        * b[(offs[1] + k * c.b.row_stride + col * c.b.col_stride) as usize];
                }
                let at = (offs[2] + r * c.c.row_stride + col * c.c.col_stride) as usize;
                out[at] = alpha * sum + if c.accumulate { out[at] } else { 0.0 };
            }
        }
    }
}

#[test]
fn batched_transposed_accumulating_contraction() {
    for (elem, threads) in [(Scalar::F64, 1), (Scalar::F32, 1), (Scalar::F64, 2)] {
        // batch [2]; a is stored transposed (k x m), b row-major, c row-major; all in the arena.
        let (m, n, k) = (3u64, 4u64, 5u64);
        let size = elem.size() as i64;
        let a_len = 2 * m * k;
        let b_len = 2 * k * n;
        let c_len = 2 * m * n;
        let a: Vec<f64> = (0..a_len).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..b_len).map(|i| (i as f64 * 0.11).cos()).collect();
        let c0: Vec<f64> = (0..c_len).map(|i| i as f64 * 0.5).collect();
        let contract = Contract {
            elem,
            batch: vec![2],
            m,
            n,
            k,
            a: MatView {
                region: Region::Arena,
                byte_offset: 0,
                batch_strides: vec![(m * k) as i64],
                row_stride: 1,
                col_stride: m as i64,
            },
            b: MatView {
                region: Region::Weights,
                byte_offset: 0,
                batch_strides: vec![(k * n) as i64],
                row_stride: n as i64,
                col_stride: 1,
            },
            c: MatView {
                region: Region::Arena,
                byte_offset: a_len as i64 * size,
                batch_strides: vec![(m * n) as i64],
                row_stride: n as i64,
                col_stride: 1,
            },
            alpha: f64_bits(0.5),
            accumulate: true,
        };
        let kernel = Kernel {
            name: "bmm".into(),
            body: KernelBody::Contract(contract.clone()),
        };
        let mut ar = Buf::new(((a_len + c_len) as i64 * size) as usize);
        let mut w = Buf::new((b_len as i64 * size) as usize);
        let mut want = c0.clone();
        contract_reference(&contract, &a, &b, &mut want);
        if elem == Scalar::F64 {
            ar.put(0, &a);
            ar.put((a_len * 8) as usize, &c0);
            w.put(0, &b);
        } else {
            ar.put(0, &a.iter().map(|&x| x as f32).collect::<Vec<_>>());
            ar.put(
                (a_len * 4) as usize,
                &c0.iter().map(|&x| x as f32).collect::<Vec<_>>(),
            );
            w.put(0, &b.iter().map(|&x| x as f32).collect::<Vec<_>>());
        }
        run_on(&[kernel], &mut ar, &w, threads);
        let got: Vec<f64> = if elem == Scalar::F64 {
            ar.get((a_len * 8) as usize, c_len as usize)
        } else {
            ar.get::<f32>((a_len * 4) as usize, c_len as usize)
                .iter()
                .map(|&x| x as f64)
                .collect()
        };
        let tol = if elem == Scalar::F64 { 1e-12 } else { 1e-5 };
        for i in 0..c_len as usize {
            assert!(
                (got[i] - want[i]).abs() <= tol * want[i].abs().max(1.0),
                "{elem:?} at {i}: {} want {}",
                got[i],
                want[i]
            );
        }
    }
}

/// Four large products (each above the parallel threshold) with disjoint results: on two
/// threads they run one product per thread, and give the one-thread results exactly.
#[test]
fn batched_large_contraction_on_two_threads() {
    let (batch, m, n, k) = (4u64, 72u64, 80u64, 64u64);
    let a: Vec<f32> = (0..batch * m * k)
        .map(|i| ((i * 13) % 17) as f32 - 8.0)
        .collect();
    let b: Vec<f32> = (0..batch * k * n)
        .map(|i| ((i * 7) % 11) as f32 - 5.0)
        .collect();
    let (a_at, b_at, c_at) = (0, batch * m * k * 4, (batch * m * k + batch * k * n) * 4);
    let mat = |byte_offset: u64, rows: u64, cols: u64| MatView {
        region: Region::Arena,
        byte_offset: byte_offset as i64,
        batch_strides: vec![(rows * cols) as i64],
        row_stride: cols as i64,
        col_stride: 1,
    };
    let contract = Contract {
        elem: Scalar::F32,
        batch: vec![batch],
        m,
        n,
        k,
        a: mat(a_at, m, k),
        b: mat(b_at, k, n),
        c: mat(c_at, m, n),
        alpha: f64_bits(1.0),
        accumulate: false,
    };
    let kernel = Kernel {
        name: "bmm".into(),
        body: KernelBody::Contract(contract),
    };
    let bytes = (c_at + batch * m * n * 4) as usize;
    let mut results = Vec::new();
    for threads in [1, 2] {
        let mut ar = Buf::new(bytes);
        ar.put(a_at as usize, &a);
        ar.put(b_at as usize, &b);
        ar.put(c_at as usize, &vec![f32::NAN; (batch * m * n) as usize]);
        run_on(
            std::slice::from_ref(&kernel),
            &mut ar,
            &Buf::new(0),
            threads,
        );
        results.push(ar.get::<f32>(c_at as usize, (batch * m * n) as usize));
    }
    // Small integers: exact, whatever the order of the sums.
    for bi in 0..batch as usize {
        for r in 0..m as usize {
            for col in 0..n as usize {
                let want: f32 = (0..k as usize)
                    .map(|kk| {
                        a[bi * (m * k) as usize + r * k as usize + kk]
                            * b[bi * (k * n) as usize + kk * n as usize + col]
                    })
                    .sum();
                let at = bi * (m * n) as usize + r * n as usize + col;
                assert_eq!(results[1][at], want, "batch {bi} at ({r}, {col})");
            }
        }
    }
    assert_eq!(results[0], results[1], "one and two threads differ");
}

#[test]
fn large_contraction_on_two_threads() {
    // 70 x 80 x 90 (above the parallel threshold), not accumulating, c column-major.
    let (m, n, k) = (70u64, 80u64, 90u64);
    let a: Vec<f64> = (0..m * k).map(|i| ((i * 13) % 17) as f64 - 8.0).collect();
    let b: Vec<f64> = (0..k * n).map(|i| ((i * 7) % 11) as f64 - 5.0).collect();
    let contract = Contract {
        elem: Scalar::F64,
        batch: vec![],
        m,
        n,
        k,
        a: MatView {
            region: Region::Arena,
            byte_offset: 0,
            batch_strides: vec![],
            row_stride: k as i64,
            col_stride: 1,
        },
        b: MatView {
            region: Region::Arena,
            byte_offset: (m * k * 8) as i64,
            batch_strides: vec![],
            row_stride: n as i64,
            col_stride: 1,
        },
        c: MatView {
            region: Region::Arena,
            byte_offset: ((m * k + k * n) * 8) as i64,
            batch_strides: vec![],
            row_stride: 1,
            col_stride: m as i64,
        },
        alpha: f64_bits(1.0),
        accumulate: false,
    };
    let mut want = vec![0.0; (m * n) as usize];
    // The reference writes into its own buffer with c's strides.
    let mut c_ref = contract.clone();
    c_ref.c.byte_offset = 0;
    contract_reference(&c_ref, &a, &b[..], &mut want);
    let _ = &mut c_ref;
    let mut ar = Buf::new(((m * k + k * n + m * n) * 8) as usize);
    ar.put(0, &a);
    ar.put((m * k * 8) as usize, &b);
    // Garbage in c: a non-accumulating product must overwrite it.
    ar.put(
        ((m * k + k * n) * 8) as usize,
        &vec![f64::NAN; (m * n) as usize],
    );
    let kernel = Kernel {
        name: "mm".into(),
        body: KernelBody::Contract(contract),
    };
    run_on(&[kernel], &mut ar, &Buf::new(0), 2);
    let got: Vec<f64> = ar.get(((m * k + k * n) * 8) as usize, (m * n) as usize);
    // Small integers: exact.
    let b_at = |kk: usize, col: usize| b[kk * n as usize + col];
    let _ = b_at;
    assert_eq!(got, want);
}

// ---------------------------------------------------------------------------------------------
// Threads, SIMD shapes, errors.

/// out = tanh(x) * 2 + x over [rows, cols]: a kernel with enough work to be split.
fn big_map_kernel(rows: u64, cols: u64) -> Kernel {
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let t = b.un(UnaryOp::Tanh, x);
    let two = b.float(Scalar::F32, 2.0);
    let t2 = b.bin(BinaryOp::Mul, t, two);
    let y = b.bin(BinaryOp::Add, t2, x);
    loop_kernel(
        "big",
        &[rows, cols],
        &[],
        vec![
            arena(Scalar::F32, 0, &[cols as i64, 1]),
            arena(Scalar::F32, (rows * cols * 4) as i64, &[cols as i64, 1]),
        ],
        vec![map(b, &[(1, y)])],
    )
}

#[test]
fn threads_give_identical_results() {
    let (rows, cols) = (301u64, 257u64);
    let xs: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 31) % 97) as f32 * 0.05 - 2.0)
        .collect();
    let kernels = [
        big_map_kernel(rows, cols),
        softmax_kernel(rows, cols, (2 * rows * cols * 4) as i64),
    ];
    let bytes = (3 * rows * cols * 4) as usize;
    let mut one = Buf::new(bytes);
    one.put(0, &xs);
    let mut two = Buf::new(bytes);
    two.put(0, &xs);
    run_on(&kernels, &mut one, &Buf::new(0), 1);
    run_on(&kernels, &mut two, &Buf::new(0), 2);
    let n = (rows * cols) as usize;
    let want: Vec<f32> = xs.iter().map(|&x| x.tanh() * 2.0 + x).collect();
    for (i, (&g, &w)) in one.get::<f32>(n * 4, n).iter().zip(&want).enumerate() {
        // The vector loop's tanh is within 2 ulp of libm's (`inline_transcendentals_f32`).
        assert!(
            (g - w).abs() <= 1e-6 * w.abs().max(1.0),
            "at {i}: {g} want {w}"
        );
    }
    assert_eq!(one.0, two.0, "one and two threads differ");
    let soft = softmax_reference(&xs, cols as usize);
    let got = two.get::<f32>(2 * n * 4, n);
    for i in (0..n).step_by(97) {
        assert!(
            (got[i] - soft[i]).abs() <= 1e-6 * soft[i].max(1e-6),
            "softmax at {i}"
        );
    }
}

#[test]
fn long_rows_split_into_blocks() {
    // Last axes of 2 * 4096 elements or more are cut into blocks that run as separate rows:
    // indices, guards and addresses must count from each block's start. Shape [3, 9001].
    let (rows, cols) = (3u64, 9001u64);
    let n = (rows * cols) as usize;
    let xs: Vec<f32> = (0..n)
        .map(|i| ((i * 13) % 101) as f32 * 0.5 - 20.0)
        .collect();
    // Vectorized: out1 = x * 2 + 1.
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let two = b.float(Scalar::F32, 2.0);
    let one = b.float(Scalar::F32, 1.0);
    let x2 = b.bin(BinaryOp::Mul, x, two);
    let y = b.bin(BinaryOp::Add, x2, one);
    let simd = loop_kernel(
        "blocked_simd",
        &[rows, cols],
        &[],
        vec![
            arena(Scalar::F32, 0, &[cols as i64, 1]),
            arena(Scalar::F32, (n * 4) as i64, &[cols as i64, 1]),
        ],
        vec![map(b, &[(1, y)])],
    );
    // Scalar: out2[r, j] = x[r, j - 3] (pad -1 outside [3, cols - 3)) + j + 100 r, in i64.
    let mut shifted = arena(Scalar::F32, -12, &[cols as i64, 1]);
    shifted.guards = vec![Guard {
        coeffs: vec![0, 1],
        offset: -3,
        limit: cols as i64 - 6,
    }];
    shifted.pad = f64_bits(-1.0);
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let xi = b.cast(x, Scalar::I64);
    let r = b.index(0);
    let j = b.index(1);
    let hundred = b.int(Scalar::I64, 100);
    let r100 = b.bin(BinaryOp::Mul, r, hundred);
    let sum = b.bin(BinaryOp::Add, xi, j);
    let y = b.bin(BinaryOp::Add, sum, r100);
    let scalar = loop_kernel(
        "blocked_scalar",
        &[rows, cols],
        &[],
        vec![
            shifted,
            arena(Scalar::I64, (2 * n * 4) as i64, &[cols as i64, 1]),
        ],
        vec![map(b, &[(1, y)])],
    );
    let bytes = n * 4 * 2 + n * 8;
    let mut one_thread = Buf::new(bytes);
    one_thread.put(0, &xs);
    let mut two_threads = Buf::new(bytes);
    two_threads.put(0, &xs);
    let kernels = [simd, scalar];
    let program = run_on(&kernels, &mut one_thread, &Buf::new(0), 1);
    // Two SIMD loops: one for full blocks, one for the shorter last block.
    assert_eq!(program.vectorized_loops(0), Some(2));
    run_on(&kernels, &mut two_threads, &Buf::new(0), 2);
    assert_eq!(one_thread.0, two_threads.0, "one and two threads differ");
    let want: Vec<f32> = xs.iter().map(|&x| x * 2.0 + 1.0).collect();
    assert_eq!(one_thread.get::<f32>(n * 4, n), want);
    let got = one_thread.get::<i64>(2 * n * 4, n);
    for r in 0..rows as usize {
        for j in 0..cols as usize {
            let x = if (3..cols as usize - 3).contains(&j) {
                xs[r * cols as usize + j - 3] as i64
            } else {
                -1
            };
            let want = x + j as i64 + 100 * r as i64;
            assert_eq!(got[r * cols as usize + j], want, "at ({r}, {j})");
        }
    }
}

#[test]
fn contiguous_map_with_a_tail() {
    // 4k + 3 elements: the SIMD body and the scalar tail both run; a broadcast scalar operand
    // (stride 0) and a transcendental are mixed in.
    for len in [1027u64, 3, 4, 5, 8, 9, 13, 15] {
        let xs: Vec<f32> = (0..len).map(|i| (i as f32 * 0.731).sin() * 4.0).collect();
        let mut ar = Buf::new((len * 8) as usize);
        ar.put(0, &xs);
        let mut w = Buf::new(4);
        w.put(0, &[0.75f32]);
        let mut b = Insts::default();
        let x = b.load(Scalar::F32, 0);
        let s = b.load(Scalar::F32, 1);
        let xs_ = b.bin(BinaryOp::Mul, x, s);
        let e = b.un(UnaryOp::Exp, xs_);
        let zero = b.float(Scalar::F32, 0.0);
        let m = b.bin(BinaryOp::Max, x, zero);
        let neg = b.bin(BinaryOp::Lt, x, zero);
        let pick = b.select(neg, e, m);
        let r = b.un(UnaryOp::Sqrt, pick);
        let y = b.bin(BinaryOp::Sub, r, x);
        let k = loop_kernel(
            "simd",
            &[len],
            &[],
            vec![
                arena(Scalar::F32, 0, &[1]),
                view(Region::Weights, Scalar::F32, 0, &[0]),
                arena(Scalar::F32, (len * 4) as i64, &[1]),
            ],
            vec![map(b, &[(2, y)])],
        );
        let program = run(&[k], &mut ar, &w);
        let want_simd = if len >= 4 { 1 } else { 0 };
        assert_eq!(program.vectorized_loops(0), Some(want_simd), "length {len}");
        let want: Vec<f32> = xs
            .iter()
            .map(|&x| {
                let pick = if x < 0.0 {
                    (x * 0.75f32).exp()
                } else {
                    x.max(0.0)
                };
                pick.sqrt() - x
            })
            .collect();
        // The vector loop's exp is within an ulp of libm's (`inline_transcendentals_f32`).
        let got = ar.get::<f32>((len * 4) as usize, len as usize);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                "length {len}, at {i}: {g} want {w}"
            );
        }
    }
}

#[test]
fn vector_masks_and_bool_casts() {
    // out = f32(isnan(x) | x > 1) + f32(!(x < 0)) * 10 + f32(bool(x)) * 100 + round(x) * 1000
    // on 23 elements: masks combined, negated and turned back into floats in f32x4 lanes.
    let xs: Vec<f32> = (0..23)
        .map(|i| {
            if i % 7 == 3 {
                f32::NAN
            } else {
                i as f32 * 0.25 - 2.5
            }
        })
        .collect();
    let mut ar = Buf::new(23 * 8);
    ar.put(0, &xs);
    let mut b = Insts::default();
    let x = b.load(Scalar::F32, 0);
    let one = b.float(Scalar::F32, 1.0);
    let zero = b.float(Scalar::F32, 0.0);
    let nan = b.un(UnaryOp::IsNan, x);
    let big = b.bin(BinaryOp::Gt, x, one);
    let either = b.bin(BinaryOp::Or, nan, big);
    let first = b.cast(either, Scalar::F32);
    let neg = b.bin(BinaryOp::Lt, x, zero);
    let not_neg = b.un(UnaryOp::Not, neg);
    let second = b.cast(not_neg, Scalar::F32);
    let ten = b.float(Scalar::F32, 10.0);
    let second = b.bin(BinaryOp::Mul, second, ten);
    let truthy = b.cast(x, Scalar::Bool);
    let third = b.cast(truthy, Scalar::F32);
    let hundred = b.float(Scalar::F32, 100.0);
    let third = b.bin(BinaryOp::Mul, third, hundred);
    let rounded = b.un(UnaryOp::Round, x);
    let thousand = b.float(Scalar::F32, 1000.0);
    let fourth = b.bin(BinaryOp::Mul, rounded, thousand);
    let sum = b.bin(BinaryOp::Add, first, second);
    let sum = b.bin(BinaryOp::Add, sum, third);
    let y = b.bin(BinaryOp::Add, sum, fourth);
    let k = loop_kernel(
        "masks",
        &[23],
        &[],
        vec![arena(Scalar::F32, 0, &[1]), arena(Scalar::F32, 92, &[1])],
        vec![map(b, &[(1, y)])],
    );
    let program = run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(program.vectorized_loops(0), Some(1));
    let want: Vec<f32> = xs
        .iter()
        .map(|&x| {
            let first = (x.is_nan() || x > 1.0) as u8 as f32;
            // Not(x < 0) is true for NaN too.
            let second = (x >= 0.0 || x.is_nan()) as u8 as f32 * 10.0;
            let third = (x != 0.0) as u8 as f32 * 100.0;
            first + second + third + x.round_ties_even() * 1000.0
        })
        .collect();
    let got = ar.get::<f32>(92, 23);
    for i in 0..23 {
        assert!(
            same_f32(got[i], want[i]),
            "at {i} (x = {}): {} want {}",
            xs[i],
            got[i],
            want[i]
        );
    }
}

#[test]
fn strided_last_axis_uses_the_scalar_path() {
    // out[i] = x[2 * i] + x[2 * i + 1] over 13 elements: the last axis has stride 2.
    let xs: Vec<f32> = (0..26).map(|i| i as f32 * 0.5).collect();
    let mut ar = Buf::new(26 * 4 + 13 * 4);
    ar.put(0, &xs);
    let mut b = Insts::default();
    let e = b.load(Scalar::F32, 0);
    let o = b.load(Scalar::F32, 1);
    let y = b.bin(BinaryOp::Add, e, o);
    let k = loop_kernel(
        "pairs",
        &[13],
        &[],
        vec![
            arena(Scalar::F32, 0, &[2]),
            arena(Scalar::F32, 4, &[2]),
            arena(Scalar::F32, 104, &[1]),
        ],
        vec![map(b, &[(2, y)])],
    );
    let program = run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(
        program.vectorized_loops(0),
        Some(0),
        "a stride-2 row stays scalar"
    );
    let want: Vec<f32> = (0..13).map(|i| xs[2 * i] + xs[2 * i + 1]).collect();
    assert_eq!(ar.get::<f32>(104, 13), want);
}

#[test]
fn reverse_and_transpose_views() {
    // out[j, i] = x[i, 3 - j] for x [2, 4]: negative strides and a transposed store.
    let xs: [f64; 8] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let mut ar = Buf::new(128);
    ar.put(0, &xs);
    let mut b = Insts::default();
    let x = b.load(Scalar::F64, 0);
    let k = loop_kernel(
        "rev",
        &[2, 4],
        &[],
        vec![
            arena(Scalar::F64, 24, &[4, -1]),
            arena(Scalar::F64, 64, &[1, 2]),
        ],
        vec![map(b, &[(1, x)])],
    );
    run(&[k], &mut ar, &Buf::new(0));
    assert_eq!(
        ar.get::<f64>(64, 8),
        [4.0, 8.0, 3.0, 7.0, 2.0, 6.0, 1.0, 5.0]
    );
}

#[test]
fn contiguous_sum_and_max_reductions_with_tails() {
    // Rows of 4k + 3 and of fewer than 4 elements, reduced over the contiguous inner axis.
    for cols in [35u64, 3, 1, 8] {
        let rows = 5u64;
        let xs: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 53) % 29) as f32 * 0.125 - 1.5)
            .collect();
        let mut ar = Buf::new(((rows * cols + 2 * rows) * 4) as usize);
        ar.put(0, &xs);
        let mut kernels = Vec::new();
        for (op, init, slot) in [
            (ReduceOp::Sum, 0.0, 0),
            (ReduceOp::Max, f64::NEG_INFINITY, 1),
        ] {
            let mut r = Insts::default();
            let x = r.load(Scalar::F32, 0);
            let two = r.float(Scalar::F32, 2.0);
            r.bin(BinaryOp::Mul, x, two);
            let mut s = Insts::default();
            let a = s.acc(Scalar::F32, 0);
            kernels.push(loop_kernel(
                "rowreduce",
                &[rows],
                &[cols],
                vec![
                    arena(Scalar::F32, 0, &[cols as i64, 1]),
                    arena(
                        Scalar::F32,
                        ((rows * cols + slot * rows) * 4) as i64,
                        &[1, 0],
                    ),
                ],
                vec![
                    Stage::Reduce {
                        insts: r.0,
                        value: 2,
                        op,
                        init: f64_bits(init),
                        ty: Scalar::F32,
                    },
                    once(s, &[(1, a)]),
                ],
            ));
        }
        let program = run(&kernels, &mut ar, &Buf::new(0));
        let want_simd = if cols >= 4 { 1 } else { 0 };
        assert_eq!(
            program.vectorized_loops(0),
            Some(want_simd),
            "sum over {cols}"
        );
        assert_eq!(
            program.vectorized_loops(1),
            Some(want_simd),
            "max over {cols}"
        );
        let sums = ar.get::<f32>((rows * cols * 4) as usize, rows as usize);
        let maxes = ar.get::<f32>(((rows * cols + rows) * 4) as usize, rows as usize);
        for (o, row) in xs.chunks(cols as usize).enumerate() {
            let want_sum: f32 = row.iter().map(|&x| x * 2.0).sum();
            // A vectorized sum adds in a different order: compare with a tolerance.
            assert!(
                (sums[o] - want_sum).abs() <= 1e-5 * want_sum.abs().max(1.0),
                "cols {cols} row {o}: {} want {want_sum}",
                sums[o]
            );
            let want_max = row
                .iter()
                .map(|&x| x * 2.0)
                .fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(maxes[o], want_max, "cols {cols} row {o}");
        }
    }
}

#[test]
fn empty_extents_run_nothing_or_give_the_init() {
    // inner extent 0: the reduction yields its init; an outer extent of 0 runs nothing.
    let mut r = Insts::default();
    r.load(Scalar::F32, 0);
    let mut s = Insts::default();
    let a = s.acc(Scalar::F32, 0);
    let k = loop_kernel(
        "empty",
        &[3],
        &[0],
        vec![
            arena(Scalar::F32, 0, &[0, 1]),
            arena(Scalar::F32, 0, &[1, 0]),
        ],
        vec![
            Stage::Reduce {
                insts: r.0,
                value: 0,
                op: ReduceOp::Sum,
                init: f64_bits(4.5),
                ty: Scalar::F32,
            },
            once(s, &[(1, a)]),
        ],
    );
    let mut b = Insts::default();
    let c = b.float(Scalar::F32, 9.0);
    let none = loop_kernel(
        "none",
        &[2, 0],
        &[],
        vec![arena(Scalar::F32, 0, &[0, 1])],
        vec![map(b, &[(0, c)])],
    );
    let mut ar = Buf::new(16);
    run(&[k, none], &mut ar, &Buf::new(0));
    assert_eq!(ar.get::<f32>(0, 4), [4.5, 4.5, 4.5, 0.0]);
}

#[test]
fn f16_and_bool_arithmetic_are_unsupported() {
    let k = cast_kernel(Scalar::F16, Scalar::F32, 4, 8);
    match CpuProgram::compile(&[&k]) {
        Err(CpuError::Unsupported { kernel, message }) => {
            assert_eq!(kernel, "cast");
            assert!(message.contains("f16"), "{message}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("an f16 kernel compiled"),
    }
    let k = binary_kernel(BinaryOp::Add, Scalar::Bool, 4, 4, 8);
    match CpuProgram::compile(&[&k]) {
        Err(CpuError::Unsupported { message, .. }) => {
            assert!(message.contains("Add of bool"), "{message}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("bool addition compiled"),
    }
}

#[test]
fn host_simd_features_are_enabled() {
    let flags = host_isa_flags().expect("the host ISA is supported");
    let enabled = |name: &str| flags.iter().any(|&(n, on)| n == name && on);
    #[cfg(target_arch = "x86_64")]
    {
        for (feature, flag) in [
            ("sse4.1", "has_sse41"),
            ("avx", "has_avx"),
            ("fma", "has_fma"),
        ] {
            let host_has = match feature {
                "sse4.1" => std::is_x86_feature_detected!("sse4.1"),
                "avx" => std::is_x86_feature_detected!("avx"),
                _ => std::is_x86_feature_detected!("fma"),
            };
            if host_has {
                assert!(
                    enabled(flag),
                    "the host has {feature} but Cranelift's {flag} is off: {flags:?}"
                );
            } else {
                println!("skipped: this host lacks {feature}");
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = enabled;
        println!("skipped: the feature check is for x86_64 hosts");
    }
}
