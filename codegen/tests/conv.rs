//! Conv and ConvTranspose lowerings against a naive reference, in every form: implicit im2col
//! (one product whose `B` is packed straight from the input), one contraction per kernel tap
//! or per (input channel, kernel row), and the direct loop kernel (depthwise, ConvTranspose
//! with few channels). Each case
//! is one op in text IR with its weights as function arguments; the kernels run in the
//! reference backend (`memc_codegen::reference`, which bounds-checks every address), whose
//! results are compared with the naive reference, and in the CPU backend, which must agree
//! with the reference backend.

mod common;

use common::models::{
    assert_backends_agree, compile_module, compile_module_for, compile_module_without_scratch,
    run_cpu, run_reference, weights_section, Compiled,
};
use memc_codegen::KernelBody;
use memc_ir::target::{ConvPolicy, Im2colForm, TargetInfo};
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

#[derive(Debug)]
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
    /// Whether the model's activation peak lies before the convolution (a reduction of a
    /// 1 MiB input runs first), leaving room under it for the convolution's scratch.
    room: bool,
}

/// Elements of the input a `room` case reduces before its convolution (1 MiB).
const ROOM_ELEMS: u64 = 1 << 18;

/// How a case is planned.
#[derive(Copy, Clone, PartialEq, Debug)]
enum Planned {
    /// With the scratch memory codegen asks for, as `memc compile` plans.
    WithScratch,
    /// Without scratch: implicit im2col still (the GEMM packs on the threads' stacks).
    WithoutScratch,
    /// For a CPU whose policy copies the column matrix into scratch (the CUDA target's form).
    ExplicitIm2col,
    /// For a CPU without im2col: products per tap or kernel row, or the direct loop.
    NoIm2col,
    /// As `memc compile` plans, with the weight a constant (`memc.weight`) rather than an
    /// argument: the plan lays it out for the GEMM (`codegen/src/prepack.rs`), and windows
    /// with a stride of 1 or 2 along the row, depthwise ones too, run as direct convolutions
    /// (memc-gemm's `run_direct`) without GEMM panels.
    ConstantWeight,
}

/// The CPU's target with its im2col form replaced by `form`.
fn cpu_with(form: Im2colForm) -> TargetInfo {
    let cpu = memc_codegen::cpu::target::target();
    TargetInfo {
        conv: ConvPolicy {
            im2col: form,
            ..cpu.conv.clone()
        },
        ..cpu.clone()
    }
}

fn list(v: &[i64]) -> String {
    let items: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// Checks `case` planned every way; returns whether the planned run used im2col.
fn check(case: &Case) -> bool {
    check_planned(case, Planned::ConstantWeight);
    check_planned(case, Planned::WithoutScratch);
    check_planned(case, Planned::ExplicitIm2col);
    check_planned(case, Planned::NoIm2col);
    check_planned(case, Planned::WithScratch)
}

/// Whether `compiled` lowered its convolution through im2col: a contraction whose `B` is an
/// implicit column matrix. No scratch holds a column matrix (the CPU's im2col is implicit).
fn uses_im2col(compiled: &Compiled) -> bool {
    assert!(
        compiled.scratch_uses.iter().all(|u| !u.contains("im2col")),
        "a column matrix in scratch: {:?}",
        compiled.scratch_uses
    );
    compiled
        .program
        .kernels()
        .any(|k| matches!(&k.body, KernelBody::Contract(c) if c.b.as_mat().is_none()))
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
    let constant = planned == Planned::ConstantWeight;
    let (w_arg, w_def) = if constant {
        (
            String::new(),
            format!(
                "  %w = \"memc.weight\"() {{value = dense_resource<\"w\"> : {wt}}} : () -> {wt}\n",
                wt = ty(&case.w)
            ),
        )
    } else {
        (format!(", %w: {}", ty(&case.w)), String::new())
    };
    // A `room` case reduces a large input first (its result the second output): the peak.
    let (z_arg, z_def, z_ret, z_ty) = if case.room {
        (
            format!(", %z: tensor<{ROOM_ELEMS}xf32>"),
            format!("  %r = \"onnx.ReduceMax\"(%z) {{axes = [0]}} : (tensor<{ROOM_ELEMS}xf32>) -> tensor<1xf32>\n"),
            ", %r".to_string(),
            ", tensor<1xf32>".to_string(),
        )
    } else {
        (String::new(), String::new(), String::new(), String::new())
    };
    let text = format!(
        "func.func @f(%x: {xt}{w_arg}{b_arg}{z_arg}) -> ({unknown}{z_ty}) {{\n{w_def}{z_def}  %0 = \"{op}\"(%x, %w{b_use}) {{{attrs}}} : ({xt}, {wt}{b_ty}) -> {unknown}\n  return %0{z_ret} : {unknown}{z_ty}\n}}\n",
        xt = ty(&case.x),
        wt = ty(&case.w),
    );

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut x = rng.vec(case.x.iter().product::<u64>() as usize);
    for &i in &case.huge {
        x[i] = 1e30;
    }
    let w = rng.vec(case.w.iter().product::<u64>() as usize);
    let b = rng.vec(m as usize);
    let bytes = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();

    let mut module = memc_ir::parse_module(&text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
    if constant {
        let mut store = memc_ir::WeightStore::new();
        for (_, weight) in module.weights.iter() {
            store
                .insert(
                    weight.name(),
                    weight.ty().clone(),
                    memc_ir::WeightBytes::Owned(bytes(&w).into()),
                )
                .expect("the weight is well-formed");
        }
        module.weights = store;
    }
    memc_ir::infer::infer_module(&mut module, &HashMap::new()).expect("shapes infer");
    let compiled = match planned {
        Planned::WithScratch => compile_module(module),
        Planned::WithoutScratch => compile_module_without_scratch(module),
        Planned::ExplicitIm2col => compile_module_for(module, &cpu_with(Im2colForm::Explicit)),
        Planned::NoIm2col => compile_module_for(module, &cpu_with(Im2colForm::Off)),
        Planned::ConstantWeight => compile_module(module),
    }
    .expect("the op compiles");
    // Implicit im2col needs no scratch of its own: planned with or without it, the form is
    // the same (without, the GEMM packs on the threads' stacks).
    let im2col = match planned {
        Planned::ExplicitIm2col => false,
        Planned::NoIm2col => {
            assert!(!uses_im2col(&compiled), "no im2col");
            false
        }
        _ => uses_im2col(&compiled),
    };
    let contracts = compiled
        .program
        .kernels()
        .filter(|k| matches!(k.body, KernelBody::Contract(_)))
        .count();
    if constant {
        direct_when_expected(case, &compiled);
    } else {
        assert_eq!(
            contracts > 0,
            case.taps,
            "contraction form expected: {}",
            case.taps
        );
    }
    let out_shape = compiled.program.outputs[0].shape.clone();

    let mut inputs = vec![bytes(&x)];
    if !constant {
        inputs.push(bytes(&w));
    }
    if case.bias {
        inputs.push(bytes(&b));
    }
    if case.room {
        inputs.push(bytes(&rng.vec(ROOM_ELEMS as usize)));
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

/// With a constant weight, a convolution whose window has a stride of 1 or 2 along its row
/// and at most 64 taps, that runs through implicit im2col or is depthwise, and where the direct
/// kernel pays (`memc_gemm::direct_conv_pays`), gets a packed weight and no GEMM panels (so the
/// CPU runs it as a direct convolution); every implicit-im2col product reads a packed weight.
fn direct_when_expected(case: &Case, compiled: &Compiled) {
    let n = case.x.len() - 2;
    let taps: u64 = case.w[2..].iter().product();
    let row_step = case.strides[n - 1];
    let out = &compiled.program.outputs[0].shape;
    let mut axes = Vec::new();
    let mut stride = 1i64;
    for i in (0..n).rev() {
        axes.push(memc_gemm::DirectAxis {
            size: case.x[2 + i] as i64,
            stride,
            kernel: case.w[2 + i] as i64,
            step: case.strides[i],
            dilation: case.dilations[i],
            pad: case.pads[i],
            out: out[2 + i] as i64,
        });
        stride *= case.x[2 + i] as i64;
    }
    axes.reverse();
    let eligible = !case.transpose
        && taps <= 64
        && (row_step == 1 || row_step == 2)
        && memc_gemm::direct_conv_pays(&axes, case.w[1]);
    let depthwise = !case.transpose && case.w[1] == 1;
    for kernel in compiled.program.kernels() {
        let KernelBody::Contract(c) = &kernel.body else {
            continue;
        };
        if c.b.as_mat().is_none() {
            assert!(
                c.a_packed.is_some() || (c.transposed && c.b_packed.is_some()),
                "{case:?}: an unpacked convolution weight"
            );
            // A 3x3 stride-1 window of 8+ channels may run as Winograd instead (before
            // transposed), with its scratch.
            if c.winograd.is_some() {
                let group = case.group;
                assert!(
                    !case.transpose
                        && case.w[2..] == [3, 3]
                        && case.strides == [1, 1]
                        && case.dilations == [1, 1]
                        && case.w[1] >= 8
                        && case.w[0] / group >= 8
                        && c.pack.is_some()
                        && !c.transposed,
                    "{case:?}: Winograd against the rule"
                );
            } else {
                assert_eq!(
                    c.transposed,
                    transposed_expected(case, out),
                    "{case:?}: run transposed or not against the rule"
                );
            }
            if eligible && !c.transposed && c.winograd.is_none() {
                assert_eq!(
                    c.pack, None,
                    "{case:?}: GEMM panels for a direct convolution"
                );
            }
        }
    }
    // A plain 1x1 window too, which would otherwise be a product on the input as it is.
    // (At least 512 input channels: `TRANSPOSED_PLAIN_MIN_CHANNELS`.)
    let plain = case.w[2..].iter().all(|&k| k == 1)
        && case.strides.iter().all(|&s| s == 1)
        && case.pads.iter().all(|&p| p == 0);
    if plain {
        let transposed = compiled
            .program
            .kernels()
            .any(|k| matches!(&k.body, KernelBody::Contract(c) if c.transposed));
        assert_eq!(
            transposed,
            case.w[1] >= 512 && transposed_expected(case, out),
            "{case:?}: a plain 1x1 convolution run transposed or not against the rule"
        );
    }
    if depthwise && eligible {
        assert!(
            compiled
                .program
                .kernels()
                .any(|k| matches!(&k.body, KernelBody::Contract(c) if c.b.as_mat().is_none())),
            "{case:?}: a depthwise convolution not run direct"
        );
    }
}

/// Whether a convolution with a constant weight runs transposed (`Contract::transposed`,
/// codegen's `transposed_pays`): its scratch below the model's peak (a `room` case: a
/// convolution alone is the peak, and its scratch would raise it), one group, at most 256
/// output pixels per image, a result of at most 512 KiB, and either a stride above 1 and at
/// least 128 output channels, or at least 256 and pixels filling under 80% of 32-lane tiles
/// (plain 1x1 windows too, which otherwise are a product on the input as it is).
fn transposed_expected(case: &Case, out: &[u64]) -> bool {
    let pixels: u64 = out[2..].iter().product();
    let strided = case.strides.iter().any(|&s| s > 1);
    let lanes = if pixels <= 16 {
        16
    } else {
        pixels.div_ceil(32) * 32
    };
    case.room
        && !case.transpose
        && case.group == 1
        && pixels <= 256
        && out[0] * case.w[0] * pixels * 4 <= 512 * 1024
        && if strided {
            case.w[0] >= 128
        } else {
            case.w[0] >= 256 && pixels * 5 < lanes * 4
        }
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
        room: false,
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

/// Few output pixels and many output channels: with a constant weight the CPU runs the
/// product transposed (the channels in the vector lanes, the column matrix packed into the
/// GEMM's row panels, the result transposed into the output), padded, strided, dilated,
/// with a bias, a channel count that is no multiple of the vectors, 1-d and 2-d, over
/// batches; `direct_when_expected` checks that these run transposed.
#[test]
fn conv_few_pixels_many_channels_run_transposed() {
    check(&Case {
        pads: vec![1, 1, 1, 1],
        bias: true,
        room: true,
        ..conv(&[1, 16, 7, 7], &[256, 16, 3, 3], true)
    });
    check(&Case {
        pads: vec![1, 1, 0, 1],
        strides: vec![2, 2],
        dilations: vec![1, 2],
        bias: true,
        room: true,
        ..conv(&[2, 8, 9, 8], &[130, 8, 3, 3], true)
    });
    check(&Case {
        pads: vec![0, 1, 1, 0],
        room: true,
        ..conv(&[1, 12, 6, 5], &[257, 12, 2, 3], true)
    });
    check(&Case {
        pads: vec![2, 2],
        strides: vec![2],
        bias: true,
        room: true,
        ..conv(&[2, 8, 20], &[144, 8, 5], true)
    });
    // Plain 1x1 windows (stride 1, no padding) of 512 or more input channels: the column
    // matrix is the input itself; fewer stay a product on the input.
    check(&Case {
        bias: true,
        room: true,
        ..conv(&[1, 64, 7, 7], &[260, 64, 1, 1], true)
    });
    check(&Case {
        bias: true,
        room: true,
        ..conv(&[1, 512, 7, 7], &[260, 512, 1, 1], true)
    });
    check(&Case {
        room: true,
        ..conv(&[2, 520, 5, 9], &[256, 520, 1, 1], true)
    });
    // 5x5 and 7x7 windows (the packer's tables of 25 and 64 taps).
    check(&Case {
        pads: vec![2, 2, 2, 2],
        strides: vec![2, 2],
        room: true,
        ..conv(&[1, 4, 13, 13], &[128, 4, 5, 5], true)
    });
    check(&Case {
        pads: vec![3, 3, 3, 3],
        strides: vec![2, 2],
        bias: true,
        room: true,
        ..conv(&[1, 3, 16, 16], &[128, 3, 7, 7], true)
    });
    // Tiles the direct kernel fills (8x8: two of 32 lanes), and too few channels for a
    // strided window: direct.
    check(&Case {
        pads: vec![1, 1, 1, 1],
        room: true,
        ..conv(&[1, 8, 8, 8], &[256, 8, 3, 3], true)
    });
    check(&Case {
        pads: vec![1, 1, 1, 1],
        strides: vec![2, 2],
        room: true,
        ..conv(&[1, 8, 9, 9], &[96, 8, 3, 3], true)
    });
    // A convolution alone is the model's peak: its scratch would raise the arena, so it runs
    // direct (no scratch).
    check(&Case {
        pads: vec![1, 1, 1, 1],
        bias: true,
        ..conv(&[1, 16, 7, 7], &[256, 16, 3, 3], true)
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

/// Implicit im2col at the GEMM's block edges: `K = c_g x taps` past one `KC` (256) and not a
/// multiple of it, `N` (output pixels) past one `NC` (128) and not a multiple of a
/// microkernel's width, `M` past one `MC` (96); batches of several images (on two threads);
/// strided, dilated, asymmetrically padded, grouped, 1-d, 2-d and 3-d windows; short and long
/// output rows; padding wider than the kernel's reach (whole output rows read only padding).
/// Every form must agree.
#[test]
fn conv_implicit_im2col_block_edges_and_windows() {
    let cases = [
        // K = 306, N = 143, two images, bias.
        Case {
            pads: vec![1, 1, 1, 1],
            bias: true,
            ..conv(&[2, 34, 13, 11], &[20, 34, 3, 3], true)
        },
        // M = 100.
        Case {
            pads: vec![1, 1, 1, 1],
            ..conv(&[1, 8, 6, 7], &[100, 8, 3, 3], true)
        },
        // Strided, dilated, asymmetric pads, three images.
        Case {
            strides: vec![2, 1],
            dilations: vec![2, 3],
            pads: vec![1, 0, 2, 3],
            bias: true,
            ..conv(&[3, 6, 17, 15], &[7, 6, 3, 2], true)
        },
        // Grouped and strided.
        Case {
            group: 3,
            strides: vec![2, 2],
            pads: vec![1, 1, 1, 1],
            ..conv(&[2, 12, 9, 10], &[9, 4, 3, 3], true)
        },
        // 1-d.
        Case {
            strides: vec![3],
            dilations: vec![2],
            pads: vec![2, 3],
            ..conv(&[2, 5, 60], &[6, 5, 5], true)
        },
        // 3-d.
        Case {
            strides: vec![1, 2, 1],
            pads: vec![1, 0, 1, 0, 1, 1],
            bias: true,
            ..conv(&[1, 4, 6, 5, 7], &[5, 4, 3, 2, 3], true)
        },
        // Output rows wider than two microkernel strips, plain and strided with dilation.
        Case {
            pads: vec![1, 1, 1, 1],
            ..conv(&[1, 4, 5, 70], &[6, 4, 3, 3], true)
        },
        Case {
            strides: vec![1, 2],
            dilations: vec![1, 2],
            pads: vec![1, 1, 0, 2],
            ..conv(&[2, 3, 6, 140], &[5, 3, 3, 3], true)
        },
        // Pads wider than the kernel's reach.
        Case {
            pads: vec![3, 3, 3, 3],
            ..conv(&[1, 3, 4, 4], &[4, 3, 2, 2], true)
        },
    ];
    for case in &cases {
        assert!(check(case), "implicit im2col expected: {case:?}");
    }
}

/// The conv scratch rule (`ConvPolicy::scratch_cap`): every convolution's scratch, on the CPU
/// (GEMM panels only: its im2col is implicit) and on the CUDA target (an explicit column
/// matrix only within the cap, else products per tap), is at most the larger of 256 KiB per
/// GEMM thread and 2% of the model's activation lower bound.
#[test]
fn conv_scratch_stays_within_the_rule() {
    let cpu = memc_codegen::cpu::target::target();
    let cuda = memc_codegen::ptx::target::target();
    assert_eq!(cpu.conv.scratch_cap(4, 0), 1 << 20);
    assert_eq!(cpu.conv.scratch_cap(4, 100 << 20), 2 << 20);
    assert_eq!(cpu.conv.scratch_cap(1, 1000), 256 << 10);
    // (input, weight, pads): a column matrix of 36 MiB, one of 576 KiB, one of eight images.
    let convs: [(&[u64], &[u64], i64); 3] = [
        (&[1, 64, 128, 128], &[64, 64, 3, 3], 1),
        (&[1, 16, 32, 32], &[16, 16, 3, 3], 1),
        (&[8, 32, 64, 64], &[32, 32, 3, 3], 1),
    ];
    for (x, w, pad) in convs {
        let s = x.len() - 2;
        let text = format!(
            "func.func @f(%x: {xt}, %w: {wt}) -> tensor<?x?x?x?xf32> {{\n  %0 = \"onnx.Conv\"(%x, %w) {{pads = {pads}}} : ({xt}, {wt}) -> tensor<?x?x?x?xf32>\n  return %0 : tensor<?x?x?x?xf32>\n}}\n",
            xt = ty(x),
            wt = ty(w),
            pads = list(&vec![pad; 2 * s]),
        );
        let mut module = memc_ir::parse_module(&text).expect("parses");
        memc_ir::infer::infer_module(&mut module, &HashMap::new()).expect("shapes infer");
        let (_, func) = module.functions().next().expect("a function");
        let bound = memc_passes::memory::model_order_bound(func, &module.weights).expect("bound");
        for target in [cpu, cuda] {
            let cap = memc_codegen::lower::conv_scratch_cap(func, &module.weights, target);
            assert_eq!(cap, target.conv.scratch_cap(4, bound));
            let plans = memc_codegen::lower::plan_ops(func, &module.weights, target);
            for &op in func.layout().block_ops(func.entry_block()) {
                let bytes = plans.scratch_bytes(op);
                assert!(
                    bytes <= cap,
                    "{}: conv {x:?} * {w:?} plans {bytes} scratch bytes, over the cap {cap}",
                    target.name
                );
                let label = plans.scratch_use(op).unwrap_or_default();
                if target.name == "cpu" {
                    assert!(!label.contains("im2col"), "cpu: {label}");
                }
            }
        }
    }
}

/// `ms.ConvGrad`'s weight gradient in every form (implicit im2col with its `B` the transposed
/// column matrix, an explicit column matrix, a loop kernel), strided, padded and grouped,
/// against a naive sum; the CPU backend against the reference.
#[test]
fn conv_grad_weight_gradient_in_every_form() {
    // (dY, X, W, group, strides, pads)
    type GradCase<'a> = (&'a [u64], &'a [u64], &'a [u64], u64, &'a [i64], &'a [i64]);
    let cases: [GradCase; 3] = [
        (
            &[2, 4, 4, 4],
            &[2, 3, 8, 8],
            &[4, 3, 3, 3],
            1,
            &[2, 2],
            &[1, 1, 1, 1],
        ),
        (
            &[2, 6, 7, 9],
            &[2, 8, 7, 9],
            &[6, 4, 3, 3],
            2,
            &[1, 1],
            &[1, 1, 1, 1],
        ),
        (&[1, 5, 18], &[1, 6, 35], &[5, 6, 4], 1, &[2], &[1, 2]),
    ];
    for (dy_shape, x_shape, w_shape, group, strides, pads) in cases {
        let s = x_shape.len() - 2;
        let unknown = format!("tensor<{}xf32>", vec!["?"; s + 2].join("x"));
        let text = format!(
            "func.func @f(%dy: {dt}, %x: {xt}, %w: {wt}) -> {unknown} {{\n  %0:2 = \"ms.ConvGrad\"(%dy, %x, %w) {{group = {group}, pads = {pads}, strides = {strides}}} : ({dt}, {xt}, {wt}) -> ({unknown}, {unknown})\n  return %0#1 : {unknown}\n}}\n",
            dt = ty(dy_shape),
            xt = ty(x_shape),
            wt = ty(w_shape),
            pads = list(pads),
            strides = list(strides),
        );
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let dy = rng.vec(dy_shape.iter().product::<u64>() as usize);
        let x = rng.vec(x_shape.iter().product::<u64>() as usize);
        let w = rng.vec(w_shape.iter().product::<u64>() as usize);
        // The naive weight gradient.
        let (ys, xs) = (strides_of(dy_shape), strides_of(x_shape));
        let (c_g, m_g) = (w_shape[1], w_shape[0] / group);
        let mut want = vec![0f64; w_shape.iter().product::<u64>() as usize];
        let ws = strides_of(w_shape);
        for n in 0..x_shape[0] as usize {
            for m in 0..w_shape[0] as usize {
                let g = m / m_g as usize;
                for ci in 0..c_g as usize {
                    let c = g * c_g as usize + ci;
                    for k in points(&w_shape[2..]) {
                        for o in points(&dy_shape[2..]) {
                            let pos: Vec<i64> =
                                (0..s).map(|i| o[i] * strides[i] - pads[i] + k[i]).collect();
                            if pos
                                .iter()
                                .zip(&x_shape[2..])
                                .any(|(&p, &d)| p < 0 || p >= d as i64)
                            {
                                continue;
                            }
                            let at = |base: usize, idx: &[i64], st: &[usize]| {
                                base + idx
                                    .iter()
                                    .enumerate()
                                    .map(|(i, &v)| v as usize * st[2 + i])
                                    .sum::<usize>()
                            };
                            let dyv = dy[at(n * ys[0] + m * ys[1], &o, &ys)] as f64;
                            let xv = x[at(n * xs[0] + c * xs[1], &pos, &xs)] as f64;
                            want[at(m * ws[0] + ci * ws[1], &k, &ws)] += dyv * xv;
                        }
                    }
                }
            }
        }
        let bytes = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
        let inputs = vec![bytes(&dy), bytes(&x), bytes(&w)];
        let forms = [Im2colForm::Implicit, Im2colForm::Explicit, Im2colForm::Off];
        for form in forms {
            let mut module =
                memc_ir::parse_module(&text).unwrap_or_else(|d| panic!("{d:?}\n{text}"));
            memc_ir::infer::infer_module(&mut module, &HashMap::new()).expect("shapes infer");
            let compiled = compile_module_for(module, &cpu_with(form)).expect("compiles");
            let implicit = compiled
                .program
                .kernels()
                .any(|k| matches!(&k.body, KernelBody::Contract(c) if c.b.as_mat().is_none()));
            assert_eq!(implicit, form == Im2colForm::Implicit, "{form:?}");
            let weights = weights_section(&compiled.program, &compiled.module.weights);
            let got = run_reference(&compiled.program, &weights, &inputs);
            let cpu = run_cpu(&compiled.program, &weights, &inputs);
            assert_backends_agree(&compiled.program, &cpu, &got);
            let got: Vec<f32> = got[0]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            assert_eq!(got.len(), want.len());
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - w).abs() <= 1e-4 + 1e-4 * w.abs(),
                    "{form:?} {x_shape:?}, element {i}: got {g}, want {w}"
                );
            }
        }
    }
}
