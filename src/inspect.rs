//! `memc inspect`: what a plan file holds, for people (a table) or programs (`--json`).
//!
//! Opening the plan runs every check of [`memc_runtime::PlanFile::open`], so inspecting a file
//! also tells whether `memc run` would accept it; `--verify` adds the weights' checksum, which
//! reads every weight page.

use memc_codegen::kernel::Region;
use memc_codegen::program::{IoTensor, StateKind};
use memc_codegen::{Kernel, KernelBody};
use memc_runtime::tensor::signature;
use memc_runtime::{PlanFile, RuntimeError};
use std::fmt::Write as _;
use std::path::Path;

/// What `memc inspect` was asked to do.
#[derive(Copy, Clone, Debug, Default)]
pub struct InspectOptions {
    /// Print JSON: the header, the file's length and the metadata.
    pub json: bool,
    /// Check the weights' checksum too.
    pub verify: bool,
}

/// Opens the plan at `path` and describes it.
pub fn inspect(path: &Path, options: InspectOptions) -> Result<String, RuntimeError> {
    let plan = PlanFile::open(path)?;
    if options.verify {
        plan.verify_weights()?;
    }
    if options.json {
        Ok(json(&plan, options.verify))
    } else {
        Ok(text(&plan, options.verify))
    }
}

fn json(plan: &PlanFile, verified: bool) -> String {
    let value = serde_json::json!({
        "path": plan.path().display().to_string(),
        "file_bytes": plan.file_len(),
        "header": plan.header(),
        "weights_verified": verified,
        "meta": plan.meta(),
    });
    let mut text = serde_json::to_string_pretty(&value)
        .expect("a JSON value prints: its floats are finite and its keys strings");
    text.push('\n');
    text
}

fn bytes(n: u64) -> String {
    crate::report::human_bytes(n)
}

fn text(plan: &PlanFile, verified: bool) -> String {
    let header = plan.header();
    let meta = plan.meta();
    let program = &meta.program;
    let mut out = String::new();
    let mut line = |key: &str, value: String| {
        writeln!(out, "{key:<12}{value}").expect("writing to a String cannot fail")
    };
    line(
        "plan",
        format!("{} ({})", plan.path().display(), bytes(plan.file_len())),
    );
    line(
        "format",
        format!(
            "version {}, header {} B (crc32 {:#010x})",
            header.version, header.header_len, header.header_crc
        ),
    );
    line(
        "metadata",
        format!(
            "{} at offset {} (crc32 {:#010x})",
            bytes(header.metadata_len),
            header.metadata_offset,
            header.metadata_crc
        ),
    );
    line(
        "weights",
        format!(
            "{} at offset {} (crc32 {:#010x}, {})",
            bytes(header.weights_len),
            header.weights_offset,
            header.weights_crc,
            if verified {
                "verified"
            } else {
                "not checked; --verify reads them"
            }
        ),
    );
    let dims = if meta.dims.is_empty() {
        String::new()
    } else {
        let dims: Vec<String> = meta.dims.iter().map(|(n, v)| format!("{n}={v}")).collect();
        format!(", dims {}", dims.join(" "))
    };
    line(
        "compiled",
        format!(
            "by memc {} from {} for {}{dims}",
            meta.memc_version, meta.model, meta.target
        ),
    );
    if let Some(planner) = &meta.planner {
        let ratio = |what: &str, bound: u64| {
            if bound == 0 {
                String::new()
            } else {
                format!(
                    " (arena/{what} {:.2})",
                    planner.arena_size as f64 / bound as f64
                )
            }
        };
        let absent = "not recorded (an older memc wrote this plan)".to_string();
        line(
            "planner",
            format!(
                "schedule {}, offsets {}; {} buffers in {}, peak at step {}",
                planner.schedule,
                planner.strategy,
                planner.n_buffers,
                bytes(planner.arena_size),
                planner.peak_step,
            ),
        );
        line(
            "bound",
            planner.bound_model_order.map_or(absent.clone(), |bound| {
                format!(
                    "activations {} in model order{}, {} in the chosen order",
                    bytes(bound),
                    ratio("bound", bound),
                    planner
                        .bound_chosen_order
                        .map_or_else(|| "-".to_string(), bytes)
                )
            }),
        );
        line(
            "scratch",
            planner.scratch_peak.map_or(absent, |peak| {
                format!("largest at one step {}", bytes(peak))
            }),
        );
        line(
            "LOAD",
            format!(
                "with scratch {}{}; model order {}, without sharing {}",
                bytes(planner.load),
                ratio("LOAD", planner.load),
                bytes(planner.load_model_order),
                bytes(planner.load_without_sharing),
            ),
        );
    }
    line(
        "arena",
        format!(
            "{} ({} bytes)",
            bytes(program.arena_size),
            program.arena_size
        ),
    );
    line(
        "weights",
        format!(
            "{} tensors, {} in a {} section{}",
            program.weights.len(),
            bytes(program.weights.iter().map(|w| w.byte_size).sum()),
            bytes(program.weights_size),
            match program.weights.iter().filter(|w| w.pack.is_some()).count() {
                0 => String::new(),
                packed => format!(" ({packed} packed for low-bit products)"),
            }
        ),
    );
    if let Some(ptx) = &meta.ptx {
        let launches = &ptx.launches;
        let static_shared = static_shared_bytes(&ptx.text);
        let shared = launches
            .iter()
            .map(|l| {
                let declared = static_shared.get(l.entry.as_str()).copied().unwrap_or(0);
                u64::from(l.launch.shared_bytes) + declared
            })
            .max()
            .unwrap_or(0);
        let block = launches
            .iter()
            .map(|l| {
                l.launch
                    .block
                    .iter()
                    .map(|&b| u64::from(b))
                    .product::<u64>()
            })
            .max()
            .unwrap_or(0);
        line(
            "ptx",
            format!(
                "{} entries in a {} module; largest shared memory {} B per block (static and dynamic), largest block {block} threads",
                launches.len(),
                bytes(ptx.text.len() as u64),
                shared
            ),
        );
    }
    io_table(&mut out, "inputs", &program.inputs);
    io_table(&mut out, "outputs", &program.outputs);
    if !program.state.is_empty() {
        state_table(&mut out, program);
    }

    let [loops, contracts, nbits] = kernel_kinds(program.kernels());
    let nbits_part = if nbits > 0 {
        format!(", {nbits} nbits")
    } else {
        String::new()
    };
    writeln!(
        out,
        "{:<12}{} steps, {} kernels ({loops} loop, {contracts} contract{nbits_part})",
        "steps",
        program.steps.len(),
        program.n_kernels()
    )
    .expect("writing to a String cannot fail");
    let index_width = program.steps.len().saturating_sub(1).to_string().len();
    let summaries: Vec<String> = program
        .steps
        .iter()
        .map(|step| {
            let counts = kernel_kinds(step.kernels.iter());
            let parts: Vec<String> = counts
                .iter()
                .zip(["loop", "contract", "nbits"])
                .filter(|(&n, _)| n > 0)
                .map(|(n, kind)| format!("{n} {kind}"))
                .collect();
            if parts.is_empty() {
                "-".to_string()
            } else {
                parts.join(", ")
            }
        })
        .collect();
    // At least two spaces between the kernel counts and the op, however long the counts.
    let summary_width = summaries.iter().map(String::len).max().unwrap_or(0).max(16) + 2;
    for (index, (step, summary)) in program.steps.iter().zip(&summaries).enumerate() {
        writeln!(
            out,
            "  {index:>index_width$}  {summary:<summary_width$}{}",
            step.op
        )
        .expect("writing to a String cannot fail");
    }
    out
}

/// The bytes of `.shared` arrays each entry of a PTX module declares (`.shared .align 16 .b8
/// name[N];`), by entry name; `.extern` (dynamic) arrays count in the launch, not here.
fn static_shared_bytes(module: &str) -> std::collections::HashMap<&str, u64> {
    let mut sizes = std::collections::HashMap::new();
    let mut entry: Option<&str> = None;
    for line in module.lines() {
        let line = line.trim();
        if let Some(rest) = line.split(".entry ").nth(1) {
            let name = rest
                .split(|c: char| c == '(' || c.is_whitespace())
                .next()
                .unwrap_or("");
            entry = Some(name);
            sizes.insert(name, 0);
            continue;
        }
        let Some(name) = entry else { continue };
        if !line.starts_with(".shared") || line.starts_with(".extern") {
            continue;
        }
        // Only `.b8` arrays are declared (see the PTX module doc); other element widths count
        // their elements times their bytes.
        let width = [
            (".b8", 1),
            (".b16", 2),
            (".b32", 4),
            (".f32", 4),
            (".b64", 8),
            (".f64", 8),
        ]
        .iter()
        .find(|(t, _)| line.contains(t))
        .map_or(1, |&(_, w)| w);
        let count = line
            .split('[')
            .nth(1)
            .and_then(|r| r.split(']').next())
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0);
        *sizes.entry(name).or_insert(0) += count * width;
    }
    sizes
}

/// How many of `kernels` are loop kernels, contractions and low-bit products.
fn kernel_kinds<'a>(kernels: impl Iterator<Item = &'a Kernel>) -> [usize; 3] {
    kernels.fold([0; 3], |mut counts, k| {
        counts[match k.body {
            KernelBody::Loop(_) => 0,
            KernelBody::Contract(_) => 1,
            KernelBody::NBits(_) => 2,
        }] += 1;
        counts
    })
}

/// The persistent state of a training step: one line per tensor, parameters first.
fn state_table(out: &mut String, program: &memc_codegen::Program) {
    let count = |kind: StateKind| program.state.iter().filter(|s| s.kind == kind).count();
    let size = |kind: StateKind| {
        program
            .state
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.byte_size())
            .sum::<u64>()
    };
    writeln!(
        out,
        "{:<12}{} tensors in {} ({} parameters, {}; {} gradient buffers, {}), kept across runs",
        "state",
        program.state.len(),
        bytes(program.state_size),
        count(StateKind::Parameter),
        bytes(size(StateKind::Parameter)),
        count(StateKind::Gradient),
        bytes(size(StateKind::Gradient)),
    )
    .expect("writing to a String cannot fail");
    let name_width = program
        .state
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(0);
    for kind in [StateKind::Parameter, StateKind::Gradient] {
        for s in program.state.iter().filter(|s| s.kind == kind) {
            writeln!(
                out,
                "  {:<name_width$}  {:<9}  {}  state +{}, {}",
                s.name,
                kind.name(),
                signature(s.elem, &s.shape),
                s.byte_offset,
                bytes(s.byte_size())
            )
            .expect("writing to a String cannot fail");
        }
    }
}

fn io_table(out: &mut String, title: &str, tensors: &[IoTensor]) {
    writeln!(out, "{title:<12}{}", tensors.len()).expect("writing to a String cannot fail");
    let name_width = tensors.iter().map(|t| t.name.len()).max().unwrap_or(0);
    // An output with a run-time extent shows its bound on that axis: `i64[2, <=6]`.
    let sigs: Vec<String> = tensors
        .iter()
        .map(|t| match t.extent {
            None => signature(t.elem, &t.shape),
            Some(slot) => {
                let dims: Vec<String> = t
                    .shape
                    .iter()
                    .enumerate()
                    .map(|(a, d)| {
                        if a == slot.axis as usize {
                            format!("<={d}")
                        } else {
                            d.to_string()
                        }
                    })
                    .collect();
                format!("{}[{}]", t.elem.name(), dims.join(", "))
            }
        })
        .collect();
    let sig_width = sigs.iter().map(String::len).max().unwrap_or(0);
    for (io, sig) in tensors.iter().zip(&sigs) {
        let region = match io.region {
            Region::Arena => "arena",
            Region::Weights => "weights",
            Region::State => "state",
        };
        let extent = io.extent.map_or(String::new(), |slot| {
            format!(", extent at arena +{}", slot.byte_offset)
        });
        writeln!(
            out,
            "  {:<name_width$}  {sig:<sig_width$}  {region} +{}, {}{extent}",
            io.name,
            io.byte_offset,
            bytes(io.byte_size())
        )
        .expect("writing to a String cannot fail");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_shared_memory_is_summed_per_entry() {
        let module = format!(
            "{}\n.visible .entry a{}\n{{\n\t.shared .align 16 .b8 tile[4096];\n\t.shared .align 4 .f32 red[32];\n\tret;\n}}\n\n.visible .entry b{}\n{{\n\t.extern .shared .align 16 .b8 dyn[];\n\tret;\n}}\n",
            memc_codegen::ptx::HEADER,
            memc_codegen::ptx::PARAMS,
            memc_codegen::ptx::PARAMS
        );
        let sizes = static_shared_bytes(&module);
        assert_eq!(sizes.get("a"), Some(&(4096 + 128)));
        assert_eq!(sizes.get("b"), Some(&0));
    }
}
