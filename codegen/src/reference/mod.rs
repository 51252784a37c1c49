//! The reference backend: an interpreter of the kernel IR, the oracle every other backend (the
//! Cranelift JIT in `cpu`, the PTX backend to come) is compared with.
//!
//! It is written from the contract in [`crate::kernel`] (and the packed layout in
//! [`crate::nbits`]) and nothing else, as literally as possible: every instruction is evaluated
//! at every loop point in the order the contract names, values are held wide (`f64`, `i128`)
//! and rounded or wrapped to their kernel type after every operation, contractions and low-bit
//! products are summed in `f64`. It shares no code with a backend, so a bug in a backend's
//! lowering of a primitive shows up as a difference.
//!
//! # Guarantees
//!
//! - Every address is checked against the region slices it is given, every instruction operand,
//!   view and stage reference against the kernel: a kernel that would read or write outside its
//!   regions, or store into the weights, is reported as a [`ReferenceError`] naming the kernel,
//!   and the run stops there. It never panics, on any kernel, validated or not (so it also
//!   checks what [`crate::kernel::Kernel::validate`] claims).
//! - It needs no code generator and no thread pool (no cranelift, gemm or rayon), so it is
//!   there in every build of the crate, whatever its cargo features.
//! - It is slow: it evaluates every instruction at every loop point, with no compilation and
//!   no threads. [`cost`] estimates the work of a program, so callers can bound what they run
//!   through it (the ONNX node tests run only programs below a bound through it).

mod scalar;

use crate::kernel::NBitsMatMul;
use crate::kernel::{
    BinaryOp, Contract, ContractB, IndirectIndex, Inst, InstKind, Kernel, KernelBody, LoopKernel,
    MatView, ReduceOp, Region, Scalar, Stage, View,
};
use crate::nbits::row_bytes;
use crate::Program;
use scalar::{binary, const_value, convert, decode, encode, round_float, unary, V};
use thiserror::Error;

/// Why the reference backend stopped.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum ReferenceError {
    /// An access outside its region.
    #[error("kernel `{kernel}`: {access} of {width} bytes at byte {byte} of the {region:?} region, which has {len} bytes")]
    OutOfBounds {
        kernel: String,
        /// `"read"` or `"write"`.
        access: &'static str,
        region: Region,
        byte: i128,
        width: u64,
        len: u64,
    },
    /// A store (or a contraction's or low-bit product's result) into the read-only weights.
    #[error("kernel `{kernel}`: a store into the read-only weights")]
    StoreIntoWeights { kernel: String },
    /// A kernel the contract gives no meaning to (an operand that names no earlier
    /// instruction, a float function of an integer, an unknown view, ...).
    #[error("kernel `{kernel}`: {message}")]
    Malformed { kernel: String, message: String },
    /// A graph input or output that does not fit its region, or input bytes of the wrong size.
    #[error("{0}")]
    Io(String),
}

/// Runs every kernel of a program without persistent state in order over `arena`
/// (read-write) and `weights` (the weights section, read-only). The slices' lengths are the
/// bounds every access is checked against.
pub fn run(program: &Program, arena: &mut [u8], weights: &[u8]) -> Result<(), ReferenceError> {
    run_with_state(program, arena, weights, &mut [])
}

/// [`run`] with the persistent state (read-write) too.
pub fn run_with_state(
    program: &Program,
    arena: &mut [u8],
    weights: &[u8],
    state: &mut [u8],
) -> Result<(), ReferenceError> {
    for kernel in program.kernels() {
        run_kernel_with_state(kernel, arena, weights, state)?;
    }
    Ok(())
}

/// Runs one kernel over `arena` and `weights` (and no state).
pub fn run_kernel(kernel: &Kernel, arena: &mut [u8], weights: &[u8]) -> Result<(), ReferenceError> {
    run_kernel_with_state(kernel, arena, weights, &mut [])
}

/// Runs one kernel over `arena`, `weights` and `state`.
pub fn run_kernel_with_state(
    kernel: &Kernel,
    arena: &mut [u8],
    weights: &[u8],
    state: &mut [u8],
) -> Result<(), ReferenceError> {
    let mut mem = Memory {
        arena,
        weights,
        state,
        kernel: &kernel.name,
    };
    match &kernel.body {
        KernelBody::Loop(k) => run_loop(k, &mut mem),
        KernelBody::Contract(c) => run_contract(c, &mut mem),
        KernelBody::NBits(q) => run_nbits(q, &mut mem),
    }
}

/// Runs `program` on fresh memory: a zeroed arena and a zeroed state of the program's sizes,
/// the graph inputs' bytes (little-endian, in the program's input order) copied to their
/// places; returns the graph outputs' bytes in the program's output order (an output with a
/// run-time extent trimmed to it, see [`run_outputs`]).
pub fn run_on_inputs(
    program: &Program,
    weights: &[u8],
    inputs: &[&[u8]],
) -> Result<Vec<Vec<u8>>, ReferenceError> {
    Ok(run_outputs(program, weights, inputs)?
        .into_iter()
        .map(|(_, bytes)| bytes)
        .collect())
}

/// [`run_on_inputs`] with each output's shape: its planned shape, or, for an output with a
/// run-time extent, that shape with the extent its slot holds after the run (an extent outside
/// `[0, bound]` is an error) and only the kept elements.
pub fn run_outputs(
    program: &Program,
    weights: &[u8],
    inputs: &[&[u8]],
) -> Result<Vec<(Vec<u64>, Vec<u8>)>, ReferenceError> {
    let arena_size = usize::try_from(program.arena_size)
        .map_err(|_| ReferenceError::Io("the arena does not fit this machine".into()))?;
    let mut arena = vec![0u8; arena_size];
    if inputs.len() != program.inputs.len() {
        return Err(ReferenceError::Io(format!(
            "{} inputs given, the program has {}",
            inputs.len(),
            program.inputs.len()
        )));
    }
    for (io, bytes) in program.inputs.iter().zip(inputs) {
        if bytes.len() as u64 != io.byte_size() {
            return Err(ReferenceError::Io(format!(
                "input `{}` has {} bytes, it needs {}",
                io.name,
                bytes.len(),
                io.byte_size()
            )));
        }
        io_range(io.byte_offset, bytes.len(), arena.len(), &io.name)
            .map(|r| arena[r].copy_from_slice(bytes))?;
    }
    let state_size = usize::try_from(program.state_size)
        .map_err(|_| ReferenceError::Io("the state does not fit this machine".into()))?;
    let mut state = vec![0u8; state_size];
    run_with_state(program, &mut arena, weights, &mut state)?;
    program
        .outputs
        .iter()
        .map(|io| {
            let region: &[u8] = match io.region {
                Region::Arena => &arena,
                Region::Weights => weights,
                Region::State => &state,
            };
            io.read_output(region, &arena).map_err(ReferenceError::Io)
        })
        .collect()
}

/// The bytes `[offset, offset + n)` of a region of `len` bytes, if they are inside it.
fn io_range(
    offset: u64,
    n: usize,
    len: usize,
    name: &str,
) -> Result<std::ops::Range<usize>, ReferenceError> {
    usize::try_from(offset)
        .ok()
        .and_then(|at| Some(at..at.checked_add(n)?))
        .filter(|r| r.end <= len)
        .ok_or_else(|| ReferenceError::Io(format!("`{name}` lies outside its region")))
}

/// An estimate of the scalar operations the reference performs for `program` (instructions
/// times loop points, multiply-adds of products), saturating; for bounding what is run
/// through it.
pub fn cost(program: &Program) -> u64 {
    program
        .kernels()
        .fold(0u64, |acc, k| acc.saturating_add(kernel_cost(k)))
}

/// The part of [`cost`] one kernel contributes.
pub fn kernel_cost(kernel: &Kernel) -> u64 {
    let product = |extents: &[u64]| extents.iter().fold(1u64, |acc, &e| acc.saturating_mul(e));
    match &kernel.body {
        KernelBody::Loop(k) => {
            let inner = product(&k.inner);
            let per_outer = k.stages.iter().fold(0u64, |acc, stage| {
                let (points, insts) = match stage {
                    Stage::Reduce { insts, .. } => (inner, insts.len()),
                    Stage::Map { insts, .. } => (inner, insts.len()),
                    Stage::Once { insts, .. } => (1, insts.len()),
                };
                acc.saturating_add(points.saturating_mul(insts.max(1) as u64))
            });
            product(&k.outer).saturating_mul(per_outer)
        }
        KernelBody::Contract(c) => product(&c.batch)
            .saturating_mul(c.m)
            .saturating_mul(c.n)
            .saturating_mul(c.k.max(1)),
        KernelBody::NBits(q) => q.rows().saturating_mul(q.n).saturating_mul(q.k.max(1)),
    }
}

/// The regions one kernel runs over, and its name for errors.
struct Memory<'a> {
    arena: &'a mut [u8],
    weights: &'a [u8],
    state: &'a mut [u8],
    kernel: &'a str,
}

impl Memory<'_> {
    fn malformed(&self, message: impl Into<String>) -> ReferenceError {
        ReferenceError::Malformed {
            kernel: self.kernel.to_string(),
            message: message.into(),
        }
    }

    fn region(&self, region: Region) -> &[u8] {
        match region {
            Region::Arena => self.arena,
            Region::Weights => self.weights,
            Region::State => self.state,
        }
    }

    fn out_of_bounds(
        &self,
        access: &'static str,
        region: Region,
        byte: i128,
        ty: Scalar,
    ) -> ReferenceError {
        ReferenceError::OutOfBounds {
            kernel: self.kernel.to_string(),
            access,
            region,
            byte,
            width: ty.size(),
            len: self.region(region).len() as u64,
        }
    }

    /// The bytes of an element of type `ty` at `byte`, if they are inside `len` bytes.
    fn span(byte: i128, ty: Scalar, len: usize) -> Option<std::ops::Range<usize>> {
        let end = byte.checked_add(i128::from(ty.size()))?;
        (byte >= 0 && end <= len as i128).then_some(byte as usize..end as usize)
    }

    fn read(&self, region: Region, byte: i128, ty: Scalar) -> Result<V, ReferenceError> {
        let bytes = self.region(region);
        match Self::span(byte, ty, bytes.len()) {
            Some(r) => Ok(decode(ty, &bytes[r])),
            None => Err(self.out_of_bounds("read", region, byte, ty)),
        }
    }

    fn write(
        &mut self,
        region: Region,
        byte: i128,
        ty: Scalar,
        v: V,
    ) -> Result<(), ReferenceError> {
        let bytes: &mut [u8] = match region {
            Region::Arena => self.arena,
            Region::State => self.state,
            Region::Weights => {
                return Err(ReferenceError::StoreIntoWeights {
                    kernel: self.kernel.to_string(),
                })
            }
        };
        match Self::span(byte, ty, bytes.len()) {
            Some(r) => {
                let n = r.len();
                bytes[r].copy_from_slice(&encode(ty, v)[..n]);
                Ok(())
            }
            None => Err(self.out_of_bounds("write", region, byte, ty)),
        }
    }
}

/// `sum_a strides[a] * idx[a]` in elements; a view with fewer strides than axes reads the
/// missing ones as 0.
fn dot(strides: &[i64], idx: &[i64]) -> i128 {
    strides
        .iter()
        .zip(idx)
        .map(|(&s, &i)| i128::from(s) * i128::from(i))
        .sum()
}

/// The byte address of `view`'s element at `idx` plus `extra` elements.
fn address(view: &View, idx: &[i64], extra: i128) -> i128 {
    i128::from(view.byte_offset) + (dot(&view.strides, idx) + extra) * i128::from(view.elem.size())
}

/// The element of `view` at loop point `idx` plus `extra` elements, or its pad where a guard
/// fails.
fn load(mem: &Memory, view: &View, idx: &[i64], extra: i128) -> Result<V, ReferenceError> {
    for g in &view.guards {
        let v = i128::from(g.offset) + dot(&g.coeffs, idx);
        if v < 0 || v >= i128::from(g.limit) {
            // The pad as a stored element would read: converted to the compute type, then
            // narrowed and widened.
            let pad = convert(
                V::F(f64::from_bits(view.pad)),
                Scalar::F64,
                view.elem.compute(),
            );
            return Ok(decode(view.elem, &encode(view.elem, pad)));
        }
    }
    mem.read(view.region, address(view, idx, extra), view.elem)
}

/// The element offset of indirect terms `indices`, each index (read with `value`) wrapped when
/// negative and clamped into `[0, limit)`.
fn indirect_extra(
    mem: &Memory,
    indices: &[IndirectIndex],
    value: impl Fn(u32) -> Result<V, ReferenceError>,
) -> Result<i128, ReferenceError> {
    let mut extra = 0i128;
    for ix in indices {
        let limit = i128::from(ix.limit);
        if limit <= 0 {
            return Err(mem.malformed(format!("an indirect index with limit {limit}")));
        }
        let mut i = value(ix.index)?.i();
        if i < 0 {
            i += limit;
        }
        extra += i.clamp(0, limit - 1) * i128::from(ix.stride);
    }
    Ok(extra)
}

/// Evaluates a stage's instructions at loop point `idx` into `vals` (cleared first).
fn eval(
    mem: &Memory,
    k: &LoopKernel,
    insts: &[Inst],
    idx: &[i64],
    accs: &[Option<V>],
    vals: &mut Vec<V>,
) -> Result<(), ReferenceError> {
    vals.clear();
    for (at, inst) in insts.iter().enumerate() {
        let operand = |id: u32| -> Result<(V, Scalar), ReferenceError> {
            let i = id as usize;
            match (vals.get(i), insts.get(i)) {
                (Some(&v), Some(inst)) if i < at => Ok((v, inst.ty)),
                _ => Err(mem.malformed(format!(
                    "instruction {at} names {id}, which is not an earlier instruction"
                ))),
            }
        };
        let view = |v: u32| {
            k.views.get(v as usize).ok_or_else(|| {
                mem.malformed(format!(
                    "instruction {at} loads view {v}, which does not exist"
                ))
            })
        };
        let v = match &inst.kind {
            InstKind::Load { view: v } => load(mem, view(*v)?, idx, 0)?,
            InstKind::LoadIndirect { view: v, indices } => {
                let extra = indirect_extra(mem, indices, |id| Ok(operand(id)?.0))?;
                load(mem, view(*v)?, idx, extra)?
            }
            InstKind::Const { bits } => const_value(inst.ty, *bits),
            InstKind::Index { axis } => match idx.get(*axis as usize) {
                Some(&i) => V::I(i128::from(i)),
                None => return Err(mem.malformed(format!("the index of axis {axis}, which the loop does not have"))),
            },
            InstKind::Acc { stage } => match accs.get(*stage as usize) {
                Some(Some(acc)) => *acc,
                _ => {
                    return Err(mem.malformed(format!(
                        "instruction {at} reads the accumulator of stage {stage}, which is not an earlier reduction"
                    )))
                }
            },
            InstKind::Unary { op, arg } => {
                let (a, _) = operand(*arg)?;
                unary(*op, inst.ty, a)
                    .ok_or_else(|| mem.malformed(format!("{op:?} of {}", inst.ty.name())))?
            }
            InstKind::Binary { op, lhs, rhs } => {
                let (a, ty) = operand(*lhs)?;
                let (b, _) = operand(*rhs)?;
                binary(*op, ty, a, b)
                    .ok_or_else(|| mem.malformed(format!("{op:?} of {}", ty.name())))?
            }
            InstKind::Select { cond, then, else_ } => {
                if operand(*cond)?.0.i() != 0 {
                    operand(*then)?.0
                } else {
                    operand(*else_)?.0
                }
            }
            InstKind::Cast { arg } => {
                let (a, ty) = operand(*arg)?;
                convert(a, ty, inst.ty)
            }
            InstKind::Narrow { arg, to } => {
                let (a, _) = operand(*arg)?;
                decode(*to, &encode(*to, a))
            }
        };
        vals.push(v);
    }
    Ok(())
}

/// Steps `idx[axes]` through every point of `extents` in row-major order; returns false after
/// the last point (leaving those axes at 0).
fn advance(idx: &mut [i64], axes: std::ops::Range<usize>, extents: &[u64]) -> bool {
    for (a, &extent) in axes.zip(extents).rev() {
        idx[a] += 1;
        if (idx[a] as u64) < extent {
            return true;
        }
        idx[a] = 0;
    }
    false
}

/// The value `insts[id]` of an evaluated stage.
fn value_of(mem: &Memory, vals: &[V], id: u32) -> Result<V, ReferenceError> {
    vals.get(id as usize).copied().ok_or_else(|| {
        mem.malformed(format!(
            "a stage's value {id} is not one of its instructions"
        ))
    })
}

/// Stores `vals[s.value]` for every store at loop point `idx`: at the address plus the store's
/// indirect terms, added to the element already there when the store accumulates.
fn store_all(
    mem: &mut Memory,
    k: &LoopKernel,
    stores: &[crate::kernel::Store],
    idx: &[i64],
    vals: &[V],
) -> Result<(), ReferenceError> {
    for s in stores {
        let view = k.views.get(s.view as usize).ok_or_else(|| {
            mem.malformed(format!(
                "a store into view {}, which does not exist",
                s.view
            ))
        })?;
        let mut v = value_of(mem, vals, s.value)?;
        let extra = indirect_extra(mem, &s.indices, |id| value_of(mem, vals, id))?;
        let at = address(view, idx, extra);
        if s.accumulate {
            let old = mem.read(view.region, at, view.elem)?;
            v = binary(BinaryOp::Add, view.elem.compute(), old, v).ok_or_else(|| {
                mem.malformed(format!("an accumulating store of {}", view.elem.name()))
            })?;
        }
        mem.write(view.region, at, view.elem, v)?;
    }
    Ok(())
}

fn run_loop(k: &LoopKernel, mem: &mut Memory) -> Result<(), ReferenceError> {
    let (n_outer, n_axes) = (k.outer.len(), k.n_axes());
    if k.outer.contains(&0) {
        return Ok(());
    }
    // With an empty inner space a reduction folds nothing and a map stores nothing.
    let no_inner_points = k.inner.contains(&0);
    if k.outer.iter().chain(&k.inner).any(|&e| e > i64::MAX as u64) {
        return Err(mem.malformed("a loop extent does not fit i64"));
    }
    let mut idx = vec![0i64; n_axes];
    let mut vals = Vec::new();
    let mut accs: Vec<Option<V>> = Vec::with_capacity(k.stages.len());
    loop {
        accs.clear();
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
                    let mut linear = 0i128;
                    let mut more = !no_inner_points;
                    while more {
                        eval(mem, k, insts, &idx, &accs, &mut vals)?;
                        let v = value_of(mem, &vals, *value)?;
                        let vty = insts[*value as usize].ty;
                        let fold = |op, acc| {
                            binary(op, vty, acc, v).ok_or_else(|| {
                                mem.malformed(format!("a {op:?} reduction of {}", vty.name()))
                            })
                        };
                        acc = match op {
                            ReduceOp::Sum => fold(BinaryOp::Add, acc)?,
                            ReduceOp::Prod => fold(BinaryOp::Mul, acc)?,
                            ReduceOp::Max => fold(BinaryOp::Max, acc)?,
                            ReduceOp::Min => fold(BinaryOp::Min, acc)?,
                            ReduceOp::ArgMax { last } | ReduceOp::ArgMin { last } => {
                                use BinaryOp::{Ge, Gt, Le, Lt};
                                let better = match best {
                                    None => true,
                                    Some(b) => {
                                        let cmp = match (op, last) {
                                            (ReduceOp::ArgMax { .. }, true) => Ge,
                                            (ReduceOp::ArgMax { .. }, false) => Gt,
                                            (_, true) => Le,
                                            (_, false) => Lt,
                                        };
                                        binary(cmp, vty, v, b).is_some_and(|r| r.i() != 0)
                                    }
                                };
                                if better {
                                    best = Some(v);
                                    V::I(linear)
                                } else {
                                    acc
                                }
                            }
                        };
                        linear += 1;
                        more = advance(&mut idx, n_outer..n_axes, &k.inner);
                    }
                    accs.push(Some(acc));
                }
                Stage::Map { insts, stores } => {
                    let mut more = !no_inner_points;
                    while more {
                        eval(mem, k, insts, &idx, &accs, &mut vals)?;
                        store_all(mem, k, stores, &idx, &vals)?;
                        more = advance(&mut idx, n_outer..n_axes, &k.inner);
                    }
                    accs.push(None);
                }
                Stage::Once { insts, stores } => {
                    // The inner indices read as 0 here: `advance` leaves them there.
                    eval(mem, k, insts, &idx, &accs, &mut vals)?;
                    store_all(mem, k, stores, &idx, &vals)?;
                    accs.push(None);
                }
            }
        }
        if !advance(&mut idx, 0..n_outer, &k.outer) {
            return Ok(());
        }
    }
}

/// The byte address of element `(b, r, col)` of a matrix view with elements of `size` bytes.
fn mat_address(v: &MatView, b: &[i64], r: u64, col: u64, size: u64) -> i128 {
    let e = dot(&v.batch_strides, b)
        + i128::from(r) * i128::from(v.row_stride)
        + i128::from(col) * i128::from(v.col_stride);
    i128::from(v.byte_offset) + e * i128::from(size)
}

fn run_contract(c: &Contract, mem: &mut Memory) -> Result<(), ReferenceError> {
    if !c.elem.is_float() {
        return Err(mem.malformed(format!("a contraction of {}", c.elem.name())));
    }
    if c.batch.iter().any(|&e| e > i64::MAX as u64) {
        return Err(mem.malformed("a batch extent does not fit i64"));
    }
    if c.batch.contains(&0) {
        return Ok(());
    }
    if let ContractB::Im2col(view) = &c.b {
        // Its own rules first: they keep the window arithmetic from dividing by zero or
        // overflowing.
        view.validate(c.k, c.n)
            .map_err(|message| mem.malformed(message))?;
    }
    let size = c.elem.size();
    let alpha = f64::from_bits(c.alpha);
    let mut b = vec![0i64; c.batch.len()];
    loop {
        for i in 0..c.m {
            for j in 0..c.n {
                let mut s = 0.0f64;
                for kk in 0..c.k {
                    let x = mem.read(c.a.region, mat_address(&c.a, &b, i, kk, size), c.elem)?;
                    let y = match &c.b {
                        ContractB::Mat(view) => {
                            mem.read(view.region, mat_address(view, &b, kk, j, size), c.elem)?
                        }
                        ContractB::Im2col(view) => match view.offset(kk, j) {
                            // Padding reads 0.
                            None => V::F(0.0),
                            Some(e) => {
                                let e = dot(&view.batch_strides, &b) + i128::from(e);
                                let address = i128::from(view.byte_offset) + e * i128::from(size);
                                mem.read(view.region, address, c.elem)?
                            }
                        },
                    };
                    s += x.f() * y.f();
                }
                let mut r = alpha * s;
                let dst = mat_address(&c.c, &b, i, j, size);
                if c.accumulate {
                    r += mem.read(c.c.region, dst, c.elem)?.f();
                }
                mem.write(c.c.region, dst, c.elem, V::F(round_float(c.elem, r)))?;
            }
        }
        if !advance(&mut b, 0..c.batch.len(), &c.batch) {
            return Ok(());
        }
    }
}

/// The byte address of row `r` of a low-bit product's `view`: batch index `r / m` (row-major
/// over `batch`), row `r % m`; f32 elements.
fn row_address(q: &NBitsMatMul, view: &MatView, r: u64) -> i128 {
    let m = q.m.max(1);
    let (mut b, i) = (r / m, r % m);
    let mut e = i128::from(i) * i128::from(view.row_stride);
    for (&extent, &stride) in q.batch.iter().zip(&view.batch_strides).rev() {
        e += i128::from(b % extent.max(1)) * i128::from(stride);
        b /= extent.max(1);
    }
    i128::from(view.byte_offset) + 4 * e
}

/// A low-bit product, value by value from the packed layout's definition, summed in `f64`.
fn run_nbits(q: &NBitsMatMul, mem: &mut Memory) -> Result<(), ReferenceError> {
    if q.bits != 4 && q.bits != 8 {
        return Err(mem.malformed(format!("a {}-bit product", q.bits)));
    }
    if q.block == 0 {
        return Err(mem.malformed("a product with block 0"));
    }
    let kb = q.k_blocks();
    // The packed slots lie wholly inside the weights, so the layout's own decoders may index
    // them: `b` is `n` rows of `row_bytes`, the zero points `n * k_blocks` bytes.
    let slot = |at: u64, bytes: Option<u64>, what: &str| -> Result<usize, ReferenceError> {
        bytes
            .and_then(|n| at.checked_add(n))
            .filter(|&end| end <= mem.weights.len() as u64)
            .map(|_| at as usize)
            .ok_or_else(|| mem.malformed(format!("its {what} lie outside the weights")))
    };
    let b_at = slot(
        q.b,
        q.n.checked_mul(row_bytes(q.k, q.bits)),
        "packed values",
    )?;
    let zp_at = match q.zero_points {
        Some(z) => Some(slot(z, q.n.checked_mul(kb), "zero points")?),
        None => None,
    };
    for r in 0..q.rows() {
        let a_at = row_address(q, &q.a, r);
        let c_at = row_address(q, &q.c, r);
        for n in 0..q.n {
            let mut acc = 0f64;
            for k in 0..q.k {
                let zp = zp_at.map_or(0, |z| q.zero_point(&mem.weights[z..], n, k));
                let p = i128::from((n * kb + k / q.block) * 4);
                let scale = mem.read(Region::Weights, i128::from(q.scales) + p, Scalar::F32)?;
                let w = f64::from(
                    (q.quantized(&mem.weights[b_at..], n, k) - zp) as f32 * scale.f() as f32,
                );
                let a = mem.read(q.a.region, a_at + 4 * i128::from(k), Scalar::F32)?;
                acc += a.f() * w;
            }
            if let Some((bias_region, offset)) = q.bias {
                let at = i128::from(offset) + 4 * i128::from(n);
                acc += mem.read(bias_region, at, Scalar::F32)?.f();
            }
            let dst = c_at + 4 * i128::from(n);
            mem.write(
                q.c.region,
                dst,
                Scalar::F32,
                V::F(round_float(Scalar::F32, acc)),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Store, View};

    /// `out[i] = x[i] + 1.0` over `n` f32s, `x` at 0 and `out` at `out_offset` of `out_region`.
    fn add_one(n: u64, out_region: Region, out_offset: i64) -> Kernel {
        let view = |region, byte_offset| View {
            region,
            elem: Scalar::F32,
            byte_offset,
            strides: vec![1],
            guards: vec![],
            pad: 0,
        };
        let insts = vec![
            Inst {
                ty: Scalar::F32,
                kind: InstKind::Load { view: 0 },
            },
            Inst {
                ty: Scalar::F32,
                kind: InstKind::Const {
                    bits: 1f64.to_bits(),
                },
            },
            Inst {
                ty: Scalar::F32,
                kind: InstKind::Binary {
                    op: BinaryOp::Add,
                    lhs: 0,
                    rhs: 1,
                },
            },
        ];
        Kernel {
            name: "add_one".into(),
            body: KernelBody::Loop(LoopKernel {
                outer: vec![n],
                inner: vec![],
                views: vec![view(Region::Arena, 0), view(out_region, out_offset)],
                stages: vec![Stage::Map {
                    insts,
                    stores: vec![Store::new(1, 2)],
                }],
            }),
        }
    }

    #[test]
    fn runs_a_map() {
        let mut arena = [0u8; 16];
        arena[..4].copy_from_slice(&2f32.to_le_bytes());
        arena[4..8].copy_from_slice(&(-1f32).to_le_bytes());
        run_kernel(&add_one(2, Region::Arena, 8), &mut arena, &[]).expect("in bounds");
        assert_eq!(arena[8..12], 3f32.to_le_bytes());
        assert_eq!(arena[12..16], 0f32.to_le_bytes());
    }

    #[test]
    fn out_of_bounds_accesses_are_errors() {
        let mut arena = [0u8; 16];
        let err = run_kernel(&add_one(3, Region::Arena, 8), &mut arena, &[]).unwrap_err();
        assert_eq!(
            err,
            ReferenceError::OutOfBounds {
                kernel: "add_one".into(),
                access: "write",
                region: Region::Arena,
                byte: 16,
                width: 4,
                len: 16,
            }
        );
        let err = run_kernel(&add_one(5, Region::Arena, 0), &mut arena, &[]).unwrap_err();
        assert!(
            matches!(err, ReferenceError::OutOfBounds { access: "read", .. }),
            "{err}"
        );
    }

    #[test]
    fn stores_into_the_weights_are_errors() {
        let mut arena = [0u8; 8];
        let err = run_kernel(&add_one(1, Region::Weights, 0), &mut arena, &[0; 8]).unwrap_err();
        assert_eq!(
            err,
            ReferenceError::StoreIntoWeights {
                kernel: "add_one".into()
            }
        );
    }

    #[test]
    fn malformed_operands_are_errors() {
        let mut kernel = add_one(1, Region::Arena, 4);
        if let KernelBody::Loop(k) = &mut kernel.body {
            if let Stage::Map { insts, .. } = &mut k.stages[0] {
                insts[2].kind = InstKind::Binary {
                    op: BinaryOp::Add,
                    lhs: 0,
                    rhs: 2,
                };
            }
        }
        let err = run_kernel(&kernel, &mut [0u8; 8], &[]).unwrap_err();
        assert!(matches!(err, ReferenceError::Malformed { .. }), "{err}");
    }
}
