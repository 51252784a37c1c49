//! Reading and writing tensors as NumPy `.npy` files, through the `npyz` crate.
//!
//! Supported element types: bool, int8 to int64, uint8 to uint64, float16 (as raw bits),
//! float32 and float64, little-endian (or `|` for one-byte types), in C order. Everything
//! else, notably Fortran order, big-endian data, complex numbers, strings and structured
//! dtypes, is rejected with an error naming the file and the dtype. Data bytes are copied as
//! they are, never converted element by element; bool elements are normalized to 0 or 1.
//!
//! The types NumPy has no dtype for (bf16, the float8 formats, float4, the 4- and 2-bit
//! integers, one element per byte) are written as raw bytes (`|V2`, `|V1`), which is what
//! NumPy saves `ml_dtypes` arrays as (`np.load(f).view(ml_dtypes.bfloat16)` reads them back);
//! raw-byte files name no element type, so they are not read as inputs.

use crate::error::{Result, RuntimeError};
use crate::tensor::{byte_len, Tensor, TensorRef};
use memc_codegen::Scalar;
use npyz::{DType, Endianness, TypeChar, TypeStr, WriterBuilder};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::Path;

const SUPPORTED: &str =
    "bool, int8..int64, uint8..uint64, float16, float32 and float64, little-endian, in C order";

/// The memc element type of a `.npy` dtype, or an error message saying why there is none.
fn scalar_of(dtype: &DType) -> Result<Scalar, String> {
    let DType::Plain(ty) = dtype else {
        return Err(format!(
            "structured dtype {} is not supported; memc reads {SUPPORTED}",
            dtype.descr()
        ));
    };
    let size = ty.size_field();
    let scalar = match (ty.type_char(), size) {
        (TypeChar::Bool, 1) => Some(Scalar::Bool),
        (TypeChar::Int, 1) => Some(Scalar::I8),
        (TypeChar::Int, 2) => Some(Scalar::I16),
        (TypeChar::Int, 4) => Some(Scalar::I32),
        (TypeChar::Int, 8) => Some(Scalar::I64),
        (TypeChar::Uint, 1) => Some(Scalar::U8),
        (TypeChar::Uint, 2) => Some(Scalar::U16),
        (TypeChar::Uint, 4) => Some(Scalar::U32),
        (TypeChar::Uint, 8) => Some(Scalar::U64),
        (TypeChar::Float, 2) => Some(Scalar::F16),
        (TypeChar::Float, 4) => Some(Scalar::F32),
        (TypeChar::Float, 8) => Some(Scalar::F64),
        (TypeChar::RawData, _) => {
            return Err(format!(
                "dtype '{ty}' is raw bytes, which name no element type; memc reads {SUPPORTED}"
            ))
        }
        _ => None,
    };
    let scalar =
        scalar.ok_or_else(|| format!("dtype '{ty}' is not supported; memc reads {SUPPORTED}"))?;
    if ty.endianness() == Endianness::Big && size > 1 {
        return Err(format!(
            "dtype '{ty}' is big-endian; memc reads little-endian data (in NumPy: `a.astype(a.dtype.newbyteorder('<'))`)"
        ));
    }
    Ok(scalar)
}

/// The `.npy` dtype of a memc element type.
fn dtype_of(elem: Scalar) -> DType {
    let (kind, endian) = match elem {
        Scalar::Bool => ('b', '|'),
        Scalar::I8 => ('i', '|'),
        Scalar::U8 => ('u', '|'),
        Scalar::I16 | Scalar::I32 | Scalar::I64 => ('i', '<'),
        Scalar::U16 | Scalar::U32 | Scalar::U64 => ('u', '<'),
        Scalar::F16 | Scalar::F32 | Scalar::F64 => ('f', '<'),
        // No NumPy dtype: raw bytes, as NumPy saves ml_dtypes arrays.
        _ => ('V', '|'),
    };
    let text = format!("{endian}{kind}{}", elem.size());
    let ty: TypeStr = text
        .parse()
        .expect("the type strings of memc's scalars are valid NumPy type strings");
    DType::Plain(ty)
}

/// Reads the `.npy` file at `path` as a tensor named after the file's stem.
pub fn read_npy(path: &Path) -> Result<Tensor> {
    let bad = |message: String| RuntimeError::npy(path, message);
    let file = File::open(path).map_err(|e| RuntimeError::read(path, e))?;
    let file_len = file
        .metadata()
        .map_err(|e| RuntimeError::read(path, e))?
        .len();
    let mut reader = BufReader::new(file);
    check_header(&mut reader, file_len).map_err(bad)?;
    let header = npyz::NpyHeader::from_reader(&mut reader)
        .map_err(|e| bad(format!("not a valid .npy file: {e}")))?;
    let elem = scalar_of(&header.dtype()).map_err(bad)?;
    if header.order() == npyz::Order::Fortran && header.shape().len() > 1 {
        return Err(bad(
            "the array is in Fortran order; memc reads C order (in NumPy: `np.ascontiguousarray(a)`)"
                .into(),
        ));
    }
    let shape = header.shape().to_vec();
    let data_start = reader
        .stream_position()
        .map_err(|e| RuntimeError::read(path, e))?;
    let available = file_len.saturating_sub(data_start);
    let n_bytes = byte_len(elem, &shape)
        .filter(|&n| n as u64 <= available)
        .ok_or_else(|| {
            bad(format!(
                "the file is truncated: its header promises {} elements of {} ({} bytes of data) but {available} bytes follow the header",
                shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).map_or("too many".into(), |n| n.to_string()),
                elem.name(),
                shape
                    .iter()
                    .try_fold(elem.size(), |a, &d| a.checked_mul(d))
                    .map_or("too many".into(), |n| n.to_string()),
            ))
        })?;
    if n_bytes as u64 != available {
        return Err(bad(format!(
            "{} unexpected bytes after the array's {n_bytes} bytes of data",
            available - n_bytes as u64
        )));
    }
    let mut data = vec![0u8; n_bytes];
    reader
        .read_exact(&mut data)
        .map_err(|e| RuntimeError::read(path, e))?;
    if elem == Scalar::Bool {
        for byte in &mut data {
            *byte = u8::from(*byte != 0);
        }
    }
    let name = path
        .file_stem()
        .map_or(String::new(), |s| s.to_string_lossy().into_owned());
    Ok(Tensor::new(name, elem, shape, data).expect("the length was computed from the shape"))
}

/// The longest header memc reads: NumPy's own default limit (`numpy.lib.format`'s
/// `max_header_size`), far above what any dtype memc reads needs.
const MAX_HEADER_LEN: u64 = 10_000;
/// The deepest nesting of brackets a header may have. memc reads plain dtypes, whose header is
/// a flat dict holding a shape tuple (depth 2); structured dtypes nest a little deeper and are
/// rejected with a message after parsing.
const MAX_HEADER_DEPTH: usize = 8;

/// Checks what npyz would trust in a `.npy` file's preamble and header, leaving `reader` at
/// the file's start: that the stated header length fits in the file and is at most
/// [`MAX_HEADER_LEN`] (npyz allocates that length before reading it: a damaged length field in
/// a small file asked for 4 GiB, `fuzz/regressions/read_npy/header_len_4gib.npy`), and that the
/// header nests brackets at most [`MAX_HEADER_DEPTH`] deep (npyz's Python-literal parser
/// backtracks exponentially in the depth: 53 `{` took minutes,
/// `fuzz/regressions/read_npy/nested_braces_hang.npy`), and that the shape's element count fits
/// in 64 bits ([`shape_overflows`]). Found by fuzzing `read_npy`.
fn check_header(reader: &mut BufReader<File>, file_len: u64) -> Result<(), String> {
    let mut preamble = [0u8; 12];
    let n_read = read_up_to(reader, &mut preamble)?;
    let rewind = |reader: &mut BufReader<File>| {
        reader
            .rewind()
            .map_err(|e| format!("cannot read the header: {e}"))
    };
    // Shorter files and wrong magic are left to npyz, which names what is wrong.
    if n_read < 10 || &preamble[..6] != b"\x93NUMPY" {
        return rewind(reader);
    }
    let (header_len, preamble_len) = match preamble[6] {
        1 => (
            u64::from(u16::from_le_bytes([preamble[8], preamble[9]])),
            10,
        ),
        2 | 3 if n_read == 12 => (
            u64::from(u32::from_le_bytes(
                preamble[8..12].try_into().expect("4 bytes"),
            )),
            12,
        ),
        _ => return rewind(reader),
    };
    if preamble_len + header_len > file_len {
        return Err(format!(
            "not a valid .npy file: its header says it is {header_len} bytes long but the file has {} bytes after the preamble",
            file_len.saturating_sub(preamble_len)
        ));
    }
    if header_len > MAX_HEADER_LEN {
        return Err(format!(
            "not a valid .npy file: its header is {header_len} bytes long; memc reads headers of at most {MAX_HEADER_LEN} bytes (NumPy's default limit)"
        ));
    }
    reader
        .seek(std::io::SeekFrom::Start(preamble_len))
        .map_err(|e| format!("cannot read the header: {e}"))?;
    let mut header = vec![0u8; header_len as usize];
    let n_read = read_up_to(reader, &mut header)?;
    let depth = bracket_depth(&header[..n_read]);
    if depth > MAX_HEADER_DEPTH {
        return Err(format!(
            "not a valid .npy file: its header nests brackets {depth} deep; memc reads headers nested at most {MAX_HEADER_DEPTH} deep"
        ));
    }
    if shape_overflows(&header[..n_read]) {
        return Err(
            "not a valid .npy file: the number of elements its shape gives overflows 64 bits"
                .into(),
        );
    }
    rewind(reader)
}

/// Whether the header's `shape` tuple holds integers whose product overflows a `u64` (npyz
/// multiplies them unchecked, which panics in debug builds; found by replaying the fuzz corpus,
/// `fuzz/regressions/read_npy/shape_product_overflow.npy`). Anything it cannot read is left
/// to npyz.
fn shape_overflows(header: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(header) else {
        return false;
    };
    let Some(key) = text.find("'shape'").or_else(|| text.find("\"shape\"")) else {
        return false;
    };
    let rest = &text[key + "'shape'".len()..];
    let Some(open) = rest.find('(') else {
        return false;
    };
    let Some(close) = rest[open..].find(')') else {
        return false;
    };
    rest[open + 1..open + close]
        .split(',')
        .map(str::trim)
        .filter(|dim| !dim.is_empty())
        .try_fold(1u64, |product, dim| {
            dim.parse::<u64>()
                .ok()
                .map_or(Some(product), |d| product.checked_mul(d))
        })
        .is_none()
}

/// Reads until `buf` is full or the file ends; returns how many bytes were read.
fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> Result<usize, String> {
    let mut n_read = 0;
    while n_read < buf.len() {
        match reader.read(&mut buf[n_read..]) {
            Ok(0) => break,
            Ok(n) => n_read += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read the header: {e}")),
        }
    }
    Ok(n_read)
}

/// The deepest nesting of `{`, `[` and `(` in a header's Python literal, outside quoted strings.
fn bracket_depth(header: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut quote = None;
    let mut escaped = false;
    for &byte in header {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if byte == b'\\' {
                    escaped = true;
                } else if byte == q {
                    quote = None;
                }
            }
            None => match byte {
                b'\'' | b'"' => quote = Some(byte),
                b'{' | b'[' | b'(' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b'}' | b']' | b')' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    deepest
}

/// One element's bytes, written as they are under the dtype the writer was opened with.
struct RawElement<'a>(&'a [u8]);

struct RawWriter<'a>(std::marker::PhantomData<RawElement<'a>>);

impl<'a> npyz::TypeWrite for RawWriter<'a> {
    type Value = RawElement<'a>;

    fn write_one<W: Write>(&self, mut writer: W, value: &RawElement<'a>) -> std::io::Result<()> {
        writer.write_all(value.0)
    }
}

impl<'a> npyz::Serialize for RawElement<'a> {
    type TypeWriter = RawWriter<'a>;

    fn writer(_dtype: &DType) -> Result<RawWriter<'a>, npyz::DTypeError> {
        Ok(RawWriter(std::marker::PhantomData))
    }
}

/// Writes `tensor` to `path` as a `.npy` file (C order, little-endian).
pub fn write_npy(path: &Path, tensor: TensorRef<'_>) -> Result<()> {
    let write = |e| RuntimeError::write(path, e);
    let file = File::create(path).map_err(write)?;
    let mut out = BufWriter::new(file);
    let mut writer = npyz::WriteOptions::<RawElement<'_>>::new()
        .dtype(dtype_of(tensor.elem()))
        .shape(tensor.shape())
        .writer(&mut out)
        .begin_nd()
        .map_err(write)?;
    for element in tensor.data().chunks_exact(tensor.elem().size() as usize) {
        writer.push(&RawElement(element)).map_err(write)?;
    }
    writer.finish().map_err(write)?;
    out.flush().map_err(write)?;
    Ok(())
}
