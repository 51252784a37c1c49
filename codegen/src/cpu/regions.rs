//! The base addresses of the regions kernels touch during one run (arena, weights, persistent
//! state), shared by the JIT's row workers, the contractions and the low-bit products.

use crate::kernel::Region;

/// The base addresses of the regions a kernel reads and writes during one run.
#[derive(Copy, Clone, Debug)]
pub struct RegionPtrs {
    pub arena: *mut u8,
    pub weights: *const u8,
    /// The persistent state (null for a program without state).
    pub state: *mut u8,
}

// The kernels that use these (the JIT's workers, contractions) need the `cpu` feature.
#[cfg_attr(not(feature = "cpu"), allow(dead_code))]
impl RegionPtrs {
    /// The base of `region`.
    pub(crate) fn base(self, region: Region) -> *mut u8 {
        match region {
            Region::Arena => self.arena,
            Region::Weights => self.weights as *mut u8,
            Region::State => self.state,
        }
    }
}

// SAFETY: a run's caller keeps every region alive and exclusive for the run (the contract of
// `CpuProgram::run_kernel_in`), and rows write disjoint elements, so the pointers may be used
// from several threads.
unsafe impl Send for RegionPtrs {}
unsafe impl Sync for RegionPtrs {}

#[cfg_attr(not(feature = "cpu"), allow(dead_code))]
impl RegionPtrs {
    /// A copy; a method so closures capture the whole (Send) struct, not its fields.
    pub(crate) fn get(self) -> RegionPtrs {
        self
    }
}
