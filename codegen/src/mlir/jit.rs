//! The module lowered by MLIR's own passes to the LLVM dialect and run through MLIR's
//! ExecutionEngine: the independent oracle for the CPU backend.

use super::emit::{emit_module, EmitOptions};
use super::{MlirError, Session};
use crate::Program;
use melior::ir::operation::OperationLike;
use melior::pass::PassManager;
use melior::ExecutionEngine;

/// MLIR's upstream lowering of the emitted dialects to LLVM, in order: linalg to loops,
/// strided metadata to plain address arithmetic, scf to branches, math to LLVM intrinsics
/// (and to libm calls for what LLVM has no intrinsic for), bf16 conversions to integer
/// arithmetic (`arith-expand`: on a CPU without AVX512-BF16 LLVM lowers `fptrunc` to bf16 to
/// a call of compiler-rt's `__truncsfbf2`, which the ExecutionEngine does not link; seen on an
/// AVX2 machine, where every f32 -> bf16 cast failed to JIT), then everything to the LLVM
/// dialect.
pub const PIPELINE: &str = "builtin.module(convert-linalg-to-loops,expand-strided-metadata,\
lower-affine,convert-scf-to-cf,convert-math-to-llvm,convert-math-to-libm,\
arith-expand{include-bf16=true},finalize-memref-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,convert-cf-to-llvm,\
convert-func-to-llvm,reconcile-unrealized-casts)";

/// A program compiled by MLIR's ExecutionEngine. Fields drop in order: the engine before the
/// context it was made in.
pub struct Jit {
    entry: unsafe extern "C" fn(*mut *mut ()),
    /// Owns the machine code `entry` points into.
    _engine: ExecutionEngine,
    program: Program,
    _session: Session,
}

impl Jit {
    /// Emits `program` (see [`super::emit_text`]), lowers it with [`PIPELINE`] and JIT-compiles
    /// it at LLVM's `-O2`.
    pub fn compile(program: &Program, options: &EmitOptions) -> Result<Jit, MlirError> {
        program
            .validate()
            .map_err(|e| MlirError::Io(format!("the program does not validate: {e}")))?;
        let session = Session::new();
        melior::utility::register_all_passes();
        melior::utility::register_all_llvm_translations(&session.context);
        let engine = {
            let mut module = emit_module(&session, program, options)?;
            let passes = PassManager::new(&session.context);
            melior::utility::parse_pass_pipeline(passes.as_operation_pass_manager(), PIPELINE)
                .map_err(|e| MlirError::Lower(format!("the pipeline does not parse: {e}")))?;
            passes
                .run(&mut module)
                .map_err(|_| MlirError::Lower(session.diagnostics.take("a pass failed")))?;
            if !module.as_operation().verify() {
                return Err(MlirError::Lower(
                    session
                        .diagnostics
                        .take("the lowered module does not verify"),
                ));
            }
            // The engine targets the host CPU (with F16C on x86-64, f16 conversions are
            // instructions, not compiler-rt calls).
            ExecutionEngine::new(&module, 2, &[], false, false)
        };
        // The packed wrapper of `main`'s C interface: `void(void **args)`.
        let entry = engine.lookup("_mlir__mlir_ciface_main");
        if entry.is_null() {
            return Err(MlirError::Engine(
                "the JIT-compiled module has no `main` entry".into(),
            ));
        }
        // SAFETY: the ExecutionEngine made this symbol as the packed form of `main`, whose only
        // argument is the array of argument pointers.
        let entry: unsafe extern "C" fn(*mut *mut ()) = unsafe { std::mem::transmute(entry) };
        Ok(Jit {
            entry,
            _engine: engine,
            program: program.clone(),
            _session: session,
        })
    }

    /// The program it runs.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Runs the program on fresh memory: a zeroed arena and state, the graph inputs' bytes
    /// (little-endian, in the program's input order); returns the outputs' bytes in the
    /// program's output order (an output with a run-time extent trimmed to it, see
    /// [`Jit::run_outputs`]). `weights` is the plan's weights section.
    pub fn run(&self, weights: &[u8], inputs: &[&[u8]]) -> Result<Vec<Vec<u8>>, MlirError> {
        Ok(self
            .run_outputs(weights, inputs)?
            .into_iter()
            .map(|(_, bytes)| bytes)
            .collect())
    }

    /// [`Jit::run`] with each output's shape: its planned shape, or, for an output with a
    /// run-time extent, that shape with the extent its slot in the arena holds after the run
    /// (outside `[0, bound]` is an error), and only the kept elements.
    pub fn run_outputs(
        &self,
        weights: &[u8],
        inputs: &[&[u8]],
    ) -> Result<Vec<(Vec<u64>, Vec<u8>)>, MlirError> {
        let p = &self.program;
        if inputs.len() != p.inputs.len() {
            return Err(MlirError::Io(format!(
                "{} inputs given, the program has {}",
                inputs.len(),
                p.inputs.len()
            )));
        }
        if weights.len() as u64 != p.weights_size {
            return Err(MlirError::Io(format!(
                "the weights section has {} bytes, the program needs {}",
                weights.len(),
                p.weights_size
            )));
        }
        let mut arena = Aligned::zeroed(p.arena_size)?;
        let mut state = Aligned::zeroed(p.state_size)?;
        let mut weights_copy = Aligned::from_bytes(weights);
        let mut ins = Vec::new();
        for (io, bytes) in p.inputs.iter().zip(inputs) {
            if bytes.len() as u64 != io.byte_size() {
                return Err(MlirError::Io(format!(
                    "input `{}` has {} bytes, it needs {}",
                    io.name,
                    bytes.len(),
                    io.byte_size()
                )));
            }
            ins.push(Aligned::from_bytes(bytes));
        }
        let mut outs = p
            .outputs
            .iter()
            .map(|io| Aligned::zeroed(io.byte_size()))
            .collect::<Result<Vec<_>, _>>()?;
        let flat = |a: &mut Aligned, n: u64| descriptor(a.ptr(), &[n]);
        let mut descriptors = vec![
            flat(&mut arena, p.arena_size),
            flat(&mut weights_copy, p.weights_size),
            flat(&mut state, p.state_size),
        ];
        for (io, a) in p.inputs.iter().zip(&mut ins) {
            descriptors.push(descriptor(a.ptr(), &io.shape));
        }
        for (io, a) in p.outputs.iter().zip(&mut outs) {
            descriptors.push(descriptor(a.ptr(), &io.shape));
        }
        // The packed interface: one pointer per argument, each to a pointer to a descriptor.
        let mut pointers: Vec<*mut i64> = descriptors.iter_mut().map(|d| d.as_mut_ptr()).collect();
        let mut args: Vec<*mut ()> = pointers
            .iter_mut()
            .map(|p| p as *mut *mut i64 as *mut ())
            .collect();
        // SAFETY: every descriptor describes a live, aligned buffer of exactly the size and
        // shape the function's signature declares, and the program validated, so every access
        // the kernels make is inside those buffers.
        unsafe { (self.entry)(args.as_mut_ptr()) };
        p.outputs
            .iter()
            .zip(&outs)
            .map(|(io, a)| {
                let full = &a.bytes()[..io.byte_size() as usize];
                let Some(slot) = io.extent else {
                    return Ok((io.shape.clone(), full.to_vec()));
                };
                // `Program::validate` checked the slot lies inside the arena.
                let at = slot.byte_offset as usize;
                let raw: [u8; 8] = arena.bytes()[at..at + 8]
                    .try_into()
                    .expect("an extent slot is 8 bytes");
                let shape = io
                    .trimmed_shape(i64::from_le_bytes(raw))
                    .map_err(MlirError::Io)?;
                let bytes = io.trim_bytes(full, &shape);
                Ok((shape, bytes))
            })
            .collect()
    }
}

/// A strided memref descriptor of a row-major buffer: allocated and aligned pointers, offset 0,
/// sizes, strides.
fn descriptor(ptr: *mut u8, shape: &[u64]) -> Vec<i64> {
    let mut d = vec![ptr as i64, ptr as i64, 0];
    d.extend(shape.iter().map(|&s| s as i64));
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1] as i64;
    }
    d.extend(strides);
    d
}

/// Bytes in 8-byte-aligned storage, at least one word so the pointer is never dangling.
struct Aligned {
    words: Vec<u64>,
    len: usize,
}

impl Aligned {
    fn zeroed(len: u64) -> Result<Aligned, MlirError> {
        let len = usize::try_from(len)
            .map_err(|_| MlirError::Io("a region does not fit this machine".into()))?;
        Ok(Aligned {
            words: vec![0; len.div_ceil(8).max(1)],
            len,
        })
    }

    fn from_bytes(bytes: &[u8]) -> Aligned {
        let mut a = Aligned {
            words: vec![0; bytes.len().div_ceil(8).max(1)],
            len: bytes.len(),
        };
        a.bytes_mut().copy_from_slice(bytes);
        a
    }

    fn ptr(&mut self) -> *mut u8 {
        self.words.as_mut_ptr() as *mut u8
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialized bytes.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr() as *const u8, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr() as *mut u8, self.len) }
    }
}
