//! Functions and modules: the data-flow graph and, apart from it, the program order.
//!
//! A [`Function`] owns four arenas: ops, values, blocks and regions. The data-flow graph is the
//! ops with their operands, results, attributes and regions, and the values with their
//! definitions. Program order lives in a separate [`Layout`]: which ops a block holds and in
//! which order, and which blocks a region holds. A scheduler reorders a block by rewriting its
//! layout only; erasing an op removes it from the layout and leaves its data behind as an
//! unreachable tombstone (no handle is ever reused).
//!
//! The function body is a region; its entry block's arguments are the function's arguments.
//! The body's last op is `func.return`, whose operands are the function's results.

use crate::diag::Span;
use crate::ops::Opcode;
use crate::{AttrDict, Attribute, BlockId, FuncId, OpId, RegionId, Type, ValueId, WeightStore};
use cranelift_entity::{PrimaryMap, SecondaryMap};

/// Where a value comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ValueDef {
    /// Result number `index` of an op.
    Result { op: OpId, index: u32 },
    /// Argument number `index` of a block.
    BlockArg { block: BlockId, index: u32 },
}

#[derive(Clone, Debug)]
pub struct ValueData {
    pub ty: Type,
    pub def: ValueDef,
}

/// An operation: the data-flow part (its place in the program is in the [`Layout`]).
#[derive(Clone, Debug)]
pub struct OpData {
    pub opcode: Opcode,
    pub operands: Vec<ValueId>,
    pub results: Vec<ValueId>,
    pub attrs: AttrDict,
    pub regions: Vec<RegionId>,
    /// A source location name (an ONNX node name), printed as `loc("...")`.
    pub loc: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct BlockData {
    pub args: Vec<ValueId>,
}

#[derive(Clone, Debug)]
pub struct RegionData {
    /// The op that owns this region; `None` for the function body.
    pub parent: Option<OpId>,
}

/// Program order: the ops of each block and the blocks of each region, plus back-links.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    block_ops: SecondaryMap<BlockId, Vec<OpId>>,
    region_blocks: SecondaryMap<RegionId, Vec<BlockId>>,
    op_block: SecondaryMap<OpId, Option<BlockId>>,
    block_region: SecondaryMap<BlockId, Option<RegionId>>,
}

impl Layout {
    /// The ops of `block` in program order.
    pub fn block_ops(&self, block: BlockId) -> &[OpId] {
        &self.block_ops[block]
    }

    /// The blocks of `region` in order; the first is the entry block.
    pub fn region_blocks(&self, region: RegionId) -> &[BlockId] {
        &self.region_blocks[region]
    }

    /// The block that holds `op`, or `None` if the op was erased or never inserted.
    pub fn op_block(&self, op: OpId) -> Option<BlockId> {
        self.op_block[op]
    }

    pub fn block_region(&self, block: BlockId) -> Option<RegionId> {
        self.block_region[block]
    }

    /// Replaces the order of the ops of `block`. `order` must be a permutation of the block's
    /// current ops; returns `false` (and changes nothing) when it is not.
    pub fn reorder_block(&mut self, block: BlockId, order: Vec<OpId>) -> bool {
        let mut current = self.block_ops[block].clone();
        let mut proposed = order.clone();
        current.sort();
        proposed.sort();
        if current != proposed {
            return false;
        }
        self.block_ops[block] = order;
        true
    }
}

/// A function: arguments, results, a body region, and the arenas of its entities.
#[derive(Clone, Debug)]
pub struct Function {
    name: String,
    ops: PrimaryMap<OpId, OpData>,
    values: PrimaryMap<ValueId, ValueData>,
    blocks: PrimaryMap<BlockId, BlockData>,
    regions: PrimaryMap<RegionId, RegionData>,
    layout: Layout,
    body: RegionId,
    result_types: Vec<Type>,
    arg_attrs: Vec<AttrDict>,
    result_attrs: Vec<AttrDict>,
    /// Where each op was written, for ops parsed from text.
    op_spans: SecondaryMap<OpId, Option<Span>>,
    /// Where the function's name was written, for functions parsed from text.
    span: Option<Span>,
}

impl Function {
    /// A function with an empty entry block taking `arg_types`. Append ops, then a
    /// `func.return` whose operand types are `result_types`.
    pub fn new(name: &str, arg_types: Vec<Type>, result_types: Vec<Type>) -> Function {
        let mut regions = PrimaryMap::new();
        let body = regions.push(RegionData { parent: None });
        let mut func = Function {
            name: name.to_string(),
            ops: PrimaryMap::new(),
            values: PrimaryMap::new(),
            blocks: PrimaryMap::new(),
            regions,
            layout: Layout::default(),
            body,
            arg_attrs: vec![AttrDict::new(); arg_types.len()],
            result_attrs: vec![AttrDict::new(); result_types.len()],
            result_types,
            op_spans: SecondaryMap::new(),
            span: None,
        };
        func.append_block(body, arg_types);
        func
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn set_name(&mut self, name: &str) {
        self.name = name.to_string();
    }

    pub fn body(&self) -> RegionId {
        self.body
    }

    /// The entry block of the body.
    pub fn entry_block(&self) -> BlockId {
        self.layout.region_blocks(self.body)[0]
    }

    pub fn args(&self) -> &[ValueId] {
        &self.blocks[self.entry_block()].args
    }

    pub fn result_types(&self) -> &[Type] {
        &self.result_types
    }

    /// Appends a result to the signature, with no attributes (an importer that learns the
    /// result types last adds them this way; the `func.return` must match).
    pub fn push_result_type(&mut self, ty: Type) {
        self.result_types.push(ty);
        self.result_attrs.push(AttrDict::new());
    }

    /// Changes the declared type of result `index` (shape inference refines signatures).
    pub fn set_result_type(&mut self, index: usize, ty: Type) {
        self.result_types[index] = ty;
    }

    pub fn arg_attrs(&self, index: usize) -> &AttrDict {
        &self.arg_attrs[index]
    }

    pub fn arg_attrs_mut(&mut self, index: usize) -> &mut AttrDict {
        &mut self.arg_attrs[index]
    }

    pub fn result_attrs(&self, index: usize) -> &AttrDict {
        &self.result_attrs[index]
    }

    pub fn result_attrs_mut(&mut self, index: usize) -> &mut AttrDict {
        &mut self.result_attrs[index]
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn layout_mut(&mut self) -> &mut Layout {
        &mut self.layout
    }

    pub fn op(&self, op: OpId) -> &OpData {
        &self.ops[op]
    }

    pub fn op_mut(&mut self, op: OpId) -> &mut OpData {
        &mut self.ops[op]
    }

    pub fn value(&self, value: ValueId) -> &ValueData {
        &self.values[value]
    }

    pub fn value_type(&self, value: ValueId) -> &Type {
        &self.values[value].ty
    }

    /// Changes the type of a value (shape inference refines types in place).
    pub fn set_value_type(&mut self, value: ValueId, ty: Type) {
        self.values[value].ty = ty;
    }

    pub fn block(&self, block: BlockId) -> &BlockData {
        &self.blocks[block]
    }

    pub fn region(&self, region: RegionId) -> &RegionData {
        &self.regions[region]
    }

    /// The number of op handles ever created (erased ops included).
    pub fn n_op_handles(&self) -> usize {
        self.ops.len()
    }

    pub fn n_value_handles(&self) -> usize {
        self.values.len()
    }

    pub fn n_block_handles(&self) -> usize {
        self.blocks.len()
    }

    pub fn n_region_handles(&self) -> usize {
        self.regions.len()
    }

    /// Whether a handle is in range of this function's arenas (the verifier checks this first).
    pub fn is_valid_op(&self, op: OpId) -> bool {
        self.ops.is_valid(op)
    }

    pub fn is_valid_value(&self, value: ValueId) -> bool {
        self.values.is_valid(value)
    }

    pub fn is_valid_block(&self, block: BlockId) -> bool {
        self.blocks.is_valid(block)
    }

    pub fn is_valid_region(&self, region: RegionId) -> bool {
        self.regions.is_valid(region)
    }

    pub fn span(&self) -> Option<Span> {
        self.span
    }

    pub fn set_span(&mut self, span: Span) {
        self.span = Some(span);
    }

    pub fn op_span(&self, op: OpId) -> Option<Span> {
        self.op_spans[op]
    }

    pub fn set_op_span(&mut self, op: OpId, span: Span) {
        self.op_spans[op] = Some(span);
    }

    /// The op that defines `value`, or `None` for a block argument.
    pub fn defining_op(&self, value: ValueId) -> Option<OpId> {
        match self.values[value].def {
            ValueDef::Result { op, .. } => Some(op),
            ValueDef::BlockArg { .. } => None,
        }
    }

    /// Appends a new block with arguments of the given types to `region`.
    pub fn append_block(&mut self, region: RegionId, arg_types: Vec<Type>) -> BlockId {
        let block = self.blocks.push(BlockData::default());
        let args = arg_types
            .into_iter()
            .enumerate()
            .map(|(index, ty)| {
                self.values.push(ValueData {
                    ty,
                    def: ValueDef::BlockArg {
                        block,
                        index: index as u32,
                    },
                })
            })
            .collect();
        self.blocks[block].args = args;
        self.layout.region_blocks[region].push(block);
        self.layout.block_region[block] = Some(region);
        block
    }

    /// Adds a region owned by `op` (appended to its region list) and returns it, empty.
    pub fn add_region(&mut self, op: OpId) -> RegionId {
        let region = self.regions.push(RegionData { parent: Some(op) });
        self.ops[op].regions.push(region);
        region
    }

    /// Creates an op (not yet placed in any block) and its result values.
    pub fn create_op(
        &mut self,
        opcode: Opcode,
        operands: Vec<ValueId>,
        result_types: Vec<Type>,
        attrs: AttrDict,
    ) -> OpId {
        let op = self.ops.push(OpData {
            opcode,
            operands,
            results: Vec::new(),
            attrs,
            regions: Vec::new(),
            loc: None,
        });
        let results = result_types
            .into_iter()
            .enumerate()
            .map(|(index, ty)| {
                self.values.push(ValueData {
                    ty,
                    def: ValueDef::Result {
                        op,
                        index: index as u32,
                    },
                })
            })
            .collect();
        self.ops[op].results = results;
        op
    }

    /// Appends a result of type `ty` to `op` (the parser learns result types after an op's
    /// regions) and returns the new value.
    pub fn add_result(&mut self, op: OpId, ty: Type) -> ValueId {
        let index = self.ops[op].results.len() as u32;
        let value = self.values.push(ValueData {
            ty,
            def: ValueDef::Result { op, index },
        });
        self.ops[op].results.push(value);
        value
    }

    /// Places a created op at the end of `block`.
    pub fn append_op(&mut self, block: BlockId, op: OpId) {
        self.layout.block_ops[block].push(op);
        self.layout.op_block[op] = Some(block);
    }

    /// Places a created op right before `before` in `before`'s block.
    ///
    /// Returns `false` (and places nothing) when `before` is not in a block.
    pub fn insert_op_before(&mut self, before: OpId, op: OpId) -> bool {
        let Some(block) = self.layout.op_block[before] else {
            return false;
        };
        let ops = &mut self.layout.block_ops[block];
        let Some(pos) = ops.iter().position(|&o| o == before) else {
            return false;
        };
        ops.insert(pos, op);
        self.layout.op_block[op] = Some(block);
        true
    }

    /// Creates an op and appends it to `block`; returns the op.
    pub fn build_op(
        &mut self,
        block: BlockId,
        opcode: Opcode,
        operands: Vec<ValueId>,
        result_types: Vec<Type>,
        attrs: impl IntoIterator<Item = (&'static str, Attribute)>,
    ) -> OpId {
        let op = self.create_op(opcode, operands, result_types, attrs.into_iter().collect());
        self.append_op(block, op);
        op
    }

    /// Removes `op` from the program. Its handles stay valid but unreachable; its results must
    /// have no remaining uses (the verifier reports a use of an erased op's result).
    pub fn erase_op(&mut self, op: OpId) {
        if let Some(block) = self.layout.op_block[op].take() {
            self.layout.block_ops[block].retain(|&o| o != op);
        }
    }

    /// Removes every op for which `erase` returns true from the program, in one sweep.
    pub fn erase_ops_where(&mut self, mut erase: impl FnMut(OpId) -> bool) {
        let blocks: Vec<BlockId> = self.blocks.keys().collect();
        for block in blocks {
            let ops = std::mem::take(&mut self.layout.block_ops[block]);
            let mut kept = Vec::with_capacity(ops.len());
            for op in ops {
                if erase(op) {
                    self.layout.op_block[op] = None;
                } else {
                    kept.push(op);
                }
            }
            self.layout.block_ops[block] = kept;
        }
    }

    /// Rewrites every operand in the function through `map` (values not in the map stay), in
    /// one sweep over all placed ops.
    pub fn replace_uses(&mut self, map: &std::collections::HashMap<ValueId, ValueId>) {
        if map.is_empty() {
            return;
        }
        let resolve = |mut v: ValueId| {
            // Follow chains (a -> b -> c); a cycle cannot happen because a replacement always
            // points to a value defined earlier, but bound the walk anyway.
            for _ in 0..map.len() {
                match map.get(&v) {
                    Some(&next) if next != v => v = next,
                    _ => break,
                }
            }
            v
        };
        for op in self.walk_ops() {
            for operand in &mut self.ops[op].operands {
                *operand = resolve(*operand);
            }
        }
    }

    /// Every placed op, in program order, nested regions visited right after their owner.
    pub fn walk_ops(&self) -> Vec<OpId> {
        let mut out = Vec::new();
        self.walk_region(self.body, &mut out);
        out
    }

    fn walk_region(&self, region: RegionId, out: &mut Vec<OpId>) {
        for &block in self.layout.region_blocks(region) {
            for &op in self.layout.block_ops(block) {
                out.push(op);
                for &nested in &self.ops[op].regions {
                    self.walk_region(nested, out);
                }
            }
        }
    }

    /// How many times each value is used as an operand by placed ops.
    pub fn use_counts(&self) -> SecondaryMap<ValueId, u32> {
        let mut counts = SecondaryMap::with_capacity(self.values.len());
        for op in self.walk_ops() {
            for &v in &self.ops[op].operands {
                counts[v] += 1;
            }
        }
        counts
    }

    /// The ops that hold `op` transitively, innermost first (empty for a top-level op).
    pub fn ancestors(&self, op: OpId) -> Vec<OpId> {
        let mut out = Vec::new();
        let mut current = op;
        // The parent chain is finite for well-formed IR; bound it by the op count in case a
        // malformed layout forms a cycle.
        for _ in 0..self.ops.len() {
            let Some(block) = self.layout.op_block(current) else {
                break;
            };
            let Some(region) = self.layout.block_region(block) else {
                break;
            };
            let Some(parent) = self.regions[region].parent else {
                break;
            };
            out.push(parent);
            current = parent;
        }
        out
    }
}

/// A module: functions plus the weights they refer to.
#[derive(Clone, Debug, Default)]
pub struct Module {
    funcs: PrimaryMap<FuncId, Function>,
    pub weights: WeightStore,
}

impl Module {
    pub fn new() -> Module {
        Module::default()
    }

    pub fn add_function(&mut self, func: Function) -> FuncId {
        self.funcs.push(func)
    }

    pub fn function(&self, id: FuncId) -> &Function {
        &self.funcs[id]
    }

    pub fn function_mut(&mut self, id: FuncId) -> &mut Function {
        &mut self.funcs[id]
    }

    pub fn functions(&self) -> impl Iterator<Item = (FuncId, &Function)> {
        self.funcs.iter()
    }

    pub fn functions_mut(&mut self) -> impl Iterator<Item = (FuncId, &mut Function)> {
        self.funcs.iter_mut()
    }

    pub fn func_ids(&self) -> Vec<FuncId> {
        self.funcs.keys().collect()
    }

    pub fn n_functions(&self) -> usize {
        self.funcs.len()
    }

    /// Looks a function up by name.
    pub fn find_function(&self, name: &str) -> Option<FuncId> {
        self.funcs
            .iter()
            .find(|(_, f)| f.name() == name)
            .map(|(id, _)| id)
    }
}
