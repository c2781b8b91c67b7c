//! Columns of an arrow-rs record batch read from a data file of the lake: string columns as
//! dictionaries (codes and distinct values) and numbers as one primitive type, timestamps as
//! microseconds. Shared by the row-group readers of the events and of the PnL ledgers.
//!
//! Imports nothing of the crate but its errors.

use std::sync::Arc;

use arrow_array::builder::StringDictionaryBuilder;
use arrow_array::types::{
    Int32Type, Int64Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, PrimitiveArray, RecordBatch, cast::AsArray,
};
use arrow_schema::{DataType as ArrowType, TimeUnit as ArrowUnit};

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

/// The error of a column `name` of `path` whose type is not the one read (`expected`).
fn type_error(path: &str, name: &str, found: &ArrowType, expected: &str) -> Error {
    damaged(
        path,
        format!("its column {name} is not of the dataset's type: it holds {found}, not {expected}"),
    )
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
    let built;
    let array = match array.data_type() {
        ArrowType::Dictionary(key, value)
            if **key == ArrowType::Int32 && **value == ArrowType::Utf8 =>
        {
            array
        }
        ArrowType::Utf8 => {
            built = encode_dictionary(array.as_string::<i32>().iter());
            &built
        }
        ArrowType::LargeUtf8 => {
            built = encode_dictionary(array.as_string::<i64>().iter());
            &built
        }
        ArrowType::Utf8View => {
            built = encode_dictionary(array.as_string_view().iter());
            &built
        }
        other => return Err(type_error(path, name, other, "a string column")),
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

/// Strings as a `Dictionary(Int32, Utf8)` array: each distinct value once, in order of first
/// appearance, and nulls kept as nulls.
fn encode_dictionary<'a>(strings: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    let mut builder = StringDictionaryBuilder::<Int32Type>::new();
    builder.extend(strings);
    Arc::new(builder.finish())
}

/// The values of a primitive column stored as `T`, nulls as `null`; a timestamp column read as
/// `Int64` gives microseconds, whatever its unit. Any other type is an error naming both.
pub(crate) fn numbers<T: ArrowPrimitiveType>(
    batch: &RecordBatch,
    name: &str,
    path: &str,
    null: T::Native,
) -> Result<PrimitiveArray<T>> {
    let array = column(batch, name, path)?;
    let micros: ArrayRef;
    let array = match array.data_type() {
        ArrowType::Timestamp(unit, _) if T::DATA_TYPE == ArrowType::Int64 => {
            // The same buffers read as plain integers, then scaled to microseconds.
            micros = Arc::new(match unit {
                ArrowUnit::Second => array
                    .as_primitive::<TimestampSecondType>()
                    .unary::<_, Int64Type>(|x| x * 1_000_000),
                ArrowUnit::Millisecond => array
                    .as_primitive::<TimestampMillisecondType>()
                    .unary::<_, Int64Type>(|x| x * 1000),
                ArrowUnit::Microsecond => array
                    .as_primitive::<TimestampMicrosecondType>()
                    .reinterpret_cast::<Int64Type>(),
                ArrowUnit::Nanosecond => array
                    .as_primitive::<TimestampNanosecondType>()
                    .unary::<_, Int64Type>(|x| x.div_euclid(1000)),
            });
            &micros
        }
        found if *found == T::DATA_TYPE => array,
        found => return Err(type_error(path, name, found, &T::DATA_TYPE.to_string())),
    };
    let values = array.as_primitive::<T>();
    Ok(if values.null_count() == 0 {
        values.clone()
    } else {
        values.iter().map(|v| Some(v.unwrap_or(null))).collect()
    })
}

#[cfg(test)]
mod tests {
    use arrow_array::{
        Float64Array, Int32Array, LargeStringArray, StringArray, TimestampMillisecondArray,
    };

    use super::*;

    fn batch(name: &str, array: ArrayRef) -> RecordBatch {
        RecordBatch::try_from_iter([(name, array)]).expect("batch")
    }

    /// Plain strings read as the dictionary a lake file gives: codes in order of first
    /// appearance, a null as the empty string.
    #[test]
    fn strings_of_any_encoding_read_as_a_dictionary() {
        let plain: ArrayRef = Arc::new(StringArray::from(vec![
            Some("b"),
            None,
            Some("a"),
            Some("b"),
        ]));
        let large: ArrayRef = Arc::new(LargeStringArray::from(vec![
            Some("b"),
            None,
            Some("a"),
            Some("b"),
        ]));
        for array in [plain, large] {
            let (codes, values) = dictionary(&batch("wallet", array), "wallet", "f").expect("read");
            let names = values.names();
            let read: Vec<&str> = codes.iter().map(|&c| names[c as usize]).collect();
            assert_eq!(read, ["b", "", "a", "b"]);
        }
        let numbers: ArrayRef = Arc::new(Int32Array::from(vec![1]));
        let Err(err) = dictionary(&batch("wallet", numbers), "wallet", "f") else {
            panic!("integers read as strings");
        };
        assert!(err.to_string().contains("column wallet"), "{err}");
    }

    /// A timestamp of any unit reads as microseconds; any other type than the one asked for
    /// is refused, naming both.
    #[test]
    fn numbers_read_timestamps_as_micros_and_refuse_other_types() {
        let millis: ArrayRef =
            Arc::new(TimestampMillisecondArray::from(vec![Some(1_500), None]).with_timezone("UTC"));
        let read = numbers::<Int64Type>(&batch("block_time", millis), "block_time", "f", -1)
            .expect("read");
        assert_eq!(read.values().as_ref(), [1_500_000, -1]);
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![1.5]));
        let err = numbers::<Int64Type>(&batch("id", floats), "id", "f", 0).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("Float64") && message.contains("Int64"),
            "{message}"
        );
    }
}
