//! ONNX's packing of sub-byte elements, and memc's unpacked form.
//!
//! ONNX stores 4-bit elements (int4, uint4, float4 E2M1) two per byte, the first in the low
//! four bits, and 2-bit elements (int2, uint2) four per byte from the least significant bits
//! up; a last partial byte is padded with zero bits. memc keeps sub-byte elements one per
//! byte wherever kernels address them (the arena, the runtime's tensors, `.npy` files): the
//! element's code in the low bits and zero above, as numpy's `ml_dtypes` arrays hold them. So
//! these two functions are the only place the two forms meet: where ONNX bytes (weights,
//! `TensorProto`s) become tensors and back.

use crate::ElemType;

/// The elements of `packed` (ONNX's packing of `n` elements of `elem`), one per byte. For a
/// type of 8 bits or more, `packed` itself.
///
/// `packed` must hold `ceil(n * bits / 8)` bytes; missing bytes read as zero.
pub fn unpack(elem: ElemType, packed: &[u8], n: usize) -> Vec<u8> {
    let bits = elem.bits() as usize;
    if bits >= 8 {
        return packed.to_vec();
    }
    let per_byte = 8 / bits;
    let mask = (1u8 << bits) - 1;
    (0..n)
        .map(|i| {
            let byte = packed.get(i / per_byte).copied().unwrap_or(0);
            (byte >> ((i % per_byte) * bits)) & mask
        })
        .collect()
}

/// ONNX's packing of `unpacked` (one element of `elem` per byte; bits above the element's
/// width are ignored). For a type of 8 bits or more, `unpacked` itself.
pub fn pack(elem: ElemType, unpacked: &[u8]) -> Vec<u8> {
    let bits = elem.bits() as usize;
    if bits >= 8 {
        return unpacked.to_vec();
    }
    let per_byte = 8 / bits;
    let mask = (1u8 << bits) - 1;
    unpacked
        .chunks(per_byte)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .fold(0u8, |acc, (j, &v)| acc | ((v & mask) << (j * bits)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_bit_elements_pack_low_nibble_first() {
        let unpacked = [0x1, 0xf, 0x7];
        let packed = pack(ElemType::I4, &unpacked);
        assert_eq!(packed, vec![0xf1, 0x07]);
        assert_eq!(unpack(ElemType::I4, &packed, 3), unpacked.to_vec());
    }

    #[test]
    fn two_bit_elements_pack_from_the_low_bits() {
        let unpacked = [1, 2, 3, 0, 3];
        let packed = pack(ElemType::U2, &unpacked);
        assert_eq!(packed, vec![0b00_11_10_01, 0b11]);
        assert_eq!(unpack(ElemType::U2, &packed, 5), unpacked.to_vec());
    }

    #[test]
    fn whole_byte_types_are_unchanged() {
        assert_eq!(unpack(ElemType::U8, &[1, 2], 2), vec![1, 2]);
        assert_eq!(pack(ElemType::F8E5M2, &[1, 2]), vec![1, 2]);
    }
}
