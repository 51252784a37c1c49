//! Fuzzes the text parser: any UTF-8 text must parse or give a diagnostic; what parses must
//! verify without panicking and print back to text that parses to the same text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match memc_ir::parse_module(text) {
        Ok(module) => {
            let _ = memc_ir::verify_module(&module);
            let printed = memc_ir::print_module(&module);
            let reparsed = memc_ir::parse_module(&printed).expect("printed IR parses");
            assert_eq!(memc_ir::print_module(&reparsed), printed);
        }
        Err(diag) => {
            let _ = diag.render("fuzz.mlir", text, false);
        }
    }
});
