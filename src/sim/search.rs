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
//! * **Filters** ([`matches()`]). `$eq v` holds when the value has the type of `v` and equals it
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
//!   sort value (type and null-ness included; numbers as their exact bit pattern), its
//!   `token_address` and its input position (the last tie-breaker), as base64url of compact
//!   JSON. It is not an offset: the next page starts after that position, so a page boundary
//!   inside a run of nulls or ties resumes exactly where it stopped.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::models::TimeWindow;
    use crate::api::search::Sort;
    use proptest::prelude::*;

    /// A full profile as the simulator stores it, with every section and two windows.
    fn profile(address: &str, name: &str, symbol: &str) -> Value {
        json!({
            "updated_at": "2026-01-02T03:04:05Z",
            "synced_at": "2026-01-02T03:05:00Z",
            "token_address": address,
            "labels": ["hot"],
            "matched_labels": {"hot": ["volume_5m > 1000"]},
            "metadata": {"name": name, "symbol": symbol, "verified": true},
            "market": {"liquidity": 10, "fdv": 1000},
            "metrics": {
                "7d": {"volume": 700.5, "trade_count": 70},
                "5m": {"volume": 5.25, "trade_count": 5},
            },
        })
    }

    /// The six documents of semantics.md section 4, as `t1`..`t6`.
    fn six() -> Vec<Value> {
        let markets = [
            Some(json!({"liquidity": 100})),
            Some(json!({"liquidity": null})),
            Some(json!({})),
            None,
            Some(json!({"liquidity": "100"})),
            Some(json!({"liquidity": 50})),
        ];
        markets
            .into_iter()
            .enumerate()
            .map(|(i, market)| {
                let mut doc = profile(&format!("t{}", i + 1), "Token", "TOK");
                let map = doc.as_object_mut().expect("profile() builds an object");
                match market {
                    Some(m) => map.insert("market".into(), m),
                    None => map.remove("market"),
                };
                doc
            })
            .collect()
    }

    fn filter(v: Value) -> Filter {
        Filter::from_json(&v).expect("test filters are valid")
    }

    fn addresses(data: &[Value]) -> Vec<&str> {
        data.iter()
            .map(|d| {
                d["token_address"]
                    .as_str()
                    .expect("projection keeps token_address")
            })
            .collect()
    }

    fn request(v: Value) -> SearchRequest {
        serde_json::from_value(v).expect("test requests are valid")
    }

    fn matching(f: &Filter, docs: &[Value]) -> Vec<usize> {
        docs.iter()
            .enumerate()
            .filter(|(_, d)| matches(f, d))
            .map(|(i, _)| i + 1)
            .collect()
    }

    #[test]
    fn lookup_follows_object_keys_only() {
        let doc = profile("a", "n", "s");
        assert_eq!(lookup(&doc, "metrics.5m.volume"), Some(&json!(5.25)));
        assert_eq!(lookup(&doc, "metrics.7d"), doc["metrics"].get("7d"));
        assert_eq!(lookup(&doc, "metrics.1h.volume"), None);
        assert_eq!(lookup(&doc, "token_address.length"), None);
        assert_eq!(lookup(&doc, "labels.0"), None);
        let doc = json!({"market": null, "a": {"b": null}});
        assert_eq!(lookup(&doc, "market.liquidity"), None);
        assert_eq!(lookup(&doc, "a.b"), Some(&Value::Null));
    }

    #[test]
    fn semantics_filter_vectors() {
        let docs = six();
        let cases: [(Value, &[usize]); 10] = [
            (json!({"$lt": 200}), &[1, 6]),
            (json!({"$gt": 60}), &[1]),
            (json!({"$gte": 50}), &[1, 6]),
            (json!({"$eq": 100}), &[1]),
            (json!({"$eq": "100"}), &[5]),
            (json!({"$ne": 100}), &[2, 3, 4, 5, 6]),
            (json!({"$in": [100, "100"]}), &[1, 5]),
            (json!({"$nin": [100]}), &[2, 3, 4, 5, 6]),
            (json!({"$gt": 40, "$lt": 60}), &[6]),
            (json!({"$lte": 100.0, "$eq": 100.0}), &[1]),
        ];
        for (ops, expected) in cases {
            let f = filter(json!({ "market.liquidity": ops }));
            assert_eq!(matching(&f, &docs), expected, "filter {ops}");
        }
        // The same vectors through the whole search, which also counts them.
        let page = search(
            &request(json!({"filter": {"market.liquidity": {"$ne": 100}}})),
            &docs,
        )
        .unwrap();
        assert_eq!(page.count, 5);
        assert_eq!(addresses(&page.data), ["t2", "t3", "t4", "t5", "t6"]);
    }

    #[test]
    fn semantics_bad_operands_are_rejected_naming_the_path() {
        for ops in [
            json!({"$gt": null}),
            json!({"$gt": "0"}),
            json!({"$in": 5}),
            json!({}),
        ] {
            let body = json!({"filter": {"market.liquidity": ops}});
            let err = serde_json::from_value::<SearchRequest>(body).unwrap_err();
            assert!(err.to_string().contains("market.liquidity"), "{ops}: {err}");
            let err = SearchError::from(
                Filter::from_json(&json!({"market.liquidity": ops})).unwrap_err(),
            );
            assert_eq!(err.path, "market.liquidity");
        }
    }

    #[test]
    fn semantics_sort_vectors_both_directions() {
        let docs = six();
        let sorted = |direction: &str| {
            let req = request(json!({
                "sort": {"field": "market.liquidity", "direction": direction},
            }));
            addresses(&search(&req, &docs).unwrap().data)
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(sorted("asc"), ["t2", "t3", "t4", "t6", "t1", "t5"]);
        assert_eq!(sorted("desc"), ["t5", "t1", "t6", "t4", "t3", "t2"]);
    }

    #[test]
    fn default_sort_is_token_address_ascending() {
        let docs: Vec<Value> = ["c", "a", "b"]
            .iter()
            .map(|a| profile(a, "n", "s"))
            .collect();
        let page = search(&SearchRequest::default(), &docs).unwrap();
        assert_eq!(addresses(&page.data), ["a", "b", "c"]);
        assert_eq!(page.cursor, None);
    }

    /// Pages through a request with the given limit and returns the addresses in visiting order,
    /// checking `count` on every page.
    fn page_through(base: &SearchRequest, limit: u32, docs: &[Value]) -> Vec<String> {
        let mut req = base.clone();
        req.limit = Some(limit);
        let total = search(
            &SearchRequest {
                limit: Some(100),
                ..base.clone()
            },
            docs,
        )
        .unwrap()
        .count;
        let mut seen = Vec::new();
        let mut cursors = Vec::new();
        loop {
            let page = search(&req, docs).unwrap();
            assert_eq!(page.count, total);
            assert!(page.data.len() <= limit as usize);
            seen.extend(
                page.data
                    .iter()
                    .map(|d| d["metadata"]["name"].as_str().unwrap().to_owned()),
            );
            match page.cursor {
                Some(c) => {
                    assert!(!page.data.is_empty(), "a page with a cursor has data");
                    assert!(!cursors.contains(&c), "cursor {c} repeats");
                    cursors.push(c.clone());
                    req.cursor = Some(c);
                }
                None => break,
            }
            assert!(seen.len() <= docs.len(), "paging does not end");
        }
        seen
    }

    /// The six documents plus ties in value and nulls, named by their `metadata.name`.
    fn six_with_ties() -> Vec<Value> {
        let mut docs = six();
        for (address, liquidity) in [("t0", json!(50)), ("t9", json!(null)), ("t7", json!(100.0))] {
            let mut d = profile(address, "", "s");
            d["market"]["liquidity"] = liquidity;
            docs.push(d);
        }
        for d in &mut docs {
            d["metadata"]["name"] = d["token_address"].clone();
        }
        docs
    }

    #[test]
    fn paging_visits_every_document_once_in_unpaged_order() {
        let docs = six_with_ties();
        for direction in ["asc", "desc"] {
            let base = request(json!({
                "sort": {"field": "market.liquidity", "direction": direction},
                "options": {"include_metadata": true},
            }));
            let unpaged = page_through(&base, 100, &docs);
            let expected_asc = ["t2", "t3", "t4", "t9", "t0", "t6", "t1", "t7", "t5"];
            let mut expected: Vec<&str> = expected_asc.to_vec();
            if direction == "desc" {
                expected.reverse();
            }
            assert_eq!(unpaged, expected);
            for limit in [1, 2, 3] {
                assert_eq!(
                    page_through(&base, limit, &docs),
                    unpaged,
                    "{direction} {limit}"
                );
            }
        }
    }

    #[test]
    fn last_page_has_no_cursor_even_when_it_is_full() {
        let docs = six();
        let first = search(&request(json!({"limit": 3})), &docs).unwrap();
        assert_eq!((first.count, first.data.len()), (6, 3));
        let second = search(
            &request(json!({"limit": 3, "cursor": first.cursor.unwrap()})),
            &docs,
        )
        .unwrap();
        assert_eq!(addresses(&second.data), ["t4", "t5", "t6"]);
        assert_eq!((second.count, second.cursor), (6, None));
        let page = search(&request(json!({"limit": 100})), &docs).unwrap();
        assert_eq!((page.count, page.data.len(), page.cursor), (6, 6, None));
    }

    #[test]
    fn count_is_the_number_of_matches_not_the_page_size() {
        let docs = six();
        let page = search(
            &request(json!({"limit": 1, "filter": {"market.liquidity": {"$nin": [100]}}})),
            &docs,
        )
        .unwrap();
        assert_eq!(page.count, 5);
        assert_eq!(page.data.len(), 1);
        assert!(page.cursor.is_some());
        let none = search(
            &request(json!({"filter": {"market.liquidity": {"$gt": 1000}}})),
            &docs,
        )
        .unwrap();
        assert_eq!((none.count, none.data.len(), none.cursor), (0, 0, None));
        let twenty_five: Vec<Value> = (0..25)
            .map(|i| profile(&format!("a{i:02}"), "n", "s"))
            .collect();
        let default = search(&SearchRequest::default(), &twenty_five).unwrap();
        assert_eq!((default.count, default.data.len()), (25, 20));
    }

    #[test]
    fn duplicate_token_addresses_still_page_completely() {
        let docs: Vec<Value> = (0..5)
            .map(|i| profile("same", &format!("d{i}"), "s"))
            .collect();
        let base = request(json!({"options": {"include_metadata": true}}));
        for limit in [1, 2] {
            assert_eq!(
                page_through(&base, limit, &docs),
                ["d0", "d1", "d2", "d3", "d4"]
            );
        }
    }

    #[test]
    fn cursor_keeps_float_values_exactly() {
        // Neighbouring floats differ only in the last bit; a cursor that rounded its value
        // would skip or repeat one of them.
        let x = 0.1f64 + 0.2;
        let values = [
            x,
            f64::from_bits(x.to_bits() + 1),
            f64::from_bits(x.to_bits() - 1),
            1e-300,
        ];
        let docs: Vec<Value> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut d = profile(&format!("t{i}"), &format!("t{i}"), "s");
                d["market"]["liquidity"] = json!(v);
                d
            })
            .collect();
        let base = request(json!({
            "sort": {"field": "market.liquidity", "direction": "asc"},
            "options": {"include_metadata": true},
        }));
        assert_eq!(page_through(&base, 1, &docs), ["t3", "t2", "t0", "t1"]);
    }

    #[test]
    fn bad_requests_are_errors_naming_the_member() {
        let docs = six();
        let first = search(&request(json!({"limit": 2})), &docs).unwrap();
        let cursor = first.cursor.unwrap();
        let cases = [
            (json!({"limit": 0}), "limit"),
            (json!({"limit": 101}), "limit"),
            (json!({"cursor": "not a cursor!"}), "cursor"),
            (json!({"cursor": ""}), "cursor"),
            (json!({"cursor": base64url_encode(b"[1,2]")}), "cursor"),
            (
                json!({"cursor": base64url_encode(b"{\"f\":\"token_address\"}")}),
                "cursor",
            ),
            (
                json!({"cursor": cursor, "sort": {"field": "market.fdv", "direction": "asc"}}),
                "cursor",
            ),
            (
                json!({"cursor": cursor, "sort": {"field": "token_address", "direction": "desc"}}),
                "cursor",
            ),
            (
                json!({"sort": {"field": "market.fdv", "direction": "up"}}),
                "sort.direction",
            ),
            (
                json!({"sort": {"field": "market..fdv", "direction": "asc"}}),
                "sort.field",
            ),
            (
                json!({"query": {"text": "x", "fields": ["metadata.name", "market"]}}),
                "query.fields[1]",
            ),
            (
                json!({"query": {"text": "x", "fields": []}}),
                "query.fields",
            ),
        ];
        for (body, path) in cases {
            let err = search(&request(body.clone()), &docs).unwrap_err();
            assert_eq!(err.path, path, "{body}: {err}");
            assert!(err.to_string().starts_with(&format!("{path}: ")));
        }
        // The same cursor with the sort spelled out is the same sort.
        let explicit = request(json!({
            "cursor": cursor, "sort": {"field": "token_address", "direction": "asc"}
        }));
        assert_eq!(
            addresses(&search(&explicit, &docs).unwrap().data),
            ["t3", "t4", "t5", "t6"]
        );
    }

    #[test]
    fn and_or_nest() {
        let docs = six();
        let f = filter(json!({
            "$or": [
                {"market.liquidity": {"$lt": 60}},
                {"$and": [
                    {"market.liquidity": {"$eq": "100"}},
                    {"metadata.verified": {"$eq": true}},
                ]},
                {"market": {"$eq": "never"}, "token_address": {"$eq": "t1"}},
            ],
            "token_address": {"$ne": "t6"},
        }));
        assert_eq!(matching(&f, &docs), [5]);
        let f = filter(json!({
            "$and": [
                {"$or": [{"token_address": {"$eq": "t1"}}, {"token_address": {"$eq": "t4"}}]},
                {"$or": [{"market.liquidity": {"$gte": 0}}, {"market": {"$nin": ["x"]}}]},
            ],
        }));
        assert_eq!(matching(&f, &docs), [1, 4]);
        assert!(matches(&Filter::default(), &docs[3]));
    }

    #[test]
    fn window_paths_filter_and_sort() {
        let docs: Vec<Value> = [("a", 3.0), ("b", 1.0), ("c", 2.0)]
            .into_iter()
            .map(|(address, volume)| {
                let mut d = profile(address, address, "s");
                d["metrics"]["5m"]["volume"] = json!(volume);
                d
            })
            .collect();
        let req = request(json!({
            "filter": {"metrics.5m.volume": {"$gte": 1.5}, "metrics.7d.trade_count": {"$eq": 70}},
            "sort": {"field": "metrics.5m.volume", "direction": "desc"},
        }));
        assert_eq!(addresses(&search(&req, &docs).unwrap().data), ["a", "c"]);
        let missing = filter(json!({"metrics.30d.winrate": {"$ne": 1}}));
        assert_eq!(matching(&missing, &docs), [1, 2, 3]);
    }

    #[test]
    fn arrays_match_by_element() {
        let mut docs = vec![
            profile("a", "n", "s"),
            profile("b", "n", "s"),
            profile("c", "n", "s"),
        ];
        docs[1]["labels"] = json!(["cold", "new"]);
        docs[2]["labels"] = json!([1, 5]);
        let cases: [(Value, &[usize]); 6] = [
            (json!({"labels": {"$eq": "hot"}}), &[1]),
            (json!({"labels": {"$ne": "hot"}}), &[2, 3]),
            (json!({"labels": {"$in": ["new", "hot"]}}), &[1, 2]),
            (json!({"labels": {"$nin": ["new", 5]}}), &[1]),
            (json!({"labels": {"$gt": 4}}), &[3]),
            (json!({"labels": {"$gt": 2, "$lt": 2}}), &[3]),
        ];
        for (f, expected) in cases {
            assert_eq!(matching(&filter(f.clone()), &docs), expected, "{f}");
        }
    }

    #[test]
    fn compare_values_orders_types_then_values() {
        let ascending = [
            None,
            Some(json!(-1e300)),
            Some(json!(-1)),
            Some(json!(2)),
            Some(json!(2.5)),
            Some(json!("")),
            Some(json!("B")),
            Some(json!("a")),
            Some(json!("é")),
            Some(json!({})),
            Some(json!({"a": 1})),
            Some(json!({"a": 1, "b": 0})),
            Some(json!({"a": "x"})),
            Some(json!({"b": 0})),
            Some(json!([])),
            Some(json!([1, 2])),
            Some(json!([1, "a"])),
            Some(json!([2])),
            Some(json!(false)),
            Some(json!(true)),
        ];
        for (i, a) in ascending.iter().enumerate() {
            for (j, b) in ascending.iter().enumerate() {
                assert_eq!(
                    compare_values(a.as_ref(), b.as_ref()),
                    i.cmp(&j),
                    "{a:?} {b:?}"
                );
            }
        }
        assert_eq!(compare_values(None, Some(&Value::Null)), Ordering::Equal);
        assert_eq!(
            compare_values(Some(&json!(3)), Some(&json!(3.0))),
            Ordering::Equal
        );
        assert_eq!(
            compare_values(Some(&json!(0.0)), Some(&json!(-0.0))),
            Ordering::Equal
        );
    }

    #[test]
    fn text_query_modes() {
        let doc = profile(
            "So11111111111111111111111111111111111111112",
            "Wrapped Solana",
            "wSOL",
        );
        let q =
            |v: Value| -> TextQuery { serde_json::from_value(v).expect("test queries are valid") };
        let yes = |v: Value| assert!(text_matches(&q(v.clone()), &doc).unwrap(), "{v}");
        let no = |v: Value| assert!(!text_matches(&q(v.clone()), &doc).unwrap(), "{v}");
        // Default: case-insensitive substring of any default field.
        yes(json!({"text": "SOLANA"}));
        yes(json!({"text": "ped sol"}));
        yes(json!({"text": "wsol"}));
        yes(json!({"text": "1111112"}));
        yes(json!({"text": ""}));
        no(json!({"text": "solana wrapped"}));
        // Fields restrict where the text is looked for.
        no(json!({"text": "solana", "fields": ["metadata.symbol"]}));
        yes(json!({"text": "so", "fields": ["metadata.symbol"]}));
        // Autocomplete: prefix of a field.
        yes(json!({"text": "wrap", "autocomplete": true}));
        yes(json!({"text": "WS", "autocomplete": true}));
        no(json!({"text": "solana", "autocomplete": true}));
        // Fuzzy: floor(len / 4) edits against any substring.
        yes(json!({"text": "solama", "fuzzy": true}));
        no(json!({"text": "solama"}));
        yes(json!({"text": "wraped", "fuzzy": true}));
        yes(json!({"text": "wrapXXd sol", "fuzzy": true}));
        no(json!({"text": "wrapXXd", "fuzzy": true}));
        no(json!({"text": "sxl", "fuzzy": true}));
        yes(json!({"text": "sol", "fuzzy": true}));
        // Fuzzy autocomplete: the edits are counted against a prefix.
        yes(json!({"text": "wrapper", "fuzzy": true, "autocomplete": true}));
        no(json!({"text": "solama", "fuzzy": true, "autocomplete": true}));
        // Missing and non-string fields never match.
        let bare = json!({"token_address": 5, "metadata": {"name": null}});
        assert!(!text_matches(&q(json!({"text": ""})), &bare).unwrap());
        // A text query narrows the search and still counts all its matches.
        let docs = vec![
            profile("a", "Alpha", "ALP"),
            profile("b", "Beta", "BET"),
            profile("c", "Alphabet", "ABC"),
        ];
        let page = search(
            &request(json!({"query": {"text": "alpha"}, "limit": 1})),
            &docs,
        )
        .unwrap();
        assert_eq!((page.count, addresses(&page.data)), (2, vec!["a"]));
    }

    #[test]
    fn fewest_edits_counts_insertions_deletions_and_substitutions() {
        let chars = |s: &str| s.chars().collect::<Vec<_>>();
        let d = |n: &str, h: &str, prefix| fewest_edits(&chars(n), &chars(h), prefix);
        assert_eq!(d("abc", "xxabcxx", false), 0);
        assert_eq!(d("abc", "xxabcxx", true), 2);
        assert_eq!(d("abxc", "abc", false), 1);
        assert_eq!(d("ac", "abc", true), 1);
        // The end is free: "sittin" is the nearest prefix, two substitutions away.
        assert_eq!(d("kitten", "sitting", true), 2);
        assert_eq!(d("kitten", "sitting", false), 2);
        assert_eq!(d("abc", "", false), 3);
        assert_eq!(d("", "abc", true), 0);
        assert_eq!(d("ßx", "sßx", true), 1);
    }

    #[test]
    fn dynamic_labels_in_name_order_on_the_full_document() {
        let docs = six();
        let req = request(json!({
            "dynamic_labels": {
                "zeta_liquid": {"market.liquidity": {"$gte": 50}},
                "alpha_any": {"token_address": {"$ne": ""}},
                "mid_hot": {"labels": {"$eq": "hot"}, "metrics.5m.volume": {"$gt": 5}},
                "none": {"market.liquidity": {"$lt": 0}},
            },
            "sort": {"field": "market.liquidity", "direction": "desc"},
            "limit": 3,
        }));
        let page = search(&req, &docs).unwrap();
        let labels: Vec<&Value> = page.data.iter().map(|d| &d["dynamic_labels"]).collect();
        assert_eq!(addresses(&page.data), ["t5", "t1", "t6"]);
        assert_eq!(labels[0], &json!(["alpha_any", "mid_hot"]));
        assert_eq!(labels[1], &json!(["alpha_any", "mid_hot", "zeta_liquid"]));
        assert_eq!(labels[2], &json!(["alpha_any", "mid_hot", "zeta_liquid"]));
        // Without dynamic labels the member is present and empty.
        let plain = search(&request(json!({"limit": 1})), &docs).unwrap();
        assert_eq!(plain.data[0]["dynamic_labels"], json!([]));
    }

    #[test]
    fn options_project_sections() {
        let docs = six();
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        let page = search(&request(json!({"limit": 1})), &docs).unwrap();
        let d = &page.data[0];
        assert_eq!(
            keys(d),
            [
                "updated_at",
                "synced_at",
                "token_address",
                "dynamic_labels",
                "metrics"
            ]
        );
        assert_eq!(d["metrics"], json!({}));

        let req = SearchRequest {
            options: Some(SearchOptions {
                include_metadata: Some(true),
                include_market: Some(true),
                include_labels: Some(true),
                include_metrics: Some(vec![TimeWindow::M5, TimeWindow::Other("30d".into())]),
            }),
            sort: Some(Sort {
                field: "token_address".into(),
                direction: SortDirection::Asc,
            }),
            ..SearchRequest::default()
        };
        let page = search(&req, &docs).unwrap();
        let full = &page.data[0];
        assert_eq!(
            keys(full),
            [
                "updated_at",
                "synced_at",
                "token_address",
                "labels",
                "matched_labels",
                "dynamic_labels",
                "metadata",
                "market",
                "metrics"
            ]
        );
        assert_eq!(full["metrics"], json!({"5m": docs[0]["metrics"]["5m"]}));
        assert_eq!(full["market"], docs[0]["market"]);
        assert_eq!(full["matched_labels"], docs[0]["matched_labels"]);
        // A section the document lacks stays absent; an empty one stays empty.
        assert_eq!(page.data[2]["market"], json!({}));
        assert!(page.data[3].get("market").is_none());

        // False options are the same as omitted ones, and filters still see every section.
        let req = request(json!({
            "options": {"include_market": false, "include_metrics": []},
            "filter": {"market.liquidity": {"$eq": 50}, "metrics.7d.volume": {"$gt": 0}},
        }));
        let page = search(&req, &docs).unwrap();
        assert_eq!(addresses(&page.data), ["t6"]);
        assert!(page.data[0].get("market").is_none());
        assert_eq!(page.data[0]["metrics"], json!({}));
    }

    #[test]
    fn base64url_round_trips_and_rejects_foreign_text() {
        for len in 0..12u8 {
            let bytes: Vec<u8> = (0..len)
                .map(|i| i.wrapping_mul(97).wrapping_add(200))
                .collect();
            let text = base64url_encode(&bytes);
            assert!(!text.contains(['+', '/', '=']));
            assert_eq!(base64url_decode(&text), Some(bytes));
        }
        assert_eq!(base64url_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64url_encode(b"\xfb\xff"), "-_8");
        for bad in ["A", "Zm9vY", "Zm9=", "Zm9v YmFy", "Zh"] {
            assert_eq!(base64url_decode(bad), None, "{bad}");
        }
    }

    /// A liquidity value for the property test: every type, ties, nulls, missing sections and
    /// floats one bit apart.
    fn liquidity() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            (-3i64..3).prop_map(|n| Some(json!(n))),
            prop::sample::select(vec![0.1, 0.30000000000000004, 0.3, -0.0, 1e-300, 2.5])
                .prop_map(|x| Some(json!(x))),
            any::<f64>()
                .prop_filter("JSON numbers are finite", |x| x.is_finite())
                .prop_map(|x| Some(json!(x))),
            prop::sample::select(vec!["", "a", "b", "100"]).prop_map(|s| Some(json!(s))),
            any::<bool>().prop_map(|b| Some(json!(b))),
            prop::collection::vec(0i64..2, 0..3).prop_map(|v| Some(json!(v))),
            (0i64..2).prop_map(|n| Some(json!({"k": n}))),
        ]
    }

    /// Textbook Levenshtein distance between whole strings.
    fn levenshtein(a: &[char], b: &[char]) -> usize {
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, x) in a.iter().enumerate() {
            let mut diagonal = row[0];
            row[0] = i + 1;
            for (j, y) in b.iter().enumerate() {
                let above = row[j + 1];
                row[j + 1] = (diagonal + usize::from(x != y))
                    .min(above + 1)
                    .min(row[j] + 1);
                diagonal = above;
            }
        }
        row[b.len()]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn fewest_edits_is_the_nearest_substring_or_prefix(
            needle in "[abc]{0,6}",
            haystack in "[abc]{0,8}",
        ) {
            let n: Vec<char> = needle.chars().collect();
            let h: Vec<char> = haystack.chars().collect();
            let nearest_prefix = (0..=h.len()).map(|end| levenshtein(&n, &h[..end])).min().unwrap();
            let nearest_substring = (0..=h.len())
                .flat_map(|start| (start..=h.len()).map(move |end| (start, end)))
                .map(|(start, end)| levenshtein(&n, &h[start..end]))
                .min()
                .unwrap();
            prop_assert_eq!(fewest_edits(&n, &h, true), nearest_prefix);
            prop_assert_eq!(fewest_edits(&n, &h, false), nearest_substring);
        }

        #[test]
        fn paging_matches_the_unpaged_order(
            rows in prop::collection::vec((liquidity(), "[ab]{0,2}", any::<bool>()), 0..40),
            limit in 1u32..6,
            descending in any::<bool>(),
            filtered in any::<bool>(),
        ) {
            let docs: Vec<Value> = rows
                .iter()
                .enumerate()
                .map(|(i, (liq, address, market_present))| {
                    let mut d = profile(address, &format!("d{i}"), "s");
                    match (liq, market_present) {
                        (Some(v), _) => d["market"]["liquidity"] = v.clone(),
                        (None, true) => d["market"] = json!({}),
                        (None, false) => {
                            d.as_object_mut().expect("profile() builds an object").remove("market");
                        }
                    }
                    d
                })
                .collect();
            let direction = if descending { "desc" } else { "asc" };
            let mut body = json!({
                "sort": {"field": "market.liquidity", "direction": direction},
                "options": {"include_metadata": true},
            });
            if filtered {
                body["filter"] = json!({"market.liquidity": {"$nin": [0, "a"]}});
            }
            let base = request(body);
            let unpaged = page_through(&base, 100, &docs);
            prop_assert_eq!(&page_through(&base, limit, &docs), &unpaged);

            // The unpaged order is the filter's matches sorted by value, then address, then
            // input position, all in the sort's direction.
            let f = base.filter.clone().unwrap_or_default();
            let mut expected: Vec<usize> = (0..docs.len()).filter(|&i| matches(&f, &docs[i])).collect();
            expected.sort_by(|&i, &j| {
                let a = &docs[i];
                let b = &docs[j];
                let asc = compare_values(lookup(a, "market.liquidity"), lookup(b, "market.liquidity"))
                    .then(compare_values(a.get("token_address"), b.get("token_address")))
                    .then(i.cmp(&j));
                if descending { asc.reverse() } else { asc }
            });
            let expected: Vec<String> = expected.iter().map(|i| format!("d{i}")).collect();
            prop_assert_eq!(unpaged, expected);
        }
    }
}
