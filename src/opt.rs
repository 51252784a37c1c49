//! The `memc opt` driver: parse textual IR, verify it, run a pass pipeline, print the result.
//!
//! With `split_input_file`, the input is cut at lines that start with `// -----` and each piece
//! is processed on its own, as `mlir-opt --split-input-file` does; outputs are joined with the
//! same marker. Diagnostics keep the line numbers of the whole file.

use memc_ir::{parse_module, print_module, verify_module, Diagnostic};
use memc_passes::{parse_pipeline, PassError, PassManager};

/// What `memc opt` was asked to do.
#[derive(Clone, Debug)]
pub struct OptOptions {
    /// Comma-separated pass names.
    pub pipeline: String,
    pub split_input_file: bool,
    pub verify_each: bool,
    pub print_ir_after_all: bool,
    pub time_passes: bool,
    /// ANSI colors in diagnostics.
    pub color: bool,
}

/// What `memc opt` produced: the printed IR, the diagnostics and reports, and whether every
/// piece succeeded.
#[derive(Clone, Debug, Default)]
pub struct OptOutput {
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
}

/// The marker that separates pieces of a split input file.
pub const SPLIT_MARKER: &str = "// -----";

/// Runs `memc opt` over `source`, named `file_name` in diagnostics.
pub fn run_opt(source: &str, file_name: &str, options: &OptOptions) -> OptOutput {
    let mut output = OptOutput {
        success: true,
        ..OptOutput::default()
    };
    // Check the pipeline once, before touching the input, so a typo is one error, not one per
    // piece.
    if let Err(error) = parse_pipeline(&options.pipeline) {
        output.stderr = format!("error: {error}\n");
        output.success = false;
        return output;
    }
    let pieces = if options.split_input_file {
        split_input(source)
    } else {
        vec![source.to_string()]
    };
    let mut outputs = Vec::with_capacity(pieces.len());
    for piece in &pieces {
        match run_piece(piece, file_name, options, &mut output.stderr) {
            Some(text) => outputs.push(text),
            None => {
                output.success = false;
                outputs.push(String::new());
            }
        }
    }
    output.stdout = outputs.join(&format!("{SPLIT_MARKER}\n"));
    output
}

/// Cuts `source` at marker lines. Each piece is padded with the newlines of the lines before
/// it, so spans keep the line numbers of the whole file.
pub fn split_input(source: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut line_no = 0usize;
    for line in source.split_inclusive('\n') {
        line_no += 1;
        if line.trim_end().starts_with(SPLIT_MARKER) {
            pieces.push(std::mem::take(&mut current));
            current = "\n".repeat(line_no);
            continue;
        }
        current.push_str(line);
    }
    pieces.push(current);
    pieces
}

fn render_all(diags: &[Diagnostic], file_name: &str, source: &str, color: bool) -> String {
    diags
        .iter()
        .map(|d| d.render(file_name, source, color))
        .collect()
}

fn run_piece(
    source: &str,
    file_name: &str,
    options: &OptOptions,
    stderr: &mut String,
) -> Option<String> {
    let mut module = match parse_module(source) {
        Ok(module) => module,
        Err(diag) => {
            stderr.push_str(&diag.render(file_name, source, options.color));
            return None;
        }
    };
    if let Err(diags) = verify_module(&module) {
        stderr.push_str(&render_all(&diags, file_name, source, options.color));
        return None;
    }
    let passes = match parse_pipeline(&options.pipeline) {
        Ok(passes) => passes,
        Err(error) => {
            stderr.push_str(&format!("error: {error}\n"));
            return None;
        }
    };
    let mut manager = PassManager::new(passes)
        .verify_each(options.verify_each)
        .print_ir_after_all(options.print_ir_after_all)
        .time_passes(options.time_passes);
    let mut dump = Vec::new();
    let result = manager.run(&mut module, &mut dump);
    stderr.push_str(&String::from_utf8_lossy(&dump));
    match result {
        Ok(report) => {
            if let Some(timing) = report.timing {
                stderr.push_str(&timing);
            }
            Some(print_module(&module))
        }
        Err(PassError::VerifierFailedAfterPass { pass, diagnostics }) => {
            stderr.push_str(&format!(
                "error: internal error: pass `{pass}` produced invalid IR; this is a bug in memc\n"
            ));
            stderr.push_str(&render_all(&diagnostics, file_name, source, options.color));
            None
        }
        Err(PassError::Rejected { pass, diagnostics }) => {
            stderr.push_str(&format!("error: pass `{pass}` rejected the input\n"));
            stderr.push_str(&render_all(&diagnostics, file_name, source, options.color));
            None
        }
        Err(error) => {
            stderr.push_str(&format!("error: {error}\n"));
            None
        }
    }
}
