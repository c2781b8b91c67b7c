//! polars frames handed to Python through the Arrow C stream interface.
//!
//! A [`FrameStream`] holds one computed frame and implements `__arrow_c_stream__` (the Arrow
//! PyCapsule interface), so `polars.DataFrame(stream)` imports its arrays: the buffers are
//! shared, not copied. Columns are exported at polars' newest compatibility level (strings as
//! views), which is what Python polars holds, so nothing is converted on either side.

use std::ffi::CStr;

use polars::prelude::*;
use polars_arrow::array::{Array, StructArray};
use polars_arrow::datatypes::{ArrowDataType, Field as ArrowField};
use polars_arrow::ffi::{ArrowArrayStream, export_iterator};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// The capsule name the Arrow PyCapsule interface gives a stream.
const STREAM_CAPSULE: &CStr = c"arrow_array_stream";

/// One computed frame, to be read once through `__arrow_c_stream__`.
#[pyclass(module = "dexlake._dexlake", frozen)]
pub struct FrameStream {
    frame: std::sync::Mutex<Option<DataFrame>>,
    height: usize,
}

impl FrameStream {
    /// A stream of `frame`.
    pub fn new(frame: DataFrame) -> Self {
        FrameStream {
            height: frame.height(),
            frame: std::sync::Mutex::new(Some(frame)),
        }
    }
}

/// The exported stream, owned by its capsule until a consumer moves it out (the consumer
/// leaves a released stream behind, whose drop does nothing).
#[repr(transparent)]
struct SendStream(ArrowArrayStream);

// SAFETY: the stream owns its frame's arrays (reference-counted, immutable buffers) and its
// callbacks keep no thread-local state; the interface lets a consumer call it from any thread.
unsafe impl Send for SendStream {}

#[pymethods]
impl FrameStream {
    /// The frame as an Arrow C stream (`requested_schema` is not supported and ignored, as
    /// the interface allows). A stream is read once.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let frame = self
            .frame
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .ok_or_else(|| PyValueError::new_err("this frame was already read"))?;
        let stream = export(frame)?;
        PyCapsule::new_with_value(py, SendStream(stream), STREAM_CAPSULE)
    }

    /// Rows of the frame.
    fn __len__(&self) -> usize {
        self.height
    }
}

/// `frame`'s chunks as a C stream of struct arrays, one per chunk. The arrays are shared.
fn export(mut frame: DataFrame) -> PyResult<ArrowArrayStream> {
    if frame.width() == 0 {
        return Err(PyValueError::new_err(
            "a frame without columns cannot be exported",
        ));
    }
    // Columns split at different rows are split alike first (computed frames rarely are).
    frame.align_chunks_par();
    let level = CompatLevel::newest();
    let fields: Vec<ArrowField> = frame
        .columns()
        .iter()
        .map(|c| c.field().to_arrow(level))
        .collect();
    let dtype = ArrowDataType::Struct(fields);
    let mut batches: Vec<PolarsResult<Box<dyn Array>>> = Vec::new();
    for batch in frame.iter_chunks(level, false) {
        let length = batch.height();
        batches.push(
            StructArray::try_new(dtype.clone(), length, batch.into_arrays(), None)
                .map(|a| a.boxed()),
        );
    }
    let field = ArrowField::new("".into(), dtype, false);
    Ok(export_iterator(Box::new(batches.into_iter()), field))
}
