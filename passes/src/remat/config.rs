//! What users write: a memory budget (`512MiB`, `1.5GB`, `60%`) and onnxruntime's memory
//! optimizer config strings (`Gelu+:1:-1,FusedMatMul+Add+:1:2`).
//!
//! A config string is `SUBGRAPH:STRATEGY:COUNT`: `SUBGRAPH` the chain's op types, each
//! followed by `+` (onnxruntime's spelling, without the ONNX domain: `Gelu+`,
//! `FusedMatMul+Add+`); `STRATEGY` 0 (off) or 1 (recompute); onnxruntime's 2
//! ("recompute with compromise", which recomputes part of a batch) has no memc counterpart and
//! is refused; `COUNT` how many occurrences to recompute, in schedule order, `-1` for all.

use std::fmt;

/// A memory budget for `--memory-budget`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Budget {
    /// At most this many bytes of arena.
    Bytes(u64),
    /// At most this percentage of the arena planned without rematerialization.
    Percent(f64),
}

impl Budget {
    /// The budget in bytes, given the arena planned without rematerialization.
    pub fn bytes(self, arena_without_remat: u64) -> u64 {
        match self {
            Budget::Bytes(b) => b,
            Budget::Percent(p) => (arena_without_remat as f64 * p / 100.0).floor() as u64,
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Budget::Bytes(b) => write!(f, "{b} bytes"),
            Budget::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Parses `512MiB`, `1.5 GiB`, `100MB`, `4096`, `64KiB`, `60%`.
pub fn parse_budget(text: &str) -> Result<Budget, String> {
    let t = text.trim();
    let bad = || {
        format!(
            "`--memory-budget {text}`: expected a size such as `512MiB`, `1.5GB` or `4096` \
             (bytes), or a percentage of the arena planned without recomputation such as `60%`"
        )
    };
    if let Some(p) = t.strip_suffix('%') {
        let p: f64 = p.trim().parse().map_err(|_| bad())?;
        if !(p > 0.0 && p <= 100.0) {
            return Err(format!(
                "`--memory-budget {text}`: a percentage must be above 0 and at most 100"
            ));
        }
        return Ok(Budget::Percent(p));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1048576.0,
        "g" | "gb" => 1e9,
        "gib" => 1073741824.0,
        "t" | "tb" => 1e12,
        "tib" => 1099511627776.0,
        _ => return Err(bad()),
    };
    let bytes = number * scale;
    if !bytes.is_finite() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(format!(
            "`--memory-budget {text}`: the size must be at least one byte"
        ));
    }
    Ok(Budget::Bytes(bytes.floor() as u64))
}

/// One entry of a config string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    /// The subgraph string (`Gelu+`).
    pub subgraph: String,
    /// Whether to recompute (strategy 1) or not (0).
    pub enabled: bool,
    /// How many occurrences, in schedule order; `None`: all (`-1`).
    pub count: Option<usize>,
}

impl fmt::Display for ConfigEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.count.map_or(-1, |c| c as i64);
        write!(f, "{}:{}:{count}", self.subgraph, u8::from(self.enabled))
    }
}

/// Parses a comma-separated list of `SUBGRAPH:STRATEGY:COUNT`.
pub fn parse_recompute(text: &str) -> Result<Vec<ConfigEntry>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parts: Vec<&str> = item.split(':').collect();
        let [subgraph, strategy, count] = parts[..] else {
            return Err(format!(
                "`--recompute {item}`: expected SUBGRAPH:STRATEGY:COUNT, such as `Gelu+:1:-1` \
                 (onnxruntime's memory optimizer config)"
            ));
        };
        let ops: Vec<&str> = subgraph.split('+').collect();
        if !subgraph.ends_with('+')
            || ops[..ops.len() - 1]
                .iter()
                .any(|o| o.is_empty() || !o.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            return Err(format!(
                "`--recompute {item}`: `{subgraph}` is not a subgraph string: op types each \
                 followed by `+`, such as `Gelu+` or `FusedMatMul+Add+`"
            ));
        }
        let enabled = match strategy {
            "0" => false,
            "1" => true,
            "2" => {
                return Err(format!(
                    "`--recompute {item}`: strategy 2 (onnxruntime's recompute with compromise) \
                     is not supported; use 1 (recompute)"
                ))
            }
            _ => {
                return Err(format!(
                    "`--recompute {item}`: strategy `{strategy}` must be 0 (off) or 1 (recompute)"
                ))
            }
        };
        let count = match count.parse::<i64>() {
            Ok(-1) => None,
            Ok(n) if n >= 0 => Some(n as usize),
            _ => {
                return Err(format!(
                    "`--recompute {item}`: count `{count}` must be -1 (all) or a number of \
                     occurrences"
                ))
            }
        };
        out.push(ConfigEntry {
            subgraph: subgraph.to_string(),
            enabled,
            count,
        });
    }
    if out.is_empty() {
        return Err("`--recompute`: no config given, such as `Gelu+:1:-1`".to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse() {
        assert_eq!(parse_budget("512MiB"), Ok(Budget::Bytes(512 << 20)));
        assert_eq!(parse_budget("1.5 GB"), Ok(Budget::Bytes(1_500_000_000)));
        assert_eq!(parse_budget("4096"), Ok(Budget::Bytes(4096)));
        assert_eq!(parse_budget("64kib"), Ok(Budget::Bytes(65536)));
        assert_eq!(parse_budget("60%"), Ok(Budget::Percent(60.0)));
        assert_eq!(Budget::Percent(50.0).bytes(1000), 500);
        for bad in ["", "12XB", "-5MiB", "0%", "150%", "abc", "0", "MiB"] {
            assert!(parse_budget(bad).is_err(), "{bad}");
        }
        assert!(parse_budget("150%").unwrap_err().contains("at most 100"));
    }

    #[test]
    fn config_strings_parse_like_onnxruntime() {
        let entries = parse_recompute("Gelu+:1:-1, FusedMatMul+Add+:1:2,Cast+:0:-1").unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].to_string(), "Gelu+:1:-1");
        assert_eq!(entries[1].count, Some(2));
        assert!(!entries[2].enabled);
        assert!(parse_recompute("Gelu+:2:-1")
            .unwrap_err()
            .contains("compromise"));
        assert!(parse_recompute("Gelu:1:-1")
            .unwrap_err()
            .contains("subgraph string"));
        assert!(parse_recompute("Gelu+:1")
            .unwrap_err()
            .contains("SUBGRAPH:STRATEGY:COUNT"));
        assert!(parse_recompute("Gelu+:1:-3").unwrap_err().contains("count"));
        assert!(parse_recompute("Gelu++:1:-1").is_err());
        assert!(parse_recompute("").is_err());
    }
}
