//! Columns of an arrow-rs record batch read from a data file of the lake: string columns as
//! dictionaries (codes and distinct values) and numbers as one primitive type, timestamps as
//! microseconds. Shared by the row-group readers of the events and of the PnL ledgers.
//!
//! Imports nothing of the crate but its errors.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, ArrowPrimitiveType, AsArray, PrimitiveArray, RecordBatch};
use arrow::datatypes::{DataType as ArrowType, Int32Type, Int64Type, TimeUnit as ArrowUnit};

use crate::{Error, Result};

/// The error of the committed file `path` whose column `name` is missing or not of the
/// dataset's schema: an [`Error::DamagedLake`] whose lake's root the reader adds (see
/// [`Error::in_file`]).
fn damaged(path: &str, reason: String) -> Error {
    Error::DamagedLake {
        lake: std::path::PathBuf::new(),
        file: path.to_owned(),
        reason,
    }
}

/// The column `name` of a batch read from `path`; missing, an error naming both.
pub(crate) fn column<'a>(batch: &'a RecordBatch, name: &str, path: &str) -> Result<&'a ArrayRef> {
    batch
        .column_by_name(name)
        .ok_or_else(|| damaged(path, format!("it lacks column {name}")))
}

/// The error of a column `name` of `path` that does not cast to the type read.
fn cast_error(path: &str, name: &str) -> impl FnOnce(arrow::error::ArrowError) -> Error {
    let reason = format!("its column {name} is not of the dataset's type");
    move |source| {
        damaged(
            path,
            format!("{reason}: {}", crate::error::escaped(&source.to_string())),
        )
    }
}

/// The distinct values of a string column read as a dictionary (see [`dictionary`]).
pub(crate) struct DictionaryValues {
    values: ArrayRef,
    /// An empty string added after the values (for null codes).
    empty: bool,
}

impl DictionaryValues {
    /// The values by code; a null value reads as the empty string.
    pub(crate) fn names(&self) -> Vec<&str> {
        let values = self.values.as_string::<i32>();
        let mut names: Vec<&str> = (0..values.len())
            .map(|i| {
                if values.is_null(i) {
                    ""
                } else {
                    values.value(i)
                }
            })
            .collect();
        if self.empty {
            names.push("");
        }
        names
    }
}

/// A string column as a dictionary (codes and distinct values), whatever it was read as; a
/// null reads as the empty string, as in the frame path.
pub(crate) fn dictionary(
    batch: &RecordBatch,
    name: &str,
    path: &str,
) -> Result<(Vec<u32>, DictionaryValues)> {
    let array = column(batch, name, path)?;
    let dict_type = ArrowType::Dictionary(Box::new(ArrowType::Int32), Box::new(ArrowType::Utf8));
    let cast;
    let array = if array.data_type() == &dict_type {
        array
    } else {
        cast = arrow::compute::cast(array, &dict_type).map_err(cast_error(path, name))?;
        &cast
    };
    let dict = array.as_dictionary::<Int32Type>();
    let keys = dict.keys();
    let mut values = DictionaryValues {
        values: Arc::clone(dict.values()),
        empty: false,
    };
    let codes: Vec<u32> = if keys.null_count() == 0 {
        keys.values().iter().map(|&k| k as u32).collect()
    } else {
        let names = values.names();
        let empty = match names.iter().position(|n| n.is_empty()) {
            Some(i) => i,
            None => names.len(),
        } as u32;
        values.empty = empty as usize == names.len();
        keys.iter().map(|k| k.map_or(empty, |k| k as u32)).collect()
    };
    Ok((codes, values))
}

/// The values of a primitive column as `T` (cast if stored otherwise), nulls as `null`.
pub(crate) fn numbers<T: ArrowPrimitiveType>(
    batch: &RecordBatch,
    name: &str,
    path: &str,
    null: T::Native,
) -> Result<PrimitiveArray<T>> {
    let array = column(batch, name, path)?;
    let array = if let ArrowType::Timestamp(unit, _) = array.data_type() {
        let raw = arrow::compute::cast(array, &ArrowType::Int64).map_err(cast_error(path, name))?;
        let raw = raw.as_primitive::<Int64Type>();
        let micros: PrimitiveArray<Int64Type> = match unit {
            ArrowUnit::Second => raw.unary(|x| x * 1_000_000),
            ArrowUnit::Millisecond => raw.unary(|x| x * 1000),
            ArrowUnit::Microsecond => raw.clone(),
            ArrowUnit::Nanosecond => raw.unary(|x| x.div_euclid(1000)),
        };
        Arc::new(micros) as ArrayRef
    } else {
        Arc::clone(array)
    };
    let cast = arrow::compute::cast(&array, &T::DATA_TYPE).map_err(cast_error(path, name))?;
    let values = cast.as_primitive::<T>();
    Ok(if values.null_count() == 0 {
        values.clone()
    } else {
        values.iter().map(|v| Some(v.unwrap_or(null))).collect()
    })
}
