//! The `fold-known` pass: replaces the results whose values are known at compile time by
//! constant weights, so that the ops computing them leave the schedule.
//!
//! Once `--dim` bindings made the shapes static, `Shape(x)`, `Size(x)` and the small integer
//! subgraphs built on them (Gather, Concat, Unsqueeze, Div of known values, the lengths of
//! `ms.ConcatTraining`) compute values shape inference already knows ([`memc_ir::infer`]'s
//! known values). Left in the schedule they cost more than their own step: the memory planner
//! counts `Shape(x)` as a read of `x`, so a large activation stays alive until the `Shape` runs.
//! This pass runs shape inference's known-value tracking over each function and replaces every
//! such result by the result of a new `memc.weight` op that reads a new weight holding the
//! value; `dce` then removes the ops nobody reads any more.
//!
//! What the pass guarantees:
//! - A result is replaced only when its op is pure, holds no regions and is not already a
//!   `memc.weight`; when every element of its known value is a constant (no symbolic or
//!   unknown dim) that the result's element type represents exactly; and when it has at least
//!   one and at most [`MAX_KNOWN_ELEMENTS`] elements (an empty tensor costs nothing).
//! - The constant is the value the op computes at run time, bit for bit: every operand with a
//!   known value must itself be exact in this sense, so a fold never builds on an intermediate
//!   that would have overflowed or rounded at run time; float results are replaced only for
//!   ops whose fold rounds once, as the kernel does (never `Range`, `ReduceSum` or
//!   `ReduceProd` of floats, which accumulate).
//! - The replacement has exactly the replaced value's type. Uses by `func.return` keep the
//!   computed value (the function's outputs stay arena tensors); every other use reads the
//!   constant. The pass never erases an op: dead producers are left for `dce`.
//! - New weights are named after the op (its location, else its opcode), unique in the
//!   store; equal constants (same type and bytes) share one weight and one `memc.weight` op,
//!   placed at the top of the function's entry block with the other weights.

use crate::manager::{Pass, PassError};
use memc_ir::infer::MAX_KNOWN_ELEMENTS;
use memc_ir::{
    Attribute, ElemType, Function, KnownValue, Module, OpId, Opcode, ShapeInference, SymInt,
    TensorType, Type, ValueId, WeightBytes, WeightId, WeightStore,
};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The known-value folding pass; see the module doc.
pub struct FoldKnown;

impl Pass for FoldKnown {
    fn name(&self) -> &'static str {
        "fold-known"
    }

    fn description(&self) -> &'static str {
        "replaces results whose values are known at compile time (Shape, Size and the small \
         integer computations on them) by constant weights"
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        for id in module.func_ids() {
            let folds = find_folds(module.function(id), &module.weights);
            apply_folds(module, id, folds)?;
        }
        Ok(())
    }
}

/// One result to replace: the value, its type and the constant's little-endian bytes.
struct Fold {
    value: ValueId,
    ty: TensorType,
    bytes: Vec<u8>,
    /// The name the new weight is derived from.
    name: String,
}

/// Replaces the results of `func` that have known values by constant weights, adding the
/// weights to `weights`; returns how many results were replaced.
///
/// This is the pass for one function, for callers that hold a function and a store apart.
pub fn fold_known_values(func: &mut Function, weights: &mut WeightStore) -> usize {
    let folds = find_folds(func, weights);
    let mut folder = Folder::default();
    for fold in folds {
        // The store rejects only duplicate names and wrong sizes; both are excluded by
        // construction, and a fold that cannot be added is skipped.
        let _ = folder.add(func, weights, fold);
    }
    folder.finish(func)
}

/// Runs known-value tracking over `func` in program order and lists the results to replace.
fn find_folds(func: &Function, weights: &WeightStore) -> Vec<Fold> {
    let mut inference = ShapeInference::new();
    let mut exact: HashSet<ValueId> = HashSet::new();
    let mut folds = Vec::new();
    for op in walk_regions_first(func) {
        // Errors and unknown types only mean that nothing is known about the results.
        let _ = inference.infer_op(func, weights, op);
        let data = func.op(op);
        let def = data.opcode.def();
        let is_weight = data.opcode == Opcode::Weight;
        // Every operand whose data the fold may have read must itself be exact; `Shape` and
        // `Size` read only their operand's type.
        let reads_types_only = matches!(data.opcode, Opcode::Shape | Opcode::Size);
        let operands_exact = reads_types_only
            || data
                .operands
                .iter()
                .all(|v| inference.known_value(*v).is_none() || exact.contains(v));
        for (index, &result) in data.results.iter().enumerate() {
            let Some(known) = inference.known_value(result) else {
                continue;
            };
            let Some(ty) = func.value_type(result).tensor() else {
                continue;
            };
            if is_weight {
                // A weight's bytes are its value.
                exact.insert(result);
                continue;
            }
            if !operands_exact
                || !def.is_pure()
                || def.is_terminator()
                || !data.regions.is_empty()
                || (ty.elem.is_float() && accumulates(data.opcode))
            {
                continue;
            }
            let Some(bytes) = encode(known, ty) else {
                continue;
            };
            exact.insert(result);
            folds.push(Fold {
                value: result,
                ty: ty.clone(),
                bytes,
                name: weight_name(func, op, index),
            });
        }
    }
    let read = values_read_once_folded(func, &folds);
    folds.retain(|fold| read.contains(&fold.value));
    folds
}

/// The values that some op other than `func.return` still reads once the uses of the `folds`
/// read constants and `dce` removed what nobody reads: the folds whose constants are needed.
///
/// This is the liveness `dce` computes after the rewrite, so a folded value read only by ops
/// that die with the rewrite (a `Shape` under a folded `ReduceProd`) gets no weight.
fn values_read_once_folded(func: &Function, folds: &[Fold]) -> HashSet<ValueId> {
    let folded: HashSet<ValueId> = folds.iter().map(|fold| fold.value).collect();
    let returned: HashSet<ValueId> = func
        .walk_ops()
        .into_iter()
        .filter(|&op| func.op(op).opcode == Opcode::Return)
        .flat_map(|op| func.op(op).operands.iter().copied())
        .collect();
    let mut read = HashSet::new();
    // Users come before their definitions in reverse program order (the ops of a region
    // before the op that holds it), as in `dce`.
    for op in func.walk_ops().into_iter().rev() {
        let data = func.op(op);
        let def = data.opcode.def();
        let removable = def.is_pure() && !def.is_terminator() && data.regions.is_empty();
        let live = !removable
            || data
                .results
                .iter()
                .any(|r| returned.contains(r) || (!folded.contains(r) && read.contains(r)));
        if live && data.opcode != Opcode::Return {
            read.extend(data.operands.iter().copied());
        }
    }
    read
}

/// Whether the fold of `opcode` accumulates in `f64` where the kernel rounds at every step.
fn accumulates(opcode: Opcode) -> bool {
    matches!(
        opcode,
        Opcode::Range | Opcode::ReduceSum | Opcode::ReduceProd
    )
}

/// The placed ops in program order, the ops of a region before the op that holds it, as shape
/// inference visits them.
fn walk_regions_first(func: &Function) -> Vec<OpId> {
    fn visit(func: &Function, region: memc_ir::RegionId, out: &mut Vec<OpId>) {
        for &block in func.layout().region_blocks(region) {
            for &op in func.layout().block_ops(block) {
                for &nested in &func.op(op).regions {
                    visit(func, nested, out);
                }
                out.push(op);
            }
        }
    }
    let mut out = Vec::new();
    visit(func, func.body(), &mut out);
    out
}

/// The new weight's name: the op's location (its ONNX node name), else its opcode and handle
/// (`onnx.Shape.op3`),
/// with the result index for results after the first (`.folded1`).
fn weight_name(func: &Function, op: OpId, index: usize) -> String {
    let data = func.op(op);
    let base = match &data.loc {
        Some(loc) if !loc.is_empty() => loc.clone(),
        _ => format!("{}.{}", data.opcode.name(), op),
    };
    if index == 0 {
        format!("{base}.folded")
    } else {
        format!("{base}.folded{index}")
    }
}

/// The little-endian bytes of `known` as a tensor of type `ty`; `None` unless the shapes agree
/// and every element is a constant the element type holds exactly.
fn encode(known: &KnownValue, ty: &TensorType) -> Option<Vec<u8>> {
    if ty.static_shape()?.as_slice() != known.shape() {
        return None;
    }
    // An empty tensor occupies no bytes and costs nothing to compute; kernels read it through
    // views that an empty weight cannot back, so it stays as it is.
    let n = u64::try_from(known.elems().len()).ok()?;
    if n == 0 || n > MAX_KNOWN_ELEMENTS {
        return None;
    }
    let mut out = Vec::with_capacity(known.elems().len() * 8);
    for elem in known.elems() {
        encode_elem(elem, ty.elem, &mut out)?;
    }
    (u64::try_from(out.len()).ok() == ty.static_byte_size()).then_some(out)
}

/// Appends one element's bytes; `None` when `elem` is not a constant that `to` holds exactly.
fn encode_elem(elem: &SymInt, to: ElemType, out: &mut Vec<u8>) -> Option<()> {
    if to.is_float() {
        let x = match elem {
            SymInt::Float(x) => *x,
            // Integers up to 2^53 convert to f64 exactly; the checks below do the rest.
            other => {
                let c = other.as_const()?;
                (c.unsigned_abs() <= 1 << 53).then_some(c as f64)?
            }
        };
        if !x.is_finite() {
            return None;
        }
        match to {
            ElemType::F64 => out.extend_from_slice(&x.to_le_bytes()),
            ElemType::F32 => out.extend_from_slice(&exact_f32(x)?.to_le_bytes()),
            ElemType::F16 => out.extend_from_slice(&exact_f16_bits(x)?.to_le_bytes()),
            ElemType::BF16 => {
                let bits = exact_f32(x)?.to_bits();
                if bits & 0xffff != 0 {
                    return None;
                }
                out.extend_from_slice(&((bits >> 16) as u16).to_le_bytes());
            }
            _ => return None,
        }
        return Some(());
    }
    let c = elem.as_const()?;
    match to {
        ElemType::I64 => out.extend_from_slice(&c.to_le_bytes()),
        ElemType::I32 => out.extend_from_slice(&i32::try_from(c).ok()?.to_le_bytes()),
        ElemType::I16 => out.extend_from_slice(&i16::try_from(c).ok()?.to_le_bytes()),
        ElemType::I8 => out.extend_from_slice(&i8::try_from(c).ok()?.to_le_bytes()),
        ElemType::U64 => out.extend_from_slice(&u64::try_from(c).ok()?.to_le_bytes()),
        ElemType::U32 => out.extend_from_slice(&u32::try_from(c).ok()?.to_le_bytes()),
        ElemType::U16 => out.extend_from_slice(&u16::try_from(c).ok()?.to_le_bytes()),
        ElemType::U8 => out.push(u8::try_from(c).ok()?),
        ElemType::Bool if c == 0 || c == 1 => out.push(c as u8),
        _ => return None,
    }
    Some(())
}

/// `x` as an `f32`, when it is one exactly.
fn exact_f32(x: f64) -> Option<f32> {
    let f = x as f32;
    (f64::from(f) == x).then_some(f)
}

/// The IEEE half-precision bits of `x`, when `x` is a finite half exactly.
fn exact_f16_bits(x: f64) -> Option<u16> {
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a == 0.0 {
        return Some(sign);
    }
    // Subnormal halves are the multiples of 2^-24 below 2^-14.
    let scaled = a * f64::from(1u32 << 24);
    if scaled < 1024.0 {
        return (scaled.fract() == 0.0).then_some(sign | scaled as u16);
    }
    // A normal half: 11 significant bits, exponent -14..=15.
    let exponent = a.log2().floor() as i32;
    if !(-14..=15).contains(&exponent) {
        return None;
    }
    let mantissa = a / 2f64.powi(exponent) * 1024.0;
    if mantissa.fract() != 0.0 || !(1024.0..2048.0).contains(&mantissa) {
        return None;
    }
    let biased = u16::try_from(exponent + 15).ok()?;
    Some(sign | (biased << 10) | (mantissa as u16 - 1024))
}

/// The weights and weight ops created so far in one function, and the replacements to make.
#[derive(Default)]
struct Folder {
    by_content: HashMap<(TensorType, Vec<u8>), ValueId>,
    replacements: HashMap<ValueId, ValueId>,
}

impl Folder {
    /// Adds the weight and its `memc.weight` op for `fold`, or reuses an equal one, and
    /// records that the folded value's uses read it.
    fn add(
        &mut self,
        func: &mut Function,
        weights: &mut WeightStore,
        fold: Fold,
    ) -> Result<(), String> {
        let key = (fold.ty.clone(), fold.bytes);
        let constant = match self.by_content.get(&key) {
            Some(&value) => value,
            None => {
                let name = unique_name(weights, &fold.name);
                let bytes = WeightBytes::Owned(Arc::from(&key.1[..]));
                let id = weights
                    .insert(&name, fold.ty.clone(), bytes)
                    .map_err(|e| e.to_string())?;
                let value = add_weight_op(func, id, fold.ty.clone());
                self.by_content.insert(key, value);
                value
            }
        };
        self.replacements.insert(fold.value, constant);
        Ok(())
    }

    /// Points every operand that reads a folded value at its constant, except the operands of
    /// `func.return`, in one sweep; returns how many values were folded.
    fn finish(self, func: &mut Function) -> usize {
        if !self.replacements.is_empty() {
            for op in func.walk_ops() {
                if func.op(op).opcode == Opcode::Return {
                    continue;
                }
                for operand in &mut func.op_mut(op).operands {
                    if let Some(&constant) = self.replacements.get(operand) {
                        *operand = constant;
                    }
                }
            }
        }
        self.replacements.len()
    }
}

/// Applies the folds of function `id`, reporting a weight that cannot be added.
fn apply_folds(
    module: &mut Module,
    id: memc_ir::FuncId,
    folds: Vec<Fold>,
) -> Result<(), PassError> {
    let mut folder = Folder::default();
    let mut weights = std::mem::take(&mut module.weights);
    let func = module.function_mut(id);
    let mut failure = None;
    for fold in folds {
        if let Err(message) = folder.add(func, &mut weights, fold) {
            failure = Some(message);
            break;
        }
    }
    folder.finish(func);
    module.weights = weights;
    match failure {
        None => Ok(()),
        Some(message) => Err(PassError::PassFailed {
            pass: "fold-known",
            message,
        }),
    }
}

/// `base`, or `base.N` for the first N that no weight of `weights` is named yet.
pub(crate) fn unique_name(weights: &WeightStore, base: &str) -> String {
    if weights.lookup(base).is_none() {
        return base.to_string();
    }
    (1u64..)
        .map(|n| format!("{base}.{n}"))
        .find(|name| weights.lookup(name).is_none())
        .unwrap_or_else(|| base.to_string())
}

/// Creates `memc.weight {value = id}` at the top of the entry block, after the weight ops
/// already there; returns its result.
pub(crate) fn add_weight_op(func: &mut Function, id: WeightId, ty: TensorType) -> ValueId {
    let op = func.create_op(
        Opcode::Weight,
        Vec::new(),
        vec![Type::Tensor(ty)],
        [("value", Attribute::Weight(id))].into_iter().collect(),
    );
    let entry = func.entry_block();
    let first_non_weight = func
        .layout()
        .block_ops(entry)
        .iter()
        .copied()
        .find(|&o| func.op(o).opcode != Opcode::Weight);
    match first_non_weight {
        Some(before) => {
            func.insert_op_before(before, op);
        }
        None => func.append_op(entry, op),
    }
    func.op(op).results[0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::assert_module_valid;
    use crate::Dce;

    /// Parses `text`, runs `fold-known` then `dce` (checking the IR verifies before and
    /// after), and returns the module.
    fn fold(text: &str) -> Module {
        let mut module = memc_ir::parse_module(text).expect("the test IR parses");
        assert_module_valid(&module, "before fold-known");
        FoldKnown
            .run(&mut module)
            .expect("fold-known does not fail");
        assert_module_valid(&module, "after fold-known");
        Dce.run(&mut module).expect("dce does not fail");
        assert_module_valid(&module, "after dce");
        module
    }

    /// The opcode names of the first function's entry block, in order.
    fn opcodes(module: &Module) -> Vec<&'static str> {
        let (_, func) = module.functions().next().expect("one function");
        func.layout()
            .block_ops(func.entry_block())
            .iter()
            .map(|&op| func.op(op).opcode.name())
            .collect()
    }

    /// The bytes of the weight named `name`.
    fn weight_bytes<'m>(module: &'m Module, name: &str) -> &'m [u8] {
        let id = module.weights.lookup(name).expect("the weight exists");
        let weight = module.weights.get(id).expect("the id is in the store");
        weight.bytes().expect("folded weights own their bytes")
    }

    /// The position in the entry block of the last op that reads the function's argument
    /// `arg` (through the first op's result when `through_first` is set).
    fn last_reader_of_first_result(module: &Module) -> usize {
        let (_, func) = module.functions().next().expect("one function");
        let ops = func.layout().block_ops(func.entry_block());
        let first = ops
            .iter()
            .copied()
            .find(|&op| func.op(op).opcode == Opcode::Relu)
            .expect("the function starts with a Relu");
        let value = func.op(first).results[0];
        ops.iter()
            .rposition(|&op| func.op(op).operands.contains(&value))
            .expect("the Relu's result is read")
    }

    const SHAPE_OF_ACTIVATION: &str = r#"
func.func @f(%arg0: tensor<2x8xf32>) -> tensor<16xf32> {
  %0 = "onnx.Relu"(%arg0) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %1 = "onnx.Relu"(%0) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = "onnx.Exp"(%1) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %3 = "onnx.Shape"(%0) : (tensor<2x8xf32>) -> tensor<2xi64>
  %4 = "onnx.ReduceProd"(%3) {keepdims = 1} : (tensor<2xi64>) -> tensor<1xi64>
  %5 = "onnx.Reshape"(%2, %4) : (tensor<2x8xf32>, tensor<1xi64>) -> tensor<16xf32>
  return %5 : tensor<16xf32>
}
"#;

    #[test]
    fn shape_of_a_static_tensor_becomes_a_weight_and_the_last_use_moves_earlier() {
        let before = memc_ir::parse_module(SHAPE_OF_ACTIVATION).expect("parses");
        // The Shape (position 3) is the last reader of the first Relu's result.
        assert_eq!(last_reader_of_first_result(&before), 3);
        let module = fold(SHAPE_OF_ACTIVATION);
        // Only the product of the dims is read, so one weight holds it and the Shape and the
        // ReduceProd are gone; the second Relu is now the first Relu's last reader.
        assert_eq!(
            opcodes(&module),
            [
                "memc.weight",
                "onnx.Relu",
                "onnx.Relu",
                "onnx.Exp",
                "onnx.Reshape",
                "func.return"
            ]
        );
        assert_eq!(last_reader_of_first_result(&module), 2);
        assert_eq!(module.weights.len(), 1);
        let (id, weight) = module.weights.iter().next().expect("one weight");
        assert_eq!(weight.ty(), &TensorType::with_shape(ElemType::I64, &[1]));
        assert_eq!(
            weight.bytes().expect("owned bytes"),
            16i64.to_le_bytes().as_slice()
        );
        let (_, func) = module.functions().next().expect("one function");
        let first = func.layout().block_ops(func.entry_block())[0];
        assert_eq!(
            func.op(first).attrs.get("value"),
            Some(&Attribute::Weight(id))
        );
    }

    #[test]
    fn results_with_unknown_values_stay() {
        // A symbolic dim is not a constant, and a Gather of data nobody knows is unknown.
        let module = fold(
            r#"
func.func @f(%arg0: tensor<?x8xf32, #memc.dims<["batch"]>>, %arg1: tensor<3xi64>, %arg2: tensor<1xf32>) -> (tensor<?x8xf32, #memc.dims<["batch"]>>, tensor<i64>) {
  %0 = "onnx.Shape"(%arg0) : (tensor<?x8xf32, #memc.dims<["batch"]>>) -> tensor<2xi64>
  %1 = "onnx.Reshape"(%arg0, %0) : (tensor<?x8xf32, #memc.dims<["batch"]>>, tensor<2xi64>) -> tensor<?x8xf32, #memc.dims<["batch"]>>
  %2 = "onnx.Size"(%arg2) : (tensor<1xf32>) -> tensor<i64>
  %3 = "onnx.Gather"(%arg1, %2) {axis = 0} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %4 = "onnx.Neg"(%3) : (tensor<i64>) -> tensor<i64>
  return %1, %4 : tensor<?x8xf32, #memc.dims<["batch"]>>, tensor<i64>
}
"#,
        );
        // The Size is a constant; the Shape holds `batch`, the Gather reads unknown data.
        assert_eq!(
            opcodes(&module),
            [
                "memc.weight",
                "onnx.Shape",
                "onnx.Reshape",
                "onnx.Gather",
                "onnx.Neg",
                "func.return"
            ]
        );
        assert_eq!(module.weights.len(), 1);
    }

    #[test]
    fn values_too_large_to_track_stay() {
        // The Shape (one element) is folded; the 2048 zeros of ConstantOfShape are more than
        // MAX_KNOWN_ELEMENTS and stay computed.
        let module = fold(
            r#"
func.func @f(%arg0: tensor<2048xf32>) -> tensor<2048xf32> {
  %0 = "onnx.Shape"(%arg0) : (tensor<2048xf32>) -> tensor<1xi64>
  %1 = "onnx.ConstantOfShape"(%0) : (tensor<1xi64>) -> tensor<2048xf32>
  %2 = "onnx.Add"(%arg0, %1) : (tensor<2048xf32>, tensor<2048xf32>) -> tensor<2048xf32>
  return %2 : tensor<2048xf32>
}
"#,
        );
        assert_eq!(
            opcodes(&module),
            [
                "memc.weight",
                "onnx.ConstantOfShape",
                "onnx.Add",
                "func.return"
            ]
        );
        assert_eq!(
            weight_bytes(&module, "onnx.Shape.op0.folded"),
            2048i64.to_le_bytes().as_slice()
        );
    }

    #[test]
    fn small_constants_fold_through_chains_and_equal_ones_share_a_weight() {
        // Shape -> Gather -> Concat and a Size cast to f32: every value is known. The two
        // Shapes of equal shapes give equal constants, which share one weight.
        let module = fold(
            r#"
func.func @f(%arg0: tensor<2x3x4xf32>, %arg1: tensor<2x3x4xf32>, %arg2: tensor<1xf32>, %arg3: tensor<9xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3x3xf32>, tensor<3xi64>) {
  %0 = "onnx.Shape"(%arg0) : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %1 = "onnx.Shape"(%arg1) : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %2 = "onnx.Size"(%arg0) : (tensor<2x3x4xf32>) -> tensor<i64>
  %3 = "onnx.Cast"(%2) {to = f32} : (tensor<i64>) -> tensor<f32>
  %4 = "onnx.Div"(%arg0, %3) : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %5 = "onnx.Reshape"(%arg1, %0) : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>
  %6 = "onnx.Shape"(%arg2) : (tensor<1xf32>) -> tensor<1xi64>
  %7 = "onnx.Gather"(%1, %6) {axis = 0} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %8 = "onnx.Concat"(%7, %7) {axis = 0} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %9 = "onnx.Reshape"(%arg3, %8) : (tensor<9xf32>, tensor<2xi64>) -> tensor<3x3xf32>
  %10 = "onnx.Add"(%0, %1) : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %4, %5, %9, %10 : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3x3xf32>, tensor<3xi64>
}
"#,
        );
        // The returned Add stays computed (outputs are arena tensors) but reads the constants.
        assert_eq!(
            opcodes(&module),
            [
                "memc.weight",
                "memc.weight",
                "memc.weight",
                "onnx.Div",
                "onnx.Reshape",
                "onnx.Reshape",
                "onnx.Add",
                "func.return"
            ]
        );
        let dims: Vec<u8> = [2i64, 3, 4].iter().flat_map(|d| d.to_le_bytes()).collect();
        assert_eq!(weight_bytes(&module, "onnx.Shape.op0.folded"), &dims[..]);
        assert_eq!(
            weight_bytes(&module, "onnx.Cast.op3.folded"),
            24f32.to_le_bytes().as_slice()
        );
        let three: Vec<u8> = [3i64, 3].iter().flat_map(|d| d.to_le_bytes()).collect();
        assert_eq!(weight_bytes(&module, "onnx.Concat.op8.folded"), &three[..]);
        assert_eq!(module.weights.len(), 3);
    }

    #[test]
    fn empty_values_stay() {
        // The product of an empty tensor is known (it has no elements) but stays computed.
        let module = fold(
            r#"
func.func @f(%arg0: tensor<2x0x4xf32>) -> tensor<2x0x4xf32> {
  %0 = "onnx.Mul"(%arg0, %arg0) : (tensor<2x0x4xf32>, tensor<2x0x4xf32>) -> tensor<2x0x4xf32>
  %1 = "onnx.Relu"(%0) : (tensor<2x0x4xf32>) -> tensor<2x0x4xf32>
  return %1 : tensor<2x0x4xf32>
}
"#,
        );
        assert_eq!(opcodes(&module), ["onnx.Mul", "onnx.Relu", "func.return"]);
        assert!(module.weights.is_empty());
    }

    #[test]
    fn a_value_only_returned_stays() {
        let module = fold(
            r#"
func.func @f(%arg0: tensor<2x8xf32>) -> tensor<2xi64> {
  %0 = "onnx.Shape"(%arg0) : (tensor<2x8xf32>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}
"#,
        );
        assert_eq!(opcodes(&module), ["onnx.Shape", "func.return"]);
        assert!(module.weights.is_empty());
    }

    #[test]
    fn weight_names_are_unique() {
        let mut weights = WeightStore::new();
        let ty = TensorType::with_shape(ElemType::I64, &[]);
        for name in ["n.folded", "n.folded.1"] {
            weights
                .insert(name, ty.clone(), WeightBytes::Absent)
                .expect("fresh names");
        }
        assert_eq!(unique_name(&weights, "n.folded"), "n.folded.2");
        assert_eq!(unique_name(&weights, "m.folded"), "m.folded");
    }

    #[test]
    fn elements_encode_only_when_the_type_holds_them_exactly() {
        let encode_one = |elem: SymInt, to: ElemType| {
            let mut out = Vec::new();
            encode_elem(&elem, to, &mut out).map(|()| out)
        };
        assert_eq!(
            encode_one(SymInt::Const(-2), ElemType::I32),
            Some((-2i32).to_le_bytes().to_vec())
        );
        assert_eq!(encode_one(SymInt::Const(1 << 40), ElemType::I32), None);
        assert_eq!(encode_one(SymInt::Const(-1), ElemType::U64), None);
        assert_eq!(encode_one(SymInt::Const(2), ElemType::Bool), None);
        assert_eq!(encode_one(SymInt::Const(1), ElemType::Bool), Some(vec![1]));
        assert_eq!(
            encode_one(
                SymInt::from_dim(memc_ir::Dim::Symbol("batch".into())),
                ElemType::I64
            ),
            None
        );
        assert_eq!(encode_one(SymInt::Float(1.5), ElemType::I64), None);
        // 0.1 is no f32; 0.1 rounded to f32 is one.
        assert_eq!(encode_one(SymInt::Float(0.1), ElemType::F32), None);
        let tenth = f64::from(0.1f32);
        assert_eq!(
            encode_one(SymInt::Float(tenth), ElemType::F32),
            Some(0.1f32.to_le_bytes().to_vec())
        );
        assert_eq!(encode_one(SymInt::Float(f64::NAN), ElemType::F32), None);
        assert_eq!(
            encode_one(SymInt::Const(3), ElemType::F32),
            Some(3f32.to_le_bytes().to_vec())
        );
        // Halves: normal, subnormal, negative zero, and values a half cannot hold.
        let half = |x: f64| exact_f16_bits(x);
        assert_eq!(half(1.0), Some(0x3c00));
        assert_eq!(half(-2.0), Some(0xc000));
        assert_eq!(half(0.5), Some(0x3800));
        assert_eq!(half(65504.0), Some(0x7bff));
        assert_eq!(half(2f64.powi(-24)), Some(0x0001));
        assert_eq!(half(-0.0), Some(0x8000));
        assert_eq!(half(2049.0), None);
        assert_eq!(half(65536.0), None);
        assert_eq!(half(2f64.powi(-25)), None);
        // bf16 holds 1.5 but not 1 + 2^-10.
        assert_eq!(
            encode_one(SymInt::Float(1.5), ElemType::BF16),
            Some(0x3fc0u16.to_le_bytes().to_vec())
        );
        assert_eq!(
            encode_one(SymInt::Float(1.0 + 2f64.powi(-10)), ElemType::BF16),
            None
        );
    }
}
