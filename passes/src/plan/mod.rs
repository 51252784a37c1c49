//! The IR-independent planning core: buffers with sizes and live ranges in, offsets out.
//!
//! A compiler with its own IR describes each buffer by its size in bytes, the half-open range
//! of schedule steps `[start, end)` during which it holds a value, its alignment, and an
//! optional [`Constraint`]: a view must alias another buffer at a fixed offset (Reshape of a
//! contiguous tensor), and an in-place result may reuse the memory of an input that dies at
//! the op that produces it. [`plan`] returns an offset for every buffer and the arena size,
//! with the lower bound LOAD (the largest total size live at one step), so the caller can
//! report how close the plan is to optimal.
//!
//! ```
//! use memc_passes::plan::{plan, BufferSpec, Constraint, PlanOptions};
//! // Two buffers live at the same time, and a third that starts when the first dies.
//! let buffers = vec![
//!     BufferSpec::new(1024, 0, 2),
//!     BufferSpec::new(512, 1, 3),
//!     BufferSpec::new(1024, 2, 4),
//! ];
//! let result = plan(&buffers, &PlanOptions::default()).expect("a valid problem");
//! assert_eq!(result.load, 1536);
//! assert_eq!(result.arena_size, 1536); // the third buffer reuses the first one's bytes
//! // A view adds no memory: it lives inside its base.
//! let mut with_view = buffers.clone();
//! with_view.push(BufferSpec::new(1024, 3, 5).with_constraint(Constraint::AliasOf { base: 2, offset: 0 }));
//! let result = plan(&with_view, &PlanOptions::default()).expect("a valid problem");
//! assert_eq!(result.offsets[3], result.offsets[2]);
//! ```
//!
//! Layers: [`groups`] resolves constraints into placement groups (a view and its base, an
//! in-place result and its input, become one interval); [`assign`] places plain intervals with
//! several strategies and a time-bounded improvement search, keeping the best; the result is
//! checked by [`crate::validate`], which shares no code with either.

pub mod assign;
pub mod groups;

pub use assign::{assign_offsets, Interval};
pub use groups::{
    group_intervals, load_with_sharing, plan, BufferSpec, Constraint, PlanError, PlanOptions,
    PlanResult,
};

/// LOAD: the largest total size of intervals live at one step (a lower bound on any arena).
pub fn load(intervals: &[Interval]) -> u64 {
    let mut events: Vec<(u64, i128)> = Vec::with_capacity(intervals.len() * 2);
    for iv in intervals {
        if iv.start < iv.end && iv.size > 0 {
            events.push((iv.start, i128::from(iv.size)));
            events.push((iv.end, -i128::from(iv.size)));
        }
    }
    // Ends sort before starts at the same step: half-open ranges that touch do not overlap.
    events.sort_by_key(|&(t, delta)| (t, delta > 0));
    let (mut live, mut peak) = (0i128, 0i128);
    for (_, delta) in events {
        live += delta;
        peak = peak.max(live);
    }
    u64::try_from(peak).unwrap_or(u64::MAX)
}
