//! Building blocks for the op table's unit tests: small functions, ops and constant weights.

use crate::{
    Attribute, ElemType, Function, OpId, Opcode, TensorType, Type, ValueId, WeightBytes,
    WeightStore,
};

pub fn f32_of(shape: &[u64]) -> Type {
    Type::from(TensorType::with_shape(ElemType::F32, shape))
}

/// Appends an op to `func`'s entry block.
pub fn build(
    func: &mut Function,
    opcode: Opcode,
    operands: Vec<ValueId>,
    results: Vec<Type>,
    attrs: Vec<(&'static str, Attribute)>,
) -> OpId {
    let entry = func.entry_block();
    func.build_op(entry, opcode, operands, results, attrs)
}

/// A constant weight of type `ty` holding `data`, and the value of its `Weight` op.
pub fn weight(
    func: &mut Function,
    weights: &mut WeightStore,
    ty: TensorType,
    data: WeightBytes,
) -> ValueId {
    let name = format!("w{}", weights.len());
    let id = weights
        .insert(&name, ty.clone(), data)
        .expect("test weight names are unique and sizes match");
    let op = build(
        func,
        Opcode::Weight,
        vec![],
        vec![Type::from(ty)],
        vec![("value", Attribute::Weight(id))],
    );
    func.op(op).results[0]
}
