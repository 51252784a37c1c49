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
//!   are independent problems and are solved one after the other, each from offset 0.
//!
//! Children are tried in order of floor, then preorder. The search stops at a node limit or a
//! deadline, and then says so: it proves infeasibility only when it ran to the end.

use super::best_fit::UNPLACED;
use super::problem::{align_up, Problem};
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
/// more than `max_pairs` pairs.
pub(crate) fn conflict_graph(p: &Problem, max_pairs: usize) -> Option<Csr> {
    let n = p.len();
    // Count pairs with a sweep in start order.
    let mut by_lo: Vec<u32> = (0..n as u32).collect();
    by_lo.sort_unstable_by_key(|&b| p.lo[b as usize]);
    let mut his: Vec<u32> = p.hi.clone();
    his.sort_unstable();
    let mut pairs = 0usize;
    for (rank, &b) in by_lo.iter().enumerate() {
        // Buffers starting before `b` (in this order) that end after it starts.
        let ended = his.partition_point(|&h| h <= p.lo[b as usize]);
        pairs += rank.saturating_sub(ended);
    }
    if pairs > max_pairs {
        return None;
    }
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut active: Vec<u32> = Vec::new();
    for &b in &by_lo {
        let lo = p.lo[b as usize];
        active.retain(|&a| p.hi[a as usize] > lo);
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
    /// Per section: the lowest floor of its unplaced buffers (a lower bound of it).
    ufloor: Vec<u64>,
    /// Per section boundary `s | s + 1`: the unplaced buffers spanning it.
    cuts: Vec<u32>,
    /// The offsets of the last successful placements.
    pub solution: Vec<u64>,
    log_min: Vec<(u32, u64)>,
    log_sky: Vec<(u32, u64)>,
    log_ufloor: Vec<(u32, u64)>,
    stamp: Vec<u32>,
    stamp_now: u32,
    affected: Vec<u32>,
    candidates: Vec<(u64, u32, u32)>,
    nodes: u64,
    limits: Limits,
}

impl<'a> Dfs<'a> {
    pub fn new(p: &'a Problem, conflicts: &'a Csr, members: &'a Csr, pre: Vec<u32>) -> Dfs<'a> {
        let n = p.len();
        let n_sections = p.n_sections;
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
            limits: Limits {
                nodes: 0,
                deadline: Instant::now(),
            },
        }
    }

    /// The nodes visited by the last [`Dfs::run`].
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Searches for a placement with every top at most `cap`.
    pub fn run(&mut self, cap: u64, limits: Limits) -> Outcome {
        self.cap = cap;
        self.limits = limits;
        self.nodes = 0;
        for b in 0..self.p.len() {
            if self.p.size[b] > cap {
                return Outcome::Infeasible;
            }
            for s in self.p.lo[b]..self.p.hi[b].saturating_sub(1) {
                self.cuts[s as usize] += 1;
            }
        }
        if self.p.load > cap {
            self.cuts.fill(0);
            return Outcome::Infeasible;
        }
        let all: Vec<u32> = (0..self.p.len() as u32).collect();
        let outcome = self.solve_partition(0, self.p.n_sections as u32, all);
        self.cuts.fill(0);
        outcome
    }

    fn solve_partition(&mut self, sec_lo: u32, sec_hi: u32, mut buffers: Vec<u32>) -> Outcome {
        buffers.sort_unstable_by_key(|&b| self.pre[b as usize]);
        self.search(&buffers, sec_lo, sec_hi, 0, 0)
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
        if self.nodes > self.limits.nodes
            || (self.nodes % 1024 == 0 && Instant::now() >= self.limits.deadline)
        {
            return Outcome::Stopped;
        }
        let base = self.candidates.len();
        let mut min_height = u64::MAX;
        for &b in buffers {
            let bu = b as usize;
            if self.offset[bu] == UNPLACED {
                let m = self.min_off[bu];
                min_height = min_height.min(m + self.p.size[bu]);
                self.candidates.push((m, self.pre[bu], b));
            }
        }
        if self.candidates.len() == base {
            return Outcome::Found;
        }
        self.candidates[base..].sort_unstable();
        let end = self.candidates.len();
        let mut outcome = Outcome::Infeasible;
        for i in base..end {
            let (m, pre, b) = self.candidates[i];
            if m < x || (m == x && pre < last_pre) {
                continue;
            }
            if m >= min_height {
                break;
            }
            let bu = b as usize;
            if m + self.p.size[bu] > self.cap {
                continue;
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
        for s in lo..hi.saturating_sub(1) {
            self.cuts[s as usize] -= 1;
            if self.cuts[s as usize] == 0 && s + 1 > sec_lo && s + 1 < sec_hi {
                cutpoints.push(s + 1);
            }
        }
        let outcome = if cutpoints.is_empty() {
            self.search(buffers, sec_lo, sec_hi, x, pre)
        } else {
            let mut outcome = Outcome::Found;
            let mut bounds = vec![sec_lo];
            bounds.extend_from_slice(&cutpoints);
            bounds.push(sec_hi);
            for w in bounds.windows(2) {
                let (a, z) = (w[0], w[1]);
                let part: Vec<u32> = buffers
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
                outcome = self.solve_partition(a, z, part);
                if outcome != Outcome::Found {
                    break;
                }
            }
            outcome
        };
        for s in lo..hi.saturating_sub(1) {
            self.cuts[s as usize] += 1;
        }
        outcome
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
        self.offset[b] = at;
        self.solution[b] = at;
        let top = at + p.size[b];
        self.stamp_now = self.stamp_now.wrapping_add(1);
        if self.stamp_now == 0 {
            self.stamp.fill(0);
            self.stamp_now = 1;
        }
        self.affected.clear();
        for s in p.lo[b]..p.hi[b] {
            let su = s as usize;
            self.log_sky.push((s, self.sky[su]));
            self.sky[su] = self.sky[su].max(top);
            self.total[su] -= p.size[b];
            self.stamp[su] = self.stamp_now;
            self.affected.push(s);
        }
        for &c in self.conflicts.of(b) {
            let cu = c as usize;
            if self.offset[cu] != UNPLACED || self.min_off[cu] >= top {
                continue;
            }
            self.log_min.push((c, self.min_off[cu]));
            self.min_off[cu] = align_up(top, p.align[cu]);
            for s in p.lo[cu]..p.hi[cu] {
                if self.stamp[s as usize] != self.stamp_now {
                    self.stamp[s as usize] = self.stamp_now;
                    self.affected.push(s);
                }
            }
        }
        for k in 0..self.affected.len() {
            let s = self.affected[k] as usize;
            let mut lowest = u64::MAX;
            for &c in self.members.of(s) {
                if self.offset[c as usize] == UNPLACED {
                    lowest = lowest.min(self.min_off[c as usize]);
                }
            }
            if lowest != self.ufloor[s] {
                self.log_ufloor.push((s as u32, self.ufloor[s]));
                self.ufloor[s] = lowest;
            }
        }
        marks
    }

    fn unplace(&mut self, b: usize, marks: (usize, usize, usize)) {
        let p = self.p;
        while self.log_ufloor.len() > marks.2 {
            let (s, v) = self
                .log_ufloor
                .pop()
                .expect("the log is longer than its mark");
            self.ufloor[s as usize] = v;
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
        }
        self.offset[b] = UNPLACED;
    }
}
