//! Models compiled down to a lowered [`Program`] and run: the compile pipeline (import or text,
//! shape inference, cleanup, planning with or without scratch, lowering), the weights section,
//! and runs through the CPU backend and through the reference backend
//! (`memc_codegen::reference`), with a comparison of the two.

use memc_codegen::cpu::CpuProgram;
use memc_codegen::kernel::{Region, Scalar};
use memc_codegen::lower::{lower_function, lower_planned, plan_ops};
use memc_codegen::{reference, Program};
use memc_ir::target::TargetInfo;
use memc_ir::{Module, WeightStore};
use memc_passes::memory::MemoryPlan;
use memc_passes::Pass;
use std::collections::HashMap;
use std::path::Path;

/// A model compiled down to a program, with the module whose weights it reads.
pub struct Compiled {
    pub module: Module,
    pub program: Program,
    /// The scratch bytes the plan holds, over all ops.
    pub scratch_bytes: u64,
    /// What each op's planned scratch holds (`im2col matrix, GEMM panels`), for ops with any.
    pub scratch_uses: Vec<&'static str>,
}

/// Imports, infers shapes, cleans up, plans and lowers the model at `path`.
pub fn compile(path: &Path) -> Result<Compiled, String> {
    let render = |d: memc_ir::Diagnostic| format!("{d:?}");
    let imported = memc_ir::onnx::import_file(path).map_err(render)?;
    let mut module = imported.module;
    memc_ir::infer::infer_module(&mut module, &HashMap::new())
        .map_err(|d| format!("{:?}", d.first()))?;
    let passes: [&dyn Pass; 3] = [
        &memc_passes::Canonicalize,
        &memc_passes::Cse,
        &memc_passes::Dce,
    ];
    for pass in passes {
        pass.run(&mut module).map_err(|e| e.to_string())?;
    }
    compile_module(module)
}

/// Plans (with the scratch memory codegen asks for, as `memc compile` does) and lowers an
/// already inferred module: each op's form is chosen once, for the CPU target, and both the
/// memory plan and the lowering use it.
pub fn compile_module(module: Module) -> Result<Compiled, String> {
    compile_module_for(module, memc_codegen::cpu::target::target())
}

/// [`compile_module`] with the ops' forms chosen for `target` (a variant of the CPU's, so
/// that the CPU backend runs every form).
pub fn compile_module_for(module: Module, target: &TargetInfo) -> Result<Compiled, String> {
    let (_, func) = module.functions().next().ok_or("no function")?;
    let ops = plan_ops(func, &module.weights, target);
    let scratch = |_: &memc_ir::Function, op: memc_ir::OpId| ops.scratch_bytes(op);
    let plan =
        memc_passes::memory::plan_module_with_scratch(&module, &Default::default(), &scratch)
            .map_err(|d| format!("plan: {d:?}"))?;
    let program =
        lower_planned(func, &module.weights, &plan, &ops).map_err(|d| format!("lower: {d:?}"))?;
    let uses = func
        .layout()
        .block_ops(func.entry_block())
        .iter()
        .filter_map(|&op| ops.scratch_use(op))
        .collect();
    let mut compiled = compiled(module, program, &plan);
    compiled.scratch_uses = uses;
    Ok(compiled)
}

/// Plans without scratch memory (ops fall back to forms that need none) and lowers.
pub fn compile_module_without_scratch(module: Module) -> Result<Compiled, String> {
    let plan = memc_passes::memory::plan_module(&module, &Default::default())
        .map_err(|d| format!("plan: {d:?}"))?;
    let (_, func) = module.functions().next().ok_or("no function")?;
    let program = memc_codegen::lower::lower_function(func, &module.weights, &plan)
        .map_err(|d| format!("lower: {d:?}"))?;
    Ok(compiled(module, program, &plan))
}

fn compiled(module: Module, program: Program, plan: &MemoryPlan) -> Compiled {
    Compiled {
        module,
        program,
        scratch_bytes: plan.scratch.iter().map(|s| s.size).sum(),
        scratch_uses: Vec::new(),
    }
}

/// The weights section of `program`, filled from `weights` (plain copies, sub-byte weights
/// unpacked where a slot says so, operands laid out for the CPU's GEMM; no packed low-bit
/// slots).
pub fn weights_section(program: &Program, weights: &WeightStore) -> Vec<u8> {
    let mut section = vec![0u8; program.weights_size as usize];
    let bytes_of = |name: &str| {
        let id = weights
            .lookup(name)
            .expect("every weight slot names a weight");
        weights
            .get(id)
            .and_then(|w| w.bytes())
            .expect("weights have bytes")
    };
    for slot in &program.weights {
        let at = slot.byte_offset as usize;
        if let Some(spec) = &slot.operand {
            // A constant operand laid out for the CPU's GEMM, computed from its weight as the
            // plan writer does.
            let source = bytes_of(&spec.weight);
            spec.check(source)
                .expect("the layout reads inside its weight");
            let mut at = at;
            memc_codegen::prepack::pack(spec, source, &mut |bytes| {
                section[at..at + bytes.len()].copy_from_slice(bytes);
                at += bytes.len();
                Ok(())
            })
            .expect("packing into memory does not fail");
            continue;
        }
        let bytes = bytes_of(&slot.name);
        let bytes = match slot.unpacked {
            Some(elem) => memc_ir::packing::unpack(elem.elem(), bytes, slot.byte_size as usize),
            None => bytes.to_vec(),
        };
        section[at..at + bytes.len()].copy_from_slice(&bytes);
    }
    section
}

/// An 8-byte-aligned copy of `bytes`, at least 8 bytes long (the CPU backend's loads of wide
/// elements assume the region bases are aligned).
fn aligned(bytes: &[u8], len: usize) -> Vec<u64> {
    let mut words = vec![0u64; len.div_ceil(8).max(1)];
    as_bytes_mut(&mut words)[..bytes.len()].copy_from_slice(bytes);
    words
}

fn as_bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: any bytes are valid u8s, and u64 storage is at least as aligned.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() * 8) }
}

/// The bytes of every output of `program`, read from the final arena and the weights.
fn outputs(program: &Program, arena: &[u8], weights: &[u8]) -> Vec<Vec<u8>> {
    program
        .outputs
        .iter()
        .map(|io| {
            let region = match io.region {
                Region::Arena => arena,
                Region::Weights => weights,
                Region::State => panic!("test programs have no state"),
            };
            let at = io.byte_offset as usize;
            region[at..at + io.byte_size() as usize].to_vec()
        })
        .collect()
}

/// Runs `program` through the CPU backend (on two threads) on `inputs` (raw little-endian
/// bytes by input position) and returns the outputs' bytes.
pub fn run_cpu(program: &Program, weights: &[u8], inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut arena = aligned(&[], program.arena_size as usize);
    let weights = aligned(weights, program.weights_size as usize);
    let arena_bytes = as_bytes_mut(&mut arena);
    for (io, bytes) in program.inputs.iter().zip(inputs) {
        assert_eq!(bytes.len() as u64, io.byte_size(), "input `{}`", io.name);
        let at = io.byte_offset as usize;
        arena_bytes[at..at + bytes.len()].copy_from_slice(bytes);
    }
    let kernels: Vec<_> = program.kernels().collect();
    let cpu = CpuProgram::compile(&kernels).expect("the kernels compile");
    let pool = memc_codegen::cpu::WorkerPool::new(2).expect("a thread pool");
    for i in 0..kernels.len() {
        // SAFETY: the regions have the sizes the program was validated against, and nothing
        // else touches the arena while a kernel runs.
        unsafe {
            cpu.run_kernel(i, arena.as_mut_ptr().cast(), weights.as_ptr().cast(), &pool);
        }
    }
    let mut weights = weights;
    let weight_bytes = as_bytes_mut(&mut weights).to_vec();
    outputs(program, as_bytes_mut(&mut arena), &weight_bytes)
}

/// Runs `program` through the reference backend on `inputs` and returns the outputs' bytes;
/// panics with the reference's error (an out-of-bounds access is a lowering bug).
pub fn run_reference(program: &Program, weights: &[u8], inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    reference::run_on_inputs(program, weights, &inputs)
        .unwrap_or_else(|e| panic!("the reference backend stopped: {e}"))
}

/// Runs `compiled` on `inputs` through the reference backend.
pub fn run(compiled: &Compiled, inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let weights = weights_section(&compiled.program, &compiled.module.weights);
    run_reference(&compiled.program, &weights, inputs)
}

/// The elements of `bytes` (type `elem`) as `f64`.
pub fn values(elem: Scalar, bytes: &[u8]) -> Vec<f64> {
    let w = elem.size() as usize;
    bytes
        .chunks_exact(w)
        .map(|b| {
            let mut raw = [0u8; 8];
            raw[..w].copy_from_slice(b);
            let [b0, b1, b2, b3, ..] = raw;
            match elem {
                Scalar::F32 => f64::from(f32::from_le_bytes([b0, b1, b2, b3])),
                Scalar::F64 => f64::from_le_bytes(raw),
                Scalar::I8 => f64::from(b0 as i8),
                Scalar::I16 => f64::from(i16::from_le_bytes([b0, b1])),
                Scalar::I32 => f64::from(i32::from_le_bytes([b0, b1, b2, b3])),
                Scalar::I64 => i64::from_le_bytes(raw) as f64,
                Scalar::U64 => u64::from_le_bytes(raw) as f64,
                Scalar::U32 => f64::from(u32::from_le_bytes([b0, b1, b2, b3])),
                Scalar::U16 => f64::from(u16::from_le_bytes([b0, b1])),
                Scalar::U8 | Scalar::Bool => f64::from(b0),
                // A storage type: its value, widened.
                narrow if narrow.is_float() => {
                    f64::from_bits(narrow.widen(u64::from_le_bytes(raw)))
                }
                narrow => narrow.widen(u64::from_le_bytes(raw)) as i64 as f64,
            }
        })
        .collect()
}

/// Asserts that two backends' outputs of `program` agree: integers and bools exactly, floats
/// within `1e-5 + 1e-4 * |reference|` (NaN matches NaN, infinities match exactly). The
/// tolerance covers summation order and the CPU backend's inline transcendentals.
pub fn assert_backends_agree(program: &Program, cpu: &[Vec<u8>], reference: &[Vec<u8>]) {
    assert_eq!(cpu.len(), reference.len(), "output counts");
    for ((io, got), want) in program.outputs.iter().zip(cpu).zip(reference) {
        if !io.elem.is_float() {
            assert_eq!(got, want, "output `{}`: CPU and reference differ", io.name);
            continue;
        }
        let (g, w) = (values(io.elem, got), values(io.elem, want));
        for (i, (&g, &w)) in g.iter().zip(&w).enumerate() {
            let ok = (g.is_nan() && w.is_nan())
                || g == w
                || (g.is_finite() && w.is_finite() && (g - w).abs() <= 1e-5 + 1e-4 * w.abs());
            assert!(
                ok,
                "output `{}` element {i}: CPU {g}, reference {w}",
                io.name
            );
        }
    }
}

/// Parses and shape-infers `text` (one function of textual IR), compiles it, runs it on
/// `inputs` through the CPU backend and the reference backend (asserting they agree), and
/// returns how many of its kernels `native` says the CPU backend takes natively, and of how
/// many.
pub fn lowered_natives(
    text: &str,
    inputs: &[Vec<u8>],
    native: impl Fn(&CpuProgram, usize) -> bool,
) -> (usize, usize) {
    let mut module = memc_ir::parse_module(text).unwrap_or_else(|d| panic!("{d:?}"));
    memc_ir::infer::infer_module(&mut module, &Default::default()).expect("shapes infer");
    let compiled = compile_module(module).expect("it compiles");
    let program = &compiled.program;
    let cpu = run_cpu(program, &[], inputs);
    let reference = run_reference(program, &[], inputs);
    assert_backends_agree(program, &cpu, &reference);
    let kernels: Vec<_> = program.kernels().collect();
    let cpu = CpuProgram::compile(&kernels).expect("the kernels compile");
    let natives = (0..kernels.len()).filter(|&i| native(&cpu, i)).count();
    (natives, kernels.len())
}

/// Runs `program` through the CPU backend and the reference backend, asserts that they agree
/// ([`assert_backends_agree`]) and returns the CPU backend's outputs.
pub fn run_both(program: &Program, weights: &[u8], inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let cpu = run_cpu(program, weights, inputs);
    let reference = run_reference(program, weights, inputs);
    assert_backends_agree(program, &cpu, &reference);
    cpu
}

/// Parses, verifies, plans (without scratch) and lowers the textual IR `text`.
pub fn lower_text(text: &str) -> (Module, Program) {
    let module = memc_ir::parse_module(text).unwrap_or_else(|d| panic!("parse: {d:?}"));
    if let Err(d) = memc_ir::verify_module(&module) {
        panic!("verify: {d:?}");
    }
    let plan = memc_passes::memory::plan_module(&module, &Default::default())
        .unwrap_or_else(|d| panic!("plan: {d:?}"));
    let (_, func) = module.functions().next().expect("one function");
    let program =
        lower_function(func, &module.weights, &plan).unwrap_or_else(|d| panic!("lower: {d:?}"));
    (module, program)
}

/// Little-endian bytes of f32 values.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// f32 values of little-endian bytes.
pub fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect()
}
