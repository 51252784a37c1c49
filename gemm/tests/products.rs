//! memc's GEMM against a naive triple loop: shapes around every block edge (MR, NR, MC, KC,
//! NC, the in-place-`B` row limit), row- and column-major and strided operands (a row-major
//! `A` is read in place, a column-major one packed), `alpha`,
//! `accumulate` (and a NaN-filled `C` that must not leak when it is off), f32 and f64,
//! planned slots and stack panels, one and several threads (run on scoped threads here), a
//! packed `A` or `B` asked for ahead (`GemmBlocking::prefetch_packed`).
//! `MEMC_GEMM_ISA=scalar|avx2|avx512` runs the same on another microkernel.

use memc_gemm::{Epilogue, GemmBlocking, Kernels, Mat, Product};

/// A deterministic value in [-0.5, 0.5).
fn value(i: usize, salt: usize) -> f64 {
    ((i * 2654435761 + salt * 40503) % 1000) as f64 / 1000.0 - 0.5
}

/// A matrix of `rows x cols` with a layout: row-major, column-major, or padded rows.
fn layout(rows: usize, cols: usize, form: usize) -> (isize, isize, usize) {
    match form % 3 {
        0 => (cols as isize, 1, rows * cols),
        1 => (1, rows as isize, rows * cols),
        _ => ((cols + 3) as isize, 1, rows * (cols + 3)),
    }
}

/// Whether two results hold the same values, bit for bit.
fn same_bits<T: Copy + Into<f64>>(x: &[T], y: &[T]) -> bool {
    x.iter()
        .zip(y)
        .all(|(&x, &y)| x.into().to_bits() == y.into().to_bits())
}

fn check<T: Kernels + Into<f64> + From<f32>>(
    m: usize,
    n: usize,
    k: usize,
    form: usize,
    threads: usize,
    planned: bool,
) {
    let (a_rs, a_cs, a_len) = layout(m, k, form);
    let (b_rs, b_cs, b_len) = layout(k, n, form / 3);
    let (c_rs, c_cs, c_len) = layout(m, n, form / 9);
    let a: Vec<T> = (0..a_len).map(|i| T::from(value(i, 1) as f32)).collect();
    let b: Vec<T> = (0..b_len).map(|i| T::from(value(i, 2) as f32)).collect();
    for (accumulate, alpha) in [(false, 1.0f32), (true, -0.5)] {
        let start: Vec<T> = (0..c_len)
            .map(|i| {
                T::from(if accumulate {
                    value(i, 3) as f32
                } else {
                    f32::NAN
                })
            })
            .collect();
        let mut c = start.clone();
        let mut outcomes = Vec::new();
        let product = Product {
            m,
            n,
            k,
            a: Mat {
                ptr: a.as_ptr().cast_mut(),
                rs: a_rs,
                cs: a_cs,
            },
            b: Mat {
                ptr: b.as_ptr().cast_mut(),
                rs: b_rs,
                cs: b_cs,
            },
            c: Mat {
                ptr: c.as_mut_ptr(),
                rs: c_rs,
                cs: c_cs,
            },
            alpha: T::from(alpha),
            accumulate,
            a_packed: None,
            b_packed: None,
            epilogue: Epilogue::NONE,
        };
        let pack_b = !memc_gemm::gemm_b_in_place(m as u64, b_cs as i64);
        let blocking = GemmBlocking::new(1, m as u64, n as u64, k as u64, T::SIZE as u64, pack_b);
        let mut scratch = vec![0u128; (blocking.scratch_bytes() as usize).div_ceil(16) + 4];
        let base = scratch.as_mut_ptr().cast::<u8>();
        let slots = planned.then(|| base.wrapping_add(base.align_offset(64)));
        let broadcast = |t: usize, f: &(dyn Fn(usize) + Sync)| {
            std::thread::scope(|s| {
                for i in 1..t {
                    s.spawn(move || f(i));
                }
                f(0);
            })
        };
        // SAFETY: the operands hold every element the strides reach; the slots are sized by
        // the blocking.
        unsafe { memc_gemm::run::<T>(1, &|_| product, &blocking, slots, threads, &broadcast) };
        // `product` run again into a fresh copy of the start with its packed weight asked for
        // ahead (`prefetch_packed`) in `planned`'s blocking: the result.
        let prefetched = |product: Product<T>, planned: GemmBlocking| {
            let mut ahead = start.clone();
            let product = Product {
                c: Mat {
                    ptr: ahead.as_mut_ptr(),
                    ..product.c
                },
                ..product
            };
            let prefetching = GemmBlocking {
                prefetch_packed: true,
                ..planned
            };
            // SAFETY: as above; the slots are at least as large as `planned`'s.
            unsafe {
                memc_gemm::run::<T>(1, &|_| product, &prefetching, slots, threads, &broadcast)
            };
            ahead
        };
        if m > 1 {
            // `A` packed whole beforehand (a constant weight): the same values, bit for bit.
            let mut packed = vec![T::ZERO; memc_gemm::packed_a_len(m as u64, k as u64) as usize];
            // SAFETY: `packed` holds `packed_a_len` values; `a` every element of `m x k`.
            unsafe { memc_gemm::pack_a_whole(packed.as_mut_ptr(), product.a, m, k) };
            let mut again = start.clone();
            let product = Product {
                c: Mat {
                    ptr: again.as_mut_ptr(),
                    ..product.c
                },
                a_packed: Some(packed.as_ptr()),
                ..product
            };
            // Its slots hold no `A` panel (`without_a_panel`: the `B` panel starts each slot).
            let without_a = blocking.without_a_panel();
            // SAFETY: as above; `a_packed` holds `A` in the layout the loop reads, and the
            // slots are at least as large as this blocking's.
            unsafe { memc_gemm::run::<T>(1, &|_| product, &without_a, slots, threads, &broadcast) };
            // Planned or stack panels, `K` is cut where the plan cuts it, so every sum's order
            // is the same.
            assert!(
                same_bits(&again, &c),
                "{m}x{k}x{n} form {form} threads {threads} planned {planned}: packed A differs"
            );
            // Asking for the weight's panels ahead (`prefetch_packed`) changes no value.
            assert!(
                same_bits(&prefetched(product, without_a), &again),
                "{m}x{k}x{n} form {form} threads {threads} planned {planned}: prefetch_packed differs"
            );
            outcomes.push(("packed A", again));
        }
        {
            // `B` packed whole beforehand (a constant weight): no `B` panel, and with planned
            // panels (the blocking and so every sum's order unchanged) the same values bit for
            // bit, except for a one-row product into contiguous columns, which the strip
            // kernel (packed) or the row kernel (in place) sums over all of `K` at once.
            let mut packed = vec![T::ZERO; memc_gemm::packed_b_len(k as u64, n as u64) as usize];
            // SAFETY: `packed` holds `packed_b_len` values; `b` every element of `k x n`.
            unsafe { memc_gemm::pack_b_whole(packed.as_mut_ptr(), product.b, k, n) };
            let mut again = start.clone();
            let product = Product {
                c: Mat {
                    ptr: again.as_mut_ptr(),
                    ..product.c
                },
                b_packed: Some(packed.as_ptr()),
                ..product
            };
            let whole = GemmBlocking::new(1, m as u64, n as u64, k as u64, T::SIZE as u64, false);
            // SAFETY: as above; `b_packed` holds `B` in the layout the loop reads, and the
            // slots are at least as large as this blocking's.
            unsafe { memc_gemm::run::<T>(1, &|_| product, &whole, slots, threads, &broadcast) };
            let row_kernel = m == 1 && c_cs == 1;
            if slots.is_some() && blocking.slots > 0 && !row_kernel {
                assert!(
                    same_bits(&again, &c),
                    "{m}x{k}x{n} form {form} threads {threads} planned {planned}: packed B differs"
                );
            }
            // Asking for the weight's strips ahead (`prefetch_packed`) changes no value.
            assert!(
                same_bits(&prefetched(product, whole), &again),
                "{m}x{k}x{n} form {form} threads {threads} planned {planned}: prefetch_packed differs"
            );
            outcomes.push(("packed B", again));
        }
        {
            // Finished once each block is complete: the same values plus a residual (with
            // `accumulate`; it lies right after `c`'s elements), clamped, bit for bit.
            // One NaN in the residual and one in the bias: the clamp keeps a NaN (a clamp
            // whose operands were swapped would give `lo` there).
            let nan_at = c_len / 2;
            let residual: Vec<T> = (0..c_len)
                .map(|i| {
                    T::from(if i == nan_at {
                        f32::NAN
                    } else {
                        value(i, 4) as f32
                    })
                })
                .collect();
            let mut finished = start.clone();
            finished.extend_from_slice(&residual);
            let (lo, hi) = (T::from(-0.05), T::from(0.1));
            let add = accumulate.then_some(c_len as isize);
            // A bias per row without `accumulate` (the product then starts from NaN garbage).
            let bias: Vec<T> = (0..m)
                .map(|i| {
                    T::from(if i == m / 2 {
                        f32::NAN
                    } else {
                        value(i, 5) as f32
                    })
                })
                .collect();
            let bias_at = (!accumulate).then_some((bias.as_ptr(), 1isize));
            let product = Product {
                c: Mat {
                    ptr: finished.as_mut_ptr(),
                    ..product.c
                },
                epilogue: Epilogue {
                    bias: bias_at,
                    add,
                    clamp: Some((lo, hi)),
                },
                ..product
            };
            // SAFETY: as above; the residual lies `c_len` elements on in the same buffer.
            unsafe { memc_gemm::run::<T>(1, &|_| product, &blocking, slots, threads, &broadcast) };
            let elements = (0..m).flat_map(|i| (0..n).map(move |j| (i, j)));
            for (i, j) in elements {
                let at = (i as isize * c_rs + j as isize * c_cs) as usize;
                let (got, mut plain) = (finished[at], c[at]);
                if bias_at.is_some() {
                    plain = plain.add(bias[i]);
                }
                if add.is_some() {
                    plain = plain.add(residual[at]);
                }
                let want = if plain < lo {
                    lo
                } else if plain > hi {
                    hi
                } else {
                    plain
                };
                let (got, want): (f64, f64) = (got.into(), want.into());
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "{m}x{k}x{n} form {form} threads {threads} planned {planned} accumulate \
                     {accumulate}: finished [{at}] {got}, want {want}"
                );
            }
        }
        outcomes.push(("", c));
        for (what, c) in &outcomes {
            for i in 0..m {
                for j in 0..n {
                    let mut sum = 0.0f64;
                    for p in 0..k {
                        let x: f64 = a[(i as isize * a_rs + p as isize * a_cs) as usize].into();
                        let y: f64 = b[(p as isize * b_rs + j as isize * b_cs) as usize].into();
                        sum += x * y;
                    }
                    let at = (i as isize * c_rs + j as isize * c_cs) as usize;
                    let old: f64 = start[at].into();
                    let want = alpha as f64 * sum + if accumulate { old } else { 0.0 };
                    let got: f64 = c[at].into();
                    assert!(
                    (got - want).abs() <= 1e-4 * (1.0 + k as f64).sqrt() * (1.0 + want.abs()),
                    "{m}x{k}x{n} form {form} threads {threads} planned {planned} accumulate {accumulate} {what}: c[{i}, {j}] = {got}, want {want}"
                );
                }
            }
        }
    }
}

#[test]
fn products_match_a_naive_loop() {
    let shapes = [
        (1, 1, 1),
        (1, 37, 300),
        (3, 33, 17),
        (6, 32, 256),
        (7, 65, 257),
        (16, 200, 40),
        (17, 129, 31),
        // The most rows that read `B` where it is (`GEMM_SMALL_M`), and one more.
        (48, 70, 33),
        (49, 40, 20),
        (97, 70, 300),
        // A last strip of 4 columns (196 = 6 x 32 + 4: a 14x14 image), packed and in place.
        (97, 196, 70),
        (24, 196, 96),
        // A last tile of one column (49 = 3 x 16 + 1: a 7x7 image), half its vectors summed.
        (97, 49, 70),
        (100, 130, 20),
        (13, 1, 600),
        // Up to 48 rows times a packed `B`: the strip kernel, rows in groups of 2 and 3.
        (40, 300, 300),
        (11, 65, 513),
        // One row: the row kernels, over full and partial accumulator blocks.
        (1, 300, 70),
        (1, 517, 9),
        (1, 96, 5),
    ];
    for (index, &(m, n, k)) in shapes.iter().enumerate() {
        for form in [0, 1 + 3 * 2, 2 + 3 * 0 + 9 * 1, 3 * 1 + 9 * 2] {
            let threads = 1 + index % 3;
            check::<f32>(m, n, k, form, threads, true);
            check::<f32>(m, n, k, form, threads, false);
            check::<f64>(m, n, k, form, threads, index % 2 == 0);
        }
    }
    // Column blocks whose last is short (196 = 128 + 68, 300 = 128 + 128 + 44): the threads'
    // shares of the units follow their work, not their count, with more row blocks.
    for (m, n, k) in [(256, 196, 40), (100, 300, 30), (37, 140, 9)] {
        for threads in [2, 3] {
            check::<f32>(m, n, k, 0, threads, true);
            check::<f32>(m, n, k, 1 + 3 * 2, threads, false);
        }
    }
}

/// A packer of the panels of a plain row-major `k x m` matrix (`A^T`), as a caller's
/// column matrix would be packed.
struct PlainPacker {
    at: Vec<f32>,
    m: usize,
}

impl memc_gemm::PackB<f32> for PlainPacker {
    unsafe fn pack(
        &self,
        _batch: usize,
        dst: *mut f32,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) {
        for s in 0..cols.div_ceil(nr) {
            for p in 0..kc {
                for j in 0..nr {
                    let col = j0 + s * nr + j;
                    let v = if s * nr + j < cols {
                        self.at[(p0 + p) * self.m + col]
                    } else {
                        0.0
                    };
                    *dst.add(s * nr * kc + p * nr + j) = v;
                }
            }
        }
    }
}

/// `run_packing_a`: `A`'s panels from a packer of `A^T`, `B` packed whole, the columns split
/// over the threads where there are at least as many columns as rows (each thread packing
/// every `A` panel), rows otherwise; planned slots (one column block) and stack panels,
/// against a naive loop, and `transpose_into` storing the transposed result with `alpha`,
/// the accumulation and a bias per output row.
#[test]
fn products_packing_a_match_a_naive_loop() {
    for &(m, n, k) in &[(49, 512, 300), (7, 40, 9), (100, 33, 600), (196, 256, 40)] {
        for threads in 1..=3 {
            for planned in [false, true] {
                let a: Vec<f32> = (0..m * k).map(|i| value(i, 1) as f32).collect();
                let b: Vec<f32> = (0..k * n).map(|i| value(i, 2) as f32).collect();
                let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
                let mut b_whole = vec![0f32; memc_gemm::packed_b_len(k as u64, n as u64) as usize];
                let b_mat = Mat {
                    ptr: b.as_ptr().cast_mut(),
                    rs: n as isize,
                    cs: 1,
                };
                // SAFETY: `b` is `k x n`; `b_whole` holds its packed length.
                unsafe { memc_gemm::pack_b_whole(b_whole.as_mut_ptr(), b_mat, k, n) };
                let mut c = vec![f32::NAN; m * n];
                let blocking = GemmBlocking::new(1, m as u64, n as u64, k as u64, 4, false)
                    .with_one_column_block(1, m as u64, n as u64);
                let mut slots = vec![0u8; blocking.scratch_bytes() as usize + 64];
                let base = slots.as_mut_ptr() as usize;
                let slots_ptr = (base.next_multiple_of(64)) as *mut u8;
                let packer = PlainPacker { at, m };
                let (c_ptr, b_ptr) = (c.as_mut_ptr() as usize, b_whole.as_ptr() as usize);
                let at = |_: usize| Product {
                    m,
                    n,
                    k,
                    a: Mat {
                        ptr: std::ptr::null_mut(),
                        rs: 0,
                        cs: 0,
                    },
                    b: Mat {
                        ptr: std::ptr::null_mut(),
                        rs: 0,
                        cs: 0,
                    },
                    c: Mat {
                        ptr: c_ptr as *mut f32,
                        rs: n as isize,
                        cs: 1,
                    },
                    alpha: 1.0,
                    accumulate: false,
                    a_packed: None,
                    b_packed: Some(b_ptr as *const f32),
                    epilogue: Epilogue::NONE,
                };
                let broadcast = |t: usize, f: &(dyn Fn(usize) + Sync)| {
                    std::thread::scope(|s| {
                        for i in 0..t {
                            s.spawn(move || f(i));
                        }
                    })
                };
                let slots = (planned && blocking.slots > 0).then_some(slots_ptr);
                // SAFETY: the operands hold what the dims address; the slots are planned.
                unsafe {
                    memc_gemm::run_packing_a(1, &at, &packer, &blocking, slots, threads, &broadcast)
                };
                for i in 0..m {
                    for j in 0..n {
                        let want: f64 = (0..k)
                            .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                            .sum();
                        let got = c[i * n + j] as f64;
                        assert!(
                            (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                            "{m}x{n}x{k} threads {threads} planned {planned}: [{i}, {j}] {got} != {want}"
                        );
                    }
                }
                // The result transposed into an `n x m` block: `-2 c^T + start + bias`.
                let start: Vec<f32> = (0..n * m).map(|i| value(i, 3) as f32).collect();
                let bias: Vec<f32> = (0..n).map(|i| value(i, 4) as f32).collect();
                let mut out = start.clone();
                let epilogue = Epilogue {
                    bias: Some((bias.as_ptr(), 1)),
                    add: None,
                    clamp: None,
                };
                let out_mat = Mat {
                    ptr: out.as_mut_ptr(),
                    rs: m as isize,
                    cs: 1,
                };
                // SAFETY: `c` is `m x n`, `out` `n x m`, the bias has `n` rows.
                unsafe {
                    memc_gemm::transpose_into(c.as_ptr(), out_mat, n, m, -2.0, true, epilogue)
                };
                for j in 0..n {
                    for i in 0..m {
                        let want = (-2.0f32 * c[i * n + j] + start[j * m + i]) + bias[j];
                        assert_eq!(out[j * m + i].to_bits(), want.to_bits(), "[{j}, {i}]");
                    }
                }
            }
        }
    }
}

/// A product with its panels on the stack (no planned scratch: a plan leaves them out where
/// they would raise its peak) gives the bits planned panels give: the stack blocking keeps
/// the planned `KC`, only its panels hold fewer rows and columns. Shapes past one `KC` (300,
/// 513, 600 values of `K`), past the stack's 48 rows and 64 columns, f32 and f64, one and
/// three threads, accumulating or not.
#[test]
fn stack_panels_sum_in_the_planned_order() {
    fn run<T: Kernels + From<f32> + Into<f64>>(m: usize, n: usize, k: usize, threads: usize) {
        let a: Vec<T> = (0..m * k).map(|i| T::from(value(i, 4) as f32)).collect();
        let b: Vec<T> = (0..k * n).map(|i| T::from(value(i, 5) as f32)).collect();
        let blocking = GemmBlocking::new(1, m as u64, n as u64, k as u64, T::SIZE as u64, true);
        let broadcast = |t: usize, f: &(dyn Fn(usize) + Sync)| {
            std::thread::scope(|s| {
                for i in 1..t {
                    s.spawn(move || f(i));
                }
                f(0);
            })
        };
        for accumulate in [false, true] {
            let mut results = vec![];
            for planned in [true, false] {
                let mut c: Vec<T> = (0..m * n).map(|i| T::from(value(i, 6) as f32)).collect();
                let mut scratch = vec![0u8; blocking.scratch_bytes() as usize + 64];
                let base = scratch.as_mut_ptr();
                let slots = planned.then(|| base.wrapping_add(base.align_offset(64)));
                let product = Product {
                    m,
                    n,
                    k,
                    a: Mat {
                        ptr: a.as_ptr().cast_mut(),
                        rs: k as isize,
                        cs: 1,
                    },
                    b: Mat {
                        ptr: b.as_ptr().cast_mut(),
                        rs: n as isize,
                        cs: 1,
                    },
                    c: Mat {
                        ptr: c.as_mut_ptr(),
                        rs: n as isize,
                        cs: 1,
                    },
                    alpha: T::from(1.0),
                    accumulate,
                    a_packed: None,
                    b_packed: None,
                    epilogue: Epilogue::NONE,
                };
                // SAFETY: the operands hold `m x k`, `k x n` and `m x n` values; the slots
                // are sized by the blocking.
                unsafe {
                    memc_gemm::run::<T>(1, &|_| product, &blocking, slots, threads, &broadcast)
                };
                results.push(c);
            }
            assert!(
                same_bits(&results[0], &results[1]),
                "{m}x{k}x{n} threads {threads} accumulate {accumulate}: stack panels differ"
            );
        }
    }
    for (m, n, k) in [
        (97, 130, 300),
        (60, 200, 513),
        (13, 70, 600),
        (200, 65, 257),
    ] {
        for threads in [1, 3] {
            run::<f32>(m, n, k, threads);
            run::<f64>(m, n, k, threads);
        }
    }
}
