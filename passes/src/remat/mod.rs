//! Rematerialization: recompute values instead of keeping them, until the planned arena fits a
//! memory budget, with the fewest extra FLOPs; and the table of every recompute opportunity,
//! in onnxruntime's memory optimizer format.
//!
//! [`rematerialize`] runs between code generation's op plans (which give each op's scratch)
//! and lowering, in place of the plain memory plan:
//! 1. plan the function as it is (the base plan: its schedule and arena);
//! 2. build the e-graph of the function (`crate::egraph`): its e-classes are the values the
//!    model tracks, so values the e-graph proves equal count as one (a copy of either serves
//!    every read); lay the function out in the base plan's schedule;
//! 3. the [`model`] of that schedule, and the [`candidates`]: for each buffer held across a
//!    gap between reads (or between its producer and its first read: a move), the chains that
//!    derive it again before the later read from what is live there (single ops and chains,
//!    views included). Never recomputed: ops with side
//!    effects (a gradient accumulator, anything writing persistent state), random ops
//!    (`memc_ir::ops::is_random`: Dropout in training mode), ops with regions, graph inputs.
//!    A recomputation reads only values that are still intact: SSA values are never
//!    overwritten, and a value read later is not dead, so no in-place op may write over it;
//! 4. [`select`] the candidates with the fewest extra FLOPs that bring the LOAD under the
//!    target (exact for small candidate sets, greedy with pruning otherwise), plus any the user
//!    forced with onnxruntime config strings ([`config`]). When they fall short (a tight budget
//!    often needs a value derived again from values that are themselves derived again at
//!    another point, which no candidate helps towards alone), the [`evict`] search runs the
//!    schedule under the target, evicting and deriving values again as it goes, and its
//!    recomputations (one chain per point, numbered after the candidates) are chosen instead;
//! 5. clone the chosen chains into the IR right before the reads they serve, point every later
//!    read at the newest copy, erase the originals nothing reads any more (moves), and plan
//!    again with the full planner. If fragmentation leaves
//!    the arena over the budget while the LOAD is under it, the target is lowered by the
//!    difference and selection runs again (at most [`ROUNDS`] times).
//!
//! The clones are the same ops with the same attributes and types, so they lower to the same
//! kernels and compute the same bits: outputs are bit-identical to the plan without
//! rematerialization (a test runs both).
//!
//! When the budget cannot be met, the result says how close it got and why: the values live
//! at the peak step that no candidate can free (graph inputs and outputs, what the op at that
//! step reads and writes, values of ops that may not run again).

pub mod candidates;
pub mod config;
pub mod evict;
pub mod model;
pub mod select;

use crate::memory::{plan_function_with_scratch, MemoryPlan, ScratchFn};
use crate::plan::PlanOptions;
use config::{Budget, ConfigEntry};
use memc_ir::ops::view_of;
use memc_ir::{state, Diagnostic, Function, OpId, Opcode, Type, ValueId, WeightStore};
use model::{Candidate, Model};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The most times selection runs again with a lower target because fragmentation kept the
/// arena over the budget.
pub const ROUNDS: usize = 4;
/// The work selection may do over all rounds, in ops evaluated (about 0.4 s for a 2,000-op
/// graph on one core); it returns the best choice found by then. Work, not time, so that a
/// model compiles to the same plan on any machine.
pub const WORK_LIMIT: u64 = 3_000_000;
/// The work each eviction search ([`evict`]) may do, in the same units (values looked at count
/// as ops evaluated); it runs only on small models, at most once per round.
pub const EVICT_WORK: u64 = 2_000_000;

/// What to rematerialize.
#[derive(Clone, Debug, Default)]
pub struct RematOptions {
    /// `--memory-budget`: choose recomputations until the arena fits.
    pub budget: Option<Budget>,
    /// `--recompute`: onnxruntime config strings, applied first.
    pub recompute: Vec<ConfigEntry>,
    /// The memory planner's options.
    pub plan: PlanOptions,
}

impl RematOptions {
    /// Whether anything is asked of the pass (otherwise it only reports opportunities).
    pub fn is_active(&self) -> bool {
        self.budget.is_some() || self.recompute.iter().any(|e| e.enabled)
    }
}

/// One recompute opportunity, grouped as onnxruntime groups them: by subgraph string.
#[derive(Clone, Debug)]
pub struct Opportunity {
    /// The subgraph string (`Gelu+`).
    pub subgraph: String,
    /// The buffer each occurrence frees (a value of the function as it was given).
    pub targets: Vec<ValueId>,
    /// Bytes each occurrence frees.
    pub bytes: Vec<u64>,
    /// Extra FLOPs of all occurrences together.
    pub flops: u64,
    /// How many occurrences are applied.
    pub applied: usize,
    /// The LOAD of the schedule with every occurrence applied and nothing else.
    pub load_alone: u64,
}

impl Opportunity {
    /// The config string that turns every occurrence on (`Gelu+:1:-1`).
    pub fn config(&self) -> String {
        format!("{}:1:-1", self.subgraph)
    }
}

/// What the pass did and found.
#[derive(Clone, Debug)]
pub struct RematReport {
    /// The arena and LOAD planned without rematerialization.
    pub base_arena: u64,
    pub base_load: u64,
    /// FLOPs of one run without rematerialization.
    pub base_flops: u64,
    /// The budget in bytes, when one was given.
    pub budget: Option<u64>,
    /// The arena and LOAD of the final plan.
    pub arena: u64,
    pub load: u64,
    /// The LOAD the model predicted for the final schedule (the planner's LOAD of the
    /// function's own op order: `MemoryPlan::load_model_order`).
    pub model_load: u64,
    /// Extra FLOPs of the recomputations applied.
    pub extra_flops: u64,
    /// Ops cloned.
    pub cloned_ops: usize,
    /// Whether the budget (if any) was met.
    pub met: bool,
    /// Whether nothing was asked and the recomputations were chosen because they are free
    /// (`memc compile`'s default: the model's activation bound as the budget, kept only when
    /// the extra FLOPs are negligible).
    pub automatic: bool,
    /// Why the budget could not be met.
    pub reason: Option<String>,
    /// Whether selection proved its choice optimal over the candidates.
    pub exact: bool,
    /// Whether the recomputations applied came from the eviction search ([`evict`]): the
    /// candidates fell short of the target.
    pub eviction: bool,
    pub candidates: usize,
    pub opportunities: Vec<Opportunity>,
    /// The config entries that matched nothing.
    pub unmatched: Vec<String>,
    pub time: Duration,
}

/// The function's e-classes, its layout in schedule order, and the model.
struct Built {
    model: Model,
    /// The IR op of each model op.
    ops: Vec<OpId>,
    /// The IR value standing for each model value (the first one of its e-class).
    values: Vec<ValueId>,
    /// The model value of every arena value.
    value_of: HashMap<ValueId, usize>,
}

/// Plans `func` with recomputation as `options` ask; see the module doc. Leaves `func`
/// rewritten (laid out in the plan's schedule, with the clones) and returns its plan.
pub fn rematerialize(
    func: &mut Function,
    weights: &WeightStore,
    scratch: &ScratchFn,
    options: &RematOptions,
) -> Result<(MemoryPlan, RematReport), Diagnostic> {
    let started = Instant::now();
    let base_plan = plan_function_with_scratch(func, weights, &options.plan, scratch)?;
    let mut laid_out = func.clone();
    lay_out(&mut laid_out, &base_plan.schedule);
    let built = build(&laid_out, weights, scratch);
    let model = &built.model;
    let base = candidates::Base::new(model);
    let mut cands = candidates::candidates(model, &base);
    let base_profile = model.evaluate(&[]);
    let (forced, unmatched) = forced(&cands, &options.recompute);
    let budget = options.budget.map(|b| b.bytes(base_plan.arena_size));
    let mut report = RematReport {
        base_arena: base_plan.arena_size,
        base_load: base_plan.load,
        base_flops: model.flops(),
        budget,
        arena: base_plan.arena_size,
        load: base_plan.load,
        model_load: base_profile.load,
        extra_flops: 0,
        cloned_ops: 0,
        met: budget.is_none_or(|b| base_plan.arena_size <= b),
        automatic: false,
        reason: None,
        exact: false,
        eviction: false,
        candidates: cands.len(),
        opportunities: Vec::new(),
        unmatched,
        time: Duration::ZERO,
    };
    let mut chosen: Vec<usize> = Vec::new();
    let mut plan = base_plan.clone();
    let needed = budget.is_some_and(|b| base_plan.arena_size > b);
    if needed || !forced.is_empty() {
        let budget = budget.unwrap_or(u64::MAX);
        let mut target = budget.min(base_profile.load);
        // The highest target selection did not reach (0: none yet).
        let mut missed = 0u64;
        let work = select::Work::new(WORK_LIMIT);
        // Without forced configs, the plan without recomputation is the one to beat: the pass
        // never makes the arena larger.
        let mut best: Option<Attempt> = forced.is_empty().then(|| Attempt {
            atoms: Vec::new(),
            chosen: Vec::new(),
            plan: base_plan.clone(),
            func: func.clone(),
            exact: false,
            profile: base_profile.clone(),
            origin: None,
        });
        // A rewritten function's clones have their originals' scratch.
        let plan_rewritten = |f: &Function, origin: &HashMap<OpId, OpId>, plan: &PlanOptions| {
            let mapped =
                |g: &Function, op: OpId| scratch(g, origin.get(&op).copied().unwrap_or(op));
            plan_function_with_scratch(f, weights, plan, &mapped)
        };
        // Rounds plan with a quarter of the planner's budget; the one kept is planned again
        // with all of it.
        let round_options = PlanOptions {
            budget: options.plan.budget / 4,
        };
        for _ in 0..ROUNDS {
            let mut selection = select::select(model, &cands, target, &forced, &work);
            // When the candidates fall short, recomputations found by running the schedule
            // under the target (`evict`), listed after the candidates.
            let mut atoms: Vec<Candidate> = Vec::new();
            if !selection.reached && forced.is_empty() {
                let budget = select::Work::new(EVICT_WORK);
                if let Some((found, profile)) = evict::search(model, target, &budget) {
                    selection = select::Selection {
                        chosen: (cands.len()..cands.len() + found.len()).collect(),
                        profile,
                        reached: true,
                        exact: false,
                    };
                    atoms = found;
                }
            }
            let all: std::borrow::Cow<[Candidate]> = if atoms.is_empty() {
                std::borrow::Cow::Borrowed(&cands)
            } else {
                std::borrow::Cow::Owned(cands.iter().chain(&atoms).cloned().collect())
            };
            let mut candidate_func = laid_out.clone();
            let origin = apply(
                &mut candidate_func,
                &built,
                &all,
                &selection.chosen,
                &selection.profile.removed,
            );
            let candidate_plan = plan_rewritten(&candidate_func, &origin, &round_options)?;
            let arena = candidate_plan.arena_size;
            let better = best.as_ref().is_none_or(|b| arena < b.plan.arena_size);
            let fits = arena <= budget;
            if better || fits {
                best = Some(Attempt {
                    atoms,
                    chosen: selection.chosen.clone(),
                    plan: candidate_plan,
                    func: candidate_func,
                    exact: selection.exact,
                    profile: selection.profile.clone(),
                    origin: Some(origin),
                });
            }
            if fits || work.spent() {
                break;
            }
            // Over the budget. If the LOAD fit, fragmentation: aim under the LOAD by the
            // difference. Otherwise (or when the difference is large) bisect between the
            // highest target selection missed and the best LOAD reached: a reachable target
            // gets further than an impossible one.
            let best_load = best
                .as_ref()
                .map_or(selection.profile.load, |b| b.profile.load);
            if !selection.reached {
                missed = missed.max(target);
            }
            let over = arena - budget;
            let next = if selection.reached && over < selection.profile.load / 8 {
                selection
                    .profile
                    .load
                    .saturating_sub(over.max(crate::memory::ALIGN))
            } else if missed > 0 && missed < best_load {
                missed + (best_load - missed) / 2
            } else {
                best_load - best_load / 16
            };
            if next == 0 || next == target {
                break;
            }
            target = next;
        }
        if let Some(mut kept) = best {
            if let Some(origin) = &kept.origin {
                let full = plan_rewritten(&kept.func, origin, &options.plan)?;
                if full.arena_size <= kept.plan.arena_size {
                    kept.plan = full;
                }
            }
            chosen = kept.chosen;
            report.eviction = !kept.atoms.is_empty();
            cands.extend(kept.atoms);
            report.model_load = kept.profile.load;
            report.extra_flops = kept.profile.extra_flops;
            report.exact = kept.exact;
            plan = kept.plan;
            *func = kept.func;
        }
        report.met = plan.arena_size <= budget;
        report.arena = plan.arena_size;
        report.load = plan.load;
        let list: Vec<&Candidate> = chosen.iter().map(|&i| &cands[i]).collect();
        report.cloned_ops = list.iter().map(|c| c.chain.len()).sum();
        if !report.met {
            report.reason = Some(why_not(func, weights, &plan));
        }
    }
    report.opportunities = opportunities(&built, &cands, &chosen);
    report.time = started.elapsed();
    Ok((plan, report))
}

/// A selection applied and planned.
struct Attempt {
    /// The recomputations of the eviction search (one chain per point), numbered after the
    /// candidates.
    atoms: Vec<Candidate>,
    /// Indices into the candidates and then `atoms`.
    chosen: Vec<usize>,
    plan: MemoryPlan,
    func: Function,
    exact: bool,
    profile: model::Profile,
    /// Each clone's original op (`None` for the function as it was given).
    origin: Option<HashMap<OpId, OpId>>,
}

/// Lays the entry block out in `schedule` (ops outside it first, in their order; the
/// terminator last).
fn lay_out(func: &mut Function, schedule: &[OpId]) {
    let entry = func.entry_block();
    let ops = func.layout().block_ops(entry).to_vec();
    let scheduled: std::collections::HashSet<OpId> = schedule.iter().copied().collect();
    let Some(&ret) = ops.last() else { return };
    let mut order: Vec<OpId> = ops
        .iter()
        .copied()
        .filter(|o| !scheduled.contains(o) && *o != ret)
        .collect();
    order.extend_from_slice(schedule);
    order.push(ret);
    func.layout_mut().reorder_block(entry, order);
}

/// onnxruntime's op type for an opcode: the name without its dialect (`Gelu`, `FusedMatMul`).
fn kind(opcode: Opcode) -> String {
    let name = opcode.name();
    name.split_once('.').map_or(name, |(_, n)| n).to_string()
}

/// Whether `op` may run a second time with the same result.
fn recomputable(func: &Function, weights: &WeightStore, op: OpId) -> bool {
    let data = func.op(op);
    let def = data.opcode.def();
    def.is_pure()
        && data.regions.is_empty()
        && !memc_ir::ops::is_random(func, weights, op)
        && data.operands.iter().all(|&v| {
            // Persistent gradient buffers change during the step; parameters do not.
            !matches!(
                state::value_state(func, v),
                Some(state::StateKind::Gradient)
            )
        })
}

/// The model of `func`'s entry block as laid out (the schedule), with its e-classes.
fn build(func: &Function, weights: &WeightStore, scratch: &ScratchFn) -> Built {
    let (egraph, classes) = crate::egraph::build(func);
    let classes = classes.class_of;
    let entry = func.entry_block();
    let block = func.layout().block_ops(entry);
    let ret = *block
        .last()
        .expect("a verified function ends in its terminator");
    let ops: Vec<OpId> = block
        .iter()
        .copied()
        .filter(|&o| {
            !matches!(
                func.op(o).opcode,
                Opcode::Weight | Opcode::None | Opcode::Return
            )
        })
        .collect();
    let mut model = Model::default();
    let mut value_of: HashMap<ValueId, usize> = HashMap::new();
    let mut class_value: HashMap<egg::Id, usize> = HashMap::new();
    let mut values: Vec<ValueId> = Vec::new();
    let mut types: HashMap<Type, u32> = HashMap::new();
    let mut add_value = |model: &mut Model,
                         value_of: &mut HashMap<ValueId, usize>,
                         values: &mut Vec<ValueId>,
                         v: ValueId,
                         view: Option<(usize, u64)>,
                         input: bool,
                         producer: Option<usize>|
     -> usize {
        if let Some(class) = classes.get(&v).map(|&c| egraph.find(c)) {
            if let Some(&m) = class_value.get(&class) {
                value_of.insert(v, m);
                return m;
            }
            class_value.insert(class, model.values.len());
        }
        let ty = func.value_type(v);
        let next = types.len() as u32;
        let key = *types.entry(ty.clone()).or_insert(next);
        let tensor = ty.tensor();
        let m = model.values.len();
        model.values.push(model::Value {
            size: tensor.and_then(|t| t.static_arena_bytes()).unwrap_or(0),
            elem_bytes: tensor.map_or(1, |t| t.elem.arena_bytes()),
            view_of: view,
            ty: key,
            input,
            output: false,
            producer,
        });
        value_of.insert(v, m);
        values.push(v);
        m
    };
    for &arg in func.args() {
        if state::value_state(func, arg).is_none() {
            add_value(
                &mut model,
                &mut value_of,
                &mut values,
                arg,
                None,
                true,
                None,
            );
        }
    }
    for (p, &op) in ops.iter().enumerate() {
        let data = func.op(op);
        let view = view_of(func, weights, op);
        let source = view
            .as_ref()
            .map(|v| (value_of.get(&v.source).copied(), v.byte_offset));
        let mut results = Vec::new();
        for &r in &data.results {
            match source {
                // A view of a weight or of state: outside the arena.
                Some((None, _)) => continue,
                Some((Some(s), offset)) => {
                    results.push(add_value(
                        &mut model,
                        &mut value_of,
                        &mut values,
                        r,
                        Some((s, offset)),
                        false,
                        Some(p),
                    ));
                }
                None => {
                    results.push(add_value(
                        &mut model,
                        &mut value_of,
                        &mut values,
                        r,
                        None,
                        false,
                        Some(p),
                    ));
                }
            }
        }
        let operands: Vec<usize> = data
            .operands
            .iter()
            .filter_map(|v| value_of.get(v).copied())
            .collect();
        model.ops.push(model::Op {
            results,
            operands,
            flops: memc_ir::ops::flops(func, op),
            scratch: scratch(func, op),
            in_place: data.opcode.def().is_in_place(),
            recompute: recomputable(func, weights, op),
            kind: kind(data.opcode),
        });
    }
    for v in &func.op(ret).operands {
        if let Some(&m) = value_of.get(v) {
            model.values[m].output = true;
        }
    }
    Built {
        model,
        ops,
        values,
        value_of,
    }
}

/// The candidates the config entries turn on (the first `count` occurrences of each enabled
/// subgraph, in schedule order; one per buffer and gap), and the entries that matched nothing.
fn forced(cands: &[Candidate], entries: &[ConfigEntry]) -> (Vec<usize>, Vec<String>) {
    let mut chosen: Vec<usize> = Vec::new();
    let mut unmatched = Vec::new();
    for entry in entries {
        let mut matching: Vec<usize> = (0..cands.len())
            .filter(|&i| cands[i].label == entry.subgraph && !cands[i].moves)
            .collect();
        if matching.is_empty() {
            unmatched.push(entry.to_string());
            continue;
        }
        if !entry.enabled {
            continue;
        }
        matching.sort_by_key(|&i| (cands[i].chain.last().copied(), cands[i].at));
        let mut taken = 0;
        for i in matching {
            if entry.count.is_some_and(|n| taken >= n) {
                break;
            }
            let clash = chosen.iter().any(|&c| cands[c].same_gap(&cands[i]));
            if !clash {
                chosen.push(i);
                taken += 1;
            }
        }
    }
    (chosen, unmatched)
}

/// Clones the chosen chains into `func` (laid out in the model's schedule) and points every
/// read at the newest copy. Returns each clone's original op.
fn apply(
    func: &mut Function,
    built: &Built,
    cands: &[Candidate],
    chosen: &[usize],
    removed: &[usize],
) -> HashMap<OpId, OpId> {
    let mut origin = HashMap::new();
    if chosen.is_empty() {
        return origin;
    }
    let n = built.ops.len();
    let at = model::insertions(n, chosen.iter().map(|&i| &cands[i]));
    let entry = func.entry_block();
    let block = func.layout().block_ops(entry).to_vec();
    let ret = *block
        .last()
        .expect("a verified function ends in its terminator");
    let mut order: Vec<OpId> = block
        .iter()
        .copied()
        .filter(|o| !built.ops.contains(o) && *o != ret)
        .collect();
    // The newest IR value of each model value, and the model value of every IR value (the
    // clones' results included).
    let mut latest: HashMap<usize, ValueId> = HashMap::new();
    let mut model_of: HashMap<ValueId, usize> = built.value_of.clone();
    let redirect = |func: &mut Function,
                    op: OpId,
                    latest: &HashMap<usize, ValueId>,
                    model_of: &HashMap<ValueId, usize>| {
        let operands: Vec<ValueId> = func
            .op(op)
            .operands
            .iter()
            .map(|v| {
                model_of
                    .get(v)
                    .and_then(|m| latest.get(m))
                    .copied()
                    .unwrap_or(*v)
            })
            .collect();
        func.op_mut(op).operands = operands;
    };
    let record = |func: &Function,
                  op: OpId,
                  latest: &mut HashMap<usize, ValueId>,
                  model_of: &mut HashMap<ValueId, usize>,
                  original: OpId| {
        for (k, &r) in func.op(op).results.iter().enumerate() {
            let orig = func.op(original).results[k];
            if let Some(&m) = built.value_of.get(&orig) {
                latest.insert(m, r);
                model_of.insert(r, m);
            }
        }
    };
    for &arg in func.args().to_vec().iter() {
        if let Some(&m) = built.value_of.get(&arg) {
            latest.insert(m, arg);
        }
    }
    for (p, here) in at.iter().enumerate() {
        for c in here {
            for &o in &c.chain {
                let original = built.ops[o];
                let data = func.op(original).clone();
                let types: Vec<Type> = data
                    .results
                    .iter()
                    .map(|&r| func.value_type(r).clone())
                    .collect();
                let clone = func.create_op(
                    data.opcode,
                    data.operands.clone(),
                    types,
                    data.attrs.clone(),
                );
                func.op_mut(clone).loc = data.loc.as_ref().map(|l| format!("{l}_recompute"));
                func.append_op(entry, clone);
                redirect(func, clone, &latest, &model_of);
                record(func, clone, &mut latest, &mut model_of, original);
                origin.insert(clone, original);
                order.push(clone);
            }
        }
        if p < n && !removed.contains(&p) {
            let op = built.ops[p];
            redirect(func, op, &latest, &model_of);
            record(func, op, &mut latest, &mut model_of, op);
            order.push(op);
        }
    }
    redirect(func, ret, &latest, &model_of);
    order.push(ret);
    // The originals whose every read now goes to a clone (the model found the same ones).
    for &p in removed {
        func.erase_op(built.ops[p]);
    }
    let placed = func.layout_mut().reorder_block(entry, order);
    debug_assert!(placed, "the new order holds every op of the block once");
    origin
}

/// The opportunities, grouped by subgraph string, in order of first occurrence. Moves (a
/// computation run later, not again) are listed only when chosen: they are a reordering, not
/// the recomputation onnxruntime's table lists.
fn opportunities(built: &Built, cands: &[Candidate], chosen: &[usize]) -> Vec<Opportunity> {
    let mut order: Vec<String> = Vec::new();
    let mut by_label: HashMap<String, Vec<usize>> = HashMap::new();
    let mut sorted: Vec<usize> = (0..cands.len())
        .filter(|i| !cands[*i].moves || chosen.contains(i))
        .collect();
    sorted.sort_by_key(|&i| (cands[i].chain.last().copied(), cands[i].at));
    for i in sorted {
        let list = by_label.entry(cands[i].label.clone()).or_default();
        if list.is_empty() {
            order.push(cands[i].label.clone());
        }
        // One occurrence per buffer and gap.
        if !list.iter().any(|&j| cands[j].same_gap(&cands[i])) {
            list.push(i);
        }
    }
    order
        .into_iter()
        .map(|label| {
            let list = &by_label[&label];
            let chosen_here = list.iter().filter(|i| chosen.contains(i)).count();
            let refs: Vec<&Candidate> = list.iter().map(|&i| &cands[i]).collect();
            Opportunity {
                targets: list
                    .iter()
                    .map(|&i| built.values[cands[i].target])
                    .collect(),
                bytes: list
                    .iter()
                    .map(|&i| built.model.values[cands[i].target].size)
                    .collect(),
                flops: list.iter().map(|&i| cands[i].flops).sum(),
                applied: chosen_here,
                load_alone: built.model.evaluate(&refs).load,
                subgraph: label,
            }
        })
        .collect()
}

/// Why the plan stays over budget: the buffers live at its peak step, each with the reason it
/// must be there.
fn why_not(func: &Function, weights: &WeightStore, plan: &MemoryPlan) -> String {
    let step = plan.peak_step;
    let op = step
        .checked_sub(1)
        .and_then(|i| plan.schedule.get(i as usize))
        .copied();
    let running = op.map(|o| func.op(o));
    let mut live: Vec<String> = plan
        .buffers
        .iter()
        .filter(|b| b.start <= step && step < b.end && b.size > 0)
        .filter(|b| !matches!(b.kind, crate::memory::PlannedKind::View { .. }))
        .map(|b| {
            let why = if running.is_some_and(|d| d.operands.contains(&b.value)) {
                "read by the op running there"
            } else if running.is_some_and(|d| d.results.contains(&b.value)) {
                "written by the op running there"
            } else if b.is_output {
                "a graph output"
            } else if b.start == 0 {
                "a graph input (cannot be recomputed)"
            } else if func
                .defining_op(b.value)
                .is_some_and(|o| !recomputable(func, weights, o))
            {
                "made by an op that may not run again"
            } else {
                "read again later; recomputing it costs more memory than it frees"
            };
            format!("{} ({} bytes, {why})", b.name, b.size)
        })
        .collect();
    for sc in plan.scratch.iter().filter(|sc| sc.step == step) {
        live.push(format!(
            "{} ({} bytes, the op's working memory)",
            sc.name, sc.size
        ));
    }
    live.truncate(10);
    let at = match running {
        Some(d) => format!(
            "step {step} ({}{})",
            d.opcode.name(),
            d.loc
                .as_ref()
                .map(|l| format!(" \"{l}\""))
                .unwrap_or_default()
        ),
        None => format!("step {step}"),
    };
    format!(
        "the peak is at {at} with {} bytes live; there: {}",
        plan.live_bytes.get(step as usize).copied().unwrap_or(0),
        live.join(", ")
    )
}
