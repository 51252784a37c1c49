//! Executing a plan: a [`Session`] loads a plan file once and runs it many times.
//!
//! Loading opens and checks the plan ([`PlanFile::open`]; for a `cuda` plan that includes
//! emitting the PTX again from the validated program and refusing the plan when its stored PTX
//! differs, so only PTX made from validated kernels runs), picks the backend for the plan's
//! target ([`memc_codegen::backend::backend_for`]: the CPU behind the `cpu` cargo feature, NVIDIA
//! GPUs behind `cuda`) and has it compile every kernel, allocate the one arena the plan was sized
//! for and start its workers. A run copies the inputs to their arena offsets through the
//! backend, runs every kernel of every step in schedule order, and reads the outputs from the
//! arena (or, for constant outputs, from the mapped weights). The session itself never touches
//! kernels or the arena's memory: every backend, host or device, is driven the same way.
//!
//! A training step's plan has persistent state ([`Program::state`]): parameters, which the
//! caller sets before the first run ([`Session::set_state`]), and gradient buffers, which start
//! at zero and which every run updates in place. The state lives with the compiled program,
//! apart from the arena, for as long as the session; [`Session::state_tensor`] reads it back.
//!
//! Guarantees: a session allocates nothing per op or per run beyond the returned outputs (none
//! with [`Session::run_in_place`]); a run refuses to start while a parameter has no value; the weights are read where the plan file is mapped, never
//! copied (by the CPU backend); inputs are checked by name, element type and shape before
//! anything is written; a build without the plan's backend answers with an error, never a
//! panic.

use crate::error::{Result, RuntimeError};
use crate::plan::PlanFile;
use crate::tensor::{signature, Tensor, TensorRef};
use memc_codegen::backend::{backend_for, BackendError, BackendOptions, CompiledProgram};
use memc_codegen::kernel::Region;
use memc_codegen::program::{IoTensor, StateKind, StateTensor};
use memc_codegen::{Program, Target};
use std::num::NonZeroUsize;
use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

/// How to load a session.
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    /// Worker threads; `None` uses the machine's available parallelism.
    pub threads: Option<NonZeroUsize>,
    /// Check the weights section's checksum at load (reads every weight page once).
    pub verify_weights: bool,
}

pub use memc_codegen::backend::ARENA_ALIGN;

/// A loaded plan, ready to run.
pub struct Session {
    plan: PlanFile,
    compiled: Box<dyn CompiledProgram>,
    /// The arena bytes of the outputs that live there, and of their extent slots, for
    /// [`CompiledProgram::read_arena`].
    output_ranges: Vec<Range<u64>>,
    /// Per output with a run-time extent: its shape in the last run and, when its bounded axis
    /// is not the first (so the kept elements are not one prefix of its bytes), the kept
    /// elements copied together; empty for the other outputs.
    trimmed: Vec<(Vec<u64>, Vec<u8>)>,
    /// Whether each state tensor (in the program's order) has been set or written by a run.
    state_set: Vec<bool>,
    open_time: Duration,
    jit_time: Duration,
    /// How long the backend's `run` of the last run took.
    backend_run_time: Duration,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("plan", &self.plan)
            .field("target", &self.compiled.target())
            .field("arena_size", &self.compiled.arena_size())
            .field("threads", &self.compiled.threads())
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

        let target_name = &plan.meta().target;
        let target = Target::from_name(target_name)
            .ok_or_else(|| BackendError::UnknownTarget(target_name.clone()))?;
        let backend = backend_for(target)?;
        let threads = options
            .threads
            .or_else(|| std::thread::available_parallelism().ok())
            .unwrap_or(NonZeroUsize::MIN);
        let compiled =
            backend.compile(plan.program(), plan.weights(), &BackendOptions { threads })?;
        let jit_time = compiled.compile_time();
        let output_ranges = plan
            .program()
            .outputs
            .iter()
            .filter(|io| io.region == Region::Arena)
            .flat_map(|io| {
                let slot = io
                    .extent
                    .map(|e| e.byte_offset..e.byte_offset + memc_codegen::program::EXTENT_BYTES);
                std::iter::once(io.byte_offset..io.byte_offset + io.byte_size()).chain(slot)
            })
            .collect();
        // Capacity for every output with an extent, so a run allocates nothing.
        let trimmed = plan
            .program()
            .outputs
            .iter()
            .map(|io| match io.extent {
                Some(_) => (
                    Vec::with_capacity(io.shape.len()),
                    Vec::with_capacity(io.byte_size() as usize),
                ),
                None => (Vec::new(), Vec::new()),
            })
            .collect();
        // Gradient buffers start at zero, which the backend's fresh state already holds.
        let state_set = plan
            .program()
            .state
            .iter()
            .map(|s| s.kind == StateKind::Gradient)
            .collect();
        Ok(Session {
            plan,
            compiled,
            output_ranges,
            trimmed,
            state_set,
            open_time,
            jit_time,
            backend_run_time: Duration::ZERO,
        })
    }

    pub fn plan(&self) -> &PlanFile {
        &self.plan
    }

    pub fn program(&self) -> &Program {
        self.plan.program()
    }

    /// The target the plan runs on (its backend's).
    pub fn target(&self) -> Target {
        self.compiled.target()
    }

    /// The graph inputs a run takes, in the plan's order.
    pub fn inputs(&self) -> &[IoTensor] {
        &self.program().inputs
    }

    /// The graph outputs a run returns, in this order.
    pub fn outputs(&self) -> &[IoTensor] {
        &self.program().outputs
    }

    /// The persistent state a run reads and updates (empty unless the plan is a training step).
    pub fn state(&self) -> &[StateTensor] {
        &self.program().state
    }

    /// The state region's size in bytes.
    pub fn state_size(&self) -> u64 {
        self.compiled.state_size()
    }

    fn state_index(&self, name: &str) -> Result<usize> {
        let state = &self.program().state;
        state
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| RuntimeError::UnknownState {
                name: name.to_string(),
                expected: state_listing(state),
            })
    }

    /// Sets state tensor `name` (a parameter before the first run, or a gradient buffer to
    /// resume from); its element type and shape must be the plan's.
    pub fn set_state(&mut self, name: &str, tensor: TensorRef<'_>) -> Result<()> {
        let index = self.state_index(name)?;
        let s = &self.program().state[index];
        if tensor.elem() != s.elem || tensor.shape() != s.shape.as_slice() {
            return Err(RuntimeError::StateType {
                name: name.to_string(),
                expected: signature(s.elem, &s.shape),
                got: signature(tensor.elem(), tensor.shape()),
            });
        }
        let offset = s.byte_offset;
        self.compiled.write_state(offset, tensor.data())?;
        self.state_set[index] = true;
        Ok(())
    }

    /// State tensor `name` as the last run (or [`Session::set_state`]) left it; it stays valid
    /// until the next run or write.
    pub fn state_tensor(&mut self, name: &str) -> Result<TensorRef<'_>> {
        let index = self.state_index(name)?;
        let Session { plan, compiled, .. } = self;
        let s = &plan.program().state[index];
        let range = s.byte_offset..s.byte_offset + s.byte_size();
        let bytes = compiled.read_state(std::slice::from_ref(&range))?;
        // `Program::validate` checked the tensor lies inside the state region.
        let bytes = &bytes[range.start as usize..range.end as usize];
        Ok(TensorRef::new_unchecked(s.elem, &s.shape, bytes))
    }

    /// The arena's size in bytes: all the memory a run uses besides the mapped weights and the
    /// persistent state.
    pub fn arena_size(&self) -> u64 {
        self.compiled.arena_size()
    }

    pub fn threads(&self) -> usize {
        self.compiled.threads()
    }

    /// Time spent opening and checking the plan file (with the weights checksum if asked).
    pub fn open_time(&self) -> Duration {
        self.open_time
    }

    /// Time spent compiling the kernels.
    pub fn jit_time(&self) -> Duration {
        self.jit_time
    }

    /// One line on where the plan runs: the CPU's worker threads, or the GPU and the device
    /// memory the plan holds there ([`CompiledProgram::describe`]).
    pub fn describe(&self) -> String {
        self.compiled.describe()
    }

    /// The wall time of the backend's [`CompiledProgram::run`] in the last run: the kernels
    /// only, without copying inputs in or outputs out (a device backend's `run` returns once
    /// the device finished, so this includes its synchronization). Zero before the first run.
    pub fn backend_run_time(&self) -> Duration {
        self.backend_run_time
    }

    /// Starts timing each kernel of every run (`on`) or stops it; see
    /// [`Session::kernel_times`]. Turning it on allocates the table, so the runs after it
    /// still allocate nothing.
    pub fn set_profiling(&mut self, on: bool) {
        self.compiled.set_profiling(on);
    }

    /// Per kernel of [`Program::kernels`], in schedule order, its wall time summed over the
    /// runs since [`Session::set_profiling`] turned profiling on; empty when it is off or the
    /// backend does not time kernels one by one (the GPU's runs them asynchronously).
    pub fn kernel_times(&self) -> &[Duration] {
        self.compiled.kernel_times()
    }

    /// Per kernel, as [`Session::kernel_times`], its shortest wall time in one run.
    pub fn kernel_min_times(&self) -> &[Duration] {
        self.compiled.kernel_min_times()
    }

    /// Runs the plan on `inputs` (each graph input exactly once, by name) and returns the
    /// outputs in the plan's order.
    pub fn run(&mut self, inputs: &[(&str, TensorRef<'_>)]) -> Result<Vec<Tensor>> {
        let outputs = self.run_in_place(inputs)?;
        Ok(outputs
            .iter()
            .map(|(name, tensor)| tensor.to_tensor(name))
            .collect())
    }

    /// Like [`Session::run`], but returns the outputs where they lie (in the arena or the
    /// mapped weights) instead of copying them; they stay valid until the next run. Nothing is
    /// allocated on the heap (`tests/no_heap.rs` counts).
    ///
    /// An output with a run-time extent (a bounded dim: NonZero's, Compress's, Unique's) comes
    /// back with the extent the run wrote in its slot, after a check that it lies between 0 and
    /// the bound ([`RuntimeError::Extent`] otherwise; nothing past the bound is read). Where its
    /// bounded axis is the first, it is the leading part of its bytes in the arena; otherwise
    /// the kept slices are copied together into a buffer the session reserved for that output
    /// at load.
    pub fn run_in_place(&mut self, inputs: &[(&str, TensorRef<'_>)]) -> Result<Outputs<'_>> {
        let Session {
            plan,
            compiled,
            output_ranges,
            trimmed,
            state_set,
            backend_run_time,
            ..
        } = self;
        let program = plan.program();
        check_inputs(program, inputs)?;
        if let Some(unset) = program
            .state
            .iter()
            .zip(state_set.iter())
            .find(|(_, set)| !**set)
        {
            let s = unset.0;
            return Err(RuntimeError::MissingParameter {
                name: s.name.clone(),
                expected: signature(s.elem, &s.shape),
            });
        }
        for io in &program.inputs {
            // `check_inputs` found each input exactly once, with its size; `Program::validate`
            // checked it lies inside the arena, and the backend checks the range again.
            if let Some((_, tensor)) = inputs.iter().find(|(name, _)| *name == io.name) {
                compiled.write_arena(io.byte_offset, tensor.data())?;
            }
        }
        let started = Instant::now();
        // SAFETY: `PlanFile::open` validated the program the backend compiled.
        unsafe { compiled.run(plan.weights())? };
        *backend_run_time = started.elapsed();
        let arena = compiled.read_arena(output_ranges)?;
        let weights = plan.weights();
        for (io, (shape, bytes)) in program.outputs.iter().zip(trimmed.iter_mut()) {
            let Some(slot) = io.extent else {
                continue;
            };
            // `Program::validate` checked the slot lies inside the arena.
            let at = slot.byte_offset as usize;
            let raw: [u8; 8] = arena[at..at + 8]
                .try_into()
                .expect("an extent slot is 8 bytes (EXTENT_BYTES)");
            let axis = slot.axis as usize;
            let bound = io.shape[axis];
            let extent = match u64::try_from(i64::from_le_bytes(raw)) {
                Ok(e) if e <= bound => e,
                // The message, and so its allocation, only on this error.
                _ => {
                    return Err(RuntimeError::Extent(
                        io.trimmed_shape(i64::from_le_bytes(raw)).unwrap_err(),
                    ))
                }
            };
            // `shape` and `bytes` hold the capacity reserved at load: nothing is allocated.
            shape.clear();
            shape.extend_from_slice(&io.shape);
            shape[axis] = extent;
            bytes.clear();
            if io.shape[..axis].iter().any(|&d| d > 1) {
                let region = match io.region {
                    Region::Arena => arena,
                    Region::Weights => weights,
                    Region::State => &[],
                };
                let elem = io.elem.size() as usize;
                let inner = io.shape[axis + 1..].iter().product::<u64>() as usize * elem;
                let outer = io.shape[..axis].iter().product::<u64>() as usize;
                let start = io.byte_offset as usize;
                for o in 0..outer {
                    let from = start + o * bound as usize * inner;
                    bytes.extend_from_slice(&region[from..from + extent as usize * inner]);
                }
            }
        }
        Ok(Outputs {
            program,
            arena,
            weights,
            trimmed,
        })
    }
}

/// The outputs of a run where they lie ([`Session::run_in_place`]), in the plan's order: a view
/// that allocates nothing.
#[derive(Clone, Copy)]
pub struct Outputs<'s> {
    program: &'s Program,
    arena: &'s [u8],
    weights: &'s [u8],
    /// Per output with a run-time extent: its shape in this run, and its kept elements copied
    /// together where they are not a prefix of its bytes.
    trimmed: &'s [(Vec<u64>, Vec<u8>)],
}

impl<'s> Outputs<'s> {
    pub fn len(&self) -> usize {
        self.program.outputs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.program.outputs.is_empty()
    }

    /// Output `index`: its name and its tensor.
    pub fn get(&self, index: usize) -> Option<(&'s str, TensorRef<'s>)> {
        let io = self.program.outputs.get(index)?;
        let region = match io.region {
            Region::Arena => self.arena,
            Region::Weights => self.weights,
            // `Program::validate` refuses outputs in the state.
            Region::State => &[],
        };
        // `Program::validate` checked the output lies inside its region.
        let start = io.byte_offset as usize;
        let tensor = match io.extent {
            None => {
                let bytes = &region[start..start + io.byte_size() as usize];
                TensorRef::new_unchecked(io.elem, &io.shape, bytes)
            }
            Some(slot) => {
                let (shape, copied) = &self.trimmed[index];
                if io.shape[..slot.axis as usize].iter().any(|&d| d > 1) {
                    TensorRef::new_unchecked(io.elem, shape, copied)
                } else {
                    // The kept slices are the leading bytes of the output.
                    let len = shape.iter().product::<u64>() * io.elem.size();
                    TensorRef::new_unchecked(io.elem, shape, &region[start..start + len as usize])
                }
            }
        };
        Some((io.name.as_str(), tensor))
    }

    /// Every output, in the plan's order.
    pub fn iter(&self) -> impl Iterator<Item = (&'s str, TensorRef<'s>)> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

impl std::fmt::Debug for Outputs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// `` `W1` (parameter f32[784, 64]), ...``: the state tensors, for messages.
fn state_listing(state: &[StateTensor]) -> String {
    if state.is_empty() {
        return "empty (the plan is not a training step)".to_string();
    }
    let items: Vec<String> = state
        .iter()
        .map(|s| {
            format!(
                "`{}` ({} {})",
                s.name,
                s.kind.name(),
                signature(s.elem, &s.shape)
            )
        })
        .collect();
    items.join(", ")
}

/// Checks that `inputs` gives each of the plan's inputs exactly once, with its signature: the
/// check every run makes, for drivers that run a plan's program another way (`memc run
/// --engine mlir`). Allocates only to describe an error.
pub fn check_inputs(program: &Program, inputs: &[(&str, TensorRef<'_>)]) -> Result<()> {
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
    for (given, (name, tensor)) in inputs.iter().enumerate() {
        let io = expected.iter().find(|io| io.name == *name).ok_or_else(|| {
            RuntimeError::UnknownInput {
                name: name.to_string(),
                expected: listing(),
            }
        })?;
        if inputs[..given].iter().any(|(earlier, _)| earlier == name) {
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
    }
    if let Some(io) = expected
        .iter()
        .find(|io| !inputs.iter().any(|(name, _)| *name == io.name))
    {
        return Err(RuntimeError::MissingInput {
            name: io.name.clone(),
            expected: signature(io.elem, &io.shape),
            all: listing(),
        });
    }
    Ok(())
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
            extent: None,
        };
        Program {
            arena_size: 128,
            weights_size: 0,
            state_size: 0,
            inputs: vec![
                io("image", Scalar::F32, vec![2, 3], 0),
                io("ids", Scalar::I64, vec![4], 64),
            ],
            outputs: vec![],
            weights: vec![],
            state: vec![],
            steps: vec![],
        }
    }

    fn bind_err(inputs: &[(&str, TensorRef<'_>)]) -> String {
        check_inputs(&program(), inputs).unwrap_err().to_string()
    }

    const IMAGE: [f32; 6] = [0.0; 6];
    const IDS: [i64; 4] = [1, 2, 3, 4];

    #[test]
    fn inputs_may_come_in_any_order() {
        let image = TensorRef::from_slice(&[2, 3], &IMAGE).unwrap();
        let ids = TensorRef::from_slice(&[4], &IDS).unwrap();
        check_inputs(&program(), &[("ids", ids), ("image", image)]).unwrap();
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
            check_inputs(&none, &[("x", ids)]).unwrap_err().to_string(),
            "unknown input `x`; the plan's inputs are none"
        );
    }
}
