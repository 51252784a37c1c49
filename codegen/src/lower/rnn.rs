//! ONNX's recurrent cells `RNN`, `GRU` and `LSTM`, their time loop unrolled into kernels.
//!
//! The dims come from `memc_ir::ops::RecurrentDims` (its module doc gives every operand's
//! layout). Per direction:
//!
//! 1. `XW = X W^T` for every token at once: one [`Contract`] over the `seq * batch` rows of
//!    `X` in its own order (either layout), into the op's planned scratch.
//! 2. The states `H` (and LSTM's `C`), `[batch, hidden]` in scratch, start as `initial_h`
//!    (`initial_c`) or zeros: one map kernel.
//! 3. Per step (the tokens in order, or backwards for the reverse direction): `HR = H R^T`, one
//!    contraction into scratch, then one loop kernel over `[batch, hidden]` computing the gates
//!    from `XW`, `HR`, the biases (and LSTM's peepholes), writing the new `H` (`C`) in place
//!    (each row reads only its own state elements; `HR` already holds what the others need),
//!    and the step's `Y`. GRU without `linear_before_reset` multiplies the reset gate into
//!    the state before its hidden product: a loop kernel writes `r * H` into scratch, and a
//!    second contraction writes `HR`'s hidden-gate columns as `(r * H) R_h^T`.
//! 4. The last step also writes `Y_h` (`Y_c`).
//!
//! With `sequence_lens` (forward only), a step past a batch row's length keeps that row's
//! state and writes zeros to `Y`, so `Y_h` is the state after the row's last token. The
//! activations are the defaults (sigmoid for the gates, tanh otherwise); `clip` clamps every
//! pre-activation. Everything computes in f32, as the ONNX reference does.
//!
//! Guarantees: kernels read and write only the op's operands, results and planned scratch;
//! other element types, other activations, a sequence that is not static or longer than
//! [`MAX_UNROLLED_STEPS`], or a plan without the scratch, are reported as unsupported.

use super::build::{Insts, TensorRef};
use super::movement::common::loop_kernel;
use super::{elem_type, unsupported, LowerCtx, LowerResult};
use crate::kernel::{
    BinaryOp, Contract, InstId, Kernel, KernelBody, MatView, Scalar, Stage, Store, UnaryOp, View,
};
use memc_ir::ops::{Cell, OpCtx, RecurrentDims};
use memc_ir::{Function, OpId};

/// The most tokens one recurrent op unrolls (each step is two to four kernels).
pub const MAX_UNROLLED_STEPS: u64 = 1024;

/// The static sizes of one recurrent op.
#[derive(Copy, Clone)]
struct Sizes {
    seq: u64,
    batch: u64,
    input: u64,
    hidden: u64,
    dirs: u64,
    gates: u64,
}

fn sizes(d: &RecurrentDims) -> Option<Sizes> {
    Some(Sizes {
        seq: d.seq.as_static()?,
        batch: d.batch.as_static()?,
        input: d.input.as_static()?,
        hidden: d.hidden.as_static()?,
        dirs: d.direction.count(),
        gates: d.cell.gates(),
    })
}

/// Element offsets (f32) of the scratch areas: `XW`, `HR`, `H`, `C` (LSTM), `r * H` (GRU
/// without `linear_before_reset`), and the total.
struct ScratchLayout {
    xw: u64,
    hr: u64,
    h: u64,
    c: u64,
    rh: u64,
    total: u64,
}

fn scratch_layout(d: &RecurrentDims, s: Sizes) -> Option<ScratchLayout> {
    let gate_row = s.gates.checked_mul(s.hidden)?;
    let xw_len = s.seq.checked_mul(s.batch)?.checked_mul(gate_row)?;
    let hr_len = s.batch.checked_mul(gate_row)?;
    let state = s.batch.checked_mul(s.hidden)?;
    // `C` for LSTM only, `r * H` for GRU without `linear_before_reset` only.
    let c_len = if d.cell == Cell::Lstm { state } else { 0 };
    let rh_len = if d.cell == Cell::Gru && !d.linear_before_reset {
        state
    } else {
        0
    };
    let hr = xw_len;
    let h = hr.checked_add(hr_len)?;
    let c = h.checked_add(state)?;
    let rh = c.checked_add(c_len)?;
    let total = rh.checked_add(rh_len)?;
    Some(ScratchLayout {
        xw: 0,
        hr,
        h,
        c,
        rh,
        total,
    })
}

/// The scratch bytes of a recurrent op (0 when its shapes are not static; lowering then says
/// why).
pub(super) fn scratch_bytes(func: &Function, op: OpId) -> u64 {
    RecurrentDims::resolve(&OpCtx { func, op })
        .ok()
        .and_then(|d| scratch_layout(&d, sizes(&d)?)?.total.checked_mul(4))
        .unwrap_or(0)
}

/// A matrix operand of a contraction at element offset `offset`.
fn mat(t: &TensorRef, offset: u64, row: u64, col: u64) -> MatView {
    MatView {
        region: t.region,
        byte_offset: t.byte_offset + (offset * t.elem.size()) as i64,
        batch_strides: Vec::new(),
        row_stride: row as i64,
        col_stride: col as i64,
    }
}

/// `c = a b` (`m x k` times `k x n`), overwriting `c`.
fn contract(name: String, [m, n, k]: [u64; 3], [a, b, c]: [MatView; 3]) -> Kernel {
    Kernel {
        name,
        body: KernelBody::Contract(Contract {
            elem: Scalar::F32,
            batch: Vec::new(),
            m,
            n,
            k,
            a,
            b: b.into(),
            c,
            alpha: 1f64.to_bits(),
            accumulate: false,
            pack: None,
            a_packed: None,
            b_packed: None,
            transposed: false,
            winograd: None,
        }),
    }
}

/// A view over the loop axes `[batch, hidden]` at element offset `offset`, moving `row` per
/// batch row and `col` per hidden unit.
fn at(t: &TensorRef, offset: u64, row: u64, col: u64) -> View {
    View {
        byte_offset: t.byte_offset + (offset * t.elem.size()) as i64,
        ..t.view_with(vec![row as i64, col as i64])
    }
}

/// Builds one step's scalar code: views are added as they are first read.
struct Step {
    views: Vec<View>,
    b: Insts,
    clip: Option<f64>,
}

impl Step {
    fn new(clip: Option<f64>) -> Step {
        Step {
            views: Vec::new(),
            b: Insts::new(),
            clip,
        }
    }

    fn load(&mut self, view: View) -> InstId {
        self.views.push(view);
        let index = self.views.len() as u32 - 1;
        self.b.load(&self.views, index)
    }

    fn add(&mut self, a: InstId, b: InstId) -> InstId {
        self.b.binary(BinaryOp::Add, a, b)
    }

    fn mul(&mut self, a: InstId, b: InstId) -> InstId {
        self.b.binary(BinaryOp::Mul, a, b)
    }

    /// `x` clamped to `[-clip, clip]` when `clip` is given.
    fn clipped(&mut self, x: InstId) -> InstId {
        match self.clip {
            Some(c) => {
                let hi = self.b.constant(Scalar::F32, c);
                let lo = self.b.constant(Scalar::F32, -c);
                let x = self.b.binary(BinaryOp::Min, x, hi);
                self.b.binary(BinaryOp::Max, x, lo)
            }
            None => x,
        }
    }

    /// `1 / (1 + e ^ -x)` of the clipped `x`.
    fn sigmoid(&mut self, x: InstId) -> InstId {
        let x = self.clipped(x);
        let neg = self.b.unary(UnaryOp::Neg, x);
        let e = self.b.unary(UnaryOp::Exp, neg);
        let one = self.b.constant(Scalar::F32, 1.0);
        let denominator = self.add(one, e);
        self.b.binary(BinaryOp::Div, one, denominator)
    }

    /// `tanh` of the clipped `x`.
    fn tanh(&mut self, x: InstId) -> InstId {
        let x = self.clipped(x);
        self.b.unary(UnaryOp::Tanh, x)
    }

    /// A kernel over `[batch, hidden]` running this step's code once per point.
    fn kernel(self, name: String, s: Sizes, stores: Vec<(View, InstId)>) -> Kernel {
        let mut views = self.views;
        let stores = stores
            .into_iter()
            .map(|(view, value)| {
                views.push(view);
                Store::new(views.len() as u32 - 1, value)
            })
            .collect();
        loop_kernel(
            name,
            vec![s.batch, s.hidden],
            Vec::new(),
            views,
            vec![Stage::Map {
                insts: self.b.finish(),
                stores,
            }],
        )
    }
}

/// `onnx.RNN`, `onnx.GRU`, `onnx.LSTM`: see the module doc.
pub(super) fn recurrent(ctx: &LowerCtx, op: OpId) -> LowerResult {
    let dims = RecurrentDims::resolve(&OpCtx { func: ctx.func, op }).map_err(unsupported)?;
    let name = dims.cell.name();
    let s = sizes(&dims).ok_or_else(|| unsupported("a shape is not static"))?;
    if s.seq > MAX_UNROLLED_STEPS {
        return Err(unsupported(format!(
            "{name} over {} steps (its time loop is unrolled, at most {MAX_UNROLLED_STEPS} steps)",
            s.seq
        )));
    }
    if [s.seq, s.batch, s.input].contains(&0) {
        return Err(unsupported(format!(
            "{name} with an empty sequence, batch or input"
        )));
    }
    if !dims.default_activations {
        return Err(unsupported(format!(
            "{name} with `activations` other than the defaults ({})",
            dims.cell.default_activations().join(", ")
        )));
    }
    let x = ctx.input(op, RecurrentDims::X)?;
    let w = ctx.input(op, RecurrentDims::W)?;
    let r = ctx.input(op, RecurrentDims::R)?;
    let bias = ctx.operand(op, RecurrentDims::B)?;
    let lens = ctx.operand(op, RecurrentDims::SEQUENCE_LENS)?;
    let initial_h = ctx.operand(op, RecurrentDims::INITIAL_H)?;
    let is_lstm = dims.cell == Cell::Lstm;
    let initial_c = match is_lstm {
        true => ctx.operand(op, RecurrentDims::INITIAL_C)?,
        false => None,
    };
    let peepholes = match is_lstm {
        true => ctx.operand(op, RecurrentDims::P)?,
        false => None,
    };
    let floats = [
        Some(&x),
        Some(&w),
        Some(&r),
        bias.as_ref(),
        initial_h.as_ref(),
    ]
    .into_iter()
    .chain([initial_c.as_ref(), peepholes.as_ref()])
    .flatten();
    for t in floats {
        if t.elem != Scalar::F32 || !ctx.target.contracts(elem_type(Scalar::F32)) {
            return Err(unsupported(format!(
                "{name} in {} (its products are f32 contractions)",
                t.elem.name()
            )));
        }
    }
    if lens.is_some() && dims.direction != memc_ir::ops::Direction::Forward {
        return Err(unsupported(format!(
            "{name} with `sequence_lens` and `direction` other than \"forward\""
        )));
    }
    let result = |index: usize| -> Result<Option<TensorRef>, super::LowerError> {
        match ctx.result_used(op, index) {
            true => ctx.result(op, index).map(Some),
            false => Ok(None),
        }
    };
    let y = result(RecurrentDims::Y)?;
    let y_h = result(RecurrentDims::Y_H)?;
    let y_c = match is_lstm {
        true => result(RecurrentDims::Y_C)?,
        false => None,
    };
    let layout = scratch_layout(&dims, s).ok_or_else(|| unsupported("the state sizes overflow"))?;
    let scratch = ctx
        .scratch(op)
        .filter(|t| t.numel() >= layout.total * 4)
        .ok_or_else(|| unsupported(format!("{name} planned without its scratch (the states)")))?;
    let scratch = TensorRef {
        region: scratch.region,
        byte_offset: scratch.byte_offset,
        elem: Scalar::F32,
        shape: vec![layout.total],
    };
    let (hs, gh) = (s.hidden, s.gates * s.hidden);
    let hr_columns = match dims.cell == Cell::Gru && !dims.linear_before_reset {
        true => 2 * hs,
        false => gh,
    };
    let mut kernels = Vec::new();
    // Where the state of direction `d` lives in an `initial_h`-like tensor (or `Y_h`).
    let state_at = |t: &TensorRef, d: u64| match dims.batchwise {
        false => at(t, d * s.batch * hs, hs, 1),
        true => at(t, d * hs, s.dirs * hs, 1),
    };

    for d in 0..s.dirs {
        let reverse = dims.direction.is_reverse(d);
        // 1. XW for every token: rows in X's order.
        let rows = s.seq * s.batch;
        kernels.push(contract(
            ctx.kernel_name(op, kernels.len()),
            [rows, gh, s.input],
            [
                mat(&x, 0, s.input, 1),
                mat(&w, d * gh * s.input, 1, s.input),
                mat(&scratch, layout.xw, gh, 1),
            ],
        ));
        // 2. The initial states.
        let mut init = Step::new(None);
        let mut stores = Vec::new();
        let starts = [
            (initial_h.as_ref(), layout.h),
            (initial_c.as_ref(), layout.c),
        ];
        for (given, offset) in starts.into_iter().take(if is_lstm { 2 } else { 1 }) {
            let value = match given {
                Some(t) => init.load(state_at(t, d)),
                None => init.b.constant(Scalar::F32, 0.0),
            };
            stores.push((at(&scratch, offset, hs, 1), value));
        }
        kernels.push(init.kernel(ctx.kernel_name(op, kernels.len()), s, stores));

        // 3. The steps.
        for step in 0..s.seq {
            let t = if reverse { s.seq - 1 - step } else { step };
            // HR = H R^T (GRU without `linear_before_reset`: the z and r columns only; the
            // hidden gate's come from `r * H` below).
            kernels.push(contract(
                ctx.kernel_name(op, kernels.len()),
                [s.batch, hr_columns, hs],
                [
                    mat(&scratch, layout.h, hs, 1),
                    mat(&r, d * gh * hs, 1, hs),
                    mat(&scratch, layout.hr, gh, 1),
                ],
            ));
            // XW's row of (t, b): X's row order.
            let (xw_offset, xw_row) = match dims.batchwise {
                false => (layout.xw + t * s.batch * gh, gh),
                true => (layout.xw + t * gh, s.seq * gh),
            };
            let mut st = Step::new(dims.clip);
            // The pre-activation of gate `g`: XW + HR (+ both biases).
            let gate_sum = |st: &mut Step, g: u64, with_recurrent_bias: bool| {
                let xw = st.load(at(&scratch, xw_offset + g * hs, xw_row, 1));
                let hr = st.load(at(&scratch, layout.hr + g * hs, gh, 1));
                let mut sum = st.add(xw, hr);
                if let Some(b) = &bias {
                    let wb = st.load(at(b, d * 2 * gh + g * hs, 0, 1));
                    sum = st.add(sum, wb);
                    if with_recurrent_bias {
                        let rb = st.load(at(b, d * 2 * gh + gh + g * hs, 0, 1));
                        sum = st.add(sum, rb);
                    }
                }
                sum
            };
            let h_prev = st.load(at(&scratch, layout.h, hs, 1));
            let mut c_new = None;
            let h_new = match dims.cell {
                Cell::Rnn => {
                    let sum = gate_sum(&mut st, 0, true);
                    st.tanh(sum)
                }
                Cell::Gru => {
                    if !dims.linear_before_reset {
                        // r * H into scratch, then HR's hidden columns = (r * H) R_h^T.
                        let mut reset = Step::new(dims.clip);
                        let sum = gate_sum(&mut reset, 1, true);
                        let gate = reset.sigmoid(sum);
                        let h = reset.load(at(&scratch, layout.h, hs, 1));
                        let rh = reset.mul(gate, h);
                        kernels.push(reset.kernel(
                            ctx.kernel_name(op, kernels.len()),
                            s,
                            vec![(at(&scratch, layout.rh, hs, 1), rh)],
                        ));
                        kernels.push(contract(
                            ctx.kernel_name(op, kernels.len()),
                            [s.batch, hs, hs],
                            [
                                mat(&scratch, layout.rh, hs, 1),
                                mat(&r, d * gh * hs + 2 * hs * hs, 1, hs),
                                mat(&scratch, layout.hr + 2 * hs, gh, 1),
                            ],
                        ));
                    }
                    let z_sum = gate_sum(&mut st, 0, true);
                    let z = st.sigmoid(z_sum);
                    let candidate = if dims.linear_before_reset {
                        // tanh(XW_h + r * (HR_h + Rb_h) + Wb_h).
                        let r_sum = gate_sum(&mut st, 1, true);
                        let reset = st.sigmoid(r_sum);
                        let mut hr = st.load(at(&scratch, layout.hr + 2 * hs, gh, 1));
                        let mut xw = st.load(at(&scratch, xw_offset + 2 * hs, xw_row, 1));
                        if let Some(b) = &bias {
                            let rb = st.load(at(b, d * 2 * gh + gh + 2 * hs, 0, 1));
                            hr = st.add(hr, rb);
                            let wb = st.load(at(b, d * 2 * gh + 2 * hs, 0, 1));
                            xw = st.add(xw, wb);
                        }
                        let gated = st.mul(reset, hr);
                        st.add(xw, gated)
                    } else {
                        gate_sum(&mut st, 2, true)
                    };
                    let candidate = st.tanh(candidate);
                    // (1 - z) * candidate + z * H = candidate + z * (H - candidate).
                    let diff = st.b.binary(BinaryOp::Sub, h_prev, candidate);
                    let blend = st.mul(z, diff);
                    st.add(candidate, blend)
                }
                Cell::Lstm => {
                    // Gates i, o, f, c; peepholes i, o, f.
                    let c_prev = st.load(at(&scratch, layout.c, hs, 1));
                    let peep = |st: &mut Step, sum: InstId, k: u64, c: InstId| match &peepholes {
                        Some(p) => {
                            let weight = st.load(at(p, d * 3 * hs + k * hs, 0, 1));
                            let term = st.mul(weight, c);
                            st.add(sum, term)
                        }
                        None => sum,
                    };
                    let i_sum = gate_sum(&mut st, 0, true);
                    let i_sum = peep(&mut st, i_sum, 0, c_prev);
                    let i = st.sigmoid(i_sum);
                    let f = if dims.input_forget {
                        let one = st.b.constant(Scalar::F32, 1.0);
                        st.b.binary(BinaryOp::Sub, one, i)
                    } else {
                        let f_sum = gate_sum(&mut st, 2, true);
                        let f_sum = peep(&mut st, f_sum, 2, c_prev);
                        st.sigmoid(f_sum)
                    };
                    let c_sum = gate_sum(&mut st, 3, true);
                    let candidate = st.tanh(c_sum);
                    let kept = st.mul(f, c_prev);
                    let written = st.mul(i, candidate);
                    let c = st.add(kept, written);
                    let o_sum = gate_sum(&mut st, 1, true);
                    let o_sum = peep(&mut st, o_sum, 1, c);
                    let o = st.sigmoid(o_sum);
                    let c_out = st.b.unary(UnaryOp::Tanh, c);
                    c_new = Some((c_prev, c));
                    st.mul(o, c_out)
                }
            };
            // Past a row's length: keep the state, write zeros to Y.
            let (h_state, y_value, c_state) = match &lens {
                Some(l) => {
                    let len = st.load(at(l, 0, 1, 0));
                    let now = st.b.constant_int(Scalar::I32, t as i64);
                    let valid = st.b.binary(BinaryOp::Lt, now, len);
                    let zero = st.b.constant(Scalar::F32, 0.0);
                    let h = st.b.select(valid, h_new, h_prev);
                    let y = st.b.select(valid, h_new, zero);
                    let c = c_new.map(|(prev, new)| st.b.select(valid, new, prev));
                    (h, y, c)
                }
                None => (h_new, h_new, c_new.map(|(_, new)| new)),
            };
            let mut stores = vec![(at(&scratch, layout.h, hs, 1), h_state)];
            if let Some(c) = c_state {
                stores.push((at(&scratch, layout.c, hs, 1), c));
            }
            if let Some(y) = &y {
                let view = match dims.batchwise {
                    false => at(y, (t * s.dirs + d) * s.batch * hs, hs, 1),
                    true => at(y, (t * s.dirs + d) * hs, s.seq * s.dirs * hs, 1),
                };
                stores.push((view, y_value));
            }
            if step + 1 == s.seq {
                if let Some(y_h) = &y_h {
                    stores.push((state_at(y_h, d), h_state));
                }
                if let (Some(y_c), Some(c)) = (&y_c, c_state) {
                    stores.push((state_at(y_c, d), c));
                }
            }
            kernels.push(st.kernel(ctx.kernel_name(op, kernels.len()), s, stores));
        }
    }
    Ok(kernels)
}
