//! DFT's lowering against a plain `f64` transform written here: forward and inverse, real and
//! complex inputs, one-sided forward (rfft) and inverse (irfft) forms, on lengths the node
//! tests do not use (odd ones, 1, a one-sided spectrum of an odd length). Each runs through
//! the CPU backend and the bounds-checking reference backend, which must agree.

mod common;

use common::models::{f32_bytes, f32_values, lower_text, run_both, weights_section};
use std::f64::consts::PI;

/// Runs DFT over `(batch, n, components)` with `attrs` into `(batch, m, out_components)`.
fn run(
    batch: u64,
    n: u64,
    components: u64,
    m: u64,
    out_components: u64,
    attrs: &str,
) -> (Vec<f32>, Vec<f32>) {
    let x_ty = format!("tensor<{batch}x{n}x{components}xf32>");
    let y_ty = format!("tensor<{batch}x{m}x{out_components}xf32>");
    let text = format!(
        "func.func @main(%x: {x_ty}) -> {y_ty} {{\n  %0 = \"onnx.DFT\"(%x) {{{attrs}}} : ({x_ty}) -> {y_ty}\n  return %0 : {y_ty}\n}}\n"
    );
    let (module, program) = lower_text(&text);
    let count = (batch * n * components) as usize;
    let x: Vec<f32> = (0..count)
        .map(|i| ((i * 7 + 3) % 11) as f32 - 5.0 + 0.25 * (i % 3) as f32)
        .collect();
    let weights = weights_section(&program, &module.weights);
    let out = run_both(&program, &weights, &[f32_bytes(&x)]);
    (x, f32_values(&out[0]))
}

/// The complex value of point `i` of row `b` of a `(batch, n, components)` input.
fn point(x: &[f32], n: usize, components: usize, b: usize, i: usize) -> (f64, f64) {
    let at = (b * n + i) * components;
    let re = f64::from(x[at]);
    let im = if components == 2 {
        f64::from(x[at + 1])
    } else {
        0.0
    };
    (re, im)
}

fn close(got: f32, want: f64) {
    assert!(
        (f64::from(got) - want).abs() <= 1e-4 + 1e-4 * want.abs(),
        "got {got}, want {want}"
    );
}

#[test]
fn full_transforms_match_the_definition() {
    for n in [1usize, 2, 5, 7, 8] {
        for components in [1usize, 2] {
            for inverse in [0, 1] {
                let attrs = format!("inverse = {inverse}");
                let (x, y) = run(2, n as u64, components as u64, n as u64, 2, &attrs);
                let sign = if inverse == 1 { 1.0 } else { -1.0 };
                let scale = if inverse == 1 { 1.0 / n as f64 } else { 1.0 };
                for b in 0..2 {
                    for k in 0..n {
                        let (mut re, mut im) = (0.0, 0.0);
                        for i in 0..n {
                            let (xr, xi) = point(&x, n, components, b, i);
                            let angle = sign * 2.0 * PI * (k * i) as f64 / n as f64;
                            re += xr * angle.cos() - xi * angle.sin();
                            im += xr * angle.sin() + xi * angle.cos();
                        }
                        close(y[(b * n + k) * 2], re * scale);
                        close(y[(b * n + k) * 2 + 1], im * scale);
                    }
                }
            }
        }
    }
}

#[test]
fn one_sided_forms_match_numpy_rfft_and_irfft() {
    for n in [1usize, 4, 5, 8] {
        // rfft: n real points to n / 2 + 1 bins.
        let bins = n / 2 + 1;
        let (x, y) = run(1, n as u64, 1, bins as u64, 2, "onesided = 1");
        for k in 0..bins {
            let (mut re, mut im) = (0.0, 0.0);
            for i in 0..n {
                let angle = -2.0 * PI * (k * i) as f64 / n as f64;
                re += f64::from(x[i]) * angle.cos();
                im += f64::from(x[i]) * angle.sin();
            }
            close(y[2 * k], re);
            close(y[2 * k + 1], im);
        }
    }
    for bins in [2usize, 3, 5] {
        // irfft: bins one-sided points to 2 * (bins - 1) real points, the spectrum Hermitian.
        let n = 2 * (bins - 1);
        let (x, y) = run(1, bins as u64, 2, n as u64, 1, "inverse = 1, onesided = 1");
        for t in 0..n {
            let mut sum = 0.0;
            for k in 0..n {
                // The full spectrum: bin k, or the conjugate of bin n - k.
                let (re, im) = if k < bins {
                    point(&x, bins, 2, 0, k)
                } else {
                    let (re, im) = point(&x, bins, 2, 0, n - k);
                    (re, -im)
                };
                // numpy ignores the imaginary parts of bins 0 and n / 2.
                let im = if k == 0 || 2 * k == n { 0.0 } else { im };
                let angle = 2.0 * PI * (k * t) as f64 / n as f64;
                sum += re * angle.cos() - im * angle.sin();
            }
            close(y[t], sum / n as f64);
        }
    }
}
