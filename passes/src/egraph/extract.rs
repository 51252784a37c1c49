//! Extraction: the cost of a term, and rebuilding a function from the cheapest terms.
//!
//! The cost of a node is the bytes it materializes plus one, plus the cost of its children,
//! each divided by the uses its value had in the input IR. The division shares a value's cost
//! among its users: a plain tree cost counts a shared value once per path to it, so it doubles
//! with every residual connection and saturated after about 7 decoder layers, leaving every
//! later layer unfused (found on the 16-layer llm_qdq_1g). Weights, `memc.none`, values the e-graph takes as given and ops that are always views (the `SAME_BYTES`
//! trait: reshapes and identities) materialize nothing; every other op materializes its result. So
//! `MatMul(a, DequantizeLinear(w, s))` pays for the float weight the DQ would create, and the
//! `memc.matmul_nbits` that reads `w` directly is cheaper by exactly that. The `+ 1` makes a
//! node's cost exceed its unshared children's; the rules only ever add a node whose children
//! are other classes of the input's DAG, so no class can reach itself.
//!
//! Rebuilding keeps what it can: every op of the input stays, with its location, whenever its
//! own node is as cheap as the best node of its class; otherwise the best node is built right
//! before the op (taking the op's location) and the op's uses move to it. Ops that lose their
//! last use this way are erased. If a best node would need a value that is not yet defined at
//! that point, [`rebuild`] fails and the caller keeps the function as it was.

use super::language::{type_bytes, Graph, Head, Node};
use egg::{CostFunction, Extractor, Id, Language};
use memc_ir::{Function, OpId, ValueId};
use std::collections::{HashMap, HashSet};

/// A term's cost: bytes materialized plus the number of ops.
pub struct MaterializedBytes<'g> {
    egraph: &'g Graph,
}

impl<'g> MaterializedBytes<'g> {
    pub fn new(egraph: &'g Graph) -> MaterializedBytes<'g> {
        MaterializedBytes { egraph }
    }

    /// The bytes `node` itself materializes.
    fn own_bytes(&self, node: &Node) -> u64 {
        let Head::Op(opcode) = node.head else {
            return 0;
        };
        let def = opcode.def();
        if matches!(opcode, memc_ir::Opcode::Weight | memc_ir::Opcode::None) || def.is_same_bytes()
        {
            return 0;
        }
        self.egraph
            .analysis
            .sigs
            .get(node.sig)
            .map_or(0, |sig| type_bytes(&sig.ty))
    }
}

impl CostFunction<Node> for MaterializedBytes<'_> {
    type Cost = f64;

    fn cost<C>(&mut self, enode: &Node, mut costs: C) -> f64
    where
        C: FnMut(Id) -> f64,
    {
        enode.fold(self.own_bytes(enode) as f64 + 1.0, |sum, child| {
            let uses = self.egraph[child].data.uses.max(1);
            sum + costs(child) / f64::from(uses)
        })
    }
}

/// What the e-graph was built from: which e-class each value of the entry block is in, and
/// which ops it modelled.
pub struct Built {
    pub class_of: HashMap<ValueId, Id>,
    /// The modelled ops (pure, one result, no regions) of the entry block, in program order,
    /// each with its node as built.
    pub ops: Vec<(OpId, Node)>,
}

/// Why rebuilding gave up.
#[derive(Debug)]
pub struct RebuildFailed;

/// Rewrites `func` so that every value used outside the modelled ops comes from the cheapest
/// term of its class. Returns how many ops it created.
pub fn rebuild(func: &mut Function, egraph: &Graph, built: &Built) -> Result<usize, RebuildFailed> {
    let original_uses = func.use_counts();
    let extractor = Extractor::new(egraph, MaterializedBytes::new(egraph));
    let mut cost_fn = MaterializedBytes::new(egraph);
    let find = |id: Id| egraph.find(id);

    // The first input op of each class, and its node with canonical children.
    let mut original: HashMap<Id, (OpId, Node)> = HashMap::new();
    let mut node_origin: HashMap<Node, OpId> = HashMap::new();
    for (op, node) in &built.ops {
        let canonical = node.clone().map_children(find);
        let class = find(built.class_of[&func.op(*op).results[0]]);
        original.entry(class).or_insert((*op, canonical.clone()));
        node_origin.entry(canonical).or_insert(*op);
    }

    // The node each class is built from: the input op's own node when it is as cheap as the
    // best, so that nothing changes without a gain.
    let mut choice: HashMap<Id, Node> = HashMap::new();
    let mut choose = |class: Id| -> Node {
        choice
            .entry(class)
            .or_insert_with(|| {
                let (best_cost, best) = (
                    extractor.find_best_cost(class),
                    extractor.find_best_node(class).clone(),
                );
                match original.get(&class) {
                    Some((_, own))
                        if cost_fn.cost(own, |c| extractor.find_best_cost(c)) <= best_cost =>
                    {
                        own.clone()
                    }
                    _ => best.map_children(find),
                }
            })
            .clone()
    };

    // The classes that must exist: those read by ops the e-graph does not model, and what
    // their chosen nodes read, transitively.
    let modelled: HashSet<OpId> = built.ops.iter().map(|(op, _)| *op).collect();
    let mut needed: HashSet<Id> = HashSet::new();
    let mut stack: Vec<Id> = Vec::new();
    for op in func.walk_ops() {
        if modelled.contains(&op) {
            continue;
        }
        for operand in &func.op(op).operands {
            if let Some(&class) = built.class_of.get(operand) {
                stack.push(find(class));
            }
        }
    }
    while let Some(class) = stack.pop() {
        if needed.insert(class) {
            stack.extend(choose(class).children.iter().copied());
        }
    }
    let choices: HashMap<Id, Node> = needed.iter().map(|&c| (c, choose(c))).collect();

    let entry = func.entry_block();
    let mut state = Materializer {
        egraph,
        choices: &choices,
        node_origin: &node_origin,
        value_of: HashMap::new(),
        available: func.args().iter().copied().collect(),
        created: 0,
    };
    let order: Vec<OpId> = func.layout().block_ops(entry).to_vec();
    for op in order {
        if !modelled.contains(&op) {
            state.available.extend(func.op(op).results.iter().copied());
            continue;
        }
        let result = func.op(op).results[0];
        let class = find(built.class_of[&result]);
        if state.value_of.contains_key(&class) || !needed.contains(&class) {
            continue;
        }
        let own = original.get(&class).filter(|(first, _)| *first == op);
        match own {
            Some((_, own_node)) if choices.get(&class) == Some(own_node) => {
                // The op itself is the choice: it stays, reading the chosen operands.
                let mut operands = Vec::with_capacity(own_node.children.len());
                for &child in &own_node.children {
                    operands.push(state.materialize(func, child, op, 0)?);
                }
                func.op_mut(op).operands = operands;
                state.value_of.insert(class, result);
                state.available.insert(result);
            }
            _ => {
                state.materialize(func, class, op, 0)?;
            }
        }
    }

    // Every modelled result moves to its class's value; ops left without uses go.
    let mut replacements = HashMap::new();
    for (op, _) in &built.ops {
        let result = func.op(*op).results[0];
        let class = find(built.class_of[&result]);
        if let Some(&value) = state.value_of.get(&class) {
            if value != result {
                replacements.insert(result, value);
            }
        }
    }
    func.replace_uses(&replacements);
    let mut uses = func.use_counts();
    for (op, _) in built.ops.iter().rev() {
        let result = func.op(*op).results[0];
        if uses[result] == 0 && original_uses[result] > 0 {
            for &operand in &func.op(*op).operands.clone() {
                uses[operand] = uses[operand].saturating_sub(1);
            }
            func.erase_op(*op);
        }
    }
    Ok(state.created)
}

/// The most nested materializations before rebuilding gives up (a bound on recursion).
const MAX_DEPTH: usize = 10_000;

struct Materializer<'a> {
    egraph: &'a Graph,
    choices: &'a HashMap<Id, Node>,
    node_origin: &'a HashMap<Node, OpId>,
    /// The value each built class has.
    value_of: HashMap<Id, ValueId>,
    /// The values defined at the current point of the entry block.
    available: HashSet<ValueId>,
    created: usize,
}

impl Materializer<'_> {
    /// The value of `class` before `before`: its value if it has one, else its chosen node
    /// built right before `before`.
    fn materialize(
        &mut self,
        func: &mut Function,
        class: Id,
        before: OpId,
        depth: usize,
    ) -> Result<ValueId, RebuildFailed> {
        let class = self.egraph.find(class);
        if let Some(&value) = self.value_of.get(&class) {
            return Ok(value);
        }
        if depth > MAX_DEPTH {
            return Err(RebuildFailed);
        }
        let node = self.choices.get(&class).ok_or(RebuildFailed)?;
        let opcode = match node.head {
            Head::Value(value) if self.available.contains(&value) => {
                self.value_of.insert(class, value);
                return Ok(value);
            }
            Head::Value(_) => return Err(RebuildFailed),
            Head::Op(opcode) => opcode,
        };
        let mut operands = Vec::with_capacity(node.children.len());
        for &child in &node.children {
            operands.push(self.materialize(func, child, before, depth + 1)?);
        }
        let sig = self
            .egraph
            .analysis
            .sigs
            .get(node.sig)
            .ok_or(RebuildFailed)?;
        let op = func.create_op(opcode, operands, vec![sig.ty.clone()], sig.attrs.clone());
        // A copy of an input op keeps that op's location; a new node takes the location of
        // the op it replaces.
        let from = self.node_origin.get(node).copied().unwrap_or(before);
        func.op_mut(op).loc = func.op(from).loc.clone();
        if !func.insert_op_before(before, op) {
            return Err(RebuildFailed);
        }
        self.created += 1;
        let value = func.op(op).results[0];
        self.value_of.insert(class, value);
        self.available.insert(value);
        Ok(value)
    }
}
