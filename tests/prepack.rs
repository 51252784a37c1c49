//! Constant product operands laid out for the CPU's GEMM when the plan is written
//! (`codegen/src/prepack.rs`): on the no-heap model (`tests/onnx/no_heap/model.onnx`: 3x3 and
//! 1x1 convolutions, products of many rows), the bundled classifier and
//! `tests/onnx/fixtures/linear_transb.onnx` (PyTorch's `Linear`: `Gemm` with `transB`, 4 rows),
//! the plan holds the layouts, the convolutions read their weights packed, the products' constant
//! `B`s are packed whole (and plan no `B` panel), and the CPU backend (which reads the packed
//! copies) agrees with the reference interpreter (which reads the plain `A` and `B`) on every
//! output. `tests/onnx/fixtures/winograd_convs.onnx`'s 3x3 convolutions run as Winograd F(2x2,
//! 3x3) with their weights transformed, against the same reference.

mod common;

use common::root;
use memc_codegen::kernel::{Contract, ContractB, KernelBody, PackedOperand, Region};
use memc_codegen::prepack::OperandLayout;
use memc_runtime::{PlanFile, Session, SessionOptions};
use std::num::NonZeroUsize;
use std::process::Command;

/// Compiles `model` (with `dims`), checks its laid-out operands, and compares the CPU run with
/// the reference interpreter; returns how many slots of each layout the plan has (packed `A`,
/// packed `B`, Winograd).
fn check(model: &str, dims: &[&str]) -> (usize, usize, usize) {
    let plan = plan_path(model);
    let mut compile = Command::new(env!("CARGO_BIN_EXE_memc"));
    compile
        .arg("compile")
        .arg(root().join(model))
        .arg("-o")
        .arg(&plan);
    for dim in dims {
        compile.args(["--dim", dim]);
    }
    assert!(
        compile.status().expect("memc runs").success(),
        "{model}: compile"
    );

    let file = PlanFile::open(&plan).expect("the plan opens");
    let program = file.program();
    let count = |layout| {
        program
            .weights
            .iter()
            .filter(|s| s.operand.as_ref().is_some_and(|o| o.layout == layout))
            .count()
    };
    for kernel in program.kernels() {
        let KernelBody::Contract(c) = &kernel.body else {
            continue;
        };
        // The spec of the slot a packed operand lies in.
        let spec_at = |packed: &PackedOperand| {
            let slot = program
                .weights
                .iter()
                .find(|s| {
                    (s.byte_offset..s.byte_offset + s.byte_size).contains(&packed.byte_offset)
                })
                .expect("the packed operand lies in a slot");
            slot.operand.clone().expect("a laid-out slot")
        };
        if let Some(packed) = &c.a_packed {
            // A packed copy of a constant `A`, inside a packed slot of its shape: transformed
            // for a product run as Winograd (with its scratch), else packed whole.
            assert_eq!(c.a.region, Region::Weights, "{}", kernel.name);
            let spec = spec_at(packed);
            let layout = if c.winograd.is_some() {
                assert!(c.pack.is_some(), "{}: Winograd scratch", kernel.name);
                OperandLayout::Winograd
            } else {
                OperandLayout::PackedA
            };
            assert_eq!(
                (spec.layout, spec.rows, spec.cols),
                (layout, c.m, c.k),
                "{}",
                kernel.name
            );
        }
        if let Some(packed) = &c.b_packed {
            // A packed copy of a constant `B`, inside a packed slot of its shape; its product
            // plans no `B` panel.
            assert_eq!(c.b.as_mat().map(|b| b.region), Some(Region::Weights));
            let spec = spec_at(packed);
            assert_eq!(
                (spec.layout, spec.rows, spec.cols),
                (OperandLayout::PackedB, c.k, c.n),
                "{}",
                kernel.name
            );
            assert_eq!(c.blocking().b_bytes(), 0, "{}", kernel.name);
        }
    }

    // Deterministic inputs; the CPU backend at two threads against the reference interpreter.
    let options = SessionOptions {
        threads: NonZeroUsize::new(2),
        verify_weights: false,
    };
    let mut session = Session::load_with(&plan, &options).expect("the plan loads");
    let data = common::deterministic_inputs(&session);
    let inputs = common::input_refs(&data);
    let outputs = session.run(&inputs).expect("a run");
    let bytes: Vec<Vec<u8>> = data
        .iter()
        .map(|(_, values, _)| values.iter().flat_map(|v| v.to_le_bytes()).collect())
        .collect();
    let refs: Vec<&[u8]> = bytes.iter().map(Vec::as_slice).collect();
    let want = memc_codegen::reference::run_outputs(program, file.weights(), &refs)
        .expect("the reference interpreter runs");
    for ((io, (_, want)), got) in program.outputs.iter().zip(&want).zip(&outputs) {
        let got = common::to_f64(got);
        let want: Vec<f64> = want
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64)
            .collect();
        assert_eq!(got.len(), want.len(), "{model} {}", io.name);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 + 1e-4 * w.abs(),
                "{model} output {} [{i}]: CPU {g}, reference {w}",
                io.name
            );
        }
    }
    (
        count(OperandLayout::PackedA),
        count(OperandLayout::PackedB),
        count(OperandLayout::Winograd),
    )
}

/// Where [`check`] writes the plan of `model`.
fn plan_path(model: &str) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("prepack");
    std::fs::create_dir_all(&dir).expect("the target tmpdir is writable");
    dir.join(format!("{}.plan", model.replace('/', "_")))
}

/// A model whose placed arena beats its activation bound (the stem's ReLU in place: arena 176
/// KiB, bound 256): Winograd scratch planned against the bound would raise the arena (to 254
/// KiB, four slots per convolution), so the block's convolutions get Winograd only in the
/// bytes the placed arena leaves free at their steps, and the arena stays what the stem's
/// step needs (its 48 KiB input and 128 KiB output). The first has room for two slots of
/// blocks of 16 tiles; the second for one only, and runs as a direct convolution (on every
/// thread, without scratch: one thread's Winograd in blocks of 16 ran no faster).
#[test]
fn winograd_scratch_goes_into_free_bytes_and_never_raises_the_arena() {
    let model = "tests/onnx/fixtures/winograd_free_bytes.onnx";
    let (_, _, winograd) = check(model, &[]);
    assert_eq!(
        winograd, 1,
        "the 3x3 convolution with room for two slots runs as Winograd, the other directly"
    );
    let file = PlanFile::open(&plan_path(model)).expect("the plan opens");
    let planner = file.meta().planner.as_ref().expect("a planned program");
    assert_eq!(planner.arena_size, (48 + 128) * 1024, "the stem's step");
    assert_eq!(planner.bound_model_order, Some(256 * 1024));
    let slots: Vec<u64> = file
        .program()
        .kernels()
        .filter_map(|k| match &k.body {
            KernelBody::Contract(c) => c.winograd.as_ref().map(|w| w.slots),
            _ => None,
        })
        .collect();
    assert!(
        slots.contains(&2),
        "a convolution with room for two threads' scratch gets two slots: {slots:?}"
    );
}

/// A 1x1 stride-2 shortcut with 64 output channels and room for GEMM panels at its step runs
/// through the GEMM, its `B` panels packed from the input's every other row and column (odd
/// 23x23 input), and agrees with the reference interpreter; and GEMM panels go only where
/// they do not raise the arena.
#[test]
fn strided_shortcuts_run_through_the_gemm_and_panels_never_raise_the_arena() {
    let model = "tests/onnx/fixtures/strided_shortcut.onnx";
    check(model, &[]);
    let file = PlanFile::open(&plan_path(model)).expect("the plan opens");
    let program = file.program();
    let shortcut = program
        .kernels()
        .find_map(|k| match &k.body {
            KernelBody::Contract(c) if k.name.contains("shortcut") => Some(c.clone()),
            _ => None,
        })
        .expect("the shortcut's product");
    let ContractB::Im2col(view) = &shortcut.b else {
        panic!("the shortcut's B is its input's column matrix");
    };
    assert!(view
        .axes
        .iter()
        .all(|a| a.kernel == 1 && a.step == 2 && a.pad == 0));
    assert!(
        shortcut.pack.is_some() && shortcut.a_packed.is_some(),
        "GEMM panels planned for the shortcut, its weight packed whole"
    );

    // GEMM panels only where they do not raise the arena: the 1x1 projection at the peak step
    // (its 192-channel input and 96-channel output live) plans none (its products pack into
    // stack panels, and agree with the reference interpreter above), so the arena is the
    // placed activations' (595 KiB; with the panels it was 1.24 MiB, 1.6 x the model's
    // bound), while the expansion and the shortcut, below the peak, keep theirs. (One test:
    // `check` writes the fixture's plan to one path.)
    let planner = file.meta().planner.as_ref().expect("a planned program");
    let bound = planner.bound_model_order.expect("a bound");
    assert!(
        planner.arena_size <= bound,
        "arena {} over the bound {bound}",
        planner.arena_size
    );
    let panels = |name: &str| {
        program
            .kernels()
            .find_map(|k| match &k.body {
                KernelBody::Contract(c) if k.name.contains(name) => Some(c.pack.is_some()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{name}'s product"))
    };
    assert!(!panels("project"), "the peak's product plans no panels");
    assert!(panels("expand"), "the expansion keeps its panels");
}

#[test]
fn laid_out_weights_run_as_the_reference_reads_them() {
    // The 3x3 convolution runs as Winograd, its weight transformed, in bytes the placed arena
    // leaves free at its step (the 1x1's 16x16 weight is too small to pack); `B` of the `Gemm`
    // with `transB` (fc1, 64x128) and of the two MatMuls sharing one 128x128 weight (fc2 and
    // the GEMV) are packed whole: two slots.
    let packed = check("tests/onnx/no_heap/model.onnx", &[]);
    assert_eq!(packed, (0, 2, 1), "the no-heap model");
    // Both convolutions' weights are packed (conv1's 8x27 too: a stride-1 convolution runs
    // direct, reading only a packed weight); fc's 10x16 is too small to matter.
    let packed = check("examples/classifier.onnx", &["batch=1"]);
    assert_eq!(packed, (2, 0, 0), "the classifier");
    // fc1's transposed 48x64 weight is packed whole; fc2's 16x48 is too small.
    let packed = check("tests/onnx/fixtures/linear_transb.onnx", &[]);
    assert_eq!(packed, (0, 1, 0), "PyTorch's Linear");
    // All three 3x3 convolutions run as Winograd (odd extents, a fused residual and ReLU, two
    // groups, asymmetric and zero pads), their weights transformed, and agree with the
    // reference interpreter's direct sums.
    let packed = check("tests/onnx/fixtures/winograd_convs.onnx", &[]);
    assert_eq!(packed, (0, 0, 3), "the Winograd convolutions");
}

/// The validator refuses a Winograd product without its scratch or transformed weight, with a
/// blocking the kernel does not take, or over a window it does not compute.
#[test]
fn the_validator_checks_a_winograd_product() {
    let options = memc::compile::CompileOptions {
        lower: true,
        ..Default::default()
    };
    let model = root().join("tests/onnx/fixtures/winograd_convs.onnx");
    let compiled = memc::compile::compile(&model, &options)
        .unwrap_or_else(|d| panic!("compile: {}", d.message));
    let program = compiled.program.expect("a program");
    program.validate().expect("the program validates");
    let mutants: [(&str, &dyn Fn(&mut Contract)); 7] = [
        ("no scratch", &|c| c.pack = None),
        ("no transformed weight", &|c| c.a_packed = None),
        ("blocks of 8 tiles", &|c| {
            c.winograd.as_mut().expect("winograd").block = 8
        }),
        ("chunks of 7 channels", &|c| {
            c.winograd.as_mut().expect("winograd").chunk = 7
        }),
        ("no slots", &|c| {
            c.winograd.as_mut().expect("winograd").slots = 0
        }),
        ("stride 2", &|c| {
            if let memc_codegen::kernel::ContractB::Im2col(view) = &mut c.b {
                view.axes[0].step = 2;
            }
        }),
        ("more slots than the arena holds", &|c| {
            c.winograd.as_mut().expect("winograd").slots = 64
        }),
    ];
    for (what, mutate) in mutants {
        let mut mutant = program.clone();
        let contract = mutant
            .steps
            .iter_mut()
            .flat_map(|s| &mut s.kernels)
            .find_map(|k| match &mut k.body {
                KernelBody::Contract(c) if c.winograd.is_some() => Some(c),
                _ => None,
            })
            .expect("a Winograd product");
        mutate(contract);
        let error = mutant.validate().expect_err(what).to_string();
        assert!(
            error.contains("Winograd") || error.contains("pack"),
            "{what}: {error}"
        );
    }
}

/// The validator bounds a packed `A` or `B` by the weights section, and refuses a misaligned
/// one or one that steps backwards between batch indices.
#[test]
fn the_validator_bounds_a_packed_operand() {
    let options = memc::compile::CompileOptions {
        lower: true,
        ..Default::default()
    };
    let compiled = memc::compile::compile(&root().join("tests/onnx/no_heap/model.onnx"), &options)
        .unwrap_or_else(|d| panic!("compile: {}", d.message));
    let program = compiled.program.expect("a program");
    program.validate().expect("the program validates");
    let weights = program.weights_size;
    let mutants: [(&str, &dyn Fn(&mut PackedOperand)); 4] = [
        ("past the end", &|p| p.byte_offset = weights - 4),
        ("far past the end", &|p| p.byte_offset = u64::MAX / 2),
        ("misaligned", &|p| p.byte_offset += 2),
        ("backwards", &|p| {
            p.batch_strides = vec![-1; p.batch_strides.len()]
        }),
    ];
    let operands: [(&str, fn(&mut Contract) -> Option<&mut PackedOperand>); 2] = [
        ("a", |c| c.a_packed.as_mut()),
        ("b", |c| c.b_packed.as_mut()),
    ];
    for (operand, packed_of) in operands {
        for (what, mutate) in &mutants {
            let mut mutant = program.clone();
            let packed = mutant
                .steps
                .iter_mut()
                .flat_map(|s| &mut s.kernels)
                .find_map(|k| match &mut k.body {
                    KernelBody::Contract(c) if !c.batch.is_empty() || operand == "b" => {
                        packed_of(c)
                    }
                    _ => None,
                })
                .unwrap_or_else(|| panic!("a contraction with a packed {operand}"));
            if packed.batch_strides.is_empty() && *what == "backwards" {
                // No batch axes (the products of `B` packed whole here have none).
                continue;
            }
            mutate(packed);
            let error = mutant.validate().expect_err(what).to_string();
            assert!(
                error.contains(&format!("{operand} (packed)"))
                    || error.contains(&format!("packed operand {operand}")),
                "{operand} {what}: {error}"
            );
        }
    }
}
