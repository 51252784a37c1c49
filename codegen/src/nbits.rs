//! Low-bit matrix products (`memc.matmul_nbits`): the packed weight layout, the kernel that
//! reads it, and the packer that writes it.
//!
//! # The packed layout ("nbits v1")
//!
//! A fused op `Y = A x dequantize(B) (+ bias)` with `A: f32 [rows, K]`, `Y: f32 [rows, N]`
//! keeps its weight in three (or two) slots of the plan's weights section, each 64-byte aligned:
//!
//! - **`b`**: `N` rows of [`row_bytes`]`(K, bits)` bytes, one row per output column `n`, holding
//!   the `K` quantized values of that column. `K` is padded up to a multiple of [`GROUP`] (32).
//!   - 4 bits: each group of 32 values `k0..k0+32` is 16 bytes; byte `j` holds value `k0 + j`
//!     in its low nibble and value `k0 + 16 + j` in its high nibble. So one 16-byte load,
//!     widened, gives the values of `k0..k0+16` in the low nibbles and of `k0+16..k0+32` in the
//!     high nibbles, in `k` order.
//!   - 8 bits: value `k` is byte `k` of the row.
//!   - The nibbles and bytes are the model's bit patterns, unchanged: two's complement when
//!     [`NBitsMatMul::signed`]. Padding values are 0.
//! - **`scales`**: `f32 [N, k_blocks]`, `k_blocks = ceil(K / block)`: the scale of value
//!   `(n, k)` is `scales[n * k_blocks + k / block]`.
//! - **`zero_points`** (absent when the model has none, meaning 0): `f32 [N, k_blocks]`, the
//!   zero point as an exact small integer, indexed like `scales`.
//!
//! `block` is the run of `K` that shares one scale: the model's `block_size` when it blocks
//! along `K`, `K` itself when the scale is per output column or per tensor.
//!
//! The dequantized value is `(q - zp) * scale` computed in f32, exactly as DequantizeLinear
//! computes it, so the fused product differs from the unfused one only in summation order.
//!
//! # Why this layout
//!
//! The M = 1 product (a GEMV) is bound by reading the weight once; it reads each column's bytes
//! contiguously and the activation row from L1. It is onnxruntime's `MatMulNBits` layout
//! (`[N, k_blocks, block_size * bits / 8]` with separate scales and zero points), with the
//! nibbles of a 32-group split into halves so that widening needs no shuffle, and the
//! quantization parameters pre-converted to f32.

use crate::kernel::{KernelError, MatView, Region, RegionSizes};
use serde::{Deserialize, Serialize};

/// Values of `K` per packing group (16 bytes at 4 bits, 32 at 8).
pub const GROUP: u64 = 32;

/// Products with more rows than this dequantize tiles of `B` into scratch and multiply them
/// with a GEMM; up to this many rows decode each weight once and multiply it into every row.
pub const SMALL_ROWS: u64 = 8;
/// The dequantized tile of the many-rows path: `TILE_K` values of `K` by `TILE_N` columns, f32.
pub const TILE_K: u64 = 256;
pub const TILE_N: u64 = 64;
/// Tiles that may be in use at once (one per worker thread); a run with more threads uses
/// only this many for the many-rows path.
pub const SCRATCH_SLOTS: u64 = 8;

/// Bytes of one packed row of `B` (one output column) for `k` values of `bits` bits.
pub fn row_bytes(k: u64, bits: u32) -> u64 {
    k.div_ceil(GROUP) * GROUP * u64::from(bits) / 8
}

/// Scratch bytes an [`NBitsMatMul`] with `rows` rows needs.
pub fn scratch_bytes(rows: u64) -> u64 {
    if rows > SMALL_ROWS {
        SCRATCH_SLOTS * TILE_K * TILE_N * 4
    } else {
        0
    }
}

/// `c[r, :] = a[r, :] x dequantize(b) (+ bias)` for every row `r` of `a`, `b` packed as the
/// module doc says. All float data is f32.
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
    /// Arena byte offset of [`scratch_bytes`]`(rows)` bytes of scratch, for more than
    /// [`SMALL_ROWS`] rows.
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
        let row = (n * row_bytes(self.k, self.bits)) as usize;
        if self.bits == 4 {
            let within = k % GROUP;
            let byte = b[row + (k / GROUP * 16 + within % 16) as usize];
            let nibble = (byte >> (4 * (within / 16))) & 0xF;
            if self.signed {
                ((nibble << 4) as i8 >> 4) as i32
            } else {
                nibble as i32
            }
        } else {
            let byte = b[row + k as usize];
            if self.signed {
                byte as i8 as i32
            } else {
                byte as i32
            }
        }
    }

    /// Checks everything the backend relies on (see [`crate::kernel::Kernel::validate`]).
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
        if self.batch.len() > crate::kernel::MAX_AXES {
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
                .checked_mul(row_bytes(self.k, self.bits))
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
                let (mut lo, mut hi) = (0i128, 0i128);
                let spans = self
                    .batch
                    .iter()
                    .zip(&v.batch_strides)
                    .map(|(&e, &s)| (e, s))
                    .chain([(self.m, v.row_stride), (cols, 1)]);
                for (e, s) in spans {
                    let span = s as i128 * (e as i128 - 1);
                    if span < 0 {
                        lo += span;
                    } else {
                        hi += span;
                    }
                }
                let base = v.byte_offset as i128;
                out_of_bounds(which, v.region, base + 4 * lo, base + 4 * (hi + 1))?;
            }
            let weights = |which: &str, offset: u64, bytes: u64| {
                out_of_bounds(
                    which,
                    Region::Weights,
                    offset as i128,
                    offset as i128 + bytes as i128,
                )
            };
            weights("b", self.b, self.n * row_bytes(self.k, self.bits))?;
            let params = self.n * self.k_blocks() * 4;
            weights("scales", self.scales, params)?;
            if let Some(zp) = self.zero_points {
                weights("zero_points", zp, params)?;
            }
            for (which, offset) in [
                ("scales", self.scales),
                ("zero_points", self.zero_points.unwrap_or(0)),
            ] {
                if offset % 4 != 0 {
                    return Err(bad(format!("{which} are not 4-byte aligned")));
                }
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
        let scratch = scratch_bytes(rows);
        match (self.scratch, scratch) {
            (_, 0) => {}
            (None, _) => return Err(bad(format!("{rows} rows need scratch memory"))),
            (Some(offset), bytes) => {
                if offset % 64 != 0 {
                    return Err(bad("the scratch is not 64-byte aligned".into()));
                }
                out_of_bounds(
                    "scratch",
                    Region::Arena,
                    offset as i128,
                    offset as i128 + bytes as i128,
                )?;
            }
        }
        Ok(())
    }
}
