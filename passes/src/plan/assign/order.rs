//! Static orders of the core buffers, named by the keys they sort by (MiniMalloc's naming).
//!
//! Each letter is one key, compared in turn, larger first: `T` the fullest section the buffer
//! covers (its section's total live size), `Z` size, `W` lifetime in steps, `C` sections
//! covered, `A` area (size times lifetime); `S` is the start step, earlier first. Remaining
//! ties go to the caller's order of the intervals.

use super::problem::Problem;
use std::cmp::Reverse;

/// Per-buffer keys, computed once per problem.
pub(crate) struct Keys {
    /// The total live size of the fullest section each buffer covers.
    pub fullest: Vec<u64>,
}

impl Keys {
    pub fn new(p: &Problem) -> Keys {
        let table = SparseMax::new(&p.section_load);
        let fullest = (0..p.len())
            .map(|b| table.max(p.lo[b] as usize, p.hi[b] as usize))
            .collect();
        Keys { fullest }
    }

    fn key(&self, p: &Problem, b: usize, letter: u8) -> u128 {
        match letter {
            b'T' => u128::from(self.fullest[b]),
            b'Z' => u128::from(p.size[b]),
            b'W' => u128::from(p.duration(b)),
            b'C' => u128::from(p.width(b)),
            b'A' => u128::from(p.size[b]) * u128::from(p.duration(b)),
            b'S' => u128::from(u64::MAX - p.start[b]),
            _ => unreachable!("order keys are letters of TZWCAS, not {}", letter as char),
        }
    }

    /// The core buffers sorted by `keys` (see the module doc).
    pub fn order(&self, p: &Problem, keys: &str) -> Vec<u32> {
        let letters = keys.as_bytes();
        let mut order: Vec<u32> = (0..p.len() as u32).collect();
        order.sort_by_cached_key(|&b| {
            let b = b as usize;
            let mut k = [0u128; 3];
            for (slot, &letter) in k.iter_mut().zip(letters) {
                *slot = self.key(p, b, letter);
            }
            (Reverse(k), b)
        });
        order
    }
}

/// The rank of each buffer in `order`.
pub(crate) fn ranks(order: &[u32]) -> Vec<u32> {
    let mut rank = vec![0u32; order.len()];
    for (r, &b) in order.iter().enumerate() {
        rank[b as usize] = r as u32;
    }
    rank
}

/// Range maximum in `O(1)` after `O(n log n)` preprocessing.
struct SparseMax {
    levels: Vec<Vec<u64>>,
}

impl SparseMax {
    fn new(values: &[u64]) -> SparseMax {
        let mut levels = vec![values.to_vec()];
        let mut width = 1;
        while 2 * width <= values.len() {
            let prev = levels.last().expect("levels start with the values");
            let next: Vec<u64> = (0..=values.len() - 2 * width)
                .map(|i| prev[i].max(prev[i + width]))
                .collect();
            levels.push(next);
            width *= 2;
        }
        SparseMax { levels }
    }

    /// The maximum of `values[lo..hi]` (`lo < hi`).
    fn max(&self, lo: usize, hi: usize) -> u64 {
        let level = (usize::BITS - 1 - (hi - lo).leading_zeros()) as usize;
        let row = &self.levels[level];
        row[lo].max(row[hi - (1 << level)])
    }
}

#[cfg(test)]
mod tests {
    use super::SparseMax;

    #[test]
    fn sparse_max_matches_a_scan() {
        let values: Vec<u64> = (0..37u64).map(|i| (i * 7919) % 101).collect();
        let table = SparseMax::new(&values);
        for lo in 0..values.len() {
            for hi in lo + 1..=values.len() {
                assert_eq!(table.max(lo, hi), *values[lo..hi].iter().max().unwrap());
            }
        }
    }
}
