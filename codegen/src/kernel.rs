//! The kernel IR: loop nests over strided buffer views, the one form every supported op lowers
//! to, so each backend implements a handful of primitives instead of every op.
//!
//! A [`Kernel`] is a [`LoopKernel`], a [`Contract`] (a batched matrix product, which a
//! backend may hand to a GEMM library) or an [`NBitsMatMul`] (a product with a low-bit weight
//! packed in the layout [`crate::nbits`] defines; this module reads that layout, the `nbits`
//! module never reads the kernel IR).
//!
//! # Loop kernels
//!
//! A loop kernel iterates an *outer* index space (`outer`, a list of extents) and, inside each
//! outer point, runs its [`Stage`]s in order. A stage either folds a value over the *inner*
//! index space (`inner`; [`Stage::Reduce`]), writes a value at every inner point
//! ([`Stage::Map`]), or writes once per outer point ([`Stage::Once`]). The loop indices are
//! numbered outer first, then inner: axis `a < outer.len()` is outer axis `a`, axis
//! `outer.len() + j` is inner axis `j`.
//!
//! - A plain elementwise op (and a fused chain of them) is `outer = output shape`, `inner = []`
//!   and one `Map` stage; with `inner` empty a `Map` runs once per outer point.
//! - A reduction is `outer = kept axes`, `inner = reduced axes`, a `Reduce` stage and a `Once`
//!   stage that stores the accumulator.
//! - Softmax and the normalizations are `Reduce, Reduce, Map` over one row: the later stages read
//!   the earlier accumulators with [`InstKind::Acc`].
//! - Gathers use [`InstKind::LoadIndirect`]; pooling and direct convolution use [`View::guards`]
//!   to read padding; index-dependent ops (Range, Trilu, CumSum) use [`InstKind::Index`].
//!
//! Each stage has its own SSA instruction list; an instruction names earlier ones of the same
//! stage by position ([`InstId`]).
//!
//! # Memory
//!
//! Every [`View`] points into one of three regions: the arena (read-write, one allocation of the
//! plan's arena size), the weights section (read-only, memory-mapped from the plan file) or the
//! persistent state (read-write, kept from one run to the next: a training step's parameters
//! and gradient buffers). A
//! view's element address at loop point `i` is
//! `region_base + byte_offset + elem_size * (sum_a strides[a] * i[a] + sum indirect terms)`.
//! Strides are in elements and may be zero (broadcast) or negative.
//!
//! # Parallelism
//!
//! A backend runs a loop kernel as `rows` independent pieces ([`LoopKernel::parallel_rows`]): the
//! product of the outer extents, except that with `inner` empty the last outer axis is kept whole
//! inside each row so it can be vectorized. Rows never write the same element, so they may run
//! on different threads in any order.
//!
//! A [`Store`] may scatter (indirect index terms in its address) and accumulate
//! (`mem = mem + value`); `ms.GatherGrad` uses both. The rule above still holds for it: an
//! indirect store may only hit elements that its own row owns. The lowering guarantees that by
//! construction; the validator cannot (it only bounds the indirect terms), so it is part of the
//! contract a lowering must keep. Within a row, points run in loop order, so repeated indices
//! accumulate in a fixed order and the result does not depend on the threads; a load at a later
//! point of a row sees what an earlier point of it stored (ScatterElements, ScatterND and
//! TensorScatter load the element they hit, combine it with the update and store it back).
//!
//! # Element types
//!
//! Instructions compute in bool, the integers, F32 and F64 (the *compute types*). A view may
//! also hold a *storage type* ([`Scalar::is_storage_only`]): f16, bf16, the float8 formats and
//! float4 E2M1, which compute in F32, and the 4- and 2-bit integers, which compute in I8 or U8
//! and take one byte per element (the code in the low bits, zero above; ONNX's packing two or
//! four to a byte exists only in weights and `TensorProto`s, see `memc_ir::packing`). A load
//! of such a view widens the element exactly to its compute type ([`Scalar::compute`]); a
//! store takes a value of the compute type and narrows it ([`Scalar::narrow`]): floats to the
//! nearest code, ties to even, out-of-range values as `memc_ir::minifloat` says (±inf for
//! f16, bf16 and E5M2, NaN for the other float8 formats, ±6 for float4; float8 E8M0, an
//! exponent only, rounds up to a power of two and saturates); integers wrap to their low bits. An accumulating store widens, adds in the compute type and narrows. A view's `pad`
//! is the value a load of an element storing `pad` gives (narrowed, then widened). So an op on
//! f16 tensors computes in f32 and rounds once per stored result.
//!
//! # Guarantees
//!
//! [`Kernel::validate`] checks a kernel read from an untrusted plan: instruction types and
//! operand order, and that every address any loop point can form stays inside its region
//! (indirect indices are clamped to `[0, limit)` at run time, so their range is known). Backends
//! may assume a validated kernel; they never see one that reads or writes out of bounds.

use crate::cpu::target::{gemm_b_in_place, GemmBlocking};
use crate::nbits;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Element types of kernel views and instructions. Bool is one byte, 0 or 1.
///
/// Instructions compute in the *compute types* (bool, the integers, F32, F64). The other types
/// are *storage types*: a view may hold them, a load widens an element to its compute type
/// ([`Scalar::compute`]) and a store narrows a value of that type back (see the module doc's
/// "Element types").
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scalar {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    /// IEEE half precision; computes in F32.
    F16,
    /// bfloat16; computes in F32.
    BF16,
    /// The float8 formats and float4 E2M1 (`memc_ir::minifloat`); compute in F32.
    F8E4M3FN,
    F8E4M3FNUZ,
    F8E5M2,
    F8E5M2FNUZ,
    F4E2M1,
    /// float8 E8M0, an exponent only (`memc_ir::minifloat::e8m0`); computes in F32.
    F8E8M0,
    /// 4- and 2-bit integers, one per byte (the code in the low bits, zero above); compute in
    /// I8 (signed) or U8.
    I4,
    U4,
    I2,
    U2,
}

impl Scalar {
    /// Every scalar type, compute types first.
    pub const ALL: [Scalar; 23] = [
        Scalar::Bool,
        Scalar::I8,
        Scalar::I16,
        Scalar::I32,
        Scalar::I64,
        Scalar::U8,
        Scalar::U16,
        Scalar::U32,
        Scalar::U64,
        Scalar::F32,
        Scalar::F64,
        Scalar::F16,
        Scalar::BF16,
        Scalar::F8E4M3FN,
        Scalar::F8E4M3FNUZ,
        Scalar::F8E5M2,
        Scalar::F8E5M2FNUZ,
        Scalar::F4E2M1,
        Scalar::F8E8M0,
        Scalar::I4,
        Scalar::U4,
        Scalar::I2,
        Scalar::U2,
    ];

    /// Bytes of one element in memory (sub-byte integers and float4 take a whole byte).
    pub fn size(self) -> u64 {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 => 1,
            Scalar::F8E4M3FN
            | Scalar::F8E4M3FNUZ
            | Scalar::F8E5M2
            | Scalar::F8E5M2FNUZ
            | Scalar::F8E8M0 => 1,
            Scalar::F4E2M1 | Scalar::I4 | Scalar::U4 | Scalar::I2 | Scalar::U2 => 1,
            Scalar::I16 | Scalar::U16 | Scalar::F16 | Scalar::BF16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
        }
    }

    /// The type a load of this element type yields and a store of it takes: F32 for the narrow
    /// floats, I8 or U8 for the sub-byte integers, the type itself for compute types.
    pub fn compute(self) -> Scalar {
        match self {
            Scalar::F16
            | Scalar::BF16
            | Scalar::F8E4M3FN
            | Scalar::F8E4M3FNUZ
            | Scalar::F8E5M2
            | Scalar::F8E5M2FNUZ
            | Scalar::F4E2M1
            | Scalar::F8E8M0 => Scalar::F32,
            Scalar::I4 | Scalar::I2 => Scalar::I8,
            Scalar::U4 | Scalar::U2 => Scalar::U8,
            other => other,
        }
    }

    /// Whether instructions never have this type (views may): see [`Scalar::compute`].
    pub fn is_storage_only(self) -> bool {
        self.compute() != self
    }

    /// The narrow float format of a storage float type (`memc_ir::minifloat`).
    pub fn float_format(self) -> Option<memc_ir::minifloat::Format> {
        self.elem().minifloat_format()
    }

    /// The width in bits of a sub-byte integer type (4 or 2).
    pub fn sub_byte_bits(self) -> Option<u32> {
        match self {
            Scalar::I4 | Scalar::U4 => Some(4),
            Scalar::I2 | Scalar::U2 => Some(2),
            _ => None,
        }
    }

    pub fn is_float(self) -> bool {
        self.compute() == Scalar::F32 || self == Scalar::F64
    }

    pub fn is_signed_int(self) -> bool {
        matches!(
            self,
            Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64 | Scalar::I4 | Scalar::I2
        )
    }

    pub fn is_unsigned_int(self) -> bool {
        matches!(
            self,
            Scalar::U8 | Scalar::U16 | Scalar::U32 | Scalar::U64 | Scalar::U4 | Scalar::U2
        )
    }

    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    /// The kernel type of an IR element type (every one has one).
    pub fn from_elem(elem: memc_ir::ElemType) -> Scalar {
        use memc_ir::ElemType as E;
        match elem {
            E::Bool => Scalar::Bool,
            E::I8 => Scalar::I8,
            E::I16 => Scalar::I16,
            E::I32 => Scalar::I32,
            E::I64 => Scalar::I64,
            E::U8 => Scalar::U8,
            E::U16 => Scalar::U16,
            E::U32 => Scalar::U32,
            E::U64 => Scalar::U64,
            E::F16 => Scalar::F16,
            E::F32 => Scalar::F32,
            E::F64 => Scalar::F64,
            E::BF16 => Scalar::BF16,
            E::F8E4M3FN => Scalar::F8E4M3FN,
            E::F8E4M3FNUZ => Scalar::F8E4M3FNUZ,
            E::F8E5M2 => Scalar::F8E5M2,
            E::F8E5M2FNUZ => Scalar::F8E5M2FNUZ,
            E::F4E2M1 => Scalar::F4E2M1,
            E::F8E8M0 => Scalar::F8E8M0,
            E::I4 => Scalar::I4,
            E::U4 => Scalar::U4,
            E::I2 => Scalar::I2,
            E::U2 => Scalar::U2,
        }
    }

    /// The IR element type of a kernel type ([`Scalar::from_elem`]'s inverse).
    pub fn elem(self) -> memc_ir::ElemType {
        use memc_ir::ElemType as E;
        match self {
            Scalar::Bool => E::Bool,
            Scalar::I8 => E::I8,
            Scalar::I16 => E::I16,
            Scalar::I32 => E::I32,
            Scalar::I64 => E::I64,
            Scalar::U8 => E::U8,
            Scalar::U16 => E::U16,
            Scalar::U32 => E::U32,
            Scalar::U64 => E::U64,
            Scalar::F16 => E::F16,
            Scalar::F32 => E::F32,
            Scalar::F64 => E::F64,
            Scalar::BF16 => E::BF16,
            Scalar::F8E4M3FN => E::F8E4M3FN,
            Scalar::F8E4M3FNUZ => E::F8E4M3FNUZ,
            Scalar::F8E5M2 => E::F8E5M2,
            Scalar::F8E5M2FNUZ => E::F8E5M2FNUZ,
            Scalar::F4E2M1 => E::F4E2M1,
            Scalar::F8E8M0 => E::F8E8M0,
            Scalar::I4 => E::I4,
            Scalar::U4 => E::U4,
            Scalar::I2 => E::I2,
            Scalar::U2 => E::U2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I8 => "i8",
            Scalar::I16 => "i16",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::U8 => "u8",
            Scalar::U16 => "u16",
            Scalar::U32 => "u32",
            Scalar::U64 => "u64",
            Scalar::F16 => "f16",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
            Scalar::BF16 => "bf16",
            Scalar::F8E4M3FN => "f8e4m3fn",
            Scalar::F8E4M3FNUZ => "f8e4m3fnuz",
            Scalar::F8E5M2 => "f8e5m2",
            Scalar::F8E5M2FNUZ => "f8e5m2fnuz",
            Scalar::F4E2M1 => "f4e2m1",
            Scalar::F8E8M0 => "f8e8m0",
            Scalar::I4 => "i4",
            Scalar::U4 => "u4",
            Scalar::I2 => "i2",
            Scalar::U2 => "u2",
        }
    }

    /// For a storage type: the value a load of an element whose bytes (little-endian) are
    /// `code` yields, as `f64` bits for the floats (an exact F32 value) and as an `i64` or
    /// `u64` for the sub-byte integers (the low bits, sign- or zero-extended; bits above them
    /// are ignored). Compute types return `code` unchanged.
    pub fn widen(self, code: u64) -> u64 {
        if let Some(format) = self.float_format() {
            return f64::from(format.decode(code as u32)).to_bits();
        }
        if self == Scalar::F8E8M0 {
            return f64::from(memc_ir::minifloat::e8m0::decode(code as u32)).to_bits();
        }
        match self.sub_byte_bits() {
            Some(bits) if self.is_signed_int() => {
                (((code << (64 - bits)) as i64) >> (64 - bits)) as u64
            }
            Some(bits) => code & ((1 << bits) - 1),
            None => code,
        }
    }

    /// For a storage type: the bytes (little-endian) a store of `value` writes, `value` being
    /// of the compute type as [`Scalar::widen`] spells it: a float rounded to the nearest code
    /// (`memc_ir::minifloat::Format::encode`), an integer wrapped to its low bits. Compute
    /// types return `value` unchanged.
    pub fn narrow(self, value: u64) -> u64 {
        if let Some(format) = self.float_format() {
            return u64::from(format.encode(f64::from_bits(value) as f32));
        }
        if self == Scalar::F8E8M0 {
            return u64::from(memc_ir::minifloat::e8m0::encode(
                f64::from_bits(value) as f32
            ));
        }
        match self.sub_byte_bits() {
            Some(bits) => value & ((1 << bits) - 1),
            None => value,
        }
    }
}

/// Which memory a view points into.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Region {
    /// The arena: intermediates, graph inputs and outputs. Read-write.
    Arena,
    /// The weights section of the plan file. Read-only.
    Weights,
    /// The persistent state: a training step's parameters and gradient buffers, which outlive
    /// a run (`Program::state`). Read-write; a run updates it in place.
    State,
}

impl Region {
    /// Whether kernels may store into the region.
    pub fn is_writable(self) -> bool {
        matches!(self, Region::Arena | Region::State)
    }
}

/// A condition on the loop indices: the view's element exists only where
/// `0 <= offset + sum_a coeffs[a] * i[a] < limit`. Where any guard fails, a load yields the
/// view's `pad` value instead of reading memory (padding in Pad, pooling and convolution).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Guard {
    /// One coefficient per loop axis (outer then inner).
    pub coeffs: Vec<i64>,
    pub offset: i64,
    pub limit: i64,
}

/// A strided window onto a region.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct View {
    pub region: Region,
    pub elem: Scalar,
    /// Byte offset of element (0, ..., 0) from the region's base; may be adjusted by the strides
    /// of guarded axes, so it need not itself be in bounds when guards exclude it.
    pub byte_offset: i64,
    /// Stride in elements for each loop axis (outer then inner); 0 broadcasts.
    pub strides: Vec<i64>,
    /// Conditions under which an element exists; empty for views that are always in bounds.
    pub guards: Vec<Guard>,
    /// The value a load yields where a guard fails, as `f64` bits converted to `elem`.
    pub pad: u64,
}

impl View {
    /// The value a load yields where a guard fails, as [`InstKind::Const`] bits of the view's
    /// compute type: `pad` (an `f64`) converted as a saturating cast would, then, for a storage
    /// type, narrowed and widened as a stored element would be.
    pub fn pad_bits(&self) -> u64 {
        let v = f64::from_bits(self.pad);
        let bits = match self.elem.compute() {
            Scalar::F32 => f64::from(v as f32).to_bits(),
            Scalar::Bool => u64::from(v != 0.0),
            Scalar::I8 => v as i8 as i64 as u64,
            Scalar::I16 => v as i16 as i64 as u64,
            Scalar::I32 => v as i32 as i64 as u64,
            Scalar::I64 => v as i64 as u64,
            Scalar::U8 => u64::from(v as u8),
            Scalar::U16 => u64::from(v as u16),
            Scalar::U32 => u64::from(v as u32),
            Scalar::U64 => v as u64,
            _ => v.to_bits(),
        };
        self.elem.widen(self.elem.narrow(bits))
    }
}

/// The position of an instruction in its stage.
pub type InstId = u32;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    Neg,
    Abs,
    /// -1, 0 or 1 (NaN stays NaN).
    Sign,
    Exp,
    Log,
    Sqrt,
    Reciprocal,
    Floor,
    Ceil,
    /// Round half to even.
    Round,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    Erf,
    /// Logical not of a bool.
    Not,
    /// Bitwise not of an integer.
    BitNot,
    /// Bool result: the operand is NaN.
    IsNan,
    /// Bool result: the operand is +inf.
    IsPosInf,
    /// Bool result: the operand is -inf.
    IsNegInf,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// Float division; integer division truncates toward zero, and a zero divisor gives 0
    /// (ONNX leaves it undefined; memc must not trap).
    Div,
    /// Float: C `fmod` (sign of the dividend). Integer: remainder with the sign of the dividend;
    /// a zero divisor gives 0.
    Rem,
    /// Integer remainder with the sign of the divisor (Python `%`, ONNX Mod with fmod=0); a zero
    /// divisor gives 0.
    FloorMod,
    Pow,
    /// Minimum; NaN if either float operand is NaN.
    Min,
    /// Maximum; NaN if either float operand is NaN.
    Max,
    /// Logical ops on bools.
    And,
    Or,
    Xor,
    /// Bitwise ops on integers.
    BitAnd,
    BitOr,
    BitXor,
    /// Shifts on unsigned integers; a shift count of the bit width or more gives 0.
    Shl,
    Shr,
    /// Comparisons; the result is bool.
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinaryOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
}

/// One SSA instruction. Its result type is `ty`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inst {
    pub ty: Scalar,
    pub kind: InstKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum InstKind {
    /// The element of view `view` at the current loop point (its `pad` where a guard fails).
    /// `ty` equals the view's `elem`.
    Load {
        view: u32,
    },
    /// Like `Load`, plus one term per index: the integer value of `index` (an earlier I64
    /// instruction), made non-negative by adding `limit` when it is negative, then clamped to
    /// `[0, limit)`, times `stride` elements. Gather, GatherElements, GatherND.
    LoadIndirect {
        view: u32,
        indices: Vec<IndirectIndex>,
    },
    /// A constant: `bits` holds an `f64` for float types and an `i64`/`u64` for integer and
    /// bool types, converted to `ty`.
    Const {
        bits: u64,
    },
    /// The current index of loop axis `axis` (outer then inner), as I64.
    Index {
        axis: u32,
    },
    /// The accumulator of an earlier `Reduce` stage of this kernel, by stage position.
    Acc {
        stage: u32,
    },
    Unary {
        op: UnaryOp,
        arg: InstId,
    },
    /// Both operands have the same type; the result is that type, or bool for comparisons.
    Binary {
        op: BinaryOp,
        lhs: InstId,
        rhs: InstId,
    },
    /// `cond` (bool) ? `then` : `else_`; `then` and `else_` have type `ty`.
    Select {
        cond: InstId,
        then: InstId,
        else_: InstId,
    },
    /// Convert `arg` to `ty`: float to integer truncates toward zero and saturates (NaN gives
    /// 0); to bool is `!= 0`; integer to integer wraps; F64 to F32 rounds to nearest even.
    Cast {
        arg: InstId,
    },
    /// `arg` rounded to storage type `to` and back: the value a store of `arg` into an element
    /// of `to` and a load of it would give ([`Scalar::narrow`], then [`Scalar::widen`]). `ty`
    /// and `arg`'s type are `to`'s compute type. A fused chain of ops uses it where an
    /// intermediate result has a storage type (a Cast to f16 inside the chain still rounds).
    Narrow {
        arg: InstId,
        to: Scalar,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndirectIndex {
    pub index: InstId,
    pub stride: i64,
    pub limit: i64,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReduceOp {
    Sum,
    Prod,
    /// NaN-propagating maximum.
    Max,
    /// NaN-propagating minimum.
    Min,
    /// The inner linear index (row-major over `inner`, as I64) of the first maximum; with
    /// `last` the last one.
    ArgMax {
        last: bool,
    },
    ArgMin {
        last: bool,
    },
}

/// A step of a loop kernel, run at each outer point in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Stage {
    /// Fold `insts[value]` over the inner space with `op`, starting from `init` (bits as in
    /// [`InstKind::Const`], type `ty`). The accumulator type `ty` is `insts[value].ty`, except
    /// for ArgMax/ArgMin, whose accumulator is I64. Later stages read it with `Acc`.
    Reduce {
        insts: Vec<Inst>,
        value: InstId,
        op: ReduceOp,
        init: u64,
        ty: Scalar,
    },
    /// At every inner point (once if `inner` is empty), store `insts[value]` into `view` for each
    /// store. The value's type equals the view's `elem`.
    Map {
        insts: Vec<Inst>,
        stores: Vec<Store>,
    },
    /// Once per outer point; the inner loop indices read as 0 (stores' inner strides are
    /// ignored, `Index` of an inner axis is 0).
    Once {
        insts: Vec<Inst>,
        stores: Vec<Store>,
    },
}

/// A store of `value` into `view` at the current loop point.
///
/// With `indices`, the address gets one indirect term per index, formed exactly as for
/// [`InstKind::LoadIndirect`] (negative indices wrapped by adding `limit`, then clamped to
/// `[0, limit)`): a scatter. With `accumulate`, the store adds the value to the element
/// (`mem = mem + value`, a read-modify-write in the element type) instead of overwriting it.
/// Both default to off, and the plan JSON leaves them out then.
///
/// An indirect store may only hit elements that its own row owns (see the module doc's
/// parallelism contract): the lowering that emits it guarantees this by construction (the
/// indirect axis of the address is one no other row writes). The validator cannot check it;
/// it bounds the indirect terms like a load's, so a bad index never writes out of bounds, but
/// a kernel breaking the rule may give thread-dependent results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Store {
    pub view: u32,
    pub value: InstId,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indices: Vec<IndirectIndex>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub accumulate: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Store {
    /// A plain store: `view[point] = insts[value]`.
    pub fn new(view: u32, value: InstId) -> Store {
        Store {
            view,
            value,
            indices: Vec::new(),
            accumulate: false,
        }
    }

    /// Whether the store scatters (has indirect terms) or accumulates: backends must run it one
    /// point at a time, in loop order.
    pub fn is_scatter(&self) -> bool {
        !self.indices.is_empty() || self.accumulate
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoopKernel {
    pub outer: Vec<u64>,
    pub inner: Vec<u64>,
    pub views: Vec<View>,
    pub stages: Vec<Stage>,
}

impl LoopKernel {
    /// The one load and its one store when the kernel is a single map stage that copies one
    /// view into another (no arithmetic; the store neither scatters nor accumulates): the
    /// loaded instruction and the store. The loaded view is the load's `view`.
    pub fn plain_copy(&self) -> Option<(&Inst, &Store)> {
        let [Stage::Map { insts, stores }] = self.stages.as_slice() else {
            return None;
        };
        let ([load], [store]) = (insts.as_slice(), stores.as_slice()) else {
            return None;
        };
        (matches!(load.kind, InstKind::Load { .. }) && store.value == 0 && !store.is_scatter())
            .then_some((load, store))
    }

    pub fn n_axes(&self) -> usize {
        self.outer.len() + self.inner.len()
    }

    /// The number of independent pieces a backend runs (see the module doc).
    pub fn parallel_rows(&self) -> u64 {
        if self.inner.is_empty() {
            match self.outer.split_last() {
                Some((_, rest)) => rest.iter().product(),
                None => 1,
            }
        } else {
            self.outer.iter().product()
        }
    }

    /// Elements of work in one row, for splitting rows across threads.
    pub fn work_per_row(&self) -> u64 {
        let inner: u64 = self.inner.iter().product::<u64>().max(1);
        let last = if self.inner.is_empty() {
            self.outer.last().copied().unwrap_or(1)
        } else {
            1
        };
        inner
            .saturating_mul(last)
            .saturating_mul(self.stages.len() as u64)
    }
}

/// A strided matrix operand of a [`Contract`]: element `(b, r, c)` is at
/// `byte_offset + elem_size * (sum_j batch_strides[j] * b[j] + r * row_stride + c * col_stride)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatView {
    pub region: Region,
    pub byte_offset: i64,
    pub batch_strides: Vec<i64>,
    pub row_stride: i64,
    pub col_stride: i64,
}

impl MatView {
    /// The bytes `[lo, hi)` the view reaches over `batch` x `rows` x `cols` elements of
    /// `elem_size` bytes (every extent at least 1; strides may be negative).
    pub(crate) fn byte_range(
        &self,
        batch: &[u64],
        rows: u64,
        cols: u64,
        elem_size: u64,
    ) -> (i128, i128) {
        let (lo, hi) = element_span(
            batch
                .iter()
                .zip(&self.batch_strides)
                .map(|(&e, &s)| (e, s))
                .chain([(rows, self.row_stride), (cols, self.col_stride)]),
        );
        let size = elem_size as i128;
        let base = self.byte_offset as i128;
        (base + lo * size, base + (hi + 1) * size)
    }
}

/// The element range `[lo, hi]` (inclusive, relative to the first element) that axes of
/// `(extent, stride)` span (every extent at least 1; strides may be negative): what bounds a
/// [`MatView`], an [`Im2colView`] and a laid-out operand (`crate::prepack`) alike.
pub(crate) fn element_span(axes: impl Iterator<Item = (u64, i64)>) -> (i128, i128) {
    let (mut lo, mut hi) = (0i128, 0i128);
    for (e, s) in axes {
        let span = s as i128 * (e as i128 - 1);
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    (lo, hi)
}

/// The `B` operand of a [`Contract`]: a strided matrix, or a convolution's column matrix read
/// straight from the convolution's input ([`Im2colView`], implicit im2col), so that the column
/// matrix is never stored. In the plan file a strided `B` is spelled as a plain [`MatView`]
/// (as before plan version 7), an implicit one by its own fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ContractB {
    Mat(MatView),
    Im2col(Im2colView),
}

impl From<MatView> for ContractB {
    fn from(view: MatView) -> ContractB {
        ContractB::Mat(view)
    }
}

impl ContractB {
    /// The strided matrix, when `B` is one.
    pub fn as_mat(&self) -> Option<&MatView> {
        match self {
            ContractB::Mat(view) => Some(view),
            ContractB::Im2col(_) => None,
        }
    }

    pub fn region(&self) -> Region {
        match self {
            ContractB::Mat(view) => view.region,
            ContractB::Im2col(view) => view.region,
        }
    }

    pub fn byte_offset(&self) -> i64 {
        match self {
            ContractB::Mat(view) => view.byte_offset,
            ContractB::Im2col(view) => view.byte_offset,
        }
    }

    pub fn batch_strides(&self) -> &[i64] {
        match self {
            ContractB::Mat(view) => &view.batch_strides,
            ContractB::Im2col(view) => &view.batch_strides,
        }
    }
}

/// Most spatial axes of an [`Im2colView`].
pub const MAX_IM2COL_AXES: usize = 8;

/// One spatial axis of an [`Im2colView`]: output position `o` and kernel tap `t` read input
/// position `o * step - pad + t * dilation`, which is padding (reads 0) outside `0..size`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Im2colAxis {
    /// The input's extent.
    pub size: u64,
    /// Elements between consecutive input positions.
    pub stride: i64,
    /// Kernel taps.
    pub kernel: u64,
    /// The convolution's stride (at least 1).
    pub step: i64,
    /// The kernel's dilation (at least 1).
    pub dilation: i64,
    /// The begin pad.
    pub pad: i64,
    /// The output's extent.
    pub out: u64,
}

/// A convolution's column matrix as a [`Contract`]'s `B`, never stored: row `(c, t...)`
/// (input channel `c < channels`, then the taps of every axis, row-major) and column
/// `(o...)` (the output positions, row-major) hold the input element at channel `c` and, on
/// every axis, the position [`Im2colAxis`] says, or 0 when that is padding. So `B` is
/// `channels x taps` by `pixels`, or its transpose (`transposed`: `pixels` by
/// `channels x taps`, the weight gradient's operand). Element `(c, p...)` of batch index `b`
/// is at `byte_offset + elem_size * (sum_j batch_strides[j] * b[j] + c * channel_stride +
/// sum_i p_i * axes[i].stride)`; only positions inside the input are read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Im2colView {
    pub region: Region,
    pub byte_offset: i64,
    pub batch_strides: Vec<i64>,
    pub channels: u64,
    pub channel_stride: i64,
    pub axes: Vec<Im2colAxis>,
    pub transposed: bool,
}

impl Im2colView {
    /// Taps of the kernel window (the product of the axes' kernels).
    pub fn taps(&self) -> u64 {
        self.axes.iter().map(|a| a.kernel).product()
    }

    /// Output positions (the product of the axes' outputs).
    pub fn pixels(&self) -> u64 {
        self.axes.iter().map(|a| a.out).product()
    }

    /// The column matrix's rows, `channels x taps`.
    pub fn rows(&self) -> u64 {
        self.channels * self.taps()
    }

    /// `(k, n)` of `B`: `(rows, pixels)`, or the transpose.
    pub fn dims(&self) -> (u64, u64) {
        if self.transposed {
            (self.pixels(), self.rows())
        } else {
            (self.rows(), self.pixels())
        }
    }

    /// The element offset (from the batch index's base, in elements) of `B[kk, j]`, or `None`
    /// where it reads padding. For a validated view and `kk < k`, `j < n`.
    pub fn offset(&self, kk: u64, j: u64) -> Option<i64> {
        let (row, mut pixel) = if self.transposed { (j, kk) } else { (kk, j) };
        let taps = self.taps();
        let (channel, mut tap) = (row / taps, row % taps);
        let mut offset = channel as i64 * self.channel_stride;
        let (mut tap_rest, mut pixel_rest) = (taps, self.pixels());
        for axis in &self.axes {
            tap_rest /= axis.kernel;
            pixel_rest /= axis.out;
            let (t, o) = (tap / tap_rest, pixel / pixel_rest);
            tap %= tap_rest;
            pixel %= pixel_rest;
            let position = o as i64 * axis.step - axis.pad + t as i64 * axis.dilation;
            if position < 0 || position >= axis.size as i64 {
                return None;
            }
            offset += position * axis.stride;
        }
        Some(offset)
    }

    /// The element range `[lo, hi]` (inclusive, relative to `byte_offset`) of every element
    /// the view may read over `batch`: only positions inside the input are read.
    fn element_span(&self, batch: &[u64]) -> (i128, i128) {
        element_span(
            batch
                .iter()
                .zip(&self.batch_strides)
                .map(|(&e, &s)| (e, s))
                .chain([(self.channels, self.channel_stride)])
                .chain(self.axes.iter().map(|a| (a.size, a.stride))),
        )
    }

    /// Checks the view's own rules (what [`Im2colView::offset`] and the packers rely on):
    /// 1 to [`MAX_IM2COL_AXES`] axes, every extent at least 1 and the window arithmetic
    /// within 2^31 (so no index overflows), `B` of `k x n`.
    pub(crate) fn validate(&self, k: u64, n: u64) -> Result<(), String> {
        const LIMIT: u64 = 1 << 31;
        if self.axes.is_empty() || self.axes.len() > MAX_IM2COL_AXES {
            return Err(format!(
                "an implicit im2col operand with {} axes (1 to {MAX_IM2COL_AXES})",
                self.axes.len()
            ));
        }
        let small = |v: u64| (1..LIMIT).contains(&v);
        let small_signed = |v: i64| v.unsigned_abs() < LIMIT;
        let axes_ok = self.axes.iter().all(|a| {
            small(a.size)
                && small(a.kernel)
                && small(a.out)
                && small_signed(a.stride)
                && a.step >= 1
                && small_signed(a.step)
                && a.dilation >= 1
                && small_signed(a.dilation)
                && small_signed(a.pad)
        });
        if !axes_ok || !small(self.channels) || !small_signed(self.channel_stride) {
            return Err("an implicit im2col axis is empty or too large".into());
        }
        let fits = |values: Vec<u64>| {
            values.into_iter().try_fold(1u64, |acc, v| {
                acc.checked_mul(v).filter(|&p| p < LIMIT << 16)
            })
        };
        let taps = fits(self.axes.iter().map(|a| a.kernel).collect());
        let pixels = fits(self.axes.iter().map(|a| a.out).collect());
        let rows = taps.and_then(|t| t.checked_mul(self.channels));
        match (rows, pixels) {
            (Some(_), Some(_)) if self.dims() == (k, n) => Ok(()),
            (Some(_), Some(_)) => Err(format!(
                "an implicit im2col operand of {} x {} for a k x n of {k} x {n}",
                self.dims().0,
                self.dims().1
            )),
            _ => Err("an implicit im2col operand is too large".into()),
        }
    }
}

/// `c[b] = alpha * a[b] @ b[b] + (accumulate ? c[b] : 0)` for every batch index `b`; `a` is
/// `m x k`, `b` is `k x n`, `c` is `m x n`. All three have element type `elem` (F32 or F64).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Contract {
    pub elem: Scalar,
    pub batch: Vec<u64>,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub a: MatView,
    pub b: ContractB,
    pub c: MatView,
    /// `f64` bits.
    pub alpha: u64,
    pub accumulate: bool,
    /// Arena byte offset (64-aligned) of the packing scratch of the CPU's GEMM:
    /// [`Contract::blocking`]`.scratch_bytes()` bytes, planned for the op's step. Without it
    /// the CPU packs into small buffers on its stack, more slowly; other backends ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack: Option<u64>,
    /// `A` also packed whole in the weights section for the CPU's GEMM (a constant weight,
    /// `crate::prepack`), which the CPU then reads instead of packing `a`; other readers
    /// ignore it. `a` stays the same matrix, unpacked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_packed: Option<PackedOperand>,
    /// `B` also packed whole in the weights section for the CPU's GEMM
    /// ([`memc_gemm::pack_b_whole`]'s layout; a constant weight, `crate::prepack`), which the
    /// CPU reads instead of `b`, packing no `B` panel; other readers ignore it. `b` stays the
    /// same matrix, unpacked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_packed: Option<PackedOperand>,
    /// The CPU runs the product transposed, `c^T = b^T a^T` (a convolution over few pixels
    /// and many output channels: the channels then fill the vector lanes, where the pixels
    /// of a 7x7 image fill 77% of them): `b` (an implicit column matrix) is packed into `A`
    /// panels, `b_packed` holds `a`'s transpose packed whole ([`memc_gemm::pack_b_whole`]'s
    /// layout), and the result goes to scratch after the panels (`pack`), then into `c`
    /// transposed ([`Contract::scratch_bytes`]). The product is the same; other readers
    /// ignore the flag.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transposed: bool,
    /// The CPU runs the product, a 3x3 stride-1 convolution's (`b` an implicit column matrix
    /// of two axes), as Winograd F(2x2, 3x3) ([`memc_gemm::run_winograd`]): `a_packed` holds
    /// the transformed weight ([`memc_gemm::pack_winograd_weights`]'s layout, not
    /// [`memc_gemm::pack_a_whole`]'s) and `pack` the transforms' scratch for `slots` threads
    /// ([`Contract::scratch_bytes`]). The product is the same up to rounding; other readers
    /// ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winograd: Option<WinogradForm>,
}

/// The most threads a Winograd product's scratch may be planned for.
pub const WINOGRAD_MAX_SLOTS: u64 = 64;

/// How a [`Contract`] run as Winograd F(2x2, 3x3) is blocked: tiles per block, output
/// channels per chunk, input channels per piece, and the threads it has scratch for
/// ([`memc_gemm::winograd_blocking`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WinogradForm {
    pub block: u64,
    pub chunk: u64,
    /// Input channels per piece.
    pub depth: u64,
    pub slots: u64,
}

impl WinogradForm {
    /// The scratch of `slots` threads, each thread's 64-aligned.
    pub fn scratch_bytes(&self) -> u64 {
        memc_gemm::winograd_scratch_bytes(self.block, self.chunk, self.depth)
            .saturating_mul(self.slots)
    }
}

/// Where a `transposed` product's scratch (`Contract::pack`) holds what, each part
/// 64-aligned: the GEMM's panels from its start, the result (`batches x n x m` values) at
/// `result`, and at `table` the table of input offsets its column matrix is packed through
/// (the CPU's `PixelStrips`: `taps x (pixels + 8)` `i32`s); `bytes` in all. The one layout
/// the plan (`ConvPlan::transposed_scratch`), the validator and the CPU read.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TransposedScratch {
    pub result: u64,
    pub table: u64,
    pub bytes: u64,
}

impl TransposedScratch {
    pub fn new(panel_bytes: u64, result_bytes: u64, taps: u64, pixels: u64) -> TransposedScratch {
        let result = panel_bytes.next_multiple_of(64);
        let table = result.saturating_add(result_bytes.next_multiple_of(64));
        let table_bytes = taps
            .saturating_mul(pixels.saturating_add(8))
            .saturating_mul(4)
            .next_multiple_of(64);
        TransposedScratch {
            result,
            table,
            bytes: table.saturating_add(table_bytes),
        }
    }
}

/// Where a [`Contract`]'s `A` or `B` lies packed whole ([`memc_gemm::pack_a_whole`]'s or
/// [`memc_gemm::pack_b_whole`]'s layout) in the weights section: batch index `(i_0, ..)`'s matrix at
/// `byte_offset + sum_d i_d * batch_strides[d]` elements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PackedOperand {
    pub byte_offset: u64,
    /// Elements between consecutive packed matrices along each batch axis (0 where `A` is
    /// the same matrix); never negative.
    pub batch_strides: Vec<i64>,
}

impl Contract {
    /// How the CPU's GEMM blocks this product, and so the packing scratch it needs.
    pub fn blocking(&self) -> GemmBlocking {
        self.blocking_with(self.a_packed.is_some(), self.b_packed.is_some())
    }

    /// The CPU's packing scratch (`pack`): the blocking's panels, and for a `transposed`
    /// product its result and offset table ([`TransposedScratch`]).
    pub fn scratch_bytes(&self) -> u64 {
        Self::scratch_of(self, &self.blocking())
    }

    /// [`Contract::scratch_bytes`] with the panels of `blocking`.
    pub fn scratch_of(&self, blocking: &GemmBlocking) -> u64 {
        if let Some(w) = &self.winograd {
            return w.scratch_bytes();
        }
        self.transposed_scratch(blocking)
            .map_or(blocking.scratch_bytes(), |t| t.bytes)
    }

    /// The layout of a `transposed` product's scratch with the panels of `blocking` (`None`
    /// for other products).
    pub fn transposed_scratch(&self, blocking: &GemmBlocking) -> Option<TransposedScratch> {
        let ContractB::Im2col(view) = &self.b else {
            return None;
        };
        let result = self
            .batch
            .iter()
            .product::<u64>()
            .saturating_mul(self.m)
            .saturating_mul(self.n)
            .saturating_mul(self.elem.size());
        self.transposed.then(|| {
            TransposedScratch::new(blocking.scratch_bytes(), result, view.taps(), view.pixels())
        })
    }

    /// [`Contract::blocking`] as if `A` and `B` were (or were not) packed whole: what the
    /// panel sizing predicts before the weights are laid out.
    pub fn blocking_with(&self, a_packed: bool, b_packed: bool) -> GemmBlocking {
        let batches = self.batch.iter().product::<u64>();
        if self.transposed {
            // `c^T = b^T a^T`: `n x m`, its `A` (the column matrix) packed into panels, its
            // `B` (`a^T`) packed whole.
            return GemmBlocking::new(batches, self.n, self.m, self.k, self.elem.size(), false)
                .with_one_column_block(batches, self.n, self.m);
        }
        let pack_b = match &self.b {
            // `B` packed whole is read where it is.
            ContractB::Mat(_) if b_packed => false,
            ContractB::Mat(b) => !gemm_b_in_place(self.m, b.col_stride),
            ContractB::Im2col(_) => true,
        };
        let blocking = GemmBlocking::new(batches, self.m, self.n, self.k, self.elem.size(), pack_b);
        // `A` packed whole, or with contiguous columns (read where it is), takes no panel.
        if a_packed || self.a.col_stride == 1 {
            blocking.without_a_panel()
        } else {
            blocking
        }
    }
}

/// `c[r, :] = a[r, :] x dequantize(b) (+ bias)` for every row `r` of `a`, `b` packed as the
/// layout of [`crate::nbits`] says. All float data is f32.
///
/// Rows: `a` and `c` are [`MatView`]s over `batch` (outer) and `m` rows, each row `k` (for `a`)
/// or `n` (for `c`) contiguous elements (`col_stride` must be 1). Row `r` of the product is
/// batch index `r / m`, row `r % m`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NBitsMatMul {
    pub batch: Vec<u64>,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// 4 or 8.
    pub bits: u32,
    /// Whether the quantized values are two's complement (int4, int8) or unsigned.
    pub signed: bool,
    /// The run of `K` sharing one scale and zero point (see the module doc); positive.
    pub block: u64,
    pub a: MatView,
    pub c: MatView,
    /// Byte offsets into the weights section.
    pub b: u64,
    pub scales: u64,
    pub zero_points: Option<u64>,
    /// `f32 [n]`, added to every row.
    pub bias: Option<(Region, u64)>,
    /// Arena byte offset of the GEMM form's packing slots ([`nbits::scratch_bytes`] bytes),
    /// planned for more than [`crate::cpu::target::SMALL_ROWS`] rows; without it a product of
    /// up to [`crate::cpu::target::FEW_ROWS_MAX`] rows takes the few-rows form, and past them
    /// the GEMM form packs its panels on the threads' stacks.
    pub scratch: Option<u64>,
}

impl NBitsMatMul {
    /// Rows of the product: the batch extents times `m`.
    pub fn rows(&self) -> u64 {
        self.batch.iter().product::<u64>().saturating_mul(self.m)
    }

    pub fn k_blocks(&self) -> u64 {
        self.k.div_ceil(self.block.max(1))
    }

    /// Byte offset of row `r`'s first element in `view`, relative to the region base.
    pub fn row_offset(&self, view: &MatView, r: u64) -> i64 {
        let (mut b, i) = (r / self.m.max(1), r % self.m.max(1));
        let mut offset = view.byte_offset + 4 * i as i64 * view.row_stride;
        for (&extent, &stride) in self.batch.iter().zip(&view.batch_strides).rev() {
            offset += 4 * (b % extent.max(1)) as i64 * stride;
            b /= extent.max(1);
        }
        offset
    }

    /// The quantized value `(n, k)` as an integer, read from the packed bytes `b` (the `b` slot).
    pub fn quantized(&self, b: &[u8], n: u64, k: u64) -> i32 {
        nbits::packed_value(b, self.k, self.bits, self.signed, n, k)
    }

    /// The zero point of value `(n, k)` as an integer, read from the packed zero points
    /// `zero_points` (the `zero_points` slot).
    pub fn zero_point(&self, zero_points: &[u8], n: u64, k: u64) -> i32 {
        nbits::packed_zero_point(zero_points, self.k_blocks(), self.signed, n, k / self.block)
    }

    /// Checks everything the backend relies on (see [`Kernel::validate`]).
    pub fn validate(&self, name: &str, sizes: RegionSizes) -> Result<(), KernelError> {
        let bad = |message: String| KernelError::Malformed {
            kernel: name.to_string(),
            message,
        };
        if !matches!(self.bits, 4 | 8) {
            return Err(bad(format!(
                "{} bits; only 4 and 8 are supported",
                self.bits
            )));
        }
        if self.block == 0 {
            return Err(bad("the scale block is 0".into()));
        }
        if self.batch.len() > MAX_AXES {
            return Err(bad("too many batch axes".into()));
        }
        let limit = i64::MAX as u64 / 16;
        if [self.m, self.n, self.k]
            .iter()
            .chain(&self.batch)
            .any(|&d| d > limit)
            || self.rows() > limit
            || self
                .n
                .checked_mul(nbits::row_bytes(self.k, self.bits))
                .is_none_or(|b| b > limit)
            || self
                .n
                .checked_mul(self.k_blocks())
                .is_none_or(|b| b > limit)
        {
            return Err(bad("a dimension is too large".into()));
        }
        for (which, v) in [("a", &self.a), ("c", &self.c)] {
            if v.batch_strides.len() != self.batch.len() {
                return Err(bad(format!(
                    "operand {which} does not have one stride per batch axis"
                )));
            }
            if v.col_stride != 1 {
                return Err(bad(format!("operand {which}'s rows are not contiguous")));
            }
            if v.byte_offset.rem_euclid(4) != 0 {
                return Err(bad(format!("operand {which} is not 4-byte aligned")));
            }
        }
        if self.c.region != Region::Arena {
            return Err(bad("the result is in the read-only weights".into()));
        }
        let out_of_bounds = |view: &str, region: Region, lo: i128, hi: i128| {
            let size = sizes.of(region);
            if lo < 0 || hi > size as i128 {
                Err(KernelError::OutOfBounds {
                    kernel: name.to_string(),
                    view: view.to_string(),
                    lo,
                    hi,
                    size,
                })
            } else {
                Ok(())
            }
        };
        let rows = self.rows();
        if rows > 0 && self.n > 0 {
            // `c` is written even when k = 0 (zeros, or the bias).
            for (which, v, cols) in [("a", &self.a, self.k), ("c", &self.c, self.n)] {
                if cols == 0 {
                    continue;
                }
                // `col_stride` is 1, checked above.
                let (lo, hi) = v.byte_range(&self.batch, self.m, cols, 4);
                out_of_bounds(which, v.region, lo, hi)?;
            }
            let weights = |which: &str, offset: u64, bytes: u64| {
                out_of_bounds(
                    which,
                    Region::Weights,
                    offset as i128,
                    offset as i128 + bytes as i128,
                )
            };
            weights("b", self.b, self.n * nbits::row_bytes(self.k, self.bits))?;
            let params = self.n * self.k_blocks();
            weights("scales", self.scales, 4 * params)?;
            if self.scales % 4 != 0 {
                return Err(bad("scales are not 4-byte aligned".into()));
            }
            // One byte per block: any offset will do.
            if let Some(zp) = self.zero_points {
                weights("zero_points", zp, params)?;
            }
            if let Some((region, offset)) = self.bias {
                if offset % 4 != 0 {
                    return Err(bad("the bias is not 4-byte aligned".into()));
                }
                out_of_bounds(
                    "bias",
                    region,
                    offset as i128,
                    offset as i128 + 4 * self.n as i128,
                )?;
            }
        }
        // The GEMM form's panels, when planned (without them it packs on the stack).
        let scratch = nbits::scratch_bytes(rows, self.n, self.k);
        match self.scratch {
            Some(offset) if scratch > 0 => {
                if offset % 64 != 0 {
                    return Err(bad("the scratch is not 64-byte aligned".into()));
                }
                out_of_bounds(
                    "scratch",
                    Region::Arena,
                    offset as i128,
                    offset as i128 + scratch as i128,
                )?;
            }
            _ => {}
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum KernelBody {
    Loop(LoopKernel),
    Contract(Contract),
    /// A product with a packed low-bit weight (`memc.matmul_nbits`; see [`crate::nbits`]).
    NBits(NBitsMatMul),
}

/// One kernel, named for profiles and error messages (`"MatMul fc1/MatMul #0"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    pub name: String,
    pub body: KernelBody,
}

/// Why a kernel is malformed (only plans from outside, or a memc bug, produce these).
#[derive(Debug, Error, PartialEq)]
pub enum KernelError {
    #[error("kernel `{kernel}`: {message}")]
    Malformed { kernel: String, message: String },
    #[error("kernel `{kernel}`: view {view} reaches bytes {lo}..{hi} outside its region of {size} bytes")]
    OutOfBounds {
        kernel: String,
        view: String,
        lo: i128,
        hi: i128,
        size: u64,
    },
}

/// The byte sizes of the regions a kernel may touch.
#[derive(Copy, Clone, Debug, Default)]
pub struct RegionSizes {
    pub arena: u64,
    pub weights: u64,
    pub state: u64,
}

impl RegionSizes {
    pub(crate) fn of(self, region: Region) -> u64 {
        match region {
            Region::Arena => self.arena,
            Region::Weights => self.weights,
            Region::State => self.state,
        }
    }
}

/// Most loop axes a kernel may have.
pub const MAX_AXES: usize = 16;
/// Most instructions in one stage.
pub const MAX_INSTS: usize = 4096;

impl Kernel {
    /// Checks everything a backend relies on: see the module doc.
    pub fn validate(&self, sizes: RegionSizes) -> Result<(), KernelError> {
        let bad = |message: String| KernelError::Malformed {
            kernel: self.name.clone(),
            message,
        };
        match &self.body {
            KernelBody::Loop(k) => validate_loop(self, k, sizes, &bad),
            KernelBody::Contract(c) => validate_contract(self, c, sizes, &bad),
            KernelBody::NBits(q) => q.validate(&self.name, sizes),
        }
    }
}

fn validate_loop(
    kernel: &Kernel,
    k: &LoopKernel,
    sizes: RegionSizes,
    bad: &dyn Fn(String) -> KernelError,
) -> Result<(), KernelError> {
    let n_axes = k.n_axes();
    if n_axes > MAX_AXES {
        return Err(bad(format!("{n_axes} loop axes (at most {MAX_AXES})")));
    }
    if k.outer
        .iter()
        .chain(&k.inner)
        .any(|&e| e > i64::MAX as u64 / 2)
    {
        return Err(bad("a loop extent is too large".into()));
    }
    let total = k
        .outer
        .iter()
        .chain(&k.inner)
        .try_fold(1u64, |acc, &e| acc.checked_mul(e));
    if total.is_none() {
        return Err(bad("the loop extents overflow".into()));
    }
    // Nothing runs when the outer space is empty. An empty inner space still runs the `Once`
    // stages (at inner index 0), so its views are checked as if each inner extent were 1.
    let empty = k.outer.iter().any(|&e| e == 0);
    // The indirect index ranges of each access of each view (one list of (stride, limit) pairs
    // per indirect load or store): every access is bounded on its own, so two accesses of one
    // view (a scatter's read of the current element and its store back) do not add up.
    let mut indirect: Vec<Vec<Vec<(i64, i64)>>> = vec![Vec::new(); k.views.len()];
    let mut stored = vec![false; k.views.len()];
    let mut reduces_before: Vec<Option<Scalar>> = Vec::new();
    for (stage_idx, stage) in k.stages.iter().enumerate() {
        let (insts, stores): (&[Inst], &[Store]) = match stage {
            Stage::Reduce { insts, .. } => (insts, &[]),
            Stage::Map { insts, stores } | Stage::Once { insts, stores } => (insts, stores),
        };
        if insts.len() > MAX_INSTS {
            return Err(bad(format!(
                "stage {stage_idx} has {} instructions",
                insts.len()
            )));
        }
        for (i, inst) in insts.iter().enumerate() {
            check_inst(k, insts, i, inst, &reduces_before, &mut indirect)
                .map_err(|m| bad(format!("stage {stage_idx}, instruction {i}: {m}")))?;
        }
        for store in stores {
            let view = k.views.get(store.view as usize).ok_or_else(|| {
                bad(format!(
                    "stage {stage_idx} stores to missing view {}",
                    store.view
                ))
            })?;
            let value = insts.get(store.value as usize).ok_or_else(|| {
                bad(format!(
                    "stage {stage_idx} stores missing instruction {}",
                    store.value
                ))
            })?;
            if !view.region.is_writable() {
                return Err(bad(format!(
                    "stage {stage_idx} stores into the read-only weights"
                )));
            }
            if value.ty != view.elem.compute() {
                return Err(bad(format!(
                    "stage {stage_idx} stores a {} into a {} view",
                    value.ty.name(),
                    view.elem.name()
                )));
            }
            if !view.guards.is_empty() {
                return Err(bad(format!("stage {stage_idx} stores into a guarded view")));
            }
            if store.accumulate && view.elem == Scalar::Bool {
                return Err(bad(format!(
                    "stage {stage_idx} accumulates into a bool view"
                )));
            }
            let mut terms = Vec::with_capacity(store.indices.len());
            for ix in &store.indices {
                let index = insts.get(ix.index as usize).ok_or_else(|| {
                    bad(format!(
                        "stage {stage_idx} stores with missing index instruction {}",
                        ix.index
                    ))
                })?;
                if index.ty != Scalar::I64 {
                    return Err(bad(format!(
                        "stage {stage_idx} stores with an indirect index that is not i64"
                    )));
                }
                if ix.limit <= 0 {
                    return Err(bad(format!(
                        "stage {stage_idx} stores with an indirect index of empty range"
                    )));
                }
                terms.push((ix.stride, ix.limit));
            }
            if !terms.is_empty() {
                indirect[store.view as usize].push(terms);
            }
            stored[store.view as usize] = true;
        }
        match stage {
            Stage::Reduce {
                insts,
                value,
                op,
                ty,
                ..
            } => {
                let v = insts.get(*value as usize).ok_or_else(|| {
                    bad(format!("stage {stage_idx} reduces a missing instruction"))
                })?;
                let acc_ty = match op {
                    ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. } => Scalar::I64,
                    _ => v.ty,
                };
                if *ty != acc_ty {
                    return Err(bad(format!("stage {stage_idx}: accumulator type mismatch")));
                }
                reduces_before.push(Some(acc_ty));
            }
            _ => reduces_before.push(None),
        }
    }
    for (idx, view) in k.views.iter().enumerate() {
        if view.strides.len() != n_axes || view.guards.iter().any(|g| g.coeffs.len() != n_axes) {
            return Err(bad(format!(
                "view {idx} does not have one stride per loop axis"
            )));
        }
        if empty {
            continue;
        }
        // A direct access reaches a subset of what any indirect one does (an index may be 0).
        if indirect[idx].is_empty() {
            check_view_bounds(kernel, k, idx, view, &[], stored[idx], sizes)?;
        }
        for terms in &indirect[idx] {
            check_view_bounds(kernel, k, idx, view, terms, stored[idx], sizes)?;
        }
    }
    Ok(())
}

fn check_inst(
    k: &LoopKernel,
    insts: &[Inst],
    i: usize,
    inst: &Inst,
    reduces_before: &[Option<Scalar>],
    indirect: &mut [Vec<Vec<(i64, i64)>>],
) -> Result<(), String> {
    let arg = |id: InstId| -> Result<&Inst, String> {
        if (id as usize) < i {
            Ok(&insts[id as usize])
        } else {
            Err(format!("operand {id} is not an earlier instruction"))
        }
    };
    let view = |v: u32| {
        k.views
            .get(v as usize)
            .ok_or_else(|| format!("missing view {v}"))
    };
    if inst.ty.is_storage_only() {
        return Err(format!("an instruction of storage type {}", inst.ty.name()));
    }
    match &inst.kind {
        InstKind::Load { view: v } => {
            if view(*v)?.elem.compute() != inst.ty {
                return Err("load type differs from its view's compute type".into());
            }
        }
        InstKind::LoadIndirect { view: v, indices } => {
            if view(*v)?.elem.compute() != inst.ty {
                return Err("load type differs from its view's compute type".into());
            }
            let mut terms = Vec::with_capacity(indices.len());
            for ix in indices {
                if arg(ix.index)?.ty != Scalar::I64 {
                    return Err("an indirect index is not i64".into());
                }
                if ix.limit <= 0 {
                    return Err("an indirect index has an empty range".into());
                }
                terms.push((ix.stride, ix.limit));
            }
            if !terms.is_empty() {
                indirect[*v as usize].push(terms);
            }
        }
        InstKind::Const { .. } => {}
        InstKind::Index { axis } => {
            if *axis as usize >= k.n_axes() || inst.ty != Scalar::I64 {
                return Err("bad loop index".into());
            }
        }
        InstKind::Acc { stage } => match reduces_before.get(*stage as usize) {
            Some(Some(ty)) if *ty == inst.ty => {}
            _ => {
                return Err(format!(
                    "stage {stage} is not an earlier reduction of this type"
                ))
            }
        },
        InstKind::Unary { op, arg: a } => {
            let a = arg(*a)?;
            let want = match op {
                UnaryOp::IsNan | UnaryOp::IsPosInf | UnaryOp::IsNegInf => {
                    if !a.ty.is_float() {
                        return Err("a float test of a non-float".into());
                    }
                    Scalar::Bool
                }
                UnaryOp::Not => {
                    if a.ty != Scalar::Bool {
                        return Err("not of a non-bool".into());
                    }
                    Scalar::Bool
                }
                UnaryOp::BitNot => {
                    if !a.ty.is_int() {
                        return Err("bitwise not of a non-integer".into());
                    }
                    a.ty
                }
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign => a.ty,
                _ => {
                    if !a.ty.is_float() {
                        return Err(format!("{op:?} of a non-float"));
                    }
                    a.ty
                }
            };
            if inst.ty != want {
                return Err("wrong result type".into());
            }
        }
        InstKind::Binary { op, lhs, rhs } => {
            let (l, r) = (arg(*lhs)?, arg(*rhs)?);
            if l.ty != r.ty {
                return Err("operands of different types".into());
            }
            let ok = match op {
                BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => l.ty == Scalar::Bool,
                BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => l.ty.is_int(),
                BinaryOp::Shl | BinaryOp::Shr => l.ty.is_unsigned_int(),
                BinaryOp::FloorMod => l.ty.is_int() || l.ty.is_float(),
                _ => true,
            };
            if !ok {
                return Err(format!("{op:?} of {}", l.ty.name()));
            }
            let want = if op.is_comparison() {
                Scalar::Bool
            } else {
                l.ty
            };
            if inst.ty != want {
                return Err("wrong result type".into());
            }
        }
        InstKind::Select { cond, then, else_ } => {
            if arg(*cond)?.ty != Scalar::Bool
                || arg(*then)?.ty != inst.ty
                || arg(*else_)?.ty != inst.ty
            {
                return Err("select operand types".into());
            }
        }
        InstKind::Cast { arg: a } => {
            arg(*a)?;
        }
        InstKind::Narrow { arg: a, to } => {
            if !to.is_storage_only() || arg(*a)?.ty != to.compute() || inst.ty != to.compute() {
                return Err(format!("a narrowing to {} of another type", to.name()));
            }
        }
    }
    Ok(())
}

/// The lowest and highest element index a view can reach, ignoring guards' exclusions (a guarded
/// element is never read, but the bound stays conservative only where no guard applies; guarded
/// axes are checked on the guard-admitted range instead).
fn check_view_bounds(
    kernel: &Kernel,
    k: &LoopKernel,
    idx: usize,
    view: &View,
    indirect: &[(i64, i64)],
    stored: bool,
    sizes: RegionSizes,
) -> Result<(), KernelError> {
    let extents: Vec<u64> = k
        .outer
        .iter()
        .copied()
        .chain(k.inner.iter().map(|&e| e.max(1)))
        .collect();
    let (mut lo, mut hi) = (0i128, 0i128);
    let guarded_axes: Vec<bool> = (0..extents.len())
        .map(|a| view.guards.iter().any(|g| g.coeffs[a] != 0))
        .collect();
    for (a, &e) in extents.iter().enumerate() {
        if guarded_axes[a] {
            continue;
        }
        let span = view.strides[a] as i128 * (e as i128 - 1);
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    // A guarded axis reads only where its guards hold. For the common form (each guard a
    // single-axis or two-axis sum mapping loop indices onto one input axis with one stride),
    // bounding by the guard range is exact; in general, fall back to the loop extents and
    // require them in bounds too.
    let mut guarded_lo = 0i128;
    let mut guarded_hi = 0i128;
    let mut covered = vec![false; extents.len()];
    for g in &view.guards {
        // The address contribution of this guard's axes must be `s * (offset + sum coeffs*i)`
        // for one element stride `s` for the guard to bound it.
        let axes: Vec<usize> = (0..extents.len()).filter(|&a| g.coeffs[a] != 0).collect();
        let Some(&first) = axes.first() else { continue };
        let s_num = view.strides[first] as i128;
        let c_first = g.coeffs[first] as i128;
        let proportional = axes.iter().all(|&a| {
            !covered[a] && view.strides[a] as i128 * c_first == s_num * g.coeffs[a] as i128
        }) && s_num % c_first == 0;
        if !proportional || g.limit <= 0 {
            continue;
        }
        let s = s_num / c_first;
        // In-bounds guard values are 0..limit-1; the address term is s * (value - offset).
        let a0 = s * (0 - g.offset as i128);
        let a1 = s * (g.limit as i128 - 1 - g.offset as i128);
        guarded_lo += a0.min(a1);
        guarded_hi += a0.max(a1);
        for &a in &axes {
            covered[a] = true;
        }
    }
    for (a, &e) in extents.iter().enumerate() {
        if guarded_axes[a] && !covered[a] {
            let span = view.strides[a] as i128 * (e as i128 - 1);
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
    }
    lo += guarded_lo;
    hi += guarded_hi;
    for &(stride, limit) in indirect {
        let span = stride as i128 * (limit as i128 - 1);
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    let size = view.elem.size() as i128;
    let lo_byte = view.byte_offset as i128 + lo * size;
    let hi_byte = view.byte_offset as i128 + (hi + 1) * size;
    let region = sizes.of(view.region);
    if lo_byte < 0 || hi_byte > region as i128 || (stored && !view.region.is_writable()) {
        return Err(KernelError::OutOfBounds {
            kernel: kernel.name.clone(),
            view: idx.to_string(),
            lo: lo_byte,
            hi: hi_byte,
            size: region,
        });
    }
    Ok(())
}

fn validate_contract(
    kernel: &Kernel,
    c: &Contract,
    sizes: RegionSizes,
    bad: &dyn Fn(String) -> KernelError,
) -> Result<(), KernelError> {
    if !matches!(c.elem, Scalar::F32 | Scalar::F64) {
        return Err(bad(format!("contraction in {}", c.elem.name())));
    }
    if c.batch.len() > MAX_AXES {
        return Err(bad("too many batch axes".into()));
    }
    if c.b.batch_strides().len() != c.batch.len() {
        return Err(bad(
            "operand b does not have one stride per batch axis".into()
        ));
    }
    if let ContractB::Im2col(view) = &c.b {
        view.validate(c.k, c.n).map_err(bad)?;
    }
    for (name, v) in [("a", &c.a), ("c", &c.c)] {
        if v.batch_strides.len() != c.batch.len() {
            return Err(bad(format!(
                "operand {name} does not have one stride per batch axis"
            )));
        }
    }
    if !c.c.region.is_writable() {
        return Err(bad("the result is in the read-only weights".into()));
    }
    // The GEMM library dereferences typed pointers: every operand must be element-aligned (the
    // regions' bases are page-aligned, so the byte offsets decide).
    let offsets = [
        ("a", c.a.byte_offset),
        ("b", c.b.byte_offset()),
        ("c", c.c.byte_offset),
    ];
    for (name, offset) in offsets {
        if offset.rem_euclid(c.elem.size() as i64) != 0 {
            return Err(bad(format!(
                "operand {name} starts at byte {}, not a multiple of the {}-byte element",
                offset,
                c.elem.size()
            )));
        }
    }
    let dims = [c.m, c.n, c.k];
    if dims
        .iter()
        .chain(&c.batch)
        .any(|&d| d > i64::MAX as u64 / 2)
    {
        return Err(bad("a dimension is too large".into()));
    }
    // Nothing is written when the result is empty. With k = 0 the result is still written
    // (zeros, or kept when accumulating), so only `a` and `b` go unread.
    if c.m == 0 || c.n == 0 || c.batch.contains(&0) {
        return Ok(());
    }
    let b_range = match &c.b {
        ContractB::Mat(view) => view.byte_range(&c.batch, c.k, c.n, c.elem.size()),
        ContractB::Im2col(view) => {
            let (lo, hi) = view.element_span(&c.batch);
            let size = c.elem.size() as i128;
            let base = view.byte_offset as i128;
            (base + lo * size, base + (hi + 1) * size)
        }
    };
    let ranges = [
        (
            "a",
            c.m,
            c.k,
            c.a.region,
            c.a.byte_range(&c.batch, c.m, c.k, c.elem.size()),
        ),
        ("b", c.k, c.n, c.b.region(), b_range),
        (
            "c",
            c.m,
            c.n,
            c.c.region,
            c.c.byte_range(&c.batch, c.m, c.n, c.elem.size()),
        ),
    ];
    for (name, rows, cols, region, (lo_byte, hi_byte)) in ranges {
        if rows == 0 || cols == 0 {
            continue;
        }
        let region = sizes.of(region);
        if lo_byte < 0 || hi_byte > region as i128 {
            return Err(KernelError::OutOfBounds {
                kernel: kernel.name.clone(),
                view: name.to_string(),
                lo: lo_byte,
                hi: hi_byte,
                size: region,
            });
        }
    }
    let a_len = match (&c.winograd, &c.b) {
        (Some(_), ContractB::Im2col(view)) => memc_gemm::winograd_weights_len(c.m, view.channels),
        _ => memc_gemm::packed_a_len(c.m, c.k),
    };
    let packed_operands = [
        ("a", &c.a_packed, a_len),
        (
            "b",
            &c.b_packed,
            if c.transposed {
                // `a^T` (`k x m`) packed whole.
                memc_gemm::packed_b_len(c.k, c.m)
            } else {
                memc_gemm::packed_b_len(c.k, c.n)
            },
        ),
    ];
    for (name, packed, len) in packed_operands {
        let Some(packed) = packed else {
            continue;
        };
        let size = c.elem.size() as i128;
        if packed.batch_strides.len() != c.batch.len()
            || packed.batch_strides.iter().any(|&s| s < 0)
        {
            return Err(bad(format!(
                "the packed operand {name} does not have one stride (>= 0) per batch axis"
            )));
        }
        if packed.byte_offset % c.elem.size() != 0 {
            return Err(bad(format!(
                "the packed operand {name} starts at byte {}, not a multiple of the {}-byte element",
                packed.byte_offset,
                c.elem.size()
            )));
        }
        let (_, hi) = element_span(
            c.batch
                .iter()
                .copied()
                .zip(packed.batch_strides.iter().copied()),
        );
        let lo_byte = packed.byte_offset as i128;
        let hi_byte = lo_byte + (hi + len as i128) * size;
        if hi_byte > sizes.weights as i128 {
            return Err(KernelError::OutOfBounds {
                kernel: kernel.name.clone(),
                view: format!("{name} (packed)"),
                lo: lo_byte,
                hi: hi_byte,
                size: sizes.weights,
            });
        }
    }
    if c.b_packed.is_some() && !c.transposed && !matches!(c.b, ContractB::Mat(_)) {
        return Err(bad("a packed operand b of an implicit column matrix".into()));
    }
    if c.transposed
        && !(matches!(&c.b, ContractB::Im2col(view) if !view.transposed)
            && c.b_packed.is_some()
            && c.pack.is_some()
            && c.elem == Scalar::F32)
    {
        return Err(bad(
            "a transposed product needs an f32 implicit column matrix b, a^T packed whole and \
             its scratch"
                .into(),
        ));
    }
    if let Some(w) = &c.winograd {
        let window = match &c.b {
            ContractB::Im2col(view) => {
                !view.transposed
                    && view.axes.len() == 2
                    && view.axes[1].stride == 1
                    && view
                        .axes
                        .iter()
                        .all(|a| a.kernel == 3 && a.step == 1 && a.dilation == 1 && a.pad >= 0)
                    && c.k == view.channels * 9
            }
            ContractB::Mat(_) => false,
        };
        if !window
            || c.transposed
            || c.elem != Scalar::F32
            || c.c.col_stride != 1
            || c.a_packed.is_none()
            || c.pack.is_none()
        {
            return Err(bad(
                "a Winograd product needs an f32 implicit column matrix b of a 3x3 stride-1 \
                 window over two axes with contiguous rows, contiguous result columns, its \
                 transformed weight and its scratch"
                    .into(),
            ));
        }
        if !(w.block == 16 || w.block == 32)
            || w.chunk == 0
            || w.chunk % 6 != 0
            || w.chunk > 1 << 20
            || w.depth == 0
            || w.depth > 1 << 20
        {
            return Err(bad(format!(
                "a Winograd product's blocks of {} tiles (16 or 32), chunks of {} output \
                 channels (a positive multiple of 6) and pieces of {} input channels",
                w.block, w.chunk, w.depth
            )));
        }
        if w.slots == 0 || w.slots > WINOGRAD_MAX_SLOTS {
            return Err(bad(format!(
                "a Winograd product's {} scratch slots (1 to {WINOGRAD_MAX_SLOTS})",
                w.slots
            )));
        }
    }
    if let Some(offset) = c.pack {
        if offset % 64 != 0 {
            return Err(bad("the packing scratch is not 64-byte aligned".into()));
        }
        let bytes = c.scratch_bytes();
        if offset as i128 + bytes as i128 > sizes.arena as i128 {
            return Err(KernelError::OutOfBounds {
                kernel: kernel.name.clone(),
                view: "pack".to_string(),
                lo: offset as i128,
                hi: offset as i128 + bytes as i128,
                size: sizes.arena,
            });
        }
    }
    Ok(())
}

/// Bits of an `f64` constant, for [`InstKind::Const`] and reduction inits.
pub fn f64_bits(value: f64) -> u64 {
    value.to_bits()
}

/// Bits of an `i64` constant.
pub fn i64_bits(value: i64) -> u64 {
    value as u64
}
