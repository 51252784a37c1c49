//! Einsum, over the equation `memc_ir::ops::Einsum` parses.
//!
//! Every operand is read through strides over the labels: a label repeated within a term adds
//! its dims' strides (the diagonal), a dim of size 1 broadcast against a larger label size gets
//! stride 0, and a transposed output is just another stride order, so nothing is copied.
//!
//! - Two operands whose labels split into batch (both inputs and the output), `m` (the first
//!   input and the output), `n` (the second and the output) and `k` (both inputs, summed), at
//!   most one label each for `m`, `n` and `k` and no diagonal, in a type the target contracts:
//!   one [`crate::kernel::Contract`] (a batched matrix product, as MatMul).
//! - Anything else (sums, diagonals, transposes, three or more operands, integer types): one
//!   loop kernel whose outer axes are the output's labels and whose inner axes are the summed
//!   labels; a `Reduce` stage sums the product of the operands' elements and a `Once` stage
//!   stores it. Without summed labels a `Map` stage stores the product. A summed label of size
//!   0 makes the output zeros.

use super::super::build::{contiguous_strides, Insts, TensorRef};
use super::super::movement::common::{loop_kernel, map_stage, once_stage};
use super::super::{elem_type, unsupported, LowerCtx, LowerResult};
use super::matmul::check_arith;
use crate::kernel::{BinaryOp, Contract, Kernel, KernelBody, MatView, ReduceOp, Stage};
use memc_ir::ops::Einsum;
use memc_ir::OpId;

pub fn einsum(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let out = ctx.result(op, 0)?;
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    check_arith(out.elem)?;
    let inputs: Vec<TensorRef> = (0..ctx.op(op).operands.len())
        .map(|i| ctx.input(op, i))
        .collect::<Result<_, _>>()?;
    let ranks: Vec<usize> = inputs.iter().map(TensorRef::rank).collect();
    let equation = ctx
        .attr_str(op, "equation")
        .ok_or_else(|| unsupported("Einsum without an equation (a memc bug)"))?;
    let eq = Einsum::parse(equation, &ranks).map_err(unsupported)?;
    // Each label's size: its operands' dims, 1 where they are all 1.
    let mut sizes = vec![1u64; eq.n_labels];
    for (labels, t) in eq.inputs.iter().zip(&inputs) {
        for (&label, &d) in labels.iter().zip(&t.shape) {
            if d != 1 {
                sizes[label] = d;
            }
        }
    }
    let out_sizes: Vec<u64> = eq.output.iter().map(|&l| sizes[l]).collect();
    if out_sizes != out.shape {
        return Err(unsupported(
            "the equation's output shape is not the result's (a memc bug)",
        ));
    }
    // Element strides of each operand per label (0 where it broadcasts or lacks the label).
    let strides: Vec<Vec<i64>> = eq
        .inputs
        .iter()
        .zip(&inputs)
        .map(|(labels, t)| {
            let own = t.strides();
            let mut s = vec![0i64; eq.n_labels];
            for (j, &label) in labels.iter().enumerate() {
                if t.shape[j] != 1 {
                    s[label] += own[j];
                }
            }
            s
        })
        .collect();
    let mut out_strides = vec![0i64; eq.n_labels];
    for (&label, s) in eq.output.iter().zip(contiguous_strides(&out.shape)) {
        out_strides[label] = s;
    }
    let summed = eq.summed();
    if summed.iter().all(|&l| sizes[l] > 0) && ctx.target.contracts(elem_type(out.elem)) {
        if let Some(kernel) =
            as_contract(ctx, op, &eq, &sizes, &inputs, &strides, &out_strides, &out)
        {
            return Ok(vec![kernel]);
        }
    }
    // The loop form: outer axes the output labels (one unit axis for a scalar), inner the
    // summed ones.
    let mut axes: Vec<Option<usize>> = eq.output.iter().map(|&l| Some(l)).collect();
    if axes.is_empty() {
        axes.push(None);
    }
    let n_outer = axes.len();
    axes.extend(summed.iter().map(|&l| Some(l)));
    let along = |per_label: &[i64]| -> Vec<i64> {
        axes.iter().map(|a| a.map_or(0, |l| per_label[l])).collect()
    };
    let outer: Vec<u64> = axes[..n_outer]
        .iter()
        .map(|a| a.map_or(1, |l| sizes[l]))
        .collect();
    let inner: Vec<u64> = summed.iter().map(|&l| sizes[l]).collect();
    let name = ctx.kernel_name(op, 0);
    let mut views = vec![out.view_with(along(&out_strides))];
    if inner.contains(&0) {
        // A sum over nothing: zeros.
        let mut insts = Insts::new();
        let zero = insts.constant(out.elem, 0.0);
        views[0].strides.truncate(n_outer);
        return Ok(vec![loop_kernel(
            name,
            outer,
            Vec::new(),
            views,
            vec![map_stage(insts, 0, zero)],
        )]);
    }
    views.extend(
        inputs
            .iter()
            .zip(&strides)
            .map(|(t, s)| t.view_with(along(s))),
    );
    let mut insts = Insts::new();
    let mut product = insts.load(&views, 1);
    for i in 2..views.len() as u32 {
        let v = insts.load(&views, i);
        product = insts.binary(BinaryOp::Mul, product, v);
    }
    if inner.is_empty() {
        return Ok(vec![loop_kernel(
            name,
            outer,
            inner,
            views,
            vec![map_stage(insts, 0, product)],
        )]);
    }
    let reduce = Stage::Reduce {
        insts: insts.finish(),
        value: product,
        op: ReduceOp::Sum,
        init: 0,
        ty: out.elem.compute(),
    };
    let mut insts = Insts::new();
    let acc = insts.acc(0, out.elem);
    Ok(vec![loop_kernel(
        name,
        outer,
        inner,
        views,
        vec![reduce, once_stage(insts, 0, acc)],
    )])
}

/// The two-operand product as one `Contract`, when its labels have the matrix product's
/// roles (see the module doc); `None` otherwise.
#[allow(clippy::too_many_arguments)]
fn as_contract(
    ctx: &LowerCtx,
    op: OpId,
    eq: &Einsum,
    sizes: &[u64],
    inputs: &[TensorRef],
    strides: &[Vec<i64>],
    out_strides: &[i64],
    out: &TensorRef,
) -> Option<Kernel> {
    let [a_labels, b_labels] = &eq.inputs[..] else {
        return None;
    };
    let distinct = |labels: &[usize]| {
        labels
            .iter()
            .enumerate()
            .all(|(i, l)| !labels[..i].contains(l))
    };
    if !distinct(a_labels) || !distinct(b_labels) {
        return None;
    }
    let (mut batch, mut m, mut n, mut k) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for label in 0..eq.n_labels {
        let (in_a, in_b, in_out) = (
            a_labels.contains(&label),
            b_labels.contains(&label),
            eq.output.contains(&label),
        );
        match (in_a, in_b, in_out) {
            (true, true, true) => batch.push(label),
            (true, false, true) => m.push(label),
            (false, true, true) => n.push(label),
            (true, true, false) => k.push(label),
            // A label summed within one operand only.
            _ => return None,
        }
    }
    if m.len() > 1 || n.len() > 1 || k.len() > 1 {
        return None;
    }
    // The batch in the output's order.
    batch.sort_by_key(|l| eq.output.iter().position(|o| o == l));
    let size = |group: &[usize]| group.first().map_or(1, |&l| sizes[l]);
    // An absent `m`, `n` or `k` is a dim of size 1; its stride is 1, as MatMul gives a vector's
    // added dim.
    let stride = |per_label: &[i64], group: &[usize]| group.first().map_or(1, |&l| per_label[l]);
    let mat = |t: &TensorRef, per_label: &[i64], rows: &[usize], cols: &[usize]| MatView {
        region: t.region,
        byte_offset: t.byte_offset,
        batch_strides: batch.iter().map(|&l| per_label[l]).collect(),
        row_stride: stride(per_label, rows),
        col_stride: stride(per_label, cols),
    };
    Some(Kernel {
        name: ctx.kernel_name(op, 0),
        body: KernelBody::Contract(Contract {
            elem: out.elem,
            batch: batch.iter().map(|&l| sizes[l]).collect(),
            m: size(&m),
            n: size(&n),
            k: size(&k),
            a: mat(&inputs[0], &strides[0], &m, &k),
            b: mat(&inputs[1], &strides[1], &k, &n).into(),
            c: mat(out, out_strides, &m, &n),
            alpha: 1.0f64.to_bits(),
            accumulate: false,
            pack: None,
            a_packed: None,
            b_packed: None,
            transposed: false,
            winograd: None,
        }),
    })
}
