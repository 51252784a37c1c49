//! Lowering of the elementwise ops (and their fusion), the reductions and the normalizations:
//! small models in memc's text IR are planned, lowered, JIT-compiled and run, and the results
//! are compared with references computed here; every program also runs through the reference
//! backend (`memc_codegen::reference`), which must agree with the CPU backend. The fusion tests
//! also check the kernel structure (which steps hold kernels) and that a plan whose output
//! overlaps a chain's input stops the fusion.

mod common;

use common::models::{run_both, weights_section};
use memc_codegen::kernel::{InstKind, KernelBody, Region, Stage};
use memc_codegen::lower::lower_function;
use memc_codegen::Program;
use memc_ir::{Module, ValueId, WeightBytes, WeightStore};
use memc_passes::memory::{plan_module, MemoryPlan};

// ---------------------------------------------------------------------------------------------
// Support: compile, run, compare.

struct Model {
    module: Module,
    plan: MemoryPlan,
}

/// Parses `text`, gives the named weights their bytes, verifies and plans it.
fn model(text: &str, weights: &[(&str, Vec<u8>)]) -> Model {
    let mut module = memc_ir::parse_module(text).unwrap_or_else(|d| panic!("parse: {d:?}"));
    let mut store = WeightStore::new();
    for (_, w) in module.weights.iter() {
        let bytes = weights
            .iter()
            .find(|(name, _)| *name == w.name())
            .map_or(WeightBytes::Absent, |(_, b)| {
                WeightBytes::Owned(b.clone().into())
            });
        store
            .insert(w.name(), w.ty().clone(), bytes)
            .expect("the weight is well-formed");
    }
    module.weights = store;
    if let Err(d) = memc_ir::verify_module(&module) {
        panic!("verify: {d:?}");
    }
    let plan = plan_module(&module, &Default::default()).unwrap_or_else(|d| panic!("plan: {d:?}"));
    Model { module, plan }
}

fn lower(m: &Model) -> Program {
    let (_, func) = m.module.functions().next().expect("one function");
    lower_function(func, &m.module.weights, &m.plan).unwrap_or_else(|d| panic!("lower: {d:?}"))
}

/// Runs `program` on `inputs` (raw bytes by position) through the CPU backend and the reference
/// backend, checks that they agree, and returns the CPU backend's outputs' bytes.
fn run(m: &Model, program: &Program, inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let weights = weights_section(program, &m.module.weights);
    run_both(program, &weights, inputs)
}

/// Little-endian bytes of plain numbers.
trait Bytes: Copy {
    fn put(self, out: &mut Vec<u8>);
    fn get(bytes: &[u8]) -> Self;
    const SIZE: usize;
}

macro_rules! bytes_impl {
    ($($t:ty),*) => {$(
        impl Bytes for $t {
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("the element's width"))
            }
            const SIZE: usize = std::mem::size_of::<$t>();
        }
    )*};
}
bytes_impl!(f32, f64, i8, i32, i64, u8, u16);

fn enc<T: Bytes>(values: &[T]) -> Vec<u8> {
    let mut out = Vec::new();
    for &v in values {
        v.put(&mut out);
    }
    out
}

fn dec<T: Bytes>(bytes: &[u8]) -> Vec<T> {
    bytes.chunks_exact(T::SIZE).map(T::get).collect()
}

/// `|got - want| <= 1e-5 + 1e-4 * |want|` elementwise; NaN matches NaN, infinities match exactly.
fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(
        got.len(),
        want.len(),
        "lengths differ: got {got:?}, want {want:?}"
    );
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan())
            || g == w
            || (g.is_finite() && w.is_finite() && (g - w).abs() <= 1e-5 + 1e-4 * w.abs());
        assert!(
            ok,
            "element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

fn f32_out(bytes: &[u8]) -> Vec<f64> {
    dec::<f32>(bytes).into_iter().map(f64::from).collect()
}

/// Pseudo-random values in `[-2, 2)` (a fixed LCG, so failures reproduce).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// Kernels per step, in schedule order.
fn kernels_per_step(program: &Program) -> Vec<usize> {
    program.steps.iter().map(|s| s.kernels.len()).collect()
}

// ---------------------------------------------------------------------------------------------
// Fusion.

#[test]
fn a_chain_of_elementwise_ops_is_one_kernel() {
    let m = model(
        r#"func.func @f(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %w = "memc.weight"() {value = dense_resource<"two"> : tensor<f32>} : () -> tensor<f32>
  %0 = "onnx.Add"(%x, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = "onnx.Relu"(%0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "onnx.Mul"(%1, %w) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %3 = "onnx.Sigmoid"(%2) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %3 : tensor<2x3xf32>
}"#,
        &[("two", enc(&[2.0f32]))],
    );
    let program = lower(&m);
    assert_eq!(kernels_per_step(&program), vec![0, 0, 0, 1]);
    let kernel = &program.steps[3].kernels[0];
    assert!(kernel.name.contains("fused 4 ops"), "{}", kernel.name);
    let KernelBody::Loop(lk) = &kernel.body else {
        panic!("a loop kernel")
    };
    // The output and the two graph inputs; the scalar weight is a constant.
    assert_eq!(lk.views.len(), 3);
    let Stage::Map { insts, .. } = &lk.stages[0] else {
        panic!("a map stage")
    };
    assert!(insts
        .iter()
        .any(|i| matches!(i.kind, InstKind::Const { bits } if bits == 2f64.to_bits())));

    let x = values(6, 1);
    let b = values(3, 2);
    let out = run(&m, &program, &[enc(&x), enc(&b)]);
    let want: Vec<f64> = (0..6)
        .map(|i| {
            let v = f64::from(((x[i] + b[i % 3]).max(0.0)) * 2.0);
            1.0 / (1.0 + (-v).exp())
        })
        .collect();
    assert_close(&f32_out(&out[0]), &want);
}

#[test]
fn a_value_with_two_users_ends_a_chain() {
    let m = model(
        r#"func.func @f(%x: tensor<5xf32>) -> tensor<5xf32> {
  %0 = "onnx.Exp"(%x) : (tensor<5xf32>) -> tensor<5xf32>
  %1 = "onnx.Neg"(%0) : (tensor<5xf32>) -> tensor<5xf32>
  %2 = "onnx.Add"(%0, %1) : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %3 = "onnx.Abs"(%2) : (tensor<5xf32>) -> tensor<5xf32>
  return %3 : tensor<5xf32>
}"#,
        &[],
    );
    let program = lower(&m);
    // Exp feeds two ops, so it stands alone; Neg, Add and Abs fuse.
    assert_eq!(kernels_per_step(&program), vec![1, 0, 0, 1]);
    let x = values(5, 3);
    let out = run(&m, &program, &[enc(&x)]);
    assert_close(&f32_out(&out[0]), &[0.0; 5]);
}

#[test]
fn an_op_reading_the_previous_result_twice_fuses() {
    let m = model(
        r#"func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "onnx.Sub"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "onnx.Exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "onnx.Mul"(%1, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "onnx.Add"(%2, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}"#,
        &[],
    );
    let program = lower(&m);
    let x = values(4, 4);
    let out = run(&m, &program, &[enc(&x)]);
    let want: Vec<f64> = x.iter().map(|&v| f64::from(v).exp().powi(2)).collect();
    assert_close(&f32_out(&out[0]), &want);
    assert!(
        program.n_kernels() < 4,
        "some ops fuse: {:?}",
        kernels_per_step(&program)
    );
}

#[test]
fn a_broadcast_intermediate_fuses_into_a_larger_output() {
    let m = model(
        r#"func.func @f(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = "onnx.Exp"(%b) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = "onnx.Add"(%x, %0) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}"#,
        &[],
    );
    let program = lower(&m);
    assert_eq!(kernels_per_step(&program), vec![0, 1]);
    let x = values(6, 5);
    let b = values(3, 6);
    let out = run(&m, &program, &[enc(&x), enc(&b)]);
    let want: Vec<f64> = (0..6).map(|i| f64::from(x[i] + b[i % 3].exp())).collect();
    assert_close(&f32_out(&out[0]), &want);
}

/// `Neg` reads `x` at step 1; `Add` writes the output at step 2, where the planner may reuse
/// `x`'s bytes. The test moves the output onto `x` by hand.
const NEG_THEN_ADD: &str = r#"func.func @f(%x: tensor<8xf32>) -> tensor<SHAPExf32> {
  %w = "memc.weight"() {value = dense_resource<"w"> : tensor<SHAPExf32>} : () -> tensor<SHAPExf32>
  %0 = "onnx.Neg"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %1 = "onnx.Add"(%0, %w) : (tensor<8xf32>, tensor<SHAPExf32>) -> tensor<SHAPExf32>
  return %1 : tensor<SHAPExf32>
}"#;

/// Places `x`, the intermediate and the output at the given offsets of a 1 KiB arena.
fn place(m: &mut Model, x: u64, intermediate: u64, output: u64) {
    let (_, func) = m.module.functions().next().expect("one function");
    let x_value = func.args()[0];
    let offset_of = |value: ValueId| {
        if value == x_value {
            x
        } else if func
            .defining_op(value)
            .is_some_and(|op| func.op(op).opcode == memc_ir::Opcode::Neg)
        {
            intermediate
        } else {
            output
        }
    };
    for b in &mut m.plan.buffers {
        b.offset = offset_of(b.value);
    }
    m.plan.arena_size = 1024;
}

#[test]
fn an_output_partly_over_an_input_read_earlier_stops_fusion() {
    let w = values(32, 7);
    let mut m = model(&NEG_THEN_ADD.replace("SHAPE", "4x8"), &[("w", enc(&w))]);
    let x = values(8, 8);
    let want: Vec<f64> = (0..32).map(|i| f64::from(-x[i % 8] + w[i])).collect();

    // Apart, the chain fuses.
    place(&mut m, 0, 256, 512);
    let program = lower(&m);
    assert_eq!(kernels_per_step(&program), vec![0, 1]);
    assert_close(&f32_out(&run(&m, &program, &[enc(&x)])[0]), &want);

    // The [4, 8] output starts on the [8] input: fused, it would overwrite `x` while reading
    // it; the ops stay apart and each runs at its own step.
    place(&mut m, 0, 256, 0);
    let program = lower(&m);
    assert_eq!(kernels_per_step(&program), vec![1, 1]);
    assert_close(&f32_out(&run(&m, &program, &[enc(&x)])[0]), &want);

    // An output that overlaps the input only partly stops it too.
    place(&mut m, 64, 256, 48);
    let program = lower(&m);
    assert_eq!(kernels_per_step(&program), vec![1, 1]);
    assert_close(&f32_out(&run(&m, &program, &[enc(&x)])[0]), &want);
}

#[test]
fn an_output_exactly_over_a_same_shaped_input_fuses() {
    let w = values(8, 9);
    let mut m = model(&NEG_THEN_ADD.replace("SHAPE", "8"), &[("w", enc(&w))]);
    place(&mut m, 128, 256, 128);
    let program = lower(&m);
    assert_eq!(kernels_per_step(&program), vec![0, 1]);
    let x = values(8, 10);
    let want: Vec<f64> = (0..8).map(|i| f64::from(-x[i] + w[i])).collect();
    assert_close(&f32_out(&run(&m, &program, &[enc(&x)])[0]), &want);
}

// ---------------------------------------------------------------------------------------------
// Elementwise ops with types and attributes.

#[test]
fn integer_and_mixed_type_ops_follow_numpy() {
    let m = model(
        r#"func.func @f(%a: tensor<6xi32>, %b: tensor<6xi32>, %e: tensor<6xf32>) -> (tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi1>) {
  %0 = "onnx.Mod"(%a, %b) : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
  %1 = "onnx.Mod"(%a, %b) {fmod = 1} : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
  %2 = "onnx.Div"(%a, %b) : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
  %3 = "onnx.Pow"(%a, %e) : (tensor<6xi32>, tensor<6xf32>) -> tensor<6xi32>
  %4 = "onnx.Cast"(%e) {to = i1} : (tensor<6xf32>) -> tensor<6xi1>
  return %0, %1, %2, %3, %4 : tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi32>, tensor<6xi1>
}"#,
        &[],
    );
    let program = lower(&m);
    let a = [7i32, -7, 7, -7, 5, 3];
    let b = [3i32, 3, -3, -3, 1, 7];
    let e = [2.0f32, 0.5, 0.0, 3.0, -1.0, 1.5];
    let out = run(&m, &program, &[enc(&a), enc(&b), enc(&e)]);
    assert_eq!(dec::<i32>(&out[0]), vec![1, 2, -2, -1, 0, 3]);
    assert_eq!(dec::<i32>(&out[1]), vec![1, -1, 1, -1, 0, 3]);
    assert_eq!(dec::<i32>(&out[2]), vec![2, -2, -2, 2, 5, 0]);
    let pow: Vec<i32> = a
        .iter()
        .zip(&e)
        .map(|(&x, &y)| f64::from(x).powf(f64::from(y)) as i32)
        .collect();
    assert_eq!(dec::<i32>(&out[3]), pow);
    assert_eq!(out[4], vec![1, 1, 0, 1, 1, 1]);
}

#[test]
fn clip_with_runtime_bounds_and_activations() {
    let m = model(
        r#"func.func @f(%x: tensor<8xf32>, %lo: tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %n = "memc.none"() : () -> none
  %0 = "onnx.Clip"(%x, %lo, %n) : (tensor<8xf32>, tensor<f32>, none) -> tensor<8xf32>
  %1 = "onnx.Gelu"(%x) {approximate = "tanh"} : (tensor<8xf32>) -> tensor<8xf32>
  %2 = "onnx.HardSwish"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %3 = "onnx.Softplus"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  return %0, %1, %2, %3 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}"#,
        &[],
    );
    let program = lower(&m);
    let x = [-3.0f32, -1.0, -0.25, 0.0, 0.5, 1.0, 2.5, 30.0];
    let out = run(&m, &program, &[enc(&x), enc(&[-0.5f32])]);
    let xs: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    assert_close(
        &f32_out(&out[0]),
        &xs.iter().map(|&v| v.max(-0.5)).collect::<Vec<_>>(),
    );
    let k = (2.0 / std::f64::consts::PI).sqrt();
    let gelu: Vec<f64> = xs
        .iter()
        .map(|&v| 0.5 * v * (1.0 + (k * (v + 0.044715 * v * v * v)).tanh()))
        .collect();
    assert_close(&f32_out(&out[1]), &gelu);
    let hswish: Vec<f64> = xs
        .iter()
        .map(|&v| v * (v / 6.0 + 0.5).clamp(0.0, 1.0))
        .collect();
    assert_close(&f32_out(&out[2]), &hswish);
    let softplus: Vec<f64> = xs.iter().map(|&v| (v.exp() + 1.0).ln()).collect();
    assert_close(&f32_out(&out[3]), &softplus);
}

#[test]
fn dropout_with_a_mask_copies_and_writes_true() {
    let m = model(
        r#"func.func @f(%x: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xi1>) {
  %0:2 = "onnx.Dropout"(%x) : (tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xi1>)
  return %0#0, %0#1 : tensor<2x2xf32>, tensor<2x2xi1>
}"#,
        &[],
    );
    let program = lower(&m);
    let x = values(4, 11);
    let out = run(&m, &program, &[enc(&x)]);
    assert_eq!(dec::<f32>(&out[0]), x);
    assert_eq!(out[1], vec![1; 4]);
}

// ---------------------------------------------------------------------------------------------
// Reductions.

#[test]
fn reductions_over_attribute_axes() {
    let m = model(
        r#"func.func @f(%x: tensor<2x3x4xi32>, %y: tensor<3x4xf64>) -> (tensor<3xi32>, tensor<3x1xf64>, tensor<1x4xf64>, tensor<3x4xf64>) {
  %0 = "onnx.ReduceSum"(%x) {axes = [0, 2], keepdims = 0} : (tensor<2x3x4xi32>) -> tensor<3xi32>
  %1 = "onnx.ReduceLogSumExp"(%y) {axes = [-1]} : (tensor<3x4xf64>) -> tensor<3x1xf64>
  %2 = "onnx.ReduceMean"(%y) {axes = [0]} : (tensor<3x4xf64>) -> tensor<1x4xf64>
  %3 = "onnx.ReduceL2"(%y) {noop_with_empty_axes = 1} : (tensor<3x4xf64>) -> tensor<3x4xf64>
  return %0, %1, %2, %3 : tensor<3xi32>, tensor<3x1xf64>, tensor<1x4xf64>, tensor<3x4xf64>
}"#,
        &[],
    );
    let program = lower(&m);
    let x: Vec<i32> = (0..24).map(|i| i * 7 % 11 - 5).collect();
    let y: Vec<f64> = values(12, 12).into_iter().map(f64::from).collect();
    let out = run(&m, &program, &[enc(&x), enc(&y)]);
    let sum: Vec<i32> = (0..3)
        .map(|j| {
            (0..2)
                .flat_map(|i| (0..4).map(move |k| (i, k)))
                .map(|(i, k)| x[i * 12 + j * 4 + k])
                .sum()
        })
        .collect();
    assert_eq!(dec::<i32>(&out[0]), sum);
    let lse: Vec<f64> = (0..3)
        .map(|r| {
            y[r * 4..r * 4 + 4]
                .iter()
                .map(|v| v.exp())
                .sum::<f64>()
                .ln()
        })
        .collect();
    assert_close(&dec::<f64>(&out[1]), &lse);
    let mean: Vec<f64> = (0..4)
        .map(|c| (0..3).map(|r| y[r * 4 + c]).sum::<f64>() / 3.0)
        .collect();
    assert_close(&dec::<f64>(&out[2]), &mean);
    assert_close(
        &dec::<f64>(&out[3]),
        &y.iter().map(|v| v.abs()).collect::<Vec<_>>(),
    );
}

#[test]
fn reducing_an_empty_axis_gives_the_identity() {
    let m = model(
        r#"func.func @f(%x: tensor<2x0x3xf32>) -> (tensor<2x1x3xf32>, tensor<2x1x3xf32>, tensor<2x1x3xf32>) {
  %0 = "onnx.ReduceMax"(%x) {axes = [1]} : (tensor<2x0x3xf32>) -> tensor<2x1x3xf32>
  %1 = "onnx.ReduceProd"(%x) {axes = [1]} : (tensor<2x0x3xf32>) -> tensor<2x1x3xf32>
  %2 = "onnx.ReduceSum"(%x) {axes = [1]} : (tensor<2x0x3xf32>) -> tensor<2x1x3xf32>
  return %0, %1, %2 : tensor<2x1x3xf32>, tensor<2x1x3xf32>, tensor<2x1x3xf32>
}"#,
        &[],
    );
    let program = lower(&m);
    let out = run(&m, &program, &[Vec::new()]);
    assert_close(&f32_out(&out[0]), &[f64::NEG_INFINITY; 6]);
    assert_close(&f32_out(&out[1]), &[1.0; 6]);
    assert_close(&f32_out(&out[2]), &[0.0; 6]);
}

#[test]
fn reduction_axes_known_only_at_run_time() {
    // Removing axis 1 or axis 2 of [3, 2, 2] both leave [3, 2]: the kernel reads the axes.
    let m = model(
        r#"func.func @f(%x: tensor<3x2x2xf32>, %axes: tensor<1xi64>) -> tensor<3x2xf32> {
  %0 = "onnx.ReduceMean"(%x, %axes) {keepdims = 0} : (tensor<3x2x2xf32>, tensor<1xi64>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}"#,
        &[],
    );
    let program = lower(&m);
    let x = values(12, 13);
    let at = |i: usize, j: usize, k: usize| f64::from(x[i * 4 + j * 2 + k]);
    let over_1: Vec<f64> = (0..3)
        .flat_map(|i| (0..2).map(move |k| (at(i, 0, k) + at(i, 1, k)) / 2.0))
        .collect();
    let over_2: Vec<f64> = (0..3)
        .flat_map(|i| (0..2).map(move |j| (at(i, j, 0) + at(i, j, 1)) / 2.0))
        .collect();
    assert_close(
        &f32_out(&run(&m, &program, &[enc(&x), enc(&[1i64])])[0]),
        &over_1,
    );
    assert_close(
        &f32_out(&run(&m, &program, &[enc(&x), enc(&[-1i64])])[0]),
        &over_2,
    );
}

#[test]
fn argmax_and_argmin_pick_first_or_last() {
    let m = model(
        r#"func.func @f(%x: tensor<2x4xf32>) -> (tensor<2xi64>, tensor<2x1xi64>, tensor<1x4xi64>) {
  %0 = "onnx.ArgMax"(%x) {axis = 1, keepdims = 0} : (tensor<2x4xf32>) -> tensor<2xi64>
  %1 = "onnx.ArgMax"(%x) {axis = -1, select_last_index = 1} : (tensor<2x4xf32>) -> tensor<2x1xi64>
  %2 = "onnx.ArgMin"(%x) {axis = 0} : (tensor<2x4xf32>) -> tensor<1x4xi64>
  return %0, %1, %2 : tensor<2xi64>, tensor<2x1xi64>, tensor<1x4xi64>
}"#,
        &[],
    );
    let program = lower(&m);
    let x = [1.0f32, 3.0, 3.0, 0.0, -1.0, -1.0, -2.0, -1.0];
    let out = run(&m, &program, &[enc(&x)]);
    assert_eq!(dec::<i64>(&out[0]), vec![1, 0]);
    assert_eq!(dec::<i64>(&out[1]), vec![2, 3]);
    assert_eq!(dec::<i64>(&out[2]), vec![1, 1, 1, 1]);
}

// ---------------------------------------------------------------------------------------------
// Softmax and normalizations.

#[test]
fn softmax_and_log_softmax_over_a_middle_axis() {
    let m = model(
        r#"func.func @f(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %0 = "onnx.Softmax"(%x) {axis = 1} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = "onnx.LogSoftmax"(%x) {axis = 1} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0, %1 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
}"#,
        &[],
    );
    let program = lower(&m);
    let x = values(24, 14);
    let out = run(&m, &program, &[enc(&x)]);
    let mut soft = vec![0.0; 24];
    for i in 0..2 {
        for k in 0..4 {
            let at = |j: usize| i * 12 + j * 4 + k;
            let s: f64 = (0..3).map(|j| f64::from(x[at(j)]).exp()).sum();
            for j in 0..3 {
                soft[at(j)] = f64::from(x[at(j)]).exp() / s;
            }
        }
    }
    assert_close(&f32_out(&out[0]), &soft);
    assert_close(
        &f32_out(&out[1]),
        &soft.iter().map(|v| v.ln()).collect::<Vec<_>>(),
    );
}

#[test]
fn layer_normalization_with_statistics() {
    let m = model(
        r#"func.func @f(%x: tensor<3x4xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x1xf32>, tensor<3x1xf32>) {
  %0:3 = "onnx.LayerNormalization"(%x, %s, %b) {epsilon = 0.001} : (tensor<3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x1xf32>, tensor<3x1xf32>)
  return %0#0, %0#1, %0#2 : tensor<3x4xf32>, tensor<3x1xf32>, tensor<3x1xf32>
}"#,
        &[],
    );
    let program = lower(&m);
    let (x, s, b) = (values(12, 15), values(4, 16), values(4, 17));
    let out = run(&m, &program, &[enc(&x), enc(&s), enc(&b)]);
    let (mut y, mut means, mut invs) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..3 {
        let row: Vec<f64> = x[r * 4..r * 4 + 4].iter().map(|&v| f64::from(v)).collect();
        let mean = row.iter().sum::<f64>() / 4.0;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 4.0;
        let inv = 1.0 / (var + 0.001).sqrt();
        y.extend((0..4).map(|c| (row[c] - mean) * inv * f64::from(s[c]) + f64::from(b[c])));
        means.push(mean);
        invs.push(inv);
    }
    assert_close(&f32_out(&out[0]), &y);
    assert_close(&f32_out(&out[1]), &means);
    assert_close(&f32_out(&out[2]), &invs);
}

#[test]
fn batch_normalization_in_inference_mode() {
    let m = model(
        r#"func.func @f(%x: tensor<2x3x2xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %mean: tensor<3xf32>, %var: tensor<3xf32>) -> tensor<2x3x2xf32> {
  %0 = "onnx.BatchNormalization"(%x, %s, %b, %mean, %var) : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2xf32>
  return %0 : tensor<2x3x2xf32>
}"#,
        &[],
    );
    let program = lower(&m);
    let x = values(12, 18);
    let (s, b, mean) = (values(3, 19), values(3, 20), values(3, 21));
    let var = [0.5f32, 1.0, 2.0];
    let out = run(
        &m,
        &program,
        &[enc(&x), enc(&s), enc(&b), enc(&mean), enc(&var)],
    );
    let want: Vec<f64> = (0..12)
        .map(|i| {
            let c = i / 2 % 3;
            let f = |v: f32| f64::from(v);
            f(s[c]) * (f(x[i]) - f(mean[c])) / (f(var[c]) + 1e-5).sqrt() + f(b[c])
        })
        .collect();
    assert_close(&f32_out(&out[0]), &want);
}

// ---------------------------------------------------------------------------------------------
// Cumulative ops.

#[test]
fn cumsum_with_a_constant_axis_reverse_and_exclusive() {
    let m = model(
        r#"func.func @f(%x: tensor<2x3xi64>) -> (tensor<2x3xi64>, tensor<2x3xi64>) {
  %axis = "memc.weight"() {value = dense_resource<"axis"> : tensor<i32>} : () -> tensor<i32>
  %0 = "onnx.CumSum"(%x, %axis) : (tensor<2x3xi64>, tensor<i32>) -> tensor<2x3xi64>
  %1 = "onnx.CumSum"(%x, %axis) {exclusive = 1, reverse = 1} : (tensor<2x3xi64>, tensor<i32>) -> tensor<2x3xi64>
  return %0, %1 : tensor<2x3xi64>, tensor<2x3xi64>
}"#,
        &[("axis", enc(&[1i32]))],
    );
    let program = lower(&m);
    let x = [1i64, 2, 3, 4, 5, 6];
    let out = run(&m, &program, &[enc(&x)]);
    assert_eq!(dec::<i64>(&out[0]), vec![1, 3, 6, 4, 9, 15]);
    assert_eq!(dec::<i64>(&out[1]), vec![5, 3, 0, 11, 6, 0]);
}

#[test]
fn cumprod_with_an_axis_known_only_at_run_time() {
    let m = model(
        r#"func.func @f(%x: tensor<2x3xf64>, %axis: tensor<i64>) -> tensor<2x3xf64> {
  %0 = "onnx.CumProd"(%x, %axis) : (tensor<2x3xf64>, tensor<i64>) -> tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}"#,
        &[],
    );
    let program = lower(&m);
    let x = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0];
    let run_axis = |axis: i64| dec::<f64>(&run(&m, &program, &[enc(&x), enc(&[axis])])[0]);
    assert_close(&run_axis(0), &[1.0, 2.0, 3.0, 4.0, 10.0, 18.0]);
    assert_close(&run_axis(1), &[1.0, 2.0, 6.0, 4.0, 20.0, 120.0]);
    assert_close(&run_axis(-1), &[1.0, 2.0, 6.0, 4.0, 20.0, 120.0]);
}

// ---------------------------------------------------------------------------------------------
// Loop shapes.

/// The outer and inner extents of the only kernel of `program`.
fn loop_extents(program: &Program) -> (Vec<u64>, Vec<u64>) {
    let kernels: Vec<_> = program.kernels().collect();
    assert_eq!(kernels.len(), 1);
    let KernelBody::Loop(lk) = &kernels[0].body else {
        panic!("a loop kernel")
    };
    (lk.outer.clone(), lk.inner.clone())
}

#[test]
fn contiguous_axes_merge_into_long_rows() {
    // Elementwise: the unit axis goes, the two spatial axes become one row per channel.
    let m = model(
        r#"func.func @f(%x: tensor<1x64x56x56xf32>, %b: tensor<64x1x1xf32>) -> tensor<1x64x56x56xf32> {
  %0 = "onnx.Add"(%x, %b) : (tensor<1x64x56x56xf32>, tensor<64x1x1xf32>) -> tensor<1x64x56x56xf32>
  return %0 : tensor<1x64x56x56xf32>
}"#,
        &[],
    );
    assert_eq!(loop_extents(&lower(&m)), (vec![64, 3136], vec![]));
    // A reduction over the trailing axes: one outer axis, one inner axis.
    let m = model(
        r#"func.func @f(%x: tensor<2x3x4x5xf32>) -> tensor<2x3x1x1xf32> {
  %0 = "onnx.ReduceMean"(%x) {axes = [2, 3]} : (tensor<2x3x4x5xf32>) -> tensor<2x3x1x1xf32>
  return %0 : tensor<2x3x1x1xf32>
}"#,
        &[],
    );
    let program = lower(&m);
    assert_eq!(loop_extents(&program), (vec![6], vec![20]));
    let x = values(120, 22);
    let want: Vec<f64> = (0..6)
        .map(|r| {
            x[r * 20..r * 20 + 20]
                .iter()
                .map(|&v| f64::from(v))
                .sum::<f64>()
                / 20.0
        })
        .collect();
    assert_close(&f32_out(&run(&m, &program, &[enc(&x)])[0]), &want);
}

/// The byte offsets of the weight views the one kernel of the `Add` step reads, and the slot of
/// weight `w`.
fn add_weight_reads(text: &str, weights: &[(&str, Vec<u8>)]) -> (Vec<i64>, u64) {
    let program = lower(&model(text, weights));
    let step = program
        .steps
        .iter()
        .find(|s| s.op.starts_with("onnx.Add"))
        .expect("the Add has a step");
    let KernelBody::Loop(kernel) = &step.kernels[0].body else {
        panic!("the Add is a loop kernel");
    };
    let reads = kernel
        .views
        .iter()
        .filter(|v| v.region == Region::Weights)
        .map(|v| v.byte_offset)
        .collect();
    let slot = program
        .weights
        .iter()
        .find(|s| s.name == "w")
        .expect("the weight has a slot")
        .byte_offset;
    (reads, slot)
}

#[test]
fn a_transpose_of_unit_dims_of_a_weight_reads_the_weight() {
    let (reads, slot) = add_weight_reads(
        r#"func.func @f(%x: tensor<4x1xf32>) -> tensor<4x1xf32> {
  %w = "memc.weight"() {value = dense_resource<"w"> : tensor<1x4xf32>} : () -> tensor<1x4xf32>
  %t = "onnx.Transpose"(%w) {perm = [1, 0]} : (tensor<1x4xf32>) -> tensor<4x1xf32>
  %y = "onnx.Add"(%x, %t) : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  return %y : tensor<4x1xf32>
}"#,
        &[("w", vec![0; 16])],
    );
    assert_eq!(reads, [slot as i64]);
}

#[test]
fn a_contiguous_slice_of_a_weight_reads_from_its_offset() {
    let (reads, slot) = add_weight_reads(
        r#"func.func @f(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %w = "memc.weight"() {value = dense_resource<"w"> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %s = "memc.weight"() {value = dense_resource<"s"> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = "memc.weight"() {value = dense_resource<"e"> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = "memc.weight"() {value = dense_resource<"a"> : tensor<1xi64>} : () -> tensor<1xi64>
  %v = "onnx.Slice"(%w, %s, %e, %a) : (tensor<4x2xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2xf32>
  %y = "onnx.Add"(%x, %v) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}"#,
        &[
            ("w", vec![0; 32]),
            ("s", enc(&[1i64])),
            ("e", enc(&[3i64])),
            ("a", enc(&[0i64])),
        ],
    );
    // Rows 1 and 2 of a [4, 2] f32 weight start 8 bytes in.
    assert_eq!(reads, [slot as i64 + 8]);
}

#[test]
fn a_value_the_plan_gives_no_place_is_reported_as_a_memc_bug() {
    let mut m = model(
        r#"func.func @f(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %r = "onnx.Relu"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = "onnx.Transpose"(%r) {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}"#,
        &[],
    );
    let (_, func) = m.module.functions().next().expect("one function");
    let relu = func
        .layout()
        .block_ops(func.entry_block())
        .iter()
        .copied()
        .find(|&op| func.op(op).opcode.name() == "onnx.Relu")
        .expect("the Relu");
    let value = func.op(relu).results[0];
    // A planner that forgot the Relu's result: lowering must not call that an unsupported op.
    m.plan.buffers.retain(|b| b.value != value);
    let err = lower_function(func, &m.module.weights, &m.plan)
        .err()
        .expect("lowering fails");
    let text = format!("{err:?}");
    assert!(text.contains("internal error (a bug in memc"), "{text}");
    assert!(text.contains("result #0 of onnx.Relu"), "{text}");
    assert!(!text.contains("cannot lower"), "{text}");
}
