//! Rows as the service's documents: null members left out, timestamps as RFC 3339 strings,
//! `matched_labels` as an object, member order that of the service's model (the altchain's
//! search profile, or the EVM get-profile answer).

use chrono::{DateTime, Utc};
use polars::prelude::*;
use serde_json::{Map, Value};

use crate::api::models::{AltTokenProfile, ChainFamily, EvmTokenProfile};
use crate::api::requests::Operation;
use crate::{Error, Result};

/// The columns of a profile document, in the service's member order. The lake's other columns
/// (`chain_id`, `dynamic_labels` of the sync request, `fetched_at`, the hive columns) are not part
/// of a profile and are dropped before searching, so a filter on them finds them missing, as
/// the service does.
pub const DOCUMENT_COLUMNS: [&str; 8] = [
    "updated_at",
    "synced_at",
    "token_address",
    "labels",
    "matched_labels",
    "metadata",
    "market",
    "metrics",
];

/// The columns of an EVM profile document (the get-profile answer with its metadata and every
/// window), in the service's member order. An EVM profile has no `labels`, `matched_labels`
/// or `market`; its `chain_id` is a member.
pub const EVM_DOCUMENT_COLUMNS: [&str; 6] = [
    "updated_at",
    "synced_at",
    "chain_id",
    "token_address",
    "metadata",
    "metrics",
];

/// The document columns of `chain`'s profiles.
pub(super) fn document_columns(chain: ChainFamily) -> &'static [&'static str] {
    match chain {
        ChainFamily::Altchain => &DOCUMENT_COLUMNS,
        ChainFamily::Evm(_) => &EVM_DOCUMENT_COLUMNS,
    }
}

pub(super) fn datetime_of(value: i64, unit: TimeUnit) -> DateTime<Utc> {
    let nanos = match unit {
        TimeUnit::Nanoseconds => value,
        TimeUnit::Microseconds => value.saturating_mul(1_000),
        TimeUnit::Milliseconds => value.saturating_mul(1_000_000),
    };
    DateTime::from_timestamp_nanos(nanos)
}

/// Every row of `df` as a profile document of the service (of `chain`'s model): null members
/// left out, timestamps as RFC 3339 strings, `matched_labels` as an object, and member order
/// that of the service's model.
pub(crate) fn documents(df: &DataFrame, chain: ChainFamily) -> Result<Vec<Value>> {
    documents_at(df, 0..df.height(), chain)
}

/// The documents of the given rows of `df`, in that order. Each value is read in place: slicing
/// the frame to a row would copy the array handles of every nested field.
pub(super) fn documents_at(
    df: &DataFrame,
    rows: impl Iterator<Item = usize>,
    chain: ChainFamily,
) -> Result<Vec<Value>> {
    let columns: Vec<&Column> = document_columns(chain)
        .iter()
        .filter_map(|name| df.column(name).ok())
        .collect();
    // Made once: `Error::polars` owns its context, and this runs for every value.
    let failed = Error::polars("turning profiles into documents");
    rows.map(|i| {
        let mut map = Map::new();
        for column in &columns {
            let value = column.get(i).map_err(&failed)?;
            let labels = column.name().as_str() == "matched_labels";
            if let Some(v) = json_of(value, labels) {
                map.insert(column.name().to_string(), v);
            }
        }
        let doc = Value::Object(map);
        match chain {
            ChainFamily::Altchain => in_model::<AltTokenProfile>(doc, Operation::AltSearchProfiles),
            ChainFamily::Evm(_) => in_model::<EvmTokenProfile>(doc, Operation::EvmGetProfile),
        }
    })
    .collect()
}

/// The document read as the model `T` and written back: the model's member order.
fn in_model<T: serde::de::DeserializeOwned + serde::Serialize>(
    doc: Value,
    operation: Operation,
) -> Result<Value> {
    let profile: T = serde_json::from_value(doc.clone()).map_err(|source| Error::Decode {
        operation: operation.name(),
        excerpt: doc.to_string().chars().take(300).collect(),
        source,
    })?;
    Ok(serde_json::to_value(profile)
        .expect("a profile of finite numbers and strings converts to JSON"))
}

fn json_of(value: AnyValue<'_>, matched_labels: bool) -> Option<Value> {
    Some(match value {
        AnyValue::Null => return None,
        AnyValue::Boolean(b) => Value::Bool(b),
        AnyValue::String(s) => Value::String(s.to_owned()),
        AnyValue::StringOwned(s) => Value::String(s.to_string()),
        AnyValue::Int8(x) => Value::from(x),
        AnyValue::Int16(x) => Value::from(x),
        AnyValue::Int32(x) => Value::from(x),
        AnyValue::Int64(x) => Value::from(x),
        AnyValue::UInt8(x) => Value::from(x),
        AnyValue::UInt16(x) => Value::from(x),
        AnyValue::UInt32(x) => Value::from(x),
        AnyValue::UInt64(x) => Value::from(x),
        AnyValue::Float32(x) => Value::Number(serde_json::Number::from_f64(f64::from(x))?),
        AnyValue::Float64(x) => Value::Number(serde_json::Number::from_f64(x)?),
        AnyValue::Datetime(v, unit, _) | AnyValue::DatetimeOwned(v, unit, _) => {
            serde_json::to_value(datetime_of(v, unit)).ok()?
        }
        AnyValue::List(series) => {
            let items =
                (0..series.len()).map(|j| series.get(j).ok().and_then(|v| json_of(v, false)));
            if matched_labels {
                let mut map = Map::new();
                for item in items.flatten() {
                    if let (Some(Value::String(label)), Some(rules)) =
                        (item.get("label").cloned(), item.get("rules").cloned())
                    {
                        map.insert(label, rules);
                    }
                }
                Value::Object(map)
            } else {
                Value::Array(items.map(|v| v.unwrap_or(Value::Null)).collect())
            }
        }
        AnyValue::Struct(_, _, fields) => {
            let mut map = Map::new();
            for (field, v) in fields.iter().zip(value._iter_struct_av()) {
                if let Some(v) = json_of(v, false) {
                    map.insert(field.name().to_string(), v);
                }
            }
            Value::Object(map)
        }
        AnyValue::StructOwned(payload) => {
            let (values, fields) = *payload;
            let mut map = Map::new();
            for (field, v) in fields.iter().zip(values) {
                if let Some(v) = json_of(v, false) {
                    map.insert(field.name().to_string(), v);
                }
            }
            Value::Object(map)
        }
        other => Value::String(other.to_string()),
    })
}
