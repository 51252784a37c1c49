//! Large generated traces for the tests: the `transformer` trace of
//! `bench/dsa/make_trace.py`, generated the same way (the same random numbers, the same rows in
//! the same order), so that the tests plan what `bench/dsa.md` measures.

use super::Interval;

/// SplitMix64, as in `make_trace.py` (the tests' random numbers too).
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform enough in `[lo, hi)`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

const TOKENS: u64 = 4096;
const HIDDEN: u64 = 4096;
const HEADS: u64 = 32;
const SEQ: u64 = 1024;
const BATCH: u64 = 4;
const VOCAB: u64 = 32000;

const ACT: u64 = TOKENS * HIDDEN * 2;
const ACT3: u64 = TOKENS * 3 * HIDDEN * 2;
const ACT4: u64 = TOKENS * 4 * HIDDEN * 2;
const ATT: u64 = BATCH * HEADS * SEQ * SEQ * 2;
const ATT_MASK: u64 = BATCH * HEADS * SEQ * SEQ;
const ACT_MASK: u64 = TOKENS * HIDDEN;
const STAT: u64 = TOKENS * 4;

/// A forward op: its outputs `(size, saved for the backward pass)` and the size of its weight
/// gradient, if it has weights.
type ForwardOp = (&'static [(u64, bool)], Option<u64>);

/// The forward ops of one layer.
const LAYER: &[ForwardOp] = &[
    (
        &[(ACT, true), (STAT, true), (STAT, true)],
        Some(2 * HIDDEN * 4),
    ), // ln1
    (&[(ACT3, true)], Some(HIDDEN * 3 * HIDDEN * 2)), // qkv
    (&[(ATT, false)], None),                          // q @ k^T
    (&[(ATT, false)], None),                          // scale + mask
    (&[(ATT, true)], None),                           // softmax
    (&[(ATT_MASK, true), (ATT, true)], None),         // dropout
    (&[(ACT, false)], None),                          // probs @ v
    (&[(ACT, true)], None),                           // merge heads
    (&[(ACT, false)], Some(HIDDEN * HIDDEN * 2)),     // projection
    (&[(ACT_MASK, true), (ACT, false)], None),        // dropout
    (&[(ACT, true)], None),                           // residual add
    (
        &[(ACT, true), (STAT, true), (STAT, true)],
        Some(2 * HIDDEN * 4),
    ), // ln2
    (&[(ACT4, true)], Some(HIDDEN * 4 * HIDDEN * 2)), // fc1
    (&[(ACT4, true)], None),                          // gelu
    (&[(ACT, false)], Some(HIDDEN * 4 * HIDDEN * 2)), // fc2
    (&[(ACT_MASK, true), (ACT, false)], None),        // dropout
    (&[(ACT, true)], None),                           // residual add
];

/// `make_trace.py transformer --layers LAYERS --seed SEED`, in row order.
pub(crate) fn transformer(layers: usize, seed: u64) -> Vec<Interval> {
    let mut rng = Rng(seed);
    let mut rows: Vec<Interval> = Vec::new();
    let row = |rows: &mut Vec<Interval>, start: u64, end: u64, size: u64| {
        rows.push(Interval {
            size,
            start,
            end,
            align: 1,
        });
    };
    let temporaries = |rng: &mut Rng, rows: &mut Vec<Interval>, step: u64| {
        for _ in 0..rng.range(6, 19) {
            let mut size = if rng.range(0, 100) < 85 {
                1 << rng.range(2, 16)
            } else {
                1 << rng.range(16, 25)
            };
            size += rng.range(0, size);
            let roll = rng.range(0, 100);
            let life = if roll < 70 {
                1
            } else if roll < 95 {
                rng.range(2, 5)
            } else {
                rng.range(5, 41)
            };
            rows.push(Interval {
                size,
                start: step,
                end: step + life,
                align: 1,
            });
        }
    };
    let mut step = 0u64;
    let mut pending: Vec<(u64, u64)> = Vec::new();
    let mut saved: Vec<Vec<Vec<(u64, u64)>>> = Vec::new();
    row(&mut rows, step, step + 2, ACT);
    temporaries(&mut rng, &mut rows, step);
    step += 1;
    for _ in 0..layers {
        let mut layer_saved = Vec::new();
        for (outputs, _) in LAYER {
            for (lower, size) in pending.drain(..) {
                row(&mut rows, lower, step + 1, size);
            }
            let mut op_saved = Vec::new();
            for &(size, keep) in outputs.iter() {
                if keep {
                    op_saved.push((step, size));
                } else {
                    pending.push((step, size));
                }
            }
            layer_saved.push(op_saved);
            temporaries(&mut rng, &mut rows, step);
            step += 1;
        }
        saved.push(layer_saved);
    }
    for (lower, size) in pending.drain(..) {
        row(&mut rows, lower, step + 1, size);
    }
    let logits = TOKENS * VOCAB * 2;
    row(&mut rows, step, step + 3, logits);
    temporaries(&mut rng, &mut rows, step);
    step += 1;
    row(&mut rows, step, step + 2, logits);
    temporaries(&mut rng, &mut rows, step);
    step += 1;
    let mut grad_lower = step;
    row(&mut rows, step, step + 1, ACT);
    step += 1;
    let mut buckets: Vec<(u64, u64)> = Vec::new();
    for layer in (0..layers).rev() {
        for op in (0..LAYER.len()).rev() {
            let (outputs, weight) = LAYER[op];
            for &(lower, size) in &saved[layer][op] {
                row(&mut rows, lower, step + 2, size);
            }
            row(&mut rows, grad_lower, step + 2, outputs[0].0);
            grad_lower = step;
            temporaries(&mut rng, &mut rows, step);
            step += 1;
            if let Some(size) = weight {
                buckets.push((step, size));
            }
            temporaries(&mut rng, &mut rows, step);
            step += 1;
        }
        if layer % 2 == 0 {
            for (lower, size) in buckets.drain(..) {
                row(&mut rows, lower, step + 1, size);
            }
            temporaries(&mut rng, &mut rows, step);
            step += 1;
        }
    }
    row(&mut rows, grad_lower, step + 1, ACT);
    temporaries(&mut rng, &mut rows, step);
    rows
}
