//! A PTX interpreter: the oracle that makes memc's PTX emitter testable without a GPU.
//!
//! **The API below is ready and stable**; later changes only add to it.
//!
//! ```no_run
//! use memc_ptx_interp::{Launch, Memory, Module};
//! # fn main() -> Result<(), memc_ptx_interp::Error> {
//! # let ptx_text = "";
//! let module = Module::parse(ptx_text)?;
//! let mut mem = Memory::new();
//! let arena = mem.add(vec![0u8; 4096]);
//! let launch = Launch { grid: [4, 1, 1], block: [256, 1, 1], shared_bytes: 0 };
//! let stats = module.launch("kernel_0", launch, &[arena, 0, 0], &mut mem)?;
//! let bytes: &[u8] = mem.bytes(arena);
//! # let _ = (stats, bytes); Ok(()) }
//! ```
//!
//! - [`Module::parse`] reads a module once into pre-decoded instructions (registers resolved
//!   to slots, labels to indices); [`Module::entries`] lists its `.entry` names.
//! - [`Memory`] holds the device buffers. [`Memory::add`] returns a buffer's device base
//!   address (256-aligned; buffers lie 2^40 bytes apart, so an offset that runs past one
//!   buffer never lands in another). A global access must lie wholly inside one buffer.
//! - [`Module::launch`] runs one grid. `params` are the entry's `.param` values in order, each
//!   given as the zero-extended bits of the parameter (`.u64` addresses, `.u32`, `.f32` bits).
//!   It returns [`Stats`] or an [`Error`] that names the entry, the instruction (text and
//!   line), the block and thread, and the address.
//!
//! # Semantics
//! Blocks run one after another in grid order (x fastest). Inside a block each thread runs
//! until it reaches a sync point (`bar.sync 0`, `bar.warp.sync`, `shfl.sync`) or exits, which
//! gives the result of lockstep execution for any program without a data race. `bar.sync 0`
//! completes when every thread of the block that has not exited has arrived. A warp-level sync
//! completes for a lane when every lane named in its membermask waits at the same
//! instruction; a membermask that names an exited lane, a lane outside the block, or not the
//! lane itself is an error, and so is a shuffle that reads a lane outside its membermask. When
//! no thread can move, the launch fails with [`Error::Deadlock`]; it never hangs. A launch
//! also stops after [`Module::instruction_limit`] instructions (default 10^10), so an endless
//! loop is an error as well.
//!
//! Numbers follow the PTX ISA: `.rn` arithmetic, `div.rn`, `sqrt.rn` and `rcp.rn` are
//! correctly rounded; `.approx` functions are computed (nearly) exactly; `.ftz` flushes f32
//! subnormal inputs and results to a zero of the same sign; `min`/`max` return the non-NaN
//! operand and order -0 below +0; float-to-integer `cvt` saturates and maps NaN to 0; `shl`
//! and `shr` clamp shift amounts to the width and `shr.s` is arithmetic; integer division by
//! zero gives all ones (`rem` gives the dividend), as the hardware does.
//!
//! Memory: shared memory per block is the static `.shared` declarations plus
//! `Launch::shared_bytes` of dynamic `.extern .shared`, and starts filled with 0xFF bytes (f32
//! NaN) so a kernel that reads shared memory it never wrote shows it. Out-of-bounds and
//! misaligned accesses (address not a multiple of the whole access size, vectors included)
//! are errors in every space. Registers read before any write read 0.
//!
//! # The supported subset
//! The instructions of `/work/HELPERS.md`'s PTX subset: `ld`/`st` (`.global`, `.shared`,
//! `.param`, generic; scalar and `.v2`/`.v4`; cache qualifiers ignored), `mov` (also special
//! registers, shared symbol addresses and `{lo, hi}` packing), integer `add sub mul.lo mul.hi
//! mul.wide mad.lo mad.hi mad.wide div rem neg abs min max and or xor not cnot shl shr popc clz
//! brev`, float `add sub mul div fma mad.rn neg abs min max copysign sqrt rcp rsqrt ex2 lg2 sin
//! cos tanh` (f32 and f64), `setp` (every comparison, `.and/.or/.xor`, `p|q`), `selp`, `cvt`
//! between all integer and float types incl. f16 with every rounding mode, `.sat` and `.ftz`,
//! `cvta`, `testp`, `atom`/`red` (`add min max exch cas and or xor`), `bra`, `ret`/`exit`,
//! `bar.sync 0`, `bar.warp.sync`, `shfl.sync`, `membar`/`fence` (no-ops). Unsupported text is
//! a parse error naming the line, never silently skipped.

mod exec;
mod num;
mod parse;

use std::collections::HashMap;

pub use exec::Stats;

/// Why a thread could not go on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Fault {
    #[error("{space} access of {size} bytes at {addr:#x} is out of bounds")]
    OutOfBounds {
        space: &'static str,
        addr: u64,
        size: u32,
    },
    #[error("{space} access of {size} bytes at {addr:#x} is misaligned")]
    Misaligned {
        space: &'static str,
        addr: u64,
        size: u32,
    },
    #[error("membermask {mask:#x} names lane {lane}, which has exited")]
    ExitedLane { mask: u32, lane: u32 },
    #[error("membermask {mask:#x} names lane {lane}, which is not in the block")]
    MissingLane { mask: u32, lane: u32 },
    #[error("membermask {mask:#x} does not contain the executing lane {lane}")]
    NotInMask { mask: u32, lane: u32 },
    #[error("shfl reads lane {src}, which is not in membermask {mask:#x}")]
    ShflSource { mask: u32, src: u32 },
    #[error("the instruction limit of {0} was exceeded")]
    InstructionLimit(u64),
}

/// An expected failure: bad PTX, a bad launch, or a kernel that faults or deadlocks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("PTX line {line}: {message}")]
    Parse { line: usize, message: String },
    #[error("no entry named `{0}` in the module")]
    UnknownEntry(String),
    #[error("launch of `{entry}`: {message}")]
    Launch { entry: String, message: String },
    #[error("`{entry}` block {block:?} thread {thread:?}: line {line} `{instruction}`: {fault}")]
    Fault {
        entry: String,
        block: [u32; 3],
        thread: [u32; 3],
        line: usize,
        instruction: String,
        fault: Fault,
    },
    #[error("`{entry}` block {block:?}: deadlock: {detail}")]
    Deadlock {
        entry: String,
        block: [u32; 3],
        detail: String,
    },
}

/// A launch configuration, as in CUDA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Bytes of dynamic (`.extern .shared`) shared memory per block.
    pub shared_bytes: u32,
}

/// A parsed PTX module.
#[derive(Clone, Debug)]
pub struct Module {
    entries: Vec<parse::Entry>,
    by_name: HashMap<String, usize>,
    /// The source lines, for error messages.
    source: Vec<String>,
    limit: u64,
}

impl Module {
    /// Parses PTX text; an unsupported construct is an [`Error::Parse`] naming its line.
    pub fn parse(text: &str) -> Result<Module, Error> {
        let parsed = parse::parse(text)?;
        let by_name = parsed
            .entries
            .iter()
            .enumerate()
            .map(|(k, e)| (e.name.clone(), k))
            .collect();
        Ok(Module {
            entries: parsed.entries,
            by_name,
            source: text.lines().map(|l| l.trim().to_string()).collect(),
            limit: 10_000_000_000,
        })
    }

    /// The names of the module's entries, in order of definition.
    pub fn entries(&self) -> impl Iterator<Item = &str> + '_ {
        self.entries.iter().map(|e| e.name.as_str())
    }

    /// The most instructions one launch may execute before it fails with
    /// [`Fault::InstructionLimit`].
    pub fn instruction_limit(&self) -> u64 {
        self.limit
    }

    pub fn set_instruction_limit(&mut self, limit: u64) {
        self.limit = limit;
    }

    /// Runs `entry` over the grid. See the crate documentation for the semantics.
    pub fn launch(
        &self,
        entry: &str,
        launch: Launch,
        params: &[u64],
        mem: &mut Memory,
    ) -> Result<Stats, Error> {
        let &k = self
            .by_name
            .get(entry)
            .ok_or_else(|| Error::UnknownEntry(entry.to_string()))?;
        exec::launch(self, &self.entries[k], launch, params, mem)
    }

    fn line_text(&self, line: u32) -> String {
        self.source
            .get((line as usize).wrapping_sub(1))
            .cloned()
            .unwrap_or_default()
    }
}

/// Device memory: separate buffers at far-apart base addresses.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    bufs: Vec<Option<Vec<u8>>>,
}

/// Buffer `k` starts at `(k + 1) << BUF_SHIFT`.
const BUF_SHIFT: u32 = 40;

impl Memory {
    pub fn new() -> Memory {
        Memory::default()
    }

    /// Adds a buffer and returns its device base address.
    pub fn add(&mut self, bytes: Vec<u8>) -> u64 {
        self.bufs.push(Some(bytes));
        (self.bufs.len() as u64) << BUF_SHIFT
    }

    /// The bytes of the buffer at `base`. Panics if `base` is not a base address returned by
    /// [`Memory::add`] (a bug in the caller, not in the kernel).
    pub fn bytes(&self, base: u64) -> &[u8] {
        self.buf_index(base)
            .and_then(|k| self.bufs[k].as_deref())
            .expect("not a live buffer base address")
    }

    /// The bytes of the buffer at `base`, writable. Panics like [`Memory::bytes`].
    pub fn bytes_mut(&mut self, base: u64) -> &mut [u8] {
        let k = self.buf_index(base).expect("not a buffer base address");
        self.bufs[k].as_deref_mut().expect("buffer already taken")
    }

    /// Removes the buffer at `base` and returns its bytes. Panics like [`Memory::bytes`].
    pub fn take(&mut self, base: u64) -> Vec<u8> {
        let k = self.buf_index(base).expect("not a buffer base address");
        self.bufs[k].take().expect("buffer already taken")
    }

    fn buf_index(&self, base: u64) -> Option<usize> {
        let k = (base >> BUF_SHIFT) as usize;
        (base & ((1 << BUF_SHIFT) - 1) == 0 && k >= 1 && k <= self.bufs.len()).then(|| k - 1)
    }

    /// The bytes `[addr, addr + size)` if they lie inside one live buffer.
    #[inline(always)]
    fn global(&mut self, addr: u64, size: usize) -> Option<&mut [u8]> {
        let k = (addr >> BUF_SHIFT) as usize;
        let off = (addr & ((1 << BUF_SHIFT) - 1)) as usize;
        let buf = self.bufs.get_mut(k.wrapping_sub(1))?.as_mut()?;
        buf.get_mut(off..off.checked_add(size)?)
    }
}
