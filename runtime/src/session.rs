//! Executing a plan on the CPU: a [`Session`] loads a plan file once and runs it many times.
//!
//! Loading opens and checks the plan ([`PlanFile::open`]), compiles every kernel with the
//! Cranelift backend, allocates the one arena the plan was sized for (an anonymous mapping, zero-filled,
//! so pages no kernel touches cost no memory), and starts a thread pool. A run copies the
//! inputs to their arena offsets, runs every kernel of every step in schedule order, and reads
//! the outputs from the arena (or, for constant outputs, from the mapped weights).
//!
//! Guarantees: a session allocates nothing per op or per run beyond the returned outputs (none
//! with [`Session::run_in_place`]); the weights are read where the plan file is mapped, never
//! copied; inputs are checked by name, element type and shape before anything is written.

use crate::error::{Result, RuntimeError};
use crate::plan::PlanFile;
use crate::tensor::{signature, Tensor, TensorRef};
use memc_codegen::cpu::CpuProgram;
use memc_codegen::kernel::Region;
use memc_codegen::program::IoTensor;
use memc_codegen::{Kernel, Program};
use std::num::NonZeroUsize;
use std::path::Path;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

/// How to load a session.
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    /// Worker threads; `None` uses the machine's available parallelism.
    pub threads: Option<NonZeroUsize>,
    /// Check the weights section's checksum at load (reads every weight page once).
    pub verify_weights: bool,
}

/// Alignment of the arena's base address.
pub const ARENA_ALIGN: usize = 64;

/// A well-aligned type whose dangling pointer stands in for the base of an empty arena.
#[repr(C, align(64))]
struct Aligned([u8; ARENA_ALIGN]);

/// The one block of memory every intermediate, input and output lives in while a plan runs.
struct Arena {
    /// An anonymous private mapping: page-aligned, zero-filled, and backed by memory only where
    /// a run writes (the kernel maps a zero page on first touch). `None` when empty.
    map: Option<memmap2::MmapMut>,
    /// The planned size (the mapping rounds up to whole pages).
    len: usize,
}

impl Arena {
    fn new(bytes: u64) -> Result<Arena> {
        if bytes == 0 {
            return Ok(Arena { map: None, len: 0 });
        }
        let len = usize::try_from(bytes).map_err(|_| RuntimeError::Arena { bytes })?;
        // Not `alloc_zeroed`: for alignments above 16 the system allocator zeroes with memset,
        // which makes every arena page resident at load instead of at its first write.
        let map = memmap2::MmapMut::map_anon(len).map_err(|_| RuntimeError::Arena { bytes })?;
        Ok(Arena {
            map: Some(map),
            len,
        })
    }

    fn len(&self) -> usize {
        self.len
    }

    fn ptr(&mut self) -> *mut u8 {
        match &mut self.map {
            Some(map) => map.as_mut_ptr(),
            None => NonNull::<Aligned>::dangling().cast().as_ptr(),
        }
    }

    fn bytes(&self) -> &[u8] {
        match &self.map {
            Some(map) => &map[..self.len],
            None => &[],
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        match &mut self.map {
            Some(map) => &mut map[..len],
            None => &mut [],
        }
    }
}

// SAFETY: the arena owns its memory outright; the raw pointer is not shared with anything.
unsafe impl Send for Arena {}
// SAFETY: shared access only reads.
unsafe impl Sync for Arena {}

/// A loaded plan, ready to run.
pub struct Session {
    plan: PlanFile,
    cpu: CpuProgram,
    arena: Arena,
    pool: rayon::ThreadPool,
    n_kernels: usize,
    open_time: Duration,
    jit_time: Duration,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("plan", &self.plan)
            .field("arena_size", &self.arena.len())
            .field("threads", &self.pool.current_num_threads())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Loads the plan at `path` with the default options.
    pub fn load(path: impl AsRef<Path>) -> Result<Session> {
        Session::load_with(path, &SessionOptions::default())
    }

    pub fn load_with(path: impl AsRef<Path>, options: &SessionOptions) -> Result<Session> {
        let started = Instant::now();
        let plan = PlanFile::open(path.as_ref())?;
        if options.verify_weights {
            plan.verify_weights()?;
        }
        let open_time = started.elapsed();

        let started = Instant::now();
        let kernels: Vec<&Kernel> = plan.program().kernels().collect();
        let cpu = CpuProgram::compile(&kernels)?;
        let jit_time = started.elapsed();

        let arena = Arena::new(plan.program().arena_size)?;
        let threads = options
            .threads
            .or_else(|| std::thread::available_parallelism().ok())
            .map_or(1, NonZeroUsize::get);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("memc-worker-{i}"))
            .build()
            .map_err(|e| RuntimeError::ThreadPool(e.to_string()))?;
        Ok(Session {
            n_kernels: kernels.len(),
            plan,
            cpu,
            arena,
            pool,
            open_time,
            jit_time,
        })
    }

    pub fn plan(&self) -> &PlanFile {
        &self.plan
    }

    pub fn program(&self) -> &Program {
        self.plan.program()
    }

    /// The graph inputs a run takes, in the plan's order.
    pub fn inputs(&self) -> &[IoTensor] {
        &self.program().inputs
    }

    /// The graph outputs a run returns, in this order.
    pub fn outputs(&self) -> &[IoTensor] {
        &self.program().outputs
    }

    /// The arena's size in bytes: all the memory a run uses besides the mapped weights.
    pub fn arena_size(&self) -> u64 {
        self.arena.len() as u64
    }

    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Time spent opening and checking the plan file (with the weights checksum if asked).
    pub fn open_time(&self) -> Duration {
        self.open_time
    }

    /// Time spent compiling the kernels.
    pub fn jit_time(&self) -> Duration {
        self.jit_time
    }

    /// Runs the plan on `inputs` (each graph input exactly once, by name) and returns the
    /// outputs in the plan's order.
    pub fn run(&mut self, inputs: &[(&str, TensorRef<'_>)]) -> Result<Vec<Tensor>> {
        let outputs = self.run_in_place(inputs)?;
        Ok(outputs
            .iter()
            .map(|(name, tensor)| tensor.to_tensor(*name))
            .collect())
    }

    /// Like [`Session::run`], but returns the outputs where they lie (in the arena or the
    /// mapped weights) instead of copying them; they stay valid until the next run.
    pub fn run_in_place(
        &mut self,
        inputs: &[(&str, TensorRef<'_>)],
    ) -> Result<Vec<(&str, TensorRef<'_>)>> {
        let bound = bind_inputs(self.plan.program(), inputs)?;
        let arena = self.arena.bytes_mut();
        for (io, tensor) in self.plan.program().inputs.iter().zip(bound) {
            // `Program::validate` checked the input lies inside the arena, and `bind_inputs`
            // that the tensor has its size.
            let start = io.byte_offset as usize;
            arena[start..start + tensor.data().len()].copy_from_slice(tensor.data());
        }
        let arena = self.arena.ptr();
        let weights = self.plan.weights().as_ptr();
        for index in 0..self.n_kernels {
            // SAFETY: the arena is `arena_size` bytes and the weights `weights_size` bytes (the
            // plan checked its section's length), the sizes every kernel was validated against
            // in `PlanFile::open`; `&mut self` keeps anything else from touching the arena.
            unsafe { self.cpu.run_kernel(index, arena, weights, &self.pool) };
        }
        let this: &Session = self;
        Ok(this
            .program()
            .outputs
            .iter()
            .map(|io| (io.name.as_str(), this.output(io)))
            .collect())
    }

    fn output<'s>(&'s self, io: &'s IoTensor) -> TensorRef<'s> {
        let region = match io.region {
            Region::Arena => self.arena.bytes(),
            Region::Weights => self.plan.weights(),
        };
        // `Program::validate` checked the output lies inside its region.
        let start = io.byte_offset as usize;
        let bytes = &region[start..start + io.byte_size() as usize];
        TensorRef::new_unchecked(io.elem, &io.shape, bytes)
    }
}

/// `inputs` in the order of the plan's inputs, each checked against its signature.
fn bind_inputs<'t>(
    program: &Program,
    inputs: &[(&str, TensorRef<'t>)],
) -> Result<Vec<TensorRef<'t>>> {
    let expected = &program.inputs;
    let listing = || {
        if expected.is_empty() {
            return "none".to_string();
        }
        let items: Vec<String> = expected
            .iter()
            .map(|io| format!("`{}` ({})", io.name, signature(io.elem, &io.shape)))
            .collect();
        items.join(", ")
    };
    let mut bound: Vec<Option<TensorRef<'t>>> = vec![None; expected.len()];
    for (name, tensor) in inputs {
        let index = expected
            .iter()
            .position(|io| io.name == *name)
            .ok_or_else(|| RuntimeError::UnknownInput {
                name: name.to_string(),
                expected: listing(),
            })?;
        let io = &expected[index];
        if bound[index].is_some() {
            return Err(RuntimeError::DuplicateInput {
                name: name.to_string(),
            });
        }
        if tensor.elem() != io.elem {
            return Err(RuntimeError::InputType {
                name: name.to_string(),
                expected: io.elem.name(),
                got: tensor.elem().name(),
            });
        }
        if tensor.shape() != io.shape.as_slice() {
            return Err(RuntimeError::InputShape {
                name: name.to_string(),
                expected: crate::tensor::shape_string(&io.shape),
                got: crate::tensor::shape_string(tensor.shape()),
            });
        }
        bound[index] = Some(*tensor);
    }
    expected
        .iter()
        .zip(bound)
        .map(|(io, tensor)| {
            tensor.ok_or_else(|| RuntimeError::MissingInput {
                name: io.name.clone(),
                expected: signature(io.elem, &io.shape),
                all: listing(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use memc_codegen::Scalar;

    fn program() -> Program {
        let io = |name: &str, elem, shape: Vec<u64>, byte_offset| IoTensor {
            name: name.into(),
            elem,
            shape,
            region: Region::Arena,
            byte_offset,
        };
        Program {
            arena_size: 128,
            weights_size: 0,
            inputs: vec![
                io("image", Scalar::F32, vec![2, 3], 0),
                io("ids", Scalar::I64, vec![4], 64),
            ],
            outputs: vec![],
            weights: vec![],
            steps: vec![],
        }
    }

    fn bind_err(inputs: &[(&str, TensorRef<'_>)]) -> String {
        bind_inputs(&program(), inputs).unwrap_err().to_string()
    }

    const IMAGE: [f32; 6] = [0.0; 6];
    const IDS: [i64; 4] = [1, 2, 3, 4];

    #[test]
    fn inputs_are_bound_in_the_plan_order() {
        let image = TensorRef::from_slice(&[2, 3], &IMAGE).unwrap();
        let ids = TensorRef::from_slice(&[4], &IDS).unwrap();
        let bound = bind_inputs(&program(), &[("ids", ids), ("image", image)]).unwrap();
        assert_eq!(bound, [image, ids]);
    }

    #[test]
    fn each_input_mistake_has_its_message() {
        let image = TensorRef::from_slice(&[2, 3], &IMAGE).unwrap();
        let ids = TensorRef::from_slice(&[4], &IDS).unwrap();
        assert_eq!(
            bind_err(&[("image", image), ("ids", ids), ("mask", ids)]),
            "unknown input `mask`; the plan's inputs are `image` (f32[2, 3]), `ids` (i64[4])"
        );
        assert_eq!(
            bind_err(&[("image", image)]),
            "missing input `ids` (i64[4]); the plan's inputs are `image` (f32[2, 3]), `ids` (i64[4])"
        );
        assert_eq!(
            bind_err(&[("image", image), ("image", image)]),
            "input `image` is given twice"
        );
        assert_eq!(
            bind_err(&[("image", ids)]),
            "input `image`: expected element type f32, got i64"
        );
        let transposed = TensorRef::from_slice(&[3, 2], &IMAGE).unwrap();
        assert_eq!(
            bind_err(&[("image", transposed)]),
            "input `image`: expected shape [2, 3], got [3, 2]"
        );
        let mut none = program();
        none.inputs.clear();
        assert_eq!(
            bind_inputs(&none, &[("x", ids)]).unwrap_err().to_string(),
            "unknown input `x`; the plan's inputs are none"
        );
    }

    #[test]
    fn arenas_are_aligned_and_zeroed() {
        for bytes in [0u64, 1, 63, 4096, 1 << 20] {
            let mut arena = Arena::new(bytes).unwrap();
            assert_eq!(arena.len() as u64, bytes);
            assert_eq!(arena.ptr() as usize % ARENA_ALIGN, 0);
            assert!(arena.bytes().iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn an_arena_too_large_for_memory_is_an_error() {
        let err = Arena::new(u64::MAX).err().unwrap();
        assert_eq!(
            err.to_string(),
            "cannot allocate the arena of 18446744073709551615 bytes"
        );
    }
}
