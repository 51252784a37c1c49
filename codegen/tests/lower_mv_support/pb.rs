//! A minimal `onnx.TensorProto` reader (the backend node tests' `input_*.pb`/`output_*.pb`),
//! and value comparison with the backend tests' tolerances.

use memc_codegen::kernel::Scalar;
use std::path::Path;

/// A decoded tensor: raw little-endian element bytes.
pub struct Tensor {
    pub name: String,
    pub dims: Vec<i64>,
    pub data_type: i32,
    pub bytes: Vec<u8>,
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.at).ok_or("truncated varint")?;
            self.at += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint too long".into())
    }

    fn bytes(&mut self, n: usize) -> Result<&[u8], String> {
        let s = self
            .buf
            .get(self.at..self.at + n)
            .ok_or("truncated field")?;
        self.at += n;
        Ok(s)
    }
}

/// Element width in bytes of an ONNX data type.
fn width(data_type: i32) -> usize {
    match data_type {
        2 | 3 | 9 => 1,
        4 | 5 | 10 | 16 => 2,
        1 | 6 | 12 => 4,
        7 | 11 | 13 => 8,
        _ => 1,
    }
}

pub fn read_tensor(path: &Path) -> Result<Tensor, String> {
    let buf = std::fs::read(path).map_err(|e| e.to_string())?;
    let mut r = Reader { buf: &buf, at: 0 };
    let mut t = Tensor {
        name: String::new(),
        dims: Vec::new(),
        data_type: 0,
        bytes: Vec::new(),
    };
    // Typed payloads, packed into raw bytes once the data type is known.
    let mut floats: Vec<f32> = Vec::new();
    let mut doubles: Vec<f64> = Vec::new();
    let mut ints: Vec<i64> = Vec::new();
    let mut raw: Option<Vec<u8>> = None;
    while r.at < buf.len() {
        let key = r.varint()?;
        let (field, wire) = (key >> 3, key & 7);
        let packed = |r: &mut Reader,
                      f: &mut dyn FnMut(&mut Reader) -> Result<(), String>|
         -> Result<(), String> {
            if wire == 2 {
                let n = r.varint()? as usize;
                let end = r.at + n;
                while r.at < end {
                    f(r)?;
                }
                Ok(())
            } else {
                f(r)
            }
        };
        match (field, wire) {
            (1, _) => packed(&mut r, &mut |r| {
                t.dims.push(r.varint()? as i64);
                Ok(())
            })?,
            (2, 0) => t.data_type = r.varint()? as i32,
            (4, _) => packed(&mut r, &mut |r| {
                floats.push(f32::from_le_bytes(r.bytes(4)?.try_into().unwrap()));
                Ok(())
            })?,
            (5, _) | (7, _) | (11, _) => packed(&mut r, &mut |r| {
                ints.push(r.varint()? as i64);
                Ok(())
            })?,
            (10, _) => packed(&mut r, &mut |r| {
                doubles.push(f64::from_le_bytes(r.bytes(8)?.try_into().unwrap()));
                Ok(())
            })?,
            (8, 2) => {
                let n = r.varint()? as usize;
                t.name = String::from_utf8_lossy(r.bytes(n)?).into_owned();
            }
            (9, 2) => {
                let n = r.varint()? as usize;
                raw = Some(r.bytes(n)?.to_vec());
            }
            (_, 0) => {
                r.varint()?;
            }
            (_, 1) => {
                r.bytes(8)?;
            }
            (_, 2) => {
                let n = r.varint()? as usize;
                r.bytes(n)?;
            }
            (_, 5) => {
                r.bytes(4)?;
            }
            _ => return Err(format!("wire type {wire}")),
        }
    }
    t.bytes = match raw {
        Some(raw) => raw,
        None if !floats.is_empty() => floats.iter().flat_map(|v| v.to_le_bytes()).collect(),
        None if !doubles.is_empty() => doubles.iter().flat_map(|v| v.to_le_bytes()).collect(),
        None => {
            let w = width(t.data_type);
            ints.iter()
                .flat_map(|v| v.to_le_bytes()[..w].to_vec())
                .collect()
        }
    };
    Ok(t)
}

/// The elements of `bytes` (type `elem`) as `f64`.
pub fn values(elem: Scalar, bytes: &[u8]) -> Vec<f64> {
    let w = elem.size() as usize;
    bytes
        .chunks_exact(w)
        .map(|b| {
            let mut raw = [0u8; 8];
            raw[..w].copy_from_slice(b);
            match elem {
                Scalar::F32 => f64::from(f32::from_le_bytes(raw[..4].try_into().unwrap())),
                Scalar::F64 => f64::from_le_bytes(raw),
                Scalar::F16 => super::interp::f16_bits_to_f64(u16::from_le_bytes([raw[0], raw[1]])),
                Scalar::I8 => f64::from(raw[0] as i8),
                Scalar::I16 => f64::from(i16::from_le_bytes([raw[0], raw[1]])),
                Scalar::I32 => f64::from(i32::from_le_bytes(raw[..4].try_into().unwrap())),
                Scalar::I64 => i64::from_le_bytes(raw) as f64,
                Scalar::U64 => u64::from_le_bytes(raw) as f64,
                Scalar::U32 => f64::from(u32::from_le_bytes(raw[..4].try_into().unwrap())),
                Scalar::U16 => f64::from(u16::from_le_bytes([raw[0], raw[1]])),
                Scalar::U8 | Scalar::Bool => f64::from(raw[0]),
            }
        })
        .collect()
}

/// Compares `got` with `want`: integers exactly, floats within the backend tests' default
/// tolerances (rtol 1e-3, atol 1e-7), NaN equal to NaN.
pub fn compare(elem: Scalar, got: &[u8], want: &[u8]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} bytes, expected {}", got.len(), want.len()));
    }
    let (g, w) = (values(elem, got), values(elem, want));
    let (rtol, atol) = if elem.is_float() {
        (1e-3, 1e-7)
    } else {
        (0.0, 0.0)
    };
    let mut bad = 0;
    let mut first = None;
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        if !ok {
            bad += 1;
            first.get_or_insert((i, a, b));
        }
    }
    match first {
        None => Ok(()),
        Some((i, a, b)) => Err(format!(
            "{bad} of {} elements differ; first at {i}: got {a}, expected {b}",
            g.len()
        )),
    }
}
