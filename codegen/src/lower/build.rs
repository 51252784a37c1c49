//! Small builders for kernel IR, shared by every op's lowering: tensors as kernels address them,
//! views with broadcasting, and an instruction-list builder.

use crate::kernel::{
    BinaryOp, Guard, IndirectIndex, Inst, InstId, InstKind, Kernel, KernelBody, LoopKernel, Region,
    Scalar, Stage, Store, UnaryOp, View,
};

/// A tensor's bytes, as a lowering sees them: where they are, their element type and shape.
/// Row-major and contiguous.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorRef {
    pub region: Region,
    pub byte_offset: i64,
    pub elem: Scalar,
    pub shape: Vec<u64>,
}

/// Row-major element strides of `shape`.
pub fn contiguous_strides(shape: &[u64]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.saturating_mul(d as i64);
    }
    strides
}

impl TensorRef {
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }

    pub fn strides(&self) -> Vec<i64> {
        contiguous_strides(&self.shape)
    }

    /// A view with the given element strides (one per loop axis), no guards.
    pub fn view_with(&self, strides: Vec<i64>) -> View {
        View {
            region: self.region,
            elem: self.elem,
            byte_offset: self.byte_offset,
            strides,
            guards: Vec::new(),
            pad: 0,
        }
    }

    /// The tensor over loop axes equal to its own shape, followed by `extra_axes` axes it does
    /// not vary along.
    pub fn view_identity(&self, extra_axes: usize) -> View {
        let mut strides = self.strides();
        strides.extend(std::iter::repeat_n(0, extra_axes));
        self.view_with(strides)
    }

    /// The tensor broadcast (numpy rules, aligned right) to `out_shape`, which are the first
    /// `out_shape.len()` loop axes; `extra_axes` more loop axes follow with stride 0.
    /// Dims of size 1 (and missing leading dims) get stride 0.
    pub fn view_broadcast(&self, out_shape: &[u64], extra_axes: usize) -> View {
        let own = self.strides();
        let lead = out_shape.len() - self.rank().min(out_shape.len());
        let mut strides = vec![0i64; out_shape.len() + extra_axes];
        for (a, s) in strides.iter_mut().enumerate().take(out_shape.len()) {
            if a < lead {
                continue;
            }
            let own_axis = a - lead + (self.rank().saturating_sub(out_shape.len()));
            if self.shape[own_axis] != 1 {
                *s = own[own_axis];
            }
        }
        self.view_with(strides)
    }

    /// The same bytes with another shape (a reshape of a contiguous tensor).
    pub fn reshaped(&self, shape: Vec<u64>) -> TensorRef {
        TensorRef {
            shape,
            ..self.clone()
        }
    }
}

/// Builds one stage's instruction list. Every type given to it is taken as its compute type
/// ([`Scalar::compute`]): a load of an f16 view is an F32 value, a constant or a cast "of f16"
/// is one of F32, so lowerings name a tensor's element type and compute in what kernels compute
/// in (the store narrows the result).
#[derive(Default, Debug)]
pub struct Insts {
    pub insts: Vec<Inst>,
}

impl Insts {
    pub fn new() -> Insts {
        Insts::default()
    }

    pub fn push(&mut self, ty: Scalar, kind: InstKind) -> InstId {
        self.insts.push(Inst {
            ty: ty.compute(),
            kind,
        });
        (self.insts.len() - 1) as InstId
    }

    pub fn ty(&self, id: InstId) -> Scalar {
        self.insts[id as usize].ty
    }

    pub fn load(&mut self, views: &[View], view: u32) -> InstId {
        self.push(views[view as usize].elem, InstKind::Load { view })
    }

    pub fn load_indirect(
        &mut self,
        views: &[View],
        view: u32,
        indices: Vec<IndirectIndex>,
    ) -> InstId {
        self.push(
            views[view as usize].elem,
            InstKind::LoadIndirect { view, indices },
        )
    }

    /// A constant of type `ty` with value `value` (exact for integers up to 2^53).
    pub fn constant(&mut self, ty: Scalar, value: f64) -> InstId {
        let bits = if ty.is_float() {
            value.to_bits()
        } else {
            value as i64 as u64
        };
        self.push(ty, InstKind::Const { bits })
    }

    /// An integer constant (any width; exact).
    pub fn constant_int(&mut self, ty: Scalar, value: i64) -> InstId {
        let bits = if ty.is_float() {
            (value as f64).to_bits()
        } else {
            value as u64
        };
        self.push(ty, InstKind::Const { bits })
    }

    pub fn index(&mut self, axis: usize) -> InstId {
        self.push(Scalar::I64, InstKind::Index { axis: axis as u32 })
    }

    pub fn acc(&mut self, stage: usize, ty: Scalar) -> InstId {
        self.push(
            ty,
            InstKind::Acc {
                stage: stage as u32,
            },
        )
    }

    pub fn unary(&mut self, op: UnaryOp, arg: InstId) -> InstId {
        let ty = match op {
            UnaryOp::IsNan | UnaryOp::IsPosInf | UnaryOp::IsNegInf | UnaryOp::Not => Scalar::Bool,
            _ => self.ty(arg),
        };
        self.push(ty, InstKind::Unary { op, arg })
    }

    pub fn binary(&mut self, op: BinaryOp, lhs: InstId, rhs: InstId) -> InstId {
        let ty = if op.is_comparison() {
            Scalar::Bool
        } else {
            self.ty(lhs)
        };
        self.push(ty, InstKind::Binary { op, lhs, rhs })
    }

    pub fn select(&mut self, cond: InstId, then: InstId, else_: InstId) -> InstId {
        let ty = self.ty(then);
        self.push(ty, InstKind::Select { cond, then, else_ })
    }

    /// `arg` converted to `ty` (its compute type); no instruction when it already has that type.
    pub fn cast(&mut self, arg: InstId, ty: Scalar) -> InstId {
        let ty = ty.compute();
        if self.ty(arg) == ty {
            return arg;
        }
        self.push(ty, InstKind::Cast { arg })
    }

    pub fn finish(self) -> Vec<Inst> {
        self.insts
    }
}

/// A one-stage elementwise kernel: `outer` is the output shape; the `Map` stage stores `value`
/// into view 0 (the output).
pub fn map_kernel(
    name: String,
    outer: Vec<u64>,
    views: Vec<View>,
    insts: Insts,
    value: InstId,
) -> Kernel {
    Kernel {
        name,
        body: KernelBody::Loop(LoopKernel {
            outer,
            inner: Vec::new(),
            views,
            stages: vec![Stage::Map {
                insts: insts.finish(),
                stores: vec![Store::new(0, value)],
            }],
        }),
    }
}

/// A kernel copying `src` (viewed with `src_view` over `shape`'s loop axes) into the contiguous
/// tensor `dst` of shape `shape`.
pub fn copy_kernel(name: String, dst: &TensorRef, src_view: View, shape: Vec<u64>) -> Kernel {
    let views = vec![dst.view_with(contiguous_strides(&shape)), src_view];
    let mut insts = Insts::new();
    let value = insts.load(&views, 1);
    map_kernel(name, shape, views, insts, value)
}

/// A guard `0 <= offset + sum coeffs[a] * i[a] < limit`.
pub fn guard(coeffs: Vec<i64>, offset: i64, limit: i64) -> Guard {
    Guard {
        coeffs,
        offset,
        limit,
    }
}
