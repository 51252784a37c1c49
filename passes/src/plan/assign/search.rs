//! A bounded-height decision procedure: is there a placement with every buffer below `cap`?
//!
//! This is MiniMalloc's search (Moffitt, "MiniMalloc: A Lightweight Memory Allocator for
//! Hardware-Accelerated Machine Learning", ASPLOS 2023), a depth-first search over
//! *canonical* placements: buffers are placed in non-decreasing order of offset, each at its
//! floor (the highest top of the placed buffers it meets in time, aligned), and buffers placed
//! at the same offset follow a static preorder. Every placement can be pushed down to a
//! canonical one with no larger arena, so the search is complete. Pruning:
//!
//! - *Section inference*: in each section, the unplaced buffers need their total size above
//!   the lowest offset any of them can still take there (the higher of the section's top, the
//!   current offset, and the lowest floor of its unplaced buffers); a section that overflows
//!   `cap` ends the branch.
//! - *Dominance*: a buffer is not placed at an offset some unplaced buffer could sit entirely
//!   below: placing that one first is never worse.
//! - *Dynamic decomposition*: once no unplaced buffer spans a section boundary, the two sides
//!   are independent problems and are solved one after the other, each from offset 0 (from
//!   the start, too: stretches of the schedule no buffer spans).
//!
//! Children are tried in order of floor, then preorder. The search stops at a node limit, a
//! deadline or a cancel flag, and then says so: it proves infeasibility only when it ran to
//! the end.
//!
//! A subproblem clipped to part of the schedule (see [`super::window`]) may have conflicts
//! between buffers that share no section; they are in the conflict graph, so floors respect
//! them, and they are declared ([`Searches::with_conflicts_beyond_sections`]) so that
//! decomposition never separates two unplaced buffers in conflict. Section inference stays a
//! relaxation, so the search remains sound and complete.

use super::best_fit::UNPLACED;
use super::problem::{align_up, Problem};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// A compressed adjacency list: `items[start[i]..start[i + 1]]` belong to `i`.
pub(crate) struct Csr {
    pub start: Vec<u32>,
    pub items: Vec<u32>,
}

impl Csr {
    #[inline]
    pub fn of(&self, i: usize) -> &[u32] {
        &self.items[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

/// The conflict graph (pairs of buffers live at a common step), or `None` when it would have
/// more than `max_pairs` pairs or `stop` said so (it is asked every few hundred buffers).
pub(crate) fn conflict_graph(
    p: &Problem,
    max_pairs: usize,
    stop: &dyn Fn() -> bool,
) -> Option<Csr> {
    conflict_graph_of(&p.lo, &p.hi, max_pairs, stop)
}

/// The conflict graph of the section ranges `[lo[b], hi[b])`, or `None` when it would have
/// more than `max_pairs` pairs or `stop` said so.
pub(crate) fn conflict_graph_of(
    lo: &[u32],
    hi: &[u32],
    max_pairs: usize,
    stop: &dyn Fn() -> bool,
) -> Option<Csr> {
    let n = lo.len();
    // Count pairs with a sweep in start order.
    let mut by_lo: Vec<u32> = (0..n as u32).collect();
    by_lo.sort_unstable_by_key(|&b| lo[b as usize]);
    let mut his: Vec<u32> = hi.to_vec();
    his.sort_unstable();
    let mut pairs = 0usize;
    for (rank, &b) in by_lo.iter().enumerate() {
        // Buffers starting before `b` (in this order) that end after it starts.
        let ended = his.partition_point(|&h| h <= lo[b as usize]);
        pairs += rank.saturating_sub(ended);
    }
    if pairs > max_pairs {
        return None;
    }
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut active: Vec<u32> = Vec::new();
    for (k, &b) in by_lo.iter().enumerate() {
        if k % 256 == 255 && stop() {
            return None;
        }
        let start = lo[b as usize];
        active.retain(|&a| hi[a as usize] > start);
        for &a in &active {
            lists[a as usize].push(b);
            lists[b as usize].push(a);
        }
        active.push(b);
    }
    let mut start = Vec::with_capacity(n + 1);
    let mut items = Vec::with_capacity(2 * pairs);
    start.push(0);
    for list in lists {
        items.extend_from_slice(&list);
        start.push(items.len() as u32);
    }
    Some(Csr { start, items })
}

/// The buffers live in each section.
pub(crate) fn section_members(p: &Problem) -> Csr {
    let mut count = vec![0u32; p.n_sections + 1];
    for b in 0..p.len() {
        for s in p.lo[b]..p.hi[b] {
            count[s as usize + 1] += 1;
        }
    }
    for s in 0..p.n_sections {
        count[s + 1] += count[s];
    }
    let mut fill = count.clone();
    let mut items = vec![0u32; count[p.n_sections] as usize];
    for b in 0..p.len() {
        for s in p.lo[b]..p.hi[b] {
            items[fill[s as usize] as usize] = b as u32;
            fill[s as usize] += 1;
        }
    }
    Csr {
        start: count,
        items,
    }
}

/// Why a search ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A placement below `cap` was found.
    Found,
    /// No placement below `cap` exists.
    Infeasible,
    /// The node limit or the deadline came first.
    Stopped,
}

/// Limits on one search.
#[derive(Copy, Clone)]
pub(crate) struct Limits {
    pub nodes: u64,
    pub deadline: Instant,
}

/// The search state for one capacity and one preorder.
pub(crate) struct Dfs<'a> {
    p: &'a Problem,
    conflicts: &'a Csr,
    members: &'a Csr,
    cap: u64,
    /// The rank of each buffer in the static preorder.
    pre: Vec<u32>,
    offset: Vec<u64>,
    /// The floor of each unplaced buffer.
    min_off: Vec<u64>,
    /// Per section: the highest top of its placed buffers.
    sky: Vec<u64>,
    /// Per section: the total size of its unplaced buffers.
    total: Vec<u64>,
    /// Per section: the lowest floor of its unplaced buffers (`u64::MAX` when none is left).
    ufloor: Vec<u64>,
    /// Per section: how many unplaced buffers have their floor at `ufloor`.
    ufloor_count: Vec<u32>,
    /// Per section, its members with the unplaced ones first: `unplaced_len[s]` of them from
    /// `members.start[s]`.
    member_items: Vec<u32>,
    unplaced_len: Vec<u32>,
    /// Where each (buffer, section) membership sits in `member_items`: buffer `b`'s entries
    /// start at `slot_start[b]`, one per section it covers.
    slot: Vec<u32>,
    slot_start: Vec<u32>,
    /// Conflicts between buffers that share no section (a clipped subproblem), one list per
    /// buffer; each such pair binds the section boundaries between the two while both are
    /// unplaced, like a buffer spanning them.
    cross: Option<&'a Csr>,
    /// Per section boundary `s | s + 1`: the unplaced buffers spanning it, and the cross pairs
    /// of unplaced buffers on either side of it.
    cuts: Vec<u32>,
    /// The offsets of the last successful placements.
    pub solution: Vec<u64>,
    log_min: Vec<(u32, u64)>,
    log_sky: Vec<(u32, u64)>,
    log_ufloor: Vec<(u32, u64, u32)>,
    stamp: Vec<u32>,
    stamp_now: u32,
    affected: Vec<u32>,
    /// Sort keys `(floor, preorder, buffer)` of the children of the nodes on the path.
    candidates: Vec<u128>,
    nodes: u64,
    /// Set by another thread when there is nothing left to find.
    cancel: &'a AtomicBool,
    clock_ticks: u64,
    timed_out: bool,
    limits: Limits,
}

impl<'a> Dfs<'a> {
    pub fn new(
        p: &'a Problem,
        conflicts: &'a Csr,
        members: &'a Csr,
        pre: Vec<u32>,
        cancel: &'a AtomicBool,
    ) -> Dfs<'a> {
        let n = p.len();
        let n_sections = p.n_sections;
        let mut slot_start = Vec::with_capacity(n + 1);
        slot_start.push(0u32);
        for b in 0..n {
            slot_start.push(slot_start[b] + p.width(b));
        }
        let mut slot = vec![0u32; slot_start[n] as usize];
        for s in 0..n_sections {
            for (k, &b) in members.of(s).iter().enumerate() {
                let b = b as usize;
                slot[(slot_start[b] + s as u32 - p.lo[b]) as usize] = members.start[s] + k as u32;
            }
        }
        Dfs {
            p,
            conflicts,
            members,
            cap: 0,
            pre,
            offset: vec![UNPLACED; n],
            min_off: vec![0; n],
            sky: vec![0; n_sections],
            total: p.section_load.clone(),
            ufloor: vec![0; n_sections],
            ufloor_count: (0..n_sections)
                .map(|s| members.of(s).len() as u32)
                .collect(),
            member_items: members.items.clone(),
            unplaced_len: (0..n_sections)
                .map(|s| members.of(s).len() as u32)
                .collect(),
            slot,
            slot_start,
            cross: None,
            cuts: vec![0; n_sections.saturating_sub(1)],
            solution: vec![0; n],
            log_min: Vec::new(),
            log_sky: Vec::new(),
            log_ufloor: Vec::new(),
            stamp: vec![0; n_sections],
            stamp_now: 0,
            affected: Vec::new(),
            candidates: Vec::new(),
            nodes: 0,
            cancel,
            clock_ticks: 0,
            timed_out: false,
            limits: Limits {
                nodes: 0,
                deadline: Instant::now(),
            },
        }
    }

    /// Searches for a placement with every top at most `cap`.
    pub fn run(&mut self, cap: u64, limits: Limits) -> Outcome {
        self.cap = cap;
        self.limits = limits;
        self.nodes = 0;
        self.timed_out = Instant::now() >= limits.deadline;
        if self.p.load > cap {
            return Outcome::Infeasible;
        }
        for b in 0..self.p.len() {
            for s in self.p.lo[b]..self.p.hi[b].saturating_sub(1) {
                self.cuts[s as usize] += 1;
            }
        }
        if let Some(cross) = self.cross {
            for u in 0..self.p.len() {
                for &v in cross.of(u) {
                    if (v as usize) > u {
                        for s in self.cross_span(u, v as usize) {
                            self.cuts[s as usize] += 1;
                        }
                    }
                }
            }
        }
        // Stretches of the schedule that no buffer spans are independent from the start.
        let n_sections = self.p.n_sections as u32;
        let mut bounds = vec![0];
        bounds.extend((1..n_sections).filter(|&s| self.cuts[s as usize - 1] == 0));
        bounds.push(n_sections);
        let all: Vec<u32> = (0..self.p.len() as u32).collect();
        let outcome = self.solve_parts(&all, &bounds);
        self.cuts.fill(0);
        outcome
    }

    fn solve_partition(&mut self, sec_lo: u32, sec_hi: u32, buffers: &mut [u32]) -> Outcome {
        buffers.sort_unstable_by_key(|&b| self.pre[b as usize]);
        self.search(buffers, sec_lo, sec_hi, 0, 0)
    }

    fn search(
        &mut self,
        buffers: &[u32],
        sec_lo: u32,
        sec_hi: u32,
        x: u64,
        last_pre: u32,
    ) -> Outcome {
        self.nodes += 1;
        if self.nodes > self.limits.nodes || self.past_deadline() {
            return Outcome::Stopped;
        }
        let mut min_height = u64::MAX;
        let mut any = false;
        for &b in buffers {
            let bu = b as usize;
            if self.offset[bu] == UNPLACED {
                any = true;
                min_height = min_height.min(self.min_off[bu] + self.p.size[bu]);
            }
        }
        if !any {
            return Outcome::Found;
        }
        // Placing at offset `m` leaves at least `m + total` in every section (its own
        // sections get the buffer's top and lose its size), so the fullest section bounds
        // `m`, unless the buffer is the last one there.
        let (mut fullest, mut fullest_total) = (sec_lo as usize, 0u64);
        for s in sec_lo as usize..sec_hi as usize {
            if self.total[s] > fullest_total {
                (fullest, fullest_total) = (s, self.total[s]);
            }
        }
        let m_limit = self.cap.saturating_sub(fullest_total);
        // The children: unplaced buffers whose floor is at least the current offset (at the
        // current offset, only later in the preorder), below every unplaced buffer's top.
        let base = self.candidates.len();
        for &b in buffers {
            let bu = b as usize;
            let m = self.min_off[bu];
            if self.offset[bu] != UNPLACED
                || m < x
                || m >= min_height
                || (m == x && self.pre[bu] < last_pre)
                || m + self.p.size[bu] > self.cap
                || (m > m_limit
                    && !(self.p.size[bu] == fullest_total
                        && self.p.lo[bu] as usize <= fullest
                        && fullest < self.p.hi[bu] as usize))
            {
                continue;
            }
            self.candidates
                .push((u128::from(m) << 64) | (u128::from(self.pre[bu]) << 32) | u128::from(b));
        }
        self.candidates[base..].sort_unstable();
        let end = self.candidates.len();
        let mut outcome = Outcome::Infeasible;
        for i in base..end {
            let key = self.candidates[i];
            let (m, pre, b) = ((key >> 64) as u64, (key >> 32) as u32, key as u32);
            let bu = b as usize;
            if self.past_deadline() {
                outcome = Outcome::Stopped;
                break;
            }
            let marks = self.place(bu, m);
            let mut result = Outcome::Infeasible;
            if self.check(sec_lo, sec_hi, m) {
                result = self.after_place(buffers, sec_lo, sec_hi, bu, m, pre);
            }
            self.unplace(bu, marks);
            if result != Outcome::Infeasible {
                outcome = result;
                break;
            }
        }
        self.candidates.truncate(base);
        outcome
    }

    /// Whether the deadline has passed; looks at the clock once every 64 calls.
    fn past_deadline(&mut self) -> bool {
        self.clock_ticks += 1;
        if self.clock_ticks.is_multiple_of(64)
            && (Instant::now() >= self.limits.deadline || self.cancel.load(Ordering::Relaxed))
        {
            self.timed_out = true;
        }
        self.timed_out
    }

    /// Continues the search after placing `b`: splits the partition where no unplaced buffer
    /// spans a boundary any more.
    fn after_place(
        &mut self,
        buffers: &[u32],
        sec_lo: u32,
        sec_hi: u32,
        b: usize,
        x: u64,
        pre: u32,
    ) -> Outcome {
        let (lo, hi) = (self.p.lo[b], self.p.hi[b]);
        let mut cutpoints = Vec::new();
        let mut release = |cuts: &mut [u32], s: u32| {
            cuts[s as usize] -= 1;
            if cuts[s as usize] == 0 && s + 1 > sec_lo && s + 1 < sec_hi {
                cutpoints.push(s + 1);
            }
        };
        for s in lo..hi.saturating_sub(1) {
            release(&mut self.cuts, s);
        }
        // Cross pairs with `b` no longer bind: the other buffer's floor now accounts for it.
        let mut released_pairs = Vec::new();
        if let Some(cross) = self.cross {
            for &c in cross.of(b) {
                if self.offset[c as usize] == UNPLACED {
                    for s in self.cross_span(b, c as usize) {
                        release(&mut self.cuts, s);
                    }
                    released_pairs.push(c as usize);
                }
            }
        }
        cutpoints.sort_unstable();
        let outcome = if cutpoints.is_empty() {
            self.search(buffers, sec_lo, sec_hi, x, pre)
        } else {
            let mut bounds = vec![sec_lo];
            bounds.extend_from_slice(&cutpoints);
            bounds.push(sec_hi);
            self.solve_parts(buffers, &bounds)
        };
        for s in lo..hi.saturating_sub(1) {
            self.cuts[s as usize] += 1;
        }
        for c in released_pairs {
            for s in self.cross_span(b, c) {
                self.cuts[s as usize] += 1;
            }
        }
        outcome
    }

    /// The section boundaries between two buffers that share no section.
    fn cross_span(&self, u: usize, v: usize) -> std::ops::Range<u32> {
        let p = self.p;
        (p.hi[u].min(p.hi[v]) - 1)..p.lo[u].max(p.lo[v])
    }

    /// Solves the unplaced `buffers` between each pair of consecutive `bounds` (section
    /// boundaries no unplaced buffer spans) as independent problems, in turn.
    fn solve_parts(&mut self, buffers: &[u32], bounds: &[u32]) -> Outcome {
        for w in bounds.windows(2) {
            let (a, z) = (w[0], w[1]);
            let mut part: Vec<u32> = buffers
                .iter()
                .copied()
                .filter(|&c| {
                    let c = c as usize;
                    self.offset[c] == UNPLACED && self.p.lo[c] < z && self.p.hi[c] > a
                })
                .collect();
            if part.is_empty() {
                continue;
            }
            let outcome = self.solve_partition(a, z, &mut part);
            if outcome != Outcome::Found {
                return outcome;
            }
        }
        Outcome::Found
    }

    /// Section inference: every section's unplaced total fits above its lowest usable offset.
    fn check(&self, sec_lo: u32, sec_hi: u32, x: u64) -> bool {
        for s in sec_lo as usize..sec_hi as usize {
            let total = self.total[s];
            if total == 0 {
                continue;
            }
            let floor = x.max(self.sky[s]).max(self.ufloor[s]);
            if floor + total > self.cap {
                return false;
            }
        }
        true
    }

    fn place(&mut self, b: usize, at: u64) -> (usize, usize, usize) {
        let marks = (
            self.log_min.len(),
            self.log_sky.len(),
            self.log_ufloor.len(),
        );
        let p = self.p;
        // The floor at which `b` counted among the section's unplaced buffers (`at` itself
        // in a canonical placement).
        let level = self.min_off[b];
        self.offset[b] = at;
        self.solution[b] = at;
        let top = at + p.size[b];
        self.stamp_now = self.stamp_now.wrapping_add(1);
        if self.stamp_now == 0 {
            self.stamp.fill(0);
            self.stamp_now = 1;
        }
        self.affected.clear();
        // A section's lowest floor can only change where the buffer that changed held it;
        // it is rescanned when the last such buffer leaves.
        for s in p.lo[b]..p.hi[b] {
            let su = s as usize;
            // Move `b` behind the section's unplaced members.
            let mine = (self.slot_start[b] + s - p.lo[b]) as usize;
            let at_b = self.slot[mine];
            let last = self.members.start[su] + self.unplaced_len[su] - 1;
            let c = self.member_items[last as usize] as usize;
            self.member_items.swap(at_b as usize, last as usize);
            self.slot[(self.slot_start[c] + s - p.lo[c]) as usize] = at_b;
            self.slot[mine] = last;
            self.unplaced_len[su] -= 1;
            self.log_sky.push((s, self.sky[su]));
            self.sky[su] = self.sky[su].max(top);
            self.total[su] -= p.size[b];
            if self.ufloor[su] == level {
                self.leave_ufloor(su);
            }
        }
        for &c in self.conflicts.of(b) {
            let cu = c as usize;
            let old = self.min_off[cu];
            if self.offset[cu] != UNPLACED || old >= top {
                continue;
            }
            self.log_min.push((c, old));
            self.min_off[cu] = align_up(top, p.align[cu]);
            for s in p.lo[cu]..p.hi[cu] {
                if self.ufloor[s as usize] == old {
                    self.leave_ufloor(s as usize);
                }
            }
        }
        for k in 0..self.affected.len() {
            let s = self.affected[k] as usize;
            let (mut lowest, mut count) = (u64::MAX, 0u32);
            let first = self.members.start[s] as usize;
            for &c in &self.member_items[first..first + self.unplaced_len[s] as usize] {
                let m = self.min_off[c as usize];
                if m < lowest {
                    (lowest, count) = (m, 1);
                } else if m == lowest {
                    count += 1;
                }
            }
            self.ufloor[s] = lowest;
            self.ufloor_count[s] = count;
        }
        marks
    }

    /// One buffer with its floor at section `s`'s lowest floor leaves that level. The section
    /// is logged once per placement, and queued for a rescan when no such buffer is left.
    fn leave_ufloor(&mut self, s: usize) {
        if self.stamp[s] != self.stamp_now {
            self.stamp[s] = self.stamp_now;
            self.log_ufloor
                .push((s as u32, self.ufloor[s], self.ufloor_count[s]));
        }
        self.ufloor_count[s] -= 1;
        if self.ufloor_count[s] == 0 {
            self.affected.push(s as u32);
        }
    }

    fn unplace(&mut self, b: usize, marks: (usize, usize, usize)) {
        let p = self.p;
        while self.log_ufloor.len() > marks.2 {
            let (s, v, count) = self
                .log_ufloor
                .pop()
                .expect("the log is longer than its mark");
            self.ufloor[s as usize] = v;
            self.ufloor_count[s as usize] = count;
        }
        while self.log_sky.len() > marks.1 {
            let (s, v) = self.log_sky.pop().expect("the log is longer than its mark");
            self.sky[s as usize] = v;
        }
        while self.log_min.len() > marks.0 {
            let (c, v) = self.log_min.pop().expect("the log is longer than its mark");
            self.min_off[c as usize] = v;
        }
        for s in p.lo[b]..p.hi[b] {
            self.total[s as usize] += p.size[b];
            // `b` still sits just behind the unplaced members: undoing is LIFO.
            self.unplaced_len[s as usize] += 1;
        }
        self.offset[b] = UNPLACED;
    }
}

/// What one capacity probe learned.
pub(crate) enum Probe {
    /// A placement with every top at most the capacity, and the preorder that found it.
    Found(Vec<u64>, &'static str),
    /// No such placement exists.
    Infeasible,
    /// The deadline came first.
    Unknown,
}

/// The searches of one problem, one per preorder, sharing its conflict graph.
pub(crate) struct Searches<'a> {
    p: &'a Problem,
    cancel: &'a AtomicBool,
    dfs: Vec<(Dfs<'a>, &'static str)>,
}

impl<'a> Searches<'a> {
    /// One search per preorder in `variants` (see [`super::order`]); `ufloor` turns on the
    /// lowest-floor bound, which prunes much more but costs time where sections are crowded.
    pub fn new(
        p: &'a Problem,
        conflicts: &'a Csr,
        members: &'a Csr,
        keys: &super::order::Keys,
        variants: &[&'static str],
        cancel: &'a AtomicBool,
    ) -> Searches<'a> {
        let dfs = variants
            .iter()
            .map(|&v| {
                let pre = super::order::ranks(&keys.order(p, v));
                (Dfs::new(p, conflicts, members, pre, cancel), v)
            })
            .collect();
        Searches { p, cancel, dfs }
    }

    /// Declares the conflicts between buffers that share no section (in a clipped
    /// subproblem, where the conflict graph is more than the sections' conflicts), so that
    /// decomposition keeps such pairs in one part.
    pub fn with_conflicts_beyond_sections(mut self, cross: &'a Csr) -> Searches<'a> {
        for (dfs, _) in &mut self.dfs {
            dfs.cross = Some(cross);
        }
        self
    }

    /// Looks for a placement below `cap`: the preorders take turns under a node limit that
    /// doubles each round (MiniMalloc's round robin), until one decides or the deadline.
    pub fn probe(&mut self, cap: u64, deadline: Instant) -> Probe {
        self.probe_within(cap, deadline, u64::MAX)
    }

    /// [`Searches::probe`], giving up once the node limit would pass `max_limit`.
    pub fn probe_within(&mut self, cap: u64, deadline: Instant, max_limit: u64) -> Probe {
        let mut limit = 2 * self.p.len() as u64;
        while limit <= max_limit {
            for (dfs, name) in &mut self.dfs {
                match dfs.run(
                    cap,
                    Limits {
                        nodes: limit,
                        deadline,
                    },
                ) {
                    Outcome::Found => return Probe::Found(dfs.solution.clone(), name),
                    Outcome::Infeasible => return Probe::Infeasible,
                    Outcome::Stopped => {}
                }
                if Instant::now() >= deadline || self.cancel.load(Ordering::Relaxed) {
                    return Probe::Unknown;
                }
            }
            limit = limit.saturating_mul(2);
        }
        Probe::Unknown
    }

    /// Lowers the arena below `best` (shared with other threads) as far as the deadline
    /// allows: first a probe at LOAD (optimal when it succeeds), then a binary search between
    /// LOAD and the best arena known. `report` receives each improvement; the caller updates
    /// `best`.
    pub fn minimize(
        &mut self,
        best: &AtomicU64,
        deadline: Instant,
        mut report: impl FnMut(Vec<u64>, &'static str),
    ) {
        let p = self.p;
        let load = p.load;
        if load >= best.load(Ordering::Relaxed) {
            return;
        }
        let share =
            |now: Instant, parts: u32| now + deadline.saturating_duration_since(now) / parts;
        let first = share(Instant::now(), 2);
        if let Probe::Found(offsets, name) = self.probe(load, first) {
            report(offsets, name);
            return;
        }
        let mut lo = load + 1;
        // Stop once the interval is within 0.05% of LOAD.
        let granule = (load / 2048).max(1);
        loop {
            let hi = best.load(Ordering::Relaxed).saturating_sub(1);
            if lo + granule > hi
                || Instant::now() >= deadline
                || self.cancel.load(Ordering::Relaxed)
            {
                return;
            }
            let cap = lo + (hi - lo) / 2;
            match self.probe(cap, share(Instant::now(), 3)) {
                Probe::Found(offsets, name) => report(offsets, name),
                Probe::Infeasible | Probe::Unknown => lo = cap + 1,
            }
        }
    }
}
