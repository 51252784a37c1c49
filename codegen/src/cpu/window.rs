//! Window maxima and minima in native AVX-512 or AVX2 code: a loop kernel whose one `Map` stage
//! stores, at each point, the `max` (or `min`) of loads from several views, some of them
//! guarded or strided along the row (a MaxPool's taps: each a view of the input shifted by
//! the tap, read at the pool's stride, padding where its guards fail). The Cranelift loop
//! backend vectorizes neither guards that depend on the row's axis nor strided loads, so
//! such a kernel ran one element at a time (the zoo resnet's 3x3/2 max pool: 0.074 ms, 9%
//! of the model, against onnxruntime's 0.009).
//!
//! - **What it computes.** Per row of the loop (every outer axis but the last), per tap, the
//!   range of the row's points where all the tap's guards hold is worked out once (each guard
//!   is linear in the point, so its set is an interval); then 16 points at a time, each tap's
//!   lanes are loaded where they lie in its range and take the view's pad elsewhere (a masked
//!   load at stride 1, two masked loads whose even elements are gathered at stride 2, a
//!   masked `vgatherdps` at other strides, one scalar at stride 0), and folded with IEEE 754
//!   maximum (`vrangeps`: NaN if either is NaN, `-0 < +0`), as Cranelift's `fmax` does, so
//!   the results equal the scalar loop's (a NaN's payload aside). A window whose taps are a
//!   grid ([`Grid`]: a max pool's kernel rows and columns) runs separably instead, in AVX2
//!   code also where AVX-512 is (ResNet-50's 3x3/2 max pool over 64x112x112, one thread,
//!   Xeon with AVX-512: 0.60 ms by taps at 16 lanes, 0.36 separably): per row, the valid
//!   kernel rows folded element by element into a buffer, then the columns from the buffer;
//!   the folds are associative and commutative, so the results are the same.
//! - **Memory.** Every element read is one the loop reads (lanes outside a tap's range or the
//!   row are masked off and never touched), or, for a grid, an element between two that one
//!   kernel row reads; every element written is a point of the row. No scratch: a grid's row
//!   buffer is on the thread's stack (16 KiB).
//! - **When.** [`recognize`] takes a kernel with no inner axes, one `Map` stage with one
//!   plain store of an f32 value along a contiguous row, whose value is a tree of one of
//!   `max`/`min` over f32 loads, at least one of them guarded along the row or strided
//!   (else Cranelift's vector loop runs it as well), the stored view apart from every loaded
//!   one. It runs on AVX-512 (F, DQ, BMI2: 16 lanes, `vrangeps`) or on AVX2 with FMA (8
//!   lanes, `vmaxps`/`vminps` both ways round: an AMD EPYC without AVX-512 ran max pools as
//!   scalar loops, the zoo resnet's 0.097 ms against onnxruntime's 0.010); elsewhere the
//!   kernel compiles as before.

use super::pool::WorkerPool;
use super::regions::RegionPtrs;
use crate::kernel::{BinaryOp, Guard, InstKind, LoopKernel, Region, Scalar, Stage, View};

/// Loop axes of the largest window kernel taken (a row's point lives on the stack).
const MAX_AXES: usize = 16;

/// Distinct linear forms of a window kernel taken (their values live on the stack).
const MAX_FORMS: usize = 32;

/// Elements of work (points times taps) below which a window kernel runs on one thread.
const PARALLEL_WORK: u64 = 64 * 1024;

/// One loaded view of a window kernel.
#[derive(Clone, Debug)]
pub(crate) struct Tap {
    region: Region,
    /// Element offset of point 0 from the region's base.
    offset: i64,
    /// The element offset of a row's first point from point 0: the row's value of
    /// `Window::forms[row_form]` (the view's strides along the other axes).
    row_form: usize,
    /// Elements between consecutive points of a row.
    step: i64,
    /// The points `lo..hi` of every row where the guards that are the same on every row hold
    /// (those whose only coefficient is the row's: a max pool's guard along the row).
    lo: i64,
    hi: i64,
    /// The guards that hold on a whole row or none of it (no coefficient along the row): a
    /// form of `Window::forms`, its offset and limit.
    per_row: Vec<(usize, i64, i64)>,
    /// The rest, worked out per row.
    general: Vec<Guard>,
    /// The value a lane takes where a guard fails.
    pad: f32,
}

/// A recognized window kernel (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct Window {
    /// `max` (else `min`).
    max: bool,
    outer: Vec<u64>,
    out_region: Region,
    out_offset: i64,
    /// `forms[out_form]`: the stored view's strides along the axes other than the row's.
    out_form: usize,
    taps: Vec<Tap>,
    /// The distinct linear forms of a row's coordinates (coefficients of every outer axis but
    /// the last) that the views' offsets and the per-row guards are: worked out once per row
    /// (a max pool's taps share their strides and their row guard's coefficients).
    forms: Vec<Vec<i64>>,
    /// Whether the innermost axis of the rows (the one before the row's own) appears in no
    /// guard: rows that differ only along it read their taps over the same ranges, so those
    /// are worked out once per run of them (a max pool's channels, moved innermost).
    shared: bool,
    /// The taps as a grid of kernel rows and columns, when they are one ([`Grid::of`]): run
    /// separably on AVX2.
    grid: Option<Grid>,
}

/// Kernel rows and columns of a [`Grid`], at most.
const GRID_MAX_ROWS: usize = 16;

/// Values of a row's buffer ([`Grid::len`]) at most: 16 KiB on each thread's stack.
const GRID_MAX_VALUES: usize = 4096;

/// A window whose taps are a grid: kernel rows (the taps that share their guards across
/// rows: a max pool's taps with the same vertical shift) whose taps read, at each point `j`,
/// the row's element `j * step + cols[q]` from its own start, with the same columns and the
/// same ranges along the row in every kernel row. Its maximum is then separable (IEEE
/// maximum and minimum are associative and commutative): per row of the output, the fold
/// of the valid kernel rows, element by element, into a buffer on the stack (the pad
/// outside the elements some tap reads), then the fold of the columns from that buffer,
/// unmasked. A 3x3/2 max pool loads each input element of a row once per kernel row
/// instead of once per tap, and no lane is masked (the zoo resnet's pool over 32x32: 0.034 ->
/// 0.016 ms on an AMD EPYC, onnxruntime's 0.006).
#[derive(Clone, Debug)]
pub(crate) struct Grid {
    region: Region,
    row_form: usize,
    /// Elements between consecutive points of a row (1 or 2).
    step: i64,
    pad: f32,
    /// Per kernel row: the element offset of its first column at point 0 (before the row's
    /// form), and its guards that hold on whole rows (`Tap::per_row`).
    rows: Vec<(i64, Vec<(usize, i64, i64)>)>,
    /// Per kernel column: its element offset from the kernel row's first column (ascending
    /// from 0).
    cols: Vec<i64>,
    /// The elements `kmin..=kmax` of a kernel row (from its first column at point 0) that
    /// some tap reads at some point: the buffer's elements outside them hold the pad.
    kmin: i64,
    kmax: i64,
    /// The buffer's values: every element a column's vector reads, whole vectors.
    len: usize,
}

impl Window {
    /// Whether the window runs separably on AVX2 ([`Grid`]).
    pub(crate) fn is_grid(&self) -> bool {
        self.grid.is_some()
    }
}

impl Grid {
    /// `w`'s taps as a grid, if they are one: one region, row form, step (1 or 2) and pad, no
    /// guard that moves along the row and across rows at once; grouped by their per-row
    /// guards into kernel rows of the same columns (offsets from the row's first) and the same
    /// ranges; a row's buffer within [`GRID_MAX_VALUES`].
    fn of(w: &Window) -> Option<Grid> {
        let first = w.taps.first()?;
        if w.taps.len() > MAX_ROW_TAPS
            || !(1..=2).contains(&first.step)
            || w.taps.iter().any(|t| {
                t.region != first.region
                    || t.row_form != first.row_form
                    || t.step != first.step
                    || t.pad.to_bits() != first.pad.to_bits()
                    || !t.general.is_empty()
            })
        {
            return None;
        }
        // Kernel rows: the taps of equal per-row guards, sorted by offset, in runs of as many
        // taps as the smallest such class (a pool's lowering guards only the kernel rows that
        // can read padding, so the unguarded rows share a class: a 3x3/2 pool over an even
        // size has one guarded row and two unguarded ones).
        let mut classes: Vec<Vec<&Tap>> = vec![];
        for tap in &w.taps {
            match classes.iter_mut().find(|g| g[0].per_row == tap.per_row) {
                Some(g) => g.push(tap),
                None => classes.push(vec![tap]),
            }
        }
        let width = classes.iter().map(Vec::len).min()?;
        let mut groups: Vec<Vec<&Tap>> = vec![];
        for mut class in classes {
            if class.len() % width != 0 {
                return None;
            }
            class.sort_by_key(|t| t.offset);
            groups.extend(class.chunks(width).map(<[&Tap]>::to_vec));
        }
        if groups.len() > GRID_MAX_ROWS {
            return None;
        }
        let row0 = &groups[0];
        let cols: Vec<i64> = row0.iter().map(|t| t.offset - row0[0].offset).collect();
        let same = |g: &Vec<&Tap>| {
            g.len() == row0.len()
                && g.iter().zip(row0.iter()).zip(&cols).all(|((t, t0), &c)| {
                    t.offset - g[0].offset == c && (t.lo, t.hi) == (t0.lo, t0.hi)
                })
        };
        if cols.len() > GRID_MAX_ROWS || !groups.iter().all(same) {
            return None;
        }
        let step = first.step;
        let n = *w.outer.last()? as i64;
        let (mut kmin, mut kmax) = (i64::MAX, i64::MIN);
        for (t, &c) in row0.iter().zip(&cols) {
            if t.lo < t.hi {
                kmin = kmin.min(t.lo * step + c);
                kmax = kmax.max((t.hi - 1) * step + c);
            }
        }
        // A column's points outside its range must find the pad in the buffer: their
        // elements outside `kmin..=kmax` (so for a pool, whose ranges are where the columns
        // read inside the input row, the same elements for every column).
        let outside = |t: &Tap, c: i64| {
            let below = |j: i64| j * step + c < kmin;
            let above = |j: i64| j * step + c > kmax;
            if t.lo >= t.hi {
                below(n - 1) || above(0)
            } else {
                (t.lo == 0 || below(t.lo - 1)) && (t.hi >= n || above(t.hi))
            }
        };
        if !row0.iter().zip(&cols).all(|(t, &c)| outside(t, c)) {
            return None;
        }
        // Every element the columns' vectors read: whole vectors of 8 points, each of up to
        // 16 elements at step 2.
        let points = n.checked_add(7)? / 8 * 8;
        let len = usize::try_from((points - 1) * step + cols.last()? + 1 + 8).ok()?;
        (kmin <= kmax && len <= GRID_MAX_VALUES).then(|| Grid {
            region: first.region,
            row_form: first.row_form,
            step,
            pad: first.pad,
            rows: groups
                .iter()
                .map(|g| (g[0].offset, g[0].per_row.clone()))
                .collect(),
            cols,
            kmin,
            kmax,
            len,
        })
    }
}

/// The index of `form` in `forms`, added if new.
fn form_index(forms: &mut Vec<Vec<i64>>, form: &[i64]) -> usize {
    forms.iter().position(|f| f == form).unwrap_or_else(|| {
        forms.push(form.to_vec());
        forms.len() - 1
    })
}

/// Whether this CPU runs window kernels natively.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::env::var_os("MEMC_NO_WINDOW").is_none() && (avx512() || avx2())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the AVX-512 form runs here (F, DQ and BMI2).
fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("bmi2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the AVX2 form runs here (AVX2 and FMA).
#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// The lowest and highest element offsets (from the region's base) `view` can reach over
/// `outer`: each axis's points narrowed by the guards on that axis alone (a max pool's taps
/// reach no further than the input), the other guards ignored (a superset of what it reaches).
fn reach(view: &View, outer: &[u64]) -> (i64, i64) {
    let base = view.byte_offset / 4;
    let (mut lo, mut hi) = (base, base);
    for (axis, (&stride, &extent)) in view.strides.iter().zip(outer).enumerate() {
        let (mut first, mut end) = (0, extent as i64);
        for g in &view.guards {
            let alone = g
                .coeffs
                .iter()
                .enumerate()
                .all(|(a, &c)| a == axis || c == 0);
            if alone {
                let (l, h) = guard_range(g.coeffs[axis], g.offset, g.limit, extent as i64);
                first = first.max(l);
                end = end.min(h);
            }
        }
        if end <= first {
            // No point of this axis passes: the view reads nothing.
            return (i64::MAX, i64::MIN);
        }
        let (a, b) = (stride.saturating_mul(first), stride.saturating_mul(end - 1));
        lo = lo.saturating_add(a.min(b));
        hi = hi.saturating_add(a.max(b));
    }
    (lo, hi)
}

/// The window kernel `k` is, if it is one (see the module doc).
pub(crate) fn recognize(k: &LoopKernel) -> Option<Window> {
    let [Stage::Map { insts, stores }] = k.stages.as_slice() else {
        return None;
    };
    let [store] = stores.as_slice() else {
        return None;
    };
    let n_axes = k.outer.len();
    if !k.inner.is_empty()
        || n_axes == 0
        || n_axes > MAX_AXES
        || store.is_scatter()
        || store.accumulate
    {
        return None;
    }
    let out = k.views.get(store.view as usize)?;
    if out.elem != Scalar::F32
        || !out.guards.is_empty()
        || out.strides.len() != n_axes
        || out.strides[n_axes - 1] != 1
        || out.byte_offset % 4 != 0
    {
        return None;
    }
    // The loads the stored value folds, through one of max/min.
    let mut op = None;
    let mut loads = vec![];
    let mut stack = vec![store.value];
    while let Some(id) = stack.pop() {
        let inst = insts.get(id as usize)?;
        if inst.ty != Scalar::F32 {
            return None;
        }
        match &inst.kind {
            InstKind::Load { view } => loads.push(*view),
            InstKind::Binary {
                op: o @ (BinaryOp::Max | BinaryOp::Min),
                lhs,
                rhs,
            } => {
                if *op.get_or_insert(*o) != *o {
                    return None;
                }
                stack.push(*lhs);
                stack.push(*rhs);
            }
            _ => return None,
        }
    }
    let op = op?;
    loads.sort_unstable();
    loads.dedup();
    let (out_lo, out_hi) = reach(out, &k.outer);
    let mut forms = vec![];
    let out_form = form_index(&mut forms, &out.strides[..n_axes - 1]);
    let mut taps = Vec::with_capacity(loads.len());
    let mut irregular = false;
    for &index in &loads {
        let view = k.views.get(index as usize)?;
        let last = *view.strides.get(n_axes - 1)?;
        if view.elem != Scalar::F32
            || view.strides.len() != n_axes
            || view.byte_offset % 4 != 0
            || !(0..=i64::from(i32::MAX) / 16).contains(&last)
            || view.guards.iter().any(|g| g.coeffs.len() != n_axes)
        {
            return None;
        }
        if view.region == out.region {
            // Guards of the loaded view only: the stored one has none (checked above).
            let (lo, hi) = reach(view, &k.outer);
            if lo <= out_hi && out_lo <= hi {
                return None;
            }
        }
        irregular |= last != 1 || view.guards.iter().any(|g| g.coeffs[n_axes - 1] != 0);
        let n = k.outer[n_axes - 1] as i64;
        let (mut lo, mut hi) = (0, n);
        let (mut per_row, mut general) = (vec![], vec![]);
        for g in &view.guards {
            let along = g.coeffs[n_axes - 1];
            if g.coeffs[..n_axes - 1].iter().all(|&c| c == 0) {
                let (l, h) = guard_range(along, g.offset, g.limit, n);
                lo = lo.max(l);
                hi = hi.min(h);
            } else if along == 0 {
                per_row.push((
                    form_index(&mut forms, &g.coeffs[..n_axes - 1]),
                    g.offset,
                    g.limit,
                ));
            } else {
                general.push(g.clone());
            }
        }
        taps.push(Tap {
            region: view.region,
            offset: view.byte_offset / 4,
            row_form: form_index(&mut forms, &view.strides[..n_axes - 1]),
            step: last,
            lo,
            hi: hi.max(lo),
            per_row,
            general,
            pad: f64::from_bits(view.pad) as f32,
        });
    }
    if !irregular || forms.len() > MAX_FORMS {
        return None;
    }
    let mut w = Window {
        max: op == BinaryOp::Max,
        outer: k.outer.clone(),
        out_region: out.region,
        out_offset: out.byte_offset / 4,
        out_form,
        taps,
        forms,
        shared: false,
        grid: None,
    };
    w.grid = Grid::of(&w);
    w.share_an_axis();
    Some(w)
}

impl Window {
    /// Moves an axis of the rows that no guard depends on (of more than one row) to be their
    /// innermost, and sets [`Window::shared`]: the rows are independent (the stored view is
    /// apart from every loaded one, and each row stores its own points), so their order is
    /// free. A max pool's rows are (image, channel, output row): its guards depend on the
    /// output row only, so the channel goes innermost.
    fn share_an_axis(&mut self) {
        let n_axes = self.outer.len();
        if n_axes < 2 || self.taps.len() > MAX_ROW_TAPS {
            return;
        }
        // Elements between rows one step apart along `a`, in the stored view and the taps.
        let apart = |a: usize| {
            let form = |f: usize| self.forms[f][a].unsigned_abs();
            let taps = self
                .taps
                .iter()
                .map(|t| form(t.row_form))
                .max()
                .unwrap_or(0);
            taps.max(form(self.out_form))
        };
        let unguarded = |a: usize| {
            self.outer[a] > 1
                && apart(a) <= SHARED_MAX_APART
                && self.taps.iter().all(|t| {
                    t.per_row.iter().all(|&(form, ..)| self.forms[form][a] == 0)
                        && t.general.iter().all(|g| g.coeffs[a] == 0)
                })
        };
        let Some(axis) = (0..n_axes - 1).rev().find(|&a| unguarded(a)) else {
            return;
        };
        let inner = n_axes - 2;
        let move_axis = |v: &mut Vec<i64>| {
            let c = v.remove(axis);
            v.insert(inner, c);
        };
        let c = self.outer.remove(axis);
        self.outer.insert(inner, c);
        self.forms.iter_mut().for_each(move_axis);
        for tap in &mut self.taps {
            for g in &mut tap.general {
                move_axis(&mut g.coeffs);
            }
        }
        self.shared = true;
    }
}

/// The points `j` of `0..n` where `0 <= c j + r < limit`, as a range (empty when none).
fn guard_range(c: i64, r: i64, limit: i64, n: i64) -> (i64, i64) {
    let (lo, hi) = match c.cmp(&0) {
        std::cmp::Ordering::Equal => {
            if (0..limit).contains(&r) {
                (0, n)
            } else {
                (0, 0)
            }
        }
        // c j >= -r and c j <= limit - 1 - r.
        std::cmp::Ordering::Greater => (-r.div_euclid(c), (limit - 1 - r).div_euclid(c) + 1),
        // d j <= r and d j >= r - limit + 1, with d = -c.
        std::cmp::Ordering::Less => {
            let d = -c;
            (-(limit - 1 - r).div_euclid(d), r.div_euclid(d) + 1)
        }
    };
    (lo.max(0), hi.min(n))
}

/// Runs `w` over its whole index space, rows split over `pool`.
///
/// # Safety
/// As [`super::CpuProgram::run_kernel_in`]: the kernel `w` was recognized from passed
/// validation, so every point it loads where its guards hold, and every point it stores,
/// lies inside its region; and [`available`] holds.
pub(crate) unsafe fn run_window(w: &Window, regions: RegionPtrs, pool: &WorkerPool) {
    let n_axes = w.outer.len();
    let n = w.outer[n_axes - 1];
    let rows: u64 = w.outer[..n_axes - 1].iter().product();
    if n == 0 || rows == 0 {
        return;
    }
    let work = rows.saturating_mul(n).saturating_mul(w.taps.len() as u64);
    // The instruction set, asked once per run (the AVX2 form where AVX-512 is not).
    let wide = avx512();
    #[cfg(target_arch = "x86_64")]
    if let Some(grid) = w.grid.as_ref() {
        let run_rows = |begin: u64, end: u64| {
            if begin >= end {
                return;
            }
            let regions = regions.get();
            let mut buffer = std::mem::MaybeUninit::<[f32; GRID_MAX_VALUES]>::uninit();
            let buffer: *mut f32 = buffer.as_mut_ptr().cast();
            let mut at = RowAt::new(w, begin);
            for row in begin..end {
                if row > begin {
                    at.advance(w);
                }
                // SAFETY: the caller's contract; `grid_row` reads only elements some tap
                // reads where its guards hold, or elements between two of them in one row.
                unsafe { grid_row(w, grid, regions, &at, buffer) };
            }
        };
        pool.for_row_runs(rows, work >= PARALLEL_WORK, &run_rows);
        return;
    }
    let run_rows = |begin: u64, end: u64| {
        if begin >= end {
            return;
        }
        let regions = regions.get();
        let mut table = [RowTap::EMPTY; MAX_ROW_TAPS];
        let mut at = RowAt::new(w, begin);
        for row in begin..end {
            // Whether the taps' ranges are the last row's: only the shared axis moved.
            let same_ranges = row > begin && at.advance(w) + 2 == n_axes && w.shared;
            // SAFETY: the caller's contract.
            unsafe { row_of(w, regions, &at, &mut table, same_ranges, wide) };
        }
    };
    pool.for_row_runs(rows, work >= PARALLEL_WORK, &run_rows);
}

/// Elements between consecutive rows along an axis moved innermost ([`Window::shared`]), at
/// most. Walking a max pool's channels innermost leaves each input row's lines in cache until
/// the next output row comes back to them only when the planes are small: the zoo resnet's
/// 3x3/2 pool over 32x32 planes (1024 elements) 0.030 -> 0.023 ms, ResNet-18's over 112x112
/// (12544) 0.71 -> 0.76-0.78.
const SHARED_MAX_APART: u64 = 4096;

/// Most taps a row's table holds on the stack; a window with more runs its taps in groups.
const MAX_ROW_TAPS: usize = 64;

/// A row's coordinates (every outer axis but the last) and the values of the window's forms
/// there, stepped from one row to the next (working them out afresh for each row cost as
/// much as the row's maxima).
struct RowAt {
    point: [i64; MAX_AXES],
    values: [i64; MAX_FORMS],
}

impl RowAt {
    /// Row `row`, row-major.
    fn new(w: &Window, row: u64) -> RowAt {
        let n_axes = w.outer.len();
        let mut point = [0i64; MAX_AXES];
        let mut rest = row;
        for axis in (0..n_axes - 1).rev() {
            let extent = w.outer[axis];
            point[axis] = (rest % extent) as i64;
            rest /= extent;
        }
        let mut values = [0i64; MAX_FORMS];
        for (value, form) in values.iter_mut().zip(&w.forms) {
            *value = form.iter().zip(&point).map(|(c, p)| c * p).sum();
        }
        RowAt { point, values }
    }

    /// The next row; returns the outermost axis whose coordinate changed.
    fn advance(&mut self, w: &Window) -> usize {
        let n_forms = w.forms.len();
        let mut axis = w.outer.len() - 1;
        while axis > 0 {
            axis -= 1;
            self.point[axis] += 1;
            for (value, form) in self.values[..n_forms].iter_mut().zip(&w.forms) {
                *value += form[axis];
            }
            if self.point[axis] < w.outer[axis] as i64 || axis == 0 {
                return axis;
            }
            for (value, form) in self.values[..n_forms].iter_mut().zip(&w.forms) {
                *value -= form[axis] * self.point[axis];
            }
            self.point[axis] = 0;
        }
        0
    }

    /// `coeffs` (one per outer axis, the row's last) at this row, the row's own left out.
    fn dot(&self, coeffs: &[i64]) -> i64 {
        coeffs[..coeffs.len() - 1]
            .iter()
            .zip(&self.point)
            .map(|(c, p)| c * p)
            .sum()
    }
}

/// One row (`at`) of `w`, its taps worked out in `table` (their ranges kept from the last
/// row when `same_ranges`: [`Window::shared`], and only the shared axis moved), by the
/// AVX-512 form when `wide`, else the AVX2 one.
///
/// # Safety
/// As [`run_window`].
unsafe fn row_of(
    w: &Window,
    regions: RegionPtrs,
    at: &RowAt,
    table: &mut [RowTap; MAX_ROW_TAPS],
    same_ranges: bool,
    wide: bool,
) {
    let n_axes = w.outer.len();
    let n = w.outer[n_axes - 1] as i64;
    let values = &at.values;
    let out = regions
        .base(w.out_region)
        .cast::<f32>()
        .wrapping_offset((w.out_offset + values[w.out_form]) as isize);
    let mut first = true;
    for group in w.taps.chunks(MAX_ROW_TAPS) {
        for (tap, entry) in group.iter().zip(table.iter_mut()) {
            let start = tap.offset + values[tap.row_form];
            entry.ptr = regions
                .base(tap.region)
                .cast::<f32>()
                .wrapping_offset(start as isize);
            if same_ranges {
                // One group (`share_an_axis` takes at most `MAX_ROW_TAPS` taps): the ranges
                // are the last row's; only the row's elements moved.
                continue;
            }
            let (mut lo, mut hi) = (tap.lo, tap.hi);
            if !tap
                .per_row
                .iter()
                .all(|&(form, offset, limit)| (0..limit).contains(&(offset + values[form])))
            {
                hi = lo;
            }
            for g in &tap.general {
                let r = g.offset + at.dot(&g.coeffs);
                let (l, h) = guard_range(g.coeffs[n_axes - 1], r, g.limit, n);
                lo = lo.max(l);
                hi = hi.min(h);
            }
            entry.step = tap.step;
            entry.lo = lo;
            entry.hi = hi.max(lo);
            entry.pad = tap.pad;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `available` (the caller's contract); every tap reads only points of its
        // range, which its guards allow.
        unsafe {
            if wide {
                x86::row(&table[..group.len()], out, n, w.max, !first)
            } else {
                x86::row_avx2(&table[..group.len()], out, n, w.max, !first)
            }
        };
        first = false;
    }
}

/// One row (`at`) of `w` through its grid: the valid kernel rows folded into `buffer`
/// ([`Grid::len`] values), then the columns folded from it into the row's output.
///
/// # Safety
/// As [`run_window`], on AVX2 with FMA; `buffer` holds [`GRID_MAX_VALUES`] values.
#[cfg(target_arch = "x86_64")]
unsafe fn grid_row(w: &Window, g: &Grid, regions: RegionPtrs, at: &RowAt, buffer: *mut f32) {
    let values = &at.values;
    let n = *w.outer.last().unwrap_or(&0) as i64;
    let out = regions
        .base(w.out_region)
        .cast::<f32>()
        .wrapping_offset((w.out_offset + values[w.out_form]) as isize);
    let base = regions.base(g.region).cast::<f32>().cast_const();
    let mut rows = [std::ptr::null::<f32>(); GRID_MAX_ROWS];
    let mut valid = 0;
    for (offset, guards) in &g.rows {
        if guards
            .iter()
            .all(|&(form, o, limit)| (0..limit).contains(&(o + values[form])))
        {
            rows[valid] = base.wrapping_offset((offset + values[g.row_form]) as isize);
            valid += 1;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { x86::grid_avx2(g, &rows[..valid], buffer, out, n, w.max) }
}

/// A tap over one row: its element of point 0, its stride along the row, the points
/// `lo..hi` where it reads the input, and the pad elsewhere.
#[derive(Copy, Clone)]
struct RowTap {
    ptr: *const f32,
    step: i64,
    lo: i64,
    hi: i64,
    pad: f32,
}

impl RowTap {
    const EMPTY: RowTap = RowTap {
        ptr: std::ptr::null(),
        step: 0,
        lo: 0,
        hi: 0,
        pad: 0.0,
    };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::RowTap;
    use std::arch::x86_64::*;

    /// `vrangeps` selecting the maximum (imm bits 1:0 = 01) or minimum (00), with the sign
    /// of the comparison's result (bits 3:2 = 01; 00 would take the first operand's sign):
    /// IEEE 754 maximum/minimum with `-0 < +0` (NaNs are handled apart: [`row`]).
    const RANGE_MAX: i32 = 0b0101;
    const RANGE_MIN: i32 = 0b0100;

    /// `value(tap)` of every tap folded with `fold`, from `first`: in four accumulators (taps
    /// in turn), so the folds are four independent chains rather than one as long as the
    /// window (IEEE maximum and minimum are associative and commutative, so the order changes
    /// nothing), then folded together. (Named, not an array: an array indexed by the tap's
    /// number would live in memory.) Inlined into each instruction set's row, whose target
    /// features its closures carry.
    #[inline(always)]
    fn fold_taps<V: Copy>(
        taps: &[RowTap],
        first: V,
        identity: V,
        fold: impl Fn(V, V) -> V,
        mut value: impl FnMut(&RowTap) -> V,
    ) -> V {
        let (mut a0, mut a1, mut a2, mut a3) = (first, identity, identity, identity);
        let mut quads = taps.chunks_exact(4);
        for quad in &mut quads {
            a0 = fold(a0, value(&quad[0]));
            a1 = fold(a1, value(&quad[1]));
            a2 = fold(a2, value(&quad[2]));
            a3 = fold(a3, value(&quad[3]));
        }
        for tap in quads.remainder() {
            a0 = fold(a0, value(tap));
        }
        fold(fold(a0, a1), fold(a2, a3))
    }

    /// The lanes `0..16` of points `j0 + lane` inside `lo..hi`.
    #[inline(always)]
    fn lanes(j0: i64, lo: i64, hi: i64) -> u32 {
        let from = (lo - j0).clamp(0, 16);
        let to = (hi - j0).clamp(0, 16);
        if to <= from {
            0
        } else {
            (((1u64 << to) - 1) & !((1u64 << from) - 1)) as u32
        }
    }

    /// The tap's 16 lanes from point `j0`, every one inside its range.
    #[inline(always)]
    unsafe fn load_all(tap: &RowTap, j0: i64) -> __m512 {
        let at = tap.ptr.wrapping_offset((j0 * tap.step) as isize);
        match tap.step {
            0 => _mm512_set1_ps(*at),
            1 => _mm512_loadu_ps(at),
            2 => {
                // The second load's last element (`at + 31`) is one past the last lane's.
                let lo = _mm512_loadu_ps(at);
                let hi = _mm512_maskz_loadu_ps(0x7fff, at.wrapping_add(16));
                let even =
                    _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
                _mm512_permutex2var_ps(lo, even, hi)
            }
            _ => load(tap, j0, 0xffff),
        }
    }

    /// The tap's 16 lanes from point `j0`: the element where `mask` allows, the pad elsewhere.
    #[inline(always)]
    unsafe fn load(tap: &RowTap, j0: i64, mask: u32) -> __m512 {
        let pad = _mm512_set1_ps(tap.pad);
        if mask == 0 {
            return pad;
        }
        let at = tap.ptr.wrapping_offset((j0 * tap.step) as isize);
        match tap.step {
            0 => _mm512_mask_blend_ps(mask as __mmask16, pad, _mm512_set1_ps(*at)),
            1 => _mm512_mask_loadu_ps(pad, mask as __mmask16, at),
            2 => {
                let bits = _pdep_u32(mask, 0x5555_5555);
                let lo = _mm512_maskz_loadu_ps(bits as __mmask16, at);
                let hi = _mm512_maskz_loadu_ps((bits >> 16) as __mmask16, at.wrapping_add(16));
                let even =
                    _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
                _mm512_mask_blend_ps(mask as __mmask16, pad, _mm512_permutex2var_ps(lo, even, hi))
            }
            step => {
                let s = step as i32;
                let index = _mm512_mullo_epi32(
                    _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                    _mm512_set1_epi32(s),
                );
                _mm512_mask_i32gather_ps::<4>(pad, mask as __mmask16, index, at)
            }
        }
    }

    /// Folds `taps` over the row's `n` points into `out` (into what `out` holds when
    /// `accumulate`: a later group of taps).
    #[target_feature(enable = "avx512f,avx512dq,bmi2")]
    pub(super) unsafe fn row(taps: &[RowTap], out: *mut f32, n: i64, max: bool, accumulate: bool) {
        let fold = |a: __m512, b: __m512| {
            if max {
                _mm512_range_ps::<RANGE_MAX>(a, b)
            } else {
                _mm512_range_ps::<RANGE_MIN>(a, b)
            }
        };
        let identity = _mm512_set1_ps(if max {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        });
        let mut j0 = 0;
        while j0 < n {
            let live = lanes(j0, 0, n) as __mmask16;
            let mut a0 = identity;
            // The lanes that met a NaN: `vrangeps` returns its first operand when only the
            // second is a quiet NaN, so NaNs are tracked apart and put back at the end.
            let mut nan: __mmask16 = 0;
            if accumulate {
                a0 = _mm512_maskz_loadu_ps(live, out.wrapping_offset(j0 as isize));
                nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a0, a0);
            }
            let value = |tap: &RowTap| {
                let v = if tap.lo <= j0 && j0 + 16 <= tap.hi {
                    load_all(tap, j0)
                } else {
                    load(tap, j0, lanes(j0, tap.lo, tap.hi) & u32::from(live))
                };
                nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
                v
            };
            let r = fold_taps(taps, a0, identity, fold, value);
            let r = _mm512_mask_mov_ps(r, nan, _mm512_set1_ps(f32::NAN));
            _mm512_mask_storeu_ps(out.wrapping_offset(j0 as isize), live, r);
            j0 += 16;
        }
    }

    /// Maximum (`MAX`) or minimum of two vectors without NaNs, `-0 < +0`: the `and` or `or`
    /// of both operand orders of `vmaxps`/`vminps`, which differ only for zeros.
    #[inline(always)]
    unsafe fn signed8<const MAX: bool>(a: __m256, b: __m256) -> __m256 {
        if MAX {
            _mm256_and_ps(_mm256_max_ps(a, b), _mm256_max_ps(b, a))
        } else {
            _mm256_or_ps(_mm256_min_ps(a, b), _mm256_min_ps(b, a))
        }
    }

    /// IEEE maximum (`MAX`) or minimum of two vectors: [`signed8`], and NaN (all ones) where
    /// either is NaN.
    #[inline(always)]
    unsafe fn fold8<const MAX: bool>(a: __m256, b: __m256) -> __m256 {
        let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(a, b);
        _mm256_or_ps(signed8::<MAX>(a, b), nan)
    }

    /// [`fold8`] on one value.
    #[inline(always)]
    fn fold1<const MAX: bool>(a: f32, b: f32) -> f32 {
        if a.is_nan() || b.is_nan() {
            f32::NAN
        } else if a == b {
            // Equal values differ only in the sign of a zero.
            let bits = if MAX {
                a.to_bits() & b.to_bits()
            } else {
                a.to_bits() | b.to_bits()
            };
            f32::from_bits(bits)
        } else if (a > b) == MAX {
            a
        } else {
            b
        }
    }

    /// A row of a [`super::Grid`] window: the kernel rows at `rows` (the valid ones) folded
    /// element by element into `buffer` over `kmin..=kmax` (the pad elsewhere, up to its
    /// `len`), then each 8 points the columns' vectors from `buffer` folded and stored.
    ///
    /// # Safety
    /// Each row's elements `kmin..=kmax` are readable; `buffer` holds `g.len` values, `out`
    /// `n` points.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn grid_avx2(
        g: &super::Grid,
        rows: &[*const f32],
        buffer: *mut f32,
        out: *mut f32,
        n: i64,
        max: bool,
    ) {
        if max {
            grid8::<true>(g, rows, buffer, out, n)
        } else {
            grid8::<false>(g, rows, buffer, out, n)
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn grid8<const MAX: bool>(
        g: &super::Grid,
        rows: &[*const f32],
        buffer: *mut f32,
        out: *mut f32,
        n: i64,
    ) {
        let (kmin, kmax, len) = (g.kmin as usize, g.kmax as usize, g.len);
        let padv = _mm256_set1_ps(g.pad);
        let fill = |from: usize, to: usize| {
            let mut k = from;
            while k + 8 <= to {
                _mm256_storeu_ps(buffer.add(k), padv);
                k += 8;
            }
            while k < to {
                *buffer.add(k) = g.pad;
                k += 1;
            }
        };
        fill(0, kmin);
        fill(kmax + 1, len);
        if let Some((&first, rest)) = rows.split_first() {
            let mut k = kmin;
            while k + 8 <= kmax + 1 {
                let mut v = _mm256_loadu_ps(first.add(k));
                // A NaN compares unordered with itself: `fold8` makes it all ones.
                v = _mm256_or_ps(v, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                for &r in rest {
                    v = fold8::<MAX>(v, _mm256_loadu_ps(r.add(k)));
                }
                _mm256_storeu_ps(buffer.add(k), v);
                k += 8;
            }
            while k <= kmax {
                let mut v = *first.add(k);
                for &r in rest {
                    v = fold1::<MAX>(v, *r.add(k));
                }
                *buffer.add(k) = v;
                k += 1;
            }
        } else {
            fill(kmin, kmax + 1);
        }
        let step = g.step as usize;
        let load = |at: *const f32| {
            if step == 1 {
                _mm256_loadu_ps(at)
            } else {
                even8(_mm256_loadu_ps(at), _mm256_loadu_ps(at.add(8)))
            }
        };
        let n = n as usize;
        let mut j0 = 0;
        while j0 < n {
            let at = buffer.add(j0 * step);
            let mut v = load(at.add(g.cols[0] as usize));
            for &c in &g.cols[1..] {
                v = fold8::<MAX>(v, load(at.add(c as usize)));
            }
            if j0 + 8 <= n {
                _mm256_storeu_ps(out.add(j0), v);
            } else {
                // Masked stores are microcoded on AMD's CPUs: the row's last points one by one.
                let mut lanes = [0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), v);
                for (i, &x) in lanes.iter().enumerate().take(n - j0) {
                    *out.add(j0 + i) = x;
                }
            }
            j0 += 8;
        }
    }

    /// The lanes `0..8` of points `j0 + lane` inside `lo..hi`, as bits.
    #[inline(always)]
    fn lanes8(j0: i64, lo: i64, hi: i64) -> u32 {
        lanes(j0, lo, hi) & 0xff
    }

    /// A vector mask of the lanes whose bits are set in the low byte of `bits`.
    #[inline(always)]
    unsafe fn mask8(bits: u32) -> __m256i {
        let each = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        let set = _mm256_and_si256(_mm256_set1_epi32(bits as i32), each);
        _mm256_cmpeq_epi32(set, each)
    }

    /// `bits & 0xf` with bit `i` moved to bit `2 i`: the elements lanes read at stride 2.
    const SPREAD4: [u8; 16] = [
        0x00, 0x01, 0x04, 0x05, 0x10, 0x11, 0x14, 0x15, 0x40, 0x41, 0x44, 0x45, 0x50, 0x51, 0x54,
        0x55,
    ];

    /// The even elements of `lo` then `hi` (16 elements from one address), in order.
    #[inline(always)]
    unsafe fn even8(lo: __m256, hi: __m256) -> __m256 {
        // [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6], then the middle 64-bit pairs swapped.
        let mixed = _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi);
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(
            mixed,
        )))
    }

    /// The tap's 8 lanes from point `j0`: the element where `bits` allows (every lane when
    /// `bits` is `0xff`), the pad elsewhere; no element outside `bits` is touched.
    #[inline(always)]
    unsafe fn load8(tap: &RowTap, j0: i64, bits: u32) -> __m256 {
        let at = tap.ptr.wrapping_offset((j0 * tap.step) as isize);
        if bits == 0xff {
            return match tap.step {
                0 => _mm256_set1_ps(*at),
                1 => _mm256_loadu_ps(at),
                2 => {
                    // The second load's last element (`at + 15`) is one past the last
                    // lane's: masked off.
                    let lo = _mm256_loadu_ps(at);
                    let hi = _mm256_maskload_ps(at.wrapping_add(8), mask8(0x7f));
                    even8(lo, hi)
                }
                step => {
                    let index = _mm256_mullo_epi32(
                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                        _mm256_set1_epi32(step as i32),
                    );
                    _mm256_i32gather_ps::<4>(at, index)
                }
            };
        }
        let pad = _mm256_set1_ps(tap.pad);
        if bits == 0 {
            return pad;
        }
        let mask = mask8(bits);
        let v = match tap.step {
            0 => _mm256_set1_ps(*at),
            1 => _mm256_maskload_ps(at, mask),
            2 => {
                let lo = _mm256_maskload_ps(at, mask8(u32::from(SPREAD4[(bits & 0xf) as usize])));
                let hi = _mm256_maskload_ps(
                    at.wrapping_add(8),
                    mask8(u32::from(SPREAD4[(bits >> 4) as usize])),
                );
                even8(lo, hi)
            }
            step => {
                let index = _mm256_mullo_epi32(
                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                    _mm256_set1_epi32(step as i32),
                );
                _mm256_mask_i32gather_ps::<4>(pad, at, index, _mm256_castsi256_ps(mask))
            }
        };
        _mm256_blendv_ps(pad, v, _mm256_castsi256_ps(mask))
    }

    /// [`row`] on AVX2 with FMA: 8 lanes; the IEEE maximum (minimum) of `a` and `b` as the
    /// AND (OR) of `vmaxps` (`vminps`) both ways round, which differ only where `a` and `b`
    /// are zeros of either sign (`vmaxps` returns its second operand there): `max(-0, +0)` is
    /// `+0` and `min` is `-0`, as `vrangeps` gives; NaNs are tracked apart, as there.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn row_avx2(
        taps: &[RowTap],
        out: *mut f32,
        n: i64,
        max: bool,
        accumulate: bool,
    ) {
        if max {
            row8::<true>(taps, out, n, accumulate)
        } else {
            row8::<false>(taps, out, n, accumulate)
        }
    }

    /// [`row_avx2`] for `max` (`MAX`) or `min`. Compiled with the target features itself:
    /// the closures of a function without them call every intrinsic out of line (13x slower).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn row8<const MAX: bool>(taps: &[RowTap], out: *mut f32, n: i64, accumulate: bool) {
        let fold = |a: __m256, b: __m256| signed8::<MAX>(a, b);
        let identity = _mm256_set1_ps(if MAX {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        });
        let mut j0 = 0;
        while j0 < n {
            let live = lanes8(j0, 0, n);
            let mut a0 = identity;
            let mut nan = _mm256_setzero_ps();
            if accumulate {
                a0 = _mm256_maskload_ps(out.wrapping_offset(j0 as isize), mask8(live));
                nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(a0, a0);
            }
            let value = |tap: &RowTap| {
                let bits = if tap.lo <= j0 && j0 + 8 <= tap.hi {
                    live
                } else {
                    lanes8(j0, tap.lo, tap.hi) & live
                };
                let v = load8(tap, j0, bits);
                nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                v
            };
            let r = fold_taps(taps, a0, identity, fold, value);
            let r = _mm256_blendv_ps(r, _mm256_set1_ps(f32::NAN), nan);
            let at = out.wrapping_offset(j0 as isize);
            if live == 0xff {
                _mm256_storeu_ps(at, r);
            } else {
                // Masked stores are slow on some CPUs (microcoded on AMD's): the row's last
                // vector only.
                _mm256_maskstore_ps(at, mask8(live), r);
            }
            j0 += 8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::guard_range;

    #[test]
    fn guard_ranges_are_exact() {
        for c in -3i64..=3 {
            for r in -7i64..=7 {
                for limit in 0..6 {
                    let n = 9;
                    let (lo, hi) = guard_range(c, r, limit, n);
                    for j in 0..n {
                        let holds = (0..limit).contains(&(c * j + r));
                        assert_eq!(
                            holds,
                            (lo..hi).contains(&j),
                            "c {c} r {r} limit {limit} j {j}"
                        );
                    }
                }
            }
        }
    }
}
