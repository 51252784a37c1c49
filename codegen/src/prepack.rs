//! Constant operands of matrix products laid out for the CPU's GEMM when the plan file is
//! written, so that no run packs a weight.
//!
//! - `A` packed whole ([`OperandLayout::PackedA`]). memc-gemm packs `A` (`MC x KC` blocks in
//!   strips of `MR` rows) again for every column block of a product: once per 128 output
//!   columns. For a convolution's weights (`A` is `out_channels x in_channels * taps`, `B` the
//!   column matrix) with few output pixels that copy costs about as much as the arithmetic.
//!   The slot holds the weight in memc-gemm's whole-matrix layout
//!   ([`memc_gemm::pack_a_whole`]: it depends on the element size only, not on the
//!   instruction set), and the contraction's [`crate::kernel::PackedOperand`] points there; the
//!   CPU's loop reads the strips in place. The contraction keeps its plain `A` view of the
//!   weight, so every other reader of a plan (the reference interpreter, the MLIR emitter, the
//!   kernel text) is unchanged and checks the same product. The price is file size: the
//!   weight is stored twice; a run on the CPU never reads the plain copy, so its pages are
//!   never mapped in.
//! - `B` packed whole ([`OperandLayout::PackedB`], [`memc_gemm::pack_b_whole`]: strips of 32
//!   columns along all of `K`, which every instruction set's microkernel reads). A product
//!   packs a constant `B` (a MatMul's or Gemm's weight, transposed or not) into panels on every
//!   run otherwise, or, with few rows, reads it in place `n` values per row apart; the strips are
//!   read front to back instead, and the plan reserves no `B` panel. As with `A`, the
//!   contraction's plain `b` stays for every other reader.
//! - [`OperandLayout::Winograd`]: a 3x3 convolution's weight transformed for Winograd F(2x2,
//!   3x3) (16 matrices `out_channels x in_channels`, each packed as `A`), for a product the
//!   CPU runs that way (`Contract::winograd`); 16/9 of the weight's size.
//! - [`OperandLayout::RowMajor`]: a row-major copy of a transposed `B`, which plans written
//!   before `PackedB` may hold; this version no longer writes it.
//!
//! Guarantees: [`OperandPack::check`] bounds every element the packer reads by the source
//! weight's bytes; [`pack`] writes exactly [`OperandPack::byte_size`] bytes.

use crate::kernel::Scalar;
use serde::{Deserialize, Serialize};

/// The layout of an [`OperandPack`] slot.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperandLayout {
    /// Each matrix as [`memc_gemm::pack_a_whole`] packs it (a product's `A`).
    PackedA,
    /// Each matrix as [`memc_gemm::pack_b_whole`] packs it (a product's `B`).
    PackedB,
    /// Each matrix row-major, `rows x cols` contiguous values.
    RowMajor,
    /// Each matrix (a 3x3 convolution's `A`, `rows x 9 * channels`) transformed for Winograd
    /// F(2x2, 3x3) as [`memc_gemm::pack_winograd_weights`] packs it (f32 only).
    Winograd,
}

/// How to compute one slot from a model weight (an `elem` array in ONNX's little-endian
/// layout) while the plan file is written: the matrices of a product operand that is that
/// weight, in `layout`, one after the other.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OperandPack {
    /// The model weight the matrices are read from.
    pub weight: String,
    pub elem: Scalar,
    pub layout: OperandLayout,
    pub rows: u64,
    pub cols: u64,
    /// Elements from the weight's start to element `(0, 0)` of the first matrix.
    pub offset: u64,
    pub row_stride: i64,
    pub col_stride: i64,
    /// The distinct matrices: every index of these axes (extent, element stride), row-major,
    /// packed one after the other.
    pub matrices: Vec<(u64, i64)>,
}

impl OperandPack {
    /// Values of one matrix in the slot.
    pub fn matrix_len(&self) -> u64 {
        match self.layout {
            OperandLayout::PackedA => memc_gemm::packed_a_len(self.rows, self.cols),
            OperandLayout::PackedB => memc_gemm::packed_b_len(self.rows, self.cols),
            OperandLayout::RowMajor => self.rows.saturating_mul(self.cols),
            OperandLayout::Winograd => memc_gemm::winograd_weights_len(self.rows, self.cols / 9),
        }
    }

    fn n_matrices(&self) -> u64 {
        self.matrices
            .iter()
            .fold(1u64, |acc, &(e, _)| acc.saturating_mul(e))
    }

    pub fn byte_size(&self) -> u64 {
        self.n_matrices()
            .saturating_mul(self.matrix_len())
            .saturating_mul(self.elem.size())
    }

    /// The slot's name: the weight's, marked with the layout.
    pub fn slot_name(&self) -> String {
        match self.layout {
            OperandLayout::PackedA => format!("{}#packed_a", self.weight),
            OperandLayout::PackedB => format!("{}#packed_b", self.weight),
            OperandLayout::RowMajor => format!("{}#row_major", self.weight),
            OperandLayout::Winograd => format!("{}#winograd", self.weight),
        }
    }

    /// The spec's own rules: a float type the GEMM computes in, every extent at least 1, and
    /// sizes far from overflow.
    pub fn check_layout(&self) -> Result<(), String> {
        if !matches!(self.elem, Scalar::F32 | Scalar::F64) {
            return Err(format!("a packed product operand in {}", self.elem.name()));
        }
        const LIMIT: u64 = 1 << 40;
        let dims_ok = [self.rows, self.cols]
            .into_iter()
            .chain(self.matrices.iter().map(|&(e, _)| e))
            .all(|d| (1..LIMIT).contains(&d));
        let strides_ok = [self.row_stride, self.col_stride]
            .into_iter()
            .chain(self.matrices.iter().map(|&(_, s)| s))
            .all(|s| s.unsigned_abs() < LIMIT);
        if !dims_ok || !strides_ok || self.offset >= LIMIT || self.matrices.len() > 8 {
            return Err("a packed product operand with extents out of range".into());
        }
        if self.layout == OperandLayout::Winograd
            && (self.elem != Scalar::F32 || self.cols % 9 != 0)
        {
            return Err("a Winograd operand that is not f32 with 9 columns per channel".into());
        }
        if self.byte_size() >= LIMIT {
            return Err("a packed product operand that is too large".into());
        }
        Ok(())
    }

    /// Checks that every element the spec reads lies in `source` (the weight's bytes).
    pub fn check(&self, source: &[u8]) -> Result<(), String> {
        self.check_layout()?;
        let (lo, hi) = crate::kernel::element_span(
            self.matrices
                .iter()
                .copied()
                .chain([(self.rows, self.row_stride), (self.cols, self.col_stride)]),
        );
        let (lo, hi) = (self.offset as i128 + lo, self.offset as i128 + hi);
        let elems = (source.len() as u64 / self.elem.size()) as i128;
        if lo < 0 || hi >= elems {
            return Err(format!(
                "it reads elements {lo}..={hi} of `{}`, which has {elems}",
                self.weight
            ));
        }
        Ok(())
    }
}

/// Writes the slot `spec` describes from the weight's bytes `source`, one matrix at a time
/// through `write`. `spec` passed [`OperandPack::check`] against `source`.
pub fn pack(
    spec: &OperandPack,
    source: &[u8],
    write: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    match spec.elem {
        Scalar::F64 => pack_typed::<f64, 8>(spec, source, f64::from_le_bytes, write),
        _ => pack_typed::<f32, 4>(spec, source, f32::from_le_bytes, write),
    }
}

trait LeBytes<const N: usize>: Sized {
    fn le_bytes(self) -> [u8; N];
    /// `packed` = the Winograd transform of the `m x k` row-major `matrix`
    /// ([`OperandLayout::Winograd`], f32 only: `check_layout` refuses others).
    fn pack_winograd(packed: &mut [Self], matrix: &mut [Self], m: usize, k: usize);
}

impl LeBytes<4> for f32 {
    fn le_bytes(self) -> [u8; 4] {
        self.to_le_bytes()
    }

    fn pack_winograd(packed: &mut [f32], matrix: &mut [f32], m: usize, k: usize) {
        let a = memc_gemm::Mat {
            ptr: matrix.as_mut_ptr(),
            rs: k as isize,
            cs: 1,
        };
        assert!(packed.len() as u64 >= memc_gemm::winograd_weights_len(m as u64, k as u64 / 9));
        assert!(matrix.len() >= m * (k / 9) * 9);
        // SAFETY: `matrix` holds `m x k` values (`k` a multiple of 9), `packed` the transformed
        // length (both asserted).
        unsafe { memc_gemm::pack_winograd_weights(packed.as_mut_ptr(), a, m, k / 9) }
    }
}

impl LeBytes<8> for f64 {
    fn le_bytes(self) -> [u8; 8] {
        self.to_le_bytes()
    }

    fn pack_winograd(_: &mut [f64], _: &mut [f64], _: usize, _: usize) {
        // `OperandPack::check_layout` refuses a Winograd operand of f64.
    }
}

fn pack_typed<T: memc_gemm::Elem + LeBytes<N>, const N: usize>(
    spec: &OperandPack,
    source: &[u8],
    decode: fn([u8; N]) -> T,
    write: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let (m, k) = (spec.rows as usize, spec.cols as usize);
    let value = |index: i64| {
        let at = index as usize * N;
        decode(source[at..at + N].try_into().expect("N bytes"))
    };
    let mut matrix = vec![T::ZERO; m * k];
    let mut packed = match spec.layout {
        OperandLayout::PackedA | OperandLayout::PackedB | OperandLayout::Winograd => {
            vec![T::ZERO; spec.matrix_len() as usize]
        }
        OperandLayout::RowMajor => Vec::new(),
    };
    let mut bytes = Vec::with_capacity(spec.matrix_len() as usize * N);
    for index in 0..spec.n_matrices() {
        // The matrix's first element: the index's digits along `matrices`, row-major.
        let mut left = index;
        let mut origin = spec.offset as i64;
        for &(extent, stride) in spec.matrices.iter().rev() {
            origin += (left % extent) as i64 * stride;
            left /= extent;
        }
        for i in 0..m {
            for p in 0..k {
                matrix[i * k + p] =
                    value(origin + i as i64 * spec.row_stride + p as i64 * spec.col_stride);
            }
        }
        let values = match spec.layout {
            OperandLayout::RowMajor => &matrix,
            OperandLayout::Winograd => {
                T::pack_winograd(&mut packed, &mut matrix, m, k);
                &packed
            }
            OperandLayout::PackedA | OperandLayout::PackedB => {
                let matrix = memc_gemm::Mat {
                    ptr: matrix.as_mut_ptr(),
                    rs: k as isize,
                    cs: 1,
                };
                // SAFETY: `matrix` holds `m x k` values, row-major (a `B`'s `m` is its `K`);
                // `packed` holds `matrix_len()` values, `packed_a_len(m, k)` or
                // `packed_b_len(m, k)` by the layout.
                unsafe {
                    if spec.layout == OperandLayout::PackedA {
                        memc_gemm::pack_a_whole(packed.as_mut_ptr(), matrix, m, k)
                    } else {
                        memc_gemm::pack_b_whole(packed.as_mut_ptr(), matrix, m, k)
                    }
                };
                &packed
            }
        };
        bytes.clear();
        bytes.extend(values.iter().flat_map(|&v| v.le_bytes()));
        write(&bytes)?;
    }
    Ok(())
}
