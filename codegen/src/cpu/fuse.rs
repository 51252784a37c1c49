//! A peephole of the CPU backend: an epilogue of a contraction's result in place, the loop
//! kernel right after the contraction, runs inside it: a residual added (ResNet's `Add` after
//! its second convolution) and a clamp (ReLU: `max(x, 0)`; ReLU6 and Clip: a `max` and a
//! `min` with constants). The GEMM finishes each block it computed while the block is in its
//! thread's cache, the direct convolution as it stores its accumulators. The loop kernel then
//! does nothing. The program is unchanged (every other backend and the reference run
//! the two kernels as they are); this only saves the CPU a pass over the result and a
//! dispatch to the workers.
//!
//! Guarantees: an epilogue is fused only when the loop reads and writes, in place and
//! unguarded, exactly the elements of the contraction's result (both dense over the same
//! bytes, so no batch index of the contraction writes another's elements), in the
//! contraction's element type; a residual has the same strides, lies in the arena apart from
//! the result, and is added before any clamp (as the loop does); the body is otherwise a chain
//! of `max`/`min` with constants. The values are those the loop would store (NaN stays NaN),
//! except that `max(-0.0, 0.0)` may keep `-0.0`.

use crate::kernel::{
    BinaryOp, Contract, ContractB, InstKind, Kernel, KernelBody, LoopKernel, Region, Stage, View,
};

/// What the CPU runs for one kernel of a program.
pub(super) enum Role {
    /// The kernel as it is.
    Own,
    /// A contraction with the kernels around it fused in.
    Contract(Fusion),
    /// A kernel the contraction next to it runs.
    Fused,
}

/// What a contraction does besides its product.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Fusion {
    /// The bias the loop kernel before it wrote into its result, added instead (the product
    /// then does not accumulate).
    pub bias: Option<Bias>,
    /// A residual added in place after it: the element this many elements on.
    pub add: Option<isize>,
    /// A clamp in place after it (and after the residual).
    pub clamp: Option<(f64, f64)>,
    /// The program's weights outgrow what stays cached from one run to the next
    /// ([`weights_stream`]): a weight packed whole comes from memory at every run, and the GEMM
    /// asks for its panels ahead (`GemmBlocking::prefetch_packed`).
    pub weights_stream: bool,
}

/// Bytes of the weights a program's contractions read from which they no longer stay in a
/// core's share of the last-level cache between runs. Measured on a 2-vCPU cloud VM whose
/// L3 reports 260 MiB: ResNet-50's last three blocks alone (17 MiB of weights) ran their
/// 512x49x2048 products in 0.78 ms, its whole last stage (32 MiB) in 1.0 ms, as with the
/// weights evicted; a server's cores share their last-level cache.
const WEIGHTS_STREAM_BYTES: u64 = 24 << 20;

/// Whether the weights `kernels`' contractions read (each weight operand once per batch
/// index, packed or not) add up to [`WEIGHTS_STREAM_BYTES`] or more.
pub(super) fn weights_stream(kernels: &[&Kernel]) -> bool {
    let mut bytes = 0u64;
    for kernel in kernels {
        let KernelBody::Contract(c) = &kernel.body else {
            continue;
        };
        let batches = c.batch.iter().product::<u64>();
        let size = c.elem.size();
        let matrix = |rows: u64, cols: u64| {
            batches
                .saturating_mul(rows)
                .saturating_mul(cols)
                .saturating_mul(size)
        };
        if c.a_packed.is_some() || c.a.region == Region::Weights {
            bytes = bytes.saturating_add(matrix(c.m, c.k));
        }
        let b_weight = matches!(&c.b, ContractB::Mat(b) if b.region == Region::Weights);
        if c.b_packed.is_some() || b_weight {
            bytes = bytes.saturating_add(matrix(c.k, c.n));
        }
    }
    bytes >= WEIGHTS_STREAM_BYTES
}

/// Where a fused bias lies: row `i`'s at `byte_offset + i * stride` elements of `region`,
/// plus, for a grouped convolution (its groups a batch axis of the product, their channels
/// one after the other), `g * group_stride` for group `g`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Bias {
    pub region: Region,
    pub byte_offset: i64,
    pub stride: i64,
    pub group: Option<Group>,
}

/// The batch axis of a product that is a convolution's groups: its extent, the product of the
/// batch extents after it (so batch index `b`'s group is `b / inner % extent`), and the
/// distance between consecutive groups' biases in elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Group {
    pub extent: u64,
    pub inner: u64,
    pub stride: i64,
}

impl Bias {
    /// Elements from the bias's first to batch index `linear`'s.
    pub(super) fn shift(&self, linear: u64) -> i64 {
        self.group.map_or(0, |g| {
            ((linear / g.inner.max(1)) % g.extent.max(1)) as i64 * g.stride
        })
    }
}

/// The role of each kernel: each contraction takes in a bias written just before it and an
/// epilogue just after it.
pub(super) fn plan(kernels: &[&Kernel]) -> Vec<Role> {
    let mut roles: Vec<Role> = kernels.iter().map(|_| Role::Own).collect();
    for (i, kernel) in kernels.iter().enumerate() {
        let KernelBody::Contract(c) = &kernel.body else {
            continue;
        };
        if !matches!(roles[i], Role::Own) {
            continue;
        }
        let bias = i
            .checked_sub(1)
            .filter(|&before| matches!(roles[before], Role::Own) && c.accumulate)
            .and_then(|before| Some((before, row_bias(c, kernels[before])?)));
        let after = kernels.get(i + 1).and_then(|next| epilogue_after(c, next));
        if bias.is_none() && after.is_none() {
            continue;
        }
        let mut fusion = after.clone().unwrap_or_default();
        if let Some((before, bias)) = bias {
            fusion.bias = Some(bias);
            roles[before] = Role::Fused;
        }
        if after.is_some() {
            roles[i + 1] = Role::Fused;
        }
        roles[i] = Role::Contract(fusion);
    }
    roles
}

/// The per-row bias `before` writes into the whole of `c`'s result: one `Map` stage storing
/// a loaded element of a constant (a weight), unguarded, that varies at most along the axis
/// of `c`'s rows, or along an axis of a batch axis's results one after the other along the
/// rows and the rows (a grouped convolution's channels: groups x channels per group).
fn row_bias(c: &Contract, before: &Kernel) -> Option<Bias> {
    let KernelBody::Loop(lk) = &before.body else {
        return None;
    };
    let (inst, store) = lk.plain_copy()?;
    let InstKind::Load { view: source } = inst.kind else {
        return None;
    };
    let (out, source) = (
        lk.views.get(store.view as usize)?,
        lk.views.get(source as usize)?,
    );
    if covers_result(c, lk, out).is_none()
        || source.region != Region::Weights
        || source.elem != c.elem
        || !source.guards.is_empty()
    {
        return None;
    }
    // The axes along which the bias changes: at most one, the result's rows, or a batch
    // axis's and the rows one after the other (the groups: the batch axis with more than one
    // index whose results lie `m` rows apart).
    let group_axis = c
        .batch
        .iter()
        .zip(&c.c.batch_strides)
        .position(|(&extent, &stride)| {
            extent > 1 && Some(stride) == c.c.row_stride.checked_mul(c.m as i64)
        });
    let extents = lk.outer.iter().chain(&lk.inner);
    let mut found = None;
    for ((&extent, &from), &to) in extents.zip(&source.strides).zip(&out.strides) {
        if extent == 1 || from == 0 {
            continue;
        }
        if found.is_some() || to != c.c.row_stride {
            return None;
        }
        let group = match group_axis {
            Some(d) if extent != c.m && Some(extent) == c.batch[d].checked_mul(c.m) => {
                Some(Group {
                    extent: c.batch[d],
                    inner: c.batch[d + 1..].iter().product(),
                    stride: from.checked_mul(c.m as i64)?,
                })
            }
            _ if extent == c.m => None,
            _ => return None,
        };
        found = Some((from, group));
    }
    let (stride, group) = found.unwrap_or((0, None));
    Some(Bias {
        region: source.region,
        byte_offset: source.byte_offset,
        stride,
        group,
    })
}

/// The number of elements of `c`'s result when `out`, over `lk`'s loop, is exactly that
/// result: both dense over the same bytes, in the arena, in the contraction's element type,
/// unguarded.
fn covers_result(c: &Contract, lk: &LoopKernel, out: &View) -> Option<u64> {
    if out.region != c.c.region
        || out.region != Region::Arena
        || out.elem != c.elem
        || !out.guards.is_empty()
        || out.byte_offset != c.c.byte_offset
    {
        return None;
    }
    let axes = lk
        .outer
        .iter()
        .chain(&lk.inner)
        .copied()
        .zip(out.strides.iter().copied());
    let c_axes = c
        .batch
        .iter()
        .copied()
        .zip(c.c.batch_strides.iter().copied())
        .chain([(c.m, c.c.row_stride), (c.n, c.c.col_stride)]);
    let elems = dense_elems(axes)?;
    (dense_elems(c_axes)? == elems).then_some(elems)
}

/// The epilogue `next` applies to `c`'s result in place, if it is one.
fn epilogue_after(c: &Contract, next: &Kernel) -> Option<Fusion> {
    let KernelBody::Loop(lk) = &next.body else {
        return None;
    };
    let tail = epilogue_in_place(lk)?;
    let view = &lk.views[tail.view as usize];
    let elems = covers_result(c, lk, view)?;
    let add = match tail.add {
        None => None,
        Some(residual) => {
            // The residual: the same layout elsewhere in the arena, apart from the result.
            let residual = &lk.views[residual as usize];
            let size = c.elem.size() as i64;
            let delta = residual.byte_offset.checked_sub(view.byte_offset)?;
            let bytes = i64::try_from(elems).ok()?.checked_mul(size)?;
            let apart = delta.checked_abs()? >= bytes;
            let same_layout = residual.region == Region::Arena
                && residual.elem == view.elem
                && residual.strides == view.strides
                && residual.guards.is_empty();
            if !apart || !same_layout || delta % size != 0 {
                return None;
            }
            Some(isize::try_from(delta / size).ok()?)
        }
    };
    Some(Fusion {
        bias: None,
        add,
        clamp: tail.clamp,
        weights_stream: false,
    })
}

/// What a loop kernel does to a view in place: adds another view (`add`) and clamps.
struct InPlace {
    view: u32,
    add: Option<u32>,
    clamp: Option<(f64, f64)>,
}

/// The epilogue of a loop kernel of one `Map` stage storing, into an unguarded view it loads
/// from, that element (plus an element of another view at the same point) through `max`/`min`
/// with constants.
fn epilogue_in_place(lk: &LoopKernel) -> Option<InPlace> {
    let [Stage::Map { insts, stores }] = lk.stages.as_slice() else {
        return None;
    };
    let [store] = stores.as_slice() else {
        return None;
    };
    if store.is_scatter() {
        return None;
    }
    // The value of each instruction: loaded elements (one, or the sum of two) clamped to
    // (lo, hi), or a constant.
    #[derive(Copy, Clone)]
    enum Value {
        Elems(u32, Option<u32>, f64, f64),
        Const(f64),
    }
    let unclamped = |lo: f64, hi: f64| lo == f64::NEG_INFINITY && hi == f64::INFINITY;
    let mut values: Vec<Value> = Vec::with_capacity(insts.len());
    for inst in insts {
        let value = match &inst.kind {
            InstKind::Load { view } => Value::Elems(*view, None, f64::NEG_INFINITY, f64::INFINITY),
            InstKind::Const { bits } => Value::Const(f64::from_bits(*bits)),
            InstKind::Binary { op, lhs, rhs } => {
                let (x, y) = (*values.get(*lhs as usize)?, *values.get(*rhs as usize)?);
                match (op, x, y) {
                    (
                        BinaryOp::Add,
                        Value::Elems(a, None, lo_a, hi_a),
                        Value::Elems(b, None, lo_b, hi_b),
                    ) if unclamped(lo_a, hi_a) && unclamped(lo_b, hi_b) => {
                        Value::Elems(a, Some(b), lo_a, hi_a)
                    }
                    (
                        BinaryOp::Max | BinaryOp::Min,
                        Value::Elems(a, b, lo, hi),
                        Value::Const(k),
                    )
                    | (
                        BinaryOp::Max | BinaryOp::Min,
                        Value::Const(k),
                        Value::Elems(a, b, lo, hi),
                    ) if !k.is_nan() => {
                        if *op == BinaryOp::Max {
                            Value::Elems(a, b, lo.max(k), hi.max(k))
                        } else {
                            Value::Elems(a, b, lo.min(k), hi.min(k))
                        }
                    }
                    _ => return None,
                }
            }
            _ => return None,
        };
        values.push(value);
    }
    let Value::Elems(a, b, lo, hi) = *values.get(store.value as usize)? else {
        return None;
    };
    let out = lk.views.get(store.view as usize)?;
    let same = |v: u32| {
        lk.views.get(v as usize).is_some_and(|load| {
            load.region == out.region
                && load.elem == out.elem
                && load.byte_offset == out.byte_offset
                && load.strides == out.strides
                && load.guards.is_empty()
                && out.guards.is_empty()
        })
    };
    // The view written in place, and the other one added to it.
    let add = match b {
        None if same(a) => None,
        Some(b) if same(a) => Some(b),
        Some(b) if same(b) => Some(a),
        _ => return None,
    };
    // A clamp to the whole line is no clamp at all.
    let clamp = (!unclamped(lo, hi)).then_some((lo, hi));
    if add.is_none() && clamp.is_none() {
        return None;
    }
    Some(InPlace {
        view: store.view,
        add,
        clamp,
    })
}

/// The number of elements of a view over `axes` (extent, stride) when they are dense: no
/// element twice, none skipped (the strides, without axes of extent 1, are 1 and then each
/// the product of the faster axes' extents); `None` otherwise.
fn dense_elems(axes: impl Iterator<Item = (u64, i64)>) -> Option<u64> {
    let mut axes: Vec<(u64, i64)> = axes.filter(|&(e, _)| e != 1).collect();
    if axes.iter().any(|&(e, _)| e == 0) {
        return None;
    }
    axes.sort_by_key(|&(_, s)| s);
    let mut expect = 1i64;
    for (e, s) in axes {
        if s != expect {
            return None;
        }
        expect = expect.checked_mul(i64::try_from(e).ok()?)?;
    }
    u64::try_from(expect).ok()
}

#[cfg(test)]
mod tests {
    use super::{dense_elems, weights_stream};
    use crate::kernel::{Contract, Kernel, KernelBody, MatView, Region, Scalar};

    /// A product of a weight (`m x k`, rows `k` apart) by an arena matrix (`k x n`).
    fn weight_product(m: u64, n: u64, k: u64) -> Kernel {
        let view = |region, row_stride| MatView {
            region,
            byte_offset: 0,
            batch_strides: vec![0],
            row_stride,
            col_stride: 1,
        };
        Kernel {
            name: "product".into(),
            body: KernelBody::Contract(Contract {
                elem: Scalar::F32,
                batch: vec![1],
                m,
                n,
                k,
                a: view(Region::Weights, k as i64),
                b: view(Region::Arena, n as i64).into(),
                c: view(Region::Arena, n as i64),
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

    #[test]
    fn weights_stream_past_the_caches_share() {
        // 8 MiB of weights stay cached from one run to the next; three such products (24
        // MiB) do not.
        let small = weight_product(1024, 49, 2048);
        assert!(!weights_stream(&[&small]));
        assert!(!weights_stream(&[&small, &small]));
        assert!(weights_stream(&[&small, &small, &small]));
        // The arena operand is no weight.
        let activations = Kernel {
            body: match small.body.clone() {
                KernelBody::Contract(c) => KernelBody::Contract(Contract {
                    a: MatView {
                        region: Region::Arena,
                        ..c.a.clone()
                    },
                    ..c
                }),
                other => other,
            },
            ..small.clone()
        };
        assert!(!weights_stream(&[&activations, &activations, &activations]));
    }

    #[test]
    fn dense_views_cover_each_element_once() {
        assert_eq!(dense_elems([(4, 8), (8, 1)].into_iter()), Some(32));
        assert_eq!(dense_elems([(1, 99), (4, 8), (8, 1)].into_iter()), Some(32));
        assert_eq!(dense_elems([(8, 1), (4, 8)].into_iter()), Some(32));
        // Padded rows, a broadcast, a reversed axis, overlapping axes.
        assert_eq!(dense_elems([(4, 9), (8, 1)].into_iter()), None);
        assert_eq!(dense_elems([(4, 0), (8, 1)].into_iter()), None);
        assert_eq!(dense_elems([(4, -8), (8, 1)].into_iter()), None);
        assert_eq!(dense_elems([(4, 4), (8, 1)].into_iter()), None);
        assert_eq!(dense_elems([(0, 1)].into_iter()), None);
    }
}
