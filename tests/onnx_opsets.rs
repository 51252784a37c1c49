//! Older ai.onnx opsets: each normalized form gives the result of its opset-13+ twin.
//!
//! `tests/onnx/make_opset_cases.py` writes `tests/onnx/opsets/<case>/old` (a model whose node
//! has a form that changed before opset 13: an attribute that became an input, Softmax's 2-D
//! coercion, Resize of opset 10, Upsample, BatchNormalization's `spatial`, ...) and `.../new`
//! (the same computation in the current form), both with onnxruntime's outputs on the same
//! inputs. Each runs through the node-test harness (compile, plan file, CPU backend, and the
//! reference backend): the old form, which memc imports through `memc_ir::onnx::legacy`, must
//! match the same expected outputs as its twin. The import errors of older forms memc cannot
//! read are snapshotted with the other bad models (`tests/onnx_import.rs`).

mod common;
#[path = "common/node_harness.rs"]
mod node_harness;

use common::root;
use node_harness::{run_test, Status, NODE_TESTS};
use std::path::PathBuf;

fn cases() -> Vec<PathBuf> {
    let dir = root().join("tests/onnx/opsets");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run tests/onnx/make_opset_cases.py)",
                dir.display()
            )
        })
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("old/model.onnx").is_file())
        .collect();
    cases.sort();
    cases
}

/// The default-domain opset a model imports.
fn opset_of(model: &std::path::Path) -> i64 {
    memc::ir::onnx::import_file(model)
        .unwrap_or_else(|d| panic!("{}: {}", model.display(), d.message))
        .opset
        .expect("every case imports the default domain")
}

#[test]
fn older_forms_match_their_opset_13_twins() {
    let cases = cases();
    assert!(
        cases.len() >= 20,
        "expected the committed cases, found {}",
        cases.len()
    );
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("onnx_opsets");
    std::fs::create_dir_all(&scratch).expect("target tmpdir is writable");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let (old, new) = (case.join("old"), case.join("new"));
        // The pair must really be an old form and a current one, or the case proves nothing.
        let (old_opset, new_opset) = (
            opset_of(&old.join("model.onnx")),
            opset_of(&new.join("model.onnx")),
        );
        assert!(
            old_opset < 13 && new_opset >= 13,
            "{name}: opsets {old_opset} and {new_opset}"
        );
        for (which, dir) in [("old", &old), ("new", &new)] {
            match run_test(dir, &scratch, NODE_TESTS) {
                (Status::Pass, by_reference) => println!(
                    "pass {name}/{which} (opset {}){}",
                    if which == "old" { old_opset } else { new_opset },
                    if by_reference {
                        ", cpu + reference"
                    } else {
                        ", cpu"
                    }
                ),
                (status, _) => failures.push(format!("{name}/{which}: {status:?}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "cases that do not pass:\n{}",
        failures.join("\n")
    );
}
