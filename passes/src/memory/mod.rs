//! Memory planning on the IR: the stages of DESIGN.md, one module each, run in order by
//! [`plan_function_with_scratch`].
//!
//! 1. [`bufferize`] (views): which bytes every value uses; views of other values
//!    ([`memc_ir::ops::view_of`]) use their source's, weights and their views none.
//! 2. [`schedule`]: the dependency graph and candidate orders (model order, greedy, exact
//!    search for graphs of at most [`EXACT_LIMIT`] ops).
//! 3. For each candidate, [`liveness`] (the step of every op, the last step reading each
//!    value) and [`bufferize`] (one buffer per value with its live range and its view or
//!    in-place constraint, plus scratch); the candidate with the lowest LOAD is kept (the
//!    first on ties).
//! 4. [`assign`]: offsets from the IR-independent planner core (`crate::plan`).
//! 5. [`liveness`] again: the live-bytes profile of the plan and its peak step.
//! 6. [`check`]: the independent validator re-checks the plan; a failure is a memc bug.
//!
//! # Policy
//!
//! - **Weights** (`memc.weight` results, and views of them) never live in the arena: the
//!   runtime reads them from the memory-mapped model.
//! - **Graph inputs** live in the arena from step 0 (the caller copies them in) until their last
//!   use, so their bytes are reused after it.
//! - **Graph outputs** live in the arena from the step that produces them to the end (the
//!   caller copies them out after `func.return`).
//! - **Views** (ops for which [`memc_ir::ops::view_of`] answers: Reshape, Squeeze, Unsqueeze,
//!   Flatten, Identity, inference Dropout, Transpose that only moves size-1 dims, and Slice that
//!   cuts one contiguous run of bytes) alias their source's bytes: no copy, no buffer.
//! - **In-place**: an op with the `IN_PLACE` trait (the elementwise ops) whose result has
//!   exactly the type of an operand that dies at the op may write over that operand's bytes.
//!
//! Step `0` holds the graph inputs; the op at position `i` of the schedule runs at step
//! `i + 1`. A value is live on `[producer step, last reading step + 1)`.
//!
//! The schedule (a topological order of the function's ops) is chosen to lower the peak: the
//! model's own order, a greedy order that runs the ready op that frees the most bytes, and,
//! for graphs of at most [`EXACT_LIMIT`] ops, an exact search over orders; the one with the
//! lowest LOAD is kept. Functions with regions (`onnx.If`) are not planned yet.
//!
//! # Figures
//!
//! Besides the arena, a plan carries two kinds of figure, never mixed:
//!
//! - **Activation lower bounds** (`bound_model_order`, `bound_chosen_order`): the most bytes
//!   live at one step when every arena value (graph inputs, op results; not weights or state)
//!   owns its exact bytes, without scratch, in the model's own op order and in the chosen
//!   schedule's ([`liveness::activation_bound`]). The model-order bound is what the model's
//!   tensors need as written; `bench/activation_bound.py` computes it from the ONNX file
//!   alone. The arena may be below it (the chosen order, views and in-place results) or above
//!   it (scratch, alignment).
//! - **LOAD** (`load`, `load_model_order`, `load_without_sharing`): the same maximum over
//!   steps of the buffers the planner places (aligned sizes, views and in-place taken except
//!   in `load_without_sharing`), **with scratch**: the lower bound of any offset assignment
//!   for those buffers, which is what the schedulers compare.
//! - `scratch_peak`: the largest scratch of one op, the most scratch live at one step.
//!
//! # Scratch
//!
//! Code generation may ask for working memory per op ([`plan_function_with_scratch`]: a
//! [`ScratchFn`] gives each op's scratch bytes, 0 for none; an im2col matrix for a
//! convolution). Each such op gets one more buffer, live exactly over its step `[s, s + 1)`, so
//! it conflicts with everything the op reads (live until at least `s + 1`) and writes (live from
//! `s`) and with everything else live there, and its bytes are free again at the next step.
//! Scratch counts in LOAD (so in the choice of schedule), in the exact scheduler's peak, in the
//! offset assignment and in the live profile; the validator checks it like any buffer and that
//! it lives one step (its rule 7). Kernels never allocate: the plan holds every byte a run uses.

mod assign;
mod bufferize;
mod check;
mod liveness;
mod schedule;

use crate::plan::{BufferSpec, PlanOptions};
/// For the schedulers' tests (a sibling may not import bufferization: it imports them).
#[cfg(test)]
use bufferize::root_values;
use bufferize::BufferInfo;
use memc_ir::{Diagnostic, Function, Module, OpId, Opcode, TensorType, ValueId, WeightStore};
use std::time::{Duration, Instant};

/// Largest number of schedulable ops for which the exact schedule search runs.
pub const EXACT_LIMIT: usize = 16;
/// Alignment of every arena buffer (a cache line).
pub const ALIGN: u64 = 64;

/// What a buffer is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlannedKind {
    /// A graph input, copied in before step 1.
    Input,
    /// An intermediate or output that owns its bytes.
    Owned,
    /// A view of another buffer (index into [`MemoryPlan::buffers`]).
    View { base: usize, offset: u64 },
    /// Written over the bytes of another buffer by an elementwise op.
    InPlace { input: usize },
}

/// One buffer of a plan.
#[derive(Clone, Debug)]
pub struct PlannedBuffer {
    /// The value's name in printed IR (`%12`, `%arg0`) and, for graph inputs and outputs, its
    /// ONNX name.
    pub name: String,
    pub value: ValueId,
    pub offset: u64,
    pub size: u64,
    pub start: u64,
    pub end: u64,
    /// The producing op (`onnx.MatMul "fc1/MatMul"`), or `input`.
    pub producer: String,
    pub kind: PlannedKind,
    pub ty: TensorType,
    pub is_output: bool,
}

/// The scratch bytes an op needs while it runs (0: none). Code generation provides it.
pub type ScratchFn<'a> = dyn Fn(&Function, OpId) -> u64 + 'a;

/// The working memory of one op: its bytes are the op's alone during its step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedScratch {
    pub op: OpId,
    /// `scratch(<the op's first result>)`.
    pub name: String,
    /// The op (`onnx.Conv "conv1"`).
    pub producer: String,
    pub offset: u64,
    pub size: u64,
    /// The op's step: the scratch is live on `[step, step + 1)`.
    pub step: u64,
}

/// A validated memory plan for one function.
#[derive(Clone, Debug)]
pub struct MemoryPlan {
    pub function: String,
    pub arena_size: u64,
    /// The model's activation lower bound: the most bytes live at one step in the model's
    /// own op order when every value owns its bytes, without scratch (see "Figures"), for
    /// the function planned; memc's compile pipeline replaces it with the bound of the model
    /// before its fusions ([`model_order_bound`]).
    pub bound_model_order: u64,
    /// The same bound for the chosen schedule's order.
    pub bound_chosen_order: u64,
    /// The largest scratch of one op (one op runs per step, so the most scratch bytes live at
    /// one step); 0 when no op asked for any.
    pub scratch_peak: u64,
    /// LOAD of the chosen schedule with views and in-place taken, scratch included.
    pub load: u64,
    /// LOAD of the chosen schedule if every value owned its bytes, scratch included.
    pub load_without_sharing: u64,
    /// LOAD of the model's own op order, with views and in-place, scratch included.
    pub load_model_order: u64,
    pub schedule: Vec<OpId>,
    /// Which heuristic gave the schedule.
    pub schedule_name: &'static str,
    pub buffers: Vec<PlannedBuffer>,
    /// The scratch memory of the ops that asked for it, in schedule order.
    pub scratch: Vec<PlannedScratch>,
    /// The offset-assignment strategy that won.
    pub strategy: &'static str,
    pub plan_time: Duration,
    /// The step with the most live bytes, and the buffers live there.
    pub peak_step: u64,
    /// Live bytes at each step (index = step).
    pub live_bytes: Vec<u64>,
}

impl MemoryPlan {
    /// The step `op` runs at (`None` for an op the schedule does not hold).
    pub fn step_of(&self, op: OpId) -> Option<u64> {
        self.schedule
            .iter()
            .position(|&o| o == op)
            .map(|i| i as u64 + 1)
    }

    /// The largest run of arena bytes that nothing live at `step` uses (no buffer live there,
    /// no scratch of that step), starting at a multiple of [`ALIGN`]: `(offset, bytes)`,
    /// `bytes` 0 when there is none. Scratch placed there does not move or grow anything.
    pub fn free_extent(&self, step: u64) -> (u64, u64) {
        let mut used: Vec<(u64, u64)> = self
            .buffers
            .iter()
            .filter(|b| b.start <= step && step < b.end && b.size > 0)
            .map(|b| (b.offset, b.offset + b.size))
            .chain(
                self.scratch
                    .iter()
                    .filter(|s| s.step == step && s.size > 0)
                    .map(|s| (s.offset, s.offset + s.size)),
            )
            .collect();
        used.sort_unstable();
        let mut best = (0, 0);
        let mut from = 0u64;
        for (start, end) in used.into_iter().chain([(self.arena_size, self.arena_size)]) {
            let offset = from.next_multiple_of(ALIGN);
            if start > offset && start - offset > best.1 {
                best = (offset, start - offset);
            }
            from = from.max(end);
        }
        best
    }

    /// Takes `op`'s scratch out of the plan and returns its offset and size (`None` when it
    /// has none), to place it again with [`MemoryPlan::add_scratch`] (larger, where
    /// [`MemoryPlan::free_extent`] then finds room, or where it was). The arena does not
    /// change.
    pub fn remove_scratch(&mut self, op: OpId) -> Option<(u64, u64)> {
        let at = self.scratch.iter().position(|s| s.op == op)?;
        let scratch = self.scratch.remove(at);
        let n_steps = self.schedule.len() as u64 + 2;
        (self.live_bytes, self.peak_step) =
            liveness::live_bytes(&self.buffers, &self.scratch, n_steps);
        Some((scratch.offset, scratch.size))
    }

    /// Gives `op` (which has no scratch yet) `size` bytes of scratch at `offset` for its step,
    /// inside the arena as it is (see [`MemoryPlan::free_extent`]), and re-checks the plan
    /// with the validator; the arena does not change.
    pub fn add_scratch(
        &mut self,
        func: &Function,
        op: OpId,
        offset: u64,
        size: u64,
    ) -> Result<(), Diagnostic> {
        let step = self.step_of(op).ok_or_else(|| {
            Diagnostic::error("internal error: scratch for an op the schedule does not hold")
        })?;
        if self.scratch.iter().any(|s| s.op == op) || offset.saturating_add(size) > self.arena_size
        {
            return Err(Diagnostic::error(
                "internal error: scratch added twice or outside the arena",
            ));
        }
        let (name, producer) = scratch_names(func, op);
        let at = self.scratch.partition_point(|s| s.step < step);
        self.scratch.insert(
            at,
            PlannedScratch {
                op,
                name,
                producer,
                offset,
                size,
                step,
            },
        );
        let n_steps = self.schedule.len() as u64 + 2;
        (self.live_bytes, self.peak_step) =
            liveness::live_bytes(&self.buffers, &self.scratch, n_steps);
        self.scratch_peak = self.scratch_peak.max(size);
        self.load = self
            .load
            .max(self.live_bytes.get(step as usize).copied().unwrap_or(0));
        check::check(func, self)
    }
}

/// Plans the single function of `module` (every dim must be static), without scratch memory.
pub fn plan_module(module: &Module, options: &PlanOptions) -> Result<MemoryPlan, Diagnostic> {
    plan_module_with_scratch(module, options, &|_, _| 0)
}

/// Plans the single function of `module` with `scratch` bytes of working memory per op.
pub fn plan_module_with_scratch(
    module: &Module,
    options: &PlanOptions,
    scratch: &ScratchFn,
) -> Result<MemoryPlan, Diagnostic> {
    let mut funcs = module.functions();
    let (_, func) = funcs
        .next()
        .ok_or_else(|| Diagnostic::error("the module has no function"))?;
    require_static_dims(module)?;
    plan_function_with_scratch(func, &module.weights, options, scratch)
}

/// An error naming the dims to bind when `module` has unbound symbolic dims (memory is
/// planned only for static sizes).
pub fn require_static_dims(module: &Module) -> Result<(), Diagnostic> {
    let unbound = memc_ir::infer::unbound_symbols(module);
    if unbound.is_empty() {
        return Ok(());
    }
    let flags: Vec<String> = unbound.iter().map(|n| format!("--dim {n}=N")).collect();
    Err(Diagnostic::error(format!(
        "cannot plan memory: the model has unbound symbolic dims: {}",
        unbound.join(", ")
    ))
    .with_note(format!("bind every one, e.g. {}", flags.join(" "))))
}

/// Plans one function, without scratch memory.
pub fn plan_function(
    func: &Function,
    weights: &WeightStore,
    options: &PlanOptions,
) -> Result<MemoryPlan, Diagnostic> {
    plan_function_with_scratch(func, weights, options, &|_, _| 0)
}

/// Plans one function with `scratch` bytes of working memory per op (see the module doc).
pub fn plan_function_with_scratch(
    func: &Function,
    weights: &WeightStore,
    options: &PlanOptions,
    scratch: &ScratchFn,
) -> Result<MemoryPlan, Diagnostic> {
    let started = Instant::now();
    let (ops, ret) = schedulable_ops(func)?;
    let root = bufferize::root_values(func, weights, &ops);
    let graph = schedule::Graph::new(func, ops, ret, &root, scratch);
    let mut best: Option<Candidate> = None;
    let mut load_model_order = 0;
    let mut bound_model_order = 0;
    for (name, order) in schedule::candidates(func, &graph, &root) {
        let steps = liveness::Steps::new(func, &graph, &order);
        let (specs, infos) = bufferize::buffers_for(func, weights, &graph, &order, &root, &steps)?;
        let load = assign::load(&specs)?;
        let bound = liveness::activation_bound(func, weights, &graph, &order, &root, &steps)?;
        if name == "model order" {
            load_model_order = load;
            bound_model_order = bound;
        }
        if best.as_ref().is_none_or(|b| load < b.load) {
            best = Some(Candidate {
                load,
                bound,
                name,
                order,
                specs,
                infos,
            });
        }
    }
    let chosen = best.ok_or_else(|| Diagnostic::error("no schedule"))?;
    let assigned = assign::assign(&chosen.specs, &chosen.infos, options)?;
    let schedule: Vec<OpId> = chosen.order.iter().map(|&i| graph.ops[i]).collect();
    let n_steps = schedule.len() as u64 + 2;
    let (live_bytes, peak_step) =
        liveness::live_bytes(&assigned.buffers, &assigned.scratch, n_steps);
    let scratch_peak = assigned.scratch.iter().map(|s| s.size).max().unwrap_or(0);
    let memory_plan = MemoryPlan {
        function: func.name().to_string(),
        arena_size: assigned.arena_size,
        bound_model_order,
        bound_chosen_order: chosen.bound,
        scratch_peak,
        load: assigned.load,
        load_without_sharing: assigned.load_without_sharing,
        load_model_order,
        schedule,
        schedule_name: chosen.name,
        buffers: assigned.buffers,
        scratch: assigned.scratch,
        strategy: assigned.strategy,
        plan_time: started.elapsed(),
        peak_step,
        live_bytes,
    };
    check::check(func, &memory_plan)?;
    Ok(memory_plan)
}

/// The activation lower bound of `func` in its own op order (see "Figures" in the module
/// doc), without planning it: memc's pipeline measures the model this way before its
/// fusions, so the bound is the model's, not memc's rewrite of it. Every dim must be static.
pub fn model_order_bound(func: &Function, weights: &WeightStore) -> Result<u64, Diagnostic> {
    model_order_live(func, weights).map(|(bound, _)| bound)
}

/// [`model_order_bound`] and, for every op it schedules, the activation bytes live at its
/// step in the model's order: what a form's scratch adds to at that op. A scratch within
/// `bound - live` does not raise the model's peak.
pub fn model_order_live(
    func: &Function,
    weights: &WeightStore,
) -> Result<(u64, std::collections::HashMap<OpId, u64>), Diagnostic> {
    let (ops, ret) = schedulable_ops(func)?;
    let root = bufferize::root_values(func, weights, &ops);
    let graph = schedule::Graph::new(func, ops, ret, &root, &|_, _| 0);
    let order: Vec<usize> = (0..graph.ops.len()).collect();
    let steps = liveness::Steps::new(func, &graph, &order);
    let live = liveness::activation_live(func, weights, &graph, &order, &root, &steps)?;
    let bound = live.iter().copied().max().unwrap_or(0);
    let at = graph
        .ops
        .iter()
        .filter_map(|op| {
            let step = *steps.step_of.get(op)? as usize;
            Some((*op, live.get(step).copied().unwrap_or(bound)))
        })
        .collect();
    Ok((bound, at))
}

/// The ops to schedule (in model order: every op of the entry block but weights, `memc.none`
/// and the terminator) and the terminator, after checking that the function can be planned:
/// no regions, and a static size for every arena value.
fn schedulable_ops(func: &Function) -> Result<(Vec<OpId>, OpId), Diagnostic> {
    let entry = func.entry_block();
    let block_ops = func.layout().block_ops(entry).to_vec();
    if block_ops.iter().any(|&op| !func.op(op).regions.is_empty()) {
        return Err(Diagnostic::error(
            "cannot plan memory: functions with regions (onnx.If) are not supported yet",
        ));
    }
    let ret = *block_ops
        .last()
        .ok_or_else(|| Diagnostic::error("the function is empty"))?;
    let ops: Vec<OpId> = block_ops
        .iter()
        .copied()
        .filter(|&op| {
            !matches!(
                func.op(op).opcode,
                Opcode::Weight | Opcode::None | Opcode::Return
            )
        })
        .collect();
    // Every arena value needs a static size.
    for &arg in func.args() {
        static_bytes(func, arg)?;
    }
    for &op in &ops {
        for &r in &func.op(op).results {
            static_bytes(func, r)?;
        }
    }
    Ok((ops, ret))
}

/// A scored schedule: its LOAD, its activation bound, its name, the order, and its buffers.
struct Candidate {
    load: u64,
    bound: u64,
    name: &'static str,
    order: Vec<usize>,
    specs: Vec<BufferSpec>,
    infos: Vec<BufferInfo>,
}

/// A value's bytes, or an error naming the unbound dims.
fn static_bytes(func: &Function, value: ValueId) -> Result<Option<u64>, Diagnostic> {
    let Some(ty) = func.value_type(value).tensor() else {
        return Ok(None);
    };
    match ty.static_arena_bytes() {
        Some(n) => Ok(Some(n)),
        None => {
            let mut names: Vec<String> = ty
                .dims
                .iter()
                .flat_map(|d| d.symbols())
                .map(|s| s.to_string())
                .collect();
            names.sort();
            names.dedup();
            let what = if names.is_empty() {
                "a dim of it has no name and could not be inferred".to_string()
            } else {
                let flags: Vec<String> = names.iter().map(|n| format!("--dim {n}=N")).collect();
                format!("bind its dims: {}", flags.join(" "))
            };
            let producer = func
                .defining_op(value)
                .map_or("a graph input".to_string(), |op| op_label(func, op));
            Err(Diagnostic::error(format!(
                "cannot plan memory: the size of {} (from {producer}) is not known: {ty}",
                value_name(func, value)
            ))
            .with_note(what))
        }
    }
}

/// An op as the plan names it: `onnx.Conv "conv1"`, or its opcode without a location.
fn op_label(func: &Function, op: OpId) -> String {
    let data = func.op(op);
    match &data.loc {
        Some(loc) => format!("{} \"{loc}\"", data.opcode.name()),
        None => data.opcode.name().to_string(),
    }
}

/// The name of `op`'s scratch buffer (`scratch(<its first result>)`) and its producer label.
fn scratch_names(func: &Function, op: OpId) -> (String, String) {
    let producer = op_label(func, op);
    let name = func
        .op(op)
        .results
        .first()
        .map_or_else(|| producer.clone(), |&r| value_name(func, r));
    (format!("scratch({name})"), producer)
}

fn value_name(func: &Function, value: ValueId) -> String {
    if let Some(i) = func.args().iter().position(|&a| a == value) {
        let onnx = func.arg_attrs(i).get("memc.name").and_then(|a| a.as_str());
        return onnx.map_or(format!("%arg{i}"), |n| n.to_string());
    }
    match func
        .defining_op(value)
        .and_then(|op| func.op(op).loc.clone())
    {
        Some(loc) => {
            let index = func.defining_op(value).map_or(0, |op| {
                func.op(op)
                    .results
                    .iter()
                    .position(|&r| r == value)
                    .unwrap_or(0)
            });
            if func
                .defining_op(value)
                .is_some_and(|op| func.op(op).results.len() > 1)
            {
                format!("{loc}#{index}")
            } else {
                loc
            }
        }
        None => format!("{value}"),
    }
}
