//! Sessions end to end: load a hand-written plan, run it, compare with a reference.

mod common;

use common::*;
use memc_codegen::kernel::{BinaryOp, Contract, MatView, Region};
use memc_codegen::program::{IoTensor, Step};
use memc_codegen::{Kernel, KernelBody, Program, Scalar};
use memc_ir::WeightStore;
use memc_runtime::plan::PlanMeta;
use memc_runtime::{write_plan, Session, SessionOptions, TensorRef};
use std::num::NonZeroUsize;
use std::path::PathBuf;

fn add_matmul_plan(test: &str) -> PathBuf {
    let (program, store) = add_matmul_program();
    let path = scratch_dir(test).join("tiny.plan");
    write_plan(&path, &PlanMeta::new("tiny.onnx", "cpu", program), &store).unwrap();
    path
}

#[test]
fn a_plan_runs_and_matches_the_reference() {
    let path = add_matmul_plan("session_runs");
    let mut session = Session::load(&path).unwrap();
    assert_eq!(session.arena_size(), 128);
    for x in [[1.0f32, 2.0, 3.0, 4.0], [-1.0, 0.5, 0.0, 100.0]] {
        let outputs = session
            .run(&[("x", TensorRef::from_slice(&[4], &x).unwrap())])
            .unwrap();
        assert_eq!(outputs.len(), 2);
        assert_eq!(outputs[0].name(), "y");
        assert_eq!(outputs[0].shape(), &[1, 2]);
        assert_eq!(
            outputs[0].to_vec::<f32>().unwrap(),
            add_matmul_reference(&x)
        );
        assert_eq!(outputs[1].name(), "bias");
        assert_eq!(outputs[1].to_vec::<f32>().unwrap(), BIAS);
    }
}

#[test]
fn run_in_place_returns_the_same_outputs() {
    let path = add_matmul_plan("session_in_place");
    let mut session = Session::load(&path).unwrap();
    let x = [3.0f32, 1.0, 4.0, 1.0];
    let inputs = [("x", TensorRef::from_slice(&[4], &x).unwrap())];
    let copied = session.run(&inputs).unwrap();
    let in_place = session.run_in_place(&inputs).unwrap();
    assert_eq!(in_place.len(), copied.len());
    for ((name, tensor), owned) in in_place.iter().zip(&copied) {
        assert_eq!(name, owned.name());
        assert_eq!(tensor, owned.as_ref());
    }
}

#[test]
fn thread_counts_agree() {
    let path = add_matmul_plan("session_threads");
    let x = [0.25f32, -8.0, 2.0, 1.0];
    let mut results = Vec::new();
    for threads in [1, 2, 3] {
        let options = SessionOptions {
            threads: NonZeroUsize::new(threads),
            verify_weights: true,
        };
        let mut session = Session::load_with(&path, &options).unwrap();
        assert_eq!(session.threads(), threads);
        results.push(
            session
                .run(&[("x", TensorRef::from_slice(&[4], &x).unwrap())])
                .unwrap(),
        );
    }
    assert_eq!(results[0], results[1]);
    assert_eq!(results[0], results[2]);
}

#[test]
fn input_mistakes_are_errors_through_a_session() {
    let path = add_matmul_plan("session_input_errors");
    let mut session = Session::load(&path).unwrap();
    let x = [0f32; 4];
    let good = TensorRef::from_slice(&[4], &x).unwrap();
    let mut err = |inputs: &[(&str, TensorRef<'_>)]| session.run(inputs).unwrap_err().to_string();
    assert_eq!(
        err(&[("x", good), ("z", good)]),
        "unknown input `z`; the plan's inputs are `x` (f32[4])"
    );
    assert_eq!(
        err(&[]),
        "missing input `x` (f32[4]); the plan's inputs are `x` (f32[4])"
    );
    assert_eq!(err(&[("x", good), ("x", good)]), "input `x` is given twice");
    let ints = [0i32; 4];
    assert_eq!(
        err(&[("x", TensorRef::from_slice(&[4], &ints).unwrap())]),
        "input `x`: expected element type f32, got i32"
    );
    assert_eq!(
        err(&[("x", TensorRef::from_slice(&[2, 2], &x).unwrap())]),
        "input `x`: expected shape [4], got [2, 2]"
    );
    // A failed run leaves the session usable.
    let outputs = session.run(&[("x", good)]).unwrap();
    assert_eq!(
        outputs[0].to_vec::<f32>().unwrap(),
        add_matmul_reference(&x)
    );
}

#[test]
fn zero_element_tensors_and_kernels_run() {
    // `y = x + x` over f32[0, 3], and a matmul with m = 0: nothing to do, but it must work.
    let arena = |offset| view(Region::Arena, Scalar::F32, offset, vec![3, 1]);
    let add = binary_kernel("Add empty", BinaryOp::Add, 0, arena(0), arena(0), arena(0));
    // `binary_kernel` loops over one axis; make it two, [0, 3].
    let add = match add.body {
        KernelBody::Loop(mut k) => {
            k.outer = vec![0, 3];
            Kernel {
                name: add.name,
                body: KernelBody::Loop(k),
            }
        }
        KernelBody::Contract(_) | KernelBody::NBits(_) => {
            unreachable!("binary_kernel makes a loop kernel")
        }
    };
    let mat = |offset| MatView {
        region: Region::Arena,
        byte_offset: offset,
        batch_strides: vec![],
        row_stride: 3,
        col_stride: 1,
    };
    let matmul = Kernel {
        name: "MatMul empty".into(),
        body: KernelBody::Contract(Contract {
            elem: Scalar::F32,
            batch: vec![],
            m: 0,
            n: 3,
            k: 3,
            a: mat(0),
            b: mat(0).into(),
            c: mat(0),
            alpha: 1f64.to_bits(),
            accumulate: false,
            pack: None,
            a_packed: None,
            b_packed: None,
            transposed: false,
            winograd: None,
        }),
    };
    let io = |name: &str| IoTensor {
        name: name.into(),
        elem: Scalar::F32,
        shape: vec![0, 3],
        region: Region::Arena,
        byte_offset: 0,
        extent: None,
    };
    let program = Program {
        arena_size: 0,
        weights_size: 0,
        state_size: 0,
        inputs: vec![io("x")],
        outputs: vec![io("y")],
        weights: vec![],
        state: vec![],
        steps: vec![Step {
            op: "onnx.Add \"empty\"".into(),
            kernels: vec![add, matmul],
        }],
    };
    let path = scratch_dir("session_empty").join("empty.plan");
    write_plan(
        &path,
        &PlanMeta::new("empty.onnx", "cpu", program),
        &WeightStore::new(),
    )
    .unwrap();
    let mut session = Session::load(&path).unwrap();
    assert_eq!(session.arena_size(), 0);
    let outputs = session
        .run(&[("x", TensorRef::from_slice(&[0, 3], &[] as &[f32]).unwrap())])
        .unwrap();
    assert_eq!(outputs[0].shape(), &[0, 3]);
    assert!(outputs[0].data().is_empty());
}

#[test]
fn a_corrupted_weight_is_caught_when_verification_is_asked_for() {
    let path = add_matmul_plan("session_verify");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let options = SessionOptions {
        verify_weights: true,
        ..SessionOptions::default()
    };
    let err = Session::load_with(&path, &options).unwrap_err().to_string();
    assert!(
        err.contains("the plan file is corrupted: weights checksum mismatch"),
        "{err}"
    );
}

#[test]
fn a_damaged_plan_is_an_error_at_load() {
    let path = add_matmul_plan("session_damaged");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = Session::load(&path).unwrap_err().to_string();
    assert!(err.contains("the plan file is truncated"), "{err}");
}
