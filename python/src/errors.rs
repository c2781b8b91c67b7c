//! The crate's errors as the exceptions of `dexlake.errors` (defined in Python, so that an
//! invalid argument can be both a `DexlakeError` and a `ValueError`), chosen by the error's
//! kind ([`dexlake::ErrorKind`], the kind that also chooses the CLI's exit status):
//!
//! | kind | exception |
//! |---|---|
//! | usage: an invalid argument, request member or configuration | `InvalidArgumentError` (also a `ValueError`) |
//! | no data: nothing in the lake matched | `NoDataError` (also a `LookupError`) |
//! | incomplete: `strict=True` and the lake does not cover the answer | `CoverageError` |
//! | damaged lake: a committed file missing, damaged or replaced, or a manifest that does not decode | `DamagedLakeError` (a `LakeError`, not a `ValueError`) |
//! | service: it answered an error, or could not be reached or understood | `ServiceError` (`.status`: the HTTP status, or `None`) |
//! | busy: another writer holds the lake's lock, or committed first | `LakeBusyError` (a `LakeError`) |
//! | interrupted before the work finished | `DexlakeInterrupted` |
//! | any other failure of the lake or the file system | `LakeError` |
//! | anything else (a computation, a task) | `DexlakeError` |

use dexlake::error::error_chain;
use dexlake::{Error, ErrorKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// The `dexlake.errors` class for `error`, and the HTTP status it carries.
fn class_of(error: &Error) -> (&'static str, Option<u16>) {
    let status = error.api_status().map(|s| s.code());
    let class = match error.kind() {
        ErrorKind::Usage => "InvalidArgumentError",
        ErrorKind::NoData => "NoDataError",
        ErrorKind::Incomplete => "CoverageError",
        ErrorKind::DamagedLake => "DamagedLakeError",
        ErrorKind::Service => "ServiceError",
        ErrorKind::Busy => "LakeBusyError",
        ErrorKind::Interrupted => "DexlakeInterrupted",
        _ => other_class(error),
    };
    (class, status)
}

/// The class of an error of no listed kind: `LakeError` for the lake and the file system.
fn other_class(error: &Error) -> &'static str {
    match error {
        Error::Sync { source, .. } => other_class(source),
        Error::Io { .. } | Error::Parquet { .. } | Error::Lake { .. } => "LakeError",
        _ => "DexlakeError",
    }
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
