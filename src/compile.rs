//! The `memc compile` pipeline, written out once, in order.
//!
//! ```text
//! import (ir::onnx) -> verify -> shape-infer -> canonicalize -> cse -> dce      (symbolic dims)
//!   -> bind --dim values (shape-infer) -> canonicalize -> cse -> dce            (static dims)
//!   -> the model's activation lower bound in its own order (memory::model_order_bound)
//!   -> egraph (DQ + MatMul -> memc.matmul_nbits, ..., guarded by the target) -> canonicalize
//!      -> cse -> dce
//!   -> accumulate-into-state (a training step's gradient products and scatters write into
//!      their persistent buffers)
//!   -> plan each op's kernel form and scratch bytes for the target (codegen::lower::plan_ops)
//!   -> schedule -> bufferize (views, in-place, scratch per op from those plans) -> liveness
//!   -> assign offsets -> validate
//!   -> remat (passes::remat: with `--memory-budget` / `--recompute`, recompute values until
//!      the arena fits, and plan again; always, the report's list of opportunities)
//!   -> without remat: the plan without the forms planned in the bound's headroom
//!      (codegen::lower::plan_ops_without_headroom) where its arena is smaller
//!   -> faster forms in the bytes the placed arena leaves free (codegen::lower::use_free_bytes)
//!   -> lower to kernels in the planned forms (codegen::lower) -> validate kernels
//!   -> for `--target cuda`: the kernels as one PTX module (codegen::ptx::emit_program); a
//!      kernel the PTX emitters cannot write is a compile error naming it and its op
//! (then the CLI writes the plan file, packing low-bit weights as it streams them)
//! ```
//!
//! Stages that exist run here and nowhere else; the CLI and library users call [`compile`] (an
//! ONNX model) or [`compile_text`] (a module in the text format, which the lowering lit-tests
//! use: the same stages after import, the weights known by their types only).

use memc_ir::{Diagnostic, Module};
use memc_passes::Pass;
use std::collections::HashMap;
use std::path::Path;

/// What `memc compile` writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Emit {
    /// The IR after the built stages, in MLIR generic syntax.
    Ir,
    /// The same text: memc's IR text is MLIR.
    Mlir,
    /// The buffer plan as JSON.
    PlanJson,
    /// The plan file: the lowered kernels and the weights they read.
    Plan,
    /// The lowered program's kernels, in their text form (`memc_codegen::text`).
    Kernels,
    /// The program's PTX module and its launch list (`--target cuda`), written into a
    /// directory as `<model stem>.ptx` and `<model stem>.launches.json`.
    Ptx,
    /// The planned, lowered program as a module of upstream MLIR dialects (`memc_codegen::mlir`;
    /// cargo feature `mlir`): see [`mlir_plan`].
    MlirPlan,
}

impl Emit {
    /// Whether this output needs the program of kernels ([`CompileOptions::lower`]).
    pub fn needs_kernels(self) -> bool {
        matches!(
            self,
            Emit::Plan | Emit::Kernels | Emit::Ptx | Emit::MlirPlan
        )
    }
}

/// Options of `memc compile`.
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// Values for symbolic dims (`--dim batch=4`).
    pub dims: HashMap<String, u64>,
    /// Plan memory (needs every dim static).
    pub plan_memory: bool,
    /// Time the offset search may use.
    pub plan_budget: std::time::Duration,
    /// Lower the planned function to kernels (implies `plan_memory`).
    pub lower: bool,
    /// Skip the `egraph` pass (DequantizeLinear + MatMul stay unfused, computing the float
    /// weight every run): for comparisons.
    pub no_fuse: bool,
    /// The backend the kernels are for (`--target`): the egraph's guards, each op's form and
    /// scratch bytes follow its `TargetInfo`, and `cuda` also emits the PTX module.
    pub target: memc_codegen::Target,
    /// `--memory-budget`: recompute values until the planned arena fits (implies planning).
    pub memory_budget: Option<memc_passes::remat::config::Budget>,
    /// `--recompute`: onnxruntime memory optimizer config strings (implies planning).
    pub recompute: Vec<memc_passes::remat::config::ConfigEntry>,
    /// `--const NAME=FILE.npy`: graph inputs bound to values at import, so they are constants
    /// before shape inference (shapes computed from them become static) and the plan has no
    /// input for them. Only for ONNX models ([`compile`]).
    pub consts: Vec<memc_ir::onnx::ConstInput>,
}

impl CompileOptions {
    /// Whether memory is planned: asked for, needed by lowering, or by rematerialization.
    pub fn plans_memory(&self) -> bool {
        self.plan_memory || self.lower || self.memory_budget.is_some() || !self.recompute.is_empty()
    }
}

/// How long one stage of [`compile`] took, with what it reported (`egraph`'s stop reason).
#[derive(Clone, Debug)]
pub struct StageTime {
    pub stage: &'static str,
    pub time: std::time::Duration,
    pub note: Option<String>,
}

/// What [`compile`] produced.
pub struct Compiled {
    /// The IR with the `--dim` values bound.
    pub module: Module,
    /// The IR before binding, with symbolic dims (same value handles as `module`).
    pub symbolic: Module,
    pub plan: Option<memc_passes::memory::MemoryPlan>,
    /// The kernels, when [`CompileOptions::lower`] asked for them.
    pub program: Option<memc_codegen::Program>,
    /// The kernels as PTX, when they were lowered for the `cuda` target.
    pub ptx: Option<memc_codegen::ptx::PtxModule>,
    /// What rematerialization did and found (whenever memory was planned).
    pub remat: Option<memc_passes::remat::RematReport>,
    /// What each op's scratch holds (`im2col matrix`), from its kernel plan, for the report.
    pub scratch_uses: HashMap<memc_ir::OpId, &'static str>,
    /// Each stage's time, in order.
    pub times: Vec<StageTime>,
}

impl Compiled {
    /// The memory plan's report (`None` when memory was not planned): what `--emit plan-json`
    /// prints, the plan file stores and `--report` renders.
    pub fn memory_report(&self) -> Option<crate::report::MemoryReport> {
        self.plan.as_ref().map(|plan| {
            let symbolic = self.symbolic.functions().next().map(|(_, f)| f);
            let mut report = crate::report::MemoryReport::new(
                plan,
                self.module.functions().next().map(|(_, f)| f),
                symbolic,
                &|op| self.scratch_uses.get(&op).copied(),
            );
            report.remat = self
                .remat
                .as_ref()
                .map(|r| crate::report::remat::RematSection::new(r, symbolic));
            report
        })
    }
}

/// Parses `NAME=FILE` for `--const` (the file is read by [`read_const`]).
pub fn parse_const_binding(text: &str) -> Result<(String, std::path::PathBuf), String> {
    let (name, file) = text.split_once('=').ok_or_else(|| {
        format!("`--const {text}`: expected NAME=FILE.npy, such as `--const shape=shape.npy`")
    })?;
    if name.trim().is_empty() {
        return Err(format!("`--const {text}`: the input name is empty"));
    }
    if file.trim().is_empty() {
        return Err(format!("`--const {text}`: the file name is empty"));
    }
    Ok((
        name.trim().to_string(),
        std::path::PathBuf::from(file.trim()),
    ))
}

/// The value of `--const NAME=FILE`: the `.npy` array in `file` as the value of input `name`.
/// Errors name the flag and say what is wrong with the file.
pub fn read_const(name: &str, file: &Path) -> Result<memc_ir::onnx::ConstInput, String> {
    let flag = format!("`--const {name}={}`", file.display());
    let tensor = memc_runtime::npy::read_npy(file).map_err(|e| format!("{flag}: {e}"))?;
    memc_ir::onnx::ConstInput::new(
        name,
        tensor.elem().elem(),
        tensor.shape().to_vec(),
        std::sync::Arc::from(tensor.data()),
    )
    .map_err(|e| format!("{flag}: {e}"))
}

/// Parses `name=value` for `--dim`.
pub fn parse_dim_binding(text: &str) -> Result<(String, u64), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("`--dim {text}`: expected NAME=VALUE, such as `--dim batch=4`"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("`--dim {text}`: the dim name is empty"));
    }
    let value: u64 = value
        .trim()
        .parse()
        .map_err(|_| format!("`--dim {text}`: `{value}` is not a non-negative integer"))?;
    Ok((name.to_string(), value))
}

/// Runs every built stage on the ONNX model at `path`.
pub fn compile(path: &Path, options: &CompileOptions) -> Result<Compiled, Diagnostic> {
    let started = std::time::Instant::now();
    let import_options = memc_ir::onnx::ImportOptions {
        consts: options.consts.clone(),
    };
    let imported = memc_ir::onnx::import_file_with(path, &import_options)?;
    let import = StageTime {
        stage: "import",
        time: started.elapsed(),
        note: None,
    };
    let mut compiled = compile_module(imported.module, options)?;
    compiled.times.insert(0, import);
    Ok(compiled)
}

/// Runs every built stage after import on a module in the text format: parse, verify, then
/// what [`compile`] runs. Parse and verifier errors carry spans into `source`. The text names
/// weights without their bytes, so lowering sees only their types (enough for every kernel
/// except those that read small constants' values, which then report what they miss).
pub fn compile_text(source: &str, options: &CompileOptions) -> Result<Compiled, Vec<Diagnostic>> {
    if let Some(value) = options.consts.first() {
        return Err(vec![Diagnostic::error(format!(
            "`--const {}=...` binds an input of an ONNX model; textual IR has no graph inputs to bind",
            value.name()
        ))]);
    }
    let module = memc_ir::parse_module(source).map_err(|d| vec![d])?;
    memc_ir::verify_module(&module)?;
    compile_module(module, options).map_err(|d| vec![d])
}

/// The metadata of the plan file `memc compile -o` writes for a compiled model (`model` is
/// its path; only the file name is kept): the program, the dims bound (in the order given),
/// the target, the PTX module, the planner's figures and the memory report that `memc report`
/// prints. `None` when the model was not lowered to kernels ([`CompileOptions::lower`]).
pub fn plan_meta(
    model: &Path,
    dims: Vec<(String, u64)>,
    target: memc_codegen::Target,
    compiled: &Compiled,
) -> Option<memc_runtime::plan::PlanMeta> {
    let program = compiled.program.clone()?;
    let model_name = model
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut meta = memc_runtime::plan::PlanMeta::new(model_name, target.name(), program);
    meta.dims = dims;
    meta.ptx = compiled.ptx.clone();
    meta.planner = compiled
        .plan
        .as_ref()
        .map(memc_runtime::plan::PlannerSummary::from_plan);
    meta.memory_report = compiled
        .memory_report()
        .as_ref()
        .map(crate::report::MemoryReport::to_value);
    Some(meta)
}

/// The text `emit` writes for a compiled model (`None` for the plan file, which the CLI
/// writes with the weights).
pub fn emitted_text(compiled: &Compiled, emit: Emit) -> Option<String> {
    match (emit, &compiled.plan, &compiled.program) {
        (Emit::Ir | Emit::Mlir, _, _) => Some(memc_ir::print_module(&compiled.module)),
        (Emit::PlanJson, Some(_), _) => compiled.memory_report().map(|r| r.to_json()),
        (Emit::Kernels, Some(plan), Some(program)) => Some(
            memc_codegen::text::ProgramText::new(program)
                .with_plan(plan)
                .to_string(),
        ),
        (Emit::Ptx, _, _) => compiled.ptx.as_ref().map(|m| m.text.clone()),
        (Emit::PlanJson | Emit::Kernels | Emit::Plan | Emit::MlirPlan, _, _) => None,
    }
}

/// Why `--emit mlir-plan` is not there in a build without the `mlir` feature.
pub const NO_MLIR: &str = "this memc was built without the `mlir` feature, which `--emit mlir-plan` needs (it links LLVM/MLIR 22: install Debian's libmlir-22-dev llvm-22-dev libclang-22-dev and build with `cargo build --release --features mlir`)";

/// The compiled model's planned program as MLIR (`--emit mlir-plan`): upstream dialects only,
/// built in-process with melior and verified by MLIR's verifier; every planned buffer a
/// `memref.view` of the arena at its offset (`memc_codegen::mlir`). Errors: the build has no
/// `mlir` feature ([`NO_MLIR`]), the model was not lowered, or MLIR refused the module (a memc
/// bug, with MLIR's diagnostics).
pub fn mlir_plan(compiled: &Compiled) -> Result<String, String> {
    let Some(program) = &compiled.program else {
        return Err(
            "the model was not lowered to kernels (a memc bug: `--emit mlir-plan` lowers it)"
                .into(),
        );
    };
    #[cfg(feature = "mlir")]
    {
        let options = memc_codegen::mlir::EmitOptions {
            plan: compiled.plan.as_ref(),
        };
        memc_codegen::mlir::emit_text(program, &options).map_err(|e| format!("memc bug: {e}"))
    }
    #[cfg(not(feature = "mlir"))]
    {
        let _ = program;
        Err(NO_MLIR.to_string())
    }
}

/// Runs every built stage after import on `module`.
pub fn compile_module(module: Module, options: &CompileOptions) -> Result<Compiled, Diagnostic> {
    let mut times = Vec::new();
    let mut clock = std::time::Instant::now();
    let mut lap = |stage: &'static str, note: Option<String>| {
        let now = std::time::Instant::now();
        times.push(StageTime {
            stage,
            time: now - clock,
            note,
        });
        clock = now;
    };
    let mut module = module;

    // Bindings must name symbols the model has; a typo would silently leave the dim symbolic.
    let known: Vec<String> = memc_ir::infer::unbound_symbols(&module);
    let mut unknown: Vec<&String> = options.dims.keys().filter(|k| !known.contains(k)).collect();
    unknown.sort();
    if let Some(first) = unknown.first() {
        let listed = if known.is_empty() {
            "it has none".to_string()
        } else {
            known.join(", ")
        };
        return Err(Diagnostic::error(format!(
            "`--dim {first}=...` names no symbolic dim of the model"
        ))
        .with_note(format!("the model's symbolic dims: {listed}")));
    }

    infer(&mut module, &HashMap::new())?;
    cleanup(&mut module)?;
    let symbolic = module.clone();
    if !options.dims.is_empty() {
        infer(&mut module, &options.dims)?;
        cleanup(&mut module)?;
    }
    lap("shape inference and cleanup", None);
    // The model's activation lower bound is measured here, on the model as given (its node
    // order, dims bound, constants folded), before the e-graph rewrites it: fusions that drop
    // intermediates lower memc's arena, not the model's bound.
    let model_bound = match module.functions().next() {
        Some((_, func))
            if options.plans_memory() && memc_ir::infer::unbound_symbols(&module).is_empty() =>
        {
            memc_passes::memory::model_order_bound(func, &module.weights).ok()
        }
        _ => None,
    };
    // The backend the kernels are for: the egraph's guards, the ops' forms and their scratch
    // bytes follow it.
    let target = options.target.info();
    if !options.no_fuse {
        let egraph = memc_passes::egraph::Egraph::for_target(target);
        run_checked(&egraph, &mut module)?;
        cleanup(&mut module)?;
        lap("egraph", egraph.timing_note());
    }
    // A training step's gradients go straight into their persistent buffers (no weight-sized
    // temporaries in the arena).
    run_checked(&memc_passes::AccumulateIntoState, &mut module)?;
    // Code generation decides each op's form once, with the scratch memory it needs while it
    // runs; the memory plan holds that scratch (so kernels never allocate) and lowering emits
    // the same forms.
    let plans_memory = options.plans_memory();
    let mut op_plans = match module.functions().next() {
        Some((_, func)) if plans_memory => {
            Some(memc_codegen::lower::plan_ops(func, &module.weights, target))
        }
        _ => None,
    };
    // The memory plan, with rematerialization when a budget or config strings ask for it (it
    // also lists every recompute opportunity for the report).
    let mut remat = None;
    let plan = if plans_memory {
        memc_passes::memory::require_static_dims(&module)?;
        let remat_options = memc_passes::remat::RematOptions {
            budget: options.memory_budget,
            recompute: options.recompute.clone(),
            plan: memc_passes::plan::PlanOptions {
                budget: options.plan_budget,
            },
        };
        let ids = module.func_ids();
        let id = *ids
            .first()
            .ok_or_else(|| Diagnostic::error("the module has no function"))?;
        let plans = op_plans.as_ref();
        let scratch =
            |_: &memc_ir::Function, op: memc_ir::OpId| plans.map_or(0, |p| p.scratch_bytes(op));
        let mut func = module.function(id).clone();
        let original = func.clone();
        let (mut plan, mut report) =
            memc_passes::remat::rematerialize(&mut func, &module.weights, &scratch, &remat_options)
                .map_err(|d| with_const_hint(d, &func))?;
        // Nothing asked: recompute what is free (the planner keeps a value from its producer
        // to its last reader; a causal mask built from a shape is cheaper to build again than
        // to keep across the peak). The model's activation bound is the budget, and the
        // result counts only if its extra FLOPs are negligible.
        if let Some(bound) =
            model_bound.filter(|&b| !remat_options.is_active() && plan.arena_size > b)
        {
            let mut trial = original;
            let options = memc_passes::remat::RematOptions {
                budget: Some(memc_passes::remat::config::Budget::Bytes(bound)),
                ..remat_options.clone()
            };
            if let Ok((free_plan, mut free)) =
                memc_passes::remat::rematerialize(&mut trial, &module.weights, &scratch, &options)
            {
                let negligible =
                    free.extra_flops.saturating_mul(FREE_REMAT_FLOPS) <= free.base_flops;
                if negligible && free.cloned_ops > 0 && free_plan.arena_size < plan.arena_size {
                    free.automatic = true;
                    (func, plan, report) = (trial, free_plan, free);
                }
            }
        }
        *module.function_mut(id) = func;
        lap("memory plan and remat", Some(remat_note(&report)));
        if report.cloned_ops > 0 {
            // The clones need their own op plans (the same forms as their originals).
            op_plans = Some(memc_codegen::lower::plan_ops(
                module.function(id),
                &module.weights,
                target,
            ));
        }
        // The forms planned against the model's bound (Winograd, transposed products) must
        // not raise the arena: where the plan without them is smaller, take it (its free
        // bytes may still hold them, below).
        if report.cloned_ops == 0 && !remat_options.is_active() {
            if let Some(ops) = op_plans.as_ref() {
                let func = module.function(id);
                let lean =
                    memc_codegen::lower::plan_ops_without_headroom(func, &module.weights, target);
                let differ = plan
                    .schedule
                    .iter()
                    .any(|&op| lean.scratch_bytes(op) != ops.scratch_bytes(op));
                if differ {
                    let smaller = memc_passes::memory::plan_function_with_scratch(
                        func,
                        &module.weights,
                        &remat_options.plan,
                        &|_, op| lean.scratch_bytes(op),
                    )?;
                    if smaller.arena_size < plan.arena_size {
                        (plan, op_plans) = (smaller, Some(lean));
                    }
                }
            }
        }
        remat = Some(report);
        if let Some(bound) = model_bound {
            plan.bound_model_order = bound;
        }
        // Faster forms whose scratch fits bytes the placed arena leaves free at their step.
        if let Some(ops) = op_plans.as_mut() {
            let changed = memc_codegen::lower::use_free_bytes(module.function(id), &mut plan, ops)?;
            lap(
                "forms in free bytes",
                (changed > 0).then(|| format!("{changed} ops")),
            );
        }
        Some(plan)
    } else {
        None
    };
    let program = match (&plan, &op_plans, options.lower) {
        (Some(plan), Some(op_plans), true) => {
            let (_, func) = module
                .functions()
                .next()
                .ok_or_else(|| Diagnostic::error("the model has no function"))?;
            Some(memc_codegen::lower::lower_planned(
                func,
                &module.weights,
                plan,
                op_plans,
            )?)
        }
        _ => None,
    };
    if program.is_some() {
        lap("lower to kernels", None);
    }
    let ptx = match (&program, options.target) {
        (Some(program), memc_codegen::Target::Cuda) => {
            let module = emit_ptx(program)?;
            lap("emit PTX", None);
            Some(module)
        }
        _ => None,
    };
    let scratch_uses = match (&plan, &op_plans) {
        (Some(plan), Some(op_plans)) => plan
            .scratch
            .iter()
            .filter_map(|s| Some((s.op, op_plans.scratch_use(s.op)?)))
            .collect(),
        _ => HashMap::new(),
    };
    Ok(Compiled {
        module,
        symbolic,
        plan,
        program,
        ptx,
        remat,
        scratch_uses,
        times,
    })
}

/// Recomputation `memc compile` applies unasked costs at most `1 / FREE_REMAT_FLOPS` of a
/// run's FLOPs (0.1%).
const FREE_REMAT_FLOPS: u64 = 1000;

/// `diag` with a note suggesting `--const` when a size is not known and the function has small
/// integer inputs (a shape, axes, pads, k), whose values the size may depend on.
fn with_const_hint(diag: Diagnostic, func: &memc_ir::Function) -> Diagnostic {
    if !diag.message.contains("is not known") {
        return diag;
    }
    let candidates: Vec<String> = func
        .args()
        .iter()
        .enumerate()
        .filter(|&(_, &arg)| {
            func.value_type(arg).tensor().is_some_and(|t| {
                t.dims.len() <= 1
                    && matches!(t.elem, memc_ir::ElemType::I64 | memc_ir::ElemType::I32)
            })
        })
        .filter_map(|(i, _)| match func.arg_attrs(i).get("memc.name") {
            Some(memc_ir::Attribute::String(name)) => Some(format!("`{name}`")),
            _ => None,
        })
        .collect();
    if candidates.is_empty() {
        return diag;
    }
    diag.with_note(format!(
        "if it depends on the value of an input ({}), bind that input at compile time with `--const NAME=FILE.npy`",
        candidates.join(", ")
    ))
}

/// One line on what rematerialization did, for `--time-passes`.
fn remat_note(report: &memc_passes::remat::RematReport) -> String {
    format!(
        "remat: {} candidates in {} subgraphs; {} ops recomputed (+{:.2}% FLOPs); arena {} -> {} bytes{}",
        report.candidates,
        report.opportunities.len(),
        report.cloned_ops,
        crate::report::remat::percent_of(report.extra_flops, report.base_flops).unwrap_or(0.0),
        report.base_arena,
        report.arena,
        report
            .budget
            .map(|b| format!(" (budget {b}: {})", if report.met { "met" } else { "not met" }))
            .unwrap_or_default()
    )
}

/// The PTX module of `program`, or a diagnostic naming the kernel the emitters cannot write
/// and the op (step) it belongs to.
pub fn emit_ptx(
    program: &memc_codegen::Program,
) -> Result<memc_codegen::ptx::PtxModule, Diagnostic> {
    memc_codegen::ptx::emit_program(program).map_err(|error| {
        let memc_codegen::ptx::PtxError::Unsupported { kernel, .. } = &error;
        let step = program
            .steps
            .iter()
            .enumerate()
            .find(|(_, step)| step.kernels.iter().any(|k| &k.name == kernel));
        let d = Diagnostic::error(format!(
            "the CUDA backend cannot compile this model: {error}"
        ));
        match step {
            Some((index, step)) => d.with_note(format!("in step {index}, op {}", step.op)),
            None => d,
        }
    })
}

/// The launch list of a PTX module as JSON for people and scripts: per entry, its symbol, the
/// step and op it runs, the kernel's name, and its grid, block and dynamic shared memory.
pub fn launches_json(
    program: &memc_codegen::Program,
    module: &memc_codegen::ptx::PtxModule,
) -> String {
    let launches: Vec<serde_json::Value> = module
        .launches
        .iter()
        .map(|l| {
            let step = program.steps.get(l.step);
            serde_json::json!({
                "entry": l.entry,
                "step": l.step,
                "op": step.map(|s| s.op.as_str()),
                "kernel": step.and_then(|s| s.kernels.get(l.kernel)).map(|k| k.name.as_str()),
                "grid": l.launch.grid,
                "block": l.launch.block,
                "shared_bytes": l.launch.shared_bytes,
            })
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&launches)
        .expect("a JSON value prints: its keys are strings and it holds no floats");
    text.push('\n');
    text
}

fn infer(module: &mut Module, dims: &HashMap<String, u64>) -> Result<(), Diagnostic> {
    memc_ir::infer::infer_module(module, dims).map_err(|diags| {
        let mut diags = diags.into_iter();
        let first = diags
            .next()
            .unwrap_or_else(|| Diagnostic::error("shape inference failed"));
        let rest = diags.len();
        if rest > 0 {
            first.with_note(format!("{rest} more error(s) after this one"))
        } else {
            first
        }
    })
}

fn cleanup(module: &mut Module) -> Result<(), Diagnostic> {
    let cleanup: [&dyn Pass; 5] = [
        &memc_passes::FoldKnown,
        &memc_passes::Canonicalize,
        &memc_passes::FoldBatchNorm,
        &memc_passes::Cse,
        &memc_passes::Dce,
    ];
    for pass in cleanup {
        run_checked(pass, module)?;
    }
    Ok(())
}

/// Runs `pass` and verifies what it produced.
fn run_checked(pass: &dyn Pass, module: &mut Module) -> Result<(), Diagnostic> {
    pass.run(module)
        .map_err(|e| Diagnostic::error(e.to_string()))?;
    if let Err(diags) = memc_ir::verify_module(module) {
        let first = diags
            .into_iter()
            .next()
            .map_or_else(String::new, |d| d.message);
        return Err(Diagnostic::error(format!(
            "internal error: pass `{}` produced invalid IR; this is a bug in memc: {first}",
            pass.name()
        )));
    }
    Ok(())
}
