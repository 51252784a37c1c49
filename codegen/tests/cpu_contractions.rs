//! The CPU backend on contractions: batched, transposed and accumulating products, and large
//! ones split over two threads, against an f64 reference.
//!
//! Hand-built kernels run through `CpuProgram` and compared with plain Rust references
//! computed here (helpers in `common::kernels`).

mod common;

use common::kernels::*;
use memc_codegen::kernel::{f64_bits, Contract, Kernel, KernelBody, MatView, Region, Scalar};

fn contract_reference(c: &Contract, a: &[f64], b: &[f64], out: &mut [f64]) {
    let alpha = f64::from_bits(c.alpha);
    let bm =
        c.b.as_mat()
            .expect("the tests' contractions have a strided b");
    let n_batches: u64 = c.batch.iter().product();
    for lin in 0..n_batches {
        let mut offs = [0i64; 3];
        let mut rest = lin;
        for axis in (0..c.batch.len()).rev() {
            let i = (rest % c.batch[axis]) as i64;
            rest /= c.batch[axis];
            for (o, v) in offs.iter_mut().zip([&c.a, bm, &c.c]) {
                *o += i * v.batch_strides[axis];
            }
        }
        for r in 0..c.m as i64 {
            for col in 0..c.n as i64 {
                let mut sum = 0.0;
                for k in 0..c.k as i64 {
                    sum += a[(offs[0] + r * c.a.row_stride + k * c.a.col_stride) as usize]
                        * b[(offs[1] + k * bm.row_stride + col * bm.col_stride) as usize];
                }
                let at = (offs[2] + r * c.c.row_stride + col * c.c.col_stride) as usize;
                out[at] = alpha * sum + if c.accumulate { out[at] } else { 0.0 };
            }
        }
    }
}

#[test]
fn batched_transposed_accumulating_contraction() {
    for (elem, threads) in [(Scalar::F64, 1), (Scalar::F32, 1), (Scalar::F64, 2)] {
        // batch [2]; a is stored transposed (k x m), b row-major, c row-major; all in the arena.
        let (m, n, k) = (3u64, 4u64, 5u64);
        let size = elem.size() as i64;
        let a_len = 2 * m * k;
        let b_len = 2 * k * n;
        let c_len = 2 * m * n;
        let a: Vec<f64> = (0..a_len).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..b_len).map(|i| (i as f64 * 0.11).cos()).collect();
        let c0: Vec<f64> = (0..c_len).map(|i| i as f64 * 0.5).collect();
        let contract = Contract {
            elem,
            batch: vec![2],
            m,
            n,
            k,
            a: MatView {
                region: Region::Arena,
                byte_offset: 0,
                batch_strides: vec![(m * k) as i64],
                row_stride: 1,
                col_stride: m as i64,
            },
            b: MatView {
                region: Region::Weights,
                byte_offset: 0,
                batch_strides: vec![(k * n) as i64],
                row_stride: n as i64,
                col_stride: 1,
            }
            .into(),
            c: MatView {
                region: Region::Arena,
                byte_offset: a_len as i64 * size,
                batch_strides: vec![(m * n) as i64],
                row_stride: n as i64,
                col_stride: 1,
            },
            alpha: f64_bits(0.5),
            accumulate: true,
            pack: None,
            a_packed: None,
            b_packed: None,
            transposed: false,
            winograd: None,
        };
        let kernel = Kernel {
            name: "bmm".into(),
            body: KernelBody::Contract(contract.clone()),
        };
        let mut ar = Buf::new(((a_len + c_len) as i64 * size) as usize);
        let mut w = Buf::new((b_len as i64 * size) as usize);
        let mut want = c0.clone();
        contract_reference(&contract, &a, &b, &mut want);
        if elem == Scalar::F64 {
            ar.put(0, &a);
            ar.put((a_len * 8) as usize, &c0);
            w.put(0, &b);
        } else {
            ar.put(0, &a.iter().map(|&x| x as f32).collect::<Vec<_>>());
            ar.put(
                (a_len * 4) as usize,
                &c0.iter().map(|&x| x as f32).collect::<Vec<_>>(),
            );
            w.put(0, &b.iter().map(|&x| x as f32).collect::<Vec<_>>());
        }
        run_on(&[kernel], &mut ar, &w, threads);
        let got: Vec<f64> = if elem == Scalar::F64 {
            ar.get((a_len * 8) as usize, c_len as usize)
        } else {
            ar.get::<f32>((a_len * 4) as usize, c_len as usize)
                .iter()
                .map(|&x| x as f64)
                .collect()
        };
        let tol = if elem == Scalar::F64 { 1e-12 } else { 1e-5 };
        for i in 0..c_len as usize {
            assert!(
                (got[i] - want[i]).abs() <= tol * want[i].abs().max(1.0),
                "{elem:?} at {i}: {} want {}",
                got[i],
                want[i]
            );
        }
    }
}

/// Four large products (each above the parallel threshold) with disjoint results: on two
/// threads they run one product per thread, and give the one-thread results exactly.
#[test]
fn batched_large_contraction_on_two_threads() {
    let (batch, m, n, k) = (4u64, 72u64, 80u64, 64u64);
    let a: Vec<f32> = (0..batch * m * k)
        .map(|i| ((i * 13) % 17) as f32 - 8.0)
        .collect();
    let b: Vec<f32> = (0..batch * k * n)
        .map(|i| ((i * 7) % 11) as f32 - 5.0)
        .collect();
    let (a_at, b_at, c_at) = (0, batch * m * k * 4, (batch * m * k + batch * k * n) * 4);
    let mat = |byte_offset: u64, rows: u64, cols: u64| MatView {
        region: Region::Arena,
        byte_offset: byte_offset as i64,
        batch_strides: vec![(rows * cols) as i64],
        row_stride: cols as i64,
        col_stride: 1,
    };
    let contract = Contract {
        elem: Scalar::F32,
        batch: vec![batch],
        m,
        n,
        k,
        a: mat(a_at, m, k),
        b: mat(b_at, k, n).into(),
        c: mat(c_at, m, n),
        alpha: f64_bits(1.0),
        accumulate: false,
        pack: None,
        a_packed: None,
        b_packed: None,
        transposed: false,
        winograd: None,
    };
    let kernel = Kernel {
        name: "bmm".into(),
        body: KernelBody::Contract(contract),
    };
    let bytes = (c_at + batch * m * n * 4) as usize;
    let mut results = Vec::new();
    for threads in [1, 2] {
        let mut ar = Buf::new(bytes);
        ar.put(a_at as usize, &a);
        ar.put(b_at as usize, &b);
        ar.put(c_at as usize, &vec![f32::NAN; (batch * m * n) as usize]);
        run_on(
            std::slice::from_ref(&kernel),
            &mut ar,
            &Buf::new(0),
            threads,
        );
        results.push(ar.get::<f32>(c_at as usize, (batch * m * n) as usize));
    }
    // Small integers: exact, whatever the order of the sums.
    for bi in 0..batch as usize {
        for r in 0..m as usize {
            for col in 0..n as usize {
                let want: f32 = (0..k as usize)
                    .map(|kk| {
                        a[bi * (m * k) as usize + r * k as usize + kk]
                            * b[bi * (k * n) as usize + kk * n as usize + col]
                    })
                    .sum();
                let at = bi * (m * n) as usize + r * n as usize + col;
                assert_eq!(results[1][at], want, "batch {bi} at ({r}, {col})");
            }
        }
    }
    assert_eq!(results[0], results[1], "one and two threads differ");
}

#[test]
fn large_contraction_on_two_threads() {
    // 70 x 80 x 90 (above the parallel threshold), not accumulating, c column-major.
    let (m, n, k) = (70u64, 80u64, 90u64);
    let a: Vec<f64> = (0..m * k).map(|i| ((i * 13) % 17) as f64 - 8.0).collect();
    let b: Vec<f64> = (0..k * n).map(|i| ((i * 7) % 11) as f64 - 5.0).collect();
    let contract = Contract {
        elem: Scalar::F64,
        batch: vec![],
        m,
        n,
        k,
        a: MatView {
            region: Region::Arena,
            byte_offset: 0,
            batch_strides: vec![],
            row_stride: k as i64,
            col_stride: 1,
        },
        b: MatView {
            region: Region::Arena,
            byte_offset: (m * k * 8) as i64,
            batch_strides: vec![],
            row_stride: n as i64,
            col_stride: 1,
        }
        .into(),
        c: MatView {
            region: Region::Arena,
            byte_offset: ((m * k + k * n) * 8) as i64,
            batch_strides: vec![],
            row_stride: 1,
            col_stride: m as i64,
        },
        alpha: f64_bits(1.0),
        accumulate: false,
        pack: None,
        a_packed: None,
        b_packed: None,
        transposed: false,
        winograd: None,
    };
    let mut want = vec![0.0; (m * n) as usize];
    // The reference writes into its own buffer with c's strides.
    let mut c_ref = contract.clone();
    c_ref.c.byte_offset = 0;
    contract_reference(&c_ref, &a, &b[..], &mut want);
    let _ = &mut c_ref;
    let mut ar = Buf::new(((m * k + k * n + m * n) * 8) as usize);
    ar.put(0, &a);
    ar.put((m * k * 8) as usize, &b);
    // Garbage in c: a non-accumulating product must overwrite it.
    ar.put(
        ((m * k + k * n) * 8) as usize,
        &vec![f64::NAN; (m * n) as usize],
    );
    let kernel = Kernel {
        name: "mm".into(),
        body: KernelBody::Contract(contract),
    };
    run_on(&[kernel], &mut ar, &Buf::new(0), 2);
    let got: Vec<f64> = ar.get(((m * k + k * n) * 8) as usize, (m * n) as usize);
    // Small integers: exact.
    let b_at = |kk: usize, col: usize| b[kk * n as usize + col];
    let _ = b_at;
    assert_eq!(got, want);
}
