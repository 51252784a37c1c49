//! Ops with a data-dependent output extent (NonZero, Compress, Unique) end to end: textual IR
//! compiled, written as a plan file, loaded and run by the runtime on the CPU backend, and run by
//! the reference backend; the outputs come back trimmed to the extent of each run, from none
//! (extent 0) to all (extent = the bound). `docs/dynamic-extents.md` describes the mechanism.

use memc_runtime::{Session, Tensor, TensorRef};

/// Compiles `text` and loads its plan.
fn session(test: &str, text: &str) -> (Session, memc_codegen::Program) {
    let options = memc::compile::CompileOptions {
        lower: true,
        ..Default::default()
    };
    let compiled = memc::compile::compile_text(text, &options)
        .unwrap_or_else(|d| panic!("compile: {}", d[0].message));
    let program = compiled.program.clone().expect("a program");
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("extents");
    std::fs::create_dir_all(&dir).expect("the target tmpdir is writable");
    let path = dir.join(format!("{test}.plan"));
    let meta = memc_runtime::plan::PlanMeta::new("extents.mlir", "cpu", program.clone());
    memc_runtime::write_plan(&path, &meta, &compiled.module.weights).expect("plan written");
    (Session::load(&path).expect("plan loads"), program)
}

fn i64s(t: &Tensor) -> Vec<i64> {
    t.data()
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.data()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The reference backend's outputs for one f32 input, as (shape, bytes).
fn reference(program: &memc_codegen::Program, x: &[f32]) -> Vec<(Vec<u64>, Vec<u8>)> {
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    memc_codegen::reference::run_outputs(program, &[], &[&bytes]).expect("reference runs")
}

const NON_ZERO: &str = r#"
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=6"]>> {
  %0 = "onnx.NonZero"(%x) : (tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=6"]>>
  return %0 : tensor<2x?xi64, #memc.dims<["<=6"]>>
}
"#;

#[test]
fn non_zero_of_all_zeros_has_extent_zero_and_of_all_non_zeros_the_bound() {
    let (mut s, program) = session("non_zero", NON_ZERO);
    assert_eq!(program.outputs[0].shape, [2, 6], "planned for the bound");
    let mut run = |x: [f32; 6]| {
        let out = s
            .run(&[("input0", TensorRef::from_slice(&[2, 3], &x).unwrap())])
            .unwrap();
        (out[0].shape().to_vec(), i64s(&out[0]))
    };
    assert_eq!(run([0.0; 6]), (vec![2, 0], vec![]));
    assert_eq!(
        run([1.0, -2.0, 3.0, f32::NAN, 5.0, 6.0]),
        (vec![2, 6], vec![0, 0, 0, 1, 1, 1, 0, 1, 2, 0, 1, 2])
    );
    assert_eq!(
        run([0.0, 7.0, 0.0, 0.0, 0.0, -0.5]),
        (vec![2, 2], vec![0, 1, 1, 2])
    );
    // A run after a larger one: nothing of the earlier run's extent is left.
    assert_eq!(run([0.0; 6]), (vec![2, 0], vec![]));
    // The reference backend agrees.
    let (shape, _) = &reference(&program, &[0.0; 6])[0];
    assert_eq!(shape, &[2, 0]);
    let (shape, bytes) = &reference(&program, &[0.0, 7.0, 0.0, 0.0, 0.0, -0.5])[0];
    assert_eq!(shape, &[2, 2]);
    assert_eq!(bytes.len(), 4 * 8);
}

#[test]
fn compress_keeps_the_slices_its_condition_names() {
    let text = r#"
func.func @main(%x: tensor<2x3xf32>, %c: tensor<3xi1>) -> (tensor<2x?xf32, #memc.dims<["<=3"]>>, tensor<?xf32, #memc.dims<["<=3"]>>) {
  %0 = "onnx.Compress"(%x, %c) {axis = 1} : (tensor<2x3xf32>, tensor<3xi1>) -> tensor<2x?xf32, #memc.dims<["<=3"]>>
  %1 = "onnx.Compress"(%x, %c) : (tensor<2x3xf32>, tensor<3xi1>) -> tensor<?xf32, #memc.dims<["<=3"]>>
  return %0, %1 : tensor<2x?xf32, #memc.dims<["<=3"]>>, tensor<?xf32, #memc.dims<["<=3"]>>
}
"#;
    let (mut s, _) = session("compress", text);
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut run = |c: [bool; 3]| {
        let c: Vec<u8> = c.iter().map(|&b| u8::from(b)).collect();
        let out = s
            .run(&[
                ("input0", TensorRef::from_slice(&[2, 3], &x).unwrap()),
                (
                    "input1",
                    TensorRef::new(memc_codegen::Scalar::Bool, &[3], &c).unwrap(),
                ),
            ])
            .unwrap();
        (
            (out[0].shape().to_vec(), f32s(&out[0])),
            (out[1].shape().to_vec(), f32s(&out[1])),
        )
    };
    assert_eq!(run([false; 3]), ((vec![2, 0], vec![]), (vec![0], vec![])));
    assert_eq!(
        run([true, false, true]),
        (
            (vec![2, 2], vec![1.0, 3.0, 4.0, 6.0]),
            (vec![2], vec![1.0, 3.0])
        )
    );
    assert_eq!(
        run([true; 3]),
        ((vec![2, 3], x.to_vec()), (vec![3], vec![1.0, 2.0, 3.0]))
    );
}

#[test]
fn unique_of_equal_and_of_distinct_elements() {
    let text = r#"
func.func @main(%x: tensor<4xf32>) -> (tensor<?xf32, #memc.dims<["<=4"]>>, tensor<?xi64, #memc.dims<["<=4"]>>, tensor<4xi64>, tensor<?xi64, #memc.dims<["<=4"]>>) {
  %0:4 = "onnx.Unique"(%x) : (tensor<4xf32>) -> (tensor<?xf32, #memc.dims<["<=4"]>>, tensor<?xi64, #memc.dims<["<=4"]>>, tensor<4xi64>, tensor<?xi64, #memc.dims<["<=4"]>>)
  return %0#0, %0#1, %0#2, %0#3 : tensor<?xf32, #memc.dims<["<=4"]>>, tensor<?xi64, #memc.dims<["<=4"]>>, tensor<4xi64>, tensor<?xi64, #memc.dims<["<=4"]>>
}
"#;
    let (mut s, _) = session("unique", text);
    let mut run = |x: [f32; 4]| {
        let out = s
            .run(&[("input0", TensorRef::from_slice(&[4], &x).unwrap())])
            .unwrap();
        (f32s(&out[0]), i64s(&out[1]), i64s(&out[2]), i64s(&out[3]))
    };
    assert_eq!(
        run([2.0; 4]),
        (vec![2.0], vec![0], vec![0, 0, 0, 0], vec![4])
    );
    assert_eq!(
        run([3.0, 1.0, 4.0, 2.0]),
        (
            vec![1.0, 2.0, 3.0, 4.0],
            vec![1, 3, 0, 2],
            vec![2, 0, 3, 1],
            vec![1, 1, 1, 1]
        )
    );
}

#[test]
fn a_bounded_value_read_by_another_op_is_a_verifier_error() {
    let text = r#"
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=6"]>> {
  %0 = "onnx.NonZero"(%x) : (tensor<2x3xf32>) -> tensor<2x?xi64, #memc.dims<["<=6"]>>
  %1 = "onnx.Abs"(%0) : (tensor<2x?xi64, #memc.dims<["<=6"]>>) -> tensor<2x?xi64, #memc.dims<["<=6"]>>
  return %1 : tensor<2x?xi64, #memc.dims<["<=6"]>>
}
"#;
    let options = memc::compile::CompileOptions {
        lower: true,
        ..Default::default()
    };
    let errors = match memc::compile::compile_text(text, &options) {
        Ok(_) => panic!("a bounded operand of Abs must be refused"),
        Err(errors) => errors,
    };
    assert_eq!(
        errors[0].message,
        "`onnx.Abs`: operand #0 has type tensor<2x?xi64, #memc.dims<[\"<=6\"]>>, whose bounded dim is known only at run time, and this op does not accept one (only `func.return` does: a bounded value may only be a graph output)"
    );
}

#[test]
fn top_k_with_k_from_data_returns_k_of_the_axis() {
    let text = r#"
func.func @main(%x: tensor<2x4xf32>, %k: tensor<1xi64>) -> (tensor<2x?xf32, #memc.dims<["<=4"]>>, tensor<2x?xi64, #memc.dims<["<=4"]>>) {
  %0:2 = "onnx.TopK"(%x, %k) {axis = 1} : (tensor<2x4xf32>, tensor<1xi64>) -> (tensor<2x?xf32, #memc.dims<["<=4"]>>, tensor<2x?xi64, #memc.dims<["<=4"]>>)
  return %0#0, %0#1 : tensor<2x?xf32, #memc.dims<["<=4"]>>, tensor<2x?xi64, #memc.dims<["<=4"]>>
}
"#;
    let (mut s, _) = session("top_k", text);
    let x = [3.0f32, 1.0, 4.0, 2.0, 5.0, 9.0, 2.0, 6.0];
    let mut run = |k: i64| {
        let out = s
            .run(&[
                ("input0", TensorRef::from_slice(&[2, 4], &x).unwrap()),
                ("input1", TensorRef::from_slice(&[1], &[k]).unwrap()),
            ])
            .unwrap();
        (out[0].shape().to_vec(), f32s(&out[0]), i64s(&out[1]))
    };
    assert_eq!(run(0), (vec![2, 0], vec![], vec![]));
    assert_eq!(
        run(2),
        (vec![2, 2], vec![4.0, 3.0, 9.0, 6.0], vec![2, 0, 1, 3])
    );
    assert_eq!(
        run(4),
        (
            vec![2, 4],
            vec![4.0, 3.0, 2.0, 1.0, 9.0, 6.0, 5.0, 2.0],
            vec![2, 0, 3, 1, 1, 3, 0, 2]
        )
    );
    // K past the axis length is clamped to it (onnxruntime refuses such a K).
    assert_eq!(run(7).0, vec![2, 4]);
}
