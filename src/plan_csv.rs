//! `memc plan-csv FILE...`: offset-assignment instances through the planning core.
//!
//! Each CSV row is `id,lower,upper,size`: a buffer of `size` bytes live on the half-open step
//! range `[lower, upper)` (the format of `../shared/bench/dsa`). Every instance is planned by
//! [`memc_passes::plan::assign_offsets`] and by the best-fit largest-first baseline, both
//! checked for overlaps here (a sweep that shares no code with the planner), and reported as
//! arena / LOAD with the time taken, then the geomeans. An arena above the baseline's is a bug
//! in memc (the planner always computes the baseline and keeps the best).
//!
//! Input errors name the file and line: a row without four fields, a field that is not a
//! non-negative integer (negative numbers say so), a number above 2^50 (so that stacking
//! every buffer cannot overflow), an empty range `lower >= upper`.

use memc_passes::plan::assign::{assign_offsets, best_fit_largest_first, Interval};
use memc_passes::plan::load;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The largest size or step accepted: far above any real arena, and small enough that
/// stacking a million buffers cannot overflow a `u64`.
const MAX_VALUE: u64 = 1 << 50;

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
            let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
            if let Some(rest) = text.strip_prefix('-') {
                if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("{}: `{what}` is negative: {text}", at()));
                }
            }
            match text.parse::<u64>() {
                Ok(value) if value <= MAX_VALUE => Ok(value),
                _ if digits => Err(format!(
                    "{}: `{what}` is too large: {text} (the limit is 2^50)",
                    at()
                )),
                _ => Err(format!(
                    "{}: `{what}` is not a non-negative integer: {text:?}",
                    at()
                )),
            }
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

/// Two intervals live at a common step that overlap in memory, if any. A sweep over steps
/// keeps the live intervals ordered by offset; the live ones never overlap each other, so a
/// new one need only be compared with its two neighbours in that order: `O(n log n)`.
fn find_overlap(intervals: &[Interval], offsets: &[u64]) -> Option<(usize, usize)> {
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * intervals.len());
    for (i, x) in intervals.iter().enumerate() {
        if x.size > 0 && x.start < x.end {
            // Ends (`false`) sort before starts at the same step: half-open ranges.
            events.push((x.start, true, i));
            events.push((x.end, false, i));
        }
    }
    events.sort_unstable();
    let mut live: BTreeMap<(u64, usize), u64> = BTreeMap::new();
    for (_, is_start, i) in events {
        let (offset, end) = (offsets[i], offsets[i] + intervals[i].size);
        if !is_start {
            live.remove(&(offset, i));
            continue;
        }
        if let Some((&(_, below), &below_end)) = live.range(..(offset, i)).next_back() {
            if below_end > offset {
                return Some((below.min(i), below.max(i)));
            }
        }
        if let Some((&(above_offset, above), _)) = live.range((offset, i)..).next() {
            if above_offset < end {
                return Some((above.min(i), above.max(i)));
            }
        }
        live.insert((offset, i), end);
    }
    None
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
        for (who, offsets) in [
            ("plan", &assignment.offsets),
            ("best-fit baseline", &baseline.offsets),
        ] {
            if let Some((a, b)) = find_overlap(&intervals, offsets) {
                return Err(format!(
                    "internal error: the {who} of `{}` overlaps buffers {a} and {b}; this is a bug in memc",
                    path.display()
                ));
            }
        }
        if assignment.arena_size > baseline.arena_size {
            return Err(format!(
                "internal error: the plan of `{}` is worse than the best-fit baseline; this is a bug in memc",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("memc-plan-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a writable temporary directory");
        let path = dir.join(name);
        std::fs::write(&path, text).expect("a writable temporary directory");
        path
    }

    #[test]
    fn bad_numbers_name_the_file_line_and_field() {
        let cases = [
            (
                "neg.csv",
                "id,lower,upper,size\n0,-1,2,8\n",
                "neg.csv:2: `lower` is negative: -1",
            ),
            (
                "huge.csv",
                "id,lower,upper,size\n0,0,2,1125899906842625\n",
                "huge.csv:2: `size` is too large: 1125899906842625 (the limit is 2^50)",
            ),
            (
                "huger.csv",
                "id,lower,upper,size\n0,0,2,99999999999999999999\n",
                "huger.csv:2: `size` is too large: 99999999999999999999 (the limit is 2^50)",
            ),
            (
                "word.csv",
                "id,lower,upper,size\n0,0,x,8\n",
                "word.csv:2: `upper` is not a non-negative integer: \"x\"",
            ),
            (
                "short.csv",
                "id,lower,upper,size\n0,0,2\n",
                "short.csv:2: expected 4 fields `id,lower,upper,size`, found 3",
            ),
        ];
        for (name, text, expected) in cases {
            let err = run(&[scratch_file(name, text)], Duration::ZERO).expect_err(name);
            assert!(
                err.ends_with(expected),
                "got `{err}`, expected `{expected}`"
            );
        }
    }

    #[test]
    fn the_overlap_check_finds_overlaps() {
        let iv = |size, start, end| Interval {
            size,
            start,
            end,
            align: 1,
        };
        let intervals = [iv(10, 0, 4), iv(10, 4, 8), iv(10, 3, 5), iv(0, 0, 9)];
        assert_eq!(find_overlap(&intervals, &[0, 0, 10, 0]), None);
        assert_eq!(find_overlap(&intervals, &[0, 0, 5, 0]), Some((0, 2)));
        assert_eq!(find_overlap(&intervals, &[0, 20, 15, 0]), Some((1, 2)));
    }
}
