//! Program -> MLIR module (see the module doc of [`crate::mlir`]).

use super::{MlirError, Session};
use crate::kernel::{
    BinaryOp, Contract, ContractB, Im2colView, IndirectIndex, Inst, InstKind, Kernel, KernelBody,
    LoopKernel, MatView, NBitsMatMul, ReduceOp, Region as Mem, Scalar, Stage, Store, UnaryOp, View,
};
use crate::nbits::row_bytes;
use crate::Program;
use melior::dialect::arith::{CmpfPredicate, CmpiPredicate};
use melior::ir::attribute::{
    DenseI32ArrayAttribute, DenseI64ArrayAttribute, FloatAttribute, IntegerAttribute,
    StringAttribute, TypeAttribute,
};
use melior::ir::operation::{OperationBuilder, OperationLike, OperationRef};
use melior::ir::r#type::{FunctionType, IntegerType, MemRefType};
use melior::ir::{
    Attribute, Block, BlockLike, Identifier, Location, Module, Region, RegionLike, Type, Value,
    ValueLike,
};
use memc_passes::memory::MemoryPlan;
use std::cell::RefCell;
use std::collections::HashMap;

/// What [`super::emit_text`] is given besides the program.
#[derive(Clone, Copy, Default)]
pub struct EmitOptions<'p> {
    /// The memory plan the program was lowered from: its buffers become named views.
    pub plan: Option<&'p MemoryPlan>,
}

/// `ShapedType::kDynamic`: a dynamic offset, size or stride in static-value lists.
const DYNAMIC: i64 = i64::MIN;

/// Values are handles into the context; see [`own`].
type V<'c> = Value<'c, 'c>;
type R<T> = Result<T, MlirError>;
/// A loop body: the block, the induction variable (index) and the carried values in; the values
/// to carry on out.
type LoopBody<'f, 'c> = dyn FnMut(&Block<'c>, V<'c>, &[V<'c>]) -> R<Vec<V<'c>>> + 'f;
/// A loop nest's body: the block, the loop indices (i64) and the carried values.
type NestBody<'f, 'c> = dyn FnMut(&Block<'c>, &[V<'c>], &[V<'c>]) -> R<Vec<V<'c>>> + 'f;
/// A branch of an `scf.if`: its block in, the values it yields out.
type Branch<'f, 'c> = dyn FnMut(&Block<'c>) -> R<Vec<V<'c>>> + 'f;

/// Builds `program` as a module in `session`'s context and verifies it.
pub(crate) fn emit_module<'c>(
    session: &'c Session,
    program: &Program,
    options: &EmitOptions,
) -> R<Module<'c>> {
    let b = Builder {
        ctx: &session.context,
        loc: Location::unknown(&session.context),
    };
    let module = Module::new(b.loc);
    let sizes = [program.arena_size, program.weights_size, program.state_size];
    for s in sizes {
        if s > i64::MAX as u64 / 16 {
            return Err(MlirError::Unsupported(format!(
                "a memory region of {s} bytes is too large"
            )));
        }
    }
    let region_types: Vec<Type> = sizes.iter().map(|&s| b.memref(b.i(8), &[s])).collect();
    module
        .body()
        .append_operation(plan_function(&b, program, options, &region_types)?);
    module
        .body()
        .append_operation(main_function(&b, program, &region_types)?);
    if !module.as_operation().verify() {
        return Err(MlirError::Verify(
            session.diagnostics.take("the verifier gave no message"),
        ));
    }
    Ok(module)
}

/// Thin helpers over melior's generic operation builder.
struct Builder<'c> {
    ctx: &'c melior::Context,
    loc: Location<'c>,
}

impl<'c> Builder<'c> {
    fn i(&self, bits: u32) -> Type<'c> {
        IntegerType::new(self.ctx, bits).into()
    }

    fn index(&self) -> Type<'c> {
        Type::index(self.ctx)
    }

    fn memref(&self, elem: Type<'c>, shape: &[u64]) -> Type<'c> {
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        MemRefType::new(elem, &dims, None, None).into()
    }

    /// A 2-D memref with a dynamic offset and static strides.
    fn strided(&self, elem: Type<'c>, shape: &[i64], strides: &[i64]) -> Type<'c> {
        let layout = melior::ir::attribute::StridedLayoutAttribute::new(self.ctx, DYNAMIC, strides);
        MemRefType::new(elem, shape, Some(layout.into()), None).into()
    }

    /// The register type of a kernel scalar (a storage type's is its compute type's).
    fn scalar(&self, s: Scalar) -> Type<'c> {
        match s.compute() {
            Scalar::Bool => self.i(1),
            Scalar::I8 | Scalar::U8 => self.i(8),
            Scalar::I16 | Scalar::U16 => self.i(16),
            Scalar::I32 | Scalar::U32 => self.i(32),
            Scalar::I64 | Scalar::U64 => self.i(64),
            Scalar::F32 => Type::float32(self.ctx),
            Scalar::F64 => Type::float64(self.ctx),
            _ => Type::float32(self.ctx),
        }
    }

    /// The memory type of a kernel scalar: bools, the sub-byte integers and the float8 and
    /// float4 codes are bytes; f16 and bf16 are MLIR's.
    fn stored(&self, s: Scalar) -> Type<'c> {
        match s {
            Scalar::F16 => Type::float16(self.ctx),
            Scalar::BF16 => Type::bfloat16(self.ctx),
            _ if s.size() == 1 => self.i(8),
            _ => self.scalar(s),
        }
    }

    fn attr(&self, name: &str, value: Attribute<'c>) -> (Identifier<'c>, Attribute<'c>) {
        (Identifier::new(self.ctx, name), value)
    }

    fn str_attr(&self, name: &str, value: &str) -> (Identifier<'c>, Attribute<'c>) {
        self.attr(name, StringAttribute::new(self.ctx, value).into())
    }

    /// Builds `name` and appends it to `blk`.
    fn op<'a>(
        &self,
        blk: &'a Block<'c>,
        name: &str,
        operands: &[V<'c>],
        results: &[Type<'c>],
        attrs: &[(Identifier<'c>, Attribute<'c>)],
        regions: Vec<Region<'c>>,
    ) -> R<OperationRef<'c, 'a>> {
        let op = OperationBuilder::new(name, self.loc)
            .add_operands(operands)
            .add_results(results)
            .add_attributes(attrs)
            .add_regions_vec(regions)
            .build()
            .map_err(|e| MlirError::Build {
                op: name.to_string(),
                message: e.to_string(),
            })?;
        Ok(blk.append_operation(op))
    }

    /// An operation with one result, appended to `blk`; the result.
    fn val(
        &self,
        blk: &Block<'c>,
        name: &str,
        operands: &[V<'c>],
        ty: Type<'c>,
        attrs: &[(Identifier<'c>, Attribute<'c>)],
    ) -> R<V<'c>> {
        let op = self.op(blk, name, operands, &[ty], attrs, vec![])?;
        first(op)
    }

    fn bin(&self, blk: &Block<'c>, name: &str, x: V<'c>, y: V<'c>) -> R<V<'c>> {
        self.val(blk, name, &[x, y], x.r#type(), &[])
    }

    fn un(&self, blk: &Block<'c>, name: &str, x: V<'c>) -> R<V<'c>> {
        self.val(blk, name, &[x], x.r#type(), &[])
    }

    fn cast(&self, blk: &Block<'c>, name: &str, x: V<'c>, ty: Type<'c>) -> R<V<'c>> {
        self.val(blk, name, &[x], ty, &[])
    }

    fn cmpi(&self, blk: &Block<'c>, p: CmpiPredicate, x: V<'c>, y: V<'c>) -> R<V<'c>> {
        let pred = IntegerAttribute::new(self.i(64), p as i64).into();
        self.val(
            blk,
            "arith.cmpi",
            &[x, y],
            self.i(1),
            &[self.attr("predicate", pred)],
        )
    }

    fn cmpf(&self, blk: &Block<'c>, p: CmpfPredicate, x: V<'c>, y: V<'c>) -> R<V<'c>> {
        let pred = IntegerAttribute::new(self.i(64), p as i64).into();
        self.val(
            blk,
            "arith.cmpf",
            &[x, y],
            self.i(1),
            &[self.attr("predicate", pred)],
        )
    }

    fn select(&self, blk: &Block<'c>, c: V<'c>, x: V<'c>, y: V<'c>) -> R<V<'c>> {
        self.val(blk, "arith.select", &[c, x, y], x.r#type(), &[])
    }

    /// An integer constant of `ty` (an integer or index type), `v` wrapped to its width.
    fn int(&self, blk: &Block<'c>, ty: Type<'c>, v: i64) -> R<V<'c>> {
        let v = match IntegerType::try_from(ty) {
            Ok(t) if t.width() < 64 => {
                let shift = 64 - t.width();
                (v << shift) >> shift
            }
            _ => v,
        };
        let attr = IntegerAttribute::new(ty, v).into();
        self.val(blk, "arith.constant", &[], ty, &[self.attr("value", attr)])
    }

    fn idx(&self, blk: &Block<'c>, v: i64) -> R<V<'c>> {
        self.int(blk, self.index(), v)
    }

    fn i64c(&self, blk: &Block<'c>, v: i64) -> R<V<'c>> {
        self.int(blk, self.i(64), v)
    }

    fn float(&self, blk: &Block<'c>, ty: Type<'c>, v: f64) -> R<V<'c>> {
        let attr = FloatAttribute::new(self.ctx, ty, v).into();
        self.val(blk, "arith.constant", &[], ty, &[self.attr("value", attr)])
    }

    /// The constant `bits` (as [`InstKind::Const`] reads them) of kernel type `s`.
    fn constant(&self, blk: &Block<'c>, s: Scalar, bits: u64) -> R<V<'c>> {
        match s {
            _ if s.is_float() => self.float(blk, self.scalar(s), f64::from_bits(bits)),
            Scalar::Bool => self.int(blk, self.i(1), i64::from(bits != 0)),
            _ => self.int(blk, self.scalar(s), bits as i64),
        }
    }

    fn to_index(&self, blk: &Block<'c>, x: V<'c>) -> R<V<'c>> {
        self.cast(blk, "arith.index_cast", x, self.index())
    }

    fn to_i64(&self, blk: &Block<'c>, x: V<'c>) -> R<V<'c>> {
        self.cast(blk, "arith.index_cast", x, self.i(64))
    }

    fn load(&self, blk: &Block<'c>, mem: V<'c>, at: V<'c>, ty: Type<'c>) -> R<V<'c>> {
        self.val(blk, "memref.load", &[mem, at], ty, &[])
    }

    fn store(&self, blk: &Block<'c>, v: V<'c>, mem: V<'c>, at: V<'c>) -> R<()> {
        self.op(blk, "memref.store", &[v, mem, at], &[], &[], vec![])?;
        Ok(())
    }

    /// `memref.view` of the i8 memref `region` at byte `offset` as a memref of `ty`.
    fn view(&self, blk: &Block<'c>, region: V<'c>, offset: u64, ty: Type<'c>) -> R<V<'c>> {
        let shift = self.idx(blk, offset as i64)?;
        self.val(blk, "memref.view", &[region, shift], ty, &[])
    }

    /// `memref.reinterpret_cast` of `source` to `ty` with a dynamic offset (or a static one
    /// when `offset` is `None`: 0) and static sizes and strides.
    fn reinterpret(
        &self,
        blk: &Block<'c>,
        source: V<'c>,
        offset: Option<V<'c>>,
        sizes: &[i64],
        strides: &[i64],
        ty: Type<'c>,
    ) -> R<V<'c>> {
        let mut operands = vec![source];
        operands.extend(offset);
        let n_offsets = operands.len() as i32 - 1;
        let attrs = [
            self.attr(
                "operandSegmentSizes",
                DenseI32ArrayAttribute::new(self.ctx, &[1, n_offsets, 0, 0]).into(),
            ),
            self.attr(
                "static_offsets",
                DenseI64ArrayAttribute::new(self.ctx, &[if n_offsets == 1 { DYNAMIC } else { 0 }])
                    .into(),
            ),
            self.attr(
                "static_sizes",
                DenseI64ArrayAttribute::new(self.ctx, sizes).into(),
            ),
            self.attr(
                "static_strides",
                DenseI64ArrayAttribute::new(self.ctx, strides).into(),
            ),
        ];
        self.val(blk, "memref.reinterpret_cast", &operands, ty, &attrs)
    }

    fn yield_(&self, blk: &Block<'c>, name: &str, values: &[V<'c>]) -> R<()> {
        self.op(blk, name, values, &[], &[], vec![])?;
        Ok(())
    }

    /// `scf.for %i = 0 to extent` carrying `inits`; `body` gets the block, the induction
    /// variable (index) and the carried values, and returns the values to carry on.
    fn for_loop(
        &self,
        blk: &Block<'c>,
        extent: u64,
        inits: &[V<'c>],
        body: &mut LoopBody<'_, 'c>,
    ) -> R<Vec<V<'c>>> {
        let (lo, hi, one) = (
            self.idx(blk, 0)?,
            self.idx(blk, extent as i64)?,
            self.idx(blk, 1)?,
        );
        let types: Vec<Type<'c>> = inits.iter().map(|v| v.r#type()).collect();
        let mut args = vec![(self.index(), self.loc)];
        args.extend(types.iter().map(|&t| (t, self.loc)));
        let inner = Block::new(&args);
        {
            let iv = arg(&inner, 0)?;
            let carried = (1..args.len())
                .map(|i| arg(&inner, i))
                .collect::<R<Vec<_>>>()?;
            let next = body(&inner, iv, &carried)?;
            self.yield_(&inner, "scf.yield", &next)?;
        }
        let region = Region::new();
        region.append_block(inner);
        let mut operands = vec![lo, hi, one];
        operands.extend_from_slice(inits);
        let op = self.op(blk, "scf.for", &operands, &types, &[], vec![region])?;
        (0..types.len()).map(|i| result(op, i)).collect()
    }

    /// Nested `scf.for` loops over `extents` (row-major), carrying `inits`; `body` gets the
    /// innermost block, `prefix` followed by the induction variables as i64, and the carried
    /// values. With no extents the body runs once, in `blk`.
    fn nest(
        &self,
        blk: &Block<'c>,
        extents: &[u64],
        prefix: &[V<'c>],
        inits: &[V<'c>],
        body: &mut NestBody<'_, 'c>,
    ) -> R<Vec<V<'c>>> {
        let Some((&first_extent, rest)) = extents.split_first() else {
            return body(blk, prefix, inits);
        };
        self.for_loop(blk, first_extent, inits, &mut |inner, iv, carried| {
            let mut idx: Vec<V<'c>> = prefix.to_vec();
            idx.push(self.to_i64(inner, iv)?);
            self.nest(inner, rest, &idx, carried, body)
        })
    }

    /// `scf.if cond` yielding values of `types`; each branch builds its values.
    fn if_else(
        &self,
        blk: &Block<'c>,
        cond: V<'c>,
        types: &[Type<'c>],
        then: &mut Branch<'_, 'c>,
        else_: &mut Branch<'_, 'c>,
    ) -> R<Vec<V<'c>>> {
        let mut regions = Vec::new();
        let branches: [&mut Branch<'_, 'c>; 2] = [then, else_];
        for branch in branches {
            let inner = Block::new(&[]);
            let values = branch(&inner)?;
            self.yield_(&inner, "scf.yield", &values)?;
            let region = Region::new();
            region.append_block(inner);
            regions.push(region);
        }
        let op = self.op(blk, "scf.if", &[cond], types, &[], regions)?;
        (0..types.len()).map(|i| result(op, i)).collect()
    }
}

fn first<'c>(op: OperationRef<'c, '_>) -> R<V<'c>> {
    result(op, 0)
}

fn result<'c>(op: OperationRef<'c, '_>, i: usize) -> R<V<'c>> {
    op.result(i)
        .map(|r| own(r.into()))
        .map_err(|e| MlirError::Build {
            op: op
                .name()
                .as_string_ref()
                .as_str()
                .unwrap_or("?")
                .to_string(),
            message: e.to_string(),
        })
}

fn arg<'c>(blk: &Block<'c>, i: usize) -> R<V<'c>> {
    blk.argument(i)
        .map(|a| own(a.into()))
        .map_err(|e| MlirError::Build {
            op: "block argument".into(),
            message: e.to_string(),
        })
}

/// Where a kernel view's elements are: a 1-D memref and the element index of the view's
/// element 0 in it.
#[derive(Clone, Copy)]
struct Base<'c> {
    mem: V<'c>,
    offset: i64,
}

/// A planned arena buffer, as a flat memref of its elements.
struct Buffer<'c> {
    offset: u64,
    bytes: u64,
    elem: Scalar,
    flat: V<'c>,
}

/// The state of `@memc_plan` while kernels are emitted into its entry block.
struct PlanFn<'c, 'a> {
    entry: &'a Block<'c>,
    regions: [V<'c>; 3],
    sizes: [u64; 3],
    buffers: Vec<Buffer<'c>>,
    /// Typed views of whole regions, by (region, element type).
    whole: RefCell<HashMap<(usize, Scalar), V<'c>>>,
}

fn region_index(r: Mem) -> usize {
    match r {
        Mem::Arena => 0,
        Mem::Weights => 1,
        Mem::State => 2,
    }
}

impl<'c, 'a> PlanFn<'c, 'a> {
    /// The whole region as a memref of `elem` (created once, in the entry block).
    fn whole(&self, b: &Builder<'c>, region: Mem, elem: Scalar) -> R<V<'c>> {
        let r = region_index(region);
        if let Some(&v) = self.whole.borrow().get(&(r, elem)) {
            return Ok(v);
        }
        let n = self.sizes[r] / elem.size();
        let v = b.view(
            self.entry,
            self.regions[r],
            0,
            b.memref(b.stored(elem), &[n]),
        )?;
        self.whole.borrow_mut().insert((r, elem), v);
        Ok(v)
    }

    /// Where the elements `[lo, hi]` (element offsets from byte `byte_offset`) of a view of
    /// `elem` in `region` are: inside a planned buffer of the same type when one holds them all,
    /// else the whole region.
    fn base(
        &self,
        b: &Builder<'c>,
        region: Mem,
        elem: Scalar,
        byte_offset: i64,
        span: Option<(i128, i128)>,
    ) -> R<Base<'c>> {
        let size = elem.size() as i64;
        if byte_offset.rem_euclid(size) != 0 {
            return Err(MlirError::Unsupported(format!(
                "a view of {} at byte {byte_offset}, which is not a multiple of its size",
                elem.name()
            )));
        }
        if let (Mem::Arena, Some((lo, hi))) = (region, span) {
            let (lo, hi) = (
                byte_offset as i128 + lo * size as i128,
                byte_offset as i128 + (hi + 1) * size as i128,
            );
            let inside = self.buffers.iter().find(|buf| {
                buf.elem == elem
                    && lo >= buf.offset as i128
                    && hi <= (buf.offset + buf.bytes) as i128
                    && (byte_offset - buf.offset as i64) % size == 0
            });
            if let Some(buf) = inside {
                return Ok(Base {
                    mem: buf.flat,
                    offset: (byte_offset - buf.offset as i64) / size,
                });
            }
        }
        Ok(Base {
            mem: self.whole(b, region, elem)?,
            offset: byte_offset / size,
        })
    }
}

/// The lowest and highest element offsets a view reaches over `extents` (`strides` per axis;
/// missing strides are 0).
fn span(strides: &[i64], extents: &[u64]) -> Option<(i128, i128)> {
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&s, &e) in strides.iter().zip(extents) {
        if e == 0 {
            return None;
        }
        let reach = s as i128 * (e as i128 - 1);
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    Some((lo, hi))
}

fn plan_function<'c>(
    b: &Builder<'c>,
    program: &Program,
    options: &EmitOptions,
    region_types: &[Type<'c>],
) -> R<melior::ir::Operation<'c>> {
    let entry = Block::new(&region_types.iter().map(|&t| (t, b.loc)).collect::<Vec<_>>());
    {
        let regions = [arg(&entry, 0)?, arg(&entry, 1)?, arg(&entry, 2)?];
        let mut f = PlanFn {
            entry: &entry,
            regions,
            sizes: [program.arena_size, program.weights_size, program.state_size],
            buffers: Vec::new(),
            whole: RefCell::new(HashMap::new()),
        };
        if let Some(plan) = options.plan {
            f.buffers = planned_buffers(b, &f, plan)?;
        }
        for step in &program.steps {
            for kernel in &step.kernels {
                emit_kernel(b, &f, kernel, &step.op)?;
            }
        }
        b.yield_(&entry, "func.return", &[])?;
    }
    function(b, "memc_plan", region_types, entry)
}

/// `func.func @name(types) attributes {llvm.emit_c_interface}` with body `entry`.
fn function<'c>(
    b: &Builder<'c>,
    name: &str,
    types: &[Type<'c>],
    entry: Block<'c>,
) -> R<melior::ir::Operation<'c>> {
    let region = Region::new();
    region.append_block(entry);
    let ty = FunctionType::new(b.ctx, types, &[]);
    OperationBuilder::new("func.func", b.loc)
        .add_attributes(&[
            b.str_attr("sym_name", name),
            b.attr("function_type", TypeAttribute::new(ty.into()).into()),
            b.attr("llvm.emit_c_interface", Attribute::unit(b.ctx)),
        ])
        .add_regions([region])
        .build()
        .map_err(|e| MlirError::Build {
            op: "func.func".into(),
            message: e.to_string(),
        })
}

/// Every planned buffer of a type kernels compute in, as a shaped `memref.view` of the arena
/// at its offset (named by `memc.buffer`), and its flat form for kernels.
fn planned_buffers<'c>(
    b: &Builder<'c>,
    f: &PlanFn<'c, '_>,
    plan: &MemoryPlan,
) -> R<Vec<Buffer<'c>>> {
    let mut out = Vec::new();
    let named = plan.buffers.iter().map(|buf| {
        (
            buf.offset,
            buf.size,
            Some(Scalar::from_elem(buf.ty.elem)),
            buf.ty.static_shape(),
            format!("{} ({})", buf.name, buf.producer),
        )
    });
    let scratch = plan.scratch.iter().map(|s| {
        (
            s.offset,
            s.size,
            Some(Scalar::U8),
            Some(vec![s.size]),
            format!("{} ({})", s.name, s.producer),
        )
    });
    for (offset, bytes, elem, shape, name) in named.chain(scratch) {
        let (Some(elem), Some(shape)) = (elem, shape) else {
            continue;
        };
        let n: u64 = shape.iter().product();
        if n == 0 || n * elem.size() > bytes || offset + bytes > f.sizes[0] {
            continue;
        }
        let ty = b.memref(b.stored(elem), &shape);
        let shift = b.idx(f.entry, offset as i64)?;
        let view = b.val(
            f.entry,
            "memref.view",
            &[f.regions[0], shift],
            ty,
            &[b.str_attr("memc.buffer", &name)],
        )?;
        let flat = b.reinterpret(
            f.entry,
            view,
            None,
            &[n as i64],
            &[1],
            b.memref(b.stored(elem), &[n]),
        )?;
        out.push(Buffer {
            offset,
            bytes: n * elem.size(),
            elem,
            flat,
        });
    }
    Ok(out)
}

fn emit_kernel<'c>(b: &Builder<'c>, f: &PlanFn<'c, '_>, kernel: &Kernel, op: &str) -> R<()> {
    // A marker before the kernel's ops: which kernel of which op follows.
    let label = if kernel.name.starts_with(op) {
        kernel.name.clone()
    } else {
        format!("{} of {op}", kernel.name)
    };
    b.op(
        f.entry,
        "arith.constant",
        &[],
        &[b.index()],
        &[
            b.attr("value", IntegerAttribute::new(b.index(), 0).into()),
            b.str_attr("memc.kernel", &label),
        ],
        vec![],
    )?;
    match &kernel.body {
        KernelBody::Loop(k) => emit_loop(b, f, k),
        KernelBody::Contract(c) => emit_contract(b, f, c),
        KernelBody::NBits(q) => emit_nbits(b, f, q),
    }
}

/// A loop kernel's views, resolved to their bases.
struct LoopCtx<'k, 'c> {
    k: &'k LoopKernel,
    bases: Vec<Base<'c>>,
}

fn emit_loop<'c>(b: &Builder<'c>, f: &PlanFn<'c, '_>, k: &LoopKernel) -> R<()> {
    if k.outer.contains(&0) {
        return Ok(());
    }
    let extents: Vec<u64> = k.outer.iter().chain(&k.inner).copied().collect();
    let bases = k
        .views
        .iter()
        .map(|v| {
            let span = if v.guards.is_empty() {
                span(&v.strides, &extents)
            } else {
                None
            };
            f.base(b, v.region, v.elem, v.byte_offset, span)
        })
        .collect::<R<Vec<_>>>()?;
    let cx = LoopCtx { k, bases };
    let no_inner_points = k.inner.contains(&0);
    b.nest(f.entry, &k.outer, &[], &[], &mut |blk, outer, _| {
        let mut accs: Vec<Option<V>> = Vec::new();
        for stage in &k.stages {
            match stage {
                Stage::Reduce {
                    insts,
                    value,
                    op,
                    init,
                    ty,
                } => {
                    let acc = if no_inner_points {
                        b.constant(blk, *ty, *init)?
                    } else {
                        reduce(b, &cx, blk, outer, &accs, insts, *value, *op, *init, *ty)?
                    };
                    accs.push(Some(acc));
                }
                Stage::Map { insts, stores } => {
                    if !no_inner_points {
                        let accs_now = accs.clone();
                        b.nest(blk, &k.inner, outer, &[], &mut |inner, idx, _| {
                            let vals = eval(b, &cx, inner, insts, idx, &accs_now)?;
                            store_all(b, &cx, inner, stores, idx, &vals)?;
                            Ok(vec![])
                        })?;
                    }
                    accs.push(None);
                }
                Stage::Once { insts, stores } => {
                    let mut idx = outer.to_vec();
                    for _ in &k.inner {
                        idx.push(b.i64c(blk, 0)?);
                    }
                    let vals = eval(b, &cx, blk, insts, &idx, &accs)?;
                    store_all(b, &cx, blk, stores, &idx, &vals)?;
                    accs.push(None);
                }
            }
        }
        Ok(vec![])
    })?;
    Ok(())
}

/// A `Reduce` stage at one outer point: the accumulator.
#[allow(clippy::too_many_arguments)]
fn reduce<'c>(
    b: &Builder<'c>,
    cx: &LoopCtx<'_, 'c>,
    blk: &Block<'c>,
    outer: &[V<'c>],
    accs: &[Option<V<'c>>],
    insts: &[Inst],
    value: u32,
    op: ReduceOp,
    init: u64,
    ty: Scalar,
) -> R<V<'c>> {
    let vty = insts
        .get(value as usize)
        .map(|i| i.ty)
        .ok_or_else(|| malformed("a reduction of a value that is not an instruction"))?;
    let arg = matches!(op, ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. });
    let mut inits = vec![b.constant(blk, ty, init)?];
    if arg {
        // The best value so far and the linear index of the current point.
        inits.push(b.constant(blk, vty, 0)?);
        inits.push(b.i64c(blk, 0)?);
    }
    let out = b.nest(
        blk,
        &cx.k.inner,
        outer,
        &inits,
        &mut |inner, idx, carried| {
            let vals = eval(b, cx, inner, insts, idx, accs)?;
            let v = vals[value as usize];
            let acc = carried[0];
            Ok(match op {
                ReduceOp::Sum => vec![binary(b, inner, BinaryOp::Add, vty, acc, v)?],
                ReduceOp::Prod => vec![binary(b, inner, BinaryOp::Mul, vty, acc, v)?],
                ReduceOp::Max => vec![binary(b, inner, BinaryOp::Max, vty, acc, v)?],
                ReduceOp::Min => vec![binary(b, inner, BinaryOp::Min, vty, acc, v)?],
                ReduceOp::ArgMax { last } | ReduceOp::ArgMin { last } => {
                    let (best, linear) = (carried[1], carried[2]);
                    let cmp = match (matches!(op, ReduceOp::ArgMax { .. }), last) {
                        (true, true) => BinaryOp::Ge,
                        (true, false) => BinaryOp::Gt,
                        (false, true) => BinaryOp::Le,
                        (false, false) => BinaryOp::Lt,
                    };
                    let wins = binary(b, inner, cmp, vty, v, best)?;
                    let zero = b.i64c(inner, 0)?;
                    let is_first = b.cmpi(inner, CmpiPredicate::Eq, linear, zero)?;
                    let better = b.bin(inner, "arith.ori", is_first, wins)?;
                    let one = b.i64c(inner, 1)?;
                    vec![
                        b.select(inner, better, linear, acc)?,
                        b.select(inner, better, v, best)?,
                        b.bin(inner, "arith.addi", linear, one)?,
                    ]
                }
            })
        },
    )?;
    Ok(out[0])
}

fn malformed(message: &str) -> MlirError {
    MlirError::Unsupported(format!("a malformed kernel: {message}"))
}

/// `sum strides[a] * idx[a]` plus `offset`, as i64.
fn linear<'c>(
    b: &Builder<'c>,
    blk: &Block<'c>,
    offset: i64,
    strides: &[i64],
    idx: &[V<'c>],
) -> R<V<'c>> {
    let mut at = b.i64c(blk, offset)?;
    for (&s, &i) in strides.iter().zip(idx) {
        if s == 0 {
            continue;
        }
        let term = if s == 1 {
            i
        } else {
            let s = b.i64c(blk, s)?;
            b.bin(blk, "arith.muli", i, s)?
        };
        at = b.bin(blk, "arith.addi", at, term)?;
    }
    Ok(at)
}

/// The element offset of indirect terms: each index wrapped once when negative, clamped into
/// `[0, limit)`, times its stride.
fn indirect<'c>(
    b: &Builder<'c>,
    blk: &Block<'c>,
    indices: &[IndirectIndex],
    vals: &[V<'c>],
    at: V<'c>,
) -> R<V<'c>> {
    let mut at = at;
    for ix in indices {
        if ix.limit <= 0 {
            return Err(malformed("an indirect index with a limit below 1"));
        }
        let i = *vals
            .get(ix.index as usize)
            .ok_or_else(|| malformed("an indirect index that is not an instruction"))?;
        let (zero, limit, top) = (
            b.i64c(blk, 0)?,
            b.i64c(blk, ix.limit)?,
            b.i64c(blk, ix.limit - 1)?,
        );
        let negative = b.cmpi(blk, CmpiPredicate::Slt, i, zero)?;
        let wrapped = b.bin(blk, "arith.addi", i, limit)?;
        let i = b.select(blk, negative, wrapped, i)?;
        let i = b.bin(blk, "arith.maxsi", i, zero)?;
        let i = b.bin(blk, "arith.minsi", i, top)?;
        let stride = b.i64c(blk, ix.stride)?;
        let term = b.bin(blk, "arith.muli", i, stride)?;
        at = b.bin(blk, "arith.addi", at, term)?;
    }
    Ok(at)
}

/// Loads element `at` (i64) of `base` as kernel type `elem`.
fn load_elem<'c>(
    b: &Builder<'c>,
    blk: &Block<'c>,
    base: Base<'c>,
    at: V<'c>,
    elem: Scalar,
) -> R<V<'c>> {
    let at = b.to_index(blk, at)?;
    no_float_codes(elem)?;
    let raw = b.load(blk, base.mem, at, b.stored(elem))?;
    widen(b, blk, raw, elem)
}

/// The float8 and float4 formats (storage floats other than f16 and bf16) are not arithmetic
/// the LLVM lowering knows.
fn no_float_codes(elem: Scalar) -> R<()> {
    if elem.is_storage_only() && elem.is_float() && !matches!(elem, Scalar::F16 | Scalar::BF16) {
        return Err(MlirError::Unsupported(format!(
            "the MLIR emitter does not convert {} codes",
            elem.name()
        )));
    }
    Ok(())
}

/// A loaded element of `elem` (its memory type) as its compute type.
fn widen<'c>(b: &Builder<'c>, blk: &Block<'c>, raw: V<'c>, elem: Scalar) -> R<V<'c>> {
    match elem {
        Scalar::Bool => {
            let zero = b.int(blk, b.i(8), 0)?;
            b.cmpi(blk, CmpiPredicate::Ne, raw, zero)
        }
        Scalar::F16 | Scalar::BF16 => b.cast(blk, "arith.extf", raw, Type::float32(b.ctx)),
        Scalar::I4 | Scalar::I2 => {
            let shift = b.int(blk, b.i(8), 8 - elem.sub_byte_bits().unwrap_or(8) as i64)?;
            let up = b.bin(blk, "arith.shli", raw, shift)?;
            b.bin(blk, "arith.shrsi", up, shift)
        }
        _ => Ok(raw),
    }
}

/// A value of `elem`'s compute type as its memory type (rounded to nearest even for f16 and
/// bf16, wrapped to the width for the sub-byte integers).
fn narrow_to<'c>(b: &Builder<'c>, blk: &Block<'c>, v: V<'c>, elem: Scalar) -> R<V<'c>> {
    no_float_codes(elem)?;
    match elem {
        Scalar::Bool => b.cast(blk, "arith.extui", v, b.i(8)),
        Scalar::F16 | Scalar::BF16 => b.cast(blk, "arith.truncf", v, b.stored(elem)),
        Scalar::I4 | Scalar::U4 | Scalar::I2 | Scalar::U2 => {
            let mask = (1i64 << elem.sub_byte_bits().unwrap_or(8)) - 1;
            let mask = b.int(blk, b.i(8), mask)?;
            b.bin(blk, "arith.andi", v, mask)
        }
        _ => Ok(v),
    }
}

fn store_elem<'c>(
    b: &Builder<'c>,
    blk: &Block<'c>,
    base: Base<'c>,
    at: V<'c>,
    elem: Scalar,
    v: V<'c>,
) -> R<()> {
    let at = b.to_index(blk, at)?;
    let v = narrow_to(b, blk, v, elem)?;
    b.store(blk, v, base.mem, at)
}

/// A view's element at loop point `idx` (plus indirect terms), or its pad where a guard fails.
fn load_view<'c>(
    b: &Builder<'c>,
    cx: &LoopCtx<'_, 'c>,
    blk: &Block<'c>,
    view: u32,
    idx: &[V<'c>],
    indices: &[IndirectIndex],
    vals: &[V<'c>],
) -> R<V<'c>> {
    let v: &View =
        cx.k.views
            .get(view as usize)
            .ok_or_else(|| malformed("a load of a view that does not exist"))?;
    let base = cx.bases[view as usize];
    let read = |blk: &Block<'c>| -> R<V<'c>> {
        let at = linear(b, blk, base.offset, &v.strides, idx)?;
        let at = indirect(b, blk, indices, vals, at)?;
        load_elem(b, blk, base, at, v.elem)
    };
    if v.guards.is_empty() {
        return read(blk);
    }
    let mut ok: Option<V> = None;
    for g in &v.guards {
        let x = linear(b, blk, g.offset, &g.coeffs, idx)?;
        let (zero, limit) = (b.i64c(blk, 0)?, b.i64c(blk, g.limit)?);
        let above = b.cmpi(blk, CmpiPredicate::Sge, x, zero)?;
        let below = b.cmpi(blk, CmpiPredicate::Slt, x, limit)?;
        let both = b.bin(blk, "arith.andi", above, below)?;
        ok = Some(match ok {
            Some(o) => b.bin(blk, "arith.andi", o, both)?,
            None => both,
        });
    }
    let ok = ok.expect("at least one guard");
    let pad_value = f64::from_bits(v.pad);
    let elem = v.elem;
    let out = b.if_else(
        blk,
        ok,
        &[b.scalar(elem)],
        &mut |then| Ok(vec![read(then)?]),
        &mut |other| Ok(vec![pad(b, other, elem, pad_value)?]),
    )?;
    Ok(out[0])
}

/// A guard's pad value (an `f64`) converted to `elem` as the kernel contract converts.
fn pad<'c>(b: &Builder<'c>, blk: &Block<'c>, elem: Scalar, x: f64) -> R<V<'c>> {
    if let Some(format) = elem.float_format() {
        // The value a load of an element holding the pad gives: narrowed, then widened.
        let x = format.decode(format.encode(x as f32));
        return b.float(blk, Type::float32(b.ctx), f64::from(x));
    }
    if let Some(bits) = elem.sub_byte_bits() {
        let v = if x.is_nan() { 0 } else { x.trunc() as i64 };
        let shift = 64 - bits;
        let v = if elem.is_signed_int() {
            (v << shift) >> shift
        } else {
            v & ((1 << bits) - 1)
        };
        return b.int(blk, b.i(8), v);
    }
    if elem.is_float() {
        return b.float(blk, b.scalar(elem), x);
    }
    if elem == Scalar::Bool {
        return b.int(blk, b.i(1), i64::from(x != 0.0));
    }
    let v = if x.is_nan() {
        0
    } else if elem.is_unsigned_int() {
        x.trunc().clamp(0.0, u64::MAX as f64) as u64 as i64
    } else {
        x.trunc() as i64
    };
    b.int(blk, b.scalar(elem), v)
}

/// A stage's instructions at loop point `idx` (i64 per axis).
fn eval<'c>(
    b: &Builder<'c>,
    cx: &LoopCtx<'_, 'c>,
    blk: &Block<'c>,
    insts: &[Inst],
    idx: &[V<'c>],
    accs: &[Option<V<'c>>],
) -> R<Vec<V<'c>>> {
    let mut vals: Vec<V<'c>> = Vec::with_capacity(insts.len());
    for (at, inst) in insts.iter().enumerate() {
        let operand = |id: u32| -> R<(V<'c>, Scalar)> {
            let i = id as usize;
            if i < at {
                Ok((vals[i], insts[i].ty))
            } else {
                Err(malformed("an operand that is not an earlier instruction"))
            }
        };
        let v = match &inst.kind {
            InstKind::Load { view } => load_view(b, cx, blk, *view, idx, &[], &vals)?,
            InstKind::LoadIndirect { view, indices } => {
                load_view(b, cx, blk, *view, idx, indices, &vals)?
            }
            InstKind::Const { bits } => b.constant(blk, inst.ty, *bits)?,
            InstKind::Index { axis } => *idx
                .get(*axis as usize)
                .ok_or_else(|| malformed("the index of an axis the loop does not have"))?,
            InstKind::Acc { stage } => accs
                .get(*stage as usize)
                .copied()
                .flatten()
                .ok_or_else(|| malformed("the accumulator of a stage that is not a reduction"))?,
            InstKind::Unary { op, arg } => {
                let (x, arg_ty) = operand(*arg)?;
                // The tests of a float have a bool result: they follow their operand's type.
                let ty = match op {
                    UnaryOp::IsNan | UnaryOp::IsPosInf | UnaryOp::IsNegInf => arg_ty,
                    _ => inst.ty,
                };
                unary(b, blk, *op, ty, x)?
            }
            InstKind::Binary { op, lhs, rhs } => {
                let (x, ty) = operand(*lhs)?;
                let (y, _) = operand(*rhs)?;
                binary(b, blk, *op, ty, x, y)?
            }
            InstKind::Select { cond, then, else_ } => {
                let (c, _) = operand(*cond)?;
                let (x, _) = operand(*then)?;
                let (y, _) = operand(*else_)?;
                b.select(blk, c, x, y)?
            }
            InstKind::Cast { arg } => {
                let (x, from) = operand(*arg)?;
                convert(b, blk, x, from, inst.ty)?
            }
            InstKind::Narrow { arg, to } => {
                let (x, _) = operand(*arg)?;
                let stored = narrow_to(b, blk, x, *to)?;
                widen(b, blk, stored, *to)?
            }
        };
        vals.push(v);
    }
    Ok(vals)
}

fn store_all<'c>(
    b: &Builder<'c>,
    cx: &LoopCtx<'_, 'c>,
    blk: &Block<'c>,
    stores: &[Store],
    idx: &[V<'c>],
    vals: &[V<'c>],
) -> R<()> {
    for s in stores {
        let view =
            cx.k.views
                .get(s.view as usize)
                .ok_or_else(|| malformed("a store into a view that does not exist"))?;
        let base = cx.bases[s.view as usize];
        let v = *vals
            .get(s.value as usize)
            .ok_or_else(|| malformed("a store of a value that is not an instruction"))?;
        let at = linear(b, blk, base.offset, &view.strides, idx)?;
        let at = indirect(b, blk, &s.indices, vals, at)?;
        let v = if s.accumulate {
            let old = load_elem(b, blk, base, at, view.elem)?;
            binary(b, blk, BinaryOp::Add, view.elem, old, v)?
        } else {
            v
        };
        store_elem(b, blk, base, at, view.elem, v)?;
    }
    Ok(())
}

/// A value as a handle with the context's lifetime, usable in any block of the module being
/// built (melior ties a value to the borrow of its block, which nested loop bodies outlive).
fn own<'c>(v: Value<'c, '_>) -> V<'c> {
    // SAFETY: a value is a handle into the context, which outlives every block of the module
    // being built; that a use is dominated by its definition is checked when the module
    // verifies, before anything runs.
    unsafe { Value::from_raw(v.to_raw()) }
}

fn unary<'c>(b: &Builder<'c>, blk: &Block<'c>, op: UnaryOp, ty: Scalar, x: V<'c>) -> R<V<'c>> {
    use UnaryOp as U;
    if !ty.is_float() {
        let t = b.scalar(ty);
        return match op {
            U::Neg => {
                let zero = b.int(blk, t, 0)?;
                b.bin(blk, "arith.subi", zero, x)
            }
            U::Abs if ty.is_unsigned_int() || ty == Scalar::Bool => Ok(own(x)),
            U::Abs => b.un(blk, "math.absi", x),
            U::Sign => {
                let (zero, one) = (b.int(blk, t, 0)?, b.int(blk, t, 1)?);
                let positive = if ty.is_signed_int() {
                    b.cmpi(blk, CmpiPredicate::Sgt, x, zero)?
                } else {
                    b.cmpi(blk, CmpiPredicate::Ne, x, zero)?
                };
                let r = b.select(blk, positive, one, zero)?;
                if ty.is_signed_int() {
                    let minus = b.int(blk, t, -1)?;
                    let negative = b.cmpi(blk, CmpiPredicate::Slt, x, zero)?;
                    b.select(blk, negative, minus, r)
                } else {
                    Ok(r)
                }
            }
            U::Not | U::BitNot => {
                let ones = b.int(blk, t, -1)?;
                b.bin(blk, "arith.xori", x, ones)
            }
            _ => Err(malformed(&format!("{op:?} of {}", ty.name()))),
        };
    }
    let ft = b.scalar(ty);
    match op {
        U::IsNan => return b.cmpf(blk, CmpfPredicate::Uno, x, x),
        U::IsPosInf | U::IsNegInf => {
            let inf = if op == U::IsPosInf {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            };
            let inf = b.float(blk, ft, inf)?;
            return b.cmpf(blk, CmpfPredicate::Oeq, x, inf);
        }
        U::Neg => return b.un(blk, "arith.negf", x),
        U::Abs => return b.un(blk, "math.absf", x),
        U::Not | U::BitNot => return Err(malformed(&format!("{op:?} of {}", ty.name()))),
        _ => {}
    }
    // Instructions never have a storage type (the program validated), so f16 is not here.
    let float_unary = || -> R<V<'c>> {
        let t = x.r#type();
        let name = match op {
            U::Exp => "math.exp",
            U::Log => "math.log",
            U::Sqrt => "math.sqrt",
            U::Floor => "math.floor",
            U::Ceil => "math.ceil",
            U::Round => "math.roundeven",
            U::Sin => "math.sin",
            U::Cos => "math.cos",
            U::Tan => "math.tan",
            U::Asin => "math.asin",
            U::Acos => "math.acos",
            U::Atan => "math.atan",
            U::Sinh => "math.sinh",
            U::Cosh => "math.cosh",
            U::Tanh => "math.tanh",
            U::Asinh => "math.asinh",
            U::Acosh => "math.acosh",
            U::Atanh => "math.atanh",
            U::Erf => "math.erf",
            U::Reciprocal => {
                let one = b.float(blk, t, 1.0)?;
                return b.bin(blk, "arith.divf", one, x);
            }
            U::Sign => {
                let (zero, one, minus) = (
                    b.float(blk, t, 0.0)?,
                    b.float(blk, t, 1.0)?,
                    b.float(blk, t, -1.0)?,
                );
                let gt = b.cmpf(blk, CmpfPredicate::Ogt, x, zero)?;
                let lt = b.cmpf(blk, CmpfPredicate::Olt, x, zero)?;
                let nan = b.cmpf(blk, CmpfPredicate::Uno, x, x)?;
                let r = b.select(blk, gt, one, zero)?;
                let r = b.select(blk, lt, minus, r)?;
                return b.select(blk, nan, x, r);
            }
            U::Neg | U::Abs | U::Not | U::BitNot | U::IsNan | U::IsPosInf | U::IsNegInf => {
                unreachable!("handled above")
            }
        };
        b.un(blk, name, x)
    };
    float_unary()
}

fn binary<'c>(
    b: &Builder<'c>,
    blk: &Block<'c>,
    op: BinaryOp,
    ty: Scalar,
    x: V<'c>,
    y: V<'c>,
) -> R<V<'c>> {
    use BinaryOp as O;
    if ty.is_float() {
        if op.is_comparison() {
            let p = match op {
                O::Eq => CmpfPredicate::Oeq,
                O::Lt => CmpfPredicate::Olt,
                O::Le => CmpfPredicate::Ole,
                O::Gt => CmpfPredicate::Ogt,
                _ => CmpfPredicate::Oge,
            };
            return b.cmpf(blk, p, x, y);
        }
        let float_binary = || -> R<V<'c>> {
            let name = match op {
                O::Add => "arith.addf",
                O::Sub => "arith.subf",
                O::Mul => "arith.mulf",
                O::Div => "arith.divf",
                O::Rem => "arith.remf",
                O::Pow => "math.powf",
                O::Min => "arith.minimumf",
                O::Max => "arith.maximumf",
                O::FloorMod => {
                    let r = b.bin(blk, "arith.remf", x, y)?;
                    return to_divisor_sign(b, blk, r, y, true);
                }
                _ => return Err(malformed(&format!("{op:?} of {}", ty.name()))),
            };
            b.bin(blk, name, x, y)
        };
        return float_binary();
    }
    let signed = ty.is_signed_int();
    let t = b.scalar(ty);
    if op.is_comparison() {
        let p = match (op, signed) {
            (O::Eq, _) => CmpiPredicate::Eq,
            (O::Lt, true) => CmpiPredicate::Slt,
            (O::Le, true) => CmpiPredicate::Sle,
            (O::Gt, true) => CmpiPredicate::Sgt,
            (_, true) => CmpiPredicate::Sge,
            (O::Lt, false) => CmpiPredicate::Ult,
            (O::Le, false) => CmpiPredicate::Ule,
            (O::Gt, false) => CmpiPredicate::Ugt,
            (_, false) => CmpiPredicate::Uge,
        };
        return b.cmpi(blk, p, x, y);
    }
    let bits = ty.size() as i64 * 8;
    match op {
        O::Add if ty == Scalar::Bool => b.bin(blk, "arith.ori", x, y),
        O::Mul if ty == Scalar::Bool => b.bin(blk, "arith.andi", x, y),
        O::Add => b.bin(blk, "arith.addi", x, y),
        O::Sub => b.bin(blk, "arith.subi", x, y),
        O::Mul => b.bin(blk, "arith.muli", x, y),
        O::Div | O::Rem | O::FloorMod => int_division(b, blk, op, ty, x, y),
        O::Min => b.bin(
            blk,
            if signed { "arith.minsi" } else { "arith.minui" },
            x,
            y,
        ),
        O::Max => b.bin(
            blk,
            if signed { "arith.maxsi" } else { "arith.maxui" },
            x,
            y,
        ),
        O::And | O::BitAnd => b.bin(blk, "arith.andi", x, y),
        O::Or | O::BitOr => b.bin(blk, "arith.ori", x, y),
        O::Xor | O::BitXor => b.bin(blk, "arith.xori", x, y),
        O::Shl | O::Shr => {
            let width = b.int(blk, t, bits)?;
            let zero = b.int(blk, t, 0)?;
            let in_range = b.cmpi(blk, CmpiPredicate::Ult, y, width)?;
            let safe = b.select(blk, in_range, y, zero)?;
            let name = match (op, signed) {
                (O::Shl, _) => "arith.shli",
                (_, true) => "arith.shrsi",
                (_, false) => "arith.shrui",
            };
            let r = b.bin(blk, name, x, safe)?;
            b.select(blk, in_range, r, zero)
        }
        O::Pow => {
            // Square and multiply over the exponent's bits (negative exponents count as 0).
            let zero = b.int(blk, t, 0)?;
            let one = b.int(blk, t, 1)?;
            let e = if signed {
                b.bin(blk, "arith.maxsi", y, zero)?
            } else {
                own(y)
            };
            let out = b.for_loop(blk, bits as u64, &[one, x, e], &mut |inner, _, c| {
                let (r, base, e) = (c[0], c[1], c[2]);
                let one = b.int(inner, t, 1)?;
                let bit = b.bin(inner, "arith.andi", e, one)?;
                let zero = b.int(inner, t, 0)?;
                let set = b.cmpi(inner, CmpiPredicate::Ne, bit, zero)?;
                let product = b.bin(inner, "arith.muli", r, base)?;
                Ok(vec![
                    b.select(inner, set, product, r)?,
                    b.bin(inner, "arith.muli", base, base)?,
                    b.bin(inner, "arith.shrui", e, one)?,
                ])
            })?;
            Ok(out[0])
        }
        _ => Err(malformed(&format!("{op:?} of {}", ty.name()))),
    }
}

/// A remainder `r` of a division by `y` moved to the divisor's sign (`r + y` when `r` is not 0
/// and the signs differ): `FloorMod` from a truncating remainder, for floats and signed
/// integers.
fn to_divisor_sign<'c>(
    b: &Builder<'c>,
    blk: &Block<'c>,
    r: V<'c>,
    y: V<'c>,
    float: bool,
) -> R<V<'c>> {
    let (nonzero, r_neg, y_neg, add) = if float {
        let zero = b.float(blk, r.r#type(), 0.0)?;
        (
            b.cmpf(blk, CmpfPredicate::One, r, zero)?,
            b.cmpf(blk, CmpfPredicate::Olt, r, zero)?,
            b.cmpf(blk, CmpfPredicate::Olt, y, zero)?,
            "arith.addf",
        )
    } else {
        let zero = b.int(blk, r.r#type(), 0)?;
        (
            b.cmpi(blk, CmpiPredicate::Ne, r, zero)?,
            b.cmpi(blk, CmpiPredicate::Slt, r, zero)?,
            b.cmpi(blk, CmpiPredicate::Slt, y, zero)?,
            "arith.addi",
        )
    };
    let differ = b.bin(blk, "arith.xori", r_neg, y_neg)?;
    let fix = b.bin(blk, "arith.andi", nonzero, differ)?;
    let shifted = b.bin(blk, add, r, y)?;
    b.select(blk, fix, shifted, r)
}

/// Integer `Div`, `Rem` and `FloorMod` as the kernel contract defines them: a zero divisor
/// gives 0, `MIN / -1` wraps, nothing traps.
fn int_division<'c>(
    b: &Builder<'c>,
    blk: &Block<'c>,
    op: BinaryOp,
    ty: Scalar,
    x: V<'c>,
    y: V<'c>,
) -> R<V<'c>> {
    let t = b.scalar(ty);
    let (zero, one) = (b.int(blk, t, 0)?, b.int(blk, t, 1)?);
    let y_zero = b.cmpi(blk, CmpiPredicate::Eq, y, zero)?;
    if !ty.is_signed_int() {
        let safe = b.select(blk, y_zero, one, y)?;
        let name = if op == BinaryOp::Div {
            "arith.divui"
        } else {
            "arith.remui"
        };
        let r = b.bin(blk, name, x, safe)?;
        return b.select(blk, y_zero, zero, r);
    }
    let minus = b.int(blk, t, -1)?;
    let y_minus = b.cmpi(blk, CmpiPredicate::Eq, y, minus)?;
    let special = b.bin(blk, "arith.ori", y_zero, y_minus)?;
    let safe = b.select(blk, special, one, y)?;
    let r = match op {
        BinaryOp::Div => {
            let q = b.bin(blk, "arith.divsi", x, safe)?;
            let negated = b.bin(blk, "arith.subi", zero, x)?;
            b.select(blk, y_minus, negated, q)?
        }
        _ => {
            let r = b.bin(blk, "arith.remsi", x, safe)?;
            let r = b.select(blk, y_minus, zero, r)?;
            if op == BinaryOp::FloorMod {
                to_divisor_sign(b, blk, r, y, false)?
            } else {
                r
            }
        }
    };
    b.select(blk, y_zero, zero, r)
}

/// `x` of kernel type `from` converted to `to` (see [`InstKind::Cast`]).
fn convert<'c>(b: &Builder<'c>, blk: &Block<'c>, x: V<'c>, from: Scalar, to: Scalar) -> R<V<'c>> {
    let t = b.scalar(to);
    if from == to {
        return Ok(own(x));
    }
    if to == Scalar::Bool {
        return if from.is_float() {
            let zero = b.float(blk, b.scalar(from), 0.0)?;
            b.cmpf(blk, CmpfPredicate::Une, x, zero)
        } else {
            let zero = b.int(blk, b.scalar(from), 0)?;
            b.cmpi(blk, CmpiPredicate::Ne, x, zero)
        };
    }
    let (fw, tw) = (from.size(), to.size());
    if to.is_float() {
        return if from.is_float() {
            b.cast(
                blk,
                if tw > fw {
                    "arith.extf"
                } else {
                    "arith.truncf"
                },
                x,
                t,
            )
        } else if from.is_signed_int() {
            b.cast(blk, "arith.sitofp", x, t)
        } else {
            b.cast(blk, "arith.uitofp", x, t)
        };
    }
    if from.is_float() {
        // Truncate toward zero, saturate at the bounds, NaN to 0.
        let x = if from == Scalar::F16 {
            b.cast(blk, "arith.extf", x, Type::float32(b.ctx))?
        } else {
            own(x)
        };
        let ft = x.r#type();
        let bits = tw * 8;
        let (lo, hi): (i128, i128) = if to.is_signed_int() {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        };
        let tr = b.un(blk, "math.trunc", x)?;
        let (lo_f, hi_f) = (b.float(blk, ft, lo as f64)?, b.float(blk, ft, hi as f64)?);
        let below = b.cmpf(blk, CmpfPredicate::Ole, tr, lo_f)?;
        let above = b.cmpf(blk, CmpfPredicate::Oge, tr, hi_f)?;
        let nan = b.cmpf(blk, CmpfPredicate::Uno, x, x)?;
        let out = b.bin(blk, "arith.ori", below, above)?;
        let out = b.bin(blk, "arith.ori", out, nan)?;
        let fzero = b.float(blk, ft, 0.0)?;
        let safe = b.select(blk, out, fzero, tr)?;
        let name = if to.is_signed_int() {
            "arith.fptosi"
        } else {
            "arith.fptoui"
        };
        let r = b.cast(blk, name, safe, t)?;
        let (lo_i, hi_i) = (b.int(blk, t, lo as i64)?, b.int(blk, t, hi as i64)?);
        let r = b.select(blk, below, lo_i, r)?;
        return b.select(blk, above, hi_i, r);
    }
    // Integer (or bool) to integer: extend by the source's signedness, or wrap.
    if tw > fw || from == Scalar::Bool {
        let name = if from.is_signed_int() {
            "arith.extsi"
        } else {
            "arith.extui"
        };
        b.cast(blk, name, x, t)
    } else if tw < fw {
        b.cast(blk, "arith.trunci", x, t)
    } else {
        Ok(own(x))
    }
}

/// A contraction: `linalg.matmul` per batch index when `alpha` is 1 and no stride is negative
/// (after a `linalg.fill` with 0 unless it accumulates), else a loop nest.
fn emit_contract<'c>(b: &Builder<'c>, f: &PlanFn<'c, '_>, c: &Contract) -> R<()> {
    if !c.elem.is_float() || c.batch.contains(&0) || c.m == 0 || c.n == 0 {
        return if c.elem.is_float() {
            Ok(())
        } else {
            Err(malformed("a contraction of integers"))
        };
    }
    let ft = b.scalar(c.elem);
    let base = |v: &MatView| f.base(b, v.region, c.elem, v.byte_offset, None);
    let bb = f.base(b, c.b.region(), c.elem, c.b.byte_offset(), None)?;
    let (a, cc) = (base(&c.a)?, base(&c.c)?);
    // An implicit im2col `B` runs as the loop nest, each element read through its window.
    let b_mat = c.b.as_mat();
    let strides_ok = b_mat.is_some_and(|bm| {
        [&c.a, bm, &c.c].iter().all(|v| {
            v.row_stride >= 0 && v.col_stride >= 0 && v.batch_strides.iter().all(|&s| s >= 0)
        })
    });
    let unit = f64::from_bits(c.alpha) == 1.0 && !c.elem.is_storage_only();
    let elem = c.elem;
    b.nest(f.entry, &c.batch, &[], &[], &mut |blk, bidx, _| {
        let at = |v: &MatView, base: Base<'c>| linear(b, blk, base.offset, &v.batch_strides, bidx);
        let (a_at, c_at) = (at(&c.a, a)?, at(&c.c, cc)?);
        let b_at = linear(b, blk, bb.offset, c.b.batch_strides(), bidx)?;
        if let Some(bm_view) = b_mat.filter(|_| strides_ok && unit && c.k > 0) {
            let mat = |blk: &Block<'c>, base: Base<'c>, at, v: &MatView, rows: u64, cols: u64| {
                let sizes = [rows as i64, cols as i64];
                let strides = [v.row_stride, v.col_stride];
                let at = b.to_index(blk, at)?;
                b.reinterpret(
                    blk,
                    base.mem,
                    Some(at),
                    &sizes,
                    &strides,
                    b.strided(ft, &sizes, &strides),
                )
            };
            let am = mat(blk, a, a_at, &c.a, c.m, c.k)?;
            let bm = mat(blk, bb, b_at, bm_view, c.k, c.n)?;
            let cm = mat(blk, cc, c_at, &c.c, c.m, c.n)?;
            if !c.accumulate {
                let zero = b.float(blk, ft, 0.0)?;
                linalg(b, blk, "linalg.fill", &[zero], cm, ft, false)?;
            }
            linalg(b, blk, "linalg.matmul", &[am, bm], cm, ft, true)?;
            return Ok(vec![]);
        }
        // The general form: c = alpha * sum_k a * b (+ c), summed in the element type.
        b.nest(blk, &[c.m, c.n], &[], &[], &mut |inner, ij, _| {
            let (i, j) = (ij[0], ij[1]);
            let zero = b.float(inner, ft, 0.0)?;
            let a_row = linear(b, inner, 0, &[c.a.row_stride], &[i])?;
            let a_row = b.bin(inner, "arith.addi", a_row, a_at)?;
            let b_col = match b_mat {
                Some(bm) => {
                    let col = linear(b, inner, 0, &[bm.col_stride], &[j])?;
                    b.bin(inner, "arith.addi", col, b_at)?
                }
                None => b_at,
            };
            let sum = b.for_loop(inner, c.k, &[zero], &mut |kb, kk, acc| {
                let kk = b.to_i64(kb, kk)?;
                let ak = linear(b, kb, 0, &[c.a.col_stride], &[kk])?;
                let ak = b.bin(kb, "arith.addi", ak, a_row)?;
                let x = load_elem(b, kb, a, ak, elem)?;
                let y = match &c.b {
                    ContractB::Mat(bm) => {
                        let bk = linear(b, kb, 0, &[bm.row_stride], &[kk])?;
                        let bk = b.bin(kb, "arith.addi", bk, b_col)?;
                        load_elem(b, kb, bb, bk, elem)?
                    }
                    ContractB::Im2col(view) => im2col_load(b, kb, view, bb, b_at, kk, j, elem)?,
                };
                let p = b.bin(kb, "arith.mulf", x, y)?;
                Ok(vec![b.bin(kb, "arith.addf", acc[0], p)?])
            })?;
            let alpha = b.float(inner, ft, f64::from_bits(c.alpha))?;
            let mut r = b.bin(inner, "arith.mulf", alpha, sum[0])?;
            let dst = linear(b, inner, 0, &[c.c.row_stride, c.c.col_stride], &[i, j])?;
            let dst = b.bin(inner, "arith.addi", dst, c_at)?;
            if c.accumulate {
                let old = load_elem(b, inner, cc, dst, elem)?;
                r = b.bin(inner, "arith.addf", r, old)?;
            }
            store_elem(b, inner, cc, dst, elem, r)?;
            Ok(vec![])
        })?;
        Ok(vec![])
    })?;
    Ok(())
}

/// Element `(kk, j)` of an implicit im2col `B` whose batch index starts at element `at` of
/// `base`: the row and the pixel decoded into the channel, the taps and the output positions,
/// the input element read where every axis's position is inside the input, else 0.
#[allow(clippy::too_many_arguments)]
fn im2col_load<'c>(
    b: &Builder<'c>,
    blk: &Block<'c>,
    view: &Im2colView,
    base: Base<'c>,
    at: V<'c>,
    kk: V<'c>,
    j: V<'c>,
    elem: Scalar,
) -> R<V<'c>> {
    let (row, mut pixel) = if view.transposed { (j, kk) } else { (kk, j) };
    let divide = |x: V<'c>, by: u64| -> R<(V<'c>, V<'c>)> {
        let by = b.i64c(blk, by as i64)?;
        Ok((
            b.bin(blk, "arith.divsi", x, by)?,
            b.bin(blk, "arith.remsi", x, by)?,
        ))
    };
    let (mut tap_rest, mut pixel_rest) = (view.taps(), view.pixels());
    let (channel, mut tap) = divide(row, tap_rest)?;
    let mut offset = linear(b, blk, 0, &[view.channel_stride], &[channel])?;
    offset = b.bin(blk, "arith.addi", offset, at)?;
    let mut ok: Option<V<'c>> = None;
    for axis in &view.axes {
        tap_rest /= axis.kernel.max(1);
        pixel_rest /= axis.out.max(1);
        let (t, tap_left) = divide(tap, tap_rest)?;
        let (o, pixel_left) = divide(pixel, pixel_rest)?;
        (tap, pixel) = (tap_left, pixel_left);
        let position = linear(b, blk, -axis.pad, &[axis.step, axis.dilation], &[o, t])?;
        let (zero, size) = (b.i64c(blk, 0)?, b.i64c(blk, axis.size as i64)?);
        let above = b.cmpi(blk, CmpiPredicate::Sge, position, zero)?;
        let below = b.cmpi(blk, CmpiPredicate::Slt, position, size)?;
        let inside = b.bin(blk, "arith.andi", above, below)?;
        ok = Some(match ok {
            Some(o) => b.bin(blk, "arith.andi", o, inside)?,
            None => inside,
        });
        let term = linear(b, blk, 0, &[axis.stride], &[position])?;
        offset = b.bin(blk, "arith.addi", offset, term)?;
    }
    let ok = ok.ok_or_else(|| malformed("an implicit im2col operand without axes"))?;
    let ty = b.scalar(elem);
    let out = b.if_else(
        blk,
        ok,
        &[ty],
        &mut |then| Ok(vec![load_elem(b, then, base, offset, elem)?]),
        &mut |other| Ok(vec![b.float(other, ty, 0.0)?]),
    )?;
    Ok(out[0])
}

/// A `linalg.fill` (`ins` one scalar) or `linalg.matmul` (`ins` two matrices) into `out`, with
/// its scalar body.
fn linalg<'c>(
    b: &Builder<'c>,
    blk: &Block<'c>,
    name: &str,
    ins: &[V<'c>],
    out: V<'c>,
    ft: Type<'c>,
    multiply: bool,
) -> R<()> {
    let n_args = ins.len() + 1;
    let body = Block::new(&vec![(ft, b.loc); n_args]);
    {
        let r = if multiply {
            let (x, y, acc) = (arg(&body, 0)?, arg(&body, 1)?, arg(&body, 2)?);
            let p = b.bin(&body, "arith.mulf", x, y)?;
            b.bin(&body, "arith.addf", acc, p)?
        } else {
            arg(&body, 0)?
        };
        b.yield_(&body, "linalg.yield", &[r])?;
    }
    let region = Region::new();
    region.append_block(body);
    let mut operands: Vec<V> = ins.to_vec();
    operands.push(out);
    let segments = DenseI32ArrayAttribute::new(b.ctx, &[ins.len() as i32, 1]).into();
    b.op(
        blk,
        name,
        &operands,
        &[],
        &[b.attr("operandSegmentSizes", segments)],
        vec![region],
    )?;
    Ok(())
}

/// A low-bit product: per row and column, the dot product of `a`'s row with the column
/// dequantized from the packed layout of [`crate::nbits`], plus the bias.
fn emit_nbits<'c>(b: &Builder<'c>, f: &PlanFn<'c, '_>, q: &NBitsMatMul) -> R<()> {
    if !matches!(q.bits, 4 | 8) || q.block == 0 {
        return Err(malformed("a low-bit product of unsupported bits or block"));
    }
    if q.rows() == 0 || q.n == 0 {
        return Ok(());
    }
    if !q.scales.is_multiple_of(4) {
        return Err(malformed("scales that are not 4-byte aligned"));
    }
    let f32t = Type::float32(b.ctx);
    let bytes = f.whole(b, Mem::Weights, Scalar::U8)?;
    let scales = f.whole(b, Mem::Weights, Scalar::F32)?;
    let a = f.base(b, q.a.region, Scalar::F32, q.a.byte_offset, None)?;
    let c = f.base(b, q.c.region, Scalar::F32, q.c.byte_offset, None)?;
    let bias = match q.bias {
        Some((region, offset)) => Some(f.base(b, region, Scalar::F32, offset as i64, None)?),
        None => None,
    };
    let (kb, rb) = (q.k_blocks() as i64, row_bytes(q.k, q.bits) as i64);
    let mut extents = q.batch.clone();
    extents.push(q.m);
    let n_batch = q.batch.len();
    b.nest(f.entry, &extents, &[], &[], &mut |blk, idx, _| {
        let row = |v: &MatView, base: Base<'c>| {
            let mut strides = v.batch_strides.clone();
            strides.push(v.row_stride);
            linear(b, blk, base.offset, &strides, &idx[..=n_batch])
        };
        let (a_row, c_row) = (row(&q.a, a)?, row(&q.c, c)?);
        b.for_loop(blk, q.n, &[], &mut |nb, n, _| {
            let n = b.to_i64(nb, n)?;
            let zero = b.float(nb, f32t, 0.0)?;
            let col = linear(b, nb, q.b as i64, &[rb], &[n])?;
            let blocks = linear(b, nb, 0, &[kb], &[n])?;
            let sum = b.for_loop(nb, q.k, &[zero], &mut |kb_blk, k, acc| {
                let blk = kb_blk;
                let k = b.to_i64(blk, k)?;
                let raw = if q.bits == 4 {
                    let (c32, c16, c4) = (b.i64c(blk, 32)?, b.i64c(blk, 16)?, b.i64c(blk, 4)?);
                    let group = b.bin(blk, "arith.divui", k, c32)?;
                    let within = b.bin(blk, "arith.remui", k, c32)?;
                    let lane = b.bin(blk, "arith.remui", within, c16)?;
                    let half = b.bin(blk, "arith.divui", within, c16)?;
                    let at = b.bin(blk, "arith.muli", group, c16)?;
                    let at = b.bin(blk, "arith.addi", at, lane)?;
                    let at = b.bin(blk, "arith.addi", at, col)?;
                    let byte = load_elem(
                        b,
                        blk,
                        Base {
                            mem: bytes,
                            offset: 0,
                        },
                        at,
                        Scalar::U8,
                    )?;
                    let shift = b.bin(blk, "arith.muli", half, c4)?;
                    let shift = b.cast(blk, "arith.trunci", shift, b.i(8))?;
                    let nib = b.bin(blk, "arith.shrui", byte, shift)?;
                    let mask = b.int(blk, b.i(8), 0xF)?;
                    let nib = b.bin(blk, "arith.andi", nib, mask)?;
                    if q.signed {
                        let four = b.int(blk, b.i(8), 4)?;
                        let up = b.bin(blk, "arith.shli", nib, four)?;
                        b.bin(blk, "arith.shrsi", up, four)?
                    } else {
                        nib
                    }
                } else {
                    let at = b.bin(blk, "arith.addi", col, k)?;
                    load_elem(
                        b,
                        blk,
                        Base {
                            mem: bytes,
                            offset: 0,
                        },
                        at,
                        Scalar::U8,
                    )?
                };
                let widen = |v: V<'c>| {
                    b.cast(
                        blk,
                        if q.signed {
                            "arith.extsi"
                        } else {
                            "arith.extui"
                        },
                        v,
                        b.i(32),
                    )
                };
                let mut value = widen(raw)?;
                let block = b.i64c(blk, q.block as i64)?;
                let kblock = b.bin(blk, "arith.divui", k, block)?;
                let at = b.bin(blk, "arith.addi", blocks, kblock)?;
                if let Some(zp) = q.zero_points {
                    let zat = b.i64c(blk, zp as i64)?;
                    let zat = b.bin(blk, "arith.addi", zat, at)?;
                    let z = load_elem(
                        b,
                        blk,
                        Base {
                            mem: bytes,
                            offset: 0,
                        },
                        zat,
                        Scalar::U8,
                    )?;
                    let z = widen(z)?;
                    value = b.bin(blk, "arith.subi", value, z)?;
                }
                let sat = b.i64c(blk, q.scales as i64 / 4)?;
                let sat = b.bin(blk, "arith.addi", sat, at)?;
                let scale = load_elem(
                    b,
                    blk,
                    Base {
                        mem: scales,
                        offset: 0,
                    },
                    sat,
                    Scalar::F32,
                )?;
                let w = b.cast(blk, "arith.sitofp", value, f32t)?;
                let w = b.bin(blk, "arith.mulf", w, scale)?;
                let a_at = b.bin(blk, "arith.addi", a_row, k)?;
                let x = load_elem(b, blk, a, a_at, Scalar::F32)?;
                let p = b.bin(blk, "arith.mulf", x, w)?;
                Ok(vec![b.bin(blk, "arith.addf", acc[0], p)?])
            })?;
            let mut r = sum[0];
            if let Some(bias) = bias {
                let at = b.bin(nb, "arith.addi", n, b.i64c(nb, bias.offset)?)?;
                let v = load_elem(
                    b,
                    nb,
                    Base {
                        mem: bias.mem,
                        offset: 0,
                    },
                    at,
                    Scalar::F32,
                )?;
                r = b.bin(nb, "arith.addf", r, v)?;
            }
            let dst = b.bin(nb, "arith.addi", c_row, n)?;
            store_elem(b, nb, c, dst, Scalar::F32, r)?;
            Ok(vec![])
        })?;
        Ok(vec![])
    })?;
    Ok(())
}

/// `@main(arena, weights, state, inputs..., outputs...)`: the inputs copied into the arena,
/// `@memc_plan` called, the outputs copied out.
fn main_function<'c>(
    b: &Builder<'c>,
    program: &Program,
    region_types: &[Type<'c>],
) -> R<melior::ir::Operation<'c>> {
    let io_type = |io: &crate::program::IoTensor| b.memref(b.stored(io.elem), &io.shape);
    let mut types = region_types.to_vec();
    types.extend(program.inputs.iter().map(io_type));
    types.extend(program.outputs.iter().map(io_type));
    let entry = Block::new(&types.iter().map(|&t| (t, b.loc)).collect::<Vec<_>>());
    {
        let regions = [arg(&entry, 0)?, arg(&entry, 1)?, arg(&entry, 2)?];
        for (i, io) in program.inputs.iter().enumerate() {
            let at = b.view(&entry, regions[0], io.byte_offset, io_type(io))?;
            let given = arg(&entry, 3 + i)?;
            b.op(&entry, "memref.copy", &[given, at], &[], &[], vec![])?;
        }
        let callee = melior::ir::attribute::FlatSymbolRefAttribute::new(b.ctx, "memc_plan");
        b.op(
            &entry,
            "func.call",
            &regions,
            &[],
            &[b.attr("callee", callee.into())],
            vec![],
        )?;
        for (i, io) in program.outputs.iter().enumerate() {
            let region = regions[region_index(io.region)];
            let at = b.view(&entry, region, io.byte_offset, io_type(io))?;
            let wanted = arg(&entry, 3 + program.inputs.len() + i)?;
            b.op(&entry, "memref.copy", &[at, wanted], &[], &[], vec![])?;
        }
        b.yield_(&entry, "func.return", &[])?;
    }
    function(b, "main", &types, entry)
}
