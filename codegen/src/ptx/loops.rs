//! Loop kernels as PTX: one `.entry` per [`LoopKernel`], with the semantics of the reference
//! interpreter (`crate::reference`), instruction by instruction.
//!
//! # Forms
//!
//! Every form runs *rows* in a grid-stride loop (any grid size is correct; the launch picks one
//! that fills the GPU), each row by `T` threads:
//!
//! - **Thread** (`T = 1`): elementwise kernels (`inner` empty, no scatter): one thread per outer
//!   point, block 256. The linear point index is split into axis indices by the constant
//!   extents (32-bit division by immediates where the count fits, which ptxas turns into
//!   multiply-shifts). A kernel of one `Map` stage runs four grid-strided points per thread
//!   per iteration (all loads, then all stores), so several loads are in flight per thread;
//!   the grid is sized for four points per thread. Kernels whose stores scatter or accumulate ([`Store::is_scatter`]), or
//!   that store several points into one element (a zero store stride on an axis the row walks),
//!   also use one thread per row of the kernel contract ([`LoopKernel::parallel_rows`]), walking
//!   the row's points in loop order as the CPU does.
//!   Rows of an inner space shorter than 32 points also run on one thread each (in loop order).
//! - **Warp** (`T = 32`): kernels with an inner space: one warp per outer point (8 per block of
//!   256); lanes stride over the inner space; a `Reduce` folds per lane and combines lanes with
//!   `shfl.sync.bfly`, so every lane holds the accumulator later stages read (`Acc`); `Map`
//!   stores by lane; `Once` runs in lane 0 with inner indices 0. `bar.warp.sync -1` separates
//!   stages, so a stage sees what the ones before it stored.
//! - **Block** (`T = 512`): few rows (at most 256) with a long inner space (4096 or more): one
//!   block per row; warps combine through shared memory after their shuffles, every thread folds
//!   the per-warp partials in warp order, and `bar.sync 0` separates stages.
//!
//! Combined reductions fold in a different order than the reference (lanes, then the tree), so
//! float sums differ by rounding; integer reductions, Min/Max and ArgMax/ArgMin are exact
//! (ArgMax/ArgMin pick by value, ties by index, and keep the reference's NaN rule: a NaN first
//! element wins, any other NaN never does).
//!
//! # Values and memory
//!
//! See `loops/emit.rs` for the register representation of each kernel type and the scalar
//! semantics, `loops/math.rs` for the transcendental functions (computed in f64 without
//! `.approx` instructions, rounded to the value's type). Addresses are
//! `base(region) + byte_offset + elem_size * (sum strides * index + indirect terms)` in 64-bit
//! arithmetic; guarded loads are predicated and yield the view's pad; indirect indices are
//! wrapped and clamped as the contract says; the weights are read with `ld.global.nc`.
//!
//! # Guarantees
//!
//! Deterministic text; no panics; anything the emitter cannot express (a stride product that
//! overflows i64, a malformed operand) is [`PtxError::Unsupported`] naming the kernel.

mod convert;
mod emit;
mod math;

use super::{Launch, PtxEntry, PtxError, PARAMS};
use crate::kernel::{
    BinaryOp, IndirectIndex, Inst, InstKind, LoopKernel, ReduceOp, Region, RegionSizes, Scalar,
    Stage, Store, View,
};
use emit::{cls, const_imm, f32_imm, f64_imm, int_bounds, pad_imm, Cls, Em, Val, R};

/// Threads per block of the thread and warp forms.
const BLOCK: u32 = 256;
/// Threads per block (and per row) of the block form.
const ROW_BLOCK: u32 = 512;
/// Points per thread per iteration of plain elementwise kernels.
const UNROLL: u64 = 4;
/// Largest grid launched; the grid-stride loops cover the rest.
const MAX_GRID: u64 = 1 << 20;

pub(super) fn emit(
    k: &LoopKernel,
    kernel: &str,
    name: &str,
    _sizes: RegionSizes,
) -> Result<PtxEntry, PtxError> {
    let (text, launch) = build(k, name).map_err(|message| PtxError::Unsupported {
        kernel: kernel.to_string(),
        message,
    })?;
    Ok(PtxEntry {
        name: name.to_string(),
        text,
        launch,
    })
}

/// How a kernel's rows map onto threads.
struct Plan {
    /// Threads per row: 1, 32 or [`ROW_BLOCK`].
    t: u32,
    block: u32,
    /// The outer axes a row index spans (the rest, if any, is the last outer axis walked inside
    /// the row).
    row_axes: usize,
    rows: u64,
}

fn product(e: &[u64]) -> u64 {
    e.iter().product()
}

fn plan(k: &LoopKernel) -> Plan {
    let scatter = k.stages.iter().any(|s| match s {
        Stage::Map { stores, .. } | Stage::Once { stores, .. } => {
            stores.iter().any(Store::is_scatter)
        }
        Stage::Reduce { .. } => false,
    });
    let n_outer = k.outer.len();
    // Whether a store writes several points of the walked axes into one element.
    let overlapping = |axes: std::ops::Range<usize>, extents: &[u64]| {
        k.stages.iter().any(|s| match s {
            Stage::Map { stores, .. } => stores.iter().any(|st| {
                k.views.get(st.view as usize).is_some_and(|v| {
                    axes.clone()
                        .zip(extents)
                        .any(|(a, &e)| e > 1 && v.strides.get(a) == Some(&0))
                })
            }),
            _ => false,
        })
    };
    let thread_rows = |rows: u64| {
        let block = if rows < u64::from(BLOCK) {
            (rows.max(1).div_ceil(32) * 32) as u32
        } else {
            BLOCK
        };
        (block, rows)
    };
    if k.inner.is_empty() {
        let last = n_outer.saturating_sub(1);
        if n_outer > 0 && (scatter || overlapping(last..n_outer, &k.outer[last..])) {
            let rows = product(&k.outer[..last]);
            let (block, rows) = thread_rows(rows);
            return Plan {
                t: 1,
                block,
                row_axes: last,
                rows,
            };
        }
        let (block, rows) = thread_rows(product(&k.outer));
        return Plan {
            t: 1,
            block,
            row_axes: n_outer,
            rows,
        };
    }
    let rows = product(&k.outer);
    let inner = product(&k.inner);
    // Short rows (fewer points than a warp has lanes) run on one thread each: a warp would
    // leave most lanes idle, and one thread folds in the reference's order.
    if scatter || inner < 32 || overlapping(n_outer..n_outer + k.inner.len(), &k.inner) {
        let (block, rows) = thread_rows(rows);
        return Plan {
            t: 1,
            block,
            row_axes: n_outer,
            rows,
        };
    }
    if rows <= 256 && inner >= 4096 {
        return Plan {
            t: ROW_BLOCK,
            block: ROW_BLOCK,
            row_axes: n_outer,
            rows,
        };
    }
    Plan {
        t: 32,
        block: BLOCK,
        row_axes: n_outer,
        rows,
    }
}

/// The state of one entry being written.
struct Gen<'a> {
    em: Em,
    k: &'a LoopKernel,
    plan: Plan,
    /// Base addresses of the arena, weights and state.
    bases: [String; 3],
    /// The lane (0..T) of this thread in its row, u32.
    lane: String,
    /// Whether this thread is lane 0 of its row.
    lane0: String,
    /// The thread index, u32.
    tid: String,
    /// A b64 register holding 0 (inner indices of `Once` stages).
    zero: String,
    /// Whether the entry needs the shared scratch of the block form.
    shared: bool,
}

fn build(k: &LoopKernel, name: &str) -> R<(String, Launch)> {
    let plan = plan(k);
    let mut em = Em::new();
    let mut bases: [String; 3] = Default::default();
    for (i, p) in ["arena", "weights", "state"].iter().enumerate() {
        let raw = em.reg(Cls::Rd);
        em.ins(format!("ld.param.u64 {raw}, [{p}]"));
        bases[i] = em.op1(Cls::Rd, "cvta.to.global.u64", &raw);
    }
    let tid = em.op1(Cls::R, "mov.u32", "%tid.x");
    let zero = em.imm(Cls::Rd, "0");
    let lane = match plan.t {
        1 => em.imm(Cls::R, "0"),
        32 => em.op2(Cls::R, "and.b32", &tid, "31"),
        _ => tid.clone(),
    };
    let lane0 = em.setp("eq", "u32", &lane, "0");
    let mut g = Gen {
        em,
        k,
        bases,
        lane,
        lane0,
        tid,
        zero,
        shared: false,
        plan,
    };
    let empty = k.outer.contains(&0) || g.plan.rows == 0;
    let grid = if empty {
        1
    } else {
        g.rows_loop()?;
        let mut per_block = u64::from(g.plan.block / g.plan.t);
        if g.elementwise_map().is_some() {
            per_block *= UNROLL;
        }
        g.plan.rows.div_ceil(per_block).clamp(1, MAX_GRID) as u32
    };
    g.em.ins("ret");
    let block = if empty { 32 } else { g.plan.block };
    // `.maxntid` alone lets ptxas aim at a register count for occupancy and spill below it
    // (seen: a softmax spilling 4 bytes at 48 registers on sm_90); `.maxnreg` gives it every
    // register a block of this size can have (the register file holds 64 Ki per block).
    let maxnreg = (65536 / block.max(1)).min(255);
    let mut text = format!(
        ".visible .entry {name}{PARAMS}\n.maxntid {block}, 1, 1\n.maxnreg {maxnreg}\n{{\n{}",
        g.em.decls()
    );
    if g.shared {
        text.push_str(&format!(
            "\t.shared .align 16 .b8 memc_red[{}];\n",
            16 * (ROW_BLOCK / 32)
        ));
    }
    text.push_str(&g.em.body);
    text.push_str("}\n");
    Ok((
        text,
        Launch {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            shared_bytes: 0,
        },
    ))
}

impl<'a> Gen<'a> {
    /// The grid-stride loop over rows.
    fn rows_loop(&mut self) -> R<()> {
        let per_block = self.plan.block / self.plan.t;
        let em = &mut self.em;
        let ctaid = em.op1(Cls::R, "mov.u32", "%ctaid.x");
        let nctaid = em.op1(Cls::R, "mov.u32", "%nctaid.x");
        let rib = match self.plan.t {
            1 => self.tid.clone(),
            32 => em.op2(Cls::R, "shr.u32", &self.tid, "5"),
            _ => em.imm(Cls::R, "0"),
        };
        let row = em.reg(Cls::Rd);
        let base = em.op2(Cls::Rd, "mul.wide.u32", &ctaid, &per_block.to_string());
        let rib64 = em.op1(Cls::Rd, "cvt.u64.u32", &rib);
        em.ins(format!("add.s64 {row}, {base}, {rib64}"));
        let step = em.op2(Cls::Rd, "mul.wide.u32", &nctaid, &per_block.to_string());
        if let Some(insts_stores) = self.elementwise_map() {
            self.unrolled_points(&row, &step, insts_stores)?;
        }
        let em = &mut self.em;
        let top = em.label("row");
        let end = em.label("row_end");
        em.place(&top);
        let done = em.setp("ge", "u64", &row, &self.plan.rows.to_string());
        em.ins(format!("@{done} bra {end}"));
        let row_extents = self.k.outer[..self.plan.row_axes].to_vec();
        let mut axes = self.decompose(&row, 64, &row_extents);
        if self.plan.row_axes < self.k.outer.len() {
            // The last outer axis is walked inside the row, in order.
            let extent = self.k.outer[self.plan.row_axes];
            let l = self.em.imm(Cls::Rd, "0");
            let ltop = self.em.label("walk");
            self.em.place(&ltop);
            axes.push(l.clone());
            self.stages(&axes)?;
            self.em.ins(format!("add.s64 {l}, {l}, 1"));
            let more = self.em.setp("lt", "u64", &l, &extent.to_string());
            self.em.ins(format!("@{more} bra {ltop}"));
        } else {
            self.stages(&axes)?;
        }
        self.em.ins(format!("add.s64 {row}, {row}, {step}"));
        self.em.ins(format!("bra.uni {top}"));
        self.em.place(&end);
        Ok(())
    }

    /// The one `Map` stage of a plain elementwise kernel (thread form, inner space empty),
    /// which runs [`UNROLL`] points per thread per iteration.
    fn elementwise_map(&self) -> Option<(&'a [Inst], &'a [Store])> {
        let k: &'a LoopKernel = self.k;
        if self.plan.t != 1 || !k.inner.is_empty() || self.plan.row_axes != k.outer.len() {
            return None;
        }
        match k.stages.as_slice() {
            [Stage::Map { insts, stores }] => Some((insts, stores)),
            _ => None,
        }
    }

    /// [`UNROLL`] grid-strided points per iteration while all are in range: every point's
    /// loads and values first, then the stores (points are independent rows, so their order
    /// does not matter), leaving `row` at the first point not run.
    fn unrolled_points(&mut self, row: &str, step: &str, map: (&[Inst], &[Store])) -> R<()> {
        let (insts, stores) = map;
        let top = self.em.label("row4");
        let end = self.em.label("row4_end");
        self.em.place(&top);
        let span = self
            .em
            .op2(Cls::Rd, "mul.lo.s64", step, &(UNROLL - 1).to_string());
        let last = self.em.op2(Cls::Rd, "add.s64", row, &span);
        let done = self
            .em
            .setp("ge", "u64", &last, &self.plan.rows.to_string());
        self.em.ins(format!("@{done} bra {end}"));
        let extents = self.k.outer.clone();
        let mut points = Vec::new();
        let mut r = row.to_string();
        for u in 0..UNROLL {
            if u > 0 {
                r = self.em.op2(Cls::Rd, "add.s64", &r, step);
            }
            let axes = self.decompose(&r, 64, &extents);
            let vals = self.eval(insts, &axes, &[])?;
            points.push((axes, vals));
        }
        for (axes, vals) in &points {
            for s in stores {
                self.store(s, vals, axes)?;
            }
        }
        let r4 = self.em.op2(Cls::Rd, "add.s64", &r, step);
        self.em.ins(format!("mov.b64 {row}, {r4}"));
        self.em.ins(format!("bra.uni {top}"));
        self.em.place(&end);
        Ok(())
    }

    /// Splits linear index `lin` (a b64 register, or b32 if `bits` is 32) into indices of
    /// `extents` (row-major), as s64 registers.
    fn decompose(&mut self, lin: &str, bits: u32, extents: &[u64]) -> Vec<String> {
        let em = &mut self.em;
        if extents.is_empty() {
            return Vec::new();
        }
        let total = product(extents);
        let (mut cur, narrow) = if total <= u64::from(u32::MAX) {
            let c = if bits == 32 {
                lin.to_string()
            } else {
                em.op1(Cls::R, "cvt.u32.u64", lin)
            };
            (c, true)
        } else {
            (lin.to_string(), false)
        };
        let mut out = vec![String::new(); extents.len()];
        for (a, &e) in extents.iter().enumerate().rev() {
            let idx = if e == 1 {
                self.zero.clone()
            } else if a == 0 {
                if narrow {
                    em.op1(Cls::Rd, "cvt.u64.u32", &cur)
                } else {
                    cur.clone()
                }
            } else if narrow {
                let r = em.op2(Cls::R, "rem.u32", &cur, &e.to_string());
                cur = em.op2(Cls::R, "div.u32", &cur, &e.to_string());
                em.op1(Cls::Rd, "cvt.u64.u32", &r)
            } else {
                let r = em.op2(Cls::Rd, "rem.u64", &cur, &e.to_string());
                cur = em.op2(Cls::Rd, "div.u64", &cur, &e.to_string());
                r
            };
            out[a] = idx;
        }
        out
    }

    /// Every stage at one row (`outer` holds the outer axis indices).
    fn stages(&mut self, outer: &[String]) -> R<()> {
        let k = self.k;
        let mut accs: Vec<Option<Val>> = Vec::new();
        for stage in &k.stages {
            match stage {
                Stage::Reduce {
                    insts,
                    value,
                    op,
                    init,
                    ty,
                } => {
                    let acc = self.reduce(outer, insts, *value, *op, *init, *ty, &accs)?;
                    accs.push(Some(acc));
                }
                Stage::Map { insts, stores } => {
                    let (lp, axes) = self.inner_begin(outer);
                    if let Some(axes) = axes {
                        let vals = self.eval(insts, &axes, &accs)?;
                        for s in stores {
                            self.store(s, &vals, &axes)?;
                        }
                    }
                    self.inner_end(lp);
                    accs.push(None);
                }
                Stage::Once { insts, stores } => {
                    let skip = self.em.label("once_end");
                    if self.plan.t > 1 {
                        self.em.ins(format!("@!{} bra {skip}", self.lane0));
                    }
                    let mut axes = outer.to_vec();
                    axes.extend(k.inner.iter().map(|_| self.zero.clone()));
                    let vals = self.eval(insts, &axes, &accs)?;
                    for s in stores {
                        self.store(s, &vals, &axes)?;
                    }
                    self.em.place(&skip);
                    accs.push(None);
                }
            }
            self.barrier();
        }
        Ok(())
    }

    fn barrier(&mut self) {
        match self.plan.t {
            1 => {}
            32 => self.em.ins("bar.warp.sync -1"),
            _ => self.em.ins("bar.sync 0"),
        }
    }

    /// Opens the loop over this thread's inner points; returns the loop (to close) and the
    /// axis indices at the point, or `None` where the inner space is empty (no point runs).
    fn inner_begin(&mut self, outer: &[String]) -> (Option<InnerLoop>, Option<Vec<String>>) {
        self.inner_begin_from(outer, None)
    }

    /// [`Gen::inner_begin`] starting from linear index `start` (a register of the loop's
    /// width) instead of the lane.
    fn inner_begin_from(
        &mut self,
        outer: &[String],
        start: Option<String>,
    ) -> (Option<InnerLoop>, Option<Vec<String>>) {
        let k = self.k;
        if k.inner.is_empty() {
            return (None, Some(outer.to_vec()));
        }
        let total = product(&k.inner);
        if total == 0 {
            return (None, None);
        }
        let t = u64::from(self.plan.t);
        let narrow = narrow_inner(total, t);
        let (c, w) = if narrow {
            (Cls::R, "u32")
        } else {
            (Cls::Rd, "u64")
        };
        let j = match start {
            Some(j) => j,
            None => {
                let j = self.em.reg(c);
                if narrow {
                    self.em.ins(format!("mov.u32 {j}, {}", self.lane));
                } else {
                    self.em.ins(format!("cvt.u64.u32 {j}, {}", self.lane));
                }
                j
            }
        };
        let top = self.em.label("inner");
        let end = self.em.label("inner_end");
        self.em.place(&top);
        let done = self.em.setp("ge", w, &j, &total.to_string());
        self.em.ins(format!("@{done} bra {end}"));
        let inner_axes = self.decompose(&j, if narrow { 32 } else { 64 }, &k.inner.clone());
        let mut axes = outer.to_vec();
        axes.extend(inner_axes);
        let lin = if narrow {
            self.em.op1(Cls::Rd, "cvt.u64.u32", &j)
        } else {
            j.clone()
        };
        (
            Some(InnerLoop {
                j,
                w,
                top,
                end,
                lin,
            }),
            Some(axes),
        )
    }

    fn inner_end(&mut self, lp: Option<InnerLoop>) {
        if let Some(lp) = lp {
            self.em
                .ins(format!("add.{} {}, {}, {}", lp.w, lp.j, lp.j, self.plan.t));
            self.em.ins(format!("bra.uni {}", lp.top));
            self.em.place(&lp.end);
        }
    }

    /// A `Reduce` stage: folds over this thread's inner points, combines the row's threads,
    /// returns the accumulator (the same in every thread of the row).
    #[allow(clippy::too_many_arguments)]
    fn reduce(
        &mut self,
        outer: &[String],
        insts: &[Inst],
        value: u32,
        op: ReduceOp,
        init: u64,
        ty: Scalar,
        accs: &[Option<Val>],
    ) -> R<Val> {
        let vty = insts
            .get(value as usize)
            .ok_or("a reduction of a missing instruction")?
            .ty;
        let c = cls(vty);
        let arg = match op {
            ReduceOp::ArgMax { last } => Some((true, last)),
            ReduceOp::ArgMin { last } => Some((false, last)),
            _ => None,
        };
        // The per-thread accumulator (and, for arg reductions, the best value and its index,
        // -1 while there is none).
        let acc = self.em.reg(c);
        let bi = self.em.reg(Cls::Rd);
        let init_imm = const_imm(ty, init);
        if arg.is_some() {
            self.em.ins(format!("mov.b64 {bi}, -1"));
            self.em
                .ins(format!("mov.{} {acc}, {}", emit::bsfx(c), zero_of(vty)));
        } else {
            let id = identity(op, vty)?;
            let first = self.em.selp(c, &init_imm, &id, &self.lane0.clone());
            self.em.ins(format!("mov.{} {acc}, {first}", emit::bsfx(c)));
        }
        // Four points per iteration first (independent loads in flight), then one at a time.
        let t = u64::from(self.plan.t);
        let total = product(&self.k.inner);
        let start = if t > 1 && !self.k.inner.is_empty() && total >= 4 * t {
            let j = self.em.reg(if narrow_inner(total, t) {
                Cls::R
            } else {
                Cls::Rd
            });
            let (w, bits) = if narrow_inner(total, t) {
                self.em.ins(format!("mov.u32 {j}, {}", self.lane));
                ("u32", 32)
            } else {
                self.em.ins(format!("cvt.u64.u32 {j}, {}", self.lane));
                ("u64", 64)
            };
            let top = self.em.label("inner4");
            let end = self.em.label("inner4_end");
            self.em.place(&top);
            let last = self
                .em
                .op2(cls_of(w), &format!("add.{w}"), &j, &(3 * t).to_string());
            let done = self.em.setp("ge", w, &last, &total.to_string());
            self.em.ins(format!("@{done} bra {end}"));
            for u in 0..4 {
                let jj = if u == 0 {
                    j.clone()
                } else {
                    self.em
                        .op2(cls_of(w), &format!("add.{w}"), &j, &(u * t).to_string())
                };
                let inner = self.decompose(&jj, bits, &self.k.inner.clone());
                let mut axes = outer.to_vec();
                axes.extend(inner);
                let lin = if bits == 32 {
                    self.em.op1(Cls::Rd, "cvt.u64.u32", &jj)
                } else {
                    jj.clone()
                };
                self.reduce_point(&axes, &lin, insts, value, op, arg, vty, &acc, &bi, accs)?;
            }
            self.em.ins(format!("add.{w} {j}, {j}, {}", 4 * t));
            self.em.ins(format!("bra.uni {top}"));
            self.em.place(&end);
            Some(j)
        } else {
            None
        };
        let (lp, axes) = self.inner_begin_from(outer, start);
        if let Some(axes) = axes {
            let lin = match &lp {
                Some(lp) => lp.lin.clone(),
                None => self.zero.clone(),
            };
            self.reduce_point(&axes, &lin, insts, value, op, arg, vty, &acc, &bi, accs)?;
        }
        self.inner_end(lp);
        if self.plan.t > 1 {
            // Lanes of a warp, by butterfly shuffles.
            for d in [16, 8, 4, 2, 1] {
                let pv = self.shfl(c, &acc, d);
                self.combine(op, arg, vty, &acc, &bi, &pv, d)?;
            }
            if self.plan.t > 32 {
                self.block_combine(op, arg, vty, &acc, &bi)?;
            }
        }
        Ok(match arg {
            Some(_) => {
                let none = self.em.setp("eq", "s64", &bi, "-1");
                let r = self.em.selp(Cls::Rd, &init_imm, &bi, &none);
                Val {
                    reg: r,
                    ty: Scalar::I64,
                }
            }
            None => Val { reg: acc, ty },
        })
    }

    /// Folds the value of one inner point (axes `axes`, inner linear index `lin`, b64) into
    /// the thread's partial.
    #[allow(clippy::too_many_arguments)]
    fn reduce_point(
        &mut self,
        axes: &[String],
        lin: &str,
        insts: &[Inst],
        value: u32,
        op: ReduceOp,
        arg: Option<(bool, bool)>,
        vty: Scalar,
        acc: &str,
        bi: &str,
        accs: &[Option<Val>],
    ) -> R<()> {
        let c = cls(vty);
        let vals = self.eval(insts, axes, accs)?;
        let v = vals
            .get(value as usize)
            .ok_or("a reduction of a missing instruction")?
            .reg
            .clone();
        match arg {
            Some((max, last)) => {
                let take = self.arg_take(max, last, vty, &v, lin, acc, bi);
                self.em
                    .ins(format!("@{take} mov.{} {acc}, {v}", emit::bsfx(c)));
                self.em.ins(format!("@{take} mov.b64 {bi}, {lin}"));
            }
            None => {
                let r = self.fold(op, vty, acc, &v)?;
                self.em.ins(format!("mov.{} {acc}, {r}", emit::bsfx(c)));
            }
        }
        Ok(())
    }

    /// Combines this thread's partial (`acc`, `bi`) with the partner lane `d` away (its value
    /// `pv`, its index shuffled here).
    #[allow(clippy::too_many_arguments)]
    fn combine(
        &mut self,
        op: ReduceOp,
        arg: Option<(bool, bool)>,
        vty: Scalar,
        acc: &str,
        bi: &str,
        pv: &str,
        d: u32,
    ) -> R<()> {
        let c = cls(vty);
        match arg {
            Some((max, last)) => {
                let pi = self.shfl(Cls::Rd, bi, d);
                let take = self.arg_take(max, last, vty, pv, &pi, acc, bi);
                self.em
                    .ins(format!("@{take} mov.{} {acc}, {pv}", emit::bsfx(c)));
                self.em.ins(format!("@{take} mov.b64 {bi}, {pi}"));
            }
            None => {
                let r = self.fold(op, vty, acc, pv)?;
                self.em.ins(format!("mov.{} {acc}, {r}", emit::bsfx(c)));
            }
        }
        Ok(())
    }

    /// The block form's combine of the warps' partials through shared memory.
    fn block_combine(
        &mut self,
        op: ReduceOp,
        arg: Option<(bool, bool)>,
        vty: Scalar,
        acc: &str,
        bi: &str,
    ) -> R<()> {
        self.shared = true;
        let c = cls(vty);
        let st = match c {
            Cls::R => "b32",
            Cls::F => "f32",
            Cls::Rd => "b64",
            _ => "f64",
        };
        let em = &mut self.em;
        let warp = em.op2(Cls::R, "shr.u32", &self.tid, "5");
        let wlane = em.op2(Cls::R, "and.b32", &self.tid, "31");
        let first = em.setp("eq", "u32", &wlane, "0");
        let base = em.op1(Cls::R, "mov.u32", "memc_red");
        let slot = em.op3(Cls::R, "mad.lo.u32", &warp, "16", &base);
        em.ins(format!("@{first} st.shared.{st} [{slot}], {acc}"));
        if arg.is_some() {
            em.ins(format!("@{first} st.shared.b64 [{slot}+8], {bi}"));
        }
        em.ins("bar.sync 0");
        em.ins(format!("ld.shared.{st} {acc}, [memc_red]"));
        if arg.is_some() {
            em.ins(format!("ld.shared.b64 {bi}, [memc_red+8]"));
        }
        for w in 1..self.plan.t / 32 {
            let pv = self.em.reg(c);
            self.em
                .ins(format!("ld.shared.{st} {pv}, [memc_red+{}]", 16 * w));
            match arg {
                Some((max, last)) => {
                    let pi = self.em.reg(Cls::Rd);
                    self.em
                        .ins(format!("ld.shared.b64 {pi}, [memc_red+{}]", 16 * w + 8));
                    let take = self.arg_take(max, last, vty, &pv, &pi, acc, bi);
                    self.em
                        .ins(format!("@{take} mov.{} {acc}, {pv}", emit::bsfx(c)));
                    self.em.ins(format!("@{take} mov.b64 {bi}, {pi}"));
                }
                None => {
                    let r = self.fold(op, vty, acc, &pv)?;
                    self.em.ins(format!("mov.{} {acc}, {r}", emit::bsfx(c)));
                }
            }
        }
        Ok(())
    }

    /// `v` butterfly-shuffled from the lane `d` away.
    fn shfl(&mut self, c: Cls, v: &str, d: u32) -> String {
        let em = &mut self.em;
        let sh = |em: &mut Em, r: &str| {
            let o = em.reg(Cls::R);
            em.ins(format!("shfl.sync.bfly.b32 {o}, {r}, {d}, 31, -1"));
            o
        };
        match c {
            Cls::R => sh(em, v),
            Cls::F => {
                let r = em.op1(Cls::R, "mov.b32", v);
                let o = sh(em, &r);
                em.op1(Cls::F, "mov.b32", &o)
            }
            _ => {
                let lo = em.reg(Cls::R);
                let hi = em.reg(Cls::R);
                em.ins(format!("mov.b64 {{{lo}, {hi}}}, {v}"));
                let lo = sh(em, &lo);
                let hi = sh(em, &hi);
                let o = em.reg(c);
                em.ins(format!("mov.b64 {o}, {{{lo}, {hi}}}"));
                o
            }
        }
    }

    fn fold(&mut self, op: ReduceOp, vty: Scalar, acc: &str, v: &str) -> R<String> {
        let b = match op {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
            _ => return Err("an arg reduction folded as a value".into()),
        };
        self.em.binary(b, vty, acc, v)
    }

    /// Whether candidate (`v`, index `j`) replaces the best (`bv`, index `bi`) of an ArgMax
    /// (`max`) or ArgMin: an index of -1 is "none"; a NaN at index 0 wins over everything, any
    /// other NaN loses to every number; equal values go to the lower index (the higher with
    /// `last`).
    #[allow(clippy::too_many_arguments)]
    fn arg_take(
        &mut self,
        max: bool,
        last: bool,
        vty: Scalar,
        v: &str,
        j: &str,
        bv: &str,
        bi: &str,
    ) -> String {
        let em = &mut self.em;
        let t = emit::sfx(vty);
        let valid = em.setp("ne", "s64", j, "-1");
        let none = em.setp("eq", "s64", bi, "-1");
        let cmp = em.setp(if max { "gt" } else { "lt" }, t, v, bv);
        let eq = em.setp("eq", t, v, bv);
        let tie = em.setp(if last { "gt" } else { "lt" }, "s64", j, bi);
        let better = em.reg(Cls::P);
        em.ins(format!("and.pred {better}, {eq}, {tie}"));
        em.ins(format!("or.pred {better}, {better}, {cmp}"));
        if vty.is_float() {
            let vn = em.setp("nan", t, v, v);
            let bn = em.setp("nan", t, bv, bv);
            let j0 = em.setp("eq", "s64", j, "0");
            let b0 = em.setp("eq", "s64", bi, "0");
            let vn0 = em.reg(Cls::P);
            em.ins(format!("and.pred {vn0}, {vn}, {j0}"));
            let bn0 = em.reg(Cls::P);
            em.ins(format!("and.pred {bn0}, {bn}, {b0}"));
            em.ins(format!("or.pred {better}, {better}, {bn}"));
            let nvn = em.not_p(&vn);
            let nbn0 = em.not_p(&bn0);
            em.ins(format!("and.pred {better}, {better}, {nvn}"));
            em.ins(format!("and.pred {better}, {better}, {nbn0}"));
            em.ins(format!("or.pred {better}, {better}, {vn0}"));
        }
        em.ins(format!("or.pred {better}, {better}, {none}"));
        em.ins(format!("and.pred {better}, {better}, {valid}"));
        better
    }

    /// Evaluates a stage's instructions at the point `axes`.
    fn eval(&mut self, insts: &[Inst], axes: &[String], accs: &[Option<Val>]) -> R<Vec<Val>> {
        let mut vals: Vec<Val> = Vec::with_capacity(insts.len());
        for (at, inst) in insts.iter().enumerate() {
            let get = |id: u32| -> R<Val> {
                if (id as usize) < at {
                    Ok(vals[id as usize].clone())
                } else {
                    Err(format!(
                        "instruction {at} names {id}, not an earlier instruction"
                    ))
                }
            };
            let ty = inst.ty;
            let reg = match &inst.kind {
                InstKind::Load { view } => self.load(*view, axes, None)?,
                InstKind::LoadIndirect { view, indices } => {
                    let idx: Vec<(Val, &IndirectIndex)> = indices
                        .iter()
                        .map(|ix| Ok((get(ix.index)?, ix)))
                        .collect::<R<_>>()?;
                    let extra = self.indirect(&idx)?;
                    self.load(*view, axes, Some(&extra))?
                }
                InstKind::Const { bits } => self.em.constant(ty, *bits),
                InstKind::Index { axis } => axes
                    .get(*axis as usize)
                    .ok_or_else(|| format!("the index of missing axis {axis}"))?
                    .clone(),
                InstKind::Acc { stage } => match accs.get(*stage as usize) {
                    Some(Some(acc)) => acc.reg.clone(),
                    _ => return Err(format!("stage {stage} is not an earlier reduction")),
                },
                InstKind::Unary { op, arg } => {
                    let a = get(*arg)?;
                    self.em.unary(*op, &a)?
                }
                InstKind::Binary { op, lhs, rhs } => {
                    let (a, b) = (get(*lhs)?, get(*rhs)?);
                    if a.ty != b.ty {
                        return Err("binary operands of different types".into());
                    }
                    self.em.binary(*op, a.ty, &a.reg, &b.reg)?
                }
                InstKind::Select { cond, then, else_ } => {
                    let (p, a, b) = (get(*cond)?, get(*then)?, get(*else_)?);
                    if cls(p.ty) != Cls::R || cls(a.ty) != cls(ty) || cls(b.ty) != cls(ty) {
                        return Err("select operand types".into());
                    }
                    let pr = self.em.setp("ne", "u32", &p.reg, "0");
                    self.em.selp(cls(ty), &a.reg, &b.reg, &pr)
                }
                InstKind::Cast { arg } => {
                    let a = get(*arg)?;
                    self.em.cast(&a, ty)
                }
                InstKind::Narrow { arg, to } => {
                    let a = get(*arg)?;
                    if a.ty != to.compute() || !to.is_storage_only() {
                        return Err("a narrowing of another type".into());
                    }
                    let raw = self.em.narrow(*to, &a.reg);
                    self.em.widen(*to, &raw)
                }
            };
            vals.push(Val { reg, ty });
        }
        Ok(vals)
    }

    /// The element offset of indirect terms: each index wrapped when negative and clamped to
    /// `[0, limit)`, times its stride.
    fn indirect(&mut self, idx: &[(Val, &IndirectIndex)]) -> R<String> {
        let em = &mut self.em;
        let mut extra = self.zero.clone();
        for (v, ix) in idx {
            if v.ty != Scalar::I64 || ix.limit <= 0 {
                return Err("a malformed indirect index".into());
            }
            let neg = em.setp("lt", "s64", &v.reg, "0");
            let w = em.op2(Cls::Rd, "add.s64", &v.reg, &ix.limit.to_string());
            let i = em.selp(Cls::Rd, &w, &v.reg, &neg);
            let i = em.op2(Cls::Rd, "max.s64", &i, "0");
            let i = em.op2(Cls::Rd, "min.s64", &i, &(ix.limit - 1).to_string());
            extra = em.op3(Cls::Rd, "mad.lo.s64", &i, &ix.stride.to_string(), &extra);
        }
        Ok(extra)
    }

    fn view(&self, v: u32) -> R<&View> {
        self.k
            .views
            .get(v as usize)
            .ok_or_else(|| format!("missing view {v}"))
    }

    /// The address of `view`'s element at `axes` plus `extra` elements.
    fn address(&mut self, view: &View, axes: &[String], extra: Option<&str>) -> R<String> {
        let size = view.elem.size() as i64;
        let em = &mut self.em;
        let mut off = em.imm(Cls::Rd, &view.byte_offset.to_string());
        for (a, &s) in view.strides.iter().enumerate() {
            if s == 0 {
                continue;
            }
            let ix = axes.get(a).ok_or("a view with more strides than axes")?;
            let bytes = s.checked_mul(size).ok_or("a stride overflows")?;
            off = em.op3(Cls::Rd, "mad.lo.s64", ix, &bytes.to_string(), &off);
        }
        if let Some(e) = extra {
            off = em.op3(Cls::Rd, "mad.lo.s64", e, &size.to_string(), &off);
        }
        let base = &self.bases[region_index(view.region)];
        Ok(em.op2(Cls::Rd, "add.s64", base, &off))
    }

    fn load(&mut self, v: u32, axes: &[String], extra: Option<&str>) -> R<String> {
        let view = self.view(v)?.clone();
        let addr = self.address(&view, axes, extra)?;
        let em = &mut self.em;
        let nc = if view.region == Region::Weights {
            ".nc"
        } else {
            ""
        };
        let mut ok: Option<String> = None;
        for g in &view.guards {
            let mut val = em.imm(Cls::Rd, &g.offset.to_string());
            for (a, &c) in g.coeffs.iter().enumerate() {
                if c != 0 {
                    let ix = axes
                        .get(a)
                        .ok_or("a guard with more coefficients than axes")?;
                    val = em.op3(Cls::Rd, "mad.lo.s64", ix, &c.to_string(), &val);
                }
            }
            let p = em.setp("lt", "u64", &val, &g.limit.to_string());
            ok = Some(match ok {
                None => p,
                Some(q) => {
                    let r = em.reg(Cls::P);
                    em.ins(format!("and.pred {r}, {q}, {p}"));
                    r
                }
            });
        }
        let pred = ok.as_ref().map(|p| format!("@{p} ")).unwrap_or_default();
        let c = cls(view.elem);
        let (mem, raw_cls) = convert::memory_form(view.elem);
        let raw = em.imm(raw_cls, &emit::zero_bits(raw_cls));
        em.ins(format!("{pred}ld.global{nc}.{mem} {raw}, [{addr}]"));
        let dst = em.widen(view.elem, &raw);
        Ok(match ok {
            Some(p) => em.selp(c, &dst, &pad_imm(&view), &p),
            None => dst,
        })
    }

    fn store(&mut self, s: &Store, vals: &[Val], axes: &[String]) -> R<()> {
        let view = self.view(s.view)?.clone();
        let v = vals
            .get(s.value as usize)
            .ok_or("a store of a missing instruction")?
            .clone();
        if v.ty != view.elem.compute() {
            return Err("a store of a value of another type".into());
        }
        let extra = if s.indices.is_empty() {
            None
        } else {
            let idx: Vec<(Val, &IndirectIndex)> = s
                .indices
                .iter()
                .map(|ix| {
                    vals.get(ix.index as usize)
                        .map(|v| (v.clone(), ix))
                        .ok_or_else(|| "a missing index".to_string())
                })
                .collect::<R<_>>()?;
            Some(self.indirect(&idx)?)
        };
        let addr = self.address(&view, axes, extra.as_deref())?;
        let em = &mut self.em;
        let mut value = v.reg.clone();
        if s.accumulate {
            let (mem, raw_cls) = convert::memory_form(view.elem);
            let raw = em.reg(raw_cls);
            em.ins(format!("ld.global.{mem} {raw}, [{addr}]"));
            let old = em.widen(view.elem, &raw);
            value = em.binary(BinaryOp::Add, view.elem.compute(), &old, &value)?;
        }
        let raw = em.narrow(view.elem, &value);
        em.ins(format!(
            "st.global.{} [{addr}], {raw}",
            convert::store_form(view.elem)
        ));
        Ok(())
    }
}

/// Whether an inner loop of `total` points stepping by up to `4 t` counts in 32 bits.
fn narrow_inner(total: u64, t: u64) -> bool {
    total + 4 * t < u64::from(u32::MAX)
}

fn cls_of(w: &str) -> Cls {
    if w == "u32" {
        Cls::R
    } else {
        Cls::Rd
    }
}

struct InnerLoop {
    j: String,
    w: &'static str,
    top: String,
    end: String,
    /// The inner linear index as a b64 register.
    lin: String,
}

fn region_index(r: Region) -> usize {
    match r {
        Region::Arena => 0,
        Region::Weights => 1,
        Region::State => 2,
    }
}

/// A zero of `ty`'s register class, as an immediate.
fn zero_of(ty: Scalar) -> String {
    emit::zero_bits(cls(ty))
}

/// The identity element of a value reduction in type `ty`.
fn identity(op: ReduceOp, ty: Scalar) -> R<String> {
    let float = |x: f64| -> String {
        if ty == Scalar::F64 {
            f64_imm(x)
        } else {
            f32_imm(x as f32)
        }
    };
    let int = |v: i128| const_imm(ty, v as u64);
    Ok(match op {
        ReduceOp::Sum if ty.is_float() => float(-0.0),
        ReduceOp::Sum => int(0),
        ReduceOp::Prod if ty.is_float() => float(1.0),
        ReduceOp::Prod => int(1),
        ReduceOp::Max if ty.is_float() => float(f64::NEG_INFINITY),
        ReduceOp::Max => int(int_bounds(ty).0),
        ReduceOp::Min if ty.is_float() => float(f64::INFINITY),
        ReduceOp::Min => int(int_bounds(ty).1),
        _ => return Err("an arg reduction has no identity".into()),
    })
}
