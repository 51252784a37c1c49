//! ONNX tensors to memc weights: element types, shapes, and where the bytes are.
//!
//! `raw_data` and external data stay slices of memory maps ([`WeightBytes::Mapped`]); the
//! typed repeated fields (`float_data`, `int64_data`, ...) are packed into little-endian bytes,
//! which copies, but exporters only use them for small tensors. Sizes are computed with checked
//! arithmetic, and a payload whose length does not match its type is an error.

use super::external::ExternalData;
use super::proto::{TensorProto, DATA_LOCATION_EXTERNAL};
use crate::{Dim, ElemType, TensorType, WeightBytes};
use std::sync::Arc;

/// The memc element type for an ONNX `TensorProto.DataType`, or a message naming the type.
pub fn elem_type(data_type: i32) -> Result<ElemType, String> {
    ElemType::from_onnx(i64::from(data_type)).ok_or_else(|| {
        format!(
            "element type {} is not supported",
            data_type_name(data_type)
        )
    })
}

/// The ONNX name of a data type number, for messages.
pub fn data_type_name(data_type: i32) -> String {
    let name = match data_type {
        0 => "UNDEFINED",
        8 => "STRING",
        14 => "COMPLEX64",
        15 => "COMPLEX128",
        17 => "FLOAT8E4M3FN",
        18 => "FLOAT8E4M3FNUZ",
        19 => "FLOAT8E5M2",
        20 => "FLOAT8E5M2FNUZ",
        23 => "FLOAT4E2M1",
        24 => "FLOAT8E8M0",
        _ => return format!("#{data_type} (unknown)"),
    };
    format!("{name} (#{data_type})")
}

/// The static type of an initializer; rejects negative dims and sizes that overflow.
pub fn tensor_type(tensor: &TensorProto) -> Result<TensorType, String> {
    let elem = elem_type(tensor.data_type)?;
    let mut dims = Vec::with_capacity(tensor.dims.len());
    for (i, &d) in tensor.dims.iter().enumerate() {
        let d = u64::try_from(d).map_err(|_| format!("dim #{i} is negative ({d})"))?;
        dims.push(Dim::Static(d));
    }
    let ty = TensorType::new(elem, dims);
    if ty.static_byte_size().is_none() {
        return Err(format!(
            "its shape {:?} has a size that overflows 64 bits",
            tensor.dims
        ));
    }
    Ok(ty)
}

/// The bytes of a tensor: a slice of a map for raw or external data, packed bytes otherwise.
pub fn tensor_bytes(
    tensor: &TensorProto,
    ty: &TensorType,
    external: &mut ExternalData,
) -> Result<WeightBytes, String> {
    let expected = ty.static_byte_size().ok_or("its size overflows 64 bits")?;
    let n_elements = ty
        .static_num_elements()
        .ok_or("its element count overflows 64 bits")?;
    let check_len = |actual: u64, what: &str| {
        if actual == expected {
            Ok(())
        } else {
            Err(format!(
                "{what} holds {actual} bytes but its type {ty} needs {expected}"
            ))
        }
    };
    if tensor.data_location == DATA_LOCATION_EXTERNAL {
        let bytes = external.load(&tensor.external_data, expected)?;
        check_len(bytes.len() as u64, "its external data")?;
        return Ok(WeightBytes::Mapped(bytes));
    }
    if !tensor.raw_data.is_empty() || n_elements == 0 {
        check_len(tensor.raw_data.len() as u64, "its raw_data")?;
        return Ok(WeightBytes::Mapped(tensor.raw_data.clone()));
    }
    let count_mismatch = |actual: usize, field: &str| {
        format!("its {field} holds {actual} values but its type {ty} has {n_elements} elements")
    };
    let n = usize::try_from(n_elements).map_err(|_| "it is too large for this machine")?;
    let mut out: Vec<u8> = Vec::new();
    match ty.elem {
        ElemType::F32 => {
            if tensor.float_data.len() != n {
                return Err(count_mismatch(tensor.float_data.len(), "float_data"));
            }
            out.extend(tensor.float_data.iter().flat_map(|v| v.to_le_bytes()));
        }
        ElemType::F64 => {
            if tensor.double_data.len() != n {
                return Err(count_mismatch(tensor.double_data.len(), "double_data"));
            }
            out.extend(tensor.double_data.iter().flat_map(|v| v.to_le_bytes()));
        }
        ElemType::I64 => {
            if tensor.int64_data.len() != n {
                return Err(count_mismatch(tensor.int64_data.len(), "int64_data"));
            }
            out.extend(tensor.int64_data.iter().flat_map(|v| v.to_le_bytes()));
        }
        ElemType::U64 | ElemType::U32 => {
            if tensor.uint64_data.len() != n {
                return Err(count_mismatch(tensor.uint64_data.len(), "uint64_data"));
            }
            for &v in &tensor.uint64_data {
                if ty.elem == ElemType::U32 {
                    let v = u32::try_from(v)
                        .map_err(|_| format!("uint64_data value {v} does not fit UINT32"))?;
                    out.extend(v.to_le_bytes());
                } else {
                    out.extend(v.to_le_bytes());
                }
            }
        }
        ElemType::I4 | ElemType::U4 | ElemType::F4E2M1 | ElemType::I2 | ElemType::U2 => {
            // Packed as in raw_data (two 4-bit or four 2-bit values per byte), one byte per
            // int32_data entry.
            let n_bytes =
                usize::try_from(expected).map_err(|_| "it is too large for this machine")?;
            if tensor.int32_data.len() != n_bytes {
                return Err(count_mismatch(
                    tensor.int32_data.len(),
                    "int32_data (packed bytes)",
                ));
            }
            out.extend(tensor.int32_data.iter().map(|&v| v as u8));
        }
        ElemType::I32
        | ElemType::I16
        | ElemType::U16
        | ElemType::I8
        | ElemType::U8
        | ElemType::Bool
        | ElemType::F16
        | ElemType::BF16
        | ElemType::F8E4M3FN
        | ElemType::F8E4M3FNUZ
        | ElemType::F8E5M2
        | ElemType::F8E5M2FNUZ
        | ElemType::F8E8M0 => {
            // One element per int32_data entry, in its low bytes (float16, bfloat16 and the
            // float8 types as their bit patterns).
            if tensor.int32_data.len() != n {
                return Err(count_mismatch(tensor.int32_data.len(), "int32_data"));
            }
            let width = (ty.elem.bits() / 8) as usize;
            for &v in &tensor.int32_data {
                out.extend_from_slice(&v.to_le_bytes()[..width]);
            }
        }
    }
    check_len(out.len() as u64, "its data")?;
    Ok(WeightBytes::Owned(Arc::from(out)))
}

/// A tensor stored on its own, outside a model: a serialized `TensorProto` such as the ONNX
/// backend tests' `input_*.pb` and `output_*.pb`.
#[derive(Clone, Debug)]
pub struct StandaloneTensor {
    pub name: String,
    pub ty: TensorType,
    /// Little-endian element bytes, as [`tensor_bytes`] gives them (sub-byte elements packed
    /// as ONNX packs them).
    pub bytes: Vec<u8>,
}

impl StandaloneTensor {
    /// The elements as the arena and the runtime's tensors hold them: sub-byte elements one
    /// per byte ([`crate::packing::unpack`]), every other type as [`StandaloneTensor::bytes`].
    pub fn arena_bytes(&self) -> Vec<u8> {
        let n = self
            .ty
            .static_num_elements()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        crate::packing::unpack(self.ty.elem, &self.bytes, n)
    }
}

/// Decodes a serialized `TensorProto` with the importer's checks ([`tensor_type`],
/// [`tensor_bytes`]). Its data must be inline: external data has no model directory to be
/// relative to.
pub fn decode_standalone(serialized: &[u8]) -> Result<StandaloneTensor, String> {
    use prost::Message;
    let proto = TensorProto::decode(serialized).map_err(|e| format!("not a TensorProto: {e}"))?;
    let ty = tensor_type(&proto)?;
    let bytes = match tensor_bytes(&proto, &ty, &mut ExternalData::new(None))? {
        WeightBytes::Owned(b) => b.to_vec(),
        WeightBytes::Mapped(b) => b.to_vec(),
        WeightBytes::Absent => Vec::new(),
    };
    Ok(StandaloneTensor {
        name: proto.name,
        ty,
        bytes,
    })
}
