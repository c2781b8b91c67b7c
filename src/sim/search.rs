//! The reference search engine: the service's search-profiles semantics, evaluated row by row
//! over JSON profile documents.
//!
//! The code is plain on purpose. Every other implementation of the search language (the
//! columnar one in the analytics layer) is tested against it, so each rule below is written
//! once, directly, in the shape in which `shared/design/semantics.md` section 4 states it.
//!
//! # Rules
//!
//! * **Paths.** A dotted path (`metrics.5m.volume`) is a chain of object keys; a missing step or
//!   a step through a non-object is *missing* ([`lookup`]).
//! * **Filters** ([`matches`]). `$eq v` holds when the value has the type of `v` and equals it
//!   (integers and floats are one number type); missing and null never equal anything. `$ne` is
//!   the negation of `$eq` and `$nin` of `$in`, so both match missing and null. `$gt`, `$gte`,
//!   `$lt` and `$lte` hold only for numbers. Several clauses, or several operators on one path,
//!   are ANDed. As in MongoDB, when the value at the path is an array (the static `labels`), an
//!   operator holds when it holds for at least one element, each operator on its own:
//!   `{"labels": {"$eq": "hot"}}` selects profiles labelled `hot`, `{"$ne": "hot"}` the others.
//! * **Order** ([`compare_values`]). Missing sorts as null; then numbers, strings (byte order of
//!   UTF-8, which is code point order), objects (entry by entry: key, then value; a prefix sorts
//!   first), arrays (element by element; a prefix sorts first) and booleans (`false` first).
//!   Ascending puts null and missing first, descending last. Ties are broken by `token_address`
//!   in the sort's direction, and, should two documents share a `token_address`, by their
//!   position in the input, so that the order is strict and paging never skips a document.
//! * **Cursor.** A keyset position: the sort field and direction, the last returned document's
//!   sort value (type and null-ness included; numbers as their exact bit pattern) and its
//!   `token_address`, as base64url of compact JSON. The next page starts after that position, so
//!   a page boundary inside a run of nulls or ties resumes exactly where it stopped.
//! * **Text** ([`text_matches`]): see that function for the exact rules of the three modes.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::api::models::SortDirection;
use crate::api::search::{
    Clause, Condition, Filter, FilterError, Scalar, SearchOptions, SearchRequest, TextQuery,
};

/// The field paths a text query may name, which are also its default fields.
pub const TEXT_FIELDS: [&str; 3] = ["token_address", "metadata.name", "metadata.symbol"];

/// Page size when the request names none.
pub const DEFAULT_LIMIT: u32 = 20;

/// Largest page size a request may ask for.
pub const MAX_LIMIT: u32 = 100;

/// One page of search results, shaped like the service's response body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchPage {
    /// Total number of documents matching the filter and the text query (not the page size).
    pub count: u64,
    /// Cursor of the next page; `None` (serialized as null) on the last page.
    pub cursor: Option<String>,
    /// The page's profiles, projected by the request's options.
    pub data: Vec<Value>,
}

/// A request the language does not allow: a bad cursor, an unknown text query field, a limit out
/// of `1..=100`, a sort direction other than `asc`/`desc`. The service answers 400.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchError {
    /// Which member of the request is wrong, such as `limit`, `cursor` or `query.fields[1]`.
    pub path: String,
    /// What was wrong and what was expected.
    pub message: String,
}

impl SearchError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        SearchError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for SearchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for SearchError {}

impl From<FilterError> for SearchError {
    fn from(e: FilterError) -> Self {
        SearchError {
            path: e.path,
            message: e.message,
        }
    }
}

/// Looks a dotted path up in a document (`metrics.5m.volume`: segments are object keys; a missing
/// step or a non-object step is missing).
pub fn lookup<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(doc, |current, segment| current.as_object()?.get(segment))
}

/// MongoDB-semantics filter evaluation (semantics.md §4: missing/null, type rules, `$ne`/`$nin`
/// match missing). An empty filter matches every document; an `$and` of no filters matches and
/// an `$or` of no filters does not (the parser rejects both, but a filter built in code may hold
/// them).
pub fn matches(filter: &Filter, doc: &Value) -> bool {
    filter
        .clauses
        .iter()
        .all(|clause| clause_matches(clause, doc))
}

fn clause_matches(clause: &Clause, doc: &Value) -> bool {
    match clause {
        Clause::And(filters) => filters.iter().all(|f| matches(f, doc)),
        Clause::Or(filters) => filters.iter().any(|f| matches(f, doc)),
        Clause::Field { path, conditions } => {
            let value = lookup(doc, path);
            conditions.iter().all(|c| condition_holds(c, value))
        }
    }
}

fn condition_holds(condition: &Condition, value: Option<&Value>) -> bool {
    match condition {
        Condition::Eq(s) => any_element(value, |v| scalar_equals(s, v)),
        Condition::Ne(s) => !any_element(value, |v| scalar_equals(s, v)),
        Condition::In(list) => any_element(value, |v| list.iter().any(|s| scalar_equals(s, v))),
        Condition::Nin(list) => !any_element(value, |v| list.iter().any(|s| scalar_equals(s, v))),
        Condition::Gt(n) => any_element(value, |v| number_of(v).is_some_and(|x| x > *n)),
        Condition::Gte(n) => any_element(value, |v| number_of(v).is_some_and(|x| x >= *n)),
        Condition::Lt(n) => any_element(value, |v| number_of(v).is_some_and(|x| x < *n)),
        Condition::Lte(n) => any_element(value, |v| number_of(v).is_some_and(|x| x <= *n)),
    }
}

/// Whether `predicate` holds for the value, or for one element when the value is an array.
/// A missing value satisfies nothing; null is passed on and fails every typed predicate.
fn any_element(value: Option<&Value>, predicate: impl Fn(&Value) -> bool) -> bool {
    match value {
        None => false,
        Some(Value::Array(items)) => items.iter().any(predicate),
        Some(v) => predicate(v),
    }
}

fn scalar_equals(scalar: &Scalar, value: &Value) -> bool {
    match (scalar, value) {
        (Scalar::Str(a), Value::String(b)) => a == b,
        (Scalar::Num(a), Value::Number(_)) => number_of(value) == Some(*a),
        (Scalar::Bool(a), Value::Bool(b)) => a == b,
        _ => false,
    }
}

fn number_of(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// A value as it takes part in sorting: the BSON-like type rank and, within a type, the value.
/// Borrowed from a document while sorting, owned when decoded from a cursor.
#[derive(Debug, Clone)]
enum SortKey<'a> {
    Null,
    Num(f64),
    Str(Cow<'a, str>),
    Obj(Vec<(Cow<'a, str>, SortKey<'a>)>),
    Arr(Vec<SortKey<'a>>),
    Bool(bool),
}

impl<'a> SortKey<'a> {
    fn of(value: Option<&'a Value>) -> Self {
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
    fn number(x: f64) -> Self {
        SortKey::Num(if x == 0.0 { 0.0 } else { x })
    }

    fn rank(&self) -> u8 {
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
    fn to_cursor_json(&self) -> Value {
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

    fn from_cursor_json(value: &Value) -> Option<SortKey<'static>> {
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

/// A text query checked once and ready to run against many documents.
struct TextMatcher<'q> {
    /// The query text in lower case, as characters (edit distances count characters).
    needle: Vec<char>,
    needle_str: String,
    fields: Vec<&'q str>,
    prefix: bool,
    max_edits: usize,
}

impl<'q> TextMatcher<'q> {
    fn new(query: &'q TextQuery) -> Result<Self, SearchError> {
        let fields = match &query.fields {
            None => TEXT_FIELDS.to_vec(),
            Some(fields) if fields.is_empty() => {
                return Err(SearchError::new(
                    "query.fields",
                    format!(
                        "expected at least one field path of {}",
                        TEXT_FIELDS.join(", ")
                    ),
                ));
            }
            Some(fields) => fields
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    if TEXT_FIELDS.contains(&f.as_str()) {
                        Ok(f.as_str())
                    } else {
                        Err(SearchError::new(
                            format!("query.fields[{i}]"),
                            format!(
                                "unknown text field `{f}` (expected one of {})",
                                TEXT_FIELDS.join(", ")
                            ),
                        ))
                    }
                })
                .collect::<Result<_, _>>()?,
        };
        let needle_str = query.text.to_lowercase();
        let needle: Vec<char> = needle_str.chars().collect();
        let max_edits = if query.fuzzy == Some(true) {
            needle.len() / 4
        } else {
            0
        };
        Ok(TextMatcher {
            needle,
            needle_str,
            fields,
            prefix: query.autocomplete == Some(true),
            max_edits,
        })
    }

    fn matches(&self, doc: &Value) -> bool {
        self.fields.iter().any(|path| {
            lookup(doc, path)
                .and_then(Value::as_str)
                .is_some_and(|text| self.matches_text(&text.to_lowercase()))
        })
    }

    fn matches_text(&self, haystack: &str) -> bool {
        if self.max_edits == 0 {
            return if self.prefix {
                haystack.starts_with(&self.needle_str)
            } else {
                haystack.contains(&self.needle_str)
            };
        }
        let haystack: Vec<char> = haystack.chars().collect();
        fewest_edits(&self.needle, &haystack, self.prefix) <= self.max_edits
    }
}

/// The fewest single-character insertions, deletions and substitutions that turn `needle` into
/// some substring of `haystack` (or, with `prefix_only`, into some prefix of it).
///
/// This is the Levenshtein table with a free end (Sellers' algorithm): `row[j]` is the best
/// distance from the needle's first `i` characters to a piece of the haystack ending at `j`.
/// A free start (row 0 all zeros) allows any substring; a fixed start (row 0 = `j`) only
/// prefixes.
fn fewest_edits(needle: &[char], haystack: &[char], prefix_only: bool) -> usize {
    let mut previous: Vec<usize> = (0..=haystack.len())
        .map(|j| if prefix_only { j } else { 0 })
        .collect();
    let mut current = vec![0; haystack.len() + 1];
    for (i, &n) in needle.iter().enumerate() {
        current[0] = i + 1;
        for (j, &h) in haystack.iter().enumerate() {
            let substitute = previous[j] + usize::from(n != h);
            let delete = previous[j + 1] + 1;
            let insert = current[j] + 1;
            current[j + 1] = substitute.min(delete).min(insert);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous
        .into_iter()
        .min()
        .expect("the table row has haystack.len() + 1 >= 1 entries")
}

/// The text query: does any of the query's fields of `doc` match `query.text`?
///
/// * Fields: `query.fields`, default `token_address`, `metadata.name`, `metadata.symbol`. A
///   field path outside those three, or an empty list, is an error. A field that is missing or
///   not a string never matches.
/// * Case: both sides are put in Unicode lower case (`str::to_lowercase`) first.
/// * Default: the text is a substring of the field.
/// * `autocomplete: true`: the text is a prefix of the field.
/// * `fuzzy: true`: the text is within `k` edits of some substring of the field (with
///   `autocomplete`, of some prefix), where an edit inserts, deletes or substitutes one
///   character and `k = floor(characters of the lower-cased text / 4)`. A whole word is one of
///   those substrings, so a word match within `k` edits matches too. Texts under four characters
///   get `k = 0`, the exact rule.
/// * An empty text matches every document with a string in one of the fields.
pub fn text_matches(query: &TextQuery, doc: &Value) -> Result<bool, SearchError> {
    Ok(TextMatcher::new(query)?.matches(doc))
}

/// The sort of a request, checked: the field and whether it runs descending.
#[derive(Debug, Clone, PartialEq)]
struct SortSpec {
    field: String,
    descending: bool,
}

impl SortSpec {
    fn of(request: &SearchRequest) -> Result<Self, SearchError> {
        let Some(sort) = &request.sort else {
            return Ok(SortSpec {
                field: "token_address".to_owned(),
                descending: false,
            });
        };
        if sort.field.split('.').any(str::is_empty) {
            return Err(SearchError::new(
                "sort.field",
                format!("expected a dotted field path, got `{}`", sort.field),
            ));
        }
        let descending = match &sort.direction {
            SortDirection::Asc => false,
            SortDirection::Desc => true,
            SortDirection::Other(other) => {
                return Err(SearchError::new(
                    "sort.direction",
                    format!("expected asc or desc, got `{other}`"),
                ));
            }
        };
        Ok(SortSpec {
            field: sort.field.clone(),
            descending,
        })
    }

    fn direction(&self) -> &'static str {
        if self.descending { "desc" } else { "asc" }
    }
}

/// Where a document stands in the ascending order: sort value, then `token_address`, then its
/// position in the input (which matters only when `token_address` repeats).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Position<'a> {
    value: SortKey<'a>,
    token_address: SortKey<'a>,
    ordinal: u64,
}

impl Position<'_> {
    /// The order of the request's direction: descending reverses every component, so ties run
    /// by `token_address` in the sort's direction too.
    fn cmp_in(&self, other: &Self, descending: bool) -> Ordering {
        let ascending = self.cmp(other);
        if descending {
            ascending.reverse()
        } else {
            ascending
        }
    }
}

/// A decoded cursor: the sort it was issued for and the last position returned.
struct Cursor {
    sort: SortSpec,
    last: Position<'static>,
}

impl Cursor {
    fn encode(sort: &SortSpec, last: &Position<'_>) -> String {
        let body = json!({
            "f": sort.field,
            "d": sort.direction(),
            "v": last.value.to_cursor_json(),
            "a": last.token_address.to_cursor_json(),
            "i": last.ordinal,
        });
        base64url_encode(body.to_string().as_bytes())
    }

    fn decode(text: &str) -> Result<Cursor, SearchError> {
        let bad = |why: &str| {
            SearchError::new(
                "cursor",
                format!("not a cursor of this service ({why}); pass the cursor of a previous page"),
            )
        };
        let bytes = base64url_decode(text).ok_or_else(|| bad("not base64url"))?;
        let body: Map<String, Value> =
            serde_json::from_slice(&bytes).map_err(|e| bad(&format!("not a JSON object: {e}")))?;
        let field = body.get("f").and_then(Value::as_str);
        let direction = body.get("d").and_then(Value::as_str);
        let value = body.get("v").and_then(SortKey::from_cursor_json);
        let token_address = body.get("a").and_then(SortKey::from_cursor_json);
        let ordinal = body.get("i").and_then(Value::as_u64);
        match (field, direction, value, token_address, ordinal) {
            (
                Some(field),
                Some(d @ ("asc" | "desc")),
                Some(value),
                Some(token_address),
                Some(i),
            ) if body.len() == 5 => Ok(Cursor {
                sort: SortSpec {
                    field: field.to_owned(),
                    descending: d == "desc",
                },
                last: Position {
                    value,
                    token_address,
                    ordinal: i,
                },
            }),
            _ => Err(bad("missing or malformed members")),
        }
    }
}

const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64url without padding (RFC 4648 section 5).
fn base64url_encode(bytes: &[u8]) -> String {
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
fn base64url_decode(text: &str) -> Option<Vec<u8>> {
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

/// One matching document with its position in the order.
struct Row<'a> {
    position: Position<'a>,
    doc: &'a Value,
}

/// The whole search: filter AND text query, sort (default when no sort: `token_address` asc),
/// ties by `token_address` in the sort's direction, keyset cursor, limit (default 20, 1–100),
/// `dynamic_labels` and the options projection.
///
/// * Filters, the text query, the sort and the dynamic labels see the full document whatever
///   the options say.
/// * `dynamic_labels` of a returned profile: the names of the request's dynamic labels, in the
///   map's order (by name), whose filter the full document satisfies; always present.
/// * Projection: `updated_at`, `synced_at`, `token_address` and `dynamic_labels` are always
///   present; `metadata`, `market` and `labels` + `matched_labels` only when their option is
///   true; `metrics` always, holding only the requested windows (`{}` when none are requested).
///   A section the document lacks stays absent.
/// * `count` is the number of matching documents; `cursor` is `None` on the last page (also when
///   a page ends exactly at the last match).
/// * Errors: a limit outside 1–100, a text query field outside [`TEXT_FIELDS`], a sort
///   direction other than `asc`/`desc`, a sort field with an empty segment, a cursor that does
///   not decode or was issued for another sort field or direction (an empty string included).
pub fn search(req: &SearchRequest, docs: &[Value]) -> Result<SearchPage, SearchError> {
    let limit = match req.limit {
        None => DEFAULT_LIMIT,
        Some(l) if (1..=MAX_LIMIT).contains(&l) => l,
        Some(l) => {
            return Err(SearchError::new(
                "limit",
                format!("expected an integer from 1 to {MAX_LIMIT}, got {l}"),
            ));
        }
    };
    let limit = usize::try_from(limit).expect("a limit of at most 100 fits in usize");
    let sort = SortSpec::of(req)?;
    let text = req.query.as_ref().map(TextMatcher::new).transpose()?;
    let cursor = req.cursor.as_deref().map(Cursor::decode).transpose()?;
    if let Some(cursor) = &cursor
        && cursor.sort != sort
    {
        return Err(SearchError::new(
            "cursor",
            format!(
                "the cursor was issued for sort `{}` {}, this request sorts by `{}` {}",
                cursor.sort.field,
                cursor.sort.direction(),
                sort.field,
                sort.direction()
            ),
        ));
    }

    let mut rows: Vec<Row<'_>> = docs
        .iter()
        .zip(0u64..)
        .filter(|(doc, _)| req.filter.as_ref().is_none_or(|f| matches(f, doc)))
        .filter(|(doc, _)| text.as_ref().is_none_or(|t| t.matches(doc)))
        .map(|(doc, ordinal)| Row {
            position: Position {
                value: SortKey::of(lookup(doc, &sort.field)),
                token_address: SortKey::of(lookup(doc, "token_address")),
                ordinal,
            },
            doc,
        })
        .collect();
    rows.sort_by(|a, b| a.position.cmp_in(&b.position, sort.descending));

    let start = cursor.map_or(0, |c| {
        rows.partition_point(|r| r.position.cmp_in(&c.last, sort.descending) != Ordering::Greater)
    });
    let end = rows.len().min(start + limit);
    let page = &rows[start..end];
    let next = if end < rows.len() {
        page.last().map(|r| Cursor::encode(&sort, &r.position))
    } else {
        None
    };
    let options = req.options.clone().unwrap_or_default();
    let data = page.iter().map(|r| project(r.doc, &options, req)).collect();
    Ok(SearchPage {
        count: u64::try_from(rows.len()).expect("a slice length fits in u64"),
        cursor: next,
        data,
    })
}

/// The returned form of a document: the always-present members, the requested sections and the
/// request's dynamic labels it satisfies, in the interface's member order.
fn project(doc: &Value, options: &SearchOptions, req: &SearchRequest) -> Value {
    let mut out = Map::new();
    let copy = |out: &mut Map<String, Value>, key: &str| {
        if let Some(v) = doc.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    };
    copy(&mut out, "updated_at");
    copy(&mut out, "synced_at");
    copy(&mut out, "token_address");
    if options.include_labels == Some(true) {
        copy(&mut out, "labels");
        copy(&mut out, "matched_labels");
    }
    let dynamic: Vec<Value> = req
        .dynamic_labels
        .iter()
        .flatten()
        .filter(|(_, filter)| matches(filter, doc))
        .map(|(name, _)| Value::String(name.clone()))
        .collect();
    out.insert("dynamic_labels".to_owned(), Value::Array(dynamic));
    if options.include_metadata == Some(true) {
        copy(&mut out, "metadata");
    }
    if options.include_market == Some(true) {
        copy(&mut out, "market");
    }
    let requested = options.include_metrics.as_deref().unwrap_or_default();
    let metrics: Map<String, Value> = doc
        .get("metrics")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(window, _)| requested.iter().any(|w| w.as_str() == window.as_str()))
        .map(|(window, m)| (window.clone(), m.clone()))
        .collect();
    out.insert("metrics".to_owned(), Value::Object(metrics));
    Value::Object(out)
}
