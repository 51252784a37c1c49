//! GridSample's lowering on grids no exporter would write: NaN, infinities, coordinates far
//! outside X, integer-overflowing ones. Every mode, padding mode and `align_corners` runs
//! through the CPU backend and the reference backend (which bounds-checks every access and
//! stops on one outside a buffer); the two must agree, finite coordinates must give finite
//! values, and the values the padding modes promise far outside X are checked. The ONNX node
//! tests check the ordinary values against ONNX's reference implementation.

mod common;

use common::models::{f32_bytes, f32_values, lower_text, run_both, weights_section};

/// Normalized coordinates that stress the index arithmetic: NaN, infinities, values whose
/// denormalized index overflows `i32` and `i64`, and ordinary ones just inside and outside.
const HOSTILE: &[f32] = &[
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    1e30,
    -1e30,
    3e9,
    -3e9,
    1e10,
    -1e10,
    1.0,
    -1.0,
    0.0,
    0.999_999,
    -1.000_000_1,
    1e-40,
    2.5,
    -7.25,
    123.456,
    f32::MAX,
    f32::MIN,
];

/// Runs GridSample on X `shape` (values 1, 2, ...) and a grid of `points` points filled
/// cyclically from `coords` (offset by `shift`), and returns X and the output.
fn sample(
    shape: &[u64],
    points: &[u64],
    attrs: &str,
    coords: &[f32],
    shift: usize,
) -> (Vec<f32>, Vec<f32>) {
    let k = shape.len() - 2;
    let dims = |d: &[u64]| {
        d.iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join("x")
    };
    let x_ty = format!("tensor<{}xf32>", dims(shape));
    let mut grid_shape = vec![shape[0]];
    grid_shape.extend_from_slice(points);
    grid_shape.push(k as u64);
    let grid_ty = format!("tensor<{}xf32>", dims(&grid_shape));
    let mut out_shape = shape[..2].to_vec();
    out_shape.extend_from_slice(points);
    let out_ty = format!("tensor<{}xf32>", dims(&out_shape));
    let text = format!(
        "func.func @main(%x: {x_ty}, %grid: {grid_ty}) -> {out_ty} {{\n  %0 = \"onnx.GridSample\"(%x, %grid) {{{attrs}}} : ({x_ty}, {grid_ty}) -> {out_ty}\n  return %0 : {out_ty}\n}}\n"
    );
    let (module, program) = lower_text(&text);
    let x: Vec<f32> = (1..=shape.iter().product::<u64>())
        .map(|v| v as f32)
        .collect();
    let n_grid = grid_shape.iter().product::<u64>() as usize;
    let grid: Vec<f32> = (0..n_grid)
        .map(|i| coords[(i + shift) % coords.len()])
        .collect();
    let weights = weights_section(&program, &module.weights);
    let out = run_both(&program, &weights, &[f32_bytes(&x), f32_bytes(&grid)]);
    (x, f32_values(&out[0]))
}

fn attrs(mode: &str, padding: &str, align: i64) -> String {
    format!("align_corners = {align}, mode = \"{mode}\", padding_mode = \"{padding}\"")
}

#[test]
fn hostile_grids_read_only_inside_x_in_every_mode() {
    for mode in ["nearest", "linear", "cubic"] {
        for padding in ["zeros", "border", "reflection"] {
            for align in [0, 1] {
                for shift in [0, 1] {
                    let a = attrs(mode, padding, align);
                    sample(&[1, 2, 3, 4], &[5, 4], &a, HOSTILE, shift);
                    // Axes of size 1: the reflection range is empty with align_corners.
                    sample(&[2, 1, 1, 1], &[3, 2], &a, HOSTILE, shift);
                }
            }
        }
    }
    for mode in ["nearest", "linear", "cubic"] {
        for padding in ["zeros", "border", "reflection"] {
            sample(
                &[1, 2, 2, 3, 4],
                &[2, 3, 3],
                &attrs(mode, padding, 0),
                HOSTILE,
                0,
            );
        }
    }
}

/// Coordinates whose denormalized values are finite give finite values.
#[test]
fn finite_coordinates_give_finite_values() {
    // f32::MAX and MIN denormalize to infinities in f32 (as in the reference), so they stay out.
    let finite: Vec<f32> = HOSTILE
        .iter()
        .copied()
        .filter(|v| v.is_finite() && v.abs() < 1e37)
        .collect();
    for mode in ["nearest", "linear", "cubic"] {
        for padding in ["zeros", "border", "reflection"] {
            for align in [0, 1] {
                let a = attrs(mode, padding, align);
                let (_, out) = sample(&[1, 2, 3, 4], &[6, 3], &a, &finite, 0);
                assert!(
                    out.iter().all(|v| v.is_finite()),
                    "{a}: a non-finite value from finite coordinates: {out:?}"
                );
            }
        }
    }
}

#[test]
fn far_outside_x_the_padding_modes_hold() {
    // X is 1x1x3x4 with values 1..=12; every point is (x, y) = (1e10, -1e10): past the right
    // edge and above the top.
    let far = [1e10f32, -1e10];
    for mode in ["nearest", "linear", "cubic"] {
        for align in [0, 1] {
            let (_, zeros) = sample(
                &[1, 1, 3, 4],
                &[2, 2],
                &attrs(mode, "zeros", align),
                &far,
                0,
            );
            assert_eq!(zeros, [0.0; 4], "{mode} zeros, align_corners {align}");
            let (_, border) = sample(
                &[1, 1, 3, 4],
                &[2, 2],
                &attrs(mode, "border", align),
                &far,
                0,
            );
            // The top right pixel: row 0, column 3.
            assert_eq!(border, [4.0; 4], "{mode} border, align_corners {align}");
            let (x, reflected) = sample(
                &[1, 1, 3, 4],
                &[2, 2],
                &attrs(mode, "reflection", align),
                &far,
                0,
            );
            let (lo, hi) = (x[0], x[x.len() - 1]);
            assert!(
                reflected
                    .iter()
                    .all(|&v| v.is_finite() && v >= lo - 2.0 && v <= hi + 2.0),
                "{mode} reflection, align_corners {align}: {reflected:?}"
            );
        }
    }
}
