//! Memory planning on the IR: schedule, liveness, buffers, offsets, validation, report.
//!
//! # Policy
//!
//! - **Weights** (`memc.weight` results, and views of them) never live in the arena: the
//!   runtime reads them from the memory-mapped model.
//! - **Graph inputs** live in the arena from step 0 (the caller copies them in) until their last
//!   use, so their bytes are reused after it.
//! - **Graph outputs** live in the arena from the step that produces them to the end (the
//!   caller copies them out after `func.return`).
//! - **Views** (Reshape, Squeeze, Unsqueeze, Flatten, Identity, inference Dropout,
//!   Transpose that only moves size-1 dims, and Slice that cuts one contiguous run of bytes)
//!   alias their source's bytes: no copy, no buffer.
//! - **In-place**: an elementwise op whose result has exactly the type of an operand that dies
//!   at the op may write over that operand's bytes.
//!
//! Step `0` holds the graph inputs; the op at position `i` of the schedule runs at step
//! `i + 1`. A value is live on `[producer step, last reading step + 1)`.
//!
//! The schedule (a topological order of the function's ops) is chosen to lower the peak: the
//! model's own order, a greedy order that runs the ready op that frees the most bytes, and,
//! for graphs of at most [`EXACT_LIMIT`] ops, an exact search over orders; the one with the
//! lowest LOAD is kept. Functions with regions (`onnx.If`) are not planned yet.
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

use crate::plan::{load_with_sharing, plan, BufferSpec, Constraint, PlanOptions};
use crate::validate::{validate, Access, BufferKind, CheckedBuffer, PlanToCheck};
use memc_ir::ops::view_of;
use memc_ir::{
    Diagnostic, ElemType, Function, Module, OpId, Opcode, TensorType, Type, ValueId, WeightStore,
};
use std::collections::HashMap;
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
    /// LOAD of the chosen schedule with views and in-place taken.
    pub load: u64,
    /// LOAD of the chosen schedule if every value owned its bytes.
    pub load_without_sharing: u64,
    /// LOAD of the model's own op order, with views and in-place.
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
    let unbound = memc_ir::infer::unbound_symbols(module);
    if !unbound.is_empty() {
        let flags: Vec<String> = unbound.iter().map(|n| format!("--dim {n}=N")).collect();
        return Err(Diagnostic::error(format!(
            "cannot plan memory: the model has unbound symbolic dims: {}",
            unbound.join(", ")
        ))
        .with_note(format!("bind every one, e.g. {}", flags.join(" "))));
    }
    plan_function_with_scratch(func, &module.weights, options, scratch)
}

/// A value's bytes, or an error naming the unbound dims.
fn static_bytes(func: &Function, value: ValueId) -> Result<Option<u64>, Diagnostic> {
    let Some(ty) = func.value_type(value).tensor() else {
        return Ok(None);
    };
    match ty.static_byte_size() {
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
                .map_or("a graph input".to_string(), |op| {
                    let data = func.op(op);
                    data.loc
                        .as_ref()
                        .map_or(data.opcode.name().to_string(), |l| {
                            format!("{} \"{l}\"", data.opcode.name())
                        })
                });
            Err(Diagnostic::error(format!(
                "cannot plan memory: the size of {} (from {producer}) is not known: {ty}",
                value_name(func, value)
            ))
            .with_note(what))
        }
    }
}

/// The op's view source (the operand whose bytes the result aliases) and the byte offset,
/// if the op is a view ([`view_of`]).
fn view_source(func: &Function, weights: &WeightStore, op: OpId) -> Option<(ValueId, u64)> {
    view_of(func, weights, op).map(|v| (v.source, v.byte_offset))
}

struct Graph {
    /// Schedulable ops in model order (no weights, no `memc.none`, no terminator).
    ops: Vec<OpId>,
    ret: OpId,
    /// For each schedulable op, indices of ops it depends on.
    preds: Vec<Vec<usize>>,
    /// Bytes each op allocates (its owned results), and the value each result roots to.
    alloc: Vec<u64>,
    /// Scratch bytes each op uses during its step.
    scratch: Vec<u64>,
}

/// The root value whose bytes a value uses (itself, or the source of its view chain), or
/// `None` for values outside the arena (weights, `none`).
fn root_values(func: &Function, weights: &WeightStore, ops: &[OpId]) -> HashMap<ValueId, ValueId> {
    let mut root: HashMap<ValueId, ValueId> = HashMap::new();
    for &arg in func.args() {
        root.insert(arg, arg);
    }
    for &op in ops {
        let source = view_source(func, weights, op).map(|(s, _)| s);
        for &r in &func.op(op).results {
            match source.and_then(|s| root.get(&s).copied()) {
                Some(base) => root.insert(r, base),
                None if source.is_some() => None, // a view of a weight: outside the arena
                None => root.insert(r, r),
            };
        }
    }
    root
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
    let entry = func.entry_block();
    let block_ops = func.layout().block_ops(entry).to_vec();
    if block_ops.iter().any(|&op| !func.op(op).regions.is_empty()) {
        return Err(Diagnostic::error(
            "cannot plan memory: functions with regions (onnx.If) are not planned yet",
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
    let root = root_values(func, weights, &ops);

    // Dependencies among schedulable ops.
    let index: HashMap<OpId, usize> = ops.iter().enumerate().map(|(i, &op)| (op, i)).collect();
    let producer_index = |v: ValueId| func.defining_op(v).and_then(|op| index.get(&op).copied());
    let preds: Vec<Vec<usize>> = ops
        .iter()
        .map(|&op| {
            let mut p: Vec<usize> = func
                .op(op)
                .operands
                .iter()
                .filter_map(|&v| producer_index(v))
                .collect();
            p.sort();
            p.dedup();
            p
        })
        .collect();
    let alloc: Vec<u64> = ops
        .iter()
        .map(|&op| {
            func.op(op)
                .results
                .iter()
                .filter(|r| root.get(r) == Some(r))
                .map(|&r| static_bytes(func, r).ok().flatten().unwrap_or(0))
                .sum()
        })
        .collect();
    let scratch: Vec<u64> = ops.iter().map(|&op| scratch(func, op)).collect();
    let graph = Graph {
        ops: ops.clone(),
        ret,
        preds,
        alloc,
        scratch,
    };

    // Candidate schedules; keep the one with the lowest LOAD.
    let model_order: Vec<usize> = (0..ops.len()).collect();
    let mut candidates: Vec<(&'static str, Vec<usize>)> =
        vec![("model order", model_order.clone())];
    candidates.push(("greedy min-memory", greedy_order(func, &graph, &root)));
    if ops.len() <= EXACT_LIMIT {
        if let Some(order) = exact_order(func, &graph, &root) {
            candidates.push(("exact search", order));
        }
    }
    let mut best: Option<Candidate> = None;
    let mut load_model_order = 0;
    for (name, order) in candidates {
        let (specs, infos) = buffers_for(func, weights, &graph, &order, &root)?;
        let (load, _) = load_with_sharing(&specs).map_err(|e| {
            Diagnostic::error(format!(
                "internal error: the planner rejected its own problem; this is a bug in memc: {e}"
            ))
        })?;
        if name == "model order" {
            load_model_order = load;
        }
        if best.as_ref().is_none_or(|b| load < b.0) {
            best = Some((load, name, order, specs, infos));
        }
    }
    let (_, schedule_name, order, specs, infos) =
        best.ok_or_else(|| Diagnostic::error("no schedule"))?;
    let result = plan(&specs, options).map_err(|e| {
        Diagnostic::error(format!(
            "internal error: the planner rejected its own problem; this is a bug in memc: {e}"
        ))
    })?;

    let schedule: Vec<OpId> = order.iter().map(|&i| ops[i]).collect();
    let mut buffers = Vec::with_capacity(specs.len());
    let mut scratch = Vec::new();
    for (i, (spec, info)) in specs.iter().zip(&infos).enumerate() {
        let value = match info.holds {
            Holds::Value(value) => value,
            Holds::Scratch(op) => {
                scratch.push(PlannedScratch {
                    op,
                    name: info.name.clone(),
                    producer: info.producer.clone(),
                    offset: result.offsets[i],
                    size: spec.size,
                    step: spec.start,
                });
                continue;
            }
        };
        let kind = match (info.is_input, spec.constraint) {
            (true, _) => PlannedKind::Input,
            (false, Constraint::AliasOf { base, offset }) => PlannedKind::View { base, offset },
            (false, Constraint::MayShareWith(input)) if result.in_place[i] => {
                PlannedKind::InPlace { input }
            }
            _ => PlannedKind::Owned,
        };
        buffers.push(PlannedBuffer {
            name: info.name.clone(),
            value,
            offset: result.offsets[i],
            size: spec.size,
            start: spec.start,
            end: spec.end,
            producer: info.producer.clone(),
            kind,
            ty: info.ty.clone(),
            is_output: info.is_output,
        });
    }
    let n_steps = schedule.len() as u64 + 2;
    let mut live_bytes = live_profile(&buffers, n_steps);
    for s in &scratch {
        if let Some(live) = live_bytes.get_mut(s.step as usize) {
            *live += s.size;
        }
    }
    let peak_step = live_bytes
        .iter()
        .enumerate()
        .max_by_key(|&(i, &b)| (b, std::cmp::Reverse(i)))
        .map_or(0, |(i, _)| i as u64);
    let memory_plan = MemoryPlan {
        function: func.name().to_string(),
        arena_size: result.arena_size,
        load: result.load,
        load_without_sharing: result.load_without_sharing,
        load_model_order,
        schedule,
        schedule_name,
        buffers,
        scratch,
        strategy: result.strategy,
        plan_time: started.elapsed(),
        peak_step,
        live_bytes,
    };
    check(func, &memory_plan)?;
    Ok(memory_plan)
}

/// A scored schedule: its LOAD, its name, the order, and its buffers.
type Candidate = (
    u64,
    &'static str,
    Vec<usize>,
    Vec<BufferSpec>,
    Vec<BufferInfo>,
);

/// What a planned buffer holds.
#[derive(Copy, Clone)]
enum Holds {
    Value(ValueId),
    /// The scratch memory of an op.
    Scratch(OpId),
}

struct BufferInfo {
    name: String,
    holds: Holds,
    producer: String,
    ty: TensorType,
    is_input: bool,
    is_output: bool,
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

/// The buffers (with live ranges and constraints) for the ops in `order`.
fn buffers_for(
    func: &Function,
    weights: &WeightStore,
    graph: &Graph,
    order: &[usize],
    root: &HashMap<ValueId, ValueId>,
) -> Result<(Vec<BufferSpec>, Vec<BufferInfo>), Diagnostic> {
    let outputs: Vec<ValueId> = func.op(graph.ret).operands.clone();
    let last_step = order.len() as u64 + 1;
    let mut step_of: HashMap<OpId, u64> = HashMap::new();
    for (pos, &i) in order.iter().enumerate() {
        step_of.insert(graph.ops[i], pos as u64 + 1);
    }
    step_of.insert(graph.ret, last_step);
    // Last reading step of every value.
    let mut last_use: HashMap<ValueId, u64> = HashMap::new();
    for (&op, &step) in &step_of {
        for &v in &func.op(op).operands {
            let e = last_use.entry(v).or_insert(0);
            *e = (*e).max(step);
        }
    }
    let mut specs = Vec::new();
    let mut infos = Vec::new();
    let mut buffer_of: HashMap<ValueId, usize> = HashMap::new();
    let add = |value: ValueId,
               start: u64,
               producer: String,
               constraint: Constraint,
               specs: &mut Vec<BufferSpec>,
               infos: &mut Vec<BufferInfo>,
               buffer_of: &mut HashMap<ValueId, usize>|
     -> Result<(), Diagnostic> {
        let size = static_bytes(func, value)?.unwrap_or(0);
        let is_output = outputs.contains(&value);
        let end = if is_output {
            last_step + 1
        } else {
            last_use
                .get(&value)
                .map_or(start + 1, |&u| u + 1)
                .max(start + 1)
        };
        let ty = func
            .value_type(value)
            .tensor()
            .cloned()
            .unwrap_or_else(|| TensorType::new(memc_ir::ElemType::U8, vec![]));
        buffer_of.insert(value, specs.len());
        // Allocations are cache-line aligned; a view only needs its element alignment.
        let align = match constraint {
            Constraint::AliasOf { .. } => u64::from(ty.elem.bits() / 8).max(1),
            _ => ALIGN,
        };
        specs.push(
            BufferSpec::new(size, start, end)
                .with_align(align)
                .with_constraint(constraint),
        );
        infos.push(BufferInfo {
            name: value_name(func, value),
            holds: Holds::Value(value),
            producer,
            ty,
            is_input: start == 0,
            is_output,
        });
        Ok(())
    };
    for &arg in func.args() {
        add(
            arg,
            0,
            "input".to_string(),
            Constraint::None,
            &mut specs,
            &mut infos,
            &mut buffer_of,
        )?;
    }
    // Scratch buffers go after every value's, so value buffers keep their indices.
    let mut scratch_specs = Vec::new();
    let mut scratch_infos = Vec::new();
    for &i in order {
        let op = graph.ops[i];
        let step = step_of[&op];
        let data = func.op(op);
        let producer = match &data.loc {
            Some(loc) => format!("{} \"{loc}\"", data.opcode.name()),
            None => data.opcode.name().to_string(),
        };
        if graph.scratch[i] > 0 {
            let name = data
                .results
                .first()
                .map_or_else(|| producer.clone(), |&r| value_name(func, r));
            scratch_specs.push(BufferSpec::new(graph.scratch[i], step, step + 1).with_align(ALIGN));
            scratch_infos.push(BufferInfo {
                name: format!("scratch({name})"),
                holds: Holds::Scratch(op),
                producer: producer.clone(),
                ty: TensorType::with_shape(ElemType::U8, &[graph.scratch[i]]),
                is_input: false,
                is_output: false,
            });
        }
        let source = view_source(func, weights, op);
        for &r in &data.results {
            if !root.contains_key(&r) {
                continue; // a view of a weight
            }
            let constraint =
                match source.and_then(|(s, offset)| Some((*buffer_of.get(&s)?, offset))) {
                    Some((base, offset)) => Constraint::AliasOf { base, offset },
                    None => {
                        in_place_candidate(func, op, r, step, &last_use, &buffer_of, root, &outputs)
                    }
                };
            add(
                r,
                step,
                producer.clone(),
                constraint,
                &mut specs,
                &mut infos,
                &mut buffer_of,
            )?;
        }
    }
    // A view keeps its base alive: the base's range covers its views' (views come after
    // their bases, so one backward pass handles chains of views).
    for i in (0..specs.len()).rev() {
        if let Constraint::AliasOf { base, .. } = specs[i].constraint {
            specs[base].end = specs[base].end.max(specs[i].end);
        }
    }
    specs.extend(scratch_specs);
    infos.extend(scratch_infos);
    Ok((specs, infos))
}

/// `MayShareWith(x)` for an in-place capable op (the `IN_PLACE` trait) whose result has `x`'s exact type, where `x` owns
/// its bytes (not a view) and is last read at this step.
#[allow(clippy::too_many_arguments)]
fn in_place_candidate(
    func: &Function,
    op: OpId,
    result: ValueId,
    step: u64,
    last_use: &HashMap<ValueId, u64>,
    buffer_of: &HashMap<ValueId, usize>,
    root: &HashMap<ValueId, ValueId>,
    outputs: &[ValueId],
) -> Constraint {
    if !func.op(op).opcode.def().is_in_place() {
        return Constraint::None;
    }
    let ty = func.value_type(result);
    for &x in &func.op(op).operands {
        let owns = root.get(&x) == Some(&x);
        let dies_here = last_use.get(&x) == Some(&step) && !outputs.contains(&x);
        if owns && dies_here && func.value_type(x) == ty && !matches!(ty, Type::None) {
            if let Some(&b) = buffer_of.get(&x) {
                return Constraint::MayShareWith(b);
            }
        }
    }
    Constraint::None
}

/// Remaining-use counts per root value, for the schedulers.
fn root_uses(
    func: &Function,
    graph: &Graph,
    root: &HashMap<ValueId, ValueId>,
) -> (HashMap<ValueId, usize>, Vec<Vec<ValueId>>) {
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    let mut reads: Vec<Vec<ValueId>> = Vec::with_capacity(graph.ops.len());
    for &op in &graph.ops {
        let mut r: Vec<ValueId> = func
            .op(op)
            .operands
            .iter()
            .filter_map(|v| root.get(v).copied())
            .collect();
        r.sort();
        r.dedup();
        for &v in &r {
            *uses.entry(v).or_insert(0) += 1;
        }
        reads.push(r);
    }
    // Outputs are never freed.
    for v in &func.op(graph.ret).operands {
        if let Some(&r) = root.get(v) {
            *uses.entry(r).or_insert(0) += 1_000_000;
        }
    }
    (uses, reads)
}

/// Runs the ready op that frees the most bytes net of what it allocates (ties: model order).
fn greedy_order(func: &Function, graph: &Graph, root: &HashMap<ValueId, ValueId>) -> Vec<usize> {
    let n = graph.ops.len();
    let (mut uses, reads) = root_uses(func, graph, root);
    let mut n_preds: Vec<usize> = graph.preds.iter().map(Vec::len).collect();
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, p) in graph.preds.iter().enumerate() {
        for &j in p {
            succs[j].push(i);
        }
    }
    let size_of = |v: ValueId| static_bytes(func, v).ok().flatten().unwrap_or(0) as i128;
    let mut ready: Vec<usize> = (0..n).filter(|&i| n_preds[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while !ready.is_empty() {
        let score = |i: usize, uses: &HashMap<ValueId, usize>| -> i128 {
            let freed: i128 = reads[i]
                .iter()
                .filter(|v| uses.get(v) == Some(&1))
                .map(|&v| size_of(v))
                .sum();
            freed - i128::from(graph.alloc[i])
        };
        let (pos, _) = ready
            .iter()
            .enumerate()
            .max_by_key(|&(_, &i)| (score(i, &uses), std::cmp::Reverse(i)))
            .expect("ready is not empty");
        let i = ready.swap_remove(pos);
        order.push(i);
        for v in &reads[i] {
            if let Some(u) = uses.get_mut(v) {
                *u -= 1;
            }
        }
        for &s in &succs[i] {
            n_preds[s] -= 1;
            if n_preds[s] == 0 {
                ready.push(s);
            }
        }
    }
    order
}

/// The order with the lowest peak, by dynamic programming over sets of scheduled ops
/// (at most [`EXACT_LIMIT`] ops).
fn exact_order(
    func: &Function,
    graph: &Graph,
    root: &HashMap<ValueId, ValueId>,
) -> Option<Vec<usize>> {
    let n = graph.ops.len();
    if n == 0 || n > EXACT_LIMIT {
        return None;
    }
    let (uses, reads) = root_uses(func, graph, root);
    let size_of = |v: ValueId| static_bytes(func, v).ok().flatten().unwrap_or(0);
    let pred_mask: Vec<u32> = graph
        .preds
        .iter()
        .map(|p| p.iter().fold(0u32, |m, &j| m | (1 << j)))
        .collect();
    // Live bytes after the ops in `set` ran: inputs and produced roots with readers left.
    let readers: HashMap<ValueId, u32> = {
        let mut m: HashMap<ValueId, u32> = HashMap::new();
        for (i, r) in reads.iter().enumerate() {
            for &v in r {
                *m.entry(v).or_insert(0) |= 1 << i;
            }
        }
        m
    };
    let producer: HashMap<ValueId, usize> = graph
        .ops
        .iter()
        .enumerate()
        .flat_map(|(i, &op)| {
            func.op(op)
                .results
                .iter()
                .filter(|r| root.get(r) == Some(r))
                .map(move |&r| (r, i))
        })
        .collect();
    let live_after = |set: u32| -> u64 {
        let mut total = 0;
        for (&v, &mask) in &readers {
            let produced = producer.get(&v).is_none_or(|&p| set & (1 << p) != 0);
            let needed = mask & !set != 0 || uses.get(&v).is_some_and(|&u| u >= 1_000_000);
            if produced && needed {
                total += size_of(v);
            }
        }
        for (&v, &p) in &producer {
            if set & (1 << p) != 0
                && !readers.contains_key(&v)
                && uses.get(&v).is_some_and(|&u| u >= 1_000_000)
            {
                total += size_of(v);
            }
        }
        total
    };
    let full: u32 = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
    let mut best: HashMap<u32, (u64, usize, u32)> = HashMap::new(); // set -> (peak, last op, previous set)
    best.insert(0, (live_after(0), usize::MAX, 0));
    let mut frontier = vec![0u32];
    for _ in 0..n {
        let mut next: HashMap<u32, (u64, usize, u32)> = HashMap::new();
        for &set in &frontier {
            let (peak, _, _) = best[&set];
            let before = live_after(set);
            for (i, &preds) in pred_mask.iter().enumerate() {
                if set & (1 << i) != 0 || preds & !set != 0 {
                    continue;
                }
                // The op's scratch is live only during its step.
                let during = before + graph.alloc[i] + graph.scratch[i];
                let candidate = peak.max(during);
                let new_set = set | (1 << i);
                if next.get(&new_set).is_none_or(|&(p, _, _)| candidate < p) {
                    next.insert(new_set, (candidate, i, set));
                }
            }
        }
        frontier = next.keys().copied().collect();
        best.extend(next);
    }
    let mut order = Vec::with_capacity(n);
    let mut set = full;
    while set != 0 {
        let &(_, last, prev) = best.get(&set)?;
        order.push(last);
        set = prev;
    }
    order.reverse();
    Some(order)
}

/// Live bytes at each step: each group of shared bytes (an owner with its views and in-place
/// successors) counts its owner's size from the owner's first step to the group's last.
fn live_profile(buffers: &[PlannedBuffer], n_steps: u64) -> Vec<u64> {
    // A view or in-place buffer comes after the buffer it shares, so one pass finds roots.
    let mut root: Vec<usize> = Vec::with_capacity(buffers.len());
    for (i, b) in buffers.iter().enumerate() {
        let parent = match b.kind {
            PlannedKind::View { base, .. } => Some(base),
            PlannedKind::InPlace { input } => Some(input),
            PlannedKind::Input | PlannedKind::Owned => None,
        };
        root.push(parent.filter(|&p| p < i).map_or(i, |p| root[p]));
    }
    let mut group_end: Vec<u64> = buffers.iter().map(|b| b.end).collect();
    for (i, b) in buffers.iter().enumerate() {
        group_end[root[i]] = group_end[root[i]].max(b.end);
    }
    let len = n_steps as usize + 2;
    let mut delta = vec![0i128; len + 1];
    for (i, b) in buffers.iter().enumerate() {
        if root[i] != i {
            continue;
        }
        let start = (b.start as usize).min(len);
        let end = (group_end[i] as usize).min(len);
        delta[start] += i128::from(b.size);
        delta[end] -= i128::from(b.size);
    }
    let mut live = Vec::with_capacity(len);
    let mut running = 0i128;
    for d in &delta[..len] {
        running += d;
        live.push(u64::try_from(running).unwrap_or(0));
    }
    live
}

/// Re-checks the plan with the independent validator; a failure is a memc bug.
fn check(func: &Function, plan: &MemoryPlan) -> Result<(), Diagnostic> {
    let buffer_of: HashMap<ValueId, usize> = plan
        .buffers
        .iter()
        .enumerate()
        .map(|(i, b)| (b.value, i))
        .collect();
    let mut checked: Vec<CheckedBuffer> = plan
        .buffers
        .iter()
        .map(|b| CheckedBuffer {
            name: b.name.clone(),
            offset: b.offset,
            size: b.size,
            start: b.start,
            end: b.end,
            // Allocations are cache-line aligned; a view only needs its element alignment.
            align: match b.kind {
                PlannedKind::View { .. } => u64::from(b.ty.elem.bits() / 8).max(1),
                _ => ALIGN,
            },
            kind: match b.kind {
                PlannedKind::View { base, offset } => BufferKind::View { base, offset },
                PlannedKind::InPlace { input } => BufferKind::InPlace { input },
                PlannedKind::Input | PlannedKind::Owned => BufferKind::Owned,
            },
            is_input: b.kind == PlannedKind::Input,
        })
        .collect();
    // Scratch buffers follow the value buffers; the op at their step writes them.
    let mut scratch_of: HashMap<OpId, Vec<usize>> = HashMap::new();
    for s in &plan.scratch {
        scratch_of.entry(s.op).or_default().push(checked.len());
        checked.push(CheckedBuffer {
            name: s.name.clone(),
            offset: s.offset,
            size: s.size,
            start: s.step,
            end: s.step + 1,
            align: ALIGN,
            kind: BufferKind::Scratch,
            is_input: false,
        });
    }
    let mut accesses = Vec::new();
    let last_step = plan.schedule.len() as u64 + 1;
    let steps = plan
        .schedule
        .iter()
        .enumerate()
        .map(|(i, &op)| (op, i as u64 + 1))
        .chain(
            // The return reads the outputs after the last step (the schedule may be empty when
            // every output is an input or a weight).
            func.layout()
                .block_ops(func.entry_block())
                .last()
                .map(|&ret| (ret, last_step)),
        );
    for (op, step) in steps {
        let data = func.op(op);
        accesses.push(Access {
            step,
            op: data
                .loc
                .clone()
                .unwrap_or_else(|| data.opcode.name().to_string()),
            reads: data
                .operands
                .iter()
                .filter_map(|v| buffer_of.get(v).copied())
                .collect(),
            writes: data
                .results
                .iter()
                .filter_map(|v| buffer_of.get(v).copied())
                .chain(scratch_of.get(&op).into_iter().flatten().copied())
                .collect(),
            // The validator's in-place rule: only ops that may write over an operand.
            elementwise: data.opcode.def().is_in_place(),
        });
    }
    let to_check = PlanToCheck {
        arena_size: plan.arena_size,
        buffers: checked,
        accesses,
    };
    validate(&to_check).map_err(|violations| {
        let mut diag = Diagnostic::error(
            "internal error: the memory plan fails validation; this is a bug in memc",
        );
        for v in violations.iter().take(5) {
            diag = diag.with_note(v.to_string());
        }
        diag
    })
}
