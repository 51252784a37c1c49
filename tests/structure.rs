//! The structure of the house, drawn from the code itself:
//! - the crates depend on each other one way only: ir <- passes <- codegen <- runtime <- memc
//!   (read from each crate's `Cargo.toml`);
//! - inside each crate no two source files import each other, directly or through others (read
//!   from the `crate::` and `super::` paths each file names). A module may use what its
//!   ancestors (the files that declare it) define: that is how Rust modules share their
//!   parent's items, and not a cycle between peers.
//!
//! A cycle between files means two parts of a stage know about each other, which is what keeps
//! a second backend or a new op from going in cleanly.

mod common;

use common::root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace crates in pipeline order, with their directory.
const CRATES: &[(&str, &str)] = &[
    ("memc-ir", "ir"),
    ("memc-passes", "passes"),
    ("memc-codegen", "codegen"),
    ("memc-runtime", "runtime"),
    ("memc", "."),
];

#[test]
fn crates_depend_one_way_down_the_pipeline() {
    for (position, &(name, dir)) in CRATES.iter().enumerate() {
        let manifest = std::fs::read_to_string(root().join(dir).join("Cargo.toml"))
            .expect("every workspace crate has a Cargo.toml");
        let dependencies = section(&manifest, "[dependencies]");
        for &(other, _) in CRATES {
            let later = CRATES
                .iter()
                .position(|&(n, _)| n == other)
                .expect("listed")
                > position;
            let named = dependencies.lines().any(|l| {
                l.trim_start().starts_with(&format!("{other} "))
                    || l.trim_start().starts_with(&format!("{other}."))
            });
            assert!(
                !(later && named),
                "{name} depends on {other}, which comes later in the pipeline"
            );
        }
    }
}

/// The lines of one `[section]` of a manifest.
fn section<'a>(manifest: &'a str, header: &str) -> &'a str {
    let Some(start) = manifest.find(header) else {
        return "";
    };
    let rest = &manifest[start + header.len()..];
    let end = rest.find("\n[").unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn no_source_file_cycles_inside_a_crate() {
    let mut cycles = Vec::new();
    for &(name, dir) in CRATES {
        let files = modules(&root().join(dir).join("src"));
        if let Some(cycle) = find_cycle(&imports(&files)) {
            cycles.push(format!("{name}: {}", cycle.join(" -> ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "source files import each other:\n{}",
        cycles.join("\n")
    );
}

/// Every module of a crate: its path (`["cpu", "loops"]`) and its file.
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<Vec<String>, PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(stem);
                walk(&path, &p, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut p = prefix.to_vec();
                if !matches!(stem.as_str(), "mod" | "lib" | "main") {
                    p.push(stem);
                }
                out.insert(p, path);
            }
        }
    }
    walk(src, &[], &mut out);
    out
}

/// For each module, the modules it names through `crate::` or `super::` paths (to the deepest
/// module that has its own file), leaving out its ancestors and itself.
fn imports(files: &BTreeMap<Vec<String>, PathBuf>) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges = BTreeMap::new();
    for (module, file) in files {
        let text = std::fs::read_to_string(file).expect("source files are UTF-8");
        let mut targets = BTreeSet::new();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            for path in paths_in(code) {
                let Some(resolved) = resolve(module, &path) else {
                    continue;
                };
                // The deepest prefix of the path that is a module with a file.
                let target = (1..=resolved.len())
                    .rev()
                    .map(|n| resolved[..n].to_vec())
                    .find(|p| files.contains_key(p));
                if let Some(target) = target {
                    let is_ancestor_or_self =
                        target.len() <= module.len() && module[..target.len()] == target[..];
                    if !is_ancestor_or_self {
                        targets.insert(name(&target));
                    }
                }
            }
        }
        edges.insert(name(module), targets);
    }
    edges
}

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// The `crate::a::b` and `super::a` paths in one line of code, as their segments. Grouped
/// imports (`use super::{a, b::c}`) give one path per member.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        let mut rest = code;
        while let Some(i) = rest.find(start) {
            let before = rest[..i].chars().last();
            let tail = &rest[i..];
            rest = &rest[i + start.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut segments = Vec::new();
            let mut chars = tail;
            loop {
                let end = chars
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(chars.len());
                segments.push(chars[..end].to_string());
                chars = &chars[end..];
                if let Some(next) = chars.strip_prefix("::") {
                    if let Some(group) = next.strip_prefix('{') {
                        let close = group.find('}').unwrap_or(group.len());
                        for member in group[..close].split(',') {
                            let member: Vec<String> = member
                                .trim()
                                .split("::")
                                .map(|s| s.trim().to_string())
                                .filter(|s| !s.is_empty())
                                .collect();
                            let mut path = segments.clone();
                            path.extend(member);
                            out.push(path);
                        }
                        break;
                    }
                    chars = next;
                } else {
                    out.push(segments);
                    break;
                }
            }
        }
    }
    out
}

/// A path's module segments from the crate root, or `None` for a path into another crate.
fn resolve(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "super" => {
            // `super` is the parent of the file's module (`b/mod.rs` and `b.rs` are both `b`).
            let mut base = module.to_vec();
            base.pop()?;
            let mut rest = rest;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            Some(base)
        }
        _ => None,
    }
}

/// A cycle in the import graph, as module names, if there is one.
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_string(), Mark::Open);
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            match marks.get(next).copied().unwrap_or(Mark::New) {
                Mark::Open => {
                    let from = stack
                        .iter()
                        .position(|n| n == next)
                        .expect("open is on the stack");
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(cycle) = visit(next, edges, marks, stack) {
                        return Some(cycle);
                    }
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in edges.keys() {
        if marks.get(node).copied().unwrap_or(Mark::New) == Mark::New {
            let mut stack = Vec::new();
            if let Some(cycle) = visit(node, edges, &mut marks, &mut stack) {
                return Some(cycle);
            }
        }
    }
    None
}

#[test]
fn the_cycle_finder_finds_a_cycle_between_peers_and_ignores_ancestors() {
    let files: BTreeMap<Vec<String>, PathBuf> = [
        (vec![], PathBuf::from("lib.rs")),
        (vec!["a".to_string()], PathBuf::from("a.rs")),
        (vec!["b".to_string()], PathBuf::from("b.rs")),
        (
            vec!["b".to_string(), "c".to_string()],
            PathBuf::from("b/c.rs"),
        ),
    ]
    .into_iter()
    .collect();
    let module = |s: &str| -> Vec<String> { s.split("::").map(str::to_string).collect() };
    let b_c = module("b::c");
    assert_eq!(resolve(&b_c, &module("super::X")), Some(module("b::X")));
    assert_eq!(
        paths_in("use crate::a::{x, y::Z};"),
        vec![module("crate::a::x"), module("crate::a::y::Z")]
    );
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.insert("a".into(), ["b".into()].into());
    edges.insert("b".into(), ["a".into()].into());
    assert!(find_cycle(&edges).is_some());
    edges.insert("b".into(), BTreeSet::new());
    assert!(find_cycle(&edges).is_none());
    assert!(files.contains_key(&b_c));
}
