//! Whole kernels run through the interpreter against results computed in Rust: a grid-stride
//! vector add, warp and block reductions, divergence before a shuffle, a tiled SGEMM.

use memc_ptx_interp::{Launch, Memory, Module};

fn load(name: &str) -> Module {
    let path = format!("{}/tests/ptx/{name}.ptx", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Module::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn to_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn launch(grid: u32, block: u32) -> Launch {
    Launch {
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        shared_bytes: 0,
    }
}

#[test]
fn vector_add_grid_stride() {
    let m = load("vadd");
    assert_eq!(m.entries().collect::<Vec<_>>(), ["vadd"]);
    let a: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..1000).map(|i| 1.0 / (i as f32 + 1.0)).collect();
    // Fewer threads than elements, so every thread goes round the loop several times.
    for (grid, block) in [(2, 128), (3, 256), (8, 256)] {
        let mut mem = Memory::new();
        let mut arena = a.clone();
        arena.extend(std::iter::repeat_n(0.0, 1000));
        let arena = mem.add(f32s(&arena));
        let weights = mem.add(f32s(&b));
        let state = mem.add(vec![]);
        let stats = m
            .launch(
                "vadd",
                launch(grid, block),
                &[arena, weights, state],
                &mut mem,
            )
            .unwrap();
        let out = to_f32s(&mem.bytes(arena)[4000..]);
        for i in 0..1000 {
            assert_eq!(out[i].to_bits(), (a[i] + b[i]).to_bits(), "element {i}");
        }
        assert!(stats.instructions > 10_000);
        assert_eq!(stats.blocks, u64::from(grid));
    }
}

#[test]
fn warp_reduce_with_shfl_bfly() {
    let m = load("warp_reduce");
    let x: Vec<f32> = (0..64).map(|i| (i * 3 % 17) as f32).collect();
    let mut arena = x.clone();
    arena.resize(1024, 0.0);
    let mut mem = Memory::new();
    let arena = mem.add(f32s(&arena));
    let stats = m
        .launch("warp_reduce", launch(1, 64), &[arena, 0, 0], &mut mem)
        .unwrap();
    let out = to_f32s(mem.bytes(arena));
    for w in 0..2 {
        let sum: f32 = x[w * 32..w * 32 + 32].iter().sum();
        assert_eq!(out[256 + w], sum);
        assert_eq!(out[512 + w], sum);
    }
    assert_eq!(stats.shuffles, 64 * 5);
}

#[test]
fn block_reduce_through_shared_memory() {
    let m = load("block_reduce");
    let x: Vec<f32> = (0..1024).map(|i| (i % 13) as f32 - 6.0).collect();
    let mut mem = Memory::new();
    let arena = mem.add(f32s(&x));
    let state = mem.add(vec![0; 16]);
    let stats = m
        .launch("block_reduce", launch(4, 256), &[arena, 0, state], &mut mem)
        .unwrap();
    let out = to_f32s(mem.bytes(state));
    for b in 0..4 {
        let sum: f32 = x[b * 256..b * 256 + 256].iter().sum();
        assert_eq!(out[b], sum, "block {b}");
    }
    // One barrier after the stores, eight in the tree, per block.
    assert_eq!(stats.barriers, 4 * 9);
}

#[test]
fn divergent_branches_reconverge_before_shfl() {
    let m = load("diverge_shfl");
    let mut mem = Memory::new();
    let arena = mem.add(vec![0; 20 * 32]);
    m.launch("diverge_shfl", launch(1, 32), &[arena, 0, 0], &mut mem)
        .unwrap();
    let out: Vec<u32> = mem
        .bytes(arena)
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let v = |l: u32| if l % 2 == 1 { 2 * l } else { l + 100 };
    for l in 0..32u32 {
        let row = &out[l as usize * 5..l as usize * 5 + 5];
        let (down, valid) = if l < 31 { (v(l + 1), 1) } else { (v(l), 0) };
        let up = if l >= 2 { v(l - 2) } else { 7777 };
        let bfly = if l % 2 == 1 { v(l ^ 2) } else { 0 };
        assert_eq!(row, [down, valid, up, v(5), bfly], "lane {l}");
    }
}

#[test]
fn tiled_sgemm_with_static_and_dynamic_shared_memory() {
    let m = load("sgemm");
    let (mm, n, k) = (32, 48, 64);
    let a: Vec<f32> = (0..mm * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let mut mem = Memory::new();
    let (ab, bb, cb) = (
        mem.add(f32s(&a)),
        mem.add(f32s(&b)),
        mem.add(vec![0; mm * n * 4]),
    );
    let l = Launch {
        grid: [3, 2, 1],
        block: [16, 16, 1],
        shared_bytes: 1024,
    };
    let stats = m.launch("sgemm", l, &[ab, bb, cb], &mut mem).unwrap();
    // The interpreter's speed, with and without the shared-memory race detector.
    for races in [true, false] {
        let mut m = m.clone();
        m.set_race_detection(races);
        let start = std::time::Instant::now();
        let mut instructions = 0;
        for _ in 0..20 {
            instructions += m
                .launch("sgemm", l, &[ab, bb, cb], &mut mem)
                .unwrap()
                .instructions;
        }
        let secs = start.elapsed().as_secs_f64();
        eprintln!(
            "sgemm (race detection {races}): {instructions} instructions in {secs:.3} s = {:.1} M instructions/s",
            instructions as f64 / secs / 1e6
        );
    }
    assert_eq!(stats.instructions, 517_632);
    assert_eq!(stats.barriers, 6 * 8);
    let c = to_f32s(mem.bytes(cb));
    for i in 0..mm {
        for j in 0..n {
            let mut acc = 0.0f32;
            for kk in 0..k {
                acc = a[i * k + kk].mul_add(b[kk * n + j], acc);
            }
            assert_eq!(c[i * n + j], acc, "C[{i}][{j}]");
        }
    }
    // Too little dynamic shared memory: the B tile's stores run out of bounds.
    let l = Launch {
        shared_bytes: 512,
        ..l
    };
    let e = m
        .launch("sgemm", l, &[ab, bb, cb], &mut mem)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("shared access of 4 bytes") && e.contains("out of bounds"),
        "{e}"
    );
}

#[test]
fn atomics_and_generic_shared_pointers() {
    let m = load("atomics");
    let mut mem = Memory::new();
    let arena = mem.add(vec![0; 64 + 4 * 3 * 96]);
    m.launch("atomics", launch(3, 96), &[arena, 0, 0], &mut mem)
        .unwrap();
    let b = mem.bytes(arena);
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let n = 3 * 96;
    assert_eq!(u32_at(0), n as u32);
    assert_eq!(
        f32::from_le_bytes(b[4..8].try_into().unwrap()),
        (0..n).sum::<usize>() as f32
    );
    assert_eq!(u64_at(8), (0..n as u64).sum::<u64>());
    assert_eq!(u64_at(16), 2 * n as u64);
    // The old values returned by atom.add are a permutation of 0..n.
    let mut old: Vec<u32> = (0..n).map(|t| u32_at(64 + 4 * t)).collect();
    old.sort_unstable();
    assert_eq!(old, (0..n as u32).collect::<Vec<_>>());
    for blk in 0..3 {
        assert_eq!(u32_at(32 + 4 * blk), 96);
    }
}
