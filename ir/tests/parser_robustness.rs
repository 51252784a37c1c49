//! The parser never panics and never overflows the stack, whatever it is fed: random bytes,
//! every truncation of a valid file, random mutations of it, and deep nesting. Whenever a
//! mutated input still parses, verifying and printing it must not panic either, and the printed
//! text must parse back to the same text.

use memc_ir::{parse_module, print_module, verify_module};
use std::panic::{catch_unwind, AssertUnwindSafe};

const EXAMPLE: &str = include_str!("../../examples/mlp.mlir");

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Parses, and on success verifies, prints and re-parses; panics with the input on a panic.
fn check(input: &str) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if let Ok(module) = parse_module(input) {
            let _ = verify_module(&module);
            let printed = print_module(&module);
            let reparsed = parse_module(&printed)
                .unwrap_or_else(|d| panic!("printed text does not parse: {d}\n{printed}"));
            assert_eq!(
                print_module(&reparsed),
                printed,
                "round trip changed the text"
            );
        } else if let Err(diag) = parse_module(input) {
            // Rendering the diagnostic must not panic either.
            let _ = diag.render("fuzz.mlir", input, false);
        }
    }));
    if outcome.is_err() {
        panic!("memc panicked on this input:\n{input:?}");
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let len = rng.below(200);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        check(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    for (end, _) in EXAMPLE.char_indices() {
        check(&EXAMPLE[..end]);
    }
}

#[test]
fn random_mutations_never_panic() {
    const PIECES: &[&str] = &[
        "{",
        "}",
        "(",
        ")",
        "<",
        ">",
        "[",
        "]",
        "%",
        "#",
        "@",
        "^",
        ":",
        ",",
        "=",
        "\"",
        "x",
        "?",
        "-",
        "0",
        "7",
        "99999999999999999999",
        "0x",
        "->",
        "tensor<",
        "f32",
        "i4",
        "\\",
        "loc(",
        "return",
        "\"onnx.If\"",
        "({",
        "})",
        "dense_resource<",
        "#memc.dims<[",
        "é",
        "\n",
        "//",
        "%0#9",
        "%arg0",
        "1.5e",
        "array<i64:",
    ];
    let mut rng = Rng(42);
    let chars: Vec<(usize, char)> = EXAMPLE.char_indices().collect();
    for _ in 0..4000 {
        let mut text = EXAMPLE.to_string();
        for _ in 0..1 + rng.below(3) {
            let (at, _) = chars[rng.below(chars.len())];
            let at = at.min(text.len());
            if !text.is_char_boundary(at) {
                continue;
            }
            match rng.below(3) {
                0 => text.insert_str(at, PIECES[rng.below(PIECES.len())]),
                1 => {
                    let end = (at + 1 + rng.below(8)).min(text.len());
                    if text.is_char_boundary(end) {
                        text.replace_range(at..end, "");
                    }
                }
                _ => {
                    let end = (at + 1).min(text.len());
                    if text.is_char_boundary(end) {
                        text.replace_range(at..end, PIECES[rng.below(PIECES.len())]);
                    }
                }
            }
        }
        check(&text);
    }
}

#[test]
fn deep_nesting_is_an_error() {
    let depth = 100_000;
    let arrays = format!(
        "func.func @f() {{\n  \"onnx.Relu\"() {{a = {}{}}} : () -> ()\n}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let err = parse_module(&arrays).expect_err("too deep");
    assert!(err.message.contains("nesting"), "{}", err.message);

    let mut regions = String::from("func.func @f(%c: tensor<i1>) {\n");
    for _ in 0..depth {
        regions.push_str("\"onnx.If\"(%c) ({\n");
    }
    let err = parse_module(&regions).expect_err("too deep");
    assert!(err.message.contains("nesting"), "{}", err.message);
}
