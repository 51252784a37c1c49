//! `memc compile --progress`: a spinner while the model compiles and a bar while the plan's
//! weights are written, drawn with indicatif on standard error. Part of the `memc` binary only;
//! the library reports a write's progress through `write_plan_with_progress`'s callback.

use crate::ProgressArg;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

/// Where a bar draws: indicatif's standard error (nothing unless it is a terminal), nowhere,
/// or, for `always` without a terminal, plain lines at most once a second.
fn target(mode: ProgressArg) -> ProgressDrawTarget {
    match mode {
        ProgressArg::Never => ProgressDrawTarget::hidden(),
        ProgressArg::Always if !std::io::stderr().is_terminal() => {
            ProgressDrawTarget::term_like_with_hz(Box::new(Lines::default()), 1)
        }
        ProgressArg::Auto | ProgressArg::Always => ProgressDrawTarget::stderr(),
    }
}

/// The spinner shown while `model` compiles (import, shape inference, fusion, planning,
/// lowering); `finish_and_clear` it before printing anything else.
pub fn compiling(mode: ProgressArg, model: &std::path::Path) -> ProgressBar {
    let name = model.file_name().map_or_else(
        || model.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let spinner = ProgressBar::with_draw_target(None, target(mode))
        .with_style(
            ProgressStyle::with_template("{spinner} compiling {msg} ({elapsed})")
                .expect("the template is valid"),
        )
        .with_message(name);
    spinner.enable_steady_tick(Duration::from_millis(100));
    spinner
}

/// The bar of a plan's weights section, `total` bytes, as they are copied, unpacked and packed.
pub fn writing(mode: ProgressArg, total: u64) -> ProgressBar {
    ProgressBar::with_draw_target(Some(total), target(mode)).with_style(
        ProgressStyle::with_template(
            "writing weights [{bar:30}] {binary_bytes}/{binary_total_bytes} \
             ({binary_bytes_per_sec}, {eta} left)",
        )
        .expect("the template is valid")
        .progress_chars("=> "),
    )
}

/// A terminal that is not one: each frame indicatif draws becomes one line on standard error.
#[derive(Debug, Default)]
struct Lines {
    line: Mutex<String>,
}

impl TermLike for Lines {
    fn width(&self) -> u16 {
        100
    }

    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write_str(s)?;
        self.flush()
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.line
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_str(s);
        Ok(())
    }

    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }

    fn flush(&self) -> std::io::Result<()> {
        let mut line = self.line.lock().unwrap_or_else(|e| e.into_inner());
        if line.trim().is_empty() {
            line.clear();
            return Ok(());
        }
        let mut err = std::io::stderr().lock();
        writeln!(err, "{}", line.trim_end())?;
        line.clear();
        err.flush()
    }
}
