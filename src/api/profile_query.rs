//! The search-profiles request language: filters, text query, sort, options and dynamic labels.
//!
//! A filter is parsed into a typed tree when the request is built or decoded, so every operand
//! has the type the service expects and a bad filter is rejected before anything is sent. The
//! language (`$eq $ne $gt $gte $lt $lte $in $nin $and $or`, dotted paths) follows MongoDB; the
//! exact semantics are in `shared/design/semantics.md` section 4. The engine ([`crate::search`])
//! evaluates it for the simulator, and the analytics' screener compiles it to polars
//! expressions (falling back on the engine).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::models::{SortDirection, TimeWindow};

/// A scalar operand of `$eq`, `$ne`, `$in` and `$nin`.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// A string.
    Str(String),
    /// A number (integers and floats are one type).
    Num(f64),
    /// A boolean.
    Bool(bool),
}

impl Scalar {
    fn to_json(&self) -> Value {
        match self {
            Scalar::Str(s) => Value::String(s.clone()),
            Scalar::Num(n) => number_to_json(*n),
            Scalar::Bool(b) => Value::Bool(*b),
        }
    }
}

fn number_to_json(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

/// One comparison on a field.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// Same type and equal.
    Eq(Scalar),
    /// Not `$eq` (matches missing and null).
    Ne(Scalar),
    /// Greater than (numbers only).
    Gt(f64),
    /// Greater than or equal (numbers only).
    Gte(f64),
    /// Less than (numbers only).
    Lt(f64),
    /// Less than or equal (numbers only).
    Lte(f64),
    /// Any element `$eq`.
    In(Vec<Scalar>),
    /// Not `$in` (matches missing and null).
    Nin(Vec<Scalar>),
}

impl Condition {
    /// The operator's wire name, such as `$gte`.
    pub fn operator(&self) -> &'static str {
        match self {
            Condition::Eq(_) => "$eq",
            Condition::Ne(_) => "$ne",
            Condition::Gt(_) => "$gt",
            Condition::Gte(_) => "$gte",
            Condition::Lt(_) => "$lt",
            Condition::Lte(_) => "$lte",
            Condition::In(_) => "$in",
            Condition::Nin(_) => "$nin",
        }
    }

    fn operand_json(&self) -> Value {
        match self {
            Condition::Eq(s) | Condition::Ne(s) => s.to_json(),
            Condition::Gt(n) | Condition::Gte(n) | Condition::Lt(n) | Condition::Lte(n) => {
                number_to_json(*n)
            }
            Condition::In(v) | Condition::Nin(v) => {
                Value::Array(v.iter().map(Scalar::to_json).collect())
            }
        }
    }
}

/// One key of a filter object.
#[derive(Debug, Clone, PartialEq)]
pub enum Clause {
    /// `$and`: every sub-filter matches.
    And(Vec<Filter>),
    /// `$or`: at least one sub-filter matches.
    Or(Vec<Filter>),
    /// A dotted field path with its conditions, all of which must hold.
    Field {
        /// Dotted path such as `market.liquidity` or `metrics.5m.volume`.
        path: String,
        /// At least one condition.
        conditions: Vec<Condition>,
    },
}

/// A filter object: its clauses are ANDed. An empty filter matches every profile.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Filter {
    /// The keys of the object, in request order.
    pub clauses: Vec<Clause>,
}

/// A filter that is not of the language: names the path (or operator) and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// Where in the filter: a field path, `$and[1]`, or `filter` for the top level.
    pub path: String,
    /// What was wrong and what was expected.
    pub message: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for FilterError {}

impl Filter {
    /// A filter of one field with one condition.
    pub fn field(path: impl Into<String>, condition: Condition) -> Self {
        Filter {
            clauses: vec![Clause::Field {
                path: path.into(),
                conditions: vec![condition],
            }],
        }
    }

    /// Adds a condition on a field (ANDed with the rest).
    pub fn and_field(mut self, path: impl Into<String>, condition: Condition) -> Self {
        self.clauses.push(Clause::Field {
            path: path.into(),
            conditions: vec![condition],
        });
        self
    }

    /// `$and` of the given filters.
    pub fn all(filters: Vec<Filter>) -> Self {
        Filter {
            clauses: vec![Clause::And(filters)],
        }
    }

    /// `$or` of the given filters.
    pub fn any(filters: Vec<Filter>) -> Self {
        Filter {
            clauses: vec![Clause::Or(filters)],
        }
    }

    /// Parses a filter object from JSON, checking every operator and operand type.
    pub fn from_json(value: &Value) -> Result<Self, FilterError> {
        parse_filter(value, "filter")
    }

    /// The filter as the JSON the service expects.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        for clause in &self.clauses {
            match clause {
                Clause::And(fs) => {
                    map.insert(
                        "$and".into(),
                        Value::Array(fs.iter().map(Filter::to_json).collect()),
                    );
                }
                Clause::Or(fs) => {
                    map.insert(
                        "$or".into(),
                        Value::Array(fs.iter().map(Filter::to_json).collect()),
                    );
                }
                Clause::Field { path, conditions } => {
                    let ops = map
                        .entry(path.clone())
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(ops) = ops {
                        for c in conditions {
                            ops.insert(c.operator().into(), c.operand_json());
                        }
                    }
                }
            }
        }
        Value::Object(map)
    }

    /// Every field path the filter reads, depth first.
    pub fn paths(&self) -> Vec<&str> {
        let mut out = Vec::new();
        fn walk<'a>(f: &'a Filter, out: &mut Vec<&'a str>) {
            for c in &f.clauses {
                match c {
                    Clause::And(fs) | Clause::Or(fs) => fs.iter().for_each(|f| walk(f, out)),
                    Clause::Field { path, .. } => out.push(path),
                }
            }
        }
        walk(self, &mut out);
        out
    }
}

fn err(path: &str, message: impl Into<String>) -> FilterError {
    FilterError {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn parse_filter(value: &Value, at: &str) -> Result<Filter, FilterError> {
    let Value::Object(map) = value else {
        return Err(err(at, "expected a filter object"));
    };
    let mut clauses = Vec::with_capacity(map.len());
    for (key, val) in map {
        match key.as_str() {
            "$and" | "$or" => {
                let Value::Array(items) = val else {
                    return Err(err(key, "expected an array of filter objects"));
                };
                if items.is_empty() {
                    return Err(err(key, "expected at least one filter object"));
                }
                let subs = items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| parse_filter(v, &format!("{key}[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                clauses.push(if key == "$and" {
                    Clause::And(subs)
                } else {
                    Clause::Or(subs)
                });
            }
            k if k.starts_with('$') => {
                return Err(err(k, "unknown logical operator (expected $and or $or)"));
            }
            path => {
                if path.is_empty() || path.split('.').any(str::is_empty) {
                    return Err(err(path, "expected a dotted field path"));
                }
                clauses.push(Clause::Field {
                    path: path.to_owned(),
                    conditions: parse_ops(val, path)?,
                });
            }
        }
    }
    Ok(Filter { clauses })
}

fn parse_scalar(v: &Value, path: &str, op: &str) -> Result<Scalar, FilterError> {
    match v {
        Value::String(s) => Ok(Scalar::Str(s.clone())),
        Value::Number(n) => Ok(Scalar::Num(n.as_f64().unwrap_or(f64::NAN))),
        Value::Bool(b) => Ok(Scalar::Bool(*b)),
        _ => Err(err(
            path,
            format!("{op} expects a string, number or boolean"),
        )),
    }
}

fn parse_ops(value: &Value, path: &str) -> Result<Vec<Condition>, FilterError> {
    let Value::Object(ops) = value else {
        return Err(err(path, "expected an object of comparison operators"));
    };
    if ops.is_empty() {
        return Err(err(path, "expected at least one comparison operator"));
    }
    ops.iter()
        .map(|(op, v)| {
            let number = || match v {
                Value::Number(n) => Ok(n.as_f64().unwrap_or(f64::NAN)),
                _ => Err(err(path, format!("{op} expects a number"))),
            };
            let list = || match v {
                Value::Array(items) => items
                    .iter()
                    .map(|i| match i {
                        Value::String(_) | Value::Number(_) => parse_scalar(i, path, op),
                        _ => Err(err(
                            path,
                            format!("{op} expects an array of strings and numbers"),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>(),
                _ => Err(err(
                    path,
                    format!("{op} expects an array of strings and numbers"),
                )),
            };
            Ok(match op.as_str() {
                "$eq" => Condition::Eq(parse_scalar(v, path, op)?),
                "$ne" => Condition::Ne(parse_scalar(v, path, op)?),
                "$gt" => Condition::Gt(number()?),
                "$gte" => Condition::Gte(number()?),
                "$lt" => Condition::Lt(number()?),
                "$lte" => Condition::Lte(number()?),
                "$in" => Condition::In(list()?),
                "$nin" => Condition::Nin(list()?),
                other => {
                    return Err(err(
                        path,
                        format!(
                            "unknown operator {other} (expected $eq $ne $gt $gte $lt $lte $in $nin)"
                        ),
                    ));
                }
            })
        })
        .collect()
}

impl Serialize for Filter {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Filter {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Filter::from_json(&value).map_err(serde::de::Error::custom)
    }
}

/// `query`: text matched against field paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextQuery {
    /// The text to match (required).
    pub text: String,
    /// Field paths to match against: `token_address`, `metadata.name`, `metadata.symbol`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<String>>,
    /// Edit distance ≤ 1 per 4 characters of `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuzzy: Option<bool>,
    /// Case-insensitive prefix match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autocomplete: Option<bool>,
}

/// `options`: which sections each returned profile carries (an omitted option: absent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchOptions {
    /// Carry `metadata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_metadata: Option<bool>,
    /// Carry `market`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_market: Option<bool>,
    /// Carry `labels` and `matched_labels`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_labels: Option<bool>,
    /// Metric windows to carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_metrics: Option<Vec<TimeWindow>>,
}

/// `sort`: a field path and a direction, both required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sort {
    /// Dotted field path.
    pub field: String,
    /// `asc` or `desc`.
    pub direction: SortDirection,
}

/// Body of search-profiles (interface 4.5). Every member is optional; the body is a JSON
/// object (an array, which serde would otherwise read member by member, is refused).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
// The derived code becomes `SearchRequest::serialize` and `SearchRequest::deserialize`, which
// the trait implementations below call: the latter only on an object.
#[serde(remote = "Self", deny_unknown_fields)]
pub struct SearchRequest {
    /// Text query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<TextQuery>,
    /// Conditions a profile must satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Filter>,
    /// Sections of each returned profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<SearchOptions>,
    /// Sort order; ties broken by `token_address` in the same direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<Sort>,
    /// Label name → filter; matching profiles list the name in `dynamic_labels`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_labels: Option<BTreeMap<String, Filter>>,
    /// Page size, 1 to 100 (service default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Opaque cursor from a previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl SearchRequest {
    /// A request from its JSON body, as every door reads one: a body that is not a
    /// search-profiles request is [`crate::Error::InvalidArgument`] naming `request`.
    pub fn from_json(body: &str) -> crate::Result<SearchRequest> {
        serde_json::from_str(body).map_err(|e| crate::Error::InvalidArgument {
            argument: "request".into(),
            reason: format!("not a search-profiles request: {e}"),
        })
    }
}

impl Serialize for SearchRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        SearchRequest::serialize(self, serializer)
    }
}

impl<'de> Deserialize<'de> for SearchRequest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Body;
        impl<'de> serde::de::Visitor<'de> for Body {
            type Value = SearchRequest;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a search-profiles request: a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                SearchRequest::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_map(Body)
    }
}

/// The field paths a text query may name, which are also its default fields (service-facts:
/// `query.fields` targets).
pub const TEXT_FIELDS: [&str; 3] = ["token_address", "metadata.name", "metadata.symbol"];

// ----- Keyset cursors -----
//
// A cursor is opaque to a client of the real service. The search engines of this crate (the
// simulator's and the local one, in [`crate::search`]) issue keyset cursors: base64url (RFC 4648
// section 5, unpadded) of a compact JSON object whose members `f` and `d` name the sort it was
// issued for. Knowing that envelope lets [`SearchRequest::validate`] reject, before anything is
// sent, a cursor of this crate that is reused with another sort; any other cursor is passed on
// as it is.

/// The sort field and direction a keyset cursor of this crate's search engines was issued for,
/// or `None` when `cursor` is not one (an opaque cursor of another service).
pub(crate) fn cursor_sort(cursor: &str) -> Option<(String, SortDirection)> {
    let bytes = base64url_decode(cursor)?;
    let body: Map<String, Value> = serde_json::from_slice(&bytes).ok()?;
    let field = body.get("f")?.as_str()?.to_owned();
    let direction = match body.get("d")?.as_str()? {
        "asc" => SortDirection::Asc,
        "desc" => SortDirection::Desc,
        _ => return None,
    };
    Some((field, direction))
}

const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64url without padding (RFC 4648 section 5).
pub(crate) fn base64url_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let group = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        // A chunk of n bytes carries n * 8 bits, which n + 1 characters of 6 bits hold.
        for k in 0..=chunk.len() {
            let index = (group >> (18 - 6 * k)) & 0x3f;
            out.push(char::from(BASE64URL[index as usize]));
        }
    }
    out
}

/// Decodes unpadded base64url; `None` for any other character, an impossible length, or
/// non-zero bits after the last byte (so every byte string has exactly one encoding).
pub(crate) fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let sextet = |c: u8| -> Option<u32> {
        BASE64URL
            .iter()
            .position(|&a| a == c)
            .map(|p| u32::try_from(p).expect("the alphabet has 64 entries"))
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 2);
    for chunk in text.as_bytes().chunks(4) {
        if chunk.len() == 1 {
            return None;
        }
        let mut group = 0u32;
        for (k, &c) in chunk.iter().enumerate() {
            group |= sextet(c)? << (18 - 6 * k);
        }
        let bytes = group.to_be_bytes();
        let kept = chunk.len() - 1;
        if bytes[1 + kept..].iter().any(|&b| b != 0) {
            return None;
        }
        out.extend_from_slice(&bytes[1..=kept]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_and_round_trips_every_operator() {
        let v = json!({
            "market.liquidity": {"$gt": 1000, "$lte": 5000000.5},
            "metadata.symbol": {"$in": ["ABC", 3], "$ne": "X"},
            "$or": [{"metrics.5m.volume": {"$gte": 1.5}}, {"metadata.verified": {"$eq": true}}],
            "labels": {"$nin": ["hot"]},
            "market.holders": {"$lt": 10}
        });
        let f = Filter::from_json(&v).unwrap();
        assert_eq!(f.to_json(), v);
        assert_eq!(f.paths().len(), 6);
    }

    #[test]
    fn rejects_bad_operands_naming_the_path() {
        for bad in [
            json!({"market.liquidity": {"$gt": null}}),
            json!({"market.liquidity": {"$gt": "0"}}),
            json!({"market.liquidity": {"$in": 5}}),
            json!({"market.liquidity": {}}),
            json!({"market.liquidity": {"$regex": "a"}}),
            json!({"market.liquidity": {"$eq": null}}),
        ] {
            let e = Filter::from_json(&bad).unwrap_err();
            assert_eq!(e.path, "market.liquidity", "{bad}");
        }
        assert_eq!(
            Filter::from_json(&json!({"$and": []})).unwrap_err().path,
            "$and"
        );
        assert_eq!(
            Filter::from_json(&json!({"$not": {}})).unwrap_err().path,
            "$not"
        );
        assert!(Filter::from_json(&json!({"a..b": {"$eq": 1}})).is_err());
    }

    #[test]
    fn request_is_an_object_only() {
        for body in [
            json!([]),
            json!([null, null, null, null, null, 5]),
            json!(5),
        ] {
            let err = serde_json::from_value::<SearchRequest>(body.clone()).unwrap_err();
            assert!(err.to_string().contains("a JSON object"), "{body}: {err}");
        }
        let r: SearchRequest = serde_json::from_value(json!({"limit": 5})).unwrap();
        assert_eq!(r.limit, Some(5));
        assert_eq!(serde_json::to_value(&r).unwrap(), json!({"limit": 5}));
    }

    #[test]
    fn request_rejects_unknown_members() {
        let r: Result<SearchRequest, _> = serde_json::from_value(json!({"limit": 5, "bogus": 1}));
        assert!(r.is_err());
        let r: SearchRequest =
            serde_json::from_value(json!({"sort": {"field": "market.fdv", "direction": "desc"}}))
                .unwrap();
        assert_eq!(r.sort.unwrap().direction, SortDirection::Desc);
    }
}
