//! The storage types (f16, bf16, the float8 formats, float8 E8M0, float4, the 4- and 2-bit
//! integers) in every
//! backend: views of them load widened and store narrowed, exactly as the reference interpreter
//! does (`Scalar::widen`/`Scalar::narrow`, which `memc_ir::minifloat` defines and
//! `ir/tests/conversions.rs` checks against onnx's reference).
//!
//! - every code of every type widened, and f32 values around every rounding boundary narrowed,
//!   by the CPU backend, the reference and the PTX (in the interpreter), bit for bit;
//! - arithmetic on storage views (guarded loads with a pad, an accumulating store, `Narrow`)
//!   agrees between the CPU backend and the reference;
//! - an instruction of a storage type is refused by validation and by the CPU backend.

mod common;

use common::kernels::*;
use common::ptx::run_kernels_both;
use memc_codegen::cpu::{CpuError, CpuProgram};
use memc_codegen::kernel::{
    BinaryOp, Guard, Inst, InstKind, Kernel, KernelError, RegionSizes, Scalar, Store, View,
};
use memc_codegen::reference;

const STORAGE: [Scalar; 12] = [
    Scalar::F16,
    Scalar::BF16,
    Scalar::F8E4M3FN,
    Scalar::F8E4M3FNUZ,
    Scalar::F8E5M2,
    Scalar::F8E5M2FNUZ,
    Scalar::F4E2M1,
    Scalar::F8E8M0,
    Scalar::I4,
    Scalar::U4,
    Scalar::I2,
    Scalar::U2,
];

/// Every element an element of `ty` can hold, as its bytes (sub-byte types: the code in the
/// low bits, and with bits set above it, which loads ignore).
fn every_code(ty: Scalar) -> Vec<u8> {
    match ty.size() {
        2 => (0..=u16::MAX).flat_map(u16::to_le_bytes).collect(),
        _ => (0..=u8::MAX).collect(),
    }
}

/// f32 probes for narrowing to `ty`: every value of the type, the midpoints between
/// neighbours and the f32 values next to them, overflow, infinities, NaN, both signs.
fn probes(ty: Scalar) -> Vec<f32> {
    let codes: Vec<u64> = match ty.size() {
        2 => (0..=u16::MAX as u64).collect(),
        _ => (0..=u8::MAX as u64).collect(),
    };
    let mut values: Vec<f32> = codes
        .iter()
        .map(|&c| {
            let v = ty.widen(c);
            if ty.is_float() {
                f64::from_bits(v) as f32
            } else {
                v as i64 as f32
            }
        })
        .filter(|v| v.is_finite() && *v >= 0.0)
        .collect();
    values.sort_by(f32::total_cmp);
    values.dedup();
    let mut out = Vec::new();
    for pair in values.windows(2) {
        let mid = ((f64::from(pair[0]) + f64::from(pair[1])) / 2.0) as f32;
        out.extend([pair[0], mid, mid.next_down(), mid.next_up()]);
    }
    let top = *values.last().expect("a type has values");
    out.extend([
        top,
        top * 1.03,
        top * 1.07,
        top * 2.0,
        1e30,
        f32::INFINITY,
        f32::NAN,
        0.3,
        -7.7,
        1000.5,
    ]);
    let negatives: Vec<f32> = out.iter().map(|v| -v).collect();
    out.extend(negatives);
    out
}

/// `out[i] = widen(x[i])` as f32 (f32 or i32 for the integers).
fn widen_kernel(ty: Scalar, n: u64, out: i64) -> Kernel {
    let to = if ty.is_float() {
        Scalar::F32
    } else {
        Scalar::I32
    };
    cast_kernel(ty, to, n, out)
}

/// `out[i] = narrow(x[i])` from f32 (i32 for the integers).
fn narrow_kernel(ty: Scalar, n: u64, out: i64) -> Kernel {
    let from = if ty.is_float() {
        Scalar::F32
    } else {
        Scalar::I32
    };
    cast_kernel(from, ty, n, out)
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn i32_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| (v as i32).to_le_bytes())
        .collect()
}

/// Runs `k` over `arena` through the CPU backend, the reference and the PTX interpreter and
/// returns the three arenas.
fn run_three(k: &Kernel, arena: &[u8]) -> [Vec<u8>; 3] {
    let mut buf = Buf::new(arena.len());
    buf.put(0, arena);
    run(std::slice::from_ref(k), &mut buf, &Buf::new(0));
    let cpu = buf.get::<u8>(0, arena.len());
    let [(ptx, _), (reference, _)] =
        run_kernels_both(std::slice::from_ref(k), arena, &[], &[]).expect("the kernel runs");
    [cpu, reference, ptx]
}

/// The first element where `got` and `want` (of `elem`) differ, NaN equal to NaN.
fn first_difference(elem: Scalar, got: &[u8], want: &[u8]) -> Option<usize> {
    let size = elem.size() as usize;
    got.chunks(size).zip(want.chunks(size)).position(|(g, w)| {
        if g == w {
            return false;
        }
        if !elem.is_float() {
            return true;
        }
        let value = |b: &[u8]| {
            let mut raw = [0u8; 8];
            raw[..size].copy_from_slice(b);
            let bits = u64::from_le_bytes(raw);
            match elem {
                Scalar::F32 => f64::from(f32::from_bits(bits as u32)),
                narrow => f64::from_bits(narrow.widen(bits)),
            }
        };
        !(value(g).is_nan() && value(w).is_nan())
    })
}

#[test]
fn every_code_widens_alike_in_every_backend() {
    const OUT: usize = 1 << 20;
    let mut failures = Vec::new();
    for ty in STORAGE {
        let codes = every_code(ty);
        let n = codes.len() / ty.size() as usize;
        let k = widen_kernel(ty, n as u64, OUT as i64);
        let mut arena = vec![0u8; OUT + 4 * n];
        arena[..codes.len()].copy_from_slice(&codes);
        let [cpu, reference, ptx] = run_three(&k, &arena);
        let out_ty = if ty.is_float() {
            Scalar::F32
        } else {
            Scalar::I32
        };
        for (backend, got) in [("cpu", &cpu), ("ptx", &ptx)] {
            if let Some(i) = first_difference(out_ty, &got[OUT..], &reference[OUT..]) {
                failures.push(format!("{} code {i}: {backend} differs", ty.name()));
            }
        }
        // The reference itself: the widened values are the format's.
        if let Some(format) = ty.float_format() {
            let got = &reference[OUT..OUT + 4 * n];
            for (code, bytes) in got.chunks(4).enumerate() {
                let v = f32::from_le_bytes(bytes.try_into().expect("4 bytes"));
                let want = format.decode(code as u32);
                if !(v.to_bits() == want.to_bits() || v.is_nan() && want.is_nan()) {
                    failures.push(format!("{} code {code:#x}: reference gives {v}", ty.name()));
                    break;
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn narrowing_rounds_alike_in_every_backend() {
    const OUT: usize = 1 << 20;
    let mut failures = Vec::new();
    for ty in STORAGE {
        let values = probes(ty);
        let n = values.len();
        let input = if ty.is_float() {
            f32_bytes(&values)
        } else {
            i32_bytes(&values)
        };
        let k = narrow_kernel(ty, n as u64, OUT as i64);
        let mut arena = vec![0u8; OUT + n * ty.size() as usize];
        arena[..input.len()].copy_from_slice(&input);
        let [cpu, reference, ptx] = run_three(&k, &arena);
        for (backend, got) in [("cpu", &cpu), ("ptx", &ptx)] {
            if let Some(i) = first_difference(ty, &got[OUT..], &reference[OUT..]) {
                failures.push(format!(
                    "{}: {backend} narrows {} differently",
                    ty.name(),
                    values[i]
                ));
            }
        }
        // The reference stores exactly what the format's encoding gives (ties to even).
        if let Some(format) = ty.float_format() {
            let size = ty.size() as usize;
            for (i, &v) in values.iter().enumerate() {
                let mut raw = [0u8; 4];
                raw[..size].copy_from_slice(&reference[OUT + i * size..OUT + (i + 1) * size]);
                let want = format.encode(v);
                if u32::from_le_bytes(raw) != want {
                    failures.push(format!("{}: reference narrows {v} wrongly", ty.name()));
                    break;
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `out[i] = narrow(pad-guarded x[i - 1] + y[i])`, with `out[i] += 1` accumulated by a second
/// store and an f16 rounding (`Narrow`) of the sum on the way: every path a storage view takes.
fn mixed_kernel(ty: Scalar, n: u64) -> Kernel {
    let mut b = Insts::default();
    let x = b.load(ty, 0);
    let y = b.load(ty, 1);
    let sum = b.bin(BinaryOp::Add, x, y);
    let compute = ty.compute();
    let rounded = if ty.is_float() {
        b.push(
            compute,
            InstKind::Narrow {
                arg: sum,
                to: Scalar::F16,
            },
        )
    } else {
        sum
    };
    let one = if ty.is_float() {
        b.float(compute, 1.0)
    } else {
        b.int(compute, 1)
    };
    let mut x_view: View = arena(ty, -(ty.size() as i64), &[1]);
    x_view.guards = vec![Guard {
        coeffs: vec![1],
        offset: -1,
        limit: n as i64,
    }];
    x_view.pad = (-3.0f64).to_bits();
    let out = 4096;
    let mut stage = map(b, &[(2, rounded), (3, one)]);
    if let memc_codegen::kernel::Stage::Map { stores, .. } = &mut stage {
        stores[1] = Store {
            accumulate: true,
            ..stores[1].clone()
        };
    }
    loop_kernel(
        &format!("mixed {}", ty.name()),
        &[n],
        &[],
        vec![
            x_view,
            arena(ty, 1024, &[1]),
            arena(ty, out, &[1]),
            arena(ty, out + 1024, &[1]),
        ],
        vec![stage],
    )
}

#[test]
fn arithmetic_on_storage_views_matches_the_reference() {
    let n = 200u64;
    let mut failures = Vec::new();
    for ty in STORAGE {
        let k = mixed_kernel(ty, n);
        let mut arena = vec![0u8; 8192];
        let mut rng = common::rng::Rng(7);
        for byte in arena.iter_mut().take(4096 + 2048) {
            *byte = rng.next() as u8;
        }
        // The CPU backend with four threads, against the reference.
        let mut buf = Buf::new(arena.len());
        buf.put(0, &arena);
        run_on(std::slice::from_ref(&k), &mut buf, &Buf::new(0), 4);
        let cpu = buf.get::<u8>(0, arena.len());
        let mut want = arena.clone();
        let sizes = RegionSizes {
            arena: want.len() as u64,
            weights: 0,
            state: 0,
        };
        k.validate(sizes).expect("the kernel validates");
        reference::run_kernel_with_state(&k, &mut want, &[], &mut [])
            .expect("the reference runs it");
        if let Some(i) = first_difference(ty, &cpu[4096..], &want[4096..]) {
            failures.push(format!("{}: element {i} differs", ty.name()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn instructions_of_storage_types_are_refused() {
    let mut k = cast_kernel(Scalar::F16, Scalar::F32, 4, 64);
    if let memc_codegen::kernel::KernelBody::Loop(lk) = &mut k.body {
        if let memc_codegen::kernel::Stage::Map { insts, .. } = &mut lk.stages[0] {
            insts[0] = Inst {
                ty: Scalar::F16,
                kind: InstKind::Load { view: 0 },
            };
        }
    }
    let sizes = RegionSizes {
        arena: 128,
        weights: 0,
        state: 0,
    };
    match k.validate(sizes) {
        Err(KernelError::Malformed { message, .. }) => {
            assert!(message.contains("storage type f16"), "{message}")
        }
        other => panic!("validation gave {other:?}"),
    }
    match CpuProgram::compile(&[&k]) {
        Err(CpuError::Unsupported { message, .. }) => {
            assert!(message.contains("computes in f16"), "{message}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("an f16 instruction compiled"),
    }
}
