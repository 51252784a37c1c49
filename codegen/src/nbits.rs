//! Low-bit matrix products (`memc.matmul_nbits`): the packed weight layout, its decoders, and
//! the packer that writes it. The kernel that reads the layout is `kernel::NBitsMatMul`; this
//! module never reads the kernel IR, so the kernel IR may depend on it and not the reverse.
//!
//! # The packed layout ("nbits v2")
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
//!     [`PackSpec::signed`]. Padding values are 0.
//! - **`scales`**: `f32 [N, k_blocks]`, `k_blocks = ceil(K / block)`: the scale of value
//!   `(n, k)` is `scales[n * k_blocks + k / block]`.
//! - **`zero_points`** (absent when the model has none, meaning 0): `[N, k_blocks]` bytes, one
//!   per block, indexed like `scales`: the zero point's integer value as a byte, two's
//!   complement (an i8) when [`PackSpec::signed`] (4-bit zero points sign-extended into the
//!   byte), else unsigned (a u8). No alignment beyond the slot's is needed.
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
//! nibbles of a 32-group split into halves so that widening needs no shuffle, the scales
//! pre-converted to f32, and the zero points one byte each (4-bit ones unpacked from their
//! nibbles): a uint4 weight in blocks of 32 takes 16 + 4 + 1 = 21 bytes per 32 values (the
//! model's 20.5), and the kernels convert a zero point once per block.
//!
//! (Version 1 held the zero points as f32, 24 bytes per 32 values. A plan written with it is
//! rejected when loaded: its zero-point slots are not the size their spec now needs.)

use serde::{Deserialize, Serialize};

/// Values of `K` per packing group (16 bytes at 4 bits, 32 at 8).
pub const GROUP: u64 = 32;

/// Bytes of one packed row of `B` (one output column) for `k` values of `bits` bits.
pub fn row_bytes(k: u64, bits: u32) -> u64 {
    k.div_ceil(GROUP) * GROUP * u64::from(bits) / 8
}

/// Scratch bytes a low-bit product (`kernel::NBitsMatMul`) of `rows x n x k` has on the CPU:
/// past [`crate::cpu::target::SMALL_ROWS`] rows, the packing slots of memc-gemm's blocking of
/// the product (one `B` panel per GEMM thread, `A` read where it is; none for products too
/// small for threads, which pack on the stack).
pub fn scratch_bytes(rows: u64, n: u64, k: u64) -> u64 {
    scratch_bytes_on(crate::cpu::target::target(), rows, n, k)
}

/// [`scratch_bytes`] on `target`: none for products of at most its `stream_rows` rows.
pub fn scratch_bytes_on(target: &memc_ir::target::TargetInfo, rows: u64, n: u64, k: u64) -> u64 {
    if rows <= target.nbits.stream_rows {
        return 0;
    }
    gemm_blocking(1, rows, n, k).scratch_bytes()
}

/// memc-gemm's blocking of a low-bit product's GEMM form: `batches` products of `m x n x k`,
/// f32, `B` panels packed (dequantized), `A` read where it is.
pub fn gemm_blocking(batches: u64, m: u64, n: u64, k: u64) -> memc_gemm::GemmBlocking {
    memc_gemm::GemmBlocking::new(batches, m, n, k, 4, true).without_a_panel()
}

/// Which slot of the packed layout a [`PackSpec`] writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PackedPart {
    Values,
    Scales,
    ZeroPoints,
}

impl PackedPart {
    pub fn name(self) -> &'static str {
        match self {
            PackedPart::Values => "values",
            PackedPart::Scales => "scales",
            PackedPart::ZeroPoints => "zero_points",
        }
    }
}

/// The id of the packed layout this module defines, packs and decodes (recorded in every
/// packed slot, so a plan says which layout its bytes are in, and a backend whose kernels read
/// another layout, or a later memc with a new layout, refuses it instead of misreading it).
pub const LAYOUT: &str = "nbits v2";

/// How to compute one slot of the packed layout from the model's weights (in their ONNX
/// layouts) while the plan file is written.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PackSpec {
    /// The packed layout the slot is in ([`LAYOUT`]; the target's `nbits.layout`).
    pub layout: String,
    pub part: PackedPart,
    /// The model's weights: the quantized `B`, its scales and its zero points.
    pub b: String,
    pub scales: String,
    pub zero_points: Option<String>,
    pub k: u64,
    pub n: u64,
    pub bits: u32,
    pub signed: bool,
    /// `B` is stored `[N, K]` (else `[K, N]`).
    pub trans_b: bool,
    /// DequantizeLinear's `axis` on the stored `B` (0 or 1) and `block_size` (0: per axis).
    pub axis: u64,
    pub block_size: u64,
    /// One scale for the whole weight.
    pub per_tensor: bool,
    /// The run of `K` sharing a scale (`block` of the kernel, `kernel::NBitsMatMul`).
    pub block: u64,
}

/// The model's bytes a [`PackSpec`] reads, in their ONNX layouts (4-bit values two per byte,
/// low nibble first; scales f32).
#[derive(Copy, Clone)]
pub struct PackSources<'a> {
    pub b: &'a [u8],
    pub scales: &'a [u8],
    pub zero_points: Option<&'a [u8]>,
}

/// Output bytes [`pack`] produces before handing them on.
const PACK_CHUNK: usize = 1 << 20;

impl PackSpec {
    pub fn k_blocks(&self) -> u64 {
        self.k.div_ceil(self.block.max(1))
    }

    /// Bytes of the slot this spec writes.
    pub fn byte_size(&self) -> u64 {
        match self.part {
            PackedPart::Values => self.n * row_bytes(self.k, self.bits),
            PackedPart::Scales => self.n * self.k_blocks() * 4,
            PackedPart::ZeroPoints => self.n * self.k_blocks(),
        }
    }

    /// The slot's name in the plan: the source weight and the part.
    /// Whether the slot is in the layout this memc packs and decodes ([`LAYOUT`]).
    pub fn check_layout(&self) -> Result<(), String> {
        if self.layout == LAYOUT {
            Ok(())
        } else {
            Err(format!(
                "it is in the packed layout `{}`, and this memc packs and reads only `{LAYOUT}`",
                self.layout
            ))
        }
    }

    pub fn slot_name(&self) -> String {
        format!("{}#nbits.{}", self.b, self.part.name())
    }

    /// The stored `B`'s dims.
    fn stored(&self) -> [u64; 2] {
        if self.trans_b {
            [self.n, self.k]
        } else {
            [self.k, self.n]
        }
    }

    /// Element count of the scales and zero points.
    fn param_count(&self) -> u64 {
        if self.per_tensor {
            return 1;
        }
        let stored = self.stored();
        let axis = self.axis as usize;
        if self.block_size == 0 {
            stored[axis]
        } else {
            let mut dims = stored;
            dims[axis] = dims[axis].div_ceil(self.block_size);
            dims[0] * dims[1]
        }
    }

    /// The index into the scales (and zero points) of value `(n, k)`, as DequantizeLinear
    /// indexes them on the stored `B`.
    fn param_index(&self, n: u64, k: u64) -> u64 {
        if self.per_tensor {
            return 0;
        }
        let mut coord = if self.trans_b { [n, k] } else { [k, n] };
        let axis = self.axis as usize;
        if self.block_size == 0 {
            return coord[axis];
        }
        let mut dims = self.stored();
        dims[axis] = dims[axis].div_ceil(self.block_size);
        coord[axis] /= self.block_size;
        coord[0] * dims[1] + coord[1]
    }

    /// Checks that the spec is one the kernels run and that `sources` have the sizes it needs.
    pub fn check(&self, sources: &PackSources) -> Result<(), String> {
        self.check_layout()?;
        if !matches!(self.bits, 4 | 8) || self.k == 0 || self.n == 0 {
            return Err(format!(
                "{} bits, K = {}, N = {}: not a packable weight",
                self.bits, self.k, self.n
            ));
        }
        let expected_block = memc_ir::ops::nbits_k_block(
            self.k,
            self.trans_b,
            self.axis as usize,
            self.block_size,
            self.per_tensor,
        );
        if expected_block != Some(self.block) || self.axis > 1 {
            return Err(format!(
                "the scale block {} does not follow from axis {} and block_size {}",
                self.block, self.axis, self.block_size
            ));
        }
        let bytes_for = |count: u64| (count * u64::from(self.bits)).div_ceil(8);
        let want = [
            ("B", sources.b.len(), bytes_for(self.k * self.n)),
            ("scales", sources.scales.len(), self.param_count() * 4),
        ];
        for (what, have, want) in want {
            if have as u64 != want {
                return Err(format!("{what} has {have} bytes, expected {want}"));
            }
        }
        match (sources.zero_points, self.part) {
            (Some(z), _) if z.len() as u64 != bytes_for(self.param_count()) => Err(format!(
                "zero points have {} bytes, expected {}",
                z.len(),
                bytes_for(self.param_count())
            )),
            (None, PackedPart::ZeroPoints) => Err("no zero points to pack".into()),
            _ => Ok(()),
        }
    }
}

/// The quantized value at element `index` of a row-major ONNX tensor of `bits`-bit values, as
/// its raw bit pattern (a nibble or a byte).
fn raw(bytes: &[u8], bits: u32, index: u64) -> u8 {
    if bits == 4 {
        (bytes[(index / 2) as usize] >> (4 * (index % 2))) & 0xF
    } else {
        bytes[index as usize]
    }
}

/// The quantized value `(n, k)` of a packed `b` slot (`K = k_len` values of `bits` bits per
/// column) as an integer.
pub fn packed_value(b: &[u8], k_len: u64, bits: u32, signed: bool, n: u64, k: u64) -> i32 {
    let row = (n * row_bytes(k_len, bits)) as usize;
    let pattern = if bits == 4 {
        let within = k % GROUP;
        let byte = b[row + (k / GROUP * 16 + within % 16) as usize];
        (byte >> (4 * (within / 16))) & 0xF
    } else {
        b[row + k as usize]
    };
    integer(pattern, bits, signed)
}

/// The zero point of scale block `k_block` of column `n` of a packed `zero_points` slot
/// (`k_blocks` blocks per column) as an integer.
pub fn packed_zero_point(
    zero_points: &[u8],
    k_blocks: u64,
    signed: bool,
    n: u64,
    k_block: u64,
) -> i32 {
    integer(zero_points[(n * k_blocks + k_block) as usize], 8, signed)
}

/// A raw bit pattern as the integer it stands for.
fn integer(raw: u8, bits: u32, signed: bool) -> i32 {
    match (bits, signed) {
        (4, true) => ((raw << 4) as i8 >> 4) as i32,
        (_, true) => raw as i8 as i32,
        _ => raw as i32,
    }
}

/// Writes the slot `spec` describes, computed from `sources`, to `out` in chunks of at most
/// 1 MiB, column band by column band, so memory use is one chunk whatever the weight's size.
/// `release` is called on each part of the sources once no later chunk needs it (the plan
/// writer drops those pages of the mapped model from the resident set).
///
/// Errors: `spec.check` fails, or `out` fails.
pub fn pack(
    spec: &PackSpec,
    sources: &PackSources,
    out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    release: &dyn Fn(&[u8]),
) -> std::io::Result<()> {
    spec.check(sources)
        .map_err(|m| std::io::Error::new(std::io::ErrorKind::InvalidData, m))?;
    let (k, n) = (spec.k, spec.n);
    let row_len = match spec.part {
        PackedPart::Values => row_bytes(k, spec.bits),
        PackedPart::Scales => spec.k_blocks() * 4,
        PackedPart::ZeroPoints => spec.k_blocks(),
    } as usize;
    // An even band keeps column pairs (one stored byte of 4-bit values) together.
    let band = ((PACK_CHUNK / row_len).max(2) & !1) as u64;
    let mut buf = vec![0u8; row_len * band as usize];
    let mut n0 = 0;
    while n0 < n {
        let cols = band.min(n - n0);
        let chunk = &mut buf[..row_len * cols as usize];
        chunk.fill(0);
        match spec.part {
            PackedPart::Values => pack_values(spec, sources.b, n0, cols, chunk),
            PackedPart::Scales => {
                for (i, row) in chunk.chunks_exact_mut(row_len).enumerate() {
                    for (b, out) in row.chunks_exact_mut(4).enumerate() {
                        let p = spec.param_index(n0 + i as u64, b as u64 * spec.block) as usize;
                        out.copy_from_slice(&sources.scales[4 * p..4 * p + 4]);
                    }
                }
            }
            PackedPart::ZeroPoints => {
                let zp = sources.zero_points.unwrap_or_default();
                for (i, row) in chunk.chunks_exact_mut(row_len).enumerate() {
                    for (b, out) in row.iter_mut().enumerate() {
                        let p = spec.param_index(n0 + i as u64, b as u64 * spec.block);
                        let v = integer(raw(zp, spec.bits, p), spec.bits, spec.signed);
                        // The integer fits the byte: i8 when signed, u8 when not.
                        *out = if spec.signed { v as i8 as u8 } else { v as u8 };
                    }
                }
            }
        }
        out(chunk)?;
        // Stored [N, K], a band's values are rows of their own: release them as we go.
        if spec.part == PackedPart::Values && spec.trans_b {
            let bytes = |cols: u64| ((cols * k * u64::from(spec.bits)) / 8) as usize;
            release(&sources.b[bytes(n0)..bytes(n0 + cols).min(sources.b.len())]);
        }
        n0 += cols;
    }
    match spec.part {
        PackedPart::Values => release(sources.b),
        PackedPart::Scales => release(sources.scales),
        PackedPart::ZeroPoints => release(sources.zero_points.unwrap_or_default()),
    }
    Ok(())
}

/// Packs the values of columns `n0..n0 + cols` into `chunk` (`cols` packed rows).
fn pack_values(spec: &PackSpec, b: &[u8], n0: u64, cols: u64, chunk: &mut [u8]) {
    let (k, n, bits) = (spec.k, spec.n, spec.bits);
    let row_len = row_bytes(k, bits) as usize;
    // 4 bits stored [K, N] with whole bytes per column pair (onnxruntime's quantizer's
    // layout): two stored rows `k` and `k + 16` give one packed byte of every column.
    if bits == 4 && !spec.trans_b && n % 2 == 0 && n0 % 2 == 0 && cols % 2 == 0 {
        let (n, n0, cols) = (n as usize, n0 as usize, cols as usize);
        let stored_row = |kk: u64| &b[(kk as usize * n + n0) / 2..][..cols / 2];
        for kk in 0..k {
            let within = kk % GROUP;
            if within >= 16 {
                continue;
            }
            let byte = (kk / GROUP * 16 + within) as usize;
            let lo = stored_row(kk);
            let hi = (kk + 16 < k).then(|| stored_row(kk + 16));
            for (p, &l) in lo.iter().enumerate() {
                let h = hi.map_or(0, |hi| hi[p]);
                chunk[2 * p * row_len + byte] = (l & 0xF) | (h << 4);
                chunk[(2 * p + 1) * row_len + byte] = (l >> 4) | (h & 0xF0);
            }
        }
        return;
    }
    let mut put = |col: u64, kk: u64, v: u8| {
        let row = &mut chunk[col as usize * row_len..][..row_len];
        if bits == 4 {
            let within = kk % GROUP;
            row[(kk / GROUP * 16 + within % 16) as usize] |= v << (4 * (within / 16));
        } else {
            row[kk as usize] = v;
        }
    };
    if spec.trans_b {
        // Stored [N, K]: each column's values are contiguous.
        for col in 0..cols {
            for kk in 0..k {
                put(col, kk, raw(b, bits, (n0 + col) * k + kk));
            }
        }
    } else {
        // Stored [K, N]: read each stored row's slice of the band in order.
        for kk in 0..k {
            for col in 0..cols {
                put(col, kk, raw(b, bits, kk * n + n0 + col));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs a random weight of every supported form and reads every value back through the
    /// layout's decoders (which `kernel::NBitsMatMul::quantized` and `zero_point` call), and
    /// every scale and zero point through the kernels' indexing.
    #[test]
    fn packed_values_and_params_read_back_as_dequantize_linear_indexes_them() {
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        // (k, n, bits, signed, trans_b, axis, block_size, per_tensor)
        let cases = [
            (64, 8, 4, false, false, 0, 32, false),
            (40, 5, 4, true, false, 0, 16, false),
            (40, 6, 4, true, false, 0, 16, false),
            (100, 2, 4, false, false, 1, 0, false),
            (100, 3, 4, false, true, 1, 32, false),
            (37, 6, 8, true, false, 1, 0, false),
            (37, 6, 8, false, true, 0, 0, false),
            (50, 7, 4, true, true, 0, 0, true),
            (96, 4, 8, false, false, 0, 64, false),
        ];
        for (k, n, bits, signed, trans_b, axis, block_size, per_tensor) in cases {
            let block = memc_ir::ops::nbits_k_block(k, trans_b, axis, block_size, per_tensor)
                .expect("a packable case");
            let mut spec = PackSpec {
                layout: LAYOUT.to_string(),
                part: PackedPart::Values,
                b: "w".into(),
                scales: "s".into(),
                zero_points: Some("z".into()),
                k,
                n,
                bits,
                signed,
                trans_b,
                axis: axis as u64,
                block_size,
                per_tensor,
                block,
            };
            let values = (k * n * u64::from(bits)).div_ceil(8) as usize;
            let b: Vec<u8> = (0..values).map(|_| next() as u8).collect();
            let params = spec.param_count();
            let scales: Vec<u8> = (0..params)
                .flat_map(|i| (i as f32 * 0.5 + 0.25).to_le_bytes())
                .collect();
            let zp: Vec<u8> = (0..(params * u64::from(bits)).div_ceil(8))
                .map(|_| next() as u8)
                .collect();
            let sources = PackSources {
                b: &b,
                scales: &scales,
                zero_points: Some(&zp),
            };
            let mut slots = Vec::new();
            for part in [
                PackedPart::Values,
                PackedPart::Scales,
                PackedPart::ZeroPoints,
            ] {
                spec.part = part;
                let mut bytes = Vec::new();
                pack(
                    &spec,
                    &sources,
                    &mut |c| Ok(bytes.extend_from_slice(c)),
                    &|_| {},
                )
                .expect("packs");
                assert_eq!(bytes.len() as u64, spec.byte_size());
                slots.push(bytes);
            }
            let f32_at = |bytes: &[u8], i: u64| {
                f32::from_le_bytes(bytes[4 * i as usize..][..4].try_into().unwrap())
            };
            for nn in 0..n {
                for kk in 0..k {
                    let stored = if trans_b { nn * k + kk } else { kk * n + nn };
                    let want = integer(raw(&b, bits, stored), bits, signed);
                    assert_eq!(
                        packed_value(&slots[0], k, bits, signed, nn, kk),
                        want,
                        "{spec:?} ({nn}, {kk})"
                    );
                    let p = spec.param_index(nn, kk);
                    let slot = nn * spec.k_blocks() + kk / block;
                    assert_eq!(f32_at(&slots[1], slot), f32_at(&scales, p));
                    let zp_want = integer(raw(&zp, bits, p), bits, signed);
                    let zp_byte = slots[2][slot as usize];
                    let zp_got = if signed {
                        zp_byte as i8 as i32
                    } else {
                        zp_byte as i32
                    };
                    assert_eq!(zp_got, zp_want, "{spec:?} ({nn}, {kk})");
                    let zp_read =
                        packed_zero_point(&slots[2], spec.k_blocks(), signed, nn, kk / block);
                    assert_eq!(zp_read, zp_want);
                }
            }
        }
    }

    #[test]
    fn a_spec_whose_block_does_not_follow_from_its_quantization_is_rejected() {
        let spec = PackSpec {
            layout: LAYOUT.to_string(),
            part: PackedPart::Values,
            b: "w".into(),
            scales: "s".into(),
            zero_points: None,
            k: 64,
            n: 4,
            bits: 4,
            signed: false,
            trans_b: false,
            axis: 1,
            block_size: 16,
            per_tensor: false,
            block: 16,
        };
        let b = vec![0u8; 128];
        let scales = vec![0u8; 4 * 64];
        let sources = PackSources {
            b: &b,
            scales: &scales,
            zero_points: None,
        };
        let err = spec.check(&sources).unwrap_err();
        assert!(err.contains("does not follow"), "{err}");
    }

    #[test]
    fn a_slot_in_another_layout_is_rejected() {
        let spec = PackSpec {
            layout: "nbits v1".to_string(),
            part: PackedPart::Scales,
            b: "w".into(),
            scales: "s".into(),
            zero_points: None,
            k: 64,
            n: 4,
            bits: 4,
            signed: false,
            trans_b: false,
            axis: 0,
            block_size: 32,
            per_tensor: false,
            block: 32,
        };
        assert_eq!(
            spec.check_layout().unwrap_err(),
            "it is in the packed layout `nbits v1`, and this memc packs and reads only `nbits v2`"
        );
        let sources = PackSources {
            b: &[],
            scales: &[],
            zero_points: None,
        };
        assert_eq!(spec.check(&sources), Err(spec.check_layout().unwrap_err()));
    }
}
