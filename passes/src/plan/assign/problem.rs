//! The preprocessed problem every strategy works on.
//!
//! Intervals that can never collide with anything (zero size, or an empty step range) are set
//! aside at offset 0; the rest, the *core*, get dense indices. Schedule steps are compressed to
//! *sections*: section `k` is the span between the `k`-th and `k+1`-th distinct endpoint, and
//! a buffer covers the sections `[lo, hi)`. Two core buffers are live at a common step exactly
//! when their section ranges intersect.

use super::Interval;

/// The core of an offset-assignment problem, indexed by core buffer.
pub(crate) struct Problem {
    /// For each core buffer, its index in the caller's slice.
    pub original: Vec<u32>,
    pub size: Vec<u64>,
    /// The alignment, at least 1 (an alignment of 0 is read as 1).
    pub align: Vec<u64>,
    /// The first step the buffer is live.
    pub start: Vec<u64>,
    /// One past the last step the buffer is live.
    pub end: Vec<u64>,
    /// First section the buffer covers.
    pub lo: Vec<u32>,
    /// One past the last section the buffer covers.
    pub hi: Vec<u32>,
    pub n_sections: usize,
    /// The total size of the buffers live in each section.
    pub section_load: Vec<u64>,
    /// The largest entry of `section_load`: a lower bound on every arena.
    pub load: u64,
}

impl Problem {
    pub fn new(intervals: &[Interval]) -> Problem {
        let is_core = |iv: &Interval| iv.size > 0 && iv.start < iv.end;
        let mut times: Vec<u64> = intervals
            .iter()
            .filter(|iv| is_core(iv))
            .flat_map(|iv| [iv.start, iv.end])
            .collect();
        times.sort_unstable();
        times.dedup();
        let rank = |t: u64| -> u32 {
            let r = times
                .binary_search(&t)
                .expect("every core endpoint is in `times`");
            u32::try_from(r).expect("fewer than 2^32 distinct endpoints")
        };
        let n_sections = times.len().saturating_sub(1);
        let mut p = Problem {
            original: Vec::new(),
            size: Vec::new(),
            align: Vec::new(),
            start: Vec::new(),
            end: Vec::new(),
            lo: Vec::new(),
            hi: Vec::new(),
            n_sections,
            section_load: Vec::new(),
            load: 0,
        };
        for (idx, iv) in intervals.iter().enumerate() {
            if !is_core(iv) {
                continue;
            }
            p.original
                .push(u32::try_from(idx).expect("fewer than 2^32 intervals"));
            p.size.push(iv.size);
            p.align.push(iv.align.max(1));
            p.start.push(iv.start);
            p.end.push(iv.end);
            p.lo.push(rank(iv.start));
            p.hi.push(rank(iv.end));
        }
        // Difference array over sections.
        let mut delta = vec![0i128; n_sections + 1];
        for b in 0..p.len() {
            delta[p.lo[b] as usize] += i128::from(p.size[b]);
            delta[p.hi[b] as usize] -= i128::from(p.size[b]);
        }
        let mut live = 0i128;
        p.section_load = (0..n_sections)
            .map(|s| {
                live += delta[s];
                u64::try_from(live).unwrap_or(u64::MAX)
            })
            .collect();
        p.load = p.section_load.iter().copied().max().unwrap_or(0);
        p
    }

    /// The number of core buffers.
    pub fn len(&self) -> usize {
        self.size.len()
    }

    /// The number of steps buffer `b` is live.
    #[inline]
    pub fn duration(&self, b: usize) -> u64 {
        self.end[b] - self.start[b]
    }

    /// The number of sections buffer `b` covers.
    #[inline]
    pub fn width(&self, b: usize) -> u32 {
        self.hi[b] - self.lo[b]
    }

    /// Spreads core offsets back over the caller's intervals (the rest sit at 0).
    pub fn expand(&self, n_intervals: usize, core_offsets: &[u64]) -> Vec<u64> {
        let mut offsets = vec![0u64; n_intervals];
        for (b, &off) in core_offsets.iter().enumerate() {
            offsets[self.original[b] as usize] = off;
        }
        offsets
    }

    /// The arena a core placement needs.
    pub fn arena(&self, core_offsets: &[u64]) -> u64 {
        core_offsets
            .iter()
            .zip(&self.size)
            .map(|(&o, &s)| o + s)
            .max()
            .unwrap_or(0)
    }
}

/// Rounds `x` up to a multiple of `align` (at least 1; a power of two is the fast path, any
/// other alignment still comes out right).
#[inline]
pub(crate) fn align_up(x: u64, align: u64) -> u64 {
    if align.is_power_of_two() {
        (x + (align - 1)) & !(align - 1)
    } else {
        x.div_ceil(align) * align
    }
}
