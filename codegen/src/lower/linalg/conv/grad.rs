//! onnxruntime's `ms.ConvGrad`: the gradients of a convolution `Y = Conv(X, W) (+ B)` given
//! `dY`, each computed only when its result is present and used.
//!
//! - `dX` is the transposed convolution of `dY` by `W` (the same kernels as ConvTranspose:
//!   one product per kernel tap, or a gathering loop kernel), over the forward window's begin
//!   pads, strides, dilations and groups.
//! - `dW[m, c, k] = sum over images and outputs of dY[n, m, o] * X[n, c, o * stride - pad + k *
//!   dilation]`. Its main form is im2col, as Conv's ([`super::im2col_form`] decides, with the
//!   same scratch rule): one product per image `dW[m_g, c_g * taps] (+)= dY[n][m_g, outputs]
//!   @ col[n]^T`, batched over groups, the images accumulating in turn, where `col[n]^T` is
//!   an implicit im2col operand (transposed) packed straight from `X`; on a target with
//!   explicit im2col, the input windows of a pass of images are first copied into a column
//!   matrix `[C * taps, outputs]` in the op's planned scratch. A plain 1x1 convolution
//!   (stride 1, no padding) multiplies by `X` itself. Otherwise one loop kernel sums over
//!   images and outputs for each weight element, reading padding as 0.
//! - `dB[m] = sum over images and outputs of dY[n, m, o]`, one reduction.
//!
//! The window is resolved against `X` with the kernel from `kernel_shape` or `W`'s spatial
//! dims (auto_pad honoured). Every form sums exactly the gradient's terms.

use super::super::super::build::{guard, Insts, TensorRef};
use super::super::super::movement::common::{loop_kernel, once_stage};
use super::super::super::plan::{Form, OpPlan};
use super::super::super::{unsupported, LowerCtx, LowerError, LowerResult};
use super::super::matmul::check_arith;
use super::{
    column_matrix, conv_shape, im2col_copies, im2col_view, matview, signed, transposed_conv,
    ConvPlan, ConvShape, Im2col, Window,
};
use crate::kernel::{Contract, ContractB, Kernel, KernelBody, ReduceOp, Scalar, Stage};
use memc_ir::ops::{OpCtx, WindowAttrs};
use memc_ir::target::TargetInfo;
use memc_ir::{Dim, Function, OpId};

/// ConvGrad's plan: the forward convolution's ([`ConvPlan`]), whose im2col matrix `dW` reads.
pub type ConvGradPlan = ConvPlan;

/// The forward window of ConvGrad `op` over `X`'s spatial sizes, the kernel from
/// `kernel_shape` or `W` (operand 2).
fn grad_window(func: &Function, op: OpId, input: &[u64]) -> Result<Window, LowerError> {
    let ctx = OpCtx { func, op };
    let n_spatial = input.len();
    let weight_spatial: Vec<Dim> = ctx
        .operand_type(2)
        .filter(|w| w.rank() == n_spatial + 2)
        .map_or_else(Vec::new, |w| w.dims[2..].to_vec());
    let kernel: Option<Vec<u64>> = WindowAttrs::kernel_sizes(&ctx, n_spatial, &weight_spatial)
        .map_err(unsupported)?
        .into_iter()
        .collect();
    let kernel = kernel
        .filter(|k| k.len() == n_spatial)
        .ok_or_else(|| unsupported("the kernel's spatial sizes are not known"))?;
    let resolved = WindowAttrs::of(&ctx, n_spatial)
        .and_then(|attrs| attrs.resolve(&kernel, input))
        .map_err(unsupported)?;
    Ok(Window {
        kernel: signed(&resolved.kernel)?,
        strides: signed(&resolved.strides)?,
        dilations: signed(&resolved.dilations)?,
        begin: signed(&resolved.pad_begin)?,
        end: signed(&resolved.pad_end)?,
    })
}

/// Plans a ConvGrad on `target`: `dW` through im2col when [`super::im2col_form`] chooses it
/// for the forward convolution (an explicit column matrix, within `scratch_cap` bytes, is the
/// op's scratch), else without scratch.
pub fn plan(func: &Function, target: &TargetInfo, op: OpId, scratch_cap: u64) -> OpPlan {
    let data = func.op(op);
    let shape_of = |index: usize| {
        func.value_type(*data.operands.get(index)?)
            .tensor()
            .and_then(|t| t.static_shape())
    };
    let groups = OpCtx { func, op }.int_or_default("group");
    let shape = match (shape_of(0), shape_of(1), shape_of(2)) {
        (Some(dy), Some(x), Some(w)) => conv_shape(&x, &w, &dy, u64::try_from(groups).unwrap_or(0))
            .filter(|s| {
                w[0] % s.groups == 0
                    && x[1] == s.groups * s.c_g
                    && dy[1] == s.groups * s.m_g
                    && dy[0] == x[0]
            }),
        _ => None,
    };
    let window = match &shape {
        Some(s) => grad_window(func, op, &s.in_spatial),
        None => Err(unsupported(
            "ConvGrad needs static shapes, dY of the forward's shape, and a positive `group` dividing the channels",
        )),
    };
    let elem = data
        .operands
        .first()
        .and_then(|&v| func.value_type(v).tensor())
        .map(|t| Scalar::from_elem(t.elem));
    // Only a present dW needs the column matrix.
    let (plan, bytes) = ConvPlan::choose(
        target,
        shape,
        window,
        elem,
        data.results.len() >= 2,
        scratch_cap,
    );
    OpPlan::with_scratch(
        Form::ConvGrad(Box::new(plan)),
        bytes,
        "im2col matrix (weight gradient)",
    )
}

/// Lowers a ConvGrad in the form `plan` chose.
pub fn conv_grad(ctx: &LowerCtx, op: OpId, plan: &ConvGradPlan) -> LowerResult {
    let dy = ctx.input(op, 0)?;
    let x = ctx.input(op, 1)?;
    let w = ctx.input(op, 2)?;
    check_arith(dy.elem)?;
    let s = plan.shape.clone().ok_or_else(|| {
        unsupported("ConvGrad needs static shapes, dY of the forward's shape, and a positive `group` dividing the channels")
    })?;
    let win = plan.window.clone()?;
    // The window's output sizes over X must be dY's.
    let outputs_match = s.out_spatial.iter().enumerate().all(|(i, &o)| {
        let extent = (win.kernel[i] - 1) * win.dilations[i] + 1;
        let total = s.in_spatial[i] as i64 + win.begin[i] + win.end[i] - extent;
        total >= 0 && total / win.strides[i] + 1 == o as i64
    });
    if !outputs_match {
        return Err(unsupported(
            "dY's spatial dims are not the convolution's output sizes over X",
        ));
    }
    let mut kernels = Vec::new();
    if ctx.result_used(op, 0) {
        let dx = ctx.result(op, 0)?;
        if dx.numel() > 0 {
            // The transposed convolution maps dY (C = M channels) into X's shape.
            let t = ConvShape {
                n: s.n,
                groups: s.groups,
                c_g: s.m_g,
                m_g: s.c_g,
                in_spatial: s.out_spatial.clone(),
                out_spatial: s.in_spatial.clone(),
            };
            let t_win = Window {
                end: win.begin.clone(),
                ..win.clone()
            };
            for mut k in transposed_conv(ctx, op, &dy, &w, None, &dx, &t, &t_win) {
                k.name = ctx.kernel_name(op, kernels.len());
                kernels.push(k);
            }
        }
    }
    if ctx.result_used(op, 1) {
        let dw = ctx.result(op, 1)?;
        if dw.numel() > 0 {
            let implicit = match plan.im2col {
                Some(Im2col::Implicit) => implicit_weight_grad(&dy, &x, &dw, &s, &win),
                _ => None,
            };
            let scratch = match plan.im2col {
                Some(Im2col::Explicit { images, bytes }) => ctx
                    .scratch(op)
                    .filter(|col| col.numel() >= bytes)
                    .map(|col| (images, col)),
                _ => None,
            };
            let bodies = match (implicit, scratch) {
                (Some(bodies), _) => bodies,
                (None, Some((images, col))) => {
                    im2col_weight_grad(&dy, &x, &dw, &s, &win, images, &col)
                }
                (None, None)
                    if is_plain(&win)
                        && ctx
                            .target
                            .contracts(super::super::super::elem_type(dw.elem)) =>
                {
                    plain_weight_grad(&dy, &x, &dw, &s)
                }
                (None, None) => vec![direct_weight_grad(&dy, &x, &dw, &s, &win)],
            };
            for body in bodies {
                kernels.push(Kernel {
                    name: ctx.kernel_name(op, kernels.len()),
                    body,
                });
            }
        }
    }
    if ctx.result_used(op, 2) {
        let db = ctx.result(op, 2)?;
        if db.numel() > 0 {
            let mut k = bias_grad(&dy, &db);
            k.name = ctx.kernel_name(op, kernels.len());
            kernels.push(k);
        }
    }
    Ok(kernels)
}

/// Whether the window is a plain 1x1 one: kernel 1, stride 1, no padding.
fn is_plain(win: &Window) -> bool {
    win.kernel.iter().all(|&k| k == 1)
        && win.strides.iter().all(|&st| st == 1)
        && win.begin.iter().chain(&win.end).all(|&p| p == 0)
}

/// One product per image (batched over groups) `dW[m_g, c_g * taps] (+)= dY[n][m_g, outputs]
/// @ B[outputs, c_g * taps]`, `B` at `b_offset(image)` elements of `b_of` with its output rows
/// at stride 1 and its columns at `b_col` elements (`b_group` per group). The first image
/// overwrites, the others accumulate.
#[allow(clippy::too_many_arguments)]
fn per_image_products(
    dy: &TensorRef,
    dw: &TensorRef,
    s: &ConvShape,
    images: std::ops::Range<u64>,
    b_of: &TensorRef,
    b_offset: &dyn Fn(u64) -> i64,
    b_col: i64,
    b_group: i64,
    k_cols: u64,
) -> Vec<KernelBody> {
    let b_at = |image: u64| {
        let mut b = matview(b_of, b_offset(image), 1, b_col);
        if s.groups > 1 {
            b.batch_strides.push(b_group);
        }
        ContractB::Mat(b)
    };
    products_per_image(dy, dw, s, images, &b_at, k_cols)
}

/// The products of [`per_image_products`] with image `n`'s `B` (batch strides included) from
/// `b_at(n)`.
fn products_per_image(
    dy: &TensorRef,
    dw: &TensorRef,
    s: &ConvShape,
    images: std::ops::Range<u64>,
    b_at: &dyn Fn(u64) -> ContractB,
    k_cols: u64,
) -> Vec<KernelBody> {
    let (ys, ws) = (dy.strides(), dw.strides());
    let pixels: u64 = s.out_spatial.iter().product();
    images
        .map(|image| {
            let mut a = matview(dy, image as i64 * ys[0], ys[1], 1);
            let b = b_at(image);
            let mut c = matview(dw, 0, ws[0], 1);
            let mut batch = Vec::new();
            if s.groups > 1 {
                batch.push(s.groups);
                a.batch_strides.push(s.m_g as i64 * ys[1]);
                c.batch_strides.push(s.m_g as i64 * ws[0]);
            }
            KernelBody::Contract(Contract {
                elem: dw.elem,
                batch,
                m: s.m_g,
                n: k_cols,
                k: pixels,
                a,
                b,
                c,
                alpha: 1f64.to_bits(),
                accumulate: image > 0,
                pack: None,
                a_packed: None,
                b_packed: None,
                transposed: false,
                winograd: None,
            })
        })
        .collect()
}

/// `dW` through implicit im2col: one product per image whose `B` is the image's transposed
/// column matrix read straight from `X` (`None` past the view's limits).
fn implicit_weight_grad(
    dy: &TensorRef,
    x: &TensorRef,
    dw: &TensorRef,
    s: &ConvShape,
    win: &Window,
) -> Option<Vec<KernelBody>> {
    let xs = x.strides();
    let batch = if s.groups > 1 {
        vec![s.c_g as i64 * xs[1]]
    } else {
        Vec::new()
    };
    let view = im2col_view(x, s, win, batch, true)?;
    let rows = view.rows();
    let esize = x.elem.size() as i64;
    let b_at = |image: u64| {
        ContractB::Im2col(crate::kernel::Im2colView {
            byte_offset: view.byte_offset + image as i64 * xs[0] * esize,
            ..view.clone()
        })
    };
    Some(products_per_image(dy, dw, s, 0..s.n, &b_at, rows))
}

/// `dW` through an explicit im2col matrix: per pass of `pass_images` images, the column
/// matrix, then one product per image of the pass.
fn im2col_weight_grad(
    dy: &TensorRef,
    x: &TensorRef,
    dw: &TensorRef,
    s: &ConvShape,
    win: &Window,
    pass_images: u64,
    scratch: &TensorRef,
) -> Vec<KernelBody> {
    let (col, taps, pixels) = column_matrix(s, win, pass_images, scratch, dw.elem);
    let rows = s.groups * s.c_g * taps;
    let xs = x.strides();
    let esize = x.elem.size() as i64;
    let mut bodies = Vec::new();
    let mut first = 0;
    while first < s.n {
        let images = pass_images.min(s.n - first);
        let x_pass = TensorRef {
            byte_offset: x.byte_offset + first as i64 * xs[0] * esize,
            ..x.clone()
        };
        bodies.extend(im2col_copies(&x_pass, &col, s, win, images));
        let offset = move |image: u64| ((image - first) * rows * pixels) as i64;
        bodies.extend(per_image_products(
            dy,
            dw,
            s,
            first..first + images,
            &col,
            &offset,
            pixels as i64,
            (s.c_g * taps * pixels) as i64,
            s.c_g * taps,
        ));
        first += images;
    }
    bodies
}

/// `dW` of a plain 1x1 convolution: `X[n]` is its own column matrix.
fn plain_weight_grad(
    dy: &TensorRef,
    x: &TensorRef,
    dw: &TensorRef,
    s: &ConvShape,
) -> Vec<KernelBody> {
    let xs = x.strides();
    let image_stride = xs[0];
    let offset = move |image: u64| image as i64 * image_stride;
    per_image_products(
        dy,
        dw,
        s,
        0..s.n,
        x,
        &offset,
        xs[1],
        s.c_g as i64 * xs[1],
        s.c_g,
    )
}

/// `dW` as one loop kernel: outer axes `([g,] m, c, k...)` walk the weight, inner axes `(n,
/// o...)` the images and outputs; `X` is read through guards, padding reading 0.
fn direct_weight_grad(
    dy: &TensorRef,
    x: &TensorRef,
    dw: &TensorRef,
    s: &ConvShape,
    win: &Window,
) -> KernelBody {
    let n_spatial = s.in_spatial.len();
    let grouped = s.groups > 1;
    let lead = usize::from(grouped);
    // Axes: [g], m, c, k..., then n, o...
    let (m_axis, c_axis) = (lead, lead + 1);
    let k_axis = |i: usize| lead + 2 + i;
    let n_axis = lead + 2 + n_spatial;
    let o_axis = |i: usize| n_axis + 1 + i;
    let n_axes = n_axis + 1 + n_spatial;
    let mut outer = Vec::new();
    if grouped {
        outer.push(s.groups);
    }
    outer.push(s.m_g);
    outer.push(s.c_g);
    outer.extend(win.kernel.iter().map(|&k| k as u64));
    let mut inner = vec![s.n];
    inner.extend(&s.out_spatial);
    let (xs, ys, ws) = (x.strides(), dy.strides(), dw.strides());
    let mut w_strides = vec![0i64; n_axes];
    let mut y_strides = vec![0i64; n_axes];
    let mut x_strides = vec![0i64; n_axes];
    if grouped {
        w_strides[0] = s.m_g as i64 * ws[0];
        y_strides[0] = s.m_g as i64 * ys[1];
        x_strides[0] = s.c_g as i64 * xs[1];
    }
    w_strides[m_axis] = ws[0];
    y_strides[m_axis] = ys[1];
    w_strides[c_axis] = ws[1];
    x_strides[c_axis] = xs[1];
    y_strides[n_axis] = ys[0];
    x_strides[n_axis] = xs[0];
    let mut x_view = x.view_with(Vec::new());
    for i in 0..n_spatial {
        w_strides[k_axis(i)] = ws[2 + i];
        y_strides[o_axis(i)] = ys[2 + i];
        x_strides[k_axis(i)] = win.dilations[i] * xs[2 + i];
        x_strides[o_axis(i)] = win.strides[i] * xs[2 + i];
        x_view.byte_offset -= win.begin[i] * xs[2 + i] * x.elem.size() as i64;
        let size = s.in_spatial[i] as i64;
        let last = (s.out_spatial[i] as i64 - 1) * win.strides[i] - win.begin[i]
            + (win.kernel[i] - 1) * win.dilations[i];
        if win.begin[i] > 0 || last >= size {
            let mut coeffs = vec![0i64; n_axes];
            coeffs[o_axis(i)] = win.strides[i];
            coeffs[k_axis(i)] = win.dilations[i];
            x_view.guards.push(guard(coeffs, -win.begin[i], size));
        }
    }
    x_view.strides = x_strides;
    let views = vec![dw.view_with(w_strides), dy.view_with(y_strides), x_view];
    let mut insts = Insts::new();
    let yv = insts.load(&views, 1);
    let xv = insts.load(&views, 2);
    let prod = insts.binary(crate::kernel::BinaryOp::Mul, yv, xv);
    let reduce = Stage::Reduce {
        insts: insts.finish(),
        value: prod,
        op: ReduceOp::Sum,
        init: 0,
        ty: dw.elem.compute(),
    };
    let mut insts = Insts::new();
    let acc = insts.acc(0, dw.elem);
    let store = once_stage(insts, 0, acc);
    loop_kernel(String::new(), outer, inner, views, vec![reduce, store]).body
}

/// `dB[m]`: the sum of `dY` over images and outputs, outer axis `m`, inner axes `(n, o...)`.
fn bias_grad(dy: &TensorRef, db: &TensorRef) -> Kernel {
    let ys = dy.strides();
    let mut inner = vec![dy.shape[0]];
    inner.extend(&dy.shape[2..]);
    let mut y_strides = vec![ys[1], ys[0]];
    y_strides.extend(&ys[2..]);
    let mut b_strides = vec![1i64];
    b_strides.resize(y_strides.len(), 0);
    let views = vec![db.view_with(b_strides), dy.view_with(y_strides)];
    let mut insts = Insts::new();
    let v = insts.load(&views, 1);
    let reduce = Stage::Reduce {
        insts: insts.finish(),
        value: v,
        op: ReduceOp::Sum,
        init: 0,
        ty: dy.elem.compute(),
    };
    let mut insts = Insts::new();
    let acc = insts.acc(0, dy.elem);
    let store = once_stage(insts, 0, acc);
    loop_kernel(
        String::new(),
        vec![dy.shape[1]],
        inner,
        views,
        vec![reduce, store],
    )
}
