//! Printing parsed text gives the text back, and the verifier accepts the bundled example.

use memc_ir::{parse_module, print_module, verify_module};

fn roundtrip(text: &str) {
    let module = match parse_module(text) {
        Ok(m) => m,
        Err(d) => panic!("parse failed:\n{}", d.render("input", text, false)),
    };
    let printed = print_module(&module);
    let reparsed = parse_module(&printed).expect("printed text parses");
    assert_eq!(
        print_module(&reparsed),
        printed,
        "print(parse(print(x))) == print(x)"
    );
}

#[test]
fn example_roundtrips_and_verifies() {
    let text = include_str!("../../examples/mlp.mlir");
    roundtrip(text);
    let module = parse_module(text).expect("example parses");
    if let Err(errors) = verify_module(&module) {
        let rendered: Vec<String> = errors
            .iter()
            .map(|e| e.render("mlp.mlir", text, false))
            .collect();
        panic!("{}", rendered.join("\n"));
    }
}
