//! Lowering of the scatters (ScatterElements, ScatterND, TensorScatter), run end to end: small
//! models in memc's text IR are planned, lowered and run through the CPU backend and the
//! reference backend (which must agree), and the results are compared with references
//! computed here. The indices hold what the node tests do not: repeats (applied in index
//! order, the last write winning without a reduction), negative indices, and indices out of
//! range, which write nothing.

mod common;

use common::models::{f32_bytes, f32_values, lower_text, run_both, weights_section};

/// Parses, verifies, plans and lowers `text`, runs it on `inputs` through both backends and
/// returns the bytes of its one output.
fn run(text: &str, inputs: &[Vec<u8>]) -> Vec<u8> {
    let (module, program) = lower_text(text);
    let weights = weights_section(&program, &module.weights);
    let mut outputs = run_both(&program, &weights, inputs);
    assert_eq!(outputs.len(), 1, "one output");
    outputs.remove(0)
}

fn i64_bytes(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn i32_bytes(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().expect("four bytes")))
        .collect()
}

/// `index` wrapped into `0..n` when negative, `None` outside `[-n, n)`.
fn position(index: i64, n: usize) -> Option<usize> {
    let n = n as i64;
    let wrapped = if index < 0 { index + n } else { index };
    (0..n).contains(&wrapped).then_some(wrapped as usize)
}

#[test]
fn scatter_elements_overwrites_in_index_order_and_skips_indices_out_of_range() {
    // data [3, 5], indices and updates [2, 4] along axis 1: repeats (1 twice in row 0, the
    // last write winning), negative indices (-1 is 4, -5 is 0), and 5 and -6 out of range.
    let text = r#"
func.func @f(%d: tensor<3x5xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>) -> tensor<3x5xf32> {
  %0 = "onnx.ScatterElements"(%d, %i, %u) {axis = 1} : (tensor<3x5xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}
"#;
    let data: Vec<f32> = (0..15).map(|v| v as f32).collect();
    let indices: [i64; 8] = [1, -1, 1, 5, -5, 2, -6, 3];
    let updates: Vec<f32> = (0..8).map(|v| 100.0 + v as f32).collect();
    let got = f32_values(&run(
        text,
        &[f32_bytes(&data), i64_bytes(&indices), f32_bytes(&updates)],
    ));
    let mut want = data.clone();
    for r in 0..2 {
        for c in 0..4 {
            if let Some(col) = position(indices[r * 4 + c], 5) {
                want[r * 5 + col] = updates[r * 4 + c];
            }
        }
    }
    assert_eq!(got, want);
}

#[test]
fn scatter_elements_reductions_on_integers() {
    // i32 data [3, 2], indices and updates [4, 2] along axis 0 (repeats in each column).
    let indices: [i64; 8] = [0, 2, 0, 2, -1, 1, 7, 2];
    let data: [i32; 6] = [5, -5, 10, 20, -3, 7];
    let updates: [i32; 8] = [9, -9, 2, 3, -4, 1, 50, 6];
    for (reduction, combine) in [
        (
            "add",
            (|a: i32, b: i32| a.wrapping_add(b)) as fn(i32, i32) -> i32,
        ),
        ("mul", |a, b| a.wrapping_mul(b)),
        ("max", |a: i32, b: i32| a.max(b)),
        ("min", |a: i32, b: i32| a.min(b)),
    ] {
        let text = format!(
            r#"
func.func @f(%d: tensor<3x2xi32>, %i: tensor<4x2xi64>, %u: tensor<4x2xi32>) -> tensor<3x2xi32> {{
  %0 = "onnx.ScatterElements"(%d, %i, %u) {{axis = 0, reduction = "{reduction}"}} : (tensor<3x2xi32>, tensor<4x2xi64>, tensor<4x2xi32>) -> tensor<3x2xi32>
  return %0 : tensor<3x2xi32>
}}
"#
        );
        let got = i32s(&run(
            &text,
            &[i32_bytes(&data), i64_bytes(&indices), i32_bytes(&updates)],
        ));
        let mut want = data.to_vec();
        for r in 0..4 {
            for c in 0..2 {
                if let Some(row) = position(indices[r * 2 + c], 3) {
                    want[row * 2 + c] = combine(want[row * 2 + c], updates[r * 2 + c]);
                }
            }
        }
        assert_eq!(got, want, "reduction {reduction}");
    }
}

#[test]
fn scatter_nd_adds_slices_at_two_level_indices() {
    // data [3, 4, 2], indices [5, 2] (repeats, a negative index, one out of range in either
    // component), updates [5, 2], reduction add.
    let text = r#"
func.func @f(%d: tensor<3x4x2xf32>, %i: tensor<5x2xi64>, %u: tensor<5x2xf32>) -> tensor<3x4x2xf32> {
  %0 = "onnx.ScatterND"(%d, %i, %u) {reduction = "add"} : (tensor<3x4x2xf32>, tensor<5x2xi64>, tensor<5x2xf32>) -> tensor<3x4x2xf32>
  return %0 : tensor<3x4x2xf32>
}
"#;
    let data: Vec<f32> = (0..24).map(|v| v as f32).collect();
    let indices: [i64; 10] = [1, 2, -1, 0, 1, 2, 3, 0, 0, -5];
    let updates: Vec<f32> = (0..10).map(|v| 0.5 + v as f32).collect();
    let got = f32_values(&run(
        text,
        &[f32_bytes(&data), i64_bytes(&indices), f32_bytes(&updates)],
    ));
    let mut want = data.clone();
    for p in 0..5 {
        let (Some(a), Some(b)) = (position(indices[2 * p], 3), position(indices[2 * p + 1], 4))
        else {
            continue;
        };
        for c in 0..2 {
            want[(a * 4 + b) * 2 + c] += updates[p * 2 + c];
        }
    }
    assert_eq!(got, want);
}

#[test]
fn tensor_scatter_writes_from_each_batch_entrys_index() {
    // past [2, 4, 3], update [2, 2, 3] along axis 1; batch 0 writes at 1 and 2, batch 1 at 3
    // and 4: linear mode skips position 4, circular mode wraps it to 0.
    let past: Vec<f32> = (0..24).map(|v| v as f32).collect();
    let update: Vec<f32> = (0..12).map(|v| -1.0 - v as f32).collect();
    let write_indices: [i64; 2] = [1, 3];
    for mode in ["linear", "circular"] {
        let text = format!(
            r#"
func.func @f(%p: tensor<2x4x3xf32>, %u: tensor<2x2x3xf32>, %w: tensor<2xi64>) -> tensor<2x4x3xf32> {{
  %0 = "onnx.TensorScatter"(%p, %u, %w) {{axis = 1, mode = "{mode}"}} : (tensor<2x4x3xf32>, tensor<2x2x3xf32>, tensor<2xi64>) -> tensor<2x4x3xf32>
  return %0 : tensor<2x4x3xf32>
}}
"#
        );
        let got = f32_values(&run(
            &text,
            &[
                f32_bytes(&past),
                f32_bytes(&update),
                i64_bytes(&write_indices),
            ],
        ));
        let mut want = past.clone();
        for b in 0..2 {
            for s in 0..2 {
                let mut at = write_indices[b] as usize + s;
                if mode == "circular" {
                    at %= 4;
                }
                if at >= 4 {
                    continue;
                }
                for c in 0..3 {
                    want[(b * 4 + at) * 3 + c] = update[(b * 2 + s) * 3 + c];
                }
            }
        }
        assert_eq!(got, want, "mode {mode}");
    }
}
