//! The plan file: what `memc compile` writes and `memc run` loads.
//!
//! A plan file holds one [`PlanMeta`] (the lowered [`Program`] plus descriptive fields) and the
//! bytes of every weight the program reads, laid out so the weights can be memory-mapped and
//! used in place. It is read as untrusted input: every field is checked before anything trusts
//! it, and [`Program::validate`] runs before any kernel can.
//!
//! # Layout
//!
//! All integers are little-endian. The file is three consecutive parts:
//!
//! 1. The header, [`HEADER_LEN`] = 64 bytes:
//!
//!    | bytes  | type     | field                                                         |
//!    |--------|----------|---------------------------------------------------------------|
//!    | 0..8   | [u8; 8]  | magic, the ASCII bytes `MEMCPLAN`                             |
//!    | 8..12  | u32      | format version, [`PLAN_FORMAT_VERSION`](crate::PLAN_FORMAT_VERSION) when written |
//!    | 12..16 | u32      | header length in bytes (64 in versions 1 and 2)               |
//!    | 16..24 | u64      | metadata offset: the file offset of the metadata (= 64)       |
//!    | 24..32 | u64      | metadata length in bytes                                      |
//!    | 32..40 | u64      | weights offset: a multiple of [`WEIGHTS_ALIGN`] (4096), at or after the end of the metadata |
//!    | 40..48 | u64      | weights length in bytes (= the program's `weights_size`)      |
//!    | 48..52 | u32      | CRC-32 (IEEE, as `crc32fast` computes it) of the metadata     |
//!    | 52..56 | u32      | CRC-32 of the weights section                                 |
//!    | 56..60 | u32      | reserved, zero                                                |
//!    | 60..64 | u32      | CRC-32 of header bytes 0..60                                  |
//!
//! 2. The metadata: [`PlanMeta`] as compact UTF-8 JSON (serde's encoding of the structs in this
//!    module and of [`memc_codegen::Program`]), followed by zero bytes up to the weights offset.
//!    Its `memory_report` (version 5) is the memory plan's report, the JSON object `memc compile
//!    --emit plan-json` prints (memc's `report::MemoryReport`); the runtime stores it as opaque
//!    JSON and never reads it, `memc report` renders it.
//!
//! 3. The weights section: `weights length` bytes. Each [`WeightSlot`] of the program holds its
//!    weight's bytes at `weights offset + slot.byte_offset`; slots are 64-byte aligned
//!    ([`memc_codegen::program::WEIGHT_ALIGN`]), so with the section page-aligned every weight is
//!    64-byte aligned in memory when the file is mapped. Bytes outside every slot are zero.
//!
//! The file ends exactly at the end of the weights section (the padding before it is written
//! even when the weights are empty), so a truncated copy is always detected.
//!
//! # Reading
//!
//! [`PlanFile::open`] maps the file and checks, in this order, each with its own error: the file
//! is long enough for the magic, the magic, the version (before anything else in the header, so a
//! future format with a different header is reported as a version; versions from
//! [`OLDEST_PLAN_FORMAT_VERSION`](crate::OLDEST_PLAN_FORMAT_VERSION) on are read: version 4 has
//! the same layout and lacks only `memory_report`, read as `None`; versions 4 and 5 have no
//! output with a run-time extent, `IoTensor::extent`, and one that claims one is refused;
//! versions 4 to 6 have no implicit im2col operand, and versions 4 to 7 no Winograd
//! contraction; one that claims one is refused), the
//! header length, the
//! header checksum, the section bounds (and that the file ends where the weights do), the
//! metadata checksum, the JSON, [`Program::validate`], that the weights section is as long as
//! the program says, and the PTX (below). The weights checksum reads every weight page, so it is
//! a separate call, [`PlanFile::verify_weights`].
//!
//! # PTX
//!
//! A plan for the `cuda` target stores its PTX module and launch list (`PlanMeta::ptx`), so
//! `memc inspect` and people can read what will run; every other target stores `null`. The
//! stored PTX is never trusted: [`PlanFile::open`] emits the PTX again from the validated
//! program ([`memc_codegen::ptx::emit_program`]) and refuses the plan when the two differ in
//! any byte or launch, so only PTX produced from validated kernels ever runs. A `cuda` plan
//! without PTX, or a plan of another target with some, is refused too.
//!
//! # Writing
//!
//! [`write_plan`] streams every weight from the [`WeightStore`] (usually a map of the model
//! file) into the file through one buffered writer, never holding all of them in memory; it
//! writes into a temporary file beside the target and renames it into place only when
//! everything succeeded, so a failed compile never leaves a partial plan, and a session that
//! has the old plan mapped keeps reading the old file. [`write_plan_with_progress`] reports
//! how many bytes of the weights section are written (a terminal bar in the CLI, a callback in
//! Python) and can cancel the write.

use crate::error::{Result, RuntimeError};
use crate::{OLDEST_PLAN_FORMAT_VERSION, PLAN_FORMAT_VERSION};
use memc_codegen::program::WeightSlot;
use memc_codegen::{KernelBody, Program};
use memc_ir::{WeightBytes, WeightStore};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The first eight bytes of every plan file.
pub const MAGIC: [u8; 8] = *b"MEMCPLAN";
/// The header's length in every format version.
pub const HEADER_LEN: u64 = 64;
/// The first format version whose metadata holds `memory_report`.
pub const FIRST_VERSION_WITH_REPORT: u32 = 5;
/// The first format version whose outputs may have a run-time extent (`IoTensor::extent`).
pub const FIRST_VERSION_WITH_EXTENTS: u32 = 6;
/// The first format version whose contractions may read an implicit im2col operand
/// (`ContractB::Im2col`).
pub const FIRST_VERSION_WITH_IMPLICIT_IM2COL: u32 = 7;
/// The first format version whose contractions may run as Winograd (`Contract::winograd`).
pub const FIRST_VERSION_WITH_WINOGRAD: u32 = 8;
/// Alignment of the weights section's file offset (a page on every common system).
pub const WEIGHTS_ALIGN: u64 = 4096;

/// Everything a plan file says besides the weights' bytes: the program and what `memc inspect`
/// shows about where it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanMeta {
    /// The version of memc that wrote the plan.
    pub memc_version: String,
    /// The model's file name, without directories (`resnet50.onnx`).
    pub model: String,
    /// The code generation target the kernels were lowered for (`cpu`).
    pub target: String,
    /// The symbolic dims bound at compile time (`--dim batch=1`), in the order given.
    pub dims: Vec<(String, u64)>,
    /// The memory planner's figures; `None` for programs built without the planner.
    pub planner: Option<PlannerSummary>,
    pub program: Program,
    /// The program's PTX module and launch list, for the `cuda` target (`None` otherwise).
    /// Always present in the JSON (`null` when `None`): a missing field is an error.
    #[serde(deserialize_with = "required_option")]
    pub ptx: Option<memc_codegen::ptx::PtxModule>,
    /// The memory plan's report (the JSON of `memc compile --emit plan-json`, memc's
    /// `report::MemoryReport`), which `memc report` prints from the plan alone; `None` for
    /// programs built without the planner, and in version 4 files, which lack the field.
    #[serde(default)]
    pub memory_report: Option<serde_json::Value>,
}

/// Deserializes an `Option` field that must be present (serde otherwise reads a missing
/// `Option` field as `None`).
fn required_option<'de, D, T>(deserializer: D) -> std::result::Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer)
}

impl PlanMeta {
    /// Metadata for `program`, written by this memc, with no dims and no planner figures.
    pub fn new(model: impl Into<String>, target: impl Into<String>, program: Program) -> PlanMeta {
        PlanMeta {
            memc_version: env!("CARGO_PKG_VERSION").to_string(),
            model: model.into(),
            target: target.into(),
            dims: Vec::new(),
            planner: None,
            program,
            ptx: None,
            memory_report: None,
        }
    }
}

/// What the memory planner decided and how good it is, for `memc inspect`.
///
/// The activation bounds and `scratch_peak` came with memc 0.1's "honest figures"; plan files
/// written before lack them and read them as `None` (the format version did not change: the
/// fields are optional, so old plans still open and new plans still open in this memc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannerSummary {
    /// The scheduling heuristic that gave the op order.
    pub schedule: String,
    /// The offset-assignment strategy that won.
    pub strategy: String,
    /// The planner's arena size in bytes (the program's arena may add graph inputs and outputs).
    pub arena_size: u64,
    /// The model's activation lower bound: the most bytes of activations (graph inputs and op
    /// results, each owning its bytes; no weights, no scratch) live at one step in the model's
    /// own op order. The headline ratio is `arena_size / bound_model_order`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_model_order: Option<u64>,
    /// The same bound for the chosen schedule's order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_chosen_order: Option<u64>,
    /// The largest scratch of one op (the most scratch bytes live at one step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_peak: Option<u64>,
    /// LOAD with scratch: the most planned bytes live at once in the chosen schedule (views
    /// and in-place taken, scratch included): the lower bound of any offset assignment.
    pub load: u64,
    /// The same if every value owned its bytes (no views, no in-place), scratch included.
    pub load_without_sharing: u64,
    /// LOAD with scratch of the model's own op order.
    pub load_model_order: u64,
    /// The schedule step where `load` is reached.
    pub peak_step: u64,
    /// The number of planned buffers.
    pub n_buffers: u64,
}

impl PlannerSummary {
    pub fn from_plan(plan: &memc_passes::memory::MemoryPlan) -> PlannerSummary {
        PlannerSummary {
            schedule: plan.schedule_name.to_string(),
            strategy: plan.strategy.to_string(),
            arena_size: plan.arena_size,
            bound_model_order: Some(plan.bound_model_order),
            bound_chosen_order: Some(plan.bound_chosen_order),
            scratch_peak: Some(plan.scratch_peak),
            load: plan.load,
            load_without_sharing: plan.load_without_sharing,
            load_model_order: plan.load_model_order,
            peak_step: plan.peak_step,
            n_buffers: plan.buffers.len() as u64,
        }
    }
}

/// The decoded header of a plan file (see the module doc for each field's bytes).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanHeader {
    pub version: u32,
    pub header_len: u32,
    pub metadata_offset: u64,
    pub metadata_len: u64,
    pub weights_offset: u64,
    pub weights_len: u64,
    pub metadata_crc: u32,
    pub weights_crc: u32,
    pub header_crc: u32,
}

impl PlanHeader {
    /// The header's bytes, with its own checksum computed (`header_crc` is ignored).
    fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut bytes = [0u8; HEADER_LEN as usize];
        bytes[0..8].copy_from_slice(&MAGIC);
        bytes[8..12].copy_from_slice(&self.version.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.header_len.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.metadata_offset.to_le_bytes());
        bytes[24..32].copy_from_slice(&self.metadata_len.to_le_bytes());
        bytes[32..40].copy_from_slice(&self.weights_offset.to_le_bytes());
        bytes[40..48].copy_from_slice(&self.weights_len.to_le_bytes());
        bytes[48..52].copy_from_slice(&self.metadata_crc.to_le_bytes());
        bytes[52..56].copy_from_slice(&self.weights_crc.to_le_bytes());
        let crc = crc32fast::hash(&bytes[0..60]);
        bytes[60..64].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// Decodes and checks the header of `file` (the whole file's bytes): everything up to and
    /// including the section bounds.
    fn decode(path: &Path, file: &[u8]) -> Result<PlanHeader> {
        let len = file.len() as u64;
        let truncated = |needed: u64, what: &'static str| RuntimeError::Truncated {
            path: path.to_path_buf(),
            len,
            needed,
            what,
        };
        let layout = |message: String| RuntimeError::Layout {
            path: path.to_path_buf(),
            message,
        };
        let magic_len = file.len().min(MAGIC.len());
        if file[..magic_len] != MAGIC[..magic_len] {
            return Err(RuntimeError::NotAPlan {
                path: path.to_path_buf(),
            });
        }
        if file.len() < 12 {
            return Err(truncated(HEADER_LEN, "header"));
        }
        let u32_at = |at: usize| u32::from_le_bytes(file[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(file[at..at + 8].try_into().expect("8 bytes"));
        let version = u32_at(8);
        if !(OLDEST_PLAN_FORMAT_VERSION..=PLAN_FORMAT_VERSION).contains(&version) {
            return Err(RuntimeError::Version {
                path: path.to_path_buf(),
                found: version,
                oldest: OLDEST_PLAN_FORMAT_VERSION,
                supported: PLAN_FORMAT_VERSION,
            });
        }
        if len < HEADER_LEN {
            return Err(truncated(HEADER_LEN, "header"));
        }
        let header = PlanHeader {
            version,
            header_len: u32_at(12),
            metadata_offset: u64_at(16),
            metadata_len: u64_at(24),
            weights_offset: u64_at(32),
            weights_len: u64_at(40),
            metadata_crc: u32_at(48),
            weights_crc: u32_at(52),
            header_crc: u32_at(60),
        };
        if u64::from(header.header_len) != HEADER_LEN {
            return Err(layout(format!(
                "the header says it is {} bytes long; version {version} headers are {HEADER_LEN}",
                header.header_len
            )));
        }
        let computed = crc32fast::hash(&file[0..60]);
        if computed != header.header_crc {
            return Err(RuntimeError::Checksum {
                path: path.to_path_buf(),
                section: "header",
                recorded: header.header_crc,
                computed,
            });
        }
        if u32_at(56) != 0 {
            return Err(layout("the header's reserved field is not zero".into()));
        }
        if header.metadata_offset != HEADER_LEN {
            return Err(layout(format!(
                "the metadata starts at offset {}, not right after the header at {HEADER_LEN}",
                header.metadata_offset
            )));
        }
        let metadata_end = header
            .metadata_offset
            .checked_add(header.metadata_len)
            .ok_or_else(|| layout("the metadata length overflows".into()))?;
        if header.weights_offset % WEIGHTS_ALIGN != 0 {
            return Err(layout(format!(
                "the weights section starts at offset {}, which is not a multiple of {WEIGHTS_ALIGN}",
                header.weights_offset
            )));
        }
        if header.weights_offset < metadata_end {
            return Err(layout(format!(
                "the weights section (offset {}) overlaps the metadata (bytes {}..{metadata_end})",
                header.weights_offset, header.metadata_offset
            )));
        }
        let weights_end = header
            .weights_offset
            .checked_add(header.weights_len)
            .ok_or_else(|| layout("the weights length overflows".into()))?;
        if metadata_end > len {
            return Err(truncated(metadata_end, "metadata"));
        }
        if weights_end > len {
            return Err(truncated(weights_end, "weights section"));
        }
        if weights_end < len {
            return Err(layout(format!(
                "{} unexpected bytes after the weights section",
                len - weights_end
            )));
        }
        Ok(header)
    }
}

/// How many weight bytes [`write_plan`] copies before releasing their source pages.
const STREAM_CHUNK: usize = 4 << 20;

/// Drops the whole pages inside `bytes`, a slice of a read-only file mapping, from this
/// process's resident set (`madvise(MADV_DONTNEED)`). The file's contents are untouched: a later
/// read faults the page in again from the page cache. Only ever called on mapped model bytes,
/// never on heap memory (where it would zero the data).
fn release_mapped_pages(bytes: &[u8]) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let start = (bytes.as_ptr() as usize).next_multiple_of(page);
        let end = (bytes.as_ptr() as usize + bytes.len()) / page * page;
        if end > start {
            // SAFETY: [start, end) lies inside `bytes`, part of a live read-only file mapping;
            // MADV_DONTNEED on a file mapping discards only this process's page-table entries.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = bytes;
}

/// What [`write_plan`] wrote.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PlanStats {
    pub file_bytes: u64,
    pub metadata_bytes: u64,
    pub weights_bytes: u64,
    pub n_weights: usize,
    pub metadata_crc: u32,
    pub weights_crc: u32,
}

/// Writes `meta` and the bytes of every weight slot of its program, taken from `weights`, as a
/// plan file at `path` (see the module doc). `path` is replaced only when everything succeeded.
///
/// Errors: the program fails validation (a memc bug), a slot's weight is not in `weights`, has
/// no bytes, or has a different size, two slots overlap, or the file cannot be written.
pub fn write_plan(path: &Path, meta: &PlanMeta, weights: &WeightStore) -> Result<PlanStats> {
    write_plan_with_progress(path, meta, weights, &mut |_| true)
}

/// How far [`write_plan_with_progress`] is: bytes of the weights section written so far, of
/// all of them. Weights dominate a long write (they are copied, unpacked or packed as they
/// stream), so the header and metadata are not counted.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WriteProgress {
    pub done: u64,
    pub total: u64,
}

/// Between two progress reports at least this fraction of the weights section is written
/// (1/256), and at least [`REPORT_MIN_BYTES`]: a few hundred calls per plan however large it is.
const REPORT_STEPS: u64 = 256;
const REPORT_MIN_BYTES: u64 = 1 << 20;

/// [`write_plan`], telling `progress` how many weight bytes are written: once with `done == 0`
/// before the first, every 1/256 of the section (and every MiB at least) as they stream, and
/// once with `done == total` when the last is written. `progress` returning `false` cancels the
/// write: nothing is left at `path` (an older plan there stays), and the error is
/// [`RuntimeError::WriteCancelled`].
pub fn write_plan_with_progress(
    path: &Path,
    meta: &PlanMeta,
    weights: &WeightStore,
    progress: &mut dyn FnMut(WriteProgress) -> bool,
) -> Result<PlanStats> {
    let program = &meta.program;
    program.validate().map_err(RuntimeError::ProgramToWrite)?;
    // A plan `open` would refuse is never written: its PTX is checked the same way.
    check_ptx(path, meta)?;
    let slots = slot_bytes(program, weights)?;
    let metadata = serde_json::to_vec(meta)
        .expect("PlanMeta serializes: its maps have string keys and its floats are finite");

    let file_name = path.file_name().ok_or_else(|| {
        RuntimeError::write(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"),
        )
    })?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(file_name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = path.with_file_name(temp_name);

    let reporter = Reporter::new(program.weights_size, progress);
    let written = write_file(&temp, &metadata, program.weights_size, &slots, reporter);
    let stats = match written {
        Ok(stats) => stats,
        Err(source) => {
            // The partial file is of no use; failing to remove it changes nothing for the user.
            let _ = std::fs::remove_file(&temp);
            if source.get_ref().is_some_and(|e| e.is::<Cancelled>()) {
                return Err(RuntimeError::WriteCancelled {
                    path: path.to_path_buf(),
                });
            }
            return Err(RuntimeError::write(path, source));
        }
    };
    if let Err(source) = std::fs::rename(&temp, path) {
        let _ = std::fs::remove_file(&temp);
        return Err(RuntimeError::write(path, source));
    }
    Ok(stats)
}

/// Where a weight slot's bytes come from.
enum SlotSource<'a> {
    /// A copy of a model weight; `mapped` when it lies in a file mapping.
    Copy { bytes: &'a [u8], mapped: bool },
    /// A sub-byte model weight (ONNX's packing) written one element per byte.
    Unpack {
        bytes: &'a [u8],
        elem: memc_ir::ElemType,
        mapped: bool,
    },
    /// A product's constant operand, laid out for the CPU's GEMM while writing.
    Operand {
        spec: &'a memc_codegen::prepack::OperandPack,
        bytes: &'a [u8],
        mapped: bool,
    },
    /// Computed from model weights while writing (a packed low-bit weight).
    Pack {
        spec: &'a memc_codegen::nbits::PackSpec,
        sources: memc_codegen::nbits::PackSources<'a>,
        mapped: bool,
    },
}

/// The bytes of the model weight `name` and whether they are mapped from a file.
fn weight_bytes<'a>(weights: &'a WeightStore, name: &str) -> Result<(&'a [u8], bool)> {
    let weight = weights
        .lookup(name)
        .and_then(|id| weights.get(id))
        .ok_or_else(|| RuntimeError::WeightMissing {
            name: name.to_string(),
        })?;
    match weight.data() {
        WeightBytes::Absent => Err(RuntimeError::WeightAbsent {
            name: name.to_string(),
        }),
        WeightBytes::Owned(bytes) => Ok((bytes, false)),
        WeightBytes::Mapped(bytes) => Ok((bytes, true)),
    }
}

/// The source of every weight slot, in increasing offset order, checked against the store.
fn slot_bytes<'a>(
    program: &'a Program,
    weights: &'a WeightStore,
) -> Result<Vec<(&'a WeightSlot, SlotSource<'a>)>> {
    let mut slots = Vec::with_capacity(program.weights.len());
    for slot in &program.weights {
        let source = match (&slot.pack, slot.unpacked) {
            // `Program::validate` refuses an operand slot that is also another packing.
            _ if slot.operand.is_some() => {
                let spec = slot.operand.as_ref().expect("checked");
                let (bytes, mapped) = weight_bytes(weights, &spec.weight)?;
                spec.check(bytes)
                    .map_err(|message| RuntimeError::PackInvalid {
                        name: slot.name.clone(),
                        message,
                    })?;
                SlotSource::Operand {
                    spec,
                    bytes,
                    mapped,
                }
            }
            (None, Some(scalar)) => {
                let (bytes, mapped) = weight_bytes(weights, &slot.name)?;
                let elem = scalar.elem();
                // `byte_size` elements, packed as ONNX packs them.
                let packed = slot.byte_size.div_ceil(u64::from(8 / elem.bits()));
                if bytes.len() as u64 != packed {
                    return Err(RuntimeError::WeightSize {
                        name: slot.name.clone(),
                        slot: packed,
                        actual: bytes.len() as u64,
                    });
                }
                SlotSource::Unpack {
                    bytes,
                    elem,
                    mapped,
                }
            }
            (None, None) => {
                let (bytes, mapped) = weight_bytes(weights, &slot.name)?;
                if bytes.len() as u64 != slot.byte_size {
                    return Err(RuntimeError::WeightSize {
                        name: slot.name.clone(),
                        slot: slot.byte_size,
                        actual: bytes.len() as u64,
                    });
                }
                SlotSource::Copy { bytes, mapped }
            }
            // `Program::validate` refuses a packed slot that is also unpacked.
            (Some(spec), _) => {
                let (b, b_mapped) = weight_bytes(weights, &spec.b)?;
                let (scales, s_mapped) = weight_bytes(weights, &spec.scales)?;
                let zero_points = spec
                    .zero_points
                    .as_deref()
                    .map(|z| weight_bytes(weights, z))
                    .transpose()?;
                let sources = memc_codegen::nbits::PackSources {
                    b,
                    scales,
                    zero_points: zero_points.map(|(z, _)| z),
                };
                spec.check(&sources)
                    .map_err(|message| RuntimeError::PackInvalid {
                        name: slot.name.clone(),
                        message,
                    })?;
                // Program::validate checked the slot's size against the spec.
                let mapped = b_mapped && s_mapped && zero_points.is_none_or(|(_, m)| m);
                SlotSource::Pack {
                    spec,
                    sources,
                    mapped,
                }
            }
        };
        slots.push((slot, source));
    }
    slots.sort_by_key(|(slot, _)| slot.byte_offset);
    for pair in slots.windows(2) {
        let (first, second) = (pair[0].0, pair[1].0);
        // `validate` bounded every slot by the weights size, so this cannot overflow.
        if first.byte_offset + first.byte_size > second.byte_offset {
            return Err(RuntimeError::WeightOverlap {
                first: first.name.clone(),
                second: second.name.clone(),
            });
        }
    }
    Ok(slots)
}

/// The error [`Reporter`] stops the writer with when its callback cancels.
#[derive(Debug)]
struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cancelled by the progress callback")
    }
}

impl std::error::Error for Cancelled {}

/// Calls a [`write_plan_with_progress`] callback as weight bytes pass, a few hundred times in
/// all.
struct Reporter<'p> {
    callback: &'p mut dyn FnMut(WriteProgress) -> bool,
    done: u64,
    total: u64,
    next: u64,
    step: u64,
}

impl<'p> Reporter<'p> {
    fn new(total: u64, callback: &'p mut dyn FnMut(WriteProgress) -> bool) -> Reporter<'p> {
        let step = (total / REPORT_STEPS).max(REPORT_MIN_BYTES);
        Reporter {
            callback,
            done: 0,
            total,
            next: 0,
            step,
        }
    }

    /// Counts `n` more bytes; reports when the next step is reached (or the first time, or at
    /// the end). An error when the callback cancels.
    fn advance(&mut self, n: u64) -> std::io::Result<()> {
        self.done = (self.done + n).min(self.total);
        if self.done < self.next && self.done < self.total {
            return Ok(());
        }
        if self.next > self.total {
            return Ok(()); // The end was reported already.
        }
        self.next = if self.done == self.total {
            self.total + 1
        } else {
            self.done + self.step
        };
        let at = WriteProgress {
            done: self.done,
            total: self.total,
        };
        if (self.callback)(at) {
            Ok(())
        } else {
            // Not `ErrorKind::Interrupted`: `write_all` retries those.
            Err(std::io::Error::other(Cancelled))
        }
    }
}

/// A writer that checksums what passes through it and counts it; once `reporter` is set (at
/// the weights section), it counts the bytes for it too.
struct CrcWriter<'p, W> {
    inner: W,
    hasher: crc32fast::Hasher,
    written: u64,
    reporter: Option<Reporter<'p>>,
}

impl<W: Write> CrcWriter<'_, W> {
    fn write_zeros(&mut self, mut n: u64) -> std::io::Result<()> {
        const ZEROS: [u8; 4096] = [0; 4096];
        while n > 0 {
            let chunk = n.min(ZEROS.len() as u64) as usize;
            self.write_all(&ZEROS[..chunk])?;
            n -= chunk as u64;
        }
        Ok(())
    }
}

impl<W: Write> Write for CrcWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        if let Some(reporter) = &mut self.reporter {
            reporter.advance(n as u64)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn write_file(
    path: &Path,
    metadata: &[u8],
    weights_size: u64,
    slots: &[(&WeightSlot, SlotSource)],
    mut reporter: Reporter,
) -> std::io::Result<PlanStats> {
    // Cancelled before anything is created.
    reporter.advance(0)?;
    let file = File::create(path)?;
    let mut out = CrcWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        hasher: crc32fast::Hasher::new(),
        written: 0,
        reporter: None,
    };
    // A placeholder for the header, written for real once the weights' checksum is known.
    out.write_zeros(HEADER_LEN)?;
    out.write_all(metadata)?;
    let metadata_end = HEADER_LEN + metadata.len() as u64;
    let weights_offset = metadata_end.next_multiple_of(WEIGHTS_ALIGN);
    out.write_zeros(weights_offset - metadata_end)?;

    // Everything up to here is header and metadata; the checksum starts at the weights.
    out.hasher = crc32fast::Hasher::new();
    out.reporter = Some(reporter);
    let mut section_pos = 0u64;
    for (slot, source) in slots {
        out.write_zeros(slot.byte_offset - section_pos)?;
        match source {
            // Stream in chunks; a chunk of a memory-mapped model is released once copied, so
            // the pages read stay bounded by one chunk instead of growing to the whole model.
            &SlotSource::Copy { bytes, mapped } => {
                for chunk in bytes.chunks(STREAM_CHUNK) {
                    out.write_all(chunk)?;
                    if mapped {
                        release_mapped_pages(chunk);
                    }
                }
            }
            &SlotSource::Unpack {
                bytes,
                elem,
                mapped,
            } => {
                let per_byte = (8 / elem.bits()) as usize;
                let mut left = slot.byte_size as usize;
                for chunk in bytes.chunks(STREAM_CHUNK / per_byte) {
                    let n = (chunk.len() * per_byte).min(left);
                    out.write_all(&memc_ir::packing::unpack(elem, chunk, n))?;
                    left -= n;
                    if mapped {
                        release_mapped_pages(chunk);
                    }
                }
            }
            // One matrix at a time; the weight's pages are released after the last.
            &SlotSource::Operand {
                spec,
                bytes,
                mapped,
            } => {
                memc_codegen::prepack::pack(spec, bytes, &mut |chunk| out.write_all(chunk))?;
                if mapped {
                    release_mapped_pages(bytes);
                }
            }
            // The packer produces the slot band by band and says when source bytes are done.
            SlotSource::Pack {
                spec,
                sources,
                mapped,
            } => {
                let release = |bytes: &[u8]| {
                    if *mapped {
                        release_mapped_pages(bytes);
                    }
                };
                memc_codegen::nbits::pack(
                    spec,
                    sources,
                    &mut |chunk| out.write_all(chunk),
                    &release,
                )?;
            }
        }
        section_pos = slot.byte_offset + slot.byte_size;
    }
    out.write_zeros(weights_size - section_pos)?;
    // An empty weights section is done at once.
    if let Some(reporter) = &mut out.reporter {
        reporter.advance(0)?;
    }
    out.reporter = None;
    let weights_crc = out.hasher.clone().finalize();
    let file_bytes = out.written;

    let header = PlanHeader {
        version: PLAN_FORMAT_VERSION,
        header_len: HEADER_LEN as u32,
        metadata_offset: HEADER_LEN,
        metadata_len: metadata.len() as u64,
        weights_offset,
        weights_len: weights_size,
        metadata_crc: crc32fast::hash(metadata),
        weights_crc,
        header_crc: 0,
    };
    let mut file = out.inner.into_inner().map_err(|e| e.into_error())?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&header.encode())?;
    file.sync_all()?;
    Ok(PlanStats {
        file_bytes,
        metadata_bytes: metadata.len() as u64,
        weights_bytes: weights_size,
        n_weights: slots.len(),
        metadata_crc: header.metadata_crc,
        weights_crc,
    })
}

/// An opened, checked plan file: the header, the metadata, and the weights mapped in place.
pub struct PlanFile {
    path: PathBuf,
    map: memmap2::Mmap,
    header: PlanHeader,
    meta: PlanMeta,
}

impl std::fmt::Debug for PlanFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanFile")
            .field("path", &self.path)
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

/// Checks a plan's stored PTX against the PTX of its validated program (see the module doc).
fn check_ptx(path: &Path, meta: &PlanMeta) -> Result<()> {
    let ptx = |message: String| RuntimeError::Ptx {
        path: path.to_path_buf(),
        message,
    };
    let is_cuda = meta.target == memc_codegen::Target::Cuda.name();
    match (&meta.ptx, is_cuda) {
        (None, false) => Ok(()),
        (Some(_), false) => Err(ptx(format!(
            "the plan is for target `{}` but carries PTX, which only `cuda` plans do",
            meta.target
        ))),
        (None, true) => Err(ptx("the `cuda` plan carries no PTX".to_string())),
        (Some(stored), true) => {
            let emitted = memc_codegen::ptx::emit_program(&meta.program)
                .map_err(|e| ptx(format!("cannot emit the PTX of the plan's kernels: {e}")))?;
            if *stored != emitted {
                return Err(ptx(
                    "the plan's PTX does not match its kernels: it was altered, or written by another memc version"
                        .to_string(),
                ));
            }
            Ok(())
        }
    }
}

impl PlanFile {
    /// Maps the plan file at `path` and checks everything but the weights' checksum (see the
    /// module doc for the order of the checks).
    ///
    /// The file must not be modified in place while the returned value lives (memc itself
    /// replaces plans by renaming, which leaves a mapped file untouched).
    pub fn open(path: &Path) -> Result<PlanFile> {
        let file = File::open(path).map_err(|e| RuntimeError::read(path, e))?;
        // SAFETY: the map is only read, and memc never writes a plan file in place (see above);
        // a file changed underneath by another program can give wrong answers but no access
        // outside the mapping, whose length is fixed here.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| RuntimeError::read(path, e))?;
        let header = PlanHeader::decode(path, &map)?;
        let metadata = &map[header.metadata_offset as usize..][..header.metadata_len as usize];
        let computed = crc32fast::hash(metadata);
        if computed != header.metadata_crc {
            return Err(RuntimeError::Checksum {
                path: path.to_path_buf(),
                section: "metadata",
                recorded: header.metadata_crc,
                computed,
            });
        }
        let meta: PlanMeta =
            serde_json::from_slice(metadata).map_err(|source| RuntimeError::Metadata {
                path: path.to_path_buf(),
                source,
            })?;
        let program = &meta.program;
        program
            .validate()
            .map_err(|source| RuntimeError::InvalidProgram {
                path: path.to_path_buf(),
                source,
            })?;
        let layout = |message: String| RuntimeError::Layout {
            path: path.to_path_buf(),
            message,
        };
        if header.version < FIRST_VERSION_WITH_EXTENTS {
            if let Some(io) = program.outputs.iter().find(|io| io.extent.is_some()) {
                return Err(layout(format!(
                    "output `{}` has a run-time extent, which format version {} plans cannot have",
                    io.name, header.version
                )));
            }
        }
        if header.version < FIRST_VERSION_WITH_IMPLICIT_IM2COL {
            let implicit = program
                .steps
                .iter()
                .flat_map(|s| &s.kernels)
                .find(|k| matches!(&k.body, KernelBody::Contract(c) if c.b.as_mat().is_none()));
            if let Some(kernel) = implicit {
                return Err(layout(format!(
                    "kernel `{}` reads an implicit im2col operand, which format version {} plans cannot have",
                    kernel.name, header.version
                )));
            }
        }
        if header.version < FIRST_VERSION_WITH_WINOGRAD {
            let winograd = program
                .steps
                .iter()
                .flat_map(|s| &s.kernels)
                .find(|k| matches!(&k.body, KernelBody::Contract(c) if c.winograd.is_some()));
            if let Some(kernel) = winograd {
                return Err(layout(format!(
                    "kernel `{}` runs as Winograd, which format version {} plans cannot have",
                    kernel.name, header.version
                )));
            }
        }
        if program.weights_size != header.weights_len {
            return Err(layout(format!(
                "the weights section is {} bytes but the program reads {}",
                header.weights_len, program.weights_size
            )));
        }
        for list in [&program.inputs, &program.outputs] {
            for (i, io) in list.iter().enumerate() {
                if list[..i].iter().any(|other| other.name == io.name) {
                    return Err(layout(format!("tensor `{}` is listed twice", io.name)));
                }
            }
        }
        check_ptx(path, &meta)?;
        Ok(PlanFile {
            path: path.to_path_buf(),
            map,
            header,
            meta,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &PlanHeader {
        &self.header
    }

    pub fn meta(&self) -> &PlanMeta {
        &self.meta
    }

    pub fn program(&self) -> &Program {
        &self.meta.program
    }

    /// The plan file's length in bytes.
    pub fn file_len(&self) -> u64 {
        self.map.len() as u64
    }

    /// The weights section, mapped from the file; exactly `program().weights_size` bytes,
    /// starting at a page-aligned address.
    pub fn weights(&self) -> &[u8] {
        &self.map[self.header.weights_offset as usize..][..self.header.weights_len as usize]
    }

    /// Checks the weights section against the header's checksum, reading every weight page.
    pub fn verify_weights(&self) -> Result<()> {
        let computed = crc32fast::hash(self.weights());
        if computed != self.header.weights_crc {
            return Err(RuntimeError::Checksum {
                path: self.path.clone(),
                section: "weights",
                recorded: self.header.weights_crc,
                computed,
            });
        }
        Ok(())
    }
}
