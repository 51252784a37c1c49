//! Contractions ([`Contract`]) as PTX: a tiled shared-memory GEMM with register micro-tiles,
//! and a streaming form for products with few rows.
//!
//! # The tiled form
//!
//! One block of 256 threads (16 x 16) computes a `BM x BN` tile of `c`, `BM = BN = 32 * vec`
//! where `vec` is the number of elements in 16 bytes (4 for f32: 128 x 128 tiles, 8 x 8
//! results per thread; 2 for f64: 64 x 64 tiles, 4 x 4 results per thread). A thread's results
//! are two `vec x vec` quads in each direction, `BM / 2` apart, so its shared-memory reads are
//! 16-byte vectors that a warp reads without bank conflicts. `K` advances in steps of `BK = 8`
//! through two shared-memory buffers: the next tile is loaded into registers while the current
//! one is multiplied, then stored into the other buffer, one barrier per step. Tiles are stored
//! `k`-major (`[BK][BX + vec]`, the padding keeps the transposing stores conflict-free).
//!
//! Each operand is loaded in one of four ways, chosen at emit time from its strides, offsets and
//! extents (everything is static): 16-byte vectors along the tile's rows or columns when that
//! axis is contiguous and every vector is aligned and wholly inside or outside the matrix,
//! otherwise one element per load with the faster-moving axis across threads. Edges in `m`,
//! `n` and `k` are guarded (out-of-range elements read as zero and are never written), and the
//! guards are left out where the extents are multiples of the tile. f32 products use `fma.rn`
//! (no TF32), f64 products `fma.rn.f64`.
//!
//! # The streaming form
//!
//! With `m <= SMALL_M`, a block computes 32 columns of every row: its 8 warps split `K`, each
//! lane owns one column and streams `b` (coalesced when `b`'s rows are contiguous), and the
//! warps' partial sums meet in shared memory.
//!
//! Batches run over grid z (a block loops over batches when there are more than 65535); the
//! batch index is split into the batch axes by constant divisions. The epilogue computes
//! `alpha * acc + c` (`c` read only when accumulating), as the reference does up to rounding.

use super::{Launch, PtxEntry, PtxError, PARAMS};
use crate::kernel::{Contract, MatView, Region, Scalar};
use std::fmt::Write;

/// Products with at most this many rows use the streaming form.
pub const SMALL_M: u64 = 4;

/// Threads per block in both forms.
const THREADS: u64 = 256;

/// The `K` step of the tiled form.
const BK: u64 = 8;

/// The most blocks along grid y and z.
const GRID_YZ: u64 = 65535;

/// A PTX body under construction: virtual registers are numbered per class and declared when
/// the entry is finished.
pub(super) struct Asm {
    body: String,
    counts: [u32; 6],
}

const CLASSES: [(&str, &str); 6] = [
    ("pred", "%p"),
    ("b32", "%r"),
    ("b64", "%rd"),
    ("f32", "%f"),
    ("f64", "%fd"),
    ("b16", "%rs"),
];

impl Asm {
    pub(super) fn new() -> Asm {
        Asm {
            body: String::new(),
            counts: [0; 6],
        }
    }

    fn reg(&mut self, class: usize) -> String {
        let n = self.counts[class];
        self.counts[class] += 1;
        format!("{}{n}", CLASSES[class].1)
    }

    pub(super) fn p(&mut self) -> String {
        self.reg(0)
    }

    pub(super) fn r(&mut self) -> String {
        self.reg(1)
    }

    pub(super) fn rd(&mut self) -> String {
        self.reg(2)
    }

    pub(super) fn f(&mut self) -> String {
        self.reg(3)
    }

    /// A register of the float type `ty` (`f32` or `f64`).
    pub(super) fn fl(&mut self, ty: &str) -> String {
        if ty == "f64" {
            self.reg(4)
        } else {
            self.reg(3)
        }
    }

    /// One instruction (without the `;`).
    pub(super) fn i(&mut self, line: impl AsRef<str>) {
        self.body.push('\t');
        self.body.push_str(line.as_ref());
        self.body.push_str(";\n");
    }

    pub(super) fn label(&mut self, name: &str) {
        let _ = writeln!(self.body, "$L_{name}:");
    }

    /// Loads the three region bases (global addresses) into registers.
    pub(super) fn bases(&mut self) -> [String; 3] {
        let mut out = [String::new(), String::new(), String::new()];
        for (slot, param) in out.iter_mut().zip(["arena", "weights", "state"]) {
            let raw = self.rd();
            let reg = self.rd();
            self.i(format!("ld.param.u64 {raw}, [{param}]"));
            self.i(format!("cvta.to.global.u64 {reg}, {raw}"));
            *slot = reg;
        }
        out
    }

    /// An address operand `[reg+offset]`, adding into a new register when `offset` is negative
    /// or does not fit an immediate.
    pub(super) fn addr(&mut self, reg: &str, offset: i64) -> String {
        if offset == 0 {
            format!("[{reg}]")
        } else if (0..1 << 31).contains(&offset) {
            format!("[{reg}+{offset}]")
        } else {
            let t = self.rd();
            self.i(format!("add.s64 {t}, {reg}, {offset}"));
            format!("[{t}]")
        }
    }

    /// The entry's text: the signature, register declarations, `decls` (shared memory) and
    /// the body.
    pub(super) fn finish(self, name: &str, decls: &str) -> String {
        let mut s = format!(".visible .entry {name}{PARAMS}\n{{\n");
        for ((ty, prefix), &n) in CLASSES.iter().zip(&self.counts) {
            if n > 0 {
                let _ = writeln!(s, "\t.reg .{ty} {prefix}<{n}>;");
            }
        }
        s.push_str(decls);
        s.push_str(&self.body);
        s.push_str("\tret;\n}\n");
        s
    }
}

/// The register holding the base of `region`.
pub(super) fn base_of(bases: &[String; 3], region: Region) -> &str {
    match region {
        Region::Arena => &bases[0],
        Region::Weights => &bases[1],
        Region::State => &bases[2],
    }
}

/// A float constant of type `ty` as a PTX immediate.
pub(super) fn float_imm(ty: &str, value: f64) -> String {
    if ty == "f64" {
        super::f64_imm(value)
    } else {
        super::f32_imm(value as f32)
    }
}

/// What the element type fixes: PTX type, bytes, elements per 16-byte vector.
#[derive(Clone, Copy)]
struct Elem {
    ty: &'static str,
    size: i64,
    vec: u64,
}

/// The batch loop shared by both forms: `bz` runs over the batches this block computes, and
/// `offsets` (one register per operand) hold their byte offsets. Returns `(bz, offsets)`; the
/// caller emits the body, then [`batch_loop_end`].
fn batch_loop_start(
    asm: &mut Asm,
    batch: &[u64],
    views: [&MatView; 3],
    size: i64,
) -> (String, [String; 3]) {
    let total: u64 = batch.iter().product();
    let bz = asm.rd();
    let ctaid = asm.r();
    asm.i(format!("mov.u32 {ctaid}, %ctaid.z"));
    asm.i(format!("cvt.u64.u32 {bz}, {ctaid}"));
    asm.label("batch");
    if total > GRID_YZ {
        let p = asm.p();
        asm.i(format!("setp.ge.u64 {p}, {bz}, {total}"));
        asm.i(format!("@{p} bra $L_done"));
    }
    let offsets = [asm.rd(), asm.rd(), asm.rd()];
    for o in &offsets {
        asm.i(format!("mov.u64 {o}, 0"));
    }
    let rest = asm.rd();
    asm.i(format!("mov.u64 {rest}, {bz}"));
    for (axis, &extent) in batch.iter().enumerate().rev() {
        if extent == 1 {
            continue;
        }
        let idx = asm.rd();
        asm.i(format!("rem.u64 {idx}, {rest}, {extent}"));
        asm.i(format!("div.u64 {rest}, {rest}, {extent}"));
        for (o, v) in offsets.iter().zip(views) {
            let stride = v.batch_strides[axis] * size;
            if stride != 0 {
                asm.i(format!("mad.lo.s64 {o}, {idx}, {stride}, {o}"));
            }
        }
    }
    (bz, offsets)
}

fn batch_loop_end(asm: &mut Asm, batch: &[u64], bz: &str) {
    let total: u64 = batch.iter().product();
    if total > GRID_YZ {
        let step = asm.r();
        let step64 = asm.rd();
        asm.i(format!("mov.u32 {step}, %nctaid.z"));
        asm.i(format!("cvt.u64.u32 {step64}, {step}"));
        asm.i(format!("add.u64 {bz}, {bz}, {step64}"));
        asm.i("bar.sync 0");
        asm.i("bra.uni $L_batch");
    }
    asm.label("done");
}

pub(super) fn emit(c: &Contract, kernel: &str, name: &str) -> Result<PtxEntry, PtxError> {
    let unsupported = |message: String| PtxError::Unsupported {
        kernel: kernel.to_string(),
        message,
    };
    let elem = match c.elem {
        Scalar::F32 => Elem {
            ty: "f32",
            size: 4,
            vec: 4,
        },
        Scalar::F64 => Elem {
            ty: "f64",
            size: 8,
            vec: 2,
        },
        other => return Err(unsupported(format!("a contraction of {}", other.name()))),
    };
    let limit = i32::MAX as u64 - 256;
    if c.m > limit || c.n > limit || c.k > limit {
        return Err(unsupported(format!(
            "{} x {} x {} exceeds the 32-bit index range",
            c.m, c.n, c.k
        )));
    }
    let total: u64 = c.batch.iter().product();
    if c.m == 0 || c.n == 0 || total == 0 {
        // Nothing is written: an empty entry keeps the launch list uniform.
        return Ok(super::empty_entry(name, Asm::new().finish(name, "")));
    }
    // The CUDA target lowers convolutions with explicit column matrices (its `ConvPolicy`), so
    // only a plan lowered for another target has an implicit one.
    let b = c.b.as_mat().ok_or_else(|| {
        unsupported("an implicit im2col operand (a plan lowered for the CPU; compile it with --target cuda)".into())
    })?;
    if c.m <= SMALL_M {
        Ok(streaming(c, b, elem, name))
    } else {
        let bm = 32 * elem.vec;
        if c.m.div_ceil(bm) > GRID_YZ {
            return Err(unsupported(format!("{} rows need too many blocks", c.m)));
        }
        Ok(tiled(c, b, elem, name))
    }
}

/// How a tile of one operand is loaded into shared memory.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    /// 16-byte vectors along the tile's rows (`x`, the `m` or `n` axis).
    VecX,
    /// 16-byte vectors along `k`, stored transposed.
    VecK,
    /// One element per load, `x` fastest across threads.
    ScalarX,
    /// One element per load, `k` fastest across threads.
    ScalarK,
}

/// One operand of the tiled form seen as `[x, k]`: `a` is `[m, k]`, `b` is `[n, k]` (its
/// transpose).
struct Operand<'a> {
    view: &'a MatView,
    /// Element strides along `x` and `k`.
    sx: i64,
    sk: i64,
    extent: u64,
    /// Byte offset of the operand's tile inside one shared buffer.
    smem_at: u64,
}

/// Whether every 16-byte vector of `view` along the axis with stride 1 is aligned, given the
/// other strides, and lies wholly inside or outside the matrix (`run`, the contiguous extent,
/// is a multiple of `vec`).
fn vectorizable(view: &MatView, other_stride: i64, run: u64, elem: Elem) -> bool {
    let vec = elem.vec as i64;
    view.byte_offset.rem_euclid(16) == 0
        && other_stride.rem_euclid(vec) == 0
        && view.batch_strides.iter().all(|s| s.rem_euclid(vec) == 0)
        && run % elem.vec == 0
}

fn mode_of(op: &Operand, k: u64, elem: Elem) -> Mode {
    if op.sx == 1 && vectorizable(op.view, op.sk, op.extent, elem) {
        Mode::VecX
    } else if op.sk == 1 && vectorizable(op.view, op.sx, k, elem) {
        Mode::VecK
    } else if op.sx.unsigned_abs() <= op.sk.unsigned_abs() {
        Mode::ScalarX
    } else {
        Mode::ScalarK
    }
}

/// One global load of a thread per `K` step: its offsets from the thread's first element.
struct Load {
    dx: u64,
    dk: u64,
    /// Registers it fills (one, or `vec` for a vector).
    regs: Vec<String>,
    /// Whether `x + dx` is in range (absent when no guard is needed).
    x_ok: Option<String>,
}

/// A thread's loads of one operand.
struct OperandLoads {
    mode: Mode,
    /// Global address of the thread's first element of the current `K` step.
    ptr: String,
    /// Shared address of the thread's first element in buffer 0.
    smem: String,
    /// The thread's first `k` within the step.
    kl: String,
    loads: Vec<Load>,
}

/// The tiled form (see the module doc).
fn tiled(c: &Contract, b: &MatView, elem: Elem, name: &str) -> PtxEntry {
    let ty = elem.ty;
    let es = elem.size;
    let vec = elem.vec;
    let bx = 32 * vec;
    let bxs = bx + vec;
    let tile_bytes = BK * bxs * es as u64;
    let buf_bytes = 2 * tile_bytes;
    let mut asm = Asm::new();
    let bases = asm.bases();

    let ops = [
        Operand {
            view: &c.a,
            sx: c.a.row_stride,
            sk: c.a.col_stride,
            extent: c.m,
            smem_at: 0,
        },
        Operand {
            view: b,
            sx: b.col_stride,
            sk: b.row_stride,
            extent: c.n,
            smem_at: tile_bytes,
        },
    ];

    let tid = asm.r();
    let tx = asm.r();
    let ty_ = asm.r();
    asm.i(format!("mov.u32 {tid}, %tid.x"));
    asm.i(format!("and.b32 {tx}, {tid}, 15"));
    asm.i(format!("shr.u32 {ty_}, {tid}, 4"));
    // Tile origins: rows from ctaid.y, columns from ctaid.x.
    let origin = [asm.r(), asm.r()];
    let ctaid = [asm.r(), asm.r()];
    asm.i(format!("mov.u32 {}, %ctaid.y", ctaid[0]));
    asm.i(format!("mov.u32 {}, %ctaid.x", ctaid[1]));
    for (o, id) in origin.iter().zip(&ctaid) {
        asm.i(format!("mul.lo.s32 {o}, {id}, {bx}"));
    }
    // Rows and columns left from the tile origin.
    let left = [asm.r(), asm.r()];
    for ((l, o), extent) in left.iter().zip(&origin).zip([c.m, c.n]) {
        asm.i(format!("sub.s32 {l}, {extent}, {o}"));
    }
    let smem = asm.rd();
    asm.i(format!("mov.u64 {smem}, smem"));

    let (bz, offsets) = batch_loop_start(&mut asm, &c.batch, [&c.a, b, &c.c], es);

    // Thread-constant load set-up per operand.
    let guard_k = c.k % BK != 0;
    let mut per_op = Vec::new();
    for (o, op) in ops.iter().enumerate() {
        let mode = mode_of(op, c.k, elem);
        let (xl, kl) = (asm.r(), asm.r());
        let per_row = match mode {
            Mode::VecX => bx / vec,
            Mode::VecK => BK / vec,
            Mode::ScalarX => bx,
            Mode::ScalarK => BK,
        };
        let (fast, slow) = match mode {
            Mode::VecX | Mode::ScalarX => (&xl, &kl),
            Mode::VecK | Mode::ScalarK => (&kl, &xl),
        };
        asm.i(format!("rem.u32 {fast}, {tid}, {per_row}"));
        asm.i(format!("div.u32 {slow}, {tid}, {per_row}"));
        if matches!(mode, Mode::VecX | Mode::VecK) {
            asm.i(format!("mul.lo.s32 {fast}, {fast}, {vec}"));
        }
        let count = match mode {
            Mode::VecX | Mode::VecK => 1,
            Mode::ScalarX | Mode::ScalarK => vec,
        };
        let guard_x = op.extent % bx != 0;
        let mut loads = Vec::new();
        for i in 0..count {
            let (dx, dk) = match mode {
                Mode::ScalarX => (0, i * (THREADS / bx)),
                Mode::ScalarK => (i * (THREADS / BK), 0),
                _ => (0, 0),
            };
            let lanes = if count == 1 { vec } else { 1 };
            let regs = (0..lanes).map(|_| asm.fl(ty)).collect();
            let x_ok = guard_x.then(|| {
                let p = asm.p();
                let t = asm.r();
                asm.i(format!("add.s32 {t}, {xl}, {dx}"));
                asm.i(format!("setp.lt.s32 {p}, {t}, {}", left[o]));
                p
            });
            loads.push(Load { dx, dk, regs, x_ok });
        }
        // Global pointer: base + batch + (origin + xl) * sx + kl * sk.
        let ptr = asm.rd();
        let t = asm.rd();
        let base = base_of(&bases, op.view.region);
        asm.i(format!("add.s64 {ptr}, {base}, {}", op.view.byte_offset));
        asm.i(format!("add.s64 {ptr}, {ptr}, {}", offsets[o]));
        let x = asm.r();
        asm.i(format!("add.s32 {x}, {}, {xl}", origin[o]));
        asm.i(format!("cvt.s64.s32 {t}, {x}"));
        asm.i(format!("mad.lo.s64 {ptr}, {t}, {}, {ptr}", op.sx * es));
        asm.i(format!("cvt.s64.s32 {t}, {kl}"));
        asm.i(format!("mad.lo.s64 {ptr}, {t}, {}, {ptr}", op.sk * es));
        // Shared address in buffer 0: smem_at + (kl * bxs + xl) * es.
        let sm = asm.rd();
        let s32 = asm.r();
        asm.i(format!("mad.lo.s32 {s32}, {kl}, {bxs}, {xl}"));
        asm.i(format!("mul.lo.s32 {s32}, {s32}, {es}"));
        asm.i(format!("cvt.u64.u32 {sm}, {s32}"));
        asm.i(format!("add.s64 {sm}, {sm}, {smem}"));
        if op.smem_at != 0 {
            asm.i(format!("add.s64 {sm}, {sm}, {}", op.smem_at));
        }
        per_op.push(OperandLoads {
            mode,
            ptr,
            smem: sm,
            kl,
            loads,
        });
    }

    // Accumulators: acc[row][col], rows h * bx / 2 + ty * vec + i, columns likewise with tx.
    let tm = (2 * vec) as usize;
    let acc: Vec<Vec<String>> = (0..tm)
        .map(|_| (0..tm).map(|_| asm.fl(ty)).collect())
        .collect();
    let zero = float_imm(ty, 0.0);
    for row in &acc {
        for a in row {
            asm.i(format!("mov.{ty} {a}, {zero}"));
        }
    }

    let tiles = c.k.div_ceil(BK);
    if tiles > 0 {
        let krem = asm.r();
        asm.i(format!("mov.u32 {krem}, {}", c.k));
        let bo = asm.rd();
        asm.i(format!("mov.u64 {bo}, 0"));
        // The first tile.
        emit_global_loads(&mut asm, &per_op, ops.as_slice(), &krem, guard_k, ty, es);
        emit_shared_stores(&mut asm, &per_op, &bo, bxs, ty, es);
        asm.i("bar.sync 0");
        let it = asm.r();
        asm.i(format!("mov.u32 {it}, 1"));
        asm.label("k");
        let last = asm.p();
        asm.i(format!("setp.ge.u32 {last}, {it}, {tiles}"));
        asm.i(format!("@{last} bra $L_k_compute"));
        for (po, op) in per_op.iter().zip(&ops) {
            asm.i(format!(
                "add.s64 {}, {}, {}",
                po.ptr,
                po.ptr,
                BK as i64 * op.sk * es
            ));
        }
        asm.i(format!("sub.s32 {krem}, {krem}, {BK}"));
        emit_global_loads(&mut asm, &per_op, ops.as_slice(), &krem, guard_k, ty, es);
        asm.label("k_compute");
        // Multiply the current buffer.
        let sa = asm.rd();
        let sb = asm.rd();
        let t = asm.r();
        let t64 = asm.rd();
        asm.i(format!("mul.lo.s32 {t}, {ty_}, {}", vec as i64 * es));
        asm.i(format!("cvt.u64.u32 {t64}, {t}"));
        asm.i(format!("add.s64 {sa}, {smem}, {bo}"));
        asm.i(format!("add.s64 {sa}, {sa}, {t64}"));
        asm.i(format!("mul.lo.s32 {t}, {tx}, {}", vec as i64 * es));
        asm.i(format!("cvt.u64.u32 {t64}, {t}"));
        asm.i(format!("add.s64 {sb}, {smem}, {bo}"));
        asm.i(format!("add.s64 {sb}, {sb}, {t64}"));
        let half = bx / 2 * es as u64;
        for kk in 0..BK {
            let row = kk * bxs * es as u64;
            let fa: Vec<String> = (0..tm).map(|_| asm.fl(ty)).collect();
            let fb: Vec<String> = (0..tm).map(|_| asm.fl(ty)).collect();
            for (h, chunk) in fa.chunks(vec as usize).enumerate() {
                asm.i(format!(
                    "ld.shared.v{vec}.{ty} {{{}}}, [{sa}+{}]",
                    chunk.join(", "),
                    row + h as u64 * half
                ));
            }
            for (h, chunk) in fb.chunks(vec as usize).enumerate() {
                asm.i(format!(
                    "ld.shared.v{vec}.{ty} {{{}}}, [{sb}+{}]",
                    chunk.join(", "),
                    tile_bytes + row + h as u64 * half
                ));
            }
            for (i, a) in fa.iter().enumerate() {
                for (j, b) in fb.iter().enumerate() {
                    let d = &acc[i][j];
                    asm.i(format!("fma.rn.{ty} {d}, {a}, {b}, {d}"));
                }
            }
        }
        asm.i(format!("@{last} bra $L_k_end"));
        asm.i(format!("xor.b64 {bo}, {bo}, {buf_bytes}"));
        emit_shared_stores(&mut asm, &per_op, &bo, bxs, ty, es);
        asm.i("bar.sync 0");
        asm.i(format!("add.u32 {it}, {it}, 1"));
        asm.i("bra.uni $L_k");
        asm.label("k_end");
        // The next batch reuses the buffers.
        asm.i("bar.sync 0");
    }

    // Epilogue.
    let alpha = f64::from_bits(c.alpha);
    let cv = &c.c;
    let vec_c = cv.col_stride == 1 && vectorizable(cv, cv.row_stride, c.n, elem);
    let lr = asm.r();
    let lc = asm.r();
    asm.i(format!("mul.lo.s32 {lr}, {ty_}, {vec}"));
    asm.i(format!("mul.lo.s32 {lc}, {tx}, {vec}"));
    let cp = asm.rd();
    let t = asm.rd();
    let x = asm.r();
    asm.i(format!(
        "add.s64 {cp}, {}, {}",
        base_of(&bases, cv.region),
        cv.byte_offset
    ));
    asm.i(format!("add.s64 {cp}, {cp}, {}", offsets[2]));
    asm.i(format!("add.s32 {x}, {}, {lr}", origin[0]));
    asm.i(format!("cvt.s64.s32 {t}, {x}"));
    asm.i(format!(
        "mad.lo.s64 {cp}, {t}, {}, {cp}",
        cv.row_stride * es
    ));
    asm.i(format!("add.s32 {x}, {}, {lc}", origin[1]));
    asm.i(format!("cvt.s64.s32 {t}, {x}"));
    asm.i(format!(
        "mad.lo.s64 {cp}, {t}, {}, {cp}",
        cv.col_stride * es
    ));
    let guard_m = c.m % bx != 0;
    let guard_n = c.n % bx != 0;
    let ok = |asm: &mut Asm, reg: &str, d: u64, left: &str| -> String {
        let p = asm.p();
        let t = asm.r();
        asm.i(format!("add.s32 {t}, {reg}, {d}"));
        asm.i(format!("setp.lt.s32 {p}, {t}, {left}"));
        p
    };
    let row_ok: Vec<Option<String>> = (0..tm as u64)
        .map(|i| {
            let d = i / vec * (bx / 2) + i % vec;
            guard_m.then(|| ok(&mut asm, &lr, d, &left[0]))
        })
        .collect();
    let col_ok: Vec<Option<String>> = (0..tm as u64)
        .map(|j| {
            let d = j / vec * (bx / 2) + j % vec;
            guard_n.then(|| ok(&mut asm, &lc, d, &left[1]))
        })
        .collect();
    let both = |asm: &mut Asm, a: &Option<String>, b: &Option<String>| -> Option<String> {
        match (a, b) {
            (None, None) => None,
            (Some(p), None) | (None, Some(p)) => Some(p.clone()),
            (Some(p), Some(q)) => {
                let r = asm.p();
                asm.i(format!("and.pred {r}, {p}, {q}"));
                Some(r)
            }
        }
    };
    let alpha_imm = float_imm(ty, alpha);
    let finish_value = |asm: &mut Asm, acc: &str, old: Option<&str>| -> String {
        let v = asm.fl(ty);
        match (alpha == 1.0, old) {
            (true, None) => asm.i(format!("mov.{ty} {v}, {acc}")),
            (false, None) => asm.i(format!("mul.rn.{ty} {v}, {acc}, {alpha_imm}")),
            (true, Some(o)) => asm.i(format!("add.rn.{ty} {v}, {acc}, {o}")),
            (false, Some(o)) => asm.i(format!("fma.rn.{ty} {v}, {acc}, {alpha_imm}, {o}")),
        }
        v
    };
    for i in 0..tm {
        let di = (i as u64 / vec * (bx / 2) + i as u64 % vec) as i64;
        if vec_c {
            for g in 0..2usize {
                let pred = both(&mut asm, &row_ok[i], &col_ok[g * vec as usize]);
                let off = (di * cv.row_stride + (g as u64 * bx / 2) as i64) * es;
                let at = asm.addr(&cp, off);
                let guard = pred.as_ref().map(|p| format!("@{p} ")).unwrap_or_default();
                let cols = &acc[i][g * vec as usize..(g + 1) * vec as usize];
                let olds: Vec<String> = if c.accumulate {
                    let olds: Vec<String> = (0..vec).map(|_| asm.fl(ty)).collect();
                    for o in &olds {
                        asm.i(format!("mov.{ty} {o}, {zero}"));
                    }
                    asm.i(format!(
                        "{guard}ld.global.v{vec}.{ty} {{{}}}, {at}",
                        olds.join(", ")
                    ));
                    olds
                } else {
                    Vec::new()
                };
                let vals: Vec<String> = cols
                    .iter()
                    .enumerate()
                    .map(|(j, a)| finish_value(&mut asm, a, olds.get(j).map(|s| s.as_str())))
                    .collect();
                asm.i(format!(
                    "{guard}st.global.v{vec}.{ty} {at}, {{{}}}",
                    vals.join(", ")
                ));
            }
        } else {
            for j in 0..tm {
                let dj = (j as u64 / vec * (bx / 2) + j as u64 % vec) as i64;
                let pred = both(&mut asm, &row_ok[i], &col_ok[j]);
                let off = (di * cv.row_stride + dj * cv.col_stride) * es;
                let at = asm.addr(&cp, off);
                let guard = pred.as_ref().map(|p| format!("@{p} ")).unwrap_or_default();
                let old = c.accumulate.then(|| {
                    let o = asm.fl(ty);
                    asm.i(format!("mov.{ty} {o}, {zero}"));
                    asm.i(format!("{guard}ld.global.{ty} {o}, {at}"));
                    o
                });
                let v = finish_value(&mut asm, &acc[i][j], old.as_deref());
                asm.i(format!("{guard}st.global.{ty} {at}, {v}"));
            }
        }
    }
    batch_loop_end(&mut asm, &c.batch, &bz);

    let smem_bytes = 2 * buf_bytes;
    let decls = format!("\t.shared .align 16 .b8 smem[{smem_bytes}];\n");
    let grid = [
        c.n.div_ceil(bx) as u32,
        c.m.div_ceil(bx) as u32,
        c.batch.iter().product::<u64>().min(GRID_YZ) as u32,
    ];
    PtxEntry {
        name: name.to_string(),
        text: asm.finish(name, &decls),
        launch: Launch {
            grid,
            block: [THREADS as u32, 1, 1],
            shared_bytes: 0,
        },
    }
}

/// The global loads of one `K` step into the prefetch registers (zero where out of range).
fn emit_global_loads(
    asm: &mut Asm,
    per_op: &[OperandLoads],
    ops: &[Operand],
    krem: &str,
    guard_k: bool,
    ty: &str,
    es: i64,
) {
    let zero = float_imm(ty, 0.0);
    for (po, op) in per_op.iter().zip(ops) {
        for load in &po.loads {
            let k_ok = guard_k.then(|| {
                let p = asm.p();
                let t = asm.r();
                asm.i(format!("add.s32 {t}, {}, {}", po.kl, load.dk));
                asm.i(format!("setp.lt.s32 {p}, {t}, {krem}"));
                p
            });
            let pred = match (&load.x_ok, k_ok) {
                (None, None) => None,
                (Some(p), None) => Some(p.clone()),
                (None, Some(q)) => Some(q),
                (Some(p), Some(q)) => {
                    let r = asm.p();
                    asm.i(format!("and.pred {r}, {p}, {q}"));
                    Some(r)
                }
            };
            let off = (load.dx as i64 * op.sx + load.dk as i64 * op.sk) * es;
            let at = asm.addr(&po.ptr, off);
            let guard = match &pred {
                Some(p) => {
                    for r in &load.regs {
                        asm.i(format!("mov.{ty} {r}, {zero}"));
                    }
                    format!("@{p} ")
                }
                None => String::new(),
            };
            if load.regs.len() > 1 {
                asm.i(format!(
                    "{guard}ld.global.v{}.{ty} {{{}}}, {at}",
                    load.regs.len(),
                    load.regs.join(", ")
                ));
            } else {
                asm.i(format!("{guard}ld.global.{ty} {}, {at}", load.regs[0]));
            }
        }
    }
}

/// Stores the prefetch registers into the buffer at byte offset `bo`.
fn emit_shared_stores(
    asm: &mut Asm,
    per_op: &[OperandLoads],
    bo: &str,
    bxs: u64,
    ty: &str,
    es: i64,
) {
    for po in per_op {
        let s = asm.rd();
        asm.i(format!("add.s64 {s}, {}, {bo}", po.smem));
        for load in &po.loads {
            let base = (load.dk * bxs + load.dx) * es as u64;
            match po.mode {
                Mode::VecX => asm.i(format!(
                    "st.shared.v{}.{ty} [{s}+{base}], {{{}}}",
                    load.regs.len(),
                    load.regs.join(", ")
                )),
                Mode::VecK => {
                    for (j, r) in load.regs.iter().enumerate() {
                        let at = base + j as u64 * bxs * es as u64;
                        asm.i(format!("st.shared.{ty} [{s}+{at}], {r}"));
                    }
                }
                Mode::ScalarX | Mode::ScalarK => {
                    asm.i(format!("st.shared.{ty} [{s}+{base}], {}", load.regs[0]))
                }
            }
        }
    }
}

/// Steps of `K` a streaming thread unrolls.
const UNROLL: u64 = 4;

/// Warps per block in the streaming form (the `K` split).
const SPLIT: u64 = THREADS / 32;

/// The streaming form (see the module doc).
fn streaming(c: &Contract, b: &MatView, elem: Elem, name: &str) -> PtxEntry {
    let ty = elem.ty;
    let es = elem.size;
    let m = c.m as usize;
    let mut asm = Asm::new();
    let bases = asm.bases();
    let tid = asm.r();
    let lane = asm.r();
    let warp = asm.r();
    asm.i(format!("mov.u32 {tid}, %tid.x"));
    asm.i(format!("and.b32 {lane}, {tid}, 31"));
    asm.i(format!("shr.u32 {warp}, {tid}, 5"));
    let col = asm.r();
    let ctaid = asm.r();
    asm.i(format!("mov.u32 {ctaid}, %ctaid.x"));
    asm.i(format!("mad.lo.s32 {col}, {ctaid}, 32, {lane}"));
    let col_ok = asm.p();
    asm.i(format!("setp.lt.s32 {col_ok}, {col}, {}", c.n));
    let smem = asm.rd();
    asm.i(format!("mov.u64 {smem}, smem"));

    let (bz, offsets) = batch_loop_start(&mut asm, &c.batch, [&c.a, b, &c.c], es);
    // a pointer: row 0, k = warp; b pointer: k = warp, column col.
    let pa = asm.rd();
    let pb = asm.rd();
    let t = asm.rd();
    asm.i(format!(
        "add.s64 {pa}, {}, {}",
        base_of(&bases, c.a.region),
        c.a.byte_offset
    ));
    asm.i(format!("add.s64 {pa}, {pa}, {}", offsets[0]));
    asm.i(format!("cvt.u64.u32 {t}, {warp}"));
    asm.i(format!(
        "mad.lo.s64 {pa}, {t}, {}, {pa}",
        c.a.col_stride * es
    ));
    asm.i(format!(
        "add.s64 {pb}, {}, {}",
        base_of(&bases, b.region),
        b.byte_offset
    ));
    asm.i(format!("add.s64 {pb}, {pb}, {}", offsets[1]));
    asm.i(format!("mad.lo.s64 {pb}, {t}, {}, {pb}", b.row_stride * es));
    asm.i(format!("cvt.s64.s32 {t}, {col}"));
    asm.i(format!("mad.lo.s64 {pb}, {t}, {}, {pb}", b.col_stride * es));
    let zero = float_imm(ty, 0.0);
    let acc: Vec<String> = (0..m).map(|_| asm.fl(ty)).collect();
    for a in &acc {
        asm.i(format!("mov.{ty} {a}, {zero}"));
    }
    let step = SPLIT * UNROLL;
    let rounds = c.k.div_ceil(step);
    let guard_k = c.k % step != 0;
    if rounds > 0 {
        let kk = asm.r();
        asm.i(format!("mov.u32 {kk}, {warp}"));
        let it = asm.r();
        asm.i(format!("mov.u32 {it}, 0"));
        asm.label("k");
        let mut bvals = Vec::new();
        let mut avals = Vec::new();
        for u in 0..UNROLL {
            let p = asm.p();
            if guard_k {
                let t = asm.r();
                asm.i(format!("add.s32 {t}, {kk}, {}", u * SPLIT));
                asm.i(format!("setp.lt.s32 {p}, {t}, {}", c.k));
                asm.i(format!("and.pred {p}, {p}, {col_ok}"));
            } else {
                asm.i(format!("mov.pred {p}, {col_ok}"));
            }
            let bv = asm.fl(ty);
            asm.i(format!("mov.{ty} {bv}, {zero}"));
            let at = asm.addr(&pb, (u * SPLIT) as i64 * b.row_stride * es);
            asm.i(format!("@{p} ld.global.{ty} {bv}, {at}"));
            bvals.push(bv);
            let mut row = Vec::new();
            for i in 0..m {
                let a = asm.fl(ty);
                asm.i(format!("mov.{ty} {a}, {zero}"));
                let off = ((u * SPLIT) as i64 * c.a.col_stride + i as i64 * c.a.row_stride) * es;
                let at = asm.addr(&pa, off);
                asm.i(format!("@{p} ld.global.{ty} {a}, {at}"));
                row.push(a);
            }
            avals.push(row);
        }
        for (b, row) in bvals.iter().zip(&avals) {
            for (a, d) in row.iter().zip(&acc) {
                asm.i(format!("fma.rn.{ty} {d}, {a}, {b}, {d}"));
            }
        }
        asm.i(format!("add.s32 {kk}, {kk}, {step}"));
        asm.i(format!(
            "add.s64 {pa}, {pa}, {}",
            step as i64 * c.a.col_stride * es
        ));
        asm.i(format!(
            "add.s64 {pb}, {pb}, {}",
            step as i64 * b.row_stride * es
        ));
        asm.i(format!("add.u32 {it}, {it}, 1"));
        let more = asm.p();
        asm.i(format!("setp.lt.u32 {more}, {it}, {rounds}"));
        asm.i(format!("@{more} bra.uni $L_k"));
    }
    // Partial sums meet in shared memory: red[warp][row][lane].
    let s = asm.rd();
    let t32 = asm.r();
    asm.i(format!("mad.lo.s32 {t32}, {warp}, {}, {lane}", 32 * m));
    asm.i(format!("mul.lo.s32 {t32}, {t32}, {es}"));
    asm.i(format!("cvt.u64.u32 {s}, {t32}"));
    asm.i(format!("add.s64 {s}, {s}, {smem}"));
    for (i, a) in acc.iter().enumerate() {
        asm.i(format!("st.shared.{ty} [{s}+{}], {a}", i as i64 * 32 * es));
    }
    asm.i("bar.sync 0");
    let not_first = asm.p();
    asm.i(format!("setp.ne.u32 {not_first}, {warp}, 0"));
    asm.i(format!("@{not_first} bra $L_stored"));
    asm.i(format!("@!{col_ok} bra $L_stored"));
    let cp = asm.rd();
    asm.i(format!(
        "add.s64 {cp}, {}, {}",
        base_of(&bases, c.c.region),
        c.c.byte_offset
    ));
    asm.i(format!("add.s64 {cp}, {cp}, {}", offsets[2]));
    asm.i(format!("cvt.s64.s32 {t}, {col}"));
    asm.i(format!(
        "mad.lo.s64 {cp}, {t}, {}, {cp}",
        c.c.col_stride * es
    ));
    let alpha = f64::from_bits(c.alpha);
    let alpha_imm = float_imm(ty, alpha);
    for i in 0..m {
        let sum = asm.fl(ty);
        asm.i(format!(
            "ld.shared.{ty} {sum}, [{s}+{}]",
            i as i64 * 32 * es
        ));
        for w in 1..SPLIT {
            let v = asm.fl(ty);
            let off = ((w as usize * m + i) * 32) as i64 * es;
            asm.i(format!("ld.shared.{ty} {v}, [{s}+{off}]"));
            asm.i(format!("add.rn.{ty} {sum}, {sum}, {v}"));
        }
        let at = asm.addr(&cp, i as i64 * c.c.row_stride * es);
        let out = asm.fl(ty);
        if c.accumulate {
            let old = asm.fl(ty);
            asm.i(format!("ld.global.{ty} {old}, {at}"));
            asm.i(format!("fma.rn.{ty} {out}, {sum}, {alpha_imm}, {old}"));
        } else {
            asm.i(format!("mul.rn.{ty} {out}, {sum}, {alpha_imm}"));
        }
        asm.i(format!("st.global.{ty} {at}, {out}"));
    }
    asm.label("stored");
    batch_loop_end(&mut asm, &c.batch, &bz);
    let smem_bytes = SPLIT as usize * m * 32 * es as usize;
    let decls = format!("\t.shared .align 16 .b8 smem[{smem_bytes}];\n");
    PtxEntry {
        name: name.to_string(),
        text: asm.finish(name, &decls),
        launch: Launch {
            grid: [
                c.n.div_ceil(32) as u32,
                1,
                c.batch.iter().product::<u64>().min(GRID_YZ) as u32,
            ],
            block: [THREADS as u32, 1, 1],
            shared_bytes: 0,
        },
    }
}
