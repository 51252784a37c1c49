//! Ops ONNX defines as functions of other ops, imported as those ops.
//!
//! - `DynamicQuantizeLinear` (opset 11): its ONNX function body, node for node: the range
//!   `[min(0, min X), max(0, max X)]`, `y_scale = range / 255`, `y_zero_point =
//!   Cast<uint8>(Round(Clip(0 - min / y_scale, 0, 255)))`, `y = QuantizeLinear(X, y_scale,
//!   y_zero_point)`. The helper nodes carry the node's name (its location), their values fresh
//!   `#memc` names; the node's own outputs are the last nodes' outputs.
//!
//! The op table has no entry for such an op: it is a node form the importer expands, like a
//! legacy form ([`super::legacy`]), so planning, lowering and every backend see only the ops of
//! the expansion.

use super::normalize_domain;
use super::proto::{attribute_type as at, AttributeProto, NodeProto};

/// Whether a node is one the importer expands into other ops.
pub(super) fn is_decomposed(node: &NodeProto) -> bool {
    normalize_domain(&node.domain).is_empty() && node.op_type == "DynamicQuantizeLinear"
}

/// The nodes a decomposed node is imported as, in order; `counter` keeps fresh names unique.
pub(super) fn expand(node: &NodeProto, counter: &mut usize) -> Result<Vec<NodeProto>, String> {
    match node.op_type.as_str() {
        "DynamicQuantizeLinear" => dynamic_quantize_linear(node, counter),
        other => Err(format!("memc does not expand {other}")),
    }
}

struct Builder<'n> {
    node: &'n NodeProto,
    counter: &'n mut usize,
    nodes: Vec<NodeProto>,
}

impl Builder<'_> {
    fn fresh(&mut self, what: &str) -> String {
        super::legacy::fresh_name(self.node, self.counter, what)
    }

    /// A node writing `output` (a fresh name when `None`); returns the output's name.
    fn push(
        &mut self,
        op_type: &str,
        inputs: &[&str],
        output: Option<&str>,
        attribute: Vec<AttributeProto>,
    ) -> String {
        let output = output.map_or_else(|| self.fresh(op_type), str::to_string);
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.clone()],
            name: self.node.name.clone(),
            op_type: op_type.to_string(),
            domain: String::new(),
            attribute,
        });
        output
    }

    fn float_constant(&mut self, value: f32) -> String {
        let attr = AttributeProto {
            name: "value_float".to_string(),
            r#type: at::FLOAT,
            f: value,
            ..Default::default()
        };
        self.push("Constant", &[], None, vec![attr])
    }
}

fn int_attr(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: at::INT,
        i: value,
        ..Default::default()
    }
}

/// `DynamicQuantizeLinear(x) -> (y, y_scale, y_zero_point)`, as ONNX's function body.
fn dynamic_quantize_linear(
    node: &NodeProto,
    counter: &mut usize,
) -> Result<Vec<NodeProto>, String> {
    let [x] = node.input.as_slice() else {
        return Err(format!(
            "DynamicQuantizeLinear has one input, this one has {}",
            node.input.len()
        ));
    };
    if let Some(attr) = node.attribute.first() {
        return Err(format!(
            "DynamicQuantizeLinear has no attributes, this one has `{}`",
            attr.name
        ));
    }
    let output = |i: usize| node.output.get(i).filter(|o| !o.is_empty()).cloned();
    let mut b = Builder {
        node,
        counter,
        nodes: Vec::new(),
    };
    let q_min = b.float_constant(0.0);
    let q_max = b.float_constant(255.0);
    let x_min = b.push("ReduceMin", &[x], None, vec![int_attr("keepdims", 0)]);
    let x_min = b.push("Min", &[&x_min, &q_min], None, Vec::new());
    let x_max = b.push("ReduceMax", &[x], None, vec![int_attr("keepdims", 0)]);
    let x_max = b.push("Max", &[&x_max, &q_min], None, Vec::new());
    let range = b.push("Sub", &[&x_max, &x_min], None, Vec::new());
    let scale_name = output(1);
    let scale = b.push("Div", &[&range, &q_max], scale_name.as_deref(), Vec::new());
    let min_scaled = b.push("Div", &[&x_min, &scale], None, Vec::new());
    let zero_point = b.push("Sub", &[&q_min, &min_scaled], None, Vec::new());
    let zero_point = b.push("Clip", &[&zero_point, &q_min, &q_max], None, Vec::new());
    let zero_point = b.push("Round", &[&zero_point], None, Vec::new());
    let zero_point_name = output(2);
    let zero_point = b.push(
        "Cast",
        &[&zero_point],
        zero_point_name.as_deref(),
        vec![int_attr("to", 2)],
    );
    if let Some(y) = output(0) {
        b.push(
            "QuantizeLinear",
            &[x, &scale, &zero_point],
            Some(&y),
            Vec::new(),
        );
    }
    Ok(b.nodes)
}
