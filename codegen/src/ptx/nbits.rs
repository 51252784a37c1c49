//! Low-bit products ([`NBitsMatMul`]) as PTX, reading the packed `nbits v2` layout of
//! [`crate::nbits`] as it is (one row of bytes per output column, `K` in 32-groups).
//!
//! # Few rows: a warp per column
//!
//! With at most [`GEMV_ROWS`] rows, each warp computes one output column for every row. Lane
//! `l` takes the 32-groups `l, l + 32, ...` of the column: one 16-byte load (4 bits; two at 8
//! bits), so a warp reads 512 contiguous bytes per step (the layout is coalesced for this
//! mapping), plus the group's scale and zero point. It dequantizes the 32 values exactly as the
//! reference does (`(q - zp) as f32 * scale`, in f32), multiplies them with each row of `a`
//! (read through L1: every warp of the block reads the same rows), and the warp reduces its
//! partial sums with `shfl.sync.bfly`; lane 0 adds the bias and writes `c`. Rows' addresses are
//! constants (at most eight rows).
//!
//! # Many rows: dequantized tiles in shared memory
//!
//! A block of 256 threads computes a 64-row x 64-column tile of `c` (4 x 4 results per thread,
//! rows `ty + 16 i`, columns `tx + 16 j`). `K` advances one 32-group at a time: each thread
//! dequantizes 8 values of one column into the shared `b` tile and loads 8 elements of the
//! `a` tile, then every thread multiplies its 4 x 4 results through the 32 steps. No arena
//! scratch is used (the cuda target plans none; `scratch` is ignored).
//!
//! Scales: when `block` is a multiple of 32 a group has one scale and zero point, loaded once;
//! otherwise every value looks up its own (`min(k, K - 1) / block`, so the padding values of a
//! `K` tail never index past the column's blocks). `a` is read as zero past `K`, so padding
//! contributes nothing. Rows of `a` and `c` are found from the batch index by constant
//! divisions, as [`NBitsMatMul::row_offset`] defines them.

use super::gemm::{base_of, Asm};
use super::{Launch, PtxEntry, PtxError};
use crate::kernel::{MatView, NBitsMatMul};
use crate::nbits::{row_bytes, GROUP};

/// Products with at most this many rows use the warp-per-column form.
pub const GEMV_ROWS: u64 = 8;

/// The most shared memory the warp-per-column form stages `a` in (static shared memory).
const STAGE_BYTES: u64 = 48 * 1024;

/// Warps per block in the warp-per-column form.
const WARPS: u64 = 8;

/// Rows and columns of the many-rows tile.
const TILE: u64 = 64;

/// Shared-memory row stride (floats) of both tiles; the padding spreads the stores over banks.
const TILE_STRIDE: u64 = TILE + 1;

pub(super) fn emit(q: &NBitsMatMul, kernel: &str, name: &str) -> Result<PtxEntry, PtxError> {
    let unsupported = |message: String| PtxError::Unsupported {
        kernel: kernel.to_string(),
        message,
    };
    if !matches!(q.bits, 4 | 8) || q.block == 0 {
        return Err(unsupported(format!(
            "{} bits in blocks of {}",
            q.bits, q.block
        )));
    }
    let rows = q.rows();
    let limit = i32::MAX as u64 - 1024;
    if q.n > limit || q.k > limit || rows > limit {
        return Err(unsupported("a dimension exceeds the 32-bit range".into()));
    }
    if rows == 0 || q.n == 0 {
        return Ok(super::empty_entry(name, Asm::new().finish(name, "")));
    }
    if rows <= GEMV_ROWS {
        Ok(gemv(q, name))
    } else {
        if rows.div_ceil(TILE) > 65535 {
            return Err(unsupported(format!("{rows} rows need too many blocks")));
        }
        Ok(tiled(q, name))
    }
}

/// Loads `count` little-endian 32-bit words at `[ptr+offset]`, `[ptr+offset+4]`, ...; `align`
/// is the alignment the address is known to have. With `guard`, the words are zero where the
/// predicate is false.
fn load_words(
    asm: &mut Asm,
    ptr: &str,
    offset: i64,
    count: usize,
    align: u64,
    guard: Option<&str>,
) -> Vec<String> {
    let words: Vec<String> = (0..count).map(|_| asm.r()).collect();
    let pred = match guard {
        Some(p) => {
            for w in &words {
                asm.i(format!("mov.u32 {w}, 0"));
            }
            format!("@{p} ")
        }
        None => String::new(),
    };
    if align % 16 == 0 {
        for (v, chunk) in words.chunks(4).enumerate() {
            let at = asm.addr(ptr, offset + 16 * v as i64);
            asm.i(format!(
                "{pred}ld.global.nc.v4.u32 {{{}}}, {at}",
                chunk.join(", ")
            ));
        }
    } else if align % 4 == 0 {
        for (w, r) in words.iter().enumerate() {
            let at = asm.addr(ptr, offset + 4 * w as i64);
            asm.i(format!("{pred}ld.global.nc.u32 {r}, {at}"));
        }
    } else {
        for (w, r) in words.iter().enumerate() {
            let at = asm.addr(ptr, offset + 4 * w as i64);
            asm.i(format!("{pred}ld.global.nc.u8 {r}, {at}"));
            for b in 1..4 {
                let t = asm.r();
                let at = asm.addr(ptr, offset + 4 * w as i64 + b);
                asm.i(format!("mov.u32 {t}, 0"));
                asm.i(format!("{pred}ld.global.nc.u8 {t}, {at}"));
                asm.i(format!("shl.b32 {t}, {t}, {}", 8 * b));
                asm.i(format!("or.b32 {r}, {r}, {t}"));
            }
        }
    }
    words
}

/// Groups a lane of the warp-per-column form loads ahead.
const UNROLL: u64 = 4;

/// One 32-group of one column in the warp-per-column form: its words are loaded; this adds its
/// products with every row to the accumulators.
struct GemvGroup<'a> {
    q: &'a NBitsMatMul,
    weights: &'a str,
    col: &'a str,
    /// The group's first `k` (a register).
    k0: &'a str,
    /// Row pointers of `a` at the lane's first group, and the byte offset of this group.
    rows: &'a [String],
    a_off: i64,
    vec_a: bool,
    /// The rows are in shared memory, zero-padded (no guard needed).
    staged: bool,
    acc: &'a [String],
}

impl GemvGroup<'_> {
    /// The group's `a` values at positions `ks` (within the group) of every row, zero past `K`.
    fn a_values(&self, asm: &mut Asm, ks: &[u32]) -> Vec<Vec<String>> {
        let q = self.q;
        let guard_k = q.k % GROUP != 0 && !self.staged;
        let space = if self.staged { "shared" } else { "global" };
        let mut out = Vec::new();
        for p in self.rows {
            let mut row = Vec::new();
            // Runs of four consecutive positions starting at a multiple of 4 load as vectors.
            let vector = self.vec_a
                && ks.len() % 4 == 0
                && ks.chunks(4).all(|c| {
                    c[0] % 4 == 0 && c.iter().enumerate().all(|(j, &k)| k == c[0] + j as u32)
                });
            let width = if vector { 4 } else { 1 };
            for chunk in ks.chunks(width) {
                let xs: Vec<String> = (0..width).map(|_| asm.f()).collect();
                let guard = if guard_k {
                    let pr = asm.p();
                    let k = asm.r();
                    asm.i(format!("add.s32 {k}, {}, {}", self.k0, chunk[0]));
                    asm.i(format!("setp.lt.u32 {pr}, {k}, {}", q.k));
                    for x in &xs {
                        asm.i(format!("mov.f32 {x}, 0f00000000"));
                    }
                    format!("@{pr} ")
                } else {
                    String::new()
                };
                let at = asm.addr(p, self.a_off + 4 * i64::from(chunk[0]));
                if vector {
                    asm.i(format!(
                        "{guard}ld.{space}.v4.f32 {{{}}}, {at}",
                        xs.join(", ")
                    ));
                } else {
                    asm.i(format!("{guard}ld.{space}.f32 {}, {at}", xs[0]));
                }
                row.extend(xs);
            }
            out.push(row);
        }
        out
    }

    /// One scale and zero point for the whole group (`block` a multiple of 32): every value's
    /// `q - zp` is formed exactly in f32 without a conversion instruction (the bits
    /// `0x4B000000 | raw << p` are the float `2^23 + raw * 2^p`; one fma scales and offsets it
    /// exactly), the group's `sum a * (q - zp)` is accumulated with fmas, and the scale is
    /// applied once to the group's sum. This reassociates the reference's
    /// `sum a * ((q - zp) * scale)` (rounding differs, as with summation order), and keeps the
    /// product under the memory bound.
    fn factored(&self, asm: &mut Asm, words: &[String], scale: &str, zp: Option<&str>) {
        let q = self.q;
        let bits = q.bits;
        // Signed values are biased to unsigned by flipping their sign bits.
        let bias: u32 = if q.signed { 1 << (bits - 1) } else { 0 };
        let flip: u32 = if !q.signed {
            0
        } else if bits == 4 {
            0x8888_8888
        } else {
            0x8080_8080
        };
        // Offsets per bit position p: -(2^(23 - p) + bias + zp).
        let positions: Vec<u32> = if bits == 4 {
            vec![0, 4, 8, 12, 16]
        } else {
            vec![0, 8]
        };
        let offsets: Vec<String> = positions
            .iter()
            .map(|&p| {
                let o = asm.f();
                let c = -(2f64.powi(23 - p as i32) + f64::from(bias));
                match &zp {
                    Some(z) => asm.i(format!("sub.rn.f32 {o}, {}, {z}", super::f32_imm(c as f32))),
                    None => asm.i(format!("mov.f32 {o}, {}", super::f32_imm(c as f32))),
                }
                o
            })
            .collect();
        let offset_of = |p: u32| &offsets[positions.iter().position(|&x| x == p).unwrap_or(0)];
        let sums: Vec<String> = self.acc.iter().map(|_| asm.f()).collect();
        for s in &sums {
            asm.i(format!("mov.f32 {s}, 0f00000000"));
        }
        for (i, word) in words.iter().enumerate() {
            let w = if flip != 0 {
                let x = asm.r();
                asm.i(format!("xor.b32 {x}, {word}, {flip}"));
                x
            } else {
                word.clone()
            };
            let hi = asm.r();
            asm.i(format!("shr.u32 {hi}, {w}, 16"));
            // (position in group, bit in word) of the word's values.
            let values: Vec<(u32, u32)> = if bits == 4 {
                (0..4u32)
                    .flat_map(|b| {
                        [
                            (4 * i as u32 + b, 8 * b),
                            (16 + 4 * i as u32 + b, 8 * b + 4),
                        ]
                    })
                    .collect()
            } else {
                (0..4u32).map(|b| (4 * i as u32 + b, 8 * b)).collect()
            };
            let mut ks: Vec<u32> = values.iter().map(|v| v.0).collect();
            ks.sort_unstable();
            let a = self.a_values(asm, &ks);
            for &(k, bit) in &values {
                let (src, p) = if bit + bits <= 20 {
                    (&w, bit)
                } else {
                    (&hi, bit - 16)
                };
                let t = asm.r();
                asm.i(format!("and.b32 {t}, {src}, {}", ((1u32 << bits) - 1) << p));
                asm.i(format!("or.b32 {t}, {t}, 1258291200"));
                let f = asm.f();
                asm.i(format!("mov.b32 {f}, {t}"));
                let d = asm.f();
                let unit = super::f32_imm(2f64.powi(-(p as i32)) as f32);
                asm.i(format!("fma.rn.f32 {d}, {f}, {unit}, {}", offset_of(p)));
                let at = ks.iter().position(|&x| x == k).unwrap_or(0);
                for (row, s) in a.iter().zip(&sums) {
                    asm.i(format!("fma.rn.f32 {s}, {}, {d}, {s}", row[at]));
                }
            }
        }
        for (s, acc) in sums.iter().zip(self.acc) {
            asm.i(format!("fma.rn.f32 {acc}, {s}, {scale}, {acc}"));
        }
    }

    /// Any `block`: every value looks up its own scale and zero point and is dequantized as
    /// the reference does, `(q - zp) as f32 * scale`.
    fn per_value(&self, asm: &mut Asm, words: &[String]) {
        let q = self.q;
        let ks: Vec<u32> = (0..GROUP as u32).collect();
        let a = self.a_values(asm, &ks);
        for index in 0..GROUP as u32 {
            let (_, word, shift) = value_at(q.bits, index);
            let v = extract(asm, &words[word], shift, q.bits, q.signed);
            let k = asm.r();
            asm.i(format!("add.s32 {k}, {}, {index}", self.k0));
            let idx = param_index(asm, q, self.col, &k);
            let (s, z) = params(asm, q, self.weights, &idx);
            let w = dequantize(asm, &v, &s, z.as_deref());
            for (row, acc) in a.iter().zip(self.acc) {
                asm.i(format!(
                    "fma.rn.f32 {acc}, {}, {w}, {acc}",
                    row[index as usize]
                ));
            }
        }
    }
}

/// The integer value of `bits` bits at bit `shift` of `word`.
fn extract(asm: &mut Asm, word: &str, shift: u32, bits: u32, signed: bool) -> String {
    let v = asm.r();
    if signed {
        asm.i(format!("shl.b32 {v}, {word}, {}", 32 - bits - shift));
        asm.i(format!("shr.s32 {v}, {v}, {}", 32 - bits));
    } else {
        asm.i(format!("shr.u32 {v}, {word}, {shift}"));
        asm.i(format!("and.b32 {v}, {v}, {}", (1u32 << bits) - 1));
    }
    v
}

/// The position in its group (`0..32`) of value `index` of a group's words, and the word and
/// bit holding it: 4 bits: byte `j` holds `j` (low nibble) and `16 + j` (high nibble); 8 bits:
/// byte `j` holds `j`.
fn value_at(bits: u32, index: u32) -> (u32, usize, u32) {
    if bits == 4 {
        let (hi, j) = (index / 16, index % 16);
        (index, (j / 4) as usize, 8 * (j % 4) + 4 * hi)
    } else {
        (index, (index / 4) as usize, 8 * (index % 4))
    }
}

/// The scale and zero point (as f32) of parameter index `idx` (`n * k_blocks + block`, a
/// 32-bit register); the zero point is `None` when there are none.
fn params(asm: &mut Asm, q: &NBitsMatMul, weights: &str, idx: &str) -> (String, Option<String>) {
    guarded_params(asm, q, weights, idx, None)
}

/// [`params`], loaded only where `guard` holds (zero elsewhere).
fn guarded_params(
    asm: &mut Asm,
    q: &NBitsMatMul,
    weights: &str,
    idx: &str,
    guard: Option<&str>,
) -> (String, Option<String>) {
    let pred = guard.map(|p| format!("@{p} ")).unwrap_or_default();
    let i64_ = asm.rd();
    asm.i(format!("cvt.u64.u32 {i64_}, {idx}"));
    let at = asm.rd();
    asm.i(format!("mad.lo.s64 {at}, {i64_}, 4, {weights}"));
    let scale = asm.f();
    asm.i(format!("mov.f32 {scale}, 0f00000000"));
    asm.i(format!(
        "{pred}ld.global.nc.f32 {scale}, [{at}+{}]",
        q.scales
    ));
    let zp = q.zero_points.map(|z| {
        let at = asm.rd();
        asm.i(format!("add.s64 {at}, {weights}, {i64_}"));
        let r = asm.r();
        let ty = if q.signed { "s8" } else { "u8" };
        asm.i(format!("mov.u32 {r}, 0"));
        asm.i(format!("{pred}ld.global.nc.{ty} {r}, [{at}+{z}]"));
        let f = asm.f();
        asm.i(format!("cvt.rn.f32.s32 {f}, {r}"));
        f
    });
    (scale, zp)
}

/// The dequantized value `(q - zp) * scale` of the integer `value`.
fn dequantize(asm: &mut Asm, value: &str, scale: &str, zp: Option<&str>) -> String {
    let f = asm.f();
    asm.i(format!("cvt.rn.f32.s32 {f}, {value}"));
    if let Some(z) = zp {
        asm.i(format!("sub.rn.f32 {f}, {f}, {z}"));
    }
    asm.i(format!("mul.rn.f32 {f}, {f}, {scale}"));
    f
}

/// The parameter index of value `k` (a register) of column `col`: `col * k_blocks +
/// min(k, K - 1) / block`.
fn param_index(asm: &mut Asm, q: &NBitsMatMul, col: &str, k: &str) -> String {
    let idx = asm.r();
    asm.i(format!("min.u32 {idx}, {k}, {}", q.k.max(1) - 1));
    asm.i(format!("div.u32 {idx}, {idx}, {}", q.block));
    asm.i(format!("mad.lo.s32 {idx}, {col}, {}, {idx}", q.k_blocks()));
    idx
}

/// The byte offset (64-bit register, relative to the region base) of row `r` (a 32-bit
/// register) of `view`, as [`NBitsMatMul::row_offset`] computes it.
fn row_offset(asm: &mut Asm, q: &NBitsMatMul, view: &MatView, r: &str) -> String {
    let m = q.m.max(1);
    let off = asm.rd();
    let b = asm.r();
    let i = asm.r();
    let t = asm.rd();
    asm.i(format!("div.u32 {b}, {r}, {m}"));
    asm.i(format!("rem.u32 {i}, {r}, {m}"));
    asm.i(format!("cvt.u64.u32 {t}, {i}"));
    asm.i(format!("mov.u64 {off}, {}", view.byte_offset));
    asm.i(format!(
        "mad.lo.s64 {off}, {t}, {}, {off}",
        4 * view.row_stride
    ));
    for (&extent, &stride) in q.batch.iter().zip(&view.batch_strides).rev() {
        let e = extent.max(1);
        let idx = asm.r();
        asm.i(format!("rem.u32 {idx}, {b}, {e}"));
        asm.i(format!("div.u32 {b}, {b}, {e}"));
        asm.i(format!("cvt.u64.u32 {t}, {idx}"));
        asm.i(format!("mad.lo.s64 {off}, {t}, {}, {off}", 4 * stride));
    }
    off
}

/// The warp-per-column form (see the module doc).
fn gemv(q: &NBitsMatMul, name: &str) -> PtxEntry {
    let rows = q.rows();
    let mut asm = Asm::new();
    let bases = asm.bases();
    let weights = bases[1].clone();
    let groups = q.k.div_ceil(GROUP);
    let group_bytes = GROUP * u64::from(q.bits) / 8;
    let words = (group_bytes / 4) as usize;
    let rb = row_bytes(q.k, q.bits);

    let tid = asm.r();
    let lane = asm.r();
    let warp = asm.r();
    let col = asm.r();
    asm.i(format!("mov.u32 {tid}, %tid.x"));
    asm.i(format!("and.b32 {lane}, {tid}, 31"));
    asm.i(format!("shr.u32 {warp}, {tid}, 5"));
    let ctaid = asm.r();
    asm.i(format!("mov.u32 {ctaid}, %ctaid.x"));
    asm.i(format!("mad.lo.s32 {col}, {ctaid}, {WARPS}, {warp}"));
    // The rows of `a`, zero-padded to whole groups, are staged in shared memory when they fit:
    // every warp of the block reads all of them, and L2 would otherwise serve each warp.
    let padded = groups * GROUP;
    let staged = rows * padded * 4 <= STAGE_BYTES;
    let a_base = base_of(&bases, q.a.region).to_string();
    let smem = asm.rd();
    if staged {
        asm.i(format!("mov.u64 {smem}, smem"));
        // Every thread loads its elements of all rows first, then stores them, so the loads
        // are in flight together (at most 48 per thread).
        let per_thread = padded.div_ceil(32 * WARPS);
        let idx0 = asm.rd();
        asm.i(format!("mul.wide.u32 {idx0}, {tid}, 4"));
        let src = asm.rd();
        asm.i(format!("add.s64 {src}, {a_base}, {idx0}"));
        let dst = asm.rd();
        asm.i(format!("add.s64 {dst}, {smem}, {idx0}"));
        let mut pending = Vec::new();
        for r in 0..rows {
            for j in 0..per_thread {
                let e = j * 32 * WARPS;
                let v = asm.f();
                asm.i(format!("mov.f32 {v}, 0f00000000"));
                // Element tid + e of the row: in `K`, in the padding, or past it.
                let load = asm.p();
                asm.i(format!(
                    "setp.lt.u32 {load}, {tid}, {}",
                    q.k.saturating_sub(e)
                ));
                let at = asm.addr(&src, q.row_offset(&q.a, r) + 4 * e as i64);
                asm.i(format!("@{load} ld.global.f32 {v}, {at}"));
                let store = if padded - e >= 32 * WARPS {
                    None
                } else {
                    let p = asm.p();
                    asm.i(format!("setp.lt.u32 {p}, {tid}, {}", padded - e));
                    Some(p)
                };
                pending.push((v, store, (r * padded + e) * 4));
            }
        }
        for (v, store, at) in pending {
            let guard = store.map(|p| format!("@{p} ")).unwrap_or_default();
            asm.i(format!("{guard}st.shared.f32 [{dst}+{at}], {v}"));
        }
        asm.i("bar.sync 0");
    }
    let out = asm.p();
    asm.i(format!("setp.ge.u32 {out}, {col}, {}", q.n));
    asm.i(format!("@{out} bra $L_done"));

    // Column pointer at the lane's first group.
    let pb = asm.rd();
    let t = asm.rd();
    asm.i(format!("cvt.u64.u32 {t}, {col}"));
    asm.i(format!("mad.lo.s64 {pb}, {t}, {rb}, {weights}"));
    asm.i(format!("add.s64 {pb}, {pb}, {}", q.b));
    asm.i(format!("cvt.u64.u32 {t}, {lane}"));
    asm.i(format!("mad.lo.s64 {pb}, {t}, {group_bytes}, {pb}"));
    // Row pointers of `a` at the lane's first group (constant row offsets).
    let lane_bytes = asm.rd();
    asm.i(format!("mul.lo.s64 {lane_bytes}, {t}, {}", 4 * GROUP));
    let pa: Vec<String> = (0..rows)
        .map(|r| {
            let p = asm.rd();
            if staged {
                asm.i(format!("add.s64 {p}, {smem}, {}", r * padded * 4));
            } else {
                asm.i(format!("add.s64 {p}, {a_base}, {}", q.row_offset(&q.a, r)));
            }
            asm.i(format!("add.s64 {p}, {p}, {lane_bytes}"));
            p
        })
        .collect();
    let vec_a = staged || q.k % 4 == 0 && (0..rows).all(|r| q.row_offset(&q.a, r) % 16 == 0);
    let acc: Vec<String> = (0..rows).map(|_| asm.f()).collect();
    for a in &acc {
        asm.i(format!("mov.f32 {a}, 0f00000000"));
    }
    // The lane's first k.
    let k0 = asm.r();
    asm.i(format!("mul.lo.s32 {k0}, {lane}, {GROUP}"));
    let fast_params = q.block % GROUP == 0;

    // Each step a lane takes `unroll` groups 32 groups apart, loading all their bytes first so
    // that they are in flight together.
    let unroll = groups.div_ceil(32).min(UNROLL);
    let steps = groups.div_ceil(32 * unroll);
    let guard_groups = groups % (32 * unroll) != 0;
    let it = asm.r();
    asm.i(format!("mov.u32 {it}, 0"));
    asm.label("g");
    let align = if q.b % 16 == 0 { 16 } else { q.b % 16 };
    let mut loaded = Vec::new();
    for u in 0..unroll {
        let ok = guard_groups.then(|| {
            let p = asm.p();
            let k = asm.r();
            asm.i(format!("add.s32 {k}, {k0}, {}", u * 32 * GROUP));
            asm.i(format!("setp.lt.u32 {p}, {k}, {}", groups * GROUP));
            p
        });
        let ws = load_words(
            &mut asm,
            &pb,
            (u * 32 * group_bytes) as i64,
            words,
            align,
            ok.as_deref(),
        );
        // The group's scale and zero point (one per group when `block` is a multiple of 32),
        // loaded with its bytes.
        let group_params = fast_params.then(|| {
            let idx = asm.r();
            asm.i(format!("add.s32 {idx}, {k0}, {}", u * 32 * GROUP));
            asm.i(format!("div.u32 {idx}, {idx}, {}", q.block));
            asm.i(format!("mad.lo.s32 {idx}, {col}, {}, {idx}", q.k_blocks()));
            guarded_params(&mut asm, q, &weights, &idx, ok.as_deref())
        });
        loaded.push((ok, ws, group_params));
    }
    for (u, (ok, ws, group_params)) in loaded.iter().enumerate() {
        let u = u as u64;
        if let Some(p) = ok {
            asm.i(format!("@!{p} bra $L_skip{u}"));
        }
        let ku = asm.r();
        asm.i(format!("add.s32 {ku}, {k0}, {}", u * 32 * GROUP));
        let a_off = (u * 32 * GROUP * 4) as i64;
        let group = GemvGroup {
            q,
            weights: &weights,
            col: &col,
            k0: &ku,
            rows: &pa,
            a_off,
            vec_a,
            staged,
            acc: &acc,
        };
        match group_params {
            Some((scale, zp)) => group.factored(&mut asm, ws, scale, zp.as_deref()),
            None => group.per_value(&mut asm, ws),
        }
        asm.label(&format!("skip{u}"));
    }
    asm.i(format!("add.s64 {pb}, {pb}, {}", 32 * unroll * group_bytes));
    for p in &pa {
        asm.i(format!("add.s64 {p}, {p}, {}", 32 * unroll * 4 * GROUP));
    }
    asm.i(format!("add.s32 {k0}, {k0}, {}", 32 * unroll * GROUP));
    asm.i(format!("add.u32 {it}, {it}, 1"));
    let more = asm.p();
    asm.i(format!("setp.lt.u32 {more}, {it}, {steps}"));
    asm.i(format!("@{more} bra.uni $L_g"));

    // Warp reduction, then lane 0 writes.
    for a in &acc {
        let (x, y) = (asm.r(), asm.r());
        let other = asm.f();
        for d in [16, 8, 4, 2, 1] {
            asm.i(format!("mov.b32 {x}, {a}"));
            asm.i(format!("shfl.sync.bfly.b32 {y}, {x}, {d}, 31, -1"));
            asm.i(format!("mov.b32 {other}, {y}"));
            asm.i(format!("add.rn.f32 {a}, {a}, {other}"));
        }
    }
    let not_first = asm.p();
    asm.i(format!("setp.ne.u32 {not_first}, {lane}, 0"));
    asm.i(format!("@{not_first} bra $L_done"));
    let col64 = asm.rd();
    asm.i(format!("cvt.u64.u32 {col64}, {col}"));
    let col_bytes = asm.rd();
    asm.i(format!("mul.lo.s64 {col_bytes}, {col64}, 4"));
    let bias = q.bias.map(|(region, offset)| {
        let at = asm.rd();
        asm.i(format!(
            "add.s64 {at}, {}, {col_bytes}",
            base_of(&bases, region)
        ));
        let b = asm.f();
        asm.i(format!("ld.global.f32 {b}, [{at}+{offset}]"));
        b
    });
    let c_base = base_of(&bases, q.c.region).to_string();
    for (r, a) in acc.iter().enumerate() {
        if let Some(b) = &bias {
            asm.i(format!("add.rn.f32 {a}, {a}, {b}"));
        }
        let at = asm.rd();
        asm.i(format!("add.s64 {at}, {c_base}, {col_bytes}"));
        let addr = asm.addr(&at, q.row_offset(&q.c, r as u64));
        asm.i(format!("st.global.f32 {addr}, {a}"));
    }
    asm.label("done");
    let decls = if staged {
        format!("\t.shared .align 16 .b8 smem[{}];\n", rows * padded * 4)
    } else {
        String::new()
    };
    PtxEntry {
        name: name.to_string(),
        text: asm.finish(name, &decls),
        launch: Launch {
            grid: [q.n.div_ceil(WARPS) as u32, 1, 1],
            block: [(32 * WARPS) as u32, 1, 1],
            shared_bytes: 0,
        },
    }
}

/// The many-rows form (see the module doc).
fn tiled(q: &NBitsMatMul, name: &str) -> PtxEntry {
    let rows = q.rows();
    let mut asm = Asm::new();
    let bases = asm.bases();
    let weights = bases[1].clone();
    let groups = q.k.div_ceil(GROUP);
    let group_bytes = GROUP * u64::from(q.bits) / 8;
    let rb = row_bytes(q.k, q.bits);
    let tile_bytes = GROUP * TILE_STRIDE * 4;

    let tid = asm.r();
    let tx = asm.r();
    let ty = asm.r();
    asm.i(format!("mov.u32 {tid}, %tid.x"));
    asm.i(format!("and.b32 {tx}, {tid}, 15"));
    asm.i(format!("shr.u32 {ty}, {tid}, 4"));
    let (cx, cy) = (asm.r(), asm.r());
    asm.i(format!("mov.u32 {cx}, %ctaid.x"));
    asm.i(format!("mov.u32 {cy}, %ctaid.y"));
    let (col0, row0) = (asm.r(), asm.r());
    asm.i(format!("mul.lo.s32 {col0}, {cx}, {TILE}"));
    asm.i(format!("mul.lo.s32 {row0}, {cy}, {TILE}"));
    let smem = asm.rd();
    asm.i(format!("mov.u64 {smem}, smem"));

    // The `b` tile loader: column `col0 + tid / 4`, quarter `tid % 4` of the group.
    let bcol = asm.r();
    let quarter = asm.r();
    asm.i(format!("shr.u32 {bcol}, {tid}, 2"));
    asm.i(format!("and.b32 {quarter}, {tid}, 3"));
    let gcol = asm.r();
    asm.i(format!("add.s32 {gcol}, {col0}, {bcol}"));
    let bcol_ok = asm.p();
    asm.i(format!("setp.lt.u32 {bcol_ok}, {gcol}, {}", q.n));
    // Out-of-range columns read column 0 (always present) and are never written.
    let safe_col = asm.r();
    asm.i(format!("selp.b32 {safe_col}, {gcol}, 0, {bcol_ok}"));
    let quarter_bytes = group_bytes / 4;
    let pb = asm.rd();
    let t = asm.rd();
    asm.i(format!("cvt.u64.u32 {t}, {safe_col}"));
    asm.i(format!("mad.lo.s64 {pb}, {t}, {rb}, {weights}"));
    asm.i(format!("add.s64 {pb}, {pb}, {}", q.b));
    asm.i(format!("cvt.u64.u32 {t}, {quarter}"));
    asm.i(format!("mad.lo.s64 {pb}, {t}, {quarter_bytes}, {pb}"));
    // Shared address of the `b` tile at column `bcol` (row 0).
    let sb = asm.rd();
    let s32 = asm.r();
    asm.i(format!("mul.lo.s32 {s32}, {bcol}, 4"));
    asm.i(format!("cvt.u64.u32 {sb}, {s32}"));
    asm.i(format!("add.s64 {sb}, {sb}, {smem}"));
    asm.i(format!("add.s64 {sb}, {sb}, {tile_bytes}"));

    // The `a` tile loader: k = tid % 32, rows tid / 32 + 8 i.
    let akk = asm.r();
    let arow = asm.r();
    asm.i(format!("and.b32 {akk}, {tid}, 31"));
    asm.i(format!("shr.u32 {arow}, {tid}, 5"));
    let a_base = base_of(&bases, q.a.region).to_string();
    let mut a_ptrs = Vec::new();
    for i in 0..TILE / 8 {
        let r = asm.r();
        asm.i(format!("add.s32 {r}, {row0}, {arow}"));
        asm.i(format!("add.s32 {r}, {r}, {}", 8 * i));
        let ok = asm.p();
        asm.i(format!("setp.lt.u32 {ok}, {r}, {rows}"));
        let safe = asm.r();
        asm.i(format!("selp.b32 {safe}, {r}, 0, {ok}"));
        let off = row_offset(&mut asm, q, &q.a, &safe);
        let p = asm.rd();
        asm.i(format!("add.s64 {p}, {a_base}, {off}"));
        let kk64 = asm.rd();
        asm.i(format!("cvt.u64.u32 {kk64}, {akk}"));
        asm.i(format!("mad.lo.s64 {p}, {kk64}, 4, {p}"));
        a_ptrs.push((p, ok));
    }
    let sa = asm.rd();
    asm.i(format!("mad.lo.s32 {s32}, {akk}, {TILE_STRIDE}, {arow}"));
    asm.i(format!("mul.lo.s32 {s32}, {s32}, 4"));
    asm.i(format!("cvt.u64.u32 {sa}, {s32}"));
    asm.i(format!("add.s64 {sa}, {sa}, {smem}"));

    // Compute addresses: a tile at row ty, b tile at column tx.
    let ca = asm.rd();
    let cb = asm.rd();
    asm.i(format!("mul.lo.s32 {s32}, {ty}, 4"));
    asm.i(format!("cvt.u64.u32 {ca}, {s32}"));
    asm.i(format!("add.s64 {ca}, {ca}, {smem}"));
    asm.i(format!("mul.lo.s32 {s32}, {tx}, 4"));
    asm.i(format!("cvt.u64.u32 {cb}, {s32}"));
    asm.i(format!("add.s64 {cb}, {cb}, {smem}"));

    let acc: Vec<Vec<String>> = (0..4).map(|_| (0..4).map(|_| asm.f()).collect()).collect();
    for row in &acc {
        for a in row {
            asm.i(format!("mov.f32 {a}, 0f00000000"));
        }
    }
    let kbase = asm.r();
    asm.i(format!("mov.u32 {kbase}, 0"));
    asm.label("g");
    // The `b` tile: this thread's values of the group, dequantized.
    let align = if q.b % 16 == 0 { 16 } else { q.b % 16 };
    let words = load_words(
        &mut asm,
        &pb,
        0,
        (quarter_bytes / 4) as usize,
        align.min(quarter_bytes),
        None,
    );
    let fast_params = q.block % GROUP == 0;
    let group_params = fast_params.then(|| {
        let idx = asm.r();
        asm.i(format!("div.u32 {idx}, {kbase}, {}", q.block));
        asm.i(format!(
            "mad.lo.s32 {idx}, {safe_col}, {}, {idx}",
            q.k_blocks()
        ));
        params(&mut asm, q, &weights, &idx)
    });
    // Value positions within the group for quarter `qq`: 4 bits: bytes 4qq..4qq+4, so values
    // 4qq + b and 16 + 4qq + b; 8 bits: bytes 8qq..8qq+8, values 8qq + b.
    let per_quarter: Vec<(u32, usize, u32)> = if q.bits == 4 {
        (0..8u32)
            .map(|v| {
                let (hi, b) = (v / 4, v % 4);
                (16 * hi + b, 0usize, 8 * b + 4 * hi)
            })
            .collect()
    } else {
        (0..8u32)
            .map(|v| (v, (v / 4) as usize, 8 * (v % 4)))
            .collect()
    };
    let kq = asm.r();
    asm.i(format!(
        "mul.lo.s32 {kq}, {quarter}, {}",
        if q.bits == 4 { 4 } else { 8 }
    ));
    for &(pos, word, shift) in &per_quarter {
        let v = extract(&mut asm, &words[word], shift, q.bits, q.signed);
        let klocal = asm.r();
        asm.i(format!("add.s32 {klocal}, {kq}, {pos}"));
        let f = match &group_params {
            Some((s, z)) => dequantize(&mut asm, &v, s, z.as_deref()),
            None => {
                let k = asm.r();
                asm.i(format!("add.s32 {k}, {kbase}, {klocal}"));
                let idx = param_index(&mut asm, q, &safe_col, &k);
                let (s, z) = params(&mut asm, q, &weights, &idx);
                dequantize(&mut asm, &v, &s, z.as_deref())
            }
        };
        let off = asm.r();
        asm.i(format!("mul.lo.s32 {off}, {klocal}, {}", TILE_STRIDE * 4));
        let off64 = asm.rd();
        asm.i(format!("cvt.u64.u32 {off64}, {off}"));
        asm.i(format!("add.s64 {off64}, {off64}, {sb}"));
        asm.i(format!("st.shared.f32 [{off64}], {f}"));
    }
    // The `a` tile (zero past `K` and past the last row).
    let kok = asm.p();
    let kglob = asm.r();
    asm.i(format!("add.s32 {kglob}, {kbase}, {akk}"));
    asm.i(format!("setp.lt.u32 {kok}, {kglob}, {}", q.k));
    for (i, (p, ok)) in a_ptrs.iter().enumerate() {
        let x = asm.f();
        let pr = asm.p();
        asm.i(format!("and.pred {pr}, {ok}, {kok}"));
        asm.i(format!("mov.f32 {x}, 0f00000000"));
        asm.i(format!("@{pr} ld.global.f32 {x}, [{p}]"));
        asm.i(format!("st.shared.f32 [{sa}+{}], {x}", 8 * i as u64 * 4));
    }
    asm.i("bar.sync 0");
    for kk in 0..GROUP {
        let xa: Vec<String> = (0..4).map(|_| asm.f()).collect();
        let xb: Vec<String> = (0..4).map(|_| asm.f()).collect();
        for (i, x) in xa.iter().enumerate() {
            let off = (kk * TILE_STRIDE + 16 * i as u64) * 4;
            asm.i(format!("ld.shared.f32 {x}, [{ca}+{off}]"));
        }
        for (j, x) in xb.iter().enumerate() {
            let off = tile_bytes + (kk * TILE_STRIDE + 16 * j as u64) * 4;
            asm.i(format!("ld.shared.f32 {x}, [{cb}+{off}]"));
        }
        for (i, a) in xa.iter().enumerate() {
            for (j, b) in xb.iter().enumerate() {
                let d = &acc[i][j];
                asm.i(format!("fma.rn.f32 {d}, {a}, {b}, {d}"));
            }
        }
    }
    asm.i("bar.sync 0");
    asm.i(format!("add.s64 {pb}, {pb}, {group_bytes}"));
    for (p, _) in &a_ptrs {
        asm.i(format!("add.s64 {p}, {p}, {}", 4 * GROUP));
    }
    asm.i(format!("add.u32 {kbase}, {kbase}, {GROUP}"));
    let more = asm.p();
    asm.i(format!("setp.lt.u32 {more}, {kbase}, {}", groups * GROUP));
    asm.i(format!("@{more} bra.uni $L_g"));

    // Epilogue: rows row0 + ty + 16 i, columns col0 + tx + 16 j.
    let c_base = base_of(&bases, q.c.region).to_string();
    let cols: Vec<(String, String, Option<String>)> = (0..4)
        .map(|j| {
            let c = asm.r();
            asm.i(format!("add.s32 {c}, {col0}, {tx}"));
            asm.i(format!("add.s32 {c}, {c}, {}", 16 * j));
            let ok = asm.p();
            asm.i(format!("setp.lt.u32 {ok}, {c}, {}", q.n));
            let c64 = asm.rd();
            asm.i(format!("cvt.u64.u32 {c64}, {c}"));
            asm.i(format!("mul.lo.s64 {c64}, {c64}, 4"));
            let bias = q.bias.map(|(region, offset)| {
                let b = asm.f();
                let at = asm.rd();
                asm.i(format!("add.s64 {at}, {}, {c64}", base_of(&bases, region)));
                asm.i(format!("mov.f32 {b}, 0f00000000"));
                asm.i(format!("@{ok} ld.global.f32 {b}, [{at}+{offset}]"));
                b
            });
            (ok, c64, bias)
        })
        .collect();
    for (i, row) in acc.iter().enumerate() {
        let r = asm.r();
        asm.i(format!("add.s32 {r}, {row0}, {ty}"));
        asm.i(format!("add.s32 {r}, {r}, {}", 16 * i));
        let rok = asm.p();
        asm.i(format!("setp.lt.u32 {rok}, {r}, {rows}"));
        let safe = asm.r();
        asm.i(format!("selp.b32 {safe}, {r}, 0, {rok}"));
        let off = row_offset(&mut asm, q, &q.c, &safe);
        let p = asm.rd();
        asm.i(format!("add.s64 {p}, {c_base}, {off}"));
        for (a, (cok, c64, bias)) in row.iter().zip(&cols) {
            let ok = asm.p();
            asm.i(format!("and.pred {ok}, {rok}, {cok}"));
            if let Some(b) = bias {
                asm.i(format!("add.rn.f32 {a}, {a}, {b}"));
            }
            let at = asm.rd();
            asm.i(format!("add.s64 {at}, {p}, {c64}"));
            asm.i(format!("@{ok} st.global.f32 [{at}], {a}"));
        }
    }
    let decls = format!("\t.shared .align 16 .b8 smem[{}];\n", 2 * tile_bytes);
    PtxEntry {
        name: name.to_string(),
        text: asm.finish(name, &decls),
        launch: Launch {
            grid: [q.n.div_ceil(TILE) as u32, rows.div_ceil(TILE) as u32, 1],
            block: [256, 1, 1],
            shared_bytes: 0,
        },
    }
}
