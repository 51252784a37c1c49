//! The CUDA backend: a program's PTX module ([`crate::ptx`]) loaded through the CUDA driver
//! and run as one CUDA graph over one device arena.
//!
//! Everything here needs the `cuda` cargo feature, which brings in cudarc's driver API only,
//! opened at run time (`dynamic-loading`): memc builds, and its tests run, on machines without
//! CUDA. Loading a plan on such a machine is [`crate::backend::BackendError::NoDriver`], checked
//! before any driver call (cudarc panics when `libcuda.so` is missing, so nothing calls it
//! first).
//!
//! - `CudaBackend` (`backend.rs`): the [`crate::backend::Backend`] for
//!   [`crate::Target::Cuda`]. Compiling emits the program's PTX, JIT-loads it on device 0
//!   (its primary context), allocates the three regions, uploads the weights section and
//!   captures the whole launch list into a CUDA graph; a run is one graph launch.
//! - `CudaProgram` (`backend.rs`): the compiled program. It can also be built from a PTX
//!   module given by hand ([`CudaProgram::from_module`]), which the tests use to check the
//!   driver plumbing apart from the emitters.
//!
//! # Device memory
//!
//! The arena is one `cuMemAlloc` of exactly `arena_size` bytes (one byte when the plan's arena
//! is empty, since the driver refuses an empty allocation), zero-filled; the state is a second,
//! of exactly `state_size` bytes, zero-filled and kept from run to run; the weights section is
//! uploaded once into a third, of exactly `weights_size` bytes. No run allocates device
//! memory. Beyond these three the backend takes on the device: the loaded module's code (the
//! JIT-compiled SASS of every entry, with its constant banks and any static `.shared` and
//! local-memory reservations the driver makes per entry), the instantiated graph (one kernel
//! node per launch, its parameters copied in: a few hundred bytes a node), the stream, and
//! the primary context of device 0 itself (shared with anything else in the process that
//! uses it, and retained for as long as the program lives). The driver reports the
//! difference in free device memory across compilation, which
//! [`CudaProgram::device_info`] records as `overhead_bytes` (everything but the three
//! regions; approximate, since other users of the device change it too).
//!
//! # Runs
//!
//! The launch list is captured once, in schedule order, each launch with the three region
//! base addresses as its parameters (the calling convention of [`crate::ptx`]), so a run is
//! `cuGraphLaunch` and a stream synchronize. A kernel that faults is reported when the run is
//! synchronized, naming the run (a graph does not say which node failed); with the
//! environment variable `MEMC_CUDA_EAGER=1` set when the program is compiled, runs launch the
//! kernels one at a time and synchronize after each instead, so an error names its kernel.
//!
//! Guarantees: no driver call without the driver present; every driver error is a
//! [`crate::backend::BackendError::Cuda`] naming what was being done and carrying the driver's
//! error name and text (and the JIT's log when loading the module fails), never a panic; every
//! copy into or out of a region is range-checked before the driver sees it; dropping the
//! program frees everything it allocated on the device.

#[cfg(feature = "cuda")]
mod backend;

#[cfg(feature = "cuda")]
pub use backend::{CudaBackend, CudaProgram, DeviceInfo};

/// Whether the CUDA driver library (`libcuda.so`, `nvcuda.dll`) can be loaded on this machine:
/// the check every driver call waits on. Always false without the `cuda` feature.
pub fn driver_present() -> bool {
    #[cfg(feature = "cuda")]
    {
        // SAFETY: this only tries to open the library (and closes it again); it calls nothing
        // in it.
        unsafe { cudarc::driver::sys::is_culib_present() }
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}
