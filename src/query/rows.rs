//! A frame's rows as JSON objects: what `--format json` prints and what `dexlake serve`'s API
//! answers, one rendering for both doors.
//!
//! Struct columns are nested objects; times are RFC 3339 in UTC (`Z`); floats keep every bit
//! (Rust's shortest round-trip form), a non-finite one is written as its text (`inf`, `NaN`);
//! nulls are JSON `null`; any other type is its text.

use chrono::DateTime;
use polars::prelude::*;
use serde_json::{Map, Value};

use crate::{Error, Result};

/// The cells of one column as JSON values, as [`json_rows`] writes them.
pub fn json_cells(s: &Series) -> Result<Vec<Value>> {
    let context = || format!("writing the column {} as JSON", s.name());
    let err = |e| Error::polars(context())(e);
    Ok(match s.dtype().clone() {
        DataType::String => s
            .str()
            .map_err(err)?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
        DataType::Boolean => s
            .bool()
            .map_err(err)?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
        DataType::Float32 | DataType::Float64 => s
            .cast(&DataType::Float64)
            .map_err(err)?
            .f64()
            .map_err(err)?
            .iter()
            .map(|v| match v {
                Some(x) if x.is_finite() => Value::from(x),
                Some(x) => Value::from(x.to_string()),
                None => Value::Null,
            })
            .collect(),
        DataType::Datetime(unit, _) => {
            let to_micros = |v: i64| match unit {
                TimeUnit::Nanoseconds => v / 1_000,
                TimeUnit::Microseconds => v,
                TimeUnit::Milliseconds => v * 1_000,
            };
            s.cast(&DataType::Int64)
                .map_err(err)?
                .i64()
                .map_err(err)?
                .iter()
                .map(|v| {
                    v.map(to_micros)
                        .and_then(DateTime::from_timestamp_micros)
                        .map_or(Value::Null, |t| {
                            Value::from(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
                        })
                })
                .collect()
        }
        d if d.is_integer() => s
            .cast(&DataType::Int64)
            .map_err(err)?
            .i64()
            .map_err(err)?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
        _ => s
            .cast(&DataType::String)
            .map_err(err)?
            .str()
            .map_err(err)?
            .iter()
            .map(|v| v.map_or(Value::Null, Value::from))
            .collect(),
    })
}

/// Each row of `df` as a JSON object, its columns in order (struct columns as nested objects).
pub fn json_rows(df: &DataFrame) -> Result<Vec<Value>> {
    // Each leaf column: its path (parent and child for a struct's field) and its cells.
    let mut leaves: Vec<(Vec<String>, Vec<Value>)> = Vec::new();
    for c in df.columns() {
        let s = c.as_materialized_series();
        if let DataType::Struct(_) = s.dtype() {
            let fields = s
                .struct_()
                .map_err(Error::polars(format!(
                    "reading the struct column {}",
                    s.name()
                )))?
                .fields_as_series();
            for f in fields {
                leaves.push((
                    vec![s.name().to_string(), f.name().to_string()],
                    json_cells(&f)?,
                ));
            }
        } else {
            leaves.push((vec![s.name().to_string()], json_cells(s)?));
        }
    }
    let mut rows = Vec::with_capacity(df.height());
    for r in 0..df.height() {
        let mut obj = Map::new();
        for (path, cells) in &leaves {
            let Some((last, parents)) = path.split_last() else {
                continue;
            };
            let mut target = &mut obj;
            for p in parents {
                let entry = target
                    .entry(p.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                target = match entry {
                    Value::Object(map) => map,
                    _ => {
                        return Err(Error::InvalidArgument {
                            argument: "columns".into(),
                            reason: format!("{p} is both a column and a struct column"),
                        });
                    }
                };
            }
            target.insert(last.clone(), cells[r].clone());
        }
        rows.push(Value::Object(obj));
    }
    Ok(rows)
}
