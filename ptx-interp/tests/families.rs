//! Every integer, float and conversion family against values computed in Rust or taken from
//! the PTX ISA: NaN, infinities, -0, subnormals, saturation, shift clamping, f16 rounding.

mod common;

use common::{cases, module, out_bytes, Exp};
use memc_ptx_interp::{Launch, Memory, Module};

#[test]
fn every_instruction_family() {
    let cases = cases();
    let m = Module::parse(&module(&cases)).unwrap();
    let mut failures = Vec::new();
    for (k, c) in cases.iter().enumerate() {
        let mut mem = Memory::new();
        let mut bytes = vec![0u8; 32];
        for (j, a) in c.args.iter().enumerate() {
            bytes[j * 8..j * 8 + 8].copy_from_slice(&a.to_le_bytes());
        }
        let arena = mem.add(bytes);
        let launch = Launch {
            grid: [1, 1, 1],
            block: [1, 1, 1],
            shared_bytes: 0,
        };
        if let Err(e) = m.launch(&format!("case_{k}"), launch, &[arena, 0, 0], &mut mem) {
            failures.push(format!("{}: {e}", c.instr));
            continue;
        }
        let n = out_bytes(c.tout);
        let mut out = [0u8; 8];
        out[..n].copy_from_slice(&mem.bytes(arena)[24..24 + n]);
        let got = u64::from_le_bytes(out);
        let ok = match c.exp {
            Exp::Bits(e) => got == e,
            Exp::Nan => match n {
                2 => got & 0x7c00 == 0x7c00 && got & 0x3ff != 0,
                4 => f32::from_bits(got as u32).is_nan(),
                _ => f64::from_bits(got).is_nan(),
            },
        };
        if !ok {
            failures.push(format!(
                "{} with {:x?}: got {got:#x}, expected {:x?}",
                c.instr, c.args, c.exp
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
