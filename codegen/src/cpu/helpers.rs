//! Run-time functions that JIT-compiled kernels call for operations without a machine
//! instruction: the transcendentals, `pow`, `fmod`, integer powers, and the conversions of
//! the float8 formats and float4 to and from f32 (`memc_ir::minifloat`, the one definition of
//! them; f16 and bf16 convert inline).
//!
//! Every function here is `extern "C"`, takes and returns scalars only, and never panics or
//! traps, so calling it from generated code is always sound. [`symbols`] lists them for the
//! JIT's symbol table; [`Helper`] names each one with its signature.

use super::vmath;
use crate::kernel::Scalar;

// The system libm provides `erf`; std links it on every platform memc supports.
extern "C" {
    fn erf(x: f64) -> f64;
    fn erff(x: f32) -> f32;
}

/// Defines one `f32` and one `f64` wrapper around a std float method for each listed name.
macro_rules! float_unary {
    ($($f32_name:ident, $f64_name:ident, $method:ident;)*) => {
        $(
            extern "C" fn $f32_name(x: f32) -> f32 {
                x.$method()
            }
            extern "C" fn $f64_name(x: f64) -> f64 {
                x.$method()
            }
        )*
    };
}

float_unary! {
    memc_exp_f32, memc_exp_f64, exp;
    memc_log_f32, memc_log_f64, ln;
    memc_sin_f32, memc_sin_f64, sin;
    memc_cos_f32, memc_cos_f64, cos;
    memc_tan_f32, memc_tan_f64, tan;
    memc_asin_f32, memc_asin_f64, asin;
    memc_acos_f32, memc_acos_f64, acos;
    memc_atan_f32, memc_atan_f64, atan;
    memc_sinh_f32, memc_sinh_f64, sinh;
    memc_cosh_f32, memc_cosh_f64, cosh;
    memc_tanh_f32, memc_tanh_f64, tanh;
    memc_asinh_f32, memc_asinh_f64, asinh;
    memc_acosh_f32, memc_acosh_f64, acosh;
    memc_atanh_f32, memc_atanh_f64, atanh;
}

/// Defines, for each listed scalar f32 helper, a 4-lane form that applies it in place to the
/// four floats at `lanes` (the SIMD path stores a vector there, calls, and loads it back: one
/// call per vector instead of four).
macro_rules! lanes_x4 {
    ($($x4_name:ident => $scalar:ident;)*) => {
        $(
            /// # Safety
            /// `lanes` points to four writable, initialized f32 values.
            unsafe extern "C" fn $x4_name(lanes: *mut f32) {
                for i in 0..4 {
                    // SAFETY: the caller passes four floats.
                    unsafe { *lanes.add(i) = $scalar(*lanes.add(i)) };
                }
            }
        )*
    };
}

lanes_x4! {
    memc_exp_f32x4 => memc_exp_f32;
    memc_log_f32x4 => memc_log_f32;
    memc_sin_f32x4 => memc_sin_f32;
    memc_cos_f32x4 => memc_cos_f32;
    memc_tan_f32x4 => memc_tan_f32;
    memc_asin_f32x4 => memc_asin_f32;
    memc_acos_f32x4 => memc_acos_f32;
    memc_atan_f32x4 => memc_atan_f32;
    memc_sinh_f32x4 => memc_sinh_f32;
    memc_cosh_f32x4 => memc_cosh_f32;
    memc_tanh_f32x4 => memc_tanh_f32;
    memc_asinh_f32x4 => memc_asinh_f32;
    memc_acosh_f32x4 => memc_acosh_f32;
    memc_atanh_f32x4 => memc_atanh_f32;
    memc_erf_f32x4 => memc_erf_f32;
}

/// `lanes[i] = pow(lanes[i], lanes[4 + i])` for i in 0..4.
///
/// # Safety
/// `lanes` points to eight writable, initialized f32 values.
unsafe extern "C" fn memc_pow_f32x4(lanes: *mut f32) {
    for i in 0..4 {
        // SAFETY: the caller passes eight floats.
        unsafe { *lanes.add(i) = memc_pow_f32(*lanes.add(i), *lanes.add(4 + i)) };
    }
}

/// `lanes[i] = fmod(lanes[i], lanes[4 + i])` for i in 0..4.
///
/// # Safety
/// `lanes` points to eight writable, initialized f32 values.
unsafe extern "C" fn memc_fmod_f32x4(lanes: *mut f32) {
    for i in 0..4 {
        // SAFETY: the caller passes eight floats.
        unsafe { *lanes.add(i) = memc_fmod_f32(*lanes.add(i), *lanes.add(4 + i)) };
    }
}

extern "C" fn memc_erf_f32(x: f32) -> f32 {
    // SAFETY: `erff` is a pure libm function defined for every input.
    unsafe { erff(x) }
}

extern "C" fn memc_erf_f64(x: f64) -> f64 {
    // SAFETY: `erf` is a pure libm function defined for every input.
    unsafe { erf(x) }
}

extern "C" fn memc_pow_f32(x: f32, y: f32) -> f32 {
    x.powf(y)
}

extern "C" fn memc_pow_f64(x: f64, y: f64) -> f64 {
    x.powf(y)
}

extern "C" fn memc_fmod_f32(x: f32, y: f32) -> f32 {
    x % y
}

extern "C" fn memc_fmod_f64(x: f64, y: f64) -> f64 {
    x % y
}

/// `base` to the power `exp`, wrapping on overflow. A negative exponent gives the truncated
/// quotient `1 / base^-exp`: 1 for a base of 1, +-1 for -1, 0 otherwise (and 0 for a base of 0,
/// where the true value is infinite).
extern "C" fn memc_pow_i64(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 => {
                if exp % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut result, mut base, mut exp) = (1i64, base, exp as u64);
    while exp > 0 {
        if exp & 1 == 1 {
            result = result.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exp >>= 1;
    }
    result
}

/// `base` to the power `exp`, wrapping on overflow.
extern "C" fn memc_pow_u64(base: u64, exp: u64) -> u64 {
    let (mut result, mut base, mut exp) = (1u64, base, exp);
    while exp > 0 {
        if exp & 1 == 1 {
            result = result.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exp >>= 1;
    }
    result
}

/// Defines the widening (`fn(code: u32) -> f32`) and narrowing (`fn(f32) -> u32`) conversion
/// of each listed narrow float format.
macro_rules! minifloat {
    ($($widen:ident, $narrow:ident, $format:ident;)*) => {
        $(
            extern "C" fn $widen(code: u32) -> f32 {
                memc_ir::minifloat::$format.decode(code)
            }
            extern "C" fn $narrow(x: f32) -> u32 {
                memc_ir::minifloat::$format.encode(x)
            }
        )*
    };
}

minifloat! {
    memc_widen_f8e4m3fn, memc_narrow_f8e4m3fn, F8E4M3FN;
    memc_widen_f8e4m3fnuz, memc_narrow_f8e4m3fnuz, F8E4M3FNUZ;
    memc_widen_f8e5m2, memc_narrow_f8e5m2, F8E5M2;
    memc_widen_f8e5m2fnuz, memc_narrow_f8e5m2fnuz, F8E5M2FNUZ;
    memc_widen_f4e2m1, memc_narrow_f4e2m1, F4E2M1;
}

extern "C" fn memc_widen_f8e8m0(code: u32) -> f32 {
    memc_ir::minifloat::e8m0::decode(code)
}

extern "C" fn memc_narrow_f8e8m0(x: f32) -> u32 {
    memc_ir::minifloat::e8m0::encode(x)
}

/// The shape of a helper's signature.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum HelperSig {
    /// `fn(t) -> t` for the float type `t`.
    Unary(Scalar),
    /// `fn(t, t) -> t` for the type `t` (a float, I64 or U64).
    Binary(Scalar),
    /// `fn(lanes: *mut f32)`: four (unary) or eight (binary) f32 in memory, the result written
    /// over the first four; or, for the wide helpers ([`lanes_x16`]), sixteen written over.
    LanesX4,
    /// `fn(code: u32) -> f32`: an element of a narrow float type widened.
    Widen,
    /// `fn(f32) -> u32`: an f32 narrowed to the code of a narrow float type.
    Narrow,
}

/// One run-time function: its symbol name and signature.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Helper {
    pub name: &'static str,
    pub sig: HelperSig,
}

/// Every helper with its address, for `JITBuilder::symbol`.
pub(crate) fn symbols() -> Vec<(&'static str, *const u8)> {
    macro_rules! list {
        ($($f:ident),* $(,)?) => {
            vec![$((stringify!($f), $f as *const u8)),*]
        };
    }
    let mut symbols = list![
        memc_exp_f32,
        memc_exp_f64,
        memc_log_f32,
        memc_log_f64,
        memc_sin_f32,
        memc_sin_f64,
        memc_cos_f32,
        memc_cos_f64,
        memc_tan_f32,
        memc_tan_f64,
        memc_asin_f32,
        memc_asin_f64,
        memc_acos_f32,
        memc_acos_f64,
        memc_atan_f32,
        memc_atan_f64,
        memc_sinh_f32,
        memc_sinh_f64,
        memc_cosh_f32,
        memc_cosh_f64,
        memc_tanh_f32,
        memc_tanh_f64,
        memc_asinh_f32,
        memc_asinh_f64,
        memc_acosh_f32,
        memc_acosh_f64,
        memc_atanh_f32,
        memc_atanh_f64,
        memc_erf_f32,
        memc_erf_f64,
        memc_pow_f32,
        memc_pow_f64,
        memc_fmod_f32,
        memc_fmod_f64,
        memc_pow_i64,
        memc_pow_u64,
        memc_exp_f32x4,
        memc_log_f32x4,
        memc_sin_f32x4,
        memc_cos_f32x4,
        memc_tan_f32x4,
        memc_asin_f32x4,
        memc_acos_f32x4,
        memc_atan_f32x4,
        memc_sinh_f32x4,
        memc_cosh_f32x4,
        memc_tanh_f32x4,
        memc_asinh_f32x4,
        memc_acosh_f32x4,
        memc_atanh_f32x4,
        memc_erf_f32x4,
        memc_pow_f32x4,
        memc_fmod_f32x4,
        memc_widen_f8e4m3fn,
        memc_narrow_f8e4m3fn,
        memc_widen_f8e4m3fnuz,
        memc_narrow_f8e4m3fnuz,
        memc_widen_f8e5m2,
        memc_narrow_f8e5m2,
        memc_widen_f8e5m2fnuz,
        memc_narrow_f8e5m2fnuz,
        memc_widen_f4e2m1,
        memc_narrow_f4e2m1,
        memc_widen_f8e8m0,
        memc_narrow_f8e8m0,
    ];
    symbols.extend(vmath::native::symbols());
    symbols
}

/// The helpers widening and narrowing storage type `ty`, for the narrow floats that have no
/// inline form (the float8 formats, float4).
pub(crate) fn conversions(ty: Scalar) -> Option<(Helper, Helper)> {
    let (widen, narrow) = match ty {
        Scalar::F8E4M3FN => ("memc_widen_f8e4m3fn", "memc_narrow_f8e4m3fn"),
        Scalar::F8E4M3FNUZ => ("memc_widen_f8e4m3fnuz", "memc_narrow_f8e4m3fnuz"),
        Scalar::F8E5M2 => ("memc_widen_f8e5m2", "memc_narrow_f8e5m2"),
        Scalar::F8E5M2FNUZ => ("memc_widen_f8e5m2fnuz", "memc_narrow_f8e5m2fnuz"),
        Scalar::F4E2M1 => ("memc_widen_f4e2m1", "memc_narrow_f4e2m1"),
        Scalar::F8E8M0 => ("memc_widen_f8e8m0", "memc_narrow_f8e8m0"),
        _ => return None,
    };
    Some((
        Helper {
            name: widen,
            sig: HelperSig::Widen,
        },
        Helper {
            name: narrow,
            sig: HelperSig::Narrow,
        },
    ))
}

/// The helper computing unary float op `name` (`"exp"`, `"erf"`, ...) in `ty` (F32 or F64).
pub(crate) fn float_unary(name: &str, ty: Scalar) -> Option<Helper> {
    let symbol = match (name, ty) {
        ("exp", Scalar::F32) => "memc_exp_f32",
        ("exp", Scalar::F64) => "memc_exp_f64",
        ("log", Scalar::F32) => "memc_log_f32",
        ("log", Scalar::F64) => "memc_log_f64",
        ("sin", Scalar::F32) => "memc_sin_f32",
        ("sin", Scalar::F64) => "memc_sin_f64",
        ("cos", Scalar::F32) => "memc_cos_f32",
        ("cos", Scalar::F64) => "memc_cos_f64",
        ("tan", Scalar::F32) => "memc_tan_f32",
        ("tan", Scalar::F64) => "memc_tan_f64",
        ("asin", Scalar::F32) => "memc_asin_f32",
        ("asin", Scalar::F64) => "memc_asin_f64",
        ("acos", Scalar::F32) => "memc_acos_f32",
        ("acos", Scalar::F64) => "memc_acos_f64",
        ("atan", Scalar::F32) => "memc_atan_f32",
        ("atan", Scalar::F64) => "memc_atan_f64",
        ("sinh", Scalar::F32) => "memc_sinh_f32",
        ("sinh", Scalar::F64) => "memc_sinh_f64",
        ("cosh", Scalar::F32) => "memc_cosh_f32",
        ("cosh", Scalar::F64) => "memc_cosh_f64",
        ("tanh", Scalar::F32) => "memc_tanh_f32",
        ("tanh", Scalar::F64) => "memc_tanh_f64",
        ("asinh", Scalar::F32) => "memc_asinh_f32",
        ("asinh", Scalar::F64) => "memc_asinh_f64",
        ("acosh", Scalar::F32) => "memc_acosh_f32",
        ("acosh", Scalar::F64) => "memc_acosh_f64",
        ("atanh", Scalar::F32) => "memc_atanh_f32",
        ("atanh", Scalar::F64) => "memc_atanh_f64",
        ("erf", Scalar::F32) => "memc_erf_f32",
        ("erf", Scalar::F64) => "memc_erf_f64",
        _ => return None,
    };
    Some(Helper {
        name: symbol,
        sig: HelperSig::Unary(ty),
    })
}

/// The helper computing binary op `name` (`"pow"` or `"fmod"`) in `ty`; integer powers take
/// I64 or U64 operands (narrower integers widen first).
pub(crate) fn binary(name: &str, ty: Scalar) -> Option<Helper> {
    let symbol = match (name, ty) {
        ("pow", Scalar::F32) => "memc_pow_f32",
        ("pow", Scalar::F64) => "memc_pow_f64",
        ("pow", Scalar::I64) => "memc_pow_i64",
        ("pow", Scalar::U64) => "memc_pow_u64",
        ("fmod", Scalar::F32) => "memc_fmod_f32",
        ("fmod", Scalar::F64) => "memc_fmod_f64",
        _ => return None,
    };
    Some(Helper {
        name: symbol,
        sig: HelperSig::Binary(ty),
    })
}

/// The 4-lane f32 helper of unary op `name` or of binary `"pow"`/`"fmod"` (see
/// [`HelperSig::LanesX4`]).
pub(crate) fn lanes_x4(name: &str) -> Option<Helper> {
    let symbol = match name {
        "exp" => "memc_exp_f32x4",
        "log" => "memc_log_f32x4",
        "sin" => "memc_sin_f32x4",
        "cos" => "memc_cos_f32x4",
        "tan" => "memc_tan_f32x4",
        "asin" => "memc_asin_f32x4",
        "acos" => "memc_acos_f32x4",
        "atan" => "memc_atan_f32x4",
        "sinh" => "memc_sinh_f32x4",
        "cosh" => "memc_cosh_f32x4",
        "tanh" => "memc_tanh_f32x4",
        "asinh" => "memc_asinh_f32x4",
        "acosh" => "memc_acosh_f32x4",
        "atanh" => "memc_atanh_f32x4",
        "erf" => "memc_erf_f32x4",
        "pow" => "memc_pow_f32x4",
        "fmod" => "memc_fmod_f32x4",
        _ => return None,
    };
    Some(Helper {
        name: symbol,
        sig: HelperSig::LanesX4,
    })
}

/// The 16-lane f32 helper of unary op `name` (`exp`, `tanh`, `erf`: `vmath.rs`'s polynomials
/// in Rust over the host's widest vectors, see `vmath::native`), with [`HelperSig::LanesX4`]'s
/// signature.
pub(crate) fn lanes_x16(name: &str) -> Option<Helper> {
    let symbol = match name {
        "exp" => "memc_exp_f32x16",
        "tanh" => "memc_tanh_f32x16",
        "erf" => "memc_erf_f32x16",
        _ => return None,
    };
    Some(Helper {
        name: symbol,
        sig: HelperSig::LanesX4,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JIT panics on an unresolved symbol at link time, so every helper the emitters can
    /// name must be registered.
    #[test]
    fn every_named_helper_is_registered() {
        let registered: Vec<&str> = symbols().iter().map(|(name, _)| *name).collect();
        let unary = [
            "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
            "asinh", "acosh", "atanh", "erf",
        ];
        let mut named = Vec::new();
        for ty in [Scalar::F32, Scalar::F64] {
            named.extend(unary.iter().filter_map(|op| float_unary(op, ty)));
            named.extend(["pow", "fmod"].iter().filter_map(|op| binary(op, ty)));
        }
        named.extend(
            [Scalar::I64, Scalar::U64]
                .iter()
                .filter_map(|&ty| binary("pow", ty)),
        );
        named.extend(
            unary
                .iter()
                .chain(&["pow", "fmod"])
                .filter_map(|op| lanes_x4(op)),
        );
        named.extend(unary.iter().filter_map(|op| lanes_x16(op)));
        for ty in Scalar::ALL {
            if let Some((widen, narrow)) = conversions(ty) {
                named.extend([widen, narrow]);
            }
        }
        assert_eq!(named.len(), 2 * 17 + 2 + 17 + 3 + 2 * 6);
        for helper in named {
            assert!(
                registered.contains(&helper.name),
                "{} is not registered",
                helper.name
            );
        }
        assert_eq!(registered.len(), 2 * 17 + 2 + 17 + 3 + 2 * 6);
    }
}
