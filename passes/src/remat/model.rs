//! The rematerialization model: a function's schedule as plain data, and the live profile of
//! that schedule with recomputations inserted, computed with the planner's own sharing rules.
//!
//! A [`Model`] lists the values the arena holds and the ops of one schedule (the memory
//! planner's). A [`Candidate`] clones a chain of ops right before a base op; from there on,
//! every read of a value reads its latest copy (a clone computes exactly what the original
//! did, so any copy will do), which ends the original's life at its last earlier read.
//! [`Model::evaluate`] turns a set of candidates into the buffers bufferization would make
//! (the same rules: graph inputs from step 0, outputs to the end, views keep their base
//! alive, in-place results may share an operand that dies at them, scratch for one step) and
//! measures them with the planner core's own grouping (`crate::plan::group_intervals`), so
//! the LOAD here is the LOAD the planner computes for that schedule: a test checks it on every
//! applied plan. An original op none of whose results is read any more (every read went to a
//! clone: a move) no longer runs; the IR rewrite erases the same ops.

use crate::plan::{group_intervals, BufferSpec, Constraint};

/// Alignment of every owned arena buffer (as the memory planner's).
const ALIGN: u64 = super::super::memory::ALIGN;

/// A value the arena holds.
#[derive(Clone, Debug)]
pub struct Value {
    /// Bytes of its buffer.
    pub size: u64,
    /// Bytes of one element (a view's alignment).
    pub elem_bytes: u64,
    /// A view: the value whose bytes it uses, and the byte offset in them.
    pub view_of: Option<(usize, u64)>,
    /// Values with equal types get equal keys (in-place needs the same type).
    pub ty: u32,
    pub input: bool,
    /// Returned by the function.
    pub output: bool,
    /// The op that computes it (`None` for graph inputs).
    pub producer: Option<usize>,
}

/// An op of the schedule.
#[derive(Clone, Debug)]
pub struct Op {
    /// The values it computes, in result order.
    pub results: Vec<usize>,
    /// The arena values it reads, in operand order (weights and state are not listed).
    pub operands: Vec<usize>,
    pub flops: u64,
    /// Working bytes it needs during its step.
    pub scratch: u64,
    /// May write its result over an operand of the same type that dies at it.
    pub in_place: bool,
    /// May run again: pure, deterministic, no regions.
    pub recompute: bool,
    /// onnxruntime's spelling of its type (`Gelu`, `FusedMatMul`), for config strings.
    pub kind: String,
}

/// A function's schedule as the remat pass sees it.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub values: Vec<Value>,
    /// The ops in schedule order.
    pub ops: Vec<Op>,
}

/// One rematerialization: clone `chain` (base op indices, in the order the clones run: each
/// after the ops whose results it reads; the candidates' chains are in schedule order) right
/// before base op `at` (`at == ops.len()`: before the function returns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The buffer whose bytes it frees over a gap between two reads.
    pub target: usize,
    pub at: usize,
    pub chain: Vec<usize>,
    pub flops: u64,
    /// The base op that last read the target before the gap.
    pub gap_from: usize,
    /// Values the chain reads that are not live at `at` and are not recomputed: their lives
    /// get longer.
    pub extends: Vec<usize>,
    /// onnxruntime's subgraph string: the chain's op types, each followed by `+`.
    pub label: String,
    /// The gap runs from the producer to the first read: the chain moves the computation
    /// later (its originals stop running) rather than repeating it.
    pub moves: bool,
}

impl Candidate {
    /// Whether `other` frees the same buffer over the same gap (the variants of one gap
    /// exclude each other).
    pub fn same_gap(&self, other: &Candidate) -> bool {
        self.target == other.target && self.gap_from == other.gap_from
    }
}

/// The chosen candidates by the base position they run before (`n + 1` lists for `n` ops),
/// each list in the one order both the model and the IR rewrite insert clones in.
pub fn insertions<'c>(
    n: usize,
    chosen: impl IntoIterator<Item = &'c Candidate>,
) -> Vec<Vec<&'c Candidate>> {
    let mut at: Vec<Vec<&Candidate>> = vec![Vec::new(); n + 1];
    for c in chosen {
        at[c.at].push(c);
    }
    for list in &mut at {
        list.sort_by_key(|c| (c.chain.last().copied(), c.target));
    }
    at
}

/// The profile of a schedule with some candidates applied.
#[derive(Clone, Debug)]
pub struct Profile {
    /// LOAD: the most bytes live at one step, sharing taken (what the planner reports).
    pub load: u64,
    /// Live bytes at each step.
    pub live: Vec<u64>,
    /// For each step, the base op running there (or about to, for clones); `ops.len()` for
    /// the return.
    pub base_at: Vec<usize>,
    /// Each step's op: `None` for step 0 (the inputs) and the return.
    pub op_at: Vec<Option<usize>>,
    /// Extra FLOPs of the clones, less those of the originals that no longer run.
    pub extra_flops: u64,
    /// Base ops that no longer run: every read of their results goes to a clone.
    pub removed: Vec<usize>,
}

/// An op of the extended schedule: a base op, or a clone of one.
struct Exec {
    base: usize,
    /// The base position it runs at: its own, or for a clone, the base op it runs before.
    pos: usize,
    reads: Vec<usize>,
}

/// The buffers of an extended schedule.
struct Buffers {
    /// Base ops of the chains that ran and whose results nothing used: every read went to a
    /// clone (a chain that moves a computation later rather than repeating it).
    dead: Vec<usize>,
    specs: Vec<BufferSpec>,
    last_step: u64,
    base_at: Vec<usize>,
    op_at: Vec<Option<usize>>,
    extra_flops: u64,
}

/// A copy of a value: the original or a clone's result.
struct Copy {
    value: usize,
    start: u64,
    last_read: u64,
    /// The copy whose bytes a view copy uses.
    view_of: Option<usize>,
    /// The step whose op wrote it in place candidate-wise (index into `execs`).
    writer: Option<usize>,
}

impl Model {
    /// Total FLOPs of one run of the schedule.
    pub fn flops(&self) -> u64 {
        self.ops.iter().fold(0u64, |a, o| a.saturating_add(o.flops))
    }

    /// The buffers of the schedule with `chosen` candidates applied, as bufferization makes
    /// them, and the extended schedule's bookkeeping.
    fn buffers(&self, chosen: &[&Candidate], removed: &[bool]) -> Buffers {
        let n = self.ops.len();
        let at = insertions(n, chosen.iter().copied());
        let mut copies: Vec<Copy> = Vec::with_capacity(self.values.len());
        let mut latest: Vec<Option<usize>> = vec![None; self.values.len()];
        for (v, value) in self.values.iter().enumerate() {
            if value.input {
                latest[v] = Some(copies.len());
                copies.push(Copy {
                    value: v,
                    start: 0,
                    last_read: 0,
                    view_of: None,
                    writer: None,
                });
            }
        }
        let mut execs: Vec<Exec> = Vec::with_capacity(n);
        let mut extra_flops = 0u64;
        let run = |base: usize,
                   pos: usize,
                   copies: &mut Vec<Copy>,
                   latest: &mut Vec<Option<usize>>,
                   execs: &mut Vec<Exec>| {
            let op = &self.ops[base];
            let step = execs.len() as u64 + 1;
            let reads: Vec<usize> = op.operands.iter().filter_map(|&v| latest[v]).collect();
            for &c in &reads {
                copies[c].last_read = copies[c].last_read.max(step);
            }

            for &r in &op.results {
                let view_of = self.values[r]
                    .view_of
                    .and_then(|(source, _)| latest[source]);
                latest[r] = Some(copies.len());

                copies.push(Copy {
                    value: r,
                    start: step,
                    last_read: 0,
                    view_of,
                    writer: Some(execs.len()),
                });
            }
            execs.push(Exec { base, pos, reads });
        };
        for (p, here) in at.iter().enumerate() {
            for c in here {
                for &o in &c.chain {
                    run(o, p, &mut copies, &mut latest, &mut execs);
                    extra_flops = extra_flops.saturating_add(self.ops[o].flops);
                }
            }
            if p < n && !removed[p] {
                run(p, p, &mut copies, &mut latest, &mut execs);
            }
        }
        let last_step = execs.len() as u64 + 1;
        let mut is_output = vec![false; copies.len()];
        for (v, value) in self.values.iter().enumerate() {
            if value.output {
                if let Some(c) = latest[v] {
                    is_output[c] = true;
                    copies[c].last_read = last_step;
                }
            }
        }
        // Buffers: inputs first, then results in schedule order (their copy order), then
        // scratch, as bufferization orders them.
        let mut specs: Vec<BufferSpec> = Vec::with_capacity(copies.len());
        let mut spec_of: Vec<usize> = vec![usize::MAX; copies.len()];
        let mut scratch_specs = Vec::new();
        for (i, copy) in copies.iter().enumerate() {
            let value = &self.values[copy.value];
            let end = if is_output[i] {
                last_step + 1
            } else {
                (copy.last_read + 1).max(copy.start + 1)
            };
            let constraint = match copy.view_of.map(|b| (spec_of[b], value.view_of)) {
                Some((base, Some((_, offset)))) if base != usize::MAX => {
                    Constraint::AliasOf { base, offset }
                }
                _ => match copy.writer {
                    Some(e) => self.in_place(&execs[e], i, &copies, &is_output, &spec_of),
                    None => Constraint::None,
                },
            };
            let align = match constraint {
                Constraint::AliasOf { .. } => value.elem_bytes.max(1),
                _ => ALIGN,
            };
            spec_of[i] = specs.len();
            specs.push(
                BufferSpec::new(value.size, copy.start, end)
                    .with_align(align)
                    .with_constraint(constraint),
            );
        }
        for (e, exec) in execs.iter().enumerate() {
            let scratch = self.ops[exec.base].scratch;
            if scratch > 0 {
                let step = e as u64 + 1;
                scratch_specs.push(BufferSpec::new(scratch, step, step + 1).with_align(ALIGN));
            }
        }
        for i in (0..specs.len()).rev() {
            if let Constraint::AliasOf { base, .. } = specs[i].constraint {
                specs[base].end = specs[base].end.max(specs[i].end);
            }
        }
        specs.extend(scratch_specs);
        // A copy is used if it is read, returned, or a used view's bytes.
        let mut used: Vec<bool> = (0..copies.len())
            .map(|i| is_output[i] || copies[i].last_read > 0)
            .collect();
        for i in (0..copies.len()).rev() {
            if let (true, Some(b)) = (used[i], copies[i].view_of) {
                used[b] = true;
            }
        }
        let mut dead: Vec<usize> = chosen
            .iter()
            .flat_map(|c| c.chain.iter().copied())
            .filter(|&o| !removed[o] && self.ops[o].recompute)
            .collect();
        dead.sort_unstable();
        dead.dedup();
        let mut original_used = vec![false; n];
        for (i, copy) in copies.iter().enumerate() {
            if let Some(e) = copy.writer {
                // A clone runs before a later op than its original (`pos > base`).
                let exec = &execs[e];
                if exec.pos == exec.base && used[i] {
                    original_used[exec.base] = true;
                }
            }
        }
        dead.retain(|&o| !original_used[o]);
        Buffers {
            dead,
            specs,
            last_step,
            base_at: std::iter::once(0)
                .chain(execs.iter().map(|e| e.pos))
                .chain(std::iter::once(n))
                .collect(),
            op_at: std::iter::once(None)
                .chain(execs.iter().map(|e| Some(e.base)))
                .chain(std::iter::once(None))
                .collect(),
            extra_flops,
        }
    }

    /// `MayShareWith(x)` for a result of an in-place capable op whose operand `x` owns its
    /// bytes, has the result's type and dies at the op; of several, the one written last
    /// (bufferization's rule, `in_place_candidate`).
    fn in_place(
        &self,
        exec: &Exec,
        result: usize,
        copies: &[Copy],
        is_output: &[bool],
        spec_of: &[usize],
    ) -> Constraint {
        let op = &self.ops[exec.base];
        if !op.in_place {
            return Constraint::None;
        }
        let step = copies[result].start;
        let ty = self.values[copies[result].value].ty;
        exec.reads
            .iter()
            .copied()
            .filter(|&x| {
                let copy = &copies[x];
                let owns = copy.view_of.is_none() && self.values[copy.value].view_of.is_none();
                let dies_here = copy.last_read == step && !is_output[x];
                owns && dies_here && self.values[copy.value].ty == ty && spec_of[x] != usize::MAX
            })
            .rev()
            .max_by_key(|&x| copies[x].start)
            .map_or(Constraint::None, |x| Constraint::MayShareWith(spec_of[x]))
    }

    /// The live profile of the schedule with `chosen` applied.
    pub fn evaluate(&self, chosen: &[&Candidate]) -> Profile {
        // Originals whose every read went to a clone do not run: drop them and look again
        // (dropping one may leave another chain op's original unread).
        let mut removed = vec![false; self.ops.len()];
        let mut buffers = self.buffers(chosen, &removed);
        while !buffers.dead.is_empty() {
            for &o in &buffers.dead {
                removed[o] = true;
            }
            buffers = self.buffers(chosen, &removed);
        }
        let Buffers {
            specs,
            last_step,
            base_at,
            op_at,
            extra_flops,
            ..
        } = buffers;
        let saved = (0..self.ops.len())
            .filter(|&o| removed[o])
            .fold(0u64, |a, o| a.saturating_add(self.ops[o].flops));
        let extra_flops = extra_flops.saturating_sub(saved);
        let removed: Vec<usize> = (0..self.ops.len()).filter(|&o| removed[o]).collect();
        let n_steps = last_step as usize + 1;
        let mut delta = vec![0i128; n_steps + 1];
        let intervals = group_intervals(&specs).unwrap_or_default();
        for iv in &intervals {
            if iv.start < iv.end && iv.size > 0 {
                let s = (iv.start as usize).min(n_steps);
                let e = (iv.end as usize).min(n_steps);
                delta[s] += i128::from(iv.size);
                delta[e] -= i128::from(iv.size);
            }
        }
        let mut live = Vec::with_capacity(n_steps);
        let mut running = 0i128;
        for d in delta.iter().take(n_steps) {
            running += d;
            live.push(u64::try_from(running).unwrap_or(0));
        }
        let load = live.iter().copied().max().unwrap_or(0);
        Profile {
            load,
            live,
            base_at,
            op_at,
            extra_flops,
            removed,
        }
    }
}
