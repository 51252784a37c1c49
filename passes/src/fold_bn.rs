//! The `fold-batchnorm` pass: an inference-mode BatchNormalization that is the only reader of
//! a Conv's result, with every parameter a constant, folds into that Conv's weight and bias.
//!
//! ```text
//! conv-bn-fold   BatchNormalization(Conv(x, W [, b]), scale, B, mean, var) {training_mode = 0}
//!                  => Conv(x, W', b')   W'[m, ...] = W[m, ...] * s[m], b' = (b - mean) * s + B,
//!                                       s = scale / sqrt(var + epsilon)
//! ```
//!
//! BatchNormalization at inference is a per-channel `y = x * s + (B - mean * s)`, so the
//! convolution computes it directly: one kernel less and one pass less over the activation,
//! as onnxruntime's Conv+BatchNormalization fusion does. The new weights are computed in f32,
//! in the order onnxruntime's fusion uses, so results move by a rounding step per value.
//!
//! What the pass guarantees:
//! - It applies only when the Conv's result has no reader but the BatchNormalization (not a
//!   function result either), the BatchNormalization's optional results are unused and
//!   `training_mode` is 0, and the Conv's weight and bias and the four parameters are
//!   `memc.weight`s of f32 with bytes, the parameters and bias `[M]` for `M` output channels,
//!   and the Conv's result type is the BatchNormalization's.
//! - The original weights are left as they are (other ops may read them); the folded ones are
//!   new weights named after the Conv, unique in the store. The BatchNormalization is left
//!   without readers, for `dce`.

use crate::fold_known::{add_weight_op, unique_name};
use crate::manager::{Pass, PassError};
use memc_ir::ops::OpCtx;
use memc_ir::{
    ElemType, Function, Module, OpId, Opcode, TensorType, ValueId, WeightBytes, WeightStore,
};
use std::collections::HashMap;
use std::sync::Arc;

/// The BatchNormalization folding pass; see the module doc.
pub struct FoldBatchNorm;

impl Pass for FoldBatchNorm {
    fn name(&self) -> &'static str {
        "fold-batchnorm"
    }

    fn description(&self) -> &'static str {
        "folds an inference BatchNormalization into the Conv whose only reader it is (constant \
         weights and parameters)"
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        for id in module.func_ids() {
            let folds = find_folds(module.function(id), &module.weights);
            if folds.is_empty() {
                continue;
            }
            let mut weights = std::mem::take(&mut module.weights);
            let result = apply(module.function_mut(id), &mut weights, folds);
            module.weights = weights;
            result?;
        }
        Ok(())
    }
}

/// One fold: the Conv takes the new weight and bias, and the BatchNormalization's readers
/// read the Conv.
struct Fold {
    conv: OpId,
    bn: OpId,
    weight: (TensorType, Vec<u8>),
    bias: (TensorType, Vec<u8>),
}

/// The f32 values of `value` when it is a `memc.weight` of f32 with bytes, with its type.
fn constant_f32<'a>(
    func: &Function,
    weights: &'a WeightStore,
    value: ValueId,
) -> Option<(&'a TensorType, Vec<f32>)> {
    let op = func.defining_op(value)?;
    if func.op(op).opcode != Opcode::Weight {
        return None;
    }
    let weight = weights.get(func.op(op).attrs.get("value")?.as_weight()?)?;
    let ty = weight.ty();
    let n = ty.static_num_elements()?;
    let bytes = weight.bytes()?;
    if ty.elem != ElemType::F32 || bytes.len() as u64 != n * 4 {
        return None;
    }
    let values = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Some((ty, values))
}

fn find_folds(func: &Function, weights: &WeightStore) -> Vec<Fold> {
    let uses = func.use_counts();
    let returned: Vec<ValueId> = func
        .walk_ops()
        .into_iter()
        .filter(|&op| func.op(op).opcode == Opcode::Return)
        .flat_map(|op| func.op(op).operands.clone())
        .collect();
    let mut folds = Vec::new();
    for &bn in func.layout().block_ops(func.entry_block()) {
        if let Some(fold) = fold_of(func, weights, &uses, &returned, bn) {
            folds.push(fold);
        }
    }
    folds
}

fn fold_of(
    func: &Function,
    weights: &WeightStore,
    uses: &cranelift_entity::SecondaryMap<ValueId, u32>,
    returned: &[ValueId],
    bn: OpId,
) -> Option<Fold> {
    let data = func.op(bn);
    if data.opcode != Opcode::BatchNormalization || data.operands.len() != 5 {
        return None;
    }
    let ctx = OpCtx { func, op: bn };
    if ctx.int_or_default("training_mode") != 0 || data.results.iter().skip(1).any(|&r| uses[r] > 0)
    {
        return None;
    }
    let x = data.operands[0];
    let conv = func.defining_op(x)?;
    let conv_data = func.op(conv);
    if conv_data.opcode != Opcode::Conv
        || uses[x] != 1
        || returned.contains(&x)
        || func.value_type(x) != func.value_type(data.results[0])
    {
        return None;
    }
    let (w_ty, w) = constant_f32(func, weights, *conv_data.operands.get(1)?)?;
    let m = *w_ty.static_shape()?.first()? as usize;
    if m == 0 || w.len() % m != 0 {
        return None;
    }
    let channel = |value: ValueId| {
        constant_f32(func, weights, value).filter(|(ty, v)| ty.rank() == 1 && v.len() == m)
    };
    let bias = match conv_data.operands.get(2) {
        Some(&b) if func.value_type(b).tensor().is_some() => channel(b)?.1,
        _ => vec![0.0; m],
    };
    let [scale, shift, mean, var] = [1, 2, 3, 4].map(|i| channel(data.operands[i]).map(|(_, v)| v));
    let (scale, shift, mean, var) = (scale?, shift?, mean?, var?);
    let epsilon = ctx.def().float_attr(&data.attrs, "epsilon").unwrap_or(1e-5) as f32;
    let s: Vec<f32> = (0..m)
        .map(|c| scale[c] / (var[c] + epsilon).sqrt())
        .collect();
    let per = w.len() / m;
    let new_w: Vec<u8> = w
        .iter()
        .enumerate()
        .flat_map(|(i, &v)| (v * s[i / per]).to_le_bytes())
        .collect();
    let new_b: Vec<u8> = (0..m)
        .flat_map(|c| ((bias[c] - mean[c]) * s[c] + shift[c]).to_le_bytes())
        .collect();
    Some(Fold {
        conv,
        bn,
        weight: (w_ty.clone(), new_w),
        bias: (TensorType::with_shape(ElemType::F32, &[m as u64]), new_b),
    })
}

fn apply(
    func: &mut Function,
    weights: &mut WeightStore,
    folds: Vec<Fold>,
) -> Result<(), PassError> {
    let mut replaced = HashMap::new();
    for fold in folds {
        let data = func.op(fold.conv);
        let base = match &data.loc {
            Some(loc) if !loc.is_empty() => loc.clone(),
            _ => format!("{}.{}", data.opcode.name(), fold.conv),
        };
        let mut add = |func: &mut Function, what: &str, (ty, bytes): (TensorType, Vec<u8>)| {
            let name = unique_name(weights, &format!("{base}.{what}_bn"));
            let id = weights
                .insert(&name, ty.clone(), WeightBytes::Owned(Arc::from(bytes)))
                .map_err(|e| PassError::PassFailed {
                    pass: "fold-batchnorm",
                    message: e.to_string(),
                })?;
            Ok::<ValueId, PassError>(add_weight_op(func, id, ty))
        };
        let w = add(func, "weight", fold.weight)?;
        let b = add(func, "bias", fold.bias)?;
        let x = func.op(fold.conv).operands[0];
        func.op_mut(fold.conv).operands = vec![x, w, b];
        replaced.insert(func.op(fold.bn).results[0], func.op(fold.conv).results[0]);
    }
    func.replace_uses(&replaced);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::assert_module_valid;
    use crate::Dce;

    /// A Conv of 2 output channels over 1 input channel (a 1x1 kernel, so each output is its
    /// channel's weight times the input), its result read by a BatchNormalization and, when
    /// `shared`, also added to the normalized result.
    fn conv_bn(training_mode: i64, conv_bias: bool, shared: bool) -> String {
        let (b_def, b_use, b_ty) = if conv_bias {
            (
                "  %cb = \"memc.weight\"() {value = dense_resource<\"cb\"> : tensor<2xf32>} : () -> tensor<2xf32>\n",
                ", %cb",
                ", tensor<2xf32>",
            )
        } else {
            ("", "", "")
        };
        let (extra_line, ret) = if shared {
            (
                "  %e = \"onnx.Add\"(%y, %z) : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>\n",
                "%e",
            )
        } else {
            ("", "%z")
        };
        let params: String = ["s", "b", "m", "v"]
            .iter()
            .map(|p| {
                format!(
                    "  %{p} = \"memc.weight\"() {{value = dense_resource<\"{p}\"> : tensor<2xf32>}} : () -> tensor<2xf32>\n"
                )
            })
            .collect();
        format!(
            r#"func.func @f(%x: tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32> {{
  %w = "memc.weight"() {{value = dense_resource<"w"> : tensor<2x1x1x1xf32>}} : () -> tensor<2x1x1x1xf32>
{b_def}{params}  %y = "onnx.Conv"(%x, %w{b_use}) : (tensor<1x1x3x3xf32>, tensor<2x1x1x1xf32>{b_ty}) -> tensor<1x2x3x3xf32>
  %z = "onnx.BatchNormalization"(%y, %s, %b, %m, %v) {{epsilon = 0.5 : f32, training_mode = {training_mode}}} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
{extra_line}  return {ret} : tensor<1x2x3x3xf32>
}}
"#
        )
    }

    fn bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// Parses `text` with the weights' values, runs `fold-batchnorm` then `dce`, and returns
    /// the module.
    fn fold(text: &str) -> Module {
        let mut module = memc_ir::parse_module(text).expect("the test IR parses");
        let values: HashMap<&str, Vec<f32>> = [
            ("w", vec![2.0, -1.0]),
            ("cb", vec![0.5, 1.0]),
            ("s", vec![3.0, 0.25]),
            ("b", vec![1.0, -2.0]),
            ("m", vec![0.5, 4.0]),
            ("v", vec![3.5, 15.5]),
        ]
        .into_iter()
        .collect();
        let mut store = WeightStore::new();
        for (_, weight) in module.weights.iter() {
            let data = WeightBytes::Owned(Arc::from(bytes(&values[weight.name()])));
            store
                .insert(weight.name(), weight.ty().clone(), data)
                .expect("the weight is well-formed");
        }
        module.weights = store;
        assert_module_valid(&module, "before fold-batchnorm");
        FoldBatchNorm
            .run(&mut module)
            .expect("the pass does not fail");
        assert_module_valid(&module, "after fold-batchnorm");
        Dce.run(&mut module).expect("dce does not fail");
        assert_module_valid(&module, "after dce");
        module
    }

    fn has_batchnorm(module: &Module) -> bool {
        let (_, func) = module.functions().next().expect("one function");
        func.walk_ops()
            .iter()
            .any(|&op| func.op(op).opcode == Opcode::BatchNormalization)
    }

    /// The f32 values of the weight the Conv's operand `index` reads.
    fn conv_operand(module: &Module, index: usize) -> Vec<f32> {
        let (_, func) = module.functions().next().expect("one function");
        let conv = func
            .walk_ops()
            .into_iter()
            .find(|&op| func.op(op).opcode == Opcode::Conv)
            .expect("a Conv");
        constant_f32(func, &module.weights, func.op(conv).operands[index])
            .expect("a constant operand")
            .1
    }

    #[test]
    fn an_inference_batchnorm_folds_into_its_conv() {
        // s = scale / sqrt(var + 0.5) = [3 / 2, 0.25 / 4]; W' = W * s; b' = (b - mean) * s + B.
        let module = fold(&conv_bn(0, true, false));
        assert!(!has_batchnorm(&module));
        assert_eq!(conv_operand(&module, 1), [3.0, -0.0625]);
        assert_eq!(conv_operand(&module, 2), [1.0, -2.1875]);
        // Without a conv bias, b' = -mean * s + B.
        let module = fold(&conv_bn(0, false, false));
        assert!(!has_batchnorm(&module));
        assert_eq!(conv_operand(&module, 2), [0.25, -2.25]);
    }

    #[test]
    fn training_mode_and_shared_conv_results_stay() {
        assert!(has_batchnorm(&fold(&conv_bn(1, true, false))));
        // The Conv's result has a second reader, which needs it without the normalization.
        let module = fold(&conv_bn(0, true, true));
        assert!(has_batchnorm(&module));
        assert_eq!(conv_operand(&module, 1), [2.0, -1.0]);
    }
}
