//! Typed readers of a polars frame's columns: floats, integers, strings and timestamps as plain
//! vectors or slices (borrowed when the column already is one chunk without nulls), nulls
//! replaced by a stated value. The PnL and the token metrics read their input frames through
//! these; a missing column or a type that does not cast is an [`Error`].

use std::borrow::Cow;

use polars::prelude::*;

use crate::{Error, Result};

/// A column as floats (cast when needed); nulls become NaN.
pub(crate) fn f64_col(df: &DataFrame, name: &str) -> Result<Vec<f64>> {
    let c = df
        .column(name)
        .and_then(|c| c.cast(&DataType::Float64))
        .map_err(Error::polars(name))?;
    let ca = c.f64().map_err(Error::polars(name))?;
    Ok(values(ca, f64::NAN))
}

/// A column as integers (cast when needed, timestamps as their count in their own unit: see
/// [`micros_col`]); nulls become 0.
pub(crate) fn i64_col(df: &DataFrame, name: &str) -> Result<Vec<i64>> {
    let c = df
        .column(name)
        .and_then(|c| c.cast(&DataType::Int64))
        .map_err(Error::polars(name))?;
    let ca = c.i64().map_err(Error::polars(name))?;
    Ok(values(ca, 0))
}

/// A string column; nulls become empty strings.
pub(crate) fn str_col<'a>(df: &'a DataFrame, name: &str) -> Result<Vec<&'a str>> {
    let ca = df
        .column(name)
        .and_then(|c| c.str())
        .map_err(Error::polars(name))?;
    Ok(ca.iter().map(|v| v.unwrap_or("")).collect())
}

/// The array of a string column once it is one chunk.
pub(crate) type StrArray = <StringType as PolarsDataType>::Array;

/// A string column as one chunk (no copy when it already is one).
pub(crate) fn str_chunk<'a>(df: &'a DataFrame, name: &str) -> Result<Cow<'a, StringChunked>> {
    let ca = df
        .column(name)
        .and_then(|c| c.str())
        .map_err(Error::polars(name))?;
    Ok(ca.rechunk())
}

/// Row `i` of a string array; a null reads as the empty string.
#[inline]
pub(crate) fn str_at(arr: &StrArray, i: usize) -> &str {
    arr.get(i).unwrap_or("")
}

/// Null count of one array of a column.
pub(crate) fn nulls<A: StaticArray>(arr: &A) -> usize {
    arr.null_count()
}

/// A float column, borrowed when it is one chunk of floats without nulls, else as
/// [`f64_col`] reads it.
pub(crate) fn f64_slice<'a>(df: &'a DataFrame, name: &str) -> Result<Cow<'a, [f64]>> {
    let c = df.column(name).map_err(Error::polars(name))?;
    if let Ok(slice) = c.f64().and_then(|ca| ca.cont_slice()) {
        return Ok(Cow::Borrowed(slice));
    }
    Ok(Cow::Owned(f64_col(df, name)?))
}

/// An integer column, borrowed when it is one chunk of integers without nulls, else as
/// [`i64_col`] reads it.
pub(crate) fn i64_slice<'a>(df: &'a DataFrame, name: &str) -> Result<Cow<'a, [i64]>> {
    let c = df.column(name).map_err(Error::polars(name))?;
    if let Ok(slice) = c.i64().and_then(|ca| ca.cont_slice()) {
        return Ok(Cow::Borrowed(slice));
    }
    Ok(Cow::Owned(i64_col(df, name)?))
}

/// The values of a primitive column as one vector, nulls as `null`: copied array by array
/// (a plain copy when an array has no nulls).
fn values<T: PolarsNumericType>(ca: &ChunkedArray<T>, null: T::Native) -> Vec<T::Native> {
    let mut out = Vec::with_capacity(ca.len());
    for arr in ca.downcast_iter() {
        if nulls(arr) == 0 {
            out.extend_from_slice(arr.values());
        } else {
            out.extend(arr.iter().map(|v| v.copied().unwrap_or(null)));
        }
    }
    out
}

/// A timestamp column as microseconds since the Unix epoch, whatever its unit (nanoseconds
/// rounded down); an integer column is taken as microseconds already. Nulls become 0.
pub(crate) fn micros_col(df: &DataFrame, name: &str) -> Result<Vec<i64>> {
    let c = df.column(name).map_err(Error::polars(name))?;
    let DataType::Datetime(unit, _) = c.dtype() else {
        return i64_col(df, name);
    };
    let ca = c.datetime().map_err(Error::polars(name))?;
    let mut v = values(ca.physical(), 0);
    match unit {
        TimeUnit::Nanoseconds => v.iter_mut().for_each(|x| *x = x.div_euclid(1000)),
        TimeUnit::Microseconds => {}
        TimeUnit::Milliseconds => v.iter_mut().for_each(|x| *x = x.saturating_mul(1000)),
    }
    Ok(v)
}

/// [`micros_col`], borrowed when the column is one chunk of microseconds (or integers)
/// without nulls.
pub(crate) fn micros_slice<'a>(df: &'a DataFrame, name: &str) -> Result<Cow<'a, [i64]>> {
    let c = df.column(name).map_err(Error::polars(name))?;
    let micros = match c.dtype() {
        DataType::Int64 => c.i64().ok(),
        DataType::Datetime(TimeUnit::Microseconds, _) => c.datetime().ok().map(|d| d.physical()),
        _ => None,
    };
    if let Some(slice) = micros.and_then(|ca| ca.cont_slice().ok()) {
        return Ok(Cow::Borrowed(slice));
    }
    Ok(Cow::Owned(micros_col(df, name)?))
}
