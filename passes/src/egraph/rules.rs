//! The rewrite rules of the `egraph` pass: named, one line each, with their guards.
//!
//! Each rule's searcher is an egg pattern over op names from the table; its guard and
//! right-hand side are a function of the match ([`Fuse`]), because the right-hand side needs
//! attributes and a result type that a pattern cannot spell. "`?b` holds X" means the e-class
//! `?b` has an e-node X; `?b` is the product's type-checked operand. A rule adds a node to
//! the matched e-class and never removes one, so the unfused form stays and extraction picks
//! the cheaper (see `extract.rs`).
//!
//! ```text
//! dq-matmul          (onnx.MatMul ?a ?b)   => (memc.matmul_nbits ?a ?w ?s [?zp])         if ?b holds fusable DQ(?w, ?s [, ?zp])
//! dq-t-matmul        (onnx.MatMul ?a ?b)   => (memc.matmul_nbits ?a ?w ?s [?zp]) trans_b if ?b holds Transpose(?d) {perm [1, 0]} used once, ?d holds fusable DQ
//! dq-gemm            (onnx.Gemm ?a ?b)     => (memc.matmul_nbits ?a ?w ?s [?zp]) trans_b = transB if alpha = 1, transA = 0, ?b holds fusable DQ
//! dq-gemm-c          (onnx.Gemm ?a ?b ?c)  => (memc.matmul_nbits ?a ?w ?s ?zp|none ?c)    as dq-gemm, and beta = 1 and ?c is [N]
//! nbits-bias         (onnx.Add ?x ?y)      => (memc.matmul_nbits ... ?c)                 if one of ?x, ?y holds a matmul_nbits without bias used once, the other (?c) is [N] of its type
//! transpose-matmul   (onnx.MatMul ?a ?b)   => (onnx.Gemm ?a' ?b') transA/transB          if ?a, ?b are 2-d and one (or both) holds Transpose(?x) {perm [1, 0]}
//! transpose-gemm     (onnx.Gemm ?a ?b)     => (onnx.Gemm ?a' ?b') transA/transB flipped  if ?a or ?b holds Transpose(?x) {perm [1, 0]}
//! transpose-gemm-c   (onnx.Gemm ?a ?b ?c)  => (onnx.Gemm ?a' ?b' ?c)                     as transpose-gemm
//! matmul-bias-gemm   (onnx.Add ?x ?y)      => (onnx.Gemm ?a ?b ?c)                       if one of ?x, ?y holds MatMul(?a, ?b) used once with 2-d ?a, ?b and the other (?c) is [N] or [M, N] of its type
//! ```
//!
//! A fusable DQ: `DequantizeLinear(?w, ?s [, ?zp])` used once in the input IR (no other
//! consumer reads the float weight; FIXME: also fuse when every consumer fuses), where `?w` is a
//! 2-d `memc.weight` of i4, ui4, i8 or ui8 with static dims, `?s` and `?zp` are `memc.weight`s
//! too (the plan packs them beside the weight), and the scales fit per-tensor, per-axis or
//! blocked quantization of `?w` exactly (the shapes `memc.matmul_nbits` verifies). Every
//! `memc.matmul_nbits` rule also needs what the target's packed kernels compute: an `?a` of an
//! element type in the target's `nbits.activation_types` (f32 on the CPU, see
//! `memc_ir::target::TargetInfo`), and a scale constant along runs of `K` (`memc_ir::ops::nbits_k_block`: blocked
//! along `K`, per output column or per tensor; not per-axis along `K` or blocked along `N`).

use super::language::{float_attr, int_attr, ClassFacts, Graph, Head, Node, Sig};
use egg::{Applier, Id, Pattern, PatternAst, Rewrite, Subst, Symbol, Var};
use memc_ir::target::TargetInfo;
use memc_ir::{AttrDict, Attribute, Dim, ElemType, Opcode, Type};

/// Every rule, in the order of the module doc, guarded for `target`.
pub fn rules(target: &TargetInfo) -> Vec<Rewrite<Node, super::language::Facts>> {
    let rule = |name: &str, pattern: &str, rhs: RhsFn| rule(name, pattern, rhs, target);
    vec![
        rule("dq-matmul", "(onnx.MatMul ?a ?b)", dq_matmul),
        rule("dq-t-matmul", "(onnx.MatMul ?a ?b)", dq_t_matmul),
        rule("dq-gemm", "(onnx.Gemm ?a ?b)", dq_gemm),
        rule("dq-gemm-c", "(onnx.Gemm ?a ?b ?c)", dq_gemm),
        rule("nbits-bias", "(onnx.Add ?a ?b)", nbits_bias),
        rule("transpose-matmul", "(onnx.MatMul ?a ?b)", transpose_matmul),
        rule("transpose-gemm", "(onnx.Gemm ?a ?b)", transpose_gemm),
        rule("transpose-gemm-c", "(onnx.Gemm ?a ?b ?c)", transpose_gemm),
        rule("matmul-bias-gemm", "(onnx.Add ?a ?b)", matmul_bias_gemm),
    ]
}

/// A rule's guard and right-hand side: the node to add to the matched class, or `None` when
/// the guard fails. It sees the e-graph, the matched class and the pattern's variables (and
/// the target, in the match).
type RhsFn = fn(&mut Graph, Id, &Match) -> Option<Node>;

/// The variables of a match, resolved to canonical classes, and the target the guards follow.
pub struct Match<'t> {
    a: Id,
    b: Id,
    c: Option<Id>,
    target: &'t TargetInfo,
}

fn rule(
    name: &str,
    pattern: &str,
    rhs: RhsFn,
    target: &TargetInfo,
) -> Rewrite<Node, super::language::Facts> {
    let searcher: Pattern<Node> = pattern
        .parse()
        .unwrap_or_else(|e| panic!("rule `{name}`: pattern `{pattern}` must parse: {e:?}"));
    let target = target.clone();
    Rewrite::new(name, searcher, Fuse { rhs, target })
        .unwrap_or_else(|e| panic!("rule `{name}` must be well formed: {e}"))
}

/// The applier shared by every rule: evaluates the rule's [`RhsFn`] and unions its node with
/// the matched class.
struct Fuse {
    rhs: RhsFn,
    target: TargetInfo,
}

impl Applier<Node, super::language::Facts> for Fuse {
    fn apply_one(
        &self,
        egraph: &mut Graph,
        eclass: Id,
        subst: &Subst,
        _searcher_ast: Option<&PatternAst<Node>>,
        _rule_name: Symbol,
    ) -> Vec<Id> {
        let var = |name: &str| -> Option<Id> {
            let v: Var = name.parse().expect("`?x` is a variable");
            subst.get(v).map(|&id| egraph.find(id))
        };
        let (Some(a), Some(b)) = (var("?a"), var("?b")) else {
            return Vec::new();
        };
        let matched = Match {
            a,
            b,
            c: var("?c"),
            target: &self.target,
        };
        let Some(node) = (self.rhs)(egraph, eclass, &matched) else {
            return Vec::new();
        };
        let id = egraph.add(node);
        if egraph.union(eclass, id) {
            vec![eclass]
        } else {
            Vec::new()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Queries on the e-graph.

fn facts(g: &Graph, class: Id) -> &ClassFacts {
    &g[class].data
}

/// The nodes of `class` with head `opcode`.
fn nodes_of(g: &Graph, class: Id, opcode: Opcode) -> Vec<Node> {
    g[class]
        .nodes
        .iter()
        .filter(|n| n.head == Head::Op(opcode))
        .cloned()
        .collect()
}

fn sig_of<'g>(g: &'g Graph, node: &Node) -> Option<&'g Sig> {
    g.analysis.sigs.get(node.sig)
}

fn attrs_of(g: &Graph, node: &Node) -> AttrDict {
    sig_of(g, node).map(|s| s.attrs.clone()).unwrap_or_default()
}

/// The static shape of `class` when it is 2-d.
fn matrix(g: &Graph, class: Id) -> Option<[u64; 2]> {
    match facts(g, class).static_shape()?.as_slice() {
        &[r, c] => Some([r, c]),
        _ => None,
    }
}

fn rank(g: &Graph, class: Id) -> Option<usize> {
    facts(g, class).tensor().map(|t| t.rank())
}

fn elem(g: &Graph, class: Id) -> Option<ElemType> {
    facts(g, class).tensor().map(|t| t.elem)
}

/// The child class of a `Transpose` node that swaps the two dims of a 2-d tensor.
fn transposed_2d(g: &Graph, class: Id) -> Option<Id> {
    if rank(g, class) != Some(2) {
        return None;
    }
    nodes_of(g, class, Opcode::Transpose)
        .into_iter()
        .find_map(|t| {
            let perm = attrs_of(g, &t).get("perm").and_then(Attribute::as_ints);
            matches!(perm.as_deref(), None | Some([1, 0])).then(|| g.find(t.children[0]))
        })
}

/// The quantized weight a fusable DQ in `class` reads: its operands and the attributes of
/// `memc.matmul_nbits` that describe them (all but `trans_b` and `K`/`N`, set by the rule).
struct Dequantized {
    w: Id,
    scales: Id,
    zero_points: Option<Id>,
    /// The stored weight's dims.
    shape: [u64; 2],
    /// Whether there is one scale for the whole weight.
    per_tensor: bool,
    attrs: AttrDict,
}

/// The first DQ in `class` that the guard of the module doc allows to fuse.
fn fusable_dq(g: &Graph, class: Id) -> Option<Dequantized> {
    if facts(g, class).uses != 1 {
        return None;
    }
    nodes_of(g, class, Opcode::DequantizeLinear)
        .into_iter()
        .find_map(|dq| check_dq(g, &dq))
}

fn check_dq(g: &Graph, dq: &Node) -> Option<Dequantized> {
    let (w, scales) = (g.find(dq.children[0]), g.find(dq.children[1]));
    let zero_points = dq.children.get(2).map(|&z| g.find(z));
    let is_weight = |c: Id| facts(g, c).weight;
    if !is_weight(w) || !is_weight(scales) || !zero_points.is_none_or(is_weight) {
        return None;
    }
    let w_elem = elem(g, w)?;
    if !matches!(
        w_elem,
        ElemType::I4 | ElemType::U4 | ElemType::I8 | ElemType::U8
    ) {
        return None;
    }
    let shape = matrix(g, w)?;
    let attrs = attrs_of(g, dq);
    let axis = match int_attr(&attrs, Opcode::DequantizeLinear, "axis")? {
        a @ (0 | 1) => a as usize,
        a @ (-2 | -1) => (a + 2) as usize,
        _ => return None,
    };
    let block_size = int_attr(&attrs, Opcode::DequantizeLinear, "block_size")?;
    let scale_shape = facts(g, scales).static_shape()?;
    let per_tensor = scale_shape.iter().product::<u64>() == 1 && scale_shape.len() <= 1;
    let fits = match block_size {
        0 => per_tensor || scale_shape == [shape[axis]],
        bs if bs > 0 => {
            let mut want = shape.to_vec();
            want[axis] = want[axis].div_ceil(bs as u64);
            scale_shape == want
        }
        _ => false,
    };
    let zp_fits = zero_points.is_none_or(|z| {
        facts(g, z).tensor().map(|t| &t.dims) == facts(g, scales).tensor().map(|t| &t.dims)
            && elem(g, z) == Some(w_elem)
    });
    if !fits || !zp_fits {
        return None;
    }
    let mut out = AttrDict::new();
    out.insert("bits", Attribute::Int(i64::from(w_elem.bits())));
    out.insert("block_size", Attribute::Int(block_size));
    out.insert("axis", Attribute::Int(axis as i64));
    Some(Dequantized {
        w,
        scales,
        zero_points,
        shape,
        per_tensor,
        attrs: out,
    })
}

/// Interns a signature and builds the node.
fn node(g: &mut Graph, opcode: Opcode, attrs: AttrDict, ty: Type, children: Vec<Id>) -> Node {
    let sig = g.analysis.sigs.intern(Sig { attrs, ty });
    Node {
        head: Head::Op(opcode),
        sig,
        children,
    }
}

/// A `memc.none` node for a left-out optional operand before a given one.
fn none(g: &mut Graph) -> Id {
    let n = node(g, Opcode::None, AttrDict::new(), Type::None, Vec::new());
    g.add(n)
}

/// The `memc.matmul_nbits` node for `a x op(dequantize(w))` (+ `bias`), typed like `root`.
fn matmul_nbits(
    g: &mut Graph,
    root: Id,
    a: Id,
    dq: Dequantized,
    trans_b: bool,
    bias: Option<Id>,
    target: &TargetInfo,
) -> Option<Node> {
    let [k, n] = if trans_b {
        [dq.shape[1], dq.shape[0]]
    } else {
        dq.shape
    };
    // A is [..., K] in the float type of the scales; the result is the matched class's type.
    let a_type = facts(g, a).tensor()?;
    if a_type.elem != elem(g, dq.scales)? || a_type.rank() == 0 {
        return None;
    }
    if matches!(a_type.dims.last(), Some(Dim::Static(a_k)) if *a_k != k) {
        return None;
    }
    // The packed kernels need the scale constant along runs of K, and compute only the
    // target's activation types.
    let axis = int_attr(&dq.attrs, Opcode::MatMulNBits, "axis")? as usize;
    let block_size = u64::try_from(int_attr(&dq.attrs, Opcode::MatMulNBits, "block_size")?).ok()?;
    memc_ir::ops::nbits_k_block(k, trans_b, axis, block_size, dq.per_tensor)?;
    if !target.nbits.activation_types.contains(&a_type.elem) {
        return None;
    }
    let mut attrs = dq.attrs;
    attrs.insert("K", Attribute::Int(i64::try_from(k).ok()?));
    attrs.insert("N", Attribute::Int(i64::try_from(n).ok()?));
    if trans_b {
        attrs.insert("trans_b", Attribute::Int(1));
    }
    let mut children = vec![a, dq.w, dq.scales];
    match (dq.zero_points, bias) {
        (Some(z), bias) => {
            children.push(z);
            children.extend(bias);
        }
        (None, Some(bias)) => {
            children.push(none(g));
            children.push(bias);
        }
        (None, None) => {}
    }
    let ty = facts(g, root).ty.clone();
    Some(node(g, Opcode::MatMulNBits, attrs, ty, children))
}

/// Whether `class` is a 1-d `[n]` tensor of element type `elem`.
fn is_bias(g: &Graph, class: Id, n: u64, elem: ElemType) -> bool {
    facts(g, class)
        .tensor()
        .is_some_and(|t| t.elem == elem && t.static_shape().as_deref() == Some(&[n][..]))
}

// ---------------------------------------------------------------------------------------------
// The rules' right-hand sides.

/// `dq-matmul`.
fn dq_matmul(g: &mut Graph, root: Id, m: &Match) -> Option<Node> {
    let dq = fusable_dq(g, m.b)?;
    matmul_nbits(g, root, m.a, dq, false, None, m.target)
}

/// `dq-t-matmul`.
fn dq_t_matmul(g: &mut Graph, root: Id, m: &Match) -> Option<Node> {
    if facts(g, m.b).uses != 1 {
        return None;
    }
    let d = transposed_2d(g, m.b)?;
    let dq = fusable_dq(g, d)?;
    matmul_nbits(g, root, m.a, dq, true, None, m.target)
}

/// `dq-gemm`: the Gemm node of the match is found again by its operands, for its attributes.
fn dq_gemm(g: &mut Graph, root: Id, m: &Match) -> Option<Node> {
    let gemm = nodes_of(g, root, Opcode::Gemm).into_iter().find(|n| {
        let ch: Vec<Id> = n.children.iter().map(|&c| g.find(c)).collect();
        ch[0] == m.a && ch[1] == m.b && ch.get(2).copied() == m.c
    })?;
    let attrs = attrs_of(g, &gemm);
    let alpha = float_attr(&attrs, Opcode::Gemm, "alpha")?;
    let beta = float_attr(&attrs, Opcode::Gemm, "beta")?;
    if alpha != 1.0 || int_attr(&attrs, Opcode::Gemm, "transA")? != 0 {
        return None;
    }
    let trans_b = int_attr(&attrs, Opcode::Gemm, "transB")? != 0;
    let dq = fusable_dq(g, m.b)?;
    let n = if trans_b { dq.shape[0] } else { dq.shape[1] };
    let bias = match m.c {
        None => None,
        Some(c) if beta == 1.0 && is_bias(g, c, n, elem(g, root)?) => Some(c),
        Some(_) => return None,
    };
    matmul_nbits(g, root, m.a, dq, trans_b, bias, m.target)
}

/// `nbits-bias`: either operand of the Add may be the product (no blanket commutativity: the
/// rule itself tries both orders).
fn nbits_bias(g: &mut Graph, root: Id, m: &Match) -> Option<Node> {
    let root_elem = elem(g, root)?;
    for (product, bias) in [(m.a, m.b), (m.b, m.a)] {
        if facts(g, product).uses != 1 || facts(g, product).ty != facts(g, root).ty {
            continue;
        }
        for fused in nodes_of(g, product, Opcode::MatMulNBits) {
            let attrs = attrs_of(g, &fused);
            let has_bias = fused.children.len() == 5;
            let n = int_attr(&attrs, Opcode::MatMulNBits, "N").and_then(|n| u64::try_from(n).ok());
            let Some(n) = n.filter(|_| !has_bias) else {
                continue;
            };
            if !is_bias(g, bias, n, root_elem) {
                continue;
            }
            let mut children = fused.children.clone();
            if children.len() == 3 {
                children.push(none(g));
            }
            children.push(bias);
            let ty = facts(g, root).ty.clone();
            return Some(node(g, Opcode::MatMulNBits, attrs, ty, children));
        }
    }
    None
}

/// `transpose-matmul`.
fn transpose_matmul(g: &mut Graph, root: Id, m: &Match) -> Option<Node> {
    if rank(g, m.a) != Some(2) || rank(g, m.b) != Some(2) {
        return None;
    }
    let (ta, tb) = (transposed_2d(g, m.a), transposed_2d(g, m.b));
    if ta.is_none() && tb.is_none() {
        return None;
    }
    let mut attrs = AttrDict::new();
    if ta.is_some() {
        attrs.insert("transA", Attribute::Int(1));
    }
    if tb.is_some() {
        attrs.insert("transB", Attribute::Int(1));
    }
    let children = vec![ta.unwrap_or(m.a), tb.unwrap_or(m.b)];
    let ty = facts(g, root).ty.clone();
    Some(node(g, Opcode::Gemm, attrs, ty, children))
}

/// `transpose-gemm`.
fn transpose_gemm(g: &mut Graph, root: Id, m: &Match) -> Option<Node> {
    let (ta, tb) = (transposed_2d(g, m.a), transposed_2d(g, m.b));
    if ta.is_none() && tb.is_none() {
        return None;
    }
    let gemm = nodes_of(g, root, Opcode::Gemm).into_iter().find(|n| {
        let ch: Vec<Id> = n.children.iter().map(|&c| g.find(c)).collect();
        ch[0] == m.a && ch[1] == m.b && ch.get(2).copied() == m.c
    })?;
    let mut attrs = attrs_of(g, &gemm);
    let mut children = vec![m.a, m.b];
    for (index, (name, transposed)) in [("transA", ta), ("transB", tb)].into_iter().enumerate() {
        if let Some(x) = transposed {
            let flipped = 1 - int_attr(&attrs, Opcode::Gemm, name)?.clamp(0, 1);
            attrs.insert(name, Attribute::Int(flipped));
            children[index] = x;
        }
    }
    children.extend(m.c);
    let ty = facts(g, root).ty.clone();
    Some(node(g, Opcode::Gemm, attrs, ty, children))
}

/// `matmul-bias-gemm`.
fn matmul_bias_gemm(g: &mut Graph, root: Id, m: &Match) -> Option<Node> {
    let root_elem = elem(g, root)?;
    let [rows, cols] = matrix(g, root)?;
    for (product, bias) in [(m.a, m.b), (m.b, m.a)] {
        if facts(g, product).uses != 1 || facts(g, product).ty != facts(g, root).ty {
            continue;
        }
        let fits = facts(g, bias).tensor().is_some_and(|t| {
            t.elem == root_elem
                && matches!(t.static_shape().as_deref(), Some([n]) if *n == cols)
                    | matches!(t.static_shape().as_deref(), Some([r, n]) if *r == rows && *n == cols)
        });
        if !fits {
            continue;
        }
        for matmul in nodes_of(g, product, Opcode::MatMul) {
            let (a, b) = (g.find(matmul.children[0]), g.find(matmul.children[1]));
            if rank(g, a) != Some(2) || rank(g, b) != Some(2) {
                continue;
            }
            let ty = facts(g, root).ty.clone();
            return Some(node(g, Opcode::Gemm, AttrDict::new(), ty, vec![a, b, bias]));
        }
    }
    None
}
