//! Shape inference: result types for every op, with static and symbolic dims.
//!
//! Two entry points:
//!
//! - [`ShapeInference::infer_op`], op by op, for the ONNX importer while it builds the IR: the
//!   result types of one op whose operands are typed, and, as a side effect, the known values
//!   of its results.
//! - [`infer_module`], over a whole module in program order (the `shape-infer` pass and
//!   `memc compile`): binds `--dim` symbols, refines every value type in place, and updates
//!   the function signatures to match.
//!
//! The result types come from the op table's shape functions (`ops/shape.rs`); those see the
//! operand types, the attributes and the *known values* of operands. A known value
//! ([`KnownValue`]) is what inference knows about the data of a small tensor (at most
//! [`MAX_KNOWN_ELEMENTS`] elements) element by element ([`SymInt`]): a constant, a float, or
//! a dim, symbolic or unknown. Known values come from `memc.weight` ops with loaded bytes and
//! from `Shape` (the operand's dims), and flow through the ops that compute shapes (the op
//! table's folds, `ops/fold.rs`: Gather, Slice, Concat, Unsqueeze, Cast, arithmetic, Where,
//! ConstantOfShape, Range, Expand, ...). That is how `Reshape(x, Concat(Shape(x)[0],
//! Shape(x)[1], 12, 64))` gets the type `[batch, seq, 12, 64]`.
//!
//! What inference guarantees:
//! - It never panics, whatever the input: handles are checked before use, and shape functions
//!   and folds check ranks, counts and attributes and use checked arithmetic.
//! - It never invents a size: a dim it cannot tell is [`Dim::Unknown`], an op whose result types
//!   it cannot tell keeps its types.
//! - [`infer_module`] only refines: a written static dim stays; a written symbolic or unknown
//!   dim is replaced by the inferred dim when that is static or symbolic. A written type that
//!   conflicts with the inferred one (rank, element type or a static dim) is an error that
//!   points at the op. Verified input stays verified: function result types follow the
//!   returned values, and where the branches of an `onnx.If` refine a result differently the
//!   yielded values fall back to the `If`'s own dim there.

use crate::diag::Diagnostic;
use crate::ops::ShapeCtx;
use crate::{
    Dim, Function, Module, OpId, Opcode, RegionId, TensorType, Type, ValueId, WeightStore,
};
use cranelift_entity::EntityRef;
use std::collections::{BTreeSet, HashMap};

pub use crate::ops::{KnownValue, SymInt, MAX_KNOWN_ELEMENTS};

#[cfg(test)]
mod tests;

/// Op-by-op shape inference, with a side table of the known values of the values it has seen.
///
/// One instance serves one function: value handles are per function.
#[derive(Clone, Debug, Default)]
pub struct ShapeInference {
    known: HashMap<ValueId, KnownValue>,
}

impl ShapeInference {
    pub fn new() -> ShapeInference {
        ShapeInference::default()
    }

    /// The known value of `value`, when an earlier [`ShapeInference::infer_op`] computed one.
    pub fn known_value(&self, value: ValueId) -> Option<&KnownValue> {
        self.known.get(&value)
    }

    /// Computes the result types of `op` (already created, its operands typed) and records the
    /// known values of its results.
    ///
    /// `Ok(Some(types))` has one type per result; dims it cannot tell are [`Dim::Unknown`].
    /// `Ok(None)` when the result types cannot be determined (the importer then falls back on
    /// the model's `value_info`). `Err` holds a sentence that says why the op is invalid.
    pub fn infer_op(
        &mut self,
        func: &Function,
        weights: &WeightStore,
        op: OpId,
    ) -> Result<Option<Vec<TensorType>>, String> {
        if !func.is_valid_op(op) {
            return Err(format!("{op} is not an op of function `@{}`", func.name()));
        }
        let data = func.op(op);
        if let Some(bad) = data
            .operands
            .iter()
            .chain(&data.results)
            .find(|&&v| !func.is_valid_value(v))
        {
            return Err(format!(
                "{bad} is not a value of function `@{}`",
                func.name()
            ));
        }
        for result in &data.results {
            self.known.remove(result);
        }
        let def = data.opcode.def();
        // A value whose extent is known only at run time may only be a graph output (verifier
        // invariant 13); say so here, where the op that reads it is built or re-inferred, as
        // the model's limit rather than as invalid IR.
        if !def.accepts_bounded() {
            for (i, &operand) in data.operands.iter().enumerate() {
                let Some(ty) = func.value_type(operand).tensor() else {
                    continue;
                };
                if let Some(axis) = ty.bounded_axis() {
                    let producer = match func.value(operand).def {
                        crate::ValueDef::Result { op, .. } => {
                            format!("`{}`'s result", func.op(op).opcode.name())
                        }
                        crate::ValueDef::BlockArg { .. } => "an argument".to_string(),
                    };
                    return Err(format!(
                        "operand #{i} is {producer} of type {ty}, whose dim {axis} ({}) is known \
                         only at run time; memc does not support reading such a value: it may \
                         only be a graph output (docs/dynamic-extents.md)",
                        ty.dims[axis]
                    ));
                }
            }
        }
        let ctx = ShapeCtx::new(func, op)
            .with_weights(weights)
            .with_known(&self.known);
        let inferred = if data.opcode == Opcode::Weight {
            weight_type(&ctx)?
        } else {
            match def.infer {
                Some(infer) => infer(&ctx)?,
                None if data.results.is_empty() => Some(Vec::new()),
                None => None,
            }
        };
        let Some(mut types) = inferred else {
            return Ok(None);
        };
        if types.len() < data.results.len() {
            return Ok(None);
        }
        types.truncate(data.results.len());
        let mut folded = Vec::new();
        if let Some(fold) = def.fold {
            for (i, ty) in types.iter().enumerate() {
                let small = ty
                    .static_num_elements()
                    .is_some_and(|n| n <= MAX_KNOWN_ELEMENTS);
                if !small {
                    continue;
                }
                if let Some(value) = fold(&ctx, &types, i) {
                    if ty.static_shape().as_deref() == Some(value.shape()) {
                        folded.push((data.results[i], value));
                    }
                }
            }
        }
        self.known.extend(folded);
        Ok(Some(types))
    }
}

/// The type of a `memc.weight` result: its weight's.
fn weight_type(ctx: &ShapeCtx) -> Result<Option<Vec<TensorType>>, String> {
    let id = ctx
        .attr("value")
        .and_then(crate::Attribute::as_weight)
        .ok_or("requires a weight reference `value`")?;
    let weights = ctx.weights().ok_or("the weight store is not available")?;
    let weight = weights
        .get(id)
        .ok_or_else(|| format!("refers to {id}, which is not in the weight store"))?;
    Ok(Some(vec![weight.ty().clone()]))
}

/// Runs shape inference over every op of every function in program order (the ops of an
/// `onnx.If`'s regions before the `If`), after substituting `bindings` for symbols in every
/// type. Sets value types and function result types to the refined types. Errors carry the
/// op's span (or name the op and function when there is none).
pub fn infer_module(
    module: &mut Module,
    bindings: &HashMap<String, u64>,
) -> Result<(), Vec<Diagnostic>> {
    // The weights are read while functions change; take them out of the module meanwhile.
    let weights = std::mem::take(&mut module.weights);
    let mut errors = Vec::new();
    for id in module.func_ids() {
        infer_function(module.function_mut(id), &weights, bindings, &mut errors);
    }
    module.weights = weights;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Every symbol still present in a type of the module (arguments, op results, function
/// results), sorted, without repetition.
pub fn unbound_symbols(module: &Module) -> Vec<String> {
    let mut symbols = BTreeSet::new();
    let mut add = |ty: &Type| {
        for dim in ty.tensor().map_or(&[][..], |t| &t.dims) {
            symbols.extend(dim.symbols().iter().map(|s| s.to_string()));
        }
    };
    for (_, func) in module.functions() {
        func.result_types().iter().for_each(&mut add);
        for &arg in func.args() {
            add(func.value_type(arg));
        }
        for op in func.walk_ops() {
            for &result in &func.op(op).results {
                add(func.value_type(result));
            }
        }
    }
    symbols.into_iter().collect()
}

fn infer_function(
    func: &mut Function,
    weights: &WeightStore,
    bindings: &HashMap<String, u64>,
    errors: &mut Vec<Diagnostic>,
) {
    if !bindings.is_empty() {
        bind_symbols(func, bindings);
    }
    let mut state = ShapeInference::new();
    let body = func.body();
    infer_region(func, weights, &mut state, body, errors);
    // The signature follows the returned values.
    let Some(&entry) = func.layout().region_blocks(body).first() else {
        return;
    };
    let Some(&last) = func.layout().block_ops(entry).last() else {
        return;
    };
    if func.op(last).opcode != Opcode::Return {
        return;
    }
    let returned: Vec<Type> = func
        .op(last)
        .operands
        .iter()
        .map(|&v| func.value_type(v).clone())
        .collect();
    for (i, ty) in returned
        .into_iter()
        .enumerate()
        .take(func.result_types().len())
    {
        func.set_result_type(i, ty);
    }
}

/// Substitutes bound symbols in every value type and in the function's result types.
fn bind_symbols(func: &mut Function, bindings: &HashMap<String, u64>) {
    let lookup = |name: &str| bindings.get(name).copied();
    let bind = |ty: &Type| -> Option<Type> {
        let t = ty.tensor()?;
        if !t.dims.iter().any(Dim::is_symbolic) {
            return None;
        }
        let dims = t
            .dims
            .iter()
            .map(|d| {
                if d.is_symbolic() {
                    d.substitute(&lookup)
                } else {
                    d.clone()
                }
            })
            .collect();
        Some(TensorType::new(t.elem, dims).into())
    };
    for index in 0..func.n_value_handles() {
        let value = ValueId::new(index);
        if let Some(ty) = bind(func.value_type(value)) {
            func.set_value_type(value, ty);
        }
    }
    for index in 0..func.result_types().len() {
        if let Some(ty) = bind(&func.result_types()[index]) {
            func.set_result_type(index, ty);
        }
    }
}

fn infer_region(
    func: &mut Function,
    weights: &WeightStore,
    state: &mut ShapeInference,
    region: RegionId,
    errors: &mut Vec<Diagnostic>,
) {
    let blocks = func.layout().region_blocks(region).to_vec();
    for block in blocks {
        let ops = func.layout().block_ops(block).to_vec();
        for op in ops {
            let nested = func.op(op).regions.clone();
            for &inner in &nested {
                infer_region(func, weights, state, inner, errors);
            }
            if func.op(op).opcode == Opcode::If {
                reconcile_branches(func, op);
            }
            apply(func, weights, state, op, errors);
        }
    }
}

/// The `onnx.Yield` that ends `region`.
fn yield_of(func: &Function, region: RegionId) -> Option<OpId> {
    let [block] = func.layout().region_blocks(region) else {
        return None;
    };
    let last = *func.layout().block_ops(*block).last()?;
    (func.op(last).opcode == Opcode::Yield).then_some(last)
}

/// Where the two branches of `if_op` yield values whose refined types differ, gives both the
/// join: their common dims, and the `If` result's own dim elsewhere. Both were equal to the
/// `If`'s types before inference, which only refines, so the join is valid for both.
fn reconcile_branches(func: &mut Function, if_op: OpId) {
    let [then_region, else_region] = func.op(if_op).regions[..] else {
        return;
    };
    let (Some(then_yield), Some(else_yield)) =
        (yield_of(func, then_region), yield_of(func, else_region))
    else {
        return;
    };
    let pairs: Vec<(ValueId, ValueId, ValueId)> = func
        .op(then_yield)
        .operands
        .iter()
        .zip(&func.op(else_yield).operands)
        .zip(&func.op(if_op).results)
        .map(|((&a, &b), &r)| (a, b, r))
        .collect();
    for (a, b, result) in pairs {
        let types = (
            func.value_type(a).tensor(),
            func.value_type(b).tensor(),
            func.value_type(result).tensor(),
        );
        let (Some(ta), Some(tb), Some(written)) = types else {
            continue;
        };
        if ta == tb || ta.elem != tb.elem || ta.rank() != tb.rank() || written.rank() != ta.rank() {
            continue;
        }
        let dims = ta
            .dims
            .iter()
            .zip(&tb.dims)
            .zip(&written.dims)
            .map(|((x, y), w)| {
                if x.provably_equal(y) {
                    x.clone()
                } else {
                    w.clone()
                }
            })
            .collect();
        let joined: Type = TensorType::new(ta.elem, dims).into();
        func.set_value_type(a, joined.clone());
        func.set_value_type(b, joined);
    }
}

/// Infers `op` and refines its result types.
fn apply(
    func: &mut Function,
    weights: &WeightStore,
    state: &mut ShapeInference,
    op: OpId,
    errors: &mut Vec<Diagnostic>,
) {
    let types = match state.infer_op(func, weights, op) {
        Ok(Some(types)) => types,
        Ok(None) => return,
        Err(message) => {
            errors.push(op_error(func, op, message));
            return;
        }
    };
    let results = func.op(op).results.clone();
    for (i, (inferred, result)) in types.iter().zip(results).enumerate() {
        let Some(written) = func.value_type(result).tensor() else {
            continue;
        };
        match refine(written, inferred) {
            Some(ty) => func.set_value_type(result, ty.into()),
            None => {
                let message =
                    format!("result #{i} has type {written} but the operands imply {inferred}");
                errors.push(op_error(func, op, message));
            }
        }
    }
}

/// The written type refined by the inferred one; `None` when they conflict (rank, element
/// type, or two different static dims).
fn refine(written: &TensorType, inferred: &TensorType) -> Option<TensorType> {
    if written.rank() != inferred.rank() || written.elem != inferred.elem {
        return None;
    }
    let dims = written
        .dims
        .iter()
        .zip(&inferred.dims)
        .map(|(w, i)| match (w, i) {
            (Dim::Static(a), Dim::Static(b)) if a != b => None,
            (_, Dim::Static(_)) => Some(i.clone()),
            (Dim::Static(_), _) => Some(w.clone()),
            (_, Dim::Unknown) => Some(w.clone()),
            _ => Some(i.clone()),
        })
        .collect::<Option<_>>()?;
    Some(TensorType::new(written.elem, dims))
}

/// An error about `op`, in the verifier's form: the op's name, the message, its span.
fn op_error(func: &Function, op: OpId, message: String) -> Diagnostic {
    let diag = Diagnostic::error(format!("`{}`: {message}", func.op(op).opcode.name()));
    match func.op_span(op) {
        Some(span) => diag.with_span(span, "in this operation"),
        None => {
            let place = match &func.op(op).loc {
                Some(loc) => format!("in function `@{}`, {op} (loc \"{loc}\")", func.name()),
                None => format!("in function `@{}`, {op}", func.name()),
            };
            diag.with_note(place)
        }
    }
}
