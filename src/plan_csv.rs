//! `memc plan-csv FILE...`: offset-assignment instances through the planning core.
//!
//! Each CSV row is `id,lower,upper,size`: a buffer of `size` bytes live on the half-open step
//! range `[lower, upper)` (the format of `../shared/bench/dsa`). Every instance is planned by
//! [`memc_passes::plan::assign_offsets`] and by the best-fit largest-first baseline, checked
//! for overlaps, and reported as arena / LOAD with the time taken, then the geomeans.

use memc_passes::plan::assign::{assign_offsets, best_fit_largest_first, Interval};
use memc_passes::plan::load;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Reads one instance; errors name the file and line.
pub fn read_instance(path: &Path) -> Result<Vec<Interval>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let mut intervals = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || (i == 0 && line.starts_with(|c: char| c.is_ascii_alphabetic())) {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [_, lower, upper, size] = fields.as_slice() else {
            return Err(format!(
                "{}: expected 4 fields `id,lower,upper,size`, found {}",
                at(),
                fields.len()
            ));
        };
        let number = |text: &str, what: &str| -> Result<u64, String> {
            text.parse::<u64>()
                .map_err(|_| format!("{}: `{what}` is not a non-negative integer: {text:?}", at()))
        };
        let (start, end, size) = (
            number(lower, "lower")?,
            number(upper, "upper")?,
            number(size, "size")?,
        );
        if start >= end {
            return Err(format!("{}: the range [{start}, {end}) is empty", at()));
        }
        intervals.push(Interval {
            size,
            start,
            end,
            align: 1,
        });
    }
    if intervals.is_empty() {
        return Err(format!("`{}` holds no buffer", path.display()));
    }
    Ok(intervals)
}

/// Whether no two intervals live at a common step overlap in memory (sweep over time).
fn overlap_free(intervals: &[Interval], offsets: &[u64]) -> bool {
    let mut order: Vec<usize> = (0..intervals.len()).collect();
    order.sort_by_key(|&i| offsets[i]);
    // Sort by offset; an interval conflicts with an earlier one if their bytes and steps meet.
    // Quadratic in the worst case but only over byte-overlapping candidates.
    for (k, &i) in order.iter().enumerate() {
        let end_i = offsets[i] + intervals[i].size;
        for &j in &order[k + 1..] {
            if offsets[j] >= end_i {
                break;
            }
            let (a, b) = (&intervals[i], &intervals[j]);
            if a.size > 0 && b.size > 0 && a.start < b.end && b.start < a.end {
                return false;
            }
        }
    }
    true
}

fn geomean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// Plans every file; returns the table.
pub fn run(files: &[PathBuf], budget: Duration) -> Result<String, String> {
    let mut out = String::new();
    let _ = writeln!(out, "| instance | buffers | LOAD | arena | arena/LOAD | best fit arena/LOAD | fits 1 MiB | strategy | ms |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---|---|---:|");
    let (mut all, mut minimalloc, mut fits) = (Vec::new(), Vec::new(), 0usize);
    for path in files {
        let intervals = read_instance(path)?;
        let lb = load(&intervals);
        let started = Instant::now();
        let assignment = assign_offsets(&intervals, budget);
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let baseline = best_fit_largest_first(&intervals);
        if !overlap_free(&intervals, &assignment.offsets) {
            return Err(format!(
                "internal error: the plan of `{}` overlaps; this is a bug in memc",
                path.display()
            ));
        }
        let ratio = assignment.arena_size as f64 / lb.max(1) as f64;
        let base_ratio = baseline.arena_size as f64 / lb.max(1) as f64;
        let name = path
            .file_stem()
            .map_or(String::new(), |s| s.to_string_lossy().into_owned());
        let fits_mib = assignment.arena_size <= 1 << 20;
        if name.starts_with("minimalloc") {
            minimalloc.push(ratio);
            fits += usize::from(fits_mib && ms <= 1000.0);
        }
        all.push(ratio);
        let _ = writeln!(
            out,
            "| {name} | {} | {lb} | {} | {ratio:.4} | {base_ratio:.4} | {} | {} | {ms:.1} |",
            intervals.len(),
            assignment.arena_size,
            if fits_mib { "yes" } else { "no" },
            assignment.strategy,
        );
    }
    if !minimalloc.is_empty() {
        let _ = writeln!(
            out,
            "\nminimalloc geomean arena/LOAD {:.4} over {} files; {fits} fit in 1 MiB within 1 s",
            geomean(&minimalloc),
            minimalloc.len()
        );
    }
    let _ = writeln!(
        out,
        "all files geomean arena/LOAD {:.4} over {} files",
        geomean(&all),
        all.len()
    );
    Ok(out)
}
