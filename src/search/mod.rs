//! The search engine: the service's search-profiles semantics, evaluated row by row over JSON
//! profile documents.
//!
//! One engine serves both sides: the simulator's search-profiles route and the local search of
//! the analytics layer, so their answers cannot drift apart. It needs no cargo feature and
//! depends only on the request language ([`crate::api::profile_query`]) and serde. The code is plain
//! on purpose: each rule below is written once, directly, in the shape in which
//! `shared/design/semantics.md` section 4 states it, and a columnar evaluation of the same
//! filters is tested against [`matches()`].
//!
//! A request is checked by [`SearchRequest::validate`] (the same check the client runs before
//! sending), so the engine and the client reject the same requests, naming the same member.
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
//!   A request's filters are prepared once ([`FilterMatcher`]), each `$in` and `$nin` list as a
//!   hash set, so a document is tested in time linear in the filter's clauses, whatever the
//!   lists' lengths.
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
//!
//! Code map: [`eval`](self) (filters), `order.rs` (sort values and order keys), `cursor.rs` (keyset
//! cursors), `text.rs` (text queries); this file runs a whole request.

use std::cmp::Ordering;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::api::profile_query::{SearchOptions, SearchRequest};
use crate::api::requests::{DEFAULT_LIMIT, Operation};
use crate::{Error, Result};

mod cursor;
mod eval;
mod order;
mod text;

#[doc(hidden)]
pub use crate::api::profile_query::TEXT_FIELDS;
#[doc(hidden)]
pub use cursor::Cursor;
#[doc(hidden)]
pub use eval::{FilterMatcher, lookup, matches};
#[doc(hidden)]
pub use order::{OrderKey, SortKey, SortSpec, compare_values};
#[doc(hidden)]
pub use text::{TextMatcher, text_matches};

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

/// A search-profiles request the engine refuses, naming the member.
fn invalid(member: &str, reason: impl Into<String>) -> Error {
    Error::InvalidRequest {
        operation: Operation::AltSearchProfiles.name(),
        member: member.to_owned(),
        reason: reason.into(),
    }
}

/// One matching document with its key in the order.
struct Row<'a> {
    key: OrderKey<'a>,
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
/// * Errors ([`Error::InvalidRequest`] naming the member): whatever
///   [`SearchRequest::validate`] refuses (a limit outside 1–100, a text query field outside
///   [`TEXT_FIELDS`], a sort direction other than `asc`/`desc`, a sort field with an empty
///   segment, a cursor issued for another sort), and a cursor this engine did not issue.
pub fn search(req: &SearchRequest, docs: &[Value]) -> Result<SearchPage> {
    req.validate()?;
    let limit = usize::try_from(req.limit.unwrap_or(DEFAULT_LIMIT))
        .expect("a validated limit of at most 100 fits in usize");
    let sort = SortSpec::of(req);
    let text = req.query.as_ref().map(TextMatcher::new);
    let after = req
        .cursor
        .as_deref()
        .map(|c| Cursor::decode(c, &sort))
        .transpose()?;
    let filter = req.filter.as_ref().map(FilterMatcher::new);

    let mut rows: Vec<Row<'_>> = docs
        .iter()
        .zip(0u64..)
        .filter(|(doc, _)| filter.as_ref().is_none_or(|f| f.matches(doc)))
        .filter(|(doc, _)| text.as_ref().is_none_or(|t| t.matches(doc)))
        .map(|(doc, ordinal)| Row {
            key: OrderKey {
                value: SortKey::of(lookup(doc, &sort.field)),
                token_address: SortKey::of(lookup(doc, "token_address")),
                ordinal,
            },
            doc,
        })
        .collect();
    rows.sort_by(|a, b| a.key.cmp_in(&b.key, sort.descending));

    let start = after.map_or(0, |last| {
        rows.partition_point(|r| r.key.cmp_in(&last, sort.descending) != Ordering::Greater)
    });
    let end = rows.len().min(start + limit);
    let page = &rows[start..end];
    let next = if end < rows.len() {
        page.last().map(|r| Cursor::encode(&sort, &r.key))
    } else {
        None
    };
    let projection = Projection::new(req);
    let data = page.iter().map(|r| projection.apply(r.doc)).collect();
    Ok(SearchPage {
        count: u64::try_from(rows.len()).expect("a slice length fits in u64"),
        cursor: next,
        data,
    })
}

/// The returned form of a document: the always-present members, the requested sections and the
/// request's dynamic labels it satisfies, in the interface's member order (see [`search()`]).
/// For many documents, [`Projection`] prepares the dynamic labels' filters once.
pub fn project(doc: &Value, options: &SearchOptions, req: &SearchRequest) -> Value {
    Projection::with_options(options.clone(), req).apply(doc)
}

/// [`project`] prepared for the documents of one request: its options, and its dynamic
/// labels' filters as [`FilterMatcher`]s.
pub struct Projection<'a> {
    options: SearchOptions,
    labels: Vec<(&'a str, FilterMatcher<'a>)>,
}

impl<'a> Projection<'a> {
    /// The projection of the request's options and dynamic labels.
    pub fn new(req: &'a SearchRequest) -> Self {
        Self::with_options(req.options.clone().unwrap_or_default(), req)
    }

    fn with_options(options: SearchOptions, req: &'a SearchRequest) -> Self {
        let labels = req
            .dynamic_labels
            .iter()
            .flatten()
            .map(|(name, filter)| (name.as_str(), FilterMatcher::new(filter)))
            .collect();
        Projection { options, labels }
    }

    /// The returned form of one document (see [`project`]).
    pub fn apply(&self, doc: &Value) -> Value {
        project_with(doc, &self.options, &self.labels)
    }
}

fn project_with(
    doc: &Value,
    options: &SearchOptions,
    labels: &[(&str, FilterMatcher<'_>)],
) -> Value {
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
    let dynamic: Vec<Value> = labels
        .iter()
        .filter(|(_, filter)| filter.matches(doc))
        .map(|(name, _)| Value::String((*name).to_owned()))
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
mod tests;
