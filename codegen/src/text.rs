//! The text form of kernels and programs: what `memc compile --emit kernels` prints and what
//! the lowering lit-tests snapshot.
//!
//! The form reads like an MLIR or Cranelift dump. A program lists its regions, I/O tensors and
//! weight slots, then one block per step with its kernels. A loop kernel declares its views
//! first (`v0 = arena[+1024] f32 strides [32, 1]`, with guards and pad values), then spells its
//! index space as loops (`for i0 in 0..4, i1 in 0..8`; axes are numbered outer first, then
//! inner, as in [`crate::kernel`]) and each stage as a block of named SSA values
//! (`%2 = add %0, %1 : f32`). Stores read `store %2, v0`; an accumulating one is `store +=`, and
//! an indirect one lists its terms as an indirect load does (`store += %8, v0 indirect [%0 * 4
//! limit 10]`). Contractions and low-bit products show their operands as shaped views and the
//! product they compute.
//!
//! Guarantees: the text is a pure function of the kernels (and, for
//! [`ProgramText::with_plan`], the memory plan): no addresses, no hash order, floats printed
//! exactly (Rust's shortest round-trip form). Every enum is matched exhaustively, so a new
//! instruction or kernel kind without a spelling is a build error. The form is for people and
//! snapshots; nothing parses it back (plans store kernels as data).

use crate::kernel::{
    BinaryOp, Contract, ContractB, Guard, Im2colView, IndirectIndex, Inst, InstKind, Kernel,
    KernelBody, LoopKernel, MatView, NBitsMatMul, ReduceOp, Region, Scalar, Stage, Store, UnaryOp,
    View,
};
use crate::nbits::{self, PackSpec};
use crate::program::{IoTensor, Program, Step, WeightSlot};
use memc_passes::memory::MemoryPlan;
use std::fmt::{self, Display, Formatter, Write};

impl Display for Scalar {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Display for Region {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Region::Arena => "arena",
            Region::Weights => "weights",
            Region::State => "state",
        })
    }
}

impl UnaryOp {
    /// The op's name in the text form.
    pub fn text_name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Sign => "sign",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Reciprocal => "reciprocal",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tan => "tan",
            UnaryOp::Asin => "asin",
            UnaryOp::Acos => "acos",
            UnaryOp::Atan => "atan",
            UnaryOp::Sinh => "sinh",
            UnaryOp::Cosh => "cosh",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Asinh => "asinh",
            UnaryOp::Acosh => "acosh",
            UnaryOp::Atanh => "atanh",
            UnaryOp::Erf => "erf",
            UnaryOp::Not => "not",
            UnaryOp::BitNot => "bitnot",
            UnaryOp::IsNan => "isnan",
            UnaryOp::IsPosInf => "isposinf",
            UnaryOp::IsNegInf => "isneginf",
        }
    }
}

impl BinaryOp {
    /// The op's name in the text form.
    pub fn text_name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Rem => "rem",
            BinaryOp::FloorMod => "floormod",
            BinaryOp::Pow => "pow",
            BinaryOp::Min => "min",
            BinaryOp::Max => "max",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Xor => "xor",
            BinaryOp::BitAnd => "bitand",
            BinaryOp::BitOr => "bitor",
            BinaryOp::BitXor => "bitxor",
            BinaryOp::Shl => "shl",
            BinaryOp::Shr => "shr",
            BinaryOp::Eq => "eq",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
        }
    }
}

impl ReduceOp {
    /// The op's name in the text form.
    pub fn text_name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::ArgMax { last: false } => "argmax",
            ReduceOp::ArgMax { last: true } => "argmax_last",
            ReduceOp::ArgMin { last: false } => "argmin",
            ReduceOp::ArgMin { last: true } => "argmin_last",
        }
    }
}

/// A constant's bits as a value of `ty`: an `f64` for float types, a bool, or an integer
/// (see [`InstKind::Const`]).
fn constant(ty: Scalar, bits: u64) -> String {
    if ty.is_float() {
        format!("{:?}", f64::from_bits(bits))
    } else if ty == Scalar::Bool {
        (bits != 0).to_string()
    } else if ty.is_signed_int() {
        (bits as i64).to_string()
    } else {
        bits.to_string()
    }
}

/// `arena[+1024]`, `weights[+0]`, `arena[-8]`.
fn address(region: Region, byte_offset: i64) -> String {
    format!("{region}[{byte_offset:+}]")
}

/// `[2, 3]`.
fn list<T: Display>(items: &[T]) -> String {
    let items: Vec<String> = items.iter().map(T::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// `2x3x4` (a scalar is `[]`).
fn shape(dims: &[u64]) -> String {
    if dims.is_empty() {
        return "[]".into();
    }
    let dims: Vec<String> = dims.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join("x"))
}

/// `2*i1 + i3 - 1`: an affine form over the loop indices.
fn affine(coeffs: &[i64], offset: i64) -> String {
    let mut text = String::new();
    for (axis, &c) in coeffs.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let magnitude = c.unsigned_abs();
        let term = if magnitude == 1 {
            format!("i{axis}")
        } else {
            format!("{magnitude}*i{axis}")
        };
        match (text.is_empty(), c < 0) {
            (true, false) => text.push_str(&term),
            (true, true) => text.push_str(&format!("-{term}")),
            (false, false) => text.push_str(&format!(" + {term}")),
            (false, true) => text.push_str(&format!(" - {term}")),
        }
    }
    match (text.is_empty(), offset) {
        (true, _) => offset.to_string(),
        (false, 0) => text,
        (false, o) if o < 0 => format!("{text} - {}", o.unsigned_abs()),
        (false, o) => format!("{text} + {o}"),
    }
}

/// `i0 in 0..4, i1 in 0..8` for the axes `first..first + extents.len()`.
fn loops(first: usize, extents: &[u64]) -> String {
    let parts: Vec<String> = extents
        .iter()
        .enumerate()
        .map(|(j, e)| format!("i{} in 0..{e}", first + j))
        .collect();
    parts.join(", ")
}

impl Display for Guard {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "0 <= {} < {}",
            affine(&self.coeffs, self.offset),
            self.limit
        )
    }
}

impl Display for View {
    /// `arena[+1024] f32 strides [32, 1]`, then `if 0 <= i1 - 1 < 8, ... else 0.0` when guarded.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} strides {}",
            address(self.region, self.byte_offset),
            self.elem,
            list(&self.strides)
        )?;
        if !self.guards.is_empty() {
            let guards: Vec<String> = self.guards.iter().map(Guard::to_string).collect();
            write!(
                f,
                " if {} else {}",
                guards.join(", "),
                constant(Scalar::F64, self.pad)
            )?;
        }
        Ok(())
    }
}

/// Indirect index terms: `[%0 * 64 limit 4096, ...]`.
fn indirect(indices: &[IndirectIndex]) -> String {
    let terms: Vec<String> = indices
        .iter()
        .map(|i| format!("%{} * {} limit {}", i.index, i.stride, i.limit))
        .collect();
    format!("[{}]", terms.join(", "))
}

/// One instruction `%id = ...` of a stage.
fn write_inst(out: &mut dyn Write, pad: &str, id: usize, inst: &Inst) -> fmt::Result {
    let ty = inst.ty;
    write!(out, "{pad}%{id} = ")?;
    match &inst.kind {
        InstKind::Load { view } => write!(out, "load v{view}")?,
        InstKind::LoadIndirect { view, indices } => {
            write!(out, "load v{view} indirect {}", indirect(indices))?;
        }
        InstKind::Const { bits } => write!(out, "const {}", constant(ty, *bits))?,
        InstKind::Index { axis } => write!(out, "index i{axis}")?,
        InstKind::Acc { stage } => write!(out, "acc s{stage}")?,
        InstKind::Unary { op, arg } => write!(out, "{} %{arg}", op.text_name())?,
        InstKind::Binary { op, lhs, rhs } => write!(out, "{} %{lhs}, %{rhs}", op.text_name())?,
        InstKind::Select { cond, then, else_ } => write!(out, "select %{cond}, %{then}, %{else_}")?,
        InstKind::Cast { arg } => write!(out, "cast %{arg}")?,
        InstKind::Narrow { arg, to } => write!(out, "narrow.{} %{arg}", to.name())?,
    }
    writeln!(out, " : {ty}")
}

fn write_insts(out: &mut dyn Write, pad: &str, insts: &[Inst]) -> fmt::Result {
    for (id, inst) in insts.iter().enumerate() {
        write_inst(out, pad, id, inst)?;
    }
    Ok(())
}

fn write_stores(out: &mut dyn Write, pad: &str, stores: &[Store]) -> fmt::Result {
    for store in stores {
        // `store +=` accumulates; an indirect store spells its terms like an indirect load.
        let op = if store.accumulate {
            "store +="
        } else {
            "store"
        };
        write!(out, "{pad}{op} %{}, v{}", store.value, store.view)?;
        if !store.indices.is_empty() {
            write!(out, " indirect {}", indirect(&store.indices))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The inner loops of a stage: ` over i2 in 0..16` (nothing when there are none).
fn over(k: &LoopKernel) -> String {
    if k.inner.is_empty() {
        String::new()
    } else {
        format!(" over {}", loops(k.outer.len(), &k.inner))
    }
}

fn write_loop(out: &mut dyn Write, pad: &str, k: &LoopKernel) -> fmt::Result {
    for (i, view) in k.views.iter().enumerate() {
        writeln!(out, "{pad}v{i} = {view}")?;
    }
    let (body_pad, close) = if k.outer.is_empty() {
        (pad.to_string(), false)
    } else {
        let rows = k.parallel_rows();
        writeln!(
            out,
            "{pad}for {} {{  // {rows} parallel row{}",
            loops(0, &k.outer),
            if rows == 1 { "" } else { "s" }
        )?;
        (format!("{pad}  "), true)
    };
    let inner_pad = format!("{body_pad}  ");
    for (s, stage) in k.stages.iter().enumerate() {
        match stage {
            Stage::Reduce {
                insts,
                value,
                op,
                init,
                ty,
            } => {
                writeln!(
                    out,
                    "{body_pad}s{s} = reduce {} init {} : {ty}{} {{",
                    op.text_name(),
                    constant(*ty, *init),
                    over(k)
                )?;
                write_insts(out, &inner_pad, insts)?;
                writeln!(out, "{inner_pad}yield %{value}")?;
            }
            Stage::Map { insts, stores } => {
                writeln!(out, "{body_pad}map{} {{", over(k))?;
                write_insts(out, &inner_pad, insts)?;
                write_stores(out, &inner_pad, stores)?;
            }
            Stage::Once { insts, stores } => {
                writeln!(out, "{body_pad}once {{")?;
                write_insts(out, &inner_pad, insts)?;
                write_stores(out, &inner_pad, stores)?;
            }
        }
        writeln!(out, "{body_pad}}}")?;
    }
    if close {
        writeln!(out, "{pad}}}")?;
    }
    Ok(())
}

/// A matrix operand over `batch` x `rows` x `cols`: `f32 [2x4x16] = arena[+0] strides [64, 16, 1]`.
fn mat_view(view: &MatView, elem: Scalar, batch: &[u64], rows: u64, cols: u64) -> String {
    let mut dims = batch.to_vec();
    dims.extend([rows, cols]);
    let mut strides = view.batch_strides.clone();
    strides.extend([view.row_stride, view.col_stride]);
    format!(
        "{elem} {} = {} strides {}",
        shape(&dims),
        address(view.region, view.byte_offset),
        list(&strides)
    )
}

/// An implicit im2col operand: its shape, the input it reads, and per spatial axis
/// `size:stride kernel/step/dilation pad -> out`.
fn im2col_view(view: &Im2colView, c: &Contract) -> String {
    let mut dims = c.batch.clone();
    dims.extend([c.k, c.n]);
    let mut strides = view.batch_strides.clone();
    strides.push(view.channel_stride);
    let axes: Vec<String> = view
        .axes
        .iter()
        .map(|a| {
            format!(
                "{}:{} k{}/s{}/d{} pad {} -> {}",
                a.size, a.stride, a.kernel, a.step, a.dilation, a.pad, a.out
            )
        })
        .collect();
    format!(
        "{} {} = im2col{} of {} channels at {} strides {} axes [{}]",
        c.elem,
        shape(&dims),
        if view.transposed { "^T" } else { "" },
        view.channels,
        address(view.region, view.byte_offset),
        list(&strides),
        axes.join(", ")
    )
}

fn write_contract(out: &mut dyn Write, pad: &str, c: &Contract) -> fmt::Result {
    writeln!(
        out,
        "{pad}a: {}",
        mat_view(&c.a, c.elem, &c.batch, c.m, c.k)
    )?;
    match &c.b {
        ContractB::Mat(view) => writeln!(
            out,
            "{pad}b: {}",
            mat_view(view, c.elem, &c.batch, c.k, c.n)
        )?,
        ContractB::Im2col(view) => writeln!(out, "{pad}b: {}", im2col_view(view, c))?,
    }
    writeln!(
        out,
        "{pad}c: {}",
        mat_view(&c.c, c.elem, &c.batch, c.m, c.n)
    )?;
    let b_name = if c.transposed { "a^T" } else { "b" };
    if c.transposed {
        writeln!(out, "{pad}run transposed: c^T = b^T a^T")?;
    }
    if let Some(w) = &c.winograd {
        writeln!(
            out,
            "{pad}run winograd F(2x2, 3x3): blocks of {} tiles, chunks of {} output channels, pieces of {} input channels, {} scratch slots",
            w.block, w.chunk, w.depth, w.slots
        )?;
    }
    let a_name = if c.winograd.is_some() {
        "a (winograd)"
    } else {
        "a"
    };
    for (name, packed) in [(a_name, &c.a_packed), (b_name, &c.b_packed)] {
        if let Some(packed) = packed {
            writeln!(
                out,
                "{pad}{name} packed: {} batch strides {:?}",
                address(Region::Weights, packed.byte_offset as i64),
                packed.batch_strides
            )?;
        }
    }
    if let Some(offset) = c.pack {
        let bytes = c.scratch_bytes();
        writeln!(
            out,
            "{pad}pack: {bytes} bytes = {}",
            address(Region::Arena, offset as i64)
        )?;
    }
    let alpha = f64::from_bits(c.alpha);
    let scaled = if alpha == 1.0 {
        String::new()
    } else {
        format!("{alpha:?} * ")
    };
    let assign = if c.accumulate { "+=" } else { "=" };
    if c.batch.is_empty() {
        writeln!(out, "{pad}c {assign} {scaled}a @ b")
    } else {
        let batch: Vec<String> = c
            .batch
            .iter()
            .enumerate()
            .map(|(j, e)| format!("b{j} in 0..{e}"))
            .collect();
        writeln!(
            out,
            "{pad}for {} {{ c {assign} {scaled}a @ b }}",
            batch.join(", ")
        )
    }
}

fn write_nbits(out: &mut dyn Write, pad: &str, q: &NBitsMatMul) -> fmt::Result {
    writeln!(
        out,
        "{pad}a: {}",
        mat_view(&q.a, Scalar::F32, &q.batch, q.m, q.k)
    )?;
    writeln!(
        out,
        "{pad}c: {}",
        mat_view(&q.c, Scalar::F32, &q.batch, q.m, q.n)
    )?;
    let k_blocks = q.k_blocks();
    writeln!(
        out,
        "{pad}b: packed [{} columns x {} bytes] = {}",
        q.n,
        nbits::row_bytes(q.k, q.bits),
        address(Region::Weights, q.b as i64)
    )?;
    writeln!(
        out,
        "{pad}scales: f32 {} = {}",
        shape(&[q.n, k_blocks]),
        address(Region::Weights, q.scales as i64)
    )?;
    if let Some(zero_points) = q.zero_points {
        writeln!(
            out,
            "{pad}zero_points: {} {} = {}",
            if q.signed { "i8" } else { "u8" },
            shape(&[q.n, k_blocks]),
            address(Region::Weights, zero_points as i64)
        )?;
    }
    if let Some((region, offset)) = q.bias {
        writeln!(
            out,
            "{pad}bias: f32 {} = {}",
            shape(&[q.n]),
            address(region, offset as i64)
        )?;
    }
    match q.scratch {
        Some(offset) => writeln!(
            out,
            "{pad}scratch: {} bytes = {}  // {} rows: a gemm, b's panels dequantized here",
            nbits::scratch_bytes(q.rows(), q.n, q.k),
            address(Region::Arena, offset as i64),
            q.rows()
        )?,
        None if q.rows() > crate::cpu::target::FEW_ROWS_MAX => writeln!(
            out,
            "{pad}// {} rows: a gemm, b's panels dequantized on the stack (no scratch planned)",
            q.rows()
        )?,
        None => writeln!(
            out,
            "{pad}// {} row{}: each weight decoded once into every row, no scratch",
            q.rows(),
            if q.rows() == 1 { "" } else { "s" }
        )?,
    }
    let zero_points = if q.zero_points.is_some() {
        ", zero_points"
    } else {
        ""
    };
    let bias = if q.bias.is_some() { " + bias" } else { "" };
    writeln!(out, "{pad}c = a @ dequantize(b, scales{zero_points}){bias}")
}

/// The kind line of a kernel after its name: `loop`, `contract f32`, `nbits 4-bit ...`.
fn kind(body: &KernelBody) -> String {
    match body {
        KernelBody::Loop(_) => "loop".into(),
        KernelBody::Contract(c) => format!("contract {}", c.elem),
        KernelBody::NBits(q) => format!(
            "nbits {}-bit {} block {}",
            q.bits,
            if q.signed { "signed" } else { "unsigned" },
            q.block
        ),
    }
}

/// A kernel titled `title` (its quoted name, or `#0` under its step).
fn write_kernel(out: &mut dyn Write, pad: &str, title: &str, kernel: &Kernel) -> fmt::Result {
    writeln!(out, "{pad}kernel {title} {} {{", kind(&kernel.body))?;
    let body_pad = format!("{pad}  ");
    match &kernel.body {
        KernelBody::Loop(k) => write_loop(out, &body_pad, k)?,
        KernelBody::Contract(c) => write_contract(out, &body_pad, c)?,
        KernelBody::NBits(q) => write_nbits(out, &body_pad, q)?,
    }
    writeln!(out, "{pad}}}")
}

impl Display for Kernel {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_kernel(f, "", &format!("{:?}", self.name), self)
    }
}

impl Display for LoopKernel {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_loop(f, "", self)
    }
}

impl Display for Contract {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_contract(f, "", self)
    }
}

impl Display for NBitsMatMul {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_nbits(f, "", self)
    }
}

impl Display for KernelBody {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            KernelBody::Loop(k) => write_loop(f, "", k),
            KernelBody::Contract(c) => write_contract(f, "", c),
            KernelBody::NBits(q) => write_nbits(f, "", q),
        }
    }
}

impl Display for IoTensor {
    /// `"image": f32 [1x3x16x16] = arena[+0]`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?}: {} {} = {}",
            self.name,
            self.elem,
            shape(&self.shape),
            address(self.region, self.byte_offset as i64)
        )?;
        // `, extent of axis 1 at arena[+64]` for a bounded output.
        if let Some(slot) = self.extent {
            write!(
                f,
                ", extent of axis {} at {}",
                slot.axis,
                address(Region::Arena, slot.byte_offset as i64)
            )?;
        }
        Ok(())
    }
}

impl Display for PackSpec {
    /// `nbits.values of "w" (scales "s", zero_points "zp", K 64, N 32, 4-bit unsigned, ...)`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "nbits.{} of {:?} (scales {:?}",
            self.part.name(),
            self.b,
            self.scales
        )?;
        if let Some(zero_points) = &self.zero_points {
            write!(f, ", zero_points {zero_points:?}")?;
        }
        write!(
            f,
            ", K {}, N {}, {}-bit {}, B stored {}, ",
            self.k,
            self.n,
            self.bits,
            if self.signed { "signed" } else { "unsigned" },
            if self.trans_b { "[N, K]" } else { "[K, N]" },
        )?;
        if self.per_tensor {
            write!(f, "per tensor")?;
        } else if self.block_size == 0 {
            write!(f, "per axis {}", self.axis)?;
        } else {
            write!(f, "axis {} block_size {}", self.axis, self.block_size)?;
        }
        write!(f, ", block {}, layout {:?})", self.block, self.layout)
    }
}

impl Display for WeightSlot {
    /// `"fc.w" = weights[+0] 640 bytes`, then what a packed slot is computed from.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} = {} {} bytes",
            self.name,
            address(Region::Weights, self.byte_offset as i64),
            self.byte_size
        )?;
        if let Some(spec) = &self.pack {
            write!(f, ", packed {spec}")?;
        }
        if let Some(elem) = self.unpacked {
            write!(f, ", {} one per byte", elem.name())?;
        }
        if let Some(spec) = &self.operand {
            // `, operand "w" packed_a (f32 64x576 at +0, strides 576x1, 2 matrices)`.
            let matrices: u64 = spec.matrices.iter().map(|&(e, _)| e).product();
            write!(
                f,
                ", operand {:?} {} ({} {}x{} at +{}, strides {}x{}, {} matri{})",
                spec.weight,
                match spec.layout {
                    crate::prepack::OperandLayout::PackedA => "packed_a",
                    crate::prepack::OperandLayout::PackedB => "packed_b",
                    crate::prepack::OperandLayout::RowMajor => "row_major",
                    crate::prepack::OperandLayout::Winograd => "winograd",
                },
                spec.elem.name(),
                spec.rows,
                spec.cols,
                spec.offset,
                spec.row_stride,
                spec.col_stride,
                matrices,
                if matrices == 1 { "x" } else { "ces" }
            )?;
        }
        Ok(())
    }
}

/// A program's text, optionally with what its memory plan adds (each step's scratch).
pub struct ProgramText<'a> {
    program: &'a Program,
    plan: Option<&'a MemoryPlan>,
}

impl<'a> ProgramText<'a> {
    pub fn new(program: &'a Program) -> ProgramText<'a> {
        ProgramText {
            program,
            plan: None,
        }
    }

    /// Also shows the scratch memory `plan` gave each step. `plan` must be the plan `program`
    /// was lowered from (its schedule is the program's steps, in order).
    pub fn with_plan(self, plan: &'a MemoryPlan) -> ProgramText<'a> {
        ProgramText {
            plan: Some(plan),
            ..self
        }
    }

    fn write_step(&self, f: &mut Formatter<'_>, index: usize, step: &Step) -> fmt::Result {
        // Step `index` runs the plan's `schedule[index]`; its scratch is the plan's entry for
        // that op.
        let op = self.plan.and_then(|plan| plan.schedule.get(index));
        let scratch: Vec<String> = self
            .plan
            .into_iter()
            .flat_map(|plan| &plan.scratch)
            .filter(|s| Some(&s.op) == op)
            .map(|s| {
                format!(
                    "  scratch {} bytes = {}",
                    s.size,
                    address(Region::Arena, s.offset as i64)
                )
            })
            .collect();
        if step.kernels.is_empty() && scratch.is_empty() {
            return writeln!(f, "  step {index} {}: no kernel", step.op);
        }
        writeln!(f, "  step {index} {} {{", step.op)?;
        for line in &scratch {
            writeln!(f, "  {line}")?;
        }
        for (i, kernel) in step.kernels.iter().enumerate() {
            // A kernel named after its step (`<op> #i`, as lowering names them) is `#i` here.
            let title = if kernel.name == format!("{} #{i}", step.op) {
                format!("#{i}")
            } else {
                format!("{:?}", kernel.name)
            };
            write_kernel(f, "    ", &title, kernel)?;
        }
        writeln!(f, "  }}")
    }
}

impl Display for ProgramText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let p = self.program;
        writeln!(f, "program {{")?;
        writeln!(f, "  arena {} bytes", p.arena_size)?;
        writeln!(f, "  weights {} bytes", p.weights_size)?;
        for input in &p.inputs {
            writeln!(f, "  input {input}")?;
        }
        for output in &p.outputs {
            writeln!(f, "  output {output}")?;
        }
        if !p.state.is_empty() {
            writeln!(f, "  state {} bytes", p.state_size)?;
        }
        for s in &p.state {
            writeln!(
                f,
                "  {} {:?}: {} {} = {}",
                s.kind.name(),
                s.name,
                s.elem,
                shape(&s.shape),
                address(Region::State, s.byte_offset as i64)
            )?;
        }
        // The parts of one packed weight come in a row with the same spec but for the part;
        // the spec is spelled once, at the first of them.
        let mut previous: Option<&PackSpec> = None;
        for slot in &p.weights {
            match (&slot.pack, previous) {
                (Some(spec), Some(prev))
                    if PackSpec {
                        part: spec.part,
                        ..prev.clone()
                    } == *spec =>
                {
                    writeln!(
                        f,
                        "  weight {:?} = {} {} bytes, packed nbits.{} of the same",
                        slot.name,
                        address(Region::Weights, slot.byte_offset as i64),
                        slot.byte_size,
                        spec.part.name()
                    )?;
                }
                _ => writeln!(f, "  weight {slot}")?,
            }
            previous = slot.pack.as_ref();
        }
        for (index, step) in p.steps.iter().enumerate() {
            self.write_step(f, index, step)?;
        }
        writeln!(f, "}}")
    }
}

impl Display for Program {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        ProgramText::new(self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::affine;
    use crate::kernel::{
        BinaryOp, Guard, IndirectIndex, Inst, InstKind, Kernel, KernelBody, LoopKernel, Region,
        Scalar, Stage, Store, View,
    };

    fn view(region: Region, elem: Scalar, byte_offset: i64, strides: Vec<i64>) -> View {
        View {
            region,
            elem,
            byte_offset,
            strides,
            guards: Vec::new(),
            pad: 0,
        }
    }

    #[test]
    fn loop_kernels_spell_views_loops_and_values() {
        let inst = |ty, kind| Inst { ty, kind };
        let padded = View {
            guards: vec![Guard {
                coeffs: vec![0, 1, 1],
                offset: -1,
                limit: 4,
            }],
            pad: (-1.5f64).to_bits(),
            ..view(Region::Arena, Scalar::F32, -4, vec![4, 1, 1])
        };
        let kernel = Kernel {
            name: "demo \"k\" #0".into(),
            body: KernelBody::Loop(LoopKernel {
                outer: vec![2, 4],
                inner: vec![3],
                views: vec![
                    view(Region::Arena, Scalar::F32, 64, vec![4, 1, 0]),
                    padded,
                    view(Region::Weights, Scalar::F32, 0, vec![0, 0, 0]),
                ],
                stages: vec![
                    Stage::Reduce {
                        insts: vec![inst(Scalar::F32, InstKind::Load { view: 1 })],
                        value: 0,
                        op: crate::kernel::ReduceOp::Sum,
                        init: 0f64.to_bits(),
                        ty: Scalar::F32,
                    },
                    Stage::Once {
                        insts: vec![
                            inst(Scalar::I64, InstKind::Index { axis: 1 }),
                            inst(
                                Scalar::I64,
                                InstKind::Const {
                                    bits: (-2i64) as u64,
                                },
                            ),
                            inst(
                                Scalar::Bool,
                                InstKind::Binary {
                                    op: BinaryOp::Lt,
                                    lhs: 0,
                                    rhs: 1,
                                },
                            ),
                            inst(
                                Scalar::F32,
                                InstKind::LoadIndirect {
                                    view: 2,
                                    indices: vec![IndirectIndex {
                                        index: 0,
                                        stride: 1,
                                        limit: 5,
                                    }],
                                },
                            ),
                            inst(Scalar::F32, InstKind::Acc { stage: 0 }),
                            inst(
                                Scalar::F32,
                                InstKind::Select {
                                    cond: 2,
                                    then: 3,
                                    else_: 4,
                                },
                            ),
                        ],
                        stores: vec![Store::new(0, 5)],
                    },
                ],
            }),
        };
        let expected = "\
kernel \"demo \\\"k\\\" #0\" loop {
  v0 = arena[+64] f32 strides [4, 1, 0]
  v1 = arena[-4] f32 strides [4, 1, 1] if 0 <= i1 + i2 - 1 < 4 else -1.5
  v2 = weights[+0] f32 strides [0, 0, 0]
  for i0 in 0..2, i1 in 0..4 {  // 8 parallel rows
    s0 = reduce sum init 0.0 : f32 over i2 in 0..3 {
      %0 = load v1 : f32
      yield %0
    }
    once {
      %0 = index i1 : i64
      %1 = const -2 : i64
      %2 = lt %0, %1 : bool
      %3 = load v2 indirect [%0 * 1 limit 5] : f32
      %4 = acc s0 : f32
      %5 = select %2, %3, %4 : f32
      store %5, v0
    }
  }
}
";
        assert_eq!(kernel.to_string(), expected);
    }

    #[test]
    fn affine_forms_read_like_algebra() {
        assert_eq!(affine(&[0, 2, 0, 1], -1), "2*i1 + i3 - 1");
        assert_eq!(affine(&[-1, 0], 3), "-i0 + 3");
        assert_eq!(affine(&[0, 0], 5), "5");
        assert_eq!(affine(&[1, -3], 0), "i0 - 3*i1");
    }
}
