//! Older ai.onnx opsets read as the forms memc's op table declares (those of opset 13 on).
//!
//! This is the one place that knows, per op, which opset changed what. The importer asks it
//! twice about every default-domain node: during the whole-model check ([`oldest_opset`],
//! [`current_op`], and [`normalize`] with nothing known, [`Checking`]) and while it builds the
//! node ([`normalize`] with the types and known values of what the node reads). [`normalize`]
//! returns the node in its current form, with any helper nodes around it:
//!
//! - Attributes that became inputs become `Constant` nodes, imported like any constant input:
//!   Split `split`, Squeeze/Unsqueeze `axes` (opset 13), Slice `starts`/`ends`/`axes` and TopK
//!   `k` (10), Pad `pads`/`value` and Clip `min`/`max` (11), Dropout `ratio` (12), Upsample
//!   `scales` (9). A constant that stands for a float attribute takes the element type of the
//!   input it goes with.
//! - Softmax, LogSoftmax and Hardmax before opset 13 saw their input as 2-D (the dims before
//!   `axis`, default 1, as rows; the rest as one row): `Flatten(axis) -> op(axis = 1) ->
//!   Reshape(Shape(input), allowzero = 1)`, or just the op on that axis when `axis` is the
//!   last dim.
//! - BatchNormalization: `spatial = 0` (before opset 9, statistics per activation) becomes
//!   elementwise ops; before opset 14, asking for the running mean and variance outputs meant
//!   training mode (`training_mode = 1` now); the saved statistics (outputs #3 and #4) are
//!   refused.
//! - Dropout before opset 10 returned its mask in the data's element type (a `CastLike` now).
//!   In inference its mask is all true, as ONNX's reference implementation and opset 12 on say
//!   (onnxruntime's kernels of opsets 7 to 11 return all false).
//! - Resize of opset 10 took `(X, scales)` and mapped coordinates asymmetrically, rounding the
//!   nearest pixel down on up-sampled axes and up on down-sampled ones (onnxruntime's reading,
//!   which the node tests and exporters of the time follow); Upsample (opsets 7 to 9) is that
//!   Resize. Resize of opsets 11 and 12 had `tf_half_pixel_for_nn`, which is `half_pixel` with
//!   the nearest mode shifted by half a pixel.
//! - Scatter (opsets 9 and 10) is ScatterElements.
//! - DFT of opsets 17 to 19 took `axis` as an attribute (default 1); it is input #2 now (a
//!   scalar `Constant`, default -2 when absent).
//! - GridSample of opsets 16 to 19 named its modes `bilinear` and `bicubic` (`linear` and
//!   `cubic` now).
//!
//! Reduce* keep `axes` as an attribute: the op table declares both forms. Every other op memc
//! has kept its form (later versions added element types), from opset [`OLDEST_OPSET`] on, and
//! for the ops in [`OLDER_FORMS`] from the opset named there. A form memc cannot express is an
//! error that says what, which the importer reports with the node.

use super::proto::{attribute_type as at, AttributeProto, NodeProto, TensorProto};
use crate::{ElemType, TensorType};

/// The oldest default-domain opset from which memc reads every op it has.
pub const OLDEST_OPSET: i64 = 7;
/// The newest default-domain opset memc reads.
pub const NEWEST_OPSET: i64 = 27;

/// Ops whose definition in an opset older than [`OLDEST_OPSET`] is one memc reads (directly or
/// through [`normalize`]), with the opset that introduced it: every later version of these
/// (up to opset 13) added element types only, per the schema history in `onnx.defs`. Other
/// ops changed in opset 6 or 7 (`consumed_inputs`, `broadcast`, `is_test`, ...).
const OLDER_FORMS: &[(&str, i64)] = &[
    ("Not", 1),
    ("Identity", 1),
    ("Constant", 1),
    ("MatMul", 1),
    ("Transpose", 1),
    ("Gather", 1),
    ("Shape", 1),
    ("Size", 1),
    ("Flatten", 1),
    ("If", 1),
    ("Conv", 1),
    ("ConvTranspose", 1),
    ("MaxPool", 1),
    ("AveragePool", 1),
    ("GlobalAveragePool", 1),
    ("GlobalMaxPool", 1),
    ("LpNormalization", 1),
    ("DepthToSpace", 1),
    ("SpaceToDepth", 1),
    ("Softsign", 1),
    ("Softplus", 1),
    ("ArgMax", 1),
    ("ArgMin", 1),
    ("ReduceMean", 1),
    ("ReduceSum", 1),
    ("ReduceMax", 1),
    ("ReduceMin", 1),
    ("ReduceProd", 1),
    ("ReduceL1", 1),
    ("ReduceL2", 1),
    ("ReduceLogSum", 1),
    ("ReduceLogSumExp", 1),
    ("ReduceSumSquare", 1),
    ("Softmax", 1),
    ("LogSoftmax", 1),
    ("Hardmax", 1),
    ("Slice", 1),
    ("Squeeze", 1),
    ("Unsqueeze", 1),
    ("TopK", 1),
    ("Split", 2),
    ("Pad", 2),
    ("Concat", 4),
    ("Reshape", 5),
    ("Tile", 6),
    ("Cast", 6),
    ("Clip", 6),
    ("InstanceNormalization", 6),
    ("Min", 6),
    ("Max", 6),
    ("Sum", 6),
    ("Mean", 6),
    ("Neg", 6),
    ("Abs", 6),
    ("Sqrt", 6),
    ("Exp", 6),
    ("Log", 6),
    ("Reciprocal", 6),
    ("Floor", 6),
    ("Ceil", 6),
    ("Relu", 6),
    ("Sigmoid", 6),
    ("Tanh", 6),
    ("LeakyRelu", 6),
    ("Elu", 6),
    ("Selu", 6),
    ("HardSigmoid", 6),
];

/// The oldest default-domain opset in which memc reads `op_type`.
pub fn oldest_opset(op_type: &str) -> i64 {
    OLDER_FORMS
        .iter()
        .find(|(op, _)| *op == op_type)
        .map_or(OLDEST_OPSET, |&(_, since)| since)
}

/// One op whose form changed: nodes of `op` in models older than `until` get `rewrite`.
struct Change {
    op: &'static str,
    /// The first opset with the current form (for a removed op: the opset that removed it).
    until: i64,
    /// The op that replaced a removed one; `rewrite` makes the node that op.
    replaced_by: Option<&'static str>,
    rewrite: fn(&mut Rewrite) -> Result<(), String>,
}

/// Every op whose form changed between opset [`OLDEST_OPSET`] and 13 (and BatchNormalization's,
/// in 14, GridSample's and DFT's, in 20), once each.
const CHANGES: &[Change] = &[
    change("Softmax", 13, coerced_to_2d),
    change("LogSoftmax", 13, coerced_to_2d),
    change("Hardmax", 13, coerced_to_2d),
    change("Split", 13, split_attr),
    change("Squeeze", 13, axes_attr),
    change("Unsqueeze", 13, axes_attr),
    change("BatchNormalization", 14, batch_normalization),
    change("Resize", 13, resize),
    change("Dropout", 12, dropout),
    change("Clip", 11, clip),
    change("Pad", 11, pad),
    change("Slice", 10, slice),
    change("TopK", 10, top_k),
    change("GridSample", 20, grid_sample),
    change("DFT", 20, dft_axis),
    Change {
        op: "Upsample",
        until: 10,
        replaced_by: Some("Resize"),
        rewrite: upsample,
    },
    Change {
        op: "Scatter",
        until: 11,
        replaced_by: Some("ScatterElements"),
        rewrite: scatter,
    },
];

const fn change(
    op: &'static str,
    until: i64,
    rewrite: fn(&mut Rewrite) -> Result<(), String>,
) -> Change {
    Change {
        op,
        until,
        replaced_by: None,
        rewrite,
    }
}

fn change_of(op_type: &str) -> Option<&'static Change> {
    CHANGES.iter().find(|c| c.op == op_type)
}

/// The op a node of `op_type` is read as in a model of `opset`: the replacement of an op ONNX
/// removed later (Upsample is Resize), else `op_type` itself.
pub fn current_op(op_type: &str, opset: i64) -> &str {
    match change_of(op_type) {
        Some(Change {
            until,
            replaced_by: Some(by),
            ..
        }) if opset < *until => by,
        _ => op_type,
    }
}

/// Whether a node of `op_type` in a model of `opset` has an older form [`normalize`] rewrites.
pub fn changes(op_type: &str, opset: i64) -> bool {
    change_of(op_type).is_some_and(|c| opset < c.until)
}

/// For an op ONNX removed before `opset`, a note that says so and what replaced it.
pub fn removed_note(op_type: &str, opset: i64) -> Option<String> {
    match change_of(op_type)? {
        Change {
            until,
            replaced_by: Some(by),
            ..
        } if opset >= *until => Some(format!(
            "ONNX removed {op_type} in opset {until}; {by} replaces it"
        )),
        _ => None,
    }
}

/// What the importer knows about the values a node reads.
pub trait Facts {
    /// The type of the value named `name`.
    fn tensor_type(&self, name: &str) -> Option<TensorType>;
    /// The elements of the value named `name`, when it is a small constant.
    fn known_floats(&self, name: &str) -> Option<Vec<f64>>;
    /// False during the whole-model check before import, when nothing is known: a rewrite
    /// that needs a value then picks any form with the same ops.
    fn knows_values(&self) -> bool;
}

/// The facts of the whole-model check: none.
pub struct Checking;

impl Facts for Checking {
    fn tensor_type(&self, _: &str) -> Option<TensorType> {
        None
    }
    fn known_floats(&self, _: &str) -> Option<Vec<f64>> {
        None
    }
    fn knows_values(&self) -> bool {
        false
    }
}

/// `node`, of a model whose default-domain opset is `opset`, in the form memc's op table
/// declares: `None` when it already has it, else the nodes to import in its place, in order
/// (helper nodes, then the node, then helper nodes that read its results). The results keep
/// their names; helper values get fresh ones (`{node}/{what}#memc{n}`, `n` from `counter`).
pub fn normalize(
    node: &NodeProto,
    opset: i64,
    facts: &dyn Facts,
    counter: &mut usize,
) -> Result<Option<Vec<NodeProto>>, String> {
    let Some(change) = change_of(&node.op_type).filter(|c| opset < c.until) else {
        return Ok(None);
    };
    let mut rewrite = Rewrite {
        node: node.clone(),
        opset,
        facts,
        counter,
        before: Vec::new(),
        after: Vec::new(),
    };
    (change.rewrite)(&mut rewrite)?;
    let Rewrite {
        node,
        mut before,
        after,
        ..
    } = rewrite;
    before.push(node);
    before.extend(after);
    Ok(Some(before))
}

/// A node being rewritten, with the helper nodes it needs.
struct Rewrite<'a> {
    node: NodeProto,
    opset: i64,
    facts: &'a dyn Facts,
    counter: &'a mut usize,
    before: Vec<NodeProto>,
    after: Vec<NodeProto>,
}

impl Rewrite<'_> {
    /// A fresh value name for a helper value.
    fn fresh(&mut self, what: &str) -> String {
        fresh_name(&self.node, self.counter, what)
    }

    /// A helper node named like the node it serves (so its location is that node's).
    fn helper(&self, op_type: &str, inputs: &[&str], output: &str) -> NodeProto {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.to_string()],
            name: self.node.name.clone(),
            op_type: op_type.to_string(),
            domain: String::new(),
            attribute: Vec::new(),
        }
    }

    /// A `Constant` node before the node; returns its output's name.
    fn constant(&mut self, what: &str, value: TensorProto) -> String {
        let name = self.fresh(what);
        let mut node = self.helper("Constant", &[], &name);
        node.attribute.push(AttributeProto {
            name: "value".to_string(),
            r#type: at::TENSOR,
            t: Some(value),
            ..Default::default()
        });
        self.before.push(node);
        name
    }

    /// A helper node before the node, writing a fresh value; returns its name.
    fn step(&mut self, op_type: &str, inputs: &[&str], what: &str) -> String {
        let out = self.fresh(what);
        let node = self.helper(op_type, inputs, &out);
        self.before.push(node);
        out
    }

    /// Removes and returns attribute `name`.
    fn take(&mut self, name: &str) -> Option<AttributeProto> {
        let at = self.node.attribute.iter().position(|a| a.name == name)?;
        Some(self.node.attribute.remove(at))
    }

    fn take_int(&mut self, name: &str) -> Result<Option<i64>, String> {
        self.take(name)
            .map(|a| match a.r#type {
                at::INT => Ok(a.i),
                _ => Err(format!("attribute `{name}` must be an int")),
            })
            .transpose()
    }

    fn take_float(&mut self, name: &str) -> Result<Option<f32>, String> {
        self.take(name)
            .map(|a| match a.r#type {
                at::FLOAT => Ok(a.f),
                _ => Err(format!("attribute `{name}` must be a float")),
            })
            .transpose()
    }

    fn take_ints(&mut self, name: &str) -> Result<Option<Vec<i64>>, String> {
        self.take(name)
            .map(|a| match a.r#type {
                at::INTS => Ok(a.ints),
                _ => Err(format!("attribute `{name}` must be a list of ints")),
            })
            .transpose()
    }

    fn take_floats(&mut self, name: &str) -> Result<Option<Vec<f32>>, String> {
        self.take(name)
            .map(|a| match a.r#type {
                at::FLOATS => Ok(a.floats),
                _ => Err(format!("attribute `{name}` must be a list of floats")),
            })
            .transpose()
    }

    fn str_attr(&self, name: &str) -> Option<String> {
        self.node
            .attribute
            .iter()
            .find(|a| a.name == name && a.r#type == at::STRING)
            .map(|a| String::from_utf8_lossy(&a.s).into_owned())
    }

    fn set_int(&mut self, name: &str, value: i64) {
        self.node.attribute.retain(|a| a.name != name);
        self.node.attribute.push(AttributeProto {
            name: name.to_string(),
            r#type: at::INT,
            i: value,
            ..Default::default()
        });
    }

    fn set_str(&mut self, name: &str, value: &str) {
        self.node.attribute.retain(|a| a.name != name);
        self.node.attribute.push(AttributeProto {
            name: name.to_string(),
            r#type: at::STRING,
            s: value.as_bytes().to_vec().into(),
            ..Default::default()
        });
    }

    /// Sets input `index` to `name`, leaving out (empty names) any missing inputs before it.
    fn set_input(&mut self, index: usize, name: String) {
        if self.node.input.len() <= index {
            self.node.input.resize(index + 1, String::new());
        }
        self.node.input[index] = name;
    }

    fn input(&self, index: usize) -> Option<&str> {
        self.node
            .input
            .get(index)
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }

    fn input_type(&self, index: usize) -> Option<TensorType> {
        self.facts.tensor_type(self.input(index)?)
    }

    /// The element type of input `index`, for a constant that goes with it: f32 when it is not
    /// known (the whole-model check); a float type, as the older forms required.
    fn float_elem(&self, index: usize) -> Result<ElemType, String> {
        match self.input_type(index) {
            None => Ok(ElemType::F32),
            Some(ty) if ty.elem.is_float() => Ok(ty.elem),
            Some(ty) => Err(format!(
                "input #{index} has element type {}, but this op took a float tensor in opset {}",
                ty.elem.mlir_name(),
                self.opset
            )),
        }
    }

    /// Moves ints attribute `attr` (if given) to input `index`, as an i64 tensor.
    fn ints_to_input(&mut self, attr: &str, index: usize) -> Result<bool, String> {
        let Some(values) = self.take_ints(attr)? else {
            return Ok(false);
        };
        let name = self.constant(attr, i64_tensor(&values));
        self.set_input(index, name);
        Ok(true)
    }

    /// Moves a required ints attribute to input `index`.
    fn required_ints_to_input(&mut self, attr: &str, index: usize) -> Result<(), String> {
        if self.ints_to_input(attr, index)? {
            Ok(())
        } else {
            Err(format!(
                "attribute `{attr}` is missing (opset {} requires it)",
                self.opset
            ))
        }
    }

    /// Gives result `index` a fresh name and returns the name it had, for a helper node that
    /// reads the fresh one and writes the original.
    fn detach_output(&mut self, index: usize, what: &str) -> Result<String, String> {
        if !self.output_wanted(index) {
            return Err(format!("output #{index} is missing"));
        }
        let fresh = self.fresh(what);
        Ok(std::mem::replace(&mut self.node.output[index], fresh))
    }

    fn output_wanted(&self, index: usize) -> bool {
        self.node.output.get(index).is_some_and(|n| !n.is_empty())
    }
}

/// An i64 1-d tensor.
fn i64_tensor(values: &[i64]) -> TensorProto {
    TensorProto {
        dims: vec![values.len() as i64],
        data_type: 7,
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

/// A tensor of float element type `elem` (f32, f64, f16 or bf16) with `dims`.
fn float_tensor(elem: ElemType, dims: &[i64], values: &[f32]) -> Result<TensorProto, String> {
    let (data_type, raw): (i32, Vec<u8>) = match elem {
        ElemType::F32 => (1, values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ElemType::F64 => (
            11,
            values
                .iter()
                .flat_map(|&v| f64::from(v).to_le_bytes())
                .collect(),
        ),
        ElemType::F16 => (
            10,
            values
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect(),
        ),
        ElemType::BF16 => (
            16,
            values
                .iter()
                .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
                .collect(),
        ),
        other => {
            return Err(format!(
                "a float constant of element type {} is not possible",
                other.mlir_name()
            ))
        }
    };
    Ok(TensorProto {
        dims: dims.to_vec(),
        data_type,
        raw_data: raw.into(),
        ..Default::default()
    })
}

fn axis_index(axis: i64, rank: usize, what: &str) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("{what} {axis} is out of range for rank {rank}"))
    }
}

// ----- The rewrites, one per op (the `CHANGES` table says which opsets get each). -----

/// Softmax, LogSoftmax and Hardmax before opset 13: the input seen as 2-D around `axis`
/// (default 1), normalized along the second dim.
fn coerced_to_2d(r: &mut Rewrite) -> Result<(), String> {
    let axis = r.take_int("axis")?.unwrap_or(1);
    let input = r.input(0).ok_or("input #0 is missing")?.to_string();
    if let Some(ty) = r.input_type(0) {
        let rank = ty.rank();
        if rank == 0 {
            return Err("the input is a scalar; this op needs at least one dim".to_string());
        }
        let a = axis_index(axis, rank, "axis")?;
        if a + 1 == rank {
            // The 2-D view's rows are the input's last dim: the same op on that axis.
            r.set_int("axis", a as i64);
            return Ok(());
        }
    }
    let shape = r.fresh("shape");
    let flat = r.fresh("flatten");
    r.before.push(r.helper("Shape", &[&input], &shape));
    let mut flatten = r.helper("Flatten", &[&input], &flat);
    flatten.attribute.push(AttributeProto {
        name: "axis".to_string(),
        r#type: at::INT,
        i: axis,
        ..Default::default()
    });
    r.before.push(flatten);
    r.node.input[0] = flat;
    r.set_int("axis", 1);
    let result = r.detach_output(0, "2d")?;
    let mut reshape = r.helper("Reshape", &[&r.node.output[0], &shape], &result);
    // The input's own dims, zeros included (an empty input keeps its shape).
    reshape.attribute.push(AttributeProto {
        name: "allowzero".to_string(),
        r#type: at::INT,
        i: 1,
        ..Default::default()
    });
    r.after.push(reshape);
    Ok(())
}

/// Split before opset 13: `split` was an attribute.
fn split_attr(r: &mut Rewrite) -> Result<(), String> {
    r.ints_to_input("split", 1).map(drop)
}

/// Squeeze and Unsqueeze before opset 13: `axes` was an attribute (optional for Squeeze).
fn axes_attr(r: &mut Rewrite) -> Result<(), String> {
    if r.node.op_type == "Unsqueeze" {
        r.required_ints_to_input("axes", 1)
    } else {
        r.ints_to_input("axes", 1).map(drop)
    }
}

/// Slice before opset 10: `starts`, `ends` and `axes` were attributes.
fn slice(r: &mut Rewrite) -> Result<(), String> {
    r.required_ints_to_input("starts", 1)?;
    r.required_ints_to_input("ends", 2)?;
    r.ints_to_input("axes", 3).map(drop)
}

/// TopK before opset 10: `k` was an attribute.
fn top_k(r: &mut Rewrite) -> Result<(), String> {
    let k = r
        .take_int("k")?
        .ok_or_else(|| format!("attribute `k` is missing (opset {} requires it)", r.opset))?;
    let name = r.constant("k", i64_tensor(&[k]));
    r.set_input(1, name);
    Ok(())
}

/// Pad before opset 11: `pads` and the constant `value` (default 0) were attributes.
fn pad(r: &mut Rewrite) -> Result<(), String> {
    r.required_ints_to_input("pads", 1)?;
    let value = r.take_float("value")?;
    let constant_mode = r.str_attr("mode").is_none_or(|m| m == "constant");
    if let (Some(value), true) = (value, constant_mode) {
        let elem = r.float_elem(0)?;
        let name = r.constant("value", float_tensor(elem, &[], &[value])?);
        r.set_input(2, name);
    }
    Ok(())
}

/// Clip before opset 11: `min` and `max` were attributes.
fn clip(r: &mut Rewrite) -> Result<(), String> {
    let min = r.take_float("min")?;
    let max = r.take_float("max")?;
    let elem = r.float_elem(0)?;
    for (index, what, bound) in [(1, "min", min), (2, "max", max)] {
        if let Some(bound) = bound {
            let name = r.constant(what, float_tensor(elem, &[], &[bound])?);
            r.set_input(index, name);
        }
    }
    Ok(())
}

/// Dropout before opset 12: `ratio` was an attribute (default 0.5); before opset 10 the mask
/// had the data's element type.
fn dropout(r: &mut Rewrite) -> Result<(), String> {
    let ratio = r.take_float("ratio")?.unwrap_or(0.5);
    let name = r.constant("ratio", float_tensor(ElemType::F32, &[], &[ratio])?);
    r.set_input(1, name);
    if r.opset < 10 && r.output_wanted(1) {
        let data = r.input(0).ok_or("input #0 is missing")?.to_string();
        let mask = r.detach_output(1, "mask")?;
        let cast = r.helper("CastLike", &[&r.node.output[1], &data], &mask);
        r.after.push(cast);
    }
    Ok(())
}

/// BatchNormalization before opset 14 (and `spatial` before opset 9).
fn batch_normalization(r: &mut Rewrite) -> Result<(), String> {
    if r.opset < 9 && r.take_int("spatial")?.unwrap_or(1) == 0 {
        return per_activation_batch_norm(r);
    }
    if (3..5).any(|i| r.output_wanted(i)) {
        return Err(format!(
            "outputs #3 and #4 (saved_mean and saved_var, statistics for a training step of opset {}) are not supported; ONNX dropped them in opset 14",
            r.opset
        ));
    }
    r.node.output.truncate(3);
    if (1..3).any(|i| r.output_wanted(i)) {
        // Before opset 14 the running statistics were computed exactly in training mode.
        r.set_int("training_mode", 1);
    }
    Ok(())
}

/// BatchNormalization with `spatial = 0` (before opset 9): scale, bias, mean and variance per
/// activation ([C, D1, ...]), which broadcast against the input ([N, C, D1, ...]) as they are:
/// `(X - mean) / sqrt(var + epsilon) * scale + B`.
fn per_activation_batch_norm(r: &mut Rewrite) -> Result<(), String> {
    if (1..5).any(|i| r.output_wanted(i)) {
        return Err("`spatial = 0` is supported in inference only (output #0 alone)".to_string());
    }
    let epsilon = r.take_float("epsilon")?.unwrap_or(1e-5);
    r.take("momentum");
    let names: Vec<String> = (0..5)
        .map(|i| {
            r.input(i)
                .map(str::to_string)
                .ok_or_else(|| format!("input #{i} is missing"))
        })
        .collect::<Result<_, _>>()?;
    if let (Some(x), Some(scale)) = (r.input_type(0), r.input_type(1)) {
        if scale.rank() + 1 != x.rank() {
            return Err(format!(
                "with `spatial = 0` the scale, bias, mean and variance have the input's dims after the first ({}), but the scale has rank {}",
                x.rank().saturating_sub(1),
                scale.rank()
            ));
        }
    }
    let [x, scale, bias, mean, var] = [0, 1, 2, 3, 4].map(|i| names[i].as_str());
    let elem = r.float_elem(0)?;
    let eps = r.constant("epsilon", float_tensor(elem, &[], &[epsilon])?);
    let var_eps = r.step("Add", &[var, &eps], "var_eps");
    let std = r.step("Sqrt", &[&var_eps], "std");
    let centered = r.step("Sub", &[x, mean], "centered");
    let normalized = r.step("Div", &[&centered, &std], "normalized");
    let scaled = r.step("Mul", &[&normalized, scale], "scaled");
    r.node.op_type = "Add".to_string();
    r.node.input = vec![scaled, bias.to_string()];
    r.node.attribute.clear();
    r.node.output.truncate(1);
    Ok(())
}

/// Resize of opset 10 (`(X, scales)`, `mode`) and of opsets 11-12 (`tf_half_pixel_for_nn`).
fn resize(r: &mut Rewrite) -> Result<(), String> {
    if r.opset < 11 {
        let x = r.input(0).ok_or("input #0 is missing")?.to_string();
        let scales = r
            .input(1)
            .ok_or("input #1 (scales) is missing")?
            .to_string();
        r.node.input = vec![x, String::new(), scales];
        return asymmetric_resize(r, Unknown::Refused);
    }
    if r.str_attr("coordinate_transformation_mode").as_deref() != Some("tf_half_pixel_for_nn") {
        return Ok(());
    }
    // x_original = (x + 0.5) / scale, which is half_pixel's plus 0.5: rounding it down is
    // rounding half_pixel's half up, and rounding it half down is rounding half_pixel's up.
    if r.str_attr("mode").is_some_and(|m| m != "nearest") {
        return Err(
            "`coordinate_transformation_mode` tf_half_pixel_for_nn is supported with mode nearest only"
                .to_string(),
        );
    }
    let nearest = r
        .str_attr("nearest_mode")
        .unwrap_or_else(|| "round_prefer_floor".to_string());
    let shifted = match nearest.as_str() {
        "floor" => "round_prefer_ceil",
        "round_prefer_floor" => "ceil",
        other => {
            return Err(format!(
                "`coordinate_transformation_mode` tf_half_pixel_for_nn with nearest_mode {other} is not supported (floor and round_prefer_floor are)"
            ))
        }
    };
    r.set_str("coordinate_transformation_mode", "half_pixel");
    r.set_str("nearest_mode", shifted);
    Ok(())
}

/// Upsample (opsets 7 to 9): Resize of opset 10, `scales` an attribute before opset 9. Its
/// scales are at least 1 (the spec requires it), so the nearest pixel rounds down unless known
/// scales say otherwise.
fn upsample(r: &mut Rewrite) -> Result<(), String> {
    let x = r.input(0).ok_or("input #0 is missing")?.to_string();
    let scales = if r.opset < 9 {
        let scales = r
            .take_floats("scales")?
            .ok_or("attribute `scales` is missing (opsets 7 and 8 require it)")?;
        r.constant(
            "scales",
            float_tensor(ElemType::F32, &[scales.len() as i64], &scales)?,
        )
    } else {
        r.input(1)
            .ok_or("input #1 (scales) is missing")?
            .to_string()
    };
    r.node.op_type = "Resize".to_string();
    r.node.input = vec![x, String::new(), scales];
    asymmetric_resize(r, Unknown::UpSampling)
}

/// How [`asymmetric_resize`] reads scales not known at import.
#[derive(Clone, Copy, PartialEq)]
enum Unknown {
    /// As up-sampling (Upsample, whose scales are at least 1).
    UpSampling,
    /// As an error (Resize of opset 10, which also down-samples).
    Refused,
}

/// Resize of opset 10 and Upsample as onnxruntime reads them: `x_original = x / scale`
/// (`asymmetric`), and in nearest mode the nearest pixel rounded down on up-sampled axes and
/// up on down-sampled ones. memc's Resize takes one `nearest_mode`, so the scales must not mix
/// up- and down-sampling (an axis with scale 1 rounds either way).
fn asymmetric_resize(r: &mut Rewrite, unknown: Unknown) -> Result<(), String> {
    let mode = r.str_attr("mode").unwrap_or_else(|| "nearest".to_string());
    r.set_str("mode", &mode);
    r.set_str("coordinate_transformation_mode", "asymmetric");
    if mode != "nearest" {
        return Ok(());
    }
    let scales = match r.input(2) {
        Some(name) => r.facts.known_floats(name),
        None => None,
    };
    let known = match scales {
        Some(scales) => scales,
        None if unknown == Unknown::Refused && r.facts.knows_values() => {
            return Err(format!(
                "nearest mode with scales not known at compile time is not supported in opset {}: the nearest pixel rounds down or up by whether an axis is up- or down-sampled",
                r.opset
            ))
        }
        None => Vec::new(),
    };
    let down = known.iter().any(|&s| s < 1.0);
    let up = known.iter().any(|&s| s > 1.0);
    if down && up {
        return Err(format!(
            "scales {known:?} up-sample some axes and down-sample others, whose nearest pixels round down and up respectively in opset {}; this is not supported (memc's Resize rounds all axes one way)",
            r.opset
        ));
    }
    r.set_str("nearest_mode", if down { "ceil" } else { "floor" });
    Ok(())
}

/// Scatter (opsets 9 and 10) is ScatterElements, attributes and all.
fn scatter(r: &mut Rewrite) -> Result<(), String> {
    r.node.op_type = "ScatterElements".to_string();
    Ok(())
}

/// GridSample of opsets 16 to 19 spelled the linear and cubic modes `bilinear` and `bicubic`
/// (its default, `bilinear`, is opset 20's default `linear`).
fn grid_sample(r: &mut Rewrite) -> Result<(), String> {
    match r.str_attr("mode").as_deref() {
        None | Some("nearest") => {}
        Some("bilinear") => r.set_str("mode", "linear"),
        Some("bicubic") => r.set_str("mode", "cubic"),
        Some(other) => {
            return Err(format!(
                "`mode` must be bilinear, nearest or bicubic in opset {}, got {other:?}",
                r.opset
            ))
        }
    }
    Ok(())
}

/// DFT before opset 20: `axis` was an attribute, default 1 (input #2 now, default -2).
fn dft_axis(r: &mut Rewrite) -> Result<(), String> {
    let axis = r.take_int("axis")?.unwrap_or(1);
    let value = TensorProto {
        dims: Vec::new(),
        data_type: 7,
        int64_data: vec![axis],
        ..Default::default()
    };
    let name = r.constant("axis", value);
    r.set_input(2, name);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dim;
    use std::collections::HashMap;

    /// Facts from a table of types and known values.
    #[derive(Default)]
    struct Known {
        types: HashMap<&'static str, TensorType>,
        floats: HashMap<&'static str, Vec<f64>>,
    }

    impl Facts for Known {
        fn tensor_type(&self, name: &str) -> Option<TensorType> {
            self.types.get(name).cloned()
        }
        fn known_floats(&self, name: &str) -> Option<Vec<f64>> {
            self.floats.get(name).cloned()
        }
        fn knows_values(&self) -> bool {
            true
        }
    }

    fn f32_of(shape: &[u64]) -> TensorType {
        TensorType::new(
            ElemType::F32,
            shape.iter().map(|&d| Dim::Static(d)).collect(),
        )
    }

    fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name: "n".to_string(),
            op_type: op.to_string(),
            domain: String::new(),
            attribute: attrs,
        }
    }

    fn ints(name: &str, v: &[i64]) -> AttributeProto {
        AttributeProto {
            name: name.to_string(),
            r#type: at::INTS,
            ints: v.to_vec(),
            ..Default::default()
        }
    }

    fn int(name: &str, v: i64) -> AttributeProto {
        AttributeProto {
            name: name.to_string(),
            r#type: at::INT,
            i: v,
            ..Default::default()
        }
    }

    fn float(name: &str, v: f32) -> AttributeProto {
        AttributeProto {
            name: name.to_string(),
            r#type: at::FLOAT,
            f: v,
            ..Default::default()
        }
    }

    fn text(name: &str, v: &str) -> AttributeProto {
        AttributeProto {
            name: name.to_string(),
            r#type: at::STRING,
            s: v.as_bytes().to_vec().into(),
            ..Default::default()
        }
    }

    /// Each node as `Op(inputs) -> outputs {attrs}`, constants as `Constant -> name`.
    fn show(nodes: &[NodeProto]) -> Vec<String> {
        nodes
            .iter()
            .map(|n| {
                let mut attrs: Vec<String> = n
                    .attribute
                    .iter()
                    .filter(|a| a.name != "value")
                    .map(|a| match a.r#type {
                        at::INT => format!("{}={}", a.name, a.i),
                        at::STRING => format!("{}={}", a.name, String::from_utf8_lossy(&a.s)),
                        _ => a.name.clone(),
                    })
                    .collect();
                attrs.sort();
                format!(
                    "{}({}) -> {} {{{}}}",
                    n.op_type,
                    n.input.join(", "),
                    n.output.join(", "),
                    attrs.join(" ")
                )
            })
            .collect()
    }

    fn run(node: &NodeProto, opset: i64, facts: &dyn Facts) -> Result<Vec<String>, String> {
        let mut counter = 0;
        Ok(show(
            &normalize(node, opset, facts, &mut counter)?.unwrap_or_else(|| vec![node.clone()]),
        ))
    }

    #[test]
    fn attributes_that_became_inputs_become_constants() {
        let split = node(
            "Split",
            &["x"],
            &["a", "b"],
            vec![ints("split", &[1, 3]), int("axis", 1)],
        );
        assert_eq!(
            run(&split, 12, &Checking).unwrap(),
            [
                "Constant() -> n/split#memc1 {}",
                "Split(x, n/split#memc1) -> a, b {axis=1}"
            ]
        );
        // From opset 13 on the node is left alone.
        assert_eq!(normalize(&split, 13, &Checking, &mut 0).unwrap(), None);
        let slice = node(
            "Slice",
            &["x"],
            &["y"],
            vec![ints("starts", &[1]), ints("ends", &[3])],
        );
        assert_eq!(
            run(&slice, 9, &Checking).unwrap()[2],
            "Slice(x, n/starts#memc1, n/ends#memc2) -> y {}"
        );
        let missing = node("Unsqueeze", &["x"], &["y"], Vec::new());
        assert_eq!(
            run(&missing, 11, &Checking).unwrap_err(),
            "attribute `axes` is missing (opset 11 requires it)"
        );
    }

    #[test]
    fn dft_before_20_takes_its_axis_as_an_input() {
        let dft = node("DFT", &["x", "len"], &["y"], vec![int("axis", 2)]);
        assert_eq!(
            run(&dft, 17, &Checking).unwrap(),
            [
                "Constant() -> n/axis#memc1 {}",
                "DFT(x, len, n/axis#memc1) -> y {}",
            ]
        );
        // Without the attribute, opset 17's default axis 1.
        let plain = node("DFT", &["x"], &["y"], Vec::new());
        let nodes = normalize(&plain, 19, &Checking, &mut 0).unwrap().unwrap();
        assert_eq!(nodes[0].attribute[0].t.as_ref().unwrap().int64_data, [1]);
        assert_eq!(nodes[1].input, ["x", "", "n/axis#memc1"]);
        assert_eq!(normalize(&plain, 20, &Checking, &mut 0).unwrap(), None);
    }

    #[test]
    fn grid_sample_before_20_renames_its_modes() {
        let sample = |mode: &str| node("GridSample", &["x", "g"], &["y"], vec![text("mode", mode)]);
        assert_eq!(
            run(&sample("bilinear"), 16, &Checking).unwrap(),
            ["GridSample(x, g) -> y {mode=linear}"]
        );
        assert_eq!(
            run(&sample("bicubic"), 19, &Checking).unwrap(),
            ["GridSample(x, g) -> y {mode=cubic}"]
        );
        assert_eq!(
            run(&sample("nearest"), 16, &Checking).unwrap(),
            ["GridSample(x, g) -> y {mode=nearest}"]
        );
        assert_eq!(
            run(&sample("linear"), 16, &Checking).unwrap_err(),
            "`mode` must be bilinear, nearest or bicubic in opset 16, got \"linear\""
        );
        // From opset 20 on the node is left alone.
        assert_eq!(
            normalize(&sample("linear"), 20, &Checking, &mut 0).unwrap(),
            None
        );
    }

    #[test]
    fn clip_bounds_take_the_input_element_type() {
        let mut facts = Known::default();
        facts
            .types
            .insert("x", TensorType::new(ElemType::F16, vec![Dim::Static(3)]));
        let mut counter = 0;
        let clip = node("Clip", &["x"], &["y"], vec![float("max", 6.0)]);
        let nodes = normalize(&clip, 10, &facts, &mut counter).unwrap().unwrap();
        assert_eq!(show(&nodes)[1], "Clip(x, , n/max#memc1) -> y {}");
        let value = nodes[0].attribute[0].t.as_ref().unwrap();
        assert_eq!(value.data_type, 10);
        assert_eq!(
            value.raw_data.as_ref(),
            half::f16::from_f32(6.0).to_le_bytes()
        );
    }

    #[test]
    fn softmax_before_13_flattens_unless_the_axis_is_last() {
        let mut facts = Known::default();
        facts.types.insert("x", f32_of(&[2, 3, 4]));
        let default_axis = node("Softmax", &["x"], &["y"], Vec::new());
        assert_eq!(
            run(&default_axis, 11, &facts).unwrap(),
            [
                "Shape(x) -> n/shape#memc1 {}",
                "Flatten(x) -> n/flatten#memc2 {axis=1}",
                "Softmax(n/flatten#memc2) -> n/2d#memc3 {axis=1}",
                "Reshape(n/2d#memc3, n/shape#memc1) -> y {allowzero=1}",
            ]
        );
        let last = node("LogSoftmax", &["x"], &["y"], vec![int("axis", -1)]);
        assert_eq!(
            run(&last, 12, &facts).unwrap(),
            ["LogSoftmax(x) -> y {axis=2}"]
        );
        let no_output = node("Softmax", &["x"], &[], Vec::new());
        assert_eq!(
            run(&no_output, 11, &facts).unwrap_err(),
            "output #0 is missing"
        );
        let out_of_range = node("Hardmax", &["x"], &["y"], vec![int("axis", 3)]);
        assert_eq!(
            run(&out_of_range, 12, &facts).unwrap_err(),
            "axis 3 is out of range for rank 3"
        );
    }

    #[test]
    fn batch_normalization_outputs_and_spatial() {
        let inputs = ["x", "s", "b", "m", "v"];
        let training = node(
            "BatchNormalization",
            &inputs,
            &["y", "rm", "rv"],
            Vec::new(),
        );
        assert_eq!(
            run(&training, 9, &Checking).unwrap(),
            ["BatchNormalization(x, s, b, m, v) -> y, rm, rv {training_mode=1}"]
        );
        let saved = node(
            "BatchNormalization",
            &inputs,
            &["y", "rm", "rv", "sm", ""],
            Vec::new(),
        );
        assert!(run(&saved, 13, &Checking)
            .unwrap_err()
            .contains("saved_mean"));
        let spatial = node(
            "BatchNormalization",
            &inputs,
            &["y"],
            vec![int("spatial", 0)],
        );
        let nodes = run(&spatial, 7, &Checking).unwrap();
        assert_eq!(nodes.last().unwrap(), "Add(n/scaled#memc6, b) -> y {}");
        assert_eq!(nodes.len(), 7);
        // `spatial` is gone in opset 9: the attribute is left for the importer to refuse.
        assert_eq!(
            run(&spatial, 9, &Checking).unwrap(),
            ["BatchNormalization(x, s, b, m, v) -> y {spatial=0}"]
        );
    }

    #[test]
    fn resize_10_and_upsample_round_by_the_direction_of_each_scale() {
        let mut facts = Known::default();
        facts.floats.insert("up", vec![1.0, 1.0, 2.0, 1.5]);
        facts.floats.insert("down", vec![1.0, 1.0, 0.5, 0.6]);
        facts.floats.insert("mixed", vec![1.0, 1.0, 0.5, 2.0]);
        let resize = |scales| node("Resize", &["x", scales], &["y"], Vec::new());
        assert_eq!(
            run(&resize("up"), 10, &facts).unwrap(),
            ["Resize(x, , up) -> y {coordinate_transformation_mode=asymmetric mode=nearest nearest_mode=floor}"]
        );
        assert!(run(&resize("down"), 10, &facts).unwrap()[0].contains("nearest_mode=ceil"));
        assert!(run(&resize("mixed"), 10, &facts)
            .unwrap_err()
            .contains("up-sample some axes"));
        assert!(run(&resize("unknown"), 10, &facts)
            .unwrap_err()
            .contains("not known at compile time is not supported"));
        let upsample = node("Upsample", &["x", "unknown"], &["y"], Vec::new());
        assert!(run(&upsample, 9, &facts).unwrap()[0].contains("nearest_mode=floor"));
        // The whole-model check knows no value and picks a form with the same ops.
        assert!(run(&resize("unknown"), 10, &Checking).is_ok());
        let linear = node(
            "Upsample",
            &["x"],
            &["y"],
            vec![
                text("mode", "linear"),
                AttributeProto {
                    name: "scales".to_string(),
                    r#type: at::FLOATS,
                    floats: vec![1.0, 2.0],
                    ..Default::default()
                },
            ],
        );
        assert_eq!(
            run(&linear, 8, &facts).unwrap()[1],
            "Resize(x, , n/scales#memc1) -> y {coordinate_transformation_mode=asymmetric mode=linear}"
        );
        assert_eq!(current_op("Upsample", 9), "Resize");
        assert_eq!(current_op("Upsample", 10), "Upsample");
        assert!(removed_note("Upsample", 10)
            .unwrap()
            .contains("Resize replaces it"));
    }

    #[test]
    fn tf_half_pixel_for_nn_is_half_pixel_with_shifted_rounding() {
        let nn = |nearest: &str| {
            node(
                "Resize",
                &["x", "roi", "scales"],
                &["y"],
                vec![
                    text("coordinate_transformation_mode", "tf_half_pixel_for_nn"),
                    text("nearest_mode", nearest),
                ],
            )
        };
        assert!(
            run(&nn("floor"), 11, &Checking).unwrap()[0].contains("nearest_mode=round_prefer_ceil")
        );
        assert!(
            run(&nn("round_prefer_floor"), 12, &Checking).unwrap()[0].contains("nearest_mode=ceil")
        );
        assert!(run(&nn("ceil"), 12, &Checking)
            .unwrap_err()
            .contains("nearest_mode ceil"));
    }

    #[test]
    fn dropout_mask_before_10_takes_the_data_type() {
        let d = node(
            "Dropout",
            &["x"],
            &["y", "mask"],
            vec![float("ratio", 0.25)],
        );
        assert_eq!(
            run(&d, 9, &Checking).unwrap(),
            [
                "Constant() -> n/ratio#memc1 {}",
                "Dropout(x, n/ratio#memc1) -> y, n/mask#memc2 {}",
                "CastLike(n/mask#memc2, x) -> mask {}",
            ]
        );
        assert_eq!(run(&d, 10, &Checking).unwrap().len(), 2);
    }

    #[test]
    fn every_change_is_listed_once_and_the_floor_holds() {
        for (i, c) in CHANGES.iter().enumerate() {
            assert!(CHANGES[..i].iter().all(|o| o.op != c.op), "{} twice", c.op);
            // Changes up to opset 14, and GridSample's renamed modes and DFT's axis input in 20.
            let newest = if matches!(c.op, "GridSample" | "DFT") {
                20
            } else {
                14
            };
            assert!(c.until > OLDEST_OPSET && c.until <= newest, "{}", c.op);
        }
        assert_eq!(oldest_opset("Not"), 1);
        assert_eq!(oldest_opset("Add"), OLDEST_OPSET);
    }
}

/// A fresh name for a helper value of the nodes that stand for `node`: the node's name (or its
/// first output's), `what`, and the importer-wide `counter`, which it advances.
pub(super) fn fresh_name(node: &NodeProto, counter: &mut usize, what: &str) -> String {
    *counter += 1;
    let base = if node.name.is_empty() {
        node.output.first().map_or("", String::as_str)
    } else {
        node.name.as_str()
    };
    format!("{base}/{what}#memc{counter}")
}
