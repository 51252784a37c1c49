//! Canonicalization: local folds that bypass ops which do nothing and merge chains of reshapes
//! and of transposes.
//!
//! The rules, one line each (`x` is the op's data operand):
//!
//! ```text
//! identity-elim        Identity(x)                        => x
//! cast-noop            Cast(x) {to = T}                   => x                if x's element type is T
//! dropout-inference    Dropout(x [, ratio]) -> (y)        => x                if there is neither a training_mode operand nor a mask result
//! view-noop            Reshape|Squeeze|Unsqueeze|Flatten(x, ..) => x          if the result type is x's type and has no unknown dim
//! reshape-reshape      Reshape(Reshape(x, s1), s2)        => Reshape(x, s2)   if the outer Reshape copies no dim that differs between x and Reshape(x, s1)
//! transpose-noop       Transpose(x) {perm = 0..n}         => x                (an absent perm reverses the dims: identity only for rank <= 1)
//! transpose-transpose  Transpose(Transpose(x, p1), p2)    => Transpose(x, q)  q[i] = p1[p2[i]]; => x when q is the identity
//! ```
//!
//! The guard of `reshape-reshape`: with `allowzero = 0`, a `0` in the shape operand copies the
//! input's dim at that index, so after the rewrite the outer Reshape would copy x's dim rather
//! than the inner result's. The rule applies when `allowzero = 1`; when the shape is a
//! `memc.weight` whose loaded bytes hold no zero; or when, at every index where the shape could
//! hold a `0` (the result dim is not statically different from the inner result's), x has the
//! same known dim as the inner result.
//!
//! What the pass guarantees:
//! - A value is only ever replaced by a value of exactly its type, so every user (a
//!   `func.return` included) sees the types it saw before.
//! - Ops are never erased; an op whose result no longer has users is left for `dce`.
//! - A rewrite only moves an operand to a value defined earlier, so rewriting ends; sweeps
//!   repeat until one changes nothing, bounded by [`MAX_SWEEPS`].

use crate::manager::{Pass, PassError};
use crate::rewrite::{has_unknown_dim, resolve_operands};
use memc_ir::{Attribute, Dim, ElemType, Function, Module, OpId, Opcode, ValueId, WeightStore};
use std::collections::{HashMap, HashSet};

/// The most sweeps over one function. One forward sweep reaches the fixpoint on verified IR,
/// where every use follows its definition; the second confirms it. The bound keeps a malformed
/// function from looping.
pub const MAX_SWEEPS: usize = 8;

/// The most rewrites applied to one op in one sweep before moving on.
const MAX_REWRITES_PER_OP: usize = 8;

/// The canonicalization pass; see the module doc for its rules.
pub struct Canonicalize;

impl Pass for Canonicalize {
    fn name(&self) -> &'static str {
        "canonicalize"
    }

    fn description(&self) -> &'static str {
        "bypasses ops that do nothing (Identity, no-op Cast, Dropout, Reshape, Transpose) and \
         merges chains of Reshape and of Transpose"
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        // The weight store and the functions cannot be borrowed apart from a `Module`, so the
        // facts that need the weights are gathered first.
        let facts: Vec<_> = module
            .functions()
            .map(|(id, func)| (id, zero_free_shapes(func, &module.weights)))
            .collect();
        for (id, zero_free) in facts {
            canonicalize_with(module.function_mut(id), &zero_free);
        }
        Ok(())
    }
}

/// Canonicalizes one function whose weights are in `weights`; returns the number of rewrites.
pub fn canonicalize_function(func: &mut Function, weights: &WeightStore) -> usize {
    let zero_free = zero_free_shapes(func, weights);
    canonicalize_with(func, &zero_free)
}

/// The values defined by `memc.weight` ops that are 1-d `i64` tensors with loaded bytes and no
/// zero entry: shape operands for which a Reshape copies no input dim.
fn zero_free_shapes(func: &Function, weights: &WeightStore) -> HashSet<ValueId> {
    let mut out = HashSet::new();
    for op in func.walk_ops() {
        let data = func.op(op);
        if data.opcode != Opcode::Weight {
            continue;
        }
        let weight = data
            .attrs
            .get("value")
            .and_then(Attribute::as_weight)
            .and_then(|w| weights.get(w));
        let Some(weight) = weight else { continue };
        // Only small i64 vectors can be shapes; reading any other weight would fault its pages
        // in from the memory map, which is what memc must never do while compiling.
        let ty = weight.ty();
        let is_shape_like = ty.elem == ElemType::I64
            && ty.rank() == 1
            && ty
                .static_num_elements()
                .is_some_and(|n| n <= memc_ir::ops::MAX_KNOWN_ELEMENTS);
        if !is_shape_like {
            continue;
        }
        let Some(bytes) = weight.bytes() else {
            continue;
        };
        // An i64 is zero exactly when all its eight bytes are.
        let no_zero = bytes.len() % 8 == 0 && bytes.chunks_exact(8).all(|entry| entry != [0u8; 8]);
        if let (true, [result]) = (no_zero, data.results.as_slice()) {
            out.insert(*result);
        }
    }
    out
}

fn canonicalize_with(func: &mut Function, zero_free: &HashSet<ValueId>) -> usize {
    let mut n_rewrites = 0;
    for _ in 0..MAX_SWEEPS {
        let n = sweep(func, zero_free);
        if n == 0 {
            break;
        }
        n_rewrites += n;
    }
    n_rewrites
}

/// What folding one op did.
enum Fold {
    Unchanged,
    /// The op was rewritten in place; it may fold further.
    Updated,
    /// The op's single result is to be replaced by this value, of the same type.
    ReplaceWith(ValueId),
}

/// One forward sweep: each op's operands are resolved through the replacements made so far,
/// then the rules are tried on it. Returns the number of rewrites.
fn sweep(func: &mut Function, zero_free: &HashSet<ValueId>) -> usize {
    let mut replacements = HashMap::new();
    let mut n_rewrites = 0;
    // An op none of whose results is used is skipped: rewriting it changes nothing a user
    // sees, and an op that was bypassed in an earlier sweep must not count as a change again.
    // No rewrite gives a value without uses a new use (an operand only moves to a value that
    // already had one), so counts taken at the start of the sweep are good for the whole sweep.
    let use_counts = func.use_counts();
    for op in func.walk_ops() {
        resolve_operands(func, op, &replacements);
        if func.op(op).results.iter().all(|&r| use_counts[r] == 0) {
            continue;
        }
        for _ in 0..MAX_REWRITES_PER_OP {
            match fold(func, zero_free, op) {
                Fold::Unchanged => break,
                Fold::Updated => n_rewrites += 1,
                Fold::ReplaceWith(value) => {
                    replacements.insert(func.op(op).results[0], value);
                    n_rewrites += 1;
                    break;
                }
            }
        }
    }
    // On verified IR every use was resolved above, since uses follow definitions in walk
    // order; this catches any use that does not.
    func.replace_uses(&replacements);
    n_rewrites
}

fn fold(func: &mut Function, zero_free: &HashSet<ValueId>, op: OpId) -> Fold {
    match func.op(op).opcode {
        Opcode::Identity => forward_operand(func, op),
        Opcode::Cast => fold_cast(func, op),
        Opcode::Dropout => fold_dropout(func, op),
        Opcode::Squeeze | Opcode::Unsqueeze | Opcode::Flatten => fold_noop_view(func, op),
        Opcode::Reshape => fold_reshape(func, zero_free, op),
        Opcode::Transpose => fold_transpose(func, op),
        _ => Fold::Unchanged,
    }
}

/// Replaces the op's single result by its first operand when both have the same type.
fn forward_operand(func: &Function, op: OpId) -> Fold {
    let data = func.op(op);
    match (data.operands.first(), data.results.as_slice()) {
        (Some(&input), &[output]) if func.value_type(input) == func.value_type(output) => {
            Fold::ReplaceWith(input)
        }
        _ => Fold::Unchanged,
    }
}

/// `cast-noop`.
fn fold_cast(func: &Function, op: OpId) -> Fold {
    let data = func.op(op);
    let to = data.attrs.get("to").and_then(Attribute::as_elem_type);
    match data.operands.first() {
        Some(&input) if func.value_type(input).tensor().map(|t| t.elem) == to && to.is_some() => {
            forward_operand(func, op)
        }
        _ => Fold::Unchanged,
    }
}

/// `dropout-inference`.
fn fold_dropout(func: &Function, op: OpId) -> Fold {
    let data = func.op(op);
    let has_training_mode = data.operands.len() >= 3;
    if has_training_mode || data.results.len() != 1 {
        return Fold::Unchanged;
    }
    forward_operand(func, op)
}

/// `view-noop`: a view whose result type is its input's type, with every dim known.
fn fold_noop_view(func: &Function, op: OpId) -> Fold {
    match func.op(op).results.as_slice() {
        [output] if !has_unknown_dim(func, *output) => forward_operand(func, op),
        _ => Fold::Unchanged,
    }
}

/// `view-noop` and `reshape-reshape`.
fn fold_reshape(func: &mut Function, zero_free: &HashSet<ValueId>, op: OpId) -> Fold {
    if let replaced @ Fold::ReplaceWith(_) = fold_noop_view(func, op) {
        return replaced;
    }
    let Some(&input) = func.op(op).operands.first() else {
        return Fold::Unchanged;
    };
    let inner = func
        .defining_op(input)
        .filter(|&inner| func.op(inner).opcode == Opcode::Reshape);
    let Some(&source) = inner.and_then(|inner| func.op(inner).operands.first()) else {
        return Fold::Unchanged;
    };
    if !copies_no_changed_dim(func, zero_free, op, source) {
        return Fold::Unchanged;
    }
    func.op_mut(op).operands[0] = source;
    Fold::Updated
}

/// The guard of `reshape-reshape` (see the module doc): whether the Reshape `op` gives the
/// same result when its data operand is replaced by `source`, the inner Reshape's input.
fn copies_no_changed_dim(
    func: &Function,
    zero_free: &HashSet<ValueId>,
    op: OpId,
    source: ValueId,
) -> bool {
    let data = func.op(op);
    let (&[input, shape], &[output]) = (data.operands.as_slice(), data.results.as_slice()) else {
        return false;
    };
    if data.attrs.get("allowzero").and_then(Attribute::as_int) == Some(1)
        || zero_free.contains(&shape)
    {
        return true;
    }
    let types = (
        func.value_type(input).tensor(),
        func.value_type(source).tensor(),
        func.value_type(output).tensor(),
    );
    let (Some(input), Some(source), Some(output)) = types else {
        return false;
    };
    let (input_dims, source_dims, output_dims) = (&input.dims, &source.dims, &output.dims);
    output_dims.iter().enumerate().all(|(index, output_dim)| {
        // A `0` past the input's rank is an error before the rewrite; a program that fails
        // there may compute something after it.
        let Some(input_dim) = input_dims.get(index) else {
            return true;
        };
        let cannot_be_copied =
            matches!((output_dim, input_dim), (Dim::Static(a), Dim::Static(b)) if a != b);
        cannot_be_copied
            || (source_dims.get(index) == Some(input_dim) && *input_dim != Dim::Unknown)
    })
}

/// `transpose-noop` and `transpose-transpose`.
fn fold_transpose(func: &mut Function, op: OpId) -> Fold {
    let Some(perm) = transpose_perm(func, op) else {
        return Fold::Unchanged;
    };
    if is_identity(&perm) {
        return forward_operand(func, op);
    }
    let input = func.op(op).operands[0];
    let Some(inner) = func
        .defining_op(input)
        .filter(|&inner| func.op(inner).opcode == Opcode::Transpose)
    else {
        return Fold::Unchanged;
    };
    let Some(inner_perm) = transpose_perm(func, inner) else {
        return Fold::Unchanged;
    };
    // Output dim i of the outer op is its input's dim perm[i], which is x's dim inner_perm[perm[i]].
    let Some(composed) = perm
        .iter()
        .map(|&p| inner_perm.get(p).copied())
        .collect::<Option<Vec<_>>>()
    else {
        return Fold::Unchanged;
    };
    let source = func.op(inner).operands[0];
    if is_identity(&composed) {
        let output = func.op(op).results[0];
        return if func.value_type(source) == func.value_type(output) {
            Fold::ReplaceWith(source)
        } else {
            Fold::Unchanged
        };
    }
    let data = func.op_mut(op);
    data.operands[0] = source;
    data.attrs
        .insert("perm", Attribute::ints(composed.iter().map(|&p| p as i64)));
    Fold::Updated
}

/// The permutation of a Transpose (the reversed dims when `perm` is absent), or `None` when
/// the op is malformed.
fn transpose_perm(func: &Function, op: OpId) -> Option<Vec<usize>> {
    let &[input] = func.op(op).operands.as_slice() else {
        return None;
    };
    let rank = func.value_type(input).tensor()?.rank();
    memc_ir::ops::transpose_perm(&memc_ir::ops::OpCtx { func, op }, rank).ok()
}

fn is_identity(perm: &[usize]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| i == p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{
        assert_module_valid, entry_opcodes, f32_tensor, i64_tensor, result, ret, returned,
        run_verified, tensor,
    };
    use memc_ir::{TensorType, Type, WeightBytes};
    use std::sync::Arc;

    /// A function of one argument of type `arg`, returning one value of type `returns`.
    fn function(arg: Type, returns: Type) -> Function {
        Function::new("f", vec![arg], vec![returns])
    }

    fn canonicalize(func: &mut Function) -> usize {
        run_verified(func, |func| {
            canonicalize_function(func, &WeightStore::new())
        })
    }

    /// Builds `op(operands) -> result_type` in the entry block and returns its result.
    fn build(
        func: &mut Function,
        opcode: Opcode,
        operands: Vec<ValueId>,
        result_type: Type,
        attrs: Vec<(&'static str, Attribute)>,
    ) -> ValueId {
        let entry = func.entry_block();
        let op = func.build_op(entry, opcode, operands, vec![result_type], attrs);
        result(func, op)
    }

    /// `return op(%arg0, extra operands)`; returns whether canonicalize replaced the result by
    /// `%arg0`.
    fn folds_to_arg(
        arg: Type,
        opcode: Opcode,
        extra_operands: &[Type],
        result_type: Type,
        attrs: Vec<(&'static str, Attribute)>,
    ) -> bool {
        let mut arg_types = vec![arg];
        arg_types.extend_from_slice(extra_operands);
        let mut func = Function::new("f", arg_types, vec![result_type.clone()]);
        let operands = func.args().to_vec();
        let y = build(&mut func, opcode, operands, result_type, attrs);
        ret(&mut func, vec![y]);
        canonicalize(&mut func);
        returned(&func) == [func.args()[0]]
    }

    fn perm(values: &[i64]) -> Vec<(&'static str, Attribute)> {
        vec![("perm", Attribute::ints(values.iter().copied()))]
    }

    #[test]
    fn identity_is_bypassed_but_not_erased() {
        let mut func = function(f32_tensor(&[4]), f32_tensor(&[4]));
        let x = func.args()[0];
        let id = build(
            &mut func,
            Opcode::Identity,
            vec![x],
            f32_tensor(&[4]),
            vec![],
        );
        let relu = build(&mut func, Opcode::Relu, vec![id], f32_tensor(&[4]), vec![]);
        ret(&mut func, vec![relu]);
        assert_eq!(canonicalize(&mut func), 1);
        let relu_op = func.defining_op(relu).expect("an op result");
        assert_eq!(func.op(relu_op).operands, [x]);
        assert_eq!(
            entry_opcodes(&func),
            [Opcode::Identity, Opcode::Relu, Opcode::Return]
        );
    }

    #[test]
    fn a_returned_value_is_replaced() {
        assert!(folds_to_arg(
            f32_tensor(&[4]),
            Opcode::Identity,
            &[],
            f32_tensor(&[4]),
            vec![]
        ));
    }

    #[test]
    fn chains_fold_in_one_sweep() {
        let mut func = function(f32_tensor(&[4]), f32_tensor(&[4]));
        let mut value = func.args()[0];
        for _ in 0..3 {
            value = build(
                &mut func,
                Opcode::Identity,
                vec![value],
                f32_tensor(&[4]),
                vec![],
            );
        }
        ret(&mut func, vec![value]);
        assert_eq!(sweep(&mut func, &HashSet::new()), 3);
        assert_eq!(returned(&func), [func.args()[0]]);
        assert_eq!(sweep(&mut func, &HashSet::new()), 0);
    }

    #[test]
    fn reshape_to_the_same_type_folds() {
        let batch = tensor(ElemType::F32, vec![Dim::symbol("batch"), Dim::Static(4)]);
        assert!(folds_to_arg(
            batch.clone(),
            Opcode::Reshape,
            &[i64_tensor(&[2])],
            batch,
            vec![]
        ));
    }

    #[test]
    fn reshape_that_changes_the_shape_does_not_fold() {
        let shape = [i64_tensor(&[2])];
        assert!(!folds_to_arg(
            f32_tensor(&[4, 2]),
            Opcode::Reshape,
            &shape,
            f32_tensor(&[2, 4]),
            vec![]
        ));
    }

    #[test]
    fn reshape_between_different_symbols_does_not_fold() {
        let a = tensor(ElemType::F32, vec![Dim::symbol("a")]);
        let b = tensor(ElemType::F32, vec![Dim::symbol("b")]);
        assert!(!folds_to_arg(
            a,
            Opcode::Reshape,
            &[i64_tensor(&[1])],
            b,
            vec![]
        ));
    }

    #[test]
    fn reshape_with_an_unknown_dim_does_not_fold() {
        let unknown = tensor(ElemType::F32, vec![Dim::Unknown, Dim::Static(4)]);
        assert!(!folds_to_arg(
            unknown.clone(),
            Opcode::Reshape,
            &[i64_tensor(&[2])],
            unknown,
            vec![]
        ));
    }

    #[test]
    fn squeeze_and_unsqueeze_to_the_same_type_fold() {
        let ty = f32_tensor(&[2, 3]);
        assert!(folds_to_arg(
            ty.clone(),
            Opcode::Squeeze,
            &[],
            ty.clone(),
            vec![]
        ));
        assert!(folds_to_arg(
            ty.clone(),
            Opcode::Unsqueeze,
            &[i64_tensor(&[0])],
            ty,
            vec![]
        ));
        assert!(!folds_to_arg(
            f32_tensor(&[1, 3]),
            Opcode::Squeeze,
            &[],
            f32_tensor(&[3]),
            vec![]
        ));
    }

    #[test]
    fn cast_to_its_own_element_type_folds() {
        let to = |elem| vec![("to", Attribute::ElemType(elem))];
        let ty = f32_tensor(&[4]);
        assert!(folds_to_arg(
            ty.clone(),
            Opcode::Cast,
            &[],
            ty,
            to(ElemType::F32)
        ));
        let f16 = tensor(ElemType::F16, vec![Dim::Static(4)]);
        assert!(!folds_to_arg(
            f32_tensor(&[4]),
            Opcode::Cast,
            &[],
            f16,
            to(ElemType::F16)
        ));
    }

    #[test]
    fn dropout_folds_only_in_inference_form() {
        let ty = f32_tensor(&[4]);
        let ratio = f32_tensor(&[]);
        let training_mode = tensor(ElemType::Bool, vec![]);
        assert!(folds_to_arg(
            ty.clone(),
            Opcode::Dropout,
            &[],
            ty.clone(),
            vec![]
        ));
        assert!(folds_to_arg(
            ty.clone(),
            Opcode::Dropout,
            std::slice::from_ref(&ratio),
            ty.clone(),
            vec![]
        ));
        assert!(!folds_to_arg(
            ty.clone(),
            Opcode::Dropout,
            &[ratio, training_mode],
            ty.clone(),
            vec![]
        ));

        let mut func = function(ty.clone(), ty.clone());
        let x = func.args()[0];
        let entry = func.entry_block();
        let mask = tensor(ElemType::Bool, vec![Dim::Static(4)]);
        let dropout = func.build_op(entry, Opcode::Dropout, vec![x], vec![ty, mask], []);
        let output = func.op(dropout).results[0];
        ret(&mut func, vec![output]);
        assert_eq!(
            canonicalize(&mut func),
            0,
            "a Dropout with a mask result stays"
        );
    }

    #[test]
    fn transpose_with_the_identity_perm_folds() {
        let ty = f32_tensor(&[2, 3]);
        assert!(folds_to_arg(
            ty.clone(),
            Opcode::Transpose,
            &[],
            ty.clone(),
            perm(&[0, 1])
        ));
        assert!(!folds_to_arg(
            ty.clone(),
            Opcode::Transpose,
            &[],
            f32_tensor(&[3, 2]),
            perm(&[1, 0])
        ));
    }

    #[test]
    fn transpose_without_perm_reverses_and_folds_only_below_rank_2() {
        assert!(folds_to_arg(
            f32_tensor(&[5]),
            Opcode::Transpose,
            &[],
            f32_tensor(&[5]),
            vec![]
        ));
        assert!(folds_to_arg(
            f32_tensor(&[]),
            Opcode::Transpose,
            &[],
            f32_tensor(&[]),
            vec![]
        ));
        let square = f32_tensor(&[3, 3]);
        assert!(!folds_to_arg(
            square.clone(),
            Opcode::Transpose,
            &[],
            square,
            vec![]
        ));
    }

    #[test]
    fn transposes_that_cancel_fold_to_the_input() {
        let mut func = function(f32_tensor(&[2, 3, 4]), f32_tensor(&[2, 3, 4]));
        let x = func.args()[0];
        let t1 = build(
            &mut func,
            Opcode::Transpose,
            vec![x],
            f32_tensor(&[3, 4, 2]),
            perm(&[1, 2, 0]),
        );
        let t2 = build(
            &mut func,
            Opcode::Transpose,
            vec![t1],
            f32_tensor(&[2, 3, 4]),
            perm(&[2, 0, 1]),
        );
        ret(&mut func, vec![t2]);
        canonicalize(&mut func);
        assert_eq!(returned(&func), [x]);
    }

    #[test]
    fn transposes_compose_into_one() {
        let mut func = function(f32_tensor(&[2, 3, 4]), f32_tensor(&[3, 4, 2]));
        let x = func.args()[0];
        let t1 = build(
            &mut func,
            Opcode::Transpose,
            vec![x],
            f32_tensor(&[3, 2, 4]),
            perm(&[1, 0, 2]),
        );
        let t2 = build(
            &mut func,
            Opcode::Transpose,
            vec![t1],
            f32_tensor(&[3, 4, 2]),
            perm(&[0, 2, 1]),
        );
        ret(&mut func, vec![t2]);
        canonicalize(&mut func);
        let outer = func.defining_op(t2).expect("an op result");
        assert_eq!(returned(&func), [t2]);
        assert_eq!(func.op(outer).operands, [x]);
        assert_eq!(
            func.op(outer).attrs.get("perm"),
            Some(&Attribute::ints([1, 2, 0]))
        );
    }

    #[test]
    fn absent_perms_compose() {
        // Reversing twice is the identity.
        let mut func = function(f32_tensor(&[2, 3]), f32_tensor(&[2, 3]));
        let x = func.args()[0];
        let t1 = build(
            &mut func,
            Opcode::Transpose,
            vec![x],
            f32_tensor(&[3, 2]),
            vec![],
        );
        let t2 = build(
            &mut func,
            Opcode::Transpose,
            vec![t1],
            f32_tensor(&[2, 3]),
            vec![],
        );
        ret(&mut func, vec![t2]);
        canonicalize(&mut func);
        assert_eq!(returned(&func), [x]);
    }

    /// `return Reshape(Reshape(%arg0, %arg1) : inner, %arg2) : outer`; returns the function and
    /// the outer Reshape. `shape` is the outer Reshape's shape operand when given (it must be a
    /// value of the function), else `%arg2`.
    fn reshape_chain(
        source: &[u64],
        inner: &[u64],
        outer: &[u64],
        outer_attrs: Vec<(&'static str, Attribute)>,
        shape: Option<&dyn Fn(&mut Function) -> ValueId>,
    ) -> (Function, OpId) {
        let shape_types = vec![
            i64_tensor(&[inner.len() as u64]),
            i64_tensor(&[outer.len() as u64]),
        ];
        let mut func = Function::new(
            "f",
            [vec![f32_tensor(source)], shape_types].concat(),
            vec![f32_tensor(outer)],
        );
        let (x, s1, mut s2) = (func.args()[0], func.args()[1], func.args()[2]);
        if let Some(make_shape) = shape {
            s2 = make_shape(&mut func);
        }
        let r1 = build(
            &mut func,
            Opcode::Reshape,
            vec![x, s1],
            f32_tensor(inner),
            vec![],
        );
        let r2 = build(
            &mut func,
            Opcode::Reshape,
            vec![r1, s2],
            f32_tensor(outer),
            outer_attrs,
        );
        ret(&mut func, vec![r2]);
        let outer_op = func.defining_op(r2).expect("an op result");
        (func, outer_op)
    }

    fn reads_source(func: &Function, outer: OpId) -> bool {
        func.op(outer).operands[0] == func.args()[0]
    }

    #[test]
    fn reshape_of_reshape_reads_the_source() {
        // Dim 0 of the result (24) differs from the inner result's (6): no `0` can be there.
        let (mut func, outer) = reshape_chain(&[2, 3, 4], &[6, 4], &[24], vec![], None);
        canonicalize(&mut func);
        assert!(reads_source(&func, outer));
        assert_eq!(
            entry_opcodes(&func),
            [Opcode::Reshape, Opcode::Reshape, Opcode::Return],
            "the inner Reshape is left for dce"
        );
    }

    #[test]
    fn reshape_of_reshape_with_symbolic_dims_reads_the_source() {
        let dims = |tail: &[u64]| {
            let mut dims = vec![Dim::symbol("batch"), Dim::symbol("seq")];
            dims.extend(tail.iter().map(|&n| Dim::Static(n)));
            tensor(ElemType::F32, dims)
        };
        let mut func = Function::new(
            "f",
            vec![dims(&[768]), i64_tensor(&[4]), i64_tensor(&[3])],
            vec![dims(&[768])],
        );
        let (x, s1, s2) = (func.args()[0], func.args()[1], func.args()[2]);
        let r1 = build(
            &mut func,
            Opcode::Reshape,
            vec![x, s1],
            dims(&[12, 64]),
            vec![],
        );
        let r2 = build(
            &mut func,
            Opcode::Reshape,
            vec![r1, s2],
            dims(&[768]),
            vec![],
        );
        ret(&mut func, vec![r2]);
        canonicalize(&mut func);
        assert_eq!(
            returned(&func),
            [x],
            "the chain is a no-op and folds away entirely"
        );
    }

    #[test]
    fn reshape_of_reshape_that_may_copy_a_changed_dim_stays() {
        // Dim 0 of the result (6) may be a `0` copied from the inner result (6), but x has 2.
        let (mut func, outer) = reshape_chain(&[2, 3, 4], &[6, 4], &[6, 2, 2], vec![], None);
        assert_eq!(canonicalize(&mut func), 0);
        assert!(!reads_source(&func, outer));
    }

    #[test]
    fn reshape_of_reshape_with_allowzero_reads_the_source() {
        let allowzero = vec![("allowzero", Attribute::Int(1))];
        let (mut func, outer) = reshape_chain(&[2, 3, 4], &[6, 4], &[6, 2, 2], allowzero, None);
        canonicalize(&mut func);
        assert!(reads_source(&func, outer));
    }

    /// Canonicalizes the `[2, 3, 4] -> [6, 4] -> [6, 2, 2]` chain whose outer shape is a weight
    /// holding `shape`; returns whether the outer Reshape then reads the source.
    fn chain_with_constant_shape_reads_source(shape: &[i64]) -> bool {
        let mut module = Module::new();
        let bytes: Vec<u8> = shape.iter().flat_map(|v| v.to_le_bytes()).collect();
        let weight = module
            .weights
            .insert(
                "shape",
                TensorType::with_shape(ElemType::I64, &[3]),
                WeightBytes::Owned(Arc::from(bytes)),
            )
            .expect("a fresh store takes the weight");
        let make_shape = move |func: &mut Function| {
            let value = vec![("value", Attribute::Weight(weight))];
            build(func, Opcode::Weight, vec![], i64_tensor(&[3]), value)
        };
        let (func, outer) =
            reshape_chain(&[2, 3, 4], &[6, 4], &[6, 2, 2], vec![], Some(&make_shape));
        let id = module.add_function(func);
        assert_module_valid(&module, "before canonicalize");
        Canonicalize
            .run(&mut module)
            .expect("canonicalize does not fail");
        assert_module_valid(&module, "after canonicalize");
        reads_source(module.function(id), outer)
    }

    #[test]
    fn reshape_of_reshape_with_a_zero_free_constant_shape_reads_the_source() {
        assert!(chain_with_constant_shape_reads_source(&[6, 2, 2]));
        assert!(!chain_with_constant_shape_reads_source(&[0, 2, 2]));
    }

    #[test]
    fn folds_apply_inside_regions() {
        let bool_scalar = tensor(ElemType::Bool, vec![]);
        let mut func = Function::new(
            "f",
            vec![f32_tensor(&[4]), bool_scalar],
            vec![f32_tensor(&[4])],
        );
        let (x, cond) = (func.args()[0], func.args()[1]);
        let entry = func.entry_block();
        let if_op = func.build_op(entry, Opcode::If, vec![cond], vec![f32_tensor(&[4])], []);
        for _ in 0..2 {
            let region = func.add_region(if_op);
            let block = func.append_block(region, vec![]);
            let id_op = func.build_op(block, Opcode::Identity, vec![x], vec![f32_tensor(&[4])], []);
            let id = result(&func, id_op);
            func.build_op(block, Opcode::Yield, vec![id], vec![], []);
        }
        let if_result = result(&func, if_op);
        ret(&mut func, vec![if_result]);
        assert_eq!(canonicalize(&mut func), 2);
        for &region in &func.op(if_op).regions {
            let block = func.layout().region_blocks(region)[0];
            let yield_op = *func
                .layout()
                .block_ops(block)
                .last()
                .expect("the region ends with Yield");
            assert_eq!(func.op(yield_op).operands, [x]);
        }
    }

    #[test]
    fn the_pass_folds_every_function() {
        let mut module = Module::new();
        let ids: Vec<_> = (0..2)
            .map(|index| {
                let mut func = function(f32_tensor(&[4]), f32_tensor(&[4]));
                func.set_name(&format!("f{index}"));
                let x = func.args()[0];
                let id = build(
                    &mut func,
                    Opcode::Identity,
                    vec![x],
                    f32_tensor(&[4]),
                    vec![],
                );
                ret(&mut func, vec![id]);
                module.add_function(func)
            })
            .collect();
        assert_module_valid(&module, "before canonicalize");
        Canonicalize
            .run(&mut module)
            .expect("canonicalize does not fail");
        assert_module_valid(&module, "after canonicalize");
        for id in ids {
            let func = module.function(id);
            assert_eq!(returned(func), [func.args()[0]]);
        }
    }
}
