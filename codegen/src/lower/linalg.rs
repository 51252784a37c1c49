//! Linear algebra and windowed ops: MatMul, Gemm, Conv, ConvTranspose, the pools, and
//! (de)quantization.
//!
//! - F32/F64 matrix products are [`crate::kernel::Contract`]s (a GEMM library runs them); other
//!   element types are loop kernels that `Reduce`-sum over `k` and store once.
//! - Convolutions are direct loop kernels: the outer loop walks the output `(n, [g,] m,
//!   spatial...)`, the inner loop the reduction `(c, kernel spatial...)`, and the input is a
//!   guarded view so padding reads 0 (see [`conv`] for the contraction forms used for speed).
//! - Pools read guarded views whose pad is the reduction's identity; AveragePool divides by the
//!   count of taps inside the input (or inside the padded input with `count_include_pad`),
//!   computed per output point from index arithmetic.
//!
//! Guarantees: every kernel produces the shapes `memc_ir::ops::shape` computed and follows the
//! ONNX reference implementation; auto_pad, pads, strides, dilations, groups and ceil_mode are
//! all honoured; f16 arithmetic is reported as unsupported (the CPU backend has none).

mod conv;
mod matmul;
mod nbits;
mod pool;
mod quant;

use super::{LowerCtx, LowerResult};
use memc_ir::{Function, OpId, Opcode};

/// The scratch bytes `op` needs while it runs (a convolution's im2col matrix), or 0.
pub fn scratch_bytes(func: &Function, op: OpId) -> u64 {
    match func.op(op).opcode {
        Opcode::Conv => conv::scratch_bytes(func, op),
        Opcode::MatMulNBits => nbits::scratch_bytes(func, op),
        _ => 0,
    }
}

pub fn lower(ctx: &LowerCtx, op: OpId) -> Option<LowerResult> {
    let lowered = match ctx.op(op).opcode {
        Opcode::MatMul => matmul::matmul(ctx, op),
        Opcode::Gemm => matmul::gemm(ctx, op),
        Opcode::Conv => conv::conv(ctx, op),
        Opcode::ConvTranspose => conv::conv_transpose(ctx, op),
        Opcode::MaxPool => pool::max_pool(ctx, op),
        Opcode::AveragePool => pool::average_pool(ctx, op),
        Opcode::GlobalAveragePool => pool::global_pool(ctx, op, false),
        Opcode::GlobalMaxPool => pool::global_pool(ctx, op, true),
        Opcode::DequantizeLinear => quant::dequantize(ctx, op),
        Opcode::QuantizeLinear => quant::quantize(ctx, op),
        Opcode::MatMulNBits => nbits::matmul_nbits(ctx, op),
        _ => return None,
    };
    Some(lowered)
}
