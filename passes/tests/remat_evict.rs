//! The eviction search (`memc_passes::remat::evict`) on random DAGs of `tests/remat_oracle.rs`'s
//! sweep (ops on 32x32 f32: MatMul, Softmax, Transpose, Add) in memc's base schedule, as the
//! remat model sees them, at their tightest budget, four buffers (16 KiB), which no set of gap
//! candidates meets (selection over them stays at 20 KiB):
//! - seed 10 (33 ops) needs two-level recomputation: the exact oracle holds one value as a
//!   checkpoint, derives two values again from it at one point and a third from one of those
//!   at a later point;
//! - seed 17 (39 ops) needs one value held most of the schedule as a checkpoint and many values
//!   derived again from it together late in the schedule (the oracle: 18 at one point).

use memc_passes::remat::candidates::{candidates, Base};
use memc_passes::remat::evict;
use memc_passes::remat::model::{Candidate, Model, Op, Profile, Value};
use memc_passes::remat::select::{select, Work};

/// Each op: its operands (values; value 0 is the graph input, value `i + 1` op `i`'s result)
/// and FLOPs (65536 a MatMul, 5120 a Softmax, 1024 an Add, 0 a Transpose).
const OPS: [(&[usize], u64); 33] = [
    (&[0, 0], 65536),
    (&[1], 0),
    (&[1], 5120),
    (&[3, 2], 65536),
    (&[3], 65536),
    (&[5], 0),
    (&[5], 65536),
    (&[7], 0),
    (&[6], 65536),
    (&[9], 65536),
    (&[6], 65536),
    (&[6], 0),
    (&[11], 65536),
    (&[11], 5120),
    (&[14, 8], 65536),
    (&[15], 65536),
    (&[15], 5120),
    (&[17], 65536),
    (&[18], 0),
    (&[19, 4], 65536),
    (&[19], 65536),
    (&[21], 5120),
    (&[22], 0),
    (&[23], 65536),
    (&[12], 65536),
    (&[12, 25], 65536),
    (&[24], 5120),
    (&[24], 5120),
    (&[27, 26], 1024),
    (&[28, 26], 1024),
    (&[29], 0),
    (&[30], 5120),
    (&[31], 65536),
];

/// Seed 17's ops: each with its result (the e-graph proves some ops equal to earlier ones,
/// which then make the same value), operands and FLOPs, in the same units as [`OPS`].
const OPS_SEED_17: [(usize, &[usize], u64); 39] = [
    (1, &[0], 65536),
    (2, &[1, 1], 1024),
    (1, &[0], 65536),
    (3, &[1], 0),
    (4, &[1, 2], 1024),
    (5, &[2, 2], 1024),
    (6, &[4], 0),
    (7, &[3], 0),
    (8, &[3], 65536),
    (9, &[7], 0),
    (10, &[9, 5], 1024),
    (11, &[10, 9], 65536),
    (3, &[1], 0),
    (8, &[3], 65536),
    (12, &[8], 65536),
    (13, &[12], 5120),
    (14, &[1], 5120),
    (15, &[14, 11], 1024),
    (16, &[14], 0),
    (17, &[1], 65536),
    (18, &[17], 65536),
    (19, &[15], 65536),
    (20, &[15], 5120),
    (21, &[20], 65536),
    (22, &[20, 20], 1024),
    (23, &[0, 22], 65536),
    (23, &[0, 22], 65536),
    (24, &[23], 65536),
    (25, &[23, 23], 65536),
    (26, &[20], 0),
    (27, &[8, 26], 65536),
    (28, &[8, 27], 65536),
    (21, &[20], 65536),
    (29, &[21, 21], 1024),
    (30, &[8, 29], 65536),
    (31, &[8, 18], 65536),
    (32, &[18, 31], 65536),
    (33, &[31], 65536),
    (34, &[30, 30], 65536),
];

const BYTES: u64 = 32 * 32 * 4;

/// The model of `ops` (result, operands, FLOPs) over one graph input, value 0; the last value
/// is returned. Adds run in place.
fn model_of(ops: &[(usize, &[usize], u64)]) -> Model {
    let value = |input: bool, producer: Option<usize>| Value {
        size: BYTES,
        elem_bytes: 4,
        view_of: None,
        ty: 0,
        input,
        output: false,
        producer,
    };
    let mut model = Model::default();
    model.values.push(value(true, None));
    for (i, &(result, operands, flops)) in ops.iter().enumerate() {
        if result == model.values.len() {
            model.values.push(value(false, Some(i)));
        }
        model.ops.push(Op {
            results: vec![result],
            operands: operands.to_vec(),
            flops,
            scratch: 0,
            in_place: flops == 1024,
            recompute: true,
            kind: "Op".into(),
        });
    }
    model.values.last_mut().expect("ops were made").output = true;
    model
}

fn model() -> Model {
    let ops: Vec<(usize, &[usize], u64)> = OPS
        .iter()
        .enumerate()
        .map(|(i, &(operands, flops))| (i + 1, operands, flops))
        .collect();
    model_of(&ops)
}

/// Checks that no set of gap candidates meets `target` (four buffers) on `model` while the
/// eviction search does, and that the model confirms the search's load and FLOPs; returns what
/// the search chose.
fn search_beyond_the_candidates(model: &Model, target: u64) -> (Vec<Candidate>, Profile) {
    let base = Base::new(model);
    let cands = candidates(model, &base);
    let selection = select(model, &cands, target, &[], &Work::new(3_000_000));
    assert!(
        !selection.reached,
        "no set of gap candidates meets four buffers"
    );
    let (chosen, profile) = evict::search(model, target, &Work::new(2_000_000))
        .expect("the eviction search meets four buffers");
    let refs: Vec<_> = chosen.iter().collect();
    let again = model.evaluate(&refs);
    assert!(again.load <= target, "the model confirms {}", again.load);
    assert_eq!(again.extra_flops, profile.extra_flops);
    (chosen, profile)
}

#[test]
fn two_level_recomputation_meets_what_the_candidates_cannot() {
    let model = model();
    let target = 4 * BYTES;
    assert_eq!(
        model.evaluate(&[]).load,
        5 * BYTES,
        "the base schedule holds five"
    );
    let (chosen, profile) = search_beyond_the_candidates(&model, target);
    // One recomputation serves another at a later point (two levels).
    let two_level = chosen.iter().any(|c| {
        c.chain.iter().any(|&o| {
            model.ops[o].operands.iter().any(|&x| {
                chosen.iter().any(|d| {
                    d.at < c.at && d.chain.iter().any(|&q| model.ops[q].results.contains(&x))
                })
            })
        })
    });
    assert!(
        two_level,
        "a recomputed value is derived from one recomputed earlier"
    );
    // The oracle's optimum is 267,264 FLOPs of recomputation in its accounting (every clone
    // counted); memc's moves (originals that no longer run) cost less.
    assert!(profile.extra_flops <= 267_264, "{}", profile.extra_flops);
    // Never over the target's reach: without a budget of work it finds nothing.
    assert!(evict::search(&model, target, &Work::new(0)).is_none());
}

#[test]
fn a_checkpoint_serves_many_recomputations_at_one_point() {
    let model = model_of(&OPS_SEED_17);
    let target = 4 * BYTES;
    let (chosen, profile) = search_beyond_the_candidates(&model, target);
    // Many values derived again together at one point, from what is held there.
    let longest = chosen.iter().map(|c| c.chain.len()).max().unwrap_or(0);
    assert!(
        longest >= 8,
        "the longest chain at one point has {longest} ops"
    );
    // The oracle's optimum is 931,840 FLOPs of recomputation in its accounting (every clone
    // counted).
    assert!(profile.extra_flops <= 931_840, "{}", profile.extra_flops);
}
