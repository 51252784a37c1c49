//! The CUDA backend behind the [`Backend`] seam: a [`CudaProgram`] holds the loaded module,
//! the three device regions, a stream and the instantiated graph of one run.
//!
//! Guarantees: the driver library is checked for before the first driver call; the arena, the
//! state and the weights are each one device allocation of exactly their planned size (one byte
//! when that is zero), made at compile time and never grown; every range copied in or out is
//! checked against its region before the driver sees it; every driver error becomes a
//! [`BackendError::Cuda`]; dropping the program releases everything it took on the device.

use crate::backend::{check_range, Backend, BackendError, BackendOptions, CompiledProgram};
use crate::program::Program;
use crate::ptx::{self, Launch, PtxModule};
use crate::Target;
use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::sys;
use std::ffi::{c_void, CString};
use std::mem::MaybeUninit;
use std::ops::Range;
use std::time::{Duration, Instant};

/// The dynamic shared memory a launch may use without opting in
/// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

/// The size of each of the JIT's log buffers (info and error), in bytes.
const JIT_LOG_BYTES: usize = 16 * 1024;

/// The CUDA device every program runs on.
const DEVICE_ORDINAL: i32 = 0;

/// The CUDA backend (see the module doc of [`crate::cuda`]).
#[derive(Copy, Clone, Debug, Default)]
pub struct CudaBackend;

impl Backend for CudaBackend {
    fn target(&self) -> Target {
        Target::Cuda
    }

    fn compile(
        &self,
        program: &Program,
        weights: &[u8],
        _options: &BackendOptions,
    ) -> Result<Box<dyn CompiledProgram>, BackendError> {
        // The driver check comes first: without it there is nothing to run the PTX on, and
        // the error says so before any emitter limitation does.
        if !super::driver_present() {
            return Err(BackendError::NoDriver);
        }
        let module = ptx::emit_program(program)?;
        Ok(Box::new(CudaProgram::from_module(
            program, &module, weights,
        )?))
    }
}

/// The device a [`CudaProgram`] runs on and the device memory it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The CUDA device ordinal.
    pub ordinal: i32,
    /// The device's name, as the driver gives it (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// The bytes of the three device allocations (each the planned size, at least one).
    pub arena_bytes: u64,
    pub weights_bytes: u64,
    pub state_bytes: u64,
    /// The further device memory compilation took (the module's code, the graph, driver
    /// bookkeeping): the drop in free device memory across it less the three regions. An
    /// estimate, since anything else using the device changes it too.
    pub overhead_bytes: u64,
    /// What the JIT said when it compiled the module (its info log; empty when it said
    /// nothing).
    pub jit_log: String,
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (CUDA device {}): device memory {} bytes: arena {}, weights {}, state {}, \
             module and graph about {}",
            self.name,
            self.ordinal,
            self.arena_bytes + self.weights_bytes + self.state_bytes + self.overhead_bytes,
            self.arena_bytes,
            self.weights_bytes,
            self.state_bytes,
            self.overhead_bytes
        )
    }
}

/// One entry of the module and the launch that runs it.
struct Entry {
    function: sys::CUfunction,
    launch: Launch,
    /// The kernel's name in the program (`Add add #0`), for error messages.
    kernel: String,
    /// The entry's symbol in the module.
    symbol: String,
}

/// A program loaded on the GPU: its module, its three regions, and the graph of one run.
///
/// The handles are null (0 for device pointers) until made; [`Drop`] releases the ones that
/// were, so a compilation that fails halfway leaves nothing behind.
pub struct CudaProgram {
    device: sys::CUdevice,
    /// The retained primary context of `device`; `None` until retained.
    context: Option<sys::CUcontext>,
    module: sys::CUmodule,
    stream: sys::CUstream,
    arena: sys::CUdeviceptr,
    weights: sys::CUdeviceptr,
    state: sys::CUdeviceptr,
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    entries: Vec<Entry>,
    arena_size: u64,
    weights_size: u64,
    state_size: u64,
    /// Host copies of the arena and the state that reads copy the asked ranges into.
    arena_mirror: Vec<u8>,
    state_mirror: Vec<u8>,
    /// Launch kernel by kernel, synchronizing after each, instead of the graph
    /// (`MEMC_CUDA_EAGER=1`).
    eager: bool,
    /// The runs started so far, to name the one that failed.
    runs: u64,
    compile_time: Duration,
    info: DeviceInfo,
}

// SAFETY: the driver's handles may be used from any thread once the context is made current
// there, which every method that calls the driver does first (`bind`); all calls that use the
// stream, the regions or the graph take `&mut self`, so no two threads use them at once, and
// the `&self` methods read plain fields only.
unsafe impl Send for CudaProgram {}
// SAFETY: as above; shared references call no driver function.
unsafe impl Sync for CudaProgram {}

impl std::fmt::Debug for CudaProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaProgram")
            .field("device", &self.info.name)
            .field("kernels", &self.entries.len())
            .field("arena_size", &self.arena_size)
            .field("state_size", &self.state_size)
            .field("eager", &self.eager)
            .finish_non_exhaustive()
    }
}

/// The driver's name and description of `error` (`CUDA_ERROR_ILLEGAL_ADDRESS: an illegal
/// memory access was encountered`).
fn driver_message(error: DriverError) -> String {
    let name = error
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", error.0));
    match error.error_string() {
        Ok(text) => format!("{name}: {}", text.to_string_lossy()),
        Err(_) => name,
    }
}

/// A map from a driver error to a [`BackendError::Cuda`] saying it happened while `what`.
fn cuda_error(what: impl Into<String>) -> impl FnOnce(DriverError) -> BackendError {
    let what = what.into();
    move |error| BackendError::Cuda {
        what,
        message: driver_message(error),
    }
}

/// The text of a NUL-terminated log buffer the JIT filled.
fn log_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim().to_string()
}

/// JIT-compiles and loads the PTX `text` into the current context; returns the module and the
/// JIT's info log. A failure carries the JIT's error log.
fn load_module(text: &str) -> Result<(sys::CUmodule, String), BackendError> {
    const WHAT: &str = "loading the PTX module (JIT-compiling it for the device)";
    let image = CString::new(text).map_err(|_| BackendError::Cuda {
        what: WHAT.to_string(),
        message: "the PTX text contains a NUL byte".to_string(),
    })?;
    let mut info_log = vec![0u8; JIT_LOG_BYTES];
    let mut error_log = vec![0u8; JIT_LOG_BYTES];
    let mut options = [
        sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    // The driver reads the buffers' sizes from the value slots themselves (an unsigned int
    // stored in the pointer), and writes the lengths it used back there.
    let mut values: [*mut c_void; 4] = [
        info_log.as_mut_ptr().cast(),
        std::ptr::without_provenance_mut(JIT_LOG_BYTES),
        error_log.as_mut_ptr().cast(),
        std::ptr::without_provenance_mut(JIT_LOG_BYTES),
    ];
    let mut module = MaybeUninit::<sys::CUmodule>::uninit();
    // SAFETY: the image is a NUL-terminated PTX string; the option and value arrays have the
    // length passed, and the log buffers they point to live (and are the size given) until the
    // call returns.
    let result = unsafe {
        sys::cuModuleLoadDataEx(
            module.as_mut_ptr(),
            image.as_ptr().cast(),
            options.len() as u32,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    };
    match result.result() {
        // SAFETY: on success the driver wrote the module handle.
        Ok(()) => Ok((unsafe { module.assume_init() }, log_text(&info_log))),
        Err(error) => {
            let mut message = driver_message(error);
            for log in [log_text(&error_log), log_text(&info_log)] {
                if !log.is_empty() {
                    message.push_str("\nJIT log:\n");
                    message.push_str(&log);
                }
            }
            Err(BackendError::Cuda {
                what: WHAT.to_string(),
                message,
            })
        }
    }
}

impl CudaProgram {
    /// Loads `module` (the PTX of `program`, as [`ptx::emit_program`] writes it, or any module
    /// that keeps its calling convention) on device 0, allocates the program's regions, uploads
    /// `weights` (at least `program.weights_size` bytes) and captures the launch list into a
    /// graph. `program` gives the region sizes and the kernels' names; it must have passed
    /// [`Program::validate`], and the module's kernels must reach only the bytes that
    /// program's kernels reach.
    pub fn from_module(
        program: &Program,
        module: &PtxModule,
        weights: &[u8],
    ) -> Result<CudaProgram, BackendError> {
        if !super::driver_present() {
            return Err(BackendError::NoDriver);
        }
        if (weights.len() as u64) < program.weights_size {
            return Err(BackendError::WeightsSize {
                actual: weights.len() as u64,
                expected: program.weights_size,
            });
        }
        let mirror = |bytes: u64| -> Result<Vec<u8>, BackendError> {
            let len = usize::try_from(bytes).map_err(|_| BackendError::Arena { bytes })?;
            Ok(vec![0u8; len])
        };
        let arena_mirror = mirror(program.arena_size)?;
        let state_mirror = mirror(program.state_size)?;

        cu::init().map_err(cuda_error("initializing the CUDA driver"))?;
        let device = cu::device::get(DEVICE_ORDINAL)
            .map_err(cuda_error(format!("opening CUDA device {DEVICE_ORDINAL}")))?;
        let name = cu::device::get_name(device).map_err(cuda_error("reading the device's name"))?;
        let mut this = CudaProgram {
            device,
            context: None,
            module: std::ptr::null_mut(),
            stream: std::ptr::null_mut(),
            arena: 0,
            weights: 0,
            state: 0,
            graph: std::ptr::null_mut(),
            exec: std::ptr::null_mut(),
            entries: Vec::new(),
            arena_size: program.arena_size,
            weights_size: program.weights_size,
            state_size: program.state_size,
            arena_mirror,
            state_mirror,
            eager: std::env::var_os("MEMC_CUDA_EAGER").is_some_and(|v| v == "1"),
            runs: 0,
            compile_time: Duration::ZERO,
            info: DeviceInfo {
                ordinal: DEVICE_ORDINAL,
                name,
                arena_bytes: program.arena_size.max(1),
                weights_bytes: program.weights_size.max(1),
                state_bytes: program.state_size.max(1),
                overhead_bytes: 0,
                jit_log: String::new(),
            },
        };
        // SAFETY: `device` came from `cuDeviceGet`; `Drop` releases the context once.
        let context = unsafe { cu::primary_ctx::retain(device) }
            .map_err(cuda_error("retaining the device's primary context"))?;
        this.context = Some(context);
        this.bind()?;
        let (free_before, _) =
            cu::mem_get_info().map_err(cuda_error("reading the free device memory"))?;

        let started = Instant::now();
        let (loaded, jit_log) = load_module(&module.text)?;
        this.module = loaded;
        this.info.jit_log = jit_log;
        let mut compile_time = started.elapsed();
        for launch in &module.launches {
            let kernel = program
                .steps
                .get(launch.step)
                .and_then(|step| step.kernels.get(launch.kernel))
                .map_or_else(|| launch.entry.clone(), |k| k.name.clone());
            let what = || format!("finding entry `{}` of kernel `{kernel}`", launch.entry);
            let symbol = CString::new(launch.entry.as_str()).map_err(|_| BackendError::Cuda {
                what: what(),
                message: "the entry's name contains a NUL byte".to_string(),
            })?;
            // SAFETY: the module was loaded above and is unloaded only in `Drop`.
            let function = unsafe { cu::module::get_function(this.module, symbol) }
                .map_err(cuda_error(what()))?;
            if launch.launch.shared_bytes > DEFAULT_SHARED_LIMIT {
                let bytes = i32::try_from(launch.launch.shared_bytes).unwrap_or(i32::MAX);
                // SAFETY: `function` is an entry of the loaded module.
                unsafe {
                    cu::function::set_function_attribute(
                        function,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        bytes,
                    )
                }
                .map_err(cuda_error(format!(
                    "allowing kernel `{kernel}` ({}) {bytes} bytes of dynamic shared memory",
                    launch.entry
                )))?;
            }
            this.entries.push(Entry {
                function,
                launch: launch.launch,
                kernel,
                symbol: launch.entry.clone(),
            });
        }

        this.stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map_err(cuda_error("creating a stream"))?;
        this.arena = this.alloc_zeroed("arena", program.arena_size)?;
        this.state = this.alloc_zeroed("state", program.state_size)?;
        this.weights = this.alloc("weights", program.weights_size)?;
        if program.weights_size > 0 {
            // `weights_size` is at most `weights.len()` (checked above), so it fits a usize.
            let section = &weights[..program.weights_size as usize];
            // SAFETY: the allocation is `weights_size` bytes; the copy is from pageable memory,
            // which the driver stages before returning, and the stream is synchronized below.
            unsafe { cu::memcpy_htod_async(this.weights, section, this.stream) }
                .map_err(cuda_error("uploading the weights section"))?;
        }

        let started = Instant::now();
        if !this.eager && !this.entries.is_empty() {
            this.capture()?;
        }
        compile_time += started.elapsed();
        // SAFETY: the stream was created above.
        unsafe { cu::stream::synchronize(this.stream) }
            .map_err(cuda_error("zeroing the regions and uploading the weights"))?;
        this.compile_time = compile_time;

        let (free_after, _) =
            cu::mem_get_info().map_err(cuda_error("reading the free device memory"))?;
        let regions = this.info.arena_bytes + this.info.weights_bytes + this.info.state_bytes;
        this.info.overhead_bytes =
            (free_before.saturating_sub(free_after) as u64).saturating_sub(regions);
        Ok(this)
    }

    /// The device the program runs on and the device memory it holds.
    pub fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Makes the program's context current on the calling thread.
    fn bind(&self) -> Result<(), BackendError> {
        let Some(context) = self.context else {
            return Err(BackendError::Cuda {
                what: "binding the program's context".to_string(),
                message: "the program has no context".to_string(),
            });
        };
        // SAFETY: the context is retained until `Drop`.
        unsafe { cu::ctx::set_current(context) }
            .map_err(cuda_error("making the device's context current"))
    }

    /// One device allocation of `bytes` bytes (one byte when `bytes` is zero) for `region`.
    fn alloc(&self, region: &str, bytes: u64) -> Result<sys::CUdeviceptr, BackendError> {
        let len = usize::try_from(bytes.max(1)).map_err(|_| BackendError::Arena { bytes })?;
        // SAFETY: the context is current; the memory is only ever used as bytes.
        unsafe { cu::malloc_sync(len) }.map_err(cuda_error(format!(
            "allocating the {region} of {bytes} bytes on the device"
        )))
    }

    /// [`CudaProgram::alloc`], zero-filled (in stream order).
    fn alloc_zeroed(&self, region: &str, bytes: u64) -> Result<sys::CUdeviceptr, BackendError> {
        let ptr = self.alloc(region, bytes)?;
        let len = bytes.max(1) as usize;
        // SAFETY: `ptr` is an allocation of `len` bytes; the stream is synchronized before any
        // run.
        match unsafe { cu::memset_d8_async(ptr, 0, len, self.stream) } {
            Ok(()) => Ok(ptr),
            Err(error) => {
                // SAFETY: `ptr` was allocated above and is stored nowhere else.
                let _ = unsafe { cu::free_sync(ptr) };
                Err(cuda_error(format!("zeroing the {region} on the device"))(
                    error,
                ))
            }
        }
    }

    /// Launches `entry` on the program's stream with the three region addresses.
    fn launch(&self, entry: &Entry) -> Result<(), DriverError> {
        let mut arena = self.arena;
        let mut weights = self.weights;
        let mut state = self.state;
        let mut params: [*mut c_void; 3] = [
            (&raw mut arena).cast(),
            (&raw mut weights).cast(),
            (&raw mut state).cast(),
        ];
        let Launch {
            grid,
            block,
            shared_bytes,
        } = entry.launch;
        // SAFETY: the entry takes exactly the three `.u64` parameters of `ptx::PARAMS`, whose
        // values the driver copies before returning; the regions are the planned sizes, and
        // the kernels reach only bytes inside them (the program passed validation).
        unsafe {
            cu::launch_kernel(
                entry.function,
                (grid[0], grid[1], grid[2]),
                (block[0], block[1], block[2]),
                shared_bytes,
                self.stream,
                &mut params,
            )
        }
    }

    /// Captures every launch, in order, into the graph and instantiates it.
    fn capture(&mut self) -> Result<(), BackendError> {
        // SAFETY: the stream was created by this program and is not capturing.
        unsafe {
            cu::stream::begin_capture(
                self.stream,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        }
        .map_err(cuda_error("starting to capture the launches into a graph"))?;
        for entry in &self.entries {
            if let Err(error) = self.launch(entry) {
                // End the capture so the stream is usable (and the partial graph freed) before
                // reporting.
                // SAFETY: the stream is capturing.
                if let Ok(graph) = unsafe { cu::stream::end_capture(self.stream) } {
                    if !graph.is_null() {
                        // SAFETY: the graph was just made and is stored nowhere.
                        let _ = unsafe { cu::graph::destroy(graph) };
                    }
                }
                return Err(cuda_error(format!(
                    "launching kernel `{}` ({}, grid {:?}, block {:?}, {} bytes of shared memory)",
                    entry.kernel,
                    entry.symbol,
                    entry.launch.grid,
                    entry.launch.block,
                    entry.launch.shared_bytes
                ))(error));
            }
        }
        // SAFETY: the stream is capturing.
        self.graph = unsafe { cu::stream::end_capture(self.stream) }
            .map_err(cuda_error("ending the capture of the launches"))?;
        // SAFETY: the graph was just captured.
        self.exec = unsafe { cu::graph::instantiate(self.graph, sys::CUgraphInstantiate_flags(0)) }
            .map_err(cuda_error("instantiating the graph of the launches"))?;
        // SAFETY: the graph was just instantiated; the stream is this program's.
        unsafe { cu::graph::upload(self.exec, self.stream) }
            .map_err(cuda_error("uploading the graph to the device"))
    }

    /// Synchronizes the stream, naming `what` in an error.
    fn synchronize(&self, what: impl FnOnce() -> String) -> Result<(), BackendError> {
        // SAFETY: the stream was created by this program.
        unsafe { cu::stream::synchronize(self.stream) }.map_err(cuda_error(what()))
    }

    /// Copies `ranges` of `region` (the arena or the state, at `base`) into its mirror.
    fn read_back(
        region: &'static str,
        base: sys::CUdeviceptr,
        size: u64,
        mirror: &mut [u8],
        ranges: &[Range<u64>],
        stream: sys::CUstream,
    ) -> Result<(), BackendError> {
        for range in ranges {
            let host = check_range(
                region,
                range.start,
                range.end.saturating_sub(range.start),
                size,
            )?;
            if host.is_empty() {
                continue;
            }
            // SAFETY: the range lies inside the region's allocation (checked above) and the
            // mirror is the region's size; the caller synchronizes the stream before the
            // mirror is read.
            unsafe { cu::memcpy_dtoh_async(&mut mirror[host], base + range.start, stream) }
                .map_err(cuda_error(format!(
                    "copying bytes {}..{} of the {region} to the host",
                    range.start, range.end
                )))?;
        }
        Ok(())
    }

    /// Copies `bytes` to byte `offset` of `region` (at `base`, of `size` bytes).
    fn write_region(
        &self,
        region: &'static str,
        base: sys::CUdeviceptr,
        size: u64,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), BackendError> {
        check_range(region, offset, bytes.len() as u64, size)?;
        if bytes.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the bytes land inside the region's allocation (checked above); the driver
        // stages pageable memory before returning, and the copy is ordered before the next
        // run on the same stream.
        unsafe { cu::memcpy_htod_async(base + offset, bytes, self.stream) }.map_err(cuda_error(
            format!(
                "copying {} bytes to byte {offset} of the {region} on the device",
                bytes.len()
            ),
        ))
    }
}

impl CompiledProgram for CudaProgram {
    fn target(&self) -> Target {
        Target::Cuda
    }

    fn n_kernels(&self) -> usize {
        self.entries.len()
    }

    fn compile_time(&self) -> Duration {
        self.compile_time
    }

    fn threads(&self) -> usize {
        1
    }

    fn describe(&self) -> String {
        self.info.to_string()
    }

    fn arena_size(&self) -> u64 {
        self.arena_size
    }

    fn write_arena(&mut self, offset: u64, bytes: &[u8]) -> Result<(), BackendError> {
        self.write_region("arena", self.arena, self.arena_size, offset, bytes)
    }

    fn state_size(&self) -> u64 {
        self.state_size
    }

    fn write_state(&mut self, offset: u64, bytes: &[u8]) -> Result<(), BackendError> {
        self.write_region("state", self.state, self.state_size, offset, bytes)
    }

    fn read_state(&mut self, ranges: &[Range<u64>]) -> Result<&[u8], BackendError> {
        self.bind()?;
        CudaProgram::read_back(
            "state",
            self.state,
            self.state_size,
            &mut self.state_mirror,
            ranges,
            self.stream,
        )?;
        self.synchronize(|| "copying the state to the host".to_string())?;
        Ok(&self.state_mirror)
    }

    unsafe fn run(&mut self, weights: &[u8]) -> Result<(), BackendError> {
        // The kernels read the device copy of the weights made at compile time; the section
        // given here is only checked, as the seam promises.
        if (weights.len() as u64) < self.weights_size {
            return Err(BackendError::WeightsSize {
                actual: weights.len() as u64,
                expected: self.weights_size,
            });
        }
        self.bind()?;
        self.runs += 1;
        let run = self.runs;
        if self.eager {
            for entry in &self.entries {
                self.launch(entry).map_err(cuda_error(format!(
                    "launching kernel `{}` ({}) in run {run}",
                    entry.kernel, entry.symbol
                )))?;
                self.synchronize(|| {
                    format!(
                        "running kernel `{}` ({}) in run {run}",
                        entry.kernel, entry.symbol
                    )
                })?;
            }
            return Ok(());
        }
        if !self.exec.is_null() {
            // SAFETY: the graph was instantiated over this program's regions, which live until
            // `Drop`; the caller promises the program passed validation.
            unsafe { cu::graph::launch(self.exec, self.stream) }
                .map_err(cuda_error(format!("launching the graph of run {run}")))?;
        }
        self.synchronize(|| {
            format!(
                "running the kernels of run {run} (a graph does not say which kernel failed: \
                 load the plan with MEMC_CUDA_EAGER=1 to run them one at a time)"
            )
        })
    }

    fn read_arena(&mut self, ranges: &[Range<u64>]) -> Result<&[u8], BackendError> {
        self.bind()?;
        CudaProgram::read_back(
            "arena",
            self.arena,
            self.arena_size,
            &mut self.arena_mirror,
            ranges,
            self.stream,
        )?;
        self.synchronize(|| "copying the arena to the host".to_string())?;
        Ok(&self.arena_mirror)
    }
}

impl Drop for CudaProgram {
    fn drop(&mut self) {
        let Some(context) = self.context else {
            return;
        };
        // Errors are ignored: there is no one to report them to, and each release is
        // independent of the others.
        // SAFETY: every handle below was made by this program, is released exactly once here,
        // and is not used afterwards; the stream is drained before anything it uses is freed.
        unsafe {
            let _ = cu::ctx::set_current(context);
            if !self.stream.is_null() {
                let _ = cu::stream::synchronize(self.stream);
            }
            if !self.exec.is_null() {
                let _ = cu::graph::exec_destroy(self.exec);
            }
            if !self.graph.is_null() {
                let _ = cu::graph::destroy(self.graph);
            }
            for ptr in [self.arena, self.weights, self.state] {
                if ptr != 0 {
                    let _ = cu::free_sync(ptr);
                }
            }
            if !self.stream.is_null() {
                let _ = cu::stream::destroy(self.stream);
            }
            if !self.module.is_null() {
                let _ = cu::module::unload(self.module);
            }
            let _ = cu::primary_ctx::release(self.device);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jit_logs_end_at_their_nul() {
        let mut buffer = b"ptxas error : Unknown modifier '.bogus'\n".to_vec();
        buffer.extend_from_slice(&[0, b'x', 0]);
        assert_eq!(log_text(&buffer), "ptxas error : Unknown modifier '.bogus'");
        assert_eq!(log_text(&[0; 8]), "");
        assert_eq!(log_text(b"no nul"), "no nul");
    }

    #[test]
    fn device_info_names_the_device_and_its_memory() {
        let info = DeviceInfo {
            ordinal: 0,
            name: "NVIDIA H100 80GB HBM3".to_string(),
            arena_bytes: 1000,
            weights_bytes: 200,
            state_bytes: 1,
            overhead_bytes: 4096,
            jit_log: String::new(),
        };
        assert_eq!(
            info.to_string(),
            "NVIDIA H100 80GB HBM3 (CUDA device 0): device memory 5297 bytes: arena 1000, \
             weights 200, state 1, module and graph about 4096"
        );
    }
}
