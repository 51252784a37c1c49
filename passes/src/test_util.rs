//! Helpers shared by the unit tests of this crate: types, small functions and queries.

use memc_ir::{Dim, ElemType, Function, Module, OpId, Opcode, TensorType, Type, ValueId};

/// A static `f32` tensor type.
pub fn f32_tensor(shape: &[u64]) -> Type {
    TensorType::with_shape(ElemType::F32, shape).into()
}

/// A static `i64` tensor type.
pub fn i64_tensor(shape: &[u64]) -> Type {
    TensorType::with_shape(ElemType::I64, shape).into()
}

/// A tensor type with arbitrary dims.
pub fn tensor(elem: ElemType, dims: Vec<Dim>) -> Type {
    TensorType::new(elem, dims).into()
}

/// The single result of `op`.
pub fn result(func: &Function, op: OpId) -> ValueId {
    let results = &func.op(op).results;
    assert_eq!(
        results.len(),
        1,
        "{} has {} results",
        func.op(op).opcode.name(),
        results.len()
    );
    results[0]
}

/// Appends `func.return values` to the entry block.
pub fn ret(func: &mut Function, values: Vec<ValueId>) -> OpId {
    let entry = func.entry_block();
    func.build_op(entry, Opcode::Return, values, vec![], [])
}

/// The opcodes of the entry block, in order.
pub fn entry_opcodes(func: &Function) -> Vec<Opcode> {
    func.layout()
        .block_ops(func.entry_block())
        .iter()
        .map(|&op| func.op(op).opcode)
        .collect()
}

/// The operands of the entry block's `func.return`.
pub fn returned(func: &Function) -> Vec<ValueId> {
    let ops = func.layout().block_ops(func.entry_block());
    let last = *ops.last().expect("test functions end with func.return");
    assert_eq!(func.op(last).opcode, Opcode::Return);
    func.op(last).operands.clone()
}

/// A module with one function `main(%arg0: tensor<4xf32>) -> tensor<4xf32>` whose body `build`
/// writes, returning the values to return.
pub fn module_with(build: impl FnOnce(&mut Function) -> Vec<ValueId>) -> Module {
    let mut func = Function::new("main", vec![f32_tensor(&[4])], vec![f32_tensor(&[4])]);
    let results = build(&mut func);
    ret(&mut func, results);
    let mut module = Module::new();
    module.add_function(func);
    module
}

/// Panics with the verifier's diagnostics and the printed IR unless `module` verifies.
pub fn assert_module_valid(module: &Module, when: &str) {
    if let Err(diagnostics) = memc_ir::verify_module(module) {
        let messages: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
        panic!(
            "invalid IR {when}:\n{}\n{}",
            messages.join("\n"),
            memc_ir::print_module(module)
        );
    }
}

/// Panics unless `func`, alone in a module without weights, verifies.
pub fn assert_valid(func: &Function, when: &str) {
    let mut module = Module::new();
    module.add_function(func.clone());
    assert_module_valid(&module, when);
}

/// Runs `pass` over `func`, checking that the IR verifies before and after; returns what the
/// pass returned.
pub fn run_verified<T>(func: &mut Function, pass: impl FnOnce(&mut Function) -> T) -> T {
    assert_valid(func, "before the pass");
    let out = pass(func);
    assert_valid(func, "after the pass");
    out
}
