//! Elementwise ops and their fusion.
//!
//! Every op here is one `Map` kernel over its output shape (view 0 is the output; operands are
//! numpy-broadcast views, and scalar constants become `Const` instructions). The arithmetic of
//! each op lives in [`emit`], which computes the op's result from its operands' values at the
//! current loop point; a single op and a fused chain of ops share it, so fusing never changes
//! what an op computes. Element types follow the ONNX reference implementation; the storage
//! types (f16, bf16, float8, float4, 4- and 2-bit integers) compute in their compute type
//! (`kernel.rs`, "Element types"), rounded once when stored, and a fused chain rounds an
//! intermediate of a storage type with `Narrow` (a Cast to f16 inside a chain still rounds).
//! Cast follows ONNX's rules: `saturate` (default 1) clamps to the float8 types' largest
//! finite value (infinities included, NaN kept); to float8 E8M0 only with the defaults
//! (`round_mode = "up"`, `saturate = 1`), which its store implements; floats go to the 4- and 2-bit integers by
//! truncation into i64 and wrapping to the width (as ml_dtypes does for values in range; ONNX
//! leaves out-of-range values undefined). onnxruntime's `ms.*` activations and
//! their gradients follow onnxruntime's CPU kernels (`ms.Scale` reads its scale as an f32).
//!
//! Identity and Dropout are copies here only when the planner could not make them views.
//!
//! # Fusion
//!
//! [`chains`] groups runs of elementwise ops into one kernel, run at the step of the chain's last
//! op. A run `op_1, ..., op_n` (2 <= n <= the target's `max_fused_ops`) is fused only when all of these hold:
//!
//! 1. every `op_i` is an op [`emit`] computes (one with the table's `ELEMENTWISE` trait), with
//!    one result, and lowers on its own;
//! 2. the ops are consecutive in `plan.schedule` (nothing else runs between them, so no other
//!    op can write bytes the chain still reads);
//! 3. the result of every `op_i` but the last is used only by `op_{i+1}` (all its uses, counted
//!    with `Function::use_counts`, are operands of `op_{i+1}`; it is no graph output), so no one
//!    else needs it in memory: intermediates are never written;
//! 4. every intermediate's shape broadcasts (numpy rules, unidirectionally) into the next op's
//!    result shape, hence into the chain's output shape: computing it at an output point gives
//!    its element at the broadcast index, exactly what the next op would have read;
//! 5. the chain's output bytes do not partially overlap any arena tensor the chain reads. The
//!    planner reused memory assuming each op runs at its own step, so the output may sit on
//!    bytes of an input that an earlier op of the chain read last. Overlap is allowed only when
//!    the input starts at the output's offset with the output's shape and element size: the
//!    kernel reads element `p` before it writes element `p`, and nothing else.
//!
//! A run that breaks a condition ends the chain before the offending op, which may start a new
//! one.

mod axes;

pub(super) use axes::simplify_axes;

use super::build::{copy_kernel, map_kernel, Insts, TensorRef};
use super::{unsupported, LowerCtx, LowerError, LowerResult};
use crate::kernel::{BinaryOp, InstId, InstKind, Region, Scalar, UnaryOp, View, MAX_AXES};
use memc_ir::{OpId, Opcode, ValueId};
use std::collections::HashMap;

/// An op's part in a fused elementwise chain.
pub enum ChainRole {
    /// Fused into a later op of its chain: no kernel at this step.
    Inner,
    /// The chain's last op: its step runs the whole chain (ops in schedule order).
    Last(Vec<OpId>),
}

/// The fused chains of the function: every op in a chain of two or more has a role. See the
/// module doc for the conditions.
pub fn chains(ctx: &LowerCtx) -> HashMap<OpId, ChainRole> {
    let use_counts = ctx.func.use_counts();
    let counts = |value: ValueId| use_counts[value];
    let mut roles = HashMap::new();
    let mut chain: Vec<OpId> = Vec::new();
    for &op in &ctx.plan.schedule {
        if !fusable(ctx, op) {
            finish_chain(&mut chain, &mut roles);
            continue;
        }
        if let Some(&prev) = chain.last() {
            let extends =
                chain.len() < ctx.target.max_fused_ops && links(ctx, &counts, prev, op) && {
                    chain.push(op);
                    let ok = output_overlap_ok(ctx, &chain);
                    chain.pop();
                    ok
                };
            if extends {
                chain.push(op);
                continue;
            }
            finish_chain(&mut chain, &mut roles);
        }
        chain.push(op);
    }
    finish_chain(&mut chain, &mut roles);
    roles
}

/// Records `chain` when it has two ops or more, and empties it.
fn finish_chain(chain: &mut Vec<OpId>, roles: &mut HashMap<OpId, ChainRole>) {
    if chain.len() >= 2 {
        let (&last, inner) = chain
            .split_last()
            .expect("a chain of two ops has a last op");
        for &op in inner {
            roles.insert(op, ChainRole::Inner);
        }
        roles.insert(last, ChainRole::Last(chain.clone()));
    }
    chain.clear();
}

/// Condition 1: an op [`emit`] computes (the table's elementwise ops) that lowers on its own.
fn fusable(ctx: &LowerCtx, op: OpId) -> bool {
    let data = ctx.op(op);
    data.opcode.def().is_elementwise()
        && data.results.len() == 1
        && ctx.result_used(op, 0)
        && !ctx.is_planned_view(op)
        && map(ctx, op).is_ok()
}

/// Conditions 3 and 4: `prev`'s result feeds only `op`, and broadcasts into `op`'s result.
fn links(ctx: &LowerCtx, counts: &dyn Fn(ValueId) -> u32, prev: OpId, op: OpId) -> bool {
    let value = ctx.op(prev).results[0];
    let uses_in_op = ctx.op(op).operands.iter().filter(|&&v| v == value).count() as u32;
    if uses_in_op == 0 || counts(value) != uses_in_op {
        return false;
    }
    let (Ok(from), Ok(to)) = (ctx.tensor(value), ctx.result(op, 0)) else {
        return false;
    };
    broadcasts_into(&from.shape, &to.shape)
}

/// Condition 5 for `chain`, whose last op writes the output.
fn output_overlap_ok(ctx: &LowerCtx, chain: &[OpId]) -> bool {
    let Some(&last) = chain.last() else {
        return true;
    };
    let Ok(out) = ctx.result(last, 0) else {
        return false;
    };
    let results: Vec<ValueId> = chain.iter().map(|&op| ctx.op(op).results[0]).collect();
    let (out_lo, out_hi) = byte_range(&out);
    for &op in chain {
        for &value in &ctx.op(op).operands {
            if results.contains(&value) || ctx.func.value_type(value).is_none() {
                continue;
            }
            let Ok(input) = ctx.tensor(value) else {
                return false;
            };
            if input.region != Region::Arena {
                continue;
            }
            let (lo, hi) = byte_range(&input);
            let disjoint = hi <= out_lo || out_hi <= lo || lo == hi || out_lo == out_hi;
            let same_elements = input.byte_offset == out.byte_offset
                && input.shape == out.shape
                && input.elem.size() == out.elem.size();
            if !disjoint && !same_elements {
                return false;
            }
        }
    }
    true
}

fn byte_range(t: &TensorRef) -> (i128, i128) {
    let lo = t.byte_offset as i128;
    (lo, lo + t.numel() as i128 * t.elem.size() as i128)
}

/// Whether `from` broadcasts (numpy rules, aligned right) into `to` without changing `to`.
fn broadcasts_into(from: &[u64], to: &[u64]) -> bool {
    from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == 1)
}

/// Lowers a fused chain into one kernel.
pub fn lower_chain(ctx: &LowerCtx, chain: &[OpId]) -> LowerResult {
    let &last = chain
        .last()
        .ok_or_else(|| unsupported("an empty fused chain (a memc bug)"))?;
    let out = output(ctx, last)?;
    let mut kernel = KernelBuilder::new(&out);
    let mut prev: Option<(ValueId, InstId)> = None;
    for &op in chain {
        let args = kernel.operands(ctx, op, prev)?;
        let mut value = emit_checked(ctx, op, &mut kernel.insts, &args)?;
        let elem = ctx.result(op, 0)?.elem;
        if op != last && elem.is_storage_only() {
            // The intermediate is never stored: round it as its store would.
            let ty = elem.compute();
            value = kernel.insts.push(
                ty,
                InstKind::Narrow {
                    arg: value,
                    to: elem,
                },
            );
        }
        prev = Some((ctx.op(op).results[0], value));
    }
    let (_, value) = prev.ok_or_else(|| unsupported("an empty fused chain (a memc bug)"))?;
    let name = format!("{} (fused {} ops)", ctx.kernel_name(last, 0), chain.len());
    Ok(vec![simplify_axes(map_kernel(
        name,
        out.shape.clone(),
        kernel.views,
        kernel.insts,
        value,
    ))])
}

/// The result of `op` as a kernel output, of a rank kernels can loop over.
fn output(ctx: &LowerCtx, op: OpId) -> Result<TensorRef, LowerError> {
    let out = ctx.result(op, 0)?;
    if out.rank() > MAX_AXES {
        return Err(unsupported(format!(
            "rank {} (kernels loop over at most {MAX_AXES} axes)",
            out.rank()
        )));
    }
    Ok(out)
}

/// One elementwise op as one Map kernel.
pub(super) fn map(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let out = output(ctx, op)?;
    let mut kernel = KernelBuilder::new(&out);
    let args = kernel.operands(ctx, op, None)?;
    let value = emit_checked(ctx, op, &mut kernel.insts, &args)?;
    let name = ctx.kernel_name(op, 0);
    Ok(vec![simplify_axes(map_kernel(
        name,
        out.shape.clone(),
        kernel.views,
        kernel.insts,
        value,
    ))])
}

/// Identity that the planner did not make a view: a copy.
pub(super) fn identity(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let out = output(ctx, op)?;
    let input = ctx.input(op, 0)?;
    if input.shape != out.shape || input.elem != out.elem {
        return Err(unsupported(
            "a copy whose operand and result differ in type (a memc bug)",
        ));
    }
    let view = input.view_identity(0);
    Ok(vec![simplify_axes(copy_kernel(
        ctx.kernel_name(op, 0),
        &out,
        view,
        out.shape.clone(),
    ))])
}

/// Dropout in inference (or with ratio 0): the data copied, the mask all true.
pub(super) fn dropout(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let training = match ctx.operand(op, 2)? {
        None => false,
        Some(_) => match ctx.const_ints(op, 2) {
            Some(values) => values.first().is_some_and(|&v| v != 0),
            None => {
                return Err(unsupported(
                    "Dropout with a training_mode known only at run time",
                ))
            }
        },
    };
    if training {
        let ratio = match ctx.operand(op, 1)? {
            None => 0.5,
            Some(_) => ctx
                .const_floats(op, 1)
                .and_then(|r| r.first().copied())
                .ok_or_else(|| {
                    unsupported("Dropout in training mode with a ratio known only at run time")
                })?,
        };
        if ratio != 0.0 {
            return Err(unsupported("Dropout in training mode (random masks)"));
        }
    }
    let mut kernels = Vec::new();
    if !ctx.is_planned_view(op) {
        kernels.extend(identity(ctx, op)?);
    }
    if ctx.result_used(op, 1) {
        let mask = ctx.result(op, 1)?;
        let views = vec![mask.view_identity(0)];
        let mut insts = Insts::new();
        let one = insts.constant_int(mask.elem, 1);
        let name = ctx.kernel_name(op, 1);
        kernels.push(simplify_axes(map_kernel(
            name,
            mask.shape.clone(),
            views,
            insts,
            one,
        )));
    }
    Ok(kernels)
}

/// The views and instructions of one Map kernel under construction.
struct KernelBuilder {
    out_shape: Vec<u64>,
    views: Vec<View>,
    insts: Insts,
    /// Operands already loaded, so a tensor read twice is loaded once.
    loaded: HashMap<ValueId, InstId>,
}

impl KernelBuilder {
    fn new(out: &TensorRef) -> KernelBuilder {
        KernelBuilder {
            out_shape: out.shape.clone(),
            views: vec![out.view_identity(0)],
            insts: Insts::new(),
            loaded: HashMap::new(),
        }
    }

    /// The value of each operand of `op` at the current loop point (`None` where absent);
    /// `prev` is the previous op of a chain and its value.
    fn operands(
        &mut self,
        ctx: &LowerCtx,
        op: OpId,
        prev: Option<(ValueId, InstId)>,
    ) -> Result<Vec<Option<InstId>>, LowerError> {
        let operands = ctx.op(op).operands.clone();
        let mut args = Vec::with_capacity(operands.len());
        for (index, &value) in operands.iter().enumerate() {
            if ctx.op(op).opcode == Opcode::CastLike && index == 1 {
                // Only the element type of `target_type` matters, never its values.
                args.push(None);
                continue;
            }
            if let Some((prev_value, inst)) = prev {
                if prev_value == value {
                    args.push(Some(inst));
                    continue;
                }
            }
            if let Some(&inst) = self.loaded.get(&value) {
                args.push(Some(inst));
                continue;
            }
            let Some(t) = ctx.operand(op, index)? else {
                args.push(None);
                continue;
            };
            if !broadcasts_into(&t.shape, &self.out_shape) {
                return Err(unsupported(format!(
                    "operand #{index} of shape {:?} does not broadcast to {:?}",
                    t.shape, self.out_shape
                )));
            }
            let inst = match scalar_constant(ctx, op, index, &t) {
                Some(bits) => self.insts.push(t.elem, InstKind::Const { bits }),
                None => {
                    self.views.push(t.view_broadcast(&self.out_shape, 0));
                    self.insts.load(&self.views, (self.views.len() - 1) as u32)
                }
            };
            self.loaded.insert(value, inst);
            args.push(Some(inst));
        }
        Ok(args)
    }
}

/// The bits of operand `index` as a `Const`, when it is a compile-time scalar.
fn scalar_constant(ctx: &LowerCtx, op: OpId, index: usize, t: &TensorRef) -> Option<u64> {
    if t.numel() != 1 {
        return None;
    }
    constant_bits(ctx, op, index)?.first().copied()
}

/// The elements of operand `index` of `op` when it is a weight whose bytes are loaded (or has no
/// elements), as `Const` bits of its element type's compute type: `f64` bits for floats (a
/// narrow float widened), sign- or zero-extended integers, 0 or 1 for bools.
pub(super) fn constant_bits(ctx: &LowerCtx, op: OpId, index: usize) -> Option<Vec<u64>> {
    let &value = ctx.op(op).operands.get(index)?;
    let t = ctx.func.value_type(value).tensor()?;
    let elem = Scalar::from_elem(t.elem);
    let n = t.static_num_elements()?;
    if n == 0 {
        return Some(Vec::new());
    }
    let (_, packed) = ctx.weight_constant(op, index)?;
    // Sub-byte weights are packed as ONNX packs them; one per byte, like the arena.
    let bytes = memc_ir::packing::unpack(t.elem, packed, usize::try_from(n).ok()?);
    let width = elem.size() as usize;
    if bytes.len() as u64 != n * width as u64 {
        return None;
    }
    let decode = |chunk: &[u8]| -> u64 {
        let mut raw = [0u8; 8];
        raw[..width].copy_from_slice(chunk);
        let bits = u64::from_le_bytes(raw);
        match elem {
            Scalar::Bool => u64::from(bits != 0),
            Scalar::I8 => i64::from(bits as u8 as i8) as u64,
            Scalar::I16 => i64::from(bits as u16 as i16) as u64,
            Scalar::I32 => i64::from(bits as u32 as i32) as u64,
            Scalar::I64 | Scalar::U8 | Scalar::U16 | Scalar::U32 | Scalar::U64 => bits,
            Scalar::F32 => f64::from(f32::from_bits(bits as u32)).to_bits(),
            Scalar::F64 => bits,
            storage => storage.widen(bits),
        }
    };
    Some(bytes.chunks_exact(width).map(decode).collect())
}

/// [`emit`], checking that the value has the result's element type (its compute type).
fn emit_checked(
    ctx: &LowerCtx,
    op: OpId,
    b: &mut Insts,
    args: &[Option<InstId>],
) -> Result<InstId, LowerError> {
    let out = ctx.result(op, 0)?.elem;
    let value = emit(ctx, op, b, args, out)?;
    if b.ty(value) != out.compute() {
        return Err(unsupported(format!(
            "computed a {} for a {} result (a memc bug)",
            b.ty(value).name(),
            out.name()
        )));
    }
    Ok(value)
}

/// Operand `index`, which the verifier guarantees is present.
fn arg(args: &[Option<InstId>], index: usize) -> Result<InstId, LowerError> {
    args.get(index)
        .copied()
        .flatten()
        .ok_or_else(|| unsupported(format!("operand #{index} is missing")))
}

/// Emits the instructions computing `op`'s result (of element type `out`) from its operands'
/// values `args`, following the ONNX reference implementation; returns the result.
fn emit(
    ctx: &LowerCtx,
    op: OpId,
    b: &mut Insts,
    args: &[Option<InstId>],
    out: Scalar,
) -> Result<InstId, LowerError> {
    use Opcode as O;
    let opcode = ctx.op(op).opcode;
    let x = arg(args, 0)?;
    let t = b.ty(x);
    let binary = |b: &mut Insts, op: BinaryOp| -> Result<InstId, LowerError> {
        let y = arg(args, 1)?;
        Ok(b.binary(op, x, y))
    };
    let float_unary = |b: &mut Insts, op: UnaryOp| -> Result<InstId, LowerError> {
        if t.is_float() {
            Ok(b.unary(op, x))
        } else {
            // Integer inputs (Erf allows them): compute in f64, convert back (truncating).
            let wide = b.cast(x, Scalar::F64);
            let r = b.unary(op, wide);
            Ok(b.cast(r, t))
        }
    };
    let attr = |name: &str| ctx.attr_float(op, name);
    Ok(match opcode {
        O::Add => binary(b, BinaryOp::Add)?,
        O::Sub => binary(b, BinaryOp::Sub)?,
        O::Mul => binary(b, BinaryOp::Mul)?,
        O::Div => binary(b, BinaryOp::Div)?,
        O::Pow => pow(b, x, arg(args, 1)?),
        O::Min | O::Max | O::Sum | O::Mean => {
            let fold = match opcode {
                O::Min => BinaryOp::Min,
                O::Max => BinaryOp::Max,
                _ => BinaryOp::Add,
            };
            let present: Vec<InstId> = args.iter().flatten().copied().collect();
            let mut acc = x;
            for &v in &present[1..] {
                acc = b.binary(fold, acc, v);
            }
            if opcode == O::Mean {
                let n = b.constant(t, present.len() as f64);
                acc = b.binary(BinaryOp::Div, acc, n);
            }
            acc
        }
        O::Equal => binary(b, BinaryOp::Eq)?,
        O::Less => binary(b, BinaryOp::Lt)?,
        O::LessOrEqual => binary(b, BinaryOp::Le)?,
        O::Greater => binary(b, BinaryOp::Gt)?,
        O::GreaterOrEqual => binary(b, BinaryOp::Ge)?,
        O::And => binary(b, BinaryOp::And)?,
        O::Or => binary(b, BinaryOp::Or)?,
        O::Xor => binary(b, BinaryOp::Xor)?,
        O::BitwiseAnd => binary(b, BinaryOp::BitAnd)?,
        O::BitwiseOr => binary(b, BinaryOp::BitOr)?,
        O::BitwiseXor => binary(b, BinaryOp::BitXor)?,
        O::BitShift => match ctx.attr_str(op, "direction") {
            Some("LEFT") => binary(b, BinaryOp::Shl)?,
            Some("RIGHT") => binary(b, BinaryOp::Shr)?,
            other => return Err(unsupported(format!("BitShift direction {other:?}"))),
        },
        O::Mod => {
            let y = arg(args, 1)?;
            if ctx.attr_int(op, "fmod") == 1 {
                b.binary(BinaryOp::Rem, x, y)
            } else if t.is_float() {
                // The reference computes fmod for floats whatever `fmod` says, with NaN as 0.
                let r = b.binary(BinaryOp::Rem, x, y);
                let nan = b.unary(UnaryOp::IsNan, r);
                let zero = b.constant(t, 0.0);
                b.select(nan, zero, r)
            } else {
                b.binary(BinaryOp::FloorMod, x, y)
            }
        }
        O::Where => b.select(x, arg(args, 1)?, arg(args, 2)?),
        O::Not => b.unary(UnaryOp::Not, x),
        O::BitwiseNot => b.unary(UnaryOp::BitNot, x),
        O::Neg => b.unary(UnaryOp::Neg, x),
        O::Abs if t.is_unsigned_int() => x,
        O::Abs => b.unary(UnaryOp::Abs, x),
        O::Sign => b.unary(UnaryOp::Sign, x),
        O::IsNaN => b.unary(UnaryOp::IsNan, x),
        O::IsInf => {
            let negative = ctx.attr_int(op, "detect_negative") != 0;
            let positive = ctx.attr_int(op, "detect_positive") != 0;
            match (negative, positive) {
                (true, true) => {
                    let p = b.unary(UnaryOp::IsPosInf, x);
                    let n = b.unary(UnaryOp::IsNegInf, x);
                    b.binary(BinaryOp::Or, p, n)
                }
                (true, false) => b.unary(UnaryOp::IsNegInf, x),
                (false, true) => b.unary(UnaryOp::IsPosInf, x),
                (false, false) => b.constant_int(Scalar::Bool, 0),
            }
        }
        O::Sqrt => float_unary(b, UnaryOp::Sqrt)?,
        O::Exp => float_unary(b, UnaryOp::Exp)?,
        O::Log => float_unary(b, UnaryOp::Log)?,
        O::Reciprocal => float_unary(b, UnaryOp::Reciprocal)?,
        O::Floor => float_unary(b, UnaryOp::Floor)?,
        O::Ceil => float_unary(b, UnaryOp::Ceil)?,
        O::Round => float_unary(b, UnaryOp::Round)?,
        O::Sin => float_unary(b, UnaryOp::Sin)?,
        O::Cos => float_unary(b, UnaryOp::Cos)?,
        O::Tan => float_unary(b, UnaryOp::Tan)?,
        O::Asin => float_unary(b, UnaryOp::Asin)?,
        O::Acos => float_unary(b, UnaryOp::Acos)?,
        O::Atan => float_unary(b, UnaryOp::Atan)?,
        O::Sinh => float_unary(b, UnaryOp::Sinh)?,
        O::Cosh => float_unary(b, UnaryOp::Cosh)?,
        O::Tanh => float_unary(b, UnaryOp::Tanh)?,
        O::Asinh => float_unary(b, UnaryOp::Asinh)?,
        O::Acosh => float_unary(b, UnaryOp::Acosh)?,
        O::Atanh => float_unary(b, UnaryOp::Atanh)?,
        O::Erf => float_unary(b, UnaryOp::Erf)?,
        O::Relu => {
            let zero = b.constant(t, 0.0);
            b.binary(BinaryOp::Max, x, zero)
        }
        O::LeakyRelu => {
            let alpha = b.constant(t, attr("alpha"));
            let scaled = b.binary(BinaryOp::Mul, x, alpha);
            positive_or(b, x, scaled)
        }
        O::PRelu => {
            let slope = arg(args, 1)?;
            let scaled = b.binary(BinaryOp::Mul, x, slope);
            positive_or(b, x, scaled)
        }
        O::Elu => {
            let alpha = b.constant(t, attr("alpha"));
            let em1 = exp_minus_one(b, x);
            let negative = b.binary(BinaryOp::Mul, alpha, em1);
            positive_or(b, x, negative)
        }
        O::Selu => {
            // (x > 0 ? x : e^x * alpha - alpha) * gamma
            let alpha = b.constant(t, attr("alpha"));
            let gamma = b.constant(t, attr("gamma"));
            let e = b.unary(UnaryOp::Exp, x);
            let ea = b.binary(BinaryOp::Mul, e, alpha);
            let negative = b.binary(BinaryOp::Sub, ea, alpha);
            let v = positive_or(b, x, negative);
            b.binary(BinaryOp::Mul, v, gamma)
        }
        O::Celu => {
            // max(0, x) + min(0, alpha * (e^(x / alpha) - 1))
            let alpha = b.constant(t, attr("alpha"));
            let zero = b.constant(t, 0.0);
            let scaled = b.binary(BinaryOp::Div, x, alpha);
            let em1 = exp_minus_one(b, scaled);
            let negative = b.binary(BinaryOp::Mul, alpha, em1);
            let lo = b.binary(BinaryOp::Min, zero, negative);
            let hi = b.binary(BinaryOp::Max, zero, x);
            b.binary(BinaryOp::Add, hi, lo)
        }
        O::ThresholdedRelu => {
            let alpha = b.constant(t, attr("alpha"));
            let zero = b.constant(t, 0.0);
            let above = b.binary(BinaryOp::Gt, x, alpha);
            b.select(above, x, zero)
        }
        O::Sigmoid => sigmoid(b, x),
        O::HardSigmoid => hard_sigmoid(b, x, attr("alpha"), attr("beta")),
        O::HardSwish => {
            // x * HardSigmoid(x) with alpha = 1/6 (as an f32 attribute) and beta = 0.5.
            let hs = hard_sigmoid(b, x, f64::from(1.0f32 / 6.0), 0.5);
            b.binary(BinaryOp::Mul, x, hs)
        }
        O::Softplus => softplus(b, x),
        O::Softsign => {
            let one = b.constant(t, 1.0);
            let abs = b.unary(UnaryOp::Abs, x);
            let d = b.binary(BinaryOp::Add, abs, one);
            b.binary(BinaryOp::Div, x, d)
        }
        O::Mish => {
            let sp = softplus(b, x);
            let th = b.unary(UnaryOp::Tanh, sp);
            b.binary(BinaryOp::Mul, x, th)
        }
        O::Swish => {
            let alpha = b.constant(t, attr("alpha"));
            let ax = b.binary(BinaryOp::Mul, alpha, x);
            let s = sigmoid(b, ax);
            b.binary(BinaryOp::Mul, x, s)
        }
        O::Gelu => gelu(b, x, ctx.attr_str(op, "approximate").unwrap_or_default())?,
        O::Shrink => {
            // Integer inputs compute in f64 (numpy promotes `x + bias`), then truncate.
            let c = if t.is_float() { t } else { Scalar::F64 };
            let xc = b.cast(x, c);
            let lambd = attr("lambd");
            let bias = b.constant(c, attr("bias"));
            let neg_lambd = b.constant(c, -lambd);
            let pos_lambd = b.constant(c, lambd);
            let zero = b.constant(c, 0.0);
            let below = b.binary(BinaryOp::Lt, xc, neg_lambd);
            let above = b.binary(BinaryOp::Gt, xc, pos_lambd);
            let plus = b.binary(BinaryOp::Add, xc, bias);
            let minus = b.binary(BinaryOp::Sub, xc, bias);
            let inner = b.select(above, minus, zero);
            let r = b.select(below, plus, inner);
            b.cast(r, t)
        }
        O::Clip => {
            let mut v = x;
            if let Some(lo) = args.get(1).copied().flatten() {
                v = b.binary(BinaryOp::Max, v, lo);
            }
            if let Some(hi) = args.get(2).copied().flatten() {
                v = b.binary(BinaryOp::Min, v, hi);
            }
            v
        }
        // Training: activations and their gradients, as onnxruntime's kernels compute them. In
        // a gradient, `x` is dY and operand 1 the forward op's input or output.
        O::ReluGrad => {
            let forward = arg(args, 1)?;
            let zero = b.constant(t, 0.0);
            positive_select(b, forward, x, zero)
        }
        O::SigmoidGrad => {
            let y = arg(args, 1)?;
            let one = b.constant(t, 1.0);
            let complement = b.binary(BinaryOp::Sub, one, y);
            let dy_y = b.binary(BinaryOp::Mul, x, y);
            b.binary(BinaryOp::Mul, dy_y, complement)
        }
        O::TanhGrad => {
            let y = arg(args, 1)?;
            let one = b.constant(t, 1.0);
            let y2 = b.binary(BinaryOp::Mul, y, y);
            let complement = b.binary(BinaryOp::Sub, one, y2);
            b.binary(BinaryOp::Mul, x, complement)
        }
        O::GeluGrad => gelu_grad_erf(b, x, arg(args, 1)?),
        O::FastGeluGrad => gelu_grad_tanh(b, x, arg(args, 1)?),
        O::BiasGeluGradDx | O::BiasFastGeluGradDx => {
            let biased = b.binary(BinaryOp::Add, arg(args, 1)?, arg(args, 2)?);
            if opcode == O::BiasGeluGradDx {
                gelu_grad_erf(b, x, biased)
            } else {
                gelu_grad_tanh(b, x, biased)
            }
        }
        O::QuickGeluGrad => {
            // dY * s * (1 + alpha * x * (1 - s)), s = sigmoid(alpha * x).
            let forward = arg(args, 1)?;
            let alpha = b.constant(t, attr("alpha"));
            let one = b.constant(t, 1.0);
            let ax = b.binary(BinaryOp::Mul, forward, alpha);
            let s = sigmoid(b, ax);
            let complement = b.binary(BinaryOp::Sub, one, s);
            let v = b.binary(BinaryOp::Mul, ax, complement);
            let factor = b.binary(BinaryOp::Add, one, v);
            let ds = b.binary(BinaryOp::Mul, x, s);
            b.binary(BinaryOp::Mul, ds, factor)
        }
        O::LeakyReluGrad => {
            // dY where the forward output is positive, alpha * dY elsewhere.
            let y = arg(args, 1)?;
            let alpha = b.constant(t, attr("alpha"));
            let scaled = b.binary(BinaryOp::Mul, x, alpha);
            positive_select(b, y, x, scaled)
        }
        O::MsGelu => gelu(b, x, "none")?,
        O::BiasGelu => {
            let biased = b.binary(BinaryOp::Add, x, arg(args, 1)?);
            gelu(b, biased, "none")?
        }
        O::FastGelu => {
            let biased = match args.get(1).copied().flatten() {
                Some(bias) => b.binary(BinaryOp::Add, x, bias),
                None => x,
            };
            gelu(b, biased, "tanh")?
        }
        O::QuickGelu => {
            let alpha = b.constant(t, attr("alpha"));
            let ax = b.binary(BinaryOp::Mul, x, alpha);
            let s = sigmoid(b, ax);
            b.binary(BinaryOp::Mul, x, s)
        }
        O::Scale => {
            // onnxruntime reads the scale as an f32 and takes its reciprocal in f32 to scale
            // down, then multiplies in the input's type.
            let scale = b.cast(arg(args, 1)?, Scalar::F32);
            let scale = if ctx.attr_int(op, "scale_down") != 0 {
                let one = b.constant(Scalar::F32, 1.0);
                b.binary(BinaryOp::Div, one, scale)
            } else {
                scale
            };
            let scale = b.cast(scale, t);
            b.binary(BinaryOp::Mul, x, scale)
        }
        O::Cast | O::CastLike => {
            if out == Scalar::F8E8M0
                && (ctx.attr_str(op, "round_mode") != Some("up")
                    || ctx.attr_int(op, "saturate") == 0)
            {
                // A store into E8M0 rounds up and saturates; the other modes have no kernel.
                return Err(unsupported(format!(
                    "Cast to float8e8m0 with round_mode `{}` and saturate {} (memc rounds up and saturates)",
                    ctx.attr_str(op, "round_mode").unwrap_or("up"),
                    ctx.attr_int(op, "saturate")
                )));
            }
            cast(b, x, out, ctx.attr_int(op, "saturate") != 0)
        }
        _ => return Err(unsupported("not an elementwise op (a memc bug)")),
    })
}

/// Cast and CastLike of `x` to `to` (see the module doc).
fn cast(b: &mut Insts, x: InstId, to: Scalar, saturate: bool) -> InstId {
    let from = b.ty(x);
    if from.is_float() && to.sub_byte_bits().is_some() {
        let wide = b.cast(x, Scalar::I64);
        return b.cast(wide, to);
    }
    let float8 = to.float_format().filter(|f| f.bits() == 8);
    if let (true, Some(format)) = (saturate, float8) {
        let v = if from.is_float() {
            x
        } else {
            b.cast(x, Scalar::F32)
        };
        let t = b.ty(v);
        let max = f64::from(format.max_finite());
        let hi = b.constant(t, max);
        let lo = b.constant(t, -max);
        let v = b.binary(BinaryOp::Min, v, hi);
        let v = b.binary(BinaryOp::Max, v, lo);
        return b.cast(v, to);
    }
    b.cast(x, to)
}

/// `x > 0 ? x : otherwise` (NaN takes `otherwise`, as in the reference's `np.where(x > 0, ...)`).
fn positive_or(b: &mut Insts, x: InstId, otherwise: InstId) -> InstId {
    positive_select(b, x, x, otherwise)
}

/// `e^x - 1`.
fn exp_minus_one(b: &mut Insts, x: InstId) -> InstId {
    let one = b.constant(b.ty(x), 1.0);
    let e = b.unary(UnaryOp::Exp, x);
    b.binary(BinaryOp::Sub, e, one)
}

/// The logistic function, as the reference computes it without overflow:
/// `x > 0 ? 1 / (1 + e^-x) : e^x / (1 + e^x)`.
fn sigmoid(b: &mut Insts, x: InstId) -> InstId {
    let t = b.ty(x);
    let one = b.constant(t, 1.0);
    let abs = b.unary(UnaryOp::Abs, x);
    let neg_abs = b.unary(UnaryOp::Neg, abs);
    let e = b.unary(UnaryOp::Exp, neg_abs);
    let d = b.binary(BinaryOp::Add, one, e);
    let pos = b.binary(BinaryOp::Div, one, d);
    let neg = b.binary(BinaryOp::Div, e, d);
    positive_select(b, x, pos, neg)
}

/// `x > 0 ? then : else_`.
fn positive_select(b: &mut Insts, x: InstId, then: InstId, else_: InstId) -> InstId {
    let zero = b.constant(b.ty(x), 0.0);
    let positive = b.binary(BinaryOp::Gt, x, zero);
    b.select(positive, then, else_)
}

/// `max(0, min(1, x * alpha + beta))`.
fn hard_sigmoid(b: &mut Insts, x: InstId, alpha: f64, beta: f64) -> InstId {
    let t = b.ty(x);
    let alpha = b.constant(t, alpha);
    let beta = b.constant(t, beta);
    let zero = b.constant(t, 0.0);
    let one = b.constant(t, 1.0);
    let ax = b.binary(BinaryOp::Mul, x, alpha);
    let v = b.binary(BinaryOp::Add, ax, beta);
    let lo = b.binary(BinaryOp::Min, one, v);
    b.binary(BinaryOp::Max, zero, lo)
}

/// `ln(e^x + 1)`, computed as `max(x, 0) + ln(1 + e^-|x|)` so that large inputs do not overflow.
fn softplus(b: &mut Insts, x: InstId) -> InstId {
    let t = b.ty(x);
    let zero = b.constant(t, 0.0);
    let one = b.constant(t, 1.0);
    let abs = b.unary(UnaryOp::Abs, x);
    let neg_abs = b.unary(UnaryOp::Neg, abs);
    let e = b.unary(UnaryOp::Exp, neg_abs);
    let s = b.binary(BinaryOp::Add, one, e);
    let l = b.unary(UnaryOp::Log, s);
    let m = b.binary(BinaryOp::Max, x, zero);
    b.binary(BinaryOp::Add, m, l)
}

/// Gelu as the ONNX function body defines it.
fn gelu(b: &mut Insts, x: InstId, approximate: &str) -> Result<InstId, LowerError> {
    let t = b.ty(x);
    let one = b.constant(t, 1.0);
    let phi = match approximate {
        "tanh" => {
            // x / 2 * (1 + tanh(u)) with u = sqrt(2 / pi) * (x + 0.044715 * x^3) is x *
            // sigmoid(2 u) = x / (1 + e^(-2 u)): one `exp` and a division where `tanh` takes
            // an `exp`, a division and a polynomial for small arguments (GELU was 2.3x
            // onnxruntime's FastGelu in the zoo gpt). No cancellation in `1 + tanh(u)` near
            // u = -9 either; `e^(-2 u)` overflows to +inf for large negative `x`, giving -0,
            // and NaN stays NaN (-inf gives NaN, as the function body's form does).
            // sqrt(2 / pi) (from the f32 constant the function body writes), times -2.
            let k = b.constant(t, -2.0 * f64::from(std::f32::consts::FRAC_2_PI).sqrt());
            let c0 = b.constant(t, f64::from(0.044_715_f32));
            let x2 = b.binary(BinaryOp::Mul, x, x);
            let x3 = b.binary(BinaryOp::Mul, x2, x);
            let cx3 = b.binary(BinaryOp::Mul, c0, x3);
            let inner = b.binary(BinaryOp::Add, x, cx3);
            let arg = b.binary(BinaryOp::Mul, k, inner);
            let e = b.unary(UnaryOp::Exp, arg);
            let d = b.binary(BinaryOp::Add, one, e);
            return Ok(b.binary(BinaryOp::Div, x, d));
        }
        "none" => {
            // 1 + erf(x / sqrt(2))
            let sqrt2 = b.constant(t, std::f64::consts::SQRT_2);
            let scaled = b.binary(BinaryOp::Div, x, sqrt2);
            let e = b.unary(UnaryOp::Erf, scaled);
            b.binary(BinaryOp::Add, one, e)
        }
        other => return Err(unsupported(format!("Gelu approximate `{other}`"))),
    };
    let half = b.constant(t, 0.5);
    let hx = b.binary(BinaryOp::Mul, half, x);
    Ok(b.binary(BinaryOp::Mul, hx, phi))
}

/// `dy * Gelu'(x)` for Gelu's erf form:
/// `dy * ((1 + erf(x / sqrt(2))) / 2 + x * e ^ (-x^2 / 2) / sqrt(2 pi))`.
fn gelu_grad_erf(b: &mut Insts, dy: InstId, x: InstId) -> InstId {
    let t = b.ty(x);
    let half = b.constant(t, 0.5);
    let neg_half = b.constant(t, -0.5);
    let one = b.constant(t, 1.0);
    let inv_sqrt2 = b.constant(t, std::f64::consts::FRAC_1_SQRT_2);
    let inv_sqrt_2pi = b.constant(
        t,
        std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2 * 0.5,
    );
    let scaled = b.binary(BinaryOp::Mul, x, inv_sqrt2);
    let e = b.unary(UnaryOp::Erf, scaled);
    let p = b.binary(BinaryOp::Add, e, one);
    let cdf = b.binary(BinaryOp::Mul, half, p);
    let x2 = b.binary(BinaryOp::Mul, x, x);
    let exponent = b.binary(BinaryOp::Mul, neg_half, x2);
    let g = b.unary(UnaryOp::Exp, exponent);
    let pdf = b.binary(BinaryOp::Mul, g, inv_sqrt_2pi);
    let xpdf = b.binary(BinaryOp::Mul, x, pdf);
    let d = b.binary(BinaryOp::Add, cdf, xpdf);
    b.binary(BinaryOp::Mul, dy, d)
}

/// `dy * Gelu'(x)` for Gelu's tanh approximation, with `th = tanh(a * (x + g * x^3))`
/// (`a = sqrt(2 / pi)`, `g = 0.044715`):
/// `dy * (x * (1 - th^2) * (a + 3 * a * g * x^2) / 2 + (1 + th) / 2)`.
fn gelu_grad_tanh(b: &mut Insts, dy: InstId, x: InstId) -> InstId {
    let t = b.ty(x);
    let a_value = std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2;
    let g_value = 0.044_715;
    let a = b.constant(t, a_value);
    let ag = b.constant(t, a_value * g_value);
    let beta = b.constant(t, 3.0 * a_value * g_value);
    let half = b.constant(t, 0.5);
    let one = b.constant(t, 1.0);
    let x2 = b.binary(BinaryOp::Mul, x, x);
    let agx2 = b.binary(BinaryOp::Mul, ag, x2);
    let slope = b.binary(BinaryOp::Add, a, agx2);
    let u = b.binary(BinaryOp::Mul, x, slope);
    let th = b.unary(UnaryOp::Tanh, u);
    let th2 = b.binary(BinaryOp::Mul, th, th);
    let sech2 = b.binary(BinaryOp::Sub, one, th2);
    let bx2 = b.binary(BinaryOp::Mul, beta, x2);
    let du = b.binary(BinaryOp::Add, a, bx2);
    let hx = b.binary(BinaryOp::Mul, half, x);
    let left = b.binary(BinaryOp::Mul, hx, sech2);
    let left = b.binary(BinaryOp::Mul, left, du);
    let p = b.binary(BinaryOp::Add, one, th);
    let right = b.binary(BinaryOp::Mul, half, p);
    let d = b.binary(BinaryOp::Add, left, right);
    b.binary(BinaryOp::Mul, dy, d)
}

/// `x ^ y` converted to `x`'s type, as `np.power(x, y).astype(x.dtype)`: in `x`'s type when
/// both operands share it, else in f64 when either is a float, else in i64 (u64 for two
/// unsigned types).
fn pow(b: &mut Insts, x: InstId, y: InstId) -> InstId {
    let (tx, ty) = (b.ty(x), b.ty(y));
    let compute = if tx == ty {
        tx
    } else if tx.is_float() || ty.is_float() {
        Scalar::F64
    } else if tx.is_unsigned_int() && ty.is_unsigned_int() {
        Scalar::U64
    } else {
        Scalar::I64
    };
    let compute = match compute {
        // Integer powers are computed in 64 bits, then wrap to the narrower type.
        Scalar::I8 | Scalar::I16 | Scalar::I32 => Scalar::I64,
        Scalar::U8 | Scalar::U16 | Scalar::U32 => Scalar::U64,
        c => c,
    };
    let xc = b.cast(x, compute);
    // A constant exponent of 2 (common in variance computations) is one multiplication, as
    // exact as the power: the square of an f32 is exact in f64, and correctly rounded in f32.
    let squares = match b.insts[y as usize].kind {
        InstKind::Const { bits } if ty.is_float() => f64::from_bits(bits) == 2.0,
        InstKind::Const { bits } => bits == 2,
        _ => false,
    };
    let r = if squares {
        b.binary(BinaryOp::Mul, xc, xc)
    } else {
        let yc = b.cast(y, compute);
        b.binary(BinaryOp::Pow, xc, yc)
    };
    b.cast(r, tx)
}
