//! ONNX import: a model file (or bytes) to a verified [`Module`] in the `onnx` dialect.
//!
//! - The model file is memory-mapped and decoded with prost straight from the map; initializer
//!   payloads stay slices of it, and external data files are mapped too ([`external`]). Import
//!   copies no weight byte, except small tensors written as typed values ([`tensor`]).
//! - Opsets: the default domain at versions 7 to 27, and older models whose ops kept their
//!   form since ([`legacy::oldest_opset`]). Forms older than opset 13 are normalized to the
//!   current ones as nodes are imported ([`legacy`], the one place that knows which opset
//!   changed what); ops whose form changed after 13 keep the form they were written in, and the
//!   op table declares both (Reduce* `axes` as an attribute or an operand). A model that uses
//!   no default-domain op need not import the default domain. `com.microsoft` nodes (onnxruntime's contrib and training ops,
//!   as its training artifacts write them) import as `ms.*` ops, where the table has them.
//! - Every unsupported op (or attribute) of the whole model, subgraphs included, is reported in
//!   one error with node names, op types, domains, opsets and counts per op type.
//! - Structural errors name what and where: the node (name, op type, index), the input index
//!   and value name, or the initializer. Import never panics on any input.
//! - Result types come from shape inference ([`crate::infer`]), op by op; where it cannot tell,
//!   from the model's `value_info`; symbolic dims keep their `dim_param` names.
//! - An `If` whose condition shape inference knows when the node is imported (a constant, or
//!   computed from static shapes, as exporters' rank dispatch is) is replaced by the nodes of
//!   the branch it takes; the other branch is never imported, so it need not make sense for
//!   values it would never see. Other `If`s keep both branches as regions.
//! - `Loop` and `Scan` are unrolled as they are imported ([`unroll`]): the body's nodes once
//!   per iteration, when the trip count, condition or scan length is known; otherwise an error
//!   naming the node. `DynamicQuantizeLinear` is imported as its ONNX function body
//!   ([`decompose`]).
//! - Graph inputs and outputs become function arguments and results, with their ONNX names in
//!   a `memc.name` attribute. A training step's parameters and gradient buffers are marked
//!   persistent (`memc.state`, [`crate::state::mark_training_state`]). Initializers become weights; the ops that read them see a
//!   `memc.weight` op at the top of the function. `Constant` nodes become weights too.
//! - A graph input bound to a value ([`ConstInput`], `memc compile --const NAME=FILE.npy`)
//!   becomes a weight like an initializer, before any node is imported, so shape inference
//!   sees its value (a Reshape's shape, Slice's starts, Pad's pads, ... become static) and the
//!   function has no argument for it. The value must match the input's declared element type,
//!   rank and static dims (a symbolic or unknown dim takes the array's extent).

mod decompose;
pub mod external;
pub mod legacy;
pub mod proto;
#[cfg(unix)]
pub mod reader;
pub mod tensor;
mod unroll;

pub use unroll::MAX_UNROLLED_NODES;

use crate::diag::Diagnostic;
use crate::infer::ShapeInference;
use crate::ops::{AttrDef, Opcode};
use crate::{
    dim::sanitize_symbol, AttrDict, AttrKind, Attribute, BlockId, Dim, ElemType, Function, Module,
    TensorType, Type, ValueId, WeightBytes, WeightId,
};
use bytes::Bytes;
use external::ExternalData;
use prost::Message;
use proto::{attribute_type as at, GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// The default-domain opsets from which memc imports every op it has (older opsets: the ops
/// [`legacy::oldest_opset`] names).
pub const SUPPORTED_OPSETS: std::ops::RangeInclusive<i64> =
    legacy::OLDEST_OPSET..=legacy::NEWEST_OPSET;

/// A model after import.
pub struct ImportedModel {
    pub module: Module,
    /// The default-domain opset version (`None`: the model imports none and uses no
    /// default-domain op).
    pub opset: Option<i64>,
    pub ir_version: i64,
    pub producer: String,
}

/// A value for a graph input, bound at import: the input becomes a constant (a weight).
#[derive(Clone, Debug)]
pub struct ConstInput {
    name: String,
    ty: TensorType,
    bytes: Arc<[u8]>,
}

impl ConstInput {
    /// The value of input `name`: `bytes` little-endian, row-major, of element type `elem` and
    /// `shape`. Errors (a sentence) when the length does not match, or the element type is
    /// narrower than a byte (those have no array form memc reads).
    pub fn new(
        name: impl Into<String>,
        elem: ElemType,
        shape: Vec<u64>,
        bytes: Arc<[u8]>,
    ) -> Result<ConstInput, String> {
        let name = name.into();
        if elem.is_sub_byte() {
            return Err(format!(
                "the value of `{name}` has element type {}, narrower than a byte, which cannot be bound",
                elem.mlir_name()
            ));
        }
        let ty = TensorType::new(elem, shape.iter().map(|&d| Dim::Static(d)).collect());
        let expected = ty.static_byte_size();
        if expected != Some(bytes.len() as u64) {
            return Err(format!(
                "the value of `{name}` has {} bytes but {} needs {}",
                bytes.len(),
                describe_type(&ty),
                expected.map_or("more than 2^64".to_string(), |n| n.to_string())
            ));
        }
        Ok(ConstInput { name, ty, bytes })
    }

    /// The input's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value's type (every dim static).
    pub fn ty(&self) -> &TensorType {
        &self.ty
    }
}

/// How to import a model.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Graph inputs bound to values: each becomes a constant (see [`ConstInput`]).
    pub consts: Vec<ConstInput>,
}

/// A type for messages: `i64[2]`, `f32[batch, 3]`.
fn describe_type(ty: &TensorType) -> String {
    let dims: Vec<String> = ty
        .dims
        .iter()
        .map(|d| match d {
            Dim::Unknown => "?".to_string(),
            d => d.to_string(),
        })
        .collect();
    format!("{}[{}]", ty.elem.mlir_name(), dims.join(", "))
}

/// Imports the model at `path` (its external data is looked up beside it).
pub fn import_file(path: &Path) -> Result<ImportedModel, Diagnostic> {
    import_file_with(path, &ImportOptions::default())
}

/// Imports the model at `path` with `options` (graph inputs bound to values).
pub fn import_file_with(path: &Path, options: &ImportOptions) -> Result<ImportedModel, Diagnostic> {
    let cannot_read =
        |e: std::io::Error| Diagnostic::error(format!("cannot read `{}`: {e}", path.display()));
    let map = external::map_file(path).map_err(cannot_read)?;
    let dir = path.parent().map(|p| {
        if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        }
    });
    #[cfg(unix)]
    let model = {
        let file = std::fs::File::open(path).map_err(cannot_read)?;
        let mut buf = reader::MappedBuf::new(&file, &map);
        let decoded = ModelProto::decode(&mut buf);
        if let Some(e) = buf.take_error() {
            return Err(cannot_read(e));
        }
        decoded.map_err(decode_error)?
    };
    #[cfg(not(unix))]
    let model = ModelProto::decode(map).map_err(decode_error)?;
    import_model(&model, dir, options)
}

/// Imports a model from bytes; `model_dir` is where external data files are looked up (`None`:
/// a model with external data is an error).
pub fn import_bytes(bytes: Bytes, model_dir: Option<&Path>) -> Result<ImportedModel, Diagnostic> {
    let model = ModelProto::decode(bytes).map_err(decode_error)?;
    import_model(&model, model_dir, &ImportOptions::default())
}

fn decode_error(e: prost::DecodeError) -> Diagnostic {
    Diagnostic::error(format!(
        "this is not a valid ONNX model: the protobuf does not decode ({e})"
    ))
    .with_note("an ONNX model is a binary ModelProto, usually written by onnx.save")
}

fn import_model(
    model: &ModelProto,
    model_dir: Option<&Path>,
    options: &ImportOptions,
) -> Result<ImportedModel, Diagnostic> {
    let opset = default_opset(model)?;
    let graph = model.graph.as_ref().ok_or_else(|| {
        Diagnostic::error("the model has no graph").with_note("ModelProto.graph (field 7) is empty")
    })?;
    let mut importer = Importer {
        module: Module::new(),
        external: ExternalData::new(model_dir),
        opsets: model
            .opset_import
            .iter()
            .map(|o| (normalize_domain(&o.domain).to_string(), o.version))
            .collect(),
        opset,
        infer: ShapeInference::new(),
        declared: HashMap::new(),
        scopes: Vec::new(),
        initializers: HashMap::new(),
        weight_values: HashMap::new(),
        none: None,
        n_synthesized: 0,
        unrolling: 0,
        n_unrolled: 0,
    };
    importer.check_supported(graph)?;
    let mut func = importer.import_main_graph(graph, &options.consts)?;
    crate::state::mark_training_state(&mut func)?;
    let mut module = importer.module;
    module.add_function(func);
    if let Err(diags) = crate::verify_module(&module) {
        let first = diags
            .into_iter()
            .next()
            .unwrap_or_else(|| Diagnostic::error("unknown verifier failure"));
        return Err(Diagnostic::error(format!(
            "internal error: the imported IR fails verification; this is a bug in memc: {}",
            first.message
        )));
    }
    Ok(ImportedModel {
        module,
        opset,
        ir_version: model.ir_version,
        producer: model.producer_name.clone(),
    })
}

fn normalize_domain(domain: &str) -> &str {
    if domain == "ai.onnx" {
        ""
    } else {
        domain
    }
}

fn domain_name(domain: &str) -> &str {
    if domain.is_empty() {
        "ai.onnx"
    } else {
        domain
    }
}

/// The default-domain opset the model imports, if any (a model whose nodes are all of other
/// domains need not import it; a default-domain node in such a model is reported with the
/// other unsupported nodes). Opsets 1 to 6 are read here and checked op by op.
fn default_opset(model: &ModelProto) -> Result<Option<i64>, Diagnostic> {
    let Some(version) = model
        .opset_import
        .iter()
        .find(|o| normalize_domain(&o.domain).is_empty())
        .map(|o| o.version)
    else {
        return Ok(None);
    };
    if !(1..=legacy::NEWEST_OPSET).contains(&version) {
        return Err(Diagnostic::error(format!(
            "the model uses ai.onnx opset {version}; memc supports opsets {} to {} (and older ones for the ops whose definition has not changed since)",
            SUPPORTED_OPSETS.start(),
            SUPPORTED_OPSETS.end()
        ))
        .with_note("convert it with onnx.version_converter.convert_version(model, 21)"));
    }
    Ok(Some(version))
}

/// Where a node is, for messages: `node `name` (OpType, #index)`.
fn node_label(node: &NodeProto, index: usize) -> String {
    let name = if node.name.is_empty() {
        "<unnamed>"
    } else {
        node.name.as_str()
    };
    format!("node `{name}` ({}, #{index})", node.op_type)
}

struct Importer {
    module: Module,
    external: ExternalData,
    opsets: HashMap<String, i64>,
    /// The default-domain opset.
    opset: Option<i64>,
    infer: ShapeInference,
    /// Types the model declares for values (graph inputs, outputs, value_info).
    declared: HashMap<String, TensorType>,
    /// Visible value names: the main graph, then each enclosing subgraph.
    scopes: Vec<HashMap<String, ValueId>>,
    initializers: HashMap<String, WeightId>,
    /// The `memc.weight` op result for each weight used so far.
    weight_values: HashMap<WeightId, ValueId>,
    /// The function's `memc.none` value, once made.
    none: Option<ValueId>,
    /// A counter that keeps the names of weights made from node attributes unique.
    n_synthesized: usize,
    /// How many unrolled `Loop`/`Scan` bodies are being imported (their `Constant`s are
    /// imported once per iteration and share one weight).
    unrolling: usize,
    /// The body nodes every unrolled `Loop` and `Scan` has imported so far, nested ones
    /// included (at most [`MAX_UNROLLED_NODES`] in a model).
    n_unrolled: usize,
}

/// One unsupported use, for the combined report.
struct Unsupported {
    what: String,
    node: String,
    domain: String,
}

impl Importer {
    // ----- Checks over the whole model before building anything. -----

    fn check_supported(&self, graph: &GraphProto) -> Result<(), Diagnostic> {
        let mut found: BTreeMap<String, Vec<Unsupported>> = BTreeMap::new();
        self.collect_unsupported(graph, &mut found);
        if found.is_empty() {
            return Ok(());
        }
        let n_nodes: usize = found.values().map(Vec::len).sum();
        let mut diag = Diagnostic::error(format!(
            "the model uses {n_nodes} node(s) memc does not support, of {} kind(s)",
            found.len()
        ));
        for (kind, uses) in &found {
            let names: Vec<String> = uses.iter().take(5).map(|u| u.node.clone()).collect();
            let more = if uses.len() > 5 {
                format!(", and {} more", uses.len() - 5)
            } else {
                String::new()
            };
            let detail = uses.first().map(|u| u.what.as_str()).unwrap_or("");
            diag = diag.with_note(format!(
                "{kind}: {} node(s){detail}: {}{more}",
                uses.len(),
                names.join(", ")
            ));
        }
        let domains: BTreeSet<&str> = found
            .values()
            .flatten()
            .map(|u| u.domain.as_str())
            .collect();
        for domain in domains {
            if let Some(note) = domain_note(domain) {
                diag = diag.with_note(note);
            }
        }
        Err(diag)
    }

    fn collect_unsupported(
        &self,
        graph: &GraphProto,
        found: &mut BTreeMap<String, Vec<Unsupported>>,
    ) {
        for (index, node) in graph.node.iter().enumerate() {
            let domain = normalize_domain(&node.domain);
            let opset = self.opsets.get(domain).copied();
            let opset_text =
                opset.map_or("no opset imported".to_string(), |v| format!("opset {v}"));
            let label = format!(
                "`{}` (#{index})",
                if node.name.is_empty() {
                    "<unnamed>"
                } else {
                    &node.name
                }
            );
            let kind = format!(
                "{} (domain {}, {opset_text})",
                node.op_type,
                domain_name(domain)
            );
            let mut report = |kind: String, what: String| {
                found.entry(kind).or_default().push(Unsupported {
                    what,
                    node: label.clone(),
                    domain: domain_name(domain).to_string(),
                });
            };
            // A node memc cannot read is reported alone (its subgraphs are not looked into).
            let forms = match self.current_forms(node) {
                Ok(forms) => forms,
                Err(why) => {
                    report(kind, format!(" ({why})"));
                    continue;
                }
            };
            if forms
                .iter()
                .any(|form| onnx_opcode(form).is_none() && !is_import_only(form))
            {
                report(kind, String::new());
                continue;
            }
            for form in forms.iter() {
                let Some(opcode) = onnx_opcode(form) else {
                    continue;
                };
                for attr in &form.attribute {
                    if opcode.def().attr_def(&attr.name).is_none()
                        && !self.normalized_attr(opcode, &attr.name)
                    {
                        report(
                            format!("{} attribute `{}`", node.op_type, attr.name),
                            " (memc does not know this attribute)".to_string(),
                        );
                    }
                }
            }
            for attr in &node.attribute {
                if let Some(g) = &attr.g {
                    self.collect_unsupported(g, found);
                }
            }
        }
    }

    /// The nodes a node is read as before anything is built (`legacy::normalize` with nothing
    /// known): itself, or its opset-13+ form; `Err` says why memc cannot read it at all.
    fn current_forms<'n>(&self, node: &'n NodeProto) -> Result<Cow<'n, [NodeProto]>, String> {
        let single = Cow::Borrowed(std::slice::from_ref(node));
        if !normalize_domain(&node.domain).is_empty() {
            return Ok(single);
        }
        let opset = self
            .opset
            .ok_or("the model imports no ai.onnx opset, which this node needs")?;
        let current = legacy::current_op(&node.op_type, opset);
        if current != "Constant" && opcode_for("", current).is_none() {
            // An op memc does not have: the caller reports it as such.
            return match legacy::removed_note(&node.op_type, opset) {
                Some(note) => Err(note),
                None if current != node.op_type => {
                    Err(format!("read as {current}, which memc does not support"))
                }
                None => Ok(single),
            };
        }
        let oldest = legacy::oldest_opset(&node.op_type);
        if opset < oldest {
            return Err(format!(
                "memc reads {} from opset {oldest} on, and its opset-{opset} form differs",
                node.op_type
            ));
        }
        Ok(
            match legacy::normalize(node, opset, &legacy::Checking, &mut 0)? {
                Some(nodes) => Cow::Owned(nodes),
                None => single,
            },
        )
    }

    /// Attributes the importer consumes instead of copying: the branches of `If` become its
    /// regions.
    fn normalized_attr(&self, opcode: Opcode, name: &str) -> bool {
        opcode == Opcode::If && matches!(name, "then_branch" | "else_branch")
    }

    // ----- Building. -----

    fn import_main_graph(
        &mut self,
        graph: &GraphProto,
        consts: &[ConstInput],
    ) -> Result<Function, Diagnostic> {
        check_graph_order(graph)?;
        for vi in graph.value_info.iter().chain(&graph.output) {
            if let Some(ty) = declared_type(vi).ok().flatten() {
                self.declared.insert(vi.name.clone(), ty);
            }
        }
        // Initializers become weights.
        for (i, init) in graph.initializer.iter().enumerate() {
            let where_ = format!("initializer #{i} `{}`", init.name);
            if init.name.is_empty() {
                return Err(Diagnostic::error(format!("{where_} has no name")));
            }
            let id = self
                .add_weight(&init.name, init)
                .map_err(|m| Diagnostic::error(format!("{where_}: {m}")))?;
            if self.initializers.insert(init.name.clone(), id).is_some() {
                return Err(Diagnostic::error(format!("{where_} is defined twice")));
            }
        }
        if !graph.sparse_initializer.is_empty() {
            return Err(Diagnostic::error(
                "the model has sparse initializers, which memc does not support",
            ));
        }
        self.bind_consts(graph, consts)?;
        // Graph inputs that are not initializers (nor bound to values) become arguments.
        let mut arg_types = Vec::new();
        let mut arg_names = Vec::new();
        let mut seen = HashSet::new();
        for (i, input) in graph.input.iter().enumerate() {
            if !seen.insert(input.name.as_str()) {
                return Err(Diagnostic::error(format!(
                    "graph input #{i} `{}` is declared twice",
                    input.name
                )));
            }
            if self.initializers.contains_key(&input.name) {
                continue;
            }
            let ty = declared_type(input)
                .map_err(|m| Diagnostic::error(format!("graph input #{i} `{}`: {m}", input.name)))?
                .ok_or_else(|| {
                    Diagnostic::error(format!("graph input #{i} `{}` has no shape", input.name))
                        .with_note("memc needs the rank of every input; give it a shape (dims may be symbolic)")
                })?;
            arg_types.push(Type::Tensor(ty));
            arg_names.push(input.name.clone());
        }
        let name = if graph.name.is_empty() {
            "main"
        } else {
            graph.name.as_str()
        };
        let mut func = Function::new(name, arg_types, Vec::new());
        let mut scope = HashMap::new();
        for (i, arg_name) in arg_names.into_iter().enumerate() {
            func.arg_attrs_mut(i)
                .insert("memc.name", Attribute::String(arg_name.clone()));
            scope.insert(arg_name, func.args()[i]);
        }
        self.scopes.push(scope);
        let entry = func.entry_block();
        self.import_nodes(&mut func, graph, entry)?;

        // Outputs become results.
        let mut results = Vec::new();
        for (i, output) in graph.output.iter().enumerate() {
            let value = self.lookup(&output.name).ok_or_else(|| {
                Diagnostic::error(format!(
                    "graph output #{i} `{}` is not produced by any node, input or initializer",
                    output.name
                ))
            })?;
            results.push(value);
        }
        let types: Vec<Type> = results
            .iter()
            .map(|&v| func.value_type(v).clone())
            .collect();
        func.build_op(entry, Opcode::Return, results, Vec::new(), []);
        for (i, ty) in types.into_iter().enumerate() {
            func.push_result_type(ty);
            func.result_attrs_mut(i)
                .insert("memc.name", Attribute::String(graph.output[i].name.clone()));
        }
        Ok(func)
    }

    /// Makes each input bound in `consts` a weight, as if it were an initializer, after
    /// checking that it names a graph input (once) and matches the input's declared type.
    fn bind_consts(&mut self, graph: &GraphProto, consts: &[ConstInput]) -> Result<(), Diagnostic> {
        let mut bound = HashSet::new();
        for value in consts {
            let name = value.name();
            let flag = format!("`--const {name}=...`");
            if !bound.insert(name) {
                return Err(Diagnostic::error(format!(
                    "{flag}: input `{name}` is bound twice"
                )));
            }
            let Some(input) = graph.input.iter().find(|i| i.name == name) else {
                let inputs: Vec<&str> = graph
                    .input
                    .iter()
                    .filter(|i| !self.initializers.contains_key(&i.name))
                    .map(|i| i.name.as_str())
                    .collect();
                let listed = if inputs.is_empty() {
                    "it has none".to_string()
                } else {
                    inputs.join(", ")
                };
                return Err(
                    Diagnostic::error(format!("{flag} names no input of the model"))
                        .with_note(format!("the model's inputs: {listed}")),
                );
            };
            if self.initializers.contains_key(name) {
                return Err(Diagnostic::error(format!(
                    "{flag}: input `{name}` has an initializer, so memc already treats it as a constant"
                )));
            }
            let declared = declared_type(input)
                .map_err(|m| Diagnostic::error(format!("graph input `{name}`: {m}")))?;
            if let Some(declared) = declared {
                let dims_match = declared.dims.len() == value.ty().dims.len()
                    && declared
                        .dims
                        .iter()
                        .zip(&value.ty().dims)
                        .all(|(d, v)| d.as_static().is_none_or(|n| Some(n) == v.as_static()));
                if declared.elem != value.ty().elem || !dims_match {
                    return Err(Diagnostic::error(format!(
                        "{flag}: the value is {} but input `{name}` is declared {}",
                        describe_type(value.ty()),
                        describe_type(&declared)
                    ))
                    .with_note("the value must have the input's element type and rank, and its static dims"));
                }
            }
            let id = self
                .module
                .weights
                .insert(
                    name,
                    value.ty().clone(),
                    WeightBytes::Owned(value.bytes.clone()),
                )
                .map_err(|e| Diagnostic::error(format!("{flag}: {e}")))?;
            self.initializers.insert(name.to_string(), id);
        }
        Ok(())
    }

    fn lookup(&self, name: &str) -> Option<ValueId> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn add_weight(&mut self, name: &str, tensor: &TensorProto) -> Result<WeightId, String> {
        let ty = tensor::tensor_type(tensor)?;
        let bytes = tensor::tensor_bytes(tensor, &ty, &mut self.external)?;
        self.module
            .weights
            .insert(name, ty, bytes)
            .map_err(|e| e.to_string())
    }

    /// The `memc.none` value standing for left-out inputs: one per function, at the top.
    fn none_value(&mut self, func: &mut Function) -> ValueId {
        if let Some(v) = self.none {
            return v;
        }
        let op = func.create_op(Opcode::None, Vec::new(), vec![Type::None], AttrDict::new());
        let entry = func.entry_block();
        match func.layout().block_ops(entry).first().copied() {
            Some(first) => {
                func.insert_op_before(first, op);
            }
            None => func.append_op(entry, op),
        }
        let value = func.op(op).results[0];
        self.none = Some(value);
        value
    }

    /// The value of a weight: a `memc.weight` op at the top of the function, made once.
    fn weight_value(&mut self, func: &mut Function, id: WeightId) -> ValueId {
        if let Some(&v) = self.weight_values.get(&id) {
            return v;
        }
        let ty = self
            .module
            .weights
            .get(id)
            .map(|w| w.ty().clone())
            .unwrap_or_else(|| TensorType::new(ElemType::F32, vec![]));
        let op = func.create_op(
            Opcode::Weight,
            Vec::new(),
            vec![Type::Tensor(ty)],
            [("value", Attribute::Weight(id))].into_iter().collect(),
        );
        // Weights sit at the top of the entry block, in the order they were first used.
        let entry = func.entry_block();
        let ops = func.layout().block_ops(entry);
        let first_non_weight = ops
            .iter()
            .copied()
            .find(|&o| func.op(o).opcode != Opcode::Weight);
        match first_non_weight {
            Some(before) => {
                func.insert_op_before(before, op);
            }
            None => func.append_op(entry, op),
        }
        // Record the weight's value for shape inference (small integer tensors feed shape
        // computations). A weight op's type is its weight's, so the result is not needed.
        let _ = self.infer.infer_op(func, &self.module.weights, op);
        let value = func.op(op).results[0];
        self.weight_values.insert(id, value);
        value
    }

    fn import_nodes(
        &mut self,
        func: &mut Function,
        graph: &GraphProto,
        block: BlockId,
    ) -> Result<(), Diagnostic> {
        for (index, node) in graph.node.iter().enumerate() {
            self.import_node(func, node, index, block)?;
        }
        Ok(())
    }

    /// Imports a node, in its opset-13+ form ([`legacy::normalize`]) when it is older.
    fn import_node(
        &mut self,
        func: &mut Function,
        node: &NodeProto,
        index: usize,
        block: BlockId,
    ) -> Result<(), Diagnostic> {
        let label = node_label(node, index);
        let err = |m: String| Diagnostic::error(format!("{label}: {m}"));
        if let (true, Some(opset)) = (normalize_domain(&node.domain).is_empty(), self.opset) {
            if legacy::changes(&node.op_type, opset) {
                // The rewrite sees the types and known values of what the node reads.
                for name in node.input.iter().filter(|n| !n.is_empty()) {
                    if let (None, Some(&id)) = (self.lookup(name), self.initializers.get(name)) {
                        self.weight_value(func, id);
                    }
                }
                let mut counter = self.n_synthesized;
                let facts = ImportFacts {
                    importer: self,
                    func,
                };
                let nodes = legacy::normalize(node, opset, &facts, &mut counter).map_err(err)?;
                self.n_synthesized = counter;
                for form in nodes.iter().flatten() {
                    self.build_node(func, form, &label, block)?;
                }
                if nodes.is_some() {
                    return Ok(());
                }
            }
        }
        self.build_node(func, node, &label, block)
    }

    /// Builds the op of a node in its current form; `label` names the model's node in errors.
    fn build_node(
        &mut self,
        func: &mut Function,
        node: &NodeProto,
        label: &str,
        block: BlockId,
    ) -> Result<(), Diagnostic> {
        let err = |m: String| Diagnostic::error(format!("{label}: {m}"));
        if is_constant(node) {
            return self.import_constant(func, node).map_err(err);
        }
        if unroll::is_unrolled(node) {
            return self.unroll(func, node, block).map_err(err);
        }
        if decompose::is_decomposed(node) {
            let mut counter = self.n_synthesized;
            let nodes = decompose::expand(node, &mut counter).map_err(err)?;
            self.n_synthesized = counter;
            for form in &nodes {
                self.build_node(func, form, label, block)?;
            }
            return Ok(());
        }
        let opcode = onnx_opcode(node).ok_or_else(|| err("unsupported op".to_string()))?;
        let def = opcode.def();

        // Operands: trailing left-out inputs are dropped; one left out before a given one
        // becomes `memc.none` (the verifier checks that the position is optional).
        let last_present = node
            .input
            .iter()
            .rposition(|n| !n.is_empty())
            .map_or(0, |p| p + 1);
        let mut operands = Vec::with_capacity(last_present);
        for (i, name) in node.input[..last_present].iter().enumerate() {
            if name.is_empty() {
                operands.push(self.none_value(func));
                continue;
            }
            operands.push(
                self.operand(func, name)
                    .map_err(|m| err(format!("input #{i} `{name}` {m}")))?,
            );
        }

        if opcode == Opcode::If {
            if let Some(taken) = operands.first().and_then(|&c| self.known_condition(c)) {
                return self
                    .inline_taken_branch(func, node, taken, block)
                    .map_err(&err);
            }
        }

        // Attributes.
        let mut attrs = AttrDict::new();
        for attr in &node.attribute {
            if self.normalized_attr(opcode, &attr.name) {
                continue;
            }
            let Some(attr_def) = def.attr_def(&attr.name) else {
                return Err(err(format!("attribute `{}` is not supported", attr.name)));
            };
            let value = self
                .attribute(node, attr, attr_def)
                .map_err(|m| err(format!("attribute `{}`: {m}", attr.name)))?;
            attrs.insert(attr.name.clone(), value);
        }

        // Results: trailing absent outputs are dropped.
        let n_results = node
            .output
            .iter()
            .rposition(|n| !n.is_empty())
            .map_or(0, |p| p + 1);
        let placeholder = Type::Tensor(TensorType::new(ElemType::F32, Vec::new()));
        let op = func.create_op(opcode, operands, vec![placeholder; n_results], attrs);
        if !node.name.is_empty() {
            func.op_mut(op).loc = Some(node.name.clone());
        }
        if opcode == Opcode::If {
            self.import_if_branches(func, node, op).map_err(&err)?;
        }
        func.append_op(block, op);
        self.type_results(func, node, op).map_err(&err)?;

        let results = func.op(op).results.clone();
        for (name, value) in node.output.iter().zip(results) {
            if name.is_empty() {
                continue;
            }
            self.define(name, value).map_err(&err)?;
        }
        Ok(())
    }

    fn define(&mut self, name: &str, value: ValueId) -> Result<(), String> {
        if self.lookup(name).is_some() || self.initializers.contains_key(name) {
            return Err(format!(
                "output `{name}` is already defined (names must be unique in a graph)"
            ));
        }
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), value);
        }
        Ok(())
    }

    /// The value an input name refers to: a visible value or an initializer.
    fn operand(&mut self, func: &mut Function, name: &str) -> Result<ValueId, String> {
        if let Some(v) = self.lookup(name) {
            return Ok(v);
        }
        if let Some(&id) = self.initializers.get(name) {
            return Ok(self.weight_value(func, id));
        }
        Err(
            "is not defined: no graph input, initializer or earlier node output has this name"
                .to_string(),
        )
    }

    /// Sets the types of `op`'s results from shape inference, falling back on the declared
    /// types; symbolic names from the declaration fill dims inference left unknown.
    fn type_results(
        &mut self,
        func: &mut Function,
        node: &NodeProto,
        op: crate::OpId,
    ) -> Result<(), String> {
        let inferred = self.infer.infer_op(func, &self.module.weights, op)?;
        let results = func.op(op).results.clone();
        for (i, &value) in results.iter().enumerate() {
            let name = node.output.get(i).map(String::as_str).unwrap_or("");
            let declared = self.declared.get(name);
            let ty = match (inferred.as_ref().and_then(|t| t.get(i)), declared) {
                (Some(inferred), Some(declared)) => merge_types(inferred, declared),
                (Some(inferred), None) => inferred.clone(),
                (None, Some(declared)) => declared.clone(),
                (None, None) => {
                    return Err(format!(
                        "cannot infer the type of output #{i} `{name}`, and the model declares none (add value_info for it)"
                    ));
                }
            };
            func.set_value_type(value, Type::Tensor(ty));
        }
        Ok(())
    }

    fn import_if_branches(
        &mut self,
        func: &mut Function,
        node: &NodeProto,
        op: crate::OpId,
    ) -> Result<(), String> {
        for branch in ["then_branch", "else_branch"] {
            let region = func.add_region(op);
            let block = func.append_block(region, Vec::new());
            let outputs = self.import_branch(func, node, branch, block)?;
            func.build_op(block, Opcode::Yield, outputs, Vec::new(), []);
        }
        Ok(())
    }

    /// An `If` whose condition is known when it is imported: the nodes of the branch it takes
    /// are imported in its place, into `block`, and their values are the node's outputs. The
    /// other branch is never imported, so it need not make sense for values it would never
    /// see (an exporter's branch for another rank, say).
    fn inline_taken_branch(
        &mut self,
        func: &mut Function,
        node: &NodeProto,
        taken: bool,
        block: BlockId,
    ) -> Result<(), String> {
        let branch = if taken { "then_branch" } else { "else_branch" };
        let outputs = self.import_branch(func, node, branch, block)?;
        for (name, value) in node.output.iter().zip(outputs) {
            if !name.is_empty() {
                self.define(name, value)?;
            }
        }
        Ok(())
    }

    /// The condition of an `If`, when shape inference knows it.
    fn known_condition(&self, cond: ValueId) -> Option<bool> {
        match self.infer.known_value(cond)?.ints()?.as_slice() {
            [c] => Some(*c != 0),
            _ => None,
        }
    }

    /// Imports the nodes of `node`'s subgraph attribute `branch` into `block`, in a scope of
    /// their own, and returns the values the subgraph yields (one per output of `node`).
    fn import_branch(
        &mut self,
        func: &mut Function,
        node: &NodeProto,
        branch: &str,
        block: BlockId,
    ) -> Result<Vec<ValueId>, String> {
        let graph = node
            .attribute
            .iter()
            .find(|a| a.name == branch)
            .and_then(|a| a.g.as_ref())
            .ok_or_else(|| format!("attribute `{branch}` (a graph) is missing"))?;
        check_graph_order(graph).map_err(|d| d.message)?;
        self.scopes.push(HashMap::new());
        for vi in graph.value_info.iter().chain(&graph.output) {
            if let Some(ty) = declared_type(vi).ok().flatten() {
                self.declared.insert(vi.name.clone(), ty);
            }
        }
        for init in &graph.initializer {
            let id = match self.add_weight(&init.name, init) {
                Ok(id) => id,
                Err(m) => {
                    self.scopes.pop();
                    return Err(format!("{branch} initializer `{}`: {m}", init.name));
                }
            };
            let value = self.weight_value(func, id);
            self.scopes
                .last_mut()
                .map(|s| s.insert(init.name.clone(), value));
        }
        let result = self.import_nodes(func, graph, block);
        let outputs: Result<Vec<ValueId>, String> = graph
            .output
            .iter()
            .map(|o| {
                self.lookup(&o.name).ok_or_else(|| {
                    format!("{branch} output `{}` is not produced in the branch", o.name)
                })
            })
            .collect();
        self.scopes.pop();
        result.map_err(|d| format!("in {branch}: {}", d.message))?;
        let outputs = outputs?;
        if outputs.len() != node.output.len() {
            return Err(format!(
                "{branch} yields {} value(s) but the node has {} output(s)",
                outputs.len(),
                node.output.len()
            ));
        }
        Ok(outputs)
    }

    fn import_constant(&mut self, func: &mut Function, node: &NodeProto) -> Result<(), String> {
        let [output] = node.output.as_slice() else {
            return Err(format!(
                "a Constant has one output, this one has {}",
                node.output.len()
            ));
        };
        let [attr] = node.attribute.as_slice() else {
            return Err("a Constant needs exactly one value attribute".to_string());
        };
        let name = output.clone();
        if let (true, Some(id)) = (self.unrolling > 0, self.module.weights.lookup(&name)) {
            // A later iteration of an unrolled body: the first one made the weight.
            let value = self.weight_value(func, id);
            return self.define(&name, value);
        }
        let id = match (attr.name.as_str(), attr.t.as_ref()) {
            ("value", Some(t)) => self.add_weight(&name, t)?,
            ("value_float", _) => {
                self.owned_weight(&name, ElemType::F32, &[], attr.f.to_le_bytes().to_vec())?
            }
            ("value_floats", _) => {
                let bytes = attr.floats.iter().flat_map(|v| v.to_le_bytes()).collect();
                self.owned_weight(&name, ElemType::F32, &[attr.floats.len() as u64], bytes)?
            }
            ("value_int", _) => {
                self.owned_weight(&name, ElemType::I64, &[], attr.i.to_le_bytes().to_vec())?
            }
            ("value_ints", _) => {
                let bytes = attr.ints.iter().flat_map(|v| v.to_le_bytes()).collect();
                self.owned_weight(&name, ElemType::I64, &[attr.ints.len() as u64], bytes)?
            }
            (other, _) => return Err(format!("Constant attribute `{other}` is not supported")),
        };
        let value = self.weight_value(func, id);
        self.define(&name, value)
    }

    fn owned_weight(
        &mut self,
        name: &str,
        elem: ElemType,
        shape: &[u64],
        bytes: Vec<u8>,
    ) -> Result<WeightId, String> {
        let ty = TensorType::with_shape(elem, shape);
        self.module
            .weights
            .insert(name, ty, WeightBytes::Owned(Arc::from(bytes)))
            .map_err(|e| e.to_string())
    }

    fn attribute(
        &mut self,
        node: &NodeProto,
        attr: &proto::AttributeProto,
        def: &AttrDef,
    ) -> Result<Attribute, String> {
        let utf8 = |b: &Bytes| {
            String::from_utf8(b.to_vec()).map_err(|_| "string is not valid UTF-8".to_string())
        };
        let kind_error = || {
            format!(
                "has ONNX attribute type {} but memc expects {}",
                attr.r#type,
                def.kind.describe()
            )
        };
        Ok(match (def.kind, attr.r#type) {
            (AttrKind::Int, at::INT) => Attribute::Int(attr.i),
            (AttrKind::Float, at::FLOAT) => Attribute::Float(f64::from(attr.f)),
            (AttrKind::Float, at::INT) => Attribute::Float(attr.i as f64),
            (AttrKind::String, at::STRING) => Attribute::String(utf8(&attr.s)?),
            (AttrKind::Ints, at::INTS) => Attribute::ints(attr.ints.iter().copied()),
            (AttrKind::Floats, at::FLOATS) => Attribute::Array(
                attr.floats
                    .iter()
                    .map(|&f| Attribute::Float(f64::from(f)))
                    .collect(),
            ),
            (AttrKind::Strings, at::STRINGS) => Attribute::Array(
                attr.strings
                    .iter()
                    .map(|s| utf8(s).map(Attribute::String))
                    .collect::<Result<_, _>>()?,
            ),
            (AttrKind::ElemType, at::INT) => {
                let code = i32::try_from(attr.i)
                    .map_err(|_| format!("element type {} is out of range", attr.i))?;
                Attribute::ElemType(tensor::elem_type(code)?)
            }
            (AttrKind::Weight, at::TENSOR) => {
                let t = attr.t.as_ref().ok_or("the tensor is missing")?;
                let base = if node.name.is_empty() {
                    node.output.first().cloned().unwrap_or_default()
                } else {
                    node.name.clone()
                };
                self.n_synthesized += 1;
                let name = format!("{base}/{}#memc{}", attr.name, self.n_synthesized);
                Attribute::Weight(self.add_weight(&name, t)?)
            }
            (AttrKind::Type, _) | (AttrKind::Bool, _) | (AttrKind::Weight, _) => {
                return Err(kind_error())
            }
            _ => return Err(kind_error()),
        })
    }
}

/// The op for a node, if memc has it (`Constant` is handled apart): a default-domain node
/// `Foo` is `onnx.Foo`, a `com.microsoft` node `Foo` (onnxruntime's contrib and training ops)
/// is `ms.Foo`; other domains are unsupported.
fn onnx_opcode(node: &NodeProto) -> Option<Opcode> {
    opcode_for(&node.domain, &node.op_type)
}

fn opcode_for(domain: &str, op_type: &str) -> Option<Opcode> {
    if op_type == "Yield" {
        return None;
    }
    let dialect = match normalize_domain(domain) {
        "" => "onnx",
        MS_DOMAIN => "ms",
        _ => return None,
    };
    let opcode = Opcode::from_name(&format!("{dialect}.{op_type}"))?;
    (opcode.def().dialect() == dialect).then_some(opcode)
}

/// A node the importer builds no op of its own for: a `Constant` (a weight), a `Loop` or
/// `Scan` (unrolled, [`unroll`]) or an op ONNX defines as a function ([`decompose`]).
fn is_import_only(node: &NodeProto) -> bool {
    is_constant(node) || unroll::is_unrolled(node) || decompose::is_decomposed(node)
}

/// A default-domain `Constant`, which becomes a weight.
fn is_constant(node: &NodeProto) -> bool {
    normalize_domain(&node.domain).is_empty() && node.op_type == "Constant"
}

/// What a whole domain's unsupported nodes mean, for the combined report.
fn domain_note(domain: &str) -> Option<&'static str> {
    match domain {
        "ai.onnx.preview.training" => Some(
            "ai.onnx.preview.training (the optimizers Adagrad, Adam, Momentum) is not supported; memc runs training steps as onnxruntime-training writes them (com.microsoft ops, parameters as persistent state)",
        ),
        "ai.onnx.ml" => Some(
            "ai.onnx.ml (classical machine learning: tree ensembles, label encoders, ...) is not supported",
        ),
        _ => None,
    }
}

/// What the importer knows about a node's operands, for [`legacy::normalize`].
struct ImportFacts<'a> {
    importer: &'a Importer,
    func: &'a Function,
}

impl ImportFacts<'_> {
    fn value(&self, name: &str) -> Option<ValueId> {
        self.importer.lookup(name).or_else(|| {
            let id = self.importer.initializers.get(name)?;
            self.importer.weight_values.get(id).copied()
        })
    }
}

impl legacy::Facts for ImportFacts<'_> {
    fn tensor_type(&self, name: &str) -> Option<TensorType> {
        self.func.value_type(self.value(name)?).tensor().cloned()
    }
    fn known_floats(&self, name: &str) -> Option<Vec<f64>> {
        self.importer.infer.known_value(self.value(name)?)?.floats()
    }
    fn knows_values(&self) -> bool {
        true
    }
}

/// onnxruntime's contrib and training ops' domain; its ops are `ms.*` in memc.
const MS_DOMAIN: &str = "com.microsoft";

/// The tensor type a value info declares: `Ok(None)` without a shape; `Err` for non-tensor
/// types, unsupported element types, negative dims or sizes that overflow.
fn declared_type(vi: &ValueInfoProto) -> Result<Option<TensorType>, String> {
    use proto::type_proto::Value;
    let Some(ty) = vi.r#type.as_ref() else {
        return Ok(None);
    };
    let tensor =
        match &ty.value {
            Some(Value::TensorType(t)) => t,
            Some(_) => return Err(
                "is not a tensor (sequences, maps, optionals and sparse tensors are not supported)"
                    .to_string(),
            ),
            None => return Ok(None),
        };
    let elem = tensor::elem_type(tensor.elem_type)?;
    let Some(shape) = &tensor.shape else {
        return Ok(None);
    };
    let mut dims = Vec::with_capacity(shape.dim.len());
    for (i, d) in shape.dim.iter().enumerate() {
        use proto::tensor_shape_proto::dimension::Value as D;
        dims.push(match &d.value {
            Some(D::DimValue(v)) => {
                Dim::Static(u64::try_from(*v).map_err(|_| format!("dim #{i} is negative ({v})"))?)
            }
            Some(D::DimParam(p)) if !p.is_empty() => Dim::symbol(&sanitize_symbol(p)),
            _ => Dim::Unknown,
        });
    }
    let ty = TensorType::new(elem, dims);
    if ty.dims.iter().all(|d| d.as_static().is_some()) && ty.static_byte_size().is_none() {
        return Err(format!(
            "its shape {} has a size that overflows 64 bits",
            ty
        ));
    }
    Ok(Some(ty))
}

/// `inferred`, with dims it left unknown taken from `declared` (same rank and element type only).
fn merge_types(inferred: &TensorType, declared: &TensorType) -> TensorType {
    if inferred.rank() != declared.rank() || inferred.elem != declared.elem {
        return inferred.clone();
    }
    let dims = inferred
        .dims
        .iter()
        .zip(&declared.dims)
        .map(|(i, d)| {
            if *i == Dim::Unknown {
                d.clone()
            } else {
                i.clone()
            }
        })
        .collect();
    TensorType::new(inferred.elem, dims)
}

/// Nodes must be in topological order with unique output names: reports a cycle, a use before
/// definition, or a duplicate output, naming the nodes.
fn check_graph_order(graph: &GraphProto) -> Result<(), Diagnostic> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (index, node) in graph.node.iter().enumerate() {
        for out in node.output.iter().filter(|o| !o.is_empty()) {
            if let Some(&first) = producer.get(out.as_str()) {
                return Err(Diagnostic::error(format!(
                    "{} and {} both produce `{out}`; value names must be unique",
                    node_label(&graph.node[first], first),
                    node_label(node, index)
                )));
            }
            producer.insert(out, index);
        }
    }
    // Kahn's algorithm over node-to-node edges finds a cycle if there is one.
    let n = graph.node.len();
    let mut indegree = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (index, node) in graph.node.iter().enumerate() {
        for input in node.input.iter().filter(|i| !i.is_empty()) {
            if let Some(&p) = producer.get(input.as_str()) {
                indegree[index] += 1;
                users[p].push(index);
            }
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut n_sorted = 0;
    while let Some(i) = ready.pop() {
        n_sorted += 1;
        for &u in &users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push(u);
            }
        }
    }
    if n_sorted < n {
        let in_cycle: Vec<String> = (0..n)
            .filter(|&i| indegree[i] > 0)
            .take(6)
            .map(|i| node_label(&graph.node[i], i))
            .collect();
        return Err(
            Diagnostic::error("the graph has a cycle").with_note(format!(
                "nodes on or after the cycle: {}",
                in_cycle.join(", ")
            )),
        );
    }
    for (index, node) in graph.node.iter().enumerate() {
        for (i, input) in node.input.iter().enumerate() {
            if let Some(&p) = producer.get(input.as_str()) {
                if p >= index {
                    return Err(Diagnostic::error(format!(
                        "{} input #{i} `{input}` is used before its definition by {}",
                        node_label(node, index),
                        node_label(&graph.node[p], p)
                    ))
                    .with_note("ONNX requires nodes in topological order"));
                }
            }
        }
    }
    Ok(())
}
