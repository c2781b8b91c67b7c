//! Sort order: a BSON-like total order over JSON values, the request's sort, and a document's
//! key in it ([`OrderKey`]).

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::{Value, json};

use crate::api::models::SortDirection;
use crate::api::profile_query::SearchRequest;

/// A value as it takes part in sorting: the BSON-like type rank and, within a type, the value.
/// Borrowed from a document while sorting, owned when decoded from a cursor.
#[derive(Debug, Clone)]
pub enum SortKey<'a> {
    /// Null or missing.
    Null,
    /// A number (`-0` is stored as `0`).
    Num(f64),
    /// A string.
    Str(Cow<'a, str>),
    /// An object, entry by entry.
    Obj(Vec<(Cow<'a, str>, SortKey<'a>)>),
    /// An array, element by element.
    Arr(Vec<SortKey<'a>>),
    /// A boolean.
    Bool(bool),
}

impl<'a> SortKey<'a> {
    /// The key of a value found (or not) at the sort path.
    pub fn of(value: Option<&'a Value>) -> Self {
        match value {
            None | Some(Value::Null) => SortKey::Null,
            Some(Value::Number(n)) => SortKey::number(n.as_f64().unwrap_or(f64::NAN)),
            Some(Value::String(s)) => SortKey::Str(Cow::Borrowed(s)),
            Some(Value::Object(map)) => SortKey::Obj(
                map.iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), SortKey::of(Some(v))))
                    .collect(),
            ),
            Some(Value::Array(items)) => {
                SortKey::Arr(items.iter().map(|v| SortKey::of(Some(v))).collect())
            }
            Some(Value::Bool(b)) => SortKey::Bool(*b),
        }
    }

    /// A number key; `-0.0` becomes `0.0` so that the total order agrees with numeric equality.
    pub fn number(x: f64) -> Self {
        SortKey::Num(if x == 0.0 { 0.0 } else { x })
    }

    /// The type's place in the order: null 0, numbers 1, strings 2, objects 3, arrays 4,
    /// booleans 5.
    pub fn rank(&self) -> u8 {
        match self {
            SortKey::Null => 0,
            SortKey::Num(_) => 1,
            SortKey::Str(_) => 2,
            SortKey::Obj(_) => 3,
            SortKey::Arr(_) => 4,
            SortKey::Bool(_) => 5,
        }
    }

    /// The cursor form: null, booleans and strings stand for themselves (JSON carries them
    /// exactly); numbers become `["n", bits]` because a decimal float may not parse back to the
    /// same bits, and containers are tagged `["a", [...]]` and `["o", [[key, value], ...]]`.
    pub(super) fn to_cursor_json(&self) -> Value {
        match self {
            SortKey::Null => Value::Null,
            SortKey::Num(x) => json!(["n", x.to_bits()]),
            SortKey::Str(s) => Value::String(s.to_string()),
            SortKey::Obj(entries) => json!([
                "o",
                entries
                    .iter()
                    .map(|(k, v)| json!([k, v.to_cursor_json()]))
                    .collect::<Vec<_>>()
            ]),
            SortKey::Arr(items) => json!([
                "a",
                items
                    .iter()
                    .map(SortKey::to_cursor_json)
                    .collect::<Vec<_>>()
            ]),
            SortKey::Bool(b) => Value::Bool(*b),
        }
    }

    pub(super) fn from_cursor_json(value: &Value) -> Option<SortKey<'static>> {
        Some(match value {
            Value::Null => SortKey::Null,
            Value::Bool(b) => SortKey::Bool(*b),
            Value::String(s) => SortKey::Str(Cow::Owned(s.clone())),
            Value::Array(tagged) => match tagged.as_slice() {
                [Value::String(tag), Value::Number(bits)] if tag == "n" => {
                    SortKey::number(f64::from_bits(bits.as_u64()?))
                }
                [Value::String(tag), Value::Array(items)] if tag == "a" => SortKey::Arr(
                    items
                        .iter()
                        .map(SortKey::from_cursor_json)
                        .collect::<Option<_>>()?,
                ),
                [Value::String(tag), Value::Array(entries)] if tag == "o" => SortKey::Obj(
                    entries
                        .iter()
                        .map(|entry| match entry.as_array()?.as_slice() {
                            [Value::String(k), v] => {
                                Some((Cow::Owned(k.clone()), SortKey::from_cursor_json(v)?))
                            }
                            _ => None,
                        })
                        .collect::<Option<_>>()?,
                ),
                _ => return None,
            },
            Value::Number(_) | Value::Object(_) => return None,
        })
    }
}

impl Ord for SortKey<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (SortKey::Null, SortKey::Null) => Ordering::Equal,
            (SortKey::Num(a), SortKey::Num(b)) => a.total_cmp(b),
            (SortKey::Str(a), SortKey::Str(b)) => a.as_bytes().cmp(b.as_bytes()),
            (SortKey::Obj(a), SortKey::Obj(b)) => a
                .iter()
                .map(|(k, v)| (k.as_bytes(), v))
                .cmp(b.iter().map(|(k, v)| (k.as_bytes(), v))),
            (SortKey::Arr(a), SortKey::Arr(b)) => a.cmp(b),
            (SortKey::Bool(a), SortKey::Bool(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for SortKey<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for SortKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for SortKey<'_> {}

/// BSON-like total order for sort values: missing == null < numbers < strings < objects < arrays
/// < booleans. Numbers compare by value (integers and floats alike, `-0 == 0`), strings by
/// their UTF-8 bytes, objects entry by entry (key, then value) and arrays element by element,
/// a prefix first; `false < true`.
pub fn compare_values(a: Option<&Value>, b: Option<&Value>) -> Ordering {
    SortKey::of(a).cmp(&SortKey::of(b))
}

/// The sort of a request: the field and whether it runs descending.
#[derive(Debug, Clone, PartialEq)]
pub struct SortSpec {
    /// The dotted sort path.
    pub field: String,
    /// Whether the order runs descending.
    pub descending: bool,
}

impl SortSpec {
    /// The sort a (validated) request runs with: its `sort`, or `token_address` ascending.
    pub fn of(request: &SearchRequest) -> Self {
        let (field, direction) = request.sort_or_default();
        SortSpec {
            field: field.to_owned(),
            descending: direction == SortDirection::Desc,
        }
    }

    /// `asc` or `desc`.
    pub fn direction(&self) -> &'static str {
        if self.descending { "desc" } else { "asc" }
    }
}

/// A document's key in the ascending order (where it stands): sort value, then `token_address`, then its
/// position in the input (which matters only when `token_address` repeats).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct OrderKey<'a> {
    /// The sort value.
    pub value: SortKey<'a>,
    /// The document's `token_address`.
    pub token_address: SortKey<'a>,
    /// The document's position in the searched input.
    pub ordinal: u64,
}

impl OrderKey<'_> {
    /// The order of the request's direction: descending reverses every component, so ties run
    /// by `token_address` in the sort's direction too.
    pub fn cmp_in(&self, other: &Self, descending: bool) -> Ordering {
        let ascending = self.cmp(other);
        if descending {
            ascending.reverse()
        } else {
            ascending
        }
    }
}
