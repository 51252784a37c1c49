//! memc's element conversions (`memc_ir::minifloat`, and the wrap of floats into 4- and 2-bit
//! integers that Cast lowers to) against ONNX's reference: the table that
//! `data/conversions.py` wrote with `onnx.reference.ops.op_cast.cast_to` (ml_dtypes), every
//! float8 and float4 code decoded, and float32 values around every rounding boundary encoded
//! with `saturate` 0 and 1 (float8 E8M0: `round_mode = "up"`, and only `saturate = 1`, the
//! one memc implements).

use memc_ir::ElemType;

fn elem(onnx_name: &str) -> ElemType {
    match onnx_name {
        "FLOAT16" => ElemType::F16,
        "BFLOAT16" => ElemType::BF16,
        "FLOAT8E4M3FN" => ElemType::F8E4M3FN,
        "FLOAT8E4M3FNUZ" => ElemType::F8E4M3FNUZ,
        "FLOAT8E5M2" => ElemType::F8E5M2,
        "FLOAT8E5M2FNUZ" => ElemType::F8E5M2FNUZ,
        "FLOAT4E2M1" => ElemType::F4E2M1,
        "FLOAT8E8M0" => ElemType::F8E8M0,
        "INT4" => ElemType::I4,
        "UINT4" => ElemType::U4,
        "INT2" => ElemType::I2,
        "UINT2" => ElemType::U2,
        other => panic!("conversions.txt names an unknown type {other}"),
    }
}

fn hex(word: &str) -> u32 {
    u32::from_str_radix(word, 16).expect("conversions.txt holds hexadecimal numbers")
}

/// What memc's Cast computes for a float converted to a 4- or 2-bit integer: truncated toward
/// zero into an i64, then wrapped to the width (the code in the low bits), as ml_dtypes does
/// for values in i64's range.
fn wrap_to_int(x: f32, bits: u32) -> u32 {
    ((x as i64) as u64 & ((1u64 << bits) - 1)) as u32
}

/// One row of an E8M0 section: a decoded code, or an encoding with `saturate = 1`.
fn check_e8m0(kind: &str, words: &[&str]) -> Option<String> {
    use memc_ir::minifloat::e8m0;
    if kind == "decode" {
        let (code, want) = (hex(words[0]), f32::from_bits(hex(words[1])));
        let got = e8m0::decode(code);
        let same = got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan();
        return (!same).then(|| format!("e8m0 decode {code:#x}: got {got}, want {want}"));
    }
    let x = f32::from_bits(hex(words[0]));
    let (got, want) = (e8m0::encode(x), hex(words[2]));
    // memc rounds an f32 subnormal of at most 2^-127 up to 2^-127 (code 0); onnx's bit rule
    // gives code 1 for every nonzero subnormal (see `e8m0::encode`).
    let at_most_smallest = x.is_subnormal() && x.abs() <= e8m0::decode(0);
    if at_most_smallest {
        return (got != 0).then(|| format!("e8m0 encode {x:e}: got {got:#x}, want 0x0"));
    }
    (got != want).then(|| format!("e8m0 encode {x:e}: got {got:#x}, want {want:#x}"))
}

#[test]
fn conversions_match_onnx_reference() {
    let table = include_str!("data/conversions.txt");
    let mut section: Option<(&str, ElemType)> = None;
    let mut failures = Vec::new();
    let mut checked = 0;
    for line in table.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [kind @ ("decode" | "encode" | "int"), name] = words.as_slice() {
            section = Some((kind, elem(name)));
            continue;
        }
        let (kind, ty) = section.expect("conversions.txt starts with a section header");
        checked += 1;
        if ty == ElemType::F8E8M0 {
            if let Some(failure) = check_e8m0(kind, &words) {
                failures.push(failure);
            }
            continue;
        }
        match kind {
            "decode" => {
                let format = ty.minifloat_format().expect("a float type");
                let (code, want) = (hex(words[0]), f32::from_bits(hex(words[1])));
                let got = format.decode(code);
                if !(got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan()) {
                    failures.push(format!("{ty} decode {code:#x}: got {got}, want {want}"));
                }
            }
            "encode" => {
                let format = ty.minifloat_format().expect("a float type");
                let x = f32::from_bits(hex(words[0]));
                let (plain, saturated) = (format.encode(x), hex(words[1]));
                // ONNX's `saturate` applies to the float8 types only.
                let sat = if ty.bits() == 8 {
                    format.encode_saturating(x)
                } else {
                    plain
                };
                let nan_same = |a: u32, b: u32| {
                    a == b || format.decode(a).is_nan() && format.decode(b).is_nan()
                };
                if !nan_same(plain, saturated) {
                    failures.push(format!(
                        "{ty} encode {x:e} ({:#x}), saturate=0: got {plain:#x}, want {saturated:#x}",
                        x.to_bits()
                    ));
                }
                if !nan_same(sat, hex(words[2])) {
                    failures.push(format!(
                        "{ty} encode {x:e}, saturate=1: got {sat:#x}, want {}",
                        words[2]
                    ));
                }
            }
            _ => {
                let x = f32::from_bits(hex(words[0]));
                let got = wrap_to_int(x, ty.bits());
                if got != hex(words[1]) {
                    failures.push(format!("{ty} from {x}: got {got:#x}, want {}", words[1]));
                }
            }
        }
    }
    assert!(checked > 6000, "conversions.txt has {checked} rows");
    assert!(
        failures.is_empty(),
        "{} of {checked} conversions differ from onnx's reference:\n{}",
        failures.len(),
        failures[..failures.len().min(40)].join("\n")
    );
}
