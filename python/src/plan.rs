//! `memc.Plan`: a plan file, opened, with the session that runs it.
//!
//! A plan always lives in a file, because the runtime maps its weights from one: `memc.load`
//! opens the caller's file, `memc.compile` writes the plan into a private temporary directory
//! (removed when the `Plan` is dropped) exactly as `memc compile -o` writes it. `Plan.save`
//! copies that file. The session (the compiled kernels and the arena) is made on the first
//! `run`, so a plan for a backend this machine lacks (`cuda` without a GPU) still compiles,
//! saves and reports.

use crate::error::{memc_error, type_name};
use crate::tensors::{bytes_to_fill, empty_array, input_array};
use memc_core::runtime::{PlanFile, Session, TensorRef};
use numpy::PyUntypedArray;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A directory of this process's own, removed with everything in it when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new directory under the system's temporary directory, readable by this user only.
    fn new() -> std::io::Result<TempDir> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let dir = base.join(format!("memc-{}-{n}-{nanos}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(TempDir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Nothing to tell anyone if it fails: the directory is in the temporary directory.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What `memc.compile` produced: the plan file in its temporary directory, and a warning
/// when the memory budget was not met.
pub struct CompiledPlan {
    file: PlanFile,
    dir: TempDir,
    warning: Option<String>,
}

/// Compiles the model at `path` as `memc compile MODEL -o PLAN` does and writes the plan into
/// a new temporary directory. Errors are the CLI's messages (a compile error is the rendered
/// diagnostic).
///
/// `progress` hears how far the plan's weights are written (see
/// [`memc_core::runtime::plan::write_plan_with_progress`]); returning `false` cancels the write,
/// and the error is then the runtime's "cancelled" message.
pub fn compile_to_temporary(
    path: &Path,
    dims: Vec<(String, u64)>,
    target: memc_core::codegen::Target,
    options: &memc_core::compile::CompileOptions,
    progress: &mut dyn FnMut(memc_core::runtime::WriteProgress) -> bool,
) -> Result<CompiledPlan, String> {
    let compiled = memc_core::compile::compile(path, options).map_err(|diag| {
        diag.render(&path.display().to_string(), "", false)
            .trim_end()
            .to_string()
    })?;
    let meta = memc_core::compile::plan_meta(path, dims, target, &compiled)
        .ok_or("memc bug: the compiled model has no program although lowering was asked for")?;
    let dir = TempDir::new()
        .map_err(|e| format!("cannot create a temporary directory for the plan: {e}"))?;
    let stem = path
        .file_stem()
        .map_or_else(|| "model".to_string(), |s| s.to_string_lossy().into_owned());
    let plan_path = dir.0.join(format!("{stem}.plan"));
    memc_core::runtime::plan::write_plan_with_progress(
        &plan_path,
        &meta,
        &compiled.module.weights,
        progress,
    )
    .map_err(|e| e.to_string())?;
    let file = PlanFile::open(&plan_path).map_err(|e| e.to_string())?;
    let warning = compiled
        .remat
        .as_ref()
        .and_then(memc_core::report::remat::summary)
        .and_then(Result::err);
    Ok(CompiledPlan { file, dir, warning })
}

/// A compiled model: run it on numpy arrays, save it, read its memory report.
///
/// Made by `memc.compile` or `memc.load`.
#[pyclass(module = "memc", frozen)]
pub struct Plan {
    file: PlanFile,
    /// The temporary directory of a compiled plan's file (`None` for a loaded one).
    _dir: Option<TempDir>,
    /// The session that runs the plan, made on the first run.
    session: Mutex<Option<Session>>,
}

impl Plan {
    pub fn new(file: PlanFile, dir: Option<TempDir>) -> Plan {
        Plan {
            file,
            _dir: dir,
            session: Mutex::new(None),
        }
    }

    /// The plan `memc.compile` made, with its budget warning raised as a Python warning.
    pub fn open_compiled(py: Python<'_>, compiled: CompiledPlan) -> PyResult<Plan> {
        if let Some(warning) = &compiled.warning {
            let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
            let message = std::ffi::CString::new(warning.replace('\0', " "))
                .expect("NUL bytes were replaced");
            PyErr::warn(py, &category, &message, 1)?;
        }
        Ok(Plan::new(compiled.file, Some(compiled.dir)))
    }

    /// The plan's memory report, as the plan file stores it.
    fn memory_report(&self) -> PyResult<memc_core::report::MemoryReport> {
        let path = self.file.path().display();
        let value = self.file.meta().memory_report.clone().ok_or_else(|| {
            memc_error(format!(
                "`{path}`: this plan carries no memory report (it was written by an older memc \
                 or without memc's memory planner)"
            ))
        })?;
        memc_core::report::MemoryReport::from_value(value).map_err(|e| {
            memc_error(format!(
                "`{path}`: the plan's memory report is not valid: {e}"
            ))
        })
    }

    /// `{name: (dtype, shape)}` for `tensors`, in the plan's order.
    fn signatures<'py>(
        py: Python<'py>,
        tensors: &[memc_core::codegen::program::IoTensor],
    ) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for io in tensors {
            let shape = PyTuple::new(py, &io.shape)?;
            dict.set_item(&io.name, (crate::tensors::descr(py, io.elem), shape))?;
        }
        Ok(dict)
    }
}

/// Runs the plan's session (made first if this is the first run) on `inputs` and copies each
/// output into its buffer in `outputs` (the plan's output order and sizes).
fn run_session(
    file: &PlanFile,
    session: &Mutex<Option<Session>>,
    inputs: &[(&str, memc_core::codegen::Scalar, &[u64], &[u8])],
    outputs: &mut [&mut [u8]],
) -> Result<Vec<Vec<u64>>, String> {
    // A panic elsewhere while the lock was held cannot leave the session half-changed in a
    // way a later run sees: a run rewrites every input and every buffer it reads.
    let mut guard = session.lock().unwrap_or_else(|p| p.into_inner());
    if guard.is_none() {
        let loaded = Session::load(file.path()).map_err(|e| e.to_string())?;
        // The file may have been replaced since `memc.load` opened it.
        if loaded.program() != file.program() {
            return Err(format!(
                "`{}` changed on disk since it was loaded; load it again",
                file.path().display()
            ));
        }
        *guard = Some(loaded);
    }
    let session = guard.as_mut().expect("the session was made above");
    let refs: Vec<(&str, TensorRef<'_>)> = inputs
        .iter()
        .map(|&(name, elem, shape, data)| {
            TensorRef::new(elem, shape, data)
                .map(|tensor| (name, tensor))
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, String>>()?;
    let results = session.run_in_place(&refs).map_err(|e| e.to_string())?;
    let mut shapes = Vec::with_capacity(results.len());
    for ((name, tensor), out) in results.iter().zip(outputs.iter_mut()) {
        // An output with a run-time extent holds at most its planned bytes; it fills the front
        // of its array (`Plan.run` trims it).
        let data = tensor.data();
        if data.len() > out.len() {
            return Err(format!(
                "memc bug: output `{name}` has {} bytes, the plan says at most {}",
                data.len(),
                out.len()
            ));
        }
        out[..data.len()].copy_from_slice(data);
        shapes.push(tensor.shape().to_vec());
    }
    Ok(shapes)
}

#[pymethods]
impl Plan {
    /// run(inputs)
    /// --
    ///
    /// Runs the plan on `inputs`, a dict of input names to numpy arrays (every input of the
    /// plan, each with the plan's dtype and shape), and returns a dict of output names to new
    /// numpy arrays, in the plan's order; an output whose extent depends on the data (NonZero,
    /// Compress, Unique) has the run's shape, its planned bound trimmed to what the run wrote. C-contiguous inputs are read in place, others are
    /// copied once. Raises `memc.Error` for an unknown, missing or mistyped input (naming it),
    /// `TypeError` when `inputs` is not a dict of str to numpy arrays.
    fn run<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let dict = inputs.cast::<PyDict>().map_err(|_| {
            PyTypeError::new_err(format!(
                "inputs: expected a dict of input names to numpy arrays, got {}",
                type_name(inputs)
            ))
        })?;
        let mut arrays = Vec::with_capacity(dict.len());
        for (key, value) in dict.iter() {
            if !key.is_instance_of::<PyString>() {
                return Err(PyTypeError::new_err(format!(
                    "inputs: an input name must be a str, got {}",
                    type_name(&key)
                )));
            }
            let name: String = key.extract()?;
            arrays.push(input_array(&name, &value)?);
        }
        let program = self.file.program();
        let outputs: Vec<Bound<'py, PyUntypedArray>> = program
            .outputs
            .iter()
            .map(|io| empty_array(py, io.elem, &io.shape))
            .collect::<PyResult<_>>()?;
        let shapes = {
            let inputs: Vec<_> = arrays
                .iter()
                .map(|a| (a.name.as_str(), a.elem, a.shape.as_slice(), a.bytes()))
                .collect();
            // SAFETY: the arrays are fresh from `empty_array`, no one else has seen them, and
            // `outputs` outlives these slices (dropped at the end of this block).
            let mut buffers: Vec<&mut [u8]> = outputs
                .iter()
                .map(|a| unsafe { bytes_to_fill(a) })
                .collect();
            let file = &self.file;
            let session = &self.session;
            py.detach(|| run_session(file, session, &inputs, &mut buffers))
                .map_err(memc_error)?
        };
        let result = PyDict::new(py);
        for ((io, array), shape) in program.outputs.iter().zip(outputs).zip(shapes) {
            if io.extent.is_none() {
                result.set_item(&io.name, array)?;
                continue;
            }
            // An output with a run-time extent: a fresh array of the run's shape, its
            // elements from the front of the array planned for the bound.
            let trimmed = empty_array(py, io.elem, &shape)?;
            // SAFETY: both arrays are fresh from `empty_array` and seen by no one else; the
            // trimmed one is the smaller, and `run_session` filled the front of the other.
            let (to, from) = unsafe { (bytes_to_fill(&trimmed), bytes_to_fill(&array)) };
            to.copy_from_slice(&from[..to.len()]);
            result.set_item(&io.name, trimmed)?;
        }
        Ok(result)
    }

    /// save(path)
    /// --
    ///
    /// Writes the plan file to `path` (replacing it whole, never in place), to `memc.load`
    /// or `memc run` later.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let source = self.file.path().to_path_buf();
        py.detach(|| copy_replacing(&source, &path))
            .map_err(memc_error)
    }

    /// report()
    /// --
    ///
    /// The memory report as a dict: the JSON `memc compile --emit plan-json` prints (arena
    /// size, lower bounds, schedule, live bytes per step, buffers with offsets, sizes and live
    /// ranges, aliases, and what recomputation did).
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = self.memory_report()?.to_json();
        py.import("json")?.getattr("loads")?.call1((json,))
    }

    /// report_svg()
    /// --
    ///
    /// The memory timeline as SVG text (what `memc report PLAN --svg FILE` writes).
    fn report_svg(&self) -> PyResult<String> {
        Ok(memc_core::report::svg(&self.memory_report()?))
    }

    /// `{name: (dtype, shape)}` of the inputs a run takes, in the plan's order.
    #[getter]
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        Plan::signatures(py, &self.file.program().inputs)
    }

    /// `{name: (dtype, shape)}` of the outputs a run returns, in this order.
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        Plan::signatures(py, &self.file.program().outputs)
    }

    /// The target the kernels were compiled for (`"cpu"` or `"cuda"`).
    #[getter]
    fn target(&self) -> String {
        self.file.meta().target.clone()
    }

    /// The arena's size in bytes: the memory a run uses besides the weights.
    #[getter]
    fn arena_size(&self) -> u64 {
        self.file.program().arena_size
    }

    /// The symbolic dims bound at compile time, `{name: value}`.
    #[getter]
    fn dims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (name, value) in &self.file.meta().dims {
            dict.set_item(name, value)?;
        }
        Ok(dict)
    }

    fn __repr__(&self) -> String {
        let meta = self.file.meta();
        let list = |tensors: &[memc_core::codegen::program::IoTensor]| {
            tensors
                .iter()
                .map(|io| {
                    format!(
                        "{}: {}",
                        io.name,
                        memc_core::runtime::tensor::signature(io.elem, &io.shape)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "<memc.Plan {} target={} arena={} inputs=[{}] outputs=[{}]>",
            meta.model,
            meta.target,
            memc_core::report::human_bytes(meta.program.arena_size),
            list(&meta.program.inputs),
            list(&meta.program.outputs)
        )
    }
}

/// Copies `source` to `dest` through a temporary file beside `dest` and a rename, so a plan
/// mapped from `dest` (`source` itself, even) is never written in place.
fn copy_replacing(source: &Path, dest: &Path) -> Result<(), String> {
    let cannot = |e: std::io::Error| format!("cannot write `{}`: {e}", dest.display());
    let file_name = dest.file_name().ok_or_else(|| {
        cannot(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a file name",
        ))
    })?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(file_name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = dest.with_file_name(temp_name);
    let copied = std::fs::copy(source, &temp).and_then(|_| std::fs::rename(&temp, dest));
    if let Err(e) = copied {
        // The partial copy is of no use; failing to remove it changes nothing for the caller.
        let _ = std::fs::remove_file(&temp);
        return Err(cannot(e));
    }
    Ok(())
}
