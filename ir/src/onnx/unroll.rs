//! `Loop` and `Scan`, unrolled at import.
//!
//! memc has no loop op: a `Loop` or `Scan` node becomes its body's nodes, imported once per
//! iteration, in its place, with the iteration's values bound to the body's inputs, much as an
//! `If` with a known condition becomes the nodes of its taken branch.
//!
//! - `Loop`: the trip count `M` must be known when the node is imported (a constant, an
//!   initializer, a value shape inference computes, or a graph input bound with
//!   `memc compile --const`). Iteration `i` binds the body's `iter_num` to a constant `i`, its
//!   `cond` to a constant `true` and its loop-carried inputs to the previous iteration's values.
//!   The condition (the node's `cond` operand, then each iteration's `cond_out` whenever another
//!   iteration would follow) must be known too: a known `false` ends the loop, an unknown one is
//!   an error ("... whose condition depends on data"). A `Loop` without `M` runs until its
//!   known condition is false. Scan outputs are each iteration's value unsqueezed at axis 0 and
//!   concatenated; a loop that runs no iteration and has scan outputs is an error (their
//!   extents past axis 0 would be unknown).
//! - `Scan` (opset 9 and later): the scan length is the static extent of every scan input along
//!   its `scan_input_axes` entry. Iteration `t` binds the body's state inputs to the states and
//!   its scan inputs to the slices at `t` (or `len - 1 - t` for a reverse direction), taken
//!   with `Gather` at a constant index; scan outputs are stacked along `scan_output_axes` with
//!   `Unsqueeze` + `Concat`, in reverse for a reverse `scan_output_directions` entry. Opset 8's
//!   batched form (a leading batch axis, scan axis 1, optional `sequence_lens`) is the opset-9
//!   form run once per batch entry, the results stacked along axis 0; its `sequence_lens` must
//!   be absent or known to equal the scan length for every batch entry.
//! - The unrolled size is capped: iterations times the body's node count (a nested `Loop`
//!   whose trip count is already known counted unrolled) at most [`MAX_UNROLLED_NODES`],
//!   checked before a loop is unrolled, and the body nodes all the model's loops import
//!   (nested ones included) at most that many in all; beyond it is an error naming the node.
//!
//! A body's `Constant` nodes and initializers become one weight each, shared by all iterations.

use super::proto::{attribute_type as at, GraphProto, NodeProto};
use super::{check_graph_order, declared_type, normalize_domain, Importer};
use crate::ops::Opcode;
use crate::{AttrDict, Attribute, BlockId, Dim, ElemType, Function, TensorType, Type, ValueId};
use std::collections::HashMap;

/// The most body nodes unrolled `Loop`s and `Scan`s may import: iterations times body nodes
/// for one loop, and in all for a model.
pub const MAX_UNROLLED_NODES: usize = 100_000;

/// Whether a node is a `Loop` or `Scan`, which the importer unrolls instead of building an op.
pub(super) fn is_unrolled(node: &NodeProto) -> bool {
    normalize_domain(&node.domain).is_empty() && matches!(node.op_type.as_str(), "Loop" | "Scan")
}

/// The graph attribute `name` of a node.
fn graph_attr<'n>(node: &'n NodeProto, name: &str) -> Result<&'n GraphProto, String> {
    node.attribute
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.g.as_ref())
        .ok_or_else(|| format!("attribute `{name}` (a graph) is missing"))
}

/// The int attribute `name` of a node, if given.
fn int_attr(node: &NodeProto, name: &str) -> Result<Option<i64>, String> {
    match node.attribute.iter().find(|a| a.name == name) {
        None => Ok(None),
        Some(a) if a.r#type == at::INT => Ok(Some(a.i)),
        Some(_) => Err(format!("attribute `{name}` must be an int")),
    }
}

/// The ints attribute `name` of a node, or `n` copies of `default` when absent.
fn ints_attr(node: &NodeProto, name: &str, n: usize, default: i64) -> Result<Vec<i64>, String> {
    match node.attribute.iter().find(|a| a.name == name) {
        None => Ok(vec![default; n]),
        Some(a) if a.r#type == at::INTS => {
            if a.ints.len() != n {
                return Err(format!(
                    "attribute `{name}` has {} entries but there are {n} values it applies to",
                    a.ints.len()
                ));
            }
            Ok(a.ints.clone())
        }
        Some(_) => Err(format!("attribute `{name}` must be a list of ints")),
    }
}

/// A scan direction attribute entry: false forward, true reverse.
fn direction(value: i64, name: &str) -> Result<bool, String> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(format!(
            "attribute `{name}` has direction {other}; directions are 0 (forward) or 1 (reverse)"
        )),
    }
}

/// An axis in `-rank..rank`, made non-negative.
fn axis(value: i64, rank: usize, what: &str) -> Result<usize, String> {
    let r = rank as i64;
    if !(-r..r).contains(&value) {
        return Err(format!("{what} {value} is out of range for rank {rank}"));
    }
    Ok(if value < 0 { value + r } else { value } as usize)
}

/// How a `Scan`'s inputs and outputs are scanned (the opset-9 attributes, resolved).
struct ScanForm {
    input_axes: Vec<i64>,
    input_reverse: Vec<bool>,
    output_axes: Vec<i64>,
    output_reverse: Vec<bool>,
}

impl Importer {
    /// Unrolls a `Loop` or `Scan` node into `block`.
    pub(super) fn unroll(
        &mut self,
        func: &mut Function,
        node: &NodeProto,
        block: BlockId,
    ) -> Result<(), String> {
        let mut operands = Vec::with_capacity(node.input.len());
        for (i, name) in node.input.iter().enumerate() {
            operands.push(if name.is_empty() {
                None
            } else {
                Some(
                    self.operand(func, name)
                        .map_err(|m| format!("input #{i} `{name}` {m}"))?,
                )
            });
        }
        let outputs = if node.op_type == "Loop" {
            self.unroll_loop(func, node, &operands, block)?
        } else if self.opset.is_some_and(|v| v < 9) {
            self.unroll_batched_scan(func, node, &operands, block)?
        } else {
            let present: Vec<ValueId> = operands
                .iter()
                .enumerate()
                .map(|(i, v)| v.ok_or_else(|| format!("input #{i} of a Scan cannot be left out")))
                .collect::<Result<_, _>>()?;
            self.unroll_scan(func, node, &present, block)?
        };
        if outputs.len() < node.output.iter().filter(|o| !o.is_empty()).count() {
            return Err(format!(
                "the body yields {} value(s) for {} output(s)",
                outputs.len(),
                node.output.len()
            ));
        }
        for (name, value) in node.output.iter().zip(outputs) {
            if !name.is_empty() {
                self.define(name, value)?;
            }
        }
        Ok(())
    }

    fn unroll_loop(
        &mut self,
        func: &mut Function,
        node: &NodeProto,
        operands: &[Option<ValueId>],
        block: BlockId,
    ) -> Result<Vec<ValueId>, String> {
        let body = graph_attr(node, "body")?;
        let n_carried = operands.len().saturating_sub(2);
        if body.input.len() != n_carried + 2 {
            return Err(format!(
                "the body has {} input(s) but a Loop with {n_carried} loop-carried value(s) needs {}",
                body.input.len(),
                n_carried + 2
            ));
        }
        if body.output.len() < n_carried + 1 {
            return Err(format!(
                "the body has {} output(s) but a Loop with {n_carried} loop-carried value(s) needs at least {}",
                body.output.len(),
                n_carried + 1
            ));
        }
        let n_scan = body.output.len() - 1 - n_carried;
        let trip_count = match operands.first().copied().flatten() {
            None => None,
            Some(m) => match self.infer.known_value(m).and_then(|k| k.ints()).as_deref() {
                Some(&[m]) => Some(m.max(0) as u64),
                _ => {
                    return Err(
                        "a Loop whose trip count is not known at compile time is not supported (make `M` a constant, or bind the graph input it comes from with `memc compile --const`)"
                            .to_string(),
                    )
                }
            },
        };
        let data_dependent = || {
            "a Loop whose condition depends on data is not supported (the condition must be a constant, or computed from constants, at every iteration)".to_string()
        };
        let mut cond = match operands.get(1).copied().flatten() {
            None => true,
            Some(c) => self.known_condition(c).ok_or_else(data_dependent)?,
        };
        if trip_count.is_none() && operands.get(1).copied().flatten().is_none() {
            return Err("a Loop with neither a trip count nor a condition never ends".to_string());
        }
        if let Some(m) = trip_count {
            self.check_size(m, body, "Loop")?;
        }
        self.prepare_body(body)?;
        let true_value = self.synth_value(func, "cond", ElemType::Bool, &[], vec![1])?;
        let mut carried: Vec<ValueId> = operands
            .iter()
            .enumerate()
            .skip(2)
            .map(|(i, v)| v.ok_or_else(|| format!("input #{i}, a loop-carried value, is left out")))
            .collect::<Result<_, _>>()?;
        let mut scans: Vec<Vec<ValueId>> = vec![Vec::new(); n_scan];
        let mut i: u64 = 0;
        while cond && trip_count.is_none_or(|m| i < m) {
            if trip_count.is_none() {
                self.check_size(i + 1, body, "Loop")?;
            }
            let iter_num = self.synth_value(
                func,
                "iter",
                ElemType::I64,
                &[],
                (i as i64).to_le_bytes().to_vec(),
            )?;
            let mut bindings = vec![iter_num, true_value];
            bindings.extend(&carried);
            let outs = self.import_iteration(func, body, &bindings, block)?;
            i += 1;
            if trip_count.is_none_or(|m| i < m) {
                cond = self.known_condition(outs[0]).ok_or_else(data_dependent)?;
            }
            carried = outs[1..=n_carried].to_vec();
            for (k, &v) in outs[n_carried + 1..].iter().enumerate() {
                scans[k].push(v);
            }
        }
        let mut results = carried;
        for stack in scans {
            if stack.is_empty() {
                return Err(
                    "this Loop runs no iteration, and memc cannot type its empty scan outputs"
                        .to_string(),
                );
            }
            results.push(self.stack(func, &stack, 0, block)?);
        }
        Ok(results)
    }

    fn unroll_scan(
        &mut self,
        func: &mut Function,
        node: &NodeProto,
        operands: &[ValueId],
        block: BlockId,
    ) -> Result<Vec<ValueId>, String> {
        let body = graph_attr(node, "body")?;
        let n_scan_in = int_attr(node, "num_scan_inputs")?
            .ok_or("attribute `num_scan_inputs` is missing")? as usize;
        if n_scan_in == 0 || n_scan_in > operands.len() {
            return Err(format!(
                "`num_scan_inputs` is {n_scan_in} but the node has {} input(s)",
                operands.len()
            ));
        }
        let n_state = operands.len() - n_scan_in;
        let n_scan_out = body.output.len().checked_sub(n_state).ok_or_else(|| {
            format!(
                "the body has {} output(s), fewer than the {n_state} state value(s)",
                body.output.len()
            )
        })?;
        let form = ScanForm {
            input_axes: ints_attr(node, "scan_input_axes", n_scan_in, 0)?,
            input_reverse: ints_attr(node, "scan_input_directions", n_scan_in, 0)?
                .into_iter()
                .map(|d| direction(d, "scan_input_directions"))
                .collect::<Result<_, _>>()?,
            output_axes: ints_attr(node, "scan_output_axes", n_scan_out, 0)?,
            output_reverse: ints_attr(node, "scan_output_directions", n_scan_out, 0)?
                .into_iter()
                .map(|d| direction(d, "scan_output_directions"))
                .collect::<Result<_, _>>()?,
        };
        self.prepare_body(body)?;
        self.scan_core(
            func,
            body,
            &operands[..n_state],
            &operands[n_state..],
            &form,
            block,
        )
    }

    /// Opset 8's `Scan`: `sequence_lens`, states and scan inputs all with a leading batch axis,
    /// the scan axis 1; each batch entry is an opset-9 scan, and the results are stacked.
    fn unroll_batched_scan(
        &mut self,
        func: &mut Function,
        node: &NodeProto,
        operands: &[Option<ValueId>],
        block: BlockId,
    ) -> Result<Vec<ValueId>, String> {
        let body = graph_attr(node, "body")?;
        let n_scan_in = int_attr(node, "num_scan_inputs")?
            .ok_or("attribute `num_scan_inputs` is missing")? as usize;
        let values: Vec<ValueId> = operands
            .iter()
            .skip(1)
            .enumerate()
            .map(|(i, v)| v.ok_or_else(|| format!("input #{} of a Scan cannot be left out", i + 1)))
            .collect::<Result<_, _>>()?;
        if n_scan_in == 0 || n_scan_in > values.len() {
            return Err(format!(
                "`num_scan_inputs` is {n_scan_in} but the node has {} state and scan input(s)",
                values.len()
            ));
        }
        let n_state = values.len() - n_scan_in;
        let n_scan_out = body.output.len().checked_sub(n_state).ok_or_else(|| {
            format!(
                "the body has {} output(s), fewer than the {n_state} state value(s)",
                body.output.len()
            )
        })?;
        let first = values[n_state];
        let batch = self.static_dim(func, first, 0)?;
        let seq_len = self.static_dim(func, first, 1)?;
        if let Some(lens) = operands.first().copied().flatten() {
            let known = self.infer.known_value(lens).and_then(|k| k.ints());
            if known.is_none_or(|l| l.iter().any(|&l| l as u64 != seq_len)) {
                return Err(format!(
                    "opset 8's Scan with `sequence_lens` is supported only when they are known to equal the scan length {seq_len}"
                ));
            }
        }
        let form = ScanForm {
            input_axes: vec![0; n_scan_in],
            input_reverse: ints_attr(node, "directions", n_scan_in, 0)?
                .into_iter()
                .map(|d| direction(d, "directions"))
                .collect::<Result<_, _>>()?,
            output_axes: vec![0; n_scan_out],
            output_reverse: vec![false; n_scan_out],
        };
        self.check_size(batch.saturating_mul(seq_len), body, "Scan")?;
        self.prepare_body(body)?;
        let mut per_batch: Vec<Vec<ValueId>> = vec![Vec::new(); body.output.len()];
        for b in 0..batch {
            let index = self.synth_value(
                func,
                "batch",
                ElemType::I64,
                &[],
                (b as i64).to_le_bytes().to_vec(),
            )?;
            let entries: Vec<ValueId> = values
                .iter()
                .map(|&v| self.gather(func, v, index, 0, block))
                .collect::<Result<_, _>>()?;
            let outs = self.scan_core(
                func,
                body,
                &entries[..n_state],
                &entries[n_state..],
                &form,
                block,
            )?;
            for (k, v) in outs.into_iter().enumerate() {
                per_batch[k].push(v);
            }
        }
        per_batch
            .iter()
            .map(|entries| self.stack(func, entries, 0, block))
            .collect()
    }

    /// The opset-9 scan of `scan_inputs` with initial `states`: the final states, then the
    /// stacked scan outputs.
    fn scan_core(
        &mut self,
        func: &mut Function,
        body: &GraphProto,
        states: &[ValueId],
        scan_inputs: &[ValueId],
        form: &ScanForm,
        block: BlockId,
    ) -> Result<Vec<ValueId>, String> {
        if body.input.len() != states.len() + scan_inputs.len() {
            return Err(format!(
                "the body has {} input(s) but the Scan passes it {} state and {} scan value(s)",
                body.input.len(),
                states.len(),
                scan_inputs.len()
            ));
        }
        let mut axes = Vec::with_capacity(scan_inputs.len());
        let mut seq_len = None;
        for (j, &input) in scan_inputs.iter().enumerate() {
            let rank = self.rank(func, input)?;
            let a = axis(form.input_axes[j], rank, "scan input axis")?;
            let len = self.static_dim(func, input, a)?;
            if seq_len.is_some_and(|l| l != len) {
                return Err(format!(
                    "scan input #{j} has {len} entries along its scan axis, the others {}",
                    seq_len.unwrap_or(0)
                ));
            }
            seq_len = Some(len);
            axes.push(a);
        }
        let seq_len = seq_len.unwrap_or(0);
        self.check_size(seq_len, body, "Scan")?;
        let mut states = states.to_vec();
        let n_scan_out = body.output.len() - states.len();
        let mut scans: Vec<Vec<ValueId>> = vec![Vec::new(); n_scan_out];
        for t in 0..seq_len {
            let mut bindings = states.clone();
            for (j, &input) in scan_inputs.iter().enumerate() {
                let position = if form.input_reverse[j] {
                    seq_len - 1 - t
                } else {
                    t
                };
                let index = self.synth_value(
                    func,
                    "scan",
                    ElemType::I64,
                    &[],
                    (position as i64).to_le_bytes().to_vec(),
                )?;
                bindings.push(self.gather(func, input, index, axes[j], block)?);
            }
            let outs = self.import_iteration(func, body, &bindings, block)?;
            states = outs[..states.len()].to_vec();
            for (k, &v) in outs[states.len()..].iter().enumerate() {
                scans[k].push(v);
            }
        }
        let mut results = states;
        for (k, mut stack) in scans.into_iter().enumerate() {
            if stack.is_empty() {
                return Err(
                    "this Scan has no iteration, and memc cannot type its empty scan outputs"
                        .to_string(),
                );
            }
            if form.output_reverse[k] {
                stack.reverse();
            }
            let rank = self.rank(func, stack[0])?;
            let a = axis(form.output_axes[k], rank + 1, "scan output axis")?;
            results.push(self.stack(func, &stack, a, block)?);
        }
        Ok(results)
    }

    /// The nodes one iteration of `body` imports: a nested `Loop` counts its body times its trip
    /// count when that is already known (a value in scope or an initializer), other nested
    /// bodies once; the model-wide count in `import_iteration` catches what this cannot see.
    fn body_size(&self, body: &GraphProto) -> u64 {
        let size = body.node.iter().fold(0u64, |total, node| {
            let nested = node
                .attribute
                .iter()
                .filter_map(|a| a.g.as_ref())
                .fold(0u64, |sum, g| sum.saturating_add(self.body_size(g)));
            let trips = if node.op_type == "Loop" && is_unrolled(node) {
                node.input
                    .first()
                    .and_then(|m| self.known_scalar(m))
                    .map_or(1, |m| m.max(1) as u64)
            } else {
                1
            };
            total.saturating_add(nested.saturating_mul(trips).saturating_add(1))
        });
        size.max(1)
    }

    /// The value of a scalar integer named `name`, when it is already known.
    fn known_scalar(&self, name: &str) -> Option<i64> {
        if let Some(value) = self.lookup(name) {
            return match self.infer.known_value(value)?.ints()?.as_slice() {
                [v] => Some(*v),
                _ => None,
            };
        }
        let weight = self.module.weights.get(*self.initializers.get(name)?)?;
        if weight.ty().elem != ElemType::I64 || weight.ty().static_num_elements() != Some(1) {
            return None;
        }
        Some(i64::from_le_bytes(weight.bytes()?.try_into().ok()?))
    }

    /// Checks the unrolled size of `n_iterations` iterations of `body`.
    fn check_size(&self, n_iterations: u64, body: &GraphProto, what: &str) -> Result<(), String> {
        let size = self.body_size(body);
        if n_iterations.saturating_mul(size) > MAX_UNROLLED_NODES as u64 {
            return Err(format!(
                "this {what} unrolls to {n_iterations} iteration(s) of {size} node(s), more than memc's limit of {MAX_UNROLLED_NODES} unrolled nodes"
            ));
        }
        Ok(())
    }

    /// Makes a body's initializers weights and reads its declared types, once per node.
    fn prepare_body(&mut self, body: &GraphProto) -> Result<(), String> {
        check_graph_order(body).map_err(|d| format!("in the body: {}", d.message))?;
        for vi in body.value_info.iter().chain(&body.output) {
            if let Some(ty) = declared_type(vi).ok().flatten() {
                self.declared.insert(vi.name.clone(), ty);
            }
        }
        for init in &body.initializer {
            if self.module.weights.lookup(&init.name).is_none() {
                self.add_weight(&init.name, init)
                    .map_err(|m| format!("body initializer `{}`: {m}", init.name))?;
            }
        }
        Ok(())
    }

    /// Imports one iteration of `body` into `block` with its inputs bound to `bindings`, and
    /// returns the values of its outputs.
    fn import_iteration(
        &mut self,
        func: &mut Function,
        body: &GraphProto,
        bindings: &[ValueId],
        block: BlockId,
    ) -> Result<Vec<ValueId>, String> {
        self.n_unrolled = self.n_unrolled.saturating_add(body.node.len());
        if self.n_unrolled > MAX_UNROLLED_NODES {
            return Err(format!(
                "the model's Loops and Scans unroll to more than memc's limit of {MAX_UNROLLED_NODES} nodes"
            ));
        }
        let mut scope: HashMap<String, ValueId> = HashMap::new();
        for (input, &value) in body.input.iter().zip(bindings) {
            scope.insert(input.name.clone(), value);
        }
        for init in &body.initializer {
            let id = self
                .module
                .weights
                .lookup(&init.name)
                .expect("prepare_body made every body initializer a weight");
            let value = self.weight_value(func, id);
            scope.insert(init.name.clone(), value);
        }
        self.scopes.push(scope);
        self.unrolling += 1;
        let result = self.import_nodes(func, body, block);
        let outputs: Result<Vec<ValueId>, String> = body
            .output
            .iter()
            .map(|o| {
                self.lookup(&o.name)
                    .ok_or_else(|| format!("body output `{}` is not produced in the body", o.name))
            })
            .collect();
        self.unrolling -= 1;
        self.scopes.pop();
        result.map_err(|d| format!("in the body: {}", d.message))?;
        outputs
    }

    /// A constant made by the unrolling (an iteration number, an index, `true`): a weight.
    fn synth_value(
        &mut self,
        func: &mut Function,
        what: &str,
        elem: ElemType,
        shape: &[u64],
        bytes: Vec<u8>,
    ) -> Result<ValueId, String> {
        self.n_synthesized += 1;
        let name = format!("unroll/{what}#memc{}", self.n_synthesized);
        let id = self.owned_weight(&name, elem, shape, bytes)?;
        Ok(self.weight_value(func, id))
    }

    /// Builds a synthesized op with one result into `block`, typed by shape inference.
    fn synth_op(
        &mut self,
        func: &mut Function,
        opcode: Opcode,
        operands: Vec<ValueId>,
        attrs: AttrDict,
        block: BlockId,
    ) -> Result<ValueId, String> {
        let placeholder = Type::Tensor(TensorType::new(ElemType::F32, Vec::new()));
        let op = func.create_op(opcode, operands, vec![placeholder], attrs);
        func.append_op(block, op);
        let types = self
            .infer
            .infer_op(func, &self.module.weights, op)?
            .ok_or_else(|| {
                format!(
                    "cannot infer the type of the {} the unrolling makes",
                    opcode.name()
                )
            })?;
        let value = func.op(op).results[0];
        let ty = types
            .into_iter()
            .next()
            .ok_or("shape inference gave no type for a result")?;
        func.set_value_type(value, Type::Tensor(ty));
        Ok(value)
    }

    /// `data` at `index` (a scalar) along `axis`, which the result no longer has.
    fn gather(
        &mut self,
        func: &mut Function,
        data: ValueId,
        index: ValueId,
        axis: usize,
        block: BlockId,
    ) -> Result<ValueId, String> {
        let attrs: AttrDict = [("axis", Attribute::Int(axis as i64))]
            .into_iter()
            .collect();
        self.synth_op(func, Opcode::Gather, vec![data, index], attrs, block)
    }

    /// `values` (of one type) stacked along a new axis `axis`.
    fn stack(
        &mut self,
        func: &mut Function,
        values: &[ValueId],
        axis: usize,
        block: BlockId,
    ) -> Result<ValueId, String> {
        let axes = self.synth_value(
            func,
            "axes",
            ElemType::I64,
            &[1],
            (axis as i64).to_le_bytes().to_vec(),
        )?;
        let mut expanded = Vec::with_capacity(values.len());
        for &v in values {
            expanded.push(self.synth_op(
                func,
                Opcode::Unsqueeze,
                vec![v, axes],
                AttrDict::new(),
                block,
            )?);
        }
        if let [single] = expanded.as_slice() {
            return Ok(*single);
        }
        let attrs: AttrDict = [("axis", Attribute::Int(axis as i64))]
            .into_iter()
            .collect();
        self.synth_op(func, Opcode::Concat, expanded, attrs, block)
    }

    fn rank(&self, func: &Function, value: ValueId) -> Result<usize, String> {
        func.value_type(value)
            .tensor()
            .map(|t| t.rank())
            .ok_or_else(|| "a scanned value is not a tensor".to_string())
    }

    /// The static extent of `value` along `axis`; an error when it is not static.
    fn static_dim(&self, func: &Function, value: ValueId, axis: usize) -> Result<u64, String> {
        let ty = func
            .value_type(value)
            .tensor()
            .ok_or_else(|| "a scanned value is not a tensor".to_string())?;
        match ty.dims.get(axis) {
            Some(Dim::Static(n)) => Ok(*n),
            Some(d) => Err(format!(
                "a Scan whose scan length is not known at compile time is not supported (a scan input's extent along its scan axis {axis} is `{d}`; memc unrolls a Scan as it imports it, so the model must give that extent as a number)"
            )),
            None => Err(format!("a scan input has rank {}, too small for its scan axis {axis}", ty.rank())),
        }
    }
}
