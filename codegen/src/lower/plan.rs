//! Lowering dispatch: one exhaustive `match` on the opcode, deciding each op's form once.
//!
//! [`plan_op`] runs before memory planning. For every op of the table it returns an
//! [`OpPlan`]: the form its kernels take on the target (which family function emits them, a
//! convolution's im2col choice, a low-bit product's tiles) and the scratch bytes that form
//! needs. The memory planner reserves exactly [`OpPlan::scratch_bytes`]; after planning,
//! [`lower_op`] emits the kernels of the same plan, so the form and the scratch size cannot
//! disagree. An op planned without its scratch (a memory plan made without it) falls back to a
//! form that needs none, or, where there is none, says so.
//!
//! Guarantees: every opcode has an arm (there is no wildcard), so an op added to the table
//! without a lowering is a build error; an op with no kernel on the target has an arm that
//! says why.

use super::{
    attention, elementwise, extents, linalg, loss, movement, quant4, recurrent, reduce, rnn, signal,
};
use super::{unsupported, LowerCtx, LowerResult};
use crate::kernel::{ReduceOp, Scalar};
use memc_ir::target::TargetInfo;
use memc_ir::{ElemType, Function, OpId, Opcode, WeightStore};
use std::collections::HashMap;

/// A family's lowering of one op: its kernels, given the memory plan.
pub(super) type LowerFn = fn(&LowerCtx, OpId) -> LowerResult;

/// How one op lowers, decided before memory planning, and the scratch bytes that needs.
#[derive(Clone, Debug)]
pub struct OpPlan {
    /// All the op's scratch: its form's own, then (64-aligned, at the end) `pack_bytes`.
    scratch_bytes: u64,
    /// The part of the scratch reserved for the CPU GEMM's packed panels
    /// (`Contract::pack`); 0 for ops without contractions and on other targets.
    pack_bytes: u64,
    /// What the scratch holds, for the memory report (`im2col matrix`); empty without scratch.
    scratch_use: &'static str,
    form: Form,
}

/// The form of an op's kernels.
#[derive(Clone, Debug)]
pub(super) enum Form {
    /// Nothing runs: a weight, a left-out operand, the return.
    Nothing,
    /// The kernels of a family function.
    Kernels(LowerFn),
    /// A convolution, its im2col choice made.
    Conv(Box<linalg::ConvPlan>),
    /// A low-bit product; it streams the weight, or uses the plan's scratch for its tiles.
    NBits,
    /// A convolution's gradients, the weight gradient's im2col choice made.
    ConvGrad(Box<linalg::conv::grad::ConvGradPlan>),
    /// The target has no kernel for the op: why.
    Unsupported(&'static str),
}

impl OpPlan {
    /// The scratch bytes the op needs during its step (what the memory planner reserves).
    pub fn scratch_bytes(&self) -> u64 {
        self.scratch_bytes
    }

    /// What the op's scratch holds (`im2col matrix`, `attention scores`), for the memory
    /// report; `None` when it needs none.
    pub fn scratch_use(&self) -> Option<&'static str> {
        (self.scratch_bytes > 0).then_some(self.scratch_use)
    }

    fn nothing() -> OpPlan {
        OpPlan {
            scratch_bytes: 0,
            pack_bytes: 0,
            scratch_use: "",
            form: Form::Nothing,
        }
    }

    fn kernels(lower: LowerFn) -> OpPlan {
        OpPlan {
            scratch_bytes: 0,
            pack_bytes: 0,
            scratch_use: "",
            form: Form::Kernels(lower),
        }
    }

    fn unsupported(reason: &'static str) -> OpPlan {
        OpPlan {
            scratch_bytes: 0,
            pack_bytes: 0,
            scratch_use: "",
            form: Form::Unsupported(reason),
        }
    }

    /// A plan whose form needs `scratch_bytes` of scratch memory holding `scratch_use`.
    pub(super) fn with_scratch(
        form: Form,
        scratch_bytes: u64,
        scratch_use: &'static str,
    ) -> OpPlan {
        OpPlan {
            scratch_bytes,
            pack_bytes: 0,
            scratch_use,
            form,
        }
    }
}

/// The [`OpPlan`] of every op of a function's entry block, for one target.
pub struct OpPlans<'t> {
    pub(super) target: &'t TargetInfo,
    plans: HashMap<OpId, OpPlan>,
    /// The function's conv scratch cap ([`conv_scratch_cap`]), 0 without convolutions.
    conv_cap: u64,
}

impl OpPlans<'_> {
    /// The target the ops were planned for.
    pub fn target(&self) -> &TargetInfo {
        self.target
    }

    /// The scratch bytes of `op` (0 for an op not planned here): what to give the memory
    /// planner (`memc_passes::memory::plan_function_with_scratch`).
    pub fn scratch_bytes(&self, op: OpId) -> u64 {
        self.plans.get(&op).map_or(0, OpPlan::scratch_bytes)
    }

    /// What the scratch of `op` holds (`None` for an op without scratch or not planned here).
    pub fn scratch_use(&self, op: OpId) -> Option<&'static str> {
        self.plans.get(&op).and_then(OpPlan::scratch_use)
    }

    /// The plan of `op`.
    pub fn get(&self, op: OpId) -> Option<&OpPlan> {
        self.plans.get(&op)
    }
}

/// Plans every op of `func`'s entry block for `target` (see [`plan_op`]).
pub fn plan_ops<'t>(func: &Function, weights: &WeightStore, target: &'t TargetInfo) -> OpPlans<'t> {
    plan_ops_with(func, weights, target, true)
}

/// [`plan_ops`] without the forms that take scratch only where the model's activation bound
/// leaves room at their step (a convolution's Winograd transforms or transposed product):
/// the plan to weigh one with those forms against, since a placed arena may be below the
/// bound and have less room than it says.
pub fn plan_ops_without_headroom<'t>(
    func: &Function,
    weights: &WeightStore,
    target: &'t TargetInfo,
) -> OpPlans<'t> {
    plan_ops_with(func, weights, target, false)
}

fn plan_ops_with<'t>(
    func: &Function,
    weights: &WeightStore,
    target: &'t TargetInfo,
    headroom_wanted: bool,
) -> OpPlans<'t> {
    let ops = func.layout().block_ops(func.entry_block());
    let has_products = ops.iter().any(|&op| has_contractions(func.op(op).opcode));
    let (cap, headroom) = match has_products {
        true => conv_caps(func, weights, target),
        false => (0, None),
    };
    let plans = ops
        .iter()
        .map(|&op| {
            // GEMM panels only where they do not raise the model's peak (stack panels
            // elsewhere), and, like the forms that need headroom, only in the plan that
            // wants them (the other gets them in the bytes its placed arena leaves free).
            let room = match headroom_wanted {
                true => headroom.as_ref().map(|h| h.get(&op).copied().unwrap_or(0)),
                false => Some(0),
            };
            (op, plan_op_within(func, weights, target, op, cap, room))
        })
        .collect();
    OpPlans {
        target,
        plans,
        conv_cap: cap,
    }
}

/// [`conv_scratch_cap`] and, per op, the bytes its scratch may take without raising the
/// model's activation peak in its own order: the bound less the activations live at its step
/// (`None` when the bound is not known). A form whose extra scratch is worth its speed only
/// below the peak (a convolution run transposed, GEMM panels) takes it within this. One
/// liveness pass gives both.
fn conv_caps(
    func: &Function,
    weights: &WeightStore,
    target: &TargetInfo,
) -> (u64, Option<HashMap<OpId, u64>>) {
    let (bound, headroom) = match memc_passes::memory::model_order_live(func, weights) {
        Ok((bound, live)) => {
            let headroom = live
                .into_iter()
                .map(|(op, at)| (op, bound.saturating_sub(at)))
                .collect();
            (bound, Some(headroom))
        }
        Err(_) => (0, None),
    };
    (
        target
            .conv
            .scratch_cap(crate::cpu::target::GEMM_THREADS, bound),
        headroom,
    )
}

/// The most scratch bytes a convolution of `func` may plan on `target`: the target's conv
/// scratch rule ([`memc_ir::target::ConvPolicy::scratch_cap`]) for products on up to
/// `GEMM_THREADS` threads and the model's activation lower bound (0 when the bound is not
/// known, leaving the per-thread part).
pub fn conv_scratch_cap(func: &Function, weights: &WeightStore, target: &TargetInfo) -> u64 {
    conv_caps(func, weights, target).0
}

/// The form `op` of `func` lowers to on `target` and the scratch bytes it needs. It reads the
/// op's types and attributes only (the memory plan does not exist yet). The weights are for
/// forms that depend on constant operands (none yet).
pub fn plan_op(func: &Function, weights: &WeightStore, target: &TargetInfo, op: OpId) -> OpPlan {
    let (cap, room) = match has_contractions(func.op(op).opcode) {
        true => {
            let (cap, headroom) = conv_caps(func, weights, target);
            (cap, headroom.map(|h| h.get(&op).copied().unwrap_or(0)))
        }
        false => (0, None),
    };
    plan_op_within(func, weights, target, op, cap, room)
}

/// After memory planning: gives each convolution planned without scratch the faster form
/// (Winograd, with as many slots as fit; a transposed product, GEMM panels) whose scratch
/// fits the largest run of arena bytes free at its step, and each other product planned
/// without GEMM panels its panels where they fit there (with its own scratch, moved), and
/// places that scratch there (`MemoryPlan::add_scratch`). The arena does not change: the
/// first plan weighs forms against the model's activation bound, which a small model's
/// placed arena may beat (in-place results), leaving less room than the bound says, or more
/// (a step below the peak). Returns how many ops changed form. `plan` must be the memory
/// plan of `func` made with `ops`' scratch.
pub fn use_free_bytes(
    func: &Function,
    plan: &mut memc_passes::memory::MemoryPlan,
    ops: &mut OpPlans,
) -> Result<usize, memc_ir::Diagnostic> {
    let target = ops.target;
    // Convolutions without scratch, and other products whose plan left out their GEMM panels.
    let candidates: Vec<OpId> = plan
        .schedule
        .iter()
        .copied()
        .filter(|&op| {
            let opcode = func.op(op).opcode;
            match opcode {
                Opcode::Conv => ops.scratch_bytes(op) == 0,
                _ => has_contractions(opcode) && ops.get(op).is_some_and(|p| p.pack_bytes == 0),
            }
        })
        .collect();
    if candidates.is_empty() || !target.prepack_weights {
        return Ok(0);
    }
    let cap = ops.conv_cap;
    let mut changed = 0;
    for op in candidates {
        let Some(step) = plan.step_of(op) else {
            continue;
        };
        let Some(current) = ops.plans.get(&op).cloned() else {
            continue;
        };
        // An op's own scratch (attention scores) moves with its panels: taken out, placed
        // again with them where they fit, else back where it was.
        let own = plan.remove_scratch(op);
        let had = own.map_or(0, |(_, size)| size).max(current.scratch_bytes);
        let (offset, room) = plan.free_extent(step);
        let wider = if func.op(op).opcode == Opcode::Conv {
            let form = linalg::conv::plan(func, target, op, cap, room, linalg::conv::Slots::AsFit);
            with_gemm_panels(func, target, op, form, Some(room))
        } else {
            // A product left with stack panels where its GEMM panels would have raised the
            // peak: its panels where the placed arena has room for them.
            with_gemm_panels(func, target, op, current, Some(room))
        };
        let bytes = wider.scratch_bytes;
        if bytes <= had || bytes > room {
            if let Some((offset, size)) = own {
                plan.add_scratch(func, op, offset, size)?;
            }
            continue;
        }
        plan.add_scratch(func, op, offset, bytes)?;
        ops.plans.insert(op, wider);
        changed += 1;
    }
    Ok(changed)
}

/// [`plan_op`] with a convolution's scratch cap computed once for the function: the forms that
/// take scratch only below the model's peak, and GEMM panels, within `room` (the forms none
/// and the panels any, where the bound is not known).
fn plan_op_within(
    func: &Function,
    weights: &WeightStore,
    target: &TargetInfo,
    op: OpId,
    conv_cap: u64,
    room: Option<u64>,
) -> OpPlan {
    let plan = plan_form(func, weights, target, op, conv_cap, room.unwrap_or(0));
    with_gemm_panels(func, target, op, plan, room)
}

/// Ops whose kernels may include contractions ([`crate::kernel::Contract`]).
fn has_contractions(opcode: Opcode) -> bool {
    use Opcode as O;
    matches!(
        opcode,
        O::MatMul
            | O::Gemm
            | O::FusedMatMul
            | O::AccumulateGemm
            | O::Einsum
            | O::Conv
            | O::ConvTranspose
            | O::ConvGrad
            | O::Attention
            | O::RNN
            | O::GRU
            | O::LSTM
    )
}

/// The CPU GEMM's packing panels for a convolution's products through im2col (implicit or
/// explicit) or per tap: `m` rows (output channels per group), at most `k` values of K
/// (input channels per group times taps) and every output pixel of every image as columns,
/// per image and group (or the images merged into the columns, whichever needs more), `A`
/// packed whole (`a_packed`: no `A` panel) or not. `B` is always packed (an implicit column
/// matrix; the others have contiguous columns, read in place by products of few rows).
pub(super) fn conv_panel_bytes(
    m: u64,
    k: u64,
    images: u64,
    groups: u64,
    pixels: u64,
    elem_size: u64,
    a_packed: bool,
) -> u64 {
    let bytes = |batches, n| {
        let blocking = crate::cpu::target::GemmBlocking::new(batches, m, n, k, elem_size, true);
        if a_packed {
            blocking.without_a_panel().scratch_bytes()
        } else {
            blocking.scratch_bytes()
        }
    };
    bytes(images.saturating_mul(groups), pixels).max(bytes(groups, images.saturating_mul(pixels)))
}

/// `plan` with the CPU GEMM's packing panels added to its scratch, for an op with
/// contractions on the CPU, where they fit `room` (the bytes its scratch may take without
/// raising the peak; any, when `None`): elsewhere its products pack into small panels on each
/// thread's stack, a few percent slower (one thread, 256->512 1x1 at 28x28: 2.17 -> 2.25 ms,
/// two threads and 64->256 at 56x56 even) and no arena (that layer's 896 KiB of panels were
/// 38% over its bound). A form whose scratch holds its panels (Winograd's transforms, a
/// transposed product) keeps them: it was chosen within its headroom. Sized from the op's
/// types: a MatMul's or Gemm's exact product when its shapes are static and plain, else a
/// bound that holds any contraction whose dims are at most the largest operand, result or
/// scratch (in elements); a contraction that needs more than was reserved runs with stack
/// panels (see `lower_op`).
fn with_gemm_panels(
    func: &Function,
    target: &TargetInfo,
    op: OpId,
    mut plan: OpPlan,
    room: Option<u64>,
) -> OpPlan {
    let data = func.op(op);
    if target.name != crate::cpu::target::CPU.name
        || !has_contractions(data.opcode)
        || matches!(plan.form, Form::Unsupported(_) | Form::Nothing)
    {
        return plan;
    }
    let static_type = |v| func.value_type(v).tensor().and_then(|t| t.static_shape());
    // Contractions compute in the result's type (f32 or f64; others have none).
    let elem_size = match data
        .results
        .first()
        .and_then(|&v| func.value_type(v).tensor())
    {
        Some(t) if t.elem == ElemType::F64 => 8,
        _ => 4,
    };
    // A convolution's `group` (the op table's default when absent), at least 1.
    let conv_groups = || {
        u64::try_from(memc_ir::ops::OpCtx { func, op }.int_or_default("group"))
            .unwrap_or(1)
            .max(1)
    };
    let exact = match data.opcode {
        Opcode::MatMul | Opcode::Gemm | Opcode::FusedMatMul => (|| {
            let a = static_type(*data.operands.first()?)?;
            let out = static_type(*data.results.first()?)?;
            if a.len() < 2 || out.len() < 2 {
                return None;
            }
            let (m, n) = (out[out.len() - 2], out[out.len() - 1]);
            let trans_a = func.op(op).attrs.get("transA").and_then(|a| a.as_int()) == Some(1);
            let k = if data.opcode == Opcode::Gemm && trans_a {
                a[0]
            } else {
                a[a.len() - 1]
            };
            let batches = out[..out.len() - 2].iter().product::<u64>();
            let trans_b = data.opcode == Opcode::Gemm
                && func.op(op).attrs.get("transB").and_then(|a| a.as_int()) == Some(1);
            // A constant `B` is packed whole when the plan is written (`prepack`): no run
            // packs a panel of it.
            let b_packed = target.prepack_weights
                && operand_is_weight(func, op, 1)
                && super::prepack::packs_b_whole(k, n);
            let b_col_stride = if trans_b { k as i64 } else { 1 };
            let pack_b = !b_packed && !crate::cpu::target::gemm_b_in_place(m, b_col_stride);
            let blocking =
                crate::cpu::target::GemmBlocking::new(batches, m, n, k, elem_size, pack_b);
            // An `A` with contiguous columns (not transposed) is read where it is: no `A` panel.
            Some(if trans_a {
                blocking.scratch_bytes()
            } else {
                blocking.without_a_panel().scratch_bytes()
            })
        })(),
        Opcode::Conv => (|| {
            // A direct convolution reads its packed weight and its input as they are.
            let weight_constant = operand_is_weight(func, op, 1);
            // An implicit column matrix's product reads its constant weight packed whole (the
            // plan writer packs every convolution's), so its slots need no `A` panel.
            let mut a_packed = false;
            if let Form::Conv(conv) = &plan.form {
                let elem = if elem_size == 8 {
                    Scalar::F64
                } else {
                    Scalar::F32
                };
                if let Some(bytes) = conv.winograd_scratch() {
                    // The transforms' blocks for each thread (`Contract::winograd`).
                    return Some(bytes);
                }
                if conv.runs_direct(elem, weight_constant) {
                    return Some(0);
                }
                a_packed = weight_constant && conv.implicit();
                if conv.transposed() {
                    // `c^T = b^T a^T` (`Contract::scratch_bytes`): `A` panels of the column
                    // matrix, then the result.
                    return Some(conv.transposed_scratch(elem_size));
                }
            }
            // Through im2col (implicit or explicit) or as products per tap (`conv_panel_bytes`).
            let w = static_type(*data.operands.get(1)?)?;
            let y = static_type(*data.results.first()?)?;
            if w.len() < 2 || y.len() < 2 {
                return None;
            }
            let group = conv_groups();
            let taps = w[2..].iter().product::<u64>();
            let pixels = y[2..].iter().product::<u64>();
            Some(conv_panel_bytes(
                w[0] / group,
                w[1] * taps,
                y[0],
                group,
                pixels,
                elem_size,
                a_packed,
            ))
        })(),
        Opcode::ConvTranspose => (|| {
            // One product per kernel tap (`conv::transposed_conv`): `M / group` rows, `C /
            // group` values of K, the input positions of a row (or, merged, of an image) as
            // columns, over images, groups and the input's outer rows. The sizes only grow
            // with the dims, so these bounds hold every tap; `B` is counted as packed.
            let x = static_type(*data.operands.first()?)?;
            let w = static_type(*data.operands.get(1)?)?;
            if x.len() < 3 || w.len() < 2 {
                return None;
            }
            let group = conv_groups();
            let pixels = x[2..].iter().product::<u64>();
            let outer_rows = x[2..x.len() - 1].iter().product::<u64>();
            let (m, k) = (w[1], x[1] / group);
            Some(
                crate::cpu::target::GemmBlocking::new(
                    x[0] * group * outer_rows,
                    m,
                    pixels,
                    k,
                    elem_size,
                    true,
                )
                .scratch_bytes(),
            )
        })(),
        Opcode::Attention => super::attention::contraction_bound(func, op).map(|(b, m, n, k)| {
            let bytes = |size| {
                crate::cpu::target::GemmBlocking::new(b, m, n, k, size, true).scratch_bytes()
            };
            bytes(elem_size)
        }),
        _ => None,
    };
    let bytes = exact.unwrap_or_else(|| {
        let elems = data
            .operands
            .iter()
            .chain(&data.results)
            .filter_map(|&v| func.value_type(v).tensor()?.static_num_elements())
            .chain([plan.scratch_bytes / elem_size])
            .max()
            .unwrap_or(0);
        crate::cpu::target::gemm_scratch_bound(elems, elem_size)
    });
    if bytes == 0 {
        return plan;
    }
    // Room to align the panels to 64 bytes at the end of the scratch, wherever it starts.
    let own = plan.scratch_bytes;
    let transposed = matches!(&plan.form, Form::Conv(conv) if conv.transposed());
    let winograd = matches!(&plan.form, Form::Conv(conv) if conv.winograd_scratch().is_some());
    let scratch = own.next_multiple_of(64) + bytes + 64;
    if !transposed && !winograd && room.is_some_and(|room| scratch > room) {
        return plan;
    }
    plan.pack_bytes = bytes;
    plan.scratch_bytes = scratch;
    plan.scratch_use = match plan.scratch_use {
        _ if transposed => "transposed product",
        _ if winograd => "Winograd transforms",
        _ if own == 0 => "GEMM panels",
        "im2col matrix" => "im2col matrix, GEMM panels",
        "attention scores" => "attention scores, GEMM panels",
        "recurrent states" => "recurrent states, GEMM panels",
        other => other,
    };
    plan
}

/// The form of `op` and its own scratch (see [`plan_op`]).
fn plan_form(
    func: &Function,
    _weights: &WeightStore,
    target: &TargetInfo,
    op: OpId,
    conv_cap: u64,
    headroom: u64,
) -> OpPlan {
    use elementwise as ew;
    use linalg::{conv, einsum, matmul, nbits, pool, quant};
    use movement as mv;
    use reduce::Reduction as R;
    use Opcode as O;
    match func.op(op).opcode {
        // Structure.
        O::Weight | O::None | O::Return => OpPlan::nothing(),
        O::If => OpPlan::unsupported("If with a condition unknown at compile time"),
        O::Yield => OpPlan::unsupported("a region terminator outside its region (a memc bug)"),
        O::InPlaceAccumulatorV2 => OpPlan::kernels(super::state::accumulate),
        O::AccumulateGemm => OpPlan::kernels(matmul::accumulate_gemm),
        O::AccumulateGatherGrad => OpPlan::kernels(mv::accumulate_gather_grad),

        // Elementwise: one Map kernel each (fused chains are found after planning).
        O::Add | O::Sub | O::Mul | O::Div | O::Pow | O::Min | O::Max | O::Sum | O::Mean => {
            OpPlan::kernels(ew::map)
        }
        O::Equal | O::Less | O::LessOrEqual | O::Greater | O::GreaterOrEqual => {
            OpPlan::kernels(ew::map)
        }
        O::And | O::Or | O::Xor | O::Not => OpPlan::kernels(ew::map),
        O::BitwiseAnd | O::BitwiseOr | O::BitwiseXor | O::BitwiseNot | O::BitShift => {
            OpPlan::kernels(ew::map)
        }
        O::Mod | O::Where | O::Neg | O::Abs | O::Sign | O::IsNaN | O::IsInf => {
            OpPlan::kernels(ew::map)
        }
        O::Sqrt | O::Exp | O::Log | O::Reciprocal | O::Floor | O::Ceil | O::Round => {
            OpPlan::kernels(ew::map)
        }
        O::Sin | O::Cos | O::Tan | O::Asin | O::Acos | O::Atan => OpPlan::kernels(ew::map),
        O::Sinh | O::Cosh | O::Tanh | O::Asinh | O::Acosh | O::Atanh | O::Erf => {
            OpPlan::kernels(ew::map)
        }
        O::Relu | O::LeakyRelu | O::PRelu | O::Elu | O::Selu | O::Celu | O::ThresholdedRelu => {
            OpPlan::kernels(ew::map)
        }
        O::Sigmoid | O::HardSigmoid | O::HardSwish | O::Softplus | O::Softsign | O::Mish => {
            OpPlan::kernels(ew::map)
        }
        O::Swish | O::Gelu | O::Shrink | O::Clip | O::Cast | O::CastLike => {
            OpPlan::kernels(ew::map)
        }
        O::Identity => OpPlan::kernels(ew::identity),
        O::BitCast => OpPlan::kernels(mv::bit_cast),
        O::Dropout => OpPlan::kernels(ew::dropout),

        // Normalizations and activations over an axis.
        O::Softmax => OpPlan::kernels(|ctx, op| reduce::softmax(ctx, op, false)),
        O::LogSoftmax => OpPlan::kernels(|ctx, op| reduce::softmax(ctx, op, true)),
        O::Hardmax => OpPlan::kernels(reduce::hardmax),
        O::RMSNormalization => OpPlan::kernels(reduce::rms_norm),
        O::InstanceNormalization => OpPlan::kernels(reduce::instance_norm),
        O::LpNormalization => OpPlan::kernels(reduce::lp_norm),
        O::MeanVarianceNormalization => OpPlan::kernels(reduce::mean_variance_norm),
        O::LayerNormalization => OpPlan::kernels(reduce::layer_norm),
        O::BatchNormalization => OpPlan::kernels(reduce::batch_norm),

        // Contractions, convolutions and pooling.
        O::MatMul => OpPlan::kernels(matmul::matmul),
        O::Gemm => OpPlan::kernels(matmul::gemm),
        O::Einsum => OpPlan::kernels(einsum::einsum),
        O::Conv => conv::plan(func, target, op, conv_cap, headroom, conv::Slots::All),
        O::ConvTranspose => OpPlan::kernels(conv::conv_transpose),
        O::Col2Im => OpPlan::kernels(conv::col2im),
        O::MaxPool => OpPlan::kernels(pool::max_pool),
        O::AveragePool => OpPlan::kernels(pool::average_pool),
        O::LpPool => OpPlan::kernels(pool::lp_pool),
        O::GlobalAveragePool => OpPlan::kernels(|ctx, op| pool::global_pool(ctx, op, false)),
        O::GlobalMaxPool => OpPlan::kernels(|ctx, op| pool::global_pool(ctx, op, true)),

        // Attention and its recurrent relatives: the scores (the states) live in planned
        // scratch.
        O::Attention => OpPlan::with_scratch(
            Form::Kernels(attention::attention),
            attention::scratch_bytes(func, op),
            "attention scores",
        ),
        O::RotaryEmbedding => OpPlan::kernels(attention::rotary_embedding),
        O::LinearAttention => OpPlan::with_scratch(
            Form::Kernels(recurrent::linear_attention),
            recurrent::linear_attention_scratch(func, op),
            "recurrent states",
        ),
        O::CausalConvWithState => OpPlan::kernels(recurrent::causal_conv_with_state),
        O::RNN | O::GRU | O::LSTM => OpPlan::with_scratch(
            Form::Kernels(rnn::recurrent),
            rnn::scratch_bytes(func, op),
            "recurrent states",
        ),

        // Reductions.
        O::ReduceMean => OpPlan::kernels(|ctx, op| reduce::reduce(ctx, op, R::Mean)),
        O::ReduceSum => OpPlan::kernels(|ctx, op| reduce::reduce(ctx, op, R::Sum)),
        O::ReduceMax => OpPlan::kernels(|ctx, op| reduce::reduce(ctx, op, R::Max)),
        O::ReduceMin => OpPlan::kernels(|ctx, op| reduce::reduce(ctx, op, R::Min)),
        O::ReduceProd => OpPlan::kernels(|ctx, op| reduce::reduce(ctx, op, R::Prod)),
        O::ReduceL1 => OpPlan::kernels(|ctx, op| reduce::reduce(ctx, op, R::L1)),
        O::ReduceL2 => OpPlan::kernels(|ctx, op| reduce::reduce(ctx, op, R::L2)),
        O::ReduceLogSum => OpPlan::kernels(|ctx, op| reduce::reduce(ctx, op, R::LogSum)),
        O::ReduceLogSumExp => OpPlan::kernels(|ctx, op| reduce::reduce(ctx, op, R::LogSumExp)),
        O::ReduceSumSquare => OpPlan::kernels(|ctx, op| reduce::reduce(ctx, op, R::SumSquare)),
        O::ArgMax => OpPlan::kernels(|ctx, op| reduce::arg_reduce(ctx, op, true)),
        O::ArgMin => OpPlan::kernels(|ctx, op| reduce::arg_reduce(ctx, op, false)),
        O::CumSum => OpPlan::kernels(|ctx, op| reduce::cumulative(ctx, op, ReduceOp::Sum)),
        O::CumProd => OpPlan::kernels(|ctx, op| reduce::cumulative(ctx, op, ReduceOp::Prod)),
        O::TopK => OpPlan::kernels(mv::top_k),
        O::NonZero => OpPlan::kernels(extents::non_zero),
        O::Compress => OpPlan::kernels(extents::compress),
        O::Unique => OpPlan::with_scratch(
            Form::Kernels(extents::unique),
            extents::unique_scratch(func, op),
            "first-occurrence marks",
        ),

        // Shape and data movement. View ops the planner aliased run nothing (checked first in
        // `lower_op`); the others copy.
        O::Reshape | O::Flatten | O::Squeeze | O::Unsqueeze => OpPlan::kernels(mv::linear_copy),
        O::Transpose => OpPlan::kernels(mv::transpose),
        O::Concat => OpPlan::kernels(mv::concat),
        O::Split => OpPlan::kernels(mv::split),
        O::Slice => OpPlan::kernels(mv::slice),
        O::GatherElements => OpPlan::kernels(mv::gather_elements),
        O::GatherND => OpPlan::kernels(mv::gather_nd),
        O::Gather => OpPlan::kernels(mv::gather),
        O::ScatterElements => OpPlan::kernels(mv::scatter_elements),
        O::ScatterND => OpPlan::kernels(mv::scatter_nd),
        O::TensorScatter => OpPlan::kernels(mv::tensor_scatter),
        O::Expand => OpPlan::kernels(mv::expand),
        O::Tile => OpPlan::kernels(mv::tile),
        O::Pad => OpPlan::kernels(mv::pad),
        O::CenterCropPad => OpPlan::kernels(mv::center_crop_pad),
        O::Resize => OpPlan::kernels(mv::resize),
        O::GridSample => OpPlan::kernels(mv::grid_sample),
        O::AffineGrid => OpPlan::kernels(mv::affine_grid),
        O::HannWindow | O::HammingWindow | O::BlackmanWindow => {
            OpPlan::kernels(signal::window_function)
        }
        O::MelWeightMatrix => OpPlan::kernels(signal::mel_weight_matrix),
        O::DFT => OpPlan::kernels(signal::dft),
        O::STFT => OpPlan::kernels(signal::stft),
        O::Trilu => OpPlan::kernels(mv::trilu),
        O::EyeLike => OpPlan::kernels(mv::eye_like),
        O::OneHot => OpPlan::kernels(mv::one_hot),
        O::DepthToSpace => OpPlan::kernels(mv::depth_to_space),
        O::SpaceToDepth => OpPlan::kernels(mv::space_to_depth),

        // Shape computations.
        O::Shape => OpPlan::kernels(mv::shape),
        O::Size => OpPlan::kernels(mv::size),
        O::ConstantOfShape => OpPlan::kernels(mv::constant_of_shape),
        O::Range => OpPlan::kernels(mv::range),

        // Quantization: 4-bit weights are read where they are, packed (`quant4`); every other
        // input, sub-byte ones in the arena included, is read element by element.
        O::DequantizeLinear => match operand_elem(func, op, 0) {
            Some(ElemType::I4) if packed_operands(func, op) => {
                OpPlan::kernels(|ctx, op| quant4::dequantize(ctx, op, true))
            }
            Some(ElemType::U4) if packed_operands(func, op) => {
                OpPlan::kernels(|ctx, op| quant4::dequantize(ctx, op, false))
            }
            _ => OpPlan::kernels(quant::dequantize),
        },
        O::QuantizeLinear => OpPlan::kernels(quant::quantize),
        O::MatMulNBits => nbits::plan(func, target, op),

        // Training: activations and their gradients (elementwise), softmax gradients, concat.
        O::ReluGrad | O::SigmoidGrad | O::TanhGrad | O::GeluGrad | O::FastGeluGrad => {
            OpPlan::kernels(ew::map)
        }
        O::QuickGeluGrad | O::BiasGeluGradDx | O::BiasFastGeluGradDx => OpPlan::kernels(ew::map),
        O::MsGelu | O::FastGelu | O::BiasGelu | O::QuickGelu | O::Scale => OpPlan::kernels(ew::map),
        O::SoftmaxGrad13 => OpPlan::kernels(|ctx, op| reduce::softmax_grad(ctx, op, false, false)),
        O::LogSoftmaxGrad13 => {
            OpPlan::kernels(|ctx, op| reduce::softmax_grad(ctx, op, true, false))
        }
        O::SoftmaxGrad => OpPlan::kernels(|ctx, op| reduce::softmax_grad(ctx, op, false, true)),
        O::LogSoftmaxGrad => OpPlan::kernels(|ctx, op| reduce::softmax_grad(ctx, op, true, true)),
        O::ConcatTraining => OpPlan::kernels(mv::concat_training),

        // Training: the transformer's contractions and normalization gradients.
        O::FusedMatMul => OpPlan::kernels(matmul::fused_matmul),
        O::LayerNormalizationGrad => OpPlan::kernels(reduce::layer_norm_grad),
        O::GatherGrad => OpPlan::kernels(mv::gather_grad),

        // Training: losses.
        O::SoftmaxCrossEntropyLoss | O::SoftmaxCrossEntropyLossInternal => OpPlan::with_scratch(
            Form::Kernels(loss::softmax_cross_entropy),
            loss::softmax_cross_entropy_scratch(func, op),
            "per-position losses",
        ),
        O::NegativeLogLikelihoodLoss
        | O::NegativeLogLikelihoodLossInternal
        | O::NegativeLogLikelihoodLossInternal2 => OpPlan::kernels(loss::negative_log_likelihood),
        O::SoftmaxCrossEntropyLossGrad | O::SoftmaxCrossEntropyLossInternalGrad => {
            OpPlan::with_scratch(
                Form::Kernels(loss::sce_grad),
                loss::sce_grad_scratch(func, op),
                "the mean's divisor",
            )
        }

        // Training: CNN.
        O::BatchNormInternal => OpPlan::kernels(reduce::batch_norm),
        O::BatchNormalizationGrad => OpPlan::kernels(reduce::batch_norm_grad),
        O::ConvGrad => conv::grad::plan(func, target, op, conv_cap),
        O::MaxPoolGrad => OpPlan::kernels(pool::grad::max_pool_grad),
        O::AveragePoolGrad => OpPlan::kernels(pool::grad::average_pool_grad),

        // Training: more gradients.
        O::LeakyReluGrad => OpPlan::kernels(ew::map),
        O::DivGrad => OpPlan::kernels(reduce::div_grad),
        O::SliceGrad => OpPlan::kernels(mv::slice_grad),
        O::GatherElementsGrad => OpPlan::kernels(mv::gather_elements_grad),
    }
}

/// The element type of operand `index` of `op`, when it is a tensor.
fn operand_elem(func: &Function, op: OpId, index: usize) -> Option<ElemType> {
    let &value = func.op(op).operands.get(index)?;
    func.value_type(value).tensor().map(|t| t.elem)
}

/// Whether operand `index` of `op` is a constant: the result of a `memc.weight`.
pub(crate) fn operand_is_weight(func: &Function, op: OpId, index: usize) -> bool {
    func.op(op)
        .operands
        .get(index)
        .and_then(|&v| func.defining_op(v))
        .is_some_and(|def| func.op(def).opcode == Opcode::Weight)
}

/// Whether DequantizeLinear's input and zero point (when given) are weights, whose ONNX bytes
/// (4-bit elements packed) `quant4` reads in place.
fn packed_operands(func: &Function, op: OpId) -> bool {
    operand_is_weight(func, op, 0)
        && func
            .op(op)
            .operands
            .get(2)
            .is_none_or(|&zp| func.value_type(zp).is_none() || operand_is_weight(func, op, 2))
}

/// Lowers one op that is not part of a fused chain, in the form `plan` chose.
pub(super) fn lower_op(ctx: &LowerCtx, op: OpId, plan: Option<&OpPlan>) -> LowerResult {
    if ctx.is_planned_view(op) || ctx.is_weight_view(op) {
        return Ok(Vec::new());
    }
    let plan = plan.ok_or_else(|| unsupported("the op has no lowering plan (a memc bug)"))?;
    let mut kernels = match &plan.form {
        Form::Nothing => Ok(Vec::new()),
        Form::Kernels(lower) => lower(ctx, op),
        Form::Conv(conv) => linalg::conv::conv(ctx, op, conv),
        Form::NBits => linalg::nbits::matmul_nbits(ctx, op, plan.scratch_bytes),
        Form::ConvGrad(grad) => linalg::conv::grad::conv_grad(ctx, op, grad),
        Form::Unsupported(reason) => Err(unsupported(*reason)),
    }?;
    give_gemm_panels(ctx, op, plan, &mut kernels);
    Ok(kernels)
}

/// Points every contraction of `op` at the GEMM panels its plan reserved (the last
/// `pack_bytes` of the op's scratch, 64-aligned), when they hold what it needs; the ops run
/// one contraction at a time, so all share them.
fn give_gemm_panels(
    ctx: &LowerCtx,
    op: OpId,
    plan: &OpPlan,
    kernels: &mut [crate::kernel::Kernel],
) {
    if plan.pack_bytes == 0 {
        return;
    }
    let Some(scratch) = ctx.scratch(op) else {
        return;
    };
    let end = scratch.byte_offset as u64 + scratch.shape.first().copied().unwrap_or(0);
    let Some(start) = end.checked_sub(plan.pack_bytes).map(|s| s / 64 * 64) else {
        return;
    };
    if start < scratch.byte_offset as u64 {
        return;
    }
    let reserved = end - start;
    for kernel in kernels {
        if let crate::kernel::KernelBody::Contract(c) = &mut kernel.body {
            // Constant weights will be packed whole (`prepack`, at the end of lowering, which
            // takes the panels back from a product whose weight it cannot pack).
            let need = if ctx.target.prepack_weights {
                c.scratch_of(&super::prepack::predicted_blocking(c))
            } else {
                c.scratch_bytes()
            };
            if c.pack.is_none() && need > 0 && need <= reserved {
                c.pack = Some(start);
            }
        }
    }
}
