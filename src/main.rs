//! The `memc` command line. Each subcommand is a thin layer over a library driver.

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
    #[command(subcommand)]
    command: Command,
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
    /// Compile an ONNX model to a plan (not built yet).
    Compile {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Execute a plan (not built yet).
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Show where a plan's memory goes (not built yet).
    Report {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Dump a plan's contents (not built yet).
    Inspect {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
        Command::Compile { .. } => not_built("compile"),
        Command::Run { .. } => not_built("run"),
        Command::Report { .. } => not_built("report"),
        Command::Inspect { .. } => not_built("inspect"),
    }
}

fn opt(
    file: &std::path::Path,
    output: Option<&std::path::Path>,
    options: &memc::opt::OptOptions,
) -> ExitCode {
    let (source, name) = if file.as_os_str() == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut text) {
            eprintln!("error: cannot read standard input: {e}");
            return ExitCode::FAILURE;
        }
        (text, "<stdin>".to_string())
    } else {
        let bytes = match std::fs::read(file) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("error: cannot read `{}`: {e}", file.display());
                return ExitCode::FAILURE;
            }
        };
        match String::from_utf8(bytes) {
            Ok(text) => (text, file.display().to_string()),
            Err(e) => {
                eprintln!(
                    "error: `{}` is not UTF-8 text (invalid byte at offset {}); memc opt reads textual IR",
                    file.display(),
                    e.utf8_error().valid_up_to()
                );
                return ExitCode::FAILURE;
            }
        }
    };
    let result = memc::opt::run_opt(&source, &name, options);
    eprint!("{}", result.stderr);
    let written = match output {
        Some(path) => std::fs::write(path, &result.stdout)
            .map_err(|e| format!("cannot write `{}`: {e}", path.display())),
        None => std::io::stdout()
            .write_all(result.stdout.as_bytes())
            .map_err(|e| format!("cannot write to standard output: {e}")),
    };
    if let Err(message) = written {
        eprintln!("error: {message}");
        return ExitCode::FAILURE;
    }
    if result.success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn not_built(command: &str) -> ExitCode {
    let needs = memc::PLANNED_COMMANDS
        .iter()
        .find(|(name, _)| *name == command)
        .map_or("later work", |(_, needs)| needs);
    eprintln!("error: `memc {command}` is not built yet; it needs {needs}.");
    eprintln!(
        "       Today memc runs passes on textual IR: `memc opt FILE -p canonicalize,cse,dce`."
    );
    ExitCode::FAILURE
}
