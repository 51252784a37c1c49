//! The pass manager: the [`Pass`] trait, the registry of passes by name, pipeline parsing and
//! [`PassManager`], which runs a pipeline over a module.
//!
//! What the manager guarantees:
//! - The input module is verified before the first pass. Invalid input is the user's error and
//!   is reported as [`PassError::InvalidInput`] with the verifier's diagnostics; no pass runs.
//! - With [`PassManager::verify_each`] (on by default) the module is verified after every pass.
//!   A failure there is a bug in memc, not in the input: [`PassError::VerifierFailedAfterPass`]
//!   names the pass and says so.
//! - Passes run exactly in the order given, each once; the first failure stops the pipeline.
//! - With [`PassManager::print_ir_after_all`] the module is written to the caller's sink after
//!   each pass, before that pass's verification, so the IR of a pass that broke it can be read.
//! - With [`PassManager::time_passes`] the wall time of every pass and of all verification is
//!   measured and rendered as a table in the style of MLIR's `--mlir-timing`, followed by the
//!   notes passes give ([`Pass::timing_note`], such as why the e-graph's saturation stopped).

use crate::{
    AccumulateIntoState, Canonicalize, Cse, Dce, Egraph, FoldBatchNorm, FoldKnown, ShapeInfer,
};
use memc_ir::{Diagnostic, Module};
use std::fmt::Write as _;
use std::io::Write;
use std::time::{Duration, Instant};

/// A transformation of a whole module.
///
/// A pass receives verified IR and must leave verified IR behind; it may rely on every
/// invariant the verifier states. It reports expected failures (an input it cannot handle) as
/// a [`PassError`] and never panics on verified IR.
pub trait Pass {
    /// The name used in pipelines (`memc opt -p canonicalize,cse`).
    fn name(&self) -> &'static str;

    /// One sentence that says what the pass does, for `--help` and listings.
    fn description(&self) -> &'static str;

    /// Runs the pass over every function of `module`.
    fn run(&self, module: &mut Module) -> Result<(), PassError>;

    /// Lines about the last run for the timing report (`--time-passes`), such as why a
    /// saturation stopped; `None` for passes with nothing to add.
    fn timing_note(&self) -> Option<String> {
        None
    }
}

/// Every way running a pipeline can fail.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// A pipeline names a pass that does not exist.
    #[error("unknown pass `{name}`; available passes: {}", available.join(", "))]
    UnknownPass {
        name: String,
        available: Vec<&'static str>,
    },

    /// A pipeline has an empty entry (`cse,,dce` or a trailing comma).
    #[error(
        "the pass pipeline `{pipeline}` has an empty entry at position {position}; \
         separate pass names with single commas"
    )]
    EmptyPipelineEntry { pipeline: String, position: usize },

    /// The module handed to the manager does not verify.
    #[error("the input IR is invalid:{}", format_diagnostics(.0))]
    InvalidInput(Vec<Diagnostic>),

    /// The module stopped verifying after a pass: a bug in that pass.
    #[error(
        "internal error: pass `{pass}` produced invalid IR; this is a bug in memc:{}",
        format_diagnostics(.diagnostics)
    )]
    VerifierFailedAfterPass {
        pass: &'static str,
        diagnostics: Vec<Diagnostic>,
    },

    /// A pass found the input inconsistent (shape inference: operands whose shapes cannot be
    /// combined); each diagnostic points at an op.
    #[error("pass `{pass}` rejected the input:{}", format_diagnostics(.diagnostics))]
    Rejected {
        pass: &'static str,
        diagnostics: Vec<Diagnostic>,
    },

    /// A pass met input it cannot handle.
    #[error("pass `{pass}` failed: {message}")]
    PassFailed { pass: &'static str, message: String },

    /// Writing the IR dump to the caller's sink failed.
    #[error("cannot write the IR dump: {0}")]
    IrDump(#[source] std::io::Error),
}

/// Lists diagnostics one per line, indented under the error's first line.
fn format_diagnostics(diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for diagnostic in diagnostics {
        // Writing into a String cannot fail.
        let _ = write!(out, "\n  {diagnostic}");
    }
    out
}

/// Every registered pass, one instance each, in the order `--help` lists them.
pub fn registered_passes() -> Vec<Box<dyn Pass>> {
    vec![
        Box::new(ShapeInfer::new()),
        Box::new(FoldKnown),
        Box::new(Canonicalize),
        Box::new(FoldBatchNorm),
        Box::new(Cse),
        Box::new(Dce),
        Box::new(Egraph::new()),
        Box::new(AccumulateIntoState),
    ]
}

/// Parses a comma-separated pipeline such as `canonicalize,cse,dce`.
///
/// Whitespace around names is ignored, and an empty or all-blank pipeline has no passes. An
/// empty entry (`cse,,dce`, a trailing comma) and an unknown name are errors; the error for an
/// unknown name lists the passes that exist.
pub fn parse_pipeline(text: &str) -> Result<Vec<Box<dyn Pass>>, PassError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut passes = Vec::new();
    for (index, entry) in text.split(',').enumerate() {
        let name = entry.trim();
        if name.is_empty() {
            return Err(PassError::EmptyPipelineEntry {
                pipeline: text.to_string(),
                position: index + 1,
            });
        }
        let mut registry = registered_passes();
        let Some(found) = registry.iter().position(|pass| pass.name() == name) else {
            return Err(PassError::UnknownPass {
                name: name.to_string(),
                available: registry.iter().map(|pass| pass.name()).collect(),
            });
        };
        passes.push(registry.swap_remove(found));
    }
    Ok(passes)
}

/// The function the manager verifies modules with.
pub type VerifyFn = fn(&Module) -> Result<(), Vec<Diagnostic>>;

/// What a successful run produced besides the rewritten module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// The rendered timing table, when [`PassManager::time_passes`] was asked for.
    pub timing: Option<String>,
}

/// Runs a pipeline of passes over a module; see the module doc for what it guarantees.
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    verify_each: bool,
    print_ir_after_all: bool,
    time_passes: bool,
    verifier: VerifyFn,
}

impl PassManager {
    /// A manager for `passes` that verifies after each pass with [`memc_ir::verify_module`],
    /// and neither dumps nor times.
    pub fn new(passes: Vec<Box<dyn Pass>>) -> PassManager {
        PassManager {
            passes,
            verify_each: true,
            print_ir_after_all: false,
            time_passes: false,
            verifier: memc_ir::verify_module,
        }
    }

    /// Whether to verify the module after every pass (`--verify-each`, on by default). The
    /// input is verified either way.
    pub fn verify_each(mut self, enabled: bool) -> PassManager {
        self.verify_each = enabled;
        self
    }

    /// Whether to write the module to the IR dump sink after every pass
    /// (`--print-ir-after-all`).
    pub fn print_ir_after_all(mut self, enabled: bool) -> PassManager {
        self.print_ir_after_all = enabled;
        self
    }

    /// Whether to time every pass and return a report (`--time-passes`).
    pub fn time_passes(mut self, enabled: bool) -> PassManager {
        self.time_passes = enabled;
        self
    }

    /// Replaces the verifier, for a caller that checks extra invariants (and for tests of the
    /// manager itself). The replacement is used for the input and after every pass.
    pub fn with_verifier(mut self, verifier: VerifyFn) -> PassManager {
        self.verifier = verifier;
        self
    }

    /// The names of the passes, in the order they run.
    pub fn pass_names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|pass| pass.name()).collect()
    }

    /// Verifies `module`, runs every pass over it in order, and returns the timing report when
    /// asked for. With `print_ir_after_all`, the IR after each pass is written to `ir_dump`.
    pub fn run(
        &mut self,
        module: &mut Module,
        ir_dump: &mut dyn Write,
    ) -> Result<PassReport, PassError> {
        let run_start = Instant::now();
        let mut verifier_time = Duration::ZERO;
        let mut pass_times = Vec::with_capacity(self.passes.len());
        let mut notes = Vec::new();

        let verify_start = Instant::now();
        let input_check = (self.verifier)(module);
        verifier_time += verify_start.elapsed();
        input_check.map_err(PassError::InvalidInput)?;

        for pass in &self.passes {
            let pass_start = Instant::now();
            pass.run(module)?;
            pass_times.push((pass.name(), pass_start.elapsed()));
            notes.extend(pass.timing_note());

            if self.print_ir_after_all {
                write_ir_dump(ir_dump, pass.name(), module).map_err(PassError::IrDump)?;
            }

            if self.verify_each {
                let verify_start = Instant::now();
                let check = (self.verifier)(module);
                verifier_time += verify_start.elapsed();
                check.map_err(|diagnostics| PassError::VerifierFailedAfterPass {
                    pass: pass.name(),
                    diagnostics,
                })?;
            }
        }

        let timing = self.time_passes.then(|| {
            let mut report = render_timing_report(&pass_times, verifier_time, run_start.elapsed());
            for note in notes {
                for line in note.lines() {
                    // Writing into a String cannot fail.
                    let _ = writeln!(report, "  {line}");
                }
            }
            report
        });
        Ok(PassReport { timing })
    }
}

fn write_ir_dump(sink: &mut dyn Write, pass_name: &str, module: &Module) -> std::io::Result<()> {
    write!(
        sink,
        "// -----// IR Dump After {pass_name} //----- //\n{}",
        memc_ir::print_module(module)
    )
}

const RULE: &str =
    "===-------------------------------------------------------------------------===";
const TITLE: &str = "... Pass execution timing report ...";

/// Renders the timing table: one row per pass in run order, then `verifier` (the input check
/// and every check after a pass) and `total` (the whole run, dumps included), in milliseconds
/// with their share of the total.
pub(crate) fn render_timing_report(
    pass_times: &[(&str, Duration)],
    verifier_time: Duration,
    total: Duration,
) -> String {
    let total_ms = total.as_secs_f64() * 1e3;
    let row = |out: &mut String, time: Duration, name: &str| {
        let ms = time.as_secs_f64() * 1e3;
        let percent = if total_ms > 0.0 {
            ms / total_ms * 100.0
        } else {
            0.0
        };
        // Writing into a String cannot fail.
        let _ = writeln!(out, "  {ms:>10.3} ({percent:>5.1}%)  {name}");
    };
    let mut out = String::new();
    let title_pad = " ".repeat(RULE.len().saturating_sub(TITLE.len()) / 2);
    let _ = writeln!(out, "{RULE}\n{title_pad}{TITLE}\n{RULE}");
    let _ = writeln!(out, "  Total Execution Time: {total_ms:.3} ms\n");
    let _ = writeln!(out, "  ---Wall Time (ms)---  ----Name----");
    for &(name, time) in pass_times {
        row(&mut out, time, name);
    }
    row(&mut out, verifier_time, "verifier");
    row(&mut out, total, "total");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{f32_tensor, module_with};
    use memc_ir::{Function, Opcode, ValueDef};
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    fn names(passes: &[Box<dyn Pass>]) -> Vec<&'static str> {
        passes.iter().map(|pass| pass.name()).collect()
    }

    fn parse_error(text: &str) -> String {
        match parse_pipeline(text) {
            Ok(passes) => panic!("`{text}` parsed as {:?}", names(&passes)),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn pipeline_names_are_trimmed_and_kept_in_order() {
        let passes = parse_pipeline(" dce , canonicalize,cse ").expect("valid pipeline");
        assert_eq!(names(&passes), ["dce", "canonicalize", "cse"]);
    }

    #[test]
    fn a_pass_may_appear_twice() {
        let passes = parse_pipeline("cse,dce,cse").expect("valid pipeline");
        assert_eq!(names(&passes), ["cse", "dce", "cse"]);
    }

    #[test]
    fn an_empty_pipeline_has_no_passes() {
        assert!(parse_pipeline("").expect("empty pipeline").is_empty());
        assert!(parse_pipeline("  ").expect("blank pipeline").is_empty());
    }

    #[test]
    fn an_unknown_pass_is_named_with_the_available_ones() {
        assert_eq!(
            parse_error("cse,fold-everything"),
            "unknown pass `fold-everything`; available passes: shape-infer, fold-known, canonicalize, \
             fold-batchnorm, cse, dce, egraph, accumulate-into-state"
        );
    }

    #[test]
    fn an_empty_entry_is_an_error() {
        assert_eq!(
            parse_error("cse,,dce"),
            "the pass pipeline `cse,,dce` has an empty entry at position 2; \
             separate pass names with single commas"
        );
        assert!(parse_error("cse,").contains("empty entry at position 2"));
    }

    #[test]
    fn registered_passes_have_unique_names_and_descriptions() {
        let passes = registered_passes();
        let mut seen = std::collections::HashSet::new();
        for pass in &passes {
            assert!(
                seen.insert(pass.name()),
                "`{}` is registered twice",
                pass.name()
            );
            assert!(
                !pass.description().is_empty(),
                "`{}` has no description",
                pass.name()
            );
        }
    }

    type Log = Rc<RefCell<Vec<&'static str>>>;

    /// A pass that records that it ran and changes nothing.
    struct Record {
        name: &'static str,
        log: Log,
    }

    impl Pass for Record {
        fn name(&self) -> &'static str {
            self.name
        }
        fn description(&self) -> &'static str {
            "records that it ran"
        }
        fn run(&self, _module: &mut Module) -> Result<(), PassError> {
            self.log.borrow_mut().push(self.name);
            Ok(())
        }
    }

    /// A buggy pass: erases the first op of every function even though its result is used.
    struct EraseUsedOp;

    impl Pass for EraseUsedOp {
        fn name(&self) -> &'static str {
            "erase-used-op"
        }
        fn description(&self) -> &'static str {
            "erases an op whose result is still used"
        }
        fn run(&self, module: &mut Module) -> Result<(), PassError> {
            for (_, func) in module.functions_mut() {
                let first = func.layout().block_ops(func.entry_block())[0];
                func.erase_op(first);
            }
            Ok(())
        }
    }

    /// A pass that always fails.
    struct Refuse;

    impl Pass for Refuse {
        fn name(&self) -> &'static str {
            "refuse"
        }
        fn description(&self) -> &'static str {
            "fails"
        }
        fn run(&self, _module: &mut Module) -> Result<(), PassError> {
            Err(PassError::PassFailed {
                pass: "refuse",
                message: "no".to_string(),
            })
        }
    }

    /// `%0 = Relu(%arg0); return %0`: the function `EraseUsedOp` breaks.
    fn relu_module() -> Module {
        module_with(|func: &mut Function| {
            let entry = func.entry_block();
            let x = func.args()[0];
            let relu = func.build_op(entry, Opcode::Relu, vec![x], vec![f32_tensor(&[4])], []);
            vec![func.op(relu).results[0]]
        })
    }

    /// A checker for one invariant of the real verifier: every operand is a block argument or
    /// a result of an op placed in a block.
    fn check_uses_are_defined(module: &Module) -> Result<(), Vec<Diagnostic>> {
        let mut diagnostics = Vec::new();
        for (_, func) in module.functions() {
            for op in func.walk_ops() {
                for &value in &func.op(op).operands {
                    if let ValueDef::Result { op: def, .. } = func.value(value).def {
                        if func.layout().op_block(def).is_none() {
                            diagnostics.push(Diagnostic::error(format!(
                                "{value} is used by {op} but its defining op {def} is not placed"
                            )));
                        }
                    }
                }
            }
        }
        if diagnostics.is_empty() {
            Ok(())
        } else {
            Err(diagnostics)
        }
    }

    fn reject_everything(_module: &Module) -> Result<(), Vec<Diagnostic>> {
        Err(vec![Diagnostic::error("rejected")])
    }

    thread_local! {
        static VERIFY_CALLS: Cell<usize> = const { Cell::new(0) };
    }

    fn count_verify_calls(_module: &Module) -> Result<(), Vec<Diagnostic>> {
        VERIFY_CALLS.with(|calls| calls.set(calls.get() + 1));
        Ok(())
    }

    fn run(manager: &mut PassManager, module: &mut Module) -> Result<PassReport, PassError> {
        manager.run(module, &mut std::io::sink())
    }

    #[test]
    fn passes_run_in_order() {
        let log = Log::default();
        let passes: Vec<Box<dyn Pass>> = vec![
            Box::new(Record {
                name: "second",
                log: log.clone(),
            }),
            Box::new(Record {
                name: "first",
                log: log.clone(),
            }),
        ];
        let mut manager = PassManager::new(passes);
        assert_eq!(manager.pass_names(), ["second", "first"]);
        run(&mut manager, &mut relu_module()).expect("passes that change nothing succeed");
        assert_eq!(*log.borrow(), ["second", "first"]);
    }

    #[test]
    fn invalid_input_is_reported_before_any_pass_runs() {
        let log = Log::default();
        let passes: Vec<Box<dyn Pass>> = vec![Box::new(Record {
            name: "p",
            log: log.clone(),
        })];
        let mut manager = PassManager::new(passes).with_verifier(reject_everything);
        let error = run(&mut manager, &mut relu_module()).expect_err("the verifier rejects it");
        assert!(matches!(error, PassError::InvalidInput(_)), "{error:?}");
        assert_eq!(error.to_string(), "the input IR is invalid:\n  rejected");
        assert!(log.borrow().is_empty());
    }

    #[test]
    fn invalid_ir_after_a_pass_is_a_memc_bug() {
        let mut manager =
            PassManager::new(vec![Box::new(EraseUsedOp)]).with_verifier(check_uses_are_defined);
        let error = run(&mut manager, &mut relu_module()).expect_err("the pass breaks the IR");
        assert!(
            matches!(
                error,
                PassError::VerifierFailedAfterPass {
                    pass: "erase-used-op",
                    ..
                }
            ),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with(
                "internal error: pass `erase-used-op` produced invalid IR; this is a bug in memc:\n  "
            ),
            "{message}"
        );
        assert!(message.contains("is not placed"), "{message}");
    }

    #[test]
    fn the_real_verifier_decides_after_a_pass() {
        // The manager must report exactly what `verify_module` reports for the broken module.
        let mut expected = relu_module();
        EraseUsedOp
            .run(&mut expected)
            .expect("the pass itself does not fail");
        let verdict = memc_ir::verify_module(&expected);

        let mut manager = PassManager::new(vec![Box::new(EraseUsedOp)]);
        let outcome = run(&mut manager, &mut relu_module());
        match (verdict, outcome) {
            (Ok(()), Ok(_)) => {}
            (
                Err(diagnostics),
                Err(PassError::VerifierFailedAfterPass {
                    pass,
                    diagnostics: got,
                }),
            ) => {
                assert_eq!(pass, "erase-used-op");
                assert_eq!(got, diagnostics);
            }
            (verdict, outcome) => panic!("verifier said {verdict:?} but the manager {outcome:?}"),
        }
    }

    #[test]
    fn verify_each_off_checks_only_the_input() {
        let passes: Vec<Box<dyn Pass>> = vec![Box::new(Dce), Box::new(Cse)];
        VERIFY_CALLS.with(|calls| calls.set(0));
        let mut manager = PassManager::new(passes)
            .verify_each(false)
            .with_verifier(count_verify_calls);
        run(&mut manager, &mut relu_module()).expect("valid module");
        assert_eq!(VERIFY_CALLS.with(Cell::get), 1);

        let passes: Vec<Box<dyn Pass>> = vec![Box::new(Dce), Box::new(Cse)];
        VERIFY_CALLS.with(|calls| calls.set(0));
        let mut manager = PassManager::new(passes).with_verifier(count_verify_calls);
        run(&mut manager, &mut relu_module()).expect("valid module");
        assert_eq!(VERIFY_CALLS.with(Cell::get), 3);
    }

    #[test]
    fn a_failing_pass_stops_the_pipeline() {
        let log = Log::default();
        let passes: Vec<Box<dyn Pass>> = vec![
            Box::new(Refuse),
            Box::new(Record {
                name: "after",
                log: log.clone(),
            }),
        ];
        let error = run(&mut PassManager::new(passes), &mut relu_module())
            .expect_err("the first pass fails");
        assert_eq!(error.to_string(), "pass `refuse` failed: no");
        assert!(log.borrow().is_empty());
    }

    #[test]
    fn print_ir_after_all_dumps_after_each_pass() {
        let mut module = relu_module();
        let printed = memc_ir::print_module(&module);
        let passes: Vec<Box<dyn Pass>> = vec![Box::new(Cse), Box::new(Dce)];
        let mut dump = Vec::new();
        PassManager::new(passes)
            .print_ir_after_all(true)
            .run(&mut module, &mut dump)
            .expect("valid module");
        let expected = format!(
            "// -----// IR Dump After cse //----- //\n{printed}\
             // -----// IR Dump After dce //----- //\n{printed}"
        );
        assert_eq!(
            String::from_utf8(dump).expect("the printer writes UTF-8"),
            expected
        );
    }

    #[test]
    fn nothing_is_dumped_or_timed_by_default() {
        let mut dump = Vec::new();
        let report = PassManager::new(vec![Box::new(Dce)])
            .run(&mut relu_module(), &mut dump)
            .expect("valid module");
        assert!(dump.is_empty());
        assert_eq!(report.timing, None);
    }

    #[test]
    fn the_ir_of_a_broken_pass_is_dumped_before_verification() {
        let mut manager = PassManager::new(vec![Box::new(EraseUsedOp)])
            .print_ir_after_all(true)
            .with_verifier(check_uses_are_defined);
        let mut dump = Vec::new();
        let outcome = manager.run(&mut relu_module(), &mut dump);
        assert!(matches!(
            outcome,
            Err(PassError::VerifierFailedAfterPass { .. })
        ));
        let dump = String::from_utf8(dump).expect("the printer writes UTF-8");
        assert!(
            dump.starts_with("// -----// IR Dump After erase-used-op //----- //\n"),
            "{dump}"
        );
    }

    #[test]
    fn time_passes_reports_every_pass_the_verifier_and_the_total() {
        let passes: Vec<Box<dyn Pass>> = vec![Box::new(Canonicalize), Box::new(Cse)];
        let report = run(
            &mut PassManager::new(passes).time_passes(true),
            &mut relu_module(),
        )
        .expect("valid module")
        .timing
        .expect("timing was asked for");
        let names: Vec<&str> = report
            .lines()
            .filter(|line| line.contains("%)"))
            .map(|line| line.rsplit("  ").next().expect("a row ends with its name"))
            .collect();
        assert_eq!(names, ["canonicalize", "cse", "verifier", "total"]);
        assert!(report
            .lines()
            .last()
            .is_some_and(|line| line.contains("(100.0%)  total")));
    }

    #[test]
    fn timing_report_layout() {
        let report = render_timing_report(
            &[
                ("canonicalize", Duration::from_micros(1500)),
                ("dce", Duration::from_micros(250)),
            ],
            Duration::from_micros(750),
            Duration::from_micros(5000),
        );
        let expected = "\
===-------------------------------------------------------------------------===
                     ... Pass execution timing report ...
===-------------------------------------------------------------------------===
  Total Execution Time: 5.000 ms

  ---Wall Time (ms)---  ----Name----
       1.500 ( 30.0%)  canonicalize
       0.250 (  5.0%)  dce
       0.750 ( 15.0%)  verifier
       5.000 (100.0%)  total
";
        assert_eq!(report, expected);
    }

    #[test]
    fn timing_report_with_zero_total_has_no_nan() {
        let report =
            render_timing_report(&[("dce", Duration::ZERO)], Duration::ZERO, Duration::ZERO);
        assert!(!report.contains("NaN"), "{report}");
        assert!(report.contains("0.000 (  0.0%)  total"), "{report}");
    }
}
