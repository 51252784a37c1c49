//! `memc run`: load a plan file, run it on `.npy` inputs, time it, and write the outputs.
//!
//! The driver reads every input before loading the plan (so a missing file is reported before
//! any kernel compiles), runs the plan `repeat` times on one session, and writes the outputs
//! of the last run straight from the arena (or the weights map) as `.npy` files named after
//! the outputs, sanitized the way `bench/models/reference.py` names its files.
//!
//! A training step's plan has persistent state: `--state DIR` reads each parameter (required)
//! and gradient buffer (optional, zero otherwise) from `DIR/<sanitized name>.npy`, an
//! `--input` naming a state tensor sets it, every run updates the gradient buffers in place,
//! and `--save-state DIR` writes the whole state after the last run, so a second `memc run
//! --state DIR` continues where the first stopped.

use memc_codegen::kernel::{ContractB, Kernel, KernelBody};
use memc_codegen::Program;
use memc_runtime::npy::{read_npy, write_npy};
use memc_runtime::tensor::signature;
use memc_runtime::{RuntimeError, Session, SessionOptions, Tensor, TensorRef};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What runs a plan's program (`memc run --engine`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// The plan's own backend: the CPU backend's JIT-compiled kernels (or the GPU's).
    #[default]
    Backend,
    /// MLIR (feature `mlir`): the program emitted as upstream MLIR (`--emit mlir-plan`),
    /// lowered by MLIR's own pipeline and run by its ExecutionEngine, on one thread with a fresh
    /// arena per run. An oracle that shares no kernel code with the backend: compare the
    /// outputs of both.
    Mlir,
}

/// What `memc run` was asked to do.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// `--input NAME=FILE.npy`, in order.
    pub inputs: Vec<(String, PathBuf)>,
    /// Where to write `<output>.npy`; nothing is written without it.
    pub output_dir: Option<PathBuf>,
    pub threads: Option<NonZeroUsize>,
    /// Runs to time; the outputs are those of the last.
    pub repeat: NonZeroUsize,
    /// `--state DIR`: the persistent state to start from.
    pub state_dir: Option<PathBuf>,
    /// `--save-state DIR`: where to write the state after the runs.
    pub save_state: Option<PathBuf>,
    /// Check the weights' checksum at load.
    pub verify_weights: bool,
    /// Measure the peak-RSS growth of the first run and print a JSON summary line.
    pub measure_rss: bool,
    /// `--time`: time the backend's run call alone over the runs and print a JSON line.
    pub time_backend: bool,
    /// `--engine`: what runs the program.
    pub engine: Engine,
    /// `--profile`: time each kernel over the runs and print where the time goes.
    pub profile: bool,
    /// `--profile-top`: kernels the profile lists one by one.
    pub profile_top: usize,
}

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`), where Linux provides it.
fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Resets the peak-RSS high-water mark (`VmHWM`) to the current RSS.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Reads one byte of every page of `bytes`, so the mapped weights are resident before a
/// measurement (onnxruntime holds its weights in memory before it runs, too).
fn touch_pages(bytes: &[u8]) -> u64 {
    let mut sum = 0u64;
    for i in (0..bytes.len()).step_by(4096) {
        // SAFETY: `i` is in bounds; a volatile read keeps the loop from being removed.
        sum = sum.wrapping_add(u64::from(unsafe {
            std::ptr::read_volatile(bytes.as_ptr().add(i))
        }));
    }
    sum
}

/// Parses `NAME=FILE` for `--input` (at the first `=`: file names may hold one, ONNX names
/// rarely do).
pub fn parse_input_binding(text: &str) -> Result<(String, PathBuf), String> {
    let (name, file) = text.split_once('=').ok_or_else(|| {
        format!("`--input {text}`: expected NAME=FILE.npy, such as `--input image=cat.npy`")
    })?;
    if name.is_empty() {
        return Err(format!("`--input {text}`: the input name is empty"));
    }
    if file.is_empty() {
        return Err(format!("`--input {text}`: the file name is empty"));
    }
    Ok((name.to_string(), PathBuf::from(file)))
}

/// The file name (without `.npy`) an output is written under: characters other than ASCII
/// letters, digits, `_`, `.` and `-` become `_`, leading and trailing dots are dropped, and an
/// empty result is `tensor`.
pub fn sanitize_name(name: &str) -> String {
    let replaced: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = replaced.trim_matches('.');
    if trimmed.is_empty() {
        "tensor".to_string()
    } else {
        trimmed.to_string()
    }
}

/// Runs the plan at `plan` as `options` say and returns the report to print.
pub fn run(plan: &Path, options: &RunOptions) -> Result<String, RuntimeError> {
    let inputs: Vec<(&str, Tensor)> = options
        .inputs
        .iter()
        .map(|(name, file)| Ok((name.as_str(), read_npy(file)?)))
        .collect::<Result<_, RuntimeError>>()?;
    let session_options = SessionOptions {
        threads: options.threads,
        verify_weights: options.verify_weights,
    };
    let mut session = Session::load_with(plan, &session_options)?;
    let inputs = load_state(&mut session, options, inputs)?;
    let mut report = String::new();
    let program = session.program();
    let n_kernels = program.n_kernels();
    let n_steps = program.steps.len();
    let weights = program.weights_size;
    let line = |report: &mut String, key: &str, value: String| {
        writeln!(report, "{key:<9}{value}").expect("writing to a String cannot fail")
    };
    line(&mut report, "plan", plan.display().to_string());
    line(
        &mut report,
        "arena",
        format!(
            "{} ({} bytes)",
            crate::report::human_bytes(session.arena_size()),
            session.arena_size()
        ),
    );
    line(
        &mut report,
        "weights",
        format!("{} (mapped)", crate::report::human_bytes(weights)),
    );
    line(
        &mut report,
        "load",
        format!(
            "open {}, JIT {} ({n_kernels} kernels in {n_steps} steps), {} threads",
            millis(session.open_time()),
            millis(session.jit_time()),
            session.threads()
        ),
    );

    let refs: Vec<(&str, TensorRef<'_>)> = inputs.iter().map(|(n, t)| (*n, t.as_ref())).collect();
    if options.engine == Engine::Mlir {
        let outputs = run_mlir(&session, &refs, options, &mut report)?;
        let views: Vec<(&str, TensorRef<'_>)> =
            outputs.iter().map(|t| (t.name(), t.as_ref())).collect();
        write_outputs(&mut report, options, &views)?;
        return Ok(report);
    }
    // Peak-RSS growth of the first run: the arena's pages, the inputs copied in and the outputs
    // copied out, measured from the loaded state with the weights resident.
    let mut rss_growth = None;
    let io_bytes: u64 = session
        .inputs()
        .iter()
        .chain(session.outputs())
        .map(|io| io.byte_size())
        .sum();
    let (arena_bytes, threads) = (session.arena_size(), session.threads());
    let has_state = !session.state().is_empty();
    if options.measure_rss {
        touch_pages(session.plan().weights());
        make_state_resident(&mut session)?;
        if reset_peak_rss() {
            let before = proc_status_bytes("VmRSS");
            let outputs = session.run(&refs)?;
            let peak = proc_status_bytes("VmHWM");
            drop(outputs);
            rss_growth = before.zip(peak).map(|(b, p)| p.saturating_sub(b));
        }
    }
    let mut times = Vec::with_capacity(options.repeat.get());
    let mut backend_times = Vec::with_capacity(options.repeat.get());
    session.set_profiling(options.profile);
    for _ in 1..options.repeat.get() {
        let started = Instant::now();
        session.run_in_place(&refs)?;
        times.push(started.elapsed());
        backend_times.push(session.backend_run_time());
    }
    let started = Instant::now();
    let outputs = session.run_in_place(&refs)?;
    times.push(started.elapsed());
    let runs = times.len();
    let median = median_of(&mut times);
    line(&mut report, "run", run_summary(times[0], median, runs));

    if options.measure_rss {
        line(
            &mut report,
            "rss",
            rss_growth.map_or("unavailable (needs Linux /proc)".to_string(), |g| {
                format!(
                    "first run grew the peak RSS by {}",
                    crate::report::human_bytes(g)
                )
            }),
        );
        writeln!(
            report,
            "{{\"min_ms\": {:.6}, \"median_ms\": {:.6}, \"rss_growth_bytes\": {}, \"arena_bytes\": {}, \"io_bytes\": {}, \"threads\": {}}}",
            times[0].as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e3,
            rss_growth.map_or("null".to_string(), |g| g.to_string()),
            arena_bytes,
            io_bytes,
            threads
        )
        .expect("writing to a String cannot fail");
    }
    let views: Vec<(&str, TensorRef<'_>)> = outputs.iter().collect();
    write_outputs(&mut report, options, &views)?;
    // The last run's outputs borrow the session (until their last use above), so its backend
    // time and kernel times are read after them.
    if options.profile {
        let times = KernelTimes {
            sums: session.kernel_times(),
            minima: session.kernel_min_times(),
            runs,
        };
        write_profile(&mut report, session.program(), &times, options.profile_top);
    }
    if options.time_backend {
        backend_times.push(session.backend_run_time());
        let backend_median = median_of(&mut backend_times);
        line(
            &mut report,
            "backend",
            format!(
                "run call alone: min {}, median {}",
                millis(backend_times[0]),
                millis(backend_median)
            ),
        );
        writeln!(
            report,
            "{{\"backend_min_ms\": {:.6}, \"backend_median_ms\": {:.6}, \"min_ms\": {:.6}, \"median_ms\": {:.6}, \"runs\": {runs}, \"arena_bytes\": {arena_bytes}}}",
            backend_times[0].as_secs_f64() * 1e3,
            backend_median.as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e3,
        )
        .expect("writing to a String cannot fail");
    }
    if has_state {
        save_state(&mut session, options, &mut report)?;
    }
    Ok(report)
}

/// `--engine mlir`: runs the session's program through MLIR's ExecutionEngine `repeat` times,
/// adds its lines to `report` and returns the last run's outputs (an output with a run-time
/// extent trimmed to it). The inputs are checked as a session run checks them.
fn run_mlir(
    session: &Session,
    inputs: &[(&str, TensorRef<'_>)],
    options: &RunOptions,
    report: &mut String,
) -> Result<Vec<Tensor>, RuntimeError> {
    if !session.state().is_empty() {
        return Err(RuntimeError::Mlir(
            "the plan is a training step with persistent state, which the MLIR engine does not keep between runs; run it with the default engine".into(),
        ));
    }
    if options.measure_rss || options.time_backend {
        return Err(RuntimeError::Mlir(
            "`--rss` and `--time` measure the plan's backend; leave them out with `--engine mlir`"
                .into(),
        ));
    }
    let program = session.program();
    memc_runtime::check_inputs(program, inputs)?;
    let ordered: Vec<&[u8]> = program
        .inputs
        .iter()
        .map(|io| {
            inputs
                .iter()
                .find(|(name, _)| *name == io.name)
                .map_or(&[][..], |(_, t)| t.data())
        })
        .collect();
    mlir_engine::run(session, &ordered, options.repeat.get(), report)
}

#[cfg(feature = "mlir")]
mod mlir_engine {
    use super::{median_of, millis, run_summary};
    use memc_codegen::mlir::{EmitOptions, Jit};
    use memc_runtime::{RuntimeError, Session, Tensor};
    use std::fmt::Write as _;
    use std::time::Instant;

    /// Emits, lowers and JIT-compiles the program with MLIR, then runs it `repeat` times on
    /// `inputs` (in the program's input order).
    pub(super) fn run(
        session: &Session,
        inputs: &[&[u8]],
        repeat: usize,
        report: &mut String,
    ) -> Result<Vec<Tensor>, RuntimeError> {
        let error = |e: memc_codegen::mlir::MlirError| RuntimeError::Mlir(e.to_string());
        let program = session.program();
        let started = Instant::now();
        let jit = Jit::compile(program, &EmitOptions::default()).map_err(error)?;
        let jit_time = started.elapsed();
        let weights = session.plan().weights();
        let mut times = Vec::with_capacity(repeat);
        let mut last = Vec::new();
        for _ in 0..repeat {
            let started = Instant::now();
            last = jit.run_outputs(weights, inputs).map_err(error)?;
            times.push(started.elapsed());
        }
        writeln!(
            report,
            "{:<9}MLIR ExecutionEngine (emitted, lowered and JIT-compiled in {}), 1 thread, a fresh arena per run",
            "engine",
            millis(jit_time)
        )
        .expect("writing to a String cannot fail");
        let median = median_of(&mut times);
        writeln!(
            report,
            "{:<9}{}",
            "run",
            run_summary(times[0], median, times.len())
        )
        .expect("writing to a String cannot fail");
        program
            .outputs
            .iter()
            .zip(last)
            .map(|(io, (shape, bytes))| Tensor::new(io.name.clone(), io.elem, shape, bytes))
            .collect()
    }
}

#[cfg(not(feature = "mlir"))]
mod mlir_engine {
    use memc_runtime::{RuntimeError, Session, Tensor};

    /// Why `--engine mlir` is not there in a build without the `mlir` feature.
    pub(super) fn run(
        _: &Session,
        _: &[&[u8]],
        _: usize,
        _: &mut String,
    ) -> Result<Vec<Tensor>, RuntimeError> {
        Err(RuntimeError::Mlir(
            "this memc was built without the `mlir` feature (it links LLVM/MLIR 22: install Debian's libmlir-22-dev llvm-22-dev libclang-22-dev and build with `cargo build --release --features mlir`)".into(),
        ))
    }
}

/// Lists the outputs in the report and, with `--output-dir`, writes each to
/// `DIR/<sanitized name>.npy` (a repeated file name gets its output's index).
fn write_outputs(
    report: &mut String,
    options: &RunOptions,
    outputs: &[(&str, TensorRef<'_>)],
) -> Result<(), RuntimeError> {
    if let Some(dir) = &options.output_dir {
        create_dir(dir)?;
    }
    writeln!(report, "outputs").expect("writing to a String cannot fail");
    let width = outputs.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let sigs: Vec<String> = outputs
        .iter()
        .map(|(_, t)| signature(t.elem(), t.shape()))
        .collect();
    let sig_width = sigs.iter().map(String::len).max().unwrap_or(0);
    let mut used = HashSet::new();
    for (index, (name, tensor)) in outputs.iter().enumerate() {
        let sig = &sigs[index];
        let Some(dir) = &options.output_dir else {
            writeln!(report, "  {name:<width$}  {sig}").expect("writing to a String cannot fail");
            continue;
        };
        let mut file = sanitize_name(name);
        if !used.insert(file.clone()) {
            file = format!("{file}_{index}");
            used.insert(file.clone());
        }
        let path = dir.join(format!("{file}.npy"));
        write_npy(&path, *tensor)?;
        writeln!(
            report,
            "  {name:<width$}  {sig:<sig_width$}  -> {}",
            path.display()
        )
        .expect("writing to a String cannot fail");
    }
    Ok(())
}

/// A profile's kernel times: per kernel, its wall time summed over `runs` and its shortest
/// run (empty when the backend keeps none).
struct KernelTimes<'a> {
    sums: &'a [Duration],
    minima: &'a [Duration],
    runs: usize,
}

/// `memc run --profile`: each kernel's mean time per run, and its shortest, by op type and
/// the slowest `top` one by one, with what each kernel is. The minima matter on a machine
/// whose speed drifts between phases (means then mix the phases).
fn write_profile(report: &mut String, program: &Program, times: &KernelTimes, top: usize) {
    let mut out =
        |text: String| writeln!(report, "{text}").expect("writing to a String cannot fail");
    let KernelTimes { sums, minima, runs } = *times;
    if sums.is_empty() {
        out("profile  unavailable: this backend does not time its kernels one by one".into());
        return;
    }
    let per_run = |t: Duration| t.as_secs_f64() * 1e3 / runs as f64;
    let min_ms = |index: usize| minima.get(index).map(|t| t.as_secs_f64() * 1e3);
    let total: f64 = sums.iter().map(|&t| per_run(t)).sum();
    let share = |ms: f64| if total > 0.0 { 100.0 * ms / total } else { 0.0 };
    let kernels: Vec<(&str, &Kernel)> = program
        .steps
        .iter()
        .flat_map(|step| step.kernels.iter().map(move |k| (step.op.as_str(), k)))
        .collect();
    let n = kernels.len().min(sums.len());
    let min_total: Option<f64> = (0..n).map(min_ms).sum();
    let min_column = |ms: Option<f64>| ms.map_or(String::new(), |ms| format!("  min {ms:>8.3} ms"));
    out(format!(
        "profile  kernels {:.3} ms per run (mean over {runs} run{}, {} kernels){}",
        total,
        if runs == 1 { "" } else { "s" },
        kernels.len(),
        min_total.map_or(String::new(), |ms| format!(
            ", {ms:.3} ms summing each kernel's fastest run"
        )),
    ));
    // By op type (the step's op up to its node name), slowest first.
    let mut by_op: Vec<(&str, f64, Option<f64>, usize)> = Vec::new();
    for (index, (op, _)) in kernels.iter().enumerate().take(n) {
        let kind = op.split_whitespace().next().unwrap_or(op);
        let (mean, min) = (per_run(sums[index]), min_ms(index));
        match by_op.iter_mut().find(|(k, ..)| *k == kind) {
            Some(entry) => {
                entry.1 += mean;
                entry.2 = entry.2.zip(min).map(|(a, b)| a + b);
                entry.3 += 1;
            }
            None => by_op.push((kind, mean, min, 1)),
        }
    }
    by_op.sort_by(|a, b| b.1.total_cmp(&a.1));
    out("  by op".into());
    for (kind, ms, min, count) in &by_op {
        out(format!(
            "    {ms:>9.3} ms {:>5.1}%{}  {kind} ({count} kernel{})",
            share(*ms),
            min_column(*min),
            if *count == 1 { "" } else { "s" }
        ));
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| sums[b].cmp(&sums[a]));
    out(format!(
        "  slowest kernels{}",
        if order.len() > top {
            format!(" ({top} of {})", order.len())
        } else {
            String::new()
        }
    ));
    for &index in order.iter().take(top) {
        let (op, kernel) = kernels[index];
        let ms = per_run(sums[index]);
        out(format!(
            "    {ms:>9.3} ms {:>5.1}%{}  #{index} {op}: {}",
            share(ms),
            min_column(min_ms(index)),
            kernel_shape(kernel)
        ));
    }
}

/// What a kernel computes, in a few words: a contraction's sizes, a loop's index space.
fn kernel_shape(kernel: &Kernel) -> String {
    let dims = |d: &[u64]| d.iter().map(u64::to_string).collect::<Vec<_>>().join("x");
    match &kernel.body {
        KernelBody::Contract(c) => {
            let batch: u64 = c.batch.iter().product();
            let conv = if matches!(c.b, ContractB::Im2col(_)) {
                ", convolution"
            } else {
                ""
            };
            if batch > 1 {
                format!("contract {batch} x {}x{}x{} (MxNxK){conv}", c.m, c.n, c.k)
            } else {
                format!("contract {}x{}x{} (MxNxK){conv}", c.m, c.n, c.k)
            }
        }
        KernelBody::Loop(l) => {
            let outer = if l.outer.is_empty() {
                "1".to_string()
            } else {
                dims(&l.outer)
            };
            if l.inner.is_empty() {
                format!("loop over {outer}")
            } else {
                format!("loop over {outer}, inner {}", dims(&l.inner))
            }
        }
        KernelBody::NBits(q) => format!(
            "{}-bit weight product {}x{}x{} (MxNxK)",
            q.bits, q.m, q.n, q.k
        ),
    }
}

/// The run line's figures: `min X ms, median Y ms over N runs`.
fn run_summary(min: Duration, median: Duration, runs: usize) -> String {
    format!(
        "min {}, median {} over {runs} run{}",
        millis(min),
        millis(median),
        if runs == 1 { "" } else { "s" }
    )
}

/// Sorts `times` (not empty) and returns their median.
fn median_of(times: &mut [Duration]) -> Duration {
    times.sort();
    let n = times.len();
    if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2
    }
}

/// Writes every state tensor over itself, so its pages are resident before a measurement
/// (onnxruntime holds its parameters and gradient buffers in memory before a step, too).
fn make_state_resident(session: &mut Session) -> Result<(), RuntimeError> {
    let names: Vec<String> = session.state().iter().map(|s| s.name.clone()).collect();
    for name in names {
        let tensor = session.state_tensor(&name)?.to_tensor(&name);
        session.set_state(&name, tensor.as_ref())?;
    }
    Ok(())
}

fn create_dir(dir: &Path) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(dir).map_err(|e| RuntimeError::Write {
        path: dir.to_path_buf(),
        source: e,
    })
}

/// Sets the session's state from `--state DIR` and from the `--input`s that name state
/// tensors; returns the other inputs.
fn load_state<'a>(
    session: &mut Session,
    options: &RunOptions,
    inputs: Vec<(&'a str, Tensor)>,
) -> Result<Vec<(&'a str, Tensor)>, RuntimeError> {
    if session.state().is_empty() {
        if let Some((flag, dir)) = [
            ("--state", &options.state_dir),
            ("--save-state", &options.save_state),
        ]
        .into_iter()
        .find_map(|(flag, dir)| dir.as_ref().map(|d| (flag, d)))
        {
            return Err(RuntimeError::NoState {
                flag,
                dir: dir.clone(),
            });
        }
    }
    let state: Vec<(String, bool)> = session
        .state()
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                s.kind == memc_codegen::program::StateKind::Parameter,
            )
        })
        .collect();
    if let Some(dir) = &options.state_dir {
        for (name, required) in &state {
            let path = dir.join(format!("{}.npy", sanitize_name(name)));
            if !required && !path.exists() {
                continue;
            }
            let tensor = read_npy(&path)?;
            session.set_state(name, tensor.as_ref())?;
        }
    }
    let mut rest = Vec::with_capacity(inputs.len());
    for (name, tensor) in inputs {
        if state.iter().any(|(n, _)| n == name) {
            session.set_state(name, tensor.as_ref())?;
        } else {
            rest.push((name, tensor));
        }
    }
    Ok(rest)
}

/// Writes every state tensor to `--save-state DIR` and lists the state in the report.
fn save_state(
    session: &mut Session,
    options: &RunOptions,
    report: &mut String,
) -> Result<(), RuntimeError> {
    if let Some(dir) = &options.save_state {
        create_dir(dir)?;
    }
    let state: Vec<(String, &'static str)> = session
        .state()
        .iter()
        .map(|s| (s.name.clone(), s.kind.name()))
        .collect();
    writeln!(
        report,
        "state    {} tensors, {}",
        state.len(),
        crate::report::human_bytes(session.state_size())
    )
    .expect("writing to a String cannot fail");
    let Some(dir) = &options.save_state else {
        return Ok(());
    };
    let width = state.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    for (name, kind) in &state {
        let path = dir.join(format!("{}.npy", sanitize_name(name)));
        let tensor = session.state_tensor(name)?;
        write_npy(&path, tensor)?;
        writeln!(report, "  {name:<width$}  {kind:<9}  -> {}", path.display())
            .expect("writing to a String cannot fail");
    }
    Ok(())
}

fn millis(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_names_are_sanitized_like_the_reference_script() {
        assert_eq!(sanitize_name("logits"), "logits");
        assert_eq!(sanitize_name("fc1/MatMul:0"), "fc1_MatMul_0");
        assert_eq!(sanitize_name("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(sanitize_name(".."), "tensor");
        assert_eq!(sanitize_name(""), "tensor");
        assert_eq!(sanitize_name("naïve name"), "na_ve_name");
        assert_eq!(sanitize_name(".hidden."), "hidden");
    }

    #[test]
    fn input_bindings_parse() {
        assert_eq!(
            parse_input_binding("image=cat.npy").unwrap(),
            ("image".to_string(), PathBuf::from("cat.npy"))
        );
        assert_eq!(
            parse_input_binding("x=dir/a=b.npy").unwrap(),
            ("x".to_string(), PathBuf::from("dir/a=b.npy"))
        );
        assert_eq!(
            parse_input_binding("cat.npy").unwrap_err(),
            "`--input cat.npy`: expected NAME=FILE.npy, such as `--input image=cat.npy`"
        );
        assert_eq!(
            parse_input_binding("=cat.npy").unwrap_err(),
            "`--input =cat.npy`: the input name is empty"
        );
        assert_eq!(
            parse_input_binding("x=").unwrap_err(),
            "`--input x=`: the file name is empty"
        );
    }
}
