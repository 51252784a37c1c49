//! Types: ranked tensors with static or named symbolic dims.
//!
//! Text form (MLIR builtin syntax): `tensor<2x?x768xf32>`; a scalar is `tensor<f32>`. Symbolic
//! dims print as `?` and keep their names in the tensor's encoding attribute, one string per `?`
//! in order (`""` for a dim that has no name; an expression such as `"batch*seq"` for a
//! computed one, see [`crate::dim`]):
//! `tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>`. The encoding is omitted when no `?` dim
//! has a name, so types without symbols read exactly as in MLIR.

pub use crate::dim::Dim;
use std::fmt;

/// Element type of a tensor.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ElemType {
    F64,
    F32,
    F16,
    BF16,
    /// 8-bit floats (OCP/ONNX): 4 exponent bits, no infinities, NaN `S.1111.111`.
    F8E4M3FN,
    /// 4 exponent bits, bias 8, no infinities or negative zero, NaN `0x80`.
    F8E4M3FNUZ,
    /// 5 exponent bits, IEEE-like (infinities and NaNs).
    F8E5M2,
    /// 5 exponent bits, bias 16, no infinities or negative zero, NaN `0x80`.
    F8E5M2FNUZ,
    /// 4-bit float: 2 exponent bits, 1 mantissa bit, no infinities or NaN (largest 6).
    F4E2M1,
    /// 8-bit exponent-only float (the OCP MX scales): `2^(code - 127)`, no sign, zero or
    /// infinity; `0xFF` is NaN.
    F8E8M0,
    I64,
    I32,
    I16,
    I8,
    U64,
    U32,
    U16,
    U8,
    I4,
    U4,
    I2,
    U2,
    Bool,
}

impl ElemType {
    /// Every element type, in declaration order.
    pub const ALL: &'static [ElemType] = &[
        ElemType::F64,
        ElemType::F32,
        ElemType::F16,
        ElemType::BF16,
        ElemType::F8E4M3FN,
        ElemType::F8E4M3FNUZ,
        ElemType::F8E5M2,
        ElemType::F8E5M2FNUZ,
        ElemType::F4E2M1,
        ElemType::F8E8M0,
        ElemType::I64,
        ElemType::I32,
        ElemType::I16,
        ElemType::I8,
        ElemType::U64,
        ElemType::U32,
        ElemType::U16,
        ElemType::U8,
        ElemType::I4,
        ElemType::U4,
        ElemType::I2,
        ElemType::U2,
        ElemType::Bool,
    ];

    /// The MLIR spelling (`f32`, `ui8`, `i1` for bool).
    pub fn mlir_name(self) -> &'static str {
        match self {
            ElemType::F64 => "f64",
            ElemType::F32 => "f32",
            ElemType::F16 => "f16",
            ElemType::BF16 => "bf16",
            ElemType::F8E4M3FN => "f8E4M3FN",
            ElemType::F8E4M3FNUZ => "f8E4M3FNUZ",
            ElemType::F8E5M2 => "f8E5M2",
            ElemType::F8E5M2FNUZ => "f8E5M2FNUZ",
            ElemType::F4E2M1 => "f4E2M1FN",
            ElemType::F8E8M0 => "f8E8M0FNU",
            ElemType::I64 => "i64",
            ElemType::I32 => "i32",
            ElemType::I16 => "i16",
            ElemType::I8 => "i8",
            ElemType::U64 => "ui64",
            ElemType::U32 => "ui32",
            ElemType::U16 => "ui16",
            ElemType::U8 => "ui8",
            ElemType::I4 => "i4",
            ElemType::U4 => "ui4",
            ElemType::I2 => "i2",
            ElemType::U2 => "ui2",
            ElemType::Bool => "i1",
        }
    }

    /// Parses an MLIR element type spelling; `None` for anything memc does not support.
    pub fn from_mlir_name(name: &str) -> Option<ElemType> {
        ElemType::ALL
            .iter()
            .copied()
            .find(|e| e.mlir_name() == name)
    }

    /// Width of one element in bits as ONNX stores it (4 for the int4, uint4 and float4 types,
    /// which ONNX packs two per byte; 2 for int2 and uint2, four per byte).
    pub fn bits(self) -> u32 {
        match self {
            ElemType::F64 | ElemType::I64 | ElemType::U64 => 64,
            ElemType::F32 | ElemType::I32 | ElemType::U32 => 32,
            ElemType::F16 | ElemType::BF16 | ElemType::I16 | ElemType::U16 => 16,
            ElemType::I8 | ElemType::U8 | ElemType::Bool => 8,
            ElemType::F8E4M3FN
            | ElemType::F8E4M3FNUZ
            | ElemType::F8E5M2
            | ElemType::F8E5M2FNUZ
            | ElemType::F8E8M0 => 8,
            ElemType::I4 | ElemType::U4 | ElemType::F4E2M1 => 4,
            ElemType::I2 | ElemType::U2 => 2,
        }
    }

    /// Whether ONNX packs several elements into one byte (the 4- and 2-bit types). memc keeps
    /// such elements one per byte in the arena and in the runtime's tensors, and packs them
    /// only where ONNX does: model weights and `TensorProto`s ([`crate::packing`]).
    pub fn is_sub_byte(self) -> bool {
        self.bits() < 8
    }

    /// The bytes one element takes in the arena, in kernels and in the runtime's tensors:
    /// its width rounded up to a whole byte (sub-byte elements are one per byte there).
    pub fn arena_bytes(self) -> u64 {
        u64::from(self.bits().div_ceil(8))
    }

    /// The element type for an ONNX `TensorProto.DataType` code, when memc has it.
    pub fn from_onnx(code: i64) -> Option<ElemType> {
        Some(match code {
            1 => ElemType::F32,
            2 => ElemType::U8,
            3 => ElemType::I8,
            4 => ElemType::U16,
            5 => ElemType::I16,
            6 => ElemType::I32,
            7 => ElemType::I64,
            9 => ElemType::Bool,
            10 => ElemType::F16,
            11 => ElemType::F64,
            12 => ElemType::U32,
            13 => ElemType::U64,
            16 => ElemType::BF16,
            17 => ElemType::F8E4M3FN,
            18 => ElemType::F8E4M3FNUZ,
            19 => ElemType::F8E5M2,
            20 => ElemType::F8E5M2FNUZ,
            21 => ElemType::U4,
            22 => ElemType::I4,
            23 => ElemType::F4E2M1,
            24 => ElemType::F8E8M0,
            25 => ElemType::U2,
            26 => ElemType::I2,
            _ => return None,
        })
    }

    /// The ONNX `TensorProto.DataType` code of this element type ([`ElemType::from_onnx`]'s
    /// inverse).
    pub fn onnx_code(self) -> i64 {
        match self {
            ElemType::F32 => 1,
            ElemType::U8 => 2,
            ElemType::I8 => 3,
            ElemType::U16 => 4,
            ElemType::I16 => 5,
            ElemType::I32 => 6,
            ElemType::I64 => 7,
            ElemType::Bool => 9,
            ElemType::F16 => 10,
            ElemType::F64 => 11,
            ElemType::U32 => 12,
            ElemType::U64 => 13,
            ElemType::BF16 => 16,
            ElemType::F8E4M3FN => 17,
            ElemType::F8E4M3FNUZ => 18,
            ElemType::F8E5M2 => 19,
            ElemType::F8E5M2FNUZ => 20,
            ElemType::U4 => 21,
            ElemType::I4 => 22,
            ElemType::F4E2M1 => 23,
            ElemType::F8E8M0 => 24,
            ElemType::U2 => 25,
            ElemType::I2 => 26,
        }
    }

    /// Every float type, the 8- and 4-bit ones included.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            ElemType::F64
                | ElemType::F32
                | ElemType::F16
                | ElemType::BF16
                | ElemType::F8E4M3FN
                | ElemType::F8E4M3FNUZ
                | ElemType::F8E5M2
                | ElemType::F8E5M2FNUZ
                | ElemType::F4E2M1
                | ElemType::F8E8M0
        )
    }

    /// The 8- and 4-bit floats, which ONNX only converts (Cast, CastLike, QuantizeLinear,
    /// DequantizeLinear) and moves.
    pub fn is_minifloat(self) -> bool {
        self.is_float() && self.bits() <= 8
    }

    pub fn is_integer(self) -> bool {
        !self.is_float() && self != ElemType::Bool
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mlir_name())
    }
}

/// A ranked tensor type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub elem: ElemType,
    pub dims: Vec<Dim>,
}

impl TensorType {
    pub fn new(elem: ElemType, dims: Vec<Dim>) -> TensorType {
        TensorType { elem, dims }
    }

    /// A tensor whose dims are all static.
    pub fn with_shape(elem: ElemType, shape: &[u64]) -> TensorType {
        TensorType {
            elem,
            dims: shape.iter().map(|&n| Dim::Static(n)).collect(),
        }
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The static shape, or `None` when a dim is symbolic or unknown.
    pub fn static_shape(&self) -> Option<Vec<u64>> {
        self.dims.iter().map(Dim::as_static).collect()
    }

    /// The number of elements when every dim is static; `None` on symbolic dims or overflow.
    pub fn static_num_elements(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(d.as_static()?))
    }

    /// Size in bytes as ONNX stores the tensor (a weight, a `TensorProto`) when every dim is
    /// static: the 4- and 2-bit types pack two or four elements per byte, rounding up; `None`
    /// on symbolic dims or overflow.
    pub fn static_byte_size(&self) -> Option<u64> {
        let bits = self
            .static_num_elements()?
            .checked_mul(u64::from(self.elem.bits()))?;
        Some(bits.div_ceil(8))
    }

    /// Size in bytes in the arena (and in the runtime's tensors) when every dim is static:
    /// [`ElemType::arena_bytes`] per element, so sub-byte elements take one byte each; `None`
    /// on symbolic dims or overflow. Equals [`TensorType::static_byte_size`] for every type of
    /// 8 bits or more. A tensor with a bounded dim ([`Dim::AtMost`]) and static others takes
    /// the bytes its [`BoundedLayout`] plans: its elements at the bound, then its extent.
    pub fn static_arena_bytes(&self) -> Option<u64> {
        if self.bounded_axis().is_some() {
            return self.bounded_arena_layout().map(|l| l.total_bytes);
        }
        self.static_num_elements()?
            .checked_mul(self.elem.arena_bytes())
    }

    /// The one axis whose dim is bounded ([`Dim::AtMost`]), if any.
    pub fn bounded_axis(&self) -> Option<usize> {
        self.dims.iter().position(Dim::is_bounded)
    }

    /// For a tensor with bounded dims and otherwise static ones: how its buffer is laid out
    /// (see [`BoundedLayout`]); `None` for any other tensor, or on overflow.
    pub fn bounded_arena_layout(&self) -> Option<BoundedLayout> {
        self.bounded_axis()?;
        let elements = self
            .dims
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(d.planned_size()?))?
            .checked_mul(self.elem.arena_bytes())?;
        let extent_offset = elements.checked_next_multiple_of(8)?;
        Some(BoundedLayout {
            extent_offset,
            total_bytes: extent_offset.checked_add(8)?,
        })
    }
}

/// The buffer of a tensor with a bounded dim: its elements laid out for the bound (the extent
/// of the bounded axis is at most that), then, at `extent_offset` (a multiple of 8 bytes after
/// the elements), the run-time extent as one i64, which the op producing the tensor writes.
/// [`TensorType::static_arena_bytes`] of such a tensor is `total_bytes`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BoundedLayout {
    pub extent_offset: u64,
    pub total_bytes: u64,
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor<")?;
        for dim in &self.dims {
            match dim {
                Dim::Static(n) => write!(f, "{n}x")?,
                Dim::Symbol(_) | Dim::Expr(_) | Dim::Unknown | Dim::AtMost(_) => {
                    f.write_str("?x")?
                }
            }
        }
        f.write_str(self.elem.mlir_name())?;
        let has_names = self.dims.iter().any(|d| d.is_symbolic() || d.is_bounded());
        if has_names {
            f.write_str(", #memc.dims<[")?;
            let mut first = true;
            for dim in &self.dims {
                let name = match dim {
                    Dim::Static(_) => continue,
                    Dim::Symbol(_) | Dim::Expr(_) | Dim::AtMost(_) => dim.to_string(),
                    Dim::Unknown => String::new(),
                };
                if !first {
                    f.write_str(", ")?;
                }
                first = false;
                crate::printer::write_string_literal(f, &name)?;
            }
            f.write_str("]>")?;
        }
        f.write_str(">")
    }
}

/// A type of an SSA value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Tensor(TensorType),
    /// The type of `memc.none`: stands for an optional operand that is left out while a later
    /// one is given (ONNX's empty input name), as in `Resize(X, none, none, sizes)`. Only
    /// `memc.none` produces it, and only optional operand positions accept it.
    None,
}

impl Type {
    /// The tensor type, or `None` for the `none` type.
    pub fn tensor(&self) -> Option<&TensorType> {
        match self {
            Type::Tensor(t) => Some(t),
            Type::None => None,
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, Type::None)
    }
}

impl From<TensorType> for Type {
    fn from(t: TensorType) -> Type {
        Type::Tensor(t)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Tensor(t) => fmt::Display::fmt(t, f),
            Type::None => f.write_str("none"),
        }
    }
}
