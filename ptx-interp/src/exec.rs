//! The interpreter: runs an entry's decoded instructions over a grid.
//!
//! Blocks run in grid order. Inside a block every thread runs alone until it reaches a sync
//! point or exits; then the sync points whose participants have all arrived complete (a
//! `shfl.sync` exchanges its values at that moment), and the released threads run again. For
//! a race-free kernel this equals lockstep execution. When nothing can complete and threads
//! remain, the block has deadlocked, which is reported, never waited on.

use crate::num::{cvt, fmax, fmin, ftz32, Float};
use crate::parse::{
    AtomOp, BoolOp, Cmp, Entry, FOp, FUn, IOp, IUn, Op, ShflMode, Space, Src, TestKind, Ty, CTAID,
    LANEID, NCTAID, NO_GUARD, NTID, SHARED_WINDOW, TID, WARPID,
};
use crate::{Error, Fault, Launch, Memory, Module};

/// What a launch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Instructions executed over all threads, predicated-off ones included.
    pub instructions: u64,
    pub blocks: u64,
    pub threads: u64,
    /// Completed `bar.sync` barriers (once per block and barrier).
    pub barriers: u64,
    /// Completed `shfl.sync` instructions (once per lane).
    pub shuffles: u64,
    pub global_loads: u64,
    pub global_stores: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ready,
    Bar,
    Warp,
    Shfl,
    Exited,
}

struct Block {
    nregs: usize,
    regs: Vec<u64>,
    pc: Vec<u32>,
    state: Vec<State>,
    shared: Vec<u8>,
}

pub(crate) fn launch(
    m: &Module,
    e: &Entry,
    l: Launch,
    params: &[u64],
    mem: &mut Memory,
) -> Result<Stats, Error> {
    let lerr = |message: String| Error::Launch {
        entry: e.name.clone(),
        message,
    };
    let nthreads = u64::from(l.block[0]) * u64::from(l.block[1]) * u64::from(l.block[2]);
    if nthreads == 0 || nthreads > 1024 || l.block[2] > 64 {
        return Err(lerr(format!(
            "block {:?} is not a valid CUDA block shape",
            l.block
        )));
    }
    if l.grid.contains(&0) {
        return Err(lerr(format!("grid {:?} is empty", l.grid)));
    }
    if let Some(r) = e.reqntid {
        if r != l.block {
            return Err(lerr(format!(
                "block {:?} differs from .reqntid {r:?}",
                l.block
            )));
        }
    }
    if let Some(mx) = e.maxntid {
        if nthreads > u64::from(mx[0]) * u64::from(mx[1]) * u64::from(mx[2]) {
            return Err(lerr(format!("block {:?} exceeds .maxntid {mx:?}", l.block)));
        }
    }
    if params.len() != e.params.len() {
        return Err(lerr(format!(
            "{} parameters given, the entry declares {}",
            params.len(),
            e.params.len()
        )));
    }
    let mut pbuf = vec![0u8; e.param_bytes as usize];
    for (&(off, ty), &v) in e.params.iter().zip(params) {
        let n = ty.bytes() as usize;
        pbuf[off as usize..off as usize + n].copy_from_slice(&v.to_le_bytes()[..n]);
    }
    let shared_len = e.extern_offset as usize + l.shared_bytes as usize;
    let n = nthreads as usize;
    let nregs = e.nregs as usize;
    let mut blk = Block {
        nregs,
        regs: vec![0; n * nregs],
        pc: vec![0; n],
        state: vec![State::Ready; n],
        shared: vec![0xff; shared_len],
    };
    let mut stats = Stats::default();
    let mut ctx = Ctx {
        m,
        e,
        params: &pbuf,
        stats: &mut stats,
        limit: m.limit,
    };
    for bz in 0..l.grid[2] {
        for by in 0..l.grid[1] {
            for bx in 0..l.grid[0] {
                let b = [bx, by, bz];
                blk.regs.fill(0);
                blk.pc.fill(0);
                blk.state.fill(State::Ready);
                blk.shared.fill(0xff);
                for t in 0..n {
                    let r = &mut blk.regs[t * nregs..(t + 1) * nregs];
                    let tid = thread_index(t as u32, l.block);
                    for k in 0..3 {
                        r[(TID + k) as usize] = u64::from(tid[k as usize]);
                        r[(NTID + k) as usize] = u64::from(l.block[k as usize]);
                        r[(CTAID + k) as usize] = u64::from(b[k as usize]);
                        r[(NCTAID + k) as usize] = u64::from(l.grid[k as usize]);
                    }
                    r[LANEID as usize] = t as u64 % 32;
                    r[WARPID as usize] = t as u64 / 32;
                }
                ctx.run_block(&mut blk, mem, b, l.block)?;
                ctx.stats.blocks += 1;
                ctx.stats.threads += n as u64;
            }
        }
    }
    Ok(stats)
}

fn thread_index(t: u32, block: [u32; 3]) -> [u32; 3] {
    [
        t % block[0],
        (t / block[0]) % block[1],
        t / (block[0] * block[1]),
    ]
}

struct Ctx<'a> {
    m: &'a Module,
    e: &'a Entry,
    params: &'a [u8],
    stats: &'a mut Stats,
    limit: u64,
}

#[inline(always)]
fn get(regs: &[u64], s: Src) -> u64 {
    match s {
        Src::R(r) => regs[r as usize],
        Src::I(v) => v,
    }
}

#[inline(always)]
fn f32v(v: u64, ftz: bool) -> f32 {
    let x = f32::from_bits(v as u32);
    if ftz {
        ftz32(x)
    } else {
        x
    }
}

fn sat32(x: f32) -> f32 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

fn sat64(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

#[inline(always)]
fn mask(v: u64, bits: u32) -> u64 {
    if bits >= 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    }
}

#[inline(always)]
fn sext(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        ((v << (64 - bits)) as i64) >> (64 - bits)
    }
}

#[inline(always)]
fn mul_hi(ty: Ty, a: u64, b: u64) -> u64 {
    let bits = ty.bits();
    if ty.signed() {
        let p = i128::from(sext(a, bits)) * i128::from(sext(b, bits));
        (p >> bits) as u64
    } else {
        let p = u128::from(mask(a, bits)) * u128::from(mask(b, bits));
        (p >> bits) as u64
    }
}

#[inline(always)]
fn int_bin(op: IOp, ty: Ty, a: u64, b: u64) -> u64 {
    let bits = ty.bits();
    let s = ty.signed();
    let r = match op {
        IOp::Add => a.wrapping_add(b),
        IOp::Sub => a.wrapping_sub(b),
        IOp::MulLo => a.wrapping_mul(b),
        IOp::MulHi => mul_hi(ty, a, b),
        IOp::And => a & b,
        IOp::Or => a | b,
        IOp::Xor => a ^ b,
        IOp::Shl => {
            let n = b as u32;
            if n >= bits {
                0
            } else {
                a << n
            }
        }
        IOp::Shr => {
            let n = b as u32;
            if s {
                (sext(a, bits) >> n.min(63)) as u64
            } else if n >= bits {
                0
            } else {
                mask(a, bits) >> n
            }
        }
        IOp::AddSat => {
            (sext(a, 32) + sext(b, 32)).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as u64
        }
        IOp::SubSat => {
            (sext(a, 32) - sext(b, 32)).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as u64
        }
        IOp::Div | IOp::Rem | IOp::Min | IOp::Max => {
            let (au, bu) = (mask(a, bits), mask(b, bits));
            let (ai, bi) = (sext(a, bits), sext(b, bits));
            match op {
                IOp::Div if bu == 0 => u64::MAX,
                IOp::Rem if bu == 0 => a,
                IOp::Div if s => ai.wrapping_div(bi) as u64,
                IOp::Div => au / bu,
                IOp::Rem if s => ai.wrapping_rem(bi) as u64,
                IOp::Rem => au % bu,
                IOp::Min if s => ai.min(bi) as u64,
                IOp::Min => au.min(bu),
                IOp::Max if s => ai.max(bi) as u64,
                _ => au.max(bu),
            }
        }
    };
    ty.ext(r)
}

fn int_un(op: IUn, ty: Ty, a: u64) -> u64 {
    let bits = ty.bits();
    let r = match op {
        IUn::Neg => a.wrapping_neg(),
        IUn::Abs => sext(a, bits).wrapping_abs() as u64,
        IUn::Not => !a,
        IUn::Cnot => u64::from(mask(a, bits) == 0),
        IUn::Popc => return u64::from(mask(a, bits).count_ones()),
        IUn::Clz => return u64::from(mask(a, bits).leading_zeros() - (64 - bits)),
        IUn::Brev => a.reverse_bits() >> (64 - bits),
    };
    ty.ext(r)
}

fn float_bin<
    T: Float
        + std::ops::Add<Output = T>
        + std::ops::Sub<Output = T>
        + std::ops::Mul<Output = T>
        + std::ops::Div<Output = T>,
>(
    op: FOp,
    x: T,
    y: T,
    copysign: impl Fn(T, T) -> T,
) -> T {
    match op {
        FOp::Add => x + y,
        FOp::Sub => x - y,
        FOp::Mul => x * y,
        FOp::Div => x / y,
        FOp::Min => fmin(x, y),
        FOp::Max => fmax(x, y),
        FOp::MinNan if x.nan() || y.nan() => T::CANON_NAN,
        FOp::MaxNan if x.nan() || y.nan() => T::CANON_NAN,
        FOp::MinNan => fmin(x, y),
        FOp::MaxNan => fmax(x, y),
        // PTX copysign: the sign of the first operand, the magnitude of the second.
        FOp::Copysign => copysign(y, x),
    }
}

fn float_un64(op: FUn, x: f64) -> f64 {
    match op {
        FUn::Neg => -x,
        FUn::Abs => x.abs(),
        FUn::Sqrt => x.sqrt(),
        FUn::Rcp => 1.0 / x,
        FUn::Rsqrt => 1.0 / x.sqrt(),
        FUn::Ex2 => x.exp2(),
        FUn::Lg2 => x.log2(),
        FUn::Sin => x.sin(),
        FUn::Cos => x.cos(),
        FUn::Tanh => x.tanh(),
    }
}

fn float_un32(op: FUn, x: f32) -> f32 {
    match op {
        FUn::Neg => -x,
        FUn::Abs => x.abs(),
        FUn::Sqrt => x.sqrt(),
        FUn::Rcp => 1.0 / x,
        // The approximate functions are computed in f64 and rounded once.
        _ => float_un64(op, f64::from(x)) as f32,
    }
}

fn compare(cmp: Cmp, ty: Ty, ftz: bool, a: u64, b: u64) -> bool {
    if ty.float() {
        let (x, y) = match ty {
            Ty::F32 => (f64::from(f32v(a, ftz)), f64::from(f32v(b, ftz))),
            _ => (f64::from_bits(a), f64::from_bits(b)),
        };
        let un = x.is_nan() || y.is_nan();
        match cmp {
            Cmp::Eq => x == y,
            Cmp::Ne => !un && x != y,
            Cmp::Lt => x < y,
            Cmp::Le => x <= y,
            Cmp::Gt => x > y,
            Cmp::Ge => x >= y,
            Cmp::Equ => un || x == y,
            Cmp::Neu => x != y,
            Cmp::Ltu => un || x < y,
            Cmp::Leu => un || x <= y,
            Cmp::Gtu => un || x > y,
            Cmp::Geu => un || x >= y,
            Cmp::Num => !un,
            Cmp::Nan => un,
            Cmp::Lo | Cmp::Ls | Cmp::Hi | Cmp::Hs => false,
        }
    } else {
        let bits = ty.bits();
        let (au, bu) = (mask(a, bits), mask(b, bits));
        let (ai, bi) = (sext(a, bits), sext(b, bits));
        let s = ty.signed();
        match cmp {
            Cmp::Eq => au == bu,
            Cmp::Ne => au != bu,
            Cmp::Lt if s => ai < bi,
            Cmp::Le if s => ai <= bi,
            Cmp::Gt if s => ai > bi,
            Cmp::Ge if s => ai >= bi,
            Cmp::Lt | Cmp::Lo => au < bu,
            Cmp::Le | Cmp::Ls => au <= bu,
            Cmp::Gt | Cmp::Hi => au > bu,
            Cmp::Ge | Cmp::Hs => au >= bu,
            _ => false,
        }
    }
}

fn testp(kind: TestKind, ty: Ty, a: u64) -> bool {
    let x = if ty == Ty::F32 {
        f64::from(f32::from_bits(a as u32))
    } else {
        f64::from_bits(a)
    };
    let sub = if ty == Ty::F32 {
        f32::from_bits(a as u32).is_subnormal()
    } else {
        x.is_subnormal()
    };
    match kind {
        TestKind::Nan => x.is_nan(),
        TestKind::Finite => x.is_finite(),
        TestKind::Infinite => x.is_infinite(),
        TestKind::Number => !x.is_nan(),
        TestKind::Normal => x.is_finite() && x != 0.0 && !sub,
        TestKind::Subnormal => sub,
    }
}

#[inline(always)]
fn read_le(s: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..s.len()].copy_from_slice(s);
    u64::from_le_bytes(b)
}

fn space_name(s: Space) -> &'static str {
    match s {
        Space::Global => "global",
        Space::Shared => "shared",
        Space::Param => "param",
        Space::Generic => "generic",
    }
}

/// Where a thread stopped.
enum Stop {
    Sync,
    Exit,
}

impl Ctx<'_> {
    fn fault(&self, b: [u32; 3], block: [u32; 3], t: usize, pc: u32, fault: Fault) -> Error {
        let line = self.e.lines[pc as usize];
        Error::Fault {
            entry: self.e.name.clone(),
            block: b,
            thread: thread_index(t as u32, block),
            line: line as usize,
            instruction: self.m.line_text(line),
            fault,
        }
    }

    fn run_block(
        &mut self,
        blk: &mut Block,
        mem: &mut Memory,
        b: [u32; 3],
        bdim: [u32; 3],
    ) -> Result<(), Error> {
        let n = blk.state.len();
        loop {
            for t in 0..n {
                if blk.state[t] == State::Ready {
                    if let Err(f) = self.run_thread(blk, mem, t) {
                        return Err(self.fault(b, bdim, t, blk.pc[t], f));
                    }
                }
            }
            if blk.state.iter().all(|&s| s == State::Exited) {
                return Ok(());
            }
            let progressed = self.resolve(blk, b, bdim)?;
            if !progressed {
                return Err(self.deadlock(blk, b));
            }
        }
    }

    fn deadlock(&self, blk: &Block, b: [u32; 3]) -> Error {
        let mut groups: std::collections::BTreeMap<(u32, &str), Vec<usize>> = Default::default();
        for (t, &s) in blk.state.iter().enumerate() {
            let what = match s {
                State::Bar => "bar.sync",
                State::Warp => "bar.warp.sync",
                State::Shfl => "shfl.sync",
                _ => continue,
            };
            groups
                .entry((self.e.lines[blk.pc[t] as usize], what))
                .or_default()
                .push(t);
        }
        let exited = blk.state.iter().filter(|&&s| s == State::Exited).count();
        let mut parts: Vec<String> = groups
            .iter()
            .map(|((line, what), ts)| {
                format!(
                    "{} thread(s) wait at {what} on line {line} (threads {}..={})",
                    ts.len(),
                    ts[0],
                    ts[ts.len() - 1]
                )
            })
            .collect();
        parts.push(format!("{exited} exited"));
        Error::Deadlock {
            entry: self.e.name.clone(),
            block: b,
            detail: parts.join("; "),
        }
    }

    /// Completes every sync point whose participants have all arrived; false if none could.
    fn resolve(&mut self, blk: &mut Block, b: [u32; 3], bdim: [u32; 3]) -> Result<bool, Error> {
        let n = blk.state.len();
        let mut progressed = false;
        // Block barrier.
        if blk
            .state
            .iter()
            .all(|&s| s == State::Bar || s == State::Exited)
        {
            for t in 0..n {
                if blk.state[t] == State::Bar {
                    blk.state[t] = State::Ready;
                    blk.pc[t] += 1;
                }
            }
            self.stats.barriers += 1;
            return Ok(true);
        }
        // Warp-level syncs.
        let nr = blk.nregs;
        for w in 0..n.div_ceil(32) {
            let lanes = w * 32..(w * 32 + 32).min(n);
            // Groups of lanes waiting at the same instruction.
            let mut pcs: Vec<u32> = lanes
                .clone()
                .filter(|&t| matches!(blk.state[t], State::Warp | State::Shfl))
                .map(|t| blk.pc[t])
                .collect();
            pcs.sort_unstable();
            pcs.dedup();
            for pc in pcs {
                let inst = &self.e.insts[pc as usize];
                let in_group =
                    |t: usize| matches!(blk.state[t], State::Warp | State::Shfl) && blk.pc[t] == pc;
                let mut group = 0u32;
                for t in lanes.clone() {
                    if in_group(t) {
                        group |= 1 << (t - w * 32);
                    }
                }
                let mask_src = match inst.op {
                    Op::WarpSync { mask } | Op::Shfl { mask, .. } => mask,
                    _ => unreachable!("only warp sync instructions wait here"),
                };
                let mut release = 0u32;
                for lane in 0..32u32 {
                    if group & (1 << lane) == 0 {
                        continue;
                    }
                    let t = w * 32 + lane as usize;
                    let mask = get(&blk.regs[t * nr..(t + 1) * nr], mask_src) as u32;
                    let fault = |f| self.fault(b, bdim, t, pc, f);
                    if mask & (1 << lane) == 0 {
                        return Err(fault(Fault::NotInMask { mask, lane }));
                    }
                    for j in 0..32u32 {
                        if mask & (1 << j) == 0 {
                            continue;
                        }
                        let tj = w * 32 + j as usize;
                        if tj >= n {
                            return Err(fault(Fault::MissingLane { mask, lane: j }));
                        }
                        if blk.state[tj] == State::Exited {
                            return Err(fault(Fault::ExitedLane { mask, lane: j }));
                        }
                    }
                    if mask & !group == 0 {
                        release |= 1 << lane;
                    }
                }
                if release == 0 {
                    continue;
                }
                progressed = true;
                if let Op::Shfl {
                    mode,
                    d,
                    p,
                    a,
                    b: bs,
                    c,
                    mask: ms,
                } = inst.op
                {
                    let mut out = [(0u64, false); 32];
                    for lane in 0..32u32 {
                        if release & (1 << lane) == 0 {
                            continue;
                        }
                        let t = w * 32 + lane as usize;
                        let r = &blk.regs[t * nr..(t + 1) * nr];
                        let mask = get(r, ms) as u32;
                        let bval = (get(r, bs) & 31) as i32;
                        let cv = get(r, c) as u32;
                        let seg = ((cv >> 8) & 31) as i32;
                        let cval = (cv & 31) as i32;
                        let l = lane as i32;
                        let max_lane = (l & seg) | (cval & !seg);
                        let min_lane = l & seg;
                        let (j, pval) = match mode {
                            ShflMode::Up => (l - bval, l - bval >= max_lane),
                            ShflMode::Down => (l + bval, l + bval <= max_lane),
                            ShflMode::Bfly => (l ^ bval, (l ^ bval) <= max_lane),
                            ShflMode::Idx => {
                                let j = min_lane | (bval & !seg);
                                (j, j <= max_lane)
                            }
                        };
                        let j = if pval { j as u32 } else { lane };
                        if mask & (1 << j) == 0 {
                            return Err(self.fault(
                                b,
                                bdim,
                                t,
                                pc,
                                Fault::ShflSource { mask, src: j },
                            ));
                        }
                        let tj = w * 32 + j as usize;
                        out[lane as usize] = (
                            get(&blk.regs[tj * nr..(tj + 1) * nr], a) as u32 as u64,
                            pval,
                        );
                    }
                    for lane in 0..32usize {
                        if release & (1 << lane) != 0 {
                            let t = w * 32 + lane;
                            blk.regs[t * nr + d as usize] = out[lane].0;
                            blk.regs[t * nr + p as usize] = u64::from(out[lane].1);
                            self.stats.shuffles += 1;
                        }
                    }
                }
                for lane in 0..32usize {
                    if release & (1 << lane) != 0 {
                        let t = w * 32 + lane;
                        blk.state[t] = State::Ready;
                        blk.pc[t] += 1;
                    }
                }
            }
        }
        Ok(progressed)
    }

    /// Resolves an access of `size` bytes at `addr` in `space` to its bytes.
    #[inline(always)]
    fn access<'b>(
        space: Space,
        addr: u64,
        size: u32,
        mem: &'b mut Memory,
        shared: &'b mut [u8],
        params: &'b [u8],
        pscratch: &'b mut [u8; 32],
    ) -> Result<&'b mut [u8], Fault> {
        let (space, addr) = match space {
            Space::Generic if addr.wrapping_sub(SHARED_WINDOW) < (1 << 32) => {
                (Space::Shared, addr - SHARED_WINDOW)
            }
            Space::Generic => (Space::Global, addr),
            s => (s, addr),
        };
        if addr % u64::from(size) != 0 {
            return Err(Fault::Misaligned {
                space: space_name(space),
                addr,
                size,
            });
        }
        let oob = || Fault::OutOfBounds {
            space: space_name(space),
            addr,
            size,
        };
        let sz = size as usize;
        match space {
            Space::Global => mem.global(addr, sz).ok_or_else(oob),
            Space::Shared => {
                let a = usize::try_from(addr).map_err(|_| oob())?;
                shared
                    .get_mut(a..a.checked_add(sz).ok_or_else(oob)?)
                    .ok_or_else(oob)
            }
            _ => {
                let a = usize::try_from(addr).map_err(|_| oob())?;
                let src = params
                    .get(a..a.checked_add(sz).ok_or_else(oob)?)
                    .ok_or_else(oob)?;
                pscratch[..sz].copy_from_slice(src);
                Ok(&mut pscratch[..sz])
            }
        }
    }

    /// Runs thread `t` until it reaches a sync point or exits.
    fn run_thread(&mut self, blk: &mut Block, mem: &mut Memory, t: usize) -> Result<Stop, Fault> {
        let nr = blk.nregs;
        let regs = &mut blk.regs[t * nr..(t + 1) * nr];
        let shared = &mut blk.shared[..];
        let insts = &self.e.insts[..];
        let mut pc = blk.pc[t] as usize;
        let mut count: u64 = 0;
        let mut pscratch = [0u8; 32];
        let result = loop {
            let inst = &insts[pc];
            count += 1;
            if inst.guard != NO_GUARD && (regs[inst.guard as usize] != 0) == inst.guard_neg {
                pc += 1;
                continue;
            }
            match inst.op {
                Op::Mov { ty, d, a } => regs[d as usize] = ty.ext(get(regs, a)),
                Op::Pack { d, ref parts, w } => {
                    let mut v = 0u64;
                    for (k, &p) in parts.iter().enumerate() {
                        v |= mask(get(regs, p), w) << (w * k as u32);
                    }
                    regs[d as usize] = v;
                }
                Op::Unpack { ref parts, a, w } => {
                    let v = get(regs, a);
                    for (k, &p) in parts.iter().enumerate() {
                        regs[p as usize] = mask(v >> (w * k as u32), w);
                    }
                }
                Op::Int { op, ty, d, a, b } => {
                    regs[d as usize] = int_bin(op, ty, get(regs, a), get(regs, b))
                }
                Op::IntUn { op, ty, d, a } => regs[d as usize] = int_un(op, ty, get(regs, a)),
                Op::Wide {
                    mad,
                    ty,
                    d,
                    a,
                    b,
                    c,
                } => {
                    let bits = ty.bits();
                    let (x, y) = (get(regs, a), get(regs, b));
                    let p = if ty.signed() {
                        (sext(x, bits).wrapping_mul(sext(y, bits))) as u64
                    } else {
                        mask(x, bits).wrapping_mul(mask(y, bits))
                    };
                    let p = if mad { p.wrapping_add(get(regs, c)) } else { p };
                    let wide = match ty {
                        Ty::S16 => Ty::S32,
                        Ty::U16 => Ty::U32,
                        Ty::S32 => Ty::S64,
                        _ => Ty::U64,
                    };
                    regs[d as usize] = wide.ext(p);
                }
                Op::Mad { hi, ty, d, a, b, c } => {
                    let (x, y, z) = (get(regs, a), get(regs, b), get(regs, c));
                    let p = if hi {
                        mul_hi(ty, x, y)
                    } else {
                        x.wrapping_mul(y)
                    };
                    regs[d as usize] = ty.ext(p.wrapping_add(z));
                }
                Op::Float {
                    op,
                    ty,
                    ftz,
                    sat,
                    d,
                    a,
                    b,
                } => {
                    let (x, y) = (get(regs, a), get(regs, b));
                    regs[d as usize] = if ty == Ty::F32 {
                        let mut r = float_bin(op, f32v(x, ftz), f32v(y, ftz), f32::copysign);
                        if ftz {
                            r = ftz32(r);
                        }
                        if sat {
                            r = sat32(r);
                        }
                        u64::from(r.to_bits())
                    } else {
                        let mut r =
                            float_bin(op, f64::from_bits(x), f64::from_bits(y), f64::copysign);
                        if sat {
                            r = sat64(r);
                        }
                        r.to_bits()
                    };
                }
                Op::FloatUn {
                    op,
                    ty,
                    ftz,
                    sat,
                    d,
                    a,
                } => {
                    let x = get(regs, a);
                    regs[d as usize] = if ty == Ty::F32 {
                        let mut r = float_un32(op, f32v(x, ftz));
                        if ftz {
                            r = ftz32(r);
                        }
                        if sat {
                            r = sat32(r);
                        }
                        u64::from(r.to_bits())
                    } else {
                        let mut r = float_un64(op, f64::from_bits(x));
                        if sat {
                            r = sat64(r);
                        }
                        r.to_bits()
                    };
                }
                Op::Fma {
                    ty,
                    ftz,
                    sat,
                    d,
                    a,
                    b,
                    c,
                } => {
                    let (x, y, z) = (get(regs, a), get(regs, b), get(regs, c));
                    regs[d as usize] = if ty == Ty::F32 {
                        let mut r = f32v(x, ftz).mul_add(f32v(y, ftz), f32v(z, ftz));
                        if ftz {
                            r = ftz32(r);
                        }
                        if sat {
                            r = sat32(r);
                        }
                        u64::from(r.to_bits())
                    } else {
                        let mut r = f64::from_bits(x).mul_add(f64::from_bits(y), f64::from_bits(z));
                        if sat {
                            r = sat64(r);
                        }
                        r.to_bits()
                    };
                }
                Op::Setp {
                    cmp,
                    ty,
                    ftz,
                    p,
                    q,
                    a,
                    b,
                    bop,
                    c,
                    cneg,
                } => {
                    let r = compare(cmp, ty, ftz, get(regs, a), get(regs, b));
                    let cv = (get(regs, c) != 0) != cneg;
                    let comb = |x: bool| match bop {
                        BoolOp::None => x,
                        BoolOp::And => x && cv,
                        BoolOp::Or => x || cv,
                        BoolOp::Xor => x != cv,
                    };
                    regs[p as usize] = u64::from(comb(r));
                    regs[q as usize] = u64::from(comb(!r));
                }
                Op::Selp { ty, d, a, b, c } => {
                    let v = if get(regs, c) != 0 {
                        get(regs, a)
                    } else {
                        get(regs, b)
                    };
                    regs[d as usize] = ty.ext(v);
                }
                Op::Cvt {
                    dty,
                    sty,
                    rnd,
                    sat,
                    ftz,
                    d,
                    a,
                } => regs[d as usize] = cvt(get(regs, a), dty, sty, rnd, sat, ftz),
                Op::Testp { kind, ty, p, a } => {
                    regs[p as usize] = u64::from(testp(kind, ty, get(regs, a)))
                }
                Op::Cvta {
                    to,
                    shared: sh,
                    d,
                    a,
                } => {
                    let v = get(regs, a);
                    regs[d as usize] = match (sh, to) {
                        (false, _) => v,
                        (true, true) => v.wrapping_sub(SHARED_WINDOW),
                        (true, false) => v.wrapping_add(SHARED_WINDOW),
                    };
                }
                Op::Ld {
                    space,
                    ty,
                    n,
                    d,
                    base,
                    off,
                } => {
                    let es = ty.bytes();
                    let addr = get(regs, base).wrapping_add(off as u64);
                    let bytes = match Self::access(
                        space,
                        addr,
                        es * u32::from(n),
                        mem,
                        shared,
                        self.params,
                        &mut pscratch,
                    ) {
                        Ok(b) => b,
                        Err(f) => break Err(f),
                    };
                    for k in 0..n as usize {
                        let es = es as usize;
                        regs[d[k] as usize] = ty.ext(read_le(&bytes[k * es..(k + 1) * es]));
                    }
                    if space != Space::Param {
                        self.stats.global_loads += 1;
                    }
                }
                Op::St {
                    space,
                    ty,
                    n,
                    s,
                    base,
                    off,
                } => {
                    let es = ty.bytes();
                    let addr = get(regs, base).wrapping_add(off as u64);
                    let bytes = match Self::access(
                        space,
                        addr,
                        es * u32::from(n),
                        mem,
                        shared,
                        self.params,
                        &mut pscratch,
                    ) {
                        Ok(b) => b,
                        Err(f) => break Err(f),
                    };
                    for k in 0..n as usize {
                        let es = es as usize;
                        bytes[k * es..(k + 1) * es]
                            .copy_from_slice(&get(regs, s[k]).to_le_bytes()[..es]);
                    }
                    self.stats.global_stores += 1;
                }
                Op::Atom {
                    space,
                    op,
                    ty,
                    d,
                    base,
                    off,
                    b,
                    c,
                } => {
                    let es = ty.bytes();
                    let addr = get(regs, base).wrapping_add(off as u64);
                    let bytes = match Self::access(
                        space,
                        addr,
                        es,
                        mem,
                        shared,
                        self.params,
                        &mut pscratch,
                    ) {
                        Ok(b) => b,
                        Err(f) => break Err(f),
                    };
                    let old = read_le(bytes);
                    let (x, y) = (get(regs, b), get(regs, c));
                    let new = match (op, ty) {
                        // atom.add.f32 flushes subnormal inputs and results.
                        (AtomOp::Add, Ty::F32) => {
                            u64::from(ftz32(f32v(old, true) + f32v(x, true)).to_bits())
                        }
                        (AtomOp::Add, Ty::F64) => {
                            (f64::from_bits(old) + f64::from_bits(x)).to_bits()
                        }
                        (AtomOp::Add, _) => old.wrapping_add(x),
                        (AtomOp::Min, _) => int_bin(IOp::Min, ty, old, x),
                        (AtomOp::Max, _) => int_bin(IOp::Max, ty, old, x),
                        (AtomOp::Exch, _) => x,
                        (AtomOp::Cas, _) => {
                            if mask(old, es * 8) == mask(x, es * 8) {
                                y
                            } else {
                                old
                            }
                        }
                        (AtomOp::And, _) => old & x,
                        (AtomOp::Or, _) => old | x,
                        (AtomOp::Xor, _) => old ^ x,
                    };
                    let es = es as usize;
                    bytes.copy_from_slice(&new.to_le_bytes()[..es]);
                    regs[d as usize] = ty.ext(old);
                }
                Op::Bra { target } => {
                    pc = target as usize;
                    if self.stats.instructions + count > self.limit {
                        break Err(Fault::InstructionLimit(self.limit));
                    }
                    continue;
                }
                Op::Exit => break Ok(Stop::Exit),
                Op::BarSync | Op::WarpSync { .. } | Op::Shfl { .. } => break Ok(Stop::Sync),
                Op::Nop => {}
            }
            pc += 1;
        };
        self.stats.instructions += count;
        blk.pc[t] = pc as u32;
        match result {
            Ok(Stop::Exit) => blk.state[t] = State::Exited,
            Ok(Stop::Sync) => {
                blk.state[t] = match insts[pc].op {
                    Op::BarSync => State::Bar,
                    Op::WarpSync { .. } => State::Warp,
                    _ => State::Shfl,
                }
            }
            Err(_) => {}
        }
        result
    }
}
