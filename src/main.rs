//! The `memc` command line. Each subcommand is a thin layer over a library driver.

mod progress;

use clap::{Parser, Subcommand, ValueEnum};
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "memc",
    version,
    about = "A memory-planning compiler for neural-network models"
)]
struct Cli {
    /// When to color diagnostics.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    color: ColorChoice,
    /// Print the peak resident memory and the wall time to standard error at exit.
    #[arg(long, global = true)]
    stats: bool,
    #[command(subcommand)]
    command: Command,
}

/// `memc run --engine`.
#[derive(Copy, Clone, ValueEnum)]
enum EngineArg {
    Backend,
    Mlir,
}

#[derive(Copy, Clone, ValueEnum)]
enum EmitArg {
    Ir,
    Mlir,
    PlanJson,
    Plan,
    Kernels,
    Ptx,
    MlirPlan,
}

/// `--target`: the backend the kernels are compiled for.
#[derive(Copy, Clone, ValueEnum)]
enum TargetArg {
    Cpu,
    Cuda,
}

/// `--progress`: when `memc compile` draws its progress on standard error.
#[derive(Copy, Clone, ValueEnum)]
enum ProgressArg {
    /// A bar when standard error is a terminal.
    Auto,
    /// A bar on a terminal, and otherwise a line a second (for logs).
    Always,
    Never,
}

#[derive(Copy, Clone, ValueEnum)]
enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand)]
enum Command {
    /// Run passes on textual IR (MLIR generic syntax) and print the result.
    Opt {
        /// The input file; `-` reads standard input.
        file: PathBuf,
        /// Comma-separated passes to run, in order (e.g. `canonicalize,cse,dce`).
        #[arg(short = 'p', long = "passes", default_value = "")]
        pipeline: String,
        /// Write the result here instead of standard output.
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
        /// Cut the input at `// -----` lines and process each piece on its own.
        #[arg(long)]
        split_input_file: bool,
        /// Skip the verifier after each pass (the input is still verified).
        #[arg(long)]
        no_verify_each: bool,
        /// Print the IR to standard error after every pass.
        #[arg(long)]
        print_ir_after_all: bool,
        /// Print how long each pass and the verifier took, to standard error.
        #[arg(long)]
        time_passes: bool,
    },
    /// Compile an ONNX model to a plan file (`-o MODEL.plan`), or print its IR or memory plan.
    ///
    /// `--emit kernels` prints the lowered kernels instead; a `.mlir` input is textual IR,
    /// compiled by the same stages after import. `--target cuda` compiles for NVIDIA GPUs:
    /// the plan stores the PTX module, and `--emit ptx -o DIR` writes it for inspection.
    Compile {
        /// The ONNX model; external data is read from beside it. A `.mlir` file is textual IR
        /// (weights known by type only), compiled after import the same way.
        model: PathBuf,
        /// What to write: `plan` (the plan file, needs `-o`), `ir` (or `mlir`, the same text),
        /// `plan-json` (the memory plan), `kernels` (the lowered program as text) or `ptx`
        /// (implies `--target cuda`: with `-o DIR`, writes DIR/<model stem>.ptx, the PTX
        /// module, and DIR/<model stem>.launches.json, each entry's step, op, kernel, grid,
        /// block and shared bytes; a `.mlir` input prints the module) or `mlir-plan` (the
        /// planned program as upstream MLIR: func, memref, scf, arith, math, linalg; needs a
        /// build with the `mlir` feature).
        #[arg(long, value_enum, default_value_t = EmitArg::Plan)]
        emit: EmitArg,
        /// The backend to compile for: `cpu` (the Cranelift JIT) or `cuda` (PTX for NVIDIA
        /// GPUs, sm_80 and newer). `--emit ptx` implies `cuda`.
        #[arg(long, value_enum)]
        target: Option<TargetArg>,
        /// With a `.mlir` input: cut it at `// -----` lines and compile each piece on its own.
        #[arg(long)]
        split_input_file: bool,
        /// Write here instead of standard output.
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
        /// Bind a symbolic dim, e.g. `--dim batch=1 --dim seq=128`.
        #[arg(long = "dim", value_name = "NAME=VALUE", value_parser = memc::compile::parse_dim_binding)]
        dims: Vec<(String, u64)>,
        /// Bind a graph input to the array in a `.npy` file, e.g. `--const shape=shape.npy`:
        /// the input becomes a constant before shape inference, so shapes computed from it
        /// (a Reshape's shape, Slice's starts, Pad's pads, ...) are static, and the plan has
        /// no input for it. Repeatable.
        #[arg(long = "const", value_name = "NAME=FILE", value_parser = memc::compile::parse_const_binding)]
        consts: Vec<(String, PathBuf)>,
        /// Plan memory and print where it goes (to standard error), with an SVG timeline.
        #[arg(long)]
        report: bool,
        /// Where `--report` writes the SVG timeline (default: MODEL's name with `.memory.svg`).
        #[arg(long, value_name = "FILE")]
        report_svg: Option<PathBuf>,
        /// Time the offset search may use, in milliseconds.
        #[arg(long, default_value_t = 200, value_name = "MS")]
        plan_budget_ms: u64,
        /// Do not fuse (the `egraph` pass): DequantizeLinear + MatMul stay as written.
        #[arg(long)]
        no_fuse: bool,
        /// Recompute values instead of keeping them until the planned arena fits: a size
        /// (`512MiB`, `1.5GB`, `4096`) or a percentage of the arena planned without
        /// recomputation (`60%`). Chooses the fewest extra FLOPs; says how close it got, and
        /// why, when the budget cannot be met.
        #[arg(long, value_name = "SIZE|N%", value_parser = memc::remat::parse_budget)]
        memory_budget: Option<memc::remat::Budget>,
        /// Recompute by hand with ONNX Runtime's memory optimizer config strings,
        /// `SUBGRAPH:1:COUNT` comma-separated (`Gelu+:1:-1,FusedMatMul+Add+:1:2`); `--report`
        /// lists the subgraphs a model has.
        #[arg(long, value_name = "CONFIGS", value_parser = memc::remat::parse_recompute)]
        recompute: Option<memc::remat::Recompute>,
        /// Print how long each compile stage took (and why `egraph` stopped), to standard error.
        #[arg(long)]
        time_passes: bool,
        /// Show progress on standard error: a spinner while the model compiles and a bar while
        /// the plan's weights are written (packed as they stream). `auto` draws only on a
        /// terminal; `always` also prints a line a second when standard error is a file.
        #[arg(long, value_enum, default_value_t = ProgressArg::Auto)]
        progress: ProgressArg,
    },
    /// Plan offset-assignment instances (`id,lower,upper,size` CSV) and print arena/LOAD.
    PlanCsv {
        /// The instances.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Time the improvement search may use per instance, in milliseconds.
        #[arg(long, default_value_t = 1000, value_name = "MS")]
        budget_ms: u64,
    },
    /// Execute a plan on `.npy` inputs on its target's backend, time it, and write the outputs.
    Run {
        /// The plan file (`memc compile MODEL -o MODEL.plan`).
        plan: PathBuf,
        /// A graph input, e.g. `--input image=cat.npy`; one per input.
        #[arg(long = "input", value_name = "NAME=FILE.npy", value_parser = memc::run::parse_input_binding)]
        inputs: Vec<(String, PathBuf)>,
        /// Write each output to DIR/<output name>.npy (created if missing).
        #[arg(long, value_name = "DIR")]
        output_dir: Option<PathBuf>,
        /// Worker threads (default: all available cores).
        #[arg(long, value_name = "N")]
        threads: Option<std::num::NonZeroUsize>,
        /// Run this many times and print the minimum and median time (a training step's runs
        /// each update its gradient buffers).
        #[arg(long, default_value = "1", value_name = "N")]
        repeat: std::num::NonZeroUsize,
        /// Also time the backend's run call alone (the kernels, a device's synchronization
        /// included; no input or output copies) and end with a JSON line of its min and median
        /// over the `--repeat` runs, for bench/gpu/bench.py.
        #[arg(long, hide = true)]
        time: bool,
        /// Time each kernel over the runs and print where the time goes: by op type, and the
        /// slowest kernels with their sizes (adds a clock read per kernel).
        #[arg(long)]
        profile: bool,
        /// Kernels `--profile` lists one by one, slowest first (the rest are summed by op).
        #[arg(long, default_value = "20", value_name = "N", requires = "profile")]
        profile_top: usize,
        /// A training step's persistent state to start from: DIR/<name>.npy for each parameter
        /// (required) and gradient buffer (optional; zero when absent). `--input NAME=FILE`
        /// sets one state tensor too.
        #[arg(long = "state", value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// After the runs, write every state tensor (parameters and updated gradient buffers)
        /// to DIR/<name>.npy (created if missing).
        #[arg(long, value_name = "DIR")]
        save_state: Option<PathBuf>,
        /// Check the weights' checksum before running (reads every weight page).
        #[arg(long)]
        verify: bool,
        /// Measure the peak-RSS growth of the first run (weights made resident first) and end
        /// with a JSON summary line, for bench/run_bench.py.
        #[arg(long)]
        rss: bool,
        /// What runs the plan: `backend` (its target's kernels; the default) or `mlir` (the
        /// program emitted as upstream MLIR, lowered and run by MLIR's ExecutionEngine on one
        /// thread: an independent oracle to compare outputs with; needs the `mlir` feature).
        #[arg(long, value_enum, default_value = "backend")]
        engine: EngineArg,
    },
    /// Show where a plan's memory goes: the table `compile --report` prints, and its SVG timeline.
    ///
    /// Read from the plan file alone (no model needed); the table goes to standard output.
    Report {
        /// The plan file (`memc compile MODEL -o MODEL.plan`).
        plan: PathBuf,
        /// Where to write the SVG timeline (default: PLAN's name with `.memory.svg`, in the
        /// current directory).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
    /// Show what a plan file holds: header, I/O signature, arena, weights, steps.
    Inspect {
        /// The plan file.
        plan: PathBuf,
        /// Print the header and the metadata as JSON.
        #[arg(long)]
        json: bool,
        /// Check the weights' checksum too (reads every weight page).
        #[arg(long)]
        verify: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let started = std::time::Instant::now();
    let stats = cli.stats;
    let code = run(cli);
    if stats {
        let peak = memc::peak_rss_bytes().map_or("unavailable".to_string(), |b| {
            format!("{:.1} MiB", b as f64 / 1048576.0)
        });
        eprintln!(
            "memc: peak RSS {peak}, wall {:.3} s",
            started.elapsed().as_secs_f64()
        );
    }
    code
}

fn run(cli: Cli) -> ExitCode {
    let color = match cli.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => std::io::stderr().is_terminal(),
    };
    match cli.command {
        Command::Opt {
            file,
            pipeline,
            output,
            split_input_file,
            no_verify_each,
            print_ir_after_all,
            time_passes,
        } => {
            let options = memc::opt::OptOptions {
                pipeline,
                split_input_file,
                verify_each: !no_verify_each,
                print_ir_after_all,
                time_passes,
                color,
            };
            opt(&file, output.as_deref(), &options)
        }
        Command::Compile {
            model,
            emit,
            target,
            split_input_file,
            output,
            dims,
            consts,
            report,
            report_svg,
            plan_budget_ms,
            no_fuse,
            memory_budget,
            recompute,
            time_passes,
            progress,
        } => {
            let emit = match emit {
                EmitArg::Ir => memc::compile::Emit::Ir,
                EmitArg::Mlir => memc::compile::Emit::Mlir,
                EmitArg::PlanJson => memc::compile::Emit::PlanJson,
                EmitArg::Plan => memc::compile::Emit::Plan,
                EmitArg::Kernels => memc::compile::Emit::Kernels,
                EmitArg::Ptx => memc::compile::Emit::Ptx,
                EmitArg::MlirPlan => memc::compile::Emit::MlirPlan,
            };
            if matches!(emit, memc::compile::Emit::MlirPlan) && !cfg!(feature = "mlir") {
                eprintln!("error: {}", memc::compile::NO_MLIR);
                return ExitCode::from(2);
            }
            // PTX exists only for the cuda target, so asking for it chooses that target.
            let target = match (target, emit) {
                (Some(TargetArg::Cpu), memc::compile::Emit::Ptx) => {
                    eprintln!("error: `--emit ptx` writes the PTX of the cuda target; drop `--target cpu` (or say `--target cuda`)");
                    return ExitCode::from(2);
                }
                (Some(TargetArg::Cuda), _) | (None, memc::compile::Emit::Ptx) => {
                    memc::codegen::Target::Cuda
                }
                (Some(TargetArg::Cpu), _) | (None, _) => memc::codegen::Target::Cpu,
            };
            if let Some((name, _)) = consts.first() {
                if model.extension().is_some_and(|e| e == "mlir") {
                    eprintln!("error: `--const {name}=...` binds an input of an ONNX model; textual IR has no graph inputs to bind");
                    return ExitCode::from(2);
                }
            }
            let mut const_inputs = Vec::with_capacity(consts.len());
            for (name, file) in &consts {
                match memc::compile::read_const(name, file) {
                    Ok(value) => const_inputs.push(value),
                    Err(message) => {
                        eprintln!("error: {message}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            let request = CompileRequest {
                emit,
                target,
                output,
                dims,
                consts: const_inputs,
                report,
                report_svg,
                plan_budget_ms,
                no_fuse,
                memory_budget,
                recompute: recompute.map(|r| r.0).unwrap_or_default(),
                time_passes,
                color,
                progress,
            };
            if model.extension().is_some_and(|e| e == "mlir") {
                compile_text(&model, split_input_file, request)
            } else if split_input_file {
                eprintln!("error: `--split-input-file` cuts textual IR (a `.mlir` file), not an ONNX model");
                ExitCode::from(2)
            } else {
                compile(&model, request)
            }
        }
        Command::PlanCsv { files, budget_ms } => {
            match memc::plan_csv::run(&files, std::time::Duration::from_millis(budget_ms)) {
                Ok(table) => write_output(None, &table),
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Run {
            plan,
            inputs,
            output_dir,
            threads,
            repeat,
            time,
            profile,
            profile_top,
            state_dir,
            save_state,
            verify,
            rss,
            engine,
        } => {
            let options = memc::run::RunOptions {
                inputs,
                output_dir,
                threads,
                repeat,
                state_dir,
                save_state,
                verify_weights: verify,
                measure_rss: rss,
                time_backend: time,
                profile,
                profile_top,
                engine: match engine {
                    EngineArg::Backend => memc::run::Engine::Backend,
                    EngineArg::Mlir => memc::run::Engine::Mlir,
                },
            };
            runtime_output(memc::run::run(&plan, &options))
        }
        Command::Report { plan, svg } => {
            let svg = svg.unwrap_or_else(|| svg_beside_stem(&plan, "plan"));
            match memc::report::report_plan_file(&plan, &svg) {
                Ok(table) => write_output(None, &table),
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Inspect { plan, json, verify } => {
            let options = memc::inspect::InspectOptions { json, verify };
            runtime_output(memc::inspect::inspect(&plan, options))
        }
    }
}

/// The default path of an SVG timeline: `<stem of file>.memory.svg` in the current directory
/// (`<fallback>.memory.svg` when `file` has no stem).
fn svg_beside_stem(file: &std::path::Path, fallback: &str) -> PathBuf {
    let stem = file
        .file_stem()
        .map_or(fallback.into(), |s| s.to_string_lossy().into_owned());
    PathBuf::from(format!("{stem}.memory.svg"))
}

/// Reads textual IR from `file` (`-` is standard input) for `memc {command}`; returns the text
/// and its name in diagnostics, or prints why it cannot.
fn read_text(file: &std::path::Path, command: &str) -> Option<(String, String)> {
    if file.as_os_str() == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut text) {
            eprintln!("error: cannot read standard input: {e}");
            return None;
        }
        return Some((text, "<stdin>".to_string()));
    }
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", file.display());
            return None;
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => Some((text, file.display().to_string())),
        Err(e) => {
            eprintln!(
                "error: `{}` is not UTF-8 text (invalid byte at offset {}); memc {command} reads textual IR",
                file.display(),
                e.utf8_error().valid_up_to()
            );
            None
        }
    }
}

fn opt(
    file: &std::path::Path,
    output: Option<&std::path::Path>,
    options: &memc::opt::OptOptions,
) -> ExitCode {
    let Some((source, name)) = read_text(file, "opt") else {
        return ExitCode::FAILURE;
    };
    let result = memc::opt::run_opt(&source, &name, options);
    eprint!("{}", result.stderr);
    let written = write_output(output, &result.stdout);
    if result.success {
        written
    } else {
        ExitCode::FAILURE
    }
}

struct CompileRequest {
    emit: memc::compile::Emit,
    target: memc::codegen::Target,
    output: Option<PathBuf>,
    dims: Vec<(String, u64)>,
    consts: Vec<memc::ir::onnx::ConstInput>,
    report: bool,
    report_svg: Option<PathBuf>,
    plan_budget_ms: u64,
    no_fuse: bool,
    memory_budget: Option<memc::remat::Budget>,
    recompute: Vec<memc::remat::ConfigEntry>,
    time_passes: bool,
    color: bool,
    progress: ProgressArg,
}

fn compile(model: &std::path::Path, request: CompileRequest) -> ExitCode {
    use memc::compile::Emit;
    let emit = request.emit;
    if emit == Emit::Plan && request.output.is_none() {
        eprintln!("error: `memc compile` writes a plan file: give its path with `-o MODEL.plan`");
        eprintln!("       (or `--emit ir`, `--emit plan-json` to print to standard output)");
        return ExitCode::from(2);
    }
    if emit == Emit::Ptx && request.output.is_none() {
        eprintln!("error: `--emit ptx` writes two files into a directory: give it with `-o DIR`");
        return ExitCode::from(2);
    }
    let dims = request.dims.clone();
    let options = request.options();
    let spinner = progress::compiling(request.progress, model);
    let compiled = memc::compile::compile(model, &options);
    spinner.finish_and_clear();
    let compiled = match compiled {
        Ok(compiled) => {
            if request.time_passes {
                print_times(&compiled);
            }
            compiled
        }
        Err(diag) => {
            eprint!(
                "{}",
                diag.render(&model.display().to_string(), "", request.color)
            );
            return ExitCode::FAILURE;
        }
    };
    if let Some(remat) = &compiled.remat {
        say_remat(remat);
    }
    if let (true, Some(report)) = (request.report, compiled.memory_report()) {
        let svg_path = request
            .report_svg
            .clone()
            .unwrap_or_else(|| svg_beside_stem(model, "model"));
        if let Err(e) = std::fs::write(&svg_path, memc::report::svg(&report)) {
            eprintln!("error: cannot write `{}`: {e}", svg_path.display());
            return ExitCode::FAILURE;
        }
        eprint!(
            "{}",
            memc::report::table(&report, Some(&svg_path.display().to_string()))
        );
    }
    if let (Emit::Plan, Some(meta), Some(output)) = (
        emit,
        memc::compile::plan_meta(model, dims, request.target, &compiled),
        request.output.as_deref(),
    ) {
        return write_plan_file(output, &compiled, &meta, &request);
    }
    if let (Emit::Ptx, Some(program), Some(ptx), Some(dir)) = (
        emit,
        &compiled.program,
        &compiled.ptx,
        request.output.as_deref(),
    ) {
        return write_ptx_files(model, dir, program, ptx);
    }
    if emit == Emit::MlirPlan {
        return match memc::compile::mlir_plan(&compiled) {
            Ok(text) => write_output(request.output.as_deref(), &text),
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::FAILURE
            }
        };
    }
    let text = memc::compile::emitted_text(&compiled, emit)
        .unwrap_or_else(|| memc::ir::print_module(&compiled.module));
    write_output(request.output.as_deref(), &text)
}

impl CompileRequest {
    fn options(&self) -> memc::compile::CompileOptions {
        memc::compile::CompileOptions {
            dims: self.dims.iter().cloned().collect(),
            plan_memory: self.report || self.emit == memc::compile::Emit::PlanJson,
            plan_budget: std::time::Duration::from_millis(self.plan_budget_ms),
            lower: self.emit.needs_kernels(),
            no_fuse: self.no_fuse,
            target: self.target,
            memory_budget: self.memory_budget,
            recompute: self.recompute.clone(),
            consts: self.consts.clone(),
        }
    }
}

/// What `--memory-budget` and `--recompute` did, on standard error.
fn say_remat(r: &memc::passes::remat::RematReport) {
    match memc::report::remat::summary(r) {
        Some(Ok(done)) => eprintln!("memc: {done}"),
        Some(Err(unmet)) => eprintln!("warning: {unmet}"),
        None => {}
    }
    for u in &r.unmatched {
        eprintln!(
            "warning: `--recompute {u}` matches no subgraph of this model (`--report` lists them)"
        );
    }
}

fn print_times(compiled: &memc::compile::Compiled) {
    for t in &compiled.times {
        eprintln!("memc: {:>9.3} ms  {}", t.time.as_secs_f64() * 1e3, t.stage);
        if let Some(note) = &t.note {
            eprintln!("      {note}");
        }
    }
}

/// `memc compile FILE.mlir`: textual IR through the stages after import, each `// -----` piece
/// on its own with `--split-input-file` (outputs joined by the same marker, as `memc opt` does).
fn compile_text(model: &std::path::Path, split: bool, request: CompileRequest) -> ExitCode {
    use memc::compile::Emit;
    if request.emit == Emit::Plan {
        eprintln!("error: a plan file needs the weights' bytes, which textual IR does not carry");
        eprintln!("       (`--emit kernels`, `--emit ir` or `--emit plan-json` print what textual IR compiles to)");
        return ExitCode::from(2);
    }
    if request.report {
        eprintln!("error: `--report` reads ONNX models; use `--emit plan-json` with textual IR");
        return ExitCode::from(2);
    }
    let Some((source, name)) = read_text(model, "compile") else {
        return ExitCode::FAILURE;
    };
    let options = request.options();
    let pieces = if split {
        memc::opt::split_input(&source)
    } else {
        vec![source]
    };
    let mut success = true;
    let mut outputs = Vec::with_capacity(pieces.len());
    for piece in &pieces {
        match memc::compile::compile_text(piece, &options) {
            Ok(compiled) => {
                if request.time_passes {
                    print_times(&compiled);
                }
                if request.emit == Emit::MlirPlan {
                    match memc::compile::mlir_plan(&compiled) {
                        Ok(text) => outputs.push(text),
                        Err(message) => {
                            eprintln!("error: {message}");
                            success = false;
                            outputs.push(String::new());
                        }
                    }
                    continue;
                }
                outputs
                    .push(memc::compile::emitted_text(&compiled, request.emit).unwrap_or_default());
            }
            Err(diags) => {
                for diag in diags {
                    eprint!("{}", diag.render(&name, piece, request.color));
                }
                success = false;
                outputs.push(String::new());
            }
        }
    }
    let text = outputs.join(&format!("{}\n", memc::opt::SPLIT_MARKER));
    let written = write_output(request.output.as_deref(), &text);
    if success {
        written
    } else {
        ExitCode::FAILURE
    }
}

/// Writes the plan file of a compiled model and says what it holds.
fn write_plan_file(
    output: &std::path::Path,
    compiled: &memc::compile::Compiled,
    meta: &memc::runtime::plan::PlanMeta,
    request: &CompileRequest,
) -> ExitCode {
    let n_kernels = meta.program.n_kernels();
    let arena = meta.program.arena_size;
    let started = std::time::Instant::now();
    let bar = progress::writing(request.progress, meta.program.weights_size);
    let written = memc::runtime::plan::write_plan_with_progress(
        output,
        meta,
        &compiled.module.weights,
        &mut |p| {
            bar.set_position(p.done);
            true
        },
    );
    // The bar stays, at its last position, above what follows.
    bar.finish();
    match written {
        Ok(stats) => {
            if request.time_passes {
                eprintln!(
                    "memc: {:>9.3} ms  write the plan file (weights packed as they stream)",
                    started.elapsed().as_secs_f64() * 1e3
                );
            }
            eprintln!(
                "memc: wrote {} ({} kernels, arena {}, weights {}, {} total)",
                output.display(),
                n_kernels,
                memc::report::human_bytes(arena),
                memc::report::human_bytes(stats.weights_bytes),
                memc::report::human_bytes(stats.file_bytes),
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--emit ptx -o DIR`: writes DIR/<stem>.ptx and DIR/<stem>.launches.json (DIR is created if
/// missing) and says what it wrote.
fn write_ptx_files(
    model: &std::path::Path,
    dir: &std::path::Path,
    program: &memc::codegen::Program,
    ptx: &memc::codegen::ptx::PtxModule,
) -> ExitCode {
    let stem = model
        .file_stem()
        .map_or("model".into(), |s| s.to_string_lossy().into_owned());
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("error: cannot create `{}`: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let module = dir.join(format!("{stem}.ptx"));
    let launches = dir.join(format!("{stem}.launches.json"));
    for (path, text) in [
        (&module, ptx.text.clone()),
        (&launches, memc::compile::launches_json(program, ptx)),
    ] {
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    eprintln!(
        "memc: wrote {} ({} entries) and {}",
        module.display(),
        ptx.launches.len(),
        launches.display()
    );
    ExitCode::SUCCESS
}

fn write_output(output: Option<&std::path::Path>, text: &str) -> ExitCode {
    let written = match output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| format!("cannot write `{}`: {e}", path.display())),
        None => std::io::stdout()
            .write_all(text.as_bytes())
            .map_err(|e| format!("cannot write to standard output: {e}")),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Prints what `run` or `inspect` produced, or its error (exit code 1).
fn runtime_output(result: Result<String, memc::runtime::RuntimeError>) -> ExitCode {
    match result {
        Ok(text) => write_output(None, &text),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
