//! memc-runtime: the plan file and the executors that run it. Not built yet; this is what it
//! will hold.
//!
//! - `plan`: the plan file format: a versioned header with a checksum, the schedule, the buffer
//!   table (offset, size and live range of every intermediate inside one arena), the kernels in
//!   a form that JITs in milliseconds, the I/O signature, and a weights section aligned so it can
//!   be memory-mapped. Writing streams weights from the mapped model; reading validates every
//!   field and reports a corrupted, truncated or wrong-version file as an error.
//! - `cpu`: an executor that allocates one arena of the planned size and runs the kernels in
//!   schedule order.
//! - `gpu`: the same through cudarc, loaded dynamically so memc builds without CUDA.
//!
//! Invariants it will keep: it never allocates per-op memory beyond the planned arena, never
//! copies weights out of their map, and treats every plan file as untrusted input.

/// The plan file format version this build writes and reads.
pub const PLAN_FORMAT_VERSION: u32 = 0;
