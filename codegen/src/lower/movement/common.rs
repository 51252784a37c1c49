//! Helpers shared by the movement and linalg lowerings: compile-time constants read from
//! weights, attribute normalization, index arithmetic on `I64` instructions, and kernel
//! assembly (strided copies with merged axes, loop kernels with several stages).

use super::super::build::{contiguous_strides, Insts};
use super::super::{unsupported, LowerCtx, LowerError};
use crate::kernel::{BinaryOp, InstId, Kernel, KernelBody, LoopKernel, Scalar, Stage, Store, View};
use memc_ir::{ElemType, OpId};

/// Decodes little-endian elements of `elem` as `f64` (integers exactly up to 2^53).
pub fn decode_f64(elem: ElemType, bytes: &[u8]) -> Option<Vec<f64>> {
    let width = (elem.bits() / 8) as usize;
    if width == 0 || elem.bits() % 8 != 0 || bytes.len() % width != 0 {
        return None;
    }
    bytes
        .chunks_exact(width)
        .map(|b| decode_one_f64(elem, b))
        .collect()
}

/// Decodes little-endian integer (or bool) elements as `i64`; `None` for float types.
pub fn decode_i64(elem: ElemType, bytes: &[u8]) -> Option<Vec<i64>> {
    let width = (elem.bits() / 8) as usize;
    if elem.is_float() || width == 0 || elem.bits() % 8 != 0 || bytes.len() % width != 0 {
        return None;
    }
    bytes
        .chunks_exact(width)
        .map(|b| decode_one_i64(elem, b))
        .collect()
}

fn raw8(b: &[u8]) -> [u8; 8] {
    let mut raw = [0u8; 8];
    raw[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    raw
}

fn decode_one_i64(elem: ElemType, b: &[u8]) -> Option<i64> {
    let raw = raw8(b);
    Some(match elem {
        ElemType::I8 => i64::from(raw[0] as i8),
        ElemType::I16 => i64::from(i16::from_le_bytes([raw[0], raw[1]])),
        ElemType::I32 => i64::from(i32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]])),
        ElemType::I64 | ElemType::U64 => i64::from_le_bytes(raw),
        ElemType::U8 | ElemType::Bool => i64::from(raw[0]),
        ElemType::U16 => i64::from(u16::from_le_bytes([raw[0], raw[1]])),
        ElemType::U32 => i64::from(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]])),
        _ => return None,
    })
}

fn decode_one_f64(elem: ElemType, b: &[u8]) -> Option<f64> {
    let raw = raw8(b);
    if let Some(format) = elem.minifloat_format() {
        // f16, bf16, float8; a float4 element is the low nibble of its byte.
        return Some(f64::from(
            format.decode(u32::from_le_bytes([raw[0], raw[1], 0, 0])),
        ));
    }
    Some(match elem {
        ElemType::F64 => f64::from_le_bytes(raw),
        ElemType::F32 => f64::from(f32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]])),
        ElemType::U64 => u64::from_le_bytes(raw) as f64,
        _ => decode_one_i64(elem, b)? as f64,
    })
}

/// Whether operand `index` is absent, or present with no elements (ONNX's placeholder for a
/// left-out input).
pub fn operand_absent_or_empty(ctx: &LowerCtx, op: OpId, index: usize) -> Result<bool, LowerError> {
    Ok(match ctx.operand(op, index)? {
        None => true,
        Some(t) => t.numel() == 0,
    })
}

/// The [`crate::kernel::InstKind::Const`] bits of the first element of `bytes`, an `elem`
/// tensor, for an instruction of type `ty` (the kernel type of `elem`).
pub fn const_bits_of_bytes(elem: ElemType, bytes: &[u8], ty: Scalar) -> Option<u64> {
    let width = (elem.bits() / 8).max(1) as usize;
    let first = bytes.get(..width)?;
    if ty.is_float() {
        Some(decode_one_f64(elem, first)?.to_bits())
    } else {
        Some(decode_one_i64(elem, first)? as u64)
    }
}

/// `axis` (negative counts from the end) as an index into `rank` dims.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, LowerError> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(unsupported(format!(
            "axis {axis} is out of range for rank {rank}"
        )))
    }
}

/// A kernel with the given loop spaces, views and stages.
pub fn loop_kernel(
    name: String,
    outer: Vec<u64>,
    inner: Vec<u64>,
    views: Vec<View>,
    stages: Vec<Stage>,
) -> Kernel {
    Kernel {
        name,
        body: KernelBody::Loop(LoopKernel {
            outer,
            inner,
            views,
            stages,
        }),
    }
}

/// A `Map` stage storing `value` into `view`.
pub fn map_stage(insts: Insts, view: u32, value: InstId) -> Stage {
    Stage::Map {
        insts: insts.finish(),
        stores: vec![Store::new(view, value)],
    }
}

/// A `Once` stage storing `value` into `view`.
pub fn once_stage(insts: Insts, view: u32, value: InstId) -> Stage {
    Stage::Once {
        insts: insts.finish(),
        stores: vec![Store::new(view, value)],
    }
}

/// A view of `t` whose loop axes are `t`'s own axes in order, then `extra` broadcast axes, with
/// the byte offset moved by `elem_offset` elements.
pub fn shifted(view: View, elem_offset: i64) -> View {
    let size = view.elem.size() as i64;
    View {
        byte_offset: view.byte_offset + elem_offset * size,
        ..view
    }
}

/// A copy of the `shape`-shaped index space from `src` into `dst` (both views over the same
/// loop axes, without guards), with size-1 axes dropped and axes that are contiguous in both
/// views merged, so the innermost loop is as long as the layout allows.
pub fn strided_copy(name: String, shape: &[u64], dst: View, src: View) -> Kernel {
    let (shape, mut strides) = merge_axes(shape, &[dst.strides.clone(), src.strides.clone()]);
    let src_strides = strides.pop().unwrap_or_default();
    let dst_strides = strides.pop().unwrap_or_default();
    let views = vec![
        View {
            strides: dst_strides,
            ..dst
        },
        View {
            strides: src_strides,
            ..src
        },
    ];
    let mut insts = Insts::new();
    let value = insts.load(&views, 1);
    loop_kernel(
        name,
        shape,
        Vec::new(),
        views,
        vec![map_stage(insts, 0, value)],
    )
}

/// Drops size-1 axes and merges each axis into the next where every view steps over the
/// inner one exactly (`stride[a] == stride[a + 1] * extent[a + 1]`). Keeps at least one axis
/// and splits a long lone axis into rows so backends can run it in parallel.
pub fn merge_axes(shape: &[u64], strides: &[Vec<i64>]) -> (Vec<u64>, Vec<Vec<i64>>) {
    let mut out_shape: Vec<u64> = Vec::new();
    let mut out_strides: Vec<Vec<i64>> = vec![Vec::new(); strides.len()];
    for (a, &extent) in shape.iter().enumerate() {
        if extent == 1 {
            continue;
        }
        let mergeable = !out_shape.is_empty()
            && strides.iter().zip(&out_strides).all(|(s, o)| {
                let last = *o.last().unwrap_or(&0);
                last == s[a] * extent as i64
            });
        if mergeable {
            let last = out_shape.len() - 1;
            out_shape[last] *= extent;
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                let l = o.len() - 1;
                o[l] = s[a];
            }
        } else {
            out_shape.push(extent);
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                o.push(s[a]);
            }
        }
    }
    if shape.contains(&0) {
        return (vec![0], vec![vec![0]; strides.len()]);
    }
    if out_shape.is_empty() {
        return (vec![1], vec![vec![0]; strides.len()]);
    }
    if out_shape.len() == 1 {
        let n = out_shape[0];
        let chunk = row_chunk(n);
        if chunk < n {
            let rows = n / chunk;
            out_shape = vec![rows, chunk];
            for o in out_strides.iter_mut() {
                let s = o[0];
                *o = vec![s * chunk as i64, s];
            }
        }
    }
    (out_shape, out_strides)
}

/// The largest divisor of `n` of at most 4096 when `n` is large enough to be worth splitting.
fn row_chunk(n: u64) -> u64 {
    if n <= 8192 {
        return n;
    }
    (256..=4096u64).rev().find(|c| n % c == 0).unwrap_or(n)
}

/// Row-major strides of `shape`, re-exported for the submodules.
pub fn strides_of(shape: &[u64]) -> Vec<i64> {
    contiguous_strides(shape)
}

/// Builders for `I64` index arithmetic.
pub trait IndexMath {
    fn i64c(&mut self, value: i64) -> InstId;
    fn add_c(&mut self, a: InstId, c: i64) -> InstId;
    fn mul_c(&mut self, a: InstId, c: i64) -> InstId;
    /// Floor division by a positive constant.
    fn floor_div_c(&mut self, a: InstId, c: i64) -> InstId;
    /// `a` clamped to `[lo, hi]`.
    fn clamp_c(&mut self, a: InstId, lo: i64, hi: i64) -> InstId;
    /// `lo <= a < hi` as a bool.
    fn in_range_c(&mut self, a: InstId, lo: i64, hi: i64) -> InstId;
    fn and(&mut self, a: Option<InstId>, b: InstId) -> InstId;
    fn f64c(&mut self, ty: Scalar, value: f64) -> InstId;
}

impl IndexMath for Insts {
    fn i64c(&mut self, value: i64) -> InstId {
        self.constant_int(Scalar::I64, value)
    }

    fn add_c(&mut self, a: InstId, c: i64) -> InstId {
        if c == 0 {
            return a;
        }
        let c = self.constant_int(self.ty(a), c);
        self.binary(BinaryOp::Add, a, c)
    }

    fn mul_c(&mut self, a: InstId, c: i64) -> InstId {
        if c == 1 {
            return a;
        }
        let c = self.constant_int(self.ty(a), c);
        self.binary(BinaryOp::Mul, a, c)
    }

    fn floor_div_c(&mut self, a: InstId, c: i64) -> InstId {
        if c == 1 {
            return a;
        }
        let cc = self.i64c(c);
        let rem = self.binary(BinaryOp::FloorMod, a, cc);
        let exact = self.binary(BinaryOp::Sub, a, rem);
        self.binary(BinaryOp::Div, exact, cc)
    }

    fn clamp_c(&mut self, a: InstId, lo: i64, hi: i64) -> InstId {
        let lo = self.i64c(lo);
        let hi = self.i64c(hi);
        let a = self.binary(BinaryOp::Max, a, lo);
        self.binary(BinaryOp::Min, a, hi)
    }

    fn in_range_c(&mut self, a: InstId, lo: i64, hi: i64) -> InstId {
        let lo = self.i64c(lo);
        let hi = self.i64c(hi);
        let ge = self.binary(BinaryOp::Ge, a, lo);
        let lt = self.binary(BinaryOp::Lt, a, hi);
        self.binary(BinaryOp::And, ge, lt)
    }

    fn and(&mut self, a: Option<InstId>, b: InstId) -> InstId {
        match a {
            Some(a) => self.binary(BinaryOp::And, a, b),
            None => b,
        }
    }

    fn f64c(&mut self, ty: Scalar, value: f64) -> InstId {
        self.constant(ty, value)
    }
}

/// Element `i` of operand `index` of `op` as an instruction of type `ty`: a constant when the
/// operand is a compile-time constant, else a load through a new broadcast view (pushed onto
/// `views`; `n_axes` is the kernel's loop axis count).
#[allow(clippy::too_many_arguments)]
pub fn operand_elem(
    ctx: &LowerCtx,
    op: OpId,
    index: usize,
    i: usize,
    ty: Scalar,
    views: &mut Vec<View>,
    insts: &mut Insts,
    n_axes: usize,
) -> Result<InstId, LowerError> {
    if ty.is_float() {
        if let Some(v) = ctx.const_floats(op, index).and_then(|v| v.get(i).copied()) {
            return Ok(insts.constant(ty, v));
        }
    } else if let Some(v) = ctx.const_ints(op, index).and_then(|v| v.get(i).copied()) {
        return Ok(insts.constant_int(ty, v));
    }
    let t = ctx.input(op, index)?;
    if i as u64 >= t.numel() {
        return Err(unsupported(format!("operand #{index} has no element {i}")));
    }
    views.push(shifted(t.view_with(vec![0; n_axes]), i as i64));
    let v = insts.load(views, (views.len() - 1) as u32);
    Ok(insts.cast(v, ty))
}

/// The range of an integer kernel type, clamped to `i64` (u64's top is `i64::MAX`).
pub fn int_range(elem: Scalar) -> (i64, i64) {
    match elem {
        Scalar::U64 => (0, i64::MAX),
        Scalar::Bool => (0, 1),
        Scalar::I8 => (i8::MIN.into(), i8::MAX.into()),
        Scalar::I16 => (i16::MIN.into(), i16::MAX.into()),
        Scalar::I32 => (i32::MIN.into(), i32::MAX.into()),
        Scalar::U8 => (0, u8::MAX.into()),
        Scalar::U16 => (0, u16::MAX.into()),
        Scalar::U32 => (0, u32::MAX.into()),
        Scalar::I4 => (-8, 7),
        Scalar::U4 => (0, 15),
        Scalar::I2 => (-2, 1),
        Scalar::U2 => (0, 3),
        _ => (i64::MIN, i64::MAX),
    }
}

/// Keys' cubic convolution weight at distance `s` with coefficient `a`, in `ty`, with the ONNX
/// reference's operation order (Resize's `_cubic_coeffs`, GridSample's `_gs_get_cubic_coeffs`):
/// at a far tap (`s` in `[1, 2)`) `((a s - 5a) s + 8a) s - 4a`, at a near one (`s` in `[0, 1)`)
/// `((a + 2) s - (a + 3)) s s + 1`. `one` is the constant 1 in `ty`. Each caller computes the
/// distances in its own reference's order.
pub fn cubic_convolution(
    insts: &mut Insts,
    ty: Scalar,
    a: f64,
    far: bool,
    s: InstId,
    one: InstId,
) -> InstId {
    let c = |insts: &mut Insts, v: f64| insts.constant(ty, v);
    if far {
        let ac = c(insts, a);
        let u = insts.binary(BinaryOp::Mul, ac, s);
        let k5 = c(insts, 5.0 * a);
        let u = insts.binary(BinaryOp::Sub, u, k5);
        let u = insts.binary(BinaryOp::Mul, u, s);
        let k8 = c(insts, 8.0 * a);
        let u = insts.binary(BinaryOp::Add, u, k8);
        let u = insts.binary(BinaryOp::Mul, u, s);
        let k4 = c(insts, 4.0 * a);
        insts.binary(BinaryOp::Sub, u, k4)
    } else {
        let a2 = c(insts, a + 2.0);
        let a3 = c(insts, a + 3.0);
        let u = insts.binary(BinaryOp::Mul, a2, s);
        let u = insts.binary(BinaryOp::Sub, u, a3);
        let u = insts.binary(BinaryOp::Mul, u, s);
        let u = insts.binary(BinaryOp::Mul, u, s);
        insts.binary(BinaryOp::Add, u, one)
    }
}
