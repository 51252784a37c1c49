//! The report's rematerialization section: what `--memory-budget` / `--recompute` did, and
//! every recompute opportunity in ONNX Runtime's memory optimizer format (config string,
//! frequency, max saving in bytes, saving as a formula in the model's dims, ON/OFF), plus what
//! onnxruntime does not say: the extra FLOPs each costs and the peak before and after it.
//!
//! A plan row's "peak after" is the LOAD of the schedule with that subgraph's occurrences all
//! recomputed and nothing else; the section's head gives the plan actually chosen.

use super::human_bytes;
use memc_ir::{Dim, Function};
use memc_passes::remat::RematReport;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// One recompute opportunity, grouped by subgraph string (onnxruntime's "plan").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RematPlan {
    /// The config string that turns every occurrence on (`Gelu+:1:-1`).
    pub config: String,
    /// How many occurrences the model has.
    pub freq: usize,
    /// How many the chosen plan recomputes.
    pub applied: usize,
    /// Bytes all occurrences free together.
    pub max_saving: u64,
    /// The same as a formula of the model's symbolic dims.
    pub saving_formula: String,
    /// Extra FLOPs of all occurrences together.
    pub extra_flops: u64,
    /// LOAD with all occurrences recomputed and nothing else.
    pub peak_after: u64,
}

/// What rematerialization did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RematSection {
    /// The arena and LOAD planned without recomputation.
    pub base_arena: u64,
    pub base_load: u64,
    /// The budget in bytes, if one was given.
    pub budget: Option<u64>,
    /// The final plan's arena and LOAD.
    pub arena: u64,
    pub load: u64,
    pub met: bool,
    /// Whether nothing was asked and memc recomputed only what is free (its default).
    #[serde(default)]
    pub automatic: bool,
    /// Why the budget was not met.
    pub reason: Option<String>,
    /// FLOPs of one run without recomputation, and the extra FLOPs of the chosen plan.
    pub base_flops: u64,
    pub extra_flops: u64,
    pub cloned_ops: usize,
    /// Whether selection proved its choice optimal among the candidates.
    pub exact: bool,
    pub time_ms: f64,
    /// `--recompute` entries that matched no subgraph.
    pub unmatched: Vec<String>,
    pub plans: Vec<RematPlan>,
}

impl RematSection {
    /// The section of `report`; `symbolic` (the function before `--dim` bindings, with the
    /// same value handles) gives the formulas.
    pub fn new(report: &RematReport, symbolic: Option<&Function>) -> RematSection {
        let plans = report
            .opportunities
            .iter()
            .map(|o| {
                // Each occurrence's size in the model's dims; its bytes when it has no
                // formula (a value the symbolic function lacks).
                let mut total = Dim::Static(0);
                for (&v, &bytes) in o.targets.iter().zip(&o.bytes) {
                    let formula = symbolic
                        .filter(|f| f.is_valid_value(v))
                        .and_then(|f| f.value_type(v).tensor().cloned())
                        .map(|t| {
                            t.dims
                                .iter()
                                .fold(Dim::Static(t.elem.arena_bytes()), |a, d| a.mul(d))
                        });
                    match formula {
                        Some(f) => total = total.add(&f),
                        None => total = total.add(&Dim::Static(bytes)),
                    }
                }
                RematPlan {
                    config: o.config(),
                    freq: o.targets.len(),
                    applied: o.applied,
                    max_saving: o.bytes.iter().sum(),
                    saving_formula: total.to_string(),
                    extra_flops: o.flops,
                    peak_after: o.load_alone,
                }
            })
            .collect();
        RematSection {
            base_arena: report.base_arena,
            base_load: report.base_load,
            budget: report.budget,
            arena: report.arena,
            load: report.load,
            met: report.met,
            automatic: report.automatic,
            reason: report.reason.clone(),
            base_flops: report.base_flops,
            extra_flops: report.extra_flops,
            cloned_ops: report.cloned_ops,
            exact: report.exact,
            time_ms: (report.time.as_secs_f64() * 1e6).round() / 1e3,
            unmatched: report.unmatched.clone(),
            plans,
        }
    }
}

/// `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// FLOPs for people: `1.23 GFLOP`.
pub fn human_flops(flops: u64) -> String {
    let f = flops as f64;
    if f >= 1e9 {
        format!("{:.2} GFLOP", f / 1e9)
    } else if f >= 1e6 {
        format!("{:.2} MFLOP", f / 1e6)
    } else if f >= 1e3 {
        format!("{:.1} KFLOP", f / 1e3)
    } else {
        format!("{flops} FLOP")
    }
}

/// `a` as a percentage of `b` (extra FLOPs of the step's), `None` when `b` is 0.
pub fn percent_of(a: u64, b: u64) -> Option<f64> {
    (b != 0).then(|| 100.0 * a as f64 / b as f64)
}

/// `, +1.23% FLOPs`: the extra FLOPs of `r` as a share of the step's (empty when unknown).
fn extra_flops(r: &RematReport) -> String {
    percent_of(r.extra_flops, r.base_flops)
        .map_or_else(String::new, |p| format!(", +{p:.2}% FLOPs"))
}

/// What `--memory-budget` or `--recompute` did, in one sentence: `Ok` when the budget was met
/// (or none was asked), `Err` with the warning when it was not; `None` when nothing was asked
/// and nothing recomputed. The CLI prints it, the Python package warns with it.
pub fn summary(r: &RematReport) -> Option<Result<String, String>> {
    let flops = extra_flops(r);
    if r.automatic {
        return Some(Ok(format!(
            "recomputed what is free: arena {} -> {} ({} ops recomputed{flops}; \
             `--memory-budget 100%` keeps every value instead)",
            human_bytes(r.base_arena),
            human_bytes(r.arena),
            r.cloned_ops
        )));
    }
    match r.budget {
        Some(budget) if r.met => Some(Ok(format!(
            "memory budget {} met: arena {} -> {} ({} ops recomputed{flops})",
            human_bytes(budget),
            human_bytes(r.base_arena),
            human_bytes(r.arena),
            r.cloned_ops
        ))),
        Some(budget) => Some(Err(format!(
            "the memory budget {} ({budget} bytes) cannot be met: the smallest arena memc \
             reached is {} ({} bytes, LOAD {}), down from {} ({} ops recomputed{flops}); {}",
            human_bytes(budget),
            human_bytes(r.arena),
            r.arena,
            r.load,
            human_bytes(r.base_arena),
            r.cloned_ops,
            r.reason.as_deref().unwrap_or("no recomputation frees more")
        ))),
        None if r.cloned_ops > 0 => Some(Ok(format!(
            "--recompute: arena {} -> {} ({} ops recomputed{flops})",
            human_bytes(r.base_arena),
            human_bytes(r.arena),
            r.cloned_ops
        ))),
        None => None,
    }
}

fn percent(a: u64, b: u64) -> String {
    percent_of(a, b).map_or_else(|| "-".to_string(), |p| format!("{p:.2}%"))
}

/// The section's text (always shown when memory was planned: the opportunities are worth
/// knowing before a budget is set).
pub fn section(report: &super::MemoryReport) -> Option<String> {
    let r = report.remat.as_ref()?;
    let mut out = String::new();
    let status = if r.cloned_ops > 0 { "ON " } else { "OFF" };
    let what = match r.budget {
        Some(_) if r.automatic => format!(
            "free recomputation (memc's default): arena {} -> {}, +{} FLOPs ({})",
            human_bytes(r.base_arena),
            human_bytes(r.arena),
            percent(r.extra_flops, r.base_flops),
            human_flops(r.extra_flops),
        ),
        Some(budget) => format!(
            "budget {} ({} bytes): {}; arena {} -> {}, +{} FLOPs ({}){}",
            human_bytes(budget),
            budget,
            if r.met { "met" } else { "NOT met" },
            human_bytes(r.base_arena),
            human_bytes(r.arena),
            percent(r.extra_flops, r.base_flops),
            human_flops(r.extra_flops),
            if r.exact {
                ", optimal among the candidates"
            } else {
                ""
            },
        ),
        None if r.cloned_ops > 0 => format!(
            "--recompute: arena {} -> {}, +{} FLOPs ({})",
            human_bytes(r.base_arena),
            human_bytes(r.arena),
            percent(r.extra_flops, r.base_flops),
            human_flops(r.extra_flops),
        ),
        None => "choose with --memory-budget SIZE|N% or --recompute <plan config>,...".to_string(),
    };
    let _ = writeln!(out, "\nMemory Optimizer     :  {status}    :  {what}");
    if let Some(reason) = &r.reason {
        let _ = writeln!(out, "  why not             : {reason}");
    }
    for u in &r.unmatched {
        let _ = writeln!(
            out,
            "  warning             : --recompute {u} matches no subgraph of this model"
        );
    }
    if r.plans.is_empty() {
        let _ = writeln!(
            out,
            "  no recompute opportunities: no buffer is held across a gap between two reads"
        );
        return Some(out);
    }
    let width = r
        .plans
        .iter()
        .map(|p| p.config.len())
        .max()
        .unwrap_or(7)
        .max(7);
    let _ = writeln!(
        out,
        "                                  {:<width$}  {:>5}  {:>17}  {:<28}  {:>12}  {:>12}  {:>12}",
        "Configs", "Freq", "Max Saving(Bytes)", "Saving Symbolic(Bytes)", "Extra FLOPs", "Peak before", "Peak after",
    );
    for (i, p) in r.plans.iter().enumerate() {
        let on = match p.applied {
            0 => "OFF".to_string(),
            n if n == p.freq => "ON ".to_string(),
            n => format!("ON {n}/{}", p.freq),
        };
        let _ = writeln!(
            out,
            " - Plan {:<13}:  {:<6} :  {:<width$}  {:>5}  {:>17}  {:<28}  {:>12}  {:>12}  {:>12}",
            i + 1,
            on,
            p.config,
            p.freq,
            grouped(p.max_saving),
            p.saving_formula,
            percent(p.extra_flops, r.base_flops),
            human_bytes(r.base_load),
            human_bytes(p.peak_after),
        );
    }
    Some(out)
}
