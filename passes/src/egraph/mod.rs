//! The `egraph` pass: equality saturation with egg over each function's entry block, then
//! extraction of the cheapest form by bytes materialized.
//!
//! - `language.rs`: the e-graph language, derived from the op table (a node is an op of the
//!   table, or a value taken as given), and the analysis (type, constness, bytes, uses).
//! - `rules.rs`: the rules, named, one line each, with their guards: DequantizeLinear of a
//!   constant 4- or 8-bit weight feeding MatMul or Gemm (directly or through a Transpose)
//!   becomes one `memc.matmul_nbits`; a bias Add joins it; Transposes fold into Gemm operands;
//!   a 2-d MatMul + bias Add becomes a Gemm.
//! - `extract.rs`: the cost (bytes materialized, so the unfused form pays for the float weight
//!   a DQ creates) and the rebuild of the function from the cheapest terms.
//!
//! What the pass guarantees:
//! - Saturation runs under explicit limits ([`ITERATION_LIMIT`], [`NODE_LIMIT`],
//!   [`TIME_LIMIT`]); why it stopped is reported in `--time-passes`.
//! - The e-graph models the pure, single-result, region-free ops of the entry block; every
//!   other value (arguments, results of `onnx.If`, Split, ...) is a leaf it never rewrites, and
//!   ops in nested regions are left alone (their operands may move to an equal value).
//! - A function no rule changed is left exactly as it was. Otherwise every value used outside
//!   the modelled ops keeps its type and is computed by its cheapest term; input ops whose own
//!   form is as cheap as the best stay, with their locations; new ops take the location of the
//!   op they replace; weights are referenced, never copied. Identical modelled ops merge (the
//!   e-graph hash-conses them), as `cse` would merge them.
//! - If a cheapest term cannot be placed (it would read a value defined later), the function
//!   is left as it was.
//!
//! - The guards read the target's [`TargetInfo`]: a rule fuses into `memc.matmul_nbits` only
//!   activations of an element type the target's low-bit product computes
//!   ([`Egraph::for_target`]; [`Egraph::new`] uses [`TargetInfo::GENERIC`]).

mod extract;
mod language;
mod rules;

pub use language::{Facts, Head, Node, SigId};

use crate::manager::{Pass, PassError};
use egg::{Id, Runner, SimpleScheduler, StopReason};
pub(crate) use extract::Built;
use language::{Graph, Sig};
use memc_ir::target::TargetInfo;
use memc_ir::{AttrDict, Function, Module};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

/// The most saturation iterations per function.
pub const ITERATION_LIMIT: usize = 16;
/// The most e-nodes per function's e-graph.
pub const NODE_LIMIT: usize = 1_000_000;
/// The most time saturation may take per function.
pub const TIME_LIMIT: Duration = Duration::from_secs(5);

/// What saturating one function did.
#[derive(Clone, Debug, PartialEq)]
pub struct SaturationReport {
    pub iterations: usize,
    pub nodes: usize,
    pub classes: usize,
    /// How many times each rule applied (that is, added something new), by rule name.
    pub applied: Vec<(String, usize)>,
    pub stop_reason: String,
    /// Whether the function was rewritten (some rule applied and the rebuild succeeded).
    pub rewritten: bool,
}

/// The e-graph fusion pass; see the module doc.
pub struct Egraph {
    target: TargetInfo,
    reports: RefCell<Vec<SaturationReport>>,
}

impl Default for Egraph {
    fn default() -> Egraph {
        Egraph::new()
    }
}

impl Egraph {
    /// The pass for no particular backend (`memc opt`): [`TargetInfo::GENERIC`]'s guards.
    pub fn new() -> Egraph {
        Egraph::for_target(&TargetInfo::GENERIC)
    }

    /// The pass whose fusion guards follow `target`.
    pub fn for_target(target: &TargetInfo) -> Egraph {
        Egraph {
            target: target.clone(),
            reports: RefCell::default(),
        }
    }
}

impl Pass for Egraph {
    fn name(&self) -> &'static str {
        "egraph"
    }

    fn description(&self) -> &'static str {
        "fuses DequantizeLinear + MatMul/Gemm into memc.matmul_nbits and folds Transposes and \
         bias Adds into products, by equality saturation and extraction by bytes materialized"
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        let mut reports = Vec::new();
        for (_, func) in module.functions_mut() {
            reports.push(saturate_function(func, &self.target));
        }
        *self.reports.borrow_mut() = reports;
        Ok(())
    }

    fn timing_note(&self) -> Option<String> {
        let reports = self.reports.borrow();
        let notes: Vec<String> = reports.iter().map(describe).collect();
        (!notes.is_empty()).then(|| notes.join("\n"))
    }
}

/// One line for the timing report.
fn describe(report: &SaturationReport) -> String {
    let applied: Vec<String> = report
        .applied
        .iter()
        .map(|(name, n)| format!("{name} x{n}"))
        .collect();
    format!(
        "egraph: stopped: {} after {} iterations; {} e-nodes in {} e-classes; rules applied: {}",
        report.stop_reason,
        report.iterations,
        report.nodes,
        report.classes,
        if applied.is_empty() {
            "none".to_string()
        } else {
            applied.join(", ")
        }
    )
}

fn stop_reason(reason: Option<&StopReason>) -> String {
    match reason {
        Some(StopReason::Saturated) => "saturated".to_string(),
        Some(StopReason::IterationLimit(n)) => format!("iteration limit ({n})"),
        Some(StopReason::NodeLimit(n)) => format!("node limit ({n})"),
        Some(StopReason::TimeLimit(s)) => format!("time limit ({s} s)"),
        Some(StopReason::Other(why)) => why.clone(),
        None => "not run".to_string(),
    }
}

/// Saturates one function with the rules, guarded for `target`, and rebuilds it from the
/// cheapest terms.
pub fn saturate_function(func: &mut Function, target: &TargetInfo) -> SaturationReport {
    let (egraph, built) = build(func);
    let runner = Runner::default()
        .with_egraph(egraph)
        .with_iter_limit(ITERATION_LIMIT)
        .with_node_limit(NODE_LIMIT)
        .with_time_limit(TIME_LIMIT)
        .with_scheduler(SimpleScheduler)
        .run(&rules::rules(target));
    let mut applied: HashMap<String, usize> = HashMap::new();
    for iteration in &runner.iterations {
        for (name, n) in &iteration.applied {
            *applied.entry(name.to_string()).or_default() += n;
        }
    }
    let mut applied: Vec<(String, usize)> = applied.into_iter().filter(|(_, n)| *n > 0).collect();
    applied.sort();
    let mut report = SaturationReport {
        iterations: runner.iterations.len(),
        nodes: runner.egraph.total_number_of_nodes(),
        classes: runner.egraph.number_of_classes(),
        applied,
        stop_reason: stop_reason(runner.stop_reason.as_ref()),
        rewritten: false,
    };
    if report.applied.is_empty() {
        return report;
    }
    let mut rebuilt = func.clone();
    if extract::rebuild(&mut rebuilt, &runner.egraph, &built).is_ok() {
        *func = rebuilt;
        report.rewritten = true;
    }
    report
}

/// Whether the e-graph models `op`: pure, one result, no regions.
fn is_modelled(func: &Function, op: memc_ir::OpId) -> bool {
    let data = func.op(op);
    data.opcode.def().is_pure() && data.results.len() == 1 && data.regions.is_empty()
}

/// Builds the e-graph of the entry block's modelled ops.
pub(crate) fn build(func: &Function) -> (Graph, Built) {
    let mut egraph = Graph::default();
    let uses = func.use_counts();
    let mut built = Built {
        class_of: HashMap::new(),
        ops: Vec::new(),
    };
    let entry = func.entry_block();
    for &op in func.layout().block_ops(entry) {
        if !is_modelled(func, op) {
            continue;
        }
        let data = func.op(op);
        let children: Vec<Id> = data
            .operands
            .iter()
            .map(|&value| class_of(&mut egraph, &mut built, func, value))
            .collect();
        let result = data.results[0];
        let sig = egraph.analysis.sigs.intern(Sig {
            attrs: data.attrs.clone(),
            ty: func.value_type(result).clone(),
        });
        let node = Node {
            head: Head::Op(data.opcode),
            sig,
            children,
        };
        let class = egraph.add(node.clone());
        let facts = &mut egraph[class].data;
        facts.uses = facts.uses.max(uses[result]);
        built.class_of.insert(result, class);
        built.ops.push((op, node));
    }
    egraph.rebuild();
    (egraph, built)
}

/// The class of `value`: the class of the modelled op that defines it, or a new leaf.
fn class_of(egraph: &mut Graph, built: &mut Built, func: &Function, value: memc_ir::ValueId) -> Id {
    if let Some(&class) = built.class_of.get(&value) {
        return class;
    }
    let sig = egraph.analysis.sigs.intern(Sig {
        attrs: AttrDict::new(),
        ty: func.value_type(value).clone(),
    });
    let class = egraph.add(Node {
        head: Head::Value(value),
        sig,
        children: Vec::new(),
    });
    built.class_of.insert(value, class);
    class
}

#[cfg(test)]
mod tests;
