//! Outputs with a run-time extent (`IoTensor::extent`): the session trims them to the extent
//! the run wrote in their slot, refuses an extent outside `[0, bound]` with an error instead of
//! reading past the bound, and a plan whose slot lies outside the arena is refused at load.

mod common;

use common::*;
use memc_codegen::kernel::{Inst, InstKind, LoopKernel, Region, Stage, Store};
use memc_codegen::program::{IoTensor, RunExtent, Step};
use memc_codegen::{Kernel, KernelBody, Program, Scalar};
use memc_ir::WeightStore;
use memc_runtime::plan::{PlanFile, PlanMeta};
use memc_runtime::{write_plan, Session, TensorRef, PLAN_FORMAT_VERSION};

/// A program over `x: i64[5]` (arena bytes 0..40) whose output `y: i64[2, <=2]` is `x[1..5]`
/// (bytes 8..40) with its extent slot at byte 48; one kernel copies `x[0]` into the slot, so
/// the caller chooses the extent, in range or not.
fn program() -> Program {
    let copy = Kernel {
        name: "extent #0".into(),
        body: KernelBody::Loop(LoopKernel {
            outer: vec![],
            inner: vec![],
            views: vec![
                view(Region::Arena, Scalar::I64, 0, vec![]),
                view(Region::Arena, Scalar::I64, 48, vec![]),
            ],
            stages: vec![Stage::Map {
                insts: vec![Inst {
                    ty: Scalar::I64,
                    kind: InstKind::Load { view: 0 },
                }],
                stores: vec![Store::new(1, 0)],
            }],
        }),
    };
    let io = |name: &str, shape: Vec<u64>, byte_offset, extent| IoTensor {
        name: name.into(),
        elem: Scalar::I64,
        shape,
        region: Region::Arena,
        byte_offset,
        extent,
    };
    Program {
        arena_size: 56,
        weights_size: 0,
        state_size: 0,
        inputs: vec![io("x", vec![5], 0, None)],
        outputs: vec![io(
            "y",
            vec![2, 2],
            8,
            Some(RunExtent {
                axis: 1,
                byte_offset: 48,
            }),
        )],
        weights: vec![],
        state: vec![],
        steps: vec![Step {
            op: "onnx.NonZero \"nz\"".into(),
            kernels: vec![copy],
        }],
    }
}

fn session(test: &str, program: Program) -> Session {
    let path = scratch_dir(test).join("extent.plan");
    let meta = PlanMeta::new("extent.onnx", "cpu", program);
    write_plan(&path, &meta, &WeightStore::new()).unwrap();
    Session::load(&path).unwrap()
}

fn i64s(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Runs with `x = [extent, 10, 11, 12, 13]`: the output's shape and values.
fn run(session: &mut Session, extent: i64) -> Result<(Vec<u64>, Vec<i64>), String> {
    let x = [extent, 10, 11, 12, 13];
    let input = TensorRef::from_slice(&[5], &x).unwrap();
    let outputs = session.run(&[("x", input)]).map_err(|e| e.to_string())?;
    Ok((outputs[0].shape().to_vec(), i64s(outputs[0].data())))
}

#[test]
fn outputs_are_trimmed_to_the_extent_of_each_run() {
    let mut s = session("trimmed", program());
    // The bounded axis is the last: each row keeps its leading `extent` elements.
    assert_eq!(run(&mut s, 1), Ok((vec![2, 1], vec![10, 12])));
    assert_eq!(run(&mut s, 2), Ok((vec![2, 2], vec![10, 11, 12, 13])));
    assert_eq!(run(&mut s, 0), Ok((vec![2, 0], vec![])));
    // In place gives the same.
    let x = [1i64, 10, 11, 12, 13];
    let input = TensorRef::from_slice(&[5], &x).unwrap();
    let outputs = s.run_in_place(&[("x", input)]).unwrap();
    let (_, y) = outputs.get(0).expect("one output");
    assert_eq!(y.shape(), &[2, 1]);
    assert_eq!(i64s(y.data()), vec![10, 12]);
}

#[test]
fn an_extent_outside_the_bound_is_an_error_not_a_wide_read() {
    let mut s = session("out_of_range", program());
    let message = "output `y`: the run left extent 3 on axis 1, outside [0, 2]; the output is \
                   not read (a corrupted plan or a bug in memc)";
    assert_eq!(run(&mut s, 3), Err(message.to_string()));
    assert_eq!(
        run(&mut s, -1),
        Err(message.replace("extent 3", "extent -1"))
    );
    // The session still runs afterwards.
    assert_eq!(run(&mut s, 2), Ok((vec![2, 2], vec![10, 11, 12, 13])));
}

#[test]
fn a_leading_bounded_axis_is_a_prefix_of_the_bytes() {
    let mut program = program();
    program.outputs[0].extent = Some(RunExtent {
        axis: 0,
        byte_offset: 48,
    });
    let mut s = session("leading", program);
    assert_eq!(run(&mut s, 1), Ok((vec![1, 2], vec![10, 11])));
    assert_eq!(run(&mut s, 0), Ok((vec![0, 2], vec![])));
}

/// The error `PlanFile::open` gives for the program, written with valid checksums.
fn open_err(test: &str, version: u32, program: Program) -> String {
    let meta = PlanMeta::new("extent.onnx", "cpu", program);
    let metadata = serde_json::to_vec(&meta).unwrap();
    let bytes = assemble(version, &metadata, &[], crc32fast::hash(&[]));
    let path = scratch_dir(test).join("extent.plan");
    std::fs::write(&path, bytes).unwrap();
    PlanFile::open(&path)
        .err()
        .expect("the plan is refused")
        .to_string()
        .replace(&path.display().to_string(), "PLAN")
}

#[test]
fn a_corrupted_extent_slot_is_refused_at_load() {
    let with_slot = |axis: u32, byte_offset: u64| {
        let mut p = program();
        p.outputs[0].extent = Some(RunExtent { axis, byte_offset });
        p
    };
    assert_eq!(
        open_err("slot_outside", PLAN_FORMAT_VERSION, with_slot(1, 56)),
        "`PLAN`: the plan's program is invalid: kernel `program`: output `y` has its extent slot at byte 56, outside the arena or misaligned"
    );
    assert_eq!(
        open_err("slot_misaligned", PLAN_FORMAT_VERSION, with_slot(1, 44)),
        "`PLAN`: the plan's program is invalid: kernel `program`: output `y` has its extent slot at byte 44, outside the arena or misaligned"
    );
    assert_eq!(
        open_err("slot_huge", PLAN_FORMAT_VERSION, with_slot(1, u64::MAX - 7)),
        format!("`PLAN`: the plan's program is invalid: kernel `program`: output `y` has its extent slot at byte {}, outside the arena or misaligned", u64::MAX - 7)
    );
    assert_eq!(
        open_err("slot_axis", PLAN_FORMAT_VERSION, with_slot(2, 48)),
        "`PLAN`: the plan's program is invalid: kernel `program`: output `y` has its extent on axis 2, but rank 2"
    );
    // Format 5 plans have no extents: one that claims one is corrupted.
    assert_eq!(
        open_err("slot_version_5", 5, program()),
        "`PLAN`: the plan file is corrupted: output `y` has a run-time extent, which format version 5 plans cannot have"
    );
    let mut input = program();
    input.inputs[0].extent = input.outputs[0].extent;
    assert_eq!(
        open_err("slot_input", PLAN_FORMAT_VERSION, input),
        "`PLAN`: the plan's program is invalid: kernel `program`: input `x` has a run-time extent (only outputs may)"
    );
}
