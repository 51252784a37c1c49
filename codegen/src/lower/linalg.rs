//! Linear algebra and windowed ops: MatMul, Gemm, Einsum, Conv, ConvTranspose, the pools, and
//! (de)quantization.
//!
//! - Matrix products in the target's contraction types (f32 and f64 on the CPU) are
//!   [`crate::kernel::Contract`]s (a GEMM library runs them); other element types are loop
//!   kernels that `Reduce`-sum over `k` and store once.
//! - Einsum ([`einsum`]) reads every operand through strides over the equation's labels
//!   (diagonals, transposes and broadcasts without copies): a `Contract` where the labels have
//!   a batched matrix product's roles, else one loop kernel summing products over the summed
//!   labels.
//! - Convolutions take one of several forms ([`conv`] says which and when): im2col (one
//!   product over every image and group whose `B` is the column matrix of the input windows:
//!   implicit on the CPU, its panels packed straight from the input, so nothing but the GEMM's
//!   panels is scratch; explicit, copied into planned scratch within the conv scratch rule, on
//!   CUDA), one product per kernel tap or per (input channel, kernel row), or a direct loop
//!   kernel over the output and the reduction (depthwise convolutions, integer types). The
//!   im2col choice and its scratch bytes are made once, before memory planning
//!   ([`ConvPlan`]), within `ConvPolicy::scratch_cap`.
//! - Pools read guarded views whose pad is the reduction's identity; AveragePool divides by the
//!   count of taps inside the input (or inside the padded input with `count_include_pad`),
//!   computed per output point from index arithmetic; LpPool sums `|x|^p` (pads add 0) and
//!   takes the `p`-th root.
//! - Training forms (onnxruntime's artifacts): `ms.ConvGrad` ([`conv::grad`]) runs dX as a
//!   transposed convolution and dW through im2col (implicit: the transposed column matrix
//!   packed from the input; or explicit in planned scratch; a loop kernel otherwise); MaxPoolGrad and AveragePoolGrad ([`pool::grad`]) gather over the window taps, since
//!   kernels never scatter.
//! - `memc.matmul_nbits` is one packed low-bit product ([`nbits`]), streaming the weight or
//!   using planned scratch for dequantized tiles, as the target's policy says.
//!
//! Guarantees: every kernel produces the shapes `memc_ir::ops::shape` computed and follows the
//! ONNX reference implementation; auto_pad, pads, strides, dilations, groups and ceil_mode are
//! all honoured; f16 arithmetic is reported as unsupported (the CPU backend has none).

pub(super) mod conv;
pub(super) mod einsum;
pub(super) mod matmul;
pub(super) mod nbits;
pub(super) mod pool;
pub(super) mod quant;

pub(super) use conv::ConvPlan;
