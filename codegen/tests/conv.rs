//! Conv and ConvTranspose lowerings against a naive reference, in every form: im2col into the
//! planned scratch memory, one contraction per kernel tap (the same cases planned without
//! scratch), and the direct loop kernel (depthwise, ConvTranspose with few channels). Each case
//! is one op in text IR with its weights as function arguments; the kernels run in the
//! reference backend (`memc_codegen::reference`, which bounds-checks every address), whose
//! results are compared with the naive reference, and in the CPU backend, which must agree
//! with the reference backend.

mod common;

use common::models::{
    assert_backends_agree, compile_module, compile_module_without_scratch, run_cpu, run_reference,
    weights_section, Compiled,
};
use memc_codegen::KernelBody;
use std::collections::HashMap;

/// A small deterministic generator (xorshift), values in [-1, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
    }

    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

fn ty(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("tensor<{}xf32>", dims.join("x"))
}

fn strides_of(shape: &[u64]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as usize;
    }
    s
}

/// Every index of `shape`, row-major.
fn points(shape: &[u64]) -> Vec<Vec<i64>> {
    let mut out = vec![Vec::new()];
    for &d in shape {
        out = out
            .into_iter()
            .flat_map(|p| (0..d as i64).map(move |i| [p.clone(), vec![i]].concat()))
            .collect();
    }
    out
}

struct Case {
    transpose: bool,
    x: Vec<u64>,
    w: Vec<u64>,
    bias: bool,
    group: u64,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    /// Begin pads then end pads.
    pads: Vec<i64>,
    output_padding: Vec<i64>,
    /// Whether the lowering should use a contraction form.
    taps: bool,
    /// Input elements (flat index) set to a huge value, to check that no form adds and then
    /// subtracts them again.
    huge: Vec<usize>,
}

/// How a case is planned.
#[derive(Copy, Clone, PartialEq, Debug)]
enum Planned {
    /// With the scratch memory codegen asks for, as `memc compile` plans.
    WithScratch,
    /// Without scratch: convolutions fall back to the per-tap products.
    WithoutScratch,
}

fn list(v: &[i64]) -> String {
    let items: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// Checks `case` planned both ways; returns whether the planned run used im2col.
fn check(case: &Case) -> bool {
    check_planned(case, Planned::WithoutScratch);
    check_planned(case, Planned::WithScratch)
}

/// Whether `compiled` lowered its convolution through im2col: the plan gave it scratch for the
/// column matrix (beside the GEMM's panels), which the lowering uses whenever it is there.
fn uses_im2col(compiled: &Compiled) -> bool {
    compiled.scratch_bytes > 0 && compiled.scratch_uses.iter().any(|u| u.contains("im2col"))
}

fn check_planned(case: &Case, planned: Planned) -> bool {
    let s = case.x.len() - 2;
    let op = if case.transpose {
        "onnx.ConvTranspose"
    } else {
        "onnx.Conv"
    };
    let m = if case.transpose {
        case.w[1] * case.group
    } else {
        case.w[0]
    };
    let mut attrs = format!(
        "dilations = {}, group = {}, pads = {}, strides = {}",
        list(&case.dilations),
        case.group,
        list(&case.pads),
        list(&case.strides)
    );
    if case.transpose {
        attrs += &format!(", output_padding = {}", list(&case.output_padding));
    }
    let (b_arg, b_use, b_ty) = if case.bias {
        (
            format!(", %b: {}", ty(&[m])),
            ", %b".to_string(),
            format!(", {}", ty(&[m])),
        )
    } else {
        (String::new(), String::new(), String::new())
    };
    let unknown = format!("tensor<{}xf32>", vec!["?"; s + 2].join("x"));
    let text = format!(
        "func.func @f(%x: {xt}, %w: {wt}{b_arg}) -> {unknown} {{\n  %0 = \"{op}\"(%x, %w{b_use}) {{{attrs}}} : ({xt}, {wt}{b_ty}) -> {unknown}\n  return %0 : {unknown}\n}}\n",
        xt = ty(&case.x),
        wt = ty(&case.w),
    );
    let mut module = memc_ir::parse_module(&text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
    memc_ir::infer::infer_module(&mut module, &HashMap::new()).expect("shapes infer");
    let compiled = match planned {
        Planned::WithScratch => compile_module(module),
        Planned::WithoutScratch => compile_module_without_scratch(module),
    }
    .expect("the op compiles");
    let im2col = uses_im2col(&compiled);
    if planned == Planned::WithoutScratch {
        assert!(!im2col, "no scratch, no im2col");
    }
    let contracts = compiled
        .program
        .kernels()
        .filter(|k| matches!(k.body, KernelBody::Contract(_)))
        .count();
    assert_eq!(
        contracts > 0,
        case.taps,
        "contraction form expected: {}",
        case.taps
    );
    let out_shape = compiled.program.outputs[0].shape.clone();

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut x = rng.vec(case.x.iter().product::<u64>() as usize);
    for &i in &case.huge {
        x[i] = 1e30;
    }
    let w = rng.vec(case.w.iter().product::<u64>() as usize);
    let b = rng.vec(m as usize);
    let bytes = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
    let mut inputs = vec![bytes(&x), bytes(&w)];
    if case.bias {
        inputs.push(bytes(&b));
    }
    let weights = weights_section(&compiled.program, &compiled.module.weights);
    let got = run_reference(&compiled.program, &weights, &inputs);
    let cpu = run_cpu(&compiled.program, &weights, &inputs);
    assert_backends_agree(&compiled.program, &cpu, &got);
    let got: Vec<f32> = got[0]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();

    // The reference, as a scatter over input positions and kernel taps.
    let mut want = vec![0f64; out_shape.iter().product::<u64>() as usize];
    let (xs, ws, ys) = (
        strides_of(&case.x),
        strides_of(&case.w),
        strides_of(&out_shape),
    );
    let (c_g, m_g) = if case.transpose {
        (case.w[0] / case.group, case.w[1])
    } else {
        (case.w[1], case.w[0] / case.group)
    };
    let kernel = &case.w[2..];
    for n in 0..case.x[0] as usize {
        for g in 0..case.group as usize {
            for mo in 0..m_g as usize {
                let co = g * m_g as usize + mo;
                for ci in 0..c_g as usize {
                    let cx = g * c_g as usize + ci;
                    let w_base = if case.transpose {
                        cx * ws[0] + mo * ws[1]
                    } else {
                        co * ws[0] + ci * ws[1]
                    };
                    for k in points(kernel) {
                        let wv = w[w_base
                            + k.iter()
                                .enumerate()
                                .map(|(i, &ki)| ki as usize * ws[2 + i])
                                .sum::<usize>()] as f64;
                        let positions = if case.transpose {
                            points(&case.x[2..])
                        } else {
                            points(&out_shape[2..])
                        };
                        for p in positions {
                            // Conv: p is the output, the input is p * s - pad + k * d.
                            // ConvTranspose: p is the input, the output is p * s + k * d - pad.
                            let other: Vec<i64> = (0..s)
                                .map(|i| {
                                    p[i] * case.strides[i] + k[i] * case.dilations[i] - case.pads[i]
                                })
                                .collect();
                            let (xi, yi) = if case.transpose {
                                (&p, &other)
                            } else {
                                (&other, &p)
                            };
                            let inside = |idx: &Vec<i64>, shape: &[u64]| {
                                idx.iter()
                                    .zip(&shape[2..])
                                    .all(|(&v, &d)| v >= 0 && v < d as i64)
                            };
                            if !inside(xi, &case.x) || !inside(yi, &out_shape) {
                                continue;
                            }
                            let xv = x[n * xs[0]
                                + cx * xs[1]
                                + xi.iter()
                                    .enumerate()
                                    .map(|(i, &v)| v as usize * xs[2 + i])
                                    .sum::<usize>()] as f64;
                            let at = n * ys[0]
                                + co * ys[1]
                                + yi.iter()
                                    .enumerate()
                                    .map(|(i, &v)| v as usize * ys[2 + i])
                                    .sum::<usize>();
                            want[at] += xv * wv;
                        }
                    }
                }
            }
        }
    }
    if case.bias {
        for (at, v) in want.iter_mut().enumerate() {
            *v += b[(at / ys[1]) % m as usize] as f64;
        }
    }
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-4 + 1e-4 * w.abs(),
            "{planned:?}, element {i}: got {g}, want {w}"
        );
    }
    im2col
}

fn conv(x: &[u64], w: &[u64], taps: bool) -> Case {
    let s = x.len() - 2;
    Case {
        transpose: false,
        x: x.to_vec(),
        w: w.to_vec(),
        bias: false,
        group: 1,
        strides: vec![1; s],
        dilations: vec![1; s],
        pads: vec![0; 2 * s],
        output_padding: vec![0; s],
        taps,
        huge: Vec::new(),
    }
}

#[test]
fn conv_3x3_padded_taps_first_tap_covers_all() {
    check(&Case {
        pads: vec![1, 1, 1, 1],
        ..conv(&[2, 8, 7, 6], &[8, 8, 3, 3], true)
    });
}

#[test]
fn conv_strided_dilated_asymmetric_pads_with_bias() {
    check(&Case {
        pads: vec![1, 0, 2, 1],
        strides: vec![2, 1],
        dilations: vec![2, 1],
        bias: true,
        ..conv(&[1, 8, 9, 7], &[12, 8, 3, 2], true)
    });
}

#[test]
fn conv_grouped_taps() {
    check(&Case {
        group: 2,
        pads: vec![1, 1, 1, 1],
        bias: true,
        ..conv(&[2, 16, 5, 5], &[16, 8, 3, 3], true)
    });
}

#[test]
fn conv_1x1_merges_spatial_into_columns() {
    check(&conv(&[2, 8, 4, 5], &[9, 8, 1, 1], true));
    check(&Case {
        strides: vec![2, 2],
        ..conv(&[2, 8, 5, 5], &[9, 8, 1, 1], true)
    });
}

#[test]
fn conv_1d_and_3d_taps() {
    check(&Case {
        pads: vec![2, 1],
        strides: vec![2],
        ..conv(&[2, 8, 11], &[8, 8, 4], true)
    });
    check(&Case {
        pads: vec![1, 0, 1, 0, 1, 1],
        ..conv(&[1, 8, 4, 3, 5], &[8, 8, 2, 3, 2], true)
    });
}

#[test]
fn conv_few_channels_and_depthwise() {
    check(&Case {
        pads: vec![1, 2, 0, 1],
        strides: vec![2, 1],
        bias: true,
        ..conv(&[2, 3, 7, 6], &[4, 3, 3, 3], true)
    });
    check(&Case {
        group: 3,
        pads: vec![1, 1, 1, 1],
        ..conv(&[1, 6, 5, 5], &[6, 2, 3, 3], true)
    });
    check(&Case {
        group: 4,
        pads: vec![1, 2, 0, 1],
        strides: vec![2, 1],
        bias: true,
        ..conv(&[2, 4, 7, 6], &[8, 1, 3, 3], false)
    });
}

#[test]
fn conv_transpose_taps() {
    let base = Case {
        transpose: true,
        ..conv(&[2, 8, 4, 3], &[8, 8, 2, 2], true)
    };
    check(&Case {
        strides: vec![2, 2],
        bias: true,
        ..base
    });
    check(&Case {
        transpose: true,
        strides: vec![2, 3],
        dilations: vec![1, 2],
        pads: vec![1, 0, 0, 2],
        output_padding: vec![1, 0],
        group: 2,
        ..conv(&[1, 16, 3, 4], &[16, 8, 3, 3], true)
    });
    check(&Case {
        transpose: true,
        pads: vec![1, 1, 1, 1],
        ..conv(&[1, 8, 5, 5], &[8, 8, 3, 3], true)
    });
}

#[test]
fn conv_transpose_direct() {
    check(&Case {
        transpose: true,
        strides: vec![2, 2],
        pads: vec![0, 1, 1, 0],
        bias: true,
        group: 2,
        ..conv(&[1, 2, 3, 3], &[2, 3, 3, 3], false)
    });
}

/// Same-width stride-1 convolutions (im2col with scratch, per-row tap products without): one
/// or two padded columns per side, asymmetric pads, a dilated row axis, an outer spatial axis,
/// a single row.
#[test]
fn conv_same_width_taps_over_whole_rows() {
    check(&Case {
        pads: vec![1, 1, 1, 1],
        bias: true,
        ..conv(&[2, 8, 6, 7], &[8, 8, 3, 3], true)
    });
    check(&Case {
        pads: vec![1, 2, 1, 2],
        dilations: vec![1, 2],
        ..conv(&[1, 8, 5, 7], &[6, 8, 3, 3], true)
    });
    check(&Case {
        pads: vec![0, 2, 1, 1],
        dilations: vec![2, 1],
        group: 2,
        ..conv(&[1, 8, 6, 5], &[4, 4, 2, 4], true)
    });
    check(&Case {
        pads: vec![1; 6],
        ..conv(&[1, 8, 3, 4, 5], &[8, 8, 3, 3, 3], true)
    });
    check(&Case {
        pads: vec![0, 1, 0, 1],
        ..conv(&[1, 8, 1, 6], &[8, 8, 1, 3], true)
    });
}

/// Strided convolutions with fewer input channels than kernel columns take one product per
/// (channel, kernel row) summing over the kernel columns, plus one per border column: a
/// 7x7-like stem, dilation and asymmetric pads, groups, and a kernel wider than the input (no
/// interior columns at all).
#[test]
fn conv_few_channels_kernel_row_products() {
    check(&Case {
        pads: vec![2, 2, 2, 2],
        strides: vec![2, 2],
        bias: true,
        ..conv(&[2, 3, 12, 11], &[5, 3, 5, 5], true)
    });
    check(&Case {
        pads: vec![1, 0, 2, 3],
        strides: vec![2, 3],
        dilations: vec![1, 2],
        ..conv(&[1, 2, 9, 10], &[4, 2, 3, 4], true)
    });
    check(&Case {
        group: 2,
        pads: vec![1, 1, 1, 1],
        strides: vec![2, 2],
        bias: true,
        ..conv(&[1, 4, 8, 9], &[6, 2, 3, 3], true)
    });
    check(&Case {
        pads: vec![0, 2, 1, 2],
        strides: vec![2, 1],
        ..conv(&[1, 2, 5, 3], &[3, 2, 2, 5], true)
    });
}

/// Planned with scratch, convolutions with enough work run through im2col; the forms that
/// need none (1x1 stride-1 unpadded, depthwise, too few pixels) do not ask for it.
#[test]
fn conv_im2col_where_it_pays() {
    let padded = Case {
        pads: vec![1, 1, 1, 1],
        ..conv(&[2, 8, 7, 6], &[8, 8, 3, 3], true)
    };
    assert!(check(&padded));
    let strided_1x1 = Case {
        strides: vec![2, 2],
        ..conv(&[2, 8, 9, 9], &[9, 8, 1, 1], true)
    };
    assert!(check(&strided_1x1));
    assert!(
        !check(&conv(&[2, 8, 4, 5], &[9, 8, 1, 1], true)),
        "a 1x1 conv is one product"
    );
    let depthwise = Case {
        group: 4,
        pads: vec![1; 4],
        ..conv(&[1, 4, 7, 6], &[4, 1, 3, 3], false)
    };
    assert!(!check(&depthwise));
    assert!(
        !check(&conv(&[1, 8, 3, 3], &[8, 8, 3, 3], true)),
        "one output pixel"
    );
}

/// A huge input value next to the padding (the last column of a row, the first of the next)
/// reaches only the outputs whose windows hold it; no form adds it and subtracts it again.
#[test]
fn conv_huge_inputs_stay_where_they_are() {
    let case = Case {
        pads: vec![1, 1, 1, 1],
        bias: true,
        huge: vec![5, 6, 6 * 6 + 11],
        ..conv(&[1, 8, 6, 6], &[4, 8, 3, 3], true)
    };
    assert!(check(&case));
    let grouped = Case { group: 2, ..case };
    check(&Case {
        w: vec![4, 4, 3, 3],
        ..grouped
    });
}
