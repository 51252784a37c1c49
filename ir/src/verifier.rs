//! The verifier: the invariants every pass may rely on and every pass must keep.
//!
//! Checked, in this order (a function that fails step 1 or 2 is not checked further, so later
//! steps may index without checking):
//!
//! 1. **Handle validity.** Every op, value, block and region handle reachable from the layout
//!    is in range of its function's arenas; every weight reference is in the module's store.
//! 2. **Structure.** The layout is a tree: each placed op sits in exactly one block and the
//!    layout's back-links agree; each block sits in exactly one region; a region's owner is
//!    the op that lists it; each result of a placed op is defined by that op at its index; the
//!    function body has an entry block whose arguments are the function's.
//! 3. **Op signature.** Operand, result and region counts are within what the op table
//!    declares (optional entries are trailing, a variadic entry takes the rest).
//! 4. **Attribute schema.** Required attributes are present, no attribute is unknown to the op
//!    table, and each has its declared kind.
//! 5. **Element types.** Each operand and result has an element type its rule allows, and every
//!    entry naming the same type variable has the same element type. Only `memc.none` results
//!    have type `none`, and only optional operand positions take a `none` operand.
//! 6. **Tensor sizes.** No fully static tensor type has an element count that overflows 64 bits.
//! 7. **SSA dominance.** Every operand is defined before its use: by an earlier op of the same
//!    block, by an earlier op of a block that holds one of the user's ancestors (before that
//!    ancestor), or as an argument of such a block. A value whose defining op was erased is
//!    reported as such.
//! 8. **Terminators.** `func.return` ends the function body and nowhere else, and its operand
//!    types equal the function's result types; `onnx.Yield` ends each region of `onnx.If` and
//!    nowhere else, and its operand types equal the `If`'s result types. A terminator is the
//!    last op of its block. Regions of `onnx.If` have exactly one block, without arguments.
//! 9. **Op rules.** The op's verifier hook from the op table passes, and where the op has a
//!    shape function that can tell, the written result types agree with it (same rank and
//!    element type, equal static dims).
//! 10. **Weights.** A `memc.weight` result has exactly the type of the weight it names.
//! 11. **Module.** Function names are unique.
//! 12. **Persistent state.** The rules of [`crate::state::check`]: a `memc.state` argument is a
//!     parameter or a gradient buffer, and a gradient buffer is read only as the accumulation
//!     buffer of one `ms.InPlaceAccumulatorV2`.
//! 13. **Bounded dims.** A dim `<=N` ([`crate::Dim::AtMost`]: an extent known only at run time)
//!     appears only on results of ops marked to produce one (`Traits::BOUNDED_RESULTS`), exactly
//!     where their shape function puts it, never on a function argument, and at most once per
//!     type; a value with a bounded dim is an operand only of ops marked to accept one
//!     (`Traits::ACCEPTS_BOUNDED`: `func.return` alone), so no kernel reads the elements past
//!     the run-time extent (see `docs/dynamic-extents.md`).
//!
//! A verifier error on user input (text or a model) is a user error; one after a pass ran is a
//! bug in memc, and the pass manager says so.

use crate::diag::Diagnostic;
use crate::function::ValueDef;
use crate::ops::{
    entry_for_position, Arity, OpCtx, Opcode, ShapeCtx, TypeRule, ValueDef as OpValueDef,
};
use crate::{
    Attribute, BlockId, ElemType, Function, Module, OpId, RegionId, TensorType, Type, ValueId,
};
use cranelift_entity::SecondaryMap;
use std::collections::{HashMap, HashSet};

/// Checks every invariant of every function; returns all violations found.
pub fn verify_module(module: &Module) -> Result<(), Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let mut names = HashSet::new();
    for (_, func) in module.functions() {
        if !names.insert(func.name()) {
            errors.push(Diagnostic::error(format!(
                "function `@{}` is defined twice",
                func.name()
            )));
        }
        verify_function(module, func, &mut errors);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Checks one function of `module`, appending violations to `errors`.
pub fn verify_function(module: &Module, func: &Function, errors: &mut Vec<Diagnostic>) {
    let mut v = Verifier {
        module,
        func,
        errors,
        position: SecondaryMap::new(),
    };
    if !v.check_handles_and_structure() {
        return;
    }
    v.check_signature_sizes();
    for op in func.walk_ops() {
        v.check_op(op);
        v.check_bounded_dims(op);
    }
    v.check_bounded_arguments();
    v.check_terminators(func.body(), None);
    for message in crate::state::check(func) {
        v.error(None, message);
    }
}

struct Verifier<'a> {
    module: &'a Module,
    func: &'a Function,
    errors: &'a mut Vec<Diagnostic>,
    /// Index of each placed op in its block.
    position: SecondaryMap<OpId, u32>,
}

impl Verifier<'_> {
    fn error(&mut self, op: Option<OpId>, message: String) {
        let func = self.func;
        let diag = match op {
            Some(op) => {
                let name = func.op(op).opcode.name();
                let diag = Diagnostic::error(format!("`{name}`: {message}"));
                match func.op_span(op) {
                    Some(span) => diag.with_span(span, "in this operation"),
                    None => diag.with_note(format!("in function `@{}`, {op}", func.name())),
                }
            }
            None => {
                let diag = Diagnostic::error(format!("in function `@{}`: {message}", func.name()));
                match func.span() {
                    Some(span) => diag.with_span(span, "in this function"),
                    None => diag,
                }
            }
        };
        self.errors.push(diag);
    }

    /// Steps 1 and 2. Returns false when the function cannot be checked further.
    fn check_handles_and_structure(&mut self) -> bool {
        let func = self.func;
        let before = self.errors.len();
        let body = func.body();
        if func.region(body).parent.is_some() {
            self.error(None, "the body region has an owner op".to_string());
        }
        if func.layout().region_blocks(body).is_empty() {
            self.error(None, "the body has no entry block".to_string());
            return false;
        }
        let mut seen_ops = HashSet::new();
        let mut seen_blocks = HashSet::new();
        let mut stack: Vec<(RegionId, Option<OpId>)> = vec![(body, None)];
        let mut seen_regions = HashSet::new();
        while let Some((region, owner)) = stack.pop() {
            if !func.is_valid_region(region) {
                self.error(owner, format!("refers to {region}, which does not exist"));
                continue;
            }
            if !seen_regions.insert(region) {
                self.error(owner, format!("{region} is owned twice"));
                continue;
            }
            if func.region(region).parent != owner {
                self.error(owner, format!("{region} names another owner"));
            }
            for &block in func.layout().region_blocks(region) {
                if !func.is_valid_block(block) {
                    self.error(owner, format!("holds {block}, which does not exist"));
                    continue;
                }
                if !seen_blocks.insert(block) {
                    self.error(owner, format!("{block} is placed twice"));
                    continue;
                }
                if func.layout().block_region(block) != Some(region) {
                    self.error(
                        owner,
                        format!("the layout places {block} in another region"),
                    );
                }
                for (i, &arg) in func.block(block).args.iter().enumerate() {
                    let ok = func.is_valid_value(arg)
                        && func.value(arg).def
                            == ValueDef::BlockArg {
                                block,
                                index: i as u32,
                            };
                    if !ok {
                        self.error(owner, format!("argument #{i} of {block} is malformed"));
                    }
                }
                for (i, &op) in func.layout().block_ops(block).iter().enumerate() {
                    if !func.is_valid_op(op) {
                        self.error(owner, format!("{block} holds {op}, which does not exist"));
                        continue;
                    }
                    if !seen_ops.insert(op) {
                        self.error(Some(op), "is placed twice".to_string());
                        continue;
                    }
                    self.position[op] = i as u32;
                    if func.layout().op_block(op) != Some(block) {
                        self.error(
                            Some(op),
                            format!("the layout's back-link does not name {block}"),
                        );
                    }
                    let data = func.op(op);
                    for (j, &result) in data.results.iter().enumerate() {
                        let ok = func.is_valid_value(result)
                            && func.value(result).def
                                == ValueDef::Result {
                                    op,
                                    index: j as u32,
                                };
                        if !ok {
                            self.error(Some(op), format!("result #{j} is not defined by this op"));
                        }
                    }
                    for (j, &operand) in data.operands.iter().enumerate() {
                        if !func.is_valid_value(operand) {
                            self.error(
                                Some(op),
                                format!("operand #{j} refers to {operand}, which does not exist"),
                            );
                        }
                    }
                    for attr in data.attrs.iter().map(|(_, a)| a) {
                        self.check_weight_handles(op, attr);
                    }
                    for &nested in &data.regions {
                        stack.push((nested, Some(op)));
                    }
                }
            }
        }
        self.errors.len() == before
    }

    /// Step 6 for the function's arguments and results (ops check their own values).
    fn check_signature_sizes(&mut self) {
        let func = self.func;
        let args = func
            .args()
            .iter()
            .map(|&a| ("argument", func.value_type(a)));
        let results = func.result_types().iter().map(|t| ("result", t));
        let overflowing: Vec<String> = args
            .chain(results)
            .enumerate()
            .filter_map(|(i, (what, ty))| {
                let ty = ty.tensor()?;
                let all_static = ty.dims.iter().all(|d| d.as_static().is_some());
                (all_static && ty.static_byte_size().is_none()).then(|| {
                    format!("{what} type {ty} (position {i}) has a size that overflows 64 bits")
                })
            })
            .collect();
        for message in overflowing {
            self.error(None, message);
        }
    }

    fn check_weight_handles(&mut self, op: OpId, attr: &Attribute) {
        match attr {
            Attribute::Weight(id) if self.module.weights.get(*id).is_none() => {
                self.error(
                    Some(op),
                    format!("refers to {id}, which is not in the weight store"),
                );
            }
            Attribute::Array(items) => {
                for item in items {
                    self.check_weight_handles(op, item);
                }
            }
            _ => {}
        }
    }

    /// Steps 3 to 7 and 9 and 10 for one op, in this order: 3, 4, 5 with 6 (per value), 7,
    /// 10, then 9 only when 3, 4 and 5 hold.
    fn check_op(&mut self, op: OpId) {
        let counts_ok = self.check_signature(op);
        let schema_ok = self.check_attribute_schema(op);
        let types_ok = self.check_value_types(op);
        self.check_dominance(op);
        self.check_weight_type(op);
        // Hooks and shape functions may assume the counts, the attribute schema and the
        // element types hold, so they run only when all three do.
        if counts_ok && schema_ok && types_ok {
            self.check_op_rules(op);
        }
    }

    /// Step 3: operand, result and region counts. Returns whether they hold.
    fn check_signature(&mut self, op: OpId) -> bool {
        let data = self.func.op(op);
        let def = data.opcode.def();
        let mut counts_ok = true;
        for (what, n, (min, max)) in [
            ("operand", data.operands.len(), def.operand_range()),
            ("result", data.results.len(), def.result_range()),
        ] {
            let ok = n >= min && max.is_none_or(|m| n <= m);
            if !ok {
                counts_ok = false;
                let expected = match max {
                    Some(m) if m == min => format!("{min}"),
                    Some(m) => format!("{min} to {m}"),
                    None => format!("at least {min}"),
                };
                self.error(Some(op), format!("expects {expected} {what}(s), got {n}"));
            }
        }
        if data.regions.len() != def.n_regions {
            counts_ok = false;
            self.error(
                Some(op),
                format!(
                    "expects {} region(s), got {}",
                    def.n_regions,
                    data.regions.len()
                ),
            );
        }
        counts_ok
    }

    /// Step 4: required attributes present, none unknown, each of its declared kind. Returns
    /// whether the schema holds.
    fn check_attribute_schema(&mut self, op: OpId) -> bool {
        let data = self.func.op(op);
        let def = data.opcode.def();
        let errors_before = self.errors.len();
        for attr_def in def.attrs {
            if attr_def.required && data.attrs.get(attr_def.name).is_none() {
                self.error(Some(op), format!("requires attribute `{}`", attr_def.name));
            }
        }
        for (name, value) in data.attrs.iter() {
            match def.attr_def(name) {
                None => {
                    let known: Vec<&str> = def.attrs.iter().map(|a| a.name).collect();
                    let known = if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    };
                    self.error(
                        Some(op),
                        format!("has unknown attribute `{name}` (known: {known})"),
                    );
                }
                Some(attr_def) if !value.has_kind(attr_def.kind) => {
                    self.error(
                        Some(op),
                        format!("attribute `{name}` must be {}", attr_def.kind.describe()),
                    );
                }
                Some(_) => {}
            }
        }
        self.errors.len() == errors_before
    }

    /// Steps 5 and 6 for every operand and result, in order: `none` only where allowed, the
    /// size (step 6), then the element type against its rule (step 5). Returns whether no
    /// error was found.
    fn check_value_types(&mut self, op: OpId) -> bool {
        let func = self.func;
        let data = func.op(op);
        let def = data.opcode.def();
        let errors_before = self.errors.len();
        let mut bindings: HashMap<&str, (ElemType, String)> = HashMap::new();
        let sides = [
            ("operand", &data.operands, def.operands),
            ("result", &data.results, def.results),
        ];
        for (what, values, entries) in sides {
            for (i, &value) in values.iter().enumerate() {
                let entry = entry_for_position(entries, i);
                let Type::Tensor(ty) = func.value_type(value) else {
                    self.check_none_type(op, what, i, entry);
                    continue;
                };
                if data.opcode == Opcode::None {
                    self.error(
                        Some(op),
                        format!("{what} #{i} must have type none, not {ty}"),
                    );
                    continue;
                }
                self.check_tensor_size(op, what, i, ty);
                if let Some(entry) = entry {
                    self.check_element_type(op, what, i, entry, ty, &mut bindings);
                }
            }
        }
        self.errors.len() == errors_before
    }

    /// Step 5, for a value of type `none`: only a left-out optional operand, or the result of
    /// `memc.none`, may have it.
    fn check_none_type(&mut self, op: OpId, what: &str, i: usize, entry: Option<&OpValueDef>) {
        let allowed = match what {
            "operand" => entry.is_some_and(|e| e.arity == Arity::Optional),
            _ => self.func.op(op).opcode == Opcode::None,
        };
        if !allowed {
            let name = entry.map_or("", |e| e.name);
            self.error(Some(op), format!("{what} #{i} (`{name}`) has type none, which only a left-out optional operand may have"));
        }
    }

    /// Step 6: a fully static tensor type's size fits in 64 bits.
    fn check_tensor_size(&mut self, op: OpId, what: &str, i: usize, ty: &TensorType) {
        if ty.dims.iter().all(|d| d.as_static().is_some()) && ty.static_byte_size().is_none() {
            self.error(
                Some(op),
                format!("{what} #{i} has type {ty}, whose size overflows 64 bits"),
            );
        }
    }

    /// Step 5: the element type is one the entry's rule allows, and every entry naming the
    /// same type variable (recorded in `bindings`) has the same element type.
    fn check_element_type<'d>(
        &mut self,
        op: OpId,
        what: &str,
        i: usize,
        entry: &'d OpValueDef,
        ty: &TensorType,
        bindings: &mut HashMap<&'d str, (ElemType, String)>,
    ) {
        let def = self.func.op(op).opcode.def();
        match entry.rule {
            TypeRule::OneOf(allowed) => {
                if !allowed.contains(&ty.elem) {
                    self.error(
                        Some(op),
                        format!(
                            "{what} #{i} (`{}`) has element type {}, expected one of {}",
                            entry.name,
                            ty.elem,
                            list(allowed)
                        ),
                    );
                }
            }
            TypeRule::Var(var) => {
                let allowed = def
                    .type_vars
                    .iter()
                    .find(|(n, _)| *n == var)
                    .map(|(_, a)| *a);
                match allowed {
                    Some(allowed) if !allowed.contains(&ty.elem) => {
                        self.error(
                            Some(op),
                            format!(
                                "{what} #{i} (`{}`) has element type {}, expected one of {}",
                                entry.name,
                                ty.elem,
                                list(allowed)
                            ),
                        );
                    }
                    None => {
                        self.error(
                            Some(op),
                            format!("type variable `{var}` is not declared (op table bug)"),
                        );
                    }
                    Some(_) => {}
                }
                let place = format!("{what} #{i} (`{}`)", entry.name);
                match bindings.get(var) {
                    Some((bound, first)) if *bound != ty.elem => {
                        let msg = format!(
                            "{place} has element type {} but {first} has {bound}; both are `{var}`",
                            ty.elem
                        );
                        self.error(Some(op), msg);
                    }
                    Some(_) => {}
                    None => {
                        bindings.insert(var, (ty.elem, place));
                    }
                }
            }
        }
    }

    /// Step 7: every operand is defined before its use.
    fn check_dominance(&mut self, op: OpId) {
        for (i, &operand) in self.func.op(op).operands.iter().enumerate() {
            if let Some(problem) = self.dominance_problem(op, operand) {
                self.error(Some(op), format!("operand #{i} {problem}"));
            }
        }
    }

    /// Step 10: a `memc.weight` result has exactly its weight's type.
    fn check_weight_type(&mut self, op: OpId) {
        let func = self.func;
        let data = func.op(op);
        if data.opcode != Opcode::Weight {
            return;
        }
        let (Some(id), Some(&result)) = (
            data.attrs.get("value").and_then(Attribute::as_weight),
            data.results.first(),
        ) else {
            return;
        };
        if let Some(weight) = self.module.weights.get(id) {
            let ty = func.value_type(result);
            if ty.tensor() != Some(weight.ty()) {
                self.error(
                    Some(op),
                    format!(
                        "result type {ty} differs from the type {} of weight `{}`",
                        weight.ty(),
                        weight.name()
                    ),
                );
            }
        }
    }

    /// Step 9: the op's verifier hook passes, then the written result types agree with what
    /// its shape function infers (same rank and element type, equal static dims).
    fn check_op_rules(&mut self, op: OpId) {
        let func = self.func;
        let data = func.op(op);
        let def = data.opcode.def();
        let ctx = OpCtx { func, op };
        if let Some(hook) = def.verify {
            if let Err(message) = hook(&ctx) {
                self.error(Some(op), message);
                return;
            }
        }
        let Some(infer) = def.infer else {
            return;
        };
        let shape_ctx = ShapeCtx::new(func, op).with_weights(&self.module.weights);
        match infer(&shape_ctx) {
            Err(message) => self.error(Some(op), message),
            Ok(None) => {}
            Ok(Some(inferred)) => {
                for (i, (expected, &result)) in inferred.iter().zip(&data.results).enumerate() {
                    let Some(actual) = func.value_type(result).tensor() else {
                        continue;
                    };
                    let static_conflict = expected.rank() != actual.rank()
                        || expected.elem != actual.elem
                        || expected.dims.iter().zip(&actual.dims).any(|(e, a)| {
                            matches!((e.as_static(), a.as_static()), (Some(x), Some(y)) if x != y)
                        });
                    if static_conflict {
                        self.error(
                            Some(op),
                            format!(
                                "result #{i} has type {actual} but the operands imply {expected}"
                            ),
                        );
                    }
                }
            }
        }
    }

    /// Step 13 for the function's arguments: none has a bounded dim.
    fn check_bounded_arguments(&mut self) {
        let func = self.func;
        let bounded: Vec<String> = func
            .args()
            .iter()
            .enumerate()
            .filter_map(|(i, &a)| {
                let ty = func.value_type(a).tensor()?;
                ty.bounded_axis().map(|_| {
                    format!("argument #{i} has type {ty}: a function argument cannot have a bounded dim")
                })
            })
            .collect();
        for message in bounded {
            self.error(None, message);
        }
    }

    /// Step 13 for one op: its bounded operands and results.
    fn check_bounded_dims(&mut self, op: OpId) {
        let func = self.func;
        let data = func.op(op);
        let def = data.opcode.def();
        for (i, &operand) in data.operands.iter().enumerate() {
            let Some(ty) = func.value_type(operand).tensor() else {
                continue;
            };
            if ty.bounded_axis().is_some() && !def.accepts_bounded() {
                self.error(
                    Some(op),
                    format!(
                        "operand #{i} has type {ty}, whose bounded dim is known only at run time, \
                         and this op does not accept one (only `func.return` does: a bounded \
                         value may only be a graph output)"
                    ),
                );
            }
        }
        let any_bounded = data.results.iter().any(|&r| {
            func.value_type(r)
                .tensor()
                .is_some_and(|t| t.bounded_axis().is_some())
        });
        if !any_bounded {
            return;
        }
        let inferred = def
            .infer
            .filter(|_| def.produces_bounded())
            .and_then(|infer| {
                infer(&ShapeCtx::new(func, op).with_weights(&self.module.weights)).ok()
            })
            .flatten();
        for (i, &result) in data.results.iter().enumerate() {
            let Some(ty) = func.value_type(result).tensor() else {
                continue;
            };
            let n_bounded = ty.dims.iter().filter(|d| d.is_bounded()).count();
            if n_bounded == 0 {
                continue;
            }
            let message = if !def.produces_bounded() {
                Some("this op does not produce a run-time extent".to_string())
            } else if n_bounded > 1 {
                Some("a type has at most one bounded dim".to_string())
            } else {
                match inferred.as_ref().and_then(|t| t.get(i)) {
                    Some(expected) if expected.dims != ty.dims => {
                        Some(format!("the operands imply {expected}"))
                    }
                    _ => None,
                }
            };
            if let Some(message) = message {
                self.error(
                    Some(op),
                    format!("result #{i} has type {ty} with a bounded dim, but {message}"),
                );
            }
        }
    }

    /// Why `value` does not dominate its use by `user`, or `None` when it does.
    fn dominance_problem(&self, user: OpId, value: ValueId) -> Option<String> {
        let func = self.func;
        let chain: Vec<OpId> = std::iter::once(user).chain(func.ancestors(user)).collect();
        match func.value(value).def {
            ValueDef::Result { op: def_op, .. } => {
                let Some(def_block) = func.layout().op_block(def_op) else {
                    return Some(format!("uses {value}, whose defining op was erased"));
                };
                let def_pos = self.position[def_op];
                let dominated = chain.iter().any(|&a| {
                    func.layout().op_block(a) == Some(def_block) && self.position[a] > def_pos
                });
                (!dominated).then(|| format!("uses {value} before its definition"))
            }
            ValueDef::BlockArg { block, .. } => {
                let visible = chain
                    .iter()
                    .any(|&a| func.layout().op_block(a) == Some(block));
                (!visible).then(|| {
                    format!("uses {value}, an argument of a block that does not enclose it")
                })
            }
        }
    }

    /// Step 8, over `region` owned by `owner` (`None` for the body).
    fn check_terminators(&mut self, region: RegionId, owner: Option<OpId>) {
        let func = self.func;
        let blocks: Vec<BlockId> = func.layout().region_blocks(region).to_vec();
        let (expected_terminator, expected_types): (Opcode, Vec<Type>) = match owner {
            None => (Opcode::Return, func.result_types().to_vec()),
            Some(op) => (
                Opcode::Yield,
                func.op(op)
                    .results
                    .iter()
                    .map(|&r| func.value_type(r).clone())
                    .collect(),
            ),
        };
        if owner.is_some() && (blocks.len() != 1 || !func.block(blocks[0]).args.is_empty()) {
            self.error(
                owner,
                "each region must have exactly one block without arguments".to_string(),
            );
        }
        for &block in &blocks {
            let ops = func.layout().block_ops(block);
            for (i, &op) in ops.iter().enumerate() {
                let opcode = func.op(op).opcode;
                let is_last = i + 1 == ops.len();
                if opcode.def().is_terminator() && !is_last {
                    self.error(
                        Some(op),
                        "is a terminator but not the last op of its block".to_string(),
                    );
                } else if is_last && opcode != expected_terminator {
                    self.error(
                        Some(op),
                        format!("the block must end with `{}`", expected_terminator.name()),
                    );
                } else if opcode.def().is_terminator() && opcode != expected_terminator {
                    self.error(
                        Some(op),
                        format!(
                            "is not allowed here; expected `{}`",
                            expected_terminator.name()
                        ),
                    );
                } else if is_last {
                    let actual: Vec<Type> = func
                        .op(op)
                        .operands
                        .iter()
                        .map(|&v| func.value_type(v).clone())
                        .collect();
                    if actual != expected_types {
                        let what = if owner.is_some() {
                            "the `onnx.If` results"
                        } else {
                            "the function results"
                        };
                        self.error(
                            Some(op),
                            format!(
                                "returns ({}) but {what} are ({})",
                                join(&actual),
                                join(&expected_types)
                            ),
                        );
                    }
                }
                for &nested in &func.op(op).regions {
                    self.check_terminators(nested, Some(op));
                }
            }
            if ops.is_empty() {
                self.error(
                    owner,
                    format!(
                        "a block is empty; it must end with `{}`",
                        expected_terminator.name()
                    ),
                );
            }
        }
    }
}

fn list(types: &[ElemType]) -> String {
    types
        .iter()
        .map(|t| t.mlir_name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn join(types: &[Type]) -> String {
    types
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
