//! Tests of the PTX contractions and low-bit products (`ptx/gemm.rs`, `ptx/nbits.rs`):
//! hand-built kernels of every stride form, validated, emitted, and assembled by `ptxas` for
//! sm_80 and sm_90 with `--warn-on-spills` (no errors, no spills).
//!
//! `ptxas` is `$MEMC_PTXAS`, else the test venv's (`.venv/lib/python3.11/site-packages/nvidia/
//! cuda_nvcc/bin/ptxas` from the workspace root); without it the assembling tests say so and
//! pass, unless `MEMC_REQUIRE_PTXAS=1`.

mod common;

use common::rng::Rng;
use memc_codegen::kernel::{
    f64_bits, Contract, Kernel, KernelBody, MatView, NBitsMatMul, Region, RegionSizes, Scalar,
};
use memc_codegen::nbits::{row_bytes, scratch_bytes};
use memc_codegen::ptx::{emit_kernel, PtxEntry, HEADER};
use std::path::PathBuf;

// ---------------------------------------------------------------------------------------------
// Contractions.

/// How an operand's matrix is laid out.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Lay {
    /// Row-major, rows contiguous.
    Row,
    /// Column-major (the transpose is row-major).
    Trans,
    /// Row-major with the rows in reverse order (a negative row stride).
    NegRows,
    /// Every other element, rows one element apart beyond that (no contiguous axis).
    Strided,
}

#[derive(Clone, Debug)]
struct GemmCase {
    elem: Scalar,
    batch: Vec<u64>,
    m: u64,
    n: u64,
    k: u64,
    lay: [Lay; 3],
    /// `b` is shared by every batch (batch strides 0).
    broadcast_b: bool,
    /// Operands start one element past a 16-byte boundary.
    misalign: bool,
    alpha: f64,
    accumulate: bool,
}

impl GemmCase {
    fn new(elem: Scalar, m: u64, n: u64, k: u64) -> GemmCase {
        GemmCase {
            elem,
            batch: vec![],
            m,
            n,
            k,
            lay: [Lay::Row; 3],
            broadcast_b: false,
            misalign: false,
            alpha: 1.0,
            accumulate: false,
        }
    }
}

fn align64(x: u64) -> u64 {
    x.div_ceil(64) * 64
}

/// Places a `rows x cols` operand at `cursor` (bytes), returning the view and the next free
/// byte.
fn place(
    rows: u64,
    cols: u64,
    lay: Lay,
    batch: &[u64],
    broadcast: bool,
    misalign: bool,
    es: u64,
    cursor: u64,
) -> (MatView, u64) {
    let (r, c) = (rows.max(1) as i64, cols.max(1) as i64);
    let (row_stride, col_stride, start, span) = match lay {
        Lay::Row => (c, 1, 0, r * c),
        Lay::Trans => (1, r, 0, r * c),
        Lay::NegRows => (-c, 1, (r - 1) * c, r * c),
        Lay::Strided => (2 * c + 1, 2, 0, (r - 1) * (2 * c + 1) + 2 * (c - 1) + 1),
    };
    let mut batch_strides = vec![0i64; batch.len()];
    let mut total = span;
    if !broadcast {
        for (s, &e) in batch_strides.iter_mut().zip(batch).rev() {
            *s = total;
            total *= e.max(1) as i64;
        }
    }
    let first = cursor + if misalign { es } else { 0 };
    let view = MatView {
        region: Region::Arena,
        byte_offset: (first + start as u64 * es) as i64,
        batch_strides,
        row_stride,
        col_stride,
    };
    (view, align64(first + total as u64 * es))
}

/// The contraction of `case`, validated, and the arena size it needs.
fn contract(case: &GemmCase) -> (Kernel, u64) {
    let es = case.elem.size();
    let (a, at) = place(
        case.m,
        case.k,
        case.lay[0],
        &case.batch,
        false,
        case.misalign,
        es,
        0,
    );
    let (b, bt) = place(
        case.k,
        case.n,
        case.lay[1],
        &case.batch,
        case.broadcast_b,
        case.misalign,
        es,
        at,
    );
    let (c, end) = place(
        case.m,
        case.n,
        case.lay[2],
        &case.batch,
        false,
        case.misalign,
        es,
        bt,
    );
    let kernel = Kernel {
        name: "contract".into(),
        body: KernelBody::Contract(Contract {
            elem: case.elem,
            batch: case.batch.clone(),
            m: case.m,
            n: case.n,
            k: case.k,
            a,
            b: b.into(),
            c,
            alpha: f64_bits(case.alpha),
            accumulate: case.accumulate,
            pack: None,
            a_packed: None,
            b_packed: None,
            transposed: false,
            winograd: None,
        }),
    };
    let sizes = RegionSizes {
        arena: end + 64,
        weights: 0,
        state: 0,
    };
    kernel
        .validate(sizes)
        .unwrap_or_else(|e| panic!("test kernel is invalid: {e} ({case:?})"));
    (kernel, end + 64)
}

/// Every stride form, each in f32 and f64.
fn gemm_cases() -> Vec<(String, GemmCase)> {
    let mut cases = vec![];
    for elem in [Scalar::F32, Scalar::F64] {
        let t = if elem == Scalar::F32 { "f32" } else { "f64" };
        let base = GemmCase::new(elem, 70, 50, 33);
        let mut add = |name: &str, case: GemmCase| cases.push((format!("{t}_{name}"), case));
        add("row", base.clone());
        add("aligned", GemmCase::new(elem, 256, 128, 64));
        for (name, lay) in [
            ("trans_a", [Lay::Trans, Lay::Row, Lay::Row]),
            ("trans_b", [Lay::Row, Lay::Trans, Lay::Row]),
            ("trans_c", [Lay::Row, Lay::Row, Lay::Trans]),
            ("trans_all", [Lay::Trans, Lay::Trans, Lay::Trans]),
            ("neg", [Lay::NegRows, Lay::NegRows, Lay::NegRows]),
            ("strided", [Lay::Strided, Lay::Strided, Lay::Strided]),
        ] {
            add(
                name,
                GemmCase {
                    lay,
                    ..base.clone()
                },
            );
            add(
                &format!("{name}_k32"),
                GemmCase {
                    lay,
                    ..GemmCase::new(elem, 130, 136, 32)
                },
            );
        }
        add(
            "batched_broadcast",
            GemmCase {
                batch: vec![2, 3],
                broadcast_b: true,
                ..base.clone()
            },
        );
        add(
            "misaligned",
            GemmCase {
                misalign: true,
                ..GemmCase::new(elem, 128, 128, 64)
            },
        );
        add("k0", GemmCase::new(elem, 70, 50, 0));
        add(
            "k0_accumulate",
            GemmCase {
                accumulate: true,
                ..GemmCase::new(elem, 70, 50, 0)
            },
        );
        add(
            "alpha_accumulate",
            GemmCase {
                alpha: 0.5,
                accumulate: true,
                ..base.clone()
            },
        );
        add("empty", GemmCase::new(elem, 0, 50, 33));
        for m in [1, 3, 4] {
            add(&format!("small_m{m}"), GemmCase::new(elem, m, 50, 33));
            add(
                &format!("small_m{m}_trans_b_batched"),
                GemmCase {
                    lay: [Lay::Row, Lay::Trans, Lay::Row],
                    batch: vec![2],
                    accumulate: true,
                    alpha: 2.0,
                    ..GemmCase::new(elem, m, 50, 33)
                },
            );
        }
        add("main_4096", GemmCase::new(elem, 4096, 4096, 4096));
        add("gemv_4096", GemmCase::new(elem, 1, 4096, 4096));
        add(
            "many_batches",
            GemmCase {
                batch: vec![70000],
                ..GemmCase::new(elem, 8, 8, 8)
            },
        );
    }
    cases
}

// ---------------------------------------------------------------------------------------------
// Low-bit products.

#[derive(Clone, Debug)]
struct NbitsCase {
    bits: u32,
    signed: bool,
    zero_points: bool,
    block: u64,
    k: u64,
    n: u64,
    batch: Vec<u64>,
    m: u64,
    bias: Option<Region>,
    /// The packed values start this many bytes past a 64-byte boundary.
    b_shift: u64,
}

impl NbitsCase {
    fn new(bits: u32, signed: bool, block: u64, k: u64, n: u64, m: u64) -> NbitsCase {
        NbitsCase {
            bits,
            signed,
            zero_points: true,
            block,
            k,
            n,
            batch: vec![],
            m,
            bias: None,
            b_shift: 0,
        }
    }
}

/// Offsets of a low-bit product's slots: weights `[b, scales, zero points, bias]`, arena
/// `[a, c, bias, scratch]`, and the two region sizes.
struct NbitsLayout {
    kernel: Kernel,
    weights: [u64; 4],
    arena: [u64; 4],
    sizes: RegionSizes,
}

fn nbits_layout(case: &NbitsCase) -> NbitsLayout {
    let (n, k) = (case.n, case.k);
    let kb = k.div_ceil(case.block);
    let rows: u64 = case.batch.iter().product::<u64>() * case.m;
    let b_off = case.b_shift;
    let scales_off = align64(b_off + n * row_bytes(k, case.bits));
    let zp_off = align64(scales_off + 4 * n * kb);
    let wbias_off = align64(zp_off + n * kb);
    let weights_len = wbias_off + 4 * n + 64;
    let mut a_strides = vec![0i64; case.batch.len()];
    let mut c_strides = vec![0i64; case.batch.len()];
    let (mut sa, mut sc) = ((case.m * k) as i64, (case.m * n) as i64);
    for ((x, y), &e) in a_strides
        .iter_mut()
        .zip(c_strides.iter_mut())
        .zip(&case.batch)
        .rev()
    {
        *x = sa;
        *y = sc;
        sa *= e as i64;
        sc *= e as i64;
    }
    let a_off = 0;
    let c_off = align64(4 * rows * k);
    let abias_off = align64(c_off + 4 * rows * n);
    let scratch_off = align64(abias_off + 4 * n);
    let arena_len = scratch_off + scratch_bytes(rows, n, k) + 64;
    let q = NBitsMatMul {
        batch: case.batch.clone(),
        m: case.m,
        n,
        k,
        bits: case.bits,
        signed: case.signed,
        block: case.block,
        a: MatView {
            region: Region::Arena,
            byte_offset: a_off as i64,
            batch_strides: a_strides,
            row_stride: k as i64,
            col_stride: 1,
        },
        c: MatView {
            region: Region::Arena,
            byte_offset: c_off as i64,
            batch_strides: c_strides,
            row_stride: n as i64,
            col_stride: 1,
        },
        b: b_off,
        scales: scales_off,
        zero_points: case.zero_points.then_some(zp_off),
        bias: case.bias.map(|region| {
            let at = if region == Region::Weights {
                wbias_off
            } else {
                abias_off
            };
            (region, at)
        }),
        scratch: (scratch_bytes(rows, n, k) > 0).then_some(scratch_off),
    };
    let kernel = Kernel {
        name: "matmul_nbits".into(),
        body: KernelBody::NBits(q),
    };
    let sizes = RegionSizes {
        arena: arena_len,
        weights: weights_len,
        state: 0,
    };
    kernel
        .validate(sizes)
        .unwrap_or_else(|e| panic!("test kernel is invalid: {e} ({case:?})"));
    NbitsLayout {
        kernel,
        weights: [b_off, scales_off, zp_off, wbias_off],
        arena: [a_off, c_off, abias_off, scratch_off],
        sizes,
    }
}

fn nbits_cases() -> Vec<(String, NbitsCase)> {
    let mut cases = vec![];
    for bits in [4, 8] {
        for signed in [false, true] {
            let t = format!("{}{bits}", if signed { "s" } else { "u" });
            for (name, m, block, k) in [
                ("gemv_k_tail", 1, 32, 70),
                ("gemv_block16", 3, 16, 96),
                ("gemv_block48", 8, 48, 100),
                ("gemv_long", 2, 64, 1100),
                ("tiled", 70, 32, 70),
                ("tiled_block16", 20, 16, 64),
            ] {
                cases.push((
                    format!("{t}_{name}"),
                    NbitsCase::new(bits, signed, block, k, 50, m),
                ));
            }
            cases.push((
                format!("{t}_batched_bias"),
                NbitsCase {
                    batch: vec![2, 3],
                    bias: Some(Region::Weights),
                    zero_points: false,
                    ..NbitsCase::new(bits, signed, 64, 128, 33, 5)
                },
            ));
            cases.push((
                format!("{t}_unaligned_b"),
                NbitsCase {
                    b_shift: 3,
                    bias: Some(Region::Arena),
                    ..NbitsCase::new(bits, signed, 32, 64, 20, 2)
                },
            ));
        }
    }
    cases.push((
        "gemv_4096".into(),
        NbitsCase::new(4, false, 32, 4096, 4096, 1),
    ));
    cases.push((
        "gemv_11008".into(),
        NbitsCase::new(4, false, 32, 4096, 11008, 1),
    ));
    cases.push((
        "gemv_rows8".into(),
        NbitsCase::new(4, false, 128, 4096, 4096, 8),
    ));
    cases.push((
        "tiled_512".into(),
        NbitsCase::new(4, false, 32, 4096, 4096, 512),
    ));
    cases
}

// ---------------------------------------------------------------------------------------------
// ptxas.

/// Assembles `entries` as one module for `arch` with the shared ptxas runner (no error, no
/// warning, no spill); returns its `-v` report, or `None` where there is no ptxas.
fn assemble_entries(entries: &[PtxEntry], arch: &str) -> Option<String> {
    let mut text = String::from(HEADER);
    for e in entries {
        text.push('\n');
        text.push_str(&e.text);
    }
    common::ptx::assemble(&text, arch).map(|r| r.unwrap_or_else(|e| panic!("{arch}: {e}")))
}

/// The register count lines of `report` for entries whose names contain `filter`.
fn registers(report: &str, filter: &str) -> Vec<String> {
    let mut out = vec![];
    let mut current = String::new();
    for line in report.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            current = rest.split('\'').next().unwrap_or_default().to_string();
        }
        if line.contains("Used") && current.contains(filter) {
            out.push(format!("{current}: {}", line.trim()));
        }
    }
    out
}

#[test]
fn contractions_assemble_without_spills() {
    let cases = gemm_cases();
    let entries: Vec<PtxEntry> = cases
        .iter()
        .map(|(name, case)| {
            let (kernel, arena) = contract(case);
            let sizes = RegionSizes {
                arena,
                weights: 0,
                state: 0,
            };
            emit_kernel(&kernel, &format!("gemm_{name}"), sizes)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        })
        .collect();
    for (e, (name, case)) in entries.iter().zip(&cases) {
        let want_empty = case.m == 0 || case.n == 0;
        assert_eq!(
            e.launch.grid == [1, 1, 1] && want_empty,
            want_empty,
            "{name}"
        );
        assert!(e.launch.grid[2] <= 65535, "{name}");
    }
    for arch in ["sm_80", "sm_90"] {
        let Some(report) = assemble_entries(&entries, arch) else {
            return;
        };
        for line in registers(&report, "main")
            .iter()
            .chain(&registers(&report, "gemv"))
        {
            println!("{arch} {line}");
        }
    }
}

#[test]
fn low_bit_products_assemble_without_spills() {
    let cases = nbits_cases();
    let entries: Vec<PtxEntry> = cases
        .iter()
        .map(|(name, case)| {
            let layout = nbits_layout(case);
            emit_kernel(&layout.kernel, &format!("nbits_{name}"), layout.sizes)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        })
        .collect();
    for arch in ["sm_80", "sm_90"] {
        let Some(report) = assemble_entries(&entries, arch) else {
            return;
        };
        for filter in ["gemv_4096", "gemv_11008", "gemv_rows8", "tiled_512"] {
            for line in registers(&report, filter) {
                println!("{arch} {line}");
            }
        }
    }
}

#[test]
fn emitting_is_deterministic() {
    let (kernel, arena) = contract(&GemmCase::new(Scalar::F32, 70, 50, 33));
    let sizes = RegionSizes {
        arena,
        weights: 0,
        state: 0,
    };
    let first = emit_kernel(&kernel, "e", sizes).expect("emits");
    let second = emit_kernel(&kernel, "e", sizes).expect("emits");
    assert_eq!(first, second);
    let layout = nbits_layout(&NbitsCase::new(4, true, 32, 70, 50, 3));
    let a = emit_kernel(&layout.kernel, "q", layout.sizes).expect("emits");
    let b = emit_kernel(&layout.kernel, "q", layout.sizes).expect("emits");
    assert_eq!(a, b);
    let _ = (layout.weights, layout.arena);
}

// ---------------------------------------------------------------------------------------------
// Semantics: the emitted kernels run in the PTX interpreter against the reference.

/// Runs `kernel` in the interpreter on copies of `arena` and `weights` and returns the arena.
fn interpret(kernel: &Kernel, arena: &[u8], weights: &[u8]) -> Vec<u8> {
    let sizes = RegionSizes {
        arena: arena.len() as u64,
        weights: weights.len() as u64,
        state: 0,
    };
    let entry = emit_kernel(kernel, "k", sizes).expect("the kernel emits");
    let text = format!("{HEADER}\n{}", entry.text);
    let mut arena = arena.to_vec();
    common::ptx::run_launches(
        &text,
        &[("k".to_string(), entry.launch)],
        &mut arena,
        weights,
        &mut [0u8; 64],
    )
    .unwrap_or_else(|e| panic!("the kernel faults or is rejected: {e}"));
    arena
}

/// Compares two arenas element by element as `elem` floats: equal bits, or within `tol`
/// relative to `1 + |reference|`.
fn compare(name: &str, got: &[u8], want: &[u8], elem: Scalar, tol: f64) {
    assert_eq!(got.len(), want.len());
    let es = elem.size() as usize;
    let mut bad = 0;
    for (i, (g, w)) in got.chunks_exact(es).zip(want.chunks_exact(es)).enumerate() {
        if g == w {
            continue;
        }
        let (x, y) = if es == 4 {
            let f = |b: &[u8]| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64;
            (f(g), f(w))
        } else {
            let f = |b: &[u8]| f64::from_le_bytes(b.try_into().expect("8 bytes"));
            (f(g), f(w))
        };
        if !((x - y).abs() <= tol * (1.0 + y.abs())) {
            if bad < 10 {
                eprintln!("{name}: element {i} (byte {}): got {x}, want {y}", i * es);
            }
            bad += 1;
        }
    }
    assert_eq!(bad, 0, "{name}: {bad} elements differ");
}

#[test]
fn contractions_match_the_reference_in_the_interpreter() {
    for (name, case) in gemm_cases() {
        let work = case.batch.iter().product::<u64>() * case.m * case.n * case.k.max(1);
        if work > 1 << 20 {
            continue;
        }
        let (kernel, arena_len) = contract(&case);
        let mut rng = Rng(0x1234_5678 ^ work);
        let mut arena = vec![0u8; arena_len as usize];
        if case.elem == Scalar::F32 {
            for chunk in arena.chunks_exact_mut(4) {
                chunk.copy_from_slice(&rng.float().to_le_bytes());
            }
        } else {
            for chunk in arena.chunks_exact_mut(8) {
                chunk.copy_from_slice(&(rng.float() as f64).to_le_bytes());
            }
        }
        let weights = vec![0u8; 64];
        let mut want = arena.clone();
        memc_codegen::reference::run_kernel(&kernel, &mut want, &weights)
            .unwrap_or_else(|e| panic!("{name}: the reference fails: {e}"));
        let got = interpret(&kernel, &arena, &weights);
        let tol = if case.elem == Scalar::F32 {
            1e-5
        } else {
            1e-13
        };
        compare(&name, &got, &want, case.elem, tol);
    }
}

/// Packs `q` (`n` columns of `k` values, `q[col * k + kk]`) as the `nbits v2` layout doc says.
fn pack(q: &[i32], n: u64, k: u64, bits: u32) -> Vec<u8> {
    let rb = row_bytes(k, bits) as usize;
    let mut out = vec![0u8; n as usize * rb];
    for col in 0..n as usize {
        let row = &mut out[col * rb..(col + 1) * rb];
        for kk in 0..k as usize {
            let v = q[col * k as usize + kk];
            if bits == 4 {
                let (group, within) = (kk / 32, kk % 32);
                row[group * 16 + within % 16] |= ((v & 0xF) as u8) << (4 * (within / 16));
            } else {
                row[kk] = v as u8;
            }
        }
    }
    out
}

#[test]
fn low_bit_products_match_the_reference_in_the_interpreter() {
    for (name, case) in nbits_cases() {
        let rows: u64 = case.batch.iter().product::<u64>() * case.m;
        if rows * case.n * case.k > 1 << 20 {
            continue;
        }
        let layout = nbits_layout(&case);
        let mut rng = Rng(0x9E37_79B9 ^ rows ^ case.k << 20);
        let (lo, hi) = match (case.bits, case.signed) {
            (4, false) => (0, 15),
            (4, true) => (-8, 7),
            (_, false) => (0, 255),
            (_, true) => (-128, 127),
        };
        let kb = case.k.div_ceil(case.block);
        let q: Vec<i32> = (0..case.n * case.k).map(|_| rng.int(lo, hi)).collect();
        let mut weights = vec![0u8; layout.sizes.weights as usize];
        let [b_off, scales_off, zp_off, wbias_off] = layout.weights.map(|x| x as usize);
        let packed = pack(&q, case.n, case.k, case.bits);
        weights[b_off..b_off + packed.len()].copy_from_slice(&packed);
        for i in 0..(case.n * kb) as usize {
            let s = rng.float() * 0.1 + 0.001;
            weights[scales_off + 4 * i..scales_off + 4 * i + 4].copy_from_slice(&s.to_le_bytes());
            weights[zp_off + i] = rng.int(lo, hi) as u8;
        }
        for i in 0..case.n as usize {
            let at = wbias_off + 4 * i;
            weights[at..at + 4].copy_from_slice(&rng.float().to_le_bytes());
        }
        let mut arena = vec![0u8; layout.sizes.arena as usize];
        for chunk in arena.chunks_exact_mut(4) {
            chunk.copy_from_slice(&rng.float().to_le_bytes());
        }
        // The scratch is the CPU's; the GPU kernels never touch it, so it is left as it is.
        let mut want = arena.clone();
        memc_codegen::reference::run_kernel(&layout.kernel, &mut want, &weights)
            .unwrap_or_else(|e| panic!("{name}: the reference fails: {e}"));
        let got = interpret(&layout.kernel, &arena, &weights);
        compare(&name, &got, &want, Scalar::F32, 1e-5);
        let _ = layout.arena;
    }
}

/// With `MEMC_PTX_BENCH_DIR` set, writes the benchmark kernels (f32 SGEMM 4096^3, the m = 1
/// streaming product, the low-bit GEMVs and the many-rows product) there as PTX modules with a
/// JSON description of their launches and buffers, for a timing script on a GPU machine.
/// Without it the test only emits them.
#[test]
fn benchmark_kernels_emit() {
    let dir = std::env::var_os("MEMC_PTX_BENCH_DIR").map(PathBuf::from);
    let mut meta = vec![];
    let mut write = |name: &str, entry: PtxEntry, fields: String| {
        let l = entry.launch;
        meta.push(format!(
            "{{\"name\": \"{name}\", \"grid\": {:?}, \"block\": {:?}, \"shared\": {}, {fields}}}",
            l.grid, l.block, l.shared_bytes
        ));
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir).expect("the bench directory is writable");
            let text = format!("{HEADER}\n{}", entry.text);
            std::fs::write(dir.join(format!("{name}.ptx")), text).expect("writable");
        }
    };
    for (name, m, n, k, lay) in [
        ("sgemm_4096", 4096, 4096, 4096, [Lay::Row; 3]),
        (
            "sgemm_4096_tn",
            4096,
            4096,
            4096,
            [Lay::Trans, Lay::Row, Lay::Row],
        ),
        (
            "sgemm_4096_nt",
            4096,
            4096,
            4096,
            [Lay::Row, Lay::Trans, Lay::Row],
        ),
        ("sgemv_4096", 1, 4096, 4096, [Lay::Row; 3]),
        (
            "sgemv_4096_nt",
            1,
            4096,
            4096,
            [Lay::Row, Lay::Trans, Lay::Row],
        ),
    ] {
        let case = GemmCase {
            lay,
            ..GemmCase::new(Scalar::F32, m, n, k)
        };
        let (kernel, arena) = contract(&case);
        let KernelBody::Contract(c) = &kernel.body else {
            unreachable!("contract() builds contractions")
        };
        let b = c.b.as_mat().expect("contract() builds strided operands");
        let views = [&c.a, b, &c.c]
            .map(|v| format!("[{}, {}, {}]", v.byte_offset, v.row_stride, v.col_stride));
        let fields = format!(
            "\"kind\": \"gemm\", \"m\": {m}, \"n\": {n}, \"k\": {k}, \"arena\": {arena}, \
             \"weights\": 64, \"a\": {}, \"b\": {}, \"c\": {}",
            views[0], views[1], views[2]
        );
        let sizes = RegionSizes {
            arena,
            weights: 0,
            state: 0,
        };
        write(
            name,
            emit_kernel(&kernel, name, sizes).expect("emits"),
            fields,
        );
    }
    for (name, m, n) in [
        ("nbits_gemv_4096", 1, 4096),
        ("nbits_gemv_11008", 1, 11008),
        ("nbits_rows4_4096", 4, 4096),
        ("nbits_tiled_512", 512, 4096),
    ] {
        let case = NbitsCase::new(4, false, 32, 4096, n, m);
        let layout = nbits_layout(&case);
        let fields = format!(
            "\"kind\": \"nbits\", \"m\": {m}, \"n\": {n}, \"k\": 4096, \"qblock\": 32, \
             \"arena\": {}, \"weights\": {}, \"w\": {:?}, \"x\": {:?}",
            layout.sizes.arena, layout.sizes.weights, layout.weights, layout.arena
        );
        let entry = emit_kernel(&layout.kernel, name, layout.sizes).expect("emits");
        write(name, entry, fields);
    }
    if let Some(dir) = &dir {
        let json = format!("[\n{}\n]\n", meta.join(",\n"));
        std::fs::write(dir.join("kernels.json"), json).expect("writable");
    }
}
