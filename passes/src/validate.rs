//! The independent plan validator: re-checks a memory plan against the rules that make it sound.
//!
//! This module shares no code with the planner ([`crate::plan`]): it has its own input types
//! ([`PlanToCheck`], [`CheckedBuffer`], [`Access`]) so that a bug in the planner's data
//! structures cannot hide itself from the check. A plan places every buffer at a byte offset in
//! one arena of `arena_size` bytes and gives it a half-open live range `[start, end)` of schedule
//! steps; the accesses say which op, at which step, reads and writes which buffers.
//!
//! [`validate`] checks every rule below and returns every violation it finds (at most
//! [`DEFAULT_MAX_VIOLATIONS`], then a [`Violation::TooMany`] marker), never just the first. Rule 1
//! comes first so that the later rules index infallibly: when rule 1 fails, rule 2 (which needs
//! no index) is still checked, and rules 3 to 6 are not.
//!
//! 1. **Index validity.** Every view's `base`, every in-place result's `input`, and every index
//!    an access reads or writes is a buffer of the plan. Following `base` and `input` links never
//!    comes back to where it started (no view/in-place chain forms a cycle).
//! 2. **Each buffer on its own.** `align` is a power of two; `offset % align == 0`;
//!    `offset + size <= arena_size`, computed without overflow (a sum that overflows is a
//!    violation); `start < end` unless `size == 0`.
//! 3. **Views.** A view lies where its direct base says (`view.offset == base.offset + offset`)
//!    and inside its base's bytes (`view.offset + view.size <= base.offset + base.size`), and the
//!    base is live whenever the view is (`base.start <= view.start`, `view.end <= base.end`).
//!    Views of views are checked against their direct base.
//! 4. **In-place results.** An in-place result `Y` of input `X` has `X`'s offset and
//!    `Y.size <= X.size`; `X`'s last live step is `Y`'s first (`X.end == Y.start + 1`); and every
//!    access at step `Y.start` that writes `Y` reads `X`, is elementwise, and reads no other
//!    buffer of `X`'s storage group (see rule 5) that shares bytes with `Y` at another offset
//!    (writing `Y` element by element would clobber it before it is read).
//! 5. **No overlap.** No two buffers that are live at a common step share a byte, except:
//!    - a view and its base. Each buffer belongs to the *storage group* of its root (follow
//!      `View` bases until a buffer that is not a view); buffers of one group never conflict.
//!      Groups are checked against each other: a group's bytes are the smallest range covering
//!      its members' bytes and its live range the smallest covering its members' live ranges,
//!      counting only members with `size > 0` (so a view that strays outside its base, a rule 3
//!      violation, is still checked here);
//!    - an in-place result `Y` and the group of its input `X`, which may share bytes at the
//!      single step `Y.start` (where `X` dies and `Y` is written over it), and only then.
//!
//!    Buffers (and groups) of size 0 hold no bytes and never conflict. The check is a sweep over
//!    time with an interval tree over offsets: `O(n log n)` plus `O(log n)` per violation.
//! 6. **Accesses.** No two accesses share a step (a step runs one op). At each access, every
//!    buffer it reads is live at its step (`start <= step < end`: it has been produced and has
//!    not died), and every buffer it writes starts there (`start == step`). Graph inputs
//!    (`is_input`) own their bytes, are never written and are live from step 0. Every other
//!    buffer that owns bytes (not a view) and has `size > 0` is written by exactly one access,
//!    its producer; no buffer is written by two accesses. Together with rule 5 this is "every
//!    read sees the value its producer wrote": the producer wrote at `start`, the read comes
//!    before `end`, and nothing live in between shared its bytes.
//! 7. **Scratch.** A scratch buffer (an op's working memory, [`BufferKind::Scratch`]) lives
//!    exactly one step (`end == start + 1`), the step of the op that writes it (rule 6), and is
//!    no graph input. With rule 5 this is "scratch memory overlaps nothing the op reads or
//!    writes, nor anything else live at its step".

use std::collections::HashMap;
use std::fmt;

/// How many violations [`validate`] reports before it stops looking.
pub const DEFAULT_MAX_VIOLATIONS: usize = 100;

/// One buffer of the plan to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedBuffer {
    /// Its name in messages, usually its SSA value (`%12`).
    pub name: String,
    /// Its first byte in the arena.
    pub offset: u64,
    /// Its size in bytes.
    pub size: u64,
    /// The first schedule step at which it holds a value.
    pub start: u64,
    /// The first schedule step at which it no longer does: the live range is `[start, end)`.
    pub end: u64,
    /// The alignment its offset must have, in bytes: a power of two.
    pub align: u64,
    /// Whether it owns its bytes, is a view of another buffer, or is written in place.
    pub kind: BufferKind,
    /// Whether it is a graph input: it is never written and is live from step 0.
    pub is_input: bool,
}

/// How a buffer relates to the bytes of other buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferKind {
    /// Owns its bytes.
    Owned,
    /// A view (Reshape etc.): it has no bytes of its own; it reads `base`'s bytes at
    /// `base.offset + offset`.
    View {
        /// The index of the buffer it views.
        base: usize,
        /// Where it starts inside its base, in bytes.
        offset: u64,
    },
    /// An in-place result: written over `input`'s bytes at the op that produces it (an
    /// elementwise op), where `input` dies.
    InPlace {
        /// The index of the buffer whose bytes it takes over.
        input: usize,
    },
    /// Owns its bytes for one step only: the working memory of the op that writes it.
    Scratch,
}

/// What one op of the schedule does to the buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The schedule step at which the op runs.
    pub step: u64,
    /// The op's name in messages.
    pub op: String,
    /// The indices of the buffers it reads.
    pub reads: Vec<usize>,
    /// The indices of the buffers it writes.
    pub writes: Vec<usize>,
    /// Whether the op is elementwise (may write a result over an input).
    pub elementwise: bool,
}

/// A memory plan, as the validator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlanToCheck {
    /// The arena's size in bytes: every buffer lies in `[0, arena_size)`.
    pub arena_size: u64,
    /// The buffers; [`BufferKind`] and [`Access`] refer to them by index.
    pub buffers: Vec<CheckedBuffer>,
    /// The ops of the schedule and what they read and write.
    pub accesses: Vec<Access>,
}

/// A buffer named in a [`Violation`]: its index in [`PlanToCheck::buffers`] and its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BufferRef {
    /// Its index in [`PlanToCheck::buffers`].
    pub index: usize,
    /// Its name.
    pub name: String,
}

impl fmt::Display for BufferRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.name)
    }
}

/// A half-open range `[start, end)` of bytes or of schedule steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HalfOpen {
    /// The first element.
    pub start: u64,
    /// One past the last element.
    pub end: u64,
}

impl fmt::Display for HalfOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", self.start, self.end)
    }
}

/// Prints `[offset, offset + size)` without overflow.
struct ByteRange(u64, u64);

impl fmt::Display for ByteRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}, {})",
            self.0,
            u128::from(self.0) + u128::from(self.1)
        )
    }
}

/// Names the buffers of a cycle: `` `%a` -> `%b` -> `%a` ``.
struct Chain<'a>(&'a [BufferRef]);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for buffer in self.0 {
            write!(f, "{buffer} -> ")?;
        }
        match self.0.first() {
            Some(first) => write!(f, "{first}"),
            None => Ok(()),
        }
    }
}

/// Says " (with its views)" when a storage group's extent is not just its root's.
struct WithViews(bool);

impl fmt::Display for WithViews {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 {
            f.write_str(" (with its views)")
        } else {
            Ok(())
        }
    }
}

/// One broken rule of a plan; its `Display` names the buffers, op and step involved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    // Rule 1: index validity.
    /// A view's base index is out of range.
    #[error("view {view} has base index {base}, but the plan has only {n_buffers} buffers")]
    BaseOutOfRange {
        view: BufferRef,
        base: usize,
        n_buffers: usize,
    },
    /// An in-place result's input index is out of range.
    #[error(
        "in-place result {result} has input index {input}, but the plan has only {n_buffers} buffers"
    )]
    InputOutOfRange {
        result: BufferRef,
        input: usize,
        n_buffers: usize,
    },
    /// An access reads a buffer index that is out of range.
    #[error("op `{op}` at step {step} reads buffer index {index}, but the plan has only {n_buffers} buffers")]
    ReadOutOfRange {
        op: String,
        step: u64,
        index: usize,
        n_buffers: usize,
    },
    /// An access writes a buffer index that is out of range.
    #[error("op `{op}` at step {step} writes buffer index {index}, but the plan has only {n_buffers} buffers")]
    WriteOutOfRange {
        op: String,
        step: u64,
        index: usize,
        n_buffers: usize,
    },
    /// Following view bases and in-place inputs comes back to the start.
    #[error("view/in-place chain forms a cycle: {}", Chain(.buffers))]
    AliasCycle { buffers: Vec<BufferRef> },

    // Rule 2: each buffer on its own.
    /// An alignment that is not a power of two.
    #[error("buffer {buffer} has alignment {align}, which is not a power of two")]
    BadAlign { buffer: BufferRef, align: u64 },
    /// An offset that is not a multiple of the alignment.
    #[error("buffer {buffer} at offset {offset} is not aligned to {align} bytes")]
    Misaligned {
        buffer: BufferRef,
        offset: u64,
        align: u64,
    },
    /// Bytes past the end of the arena (or an end that overflows).
    #[error(
        "buffer {buffer} {} ends past the arena of {arena_size} bytes",
        ByteRange(*.offset, *.size)
    )]
    OutOfArena {
        buffer: BufferRef,
        offset: u64,
        size: u64,
        arena_size: u64,
    },
    /// A buffer with bytes but an empty live range.
    #[error("buffer {buffer} of {size} bytes has an empty live range {live}")]
    EmptyLiveRange {
        buffer: BufferRef,
        size: u64,
        live: HalfOpen,
    },

    // Rule 3: views.
    /// A view not at its base's offset plus its own.
    #[error("view {view} is at offset {view_offset}, but its base {base} at offset {base_offset} plus view offset {offset} is {}", u128::from(*.base_offset) + u128::from(*.offset))]
    ViewOffsetMismatch {
        view: BufferRef,
        view_offset: u64,
        base: BufferRef,
        base_offset: u64,
        offset: u64,
    },
    /// A view whose bytes stray outside its base's.
    #[error(
        "view {view} {} does not lie inside its base {base} {}",
        ByteRange(.view_bytes.0, .view_bytes.1),
        ByteRange(.base_bytes.0, .base_bytes.1)
    )]
    ViewOutsideBase {
        view: BufferRef,
        /// The view's offset and size.
        view_bytes: (u64, u64),
        base: BufferRef,
        /// The base's offset and size.
        base_bytes: (u64, u64),
    },
    /// A view live at a step where its base is not.
    #[error("view {view} is live in {view_live}, but its base {base} only in {base_live}")]
    ViewOutlivesBase {
        view: BufferRef,
        view_live: HalfOpen,
        base: BufferRef,
        base_live: HalfOpen,
    },

    // Rule 4: in-place results.
    /// An in-place result not at its input's offset.
    #[error("in-place result {result} is at offset {result_offset}, but its input {input} is at offset {input_offset}")]
    InPlaceOffset {
        result: BufferRef,
        result_offset: u64,
        input: BufferRef,
        input_offset: u64,
    },
    /// An in-place result larger than its input.
    #[error("in-place result {result} has {result_size} bytes, more than its input {input} ({input_size} bytes)")]
    InPlaceTooLarge {
        result: BufferRef,
        result_size: u64,
        input: BufferRef,
        input_size: u64,
    },
    /// An in-place input that does not die where its result is written.
    #[error("in-place input {input} is live in {input_live}, but must die at step {step}, where {result} is written over it")]
    InPlaceInputLifetime {
        input: BufferRef,
        input_live: HalfOpen,
        result: BufferRef,
        step: u64,
    },
    /// The op writing an in-place result does not read its input.
    #[error("op `{op}` at step {step} writes in-place result {result} but does not read its input {input}")]
    InPlaceInputNotRead {
        op: String,
        step: u64,
        result: BufferRef,
        input: BufferRef,
    },
    /// The op writing an in-place result reads another view of its input's storage that the
    /// result overlaps at a different offset.
    #[error(
        "op `{op}` at step {step} writes {result} {} in place while reading {read} {}, which shares bytes with it at another offset",
        ByteRange(.result_bytes.0, .result_bytes.1),
        ByteRange(.read_bytes.0, .read_bytes.1)
    )]
    InPlaceClobbersRead {
        op: String,
        step: u64,
        result: BufferRef,
        /// The result's offset and size.
        result_bytes: (u64, u64),
        read: BufferRef,
        /// The read buffer's offset and size.
        read_bytes: (u64, u64),
    },
    /// The op writing an in-place result is not elementwise.
    #[error("op `{op}` at step {step} writes {result} in place, but is not elementwise")]
    InPlaceNotElementwise {
        op: String,
        step: u64,
        result: BufferRef,
    },

    // Rule 5: no overlap.
    /// Two storage groups that share bytes while both are live.
    #[error(
        "buffers {first}{} {first_bytes} and {second}{} {second_bytes} overlap in memory and are both live at step {step}",
        WithViews(*.first_with_views),
        WithViews(*.second_with_views)
    )]
    Overlap {
        /// The root of the first storage group (the lower index).
        first: BufferRef,
        /// The first group's bytes.
        first_bytes: HalfOpen,
        /// Whether the first group's bytes or live range extend past its root's own.
        first_with_views: bool,
        /// The root of the second storage group.
        second: BufferRef,
        /// The second group's bytes.
        second_bytes: HalfOpen,
        /// Whether the second group's bytes or live range extend past its root's own.
        second_with_views: bool,
        /// A step at which both are live (and may not share bytes).
        step: u64,
    },

    // Rule 6: accesses.
    /// Two accesses at one step.
    #[error("ops `{first_op}` and `{second_op}` both run at step {step}; a step runs one op")]
    DuplicateStep {
        first_op: String,
        second_op: String,
        step: u64,
    },
    /// A read of a buffer that is not live.
    #[error("op `{op}` at step {step} reads {buffer}, which is live only in {live}")]
    ReadNotLive {
        op: String,
        step: u64,
        buffer: BufferRef,
        live: HalfOpen,
    },
    /// A write of a buffer at a step other than its first.
    #[error("op `{op}` at step {step} writes {buffer}, which starts at step {start}; a buffer is written at its first live step")]
    WriteNotAtStart {
        op: String,
        step: u64,
        buffer: BufferRef,
        start: u64,
    },
    /// A write of a graph input.
    #[error("op `{op}` at step {step} writes graph input {buffer}; inputs are never written")]
    InputWritten {
        op: String,
        step: u64,
        buffer: BufferRef,
    },
    /// A graph input that does not start at step 0.
    #[error("graph input {buffer} starts at step {start}, but inputs are live from step 0")]
    InputStartsLate { buffer: BufferRef, start: u64 },
    /// A graph input that is a view or an in-place result.
    #[error("graph input {buffer} must own its bytes, but is a view or an in-place result")]
    InputNotOwned { buffer: BufferRef },
    /// A buffer that owns bytes but that no access writes.
    #[error("buffer {buffer} is never written: no op produces it")]
    NeverWritten { buffer: BufferRef },
    /// A buffer written by two accesses.
    #[error("buffer {buffer} is written by both `{first_op}` at step {first_step} and `{second_op}` at step {second_step}; a buffer has one producer")]
    WrittenTwice {
        buffer: BufferRef,
        first_op: String,
        first_step: u64,
        second_op: String,
        second_step: u64,
    },

    // Rule 7: scratch.
    /// A scratch buffer live for more (or less) than its one step.
    #[error("scratch buffer {buffer} is live in {live}, but scratch lives exactly one step")]
    ScratchLifetime { buffer: BufferRef, live: HalfOpen },
    /// A scratch buffer marked as a graph input.
    #[error("scratch buffer {buffer} is marked as a graph input")]
    ScratchIsInput { buffer: BufferRef },

    /// The validator stopped looking after this many violations.
    #[error("stopped after {limit} violations; the plan may have more")]
    TooMany { limit: usize },
}

impl Violation {
    /// The rule (1 to 7, as numbered in the module doc) this violation breaks; `None` for
    /// [`Violation::TooMany`].
    pub fn rule(&self) -> Option<u8> {
        use Violation::*;
        Some(match self {
            BaseOutOfRange { .. }
            | InputOutOfRange { .. }
            | ReadOutOfRange { .. }
            | WriteOutOfRange { .. }
            | AliasCycle { .. } => 1,
            BadAlign { .. } | Misaligned { .. } | OutOfArena { .. } | EmptyLiveRange { .. } => 2,
            ViewOffsetMismatch { .. } | ViewOutsideBase { .. } | ViewOutlivesBase { .. } => 3,
            InPlaceOffset { .. }
            | InPlaceTooLarge { .. }
            | InPlaceInputLifetime { .. }
            | InPlaceInputNotRead { .. }
            | InPlaceClobbersRead { .. }
            | InPlaceNotElementwise { .. } => 4,
            Overlap { .. } => 5,
            DuplicateStep { .. }
            | ReadNotLive { .. }
            | WriteNotAtStart { .. }
            | InputWritten { .. }
            | InputStartsLate { .. }
            | InputNotOwned { .. }
            | NeverWritten { .. }
            | WrittenTwice { .. } => 6,
            ScratchLifetime { .. } | ScratchIsInput { .. } => 7,
            TooMany { .. } => return None,
        })
    }
}

/// Checks `plan` against every rule of the module doc; returns all violations found, at most
/// [`DEFAULT_MAX_VIOLATIONS`] of them (then [`Violation::TooMany`]).
pub fn validate(plan: &PlanToCheck) -> Result<(), Vec<Violation>> {
    validate_with_limit(plan, DEFAULT_MAX_VIOLATIONS)
}

/// Like [`validate`], but stops after `max_violations` violations instead of the default.
pub fn validate_with_limit(
    plan: &PlanToCheck,
    max_violations: usize,
) -> Result<(), Vec<Violation>> {
    let mut sink = Sink {
        found: Vec::new(),
        limit: max_violations,
        full: false,
    };
    let indices_valid = check_indices(plan, &mut sink);
    check_buffers(plan, &mut sink);
    if indices_valid {
        // Rule 1 holds: every index below is in range and every chain ends.
        let writers = Writers::new(plan);
        check_views(plan, &mut sink);
        let roots = roots_of(plan);
        check_in_place(plan, &writers, &roots, &mut sink);
        check_overlaps(plan, &roots, &mut sink);
        check_accesses(plan, &writers, &mut sink);
    }
    check_scratch(plan, &mut sink);
    if sink.found.is_empty() {
        Ok(())
    } else {
        Err(sink.found)
    }
}

/// Collects violations up to a limit.
struct Sink {
    found: Vec<Violation>,
    limit: usize,
    full: bool,
}

impl Sink {
    fn push(&mut self, violation: Violation) {
        if self.full {
            return;
        }
        if self.found.len() >= self.limit {
            self.full = true;
            self.found.push(Violation::TooMany { limit: self.limit });
        } else {
            self.found.push(violation);
        }
    }
}

fn buffer_ref(plan: &PlanToCheck, index: usize) -> BufferRef {
    BufferRef {
        index,
        name: plan.buffers[index].name.clone(),
    }
}

fn live_of(buffer: &CheckedBuffer) -> HalfOpen {
    HalfOpen {
        start: buffer.start,
        end: buffer.end,
    }
}

/// The buffer a view or in-place result refers to.
fn link_of(buffer: &CheckedBuffer) -> Option<usize> {
    match buffer.kind {
        BufferKind::Owned | BufferKind::Scratch => None,
        BufferKind::View { base, .. } => Some(base),
        BufferKind::InPlace { input } => Some(input),
    }
}

/// Rule 1. Returns whether every index is valid and no chain cycles.
fn check_indices(plan: &PlanToCheck, sink: &mut Sink) -> bool {
    let n_buffers = plan.buffers.len();
    let mut valid = true;
    for (index, buffer) in plan.buffers.iter().enumerate() {
        match buffer.kind {
            BufferKind::View { base, .. } if base >= n_buffers => {
                valid = false;
                sink.push(Violation::BaseOutOfRange {
                    view: buffer_ref(plan, index),
                    base,
                    n_buffers,
                });
            }
            BufferKind::InPlace { input } if input >= n_buffers => {
                valid = false;
                sink.push(Violation::InputOutOfRange {
                    result: buffer_ref(plan, index),
                    input,
                    n_buffers,
                });
            }
            _ => {}
        }
    }
    for access in &plan.accesses {
        for &index in access.reads.iter().filter(|&&index| index >= n_buffers) {
            valid = false;
            sink.push(Violation::ReadOutOfRange {
                op: access.op.clone(),
                step: access.step,
                index,
                n_buffers,
            });
        }
        for &index in access.writes.iter().filter(|&&index| index >= n_buffers) {
            valid = false;
            sink.push(Violation::WriteOutOfRange {
                op: access.op.clone(),
                step: access.step,
                index,
                n_buffers,
            });
        }
    }
    // Each buffer links to at most one other, so the links form a functional graph: walk from
    // every unvisited buffer until a finished one, the end of a chain, or the current path.
    const UNVISITED: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNVISITED; n_buffers];
    let mut position_on_path = vec![0usize; n_buffers];
    let mut path = Vec::new();
    for first in 0..n_buffers {
        path.clear();
        let mut current = Some(first);
        while let Some(index) = current.filter(|&index| index < n_buffers) {
            match state[index] {
                DONE => break,
                ON_PATH => {
                    valid = false;
                    let buffers = path[position_on_path[index]..]
                        .iter()
                        .map(|&member| buffer_ref(plan, member))
                        .collect();
                    sink.push(Violation::AliasCycle { buffers });
                    break;
                }
                _ => {
                    state[index] = ON_PATH;
                    position_on_path[index] = path.len();
                    path.push(index);
                    current = link_of(&plan.buffers[index]);
                }
            }
        }
        for &index in &path {
            state[index] = DONE;
        }
    }
    valid
}

/// Rule 2.
fn check_buffers(plan: &PlanToCheck, sink: &mut Sink) {
    for (index, buffer) in plan.buffers.iter().enumerate() {
        if sink.full {
            return;
        }
        if !buffer.align.is_power_of_two() {
            sink.push(Violation::BadAlign {
                buffer: buffer_ref(plan, index),
                align: buffer.align,
            });
        } else if buffer.offset % buffer.align != 0 {
            sink.push(Violation::Misaligned {
                buffer: buffer_ref(plan, index),
                offset: buffer.offset,
                align: buffer.align,
            });
        }
        if buffer
            .offset
            .checked_add(buffer.size)
            .is_none_or(|end| end > plan.arena_size)
        {
            sink.push(Violation::OutOfArena {
                buffer: buffer_ref(plan, index),
                offset: buffer.offset,
                size: buffer.size,
                arena_size: plan.arena_size,
            });
        }
        if buffer.size > 0 && buffer.start >= buffer.end {
            sink.push(Violation::EmptyLiveRange {
                buffer: buffer_ref(plan, index),
                size: buffer.size,
                live: live_of(buffer),
            });
        }
    }
}

/// For each buffer, the indices of the accesses that write it, each access once, in order.
/// Needs rule 1 (write indices in range).
struct Writers {
    /// Buffer `i`'s writers are `accesses[first[i]..first[i + 1]]`.
    first: Vec<usize>,
    accesses: Vec<usize>,
}

impl Writers {
    fn new(plan: &PlanToCheck) -> Writers {
        const NONE: usize = usize::MAX;
        let n_buffers = plan.buffers.len();
        // The last access counted for each buffer: an access that lists a buffer twice counts once.
        let mut last = vec![NONE; n_buffers];
        let mut first = vec![0usize; n_buffers + 1];
        for (access_index, access) in plan.accesses.iter().enumerate() {
            for &buffer_index in &access.writes {
                if last[buffer_index] != access_index {
                    last[buffer_index] = access_index;
                    first[buffer_index + 1] += 1;
                }
            }
        }
        for i in 0..n_buffers {
            first[i + 1] += first[i];
        }
        let mut next = first.clone();
        let mut accesses = vec![0usize; first[n_buffers]];
        last.fill(NONE);
        for (access_index, access) in plan.accesses.iter().enumerate() {
            for &buffer_index in &access.writes {
                if last[buffer_index] != access_index {
                    last[buffer_index] = access_index;
                    accesses[next[buffer_index]] = access_index;
                    next[buffer_index] += 1;
                }
            }
        }
        Writers { first, accesses }
    }

    fn of(&self, buffer_index: usize) -> &[usize] {
        &self.accesses[self.first[buffer_index]..self.first[buffer_index + 1]]
    }
}

/// Rule 3.
fn check_views(plan: &PlanToCheck, sink: &mut Sink) {
    for (index, view) in plan.buffers.iter().enumerate() {
        if sink.full {
            return;
        }
        let BufferKind::View {
            base: base_index,
            offset,
        } = view.kind
        else {
            continue;
        };
        let base = &plan.buffers[base_index];
        if u128::from(view.offset) != u128::from(base.offset) + u128::from(offset) {
            sink.push(Violation::ViewOffsetMismatch {
                view: buffer_ref(plan, index),
                view_offset: view.offset,
                base: buffer_ref(plan, base_index),
                base_offset: base.offset,
                offset,
            });
        }
        let view_end = u128::from(view.offset) + u128::from(view.size);
        let base_end = u128::from(base.offset) + u128::from(base.size);
        if view.offset < base.offset || view_end > base_end {
            sink.push(Violation::ViewOutsideBase {
                view: buffer_ref(plan, index),
                view_bytes: (view.offset, view.size),
                base: buffer_ref(plan, base_index),
                base_bytes: (base.offset, base.size),
            });
        }
        let view_is_live = view.start < view.end;
        if view_is_live && (base.start > view.start || view.end > base.end) {
            sink.push(Violation::ViewOutlivesBase {
                view: buffer_ref(plan, index),
                view_live: live_of(view),
                base: buffer_ref(plan, base_index),
                base_live: live_of(base),
            });
        }
    }
}

/// Rule 4.
fn check_in_place(plan: &PlanToCheck, writers: &Writers, roots: &[usize], sink: &mut Sink) {
    for (index, result) in plan.buffers.iter().enumerate() {
        if sink.full {
            return;
        }
        let BufferKind::InPlace { input: input_index } = result.kind else {
            continue;
        };
        let input = &plan.buffers[input_index];
        if result.offset != input.offset {
            sink.push(Violation::InPlaceOffset {
                result: buffer_ref(plan, index),
                result_offset: result.offset,
                input: buffer_ref(plan, input_index),
                input_offset: input.offset,
            });
        }
        if result.size > input.size {
            sink.push(Violation::InPlaceTooLarge {
                result: buffer_ref(plan, index),
                result_size: result.size,
                input: buffer_ref(plan, input_index),
                input_size: input.size,
            });
        }
        if u128::from(input.end) != u128::from(result.start) + 1 {
            sink.push(Violation::InPlaceInputLifetime {
                input: buffer_ref(plan, input_index),
                input_live: live_of(input),
                result: buffer_ref(plan, index),
                step: result.start,
            });
        }
        // An access writing the result at another step is rule 6's to report.
        for access in writers.of(index).iter().map(|&a| &plan.accesses[a]) {
            if access.step != result.start {
                continue;
            }
            if !access.reads.contains(&input_index) {
                sink.push(Violation::InPlaceInputNotRead {
                    op: access.op.clone(),
                    step: access.step,
                    result: buffer_ref(plan, index),
                    input: buffer_ref(plan, input_index),
                });
            }
            if !access.elementwise {
                sink.push(Violation::InPlaceNotElementwise {
                    op: access.op.clone(),
                    step: access.step,
                    result: buffer_ref(plan, index),
                });
            }
            // Other views of the input's storage that the op reads must not be clobbered by
            // the result before they are read: overlapping the result means starting with it.
            // (A read from another group that overlaps the result is rule 5's to report.)
            for &read_index in &access.reads {
                let read = &plan.buffers[read_index];
                if read_index != input_index
                    && roots[read_index] == roots[input_index]
                    && read.offset != result.offset
                    && bytes_overlap(read, result)
                {
                    sink.push(Violation::InPlaceClobbersRead {
                        op: access.op.clone(),
                        step: access.step,
                        result: buffer_ref(plan, index),
                        result_bytes: (result.offset, result.size),
                        read: buffer_ref(plan, read_index),
                        read_bytes: (read.offset, read.size),
                    });
                }
            }
        }
    }
}

/// Whether two buffers share a byte.
fn bytes_overlap(a: &CheckedBuffer, b: &CheckedBuffer) -> bool {
    let a_end = u128::from(a.offset) + u128::from(a.size);
    let b_end = u128::from(b.offset) + u128::from(b.size);
    u128::from(a.offset.max(b.offset)) < a_end.min(b_end)
}

/// A storage group for rule 5: a root and the views that lead to it.
#[derive(Clone, Copy)]
struct Group {
    /// The root's index.
    root: usize,
    /// The smallest range covering the members' bytes.
    bytes: HalfOpen,
    /// The smallest range covering the members' live ranges.
    live: HalfOpen,
}

/// Grows `hull` to cover `range`, ignoring empty ranges.
fn cover(hull: &mut Option<HalfOpen>, range: HalfOpen) {
    if range.start >= range.end {
        return;
    }
    *hull = Some(match *hull {
        None => range,
        Some(h) => HalfOpen {
            start: h.start.min(range.start),
            end: h.end.max(range.end),
        },
    });
}

/// The root of every buffer: follow view bases until a buffer that is not a view.
/// Needs rule 1 (bases in range, no cycles).
fn roots_of(plan: &PlanToCheck) -> Vec<usize> {
    const UNKNOWN: usize = usize::MAX;
    let mut root = vec![UNKNOWN; plan.buffers.len()];
    let mut path = Vec::new();
    for first in 0..plan.buffers.len() {
        let mut current = first;
        let found = loop {
            if root[current] != UNKNOWN {
                break root[current];
            }
            match plan.buffers[current].kind {
                BufferKind::View { base, .. } => {
                    path.push(current);
                    current = base;
                }
                _ => break current,
            }
        };
        root[current] = found;
        for index in path.drain(..) {
            root[index] = found;
        }
    }
    root
}

/// Rule 5: a sweep over time. Groups enter the active set at their start and leave at their
/// end (leaving first at a step, so touching ranges do not meet); each entering group is
/// compared with the active groups that share a byte with it, found in a max-segment tree over
/// the groups sorted by first byte.
fn check_overlaps(plan: &PlanToCheck, roots: &[usize], sink: &mut Sink) {
    // The hulls of each group's bytes and live range, at its root's index.
    let mut hulls: Vec<(Option<HalfOpen>, Option<HalfOpen>)> =
        vec![(None, None); plan.buffers.len()];
    for (index, buffer) in plan.buffers.iter().enumerate() {
        if buffer.size == 0 {
            continue;
        }
        let (bytes, live) = &mut hulls[roots[index]];
        let end = buffer.offset.saturating_add(buffer.size);
        cover(
            bytes,
            HalfOpen {
                start: buffer.offset,
                end,
            },
        );
        cover(live, live_of(buffer));
    }
    // Groups that hold bytes at some step, sorted by first byte (then root, for determinism).
    let mut groups: Vec<Group> = hulls
        .into_iter()
        .enumerate()
        .filter_map(|(root, hull)| match hull {
            (Some(bytes), Some(live)) => Some(Group { root, bytes, live }),
            _ => None,
        })
        .collect();
    groups.sort_unstable_by_key(|group| (group.bytes.start, group.root));
    const NO_SLOT: usize = usize::MAX;
    let mut slot_of_root = vec![NO_SLOT; plan.buffers.len()];
    for (slot, group) in groups.iter().enumerate() {
        slot_of_root[group.root] = slot;
    }

    // In-place pairs (group of the input, result) may share bytes at the result's first step.
    let mut exempt: HashMap<(usize, usize), u64> = HashMap::new();
    for (index, buffer) in plan.buffers.iter().enumerate() {
        if let BufferKind::InPlace { input } = buffer.kind {
            let (a, b) = (slot_of_root[roots[input]], slot_of_root[index]);
            if a != NO_SLOT && b != NO_SLOT {
                exempt.insert((a.min(b), a.max(b)), buffer.start);
            }
        }
    }

    // Events: (step, enters, slot); at one step, leaving sorts before entering.
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(groups.len() * 2);
    for (slot, group) in groups.iter().enumerate() {
        events.push((group.live.start, true, slot));
        events.push((group.live.end, false, slot));
    }
    events.sort_unstable();

    let mut active = MaxTree::new(groups.len());
    let mut hits = Vec::new();
    for (step, enters, slot) in events {
        if !enters {
            active.set(slot, 0);
            continue;
        }
        if sink.full {
            return;
        }
        let group = groups[slot];
        // Active groups that start below this one's end and end above its start.
        let below_end = groups.partition_point(|other| other.bytes.start < group.bytes.end);
        hits.clear();
        active.collect_above(below_end, group.bytes.start, &mut hits);
        for &other_slot in &hits {
            if sink.full {
                return;
            }
            let other = groups[other_slot];
            // `other` is live at `step`, so the common steps are [step, min of the ends).
            let common_end = group.live.end.min(other.live.end);
            let key = (slot.min(other_slot), slot.max(other_slot));
            let conflict_step = match exempt.get(&key) {
                None => Some(step),
                Some(&shared) if shared != step => Some(step),
                Some(_) => (step + 1 < common_end).then_some(step + 1),
            };
            if let Some(conflict_step) = conflict_step {
                sink.push(overlap(plan, group, other, conflict_step));
            }
        }
        active.set(slot, group.bytes.end);
    }
}

fn overlap(plan: &PlanToCheck, a: Group, b: Group, step: u64) -> Violation {
    let (first, second) = if a.root < b.root { (a, b) } else { (b, a) };
    let extends = |group: Group| {
        let root = &plan.buffers[group.root];
        let own_bytes = HalfOpen {
            start: root.offset,
            end: root.offset.saturating_add(root.size),
        };
        group.bytes != own_bytes || group.live != live_of(root)
    };
    Violation::Overlap {
        first: buffer_ref(plan, first.root),
        first_bytes: first.bytes,
        first_with_views: extends(first),
        second: buffer_ref(plan, second.root),
        second_bytes: second.bytes,
        second_with_views: extends(second),
        step,
    }
}

/// A segment tree over slots holding each active slot's end byte (0 when inactive), answering
/// "which slots below `limit` end above `byte`" in `O(log n)` per slot found.
struct MaxTree {
    /// The number of leaves: a power of two.
    width: usize,
    /// Node `i` has children `2i` and `2i + 1`; leaves start at `width`.
    max: Vec<u64>,
    /// Scratch space for [`MaxTree::collect_above`]: (node, first slot, number of slots).
    stack: Vec<(usize, usize, usize)>,
}

impl MaxTree {
    fn new(n_slots: usize) -> MaxTree {
        let width = n_slots.next_power_of_two().max(1);
        MaxTree {
            width,
            max: vec![0; 2 * width],
            stack: Vec::new(),
        }
    }

    fn set(&mut self, slot: usize, value: u64) {
        let mut node = self.width + slot;
        self.max[node] = value;
        while node > 1 {
            node /= 2;
            self.max[node] = self.max[2 * node].max(self.max[2 * node + 1]);
        }
    }

    /// Pushes every slot below `limit` whose value is above `byte` onto `out`.
    fn collect_above(&mut self, limit: usize, byte: u64, out: &mut Vec<usize>) {
        let stack = &mut self.stack;
        stack.clear();
        stack.push((1, 0, self.width));
        while let Some((node, first, len)) = stack.pop() {
            if first >= limit || self.max[node] <= byte {
                continue;
            }
            if len == 1 {
                out.push(first);
                continue;
            }
            let half = len / 2;
            stack.push((2 * node + 1, first + half, half));
            stack.push((2 * node, first, half));
        }
    }
}

/// Rule 6.
fn check_accesses(plan: &PlanToCheck, writers: &Writers, sink: &mut Sink) {
    let mut by_step: Vec<usize> = (0..plan.accesses.len()).collect();
    by_step.sort_by_key(|&a| plan.accesses[a].step);
    for pair in by_step.windows(2) {
        let (first, second) = (&plan.accesses[pair[0]], &plan.accesses[pair[1]]);
        if first.step == second.step {
            sink.push(Violation::DuplicateStep {
                first_op: first.op.clone(),
                second_op: second.op.clone(),
                step: first.step,
            });
        }
    }
    for access in &plan.accesses {
        if sink.full {
            return;
        }
        for &index in &access.reads {
            let buffer = &plan.buffers[index];
            if !(buffer.start <= access.step && access.step < buffer.end) {
                sink.push(Violation::ReadNotLive {
                    op: access.op.clone(),
                    step: access.step,
                    buffer: buffer_ref(plan, index),
                    live: live_of(buffer),
                });
            }
        }
        for &index in &access.writes {
            let buffer = &plan.buffers[index];
            if buffer.is_input {
                sink.push(Violation::InputWritten {
                    op: access.op.clone(),
                    step: access.step,
                    buffer: buffer_ref(plan, index),
                });
            } else if buffer.start != access.step {
                sink.push(Violation::WriteNotAtStart {
                    op: access.op.clone(),
                    step: access.step,
                    buffer: buffer_ref(plan, index),
                    start: buffer.start,
                });
            }
        }
    }
    for (index, buffer) in plan.buffers.iter().enumerate() {
        if sink.full {
            return;
        }
        if buffer.is_input {
            // Writes of inputs were reported above, one per access.
            if buffer.kind != BufferKind::Owned {
                sink.push(Violation::InputNotOwned {
                    buffer: buffer_ref(plan, index),
                });
            }
            if buffer.start != 0 {
                sink.push(Violation::InputStartsLate {
                    buffer: buffer_ref(plan, index),
                    start: buffer.start,
                });
            }
            continue;
        }
        match writers.of(index) {
            [] if buffer.size > 0 && !matches!(buffer.kind, BufferKind::View { .. }) => {
                sink.push(Violation::NeverWritten {
                    buffer: buffer_ref(plan, index),
                });
            }
            [first, second, ..] => {
                let (first, second) = (&plan.accesses[*first], &plan.accesses[*second]);
                sink.push(Violation::WrittenTwice {
                    buffer: buffer_ref(plan, index),
                    first_op: first.op.clone(),
                    first_step: first.step,
                    second_op: second.op.clone(),
                    second_step: second.step,
                });
            }
            _ => {}
        }
    }
}

/// Rule 7.
fn check_scratch(plan: &PlanToCheck, sink: &mut Sink) {
    for (index, buffer) in plan.buffers.iter().enumerate() {
        if buffer.kind != BufferKind::Scratch {
            continue;
        }
        if buffer.is_input {
            sink.push(Violation::ScratchIsInput {
                buffer: buffer_ref(plan, index),
            });
        }
        if buffer.end != buffer.start.saturating_add(1) {
            sink.push(Violation::ScratchLifetime {
                buffer: buffer_ref(plan, index),
                live: live_of(buffer),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(name: &str, offset: u64, size: u64, live: (u64, u64)) -> CheckedBuffer {
        CheckedBuffer {
            name: name.to_string(),
            offset,
            size,
            start: live.0,
            end: live.1,
            align: 1,
            kind: BufferKind::Owned,
            is_input: false,
        }
    }

    fn input(name: &str, offset: u64, size: u64, end: u64) -> CheckedBuffer {
        CheckedBuffer {
            is_input: true,
            ..owned(name, offset, size, (0, end))
        }
    }

    fn view(
        name: &str,
        base: usize,
        base_offset: u64,
        offset: u64,
        size: u64,
        live: (u64, u64),
    ) -> CheckedBuffer {
        CheckedBuffer {
            kind: BufferKind::View {
                base,
                offset: base_offset,
            },
            ..owned(name, offset, size, live)
        }
    }

    fn in_place(
        name: &str,
        input: usize,
        offset: u64,
        size: u64,
        live: (u64, u64),
    ) -> CheckedBuffer {
        CheckedBuffer {
            kind: BufferKind::InPlace { input },
            ..owned(name, offset, size, live)
        }
    }

    fn access(step: u64, op: &str, reads: &[usize], writes: &[usize]) -> Access {
        Access {
            step,
            op: op.to_string(),
            reads: reads.to_vec(),
            writes: writes.to_vec(),
            elementwise: true,
        }
    }

    /// A plan with the obvious producers: at each step where a buffer that owns bytes (not an
    /// input, not a view) starts, one elementwise op `op{step}` writes those buffers and reads
    /// the inputs of those written in place.
    fn plan(arena_size: u64, buffers: Vec<CheckedBuffer>) -> PlanToCheck {
        let mut accesses: Vec<Access> = Vec::new();
        for (index, buffer) in buffers.iter().enumerate() {
            if buffer.is_input || matches!(buffer.kind, BufferKind::View { .. }) {
                continue;
            }
            let position = match accesses.iter().position(|a| a.step == buffer.start) {
                Some(position) => position,
                None => {
                    accesses.push(access(
                        buffer.start,
                        &format!("op{}", buffer.start),
                        &[],
                        &[],
                    ));
                    accesses.len() - 1
                }
            };
            accesses[position].writes.push(index);
            if let BufferKind::InPlace { input } = buffer.kind {
                accesses[position].reads.push(input);
            }
        }
        PlanToCheck {
            arena_size,
            buffers,
            accesses,
        }
    }

    /// The one entry point: `plan`'s violations, as messages, are exactly `expected`.
    fn check(plan: &PlanToCheck, expected: &[&str]) {
        let found: Vec<String> = match validate(plan) {
            Ok(()) => Vec::new(),
            Err(violations) => violations.iter().map(ToString::to_string).collect(),
        };
        assert_eq!(found, expected, "plan: {plan:#?}");
    }

    // Valid plans.

    #[test]
    fn touching_live_ranges_share_bytes() {
        let plan = plan(
            64,
            vec![owned("%a", 0, 64, (0, 2)), owned("%b", 0, 64, (2, 4))],
        );
        check(&plan, &[]);
    }

    #[test]
    fn views_share_their_base_bytes() {
        let mut plan = plan(
            192,
            vec![
                owned("%a", 0, 128, (0, 5)),
                view("%v", 0, 64, 64, 64, (1, 4)),
                view("%w", 1, 0, 64, 32, (2, 3)),
                owned("%b", 128, 64, (1, 3)),
            ],
        );
        // The view is produced (written) by its reshape and read later.
        plan.accesses.push(access(2, "use", &[1, 2, 3], &[]));
        plan.accesses
            .iter_mut()
            .find(|a| a.step == 1)
            .unwrap()
            .writes
            .push(1);
        check(&plan, &[]);
    }

    #[test]
    fn in_place_result_shares_bytes_at_its_first_step() {
        let plan = plan(
            128,
            vec![
                input("%x", 64, 64, 2),
                owned("%a", 0, 64, (0, 2)),
                in_place("%y", 1, 0, 32, (1, 3)),
                in_place("%z", 2, 0, 32, (2, 4)),
            ],
        );
        check(&plan, &[]);
    }

    #[test]
    fn in_place_over_a_view_shares_the_base_bytes() {
        let plan = plan(
            64,
            vec![
                owned("%a", 0, 64, (0, 3)),
                view("%v", 0, 0, 0, 64, (1, 3)),
                in_place("%y", 1, 0, 64, (2, 4)),
            ],
        );
        check(&plan, &[]);
    }

    #[test]
    fn empty_buffers_need_no_producer_and_hold_no_bytes() {
        let plan = PlanToCheck {
            arena_size: 64,
            buffers: vec![owned("%a", 0, 64, (0, 4)), owned("%e", 0, 0, (3, 3))],
            accesses: vec![access(0, "op0", &[], &[0])],
        };
        check(&plan, &[]);
    }

    #[test]
    fn inputs_are_read_not_written() {
        let mut plan = plan(
            128,
            vec![input("%x", 0, 64, 3), owned("%a", 64, 64, (1, 3))],
        );
        plan.accesses[0].reads.push(0);
        plan.accesses.push(access(2, "use", &[0, 1], &[]));
        check(&plan, &[]);
    }

    // Rule 1.

    #[test]
    fn rule1_base_index_out_of_range() {
        let plan = plan(
            64,
            vec![owned("%a", 0, 64, (0, 2)), view("%v", 9, 0, 0, 64, (1, 2))],
        );
        check(
            &plan,
            &["view `%v` has base index 9, but the plan has only 2 buffers"],
        );
    }

    #[test]
    fn rule1_input_index_out_of_range() {
        let mut plan = plan(
            64,
            vec![owned("%a", 0, 64, (0, 2)), in_place("%y", 7, 0, 64, (1, 2))],
        );
        plan.accesses[1].reads.clear();
        check(
            &plan,
            &["in-place result `%y` has input index 7, but the plan has only 2 buffers"],
        );
    }

    #[test]
    fn rule1_access_indices_out_of_range() {
        let mut plan = plan(64, vec![owned("%a", 0, 64, (0, 2))]);
        plan.accesses.push(access(1, "add", &[0, 5], &[6]));
        check(
            &plan,
            &[
                "op `add` at step 1 reads buffer index 5, but the plan has only 1 buffers",
                "op `add` at step 1 writes buffer index 6, but the plan has only 1 buffers",
            ],
        );
    }

    #[test]
    fn rule1_cycle() {
        let plan = plan(
            64,
            vec![
                owned("%a", 0, 64, (0, 4)),
                view("%b", 2, 0, 0, 64, (1, 3)),
                in_place("%c", 1, 0, 64, (1, 3)),
                view("%d", 1, 0, 0, 64, (1, 2)),
            ],
        );
        check(
            &plan,
            &["view/in-place chain forms a cycle: `%b` -> `%c` -> `%b`"],
        );
    }

    #[test]
    fn rule1_failure_skips_the_rules_that_follow_indices() {
        // `%a` and `%b` overlap (rule 5) and `%a` is misaligned (rule 2); only rule 2 is checked.
        let mut plan = plan(
            64,
            vec![owned("%a", 1, 32, (0, 2)), owned("%b", 0, 64, (0, 2))],
        );
        plan.buffers[0].align = 2;
        plan.accesses[0].reads.push(3);
        check(
            &plan,
            &[
                "op `op0` at step 0 reads buffer index 3, but the plan has only 2 buffers",
                "buffer `%a` at offset 1 is not aligned to 2 bytes",
            ],
        );
    }

    // Rule 2.

    #[test]
    fn rule2_align_not_a_power_of_two() {
        let mut plan = plan(64, vec![owned("%a", 0, 64, (0, 2))]);
        plan.buffers[0].align = 3;
        check(
            &plan,
            &["buffer `%a` has alignment 3, which is not a power of two"],
        );
        plan.buffers[0].align = 0;
        check(
            &plan,
            &["buffer `%a` has alignment 0, which is not a power of two"],
        );
    }

    #[test]
    fn rule2_misaligned() {
        let mut plan = plan(64, vec![owned("%a", 2, 32, (0, 2))]);
        plan.buffers[0].align = 4;
        check(
            &plan,
            &["buffer `%a` at offset 2 is not aligned to 4 bytes"],
        );
    }

    #[test]
    fn rule2_past_the_arena() {
        let plan = plan(4096, vec![owned("%a", 4000, 200, (0, 2))]);
        check(
            &plan,
            &["buffer `%a` [4000, 4200) ends past the arena of 4096 bytes"],
        );
    }

    #[test]
    fn rule2_end_overflows() {
        let plan = plan(4096, vec![owned("%a", u64::MAX - 1, 4, (0, 2))]);
        check(&plan, &["buffer `%a` [18446744073709551614, 18446744073709551618) ends past the arena of 4096 bytes"]);
    }

    #[test]
    fn rule2_empty_live_range() {
        let plan = plan(64, vec![owned("%a", 0, 64, (3, 3))]);
        check(
            &plan,
            &["buffer `%a` of 64 bytes has an empty live range [3, 3)"],
        );
    }

    // Rule 3.

    #[test]
    fn rule3_view_offset_mismatch() {
        let plan = plan(
            128,
            vec![
                owned("%a", 0, 128, (0, 4)),
                view("%v", 0, 32, 64, 32, (1, 3)),
            ],
        );
        check(&plan, &["view `%v` is at offset 64, but its base `%a` at offset 0 plus view offset 32 is 32"]);
    }

    #[test]
    fn rule3_view_outside_base() {
        let plan = plan(
            256,
            vec![
                owned("%a", 0, 128, (0, 4)),
                view("%v", 0, 96, 96, 64, (1, 3)),
            ],
        );
        check(
            &plan,
            &["view `%v` [96, 160) does not lie inside its base `%a` [0, 128)"],
        );
    }

    #[test]
    fn rule3_view_outlives_base() {
        let plan = plan(
            128,
            vec![owned("%a", 0, 128, (0, 4)), view("%v", 0, 0, 0, 64, (1, 6))],
        );
        check(
            &plan,
            &["view `%v` is live in [1, 6), but its base `%a` only in [0, 4)"],
        );
    }

    #[test]
    fn rule3_view_of_view_checks_its_direct_base() {
        let plan = plan(
            128,
            vec![
                owned("%a", 0, 128, (0, 6)),
                view("%v", 0, 0, 0, 64, (1, 3)),
                view("%w", 1, 0, 0, 64, (2, 5)),
            ],
        );
        check(
            &plan,
            &["view `%w` is live in [2, 5), but its base `%v` only in [1, 3)"],
        );
    }

    // Rule 4.

    #[test]
    fn rule4_in_place_offset() {
        let plan = plan(
            128,
            vec![
                owned("%x", 0, 64, (0, 3)),
                in_place("%y", 0, 64, 64, (2, 5)),
            ],
        );
        check(
            &plan,
            &["in-place result `%y` is at offset 64, but its input `%x` is at offset 0"],
        );
    }

    #[test]
    fn rule4_in_place_too_large() {
        let plan = plan(
            128,
            vec![
                owned("%x", 0, 64, (0, 3)),
                in_place("%y", 0, 0, 128, (2, 5)),
            ],
        );
        check(
            &plan,
            &["in-place result `%y` has 128 bytes, more than its input `%x` (64 bytes)"],
        );
    }

    #[test]
    fn rule4_input_outlives_the_in_place_step() {
        // Staying live past step 2, `%x` also shares its bytes with `%y` at step 3 (rule 5).
        let plan = plan(
            64,
            vec![owned("%x", 0, 64, (0, 4)), in_place("%y", 0, 0, 64, (2, 5))],
        );
        check(
            &plan,
            &[
                "in-place input `%x` is live in [0, 4), but must die at step 2, where `%y` is written over it",
                "buffers `%x` [0, 64) and `%y` [0, 64) overlap in memory and are both live at step 3",
            ],
        );
    }

    #[test]
    fn rule4_producer_does_not_read_the_input() {
        let mut plan = plan(
            64,
            vec![owned("%x", 0, 64, (0, 3)), in_place("%y", 0, 0, 64, (2, 5))],
        );
        plan.accesses[1].reads.clear();
        check(
            &plan,
            &["op `op2` at step 2 writes in-place result `%y` but does not read its input `%x`"],
        );
    }

    #[test]
    fn rule4_producer_not_elementwise() {
        let mut plan = plan(
            64,
            vec![owned("%x", 0, 64, (0, 3)), in_place("%y", 0, 0, 64, (2, 5))],
        );
        plan.accesses[1].elementwise = false;
        check(
            &plan,
            &["op `op2` at step 2 writes `%y` in place, but is not elementwise"],
        );
    }

    #[test]
    fn rule4_in_place_result_clobbers_another_read_view() {
        // `%y` is written over `%x` = `%a`[0, 64) while the op also reads `%w` = `%a`[32, 96).
        let mut plan = plan(
            128,
            vec![
                owned("%a", 0, 128, (0, 3)),
                view("%x", 0, 0, 0, 64, (1, 3)),
                view("%w", 0, 32, 32, 64, (1, 3)),
                in_place("%y", 1, 0, 64, (2, 4)),
            ],
        );
        plan.accesses[1].reads.push(2);
        check(
            &plan,
            &["op `op2` at step 2 writes `%y` [0, 64) in place while reading `%w` [32, 96), which shares bytes with it at another offset"],
        );
        // Reading the same bytes at the same offset is fine for an elementwise op.
        plan.buffers[2] = view("%w", 0, 0, 0, 64, (1, 3));
        check(&plan, &[]);
    }

    // Rule 5.

    #[test]
    fn rule5_overlap() {
        let plan = plan(
            6144,
            vec![
                owned("%12", 0, 4096, (0, 8)),
                owned("%15", 2048, 4096, (7, 9)),
            ],
        );
        check(
            &plan,
            &["buffers `%12` [0, 4096) and `%15` [2048, 6144) overlap in memory and are both live at step 7"],
        );
    }

    #[test]
    fn rule5_overlap_with_a_view_reports_the_roots() {
        let plan = plan(
            128,
            vec![
                owned("%a", 0, 64, (0, 4)),
                view("%v", 0, 32, 32, 32, (1, 4)),
                owned("%b", 48, 64, (2, 3)),
            ],
        );
        check(&plan, &["buffers `%a` [0, 64) and `%b` [48, 112) overlap in memory and are both live at step 2"]);
    }

    #[test]
    fn rule5_a_straying_view_extends_its_group() {
        // `%v` outlives `%a` (rule 3), so `%a`'s group still holds bytes at step 5, where `%b` is.
        let plan = plan(
            128,
            vec![
                owned("%a", 0, 64, (0, 4)),
                view("%v", 0, 0, 0, 64, (1, 6)),
                owned("%b", 0, 64, (5, 7)),
            ],
        );
        check(
            &plan,
            &[
                "view `%v` is live in [1, 6), but its base `%a` only in [0, 4)",
                "buffers `%a` (with its views) [0, 64) and `%b` [0, 64) overlap in memory and are both live at step 5",
            ],
        );
    }

    #[test]
    fn rule5_two_results_in_place_over_one_input() {
        let plan = plan(
            64,
            vec![
                owned("%x", 0, 64, (0, 3)),
                in_place("%y", 0, 0, 64, (2, 5)),
                in_place("%z", 0, 0, 64, (2, 4)),
            ],
        );
        check(&plan, &["buffers `%y` [0, 64) and `%z` [0, 64) overlap in memory and are both live at step 2"]);
    }

    // Rule 6.

    #[test]
    fn rule6_two_ops_at_one_step() {
        let mut plan = plan(64, vec![owned("%a", 0, 64, (0, 2))]);
        plan.accesses.push(access(0, "other", &[], &[]));
        check(
            &plan,
            &["ops `op0` and `other` both run at step 0; a step runs one op"],
        );
    }

    #[test]
    fn rule6_read_after_end() {
        let mut plan = plan(
            128,
            vec![owned("%a", 0, 64, (0, 2)), owned("%b", 64, 64, (2, 3))],
        );
        plan.accesses[1].reads.push(0);
        check(
            &plan,
            &["op `op2` at step 2 reads `%a`, which is live only in [0, 2)"],
        );
    }

    #[test]
    fn rule6_read_before_start() {
        let mut plan = plan(
            128,
            vec![owned("%a", 0, 64, (0, 2)), owned("%b", 64, 64, (1, 3))],
        );
        plan.accesses[0].reads.push(1);
        check(
            &plan,
            &["op `op0` at step 0 reads `%b`, which is live only in [1, 3)"],
        );
    }

    #[test]
    fn rule6_write_after_start() {
        let mut plan = plan(64, vec![owned("%a", 0, 64, (0, 2))]);
        plan.accesses[0].step = 1;
        check(
            &plan,
            &["op `op0` at step 1 writes `%a`, which starts at step 0; a buffer is written at its first live step"],
        );
    }

    #[test]
    fn rule6_input_written() {
        let mut plan = plan(
            128,
            vec![input("%x", 0, 64, 2), owned("%a", 64, 64, (1, 2))],
        );
        plan.accesses[0].writes.push(0);
        check(
            &plan,
            &["op `op1` at step 1 writes graph input `%x`; inputs are never written"],
        );
    }

    #[test]
    fn rule6_input_starts_late() {
        let mut plan = plan(64, vec![input("%x", 0, 64, 2)]);
        plan.buffers[0].start = 1;
        check(
            &plan,
            &["graph input `%x` starts at step 1, but inputs are live from step 0"],
        );
    }

    #[test]
    fn rule6_input_not_owned() {
        let mut plan = plan(
            64,
            vec![owned("%a", 0, 64, (0, 2)), view("%v", 0, 0, 0, 64, (0, 2))],
        );
        plan.buffers[1].is_input = true;
        check(
            &plan,
            &["graph input `%v` must own its bytes, but is a view or an in-place result"],
        );
    }

    #[test]
    fn rule6_never_written() {
        let mut plan = plan(64, vec![owned("%a", 0, 64, (0, 2))]);
        plan.accesses.clear();
        check(&plan, &["buffer `%a` is never written: no op produces it"]);
    }

    #[test]
    fn rule6_written_twice() {
        // The second write is also not at `%a`'s first step.
        let mut plan = plan(64, vec![owned("%a", 0, 64, (0, 2))]);
        plan.accesses.push(access(1, "again", &[], &[0, 0]));
        check(
            &plan,
            &[
                "op `again` at step 1 writes `%a`, which starts at step 0; a buffer is written at its first live step",
                "op `again` at step 1 writes `%a`, which starts at step 0; a buffer is written at its first live step",
                "buffer `%a` is written by both `op0` at step 0 and `again` at step 1; a buffer has one producer",
            ],
        );
    }

    // Rule 7: scratch.

    fn scratch(name: &str, offset: u64, size: u64, live: (u64, u64)) -> CheckedBuffer {
        CheckedBuffer {
            kind: BufferKind::Scratch,
            ..owned(name, offset, size, live)
        }
    }

    /// `%x` (input, read at step 1) and `%y` (written at step 1) with the scratch of step 1
    /// at `scratch_offset`, and `%z` written at step 2 over the scratch's bytes.
    fn with_scratch(scratch_offset: u64) -> PlanToCheck {
        let mut plan = plan(
            256,
            vec![
                input("%x", 0, 64, 2),
                owned("%y", 64, 64, (1, 3)),
                scratch("scratch(%y)", scratch_offset, 64, (1, 2)),
                owned("%z", 128, 64, (2, 3)),
            ],
        );
        plan.accesses[0].reads.push(0);
        plan.accesses[1].reads.push(1);
        plan
    }

    #[test]
    fn scratch_is_reused_after_its_step() {
        check(&with_scratch(128), &[]);
    }

    #[test]
    fn rule7_scratch_overlaps_an_operand() {
        check(
            &with_scratch(0),
            &["buffers `%x` [0, 64) and `scratch(%y)` [0, 64) overlap in memory and are both live at step 1"],
        );
    }

    #[test]
    fn rule7_scratch_overlaps_a_result() {
        check(
            &with_scratch(64),
            &["buffers `%y` [64, 128) and `scratch(%y)` [64, 128) overlap in memory and are both live at step 1"],
        );
    }

    #[test]
    fn rule7_scratch_lives_one_step() {
        let mut plan = with_scratch(192);
        plan.buffers[2].end = 3;
        check(
            &plan,
            &["scratch buffer `scratch(%y)` is live in [1, 3), but scratch lives exactly one step"],
        );
        let violations = validate(&plan).unwrap_err();
        assert_eq!(violations[0].rule(), Some(7));
    }

    // The cap.

    #[test]
    fn stops_after_the_limit() {
        let buffers = (0..150).map(|i| CheckedBuffer {
            align: 2,
            ..owned(&format!("%{i}"), 2 * i + 1, 1, (0, 1))
        });
        let plan = plan(1000, buffers.collect());
        let violations = validate(&plan).unwrap_err();
        assert_eq!(violations.len(), DEFAULT_MAX_VIOLATIONS + 1);
        assert_eq!(
            violations[DEFAULT_MAX_VIOLATIONS].to_string(),
            "stopped after 100 violations; the plan may have more"
        );
        let violations = validate_with_limit(&plan, 3).unwrap_err();
        assert_eq!(violations.len(), 4);
        assert_eq!(violations[3], Violation::TooMany { limit: 3 });
        assert_eq!(violations[0].rule(), Some(2));
        assert_eq!(violations[3].rule(), None);
    }
}
