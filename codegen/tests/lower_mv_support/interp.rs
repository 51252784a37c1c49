//! A reference interpreter of the kernel IR, written from the contract in
//! `memc_codegen::kernel` and nothing else. Slow and literal: every instruction is evaluated
//! at every loop point, every access is bounds-checked (an out-of-bounds access panics: the
//! validator should have rejected the kernel).

use memc_codegen::kernel::{
    BinaryOp, Contract, Inst, InstKind, Kernel, KernelBody, LoopKernel, ReduceOp, Region, Scalar,
    Stage, UnaryOp, View,
};

pub struct Memory {
    pub arena: Vec<u8>,
    pub weights: Vec<u8>,
}

/// A value: floats as `f64` (rounded to their type after every operation), integers and
/// bools as `i128` (wrapped to their type).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum V {
    F(f64),
    I(i128),
}

impl V {
    fn f(self) -> f64 {
        match self {
            V::F(x) => x,
            V::I(i) => i as f64,
        }
    }

    fn i(self) -> i128 {
        match self {
            V::I(i) => i,
            V::F(x) => x as i128,
        }
    }
}

pub fn f16_bits_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let frac = f64::from(bits & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}

fn f64_to_f16_bits(x: f64) -> u16 {
    if x.is_nan() {
        return 0x7e00;
    }
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    // Round to the nearest multiple of the spacing at this magnitude, ties to even.
    let e = if a < 2f64.powi(-14) {
        -14
    } else {
        a.log2().floor() as i32
    };
    let spacing = 2f64.powi(e - 10);
    let q = a / spacing;
    let mut r = q.round();
    if (q - q.floor() - 0.5).abs() == 0.0 && r % 2.0 != 0.0 {
        r -= 1.0;
    }
    let v = r * spacing;
    if v == 0.0 {
        return sign;
    }
    if v < 2f64.powi(-14) {
        return sign | (v / 2f64.powi(-24)) as u16;
    }
    let e = v.log2().floor() as i32;
    let frac = ((v / 2f64.powi(e) - 1.0) * 1024.0).round() as u16;
    sign | (((e + 15) as u16) << 10) | frac
}

/// `x` rounded to float type `ty`.
fn round_float(ty: Scalar, x: f64) -> f64 {
    match ty {
        Scalar::F32 => f64::from(x as f32),
        Scalar::F16 => f16_bits_to_f64(f64_to_f16_bits(x)),
        _ => x,
    }
}

/// `i` wrapped to integer type `ty`.
fn wrap(ty: Scalar, i: i128) -> i128 {
    match ty {
        Scalar::Bool => i128::from(i != 0),
        Scalar::I8 => i128::from(i as i8),
        Scalar::I16 => i128::from(i as i16),
        Scalar::I32 => i128::from(i as i32),
        Scalar::I64 => i128::from(i as i64),
        Scalar::U8 => i128::from(i as u8),
        Scalar::U16 => i128::from(i as u16),
        Scalar::U32 => i128::from(i as u32),
        Scalar::U64 => i128::from(i as u64),
        _ => i,
    }
}

fn int_bounds(ty: Scalar) -> (i128, i128) {
    match ty {
        Scalar::Bool => (0, 1),
        Scalar::I8 => (i8::MIN.into(), i8::MAX.into()),
        Scalar::I16 => (i16::MIN.into(), i16::MAX.into()),
        Scalar::I32 => (i32::MIN.into(), i32::MAX.into()),
        Scalar::I64 => (i64::MIN.into(), i64::MAX.into()),
        Scalar::U8 => (0, u8::MAX.into()),
        Scalar::U16 => (0, u16::MAX.into()),
        Scalar::U32 => (0, u32::MAX.into()),
        _ => (0, u64::MAX.into()),
    }
}

/// Converts `v` (of type `from`) to `to` as `InstKind::Cast` says.
fn convert(v: V, from: Scalar, to: Scalar) -> V {
    if to == Scalar::Bool {
        return V::I(match v {
            V::F(x) => i128::from(x != 0.0),
            V::I(i) => i128::from(i != 0),
        });
    }
    if to.is_float() {
        return V::F(round_float(to, v.f()));
    }
    match v {
        V::F(x) if from.is_float() => {
            if x.is_nan() {
                return V::I(0);
            }
            let (lo, hi) = int_bounds(to);
            let t = x.trunc();
            V::I(if t <= lo as f64 {
                lo
            } else if t >= hi as f64 {
                hi
            } else {
                t as i128
            })
        }
        _ => V::I(wrap(to, v.i())),
    }
}

/// The value of `bits` (as in `InstKind::Const`) in type `ty`.
fn const_value(ty: Scalar, bits: u64) -> V {
    if ty.is_float() {
        V::F(round_float(ty, f64::from_bits(bits)))
    } else if ty.is_unsigned_int() {
        V::I(wrap(ty, i128::from(bits)))
    } else {
        V::I(wrap(ty, i128::from(bits as i64)))
    }
}

fn read(region: &[u8], byte: i128, ty: Scalar, what: &str) -> V {
    let w = ty.size() as usize;
    assert!(
        byte >= 0 && byte as usize + w <= region.len(),
        "{what}: read at byte {byte} outside {} bytes",
        region.len()
    );
    let b = &region[byte as usize..byte as usize + w];
    let mut raw = [0u8; 8];
    raw[..w].copy_from_slice(b);
    match ty {
        Scalar::F32 => V::F(f64::from(f32::from_le_bytes(raw[..4].try_into().unwrap()))),
        Scalar::F64 => V::F(f64::from_le_bytes(raw)),
        Scalar::F16 => V::F(f16_bits_to_f64(u16::from_le_bytes([raw[0], raw[1]]))),
        Scalar::Bool | Scalar::U8 | Scalar::U16 | Scalar::U32 | Scalar::U64 => {
            V::I(i128::from(u64::from_le_bytes(raw)))
        }
        _ => V::I(wrap(ty, i128::from(i64::from_le_bytes(raw)))),
    }
}

fn write(region: &mut [u8], byte: i128, ty: Scalar, v: V, what: &str) {
    let w = ty.size() as usize;
    assert!(
        byte >= 0 && byte as usize + w <= region.len(),
        "{what}: write at byte {byte} outside {} bytes",
        region.len()
    );
    let raw: [u8; 8] = match ty {
        Scalar::F32 => {
            let mut r = [0u8; 8];
            r[..4].copy_from_slice(&(v.f() as f32).to_le_bytes());
            r
        }
        Scalar::F64 => v.f().to_le_bytes(),
        Scalar::F16 => {
            let mut r = [0u8; 8];
            r[..2].copy_from_slice(&f64_to_f16_bits(v.f()).to_le_bytes());
            r
        }
        _ => (v.i() as i64).to_le_bytes(),
    };
    region[byte as usize..byte as usize + w].copy_from_slice(&raw[..w]);
}

fn region(mem: &Memory, r: Region) -> &[u8] {
    match r {
        Region::Arena => &mem.arena,
        Region::Weights => &mem.weights,
    }
}

/// The element of `view` at loop point `idx` plus the indirect terms (element offsets), or its
/// pad where a guard fails.
fn load(mem: &Memory, view: &View, idx: &[i64], extra: i128, what: &str) -> V {
    for g in &view.guards {
        let v: i128 = g.offset as i128
            + g.coeffs
                .iter()
                .zip(idx)
                .map(|(&c, &i)| c as i128 * i as i128)
                .sum::<i128>();
        if v < 0 || v >= g.limit as i128 {
            return convert(V::F(f64::from_bits(view.pad)), Scalar::F64, view.elem);
        }
    }
    let elems: i128 = view
        .strides
        .iter()
        .zip(idx)
        .map(|(&s, &i)| s as i128 * i as i128)
        .sum::<i128>()
        + extra;
    read(
        region(mem, view.region),
        view.byte_offset as i128 + elems * view.elem.size() as i128,
        view.elem,
        what,
    )
}

fn unary(op: UnaryOp, ty: Scalar, a: V) -> V {
    if let V::I(i) = a {
        return V::I(match op {
            UnaryOp::Neg => wrap(ty, -i),
            UnaryOp::Abs => wrap(ty, i.abs()),
            UnaryOp::Sign => i.signum(),
            UnaryOp::Not => i128::from(i == 0),
            UnaryOp::BitNot => wrap(ty, !i),
            _ => panic!("{op:?} of an integer"),
        });
    }
    let x = a.f();
    let r = match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x.is_nan() {
                x
            } else if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
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
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::IsNan => return V::I(i128::from(x.is_nan())),
        UnaryOp::IsPosInf => return V::I(i128::from(x == f64::INFINITY)),
        UnaryOp::IsNegInf => return V::I(i128::from(x == f64::NEG_INFINITY)),
        _ => panic!("the interpreter does not do {op:?}"),
    };
    V::F(round_float(ty, r))
}

fn binary(op: BinaryOp, operand_ty: Scalar, a: V, b: V) -> V {
    if op.is_comparison() {
        let r = match (a, b) {
            (V::I(x), V::I(y)) => match op {
                BinaryOp::Eq => x == y,
                BinaryOp::Lt => x < y,
                BinaryOp::Le => x <= y,
                BinaryOp::Gt => x > y,
                _ => x >= y,
            },
            _ => {
                let (x, y) = (a.f(), b.f());
                match op {
                    BinaryOp::Eq => x == y,
                    BinaryOp::Lt => x < y,
                    BinaryOp::Le => x <= y,
                    BinaryOp::Gt => x > y,
                    _ => x >= y,
                }
            }
        };
        return V::I(i128::from(r));
    }
    if operand_ty.is_float() {
        let (x, y) = (a.f(), b.f());
        let r = match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Rem => x % y,
            BinaryOp::FloorMod => {
                let r = x % y;
                if r != 0.0 && (r < 0.0) != (y < 0.0) {
                    r + y
                } else {
                    r
                }
            }
            BinaryOp::Pow => x.powf(y),
            BinaryOp::Min => {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.min(y)
                }
            }
            BinaryOp::Max => {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.max(y)
                }
            }
            _ => panic!("{op:?} of floats"),
        };
        return V::F(round_float(operand_ty, r));
    }
    let (x, y) = (a.i(), b.i());
    let bits = operand_ty.size() as i128 * 8;
    let r = match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x.wrapping_mul(y),
        BinaryOp::Div => {
            if y == 0 {
                0
            } else {
                x / y
            }
        }
        BinaryOp::Rem => {
            if y == 0 {
                0
            } else {
                x % y
            }
        }
        BinaryOp::FloorMod => {
            if y == 0 {
                0
            } else {
                x.rem_euclid(y) + if y < 0 && x.rem_euclid(y) != 0 { y } else { 0 }
            }
        }
        BinaryOp::Min => x.min(y),
        BinaryOp::Max => x.max(y),
        BinaryOp::And => i128::from(x != 0 && y != 0),
        BinaryOp::Or => i128::from(x != 0 || y != 0),
        BinaryOp::Xor => i128::from((x != 0) != (y != 0)),
        BinaryOp::BitAnd => x & y,
        BinaryOp::BitOr => x | y,
        BinaryOp::BitXor => x ^ y,
        BinaryOp::Shl => {
            if y >= bits {
                0
            } else {
                x << y
            }
        }
        BinaryOp::Shr => {
            if y >= bits {
                0
            } else {
                x >> y
            }
        }
        BinaryOp::Pow => {
            let mut r: i128 = 1;
            for _ in 0..y.max(0) {
                r = wrap(operand_ty, r.wrapping_mul(x));
            }
            r
        }
        _ => unreachable!(),
    };
    V::I(wrap(operand_ty, r))
}

/// Evaluates a stage's instructions at loop point `idx`.
fn eval(
    mem: &Memory,
    k: &LoopKernel,
    insts: &[Inst],
    idx: &[i64],
    accs: &[Option<V>],
    name: &str,
) -> Vec<V> {
    let mut vals: Vec<V> = Vec::with_capacity(insts.len());
    for inst in insts {
        let v = match &inst.kind {
            InstKind::Load { view } => load(mem, &k.views[*view as usize], idx, 0, name),
            InstKind::LoadIndirect { view, indices } => {
                let mut extra = 0i128;
                for ix in indices {
                    let mut i = vals[ix.index as usize].i();
                    let limit = ix.limit as i128;
                    if i < 0 {
                        i += limit;
                    }
                    let i = i.clamp(0, limit - 1);
                    extra += i * ix.stride as i128;
                }
                load(mem, &k.views[*view as usize], idx, extra, name)
            }
            InstKind::Const { bits } => const_value(inst.ty, *bits),
            InstKind::Index { axis } => V::I(i128::from(idx[*axis as usize])),
            InstKind::Acc { stage } => accs[*stage as usize].expect("an earlier reduction"),
            InstKind::Unary { op, arg } => unary(*op, inst.ty, vals[*arg as usize]),
            InstKind::Binary { op, lhs, rhs } => binary(
                *op,
                insts[*lhs as usize].ty,
                vals[*lhs as usize],
                vals[*rhs as usize],
            ),
            InstKind::Select { cond, then, else_ } => {
                if vals[*cond as usize].i() != 0 {
                    vals[*then as usize]
                } else {
                    vals[*else_ as usize]
                }
            }
            InstKind::Cast { arg } => {
                convert(vals[*arg as usize], insts[*arg as usize].ty, inst.ty)
            }
        };
        vals.push(v);
    }
    vals
}

/// Calls `f` with every point of `extents` in row-major order.
fn for_each_point(extents: &[u64], mut f: impl FnMut(&[i64])) {
    if extents.contains(&0) {
        return;
    }
    let mut idx = vec![0i64; extents.len()];
    loop {
        f(&idx);
        let mut a = extents.len();
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            idx[a] += 1;
            if (idx[a] as u64) < extents[a] {
                break;
            }
            idx[a] = 0;
        }
    }
}

fn store(mem: &mut Memory, view: &View, idx: &[i64], v: V, name: &str) {
    let elems: i128 = view
        .strides
        .iter()
        .zip(idx)
        .map(|(&s, &i)| s as i128 * i as i128)
        .sum();
    let byte = view.byte_offset as i128 + elems * view.elem.size() as i128;
    assert_eq!(
        view.region,
        Region::Arena,
        "{name}: a store into the weights"
    );
    write(&mut mem.arena, byte, view.elem, v, name);
}

fn run_loop(k: &LoopKernel, mem: &mut Memory, name: &str) {
    let n_outer = k.outer.len();
    for_each_point(&k.outer, |outer| {
        let mut accs: Vec<Option<V>> = Vec::with_capacity(k.stages.len());
        for stage in &k.stages {
            match stage {
                Stage::Reduce {
                    insts,
                    value,
                    op,
                    init,
                    ty,
                } => {
                    let mut acc = const_value(*ty, *init);
                    let mut best: Option<V> = None;
                    let mut linear = 0i64;
                    for_each_point(&k.inner, |inner| {
                        let idx: Vec<i64> = outer.iter().chain(inner).copied().collect();
                        let vals = eval(mem, k, insts, &idx, &accs, name);
                        let v = vals[*value as usize];
                        let vty = insts[*value as usize].ty;
                        acc = match op {
                            ReduceOp::Sum => binary(BinaryOp::Add, vty, acc, v),
                            ReduceOp::Prod => binary(BinaryOp::Mul, vty, acc, v),
                            ReduceOp::Max => binary(BinaryOp::Max, vty, acc, v),
                            ReduceOp::Min => binary(BinaryOp::Min, vty, acc, v),
                            ReduceOp::ArgMax { last } | ReduceOp::ArgMin { last } => {
                                let better = match best {
                                    None => true,
                                    Some(b) => {
                                        let cmp = if matches!(op, ReduceOp::ArgMax { .. }) {
                                            if *last {
                                                BinaryOp::Ge
                                            } else {
                                                BinaryOp::Gt
                                            }
                                        } else if *last {
                                            BinaryOp::Le
                                        } else {
                                            BinaryOp::Lt
                                        };
                                        binary(cmp, vty, v, b).i() != 0
                                    }
                                };
                                if better {
                                    best = Some(v);
                                    V::I(i128::from(linear))
                                } else {
                                    acc
                                }
                            }
                        };
                        linear += 1;
                    });
                    accs.push(Some(acc));
                }
                Stage::Map { insts, stores } => {
                    let run_at = |idx: &[i64], mem: &mut Memory| {
                        let vals = eval(mem, k, insts, idx, &accs, name);
                        for s in stores {
                            store(
                                mem,
                                &k.views[s.view as usize],
                                idx,
                                vals[s.value as usize],
                                name,
                            );
                        }
                    };
                    if k.inner.is_empty() {
                        run_at(outer, mem);
                    } else {
                        let mut points = Vec::new();
                        for_each_point(&k.inner, |inner| {
                            points.push(outer.iter().chain(inner).copied().collect::<Vec<i64>>())
                        });
                        for idx in points {
                            run_at(&idx, mem);
                        }
                    }
                    accs.push(None);
                }
                Stage::Once { insts, stores } => {
                    let mut idx = outer.to_vec();
                    idx.resize(n_outer + k.inner.len(), 0);
                    let vals = eval(mem, k, insts, &idx, &accs, name);
                    for s in stores {
                        store(
                            mem,
                            &k.views[s.view as usize],
                            &idx,
                            vals[s.value as usize],
                            name,
                        );
                    }
                    accs.push(None);
                }
            }
        }
    });
}

fn run_contract(c: &Contract, mem: &mut Memory, name: &str) {
    let size = c.elem.size() as i128;
    let at = |v: &memc_codegen::kernel::MatView, b: &[i64], r: u64, col: u64| -> i128 {
        let e: i128 = v
            .batch_strides
            .iter()
            .zip(b)
            .map(|(&s, &i)| s as i128 * i as i128)
            .sum::<i128>()
            + r as i128 * v.row_stride as i128
            + col as i128 * v.col_stride as i128;
        v.byte_offset as i128 + e * size
    };
    let alpha = f64::from_bits(c.alpha);
    for_each_point(&c.batch, |b| {
        for i in 0..c.m {
            for j in 0..c.n {
                let mut s = 0.0f64;
                for kk in 0..c.k {
                    let x = read(region(mem, c.a.region), at(&c.a, b, i, kk), c.elem, name).f();
                    let y = read(region(mem, c.b.region), at(&c.b, b, kk, j), c.elem, name).f();
                    s += x * y;
                }
                let mut r = alpha * s;
                let dst = at(&c.c, b, i, j);
                if c.accumulate {
                    r += read(&mem.arena, dst, c.elem, name).f();
                }
                write(
                    &mut mem.arena,
                    dst,
                    c.elem,
                    V::F(round_float(c.elem, r)),
                    name,
                );
            }
        }
    });
}

/// A low-bit product, value by value from the packed layout's definition, summed in f64.
fn run_nbits(q: &memc_codegen::kernel::NBitsMatMul, mem: &mut Memory, name: &str) {
    let f32_at = |bytes: &[u8], byte: u64| match read(bytes, byte as i128, Scalar::F32, name) {
        V::F(x) => x,
        other => panic!("{name}: an f32 read gave {other:?}"),
    };
    let kb = q.k_blocks();
    for r in 0..q.rows() {
        let a_at = q.row_offset(&q.a, r) as i128;
        let c_at = q.row_offset(&q.c, r) as i128;
        for n in 0..q.n {
            let mut acc = 0f64;
            for k in 0..q.k {
                let p = (n * kb + k / q.block) * 4;
                let zp = q
                    .zero_points
                    .map_or(0, |z| q.zero_point(&mem.weights[z as usize..], n, k));
                let scale = f32_at(&mem.weights, q.scales + p);
                let packed = &mem.weights[q.b as usize..];
                let w = ((q.quantized(packed, n, k) - zp) as f32 * scale as f32) as f64;
                let a = match read(
                    region(mem, q.a.region),
                    a_at + 4 * k as i128,
                    Scalar::F32,
                    name,
                ) {
                    V::F(x) => x,
                    other => panic!("{name}: an f32 read gave {other:?}"),
                };
                acc += a * w;
            }
            if let Some((bias_region, offset)) = q.bias {
                acc += f32_at(region(mem, bias_region), offset + 4 * n);
            }
            write(
                &mut mem.arena,
                c_at + 4 * n as i128,
                Scalar::F32,
                V::F(round_float(Scalar::F32, acc)),
                name,
            );
        }
    }
}

pub fn run_kernel(kernel: &Kernel, mem: &mut Memory) {
    match &kernel.body {
        KernelBody::Loop(k) => run_loop(k, mem, &kernel.name),
        KernelBody::Contract(c) => run_contract(c, mem, &kernel.name),
        KernelBody::NBits(q) => run_nbits(q, mem, &kernel.name),
    }
}
