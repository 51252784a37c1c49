//! `memc.Error`, the exception every error memc reports becomes, and helpers for messages.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    memc,
    Error,
    PyException,
    "An error memc reports: a model it cannot compile (the diagnostic `memc compile` prints), \
     a file that is not a plan, or a run the runtime refuses (unknown, missing or mistyped \
     inputs). `str(e)` is the message."
);

/// Raises [`Error`] with `message`.
pub(crate) fn memc_error(message: impl Into<String>) -> PyErr {
    Error::new_err(message.into())
}

/// The name of a value's Python type (`list`), for messages.
pub(crate) fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}
