//! What a memory plan says to people and to tools: a table, an SVG timeline, and JSON.
//!
//! Everything here is rendered from one value, the [`MemoryReport`]: `memc compile
//! --emit plan-json` prints it as JSON, the plan file stores the same JSON (`PlanMeta::
//! memory_report`), and the table and the SVG are rendered from it alone, so `memc compile
//! --report` and `memc report PLAN` print the same thing and no model is needed for the second.
//!
//! JSON: `buffers` lists the physical allocations, each `{name, kind, offset, size, start, end,
//! producer, type, formula, input, output}` with the half-open step range during which its
//! bytes are in use, so any two buffers whose ranges intersect must not overlap in memory;
//! `kind` is `input`, `owned` or `scratch`; `formula` is the size as a formula of the model's
//! symbolic dims (`32*batch*seq`, from the types before `--dim` bindings; `null` for scratch).
//! `aliases` lists the values that live inside an allocation without bytes of their own
//! (`kind` `view` or `in-place`) with the allocation they use. Plus `arena_size`; the
//! activation lower bounds (`bound_model_order`, the headline's denominator, and
//! `bound_chosen_order`: the most bytes of graph inputs and op results live at one step, each
//! owning its exact bytes, in the model's order and in the chosen one; no weights, no
//! scratch); `scratch_peak` (the largest scratch of one op, which is the most scratch live at
//! one step); the LOAD figures, which include scratch (`load`, `load_model_order`,
//! `load_without_sharing`: the planner's buffers with alignment, the lower bound of an offset
//! assignment); the schedule's and the offset strategy's names, `plan_time_ms` (to the microsecond), `n_steps` (the ops plus the input and
//! output steps), `peak_step` and `live_bytes` (the live profile: bytes in use at each step).
//! An op's scratch memory (working bytes it uses during its one step, such as a convolution's
//! im2col matrix) is a buffer named `scratch(<the op's result>)` of kind and type `scratch`,
//! live on `[step, step + 1)`, produced by that op, with `scratch_use` saying what it holds
//! (`im2col matrix`). Reports stored by an older memc lack the bounds, `scratch_peak` and
//! `scratch_use`; they read as absent and the table says so.
//!
//! Optional sections: a training step adds a `training` object and a section of the table
//! ([`training`]: parameters, gradient buffers, what the forward pass keeps for the backward
//! pass), and the timeline marks the forward/backward boundary. Each optional section is one
//! optional field of [`MemoryReport`] and one entry of [`SECTIONS`] (see there to add one).

pub mod remat;
pub mod training;

use memc_ir::{Dim, Function, OpId, TensorType};
use memc_passes::memory::{MemoryPlan, PlannedKind};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::Path;

/// A byte count for people: `1.50 MiB`, `3.0 KiB`, `12 B`.
pub fn human_bytes(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.2} MiB", bytes as f64 / 1048576.0)
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// The size of a value as a formula of the symbolic dims (`3072*batch*seq`), from its type
/// before `--dim` bindings.
pub fn size_formula(ty: &TensorType) -> String {
    // A bounded dim's buffer is planned for its bound, with its extent after the elements.
    if let Some(bytes) = ty
        .bounded_arena_layout()
        .filter(|_| ty.dims.iter().all(|d| d.planned_size().is_some()))
    {
        return bytes.total_bytes.to_string();
    }
    // Sub-byte elements take a byte each in the arena.
    let mut total = Dim::Static(ty.elem.arena_bytes());
    for d in &ty.dims {
        total = total.mul(d);
    }
    total.to_string()
}

/// A buffer's size formula: from its value's type in `symbolic` (the function before `--dim`
/// bindings) when that has it, else from its planned type.
fn buffer_formula(b: &memc_passes::memory::PlannedBuffer, symbolic: Option<&Function>) -> String {
    symbolic
        .and_then(|f| {
            f.is_valid_value(b.value)
                .then(|| f.value_type(b.value).tensor().cloned())
                .flatten()
        })
        .map_or_else(|| size_formula(&b.ty), |t| size_formula(&t))
}

/// Each buffer's owning allocation: itself, or the buffer whose bytes it uses.
fn owners(plan: &MemoryPlan) -> Vec<usize> {
    let mut owner: Vec<usize> = Vec::with_capacity(plan.buffers.len());
    for (i, b) in plan.buffers.iter().enumerate() {
        let parent = match b.kind {
            PlannedKind::View { base, .. } => Some(base),
            PlannedKind::InPlace { input } => Some(input),
            PlannedKind::Input | PlannedKind::Owned => None,
        };
        owner.push(parent.filter(|&p| p < i).map_or(i, |p| owner[p]));
    }
    owner
}

/// What a buffer or an alias is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A graph input, copied in before step 1.
    Input,
    /// An intermediate or output with bytes of its own.
    Owned,
    /// An op's working memory during its one step.
    Scratch,
    /// A view of another allocation.
    View,
    /// Written over the bytes of another allocation.
    InPlace,
}

impl Kind {
    fn of(kind: &PlannedKind) -> Kind {
        match kind {
            PlannedKind::Input => Kind::Input,
            PlannedKind::Owned => Kind::Owned,
            PlannedKind::View { .. } => Kind::View,
            PlannedKind::InPlace { .. } => Kind::InPlace,
        }
    }
}

/// One physical allocation of the arena.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Buffer {
    /// The value's name in printed IR (`%12`), its ONNX name for graph inputs and outputs, or
    /// `scratch(<the op's result>)`.
    pub name: String,
    /// `input`, `owned` or `scratch` (`view`/`in-place` only for an alias whose allocation
    /// comes later in the plan, which the planner does not make).
    pub kind: Kind,
    pub offset: u64,
    pub size: u64,
    /// The half-open step range its bytes are in use, its aliases' ranges included.
    pub start: u64,
    pub end: u64,
    /// The op that made it (`onnx.MatMul "fc1/MatMul"`), or `input`.
    pub producer: String,
    /// The planned type (`tensor<2x16x8xf32>`), or `scratch`.
    #[serde(rename = "type")]
    pub ty: String,
    /// The size as a formula of the model's symbolic dims; `None` for scratch.
    pub formula: Option<String>,
    pub input: bool,
    pub output: bool,
    /// For scratch: what it holds (`im2col matrix`), when code generation said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_use: Option<String>,
}

/// A value that lives inside an allocation without bytes of its own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alias {
    pub name: String,
    /// `view` or `in-place`.
    pub kind: Kind,
    /// The allocation it lives in.
    pub buffer: String,
    pub offset: u64,
    pub size: u64,
    pub start: u64,
    pub end: u64,
    pub producer: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub output: bool,
}

/// A memory plan as the report shows it: the plan JSON's object (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    pub function: String,
    pub arena_size: u64,
    /// The model's activation lower bound: the most bytes of activations live at one step in
    /// the model's own op order, every value owning its bytes, no weights, no scratch. The
    /// headline ratio is `arena_size / bound_model_order`. `None` in reports of older memc.
    #[serde(default)]
    pub bound_model_order: Option<u64>,
    /// The same bound for the chosen schedule's order.
    #[serde(default)]
    pub bound_chosen_order: Option<u64>,
    /// The largest scratch of one op: the most scratch bytes live at one step.
    #[serde(default)]
    pub scratch_peak: Option<u64>,
    /// LOAD with scratch of the chosen schedule: the lower bound of any offset assignment of
    /// its buffers (views and in-place taken, scratch included).
    pub load: u64,
    /// LOAD with scratch of the model's own op order.
    pub load_model_order: u64,
    /// LOAD with scratch of the chosen schedule if every value owned its bytes.
    pub load_without_sharing: u64,
    /// The scheduling heuristic that gave the op order.
    pub schedule: String,
    /// The offset-assignment strategy that won.
    pub strategy: String,
    pub plan_time_ms: f64,
    /// The schedule's ops plus step 0 (the inputs) and the last step (the outputs).
    pub n_steps: u64,
    /// The step with the most live bytes.
    pub peak_step: u64,
    /// Live bytes at each step (index = step).
    pub live_bytes: Vec<u64>,
    pub buffers: Vec<Buffer>,
    pub aliases: Vec<Alias>,
    /// A training step's breakdown ([`training`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training: Option<training::TrainingMemory>,
    /// Rematerialization: what was recomputed and every opportunity ([`remat`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remat: Option<remat::RematSection>,
}

impl MemoryReport {
    /// The report of `plan`. `planned` is the function the plan is for (a training step gets
    /// its `training` section from it), `symbolic` the function before dims were bound (for
    /// size formulas), `scratch_use` what an op's scratch holds (from its kernel plan).
    pub fn new(
        plan: &MemoryPlan,
        planned: Option<&Function>,
        symbolic: Option<&Function>,
        scratch_use: &dyn Fn(OpId) -> Option<&'static str>,
    ) -> MemoryReport {
        let owner = owners(plan);
        let mut group_start: Vec<u64> = plan.buffers.iter().map(|b| b.start).collect();
        let mut group_end: Vec<u64> = plan.buffers.iter().map(|b| b.end).collect();
        for (i, b) in plan.buffers.iter().enumerate() {
            group_start[owner[i]] = group_start[owner[i]].min(b.start);
            group_end[owner[i]] = group_end[owner[i]].max(b.end);
        }
        let owned = (0..plan.buffers.len()).filter(|&i| owner[i] == i).map(|i| {
            let b = &plan.buffers[i];
            Buffer {
                name: b.name.clone(),
                kind: Kind::of(&b.kind),
                offset: b.offset,
                size: b.size,
                start: group_start[i],
                end: group_end[i],
                producer: b.producer.clone(),
                ty: b.ty.to_string(),
                formula: Some(buffer_formula(b, symbolic)),
                input: b.kind == PlannedKind::Input,
                output: b.is_output,
                scratch_use: None,
            }
        });
        let scratch = plan.scratch.iter().map(|s| Buffer {
            name: s.name.clone(),
            kind: Kind::Scratch,
            offset: s.offset,
            size: s.size,
            start: s.step,
            end: s.step + 1,
            producer: s.producer.clone(),
            ty: "scratch".to_string(),
            formula: None,
            input: false,
            output: false,
            scratch_use: scratch_use(s.op).map(str::to_string),
        });
        let aliases = (0..plan.buffers.len())
            .filter(|&i| owner[i] != i)
            .map(|i| {
                let b = &plan.buffers[i];
                Alias {
                    name: b.name.clone(),
                    kind: Kind::of(&b.kind),
                    buffer: plan.buffers[owner[i]].name.clone(),
                    offset: b.offset,
                    size: b.size,
                    start: b.start,
                    end: b.end,
                    producer: b.producer.clone(),
                    ty: b.ty.to_string(),
                    output: b.is_output,
                }
            })
            .collect();
        MemoryReport {
            function: plan.function.clone(),
            arena_size: plan.arena_size,
            bound_model_order: Some(plan.bound_model_order),
            bound_chosen_order: Some(plan.bound_chosen_order),
            scratch_peak: Some(plan.scratch_peak),
            load: plan.load,
            load_model_order: plan.load_model_order,
            load_without_sharing: plan.load_without_sharing,
            schedule: plan.schedule_name.to_string(),
            strategy: plan.strategy.to_string(),
            // To the microsecond: a short decimal reads back from JSON as the same number, so
            // the table printed from a plan file says what the compiler's said.
            plan_time_ms: (plan.plan_time.as_secs_f64() * 1e6).round() / 1e3,
            n_steps: plan.schedule.len() as u64 + 2,
            peak_step: plan.peak_step,
            live_bytes: plan.live_bytes.clone(),
            buffers: owned.chain(scratch).collect(),
            aliases,
            training: planned.and_then(|f| training::training_memory(f, plan, symbolic)),
            remat: None,
        }
    }

    /// The report as a JSON value (what the plan file stores).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self)
            .expect("a MemoryReport serializes: its keys are strings and its floats finite")
    }

    /// The report as pretty JSON text (`memc compile --emit plan-json`).
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self)
            .expect("a MemoryReport serializes: its keys are strings and its floats finite");
        text.push('\n');
        text
    }

    /// The report read back from its JSON value.
    pub fn from_value(value: serde_json::Value) -> Result<MemoryReport, serde_json::Error> {
        serde_json::from_value(value)
    }

    /// The live bytes at the peak step.
    fn peak_bytes(&self) -> u64 {
        self.live_bytes
            .get(self.peak_step as usize)
            .copied()
            .unwrap_or(0)
    }
}

/// An optional section of the table: its text, or `None` when the plan has none.
pub type Section = fn(&MemoryReport) -> Option<String>;

/// The optional sections, in the order the table prints them after the buffers live at the
/// peak. To add one (such as rematerialization candidates): give [`MemoryReport`] an optional
/// field for its data (`#[serde(default, skip_serializing_if = "Option::is_none")]`, so the
/// JSON of plans without it still reads), fill it where the report is built, and list its
/// renderer here; the plan file, `--emit plan-json`, `memc compile --report` and `memc report`
/// then all carry it.
pub const SECTIONS: &[Section] = &[training::section, remat::section];

/// The text of every optional section the report has, in [`SECTIONS`] order.
pub fn extra_sections(report: &MemoryReport) -> String {
    SECTIONS
        .iter()
        .filter_map(|section| section(report))
        .collect()
}

/// How many of the largest scratch buffers the table lists.
const SCRATCH_SHOWN: usize = 3;

/// The human table; `svg_path` is where the timeline was written, if it was.
pub fn table(report: &MemoryReport, svg_path: Option<&str>) -> String {
    let mut out = String::new();
    let ratio = |a: u64, b: u64| {
        if b == 0 {
            "-".to_string()
        } else {
            format!("{:.4}", a as f64 / b as f64)
        }
    };
    let _ = writeln!(out, "memory plan for @{}", report.function);
    let _ = writeln!(
        out,
        "  arena                          {:>12}  ({} bytes)",
        human_bytes(report.arena_size),
        report.arena_size
    );
    let bytes_or_absent = |bytes: Option<u64>| bytes.map_or_else(|| "-".to_string(), human_bytes);
    match report.bound_model_order {
        Some(bound) => {
            let below = if report.arena_size < bound {
                " (below 1: the chosen order, views and in-place results beat the model's order)"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  activation bound, model order  {:>12}  arena/bound {}{below}",
                human_bytes(bound),
                ratio(report.arena_size, bound)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  activation bound, model order  {:>12}  (not recorded: the plan is from an older memc)",
                "-"
            );
        }
    }
    let _ = writeln!(
        out,
        "  activation bound, chosen order {:>12}  schedule: {}",
        bytes_or_absent(report.bound_chosen_order),
        report.schedule
    );
    let scratch = || report.buffers.iter().filter(|b| b.kind == Kind::Scratch);
    let _ = writeln!(
        out,
        "  scratch, largest at one step   {:>12}  {} ops with scratch, each for its own step",
        bytes_or_absent(report.scratch_peak),
        scratch().count()
    );
    let _ = writeln!(
        out,
        "  LOAD with scratch              {:>12}  arena/LOAD {}; model order {}, without views/in-place {}",
        human_bytes(report.load),
        ratio(report.arena_size, report.load),
        human_bytes(report.load_model_order),
        human_bytes(report.load_without_sharing)
    );
    let kinds = || {
        report
            .buffers
            .iter()
            .map(|b| b.kind)
            .chain(report.aliases.iter().map(|a| a.kind))
    };
    let n_values = kinds().filter(|&k| k != Kind::Scratch).count();
    let n_views = kinds().filter(|&k| k == Kind::View).count();
    let n_in_place = kinds().filter(|&k| k == Kind::InPlace).count();
    let _ = writeln!(
        out,
        "  buffers {} ({} views, {} in place), {} ops, offsets by {}, planned in {:.1} ms",
        n_values,
        n_views,
        n_in_place,
        report.n_steps.saturating_sub(2),
        report.strategy,
        report.plan_time_ms
    );
    let mut largest: Vec<&Buffer> = scratch().filter(|s| s.size > 0).collect();
    // Stable: equal sizes keep schedule order.
    largest.sort_by_key(|s| std::cmp::Reverse(s.size));
    if !largest.is_empty() {
        let _ = writeln!(
            out,
            "  largest scratch (a cost of the kernels' forms, not of the model):"
        );
        for s in largest.iter().take(SCRATCH_SHOWN) {
            let _ = writeln!(
                out,
                "    {:<36} {:<24} {:>11}  step {}",
                clip(&s.producer, 36),
                clip(s.scratch_use.as_deref().unwrap_or("scratch"), 24),
                human_bytes(s.size),
                s.start
            );
        }
        if largest.len() > SCRATCH_SHOWN {
            let _ = writeln!(out, "    ... and {} more", largest.len() - SCRATCH_SHOWN);
        }
    }
    if let Some(path) = svg_path {
        let _ = writeln!(out, "  timeline: {path}");
    }
    let peak = report.peak_step;
    let _ = writeln!(
        out,
        "  live at the peak (step {peak}, {}):",
        human_bytes(report.peak_bytes())
    );
    let mut live: Vec<&Buffer> = report
        .buffers
        .iter()
        .filter(|b| b.kind != Kind::Scratch && b.start <= peak && peak < b.end && b.size > 0)
        .collect();
    // Stable: equal sizes keep the plan's order.
    live.sort_by_key(|b| std::cmp::Reverse(b.size));
    let _ = writeln!(
        out,
        "    {:<28} {:<36} {:<22} {:>11}  size formula",
        "value", "producer", "type", "size"
    );
    for b in live {
        let shape = b.ty.trim_start_matches("tensor<").trim_end_matches('>');
        let _ = writeln!(
            out,
            "    {:<28} {:<36} {:<22} {:>11}  {}",
            clip(&b.name, 28),
            clip(&b.producer, 36),
            clip(shape, 22),
            human_bytes(b.size),
            b.formula.as_deref().unwrap_or("")
        );
    }
    for s in scratch().filter(|s| s.start == peak && s.size > 0) {
        let _ = writeln!(
            out,
            "    {:<28} {:<36} {:<22} {:>11}  (scratch)",
            clip(&s.name, 28),
            clip(&s.producer, 36),
            "",
            human_bytes(s.size)
        );
    }
    out.push_str(&extra_sections(report));
    out
}

fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let kept: String = text.chars().take(width.saturating_sub(1)).collect();
        format!("{kept}…")
    }
}

/// An SVG timeline of live bytes over schedule steps, with the peak, the arena size and the
/// model's activation bound marked, and for a training step the forward/backward boundary.
pub fn svg(report: &MemoryReport) -> String {
    let (w, h, left, bottom, top) = (900.0f64, 360.0f64, 70.0f64, 40.0f64, 30.0f64);
    let live_bytes = &report.live_bytes;
    let steps = live_bytes.len().max(2) as f64;
    let max_bytes = report
        .arena_size
        .max(live_bytes.iter().copied().max().unwrap_or(0))
        .max(report.bound_model_order.unwrap_or(0))
        .max(1) as f64;
    let x = |s: f64| left + (w - left - 20.0) * s / (steps - 1.0);
    let y = |b: f64| h - bottom - (h - bottom - top) * b / max_bytes;
    let mut points = String::new();
    for (s, &b) in live_bytes.iter().enumerate() {
        let _ = write!(points, "{:.1},{:.1} ", x(s as f64), y(b as f64));
    }
    let peak = report.peak_step as f64;
    let peak_bytes = report.peak_bytes();
    let boundary = report.training.as_ref().map_or(String::new(), |m| {
        let xb = x(m.boundary_step as f64);
        format!(
            "<line x1=\"{xb:.1}\" y1=\"{:.1}\" x2=\"{xb:.1}\" y2=\"{top:.1}\" stroke=\"#2ca02c\" stroke-dasharray=\"6,3\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#2ca02c\">forward | backward (step {})</text>\n",
            h - bottom,
            xb + 4.0,
            top + 16.0,
            m.boundary_step
        )
    });
    // The model's activation bound (no scratch), for reports that record it.
    let bound = report.bound_model_order.map_or(String::new(), |b| {
        let yb = y(b as f64);
        format!(
            "<line x1=\"{left}\" y1=\"{yb:.1}\" x2=\"{:.1}\" y2=\"{yb:.1}\" stroke=\"#9467bd\" stroke-dasharray=\"2,4\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#9467bd\">model's activation bound {}</text>\n",
            w - 20.0,
            left + 4.0,
            yb + 14.0,
            human_bytes(b)
        )
    });
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">
<rect width="{w}" height="{h}" fill="white"/>
<text x="{left}" y="18" font-size="14">@{name}: live bytes per schedule step ({sched})</text>
<line x1="{left}" y1="{yb}" x2="{xr}" y2="{yb}" stroke="black"/>
<line x1="{left}" y1="{yb}" x2="{left}" y2="{top}" stroke="black"/>
<line x1="{left}" y1="{ya:.1}" x2="{xr}" y2="{ya:.1}" stroke="#888" stroke-dasharray="5,4"/>
<text x="{xr}" y="{ya_label:.1}" text-anchor="end" fill="#555">arena {arena}</text>
<polyline points="{points}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>
<line x1="{xp:.1}" y1="{yb}" x2="{xp:.1}" y2="{yp:.1}" stroke="#d62728" stroke-dasharray="3,3"/>
<circle cx="{xp:.1}" cy="{yp:.1}" r="4" fill="#d62728"/>
<text x="{xp_label:.1}" y="{yp_label:.1}" fill="#d62728">peak {peak_label} at step {peak_step}</text>
<text x="{left}" y="{yb_label}" >0</text>
<text x="{xr}" y="{yb_label}" text-anchor="end">step {last}</text>
<text x="8" y="{ytop_label}">{max_label}</text>
{bound}{boundary}</svg>
"##,
        name = xml_text(&report.function),
        sched = xml_text(&report.schedule),
        yb = h - bottom,
        xr = w - 20.0,
        ya = y(report.arena_size as f64),
        ya_label = y(report.arena_size as f64) - 4.0,
        arena = human_bytes(report.arena_size),
        xp = x(peak),
        yp = y(peak_bytes as f64),
        xp_label = (x(peak) + 6.0).min(w - 220.0),
        yp_label = y(peak_bytes as f64) - 8.0,
        peak_label = human_bytes(peak_bytes),
        peak_step = report.peak_step,
        yb_label = h - bottom + 16.0,
        last = live_bytes.len().saturating_sub(1),
        ytop_label = top + 4.0,
        max_label = human_bytes(max_bytes as u64),
        points = points,
        bound = bound,
        boundary = boundary,
    )
}

/// `text` with XML's special characters escaped, for SVG text nodes.
fn xml_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `memc report PLAN`: reads the memory report stored in the plan file at `plan`, writes its
/// SVG timeline to `svg_path` and returns the table (what `memc compile --report` printed).
///
/// Errors, as messages naming the file: the plan cannot be opened or fails any check of
/// [`memc_runtime::PlanFile::open`] (missing, truncated, corrupted, wrong version), it was
/// written by an older memc (plan format 4) or without the memory planner, its report does
/// not read, or the SVG cannot be written.
pub fn report_plan_file(plan: &Path, svg_path: &Path) -> Result<String, String> {
    let file = memc_runtime::PlanFile::open(plan).map_err(|e| e.to_string())?;
    let version = file.header().version;
    if version < memc_runtime::plan::FIRST_VERSION_WITH_REPORT {
        return Err(format!(
            "`{}`: this plan was written by an older memc (plan format {version}) without a memory report; compile it again",
            plan.display()
        ));
    }
    let value = file.meta().memory_report.clone().ok_or_else(|| {
        format!(
            "`{}`: this plan carries no memory report (it was written without memc's memory planner)",
            plan.display()
        )
    })?;
    let report = MemoryReport::from_value(value).map_err(|e| {
        format!(
            "`{}`: the plan's memory report is not valid: {e}",
            plan.display()
        )
    })?;
    std::fs::write(svg_path, svg(&report))
        .map_err(|e| format!("cannot write `{}`: {e}", svg_path.display()))?;
    Ok(table(&report, Some(&svg_path.display().to_string())))
}
