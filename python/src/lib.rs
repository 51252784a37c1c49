//! `memc` for Python: compile an ONNX model to a plan, run it on numpy arrays, read its memory
//! report.
//!
//! ```python
//! import memc, numpy as np
//! plan = memc.compile("model.onnx", dims={"batch": 1}, memory_budget="60%")
//! outputs = plan.run({"x": np.zeros((1, 784), np.float32)})
//! plan.save("model.plan"); plan = memc.load("model.plan")
//! plan.report()["arena_size"], plan.report_svg()
//! ```
//!
//! Every stage is the library the `memc` command calls: [`memc_core::compile::compile`] with
//! the options `memc compile -o` fills, [`memc_core::compile::plan_meta`] and
//! [`memc_core::runtime::plan::write_plan`] for the plan file, [`memc_core::runtime::Session`]
//! to run it, [`memc_core::report`] for the report. So a plan compiled here is the file
//! `memc compile` writes, and the errors are the CLI's: a failed compile raises [`Error`] with
//! the diagnostic the CLI prints (message, location, notes; no colors), a plan file that does
//! not open or a run the runtime refuses raises it with the runtime's message.
//!
//! Arguments are checked before anything runs: a dim that is not a positive int, a budget the
//! CLI's `--memory-budget` would refuse, an unknown target, an input that is not a numpy array
//! raise `TypeError` or `ValueError` naming the argument. Nothing a caller passes panics.
//!
//! The GIL is released while a model compiles, while a plan's kernels compile (on its first
//! run) and while it runs, so other Python threads go on; one plan runs one call at a time.

mod error;
mod plan;
mod tensors;

use error::{memc_error, type_name, Error};
use plan::Plan;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};
use std::collections::HashMap;
use std::path::PathBuf;

/// The symbolic dims to bind: a dict of names to positive ints, or `None` for none.
fn parse_dims(dims: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, u64)>> {
    let Some(dims) = dims.filter(|d| !d.is_none()) else {
        return Ok(Vec::new());
    };
    let dict = dims.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "dims: expected a dict of dim names to positive ints, such as {{\"batch\": 1}}, got {}",
            type_name(dims)
        ))
    })?;
    let mut bound = Vec::with_capacity(dict.len());
    for (key, value) in dict.iter() {
        let name: String = key.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "dims: a dim name must be a str, got {} ({})",
                key.repr().map_or_else(|_| "?".into(), |r| r.to_string()),
                type_name(&key)
            ))
        })?;
        let not_positive = || {
            PyValueError::new_err(format!(
                "dims[{name:?}]: expected a positive int, got {}",
                value.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ))
        };
        // A bool is an int in Python, but `{"batch": True}` is a mistake, not a 1.
        if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
            return Err(PyTypeError::new_err(format!(
                "dims[{name:?}]: expected a positive int, got {}",
                type_name(&value)
            )));
        }
        let size: u64 = value.extract().map_err(|_| not_positive())?;
        if size == 0 {
            return Err(not_positive());
        }
        if name.trim().is_empty() {
            return Err(PyValueError::new_err("dims: a dim name is empty"));
        }
        bound.push((name, size));
    }
    Ok(bound)
}

/// `consts`: graph inputs bound to values at compile time (`--const`), a dict of input names
/// to numpy arrays, or `None` for none.
fn parse_consts(
    consts: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<memc_core::ir::onnx::ConstInput>> {
    let Some(consts) = consts.filter(|c| !c.is_none()) else {
        return Ok(Vec::new());
    };
    let dict = consts.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "consts: expected a dict of input names to numpy arrays, such as {{\"shape\": np.array([4, 6])}}, got {}",
            type_name(consts)
        ))
    })?;
    let mut bound = Vec::with_capacity(dict.len());
    for (key, value) in dict.iter() {
        let name: String = key.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "consts: an input name must be a str, got {}",
                type_name(&key)
            ))
        })?;
        let array = tensors::input_array(&name, &value)?;
        let value = memc_core::ir::onnx::ConstInput::new(
            name.clone(),
            array.elem.elem(),
            array.shape.clone(),
            std::sync::Arc::from(array.bytes()),
        )
        .map_err(|e| PyValueError::new_err(format!("consts[{name:?}]: {e}")))?;
        bound.push(value);
    }
    Ok(bound)
}

/// `memory_budget`: what `--memory-budget` accepts (`"512MiB"`, `"60%"`), or an int of bytes.
fn parse_budget(budget: Option<&Bound<'_, PyAny>>) -> PyResult<Option<memc_core::remat::Budget>> {
    let Some(budget) = budget.filter(|b| !b.is_none()) else {
        return Ok(None);
    };
    let text = if budget.is_instance_of::<PyString>() {
        budget.extract::<String>()?
    } else if budget.is_instance_of::<PyInt>() && !budget.is_instance_of::<PyBool>() {
        let bytes: u64 = budget.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "memory_budget: expected a non-negative number of bytes, got {budget}"
            ))
        })?;
        bytes.to_string()
    } else {
        return Err(PyTypeError::new_err(format!(
            "memory_budget: expected a size such as \"512MiB\", a percentage such as \"60%\" \
             or an int of bytes, got {}",
            type_name(budget)
        )));
    };
    memc_core::remat::parse_budget(&text)
        .map(Some)
        .map_err(|message| {
            // The parser words its message for the CLI's flag.
            let flag = format!("`--memory-budget {text}`");
            PyValueError::new_err(message.replace(&flag, &format!("memory_budget={text:?}")))
        })
}

/// `target`: a backend's name.
fn parse_target(target: &str) -> PyResult<memc_core::codegen::Target> {
    memc_core::codegen::Target::from_name(target).ok_or_else(|| {
        let names: Vec<String> = memc_core::codegen::Target::ALL
            .iter()
            .map(|t| format!("{:?}", t.name()))
            .collect();
        PyValueError::new_err(format!(
            "target: unknown target {target:?}; memc compiles for {}",
            names.join(", ")
        ))
    })
}

/// compile(path, dims=None, memory_budget=None, target="cpu", plan_budget_ms=200, progress=None, consts=None)
/// --
///
/// Compiles the ONNX model at `path` to a plan, as `memc compile MODEL -o PLAN` does.
///
/// `dims` binds symbolic dims (`{"batch": 1, "seq": 128}`, like `--dim`); every dim must end
/// up static. `consts` binds graph inputs to values at compile time (`{"shape": np.array([4,
/// 6])}`, like `--const`): each becomes a constant, so shapes computed from it are static, and
/// the plan has no input for it. `memory_budget` recomputes values until the arena fits, like `--memory-budget`:
/// a size (`"512MiB"`, `"1.5GB"`, an int of bytes) or a percentage of the arena planned
/// without recomputation (`"60%"`). `target` is `"cpu"` or `"cuda"`. `plan_budget_ms` is the
/// time the offset search may use. Raises `memc.Error` with the CLI's diagnostic when the
/// model does not compile.
///
/// `progress`, a callable, is called as `progress(done, total)` while the plan's weights are
/// written (copied, or packed as they stream: the long part of compiling a large model), with
/// the bytes written so far and the weights' size: first with `done == 0`, then every 1/256 or
/// so, last with `done == total`. An exception it raises stops the compile and propagates, as
/// does Ctrl-C (KeyboardInterrupt) while the weights are written.
#[pyfunction]
#[pyo3(signature = (path, dims = None, memory_budget = None, target = "cpu", plan_budget_ms = 200, progress = None, consts = None))]
fn compile(
    py: Python<'_>,
    path: PathBuf,
    dims: Option<&Bound<'_, PyAny>>,
    memory_budget: Option<&Bound<'_, PyAny>>,
    target: &str,
    plan_budget_ms: u64,
    progress: Option<Bound<'_, PyAny>>,
    consts: Option<&Bound<'_, PyAny>>,
) -> PyResult<Plan> {
    if let Some(callback) = &progress {
        if !callback.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "progress: expected a callable progress(done, total), got {}",
                type_name(callback)
            )));
        }
    }
    let progress = progress.map(Bound::unbind);
    let dims = parse_dims(dims)?;
    let memory_budget = parse_budget(memory_budget)?;
    let target = parse_target(target)?;
    let consts = parse_consts(consts)?;
    let options = memc_core::compile::CompileOptions {
        dims: dims.iter().cloned().collect::<HashMap<_, _>>(),
        plan_memory: true,
        plan_budget: std::time::Duration::from_millis(plan_budget_ms),
        lower: true,
        no_fuse: false,
        target,
        memory_budget,
        recompute: Vec::new(),
        consts,
    };
    // The first exception from the callback (or a signal), raised once the write stopped.
    let mut raised: Option<PyErr> = None;
    let mut report = |p: memc_core::runtime::WriteProgress| {
        Python::attach(|py| {
            py.check_signals()?;
            match &progress {
                Some(callback) => callback.call1(py, (p.done, p.total)).map(drop),
                None => Ok(()),
            }
        })
        .map_err(|e| raised = Some(e))
        .is_ok()
    };
    let compiled =
        py.detach(|| plan::compile_to_temporary(&path, dims, target, &options, &mut report));
    if let Some(err) = raised {
        return Err(err);
    }
    Plan::open_compiled(py, compiled.map_err(memc_error)?)
}

/// load(path)
/// --
///
/// Opens the plan file at `path` (written by `Plan.save` or `memc compile -o`). Raises
/// `memc.Error` with the runtime's message when it is missing or not a valid plan. Its kernels
/// compile on the first `run`.
#[pyfunction]
fn load(py: Python<'_>, path: PathBuf) -> PyResult<Plan> {
    let file = py
        .detach(|| memc_core::runtime::PlanFile::open(&path).map_err(|e| e.to_string()))
        .map_err(memc_error)?;
    Ok(Plan::new(file, None))
}

#[pymodule]
fn memc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Error", m.py().get_type::<Error>())?;
    m.add_class::<Plan>()?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
