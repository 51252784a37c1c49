//! MatMul (numpy semantics: 1-d operands promoted and their added dim dropped, batch dims
//! broadcast), `ms.FusedMatMul` (the same product of operands read with their dims permuted,
//! scaled by `alpha`) and Gemm (`alpha * A' B' + beta * C`).
//!
//! F32 and F64 products are one `Contract`; when the right operand is shared by every batch
//! index and the left one is contiguous, its batch folds into `m` so the GEMM library sees one
//! tall product. Gemm's `beta * C` is written into `Y` first by a loop kernel and the product
//! accumulates onto it. Integer products are loop kernels: a `Reduce` sum over `k` (wrapping,
//! as numpy's integer matmul) and a `Once` store.

use super::super::build::{contiguous_strides, Insts, TensorRef};
use super::super::movement::common::{loop_kernel, map_stage, once_stage, strided_copy};
use super::super::state::{flag_true, reset_where_overwrite};
use super::super::{elem_type, unsupported, LowerCtx, LowerError, LowerResult};
use crate::kernel::{
    BinaryOp, Contract, InstKind, Kernel, KernelBody, MatView, ReduceOp, Scalar, Stage, View,
};
use memc_ir::ops::fused_matmul_perm;
use memc_ir::OpId;

/// Rejects arithmetic on bools (the storage types compute in their compute type).
pub(super) fn check_arith(elem: Scalar) -> Result<(), LowerError> {
    match elem {
        Scalar::Bool => Err(unsupported("arithmetic on bool tensors")),
        _ => Ok(()),
    }
}

/// Strides of `own` (a tensor's batch dims) broadcast against the output batch `batch`,
/// aligned right; size-1 and missing dims get 0.
fn batch_strides(own_shape: &[u64], own_strides: &[i64], batch: &[u64]) -> Vec<i64> {
    let lead = batch.len() - own_shape.len();
    (0..batch.len())
        .map(|i| {
            if i < lead || own_shape[i - lead] == 1 {
                0
            } else {
                own_strides[i - lead]
            }
        })
        .collect()
}

/// One operand of a product as the kernels see it: rows and columns with their strides, and
/// strides over the output batch.
struct Operand<'t> {
    t: &'t TensorRef,
    batch: Vec<i64>,
    row: i64,
    col: i64,
}

impl Operand<'_> {
    fn mat(&self) -> MatView {
        MatView {
            region: self.t.region,
            byte_offset: self.t.byte_offset,
            batch_strides: self.batch.clone(),
            row_stride: self.row,
            col_stride: self.col,
        }
    }
}

pub fn matmul(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let a = ctx.input(op, 0)?;
    let b = ctx.input(op, 1)?;
    let (pa, pb) = ((0..a.rank()).collect(), (0..b.rank()).collect());
    product(ctx, op, [&pa, &pb], 1.0)
}

/// `ms.FusedMatMul`: `alpha * op(A) x op(B)`, each operand read through
/// [`memc_ir::ops::fused_matmul_perm`] as strides, so no transpose is copied.
pub fn fused_matmul(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let a = ctx.input(op, 0)?;
    let b = ctx.input(op, 1)?;
    let flag = |name: &str| ctx.attr_int(op, name) != 0;
    let pa = fused_matmul_perm(a.rank(), flag("transA"), flag("transBatchA"));
    let pb = fused_matmul_perm(b.rank(), flag("transB"), flag("transBatchB"));
    product(ctx, op, [&pa, &pb], ctx.attr_float(op, "alpha"))
}

/// The shape and element strides of `t` read in the dim order `perm`, a 1-d tensor promoted
/// to a matrix (`[1, K]` on the left, `[K, 1]` on the right).
fn read_through(
    t: &TensorRef,
    perm: &[usize],
    left: bool,
) -> Result<(Vec<u64>, Vec<i64>), LowerError> {
    let own = t.strides();
    if perm.len() != t.rank() || perm.iter().any(|&p| p >= t.rank()) {
        return Err(unsupported(
            "an operand permutation that does not fit its rank (a memc bug)",
        ));
    }
    let mut shape: Vec<u64> = perm.iter().map(|&p| t.shape[p]).collect();
    let mut strides: Vec<i64> = perm.iter().map(|&p| own[p]).collect();
    match (shape.len(), left) {
        (0, _) => return Err(unsupported("a matrix product of a scalar")),
        // The strides of the added dims are those of a contiguous matrix, as if the vector
        // had been reshaped.
        (1, true) => {
            strides.insert(0, strides[0] * shape[0] as i64);
            shape.insert(0, 1);
        }
        (1, false) => {
            shape.push(1);
            strides.push(1);
        }
        _ => {}
    }
    Ok((shape, strides))
}

/// `alpha * A x B` with numpy semantics, A and B read in the dim orders `perms`.
fn product(ctx: &LowerCtx, op: OpId, perms: [&Vec<usize>; 2], alpha: f64) -> LowerResult {
    let a = ctx.input(op, 0)?;
    let b = ctx.input(op, 1)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(out.elem)?;
    let (a_shape, a_own) = read_through(&a, perms[0], true)?;
    let (b_shape, b_own) = read_through(&b, perms[1], false)?;
    let (ra, rb) = (a_shape.len(), b_shape.len());
    let (m, k, n) = (a_shape[ra - 2], a_shape[ra - 1], b_shape[rb - 1]);
    let nb = (ra - 2).max(rb - 2);
    let batch: Vec<u64> = out.shape[..nb].to_vec();
    let lhs = Operand {
        t: &a,
        batch: batch_strides(&a_shape[..ra - 2], &a_own[..ra - 2], &batch),
        row: a_own[ra - 2],
        col: a_own[ra - 1],
    };
    let rhs = Operand {
        t: &b,
        batch: batch_strides(&b_shape[..rb - 2], &b_own[..rb - 2], &batch),
        row: b_own[rb - 2],
        col: b_own[rb - 1],
    };
    let c_shape: Vec<u64> = batch.iter().copied().chain([m, n]).collect();
    let c_own = contiguous_strides(&c_shape);
    let dst = Operand {
        t: &out,
        batch: c_own[..nb].to_vec(),
        row: c_own[nb],
        col: c_own[nb + 1],
    };
    let name = ctx.kernel_name(op, 0);
    if ctx.target.contracts(elem_type(out.elem)) {
        // A shared right operand and a left one that is contiguous in the order it is read:
        // fold the batch into the rows.
        let a_contiguous = a_shape[..ra - 2] == batch[..] && a_own == contiguous_strides(&a_shape);
        if nb > 0 && a_contiguous && rhs.batch.iter().all(|&s| s == 0) {
            let rows = batch.iter().product::<u64>() * m;
            let a = Operand {
                batch: Vec::new(),
                ..lhs
            };
            let b = Operand {
                batch: Vec::new(),
                ..rhs
            };
            let c = Operand {
                batch: Vec::new(),
                ..dst
            };
            return Ok(vec![contract(
                name,
                out.elem,
                Vec::new(),
                rows,
                n,
                k,
                &a,
                &b,
                &c,
                alpha,
                false,
            )]);
        }
        return Ok(vec![contract(
            name, out.elem, batch, m, n, k, &lhs, &rhs, &dst, alpha, false,
        )]);
    }
    let elem = out.elem;
    Ok(vec![loop_product(
        name,
        &batch,
        m,
        n,
        k,
        &lhs,
        &rhs,
        &dst,
        |insts, acc| {
            if alpha == 1.0 {
                return acc;
            }
            let factor = insts.constant(elem, alpha);
            insts.binary(BinaryOp::Mul, acc, factor)
        },
    )])
}

#[allow(clippy::too_many_arguments)]
fn contract(
    name: String,
    elem: Scalar,
    batch: Vec<u64>,
    m: u64,
    n: u64,
    k: u64,
    a: &Operand,
    b: &Operand,
    c: &Operand,
    alpha: f64,
    accumulate: bool,
) -> Kernel {
    Kernel {
        name,
        body: KernelBody::Contract(Contract {
            elem,
            batch,
            m,
            n,
            k,
            a: a.mat(),
            b: b.mat().into(),
            c: c.mat(),
            alpha: alpha.to_bits(),
            accumulate,
            pack: None,
            a_packed: None,
            b_packed: None,
            transposed: false,
            winograd: None,
        }),
    }
}

/// A product as a loop kernel: outer `batch ++ [m, n]`, inner `[k]`, a `Reduce` sum of
/// `a * b` in the element type, then `finish(insts, acc)` stored once.
#[allow(clippy::too_many_arguments)]
fn loop_product(
    name: String,
    batch: &[u64],
    m: u64,
    n: u64,
    k: u64,
    a: &Operand,
    b: &Operand,
    c: &Operand,
    finish: impl FnOnce(&mut Insts, u32) -> u32,
) -> Kernel {
    let nb = batch.len();
    let strides = |o: &Operand,
                   row_axis: Option<usize>,
                   col_axis: Option<usize>,
                   k_axis: usize,
                   k_stride: i64| {
        let mut s = o.batch.clone();
        s.resize(nb + 3, 0);
        if let Some(r) = row_axis {
            s[r] = o.row;
        }
        if let Some(cl) = col_axis {
            s[cl] = o.col;
        }
        s[k_axis] += k_stride;
        s
    };
    let views = vec![
        c.t.view_with(strides(c, Some(nb), Some(nb + 1), nb + 2, 0)),
        a.t.view_with({
            let mut s = strides(a, Some(nb), None, nb + 2, 0);
            s[nb + 2] = a.col;
            s
        }),
        b.t.view_with({
            let mut s = strides(b, None, Some(nb + 1), nb + 2, 0);
            s[nb + 2] = b.row;
            s
        }),
    ];
    let elem = c.t.elem.compute();
    let mut insts = Insts::new();
    let x = insts.load(&views, 1);
    let y = insts.load(&views, 2);
    let prod = insts.binary(BinaryOp::Mul, x, y);
    let reduce = Stage::Reduce {
        insts: insts.finish(),
        value: prod,
        op: ReduceOp::Sum,
        init: 0,
        ty: elem,
    };
    let mut insts = Insts::new();
    let acc = insts.acc(0, elem);
    let value = finish(&mut insts, acc);
    let outer: Vec<u64> = batch.iter().copied().chain([m, n]).collect();
    loop_kernel(
        name,
        outer,
        vec![k],
        views,
        vec![reduce, once_stage(insts, 0, value)],
    )
}

/// Gemm's operands `op(A)` and `op(B)` (2-d, transposed by their strides) and the product's
/// `m`, `k` and `n`.
fn gemm_operands<'t>(
    a: &'t TensorRef,
    b: &'t TensorRef,
    trans_a: bool,
    trans_b: bool,
) -> Result<(Operand<'t>, Operand<'t>, u64, u64, u64), LowerError> {
    let (&[a0, a1], &[b0, b1]) = (&a.shape[..], &b.shape[..]) else {
        return Err(unsupported("Gemm needs 2-d A and B"));
    };
    let (m, k) = if trans_a { (a1, a0) } else { (a0, a1) };
    let n = if trans_b { b0 } else { b1 };
    let lhs = Operand {
        t: a,
        batch: Vec::new(),
        row: if trans_a { 1 } else { a1 as i64 },
        col: if trans_a { a1 as i64 } else { 1 },
    };
    let rhs = Operand {
        t: b,
        batch: Vec::new(),
        row: if trans_b { 1 } else { b1 as i64 },
        col: if trans_b { b1 as i64 } else { 1 },
    };
    Ok((lhs, rhs, m, k, n))
}

/// `memc.accumulate_gemm(buffer, A, B, overwrite?)`: `buffer = (overwrite ? 0 : buffer) +
/// alpha * op(A) x op(B)`, one contraction that accumulates into the persistent gradient
/// buffer (see the `accumulate-into-state` pass), then the flag.
pub fn accumulate_gemm(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let buffer = ctx.input(op, 0)?;
    let a = ctx.input(op, 1)?;
    let b = ctx.input(op, 2)?;
    check_arith(buffer.elem)?;
    if !ctx.target.contracts(elem_type(buffer.elem)) {
        return Err(unsupported(format!(
            "an accumulated product in {}",
            buffer.elem.name()
        )));
    }
    let mut kernels: Vec<Kernel> = reset_where_overwrite(ctx, op, &buffer, 3)?
        .into_iter()
        .collect();
    let (trans_a, trans_b) = (
        ctx.attr_int(op, "transA") != 0,
        ctx.attr_int(op, "transB") != 0,
    );
    let (lhs, rhs, m, k, n) = gemm_operands(&a, &b, trans_a, trans_b)?;
    if buffer.shape != [m, n] {
        return Err(unsupported("the product does not have the buffer's shape"));
    }
    if m * n > 0 {
        let dst = Operand {
            t: &buffer,
            batch: Vec::new(),
            row: n as i64,
            col: 1,
        };
        kernels.push(contract(
            ctx.kernel_name(op, kernels.len()),
            buffer.elem,
            Vec::new(),
            m,
            n,
            k,
            &lhs,
            &rhs,
            &dst,
            ctx.attr_float(op, "alpha"),
            true,
        ));
    }
    kernels.push(flag_true(ctx, op, kernels.len())?);
    Ok(kernels)
}

pub fn gemm(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let a = ctx.input(op, 0)?;
    let b = ctx.input(op, 1)?;
    let c = ctx.operand(op, 2)?;
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(out.elem)?;
    let alpha = ctx.attr_float(op, "alpha");
    let beta = ctx.attr_float(op, "beta");
    let (trans_a, trans_b) = (
        ctx.attr_int(op, "transA") != 0,
        ctx.attr_int(op, "transB") != 0,
    );
    let (lhs, rhs, m, k, n) = gemm_operands(&a, &b, trans_a, trans_b)?;
    let dst = Operand {
        t: &out,
        batch: Vec::new(),
        row: n as i64,
        col: 1,
    };
    let c = c.filter(|_| beta != 0.0);
    if ctx.target.contracts(elem_type(out.elem)) {
        let mut kernels = Vec::new();
        if let Some(c) = &c {
            // Y = beta * C, broadcast; the product then accumulates onto it.
            let src = c.view_broadcast(&out.shape, 0);
            if beta == 1.0 {
                kernels.push(strided_copy(
                    ctx.kernel_name(op, 0),
                    &out.shape,
                    out.view_identity(0),
                    src,
                ));
            } else {
                let views = vec![out.view_identity(0), src];
                let mut insts = Insts::new();
                let v = insts.load(&views, 1);
                let bc = insts.constant(out.elem, beta);
                let value = insts.binary(BinaryOp::Mul, v, bc);
                kernels.push(loop_kernel(
                    ctx.kernel_name(op, 0),
                    out.shape.clone(),
                    Vec::new(),
                    views,
                    vec![map_stage(insts, 0, value)],
                ));
            }
        }
        let name = ctx.kernel_name(op, kernels.len());
        kernels.push(contract(
            name,
            out.elem,
            Vec::new(),
            m,
            n,
            k,
            &lhs,
            &rhs,
            &dst,
            alpha,
            c.is_some(),
        ));
        return Ok(kernels);
    }
    // Integers: the sum in the element type, scaled in f64 where alpha or beta is not 1.
    let c_view: Option<View> = c.as_ref().map(|c| c.view_broadcast(&out.shape, 1));
    let elem = out.elem;
    let mut kernel = loop_product(
        ctx.kernel_name(op, 0),
        &[],
        m,
        n,
        k,
        &lhs,
        &rhs,
        &dst,
        |insts, acc| {
            let scaled = |insts: &mut Insts, v: u32, factor: f64| {
                if factor == 1.0 {
                    return v;
                }
                let f = insts.cast(v, Scalar::F64);
                let fc = insts.constant(Scalar::F64, factor);
                let p = insts.binary(BinaryOp::Mul, f, fc);
                insts.cast(p, elem)
            };
            let product = scaled(insts, acc, alpha);
            match &c_view {
                Some(_) => {
                    let cv = insts.push(elem, InstKind::Load { view: 3 });
                    let cv = scaled(insts, cv, beta);
                    insts.binary(BinaryOp::Add, product, cv)
                }
                None => product,
            }
        },
    );
    if let (Some(v), KernelBody::Loop(l)) = (c_view, &mut kernel.body) {
        l.views.push(v);
    }
    Ok(vec![kernel])
}
