//! The crate's errors as the exceptions of `dexlake.errors` (defined in Python, so that an
//! invalid argument can be both a `DexlakeError` and a `ValueError`).
//!
//! | error | exception |
//! |---|---|
//! | the service answered an error, or could not be reached or understood | `ServiceError` (`.status`: the HTTP status, or `None`) |
//! | an invalid argument, request member or configuration | `InvalidArgumentError` (also a `ValueError`) |
//! | the lake: missing, damaged, locked, a file changed, I/O | `LakeError` |
//! | anything else (a computation, a task) | `DexlakeError` |

use dexlake::Error;
use dexlake::error::error_chain;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// The `dexlake.errors` class for `error`, and the HTTP status it carries.
fn class_of(error: &Error) -> (&'static str, Option<u16>) {
    let status = error.api_status().map(|s| s.code());
    let class = match error {
        Error::Sync { source, .. } => return class_of(source),
        Error::Api { .. }
        | Error::Decode { .. }
        | Error::Transport { .. }
        | Error::RetriesExhausted { .. }
        | Error::ResponseTooLarge { .. }
        | Error::RepeatedCursor { .. }
        | Error::EndlessPaging { .. } => "ServiceError",
        Error::InvalidArgument { .. } | Error::InvalidRequest { .. } | Error::Config(_) => {
            "InvalidArgumentError"
        }
        Error::Io { .. }
        | Error::Parquet { .. }
        | Error::Lake { .. }
        | Error::LakeDecode { .. }
        | Error::CommitConflict { .. }
        | Error::LakeLocked { .. } => "LakeError",
        _ => "DexlakeError",
    };
    (class, status)
}

/// An exception of `dexlake.errors` named `class` with `text` (and `status`).
pub fn raise(py: Python<'_>, class: &str, text: String, status: Option<u16>) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let class = py.import("dexlake.errors")?.getattr(class)?;
        let exception = class.call1((text.clone(),))?;
        exception.setattr("status", status)?;
        Ok(PyErr::from_value(exception))
    })();
    made.unwrap_or_else(|e| PyRuntimeError::new_err(format!("{text} (and raising it: {e})")))
}

/// `error` as the matching `dexlake.errors` exception.
pub fn to_py(py: Python<'_>, error: &Error) -> PyErr {
    to_py_after(py, "", error)
}

/// [`to_py`] with `prefix` before the message.
pub fn to_py_after(py: Python<'_>, prefix: &str, error: &Error) -> PyErr {
    let (class, status) = class_of(error);
    raise(py, class, format!("{prefix}{}", error_chain(error)), status)
}

/// `Result` of the crate into `PyResult`, converting the error under the GIL.
pub trait IntoPy<T> {
    /// The value, or the error as an exception.
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for dexlake::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, &e))
    }
}
