//! Support for the lowering tests of the movement and linalg ops: the compile pipeline up to
//! a lowered [`Program`], a TensorProto reader for the ONNX backend node tests' `.pb` files,
//! and a slow reference interpreter of the kernel IR that follows the contract in
//! `memc_codegen::kernel` literally (every address is bounds-checked), so lowerings can be
//! checked numerically without the JIT.

#![allow(dead_code)]

pub mod interp;
pub mod pb;

use memc_codegen::kernel::Region;
use memc_codegen::Program;
use memc_ir::{Module, WeightStore};
use memc_passes::Pass;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where the ONNX backend node tests are, if the virtual environment has them.
pub fn node_test_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.venv/lib/python3.11/site-packages/onnx/backend/test/data/node");
    dir.is_dir().then_some(dir)
}

/// A model compiled down to a program, with the module whose weights it reads.
pub struct Compiled {
    pub module: Module,
    pub program: Program,
    /// The scratch bytes the plan holds, over all ops.
    pub scratch_bytes: u64,
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
/// already inferred module.
pub fn compile_module(module: Module) -> Result<Compiled, String> {
    let weights = &module.weights;
    let scratch = |func: &memc_ir::Function, op: memc_ir::OpId| {
        memc_codegen::lower::scratch_bytes(func, weights, op)
    };
    let plan =
        memc_passes::memory::plan_module_with_scratch(&module, &Default::default(), &scratch)
            .map_err(|d| format!("plan: {d:?}"))?;
    lower_planned(module, plan)
}

/// Plans without scratch memory (ops fall back to forms that need none) and lowers.
pub fn compile_module_without_scratch(module: Module) -> Result<Compiled, String> {
    let plan = memc_passes::memory::plan_module(&module, &Default::default())
        .map_err(|d| format!("plan: {d:?}"))?;
    lower_planned(module, plan)
}

fn lower_planned(
    module: Module,
    plan: memc_passes::memory::MemoryPlan,
) -> Result<Compiled, String> {
    let (_, func) = module.functions().next().ok_or("no function")?;
    let program = memc_codegen::lower::lower_function(func, &module.weights, &plan)
        .map_err(|d| format!("lower: {}", describe(&d)))?;
    let scratch_bytes = plan.scratch.iter().map(|s| s.size).sum();
    Ok(Compiled {
        module,
        program,
        scratch_bytes,
    })
}

/// A diagnostic's message and notes on one line each.
pub fn describe(d: &memc_ir::Diagnostic) -> String {
    format!("{d:?}")
}

/// The weights section of `program`, filled from `weights`.
pub fn weights_section(program: &Program, weights: &WeightStore) -> Vec<u8> {
    let mut section = vec![0u8; program.weights_size as usize];
    for slot in &program.weights {
        let id = weights
            .lookup(&slot.name)
            .expect("every weight slot names a weight");
        let bytes = weights
            .get(id)
            .and_then(|w| w.bytes())
            .expect("weights have bytes");
        let at = slot.byte_offset as usize;
        section[at..at + bytes.len()].copy_from_slice(bytes);
    }
    section
}

/// Runs `compiled` on `inputs` (raw little-endian bytes by input position) and returns the
/// outputs' bytes.
pub fn run(compiled: &Compiled, inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let program = &compiled.program;
    let mut memory = interp::Memory {
        arena: vec![0u8; program.arena_size as usize],
        weights: weights_section(program, &compiled.module.weights),
    };
    for (io, bytes) in program.inputs.iter().zip(inputs) {
        let at = io.byte_offset as usize;
        assert_eq!(
            bytes.len() as u64,
            io.byte_size(),
            "input `{}` size",
            io.name
        );
        memory.arena[at..at + bytes.len()].copy_from_slice(bytes);
    }
    for kernel in program.kernels() {
        interp::run_kernel(kernel, &mut memory);
    }
    program
        .outputs
        .iter()
        .map(|io| {
            let at = io.byte_offset as usize;
            let region = match io.region {
                Region::Arena => &memory.arena,
                Region::Weights => &memory.weights,
            };
            region[at..at + io.byte_size() as usize].to_vec()
        })
        .collect()
}

/// The outcome of one node test.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Pass,
    /// Compilation failed (import, planning or lowering), with the message.
    CompileError(String),
    /// The outputs differ, with a description of the first difference.
    Mismatch(String),
    /// Something panicked (a memc bug, or the interpreter caught an out-of-bounds access).
    Panic(String),
}

/// Runs the node test in `dir` (its `model.onnx` and `test_data_set_0`).
pub fn run_node_test(dir: &Path) -> Outcome {
    let compiled = match compile(&dir.join("model.onnx")) {
        Ok(c) => c,
        Err(e) => return Outcome::CompileError(e),
    };
    let data = dir.join("test_data_set_0");
    let program = &compiled.program;
    let mut inputs = Vec::new();
    let mut given: Vec<pb::Tensor> = Vec::new();
    for i in 0.. {
        let path = data.join(format!("input_{i}.pb"));
        if !path.exists() {
            break;
        }
        given.push(pb::read_tensor(&path).expect("input decodes"));
    }
    for (i, io) in program.inputs.iter().enumerate() {
        let t = given
            .iter()
            .find(|t| t.name == io.name)
            .or_else(|| given.get(i))
            .unwrap_or_else(|| panic!("no data for input `{}`", io.name));
        inputs.push(t.bytes.clone());
    }
    let outputs = run(&compiled, &inputs);
    let mut expected: Vec<pb::Tensor> = Vec::new();
    for j in 0.. {
        let path = data.join(format!("output_{j}.pb"));
        if !path.exists() {
            break;
        }
        expected.push(pb::read_tensor(&path).expect("output decodes"));
    }
    for (j, io) in program.outputs.iter().enumerate() {
        let want = expected
            .iter()
            .find(|t| t.name == io.name)
            .or_else(|| expected.get(j));
        let Some(want) = want else { continue };
        let shape: Vec<u64> = want.dims.iter().map(|&d| d as u64).collect();
        if shape != io.shape {
            return Outcome::Mismatch(format!(
                "output `{}` has shape {:?}, expected {:?}",
                io.name, io.shape, shape
            ));
        }
        if let Err(e) = pb::compare(io.elem, &outputs[j], &want.bytes) {
            return Outcome::Mismatch(format!("output `{}`: {e}", io.name));
        }
    }
    Outcome::Pass
}
