//! The table itself: one line per op. See the module doc of `ops` for how to add one.

use super::cost as c;
use super::fold as f;
use super::random as r;
use super::shape as s;
use super::types::*;
use super::verify as v;
use super::{
    attr, float_attr, int_attr, op, opt, req, required, str_attr, var, variadic, OpDef, Traits,
    TypeRule,
};
use crate::attr::AttrKind::*;
use std::collections::HashMap;
use std::sync::OnceLock;

macro_rules! define_ops {
    ($($variant:ident = $def:expr;)*) => {
        /// An op kind: an index into the op table.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Opcode {
            $($variant,)*
        }

        static OP_TABLE: &[OpDef] = &[$($def,)*];

        impl Opcode {
            /// Every opcode, in table order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant,)*];
        }
    };
}

impl Opcode {
    /// The declaration of this op.
    pub fn def(self) -> &'static OpDef {
        &OP_TABLE[self as usize]
    }

    /// The full name (`onnx.MatMul`).
    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// Looks up an op by its full name.
    pub fn from_name(name: &str) -> Option<Opcode> {
        static BY_NAME: OnceLock<HashMap<&'static str, Opcode>> = OnceLock::new();
        BY_NAME
            .get_or_init(|| Opcode::ALL.iter().map(|&o| (o.name(), o)).collect())
            .get(name)
            .copied()
    }
}

/// Elementwise ops may write their result over an operand that dies at them.
const ELEMENTWISE: Traits = Traits::ELEMENTWISE.with(Traits::IN_PLACE);
const COMMUTATIVE_EW: Traits = ELEMENTWISE.with(Traits::COMMUTATIVE);
/// Reshapes and identities: always a view of their first operand at offset 0.
const SAME_BYTES: Traits = Traits::VIEW.with(Traits::SAME_BYTES);
const REDUCTION: Traits = Traits::REDUCTION;

// Operand lists shared by many ops.
const X_T: &[super::ValueDef] = &[req("X", var("T"))];
const Y_T: &[super::ValueDef] = &[req("Y", var("T"))];
const AB_T: &[super::ValueDef] = &[req("A", var("T")), req("B", var("T"))];
const C_T: &[super::ValueDef] = &[req("C", var("T"))];
const C_BOOL: &[super::ValueDef] = &[req("C", var("B"))];
const DATA_AXES: &[super::ValueDef] = &[req("data", var("T")), opt("axes", var("I"))];
const POOL_ATTRS: &[super::AttrDef] = &[
    str_attr("auto_pad", "NOTSET"),
    int_attr("ceil_mode", 0),
    attr("dilations", Ints),
    required("kernel_shape", Ints),
    attr("pads", Ints),
    attr("strides", Ints),
    int_attr("count_include_pad", 0),
    int_attr("storage_order", 0),
];
const LP_POOL_ATTRS: &[super::AttrDef] = &[
    str_attr("auto_pad", "NOTSET"),
    int_attr("ceil_mode", 0),
    attr("dilations", Ints),
    required("kernel_shape", Ints),
    int_attr("p", 2),
    attr("pads", Ints),
    attr("strides", Ints),
];
const CONV_ATTRS: &[super::AttrDef] = &[
    str_attr("auto_pad", "NOTSET"),
    attr("dilations", Ints),
    int_attr("group", 1),
    attr("kernel_shape", Ints),
    attr("pads", Ints),
    attr("strides", Ints),
    attr("output_padding", Ints),
    attr("output_shape", Ints),
];
const REDUCE_ATTRS: &[super::AttrDef] = &[
    attr("axes", Ints),
    int_attr("keepdims", 1),
    int_attr("noop_with_empty_axes", 0),
];
const T_FLOAT: &[(&str, &[crate::ElemType])] = &[("T", FLOAT)];
const T_NUMERIC: &[(&str, &[crate::ElemType])] = &[("T", NUMERIC)];
const T_SIGNED: &[(&str, &[crate::ElemType])] = &[("T", SIGNED_NUMERIC)];
const T_ANY: &[(&str, &[crate::ElemType])] = &[("T", ANY)];
const T_ANY_I64: &[(&str, &[crate::ElemType])] = &[("T", ANY), ("I", I64_ONLY)];
const T_NUMERIC_I64: &[(&str, &[crate::ElemType])] = &[("T", NUMERIC), ("I", I64_ONLY)];
/// ReduceMax and ReduceMin also take bool (opset 20).
const NUMERIC_BOOL: &[crate::ElemType] = &[
    crate::ElemType::F64,
    crate::ElemType::F32,
    crate::ElemType::F16,
    crate::ElemType::BF16,
    crate::ElemType::I64,
    crate::ElemType::I32,
    crate::ElemType::I16,
    crate::ElemType::I8,
    crate::ElemType::U64,
    crate::ElemType::U32,
    crate::ElemType::U16,
    crate::ElemType::U8,
    crate::ElemType::Bool,
];
const T_NUMERIC_BOOL_I64: &[(&str, &[crate::ElemType])] = &[("T", NUMERIC_BOOL), ("I", I64_ONLY)];
/// The weight element types `memc.matmul_nbits` takes: 4- and 8-bit integers.
const LOW_BIT: &[crate::ElemType] = &[
    crate::ElemType::I4,
    crate::ElemType::U4,
    crate::ElemType::I8,
    crate::ElemType::U8,
];

/// The losses: float scores and weights, int32 or int64 labels; with `I`, an int64 runtime
/// ignore_index.
const LOSS_VARS: &[(&str, &[crate::ElemType])] = &[("T", FLOAT), ("Tind", INDEX)];
const LOSS_VARS_I: &[(&str, &[crate::ElemType])] =
    &[("T", FLOAT), ("Tind", INDEX), ("I", I64_ONLY)];
/// onnxruntime's internal losses may write another float type (`output_type`).
const LOSS_INTERNAL_VARS: &[(&str, &[crate::ElemType])] = &[
    ("T", FLOAT),
    ("TOut", FLOAT),
    ("Tind", INDEX),
    ("I", I64_ONLY),
];
/// NegativeLogLikelihoodLoss ignores a label only when `ignore_index` is given.
const NLL_ATTRS: &[super::AttrDef] = &[attr("ignore_index", Int), str_attr("reduction", "mean")];
/// onnxruntime's softmax cross-entropy kernels ignore label -1 when no `ignore_index` is given.
const SCE_ATTRS: &[super::AttrDef] = &[int_attr("ignore_index", -1), str_attr("reduction", "mean")];
/// The internal forms take ignore_index as an operand only (-1 when it is left out).
const SCE_INTERNAL_ATTRS: &[super::AttrDef] =
    &[attr("output_type", Int), str_attr("reduction", "mean")];

define_ops! {
    // Structure. `memc.weight` has no shape function: its type is its weight's (verifier step
    // 10), which shape inference reads from the weight store.
    Return = op("func.return", "returns the function's results").ins(&[variadic("operands", TypeRule::OneOf(ANY))]).traits(Traits::TERMINATOR.with(Traits::ACCEPTS_BOUNDED)).effects().flops(c::zero);
    None = op("memc.none", "a left-out optional operand (ONNX's empty input name)").outs(&[req("none", TypeRule::OneOf(&[]))]).flops(c::zero);
    Weight = op("memc.weight", "a constant tensor from the weight store").outs(&[req("output", var("T"))]).vars(T_ANY).attrs(&[required("value", Weight)]).fold(f::weight).flops(c::zero);
    If = op("onnx.If", "runs the then or else region").ins(&[req("cond", var("B"))]).outs(&[variadic("outputs", TypeRule::OneOf(ANY))]).vars(&[("B", BOOL)]).regions(2).shape(s::if_op).flops(c::zero);
    Yield = op("onnx.Yield", "returns values from a region").ins(&[variadic("operands", TypeRule::OneOf(ANY))]).traits(Traits::TERMINATOR).effects().flops(c::zero);

    // Training: persistent state (see `crate::state`).
    InPlaceAccumulatorV2 = op("ms.InPlaceAccumulatorV2", "adds `value` into the persistent gradient buffer in place (copies it when `overwrite_flag` is true); outputs true").ins(&[req("accumulation_buffer", var("T")), req("value", var("T")), opt("overwrite_flag", var("B"))]).outs(&[req("updated_flag", var("B")), opt("accumulation_buffer_out", var("T"))]).vars(&[("T", FLOAT), ("B", BOOL)]).effects().verify(v::in_place_accumulator).shape(s::in_place_accumulator).flops(c::adds::<1>);
    // The accumulator fused with the product or scatter that made its gradient (the
    // `accumulate-into-state` pass): the gradient goes straight into the persistent buffer, so
    // no weight-sized temporary is planned.
    AccumulateGemm = op("memc.accumulate_gemm", "buffer = (overwrite_flag ? 0 : buffer) + alpha * op(A) x op(B), in place in the persistent gradient buffer; outputs true").ins(&[req("accumulation_buffer", var("T")), req("A", var("T")), req("B", var("T")), opt("overwrite_flag", var("B1"))]).outs(&[req("updated_flag", var("B1"))]).vars(&[("T", FLOAT), ("B1", BOOL)]).attrs(&[float_attr("alpha", 1.0), int_attr("transA", 0), int_attr("transB", 0)]).effects().verify(v::accumulate_gemm).shape(s::accumulator_flag).flops(c::accumulate_gemm);
    AccumulateGatherGrad = op("memc.accumulate_gather_grad", "buffer = (overwrite_flag ? 0 : buffer) + GatherGrad(indices, dY) along `axis`, in place in the persistent gradient buffer; outputs true").ins(&[req("accumulation_buffer", var("T")), req("indices", var("Tind")), req("dY", var("T")), opt("overwrite_flag", var("B1"))]).outs(&[req("updated_flag", var("B1"))]).vars(&[("T", FLOAT), ("Tind", INDEX), ("B1", BOOL)]).attrs(&[int_attr("axis", 0)]).effects().shape(s::accumulator_flag).flops(c::adds::<2>);

    // Elementwise binary, with multidirectional broadcasting.
    Add = op("onnx.Add", "A + B").ins(AB_T).outs(C_T).vars(T_NUMERIC).traits(COMMUTATIVE_EW).shape(s::broadcast).fold(f::add);
    Sub = op("onnx.Sub", "A - B").ins(AB_T).outs(C_T).vars(T_NUMERIC).traits(ELEMENTWISE).shape(s::broadcast).fold(f::sub);
    Mul = op("onnx.Mul", "A * B").ins(AB_T).outs(C_T).vars(T_NUMERIC).traits(COMMUTATIVE_EW).shape(s::broadcast).fold(f::mul);
    Div = op("onnx.Div", "A / B").ins(AB_T).outs(C_T).vars(T_NUMERIC).traits(ELEMENTWISE).shape(s::broadcast).fold(f::div);
    Pow = op("onnx.Pow", "X ^ Y").ins(&[req("X", var("T")), req("Y", var("T1"))]).outs(&[req("Z", var("T"))]).vars(&[("T", NUMERIC), ("T1", NUMERIC)]).traits(ELEMENTWISE).shape(s::broadcast);
    Min = op("onnx.Min", "elementwise minimum of the inputs").ins(&[variadic("data", var("T"))]).outs(&[req("min", var("T"))]).vars(T_NUMERIC).traits(ELEMENTWISE).shape(s::broadcast).fold(f::min);
    Max = op("onnx.Max", "elementwise maximum of the inputs").ins(&[variadic("data", var("T"))]).outs(&[req("max", var("T"))]).vars(T_NUMERIC).traits(ELEMENTWISE).shape(s::broadcast).fold(f::max);
    Sum = op("onnx.Sum", "elementwise sum of the inputs").ins(&[variadic("data", var("T"))]).outs(&[req("sum", var("T"))]).vars(T_NUMERIC).traits(ELEMENTWISE).shape(s::broadcast);
    Equal = op("onnx.Equal", "A == B").ins(AB_T).outs(C_BOOL).vars(&[("T", ANY), ("B", BOOL)]).traits(COMMUTATIVE_EW).shape(s::broadcast_to_bool).fold(f::equal);
    Less = op("onnx.Less", "A < B").ins(AB_T).outs(C_BOOL).vars(&[("T", NUMERIC), ("B", BOOL)]).traits(ELEMENTWISE).shape(s::broadcast_to_bool).fold(f::less);
    LessOrEqual = op("onnx.LessOrEqual", "A <= B").ins(AB_T).outs(C_BOOL).vars(&[("T", NUMERIC), ("B", BOOL)]).traits(ELEMENTWISE).shape(s::broadcast_to_bool).fold(f::less_or_equal);
    Greater = op("onnx.Greater", "A > B").ins(AB_T).outs(C_BOOL).vars(&[("T", NUMERIC), ("B", BOOL)]).traits(ELEMENTWISE).shape(s::broadcast_to_bool).fold(f::greater);
    GreaterOrEqual = op("onnx.GreaterOrEqual", "A >= B").ins(AB_T).outs(C_BOOL).vars(&[("T", NUMERIC), ("B", BOOL)]).traits(ELEMENTWISE).shape(s::broadcast_to_bool).fold(f::greater_or_equal);
    And = op("onnx.And", "A and B").ins(AB_T).outs(C_T).vars(&[("T", BOOL)]).traits(COMMUTATIVE_EW).shape(s::broadcast).fold(f::and);
    Or = op("onnx.Or", "A or B").ins(AB_T).outs(C_T).vars(&[("T", BOOL)]).traits(COMMUTATIVE_EW).shape(s::broadcast).fold(f::or);
    Xor = op("onnx.Xor", "A xor B").ins(AB_T).outs(C_T).vars(&[("T", BOOL)]).traits(COMMUTATIVE_EW).shape(s::broadcast);
    BitwiseAnd = op("onnx.BitwiseAnd", "A & B").ins(AB_T).outs(C_T).vars(&[("T", INT)]).traits(COMMUTATIVE_EW).shape(s::broadcast);
    BitwiseOr = op("onnx.BitwiseOr", "A | B").ins(AB_T).outs(C_T).vars(&[("T", INT)]).traits(COMMUTATIVE_EW).shape(s::broadcast);
    BitwiseXor = op("onnx.BitwiseXor", "A ^ B").ins(AB_T).outs(C_T).vars(&[("T", INT)]).traits(COMMUTATIVE_EW).shape(s::broadcast);
    BitShift = op("onnx.BitShift", "X shifted by Y bits in `direction`").ins(&[req("X", var("T")), req("Y", var("T"))]).outs(&[req("Z", var("T"))]).vars(&[("T", &[crate::ElemType::U64, crate::ElemType::U32, crate::ElemType::U16, crate::ElemType::U8])]).attrs(&[required("direction", String)]).traits(ELEMENTWISE).shape(s::broadcast);
    PRelu = op("onnx.PRelu", "X < 0 ? slope * X : X").ins(&[req("X", var("T")), req("slope", var("T"))]).outs(Y_T).vars(T_NUMERIC).traits(ELEMENTWISE).shape(s::broadcast).flops(c::per_elem::<2>);
    Mean = op("onnx.Mean", "elementwise mean of the inputs").ins(&[variadic("data_0", var("T"))]).outs(&[req("mean", var("T"))]).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::broadcast).flops(c::mean);
    Mod = op("onnx.Mod", "A mod B: the divisor's sign, or the dividend's with `fmod`").ins(AB_T).outs(C_T).vars(T_NUMERIC).attrs(&[int_attr("fmod", 0)]).traits(ELEMENTWISE).shape(s::broadcast).fold(f::modulo);
    Where = op("onnx.Where", "condition ? X : Y").ins(&[req("condition", var("B")), req("X", var("T")), req("Y", var("T"))]).outs(&[req("output", var("T"))]).vars(&[("B", BOOL), ("T", ANY)]).traits(ELEMENTWISE).shape(s::broadcast_where).fold(f::where_).flops(c::zero);

    // Elementwise unary.
    Not = op("onnx.Not", "logical not").ins(X_T).outs(Y_T).vars(&[("T", BOOL)]).traits(ELEMENTWISE).shape(s::same_as_first).fold(f::not);
    Neg = op("onnx.Neg", "-X").ins(X_T).outs(Y_T).vars(T_SIGNED).traits(ELEMENTWISE).shape(s::same_as_first).fold(f::neg);
    Abs = op("onnx.Abs", "|X|").ins(X_T).outs(Y_T).vars(T_NUMERIC).traits(ELEMENTWISE).shape(s::same_as_first);
    Sign = op("onnx.Sign", "-1, 0 or 1 by the sign of X").ins(X_T).outs(Y_T).vars(T_NUMERIC).traits(ELEMENTWISE).shape(s::same_as_first);
    IsNaN = op("onnx.IsNaN", "whether X is NaN").ins(X_T).outs(&[req("Y", var("B"))]).vars(&[("T", FLOAT), ("B", BOOL)]).traits(ELEMENTWISE).shape(s::same_shape_bool);
    Sqrt = op("onnx.Sqrt", "square root").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Exp = op("onnx.Exp", "e ^ X").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Log = op("onnx.Log", "natural logarithm").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Reciprocal = op("onnx.Reciprocal", "1 / X").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Floor = op("onnx.Floor", "round down").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first).fold(f::floor);
    Ceil = op("onnx.Ceil", "round up").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first).fold(f::ceil);
    Sin = op("onnx.Sin", "sine").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Cos = op("onnx.Cos", "cosine").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Erf = op("onnx.Erf", "the error function").ins(X_T).outs(Y_T).vars(T_NUMERIC).traits(ELEMENTWISE).shape(s::same_as_first);
    Tan = op("onnx.Tan", "tangent").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Asin = op("onnx.Asin", "arcsine").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Acos = op("onnx.Acos", "arccosine").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Atan = op("onnx.Atan", "arctangent").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Sinh = op("onnx.Sinh", "hyperbolic sine").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Cosh = op("onnx.Cosh", "hyperbolic cosine").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Asinh = op("onnx.Asinh", "inverse hyperbolic sine").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Acosh = op("onnx.Acosh", "inverse hyperbolic cosine").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Atanh = op("onnx.Atanh", "inverse hyperbolic tangent").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Round = op("onnx.Round", "round half to even").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Softsign = op("onnx.Softsign", "X / (1 + |X|)").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<3>);
    Mish = op("onnx.Mish", "X * tanh(softplus(X))").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<5>);
    Selu = op("onnx.Selu", "gamma * (X > 0 ? X : alpha * (e ^ X - 1))").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(&[float_attr("alpha", 1.673_263_192_176_818_8), float_attr("gamma", 1.050_701_022_148_132_3)]).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<5>);
    ThresholdedRelu = op("onnx.ThresholdedRelu", "X > alpha ? X : 0").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(&[float_attr("alpha", 1.0)]).traits(ELEMENTWISE).shape(s::same_as_first);
    Celu = op("onnx.Celu", "max(0, X) + min(0, alpha * (e ^ (X / alpha) - 1))").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(&[float_attr("alpha", 1.0)]).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<7>);
    Swish = op("onnx.Swish", "X * sigmoid(alpha * X)").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(&[float_attr("alpha", 1.0)]).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<{ c::SIGMOID + 2 }>);
    Shrink = op("onnx.Shrink", "X < -lambd ? X + bias : X > lambd ? X - bias : 0").ins(&[req("input", var("T"))]).outs(&[req("output", var("T"))]).vars(T_NUMERIC).attrs(&[float_attr("bias", 0.0), float_attr("lambd", 0.5)]).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<3>);
    IsInf = op("onnx.IsInf", "whether X is infinite (of the selected signs)").ins(X_T).outs(&[req("Y", var("B"))]).vars(&[("T", FLOAT), ("B", BOOL)]).attrs(&[int_attr("detect_negative", 1), int_attr("detect_positive", 1)]).traits(ELEMENTWISE).shape(s::same_shape_bool);
    BitwiseNot = op("onnx.BitwiseNot", "bitwise not").ins(X_T).outs(Y_T).vars(&[("T", INT)]).traits(ELEMENTWISE).shape(s::same_as_first);
    CastLike = op("onnx.CastLike", "converts to the element type of `target_type`").ins(&[req("input", var("T1")), req("target_type", var("T2"))]).outs(&[req("output", var("T2"))]).vars(&[("T1", ANY), ("T2", ANY)]).attrs(&[int_attr("saturate", 1), str_attr("round_mode", "up")]).traits(ELEMENTWISE).shape(s::cast_like).flops(c::zero);
    Relu = op("onnx.Relu", "max(X, 0)").ins(X_T).outs(Y_T).vars(T_SIGNED).traits(ELEMENTWISE).shape(s::same_as_first).fold(f::relu);
    LeakyRelu = op("onnx.LeakyRelu", "X < 0 ? alpha * X : X").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(&[float_attr("alpha", 0.01)]).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<2>);
    Elu = op("onnx.Elu", "X < 0 ? alpha * (e ^ X - 1) : X").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(&[float_attr("alpha", 1.0)]).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<4>);
    Sigmoid = op("onnx.Sigmoid", "1 / (1 + e ^ -X)").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<{ c::SIGMOID }>);
    HardSwish = op("onnx.HardSwish", "X * max(0, min(1, X / 6 + 1 / 2))").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<5>);
    HardSigmoid = op("onnx.HardSigmoid", "max(0, min(1, alpha * X + beta))").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(&[float_attr("alpha", 0.2), float_attr("beta", 0.5)]).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<4>);
    Softplus = op("onnx.Softplus", "ln(e ^ X + 1)").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<3>);
    Tanh = op("onnx.Tanh", "hyperbolic tangent").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first);
    Gelu = op("onnx.Gelu", "Gaussian error linear unit").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(&[str_attr("approximate", "none")]).traits(ELEMENTWISE).verify(v::gelu).shape(s::same_as_first).flops(c::gelu);
    Clip = op("onnx.Clip", "min(max(input, min), max)").ins(&[req("input", var("T")), opt("min", var("T")), opt("max", var("T"))]).outs(&[req("output", var("T"))]).vars(T_NUMERIC).traits(ELEMENTWISE).shape(s::same_as_first);
    Identity = op("onnx.Identity", "returns its input").ins(&[req("input", var("T"))]).outs(&[req("output", var("T"))]).vars(T_ANY).traits(SAME_BYTES).shape(s::same_as_first).fold(f::forward);
    Cast = op("onnx.Cast", "converts to the element type `to`").ins(&[req("input", var("T1"))]).outs(&[req("output", var("T2"))]).vars(&[("T1", ANY), ("T2", ANY)]).attrs(&[required("to", ElemType), int_attr("saturate", 1), str_attr("round_mode", "up")]).traits(ELEMENTWISE).shape(s::cast).fold(f::cast).flops(c::zero);
    BitCast = op("onnx.BitCast", "the same bytes read as the element type `to` (of the same width)").ins(&[req("input", var("T1"))]).outs(&[req("output", var("T2"))]).vars(&[("T1", ANY), ("T2", ANY)]).attrs(&[required("to", ElemType)]).traits(SAME_BYTES).verify(v::bit_cast).shape(s::cast).flops(c::zero);
    Dropout = op("onnx.Dropout", "identity in inference; random zeroing in training").ins(&[req("data", var("T")), opt("ratio", var("T1")), opt("training_mode", var("B"))]).outs(&[req("output", var("T")), opt("mask", var("B"))]).vars(&[("T", FLOAT), ("T1", FLOAT), ("B", BOOL)]).attrs(&[attr("seed", Int)]).traits(Traits::VIEW).random_when(r::dropout).shape(s::dropout);

    // Normalization and activation over an axis.
    Softmax = op("onnx.Softmax", "softmax along `axis`").ins(&[req("input", var("T"))]).outs(&[req("output", var("T"))]).vars(T_FLOAT).attrs(&[int_attr("axis", -1)]).verify(v::axis_in_range).shape(s::same_as_first).flops(c::per_elem::<5>);
    LogSoftmax = op("onnx.LogSoftmax", "log of softmax along `axis`").ins(&[req("input", var("T"))]).outs(&[req("output", var("T"))]).vars(T_FLOAT).attrs(&[int_attr("axis", -1)]).verify(v::axis_in_range).shape(s::same_as_first).flops(c::per_elem::<5>);
    Hardmax = op("onnx.Hardmax", "1 at the first max along `axis`, else 0").ins(&[req("input", var("T"))]).outs(&[req("output", var("T"))]).vars(T_FLOAT).attrs(&[int_attr("axis", -1)]).verify(v::axis_in_range).shape(s::same_as_first).flops(c::per_elem::<1>);
    RMSNormalization = op("onnx.RMSNormalization", "X / sqrt(mean(X^2) + epsilon) * scale over the dims from `axis` on").ins(&[req("X", var("T")), req("scale", var("V"))]).outs(&[req("Y", var("V"))]).vars(&[("T", FLOAT), ("V", FLOAT)]).attrs(&[int_attr("axis", -1), float_attr("epsilon", 1e-5), int_attr("stash_type", 1)]).verify(v::axis_in_range).shape(s::same_as_first).flops(c::per_elem::<4>);
    InstanceNormalization = op("onnx.InstanceNormalization", "normalizes each channel of each instance").ins(&[req("input", var("T")), req("scale", var("T")), req("B", var("T"))]).outs(&[req("output", var("T"))]).vars(T_FLOAT).attrs(&[float_attr("epsilon", 1e-5)]).shape(s::same_as_first).flops(c::per_elem::<7>);
    LpNormalization = op("onnx.LpNormalization", "divides by the Lp norm along `axis`").ins(&[req("input", var("T"))]).outs(&[req("output", var("T"))]).vars(T_FLOAT).attrs(&[int_attr("axis", -1), int_attr("p", 2)]).verify(v::axis_in_range).shape(s::same_as_first).flops(c::per_elem::<3>);
    MeanVarianceNormalization = op("onnx.MeanVarianceNormalization", "(X - mean) / std over `axes`").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(&[attr("axes", Ints)]).shape(s::same_as_first).flops(c::per_elem::<5>);
    LayerNormalization = op("onnx.LayerNormalization", "normalizes over the dims from `axis` on").ins(&[req("X", var("T")), req("Scale", var("T")), opt("B", var("T"))]).outs(&[req("Y", var("T")), opt("Mean", var("U")), opt("InvStdDev", var("U"))]).vars(&[("T", FLOAT), ("U", FLOAT)]).attrs(&[int_attr("axis", -1), float_attr("epsilon", 1e-5), int_attr("stash_type", 1)]).verify(v::axis_in_range).shape(s::layer_normalization).flops(c::layer_norm);
    BatchNormalization = op("onnx.BatchNormalization", "normalizes each channel with running statistics").ins(&[req("X", var("T")), req("scale", var("T1")), req("B", var("T1")), req("input_mean", var("T2")), req("input_var", var("T2"))]).outs(&[req("Y", var("T")), opt("running_mean", var("T2")), opt("running_var", var("T2"))]).vars(&[("T", FLOAT), ("T1", FLOAT), ("T2", FLOAT)]).attrs(&[float_attr("epsilon", 1e-5), float_attr("momentum", 0.9), int_attr("training_mode", 0)]).shape(s::batch_normalization).flops(c::batch_norm);

    // Contractions, convolutions and pooling.
    MatMul = op("onnx.MatMul", "matrix product with numpy broadcasting").ins(AB_T).outs(&[req("Y", var("T"))]).vars(T_NUMERIC).shape(s::matmul).flops(c::matmul);
    Einsum = op("onnx.Einsum", "sums of products of the inputs' elements over the labels an equation names").ins(&[variadic("Inputs", var("T"))]).outs(&[req("Output", var("T"))]).vars(T_NUMERIC).attrs(&[required("equation", String)]).verify(v::einsum).shape(s::einsum).flops(c::einsum);
    Gemm = op("onnx.Gemm", "alpha * A' * B' + beta * C").ins(&[req("A", var("T")), req("B", var("T")), opt("C", var("T"))]).outs(&[req("Y", var("T"))]).vars(T_NUMERIC).attrs(&[float_attr("alpha", 1.0), float_attr("beta", 1.0), int_attr("transA", 0), int_attr("transB", 0)]).verify(v::gemm).shape(s::gemm).flops(c::gemm);
    Conv = op("onnx.Conv", "N-d convolution").ins(&[req("X", var("T")), req("W", var("T")), opt("B", var("T"))]).outs(&[req("Y", var("T"))]).vars(T_FLOAT).attrs(CONV_ATTRS).shape(s::conv).flops(c::conv);
    ConvTranspose = op("onnx.ConvTranspose", "N-d transposed convolution").ins(&[req("X", var("T")), req("W", var("T")), opt("B", var("T"))]).outs(&[req("Y", var("T"))]).vars(T_FLOAT).attrs(CONV_ATTRS).shape(s::conv_transpose).flops(c::conv_transpose);
    MaxPool = op("onnx.MaxPool", "max over sliding windows").ins(X_T).outs(&[req("Y", var("T")), opt("Indices", var("I"))]).vars(&[("T", NUMERIC), ("I", I64_ONLY)]).attrs(POOL_ATTRS).shape(s::pool).flops(c::pool);
    AveragePool = op("onnx.AveragePool", "mean over sliding windows").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(POOL_ATTRS).shape(s::pool).flops(c::pool);
    LpPool = op("onnx.LpPool", "the Lp norm over sliding windows").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(LP_POOL_ATTRS).verify(v::lp_pool).shape(s::pool).flops(c::lp_pool);
    GlobalAveragePool = op("onnx.GlobalAveragePool", "mean over all spatial dims").ins(X_T).outs(Y_T).vars(T_FLOAT).shape(s::global_pool).flops(c::reduce::<1>);
    GlobalMaxPool = op("onnx.GlobalMaxPool", "max over all spatial dims").ins(X_T).outs(Y_T).vars(T_FLOAT).shape(s::global_pool).flops(c::reduce::<1>);

    // Attention (opsets 23 and 24; `memc_ir::ops::AttentionDims` resolves the layouts, head
    // groups and sequence lengths) and rotary position embeddings (opset 23).
    Attention = op("onnx.Attention", "softmax(scale * Q K^T (softcapped) + mask) V with grouped-query heads and a key-value cache").ins(&[req("Q", var("T1")), req("K", var("T1")), req("V", var("T2")), opt("attn_mask", var("U")), opt("past_key", var("T1")), opt("past_value", var("T2")), opt("nonpad_kv_seqlen", var("I"))]).outs(&[req("Y", var("T1")), opt("present_key", var("T1")), opt("present_value", var("T2")), opt("qk_matmul_output", var("T1"))]).vars(&[("T1", FLOAT), ("T2", FLOAT), ("U", NUMERIC_BOOL), ("I", I64_ONLY)]).attrs(&[int_attr("is_causal", 0), attr("kv_num_heads", Int), attr("q_num_heads", Int), int_attr("qk_matmul_output_mode", 0), attr("scale", Float), float_attr("softcap", 0.0), attr("softmax_precision", Int)]).shape(s::attention).flops(c::attention);
    RotaryEmbedding = op("onnx.RotaryEmbedding", "rotates pairs of each head's first `rotary_embedding_dim` elements by the cached angles").ins(&[req("X", var("T")), req("cos_cache", var("T")), req("sin_cache", var("T")), opt("position_ids", var("M"))]).outs(&[req("Y", var("T"))]).vars(&[("T", FLOAT), ("M", I64_ONLY)]).attrs(&[int_attr("interleaved", 0), attr("num_heads", Int), int_attr("rotary_embedding_dim", 0)]).shape(s::rotary_embedding).flops(c::rotary_embedding);
    // Recurrent relatives (opset 27): linear attention over a carried state, and a causal
    // depthwise convolution carrying its last `kernel - 1` inputs.
    LinearAttention = op("onnx.LinearAttention", "attention as a recurrence over a [key, value] state per head: linear, gated, delta or gated delta updates").ins(&[req("query", var("T")), req("key", var("T")), req("value", var("T")), opt("past_state", var("S")), opt("decay", var("T")), opt("beta", var("T"))]).outs(&[req("output", var("T")), req("present_state", var("S"))]).vars(&[("T", FLOAT), ("S", FLOAT)]).attrs(&[int_attr("chunk_size", 64), attr("kv_num_heads", Int), attr("q_num_heads", Int), float_attr("scale", 0.0), str_attr("update_rule", "gated_delta")]).shape(s::linear_attention).flops(c::linear_attention);
    CausalConvWithState = op("onnx.CausalConvWithState", "causal depthwise 1-d convolution over the past state and the input, with an optional SiLU; also the new state").ins(&[req("input", var("T")), req("weight", var("T")), opt("bias", var("T")), opt("past_state", var("T"))]).outs(&[req("output", var("T")), req("present_state", var("T"))]).vars(T_FLOAT).attrs(&[str_attr("activation", "none")]).shape(s::causal_conv_with_state).flops(c::causal_conv_with_state);
    // Recurrent cells (opsets 7 to 22; `memc_ir::ops::RecurrentDims` resolves their dims):
    // the time loop is unrolled at lowering, the states kept in planned scratch.
    RNN = op("onnx.RNN", "a simple recurrent layer: H = tanh(X W^T + H R^T + Wb + Rb) per step").ins(&[req("X", var("T")), req("W", var("T")), req("R", var("T")), opt("B", var("T")), opt("sequence_lens", var("T1")), opt("initial_h", var("T"))]).outs(&[opt("Y", var("T")), opt("Y_h", var("T"))]).vars(&[("T", FLOAT), ("T1", I32_ONLY)]).attrs(&[attr("activation_alpha", Floats), attr("activation_beta", Floats), attr("activations", Strings), attr("clip", Float), str_attr("direction", "forward"), attr("hidden_size", Int), int_attr("layout", 0)]).verify(v::recurrent).shape(s::recurrent).flops(c::recurrent);
    GRU = op("onnx.GRU", "a gated recurrent unit layer (update, reset and hidden gates)").ins(&[req("X", var("T")), req("W", var("T")), req("R", var("T")), opt("B", var("T")), opt("sequence_lens", var("T1")), opt("initial_h", var("T"))]).outs(&[opt("Y", var("T")), opt("Y_h", var("T"))]).vars(&[("T", FLOAT), ("T1", I32_ONLY)]).attrs(&[attr("activation_alpha", Floats), attr("activation_beta", Floats), attr("activations", Strings), attr("clip", Float), str_attr("direction", "forward"), attr("hidden_size", Int), int_attr("layout", 0), int_attr("linear_before_reset", 0)]).verify(v::recurrent).shape(s::recurrent).flops(c::recurrent);
    LSTM = op("onnx.LSTM", "a long short-term memory layer (input, output, forget and cell gates, optional peepholes)").ins(&[req("X", var("T")), req("W", var("T")), req("R", var("T")), opt("B", var("T")), opt("sequence_lens", var("T1")), opt("initial_h", var("T")), opt("initial_c", var("T")), opt("P", var("T"))]).outs(&[opt("Y", var("T")), opt("Y_h", var("T")), opt("Y_c", var("T"))]).vars(&[("T", FLOAT), ("T1", I32_ONLY)]).attrs(&[attr("activation_alpha", Floats), attr("activation_beta", Floats), attr("activations", Strings), attr("clip", Float), str_attr("direction", "forward"), attr("hidden_size", Int), int_attr("layout", 0), int_attr("input_forget", 0)]).verify(v::recurrent).shape(s::recurrent).flops(c::recurrent);

    // Reductions.
    ReduceMean = op("onnx.ReduceMean", "mean over `axes`").ins(DATA_AXES).outs(&[req("reduced", var("T"))]).vars(T_NUMERIC_I64).attrs(REDUCE_ATTRS).traits(REDUCTION).shape(s::reduce);
    ReduceSum = op("onnx.ReduceSum", "sum over `axes`").ins(DATA_AXES).outs(&[req("reduced", var("T"))]).vars(T_NUMERIC_I64).attrs(REDUCE_ATTRS).traits(REDUCTION).shape(s::reduce).fold(f::reduce_sum);
    ReduceMax = op("onnx.ReduceMax", "max over `axes`").ins(DATA_AXES).outs(&[req("reduced", var("T"))]).vars(T_NUMERIC_BOOL_I64).attrs(REDUCE_ATTRS).traits(REDUCTION).shape(s::reduce).fold(f::reduce_max);
    ReduceMin = op("onnx.ReduceMin", "min over `axes`").ins(DATA_AXES).outs(&[req("reduced", var("T"))]).vars(T_NUMERIC_BOOL_I64).attrs(REDUCE_ATTRS).traits(REDUCTION).shape(s::reduce).fold(f::reduce_min);
    ReduceProd = op("onnx.ReduceProd", "product over `axes`").ins(DATA_AXES).outs(&[req("reduced", var("T"))]).vars(T_NUMERIC_I64).attrs(REDUCE_ATTRS).traits(REDUCTION).shape(s::reduce).fold(f::reduce_prod);
    ReduceL1 = op("onnx.ReduceL1", "sum of |x| over `axes`").ins(DATA_AXES).outs(&[req("reduced", var("T"))]).vars(T_NUMERIC_I64).attrs(REDUCE_ATTRS).traits(REDUCTION).shape(s::reduce).flops(c::reduce::<2>);
    ReduceL2 = op("onnx.ReduceL2", "square root of the sum of squares over `axes`").ins(DATA_AXES).outs(&[req("reduced", var("T"))]).vars(T_NUMERIC_I64).attrs(REDUCE_ATTRS).traits(REDUCTION).shape(s::reduce).flops(c::reduce::<2>);
    ReduceLogSum = op("onnx.ReduceLogSum", "log of the sum over `axes`").ins(DATA_AXES).outs(&[req("reduced", var("T"))]).vars(T_NUMERIC_I64).attrs(REDUCE_ATTRS).traits(REDUCTION).shape(s::reduce);
    ReduceLogSumExp = op("onnx.ReduceLogSumExp", "log of the sum of e ^ x over `axes`").ins(DATA_AXES).outs(&[req("reduced", var("T"))]).vars(T_NUMERIC_I64).attrs(REDUCE_ATTRS).traits(REDUCTION).shape(s::reduce).flops(c::reduce::<2>);
    ReduceSumSquare = op("onnx.ReduceSumSquare", "sum of squares over `axes`").ins(DATA_AXES).outs(&[req("reduced", var("T"))]).vars(T_NUMERIC_I64).attrs(REDUCE_ATTRS).traits(REDUCTION).shape(s::reduce).flops(c::reduce::<2>);
    CumProd = op("onnx.CumProd", "cumulative product along the `axis` operand").ins(&[req("x", var("T")), req("axis", var("I"))]).outs(&[req("y", var("T"))]).vars(&[("T", NUMERIC), ("I", INDEX)]).attrs(&[int_attr("exclusive", 0), int_attr("reverse", 0)]).shape(s::same_as_first).flops(c::per_elem::<1>);
    ArgMax = op("onnx.ArgMax", "index of the max along `axis`").ins(&[req("data", var("T"))]).outs(&[req("reduced", var("I"))]).vars(T_NUMERIC_I64).attrs(&[int_attr("axis", 0), int_attr("keepdims", 1), int_attr("select_last_index", 0)]).verify(v::axis_in_range).traits(REDUCTION).shape(s::arg_reduce);
    ArgMin = op("onnx.ArgMin", "index of the min along `axis`").ins(&[req("data", var("T"))]).outs(&[req("reduced", var("I"))]).vars(T_NUMERIC_I64).attrs(&[int_attr("axis", 0), int_attr("keepdims", 1), int_attr("select_last_index", 0)]).verify(v::axis_in_range).traits(REDUCTION).shape(s::arg_reduce);
    CumSum = op("onnx.CumSum", "cumulative sum along the `axis` operand").ins(&[req("x", var("T")), req("axis", var("I"))]).outs(&[req("y", var("T"))]).vars(&[("T", NUMERIC), ("I", INDEX)]).attrs(&[int_attr("exclusive", 0), int_attr("reverse", 0)]).shape(s::same_as_first).flops(c::per_elem::<1>);
    TopK = op("onnx.TopK", "the K largest (or smallest) entries along `axis`, and their indices").ins(&[req("X", var("T")), req("K", var("I"))]).outs(&[req("Values", var("T")), req("Indices", var("I"))]).vars(T_NUMERIC_I64).attrs(&[int_attr("axis", -1), int_attr("largest", 1), int_attr("sorted", 1)]).verify(v::axis_in_range).traits(Traits::BOUNDED_RESULTS).shape(s::top_k).flops(c::top_k);
    // Data-dependent extents: results with a bounded dim (`<=N`), the run-time extent written
    // after the elements (`docs/dynamic-extents.md`).
    NonZero = op("onnx.NonZero", "the indices of the non-zero elements, one row per axis").ins(&[req("X", var("T"))]).outs(&[req("Y", TypeRule::OneOf(I64_ONLY))]).vars(T_ANY).traits(Traits::BOUNDED_RESULTS).shape(s::non_zero).flops(c::adds::<0>);
    Compress = op("onnx.Compress", "the slices of `input` along `axis` (or its elements) where `condition` is true").ins(&[req("input", var("T")), req("condition", TypeRule::OneOf(BOOL))]).outs(&[req("output", var("T"))]).vars(T_ANY).attrs(&[attr("axis", Int)]).traits(Traits::BOUNDED_RESULTS).shape(s::compress).flops(c::zero);
    Unique = op("onnx.Unique", "the unique elements of `X`, sorted, with their first indices, the inverse indices and the counts").ins(&[req("X", var("T"))]).outs(&[req("Y", var("T")), opt("indices", TypeRule::OneOf(I64_ONLY)), opt("inverse_indices", TypeRule::OneOf(I64_ONLY)), opt("counts", TypeRule::OneOf(I64_ONLY))]).vars(T_NUMERIC).attrs(&[attr("axis", Int), int_attr("sorted", 1)]).traits(Traits::BOUNDED_RESULTS).shape(s::unique).flops(c::unique);

    // Shape and data movement.
    Reshape = op("onnx.Reshape", "same data, new shape").ins(&[req("data", var("T")), req("shape", var("I"))]).outs(&[req("reshaped", var("T"))]).vars(T_ANY_I64).attrs(&[int_attr("allowzero", 0)]).traits(SAME_BYTES).verify(v::reshape).shape(s::reshape).fold(f::forward);
    Flatten = op("onnx.Flatten", "reshape to 2-d around `axis`").ins(&[req("input", var("T"))]).outs(&[req("output", var("T"))]).vars(T_ANY).attrs(&[int_attr("axis", 1)]).traits(SAME_BYTES).verify(v::flatten).shape(s::flatten).fold(f::forward);
    Squeeze = op("onnx.Squeeze", "removes dims of size 1").ins(&[req("data", var("T")), opt("axes", var("I"))]).outs(&[req("squeezed", var("T"))]).vars(T_ANY_I64).traits(SAME_BYTES).shape(s::squeeze).fold(f::forward);
    Unsqueeze = op("onnx.Unsqueeze", "inserts dims of size 1").ins(&[req("data", var("T")), req("axes", var("I"))]).outs(&[req("expanded", var("T"))]).vars(T_ANY_I64).traits(SAME_BYTES).shape(s::unsqueeze).fold(f::forward);
    Transpose = op("onnx.Transpose", "permutes dims by `perm`").ins(&[req("data", var("T"))]).outs(&[req("transposed", var("T"))]).vars(T_ANY).attrs(&[attr("perm", Ints)]).verify(v::transpose).traits(Traits::VIEW).shape(s::transpose).fold(f::transpose);
    Concat = op("onnx.Concat", "joins tensors along `axis`").ins(&[variadic("inputs", var("T"))]).outs(&[req("concat_result", var("T"))]).vars(T_ANY).attrs(&[required("axis", Int)]).shape(s::concat).fold(f::concat).flops(c::zero);
    Split = op("onnx.Split", "splits a tensor along `axis`").ins(&[req("input", var("T")), opt("split", var("I"))]).outs(&[variadic("outputs", var("T"))]).vars(T_ANY_I64).attrs(&[int_attr("axis", 0), attr("num_outputs", Int)]).verify(v::axis_in_range).shape(s::split).fold(f::split).flops(c::zero);
    Slice = op("onnx.Slice", "takes a strided window").ins(&[req("data", var("T")), req("starts", var("I")), req("ends", var("I")), opt("axes", var("I")), opt("steps", var("I"))]).outs(&[req("output", var("T"))]).vars(&[("T", ANY), ("I", INDEX)]).traits(Traits::VIEW).shape(s::slice).fold(f::slice);
    GatherElements = op("onnx.GatherElements", "takes entries along `axis` at an index per output element").ins(&[req("data", var("T")), req("indices", var("I"))]).outs(&[req("output", var("T"))]).vars(&[("T", ANY), ("I", INDEX)]).attrs(&[int_attr("axis", 0)]).verify(v::axis_in_range).shape(s::gather_elements).flops(c::zero);
    GatherND = op("onnx.GatherND", "takes slices at N-d indices").ins(&[req("data", var("T")), req("indices", var("I"))]).outs(&[req("output", var("T"))]).vars(&[("T", ANY), ("I", I64_ONLY)]).attrs(&[int_attr("batch_dims", 0)]).shape(s::gather_nd).flops(c::zero);
    ScatterElements = op("onnx.ScatterElements", "a copy of `data` with `updates` written (or combined by `reduction`) along `axis` at an index per update").ins(&[req("data", var("T")), req("indices", var("I")), req("updates", var("T"))]).outs(&[req("output", var("T"))]).vars(&[("T", ANY), ("I", INDEX)]).attrs(&[int_attr("axis", 0), str_attr("reduction", "none")]).verify(v::scatter_elements).shape(s::scatter_elements).flops(c::scatter);
    ScatterND = op("onnx.ScatterND", "a copy of `data` with `updates` slices written (or combined by `reduction`) at N-d indices").ins(&[req("data", var("T")), req("indices", var("I")), req("updates", var("T"))]).outs(&[req("output", var("T"))]).vars(&[("T", ANY), ("I", I64_ONLY)]).attrs(&[str_attr("reduction", "none")]).verify(v::scatter_reduction).shape(s::scatter_nd).flops(c::scatter);
    TensorScatter = op("onnx.TensorScatter", "a copy of `past_cache` with `update` written along the sequence `axis` from each batch entry's write index (`mode` linear or circular)").ins(&[req("past_cache", var("T")), req("update", var("T")), opt("write_indices", var("I"))]).outs(&[req("present_cache", var("T"))]).vars(&[("T", ANY), ("I", I64_ONLY)]).attrs(&[int_attr("axis", -2), str_attr("mode", "linear")]).verify(v::tensor_scatter).shape(s::tensor_scatter).flops(c::zero);
    Gather = op("onnx.Gather", "takes entries along `axis` by index").ins(&[req("data", var("T")), req("indices", var("I"))]).outs(&[req("output", var("T"))]).vars(&[("T", ANY), ("I", INDEX)]).attrs(&[int_attr("axis", 0)]).verify(v::axis_in_range).shape(s::gather).fold(f::gather).flops(c::zero);
    Expand = op("onnx.Expand", "broadcasts to a shape").ins(&[req("input", var("T")), req("shape", var("I"))]).outs(&[req("output", var("T"))]).vars(T_ANY_I64).shape(s::expand).fold(f::expand).flops(c::zero);
    Tile = op("onnx.Tile", "repeats a tensor").ins(&[req("input", var("T")), req("repeats", var("I"))]).outs(&[req("output", var("T"))]).vars(T_ANY_I64).shape(s::tile).flops(c::zero);
    Pad = op("onnx.Pad", "pads a tensor").ins(&[req("data", var("T")), req("pads", var("I")), opt("constant_value", var("T")), opt("axes", var("J"))]).outs(&[req("output", var("T"))]).vars(&[("T", ANY), ("I", I64_ONLY), ("J", INDEX)]).attrs(&[str_attr("mode", "constant")]).shape(s::pad).flops(c::zero);
    Resize = op("onnx.Resize", "resamples a tensor").ins(&[req("X", var("T1")), opt("roi", var("T2")), opt("scales", var("F")), opt("sizes", var("I"))]).outs(&[req("Y", var("T1"))]).vars(&[("T1", ANY), ("T2", FLOAT), ("F", FLOAT), ("I", I64_ONLY)]).attrs(&[int_attr("antialias", 0), attr("axes", Ints), str_attr("coordinate_transformation_mode", "half_pixel"), float_attr("cubic_coeff_a", -0.75), int_attr("exclude_outside", 0), float_attr("extrapolation_value", 0.0), str_attr("keep_aspect_ratio_policy", "stretch"), str_attr("mode", "nearest"), str_attr("nearest_mode", "round_prefer_floor")]).shape(s::resize).flops(c::resize);
    GridSample = op("onnx.GridSample", "samples X at the normalized coordinates of grid").ins(&[req("X", var("T1")), req("grid", var("T2"))]).outs(&[req("Y", var("T1"))]).vars(&[("T1", ANY), ("T2", FLOAT)]).attrs(&[int_attr("align_corners", 0), str_attr("mode", "linear"), str_attr("padding_mode", "zeros")]).verify(v::grid_sample).shape(s::grid_sample).flops(c::grid_sample);
    AffineGrid = op("onnx.AffineGrid", "the normalized sampling grid that affine matrices theta map an output of `size` to").ins(&[req("theta", var("T1")), req("size", var("T2"))]).outs(&[req("grid", var("T1"))]).vars(&[("T1", FLOAT), ("T2", I64_ONLY)]).attrs(&[int_attr("align_corners", 0)]).shape(s::affine_grid).flops(c::affine_grid);
    HannWindow = op("onnx.HannWindow", "the Hann window of `size` points").ins(&[req("size", var("T1"))]).outs(&[req("output", var("T2"))]).vars(&[("T1", INDEX), ("T2", NUMERIC)]).attrs(&[attr("output_datatype", ElemType), int_attr("periodic", 1)]).verify(v::window_function).shape(s::window_function).flops(c::per_elem::<4>);
    HammingWindow = op("onnx.HammingWindow", "the Hamming window of `size` points").ins(&[req("size", var("T1"))]).outs(&[req("output", var("T2"))]).vars(&[("T1", INDEX), ("T2", NUMERIC)]).attrs(&[attr("output_datatype", ElemType), int_attr("periodic", 1)]).verify(v::window_function).shape(s::window_function).flops(c::per_elem::<4>);
    BlackmanWindow = op("onnx.BlackmanWindow", "the Blackman window of `size` points").ins(&[req("size", var("T1"))]).outs(&[req("output", var("T2"))]).vars(&[("T1", INDEX), ("T2", NUMERIC)]).attrs(&[attr("output_datatype", ElemType), int_attr("periodic", 1)]).verify(v::window_function).shape(s::window_function).flops(c::per_elem::<4>);
    MelWeightMatrix = op("onnx.MelWeightMatrix", "the weights that map a one-sided spectrum's bins onto mel bands").ins(&[req("num_mel_bins", var("T1")), req("dft_length", var("T1")), req("sample_rate", var("T1")), req("lower_edge_hertz", var("T2")), req("upper_edge_hertz", var("T2"))]).outs(&[req("output", var("T3"))]).vars(&[("T1", INDEX), ("T2", FLOAT), ("T3", NUMERIC)]).attrs(&[attr("output_datatype", ElemType)]).verify(v::mel_weight_matrix).shape(s::mel_weight_matrix).flops(c::per_elem::<4>);
    DFT = op("onnx.DFT", "the discrete Fourier transform of a real or complex signal along `axis`").ins(&[req("input", var("T1")), opt("dft_length", var("T2")), opt("axis", var("I"))]).outs(&[req("output", var("T1"))]).vars(&[("T1", FLOAT), ("T2", INDEX), ("I", I64_ONLY)]).attrs(&[int_attr("inverse", 0), int_attr("onesided", 0)]).verify(v::dft).shape(s::dft).flops(c::dft);
    STFT = op("onnx.STFT", "the short-time Fourier transform of a signal, frame by frame").ins(&[req("signal", var("T1")), req("frame_step", var("T2")), opt("window", var("T1")), opt("frame_length", var("T2"))]).outs(&[req("output", var("T1"))]).vars(&[("T1", FLOAT), ("T2", INDEX)]).attrs(&[int_attr("onesided", 1)]).verify(v::stft).shape(s::stft).flops(c::stft);
    Trilu = op("onnx.Trilu", "keeps the upper or lower triangle").ins(&[req("input", var("T")), opt("k", var("I"))]).outs(&[req("output", var("T"))]).vars(T_ANY_I64).attrs(&[int_attr("upper", 1)]).shape(s::same_as_first).flops(c::zero);
    EyeLike = op("onnx.EyeLike", "ones on the `k`-th diagonal of the input's 2-d shape").ins(&[req("input", var("T1"))]).outs(&[req("output", var("T2"))]).vars(&[("T1", ANY), ("T2", ANY)]).attrs(&[attr("dtype", ElemType), int_attr("k", 0)]).shape(s::eye_like).flops(c::zero);
    OneHot = op("onnx.OneHot", "on_value where the index along `axis` equals the position, else off_value").ins(&[req("indices", var("T1")), req("depth", var("T2")), req("values", var("T3"))]).outs(&[req("output", var("T3"))]).vars(&[("T1", NUMERIC), ("T2", NUMERIC), ("T3", ANY)]).attrs(&[int_attr("axis", -1)]).verify(v::one_hot).shape(s::one_hot).flops(c::per_elem::<1>);
    DepthToSpace = op("onnx.DepthToSpace", "moves channel blocks into spatial blocks").ins(&[req("input", var("T"))]).outs(&[req("output", var("T"))]).vars(T_ANY).attrs(&[required("blocksize", Int), str_attr("mode", "DCR")]).shape(s::depth_to_space).flops(c::zero);
    SpaceToDepth = op("onnx.SpaceToDepth", "moves spatial blocks into channels").ins(&[req("input", var("T"))]).outs(&[req("output", var("T"))]).vars(T_ANY).attrs(&[required("blocksize", Int)]).shape(s::space_to_depth).flops(c::zero);
    CenterCropPad = op("onnx.CenterCropPad", "crops or zero-pads `axes` to `shape`, centered").ins(&[req("input_data", var("T")), req("shape", var("I"))]).outs(&[req("output_data", var("T"))]).vars(&[("T", ANY), ("I", INDEX)]).attrs(&[attr("axes", Ints)]).verify(v::center_crop_pad).shape(s::center_crop_pad).flops(c::zero);
    Col2Im = op("onnx.Col2Im", "sums sliding blocks (columns) back into an image").ins(&[req("input", var("T")), req("image_shape", var("I")), req("block_shape", var("I"))]).outs(&[req("output", var("T"))]).vars(&[("T", NUMERIC), ("I", I64_ONLY)]).attrs(&[attr("dilations", Ints), attr("pads", Ints), attr("strides", Ints)]).verify(v::col2im).shape(s::col2im).flops(c::adds::<0>);

    // Shape computations.
    Shape = op("onnx.Shape", "the shape of a tensor as an i64 tensor").ins(&[req("data", var("T"))]).outs(&[req("shape", var("I"))]).vars(T_ANY_I64).attrs(&[attr("start", Int), attr("end", Int)]).shape(s::shape).fold(f::shape).flops(c::zero);
    Size = op("onnx.Size", "the number of elements as an i64 scalar").ins(&[req("data", var("T"))]).outs(&[req("size", var("I"))]).vars(T_ANY_I64).shape(s::size).fold(f::size).flops(c::zero);
    ConstantOfShape = op("onnx.ConstantOfShape", "a tensor of the given shape filled with `value`").ins(&[req("input", var("I"))]).outs(&[req("output", var("T"))]).vars(T_ANY_I64).attrs(&[attr("value", Weight)]).shape(s::constant_of_shape).fold(f::constant_of_shape).flops(c::zero);
    Range = op("onnx.Range", "start, start + delta, ... below limit").ins(&[req("start", var("T")), req("limit", var("T")), req("delta", var("T"))]).outs(&[req("output", var("T"))]).vars(&[("T", SIGNED_NUMERIC)]).shape(s::range).fold(f::range).flops(c::per_elem::<1>);

    // Quantization.
    DequantizeLinear = op("onnx.DequantizeLinear", "(x - zero_point) * scale, per tensor, axis or block").ins(&[req("x", var("T1")), req("x_scale", var("T2")), opt("x_zero_point", var("T1"))]).outs(&[req("y", var("T2"))]).vars(&[("T1", QUANTIZED), ("T2", FLOAT)]).attrs(&[int_attr("axis", 1), int_attr("block_size", 0)]).verify(v::quantize_linear).shape(s::dequantize_linear).flops(c::dequantize);
    QuantizeLinear = op("onnx.QuantizeLinear", "saturate(round(x / scale) + zero_point)").ins(&[req("x", var("T1")), req("y_scale", var("T1")), opt("y_zero_point", var("T2"))]).outs(&[req("y", var("T2"))]).vars(&[("T1", FLOAT), ("T2", QUANTIZED)]).attrs(&[int_attr("axis", 1), int_attr("block_size", 0), int_attr("saturate", 1), attr("output_dtype", Int)]).verify(v::quantize_linear).shape(s::quantize_linear).flops(c::quantize);

    // Fused ops that memc's passes create (the `egraph` pass); never in an ONNX model.
    // `memc.matmul_nbits`: Y = A x op(dequantize(B)) [+ bias]. B is the quantized weight as
    // stored (for now the ONNX layout: [K, N], or [N, K] with `trans_b = 1`); `scales` and
    // `zero_points` dequantize it exactly as DequantizeLinear(B, scales, zero_points) with
    // `axis` and `block_size` would (both refer to B's stored dims): per tensor (a scalar
    // scale), per axis (1-d scales of B's `axis` dim), or blocked (scales of B's rank, `axis`
    // dim divided by `block_size`, rounded up). A is [..., M, K], bias [N], Y [..., M, N].
    // The full contract is the verifier hook's doc (`verify::matmul_nbits`).
    MatMulNBits = op("memc.matmul_nbits", "A x dequantize(B) + bias, B a constant 4- or 8-bit weight").ins(&[req("A", var("T")), req("B", var("Q")), req("scales", var("T")), opt("zero_points", var("Q")), opt("bias", var("T"))]).outs(&[req("Y", var("T"))]).vars(&[("T", FLOAT), ("Q", LOW_BIT)]).attrs(&[required("K", Int), required("N", Int), required("bits", Int), int_attr("block_size", 0), int_attr("axis", 1), int_attr("trans_b", 0)]).verify(v::matmul_nbits).shape(s::matmul_nbits).flops(c::matmul_nbits);

    // Training: activations, their gradients, softmax gradients and concat (onnxruntime's
    // `com.microsoft` ops). A gradient `dX` takes the upstream gradient `dY` and the forward
    // op's input `X` or output `Y`, as the op's name says; ReluGrad's second operand may be
    // either (X > 0 exactly where Relu(X) > 0). The elementwise ones broadcast like ONNX binary
    // ops (onnxruntime's kernels require equal shapes, a special case).
    ReluGrad = op("ms.ReluGrad", "X > 0 ? dY : 0").ins(&[req("dY", var("T")), req("X", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::broadcast);
    SigmoidGrad = op("ms.SigmoidGrad", "dY * Y * (1 - Y), Y = Sigmoid(X)").ins(&[req("dY", var("T")), req("Y", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::broadcast).flops(c::per_elem::<3>);
    TanhGrad = op("ms.TanhGrad", "dY * (1 - Y ^ 2), Y = Tanh(X)").ins(&[req("dY", var("T")), req("Y", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::broadcast).flops(c::per_elem::<3>);
    GeluGrad = op("ms.GeluGrad", "dY * Gelu'(X), Gelu's erf form").ins(&[req("dY", var("T")), req("X", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::broadcast).flops(c::per_elem::<{ c::GELU_ERF_GRAD }>);
    FastGeluGrad = op("ms.FastGeluGrad", "dY * Gelu'(X), Gelu's tanh approximation").ins(&[req("dY", var("T")), req("X", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::broadcast).flops(c::per_elem::<{ c::GELU_TANH_GRAD }>);
    QuickGeluGrad = op("ms.QuickGeluGrad", "dY * d/dX (X * sigmoid(alpha * X))").ins(&[req("dY", var("T")), req("X", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).attrs(&[float_attr("alpha", 1.702)]).traits(ELEMENTWISE).shape(s::broadcast).flops(c::per_elem::<{ c::SIGMOID + 6 }>);
    BiasGeluGradDx = op("ms.BiasGeluGrad_dX", "dY * Gelu'(X + B), Gelu's erf form, B along the last dim").ins(&[req("dY", var("T")), req("X", var("T")), req("B", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).traits(ELEMENTWISE).verify(v::bias_of_last_dim).shape(s::broadcast).flops(c::per_elem::<{ c::GELU_ERF_GRAD + 1 }>);
    BiasFastGeluGradDx = op("ms.BiasFastGeluGrad_dX", "dY * Gelu'(X + B), Gelu's tanh approximation, B along the last dim").ins(&[req("dY", var("T")), req("X", var("T")), req("B", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).traits(ELEMENTWISE).verify(v::bias_of_last_dim).shape(s::broadcast).flops(c::per_elem::<{ c::GELU_TANH_GRAD + 1 }>);
    MsGelu = op("ms.Gelu", "X * (1 + erf(X / sqrt(2))) / 2").ins(X_T).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<{ c::GELU_ERF }>);
    FastGelu = op("ms.FastGelu", "Gelu's tanh approximation of X + bias, bias along the last dim").ins(&[req("X", var("T")), opt("bias", var("T"))]).outs(Y_T).vars(T_FLOAT).traits(ELEMENTWISE).verify(v::bias_of_last_dim).shape(s::broadcast).flops(c::fast_gelu);
    BiasGelu = op("ms.BiasGelu", "Gelu(A + B), Gelu's erf form, B along the last dim").ins(AB_T).outs(C_T).vars(T_FLOAT).traits(ELEMENTWISE).verify(v::bias_of_last_dim).shape(s::broadcast).flops(c::per_elem::<{ c::GELU_ERF + 1 }>);
    QuickGelu = op("ms.QuickGelu", "X * sigmoid(alpha * X)").ins(X_T).outs(Y_T).vars(T_FLOAT).attrs(&[float_attr("alpha", 1.702)]).traits(ELEMENTWISE).shape(s::same_as_first).flops(c::per_elem::<{ c::SIGMOID + 2 }>);
    Scale = op("ms.Scale", "input * scale, or input / scale with `scale_down`; scale has one element").ins(&[req("input", var("T")), req("scale", var("S"))]).outs(&[req("output", var("T"))]).vars(&[("T", FLOAT), ("S", &[crate::ElemType::F32, crate::ElemType::F64, crate::ElemType::I64, crate::ElemType::I32])]).attrs(&[int_attr("scale_down", 0)]).traits(ELEMENTWISE).verify(v::scale).shape(s::same_as_first);
    SoftmaxGrad13 = op("ms.SoftmaxGrad_13", "Y * (dY - sum(dY * Y)) along `axis`, Y = Softmax(X)").ins(&[req("dY", var("T")), req("Y", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).attrs(&[int_attr("axis", -1)]).verify(v::softmax_grad).shape(s::same_as_first).flops(c::per_elem::<4>);
    LogSoftmaxGrad13 = op("ms.LogSoftmaxGrad_13", "dY - e ^ Y * sum(dY) along `axis`, Y = LogSoftmax(X)").ins(&[req("dY", var("T")), req("Y", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).attrs(&[int_attr("axis", -1)]).verify(v::softmax_grad).shape(s::same_as_first).flops(c::per_elem::<4>);
    SoftmaxGrad = op("ms.SoftmaxGrad", "SoftmaxGrad_13 over the dims from `axis` on (opset 1-12 coercion to 2-d)").ins(&[req("dY", var("T")), req("Y", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).attrs(&[int_attr("axis", 1)]).verify(v::softmax_grad).shape(s::same_as_first).flops(c::per_elem::<4>);
    LogSoftmaxGrad = op("ms.LogSoftmaxGrad", "LogSoftmaxGrad_13 over the dims from `axis` on (opset 1-12 coercion to 2-d)").ins(&[req("dY", var("T")), req("Y", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).attrs(&[int_attr("axis", 1)]).verify(v::softmax_grad).shape(s::same_as_first).flops(c::per_elem::<4>);
    ConcatTraining = op("ms.ConcatTraining", "Concat, and each input's size along `axis`").ins(&[variadic("inputs", var("T"))]).outs(&[req("concat_result", var("T")), opt("per_input_length", var("I"))]).vars(T_ANY_I64).attrs(&[required("axis", Int)]).shape(s::concat_training).fold(f::concat_training).flops(c::zero);

    // Training: the transformer's contractions and normalization gradients (onnxruntime's
    // `com.microsoft` ops, named as onnxruntime names them). FusedMatMul reads each operand
    // through `fused_matmul_perm` (`transBatch*` moves the first dim behind the other batch
    // dims, `trans*` swaps the last two). GatherGrad's `axis` refers to the `shape` it is given.
    FusedMatMul = op("ms.FusedMatMul", "alpha * op(A) x op(B) with MatMul broadcasting").ins(AB_T).outs(&[req("Y", var("T"))]).vars(T_FLOAT).attrs(&[float_attr("alpha", 1.0), int_attr("transA", 0), int_attr("transB", 0), int_attr("transBatchA", 0), int_attr("transBatchB", 0)]).shape(s::fused_matmul).flops(c::fused_matmul);
    LayerNormalizationGrad = op("ms.LayerNormalizationGrad", "gradients of LayerNormalization from its saved mean and inverse std").ins(&[req("Y_grad", var("T")), req("X", var("T")), req("scale", var("T")), req("mean", var("U")), req("inv_std_var", var("U"))]).outs(&[req("X_grad", var("T")), opt("scale_grad", var("T")), opt("bias_grad", var("T"))]).vars(&[("T", FLOAT), ("U", FLOAT)]).attrs(&[int_attr("axis", -1), float_attr("epsilon", 1e-5), int_attr("stash_type", 1)]).verify(v::axis_in_range).shape(s::layer_normalization_grad).flops(c::per_elem::<14>);
    GatherGrad = op("ms.GatherGrad", "zeros of `shape` with dY added at the gathered positions").ins(&[req("shape", var("I")), req("indices", var("Tind")), req("dY", var("T"))]).outs(&[req("dX", var("T"))]).vars(&[("I", INDEX), ("Tind", INDEX), ("T", FLOAT)]).attrs(&[int_attr("axis", 0)]).shape(s::gather_grad).flops(c::adds::<2>);

    // Training: losses. The ONNX losses and onnxruntime's `com.microsoft` forms of them (the
    // contract of each, ignore_index and the mean's divisor included, is in `verify.rs`'s
    // `loss` doc). `Tind` labels; `I` the runtime ignore_index of the internal forms.
    SoftmaxCrossEntropyLoss = op("onnx.SoftmaxCrossEntropyLoss", "cross entropy of softmax(scores) at the labels, reduced").ins(&[req("scores", var("T")), req("labels", var("Tind")), opt("weights", var("T"))]).outs(&[req("output", var("T")), opt("log_prob", var("T"))]).vars(LOSS_VARS).attrs(SCE_ATTRS).verify(v::loss).shape(s::loss).flops(c::softmax_cross_entropy);
    NegativeLogLikelihoodLoss = op("onnx.NegativeLogLikelihoodLoss", "-input at the target classes, weighted and reduced").ins(&[req("input", var("T")), req("target", var("Tind")), opt("weight", var("T"))]).outs(&[req("loss", var("T"))]).vars(LOSS_VARS).attrs(NLL_ATTRS).verify(v::loss).shape(s::loss).flops(c::nll);
    SoftmaxCrossEntropyLossInternal = op("ms.SoftmaxCrossEntropyLossInternal", "SoftmaxCrossEntropyLoss with a runtime ignore_index").ins(&[req("logits", var("T")), req("label", var("Tind")), opt("weight", var("T")), opt("ignore_index", var("I"))]).outs(&[req("output", var("TOut")), req("log_prob", var("TOut"))]).vars(LOSS_INTERNAL_VARS).attrs(SCE_INTERNAL_ATTRS).verify(v::loss).shape(s::loss).flops(c::softmax_cross_entropy);
    NegativeLogLikelihoodLossInternal = op("ms.NegativeLogLikelihoodLossInternal", "NegativeLogLikelihoodLoss with a runtime ignore_index").ins(&[req("input", var("T")), req("target", var("Tind")), opt("weight", var("T")), opt("ignore_index", var("I"))]).outs(&[req("loss", var("T"))]).vars(LOSS_VARS_I).attrs(&[str_attr("reduction", "mean")]).verify(v::loss).shape(s::loss).flops(c::nll);
    NegativeLogLikelihoodLossInternal2 = op("ms.NegativeLogLikelihoodLossInternal2", "NegativeLogLikelihoodLoss with a runtime ignore_index").ins(&[req("input", var("T")), req("target", var("Tind")), opt("weight", var("T")), opt("ignore_index", var("I"))]).outs(&[req("loss", var("T"))]).vars(LOSS_VARS_I).attrs(&[str_attr("reduction", "mean")]).verify(v::loss).shape(s::loss).flops(c::nll);
    SoftmaxCrossEntropyLossGrad = op("ms.SoftmaxCrossEntropyLossGrad", "gradient of SoftmaxCrossEntropyLoss with respect to the scores").ins(&[req("dY", var("T")), req("log_prob", var("T")), req("label", var("Tind")), opt("weight", var("T"))]).outs(&[req("d_logits", var("T"))]).vars(LOSS_VARS).attrs(SCE_ATTRS).verify(v::loss_grad).shape(s::loss_grad).flops(c::softmax_cross_entropy_grad);
    SoftmaxCrossEntropyLossInternalGrad = op("ms.SoftmaxCrossEntropyLossInternalGrad", "SoftmaxCrossEntropyLossGrad with a runtime ignore_index, plus an optional bias").ins(&[req("dY", var("T")), req("log_prob", var("T")), req("label", var("Tind")), opt("weight", var("T")), opt("ignore_index", var("I")), opt("bias", var("TOut"))]).outs(&[req("d_logits", var("TOut"))]).vars(LOSS_INTERNAL_VARS).attrs(SCE_INTERNAL_ATTRS).verify(v::loss_grad).shape(s::loss_grad).flops(c::softmax_cross_entropy_grad);

    // Training: CNN. The forms onnxruntime's `generate_artifacts` writes for convolutional nets
    // (Conv + BatchNormalization + pooling): BatchNormalization becomes `ms.BatchNormInternal`
    // (which also returns the batch statistics), and the backward pass uses the gradient ops
    // below. MaxPoolGrad and AveragePoolGrad are in the default domain as onnxruntime writes
    // them; their result's spatial dims come from the model's `value_info` (an input size is
    // not a function of the pooled size).
    BatchNormInternal = op("ms.BatchNormInternal", "batch normalization with batch statistics; also the batch mean and inverse standard deviation").ins(&[req("X", var("T")), req("scale", var("T")), req("B", var("T")), req("input_mean", var("U")), req("input_var", var("U"))]).outs(&[req("Y", var("T")), opt("running_mean", var("U")), opt("running_var", var("U")), opt("saved_mean", var("U")), opt("saved_inv_std", var("U"))]).vars(&[("T", FLOAT), ("U", FLOAT)]).attrs(&[float_attr("epsilon", 1e-5), float_attr("momentum", 0.9), int_attr("training_mode", 1)]).shape(s::batch_norm_internal).flops(c::batch_norm);
    BatchNormalizationGrad = op("ms.BatchNormalizationGrad", "gradients of training-mode batch normalization from the saved batch statistics").ins(&[req("dY", var("T")), req("X", var("T")), req("scale", var("T")), req("saved_mean", var("T")), req("saved_inv_std", var("T"))]).outs(&[req("dX", var("T")), req("dscale", var("T")), req("dbias", var("T"))]).vars(T_FLOAT).attrs(&[float_attr("epsilon", 1e-5)]).shape(s::batch_norm_grad).flops(c::per_elem::<10>);
    ConvGrad = op("ms.ConvGrad", "gradients of a convolution: input, weight and bias").ins(&[req("dY", var("T")), req("X", var("T")), req("W", var("T"))]).outs(&[opt("dX", var("T")), opt("dW", var("T")), opt("dB", var("T"))]).vars(T_FLOAT).attrs(CONV_ATTRS).shape(s::conv_grad).flops(c::conv_grad);
    MaxPoolGrad = op("onnx.MaxPoolGrad", "the gradient of MaxPool: dY added at the input positions its Indices name").ins(&[req("dY", var("T")), req("Indices", var("I"))]).outs(&[req("dX", var("T"))]).vars(&[("T", FLOAT), ("I", I64_ONLY)]).attrs(POOL_ATTRS).shape(s::pool_grad).flops(c::adds::<0>);
    AveragePoolGrad = op("onnx.AveragePoolGrad", "the gradient of AveragePool: each window's dY spread evenly over its taps").ins(&[req("dY", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).attrs(POOL_ATTRS).shape(s::pool_grad).flops(c::pool_grad);

    // Training: more gradients (onnxruntime's `com.microsoft` ops). LeakyReluGrad reads the
    // forward op's output Y. DivGrad's dA and dB are summed over the dims A and B were
    // broadcast along, back to their own shapes; either may be left out. SliceGrad and
    // GatherElementsGrad write dY into zeros of `shape`, the forward op's input shape.
    LeakyReluGrad = op("ms.LeakyReluGrad", "Y > 0 ? dY : alpha * dY, Y = LeakyRelu(X)").ins(&[req("dY", var("T")), req("Y", var("T"))]).outs(&[req("dX", var("T"))]).vars(T_FLOAT).attrs(&[float_attr("alpha", 0.01)]).traits(ELEMENTWISE).shape(s::broadcast).flops(c::per_elem::<2>);
    DivGrad = op("ms.DivGrad", "dY / B and -dY * A / B^2, each summed back to its operand's shape").ins(&[req("dY", var("T")), req("A", var("T")), req("B", var("T"))]).outs(&[opt("dA", var("T")), opt("dB", var("T"))]).vars(T_FLOAT).shape(s::div_grad).flops(c::div_grad);
    SliceGrad = op("ms.SliceGrad", "zeros of `shape` with dY written at the slice").ins(&[req("dY", var("T")), req("shape", var("I")), req("starts", var("Tind")), req("ends", var("Tind")), opt("axes", var("Tind")), opt("steps", var("Tind"))]).outs(&[req("dX", var("T"))]).vars(&[("T", FLOAT), ("I", I64_ONLY), ("Tind", INDEX)]).shape(s::slice_grad).flops(c::zero);
    GatherElementsGrad = op("ms.GatherElementsGrad", "zeros of `shape` with dY added at the positions GatherElements read").ins(&[req("dY", var("T")), req("shape", var("I")), req("indices", var("Tind"))]).outs(&[req("dX", var("T"))]).vars(&[("T", FLOAT), ("I", I64_ONLY), ("Tind", INDEX)]).attrs(&[int_attr("axis", 0)]).shape(s::gather_elements_grad).flops(c::adds::<0>);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_ops_are_exactly_the_elementwise_ones() {
        for &opcode in Opcode::ALL {
            let def = opcode.def();
            assert_eq!(def.is_in_place(), def.is_elementwise(), "{}", def.name);
        }
    }

    #[test]
    fn reductions_are_the_reduce_and_arg_ops() {
        for &opcode in Opcode::ALL {
            let def = opcode.def();
            let by_name = def.name.starts_with("onnx.Reduce")
                || matches!(opcode, Opcode::ArgMax | Opcode::ArgMin);
            assert_eq!(def.is_reduction(), by_name, "{}", def.name);
        }
    }

    #[test]
    fn views_are_the_nine_aliasing_ops() {
        let views: Vec<Opcode> = Opcode::ALL
            .iter()
            .copied()
            .filter(|o| o.def().is_view())
            .collect();
        assert_eq!(
            views,
            [
                Opcode::Identity,
                Opcode::BitCast,
                Opcode::Dropout,
                Opcode::Reshape,
                Opcode::Flatten,
                Opcode::Squeeze,
                Opcode::Unsqueeze,
                Opcode::Transpose,
                Opcode::Slice
            ]
        );
    }
}
